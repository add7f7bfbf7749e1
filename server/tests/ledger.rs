//! The ledger under concurrency, against the real server: 64 connections doing random
//! transfers among 1,000 accounts, half of them touching one hot account, with limits,
//! idempotent retries and two-phase transfers mixed in, on 1 and on 4 executor partitions.
//! Afterwards, and again after a kill -9 and restart: debits equal credits, no limit is
//! broken, every acknowledged transfer is present exactly once and nothing else is, and
//! every balance equals the sum of the transfers that moved it. A stored procedure survives
//! the kill -9 too. And one scripted session run on 1 and on 4 partitions gives identical
//! results, statement by statement and table by table; multi-row transfer statements over
//! large trees find their leaves ahead and stay exact, also split across partitions from
//! several connections at once.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use common::{stat_fields, TestServer};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::Mutex;
use tokio_postgres::{Client, NoTls};

const ACCOUNTS: i64 = 1_000;
const HOT: i64 = 1;
const BANK: i64 = ACCOUNTS + 1;
const CLIENTS: usize = 64;
const TRANSFERS_PER_CLIENT: usize = 60;

async fn connect(server: &TestServer) -> Client {
    let (client, connection) = tokio_postgres::connect(&server.url(), NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
}

/// Accounts 2..=1000 with an even id may not go below zero; the bank funds them.
async fn create_accounts(client: &Client) {
    let mut values = Vec::new();
    for id in 1..=BANK {
        let limited = id != HOT && id != BANK && id % 2 == 0;
        values.push(format!("({id}, 1, 1, {limited})"));
    }
    client
        .simple_query(&format!(
            "INSERT INTO accounts (id, ledger, code, debits_must_not_exceed_credits) VALUES {}",
            values.join(", ")
        ))
        .await
        .expect("create accounts");
    let funding: Vec<String> = (2..=ACCOUNTS)
        .filter(|id| id % 2 == 0)
        .map(|id| format!("({}, {BANK}, {id}, 100, 1, 1)", 900_000_000 + id))
        .collect();
    insert_transfers(client, &funding)
        .await
        .expect("fund accounts");
}

/// Accounts `ids` on ledger 1 with code 1 and no limits, in one statement.
async fn insert_accounts(client: &Client, ids: impl Iterator<Item = i64>) {
    let rows: Vec<String> = ids.map(|id| format!("({id}, 1, 1)")).collect();
    client
        .simple_query(&format!(
            "INSERT INTO accounts (id, ledger, code) VALUES {}",
            rows.join(", ")
        ))
        .await
        .expect("accounts");
}

/// One multi-row INSERT of transfers, each row `(id, debit, credit, amount, ledger, code)`.
async fn insert_transfers(
    client: &Client,
    rows: &[String],
) -> Result<Vec<tokio_postgres::SimpleQueryMessage>, tokio_postgres::Error> {
    client
        .simple_query(&format!(
            "INSERT INTO transfers (id, debit_account_id, credit_account_id, amount, ledger, code) VALUES {}",
            rows.join(", ")
        ))
        .await
}

#[derive(Default)]
struct Acknowledged {
    ids: BTreeSet<i64>,
    rejected_by_limits: u64,
}

async fn run_client(server_url: String, n: usize, seen: Arc<Mutex<Acknowledged>>) {
    let (client, connection) = tokio_postgres::connect(&server_url, NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    let call = client
        .prepare("CALL transfer($1, $2, $3, $4::bigint, 1, 1)")
        .await
        .expect("prepare transfer");
    let pending = client
        .prepare("CALL transfer($1, $2, $3, $4::bigint, 1, 1, pending => true)")
        .await
        .expect("prepare pending");
    let resolve = client
        .prepare(
            "CALL transfer(id => $1, pending_id => $2, post_pending => $3, void_pending => NOT $3)",
        )
        .await
        .expect("prepare post/void");
    let mut rng = StdRng::seed_from_u64(n as u64);
    let mut mine = Acknowledged::default();
    for i in 0..TRANSFERS_PER_CLIENT {
        let id = (n as i64 + 1) * 1_000_000 + i as i64 * 10;
        let other = rng.gen_range(2..=ACCOUNTS);
        let (debit, credit) = if rng.gen_bool(0.5) {
            if rng.gen_bool(0.5) {
                (HOT, other)
            } else {
                (other, HOT)
            }
        } else {
            let mut second = rng.gen_range(2..=ACCOUNTS);
            if second == other {
                second = if other == ACCOUNTS { 2 } else { other + 1 };
            }
            (other, second)
        };
        let amount: i64 = rng.gen_range(1..=60);
        let two_phase = rng.gen_bool(0.1);
        let statement = if two_phase { &pending } else { &call };
        match client
            .query_one(statement, &[&id, &debit, &credit, &amount])
            .await
        {
            Ok(row) => {
                let status: String = row.get(1);
                assert_eq!(status, "created", "transfer {id}");
                mine.ids.insert(id);
            }
            Err(e) => {
                let code = e.code().map(|c| c.code().to_string());
                assert_eq!(
                    code.as_deref(),
                    Some("23514"),
                    "transfer {id} failed unexpectedly: {e:?}"
                );
                assert!(
                    e.as_db_error()
                        .is_some_and(|d| d.message().contains(&format!("account {debit}"))),
                    "an overdraft error names the debit account: {e:?}"
                );
                mine.rejected_by_limits += 1;
                continue;
            }
        }
        if two_phase {
            let post = rng.gen_bool(0.5);
            let row = client
                .query_one(&resolve, &[&(id + 1), &id, &post])
                .await
                .unwrap_or_else(|e| panic!("resolving pending transfer {id}: {e:?}"));
            assert_eq!(row.get::<_, String>(1), "created");
            mine.ids.insert(id + 1);
        }
        // A retry of an acknowledged transfer is answered, and applies nothing.
        if rng.gen_bool(0.1) {
            let row = client
                .query_one(&call, &[&id, &debit, &credit, &amount])
                .await;
            if !two_phase {
                let row = row.unwrap_or_else(|e| panic!("retrying transfer {id}: {e:?}"));
                assert_eq!(row.get::<_, String>(1), "exists", "retry of {id}");
            } else {
                // The retry differs (it is not pending): refused, naming the field.
                let e = row.expect_err("a retry with different fields must fail");
                assert_eq!(e.code().map(|c| c.code()), Some("23505"), "{e:?}");
            }
        }
    }
    let mut all = seen.lock().await;
    all.ids.extend(mine.ids);
    all.rejected_by_limits += mine.rejected_by_limits;
}

async fn scalar(client: &Client, sql: &str) -> i64 {
    let rows = client.simple_query(sql).await.expect(sql);
    rows.iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(|v| v.parse().unwrap()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no value from {sql}"))
}

/// Every invariant of the ledger, checked over SQL.
async fn check_ledger(client: &Client, acknowledged: &BTreeSet<i64>) {
    let debits = scalar(client, "SELECT sum(debits_posted) FROM accounts").await;
    let credits = scalar(client, "SELECT sum(credits_posted) FROM accounts").await;
    assert_eq!(debits, credits, "posted debits and credits differ");
    let pending = scalar(
        client,
        "SELECT sum(debits_pending) + sum(credits_pending) FROM accounts",
    )
    .await;
    assert_eq!(pending, 0, "every pending transfer was resolved");
    let broken = scalar(
        client,
        "SELECT count(*) FROM accounts WHERE debits_must_not_exceed_credits AND debits_pending + debits_posted > credits_posted",
    )
    .await;
    assert_eq!(broken, 0, "an account's limit is broken");

    let rows = client
        .query(
            "SELECT id FROM transfers WHERE id < 900000000 ORDER BY id",
            &[],
        )
        .await
        .expect("transfer ids");
    let stored: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
    let expected: Vec<i64> = acknowledged.iter().copied().collect();
    assert_eq!(
        stored.len(),
        expected.len(),
        "stored transfers differ in number from acknowledged ones"
    );
    assert_eq!(
        stored, expected,
        "stored transfers are not the acknowledged ones"
    );

    // Each account's posted balances are the sums of the transfers that posted to it.
    let mismatched = scalar(
        client,
        "SELECT count(*) FROM accounts a WHERE a.debits_posted <> (SELECT coalesce(sum(t.amount), 0) FROM transfers t WHERE t.debit_account_id = a.id AND NOT t.pending AND NOT t.void_pending) OR a.credits_posted <> (SELECT coalesce(sum(t.amount), 0) FROM transfers t WHERE t.credit_account_id = a.id AND NOT t.pending AND NOT t.void_pending)",
    )
    .await;
    assert_eq!(mismatched, 0, "balances disagree with the transfers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_transfers_keep_the_ledger_consistent_on_one_partition() {
    concurrent_transfers(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_transfers_keep_the_ledger_consistent_on_four_partitions() {
    concurrent_transfers(4).await;
}

/// Runs with as many session threads as partitions, so the clients' sessions are spread over
/// several threads that call into the executors at once.
async fn concurrent_transfers(partitions: u32) {
    let count = partitions.to_string();
    let mut server = TestServer::start_with(&["--partitions", &count, "--session-threads", &count]);
    let admin = connect(&server).await;
    create_accounts(&admin).await;

    let seen = Arc::new(Mutex::new(Acknowledged::default()));
    let mut tasks = Vec::new();
    for n in 0..CLIENTS {
        tasks.push(tokio::spawn(run_client(server.url(), n, seen.clone())));
    }
    for t in tasks {
        t.await.expect("client task");
    }
    let seen = seen.lock().await;
    assert!(
        seen.ids.len() > CLIENTS * TRANSFERS_PER_CLIENT / 2,
        "most transfers should succeed: {} acknowledged, {} refused by limits",
        seen.ids.len(),
        seen.rejected_by_limits
    );
    check_ledger(&admin, &seen.ids).await;
    let hot = scalar(
        &admin,
        &format!("SELECT count(*) FROM transfers WHERE debit_account_id = {HOT} OR credit_account_id = {HOT}"),
    )
    .await;
    assert!(hot > 1_000, "the hot account took part in {hot} transfers");
    // A stored procedure is part of the replicated, checkpointed state too.
    admin
        .simple_query(&format!(
            "CREATE PROCEDURE hot_net() LANGUAGE sql AS $$ SELECT credits_posted - debits_posted FROM accounts WHERE id = {HOT} $$"
        ))
        .await
        .expect("create procedure");
    let before = scalar(&admin, "CALL hot_net()").await;
    drop(admin);

    server.kill9_and_restart();
    let admin = connect(&server).await;
    check_ledger(&admin, &seen.ids).await;
    assert_eq!(scalar(&admin, "CALL hot_net()").await, before);
}

/// `create_transfers` from a driver: arrays as binary parameters (tokio-postgres sends
/// `bigint[]`, `integer[]` and `boolean[]` in PostgreSQL's binary array format), a thousand
/// transfers in one command, one result row each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_transfers_takes_binary_arrays() {
    let server = TestServer::start();
    let client = connect(&server).await;
    client
        .simple_query("INSERT INTO accounts (id, ledger, code) VALUES (1, 1, 1), (2, 1, 1)")
        .await
        .expect("accounts");
    let batch = client
        .prepare(
            "CALL create_transfers(id => $1, debit_account_id => $2, credit_account_id => $3, amount => $4::bigint[], ledger => $5, code => $6, linked => $7)",
        )
        .await
        .expect("prepare");
    let n = 1_000;
    let ids: Vec<i64> = (1..=n).collect();
    let debits = debits_of(n);
    // Transfer 500 names a missing account; it is linked with 499, so both fail.
    let mut credits = credits_of(n);
    credits[499] = 99;
    let amounts: Vec<i64> = (1..=n).collect();
    let ledgers: Vec<i32> = vec![1; n as usize];
    let codes: Vec<i32> = vec![7; n as usize];
    let mut linked: Vec<bool> = vec![false; n as usize];
    linked[498] = true;
    let rows = client
        .query(
            &batch,
            &[&ids, &debits, &credits, &amounts, &ledgers, &codes, &linked],
        )
        .await
        .expect("create_transfers");
    assert_eq!(rows.len(), n as usize);
    let status = |i: usize| rows[i].get::<_, String>("status");
    let result = |i: usize| rows[i].get::<_, String>("result");
    assert_eq!(status(0), "created");
    assert_eq!(status(498), "failed");
    assert_eq!(result(498), "linked_event_failed");
    assert_eq!(status(499), "failed");
    assert_eq!(result(499), "credit_account_not_found");
    assert_eq!(
        rows[499].get::<_, Option<String>>("sqlstate").as_deref(),
        Some("23503")
    );
    assert_eq!(status(500), "created");
    let created = rows
        .iter()
        .filter(|r| r.get::<_, String>("status") == "created")
        .count();
    assert_eq!(created, n as usize - 2);
    let stored = scalar(&client, "SELECT count(*) FROM transfers").await;
    assert_eq!(stored, n - 2);
    let debited = scalar(&client, "SELECT sum(debits_posted) FROM accounts").await;
    let credited = scalar(&client, "SELECT sum(credits_posted) FROM accounts").await;
    assert_eq!(debited, credited);
    assert_eq!(debited, n * (n + 1) / 2 - 499 - 500);

    // The same batch again: every transfer that was created now exists.
    let rows = client
        .query(
            &batch,
            &[
                &ids,
                &debits_of(n),
                &credits_of(n),
                &amounts,
                &ledgers,
                &codes,
                &vec![false; n as usize],
            ],
        )
        .await
        .expect("retry");
    let exists = rows
        .iter()
        .filter(|r| r.get::<_, String>("status") == "exists")
        .count();
    assert_eq!(exists, n as usize - 2);
}

fn debits_of(n: i64) -> Vec<i64> {
    (1..=n).map(|i| if i % 2 == 0 { 1 } else { 2 }).collect()
}

fn credits_of(n: i64) -> Vec<i64> {
    debits_of(n).iter().map(|d| 3 - d).collect()
}

/// A pending transfer's timeout is part of the durable state: after a kill -9 and restart the
/// transfer is still pending until its time passes, then the next command voids it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_timeout_survives_kill9() {
    let mut server = TestServer::start();
    let client = connect(&server).await;
    client
        .simple_query(
            "INSERT INTO accounts (id, ledger, code) VALUES (1, 1, 1), (2, 1, 1);
             CALL transfer(id => 10, debit_account_id => 1, credit_account_id => 2, amount => 7,
                           ledger => 1, code => 1, pending => true, timeout => 3)",
        )
        .await
        .expect("pending transfer");
    drop(client);
    server.kill9_and_restart();
    let client = connect(&server).await;
    let pending = scalar(&client, "SELECT debits_pending FROM accounts WHERE id = 1").await;
    assert_eq!(pending, 7, "still reserved right after the restart");
    tokio::time::sleep(std::time::Duration::from_millis(3_500)).await;
    client
        .simple_query("CALL transfer(11, 2, 1, 1, 1, 1)")
        .await
        .expect("a later transfer");
    let pending = scalar(&client, "SELECT debits_pending FROM accounts WHERE id = 1").await;
    assert_eq!(pending, 0, "the timeout voided the pending transfer");
    let expired = scalar(
        &client,
        "SELECT count(*) FROM pending_transfers WHERE id = 10 AND status = 'expired'",
    )
    .await;
    assert_eq!(expired, 1);
}

/// One session's statements, their outcomes (rows, or SQLSTATE and message) and the final
/// tables, without the columns that hold the wall clock.
async fn scripted_session(client: &Client) -> Vec<String> {
    let mut statements: Vec<String> = Vec::new();
    let mut accounts = Vec::new();
    for id in 1..=200i64 {
        let limited = id % 3 == 0;
        let history = id % 10 == 0;
        accounts.push(format!("({id}, 1, 1, {limited}, {history}, {})", id % 7));
    }
    statements.push(format!(
        "INSERT INTO accounts (id, ledger, code, debits_must_not_exceed_credits, history, user_data) VALUES {}",
        accounts.join(", ")
    ));
    statements.push("INSERT INTO accounts (id, ledger, code) VALUES (500, 2, 1)".into());
    let mut rng = StdRng::seed_from_u64(7);
    for i in 0..600i64 {
        let id = 1_000 + i;
        let debit = rng.gen_range(1..=200i64);
        let credit = rng.gen_range(1..=201i64); // 201 does not exist
        let amount = rng.gen_range(1..=40i64);
        statements.push(match rng.gen_range(0..10) {
            0 => format!("CALL transfer({id}, {debit}, {credit}, {amount}, 1, 1, pending => true)"),
            1 => {
                let post = rng.gen_bool(0.5);
                format!(
                    "CALL transfer(id => {id}, pending_id => {}, post_pending => {post}, void_pending => {})",
                    id - rng.gen_range(1..=20),
                    !post
                )
            }
            2 => format!("CALL transfer({}, {debit}, {credit}, {amount}, 1, 1)", id - rng.gen_range(1..=30)),
            3 => format!(
                "INSERT INTO transfers (id, debit_account_id, credit_account_id, amount, ledger, code) VALUES ({id}, {debit}, {credit}, {amount}, 1, 1), ({}, {credit}, {debit}, {amount}, 1, 1)",
                id + 100_000
            ),
            4 => format!("CALL transfer({id}, {debit}, 500, {amount}, 1, 1)"),
            _ => format!("CALL transfer({id}, {debit}, {credit}, {amount}, 1, 1)"),
        });
    }
    // Statements big enough to be split across the partitions' threads (`ledger::share`):
    // posted and pending transfers among history accounts and a hot one, then each of the
    // things that make a statement apply whole instead: a row repeating an earlier one (a
    // no-op), a post, an overdraft, a ledger mismatch, a missing account, an id reused with
    // other fields.
    let mut first = Vec::new();
    for s in 0..9i64 {
        let rows: Vec<String> = (0..100i64)
            .map(|k| {
                let id = 20_000 + s * 1_000 + k;
                let debit = loop {
                    let d = rng.gen_range(1..=200i64);
                    if d % 3 != 0 {
                        break d;
                    }
                };
                let credit = if k % 3 == 0 {
                    1
                } else {
                    rng.gen_range(1..=200i64)
                };
                let credit = if credit == debit {
                    debit % 200 + 1
                } else {
                    credit
                };
                let amount = rng.gen_range(1..=5i64);
                let pending = s == 1 && k % 2 == 1;
                let row =
                    format!("({id}, {debit}, {credit}, {amount}, 1, 1, {pending}, NULL, false)");
                match (s, k) {
                    (0, _) => {
                        first.push(row.clone());
                        row
                    }
                    (2, 50) => first[10].clone(),
                    (3, 20) => format!("({id}, NULL, NULL, NULL, NULL, NULL, false, 21003, true)"),
                    (4, 70) => format!("({id}, 3, {credit}, 1000000, 1, 1, false, NULL, false)"),
                    (5, 30) => format!("({id}, {debit}, 500, {amount}, 1, 1, false, NULL, false)"),
                    (6, 99) => format!("({id}, {debit}, 201, {amount}, 1, 1, false, NULL, false)"),
                    (8, 40) => format!("(20040, {debit}, {credit}, 77, 1, 1, false, NULL, false)"),
                    _ => row,
                }
            })
            .collect();
        statements.push(format!(
            "INSERT INTO transfers (id, debit_account_id, credit_account_id, amount, ledger, code, pending, pending_id, post_pending) VALUES {}",
            rows.join(", ")
        ));
    }
    statements.push(
        "CALL create_transfers(id => ARRAY[5001, 5002, 5003, 5004], debit_account_id => ARRAY[1, 2, 3, 4], credit_account_id => ARRAY[5, 6, 999, 8], amount => ARRAY[1, 2, 3, 4], ledger => ARRAY[1, 1, 1, 1], code => ARRAY[1, 1, 1, 1], linked => ARRAY[false, true, false, false])".into(),
    );
    statements.push("UPDATE accounts SET user_data = user_data + 100 WHERE id % 4 = 1".into());
    statements.push("CREATE INDEX accounts_user_data ON accounts (user_data)".into());
    statements.push("CREATE UNIQUE INDEX accounts_code ON accounts (code)".into());
    statements.push("BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT sum(credits_posted) FROM accounts; CALL transfer(9001, 7, 8, 1, 1, 1); COMMIT".into());
    statements.push("SELECT id, user_data FROM accounts WHERE user_data = 103 ORDER BY id".into());
    statements
        .push("SELECT id, amount FROM transfers WHERE debit_account_id = 10 ORDER BY id".into());
    statements.push("SELECT transfer_id, debits_posted, credits_posted, debits_pending FROM account_balances WHERE account_id = 20 ORDER BY created_at, transfer_id".into());
    statements.push("SELECT count(*), sum(amount) FROM transfers".into());
    statements.push(
        "SELECT status, count(*) FROM pending_transfers GROUP BY status ORDER BY status".into(),
    );
    statements.push("DELETE FROM accounts WHERE id = 199".into());

    let mut outcomes = Vec::new();
    for sql in &statements {
        outcomes.push(match client.simple_query(sql).await {
            Ok(messages) => messages
                .iter()
                .map(|m| match m {
                    tokio_postgres::SimpleQueryMessage::Row(r) => (0..r.len())
                        .map(|i| r.get(i).unwrap_or("NULL").to_string())
                        .collect::<Vec<_>>()
                        .join("|"),
                    tokio_postgres::SimpleQueryMessage::CommandComplete(n) => format!("done {n}"),
                    _ => String::new(),
                })
                .collect::<Vec<_>>()
                .join(";"),
            Err(e) => match e.as_db_error() {
                Some(d) => format!("error {} {}", d.code().code(), d.message()),
                None => format!("error {e}"),
            },
        });
        // An error inside the transaction block leaves it open: close it.
        let _ = client.simple_query("ROLLBACK").await;
    }
    outcomes.extend(table_dump(client).await);
    outcomes
}

async fn table_dump(client: &Client) -> Vec<String> {
    let mut dump = Vec::new();
    for sql in [
        "SELECT id, ledger, code, debits_pending, debits_posted, credits_pending, credits_posted, user_data FROM accounts ORDER BY id",
        "SELECT id, debit_account_id, credit_account_id, amount, pending, pending_id, post_pending, void_pending FROM transfers ORDER BY id",
        "SELECT id, status, resolved_by FROM pending_transfers ORDER BY id",
        "SELECT account_id, transfer_id, debits_pending, debits_posted, credits_pending, credits_posted FROM account_balances ORDER BY account_id, created_at, transfer_id",
        // The order the ledger created them in, which their timestamps give (the values
        // themselves follow each server's clock).
        "SELECT id FROM accounts ORDER BY timestamp, id",
        "SELECT id FROM transfers ORDER BY timestamp, id",
    ] {
        for row in client.query(sql, &[]).await.expect(sql) {
            dump.push(format!("{row:?}"));
        }
        dump.push(format!("-- end of {sql}"));
    }
    dump
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_and_four_partitions_give_identical_results() {
    let mut one = TestServer::start_with(&["--partitions", "1"]);
    let mut four = TestServer::start_with(&["--partitions", "4"]);
    let on_one = scripted_session(&connect(&one).await).await;
    let on_four = scripted_session(&connect(&four).await).await;
    assert!(
        on_one.iter().any(|o| o.starts_with("error 23514")),
        "the script tests overdrafts"
    );
    assert!(
        on_one.iter().any(|o| o.starts_with("error 23505")),
        "and idempotency conflicts"
    );
    assert_eq!(on_one.len(), on_four.len());
    for (i, (a, b)) in on_one.iter().zip(&on_four).enumerate() {
        assert_eq!(a, b, "outcome {i} differs between 1 and 4 partitions");
    }
    // Some commands ran on a partition's own thread, the rest on the coordinator.
    let stats = routing_stats(&connect(&four).await).await;
    assert_eq!(stats["partitions"], 4, "{stats:?}");
    assert!(stats["commands_on_partition_threads"] > 0, "{stats:?}");
    assert!(stats["commands_on_coordinator"] > 0, "{stats:?}");
    assert_eq!(stats["commands_split"], 3, "{stats:?}");
    let stats = routing_stats(&connect(&one).await).await;
    assert_eq!(stats["commands_split"], 0, "{stats:?}");
    assert_eq!(stats["partitions"], 1, "{stats:?}");
    assert_eq!(stats["commands_on_partition_threads"], 0, "{stats:?}");
    assert!(stats["commands_on_coordinator"] > 600, "{stats:?}");
    // Recovery puts every partition back at one log position: the same tables again.
    let before = table_dump(&connect(&four).await).await;
    four.kill9_and_restart();
    assert_eq!(table_dump(&connect(&four).await).await, before);
    one.kill9_and_restart();
    assert_eq!(table_dump(&connect(&one).await).await, before);
    // A data directory keeps its partition count.
    four.stop();
    let refused = std::process::Command::new(common::binary())
        .args([
            "serve",
            "--partitions",
            "2",
            "--listen",
            "127.0.0.1:1",
            "--data-dir",
        ])
        .arg(four.data_dir().join("data"))
        .output()
        .expect("run hotledger");
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("partition count"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

async fn routing_stats(client: &Client) -> std::collections::HashMap<String, u64> {
    let rows = client
        .simple_query("SHOW storage_stats")
        .await
        .expect("storage stats");
    let line = rows
        .iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
            _ => None,
        })
        .expect("a row");
    stat_fields(&line)
}

/// kill -9 in the middle of a transfer load on 4 partitions, twice, with checkpoints of all
/// partitions running (every 2 s): recovery brings every partition back to one log position
/// and replays the log, so every acknowledged transfer is there exactly once and the books
/// balance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_mid_load_on_four_partitions_loses_no_acknowledged_transfer() {
    let server = kill9_twice_mid_transfer_load(&["--partitions", "4"]).await;
    let stats = routing_stats(&connect(&server).await).await;
    assert_eq!(stats["partitions"], 4, "{stats:?}");
}

/// The same over a 1 MiB pool (256 pages of 4 KiB) that the transfers' trees soon outgrow:
/// entries have their pages read ahead from disk (`page_in`), the history indexes take
/// their entries through insert buffers, and after each kill -9 every acknowledged transfer
/// is there once and the books balance. After the last restart the pool holds nothing, and
/// a burst of transfers from many clients reads its pages ahead. A last kill -9, and
/// `hotledger check` finds every index holding exactly its rows' entries, buffered or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_mid_load_over_a_pool_the_data_outgrows_loses_nothing() {
    let args = ["--partitions", "2", "--pool-mb", "1", "--page-size", "4096"];
    let mut server = kill9_twice_mid_transfer_load(&args).await;
    let mut burst = Vec::new();
    for n in 0..16i64 {
        let url = server.url();
        burst.push(tokio::spawn(async move {
            let (client, connection) = tokio_postgres::connect(&url, NoTls).await.expect("connect");
            tokio::spawn(connection);
            for i in 0..30 {
                let id = 900_000_000_000 + n * 1_000 + i;
                let debit = 2 + (id * 7_919) % (ACCOUNTS - 1);
                let call = format!("CALL transfer({id}, {debit}, {HOT}, 1, 1, 1)");
                client.simple_query(&call).await.expect("transfer");
            }
        }));
    }
    for task in burst {
        task.await.expect("burst client");
    }
    let client = connect(&server).await;
    let stats = routing_stats(&client).await;
    assert!(stats["pages_read_ahead"] > 0, "{stats:?}");
    assert!(
        stats["insert_buffer_bytes"] + stats["insert_buffer_drained"] > 0,
        "no index entry went through an insert buffer: {stats:?}"
    );
    let debits = scalar(&client, "SELECT sum(debits_posted) FROM accounts").await;
    let credits = scalar(&client, "SELECT sum(credits_posted) FROM accounts").await;
    assert_eq!(debits, credits);
    drop(client);
    server.kill9();
    let report = server.check_data();
    assert!(report.contains("index"), "{report}");
}

/// Transfers from `CLIENTS` connections, the server killed with SIGKILL in the middle,
/// twice; after each restart every acknowledged transfer is stored exactly once and
/// debits equal credits. Returns the restarted server.
async fn kill9_twice_mid_transfer_load(args: &[&str]) -> TestServer {
    const CLIENTS: usize = 24;
    let mut server = TestServer::start_with(args);
    let admin = connect(&server).await;
    insert_accounts(&admin, 1..=ACCOUNTS).await;
    drop(admin);
    let acknowledged = Arc::new(Mutex::new(BTreeSet::new()));
    let mut sent_ids = BTreeSet::new();
    for cycle in 0..2u64 {
        let mut tasks = Vec::new();
        for n in 0..CLIENTS as u64 {
            let url = server.url();
            let acknowledged = acknowledged.clone();
            tasks.push(tokio::spawn(async move {
                let mut sent = Vec::new();
                let Ok((client, connection)) = tokio_postgres::connect(&url, NoTls).await else {
                    return sent;
                };
                tokio::spawn(connection);
                let mut rng = StdRng::seed_from_u64(cycle * 1_000 + n);
                for i in 0.. {
                    let id = (cycle * 1_000 + n + 1) as i64 * 10_000_000 + i;
                    let debit = rng.gen_range(1..=ACCOUNTS);
                    let credit = if debit == HOT { 2 } else { HOT };
                    let (debit, credit) = if rng.gen_bool(0.5) {
                        (debit, credit)
                    } else {
                        (credit, debit)
                    };
                    sent.push(id);
                    let call = format!("CALL transfer({id}, {debit}, {credit}, 1, 1, 1)");
                    match client.simple_query(&call).await {
                        Ok(_) => {
                            acknowledged.lock().await.insert(id);
                        }
                        Err(_) => break,
                    }
                }
                sent
            }));
        }
        tokio::time::sleep(std::time::Duration::from_millis(2_500 + 1_300 * cycle)).await;
        server.kill9();
        for task in tasks {
            sent_ids.extend(task.await.expect("client task"));
        }
        server.restart();
    }
    let client = connect(&server).await;
    let acknowledged = acknowledged.lock().await;
    assert!(
        acknowledged.len() > 500,
        "too few transfers: {}",
        acknowledged.len()
    );
    let rows = client
        .query("SELECT id FROM transfers ORDER BY id", &[])
        .await
        .expect("transfer ids");
    let stored: BTreeSet<i64> = rows.iter().map(|r| r.get(0)).collect();
    let lost: Vec<&i64> = acknowledged.difference(&stored).take(5).collect();
    assert!(lost.is_empty(), "acknowledged transfers lost: {lost:?}");
    assert!(stored.is_subset(&sent_ids), "a transfer nobody sent");
    assert!(stored.len() <= acknowledged.len() + 2 * CLIENTS);
    let debits = scalar(&client, "SELECT sum(debits_posted) FROM accounts").await;
    let credits = scalar(&client, "SELECT sum(credits_posted) FROM accounts").await;
    assert_eq!(debits, credits);
    assert_eq!(debits, stored.len() as i64, "each stored transfer moved 1");
    drop(client);
    drop(acknowledged);
    server
}

/// A 1 MiB pool (256 pages of 4 KiB) under more data, with checkpoints paced to take 300 ms:
/// pages are dirtied faster than checkpoints write them, and applying slows down instead of
/// letting the pool (no-steal) grow with the data. Nothing is lost on the way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_outrun_by_dirty_pages_slows_applying_instead_of_growing() {
    const ACCOUNTS: i64 = 20_000;
    const STATEMENTS: i64 = 60;
    const ROWS: i64 = 100;
    let server = TestServer::start_with(&[
        "--partitions",
        "1",
        "--pool-mb",
        "1",
        "--checkpoint-spread-ms",
        "300",
        "--page-size",
        "4096",
    ]);
    let client = connect(&server).await;
    for first in (1..=ACCOUNTS).step_by(1_000) {
        insert_accounts(&client, first..first + 1_000).await;
    }
    let mut rng = StdRng::seed_from_u64(7);
    for statement in 0..STATEMENTS {
        let rows: Vec<String> = (0..ROWS)
            .map(|k| {
                let debit = rng.gen_range(2..=ACCOUNTS);
                format!("({}, {debit}, 1, 1, 1, 1)", statement * ROWS + k + 1)
            })
            .collect();
        insert_transfers(&client, &rows).await.expect("transfers");
    }
    let stats = routing_stats(&client).await;
    let capacity = stats["pool_capacity_pages"];
    assert_eq!(capacity, 256, "{stats:?}");
    assert!(stats["pool_waits"] > 0, "{stats:?}");
    // The limit is a quarter past the capacity; one entry may dirty a few hundred pages
    // more before the next one waits.
    assert!(
        stats["peak_buffer_pages"] < capacity * 5 / 2,
        "the pool grew to {} pages: {stats:?}",
        stats["peak_buffer_pages"]
    );
    let row = client
        .query_one("SELECT count(*), sum(amount) FROM transfers", &[])
        .await
        .expect("count");
    assert_eq!(row.get::<_, i64>(0), STATEMENTS * ROWS);
    let hot = client
        .query_one(
            "SELECT credits_posted::bigint FROM accounts WHERE id = 1",
            &[],
        )
        .await
        .expect("hot account");
    assert_eq!(hot.get::<_, i64>(0), STATEMENTS * ROWS);
}

/// Every account's credits less its debits (posted), in id order.
async fn net_balances(client: &Client) -> Vec<i64> {
    client
        .query(
            "SELECT (credits_posted - debits_posted)::bigint FROM accounts ORDER BY id",
            &[],
        )
        .await
        .expect("balances")
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Multi-row transfer statements over trees too large for the leaf hints find their random
/// leaves ahead (`SHOW storage_stats`: `lookahead_used`), on one partition and on two (the
/// keys grouped by partition), and give the balances applying the rows one by one gives; a
/// statement with a failing row still applies nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_row_transfers_look_ahead_and_stay_exact() {
    const MANY: i64 = 20_000;
    for partitions in ["1", "2"] {
        let server = TestServer::start_with(&["--partitions", partitions]);
        let client = connect(&server).await;
        insert_accounts(&client, 1..=MANY).await;
        let mut rng = StdRng::seed_from_u64(33);
        let mut expected = vec![0i64; MANY as usize + 1];
        for statement in 0..4i64 {
            let rows: Vec<String> = (0..1_000i64)
                .map(|k| {
                    let (debit, credit) = (rng.gen_range(2..=MANY), 1);
                    let amount = rng.gen_range(1..=9i64);
                    expected[debit as usize] -= amount;
                    expected[credit as usize] += amount;
                    let id = 1 + statement * 1_000 + k;
                    format!("({id}, {debit}, {credit}, {amount}, 1, 1)")
                })
                .collect();
            insert_transfers(&client, &rows).await.expect("transfers");
        }
        // Row 500 names an account that does not exist: nothing of the statement applies.
        let failing: Vec<String> = (0..1_000i64)
            .map(|k| {
                let debit = if k == 500 { MANY + 1 } else { 2 + k };
                format!("({}, {debit}, 1, 5, 1, 1)", 10_000 + k)
            })
            .collect();
        let error = insert_transfers(&client, &failing)
            .await
            .expect_err("a missing account fails the statement");
        assert_eq!(error.code().map(|c| c.code()), Some("23503"), "{error}");
        let message = error.as_db_error().map(|e| e.message().to_string());
        assert!(
            message
                .as_ref()
                .is_some_and(|m| m.contains("row 501 of 1000")),
            "{message:?}"
        );
        let stats = routing_stats(&client).await;
        assert!(stats["lookahead_used"] > 1_000, "{stats:?}");
        // On two partitions the four statements were split across the threads; the failing
        // one then applied whole, which found its error.
        let split = if partitions == "2" { 4 } else { 0 };
        assert_eq!(stats["commands_split"], split, "{stats:?}");
        // Each walked key counts once however often it is used; nearly all are used — the
        // history indexes' entries too, walked under the timestamps the rows will take.
        assert!(
            stats["lookahead_used"] <= stats["lookahead_keys"]
                && stats["lookahead_used"] * 10 >= stats["lookahead_keys"] * 9,
            "{stats:?}"
        );
        assert_eq!(
            net_balances(&client).await,
            expected[1..],
            "on {partitions} partitions"
        );
        assert_eq!(
            scalar(&client, "SELECT count(*) FROM transfers").await,
            4_000
        );
    }
}

/// Multi-row transfer statements from several connections at once on two partitions, so a
/// log entry holds several, each split across the partitions' threads; every fourth fails
/// at its 61st row (a missing credit account) after its shares have written the 60 before,
/// and applies whole instead. Every acknowledged statement's transfers are there exactly
/// once, no failed one's, and every balance is what the acknowledged rows give.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_split_statements_apply_exactly() {
    const MANY: i64 = 2_000;
    const CONNECTIONS: u64 = 6;
    let server = TestServer::start_with(&["--partitions", "2"]);
    let admin = connect(&server).await;
    insert_accounts(&admin, 1..=MANY).await;
    let mut tasks = Vec::new();
    for c in 0..CONNECTIONS {
        let url = server.url();
        tasks.push(tokio::spawn(async move {
            let (client, connection) = tokio_postgres::connect(&url, NoTls).await.expect("connect");
            tokio::spawn(connection);
            let mut rng = StdRng::seed_from_u64(c);
            let mut acknowledged = Vec::new();
            for statement in 0..16i64 {
                let failing = statement % 4 == 3;
                let rows: Vec<(i64, i64, i64, i64)> = (0..100i64)
                    .map(|k| {
                        let id = 1_000_000 * (c as i64 + 1) + statement * 1_000 + k;
                        let debit = rng.gen_range(2..=MANY);
                        let credit = match k {
                            60 if failing => MANY + 1,
                            k if k % 2 == 0 => 1,
                            _ => debit % MANY + 1,
                        };
                        (id, debit, credit, rng.gen_range(1..=9i64))
                    })
                    .collect();
                let text: Vec<String> = rows
                    .iter()
                    .map(|(id, d, c, a)| format!("({id}, {d}, {c}, {a}, 1, 1)"))
                    .collect();
                match (failing, insert_transfers(&client, &text).await) {
                    (false, Ok(_)) => acknowledged.extend(rows),
                    (true, Err(e)) => {
                        assert_eq!(e.code().map(|c| c.code()), Some("23503"), "{e:?}")
                    }
                    (failing, outcome) => panic!("failing={failing}: {outcome:?}"),
                }
            }
            acknowledged
        }));
    }
    let mut expected = vec![0i64; MANY as usize + 1];
    let mut ids = BTreeSet::new();
    for task in tasks {
        for (id, debit, credit, amount) in task.await.expect("a connection's statements") {
            expected[debit as usize] -= amount;
            expected[credit as usize] += amount;
            assert!(ids.insert(id));
        }
    }
    assert_eq!(net_balances(&admin).await, expected[1..]);
    let stored: BTreeSet<i64> = admin
        .query("SELECT id FROM transfers", &[])
        .await
        .expect("transfers")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(stored, ids, "exactly the acknowledged transfers");
    let stats = routing_stats(&admin).await;
    assert_eq!(stats["commands_split"], ids.len() as u64 / 100, "{stats:?}");
}

/// Every account and transfer has a timestamp of its own, however it was created: one per
/// statement, many per statement (split across the partitions or not), batches, COPY,
/// transactions and concurrent sessions on different partitions. Within a statement they
/// follow its rows; all of them follow the ledger clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_account_and_transfer_has_its_own_timestamp() {
    let server = TestServer::start_with(&["--partitions", "4"]);
    let client = connect(&server).await;
    let accounts: Vec<String> = (1..=40).map(|id| format!("({id}, 700, 1)")).collect();
    client
        .simple_query(&format!(
            "INSERT INTO accounts (id, ledger, code) VALUES {}",
            accounts.join(", ")
        ))
        .await
        .unwrap();
    // A multi-row insert large enough to split across the partitions.
    let rows: Vec<String> = (1..=300)
        .map(|id| format!("({id}, {}, {}, 1, 700, 1)", id % 40 + 1, (id + 7) % 40 + 1))
        .collect();
    client
        .simple_query(&format!(
            "INSERT INTO transfers (id, debit_account_id, credit_account_id, amount, ledger, code) VALUES {}",
            rows.join(", ")
        ))
        .await
        .unwrap();
    client
        .simple_query(
            "CALL create_transfers(id => ARRAY[401, 402, 403], debit_account_id => ARRAY[1, 2, 3], \
             credit_account_id => ARRAY[4, 5, 6], amount => ARRAY[1, 1, 1], ledger => ARRAY[700, 700, 700], \
             code => ARRAY[1, 1, 1])",
        )
        .await
        .unwrap();
    client
        .simple_query("BEGIN; CALL transfer(501, 1, 2, 1, 700, 1); CALL transfer(502, 2, 3, 1, 700, 1); COMMIT")
        .await
        .unwrap();
    // A transaction that changes the schema between its writes.
    client
        .simple_query(
            "BEGIN; CALL transfer(503, 1, 2, 1, 700, 1); CREATE TABLE notes (id int primary key); \
             CALL transfer(504, 2, 3, 1, 700, 1); INSERT INTO accounts (id, ledger, code) VALUES (41, 700, 1); COMMIT",
        )
        .await
        .unwrap();
    let mut sessions = Vec::new();
    for s in 0..6i64 {
        let client = connect(&server).await;
        sessions.push(tokio::spawn(async move {
            for n in 0..30i64 {
                let id = 1000 + s * 100 + n;
                let (debit, credit) = (s * 6 + 1, s * 6 + 2);
                client
                    .execute(
                        "CALL transfer($1, $2, $3, 1, 700, 1)",
                        &[&id, &debit, &credit],
                    )
                    .await
                    .unwrap();
            }
        }));
    }
    for s in sessions {
        s.await.unwrap();
    }
    let row = client
        .query_one(
            "SELECT count(*), count(DISTINCT timestamp), min(timestamp) FROM \
             (SELECT timestamp FROM accounts UNION ALL SELECT timestamp FROM transfers) t",
            &[],
        )
        .await
        .unwrap();
    let (all, distinct, least): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
    assert_eq!(all, 40 + 300 + 3 + 2 + 3 + 180);
    assert_eq!(distinct, all, "two events share a timestamp");
    assert!(
        least > 1_700_000_000_000_000_000,
        "nanoseconds since the epoch: {least}"
    );
    // A statement's rows in order; the clock (microseconds) never ahead of a timestamp.
    let ordered: Vec<i64> = client
        .query(
            "SELECT id FROM transfers WHERE id <= 300 ORDER BY timestamp",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ordered, (1..=300).collect::<Vec<i64>>());
    let behind: i64 = client
        .query_one(
            "SELECT count(*) FROM transfers \
             WHERE timestamp < (extract(epoch from created_at) * 1000000)::bigint * 1000",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(behind, 0, "a timestamp before its created_at");
    let out_of_order: i64 = client
        .query_one(
            "SELECT count(*) FROM transfers a, transfers b \
             WHERE a.timestamp < b.timestamp AND a.created_at > b.created_at",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(out_of_order, 0, "timestamps against the ledger clock");
    let stats = routing_stats(&client).await;
    assert!(stats["commands_split"] >= 1, "{stats:?}");
    assert!(stats["commands_on_partition_threads"] > 0, "{stats:?}");
}
