//! A follower that was down while the cluster wrote more than its log keeps catches up from
//! a snapshot: the leader streams its state in chunks, the follower swaps it in under its
//! executor, and every replica ends with the same ledger.

mod common;

use std::time::{Duration, Instant};

use common::cluster::{leader_seen_by, Cluster};

const TRANSFERS: i64 = 100_000;
const BATCH: i64 = 5_000;

/// What must be equal on every replica: the accounts' balances, and the transfers' count
/// and sums.
const CHECKSUM: &str = "select (select count(*) || ':' || sum(id) || ':' || sum(debit_account_id * amount) from transfers) || '|' || (select string_agg(id || ':' || debits_posted || ':' || credits_posted, ',' order by id) from accounts)";

/// Kill a follower, write 100,000 transfers (and enough entries that the leader snapshots
/// and purges its log past the follower's position), restart it: it installs the leader's
/// snapshot, matches the others, serves and forwards writes, and after a kill -9 restarts
/// from the installed state. A node started on an empty data directory is rebuilt alike.
#[test]
fn a_follower_behind_the_purged_log_catches_up_from_a_snapshot() {
    let mut cluster = Cluster::start_with(
        3,
        &[
            "--raft-snapshot-entries",
            "20",
            "--raft-log-keep-entries",
            "5",
        ],
    );
    let accounts: Vec<String> = (1..=100).map(|id| format!("({id}, 1, 1)")).collect();
    cluster.node(1).query(&format!(
        "insert into accounts (id, ledger, code) values {}",
        accounts.join(", ")
    ));
    let leader = leader_seen_by(&cluster, 1).expect("a leader");
    let follower = if leader == 1 { 2 } else { 1 };
    cluster.kill9(follower);
    for batch in 0..TRANSFERS / BATCH {
        let first = batch * BATCH + 1;
        cluster.node(leader).query(&format!(
            "insert into transfers (id, debit_account_id, credit_account_id, amount, ledger, code) select g, 2 + g % 99, 1, 1 + g % 7, 1, 1 from generate_series({first}, {}) g",
            first + BATCH - 1
        ));
        // Small entries as well, so the log moves past the snapshot interval.
        for n in 0..3 {
            let id = 1_000_000 + batch * 10 + n;
            cluster
                .node(leader)
                .query(&format!("call transfer({id}, 3, 4, 1, 1, 1)"));
        }
    }
    // The leader has snapshotted and purged past the follower (snapshots are checked for
    // every 2 s): wait for its snapshot file to cover the last write.
    let expected = cluster.node(leader).query(CHECKSUM);
    wait_for_snapshot_past(&cluster, leader, 60);
    cluster.restart(follower);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        // A weak read: what the follower has applied (psql prints SET first).
        let answer = cluster
            .node(follower)
            .query(&format!("set read_consistency = weak; {CHECKSUM}"));
        let seen = answer.lines().last().unwrap_or_default().to_string();
        if seen == expected {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the follower did not catch up: it has {seen}, the leader {expected}; {}",
            cluster.node(follower).log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(
        cluster
            .node(follower)
            .log()
            .contains("installed a snapshot of log index"),
        "the follower caught up without a snapshot: {}",
        cluster.node(follower).log()
    );
    for id in 1..=3 {
        assert_eq!(cluster.node(id).query(CHECKSUM), expected, "node {id}");
    }
    // It goes on from there: a write through it, then a restart from what it installed.
    cluster
        .node(follower)
        .query("call transfer(2000000, 5, 6, 9, 1, 1)");
    let after = cluster.node(leader).query(CHECKSUM);
    cluster.kill9(follower);
    cluster.restart(follower);
    for id in 1..=3 {
        assert_eq!(cluster.node(id).query(CHECKSUM), after, "node {id}");
    }
    // A node whose data directory is lost comes back on an empty one the same way.
    let other = 6 - leader - follower;
    cluster.kill9(other);
    std::fs::remove_dir_all(cluster.node(other).dir.join("data")).unwrap();
    cluster.restart(other);
    assert_eq!(
        cluster.node(other).query(CHECKSUM),
        after,
        "rebuilt node {other}"
    );
}

/// Waits until `id`'s newest snapshot file covers at least its last applied entry minus
/// the snapshot interval, i.e. a snapshot was built after the writes.
fn wait_for_snapshot_past(cluster: &Cluster, id: usize, seconds: u64) {
    let applied: u64 = cluster
        .node(id)
        .query("select applied_index from hotledger.cluster where is_self")
        .parse()
        .unwrap();
    let dir = cluster.node(id).dir.join("data").join("snapshots");
    let deadline = Instant::now() + Duration::from_secs(seconds);
    loop {
        let newest = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().to_string();
                name.strip_prefix("snapshot-")?
                    .split('-')
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
            .max();
        if newest.is_some_and(|index| index + 20 >= applied) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "node {id} made no snapshot near index {applied} (newest {newest:?})"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
