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
    long_read_beside_writes(&TestServer::start(), 0).await;
}

/// The same with a buffer pool far smaller than the table: the snapshot reads the pages
/// that are not in memory from the data file, still off the executor, while checkpoints
/// driven by the writes move pages to new slots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_read_of_data_larger_than_memory_runs_beside_writes() {
    let server = TestServer::start_with(&["--pool-mb", "1"]);
    long_read_beside_writes(&server, 2000).await;
    let stats = scalar(&server.client().await, "show storage_stats")
        .await
        .unwrap();
    let fields = common::stat_fields(&stats);
    assert!(
        fields["file_pages"] > 2 * fields["pool_capacity_pages"],
        "the tables outgrow the pool: {stats}"
    );
}

/// Runs a join of seconds over a table of 3,000 rows (each with `pad` bytes more) while
/// another connection inserts 20 rows one by one into a table the join also reads.
async fn long_read_beside_writes(server: &TestServer, pad: i32) {
    let admin = server.client().await;
    admin
        .batch_execute(&format!(
            "create table rb (id int primary key, a int, b int, pad text);
             insert into rb select g, g % 100, g % 77, repeat('x', {pad})
                 from generate_series(1, 3000) g;
             create table w (id int primary key);
             insert into w values (0);"
        ))
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
                    "select count(*), (select count(*) from w), sum(length(x.pad))::bigint
                     from rb x, rb y, w where x.a = y.b or x.b = y.a",
                    &[],
                )
                .await
                .unwrap();
            running.store(false, Ordering::SeqCst);
            let pad_sum = row.get::<_, Option<i64>>(2);
            (
                row.get::<_, i64>(0),
                row.get::<_, i64>(1),
                pad_sum,
                Instant::now(),
            )
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
    let (pairs, rows_of_w, pad_sum, ended) = long.await.unwrap();
    assert!(inserted < ended);
    assert_eq!(rows_of_w, 1, "the read saw w as of its start");
    assert_eq!(pairs, 179_924, "the join's count");
    assert_eq!(pad_sum, Some(i64::from(pad) * 179_924));
    assert_eq!(
        scalar(&admin, "select count(*) from w").await.as_deref(),
        Some("21")
    );
}

/// Point reads are served from the view the executor publishes between entries; a session's
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
    // The executor publishes a view as soon as its queue is empty after an entry, so most
    // reads right after a write are served on it rather than hop to the executor.
    let stats = scalar(&other, "show storage_stats").await.unwrap();
    let fields = common::stat_fields(&stats);
    assert!(
        fields["point_reads_on_view"] >= 150,
        "most of the 300 point reads ran on a view: {stats}"
    );
}

/// A long read runs flat out on a quiet server and in slices with pauses while other
/// statements run (`--long-read-share`); with a share of 100% it is never paused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_read_pauses_for_a_busy_ledger_only() {
    let long = "select count(*) from generate_series(1, 1000000) a where a % 7 = 3";
    let pauses_beside_writes = |server: TestServer| async move {
        let admin = server.client().await;
        admin
            .batch_execute("create table w (id int primary key)")
            .await
            .unwrap();
        let reader = server.client().await;
        assert_eq!(scalar(&reader, long).await.as_deref(), Some("142857"));
        let quiet = pauses(&admin).await;
        let running = Arc::new(AtomicBool::new(true));
        let read = {
            let running = running.clone();
            tokio::spawn(async move {
                let count = scalar(&reader, long).await;
                running.store(false, Ordering::SeqCst);
                count
            })
        };
        let writer = server.client().await;
        let mut id = 0;
        while running.load(Ordering::SeqCst) {
            id += 1;
            writer
                .execute("insert into w values ($1)", &[&id])
                .await
                .unwrap();
        }
        assert_eq!(read.await.unwrap().as_deref(), Some("142857"));
        (quiet, pauses(&admin).await, id)
    };
    let (quiet, busy, writes) = pauses_beside_writes(TestServer::start()).await;
    assert_eq!(quiet, 0, "nothing else ran: the read was not paused");
    assert!(busy > 0, "{writes} writes ran beside the read: it paused");
    let (_, unpaced, writes) =
        pauses_beside_writes(TestServer::start_with(&["--long-read-share", "100"])).await;
    assert_eq!(unpaced, 0, "a share of 100% never pauses ({writes} writes)");
}

async fn pauses(client: &tokio_postgres::Client) -> u64 {
    let stats = scalar(client, "show storage_stats").await.unwrap();
    common::stat_fields(&stats)["long_read_pauses"]
}

/// A point UPDATE or DELETE inside a transaction is staged on the session's own thread, on
/// the view the executor published while idle, instead of on the executor: the answers are
/// PostgreSQL's — rows affected, a transaction's own changes seen by its next statements
/// (INSERTs among them, with ON CONFLICT against stored rows and the transaction's own), a
/// CHECK failure's SQLSTATE and the failed block after it, ROLLBACK, another session's
/// commits in between, serializable transactions (staged on the executor) — and most of the
/// statements found a view current.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn point_writes_in_a_transaction_are_staged_on_the_view_as_postgresql_answers() {
    let postgres = common::Postgres::start();
    let expected = point_write_transcript(&postgres.client().await, &postgres.client().await).await;
    let server = TestServer::start();
    let client = server.client().await;
    let got = point_write_transcript(&client, &server.client().await).await;
    assert_eq!(got, expected, "server log:\n{}", server.log());
    assert!(expected.contains(&"23514".to_string()) && expected.contains(&"25P02".to_string()));
    let stats = scalar(&client, "show storage_stats").await.unwrap();
    let fields = common::stat_fields(&stats);
    assert!(
        fields["point_reads_on_view"] >= 100,
        "most of the point statements ran on a view: {stats}"
    );
}

/// What one statement answered: its rows affected, its one value, or its SQLSTATE.
async fn answered(client: &tokio_postgres::Client, sql: &str, id: i32) -> String {
    let result = match sql.starts_with("select") {
        true => client
            .query_one(sql, &[&id])
            .await
            .map(|row| row.get::<_, i32>(0).to_string()),
        false => client.execute(sql, &[&id]).await.map(|n| n.to_string()),
    };
    result.unwrap_or_else(|e| common::code(&e))
}

async fn point_write_transcript(
    a: &tokio_postgres::Client,
    b: &tokio_postgres::Client,
) -> Vec<String> {
    a.batch_execute(
        "drop table if exists pw;
         create table pw (id int primary key, v int not null check (v >= 0));
         insert into pw select g, 10 from generate_series(1, 80) g",
    )
    .await
    .unwrap();
    let mut transcript = Vec::new();
    for round in 0..40i32 {
        // Idle long enough for the executor to publish a view.
        tokio::time::sleep(Duration::from_millis(8)).await;
        let (id, gone) = (1 + round % 20, 41 + round);
        let begin = match round % 5 {
            4 => "begin isolation level serializable",
            _ => "begin",
        };
        a.batch_execute(begin).await.unwrap();
        let steps = [
            ("update pw set v = v + 1 where id = $1", id),
            ("update pw set v = v * 2 where id = $1", id),
            ("select v from pw where id = $1", id),
            ("update pw set v = v + 1 where id = $1", 1000 + round),
            ("delete from pw where id = $1", gone),
            ("delete from pw where id = $1", gone),
            ("select count(*)::int from pw where id >= $1", 0),
            ("insert into pw values ($1, 5)", 200 + round),
            (
                "insert into pw values ($1, 5) on conflict (id) do update set v = pw.v + 1",
                200 + round,
            ),
            ("select v from pw where id = $1", 200 + round),
            ("insert into pw values ($1, 5) on conflict do nothing", id),
        ];
        for (n, (sql, key)) in steps.into_iter().enumerate() {
            transcript.push(answered(a, sql, key).await);
            if n == 2 && round % 5 != 4 {
                // Another session commits a change of its own meanwhile (not beside a
                // serializable transaction, which PostgreSQL's predicate locks on the
                // table's pages may then fail).
                transcript.push(answered(b, "update pw set v = v + 3 where id = $1", 80).await);
            }
        }
        match round % 4 {
            0 => {
                let sql = "update pw set v = v - 1000 where id = $1";
                transcript.push(answered(a, sql, id).await);
                transcript.push(answered(a, "select v from pw where id = $1", id).await);
                a.batch_execute("rollback").await.unwrap();
            }
            1 => a.batch_execute("rollback").await.unwrap(),
            _ => transcript.push(match a.batch_execute("commit").await {
                Ok(()) => format!("commit {round}"),
                Err(e) => format!("commit {round}: {}", common::code(&e)),
            }),
        }
    }
    for row in a
        .query("select id, v from pw order by id", &[])
        .await
        .unwrap()
    {
        transcript.push(format!("{} {}", row.get::<_, i32>(0), row.get::<_, i32>(1)));
    }
    transcript
}
