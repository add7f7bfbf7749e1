//! Acknowledged writes of every kind survive `kill -9` of the real server: altered tables,
//! JSON documents, drawn values, arrays and intervals, enum types, partial indexes, schema
//! changes made in transactions, sequence values — each checked after a restart that
//! replays the log since the last checkpoint.

mod common;

use std::time::Duration;

use common::{code, scalar, TestServer};
use tokio_postgres::error::SqlState;

/// ALTER TABLE rebuilds the rows of a table in fresh storage: after kill -9 (before and
/// after a checkpoint) the table has its new shape and every row its rebuilt values, on two
/// partitions; a view created after it (kept apart from the rest of the catalog) is back
/// too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn altered_tables_survive_kill9() {
    let mut server = TestServer::start_with(&["--partitions", "2"]);
    let c = server.client().await;
    c.batch_execute(
        "create table r (id int primary key, a text, b int);
         insert into r select g, 'v' || g, g from generate_series(1, 1000) g;
         create index r_a on r (a);
         alter table r alter column b type bigint using b * 2;
         alter table r add column c bigint default 7, drop column a;
         create view early as select 1 as one;",
    )
    .await
    .unwrap();
    wait_for_checkpoint(&c).await;
    c.batch_execute(
        "alter table r add column d text not null default 'd', alter column c set not null;
         create view rv as select id, c * 2 as twice from r where id <= 10;",
    )
    .await
    .unwrap();
    drop(c);
    server.kill9_and_restart();
    let c = server.client().await;
    assert_eq!(
        scalar(
            &c,
            "select count(*) || ' ' || sum(b) || ' ' || sum(c) || ' ' || count(d) from r"
        )
        .await
        .as_deref(),
        Some("1000 1001000 7000 1000")
    );
    // The views are back, from the checkpoint and from the log; one reads the rebuilt rows.
    assert_eq!(
        scalar(&c, "select one from early").await.as_deref(),
        Some("1")
    );
    assert_eq!(
        scalar(&c, "select count(*) || ' ' || sum(twice) from rv")
            .await
            .as_deref(),
        Some("10 140")
    );
    // The dropped column's index went with it; the new NOT NULL holds.
    assert_eq!(
        scalar(&c, "select count(*) from pg_class where relname = 'r_a'")
            .await
            .as_deref(),
        Some("0")
    );
    let e = c
        .batch_execute("insert into r (id, b, c) values (1001, 1, null)")
        .await;
    assert!(e.is_err(), "c is NOT NULL, so a NULL must be refused");
    c.batch_execute("insert into r (id, b, c) values (1001, 1, 2)")
        .await
        .unwrap();
    assert_eq!(
        scalar(&c, "select d from r where id = 1001")
            .await
            .as_deref(),
        Some("d")
    );
}

/// jsonb and json columns are stored and logged in their own forms: documents written
/// before a checkpoint and after it (a multi-row INSERT, INSERT ... SELECT, jsonb_set and
/// || in an UPDATE, a transaction's staged rows) are back after kill -9, jsonb normalized
/// and json as written, and answer operators as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_documents_survive_kill9() {
    let mut server = TestServer::start_with(&["--partitions", "2"]);
    let c = server.client().await;
    c.batch_execute(
        r#"create table d (id int primary key, body jsonb, raw json);
         insert into d values (1, '{"b": 1, "a": [1, 2.50]}', '{"b":  1}'),
                              (2, '"text"', '[1,2]');
         insert into d select g, jsonb_build_object('n', g, 'tags', array['t' || g]), null
           from generate_series(3, 100) g;"#,
    )
    .await
    .unwrap();
    wait_for_checkpoint(&c).await;
    c.batch_execute(
        r#"update d set body = jsonb_set(body, '{n}', '0') || '{"seen": true}' where id <= 10 and id >= 3;
         begin;
         insert into d values (101, '{"late": {"x": null}}', '{"late" :1}');
         update d set raw = '{"k":   2}' where id = 2;
         commit;"#,
    )
    .await
    .unwrap();
    drop(c);
    server.kill9_and_restart();
    let c = server.client().await;
    let row = |id: i32| {
        let c = &c;
        async move {
            scalar(
                c,
                &format!(
                    "select body::text || ' ' || coalesce(raw::text, '-') from d where id = {id}"
                ),
            )
            .await
        }
    };
    assert_eq!(
        row(1).await.as_deref(),
        Some(r#"{"a": [1, 2.50], "b": 1} {"b":  1}"#)
    );
    assert_eq!(row(2).await.as_deref(), Some(r#""text" {"k":   2}"#));
    assert_eq!(
        row(101).await.as_deref(),
        Some(r#"{"late": {"x": null}} {"late" :1}"#)
    );
    assert_eq!(
        scalar(
            &c,
            "select count(*) filter (where body ? 'seen') || ' ' || sum((body ->> 'n')::int) \
             || ' ' || count(*) filter (where body @> '{\"tags\": [\"t50\"]}') from d"
        )
        .await
        .as_deref(),
        Some("8 4995 1")
    );
}

/// Values `gen_random_uuid()` draws are drawn once: the ids a client was given back are the
/// ones stored, and the same after kill -9 replays the log (rows from before a checkpoint
/// and after it), whether the statement's rows were built before it was proposed (VALUES),
/// staged as a transaction of its own (INSERT ... SELECT) or in a transaction block; array
/// and interval columns come back as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drawn_uuids_arrays_and_intervals_survive_kill9() {
    let mut server = TestServer::start_with(&["--partitions", "2"]);
    let c = server.client().await;
    c.batch_execute(
        r#"create table u (id uuid primary key default gen_random_uuid(), n int not null, tag uuid,
                           tags text[] default '{a,"b c",NULL}', took interval default '-1 mon 2 days 03:04:05')"#,
    )
    .await
    .unwrap();
    let mut given: Vec<(i32, String, Option<String>)> = Vec::new();
    let returned = "returning n, id::text, tag::text";
    let mut run = |rows: Vec<tokio_postgres::Row>| {
        given.extend(rows.iter().map(|r| (r.get(0), r.get(1), r.get(2))));
    };
    run(c
        .query(
            &format!("insert into u (n) select g from generate_series(1, 50) g {returned}"),
            &[],
        )
        .await
        .unwrap());
    wait_for_checkpoint(&c).await;
    run(c
        .query(
            &format!("insert into u (n, tag) values (51, gen_random_uuid()), (52, gen_random_uuid()) {returned}"),
            &[],
        )
        .await
        .unwrap());
    // An UPDATE draws a new value for its row; the one it answered with is the one kept.
    let updated = c
        .query_one(
            &format!("update u set tag = gen_random_uuid() where n = 52 {returned}"),
            &[],
        )
        .await
        .unwrap();
    given.retain(|(n, _, _)| *n != 52);
    given.push((updated.get(0), updated.get(1), updated.get(2)));
    c.batch_execute("begin").await.unwrap();
    let mut run = |rows: Vec<tokio_postgres::Row>| {
        given.extend(rows.iter().map(|r| (r.get(0), r.get(1), r.get(2))));
    };
    run(c
        .query(&format!("insert into u (n) values (53) {returned}"), &[])
        .await
        .unwrap());
    run(c
        .query(
            &format!("insert into u (n, tag) select n + 100, id from u where n <= 3 {returned}"),
            &[],
        )
        .await
        .unwrap());
    c.batch_execute("commit").await.unwrap();
    drop(c);
    server.kill9_and_restart();
    let c = server.client().await;
    let stored: Vec<(i32, String, Option<String>)> = c
        .query("select n, id::text, tag::text from u order by n", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    given.sort();
    assert_eq!(stored.len(), 56);
    assert_eq!(stored, given);
    let distinct = scalar(&c, "select count(distinct id) from u").await;
    assert_eq!(distinct.as_deref(), Some("56"));
    let defaults = scalar(
        &c,
        "select count(*) || ' ' || min(tags::text) || ' ' || min(took::text) from u",
    )
    .await;
    assert_eq!(
        defaults.as_deref(),
        Some(r#"56 {a,"b c",NULL} -1 mons +2 days 03:04:05"#)
    );
}

/// Enum types come back after kill -9 with their labels in order, from the checkpoint (the
/// type, the rows using it) and from the log (a label added, a rename, a new type); a label
/// a parameter brings is checked when the statement runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enum_types_survive_kill9() {
    let mut server = TestServer::start_with(&["--partitions", "2"]);
    let c = server.client().await;
    c.batch_execute(
        "create type mood as enum ('sad', 'ok', 'happy');
         create table diary (day int primary key, feeling mood not null);
         insert into diary values (1, 'happy'), (2, 'sad'), (3, 'ok');",
    )
    .await
    .unwrap();
    wait_for_checkpoint(&c).await;
    c.batch_execute(
        "alter type mood add value 'meh' before 'ok';
         insert into diary values (4, 'meh');
         alter type mood rename to humour;
         create type colour as enum ('red', 'green');",
    )
    .await
    .unwrap();
    let e = c
        .query("select $1::text::humour", &[&"glad"])
        .await
        .unwrap_err();
    assert_eq!(code(&e), "22P02", "{e}");
    drop(c);
    server.kill9_and_restart();
    let c = server.client().await;
    assert_eq!(
        scalar(
            &c,
            "select string_agg(feeling::text, ',' order by feeling) from diary"
        )
        .await
        .as_deref(),
        Some("sad,meh,ok,happy")
    );
    assert_eq!(
        scalar(
            &c,
            "select string_agg(t.typname || ':' || e.enumlabel, ',' order by t.typname, e.enumsortorder)
             from pg_enum e join pg_type t on t.oid = e.enumtypid"
        )
        .await
        .as_deref(),
        Some("colour:red,colour:green,humour:sad,humour:meh,humour:ok,humour:happy")
    );
    let e = c
        .batch_execute("insert into diary values (5, 'glad')")
        .await
        .unwrap_err();
    assert_eq!(code(&e), "22P02", "{e}");
    c.batch_execute("insert into diary values (5, 'ok'::humour)")
        .await
        .unwrap();
    assert_eq!(
        scalar(&c, "select count(*) from diary where feeling >= 'meh'")
            .await
            .as_deref(),
        Some("4")
    );
}

/// Partial and expression indexes come back after kill -9 with their definitions, from the
/// checkpoint and from the log, and still hold only the rows and keys those give; UNIQUE
/// constraints (of an added column too) come back as constraints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_indexes_survive_kill9() {
    let mut server = TestServer::start_with(&["--partitions", "2"]);
    let c = server.client().await;
    c.batch_execute(
        "create table accounts_live (id int primary key, handle text not null, closed bool not null default false);
         create unique index handle_open on accounts_live (handle) where not closed;
         insert into accounts_live values (1, 'ann', true), (2, 'ann', false);",
    )
    .await
    .unwrap();
    wait_for_checkpoint(&c).await;
    c.batch_execute(
        "create unique index handle_big on accounts_live (handle) where id >= 100;
         create unique index handle_lower on accounts_live (lower(handle)) where id >= 100;
         insert into accounts_live values (100, 'bob', false), (101, 'cy', true);
         alter table accounts_live add column badge int unique;
         alter table accounts_live add constraint accounts_live_handle_id unique (handle, id);",
    )
    .await
    .unwrap();
    drop(c);
    server.kill9_and_restart();
    let c = server.client().await;
    // UNIQUE constraints stay constraints (the unique indexes above do not become any).
    assert_eq!(
        scalar(
            &c,
            "select string_agg(conname || ' ' || pg_get_constraintdef(oid), '; ' order by conname) from pg_constraint where contype = 'u'"
        )
        .await
        .as_deref(),
        Some("accounts_live_badge_key UNIQUE (badge); accounts_live_handle_id UNIQUE (handle, id)")
    );
    assert_eq!(
        scalar(
            &c,
            "select string_agg(pg_get_indexdef(indexrelid), '; ' order by indexrelid) from pg_index where indpred is not null"
        )
        .await
        .as_deref(),
        Some(
            "CREATE UNIQUE INDEX handle_open ON public.accounts_live USING btree (handle) WHERE (NOT closed); \
             CREATE UNIQUE INDEX handle_big ON public.accounts_live USING btree (handle) WHERE (id >= 100); \
             CREATE UNIQUE INDEX handle_lower ON public.accounts_live USING btree (lower(handle)) WHERE (id >= 100)"
        )
    );
    for (bad, why) in [
        (
            "insert into accounts_live values (3, 'ann', false)",
            "an open 'ann' exists",
        ),
        (
            "insert into accounts_live values (102, 'bob', true)",
            "'bob' with an id from 100 exists",
        ),
        (
            "insert into accounts_live values (103, 'CY', true)",
            "'cy' in any case, with an id from 100, exists",
        ),
    ] {
        let e = c.batch_execute(bad).await.unwrap_err();
        assert_eq!(code(&e), "23505", "{why}: {e}");
    }
    c.batch_execute(
        "insert into accounts_live values (12, 'ann', true, 7), (5, 'bob', true, null)",
    )
    .await
    .unwrap();
    let e = c
        .batch_execute("insert into accounts_live values (13, 'dee', true, 7)")
        .await
        .unwrap_err();
    assert_eq!(code(&e), "23505", "badge 7 is taken: {e}");
}

/// Schema changes in transaction blocks: another session sees them only at COMMIT; a
/// prepared statement sees the transaction's own; a concurrent schema change makes the
/// COMMIT fail with 40001 and leaves nothing behind; committed ones survive kill -9 (from
/// the checkpoint and from the log), rolled-back ones leave no storage behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_changes_in_transactions_commit_whole_and_survive_kill9() {
    let mut server = TestServer::start_with(&["--partitions", "2"]);
    let a = server.client().await;
    let b = server.client().await;
    a.batch_execute(
        "begin;
         create table m (id int primary key, v text);
         insert into m values (1, 'one');
         create index m_v on m (v);",
    )
    .await
    .unwrap();
    // Extended protocol inside the transaction: bound against its catalog.
    let insert = a.prepare("insert into m values ($1, $2)").await.unwrap();
    a.execute(&insert, &[&2i32, &"two"]).await.unwrap();
    let e = b.batch_execute("select * from m").await.unwrap_err();
    assert_eq!(code(&e), "42P01", "not visible before COMMIT: {e}");
    a.batch_execute("commit").await.unwrap();
    assert_eq!(
        scalar(&b, "select string_agg(v, ',' order by id) from m")
            .await
            .as_deref(),
        Some("one,two")
    );
    // The statement prepared inside the transaction still works after it.
    a.execute(&insert, &[&3i32, &"three"]).await.unwrap();
    a.batch_execute("create table early_ref (m_id int references m)")
        .await
        .unwrap();
    wait_for_checkpoint(&a).await;

    // A schema change committed by another session in between: 40001, nothing applied.
    a.batch_execute("begin; create table lost (x int); insert into lost values (1);")
        .await
        .unwrap();
    b.batch_execute("create table other (x int)").await.unwrap();
    let e = a.batch_execute("commit").await.unwrap_err();
    assert_eq!(code(&e), "40001", "{e}");
    assert_eq!(
        scalar(&b, "select count(*) from pg_class where relname = 'lost'")
            .await
            .as_deref(),
        Some("0")
    );
    // Rolled back: nothing of it, and the name is free again.
    a.batch_execute(
        "begin; create table gone (x int primary key); insert into gone values (1); rollback;
         create table gone (y text);",
    )
    .await
    .unwrap();

    a.batch_execute(
        "begin;
         alter table m add column n int default 5;
         update m set n = n * id;
         create table log_only (k int primary key);
         insert into log_only values (7);
         drop table other;
         create table m_ref (m_id int references m (id) on delete cascade);
         insert into m_ref values (1);
         create table numbered (id serial primary key, v text);
         insert into numbered (v) values ('a'), ('b');
         commit;",
    )
    .await
    .unwrap();
    drop((a, b));
    server.kill9_and_restart();
    let c = server.client().await;
    assert_eq!(
        scalar(&c, "select string_agg(v || n, ',' order by id) from m")
            .await
            .as_deref(),
        Some("one5,two10,three15")
    );
    assert_eq!(
        scalar(&c, "select k from log_only").await.as_deref(),
        Some("7")
    );
    assert_eq!(
        scalar(
            &c,
            "select string_agg(relname, ',' order by relname) from pg_class
             where relname in ('m', 'm_v', 'other', 'lost', 'gone', 'log_only')"
        )
        .await
        .as_deref(),
        Some("gone,log_only,m,m_v")
    );
    c.batch_execute("insert into gone values ('ok'); drop table gone;")
        .await
        .unwrap();
    // Foreign keys came back from the checkpoint and from the log, and hold.
    for bad in [
        "insert into early_ref values (42)",
        "insert into m_ref values (42)",
    ] {
        let e = c.batch_execute(bad).await.unwrap_err();
        assert_eq!(code(&e), "23503", "{bad}: {e}");
    }
    // The sequence the transaction made and drew from continues after its values.
    assert_eq!(
        scalar(&c, "insert into numbered (v) values ('c') returning id")
            .await
            .as_deref(),
        Some("3")
    );
    c.batch_execute("delete from m where id = 1").await.unwrap();
    assert_eq!(
        scalar(&c, "select count(*) from m_ref").await.as_deref(),
        Some("0")
    );
}

/// Sequence values from concurrent sessions — SERIAL defaults in autocommit INSERTs and in
/// transactions, explicit `nextval` — are all distinct, and after kill -9 no acknowledged
/// value is handed out again, with the states coming back from a checkpoint and the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequence_values_are_unique_and_survive_kill9() {
    let mut server = TestServer::start_with(&["--partitions", "2"]);
    let c = server.client().await;
    c.batch_execute(
        "create table items (id bigserial primary key, who int, v text);
         create sequence ticket start with 1000 increment by 3;
         insert into items (who, v) values (-1, 'before the checkpoint');
         select nextval('ticket');",
    )
    .await
    .unwrap();
    wait_for_checkpoint(&c).await;
    let mut tasks = Vec::new();
    for who in 0..6i32 {
        let client = server.client().await;
        tasks.push(tokio::spawn(async move {
            let insert = client
                .prepare("insert into items (who, v) values ($1, 'x') returning id")
                .await
                .unwrap();
            let (mut ids, mut tickets) = (Vec::new(), Vec::new());
            for round in 0..20 {
                match round % 3 {
                    0 => ids.push(client.query_one(&insert, &[&who]).await.unwrap().get(0)),
                    1 => {
                        client.batch_execute("begin").await.unwrap();
                        let id: i64 = client.query_one(&insert, &[&who]).await.unwrap().get(0);
                        let current: i64 = client
                            .query_one("select currval('items_id_seq')", &[])
                            .await
                            .unwrap()
                            .get(0);
                        assert_eq!(current, id);
                        client.batch_execute("commit").await.unwrap();
                        ids.push(id);
                    }
                    _ => tickets.push(
                        client
                            .query_one("select nextval('ticket')", &[])
                            .await
                            .unwrap()
                            .get::<_, i64>(0),
                    ),
                }
            }
            (ids, tickets)
        }));
    }
    let (mut ids, mut tickets): (Vec<i64>, Vec<i64>) = (Vec::new(), Vec::new());
    for t in tasks {
        let (i, k) = t.await.unwrap();
        ids.extend(i);
        tickets.extend(k);
    }
    let distinct = |v: &mut Vec<i64>| {
        let n = v.len();
        v.sort_unstable();
        v.dedup();
        v.len() == n
    };
    assert!(distinct(&mut ids), "every id handed out once: {ids:?}");
    assert!(distinct(&mut tickets), "every ticket handed out once");
    assert!(tickets.iter().all(|t| (t - 1000) % 3 == 0 && *t > 1000));
    drop(c);
    server.kill9_and_restart();
    let c = server.client().await;
    assert_eq!(
        scalar(&c, "select count(*) from items where who >= 0")
            .await
            .as_deref(),
        Some(ids.len().to_string().as_str())
    );
    let next_id: i64 = c
        .query_one(
            "insert into items (who, v) values (99, 'after') returning id",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        next_id > *ids.last().unwrap(),
        "{next_id} was handed out before"
    );
    let next_ticket: i64 = c
        .query_one("select nextval('ticket')", &[])
        .await
        .unwrap()
        .get(0);
    assert!(next_ticket > *tickets.last().unwrap());
    // A new session has no currval until it calls nextval.
    let e = c.query_one("select currval('items_id_seq')", &[]).await;
    let c2 = server.client().await;
    assert!(e.is_ok(), "this session called nextval through the INSERT");
    let e = c2
        .query_one("select currval('ticket')", &[])
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE));
}

/// CHECKPOINT returns once a checkpoint of everything applied before it is durable, with
/// no checkpoint due by the interval; it is answered again when nothing changed since, and
/// what it covered is back after kill -9.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoint_returns_when_a_checkpoint_is_durable() {
    let mut server = TestServer::start_with(&["--checkpoint-interval-s", "3600"]);
    let c = server.client().await;
    c.batch_execute(
        "create table cp (id int primary key, v text);
         insert into cp select g, repeat('v', 100) from generate_series(1, 2000) g;",
    )
    .await
    .unwrap();
    let before = checkpoint_seq(&c).await;
    c.batch_execute("checkpoint").await.unwrap();
    assert!(
        checkpoint_seq(&c).await > before,
        "CHECKPOINT returned before a checkpoint was durable"
    );
    let pages: i64 = c
        .query_one(
            "select pages from hotledger.checkpoints order by finished_at desc limit 1",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(pages > 0, "the checkpoint wrote the table's pages");
    c.batch_execute("checkpoint; checkpoint").await.unwrap();
    c.batch_execute("insert into cp values (0, 'after')")
        .await
        .unwrap();
    drop(c);
    server.kill9_and_restart();
    let c = server.client().await;
    assert_eq!(
        scalar(&c, "select count(*) from cp").await.as_deref(),
        Some("2001")
    );
}

async fn checkpoint_seq(c: &tokio_postgres::Client) -> u64 {
    common::stat_fields(&scalar(c, "show storage_stats").await.unwrap())["checkpoint_seq"]
}

/// Waits (at most 20 s) until a checkpoint newer than the current one has completed, so what
/// was applied before the call is recovered from it rather than from the log.
async fn wait_for_checkpoint(c: &tokio_postgres::Client) {
    let start = checkpoint_seq(c).await;
    for _ in 0..100 {
        if checkpoint_seq(c).await > start {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("no checkpoint within 20 s");
}
