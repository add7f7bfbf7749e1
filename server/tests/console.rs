//! The console and the node's HTTP endpoints, on the real server: `/health`, `/metrics`
//! parsed by Prometheus' own parser (prometheus_client's), counters that move by exactly
//! what was done, `/api/sql` refusing what has no session, and the page itself in a real
//! browser (Debian's Chromium driven by playwright-core, `tests/console/console_test.js`)
//! while a load runs, its screenshots kept.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{free_port, scalar, TestServer, PASSWORD};

/// One HTTP/1.1 request; the status, the headers and the body of its answer.
fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the console");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

const JSON: (&str, &str) = ("Content-Type", "application/json");
const CONSOLE: (&str, &str) = ("X-Hotledger-Console", "1");

fn console_server() -> (TestServer, u16) {
    let http_port = free_port();
    let server = TestServer::start_with(&["--http", &format!("127.0.0.1:{http_port}")]);
    (server, http_port)
}

/// A metric's value in `/metrics` (summed over its labels), parsed by prometheus_client
/// (which refuses a malformed exposition).
fn parsed_metric(http_port: u16, name: &str) -> f64 {
    let (status, _, text) = http(http_port, "GET", "/metrics", &[], "");
    assert_eq!(status, 200);
    let python = format!(
        "{}/.cache/hotledger-venv/bin/python",
        std::env::var("HOME").unwrap()
    );
    let script = format!(
        "import sys\nfrom prometheus_client.parser import text_string_to_metric_families\ntotal = None\nfor f in text_string_to_metric_families(sys.stdin.read()):\n    for s in f.samples:\n        if s.name == {name:?}:\n            total = (total or 0) + s.value\nprint(total)\n"
    );
    let mut child = std::process::Command::new(python)
        .args(["-c", &script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run python (tools/setup.sh installs prometheus_client)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "prometheus_client refused /metrics: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{name} not in /metrics:\n{text}"))
}

async fn transfers_counted(client: &tokio_postgres::Client) -> f64 {
    scalar(
        client,
        "select value from hotledger.metrics where name = 'hotledger_transfers_total'",
    )
    .await
    .expect("a count")
    .parse()
    .expect("a number")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_health_and_the_sql_api_tell_the_truth() {
    let (server, http_port) = console_server();
    let (status, _, body) = http(http_port, "GET", "/health", &[], "");
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("\"role\":\"leader\"") && body.contains("\"status\":\"serving\""),
        "{body}"
    );

    let client = server.client().await;
    client
        .batch_execute("insert into accounts (id, ledger, code) values (1, 1, 1), (2, 1, 1)")
        .await
        .unwrap();
    let before = transfers_counted(&client).await;
    let http_before = parsed_metric(http_port, "hotledger_transfers_total");
    let calls_before = parsed_metric(http_port, "hotledger_statements_total");
    const N: i64 = 100;
    for id in 1..=N {
        client
            .simple_query(&format!("call transfer({id}, 1, 2, 1, 1, 1)"))
            .await
            .unwrap();
    }
    // A repeated transfer (idempotent) and a refused one create nothing.
    client
        .simple_query("call transfer(1, 1, 2, 1, 1, 1)")
        .await
        .unwrap();
    assert!(client
        .simple_query("call transfer(999, 1, 3, 1, 1, 1)")
        .await
        .is_err());
    let after = transfers_counted(&client).await;
    assert_eq!(after - before, N as f64, "hotledger.metrics");
    assert_eq!(
        parsed_metric(http_port, "hotledger_transfers_total") - http_before,
        N as f64
    );
    assert!(parsed_metric(http_port, "hotledger_statements_total") > calls_before);
    // Every request counted into an executor queue is counted out: idle, nothing waits.
    assert_eq!(
        parsed_metric(http_port, "hotledger_executor_queue_depth"),
        0.0
    );
    // The latency summaries and the per-second throughput saw them.
    let commits: i64 = scalar(
        &client,
        "select count from hotledger.latency where stage = 'commit' and window_seconds = 60",
    )
    .await
    .unwrap()
    .parse()
    .unwrap();
    assert!(commits >= N, "{commits}");
    // The view shows complete seconds only, and the watchdog moves the executor's count
    // into the current second each tick: the transfers appear within two seconds.
    let mut counted = 0i64;
    for _ in 0..30 {
        counted = scalar(&client, "select sum(transfers) from hotledger.throughput")
            .await
            .unwrap()
            .parse()
            .unwrap();
        if counted >= N {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(counted >= N, "transfers counted per second: {counted}");
    let hot = scalar(&client, "select account_id from hotledger.hot_accounts where window_seconds = 60 order by transfers desc limit 1")
        .await
        .unwrap();
    assert!(hot == "1" || hot == "2", "{hot}");

    // The SQL API: nothing without a session, nothing that changes without the console's
    // header, no session for a wrong password.
    let sql = r#"{"sql": "select 1"}"#;
    assert_eq!(
        http(http_port, "POST", "/api/sql", &[JSON, CONSOLE], sql).0,
        401
    );
    let wrong = r#"{"user": "ledger", "password": "wrong"}"#;
    let (status, _, body) = http(http_port, "POST", "/api/login", &[JSON, CONSOLE], wrong);
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("password authentication failed"), "{body}");
    let right = format!(r#"{{"user": "ledger", "password": "{PASSWORD}"}}"#);
    assert_eq!(
        http(http_port, "POST", "/api/login", &[JSON], &right).0,
        403
    );
    let (status, head, _) = http(http_port, "POST", "/api/login", &[JSON, CONSOLE], &right);
    assert_eq!(status, 200);
    let cookie = head
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .and_then(|c| c.split(';').next())
        .expect("a session cookie")
        .to_string();
    assert!(
        head.contains("HttpOnly") && head.contains("SameSite=Strict"),
        "{head}"
    );
    let with = [JSON, CONSOLE, ("Cookie", cookie.as_str())];
    assert_eq!(
        http(
            http_port,
            "POST",
            "/api/sql",
            &[JSON, ("Cookie", cookie.as_str())],
            sql
        )
        .0,
        403
    );
    let (_, _, body) = http(http_port, "POST", "/api/sql", &with, sql);
    assert!(
        body.contains(r#""rows":[["1"]]"#) && body.contains(r#""tag":"SELECT 1""#),
        "{body}"
    );
    let (_, _, body) = http(
        http_port,
        "POST",
        "/api/sql",
        &with,
        r#"{"sql": "selec 1"}"#,
    );
    assert!(body.contains(r#""sqlstate":"42601""#), "{body}");
    // Read-only unless the request unlocks writes, whatever the session SETs.
    let write = r#"{"sql": "set default_transaction_read_only = off"}"#;
    http(http_port, "POST", "/api/sql", &with, write);
    let create = r#"{"sql": "create table from_console (id int)"}"#;
    let (_, _, body) = http(http_port, "POST", "/api/sql", &with, create);
    assert!(body.contains(r#""sqlstate":"25006""#), "{body}");
    let unlocked = r#"{"sql": "create table from_console (id int)", "writes": true}"#;
    let (_, _, body) = http(http_port, "POST", "/api/sql", &with, unlocked);
    assert!(body.contains(r#""tag":"CREATE TABLE""#), "{body}");
    http(http_port, "POST", "/api/logout", &with, "{}");
    assert_eq!(http(http_port, "POST", "/api/sql", &with, sql).0, 401);
}

/// Four connections sending hot-account transfers (to account 1 from one of 2..1000) to
/// the servers at `urls` in turn, until `stop`.
async fn transfer_load(
    urls: Vec<String>,
    stop: Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut load = Vec::new();
    for writer in 0..4i64 {
        let url = urls[writer as usize % urls.len()].clone();
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .expect("connect for the load");
        tokio::spawn(connection);
        let stop = stop.clone();
        load.push(tokio::spawn(async move {
            let mut n = 0i64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let id = writer * 10_000_000 + n;
                let debit = 2 + (id * 7919) % 999;
                let _ = client
                    .simple_query(&format!("call transfer({id}, {debit}, 1, 1, 1, 1)"))
                    .await;
            }
        }));
    }
    load
}

/// Where the screenshots go: `HOTLEDGER_CONSOLE_SHOTS` (docs/console is where the docs'
/// come from), else a directory of the machine's temporary one.
fn screenshot_dir() -> String {
    let shots = std::env::var("HOTLEDGER_CONSOLE_SHOTS").unwrap_or_else(|_| {
        let dir = std::env::temp_dir().join("hotledger-console-screenshots");
        dir.to_string_lossy().into_owned()
    });
    std::fs::create_dir_all(&shots).unwrap();
    shots
}

/// Runs `tests/console/console_test.js` against the console at `base`.
async fn browse(
    browser: &str,
    base: &str,
    shots: &str,
    nodes: Option<usize>,
) -> std::process::Output {
    let script = common::repo_root().join("tests/console/console_test.js");
    let mut command = tokio::process::Command::new("node");
    command
        .arg(&script)
        .args([browser, base, PASSWORD, shots])
        .args(nodes.map(|n| n.to_string()))
        .current_dir(common::repo_root().join("tests/console"));
    tokio::time::timeout(Duration::from_secs(180), command.output())
        .await
        .expect("the browser test ended in time")
        .expect("run node")
}

/// What the page does in Chromium on a wide screen and in Firefox on a laptop's, while 4
/// connections send hot-account transfers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_works_in_a_real_browser() {
    let (server, http_port) = console_server();
    let client = server.client().await;
    client
        .batch_execute("insert into accounts (id, ledger, code) select g, 1, 1 from generate_series(1, 1000) g")
        .await
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let load = transfer_load(vec![server.url()], stop.clone()).await;
    let shots = screenshot_dir();
    let base = format!("http://127.0.0.1:{http_port}");
    let mut runs = Vec::new();
    for browser in ["chromium", "firefox"] {
        runs.push((browser, browse(browser, &base, &shots, None).await));
    }
    stop.store(true, Ordering::Relaxed);
    for writer in load {
        let _ = writer.await;
    }
    for (browser, out) in runs {
        assert!(
            out.status.success(),
            "the browser test failed in {browser} (screenshots in {shots}):\n{}\n{}\nserver log:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            server.log()
        );
    }
    for shot in ["console.png", "console-firefox.png"] {
        assert!(std::path::Path::new(&shots).join(shot).exists(), "{shot}");
    }
}

/// A follower's console on a 3-node cluster: every member on the cluster panel, and the
/// transfers sent through the other nodes on its chart (every replica applies them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followers_console_shows_the_whole_cluster() {
    let cluster = common::cluster::Cluster::start_with_consoles(3);
    cluster.node(1).query(
        "insert into accounts (id, ledger, code) select g, 1, 1 from generate_series(1, 1000) g",
    );
    let leader = common::cluster::leader_seen_by(&cluster, 1).expect("a leader");
    let follower = (1..=3).find(|&n| n != leader).unwrap();
    let others: Vec<String> = (1..=3)
        .filter(|&n| n != follower)
        .map(|n| {
            format!(
                "host=127.0.0.1 port={} user=ledger password={PASSWORD} dbname=ledger",
                cluster.node(n).port
            )
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let load = transfer_load(others, stop.clone()).await;
    let shots = screenshot_dir();
    let http_port = cluster.node(follower).http_port.expect("a console");
    let out = browse(
        "chromium",
        &format!("http://127.0.0.1:{http_port}"),
        &shots,
        Some(3),
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    for writer in load {
        let _ = writer.await;
    }
    assert!(
        out.status.success(),
        "the browser test failed (screenshots in {shots}):\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
}
