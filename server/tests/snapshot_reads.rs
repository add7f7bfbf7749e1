//! Reads off the executor: a query that reads more than rows by key runs on a snapshot of
//! the partitions, so writes go on while it runs, and it sees the state as of its start.
//! Against the real server binary.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{scalar, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_go_on_while_a_long_read_runs_and_it_sees_its_start() {
    let server = TestServer::start();
    let admin = server.client().await;
    admin
        .batch_execute(
            "create table rb (id int primary key, a int, b int);
             insert into rb select g, g % 100, g % 77 from generate_series(1, 3000) g;
             create table w (id int primary key);
             insert into w values (0);",
        )
        .await
        .unwrap();
    // A join of seconds, then the rows of w: as of the statement's start, one row.
    let reader = server.client().await;
    let running = Arc::new(AtomicBool::new(true));
    let long = {
        let running = running.clone();
        tokio::spawn(async move {
            let row = reader
                .query_one(
                    "select count(*), (select count(*) from w) from rb x, rb y, w
                     where x.a = y.b or x.b = y.a",
                    &[],
                )
                .await
                .unwrap();
            running.store(false, Ordering::SeqCst);
            (row.get::<_, i64>(0), row.get::<_, i64>(1), Instant::now())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let writer = server.client().await;
    let mut slowest = Duration::ZERO;
    for id in 1..=20 {
        let start = Instant::now();
        writer
            .execute("insert into w values ($1)", &[&id])
            .await
            .unwrap();
        slowest = slowest.max(start.elapsed());
    }
    let inserted = Instant::now();
    assert!(
        running.load(Ordering::SeqCst),
        "the 20 inserts finished while the read still ran (slowest {slowest:?})"
    );
    let (pairs, rows_of_w, ended) = long.await.unwrap();
    assert!(inserted < ended);
    assert_eq!(rows_of_w, 1, "the read saw w as of its start");
    assert_eq!(pairs, 179_924, "the join's count");
    assert_eq!(
        scalar(&admin, "select count(*) from w").await.as_deref(),
        Some("21")
    );
}

/// Point reads are served from the view the executor publishes while idle; a session's
/// acknowledged write is always in what its next read sees (the view stops being current
/// before any reply of the entry that changes it), from its own connection and another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn point_reads_see_every_acknowledged_write() {
    let server = TestServer::start();
    let writer = server.client().await;
    let other = server.client().await;
    writer
        .batch_execute("create table kv (id int primary key, v int)")
        .await
        .unwrap();
    let read = "select v from kv where id = $1";
    for n in 0..150i32 {
        // Idle long enough for a view to be published between writes.
        tokio::time::sleep(Duration::from_millis(8)).await;
        if n % 3 == 0 {
            writer
                .execute("insert into kv values ($1, $1)", &[&n])
                .await
                .unwrap();
        } else {
            writer
                .execute("update kv set v = v + 1000 where id = $1", &[&(n - n % 3)])
                .await
                .unwrap();
        }
        let key = n - n % 3;
        let want = key + 1000 * (n % 3);
        for client in [&writer, &other] {
            let got: i32 = client.query_one(read, &[&key]).await.unwrap().get(0);
            assert_eq!(got, want, "after write {n}");
        }
    }
}
