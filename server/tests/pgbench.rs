//! Real pgbench against the real server: initialization, every query mode, select-only and
//! no-hot-row runs with zero failed transactions, then the balance invariant that catches
//! lost or double-applied updates; and a kill -9 mid-run that must lose no acknowledged
//! transaction.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{scalar, stderr, stdout, TestServer, PASSWORD};

fn field(output: &str, label: &str) -> Option<u64> {
    output.lines().find_map(|l| {
        l.trim()
            .strip_prefix(label)
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
    })
}

fn run_ok(server: &TestServer, args: &[&str]) -> u64 {
    let out = server.pgbench(args);
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "pgbench {args:?} failed:\n{text}\n{}\nserver log:\n{}",
        stderr(&out),
        server.log()
    );
    let failed = field(&text, "number of failed transactions:").unwrap_or(0);
    assert_eq!(
        failed, 0,
        "pgbench {args:?} reported failed transactions:\n{text}"
    );
    let processed =
        field(&text, "number of transactions actually processed:").expect("processed count");
    assert!(processed > 0, "{text}");
    processed
}

async fn sums(server: &TestServer) -> (String, String, String, String, String) {
    let c = server.client().await;
    (
        scalar(
            &c,
            "select coalesce(sum(abalance), 0) from pgbench_accounts",
        )
        .await
        .unwrap(),
        scalar(
            &c,
            "select coalesce(sum(bbalance), 0) from pgbench_branches",
        )
        .await
        .unwrap(),
        scalar(&c, "select coalesce(sum(tbalance), 0) from pgbench_tellers")
            .await
            .unwrap(),
        scalar(&c, "select coalesce(sum(delta), 0) from pgbench_history")
            .await
            .unwrap(),
        scalar(&c, "select count(*) from pgbench_history")
            .await
            .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgbench_all_modes_keep_balances_consistent() {
    let server = TestServer::start();
    let init = server.pgbench(&["-i", "-s", "1"]);
    assert!(
        init.status.success(),
        "pgbench -i failed: {}\n{}",
        stderr(&init),
        server.log()
    );
    let c = server.client().await;
    assert_eq!(
        scalar(&c, "select count(*) from pgbench_accounts")
            .await
            .as_deref(),
        Some("100000")
    );
    assert_eq!(
        scalar(&c, "select count(*) from pgbench_tellers")
            .await
            .as_deref(),
        Some("10")
    );

    // The first run without -n exercises pgbench's own vacuum and history truncation.
    let mut total = run_ok(
        &server,
        &["-c", "16", "-j", "2", "-T", "10", "-M", "simple"],
    );
    for mode in ["extended", "prepared"] {
        total += run_ok(
            &server,
            &["-n", "-c", "16", "-j", "2", "-T", "10", "-M", mode],
        );
    }
    let (a, b, t, d, n) = sums(&server).await;
    assert_eq!(
        (&a, &b, &t),
        (&d, &d, &d),
        "balances disagree with the history"
    );
    assert_eq!(
        n.parse::<u64>().unwrap(),
        total,
        "history rows differ from committed transactions"
    );

    run_ok(
        &server,
        &[
            "-n", "-S", "-c", "16", "-j", "2", "-T", "5", "-M", "prepared",
        ],
    );
    run_ok(
        &server,
        &[
            "-n", "-N", "-c", "16", "-j", "2", "-T", "5", "-M", "prepared",
        ],
    );
    let (a, b, t, d, _) = sums(&server).await;
    // -N does not touch branches and tellers.
    assert_eq!(a, d);
    assert_eq!(b, t);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgbench_init_steps_and_restart() {
    let mut server = TestServer::start();
    let init = server.pgbench(&["-i", "-I", "dtGvp", "-s", "1"]);
    assert!(
        init.status.success(),
        "pgbench -i -I dtGvp failed: {}\n{}",
        stderr(&init),
        server.log()
    );
    run_ok(
        &server,
        &["-n", "-c", "4", "-j", "2", "-T", "3", "-M", "prepared"],
    );
    let before = sums(&server).await;
    // A clean stop and a start: everything is still there.
    assert!(
        server.stop().success(),
        "SIGTERM did not stop the server cleanly: {}",
        server.log()
    );
    server.restart();
    assert_eq!(sums(&server).await, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_mid_run_loses_no_acknowledged_transaction() {
    let mut server = TestServer::start();
    assert!(server.pgbench(&["-i", "-s", "1"]).status.success());
    let clients = 16;
    let bench = Command::new("pgbench")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &server.port.to_string(),
            "-U",
            "ledger",
            "-n",
            "-c",
            &clients.to_string(),
            "-j",
            "2",
            "-T",
            "30",
            "-M",
            "prepared",
            "ledger",
        ])
        .env("PGPASSWORD", PASSWORD)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start pgbench");
    tokio::time::sleep(Duration::from_secs(6)).await;
    server.kill9();
    let out = bench.wait_with_output().expect("pgbench output");
    let text = stdout(&out);
    let acknowledged = field(&text, "number of transactions actually processed:")
        .unwrap_or_else(|| panic!("no count in pgbench output:\n{text}\n{}", stderr(&out)));
    assert!(
        acknowledged > 100,
        "too few transactions before the kill: {text}"
    );
    server.restart();
    let (a, b, t, d, n) = sums(&server).await;
    let n: u64 = n.parse().unwrap();
    // Every acknowledged commit survived; at most one in-flight commit per client may have
    // become durable without its acknowledgement reaching pgbench.
    assert!(
        n >= acknowledged,
        "lost acknowledged transactions: {n} in history, pgbench counted {acknowledged}"
    );
    assert!(
        n <= acknowledged + clients,
        "more transactions than were sent: {n} vs {acknowledged}"
    );
    assert_eq!(
        (&a, &b, &t),
        (&d, &d, &d),
        "balances disagree with the history after recovery"
    );
}

/// `tools/pgbench/tpcb_procedure.sql`: TPC-B as one CALL of a stored procedure, in every
/// query mode, keeps the same invariant as the five-statement transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpcb_as_one_procedure_call() {
    let server = TestServer::start();
    assert!(server.pgbench(&["-i", "-s", "1"]).status.success());
    let tools = common::repo_root().join("tools/pgbench");
    let tools = tools.display();
    let create = server.psql(&["-f", &format!("{tools}/tpcb_procedure_create.sql")]);
    assert!(create.status.success(), "{}", stderr(&create));
    let script = format!("{tools}/tpcb_procedure.sql");
    let mut total = 0;
    for mode in ["simple", "extended", "prepared"] {
        total += run_ok(
            &server,
            &[
                "-n", "-c", "16", "-j", "2", "-T", "4", "-M", mode, "-f", &script,
            ],
        );
    }
    let (a, b, t, d, n) = sums(&server).await;
    assert_eq!(
        (&a, &b, &t),
        (&d, &d, &d),
        "balances disagree with the history"
    );
    assert_eq!(n.parse::<u64>().unwrap(), total);
}
