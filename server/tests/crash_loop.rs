//! The crash loop: 16 connections send hot-account transfers (some two-phase) while the real
//! server is killed with `kill -9` at a random instant — with checkpoints every second and
//! the log purged behind each, many kills land mid-checkpoint or mid-purge — then
//! `hotledger check` verifies what it left (checksums, trees, indexes, debits = credits), it
//! restarts, and every acknowledged transfer must be there exactly once, nothing invented,
//! each account's balances the sum of its transfers. `HOTLEDGER_CRASH_ROUNDS` rounds (5 in
//! CI; run 50 or more by hand).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::TestServer;
use rand::{Rng, SeedableRng};

const WRITERS: i64 = 16;
const ACCOUNTS: i64 = 8;

#[derive(Default)]
struct Sent {
    /// Transfers the server acknowledged.
    acknowledged: BTreeSet<i64>,
    /// Transfers whose answer never came (the kill cut them off): either outcome is right.
    unknown: BTreeSet<i64>,
}

/// One writer: transfers with ids `base + 1, base + 2, ...` until its connection dies.
async fn write(url: String, base: i64, sent: Arc<Mutex<Sent>>) {
    let Ok((client, connection)) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await
    else {
        return;
    };
    tokio::spawn(connection);
    let mut rng = rand::rngs::StdRng::from_entropy();
    for n in 1.. {
        let id = base + n;
        let debit = rng.gen_range(1..=ACCOUNTS);
        let credit = debit % ACCOUNTS + 1;
        let amount = rng.gen_range(1..=100i64);
        // One in ten reserves its amount (two-phase): pending balances move too.
        let pending = rng.gen_range(0..10) == 0;
        let sql = format!(
            "call transfer({id}, {debit}, {credit}, {amount}, 700, 1, pending => {pending})"
        );
        match client.simple_query(&sql).await {
            Ok(_) => {
                sent.lock().unwrap().acknowledged.insert(id);
            }
            Err(e) if e.code().is_some() => panic!("transfer {id} refused: {e}"),
            Err(_) => {
                sent.lock().unwrap().unknown.insert(id);
                return;
            }
        }
    }
}

async fn verify(server: &TestServer, sent: &Sent) {
    let c = server.client().await;
    let unique = common::stored_transfer_ids(&c).await;
    let lost: Vec<_> = sent.acknowledged.difference(&unique).collect();
    assert!(lost.is_empty(), "acknowledged transfers lost: {lost:?}");
    let invented: Vec<_> = unique
        .iter()
        .filter(|id| !sent.acknowledged.contains(id) && !sent.unknown.contains(id))
        .collect();
    assert!(invented.is_empty(), "transfers never sent: {invented:?}");
    // Each account's balances are the sums of its transfers, posted and pending.
    let mut expected: BTreeMap<i64, [i64; 4]> = BTreeMap::new();
    for r in c
        .query(
            "select debit_account_id, credit_account_id, amount::bigint, pending from transfers",
            &[],
        )
        .await
        .unwrap()
    {
        let (debit, credit, amount, pending): (i64, i64, i64, bool) =
            (r.get(0), r.get(1), r.get(2), r.get(3));
        let column = if pending { 0 } else { 1 };
        expected.entry(debit).or_default()[column] += amount;
        expected.entry(credit).or_default()[column + 2] += amount;
    }
    for r in c
        .query(
            "select id, debits_pending::bigint, debits_posted::bigint, credits_pending::bigint, credits_posted::bigint from accounts",
            &[],
        )
        .await
        .unwrap()
    {
        let id: i64 = r.get(0);
        let got: [i64; 4] = [r.get(1), r.get(2), r.get(3), r.get(4)];
        assert_eq!(got, expected.get(&id).copied().unwrap_or_default(), "account {id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_transfers_survive_kill9_at_any_instant() {
    let rounds: i64 = std::env::var("HOTLEDGER_CRASH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    let mut server = TestServer::start_with(&["--partitions", "2", "--checkpoint-interval-s", "1"]);
    let c = server.client().await;
    let accounts: Vec<String> = (1..=ACCOUNTS)
        .map(|id| format!("({id}, 700, 10)"))
        .collect();
    c.batch_execute(&format!(
        "insert into accounts (id, ledger, code) values {}",
        accounts.join(", ")
    ))
    .await
    .unwrap();
    drop(c);
    let all = Arc::new(Mutex::new(Sent::default()));
    for round in 0..rounds {
        let before = all.lock().unwrap().acknowledged.len();
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let base = (round * WRITERS + w) * 1_000_000;
                tokio::spawn(write(server.url(), base, all.clone()))
            })
            .collect();
        // Once this round's writers are under way (on a loaded machine connecting can take
        // a while), a random instant.
        let started = std::time::Instant::now();
        while all.lock().unwrap().acknowledged.len() < before + 50 {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "round {round} acknowledged nothing: {}",
                server.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let wait = rand::thread_rng().gen_range(0..2000);
        tokio::time::sleep(Duration::from_millis(wait)).await;
        // Kill, `hotledger check` the data directory, restart (replaying the log).
        server.kill9();
        let checked = server.check_data();
        server.restart();
        for w in writers {
            w.await.unwrap();
        }
        // Every writer has ended: what they sent is final for this round.
        let sent = std::mem::take(&mut *all.lock().unwrap());
        verify(&server, &sent).await;
        eprintln!(
            "round {round}: killed {wait} ms after its 50th transfer; {} acknowledged, {} cut off so far; {}",
            sent.acknowledged.len(),
            sent.unknown.len(),
            checked.trim()
        );
        *all.lock().unwrap() = sent;
    }
}
