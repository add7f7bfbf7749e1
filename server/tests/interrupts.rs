//! Statements that stop: `statement_timeout`, a cancel request, `pg_terminate_backend` and a
//! client that goes away each stop a long read where it runs (on the executor, or off the
//! session's thread), and free the executor for everyone else; the idle timeouts end
//! idle connections; `lock_timeout` ends a lock wait; statements that would take more
//! memory than the server's budget fail (53200) and its memory stays bounded. Against the
//! real server binary.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{code, rss_bytes, scalar, TestServer};
use tokio_postgres::NoTls;

/// A read that takes many seconds on the executor (a nested-loop self-join with an OR).
const LONG_READ: &str = "select count(*) from rb x, rb y where x.a = y.b or x.b = y.a";

/// How long after its stop a statement may take to end in these tests: generous for a
/// loaded 2-core machine (the benchmark measures it; the goal is 100 ms).
const STOP_BOUND: Duration = Duration::from_millis(1500);

async fn long_read_table(server: &TestServer) -> tokio_postgres::Client {
    let c = server.client().await;
    c.batch_execute(
        "create table rb (id int primary key, a int, b int);
         insert into rb select g, g % 100, g % 77 from generate_series(1, 3000) g;",
    )
    .await
    .unwrap();
    c
}

fn message(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .map(|d| d.message().to_string())
        .unwrap_or_default()
}

/// How long the executor takes to answer a point read now: long if a stopped read still runs.
async fn executor_answers(c: &tokio_postgres::Client) -> Duration {
    let start = Instant::now();
    assert_eq!(
        scalar(c, "select a from rb where id = 7").await.as_deref(),
        Some("7")
    );
    start.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_read_stops_at_its_timeout_and_on_cancel() {
    let server = TestServer::start();
    let admin = long_read_table(&server).await;
    let reader = server.client().await;

    reader
        .batch_execute("set statement_timeout = '300ms'")
        .await
        .unwrap();
    let start = Instant::now();
    let e = reader.batch_execute(LONG_READ).await.unwrap_err();
    let took = start.elapsed();
    assert_eq!(code(&e), "57014", "{e:?}");
    assert!(
        message(&e).contains("statement timeout"),
        "the timeout is named: {e}"
    );
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_millis(300) + STOP_BOUND,
        "stopped {took:?} after it started (limit 300 ms)"
    );
    assert!(executor_answers(&admin).await < STOP_BOUND);
    reader
        .batch_execute("reset statement_timeout")
        .await
        .unwrap();

    // A cancel request stops it where it runs, and the session goes on.
    let token = reader.cancel_token();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let sent = Instant::now();
        token.cancel_query(NoTls).await.unwrap();
        sent
    });
    let e = reader.batch_execute(LONG_READ).await.unwrap_err();
    let ended = Instant::now();
    let sent = canceller.await.unwrap();
    assert_eq!(code(&e), "57014", "{e:?}");
    assert!(message(&e).contains("user request"), "{e:?}");
    assert!(
        ended.duration_since(sent) < STOP_BOUND,
        "stopped {:?} after the cancel",
        ended.duration_since(sent)
    );
    assert!(executor_answers(&admin).await < STOP_BOUND);
    assert_eq!(scalar(&reader, "select 1").await.as_deref(), Some("1"));

    // A statement staged inside a transaction block stops too, and leaves nothing behind.
    reader
        .batch_execute("create table copied (n bigint)")
        .await
        .unwrap();
    reader
        .batch_execute("begin; set local statement_timeout = 300")
        .await
        .unwrap();
    let e = reader
        .batch_execute(&format!(
            "insert into copied {}",
            LONG_READ.replace("count(*)", "x.id")
        ))
        .await
        .unwrap_err();
    assert_eq!(code(&e), "57014", "{e:?}");
    reader.batch_execute("rollback").await.unwrap();
    assert_eq!(
        scalar(&admin, "select count(*) from copied")
            .await
            .as_deref(),
        Some("0")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_read_stops_when_its_session_is_terminated_or_its_client_leaves() {
    let server = TestServer::start();
    let admin = long_read_table(&server).await;

    // pg_terminate_backend: the statement ends with 57P01 (or the connection closes).
    let doomed = server.client().await;
    let pid: i32 = doomed
        .query_one("select pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let running = tokio::spawn(async move { doomed.batch_execute(LONG_READ).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let terminated: bool = admin
        .query_one("select pg_terminate_backend($1)", &[&pid])
        .await
        .unwrap()
        .get(0);
    assert!(terminated);
    let sent = Instant::now();
    let e = tokio::time::timeout(STOP_BOUND * 4, running)
        .await
        .expect("the terminated statement ended")
        .unwrap()
        .unwrap_err();
    assert!(
        e.is_closed() || code(&e) == "57P01",
        "a terminated statement's error: {e:?}"
    );
    assert!(
        sent.elapsed() < STOP_BOUND,
        "ended {:?} after",
        sent.elapsed()
    );
    assert!(executor_answers(&admin).await < STOP_BOUND);

    // A client that closes its connection mid-statement: the statement stops.
    let (client, connection) = tokio_postgres::connect(&server.url(), NoTls).await.unwrap();
    let connection = tokio::spawn(connection);
    let running = tokio::spawn(async move { client.batch_execute(LONG_READ).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    connection.abort();
    running.abort();
    let gone = Instant::now();
    let answered = executor_answers(&admin).await;
    assert!(
        answered < STOP_BOUND,
        "the executor answered {answered:?} after the client left ({:?})",
        gone.elapsed()
    );
}

/// A long query that reads no table runs off the session's thread: the other sessions on
/// that thread, and new logins, are answered while it runs; its timeout still stops it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_query_without_tables_leaves_the_session_thread() {
    let server = TestServer::start_with(&["--session-threads", "1"]);
    let long = server.client().await;
    long.batch_execute("set statement_timeout = '4s'")
        .await
        .unwrap();
    let running = tokio::spawn(async move {
        let e = long
            .batch_execute("select count(*) from generate_series(1, 100000000) a where a % 7 = 3")
            .await
            .unwrap_err();
        (Instant::now(), e)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let other = server.client().await;
    for _ in 0..20 {
        assert_eq!(scalar(&other, "select 1").await.as_deref(), Some("1"));
    }
    let answered = Instant::now();
    let (stopped, e) = running.await.unwrap();
    assert_eq!(code(&e), "57014", "{e:?}");
    assert!(
        answered < stopped,
        "a login and 20 statements on the same thread were answered while it ran"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_end_at_their_timeouts_and_lock_waits_at_lock_timeout() {
    let server = TestServer::start();
    let admin = server.client().await;
    admin
        .batch_execute("create table t (id int primary key)")
        .await
        .unwrap();

    // Idle inside a transaction block: FATAL 25P03, and the transaction is rolled back.
    let idle = server.client().await;
    idle.batch_execute(
        "set idle_in_transaction_session_timeout = '200ms'; begin; insert into t values (1)",
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let e = idle.batch_execute("commit").await.unwrap_err();
    assert!(
        e.is_closed() || code(&e) == "25P03",
        "the idle transaction's connection ended: {e:?}"
    );
    assert_eq!(
        scalar(&admin, "select count(*) from t").await.as_deref(),
        Some("0")
    );

    // Idle outside one: FATAL 57P05. A session under its limit is left alone.
    let idle = server.client().await;
    idle.batch_execute("set idle_session_timeout = '200ms'")
        .await
        .unwrap();
    let busy = server.client().await;
    busy.batch_execute("set idle_session_timeout = '10s'")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let e = idle.batch_execute("select 1").await.unwrap_err();
    assert!(e.is_closed() || code(&e) == "57P05", "{e:?}");
    assert_eq!(scalar(&busy, "select 1").await.as_deref(), Some("1"));

    // A lock wait ends at lock_timeout with 55P03.
    admin
        .query_one("select pg_advisory_lock(42)", &[])
        .await
        .unwrap();
    busy.batch_execute("set lock_timeout = '200ms'")
        .await
        .unwrap();
    let start = Instant::now();
    let e = busy
        .query_one("select pg_advisory_lock(42)", &[])
        .await
        .unwrap_err();
    assert_eq!(code(&e), "55P03", "{e:?}");
    assert!(start.elapsed() >= Duration::from_millis(200));
    assert_eq!(scalar(&busy, "select 1").await.as_deref(), Some("1"));
}

/// With `--memory-budget-mb 256`, statements that would hold gigabytes — a sort of 20
/// million rows, a transaction staging 6 million rows, a string_agg of 10 million values —
/// fail with 53200 (or 54000 for one aggregate's limit) and the server's resident memory
/// stays near its budget; small statements go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_past_the_memory_budget_fail_and_memory_stays_bounded() {
    let server = TestServer::start_with(&["--memory-budget-mb", "256"]);
    let c = server.client().await;
    c.batch_execute("create table t (id int primary key, pad text)")
        .await
        .unwrap();
    let peak = Arc::new(AtomicU64::new(0));
    let watching = Arc::new(AtomicBool::new(true));
    let watcher = {
        let (peak, watching, pid) = (peak.clone(), watching.clone(), server.pid());
        std::thread::spawn(move || {
            while watching.load(Ordering::Relaxed) {
                peak.fetch_max(rss_bytes(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let hogs = [
        "select count(*) from (select g, repeat('x', 100) from generate_series(1, 20000000) g order by 2) s",
        "select length(string_agg(x, ',')) from (select repeat('x', 100) x from generate_series(1, 10000000)) s",
    ];
    for sql in hogs {
        let e = c.batch_execute(sql).await.unwrap_err();
        assert!(
            ["53200", "54000"].contains(&code(&e).as_str()),
            "{sql}: {e:?}"
        );
    }
    c.batch_execute("begin").await.unwrap();
    let e = c
        .batch_execute(
            "insert into t select g, repeat('x', 200) from generate_series(1, 6000000) g",
        )
        .await
        .unwrap_err();
    assert!(["53200", "54000"].contains(&code(&e).as_str()), "{e:?}");
    c.batch_execute("rollback").await.unwrap();
    assert_eq!(
        scalar(&c, "select count(*) from generate_series(1, 1000)")
            .await
            .as_deref(),
        Some("1000")
    );
    watching.store(false, Ordering::Relaxed);
    watcher.join().unwrap();
    let peak = peak.load(Ordering::Relaxed) >> 20;
    // The budget, the tests' 64 MiB pool, and room for the binary, threads and allocator.
    assert!(peak < 256 + 64 + 320, "peak resident memory {peak} MiB");
}
