//! One transaction state machine, whatever the client sends: the same scripts of raw protocol
//! messages (simple queries, Parse/Bind/Describe/Execute with errors at each step, pipelines
//! with and without BEGIN, Flush, COPY, dropped connections) run against hotledger and
//! against PostgreSQL 15, and every reply — each ReadyForQuery's status, each error's
//! SQLSTATE, each row — and the rows left afterwards must be the same.

mod common;

use common::wire::{bind, parse, statement, Send, Wire};
use common::{Postgres, TestServer, PASSWORD};

/// One step of a script.
enum Step {
    /// Messages in one write; replies through the ReadyForQuery of each Sync and Query.
    Round(Vec<Send>),
    /// Messages in one write (ending with a Flush); replies through the first CommandComplete.
    UntilComplete(Vec<Send>),
    /// Messages in one write, then the connection drops without a Terminate; a new one follows.
    SendAndDrop(Vec<Send>),
}

use Step::*;

fn q(sql: &str) -> Send {
    Send::Query(sql.to_string())
}

fn insert(id: i32) -> Vec<Send> {
    statement("insert into w values ($1)", &[&id.to_string()])
}

/// Parse, Bind, Describe of the portal, Execute: what libpq sends per statement.
fn described(sql: &str, params: &[&str]) -> Vec<Send> {
    vec![
        parse(sql),
        bind(params),
        Send::DescribePortal,
        Send::Execute,
    ]
}

/// Statements followed by one Sync: a pipeline.
fn pipeline(statements: Vec<Vec<Send>>) -> Step {
    let mut messages: Vec<Send> = statements.into_iter().flatten().collect();
    messages.push(Send::Sync);
    Round(messages)
}

/// One statement and its Sync.
fn synced(messages: Vec<Send>) -> Step {
    pipeline(vec![messages])
}

fn scripts() -> Vec<(&'static str, Vec<Step>)> {
    let three: Vec<Option<String>> = ["1", "2", "3"].map(|v| Some(v.to_string())).into();
    let two_formats_for_three = Send::BindFormats(String::new(), three, vec![0, 0]);
    vec![
        (
            "a Bind with two parameter formats for three parameters is an error, and the session goes on",
            vec![
                Round(vec![
                    parse("select $1::int + $2::int + $3::int"),
                    two_formats_for_three.clone(),
                    Send::Execute,
                    Send::Sync,
                ]),
                Round(vec![q("begin")]),
                synced(insert(1)),
                Round(vec![
                    parse("select $1::int + $2::int + $3::int"),
                    two_formats_for_three,
                    Send::Execute,
                    Send::Sync,
                ]),
                Round(vec![q("commit")]),
                synced(insert(2)),
            ],
        ),
        (
            "an error at Parse fails the block",
            vec![
                Round(vec![q("begin")]),
                synced(insert(1)),
                synced(statement("select * from nope where id = $1", &["1"])),
                synced(statement("select 1", &[])),
                synced(insert(2)),
                Round(vec![q("commit")]),
            ],
        ),
        (
            "an error at Bind fails the block",
            vec![
                Round(vec![q("begin")]),
                synced(insert(1)),
                synced(statement("insert into w values ($1)", &["abc"])),
                synced(vec![
                    parse("insert into w values ($1)"),
                    bind(&[]),
                    Send::Execute,
                ]),
                synced(statement("select 1", &[])),
                Round(vec![q("commit")]),
            ],
        ),
        (
            "an error at Describe fails the block",
            vec![
                Round(vec![q("begin")]),
                synced(insert(1)),
                Round(vec![Send::DescribeStatement("nope".into()), Send::Sync]),
                synced(statement("select 1", &[])),
                Round(vec![q("commit")]),
            ],
        ),
        (
            "an error at Execute fails the block and the pipeline skips to Sync",
            vec![
                Round(vec![q("begin")]),
                pipeline(vec![insert(1), insert(1), insert(2)]),
                synced(statement("select 1", &[])),
                synced(vec![
                    parse("select id from w"),
                    bind(&[]),
                    Send::DescribePortal,
                    Send::Execute,
                ]),
                Round(vec![q("commit")]),
            ],
        ),
        (
            "a failed block takes only ROLLBACK TO and COMMIT",
            vec![
                Round(vec![q("begin")]),
                synced(statement("savepoint a", &[])),
                synced(insert(1)),
                synced(insert(1)),
                synced(statement("select 1", &[])),
                Round(vec![
                    Send::Parse("named".into(), "select 2".into()),
                    Send::Sync,
                ]),
                synced(statement("rollback to savepoint a", &[])),
                synced(insert(3)),
                synced(statement("commit", &[])),
            ],
        ),
        (
            "a named statement prepared before the failure is refused at Bind",
            vec![
                Round(vec![
                    Send::Parse("ins".into(), "insert into w values ($1)".into()),
                    Send::Sync,
                ]),
                Round(vec![q("begin")]),
                synced(insert(1)),
                synced(insert(1)),
                Round(vec![
                    Send::Bind("ins".into(), vec![Some("5".into())]),
                    Send::Execute,
                    Send::Sync,
                ]),
                Round(vec![q("commit")]),
            ],
        ),
        (
            "a pipeline without BEGIN is one transaction",
            vec![pipeline(vec![insert(1), insert(2), insert(1), insert(3)])],
        ),
        (
            "a pipeline's statements see each other and commit at Sync",
            vec![pipeline(vec![
                insert(1),
                insert(2),
                statement("select count(*) from w", &[]),
            ])],
        ),
        (
            "a Bind error rolls back the whole pipeline",
            vec![pipeline(vec![
                insert(1),
                statement("insert into w values ($1)", &["abc"]),
                insert(2),
            ])],
        ),
        (
            "BEGIN in a pipeline takes in the statements before it",
            vec![
                pipeline(vec![insert(1), statement("begin", &[]), insert(2)]),
                Round(vec![q("rollback")]),
            ],
        ),
        (
            "COMMIT in a pipeline commits what came before it",
            vec![pipeline(vec![
                insert(1),
                statement("commit", &[]),
                insert(1),
            ])],
        ),
        (
            "a Flush does not end the pipeline's transaction",
            vec![
                UntilComplete(
                    insert(1)
                        .into_iter()
                        .chain([Send::Flush])
                        .collect::<Vec<_>>(),
                ),
                synced(insert(1)),
            ],
        ),
        (
            "each Sync ends a transaction",
            vec![Round(
                [
                    insert(1),
                    vec![Send::Sync],
                    insert(1),
                    vec![Send::Sync],
                    insert(2),
                    vec![Send::Sync],
                ]
                .concat(),
            )],
        ),
        (
            "the statements of one Query are one transaction",
            vec![
                Round(vec![q(
                    "insert into w values (1); insert into w values (1); insert into w values (2)",
                )]),
                Round(vec![q("insert into w values (3); select 1/0")]),
                Round(vec![q(
                    "insert into w values (4); insert into w values (5)",
                )]),
            ],
        ),
        (
            "BEGIN and COMMIT among the statements of one Query",
            vec![
                Round(vec![q(
                    "insert into w values (1); commit; insert into w values (1)",
                )]),
                Round(vec![q(
                    "begin; insert into w values (2); select 1/0; insert into w values (3)",
                )]),
                Round(vec![q("select 1")]),
                Round(vec![q("commit")]),
                Round(vec![q(
                    "insert into w values (6); begin; insert into w values (7)",
                )]),
                Round(vec![q("rollback")]),
            ],
        ),
        (
            "bad COPY data fails the block",
            vec![
                Round(vec![q("begin")]),
                Round(vec![
                    q("copy w from stdin"),
                    Send::CopyData(b"1\nabc\n".to_vec()),
                    Send::CopyDone,
                ]),
                Round(vec![q("select 1")]),
                Round(vec![q("commit")]),
            ],
        ),
        (
            "CopyFail fails the block",
            vec![
                Round(vec![q("begin")]),
                synced(insert(1)),
                Round(vec![
                    q("copy w from stdin"),
                    Send::CopyData(b"2\n".to_vec()),
                    Send::CopyFail("the client gave up".into()),
                ]),
                Round(vec![q("commit")]),
            ],
        ),
        (
            "COPY in a block commits with it",
            vec![
                Round(vec![q("begin")]),
                Round(vec![
                    q("copy w from stdin"),
                    Send::CopyData(b"1\n2\n".to_vec()),
                    Send::CopyDone,
                ]),
                Round(vec![q("commit")]),
            ],
        ),
        (
            "protocol statements and PREPARE share one namespace, which DISCARD ALL empties",
            vec![
                Round(vec![
                    Send::Parse("a".into(), "select 1 + $1::int".into()),
                    Send::Sync,
                ]),
                Round(vec![q("execute a(2)")]),
                Round(vec![q("prepare b as select 10")]),
                Round(vec![
                    Send::Bind("b".into(), vec![]),
                    Send::Execute,
                    Send::Sync,
                ]),
                Round(vec![Send::Parse("b".into(), "select 2".into()), Send::Sync]),
                Round(vec![q("deallocate a")]),
                Round(vec![
                    Send::Bind("a".into(), vec![Some("1".into())]),
                    Send::Execute,
                    Send::Sync,
                ]),
                Round(vec![q("discard all")]),
                Round(vec![
                    Send::Bind("b".into(), vec![]),
                    Send::Execute,
                    Send::Sync,
                ]),
                Round(vec![
                    Send::Parse("b".into(), "select 3".into()),
                    Send::Bind("b".into(), vec![]),
                    Send::Execute,
                    Send::Sync,
                ]),
            ],
        ),
        (
            "EXECUTE through the extended protocol is described by its statement's columns",
            vec![
                Round(vec![q("prepare two as select 1 as x, 'a' as y")]),
                synced(vec![
                    parse("execute two"),
                    bind(&[]),
                    Send::DescribePortal,
                    Send::Execute,
                ]),
                Round(vec![
                    Send::Parse("ex".into(), "execute two".into()),
                    Send::DescribeStatement("ex".into()),
                    Send::Sync,
                ]),
            ],
        ),
        (
            "a read-only session refuses writes, alone, in a pipeline and in a block",
            vec![
                Round(vec![q("set default_transaction_read_only = on")]),
                Round(vec![q("show transaction_read_only")]),
                Round(vec![q("insert into w values (1)")]),
                synced(insert(2)),
                Round(vec![q("create table w2 (a int)")]),
                Round(vec![q("select id from w for update")]),
                Round(vec![q("begin")]),
                Round(vec![q("delete from w")]),
                Round(vec![q("rollback")]),
                Round(vec![q("begin read write")]),
                Round(vec![q("show transaction_read_only")]),
                synced(insert(3)),
                Round(vec![q("commit")]),
                Round(vec![q("set default_transaction_read_only = off")]),
                synced(insert(4)),
            ],
        ),
        (
            "SET TRANSACTION READ ONLY, and READ WRITE only before the first query",
            vec![
                Round(vec![q("begin")]),
                Round(vec![q("set transaction read only")]),
                Round(vec![q("show transaction_read_only")]),
                synced(insert(1)),
                Round(vec![q("rollback")]),
                Round(vec![q("begin read only")]),
                Round(vec![q("set transaction read write")]),
                synced(insert(2)),
                Round(vec![q("commit")]),
                Round(vec![q("begin read only")]),
                Round(vec![q("select count(*) from w")]),
                Round(vec![q("set transaction read write")]),
                Round(vec![q("rollback")]),
                Round(vec![q("begin")]),
                Round(vec![q("set transaction_read_only = on")]),
                Round(vec![q("update w set id = 5")]),
                Round(vec![q("rollback")]),
                Round(vec![q(
                    "set session characteristics as transaction read only",
                )]),
                Round(vec![q("insert into w values (6)")]),
                Round(vec![q("set default_transaction_read_only = bogus")]),
            ],
        ),
        (
            "statements outside a block, Bind, Describe, Execute and Sync in one write each",
            vec![
                synced(insert(1)),
                synced(described("select id from w where id = $1", &["1"])),
                synced(described("select id from w where id = $1", &["x"])),
                synced(described(
                    "select 10 / (id - $1) from w where id = 1",
                    &["1"],
                )),
                synced(insert(1)),
                synced(described("update w set id = id + 1 where id = $1", &["1"])),
                synced(described(
                    "delete from w where id = $1 returning id",
                    &["2"],
                )),
                synced(insert(3)),
                synced(described(
                    "select id from w where id >= $1 order by id",
                    &["0"],
                )),
            ],
        ),
        (
            "a dropped connection applies nothing of its block",
            vec![
                Round(vec![q("begin")]),
                synced(insert(1)),
                SendAndDrop(insert(2)),
            ],
        ),
        (
            "a connection dropped before Sync applies nothing of its pipeline",
            vec![SendAndDrop(
                insert(1).into_iter().chain(insert(2)).collect(),
            )],
        ),
    ]
}

/// Runs every script on a fresh table, returning its transcript: every reply, then the rows
/// left in the table.
fn transcripts(port: u16, user: &str, password: &str, database: &str) -> Vec<Vec<String>> {
    let connect = || Wire::connect(port, user, password, database);
    let mut all = Vec::new();
    for (name, steps) in scripts() {
        let mut setup = connect();
        setup.round(&[q("drop table if exists w")]);
        setup.round(&[q("create table w (id int primary key)")]);
        let mut transcript = vec![format!("== {name}")];
        let mut wire = connect();
        for step in steps {
            match step {
                Round(messages) => transcript.extend(wire.round(&messages)),
                UntilComplete(messages) => {
                    wire.send(&messages);
                    transcript.extend(wire.replies_until(|r| r.starts_with("Complete")));
                }
                SendAndDrop(messages) => {
                    wire.send(&messages);
                    std::mem::replace(&mut wire, connect()).drop_connection();
                    transcript.push("dropped".into());
                }
            }
        }
        // A dropped connection's transaction may still be ending on the server.
        std::thread::sleep(std::time::Duration::from_millis(100));
        transcript.push("rows left:".into());
        transcript.extend(setup.round(&[q("select id from w order by id")]));
        all.push(transcript);
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_end_as_in_postgres_whatever_the_client_sends() {
    let postgres = Postgres::start();
    let expected = transcripts(postgres.port, "postgres", "", "postgres");
    let server = TestServer::start();
    let got = transcripts(server.port, "ledger", PASSWORD, "ledger");
    let mut differences = Vec::new();
    for (pg, hl) in expected.iter().zip(&got) {
        if pg != hl {
            differences.push(format!(
                "PostgreSQL:\n  {}\nhotledger:\n  {}",
                pg.join("\n  "),
                hl.join("\n  ")
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} scripts differ:\n{}\nserver log:\n{}",
        differences.len(),
        expected.len(),
        differences.join("\n\n"),
        server.log()
    );
    // The comparison means something only if the scripts did what they say: spot-check
    // PostgreSQL's own answers.
    let find = |name: &str| {
        expected
            .iter()
            .find(|t| t[0].ends_with(name))
            .expect("script ran")
    };
    let parse_error = find("an error at Parse fails the block");
    assert!(parse_error.contains(&"Error 42P01".to_string()));
    assert!(parse_error.contains(&"Error 25P02".to_string()));
    assert!(parse_error.contains(&"Complete ROLLBACK".to_string()));
    assert_eq!(parse_error.last().map(String::as_str), Some("Ready I"));
    let formats = find("a Bind with two parameter formats for three parameters is an error, and the session goes on");
    assert!(formats.contains(&"Error 08P01".to_string()));
    assert!(formats.contains(&"Ready E".to_string()));
    let pipeline = find("a pipeline's statements see each other and commit at Sync");
    assert!(pipeline.contains(&"Row 2".to_string()));
    assert!(pipeline.ends_with(&[
        "Row 1".into(),
        "Row 2".into(),
        "Complete SELECT 2".into(),
        "Ready I".into()
    ]));
}

/// A stored procedure called inside a transaction (a block, or with other statements before
/// a Sync) runs its body in that transaction, as PostgreSQL runs it: ROLLBACK takes it back,
/// a failure anywhere applies none of it. Ledger transfers (`CALL transfer`) likewise: in a
/// pipeline they are staged with the rest and commit or fail whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn procedures_and_transfers_inside_transactions() {
    let server = TestServer::start();
    let mut wire = Wire::connect(server.port, "ledger", PASSWORD, "ledger");
    wire.round(&[q(
        "create table wallet (id int primary key, balance bigint not null check (balance >= 0))",
    )]);
    wire.round(&[q("insert into wallet values (1, 0)")]);
    wire.round(&[q(
        "create procedure bump(n bigint) language sql as $$ update wallet set balance = balance + n where id = 1; select balance from wallet where id = 1 $$",
    )]);
    let balance = |wire: &mut Wire| wire.round(&[q("select balance from wallet")]);
    // In a block: the body sees the block's own writes; ROLLBACK takes it back.
    let replies = wire.round(&[
        q("begin"),
        q("call bump(5)"),
        q("call bump(2)"),
        q("rollback"),
    ]);
    assert_eq!(
        replies,
        [
            "Complete BEGIN",
            "Ready T",
            "RowDescription 1",
            "Row 5",
            "Complete CALL 1",
            "Ready T",
            "RowDescription 1",
            "Row 7",
            "Complete CALL 1",
            "Ready T",
            "Complete ROLLBACK",
            "Ready I"
        ]
    );
    assert!(balance(&mut wire).contains(&"Row 0".to_string()));
    // Two CALLs before one Sync: one transaction, committed at the Sync.
    let mut messages = [
        statement("call bump(5)", &[]),
        statement("call bump(5)", &[]),
    ]
    .concat();
    messages.push(Send::Sync);
    let replies = wire.round(&messages);
    assert_eq!(
        replies.last().map(String::as_str),
        Some("Ready I"),
        "{replies:?}"
    );
    assert!(balance(&mut wire).contains(&"Row 10".to_string()));
    // The second one fails (the balance would go below zero): neither applies.
    let mut messages = [
        statement("call bump(5)", &[]),
        statement("call bump(-100)", &[]),
    ]
    .concat();
    messages.push(Send::Sync);
    let replies = wire.round(&messages);
    assert!(replies.contains(&"Error 23514".to_string()), "{replies:?}");
    assert!(balance(&mut wire).contains(&"Row 10".to_string()));
    // Alone before its Sync, it is applied as one command, as before.
    let mut messages = statement("call bump(1)", &[]);
    messages.push(Send::Sync);
    assert_eq!(
        wire.round(&messages),
        [
            "ParseComplete",
            "BindComplete",
            "Row 11",
            "Complete CALL 1",
            "Ready I"
        ]
    );

    // Two transfers in one pipeline, the second an overdraft: neither is applied.
    wire.round(&[q(
        "insert into accounts (id, ledger, code, debits_must_not_exceed_credits) values (1, 700, 10, false), (2, 700, 10, true)",
    )]);
    let mut messages = [
        statement("call transfer(1001, 1, 2, 5, 700, 1)", &[]),
        statement("call transfer(1002, 2, 1, 100, 700, 1)", &[]),
    ]
    .concat();
    messages.push(Send::Sync);
    let replies = wire.round(&messages);
    assert_eq!(
        replies.last().map(String::as_str),
        Some("Ready I"),
        "{replies:?}"
    );
    assert!(replies.contains(&"Error 23514".to_string()), "{replies:?}");
    let left = wire.round(&[q("select count(*) from transfers")]);
    assert!(left.contains(&"Row 0".to_string()), "{left:?}");
    let posted = wire.round(&[q("select debits_posted from accounts where id = 1")]);
    assert!(posted.contains(&"Row 0".to_string()), "{posted:?}");
}
