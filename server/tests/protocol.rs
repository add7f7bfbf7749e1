//! The Rust driver (tokio-postgres, extended protocol with binary results) against the real
//! server: DDL, parameters, transactions, prepared statement reuse, SQLSTATEs for every
//! class of error, serializable conflicts versus commuting increments, cancel, auth.

mod common;

use std::time::Duration;

use common::{code, scalar, stat_fields, TestServer, PASSWORD};
use tokio_postgres::error::SqlState;
use tokio_postgres::NoTls;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn driver_round_trip() {
    let server = TestServer::start();
    let c = server.client().await;
    c.batch_execute("create table people (id bigint primary key, name text not null, score numeric(10,2), born date, active boolean default true)")
        .await
        .unwrap();
    let insert = c.prepare("insert into people (id, name, score, born) values ($1, $2, $3::text::numeric, $4::text::date)").await.unwrap();
    for i in 1..=5i64 {
        let n = c
            .execute(
                &insert,
                &[
                    &i,
                    &format!("p{i}"),
                    &format!("{}.5", i * 10),
                    &"2000-01-31",
                ],
            )
            .await;
        assert_eq!(n.unwrap(), 1);
    }
    let row = c
        .query_one(
            "select name, active, born::text, score::text from people where id = $1",
            &[&3i64],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "p3");
    assert!(row.get::<_, bool>(1));
    assert_eq!(row.get::<_, String>(2), "2000-01-31");
    assert_eq!(row.get::<_, String>(3), "30.50");
    let total: i64 = c
        .query_one("select count(*) from people where id > $1", &[&2i64])
        .await
        .unwrap()
        .get(0);
    assert_eq!(total, 3);

    // Commit and rollback.
    let mut c2 = server.client().await;
    let t = c2.transaction().await.unwrap();
    t.execute("update people set name = 'changed' where id = 1", &[])
        .await
        .unwrap();
    t.rollback().await.unwrap();
    let t = c2.transaction().await.unwrap();
    t.execute("update people set name = 'committed' where id = 2", &[])
        .await
        .unwrap();
    assert_eq!(
        t.query_one("select name from people where id = 2", &[])
            .await
            .unwrap()
            .get::<_, String>(0),
        "committed"
    );
    t.commit().await.unwrap();
    assert_eq!(
        scalar(&c, "select name from people where id = 1")
            .await
            .as_deref(),
        Some("p1")
    );
    assert_eq!(
        scalar(&c, "select name from people where id = 2")
            .await
            .as_deref(),
        Some("committed")
    );

    // An error carries its SQLSTATE and the session stays usable.
    let e = c
        .execute("insert into people (id, name) values (1, 'dup')", &[])
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::UNIQUE_VIOLATION));
    assert_eq!(
        scalar(&c, "select count(*) from people").await.as_deref(),
        Some("5")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_have_the_right_sqlstate() {
    let server = TestServer::start();
    let c = server.client().await;
    c.batch_execute(
        "create table e (id int primary key, v int not null, s smallint, check (v >= 0))",
    )
    .await
    .unwrap();
    c.batch_execute("insert into e values (1, 1, 1)")
        .await
        .unwrap();
    let cases = [
        ("selec 1", "42601"),
        ("select * from nowhere", "42P01"),
        ("select nope from e", "42703"),
        ("insert into e values (1, 1, 1)", "23505"),
        ("insert into e (id) values (2)", "23502"),
        ("insert into e values (3, -1, 1)", "23514"),
        ("insert into e values (4, 1, 70000)", "22003"),
        ("select 'abc'::int", "22P02"),
        ("select 1/0", "22012"),
        ("create index e_v on e using hash (v)", "0A000"),
        ("savepoint a", "25P01"),
        ("create temporary sequence ts", "0A000"),
        ("select nosuchfunction(1)", "42883"),
        ("create table e (id int)", "42P07"),
        ("set no_such_setting = 1", "42704"),
    ];
    for (sql, expected) in cases {
        let e = c.batch_execute(sql).await.unwrap_err();
        assert_eq!(code(&e), expected, "{sql}: {e:?}");
        // The session is still usable.
        assert_eq!(scalar(&c, "select 1").await.as_deref(), Some("1"));
    }
    // Inside a transaction an error aborts it until ROLLBACK.
    c.batch_execute("begin").await.unwrap();
    assert_eq!(
        code(&c.batch_execute("select * from nowhere").await.unwrap_err()),
        "42P01"
    );
    assert_eq!(
        code(&c.batch_execute("select 1").await.unwrap_err()),
        "25P02"
    );
    c.batch_execute("rollback").await.unwrap();
    assert_eq!(scalar(&c, "select 1").await.as_deref(), Some("1"));
    // A syntax error reports where it is.
    let e = c.batch_execute("select 1 frm e").await.unwrap_err();
    let db = e.as_db_error().expect("a database error");
    assert!(db.position().is_some(), "no position in {db:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serializable_conflicts_but_increments_commute() {
    let server = TestServer::start();
    let a = server.client().await;
    let b = server.client().await;
    a.batch_execute("create table acct (id int primary key, bal bigint not null)")
        .await
        .unwrap();
    a.batch_execute("insert into acct values (1, 100), (2, 100)")
        .await
        .unwrap();

    // A read-modify-write that another transaction invalidates fails with 40001.
    a.batch_execute("begin isolation level serializable")
        .await
        .unwrap();
    assert_eq!(
        scalar(&a, "select bal from acct where id = 1")
            .await
            .as_deref(),
        Some("100")
    );
    b.batch_execute("update acct set bal = bal + 1 where id = 1")
        .await
        .unwrap();
    a.batch_execute("update acct set bal = 500 where id = 1")
        .await
        .unwrap();
    let e = a.batch_execute("commit").await.unwrap_err();
    assert_eq!(code(&e), "40001", "{e:?}");
    assert_eq!(
        scalar(&a, "select bal from acct where id = 1")
            .await
            .as_deref(),
        Some("101")
    );

    // Increments never conflict, even serializable and interleaved.
    a.batch_execute("begin isolation level serializable")
        .await
        .unwrap();
    a.batch_execute("update acct set bal = bal + 10 where id = 2")
        .await
        .unwrap();
    b.batch_execute("begin isolation level serializable")
        .await
        .unwrap();
    b.batch_execute("update acct set bal = bal + 5 where id = 2")
        .await
        .unwrap();
    b.batch_execute("commit").await.unwrap();
    a.batch_execute("commit").await.unwrap();
    assert_eq!(
        scalar(&a, "select bal from acct where id = 2")
            .await
            .as_deref(),
        Some("115")
    );

    // Many concurrent increments of one hot row: none lost, none failed.
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let client = server.client().await;
        tasks.push(tokio::spawn(async move {
            let stmt = client
                .prepare("update acct set bal = bal + $1 where id = 1")
                .await
                .unwrap();
            for _ in 0..50 {
                client.execute(&stmt, &[&1i64]).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(
        scalar(&a, "select bal from acct where id = 1")
            .await
            .as_deref(),
        Some("501")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_and_authentication() {
    let server = TestServer::start();
    let c = server.client().await;
    c.batch_execute("create table big (id int primary key)")
        .await
        .unwrap();
    c.batch_execute("insert into big select g from generate_series(1, 3000) g")
        .await
        .unwrap();
    let token = c.cancel_token();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        token.cancel_query(NoTls).await
    });
    let e = c
        .batch_execute("select count(*) from big a, big b where a.id + b.id < 0")
        .await
        .unwrap_err();
    assert_eq!(code(&e), "57014", "{e:?}");
    canceller.await.unwrap().unwrap();

    let wrong = format!(
        "host=127.0.0.1 port={} user=ledger password=wrong dbname=ledger",
        server.port
    );
    let e = tokio_postgres::connect(&wrong, NoTls)
        .await
        .err()
        .expect("a wrong password must fail");
    assert_eq!(code(&e), "28P01", "{e:?}");
    let unknown_db = format!(
        "host=127.0.0.1 port={} user=ledger password={PASSWORD} dbname=other",
        server.port
    );
    let e = tokio_postgres::connect(&unknown_db, NoTls)
        .await
        .err()
        .expect("an unknown database must fail");
    assert_eq!(code(&e), "3D000", "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_messages_are_refused_unread() {
    let server = TestServer::start_with(&["--max-message-mb", "1"]);
    let c = server.client().await;
    // Just under the limit works.
    let fits = format!("select length('{}')", "x".repeat(1_000_000));
    assert_eq!(scalar(&c, &fits).await.as_deref(), Some("1000000"));
    // Over it: the server answers FATAL 54000 from the header and closes the connection.
    let huge = format!("select length('{}')", "x".repeat(2 << 20));
    let e = c.simple_query(&huge).await.unwrap_err();
    assert_eq!(code(&e), "54000", "{e:?}");
    assert!(
        c.simple_query("select 1").await.is_err(),
        "the connection must be closed"
    );
    // The server is fine and serves new connections.
    let again = server.client().await;
    assert_eq!(scalar(&again, "select 1").await.as_deref(), Some("1"));
}

/// Malformed and hostile statements: each gets an error (or a result), never a crash or a
/// hung session, and the server keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_input_never_breaks_the_server() {
    let server = TestServer::start();
    let c = server.client().await;
    c.batch_execute("create table h (id int primary key, t text, n numeric(10,2))")
        .await
        .unwrap();
    let nested = format!("select {}1{}", "(".repeat(200), ")".repeat(200));
    let long_ident = format!("select 1 as {}", "x".repeat(10_000));
    let inputs: Vec<String> = vec![
        "".into(),
        ";;;".into(),
        "select 'unterminated".into(),
        "select $$unterminated".into(),
        "select \"unterminated".into(),
        "/* unterminated comment".into(),
        "select 99999999999999999999999999999999999999999999".into(),
        "select -9223372036854775808::bigint - 1".into(),
        "select 1e999999".into(),
        "select 'x'::numeric(1000, 2000)".into(),
        "select '1'::varchar(0)".into(),
        "select substring('abc', 9223372036854775807, 9223372036854775807)".into(),
        "select * from generate_series(-9223372036854775808, 9223372036854775807, -9223372036854775808)".into(),
        "select 'ä' || '🦀' || E'\\x01'".into(),
        "insert into h values (1, repeat('x', 10), 1e30)".into(),
        "insert into h values (2, null, 'NaN')".into(),
        "select n / 0 from h".into(),
        "select * from h where id = 'not a number'".into(),
        "select * from h order by 99".into(),
        "select id from h group by t".into(),
        "update h set id = id / 0".into(),
        "select (select id from h union all select 2)".into(),
        "copy h to stdout".into(),
        "prepare p as select 1".into(),
        "listen channel".into(),
        "lock table h".into(),
        "create view v as select 1".into(),
        "create sequence s".into(),
        "alter table h drop column t".into(),
        "select array[1,2][5]".into(),
        "select 1 = any('{1,2,x}')".into(),
        "select 'a' ~ '('".into(),
        "set transaction isolation level serializable".into(),
        "commit and chain".into(),
        nested,
        long_ident,
    ];
    for sql in &inputs {
        let _ = c.simple_query(sql).await;
        // Whatever the outcome, the session still answers.
        assert_eq!(
            scalar(&c, "select 41 + 1").await.as_deref(),
            Some("42"),
            "after {sql:.60}"
        );
    }
    // And through the extended protocol, with parameters of the wrong kind.
    let stmt = c.prepare("select id from h where id = $1").await.unwrap();
    assert!(c.query(&stmt, &[&"text for an int"]).await.is_err());
    assert!(c.query(&stmt, &[&i64::MAX]).await.is_err());
    assert_eq!(scalar(&c, "select 1").await.as_deref(), Some("1"));
    assert!(server.client().await.simple_query("select 1").await.is_ok());
}

/// Long operator chains (which sqlparser reads in a loop, so its recursion limit does not see
/// them) used to overflow a stack and kill the server: one just under the limit is parsed,
/// bound, folded and evaluated on every path (simple and extended, a SELECT and an INSERT the
/// row reader takes); deeper ones are refused with 54001 before parsing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_expressions_are_refused_not_a_crash() {
    let server = TestServer::start();
    let c = server.client().await;
    c.batch_execute("create table deep (n bigint)")
        .await
        .unwrap();
    // MAX - 1 terms: MAX - 2 operators inside one pair of parentheses.
    let terms = sql::MAX_EXPRESSION_DEPTH - 1;
    let fits = vec!["1"; terms].join("+");
    assert_eq!(
        scalar(&c, &format!("select ({fits})")).await,
        Some(terms.to_string())
    );
    let row = c
        .query_one(&format!("select ({fits})::text"), &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), terms.to_string());
    c.batch_execute(&format!("insert into deep values ({fits})"))
        .await
        .unwrap();
    for terms in [sql::MAX_EXPRESSION_DEPTH + 2, 200_000] {
        let chain = vec!["1"; terms].join("+");
        for statement in [
            format!("select {chain}"),
            format!("insert into deep values ({chain})"),
        ] {
            let e = c.simple_query(&statement).await.unwrap_err();
            assert_eq!(code(&e), "54001", "{e:?}");
            let e = c.query(&statement, &[]).await.unwrap_err();
            assert_eq!(code(&e), "54001", "{e:?}");
        }
    }
    assert_eq!(
        scalar(&c, "select sum(n) from deep").await,
        Some(terms.to_string())
    );
    // Parentheses nest as deep (sqlparser's own limit, 50 by default, is set past it).
    let nested = |n: usize| format!("select {}1{}", "(".repeat(n), ")".repeat(n));
    for n in [49, 500, sql::MAX_EXPRESSION_DEPTH - 10] {
        assert_eq!(scalar(&c, &nested(n)).await.as_deref(), Some("1"), "{n}");
        let row = c.query_one(&nested(n), &[]).await.unwrap();
        assert_eq!(row.get::<_, i32>(0), 1);
    }
    let e = c
        .simple_query(&nested(sql::MAX_EXPRESSION_DEPTH + 10))
        .await
        .unwrap_err();
    assert_eq!(code(&e), "54001", "{e:?}");
    assert!(server.client().await.simple_query("select 1").await.is_ok());
}

/// A transaction too large for one log entry fails at the statement that stages past the
/// limit (54000) — one large statement or many small ones — rather than holding its rows
/// until COMMIT; nothing of it applies, a savepoint rolled back gives its bytes back, and
/// the server keeps committing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_transaction_is_refused_whole() {
    let server = TestServer::start();
    let c = server.client().await;
    c.batch_execute("create table big_tx (id int primary key, pad text)")
        .await
        .unwrap();
    c.batch_execute("begin").await.unwrap();
    let e = c
        .batch_execute(
            "insert into big_tx select g, repeat('x', 1000) from generate_series(1, 60000) g",
        )
        .await
        .unwrap_err();
    assert_eq!(code(&e), "54000", "{e:?}");
    let e = c.batch_execute("select 1").await.unwrap_err();
    assert_eq!(code(&e), "25P02", "the transaction failed: {e:?}");
    c.batch_execute("commit").await.unwrap();

    // Many small statements: the one that passes the limit fails.
    c.batch_execute("begin").await.unwrap();
    let slice = |from: i32| {
        format!(
            "insert into big_tx select g, repeat('x', 1200) from generate_series({from}, {}) g",
            from + 9_999
        )
    };
    c.batch_execute("savepoint s").await.unwrap();
    for from in [1, 10_001, 20_001] {
        c.batch_execute(&slice(from)).await.unwrap();
    }
    // Rolled back to the savepoint, the 30,000 rows no longer count.
    c.batch_execute("rollback to savepoint s").await.unwrap();
    let mut failed_at = None;
    for (n, from) in (1..=6).map(|n| (n, 1 + (n - 1) * 10_000)) {
        if let Err(e) = c.batch_execute(&slice(from)).await {
            assert_eq!(code(&e), "54000", "{e:?}");
            failed_at = Some(n);
            break;
        }
    }
    assert_eq!(
        failed_at,
        Some(5),
        "48 MiB is passed by the fifth 12 MB statement"
    );
    c.batch_execute("rollback").await.unwrap();
    assert_eq!(
        scalar(&c, "select count(*) from big_tx").await.as_deref(),
        Some("0")
    );
    c.batch_execute("insert into big_tx values (1, 'small')")
        .await
        .unwrap();
    assert_eq!(
        scalar(&c, "select count(*) from big_tx").await.as_deref(),
        Some("1")
    );
}

/// `SHOW group_commit_stats` and `SHOW storage_stats`: the counters the benchmark tool reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_stats_reports_group_commit_and_storage() {
    // The test servers run with `--pool-mb 64`.
    let server = TestServer::start();
    let c = server.client().await;
    c.batch_execute("create table t (id int primary key); insert into t values (1), (2)")
        .await
        .unwrap();
    let commit = stat_fields(&scalar(&c, "show group_commit_stats").await.unwrap());
    assert!(
        commit["commands"] >= 2 && commit["fsyncs"] >= 1,
        "{commit:?}"
    );
    let storage = stat_fields(&scalar(&c, "show storage_stats").await.unwrap());
    assert_eq!(storage["page_size"], 8192, "the default: {storage:?}");
    assert_eq!(
        storage["pool_capacity_pages"],
        (64 << 20) / 8192,
        "{storage:?}"
    );
    assert!(storage["resident_pages"] >= 1, "{storage:?}");
    assert!(storage["file_pages"] >= storage["resident_pages"] - storage["dirty_pages"]);
    assert!(
        storage["leaf_hint_hits"] + storage["leaf_hint_misses"] >= 1,
        "{storage:?}"
    );
}

/// `--prefault-pool`: the pool's memory is mapped whole ahead of use, in the background, and
/// the server serves meanwhile. (And `--page-size` for a new data directory.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefaulted_pool_is_mapped_ahead_of_use() {
    let server = TestServer::start_with(&["--prefault-pool", "--page-size", "4096"]);
    let c = server.client().await;
    c.batch_execute("create table t (id int primary key); insert into t values (1)")
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let storage = stat_fields(&scalar(&c, "show storage_stats").await.unwrap());
        if storage["mapped_pages"] >= storage["pool_capacity_pages"] {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the 64 MiB pool not mapped within 60 s: {storage:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let storage = stat_fields(&scalar(&c, "show storage_stats").await.unwrap());
    assert_eq!(storage["page_size"], 4096, "--page-size: {storage:?}");
    assert_eq!(
        scalar(&c, "select count(*) from t").await.as_deref(),
        Some("1")
    );
}

/// A client stream that records what crosses it: each write the client makes and each read
/// that returns bytes, in order.
struct Recorded {
    inner: tokio::net::TcpStream,
    events: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl tokio::io::AsyncRead for Recorded {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            let read = &buf.filled()[before..];
            let event = format!("read {} bytes from {:?}", read.len(), read[0] as char);
            self.events.lock().unwrap().push(event);
        }
        polled
    }
}

impl tokio::io::AsyncWrite for Recorded {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let event = format!("write {} bytes from {:?}", data.len(), data[0] as char);
        self.events.lock().unwrap().push(event);
        std::pin::Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Like PostgreSQL, the server answers a batch of extended-protocol messages (Parse,
/// Describe, Bind, Execute) in one write at the Sync that ends it: a reply flushed per
/// message is a write and a client wakeup each. The client here sends each batch in one
/// write and must get each answer in one read (a single small write on loopback is never
/// split, so this cannot fail spuriously; with a flush per Describe, most runs of 50 rounds
/// saw a batch arrive in pieces).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_extended_messages_is_answered_in_one_write() {
    let server = TestServer::start();
    let setup = server.client().await;
    setup
        .batch_execute("create table b (id int primary key, v text)")
        .await
        .unwrap();
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", server.port))
        .await
        .unwrap();
    tcp.set_nodelay(true).unwrap();
    let stream = Recorded {
        inner: tcp,
        events: events.clone(),
    };
    let config: tokio_postgres::Config = server.url().parse().unwrap();
    let (c, connection) = config.connect_raw(stream, NoTls).await.unwrap();
    tokio::spawn(connection);
    // Statements stay alive to the end: a dropped one sends Close + Sync with the next request.
    let mut statements = Vec::new();
    for i in 0..50 {
        events.lock().unwrap().clear();
        // Parse + Describe(statement) + Sync, twice; Bind + Execute + Sync, twice: each
        // one write from the client.
        let insert = c.prepare("insert into b values ($1, $2)").await.unwrap();
        let select = c.prepare("select v from b where id = $1").await.unwrap();
        c.execute(&insert, &[&i, &"x"]).await.unwrap();
        let rows = c.query(&select, &[&i]).await.unwrap();
        assert_eq!(rows.len(), 1);
        statements.extend([insert, select]);
        let recorded = events.lock().unwrap().clone();
        let mut reads_per_write = Vec::new();
        for event in &recorded {
            if event.starts_with("write") {
                reads_per_write.push(0);
            } else if let Some(reads) = reads_per_write.last_mut() {
                *reads += 1;
            }
        }
        assert!(
            reads_per_write.len() == 4 && reads_per_write.iter().all(|&n| n == 1),
            "round {i}: a batch was answered in pieces: {recorded:#?}"
        );
    }
}

/// COPY TO STDOUT through the extended protocol (tokio-postgres's `copy_out`): the data in
/// CopyData messages, then the command completes and the session goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_out_through_the_extended_protocol() {
    use futures::TryStreamExt;
    let server = TestServer::start();
    let c = server.client().await;
    c.batch_execute(
        "create table co (id int primary key, v text); insert into co values (1, 'a'), (2, null)",
    )
    .await
    .unwrap();
    let stream = c
        .copy_out("copy co to stdout with (format csv, header)")
        .await
        .unwrap();
    let chunks: Vec<bytes::Bytes> = stream.try_collect().await.unwrap();
    assert_eq!(chunks.concat(), b"id,v\n1,a\n2,\n");
    let stream = c
        .copy_out("copy (select id * 10 from co order by id) to stdout")
        .await
        .unwrap();
    let chunks: Vec<bytes::Bytes> = stream.try_collect().await.unwrap();
    assert_eq!(chunks.concat(), b"10\n20\n");
    assert_eq!(scalar(&c, "select 41 + 1").await.as_deref(), Some("42"));
}

/// Advisory locks between sessions, as migration tools use them: a second session's
/// `pg_try_advisory_lock` fails and its `pg_advisory_lock` waits until the holder gives
/// the lock back (every hold of it); a waiter can be cancelled (57014) and its session
/// goes on; a closed connection's locks and a transaction's locks at its end are given
/// back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advisory_locks_between_sessions() {
    let server = TestServer::start();
    let a = server.client().await;
    let b = server.client().await;
    a.query_one("select pg_advisory_lock($1)", &[&1_i64])
        .await
        .unwrap();
    a.query_one("select pg_advisory_lock(1)", &[])
        .await
        .unwrap();
    assert!(!try_lock(&b, 1).await);
    let b = std::sync::Arc::new(b);
    let waiter = {
        let b = b.clone();
        tokio::spawn(async move { b.query_one("select pg_advisory_lock(1)", &[]).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished(), "b waits while a holds the lock");
    a.query_one("select pg_advisory_unlock(1)", &[])
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished(), "a still holds it once");
    a.query_one("select pg_advisory_unlock(1)", &[])
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("b took the lock")
        .unwrap()
        .unwrap();
    assert!(!try_lock(&a, 1).await);

    // A waiter cancelled: the statement fails with 57014 and the session goes on.
    let token = a.cancel_token();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        token.cancel_query(NoTls).await
    });
    let e = a
        .query_one("select pg_advisory_lock(1)", &[])
        .await
        .unwrap_err();
    assert_eq!(code(&e), "57014", "{e:?}");
    canceller.await.unwrap().unwrap();
    assert!(!try_lock(&a, 1).await);

    // A closed connection gives its locks back.
    drop(waiter_owner(b));
    let mut taken = false;
    for _ in 0..50 {
        if try_lock(&a, 1).await {
            taken = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(taken, "the lock of a closed session was given back");

    // A transaction's lock is held until its end.
    let c = server.client().await;
    c.batch_execute("begin").await.unwrap();
    c.query_one("select pg_advisory_xact_lock(2)", &[])
        .await
        .unwrap();
    assert!(!try_lock(&a, 2).await);
    c.batch_execute("commit").await.unwrap();
    assert!(try_lock(&a, 2).await);
}

/// SELECT ... FOR UPDATE in READ COMMITTED transaction blocks, as a job queue's workers
/// claim a job: both read the same job; the first to commit wins, the second's COMMIT fails
/// with 40001 (so the job is not run twice) and leaves nothing behind. Without FOR UPDATE
/// the same two transactions both commit, as in PostgreSQL's READ COMMITTED; a locking
/// read followed by no write commits whatever changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn select_for_update_claims_a_row_once() {
    let server = TestServer::start();
    let a = server.client().await;
    let b = server.client().await;
    a.batch_execute(
        "create table jobs (id int primary key, state text not null, worker text);
         insert into jobs values (1, 'new', null), (2, 'new', null)",
    )
    .await
    .unwrap();
    let claim =
        "select id from jobs where state = 'new' order by id limit 1 for update skip locked";
    for c in [&a, &b] {
        c.batch_execute("begin").await.unwrap();
        let id: i32 = c.query_one(claim, &[]).await.unwrap().get(0);
        assert_eq!(id, 1);
    }
    a.batch_execute("update jobs set state = 'running', worker = 'a' where id = 1; commit")
        .await
        .unwrap();
    b.batch_execute("update jobs set state = 'running', worker = 'b' where id = 1")
        .await
        .unwrap();
    let e = b.batch_execute("commit").await.unwrap_err();
    assert_eq!(code(&e), "40001", "{e:?}");
    let worker = scalar(&a, "select worker from jobs where id = 1").await;
    assert_eq!(worker.as_deref(), Some("a"));
    // The loser retries and claims the next job.
    b.batch_execute("begin").await.unwrap();
    let id: i32 = b.query_one(claim, &[]).await.unwrap().get(0);
    assert_eq!(id, 2);
    b.batch_execute("update jobs set state = 'running', worker = 'b' where id = 2; commit")
        .await
        .unwrap();

    // Without FOR UPDATE, READ COMMITTED does not check what was read.
    for c in [&a, &b] {
        c.batch_execute("begin").await.unwrap();
        c.query_one("select id from jobs where id = 1", &[])
            .await
            .unwrap();
    }
    a.batch_execute("update jobs set worker = 'a2' where id = 1; commit")
        .await
        .unwrap();
    b.batch_execute("update jobs set worker = 'b2' where id = 1; commit")
        .await
        .unwrap();
    // A locking read with no write after it commits.
    a.batch_execute("begin").await.unwrap();
    a.query_one("select id from jobs where id = 2 for share", &[])
        .await
        .unwrap();
    b.batch_execute("update jobs set worker = 'b3' where id = 2")
        .await
        .unwrap();
    a.batch_execute("commit").await.unwrap();
}

/// `pg_cancel_backend` ends another session's statement (57014; the session goes on), and
/// `pg_terminate_backend` its connection, found through `pg_stat_activity`, whether it waits
/// idle or inside a transaction block; an unknown process id gives false.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_cancelled_and_terminated_by_pid() {
    let server = TestServer::start();
    let admin = server.client().await;
    let waiting = std::sync::Arc::new(server.client().await);
    let pid = |c: std::sync::Arc<tokio_postgres::Client>| async move {
        let row = c.query_one("select pg_backend_pid()", &[]).await.unwrap();
        row.get::<_, i32>(0)
    };
    let waiting_pid = pid(waiting.clone()).await;
    admin
        .query_one("select pg_advisory_lock(7)", &[])
        .await
        .unwrap();
    let waiter = {
        let waiting = waiting.clone();
        tokio::spawn(async move { waiting.query_one("select pg_advisory_lock(7)", &[]).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let cancelled: bool = admin
        .query_one("select pg_cancel_backend($1)", &[&waiting_pid])
        .await
        .unwrap()
        .get(0);
    assert!(cancelled);
    let e = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiting statement ended")
        .unwrap()
        .unwrap_err();
    assert_eq!(code(&e), "57014", "{e:?}");
    assert_eq!(
        scalar(&waiting, "select 1").await.as_deref(),
        Some("1"),
        "a cancelled session goes on"
    );
    let unknown: bool = admin
        .query_one("select pg_cancel_backend(1)", &[])
        .await
        .unwrap()
        .get(0);
    assert!(!unknown);

    // An idle session, through pg_stat_activity; one inside a transaction block.
    let idle = server.client().await;
    let idle_pid = idle
        .query_one("select pg_backend_pid()", &[])
        .await
        .unwrap()
        .get::<_, i32>(0);
    waiting.batch_execute("begin; select 1;").await.unwrap();
    let terminated = admin
        .query(
            "select pg_terminate_backend(pid) from pg_stat_activity where pid in ($1, $2)",
            &[&idle_pid, &waiting_pid],
        )
        .await
        .unwrap();
    assert_eq!(terminated.len(), 2);
    assert!(terminated.iter().all(|r| r.get::<_, bool>(0)));
    for client in [&idle, &*waiting] {
        let e = client.batch_execute("select 1").await.unwrap_err();
        assert!(
            e.is_closed() || e.code().map(|c| c.code()) == Some("57P01"),
            "a terminated session's next statement fails: {e:?}"
        );
    }
    let mut left = None;
    for _ in 0..50 {
        left = scalar(
            &admin,
            "select count(*) from pg_stat_activity where pid <> pg_backend_pid() and application_name <> 'psql'",
        )
        .await;
        if left.as_deref() == Some("0") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(left.as_deref(), Some("0"), "terminated sessions go away");
}

/// pg_stat_activity shows the node's client sessions: another session idle in its
/// transaction block with its last statement, the reader itself active with the query it
/// runs; `pid <> pg_backend_pid()` leaves the reader out; a closed session goes away. (The
/// harness's psql readiness check may still be closing: it is left out.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_stat_activity_shows_the_sessions() {
    let server = TestServer::start();
    let (a, connection) =
        tokio_postgres::connect(&format!("{} application_name=worker", server.url()), NoTls)
            .await
            .unwrap();
    let a_connection = tokio::spawn(connection);
    let b = server.client().await;
    a.batch_execute("begin").await.unwrap();
    a.query_one("select 41 + 1", &[]).await.unwrap();
    let others = b
        .query(
            "select application_name, state, query, client_addr, xact_start is not null \
             from pg_stat_activity where pid <> pg_backend_pid() and application_name <> 'psql'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(others.len(), 1);
    let row = &others[0];
    assert_eq!(row.get::<_, String>(0), "worker");
    assert_eq!(row.get::<_, String>(1), "idle in transaction");
    assert_eq!(row.get::<_, String>(2), "select 41 + 1");
    assert_eq!(row.get::<_, String>(3), "127.0.0.1");
    assert!(row.get::<_, bool>(4));
    let own = scalar(
        &b,
        "select state || ' ' || (query like '%pg_stat_activity%') from pg_stat_activity \
         where pid = pg_backend_pid()",
    )
    .await;
    assert_eq!(own.as_deref(), Some("active true"));
    let e = b
        .query("select * from pg_stat_activity, jobs_nowhere", &[])
        .await
        .unwrap_err();
    assert_eq!(code(&e), "42P01", "{e:?}");
    drop(a);
    a_connection.await.unwrap().unwrap();
    let mut gone = false;
    for _ in 0..50 {
        let workers = "select count(*) from pg_stat_activity where application_name = 'worker'";
        if scalar(&b, workers).await.as_deref() == Some("0") {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gone, "the closed session left pg_stat_activity");
}

/// `pg_try_advisory_lock(key)` in session `c`.
async fn try_lock(c: &tokio_postgres::Client, key: i64) -> bool {
    c.query_one("select pg_try_advisory_lock($1)", &[&key])
        .await
        .unwrap()
        .get(0)
}

/// The only owner of a client, given up.
fn waiter_owner(b: std::sync::Arc<tokio_postgres::Client>) -> tokio_postgres::Client {
    std::sync::Arc::try_unwrap(b).unwrap_or_else(|_| panic!("the waiter still holds b"))
}

/// The bytes of a Bind to the unnamed portal of `statement`, its parameters in the given
/// formats (`None` is NULL) and its results in `results`.
fn bind_message(
    statement: &str,
    params: &[Option<Vec<u8>>],
    formats: &[i16],
    results: &[i16],
) -> bytes::BytesMut {
    let params: Vec<Option<&[u8]>> = params.iter().map(|p| p.as_deref()).collect();
    let mut buf = bytes::BytesMut::new();
    common::wire::bind_into(statement, &params, formats, results, &mut buf);
    buf
}

/// A statement's Bind, Describe, Execute and Sync arriving in one write are answered in one
/// step (`handlers::whole_run`): the replies must be the very bytes the same messages get
/// one by one (a Flush right after the Bind sends them that way) — for point reads, rows
/// in text and binary, writes, NULLs, errors at Bind and at Execute, a wrong count of
/// formats, a statement that does not exist, and the unnamed statement.
#[test]
fn a_whole_run_answers_as_its_messages_one_by_one() {
    use common::wire::{Send as Msg, Wire};
    use postgres_protocol::message::frontend;
    let server = TestServer::start();
    let mut wire = Wire::connect(server.port, "ledger", PASSWORD, "ledger");
    let q = |sql: &str| Msg::Query(sql.to_string());
    wire.round(&[q(
        "create table wr (id int primary key, name text, amount bigint)",
    )]);
    wire.round(&[q(
        "insert into wr values (1, 'a', 10), (2, 'b', 20), (3, null, 30)",
    )]);
    for (name, sql) in [
        ("r", "select id, name, amount from wr where id = $1"),
        (
            "m",
            "select id, amount * 2 as twice from wr where id >= $1 order by id",
        ),
        ("u", "update wr set amount = amount + 1 where id = $1"),
        ("i", "insert into wr (id, name, amount) values ($1, $2, $3)"),
        ("d", "select 10 / $1::int as q"),
    ] {
        let ready = wire.round(&[Msg::Parse(name.into(), sql.into()), Msg::Sync]);
        assert_eq!(ready.last().map(String::as_str), Some("Ready I"), "{sql}");
    }
    let text = |v: &str| Some(v.as_bytes().to_vec());
    // Statement, parameters, their formats, result formats, whether a Describe comes.
    type Case = (&'static str, Vec<Option<Vec<u8>>>, Vec<i16>, Vec<i16>, bool);
    let cases: Vec<Case> = vec![
        ("r", vec![text("1")], vec![], vec![], true),
        ("r", vec![text("3")], vec![0], vec![0], true),
        ("r", vec![text("9")], vec![], vec![], false),
        (
            "r",
            vec![Some(2i32.to_be_bytes().to_vec())],
            vec![1],
            vec![1],
            true,
        ),
        ("r", vec![text("abc")], vec![], vec![], true),
        ("r", vec![], vec![], vec![], true),
        ("r", vec![None], vec![], vec![], true),
        ("m", vec![text("1")], vec![], vec![0, 1], true),
        ("m", vec![text("1")], vec![], vec![0, 1, 0], true),
        ("u", vec![text("1")], vec![], vec![], true),
        ("i", vec![text("4"), text("x"), None], vec![], vec![], false),
        ("i", vec![text("4"), text("y"), None], vec![], vec![], true),
        ("d", vec![text("5")], vec![], vec![], true),
        ("d", vec![text("0")], vec![], vec![], true),
        ("nope", vec![], vec![], vec![], true),
        ("", vec![], vec![], vec![], true),
    ];
    let tail = |describe: bool| {
        let mut buf = bytes::BytesMut::new();
        if describe {
            frontend::describe(b'P', "", &mut buf).unwrap();
        }
        frontend::execute("", 0, &mut buf).unwrap();
        frontend::sync(&mut buf);
        buf
    };
    let mut flush = bytes::BytesMut::new();
    frontend::flush(&mut flush);
    for (statement, params, formats, results, describe) in &cases {
        if statement.is_empty() {
            wire.round(&[
                Msg::Parse(String::new(), "select 7 as seven".into()),
                Msg::Sync,
            ]);
        }
        // Run twice each way, so that a write (and the insert's duplicate) is seen by both.
        let mut replies = Vec::new();
        for whole in [true, false, true, false] {
            let mut bytes = bind_message(statement, params, formats, results);
            if !whole {
                bytes.extend_from_slice(&flush);
            }
            bytes.extend_from_slice(&tail(*describe));
            wire.send_raw(&bytes);
            replies.push(wire.raw_replies(1));
        }
        let case = format!("{statement} {params:?} formats {formats:?} results {results:?}");
        // The first insert of row 4 succeeds; the runs after it are duplicates.
        let first = usize::from(*statement == "i");
        for (i, reply) in replies.iter().enumerate().skip(first + 1) {
            assert_eq!(&replies[first], reply, "{case}: run {i}");
        }
    }
    // The runs wrote what they said: 4 updates of row 1, one insert of row 4.
    let rows = wire.round(&[q(
        "select id, amount from wr where id in (1, 4) order by id",
    )]);
    assert_eq!(
        rows[1..3],
        ["Row 1,14".to_string(), "Row 4,NULL".to_string()],
        "{rows:?}"
    );
    // Inside blocks: BEGIN and COMMIT prepared too, a write and the read that sees it, a
    // failure, then what a failed block refuses, and the end of each.
    for (name, sql) in [("b", "begin"), ("c", "commit"), ("x", "rollback")] {
        wire.round(&[Msg::Parse(name.into(), sql.into()), Msg::Sync]);
    }
    type Step = (&'static str, Vec<Option<Vec<u8>>>);
    let blocks: Vec<Vec<Step>> = vec![
        vec![("b", vec![]), ("u", vec![text("2")]), ("c", vec![])],
        vec![
            ("b", vec![]),
            ("u", vec![text("2")]),
            ("r", vec![text("2")]),
            ("x", vec![]),
        ],
        vec![
            ("b", vec![]),
            ("u", vec![text("2")]),
            ("d", vec![text("0")]),
            ("r", vec![text("2")]),
            ("c", vec![]),
        ],
        vec![("b", vec![]), ("r", vec![text("1")]), ("x", vec![])],
    ];
    for block in &blocks {
        let mut transcripts = Vec::new();
        for whole in [true, false] {
            let mut transcript = Vec::new();
            for (statement, params) in block {
                let mut bytes = bind_message(statement, params, &[], &[]);
                if !whole {
                    bytes.extend_from_slice(&flush);
                }
                bytes.extend_from_slice(&tail(true));
                wire.send_raw(&bytes);
                transcript.extend(wire.raw_replies(1));
            }
            transcripts.push(transcript);
        }
        let names: Vec<&str> = block.iter().map(|(s, _)| *s).collect();
        assert_eq!(transcripts[0], transcripts[1], "block {names:?}");
    }
    // Each block ran once each way: the first block's update of row 2 committed twice, the
    // others' rolled back.
    let rows = wire.round(&[q("select amount from wr where id = 2")]);
    assert_eq!(rows[1], "Row 22", "{rows:?}");
}
