//! Membership changes online, on real processes: a 3-node cluster grows to 5 with
//! `CALL hotledger.add_node` (each new node started with `--join`) and shrinks back to 3
//! with `hotledger.remove_node` — the leader among the removed — while clients write;
//! no acknowledged write is lost and every remaining node has them all.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::cluster::{ids, leader_seen_by, psql_at, Cluster};

/// Inserts rows through `ports` in turn until stopped; returns the ids acknowledged.
fn writer(ports: Vec<u16>, first: i64, stop: Arc<AtomicBool>) -> Vec<i64> {
    let mut acknowledged = Vec::new();
    let mut id = first;
    while !stop.load(Ordering::SeqCst) {
        let port = ports[id as usize % ports.len()];
        if psql_at(port, &format!("insert into m values ({id})"))
            .status
            .success()
        {
            acknowledged.push(id);
        }
        id += 1;
    }
    acknowledged
}

fn voters_seen_by(cluster: &Cluster, id: usize) -> Vec<i64> {
    ids(&cluster
        .node(id)
        .query("select node_id from hotledger.cluster where voter order by node_id"))
}

#[test]
fn a_cluster_grows_from_three_to_five_and_shrinks_back_under_writes() {
    let mut cluster = Cluster::start(3);
    cluster
        .node(1)
        .query("create table m (id bigint primary key)");
    // Calls that cannot work say why.
    let bad = cluster
        .node(1)
        .psql("call hotledger.add_node(0, '127.0.0.1:1')");
    assert!(!bad.status.success());
    assert!(
        common::stderr(&bad).contains("positive"),
        "{}",
        common::stderr(&bad)
    );
    let bad = cluster.node(1).psql("call hotledger.remove_node(9)");
    assert!(
        common::stderr(&bad).contains("not a member"),
        "{}",
        common::stderr(&bad)
    );
    let bad = cluster.node(1).psql("call hotledger.transfer_leader(9)");
    assert!(
        common::stderr(&bad).contains("not a voter"),
        "{}",
        common::stderr(&bad)
    );
    let bad = cluster
        .node(1)
        .psql("begin; call hotledger.remove_node(2); commit");
    assert!(
        common::stderr(&bad).contains("transaction block"),
        "{}",
        common::stderr(&bad)
    );

    let stop = Arc::new(AtomicBool::new(false));
    let originals: Vec<u16> = (1..=3).map(|id| cluster.node(id).port).collect();
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (ports, stop) = (originals.clone(), stop.clone());
            std::thread::spawn(move || writer(ports, (w + 1) * 1_000_000, stop))
        })
        .collect();

    // Grow: two nodes join, each added through a different member.
    for via in [2, 3] {
        let id = cluster.start_joining(&[]);
        let call = format!(
            "call hotledger.add_node({id}, '127.0.0.1:{}')",
            cluster.node(id).peer_port
        );
        let answer = cluster.node(via).query(&call);
        assert_eq!(answer, format!("node {id} is a voter"));
        cluster.node(id).wait_ready();
    }
    assert_eq!(voters_seen_by(&cluster, 1), [1, 2, 3, 4, 5]);
    // The new nodes serve reads and writes.
    cluster.node(5).query("insert into m values (5)");
    assert_eq!(
        cluster.node(4).query("select count(*) from m where id = 5"),
        "1"
    );

    // Shrink: the leader (whichever node leads by now) and another node leave.
    let leader = leader_seen_by(&cluster, 1).expect("a leader");
    let other = (1..=5).find(|&n| n != leader).unwrap();
    let remaining: Vec<usize> = (1..=5).filter(|&n| n != leader && n != other).collect();
    for gone in [other, leader] {
        let answer = cluster
            .node(remaining[0])
            .query(&format!("call hotledger.remove_node({gone})"));
        assert_eq!(
            answer,
            format!("node {gone} is no longer a member; stop its process")
        );
    }
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::SeqCst);
    let mut acknowledged: Vec<i64> = writers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    acknowledged.push(5);
    acknowledged.sort_unstable();
    cluster.kill9(leader);
    cluster.kill9(other);
    let voters: Vec<i64> = remaining.iter().map(|&n| n as i64).collect();
    for &id in &remaining {
        assert_eq!(voters_seen_by(&cluster, id), voters);
    }
    // Still a working cluster of three, and every acknowledged row is on each of them.
    cluster.node(remaining[2]).query("insert into m values (6)");
    acknowledged.push(6);
    for &id in &remaining {
        let present = ids(&cluster.node(id).query("select id from m order by id"));
        let missing: Vec<&i64> = acknowledged
            .iter()
            .filter(|a| present.binary_search(a).is_err())
            .collect();
        assert!(missing.is_empty(), "node {id} lacks {missing:?}");
    }
    assert!(
        acknowledged.len() > 20,
        "only {} writes acknowledged",
        acknowledged.len()
    );
}

/// The page size is the cluster's, recorded in the log when it formed: a node that joins
/// with another stops as it reaches that record (its commands would apply differently),
/// saying which settings to use; it never becomes a voter, and can be removed again.
/// (8192 is the default page size.)
#[test]
fn a_node_with_another_page_size_cannot_join() {
    let mut cluster = Cluster::start(3);
    cluster.node(1).query("create table s (id int primary key)");
    let id = cluster.start_joining(&["--page-size", "16384"]);
    let call = format!(
        "call hotledger.add_node({id}, '127.0.0.1:{}')",
        cluster.node(id).peer_port
    );
    let out = std::process::Command::new("psql")
        .args(["-h", "127.0.0.1", "-p", &cluster.node(1).port.to_string()])
        .args([
            "-U",
            "ledger",
            "-d",
            "ledger",
            "-X",
            "-v",
            "ON_ERROR_STOP=1",
        ])
        .args(["-c", "set statement_timeout = '4s'", "-c", &call])
        .env("PGPASSWORD", common::PASSWORD)
        .output()
        .unwrap();
    assert!(!out.status.success());
    // The learner stops (and its process exits) as it applies the record; the leader
    // either hears why or finds it gone.
    let error = common::stderr(&out);
    assert!(
        error.contains("stopped applying the log") || error.contains("has not caught up"),
        "{error}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !cluster
        .node(id)
        .log()
        .contains("the cluster's has --page-size 8192")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the call said: {error}; node {id}'s log: {}",
            cluster.node(id).log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(voters_seen_by(&cluster, 1), [1, 2, 3]);
    let answer = cluster
        .node(2)
        .query(&format!("call hotledger.remove_node({id})"));
    assert!(answer.contains("no longer a member"), "{answer}");
    cluster.node(3).query("insert into s values (1)");
}

/// Leadership moves to the voter asked for, through any node, while clients write: every
/// node then names it, writes go on, and none acknowledged is lost.
#[test]
fn transfer_leader_hands_leadership_to_the_chosen_voter_under_writes() {
    let cluster = Cluster::start(3);
    cluster
        .node(1)
        .query("create table t (id bigint primary key)");
    let stop = Arc::new(AtomicBool::new(false));
    let ports: Vec<u16> = (1..=3).map(|id| cluster.node(id).port).collect();
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut acknowledged = Vec::new();
            let mut id = 0i64;
            while !stop.load(Ordering::SeqCst) {
                id += 1;
                let port = ports[id as usize % ports.len()];
                if psql_at(port, &format!("insert into t values ({id})"))
                    .status
                    .success()
                {
                    acknowledged.push(id);
                }
            }
            acknowledged
        })
    };
    for _ in 0..2 {
        let leader = leader_seen_by(&cluster, 1).expect("a leader");
        let target = leader % 3 + 1;
        let via = 6 - leader - target;
        let answer = cluster
            .node(via)
            .query(&format!("call hotledger.transfer_leader({target})"));
        assert_eq!(answer, format!("node {target} leads"));
        for id in 1..=3 {
            assert_eq!(leader_seen_by(&cluster, id), Some(target), "node {id}");
        }
        let again = cluster
            .node(target)
            .query(&format!("call hotledger.transfer_leader({target})"));
        assert_eq!(again, format!("node {target} leads"));
    }
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::SeqCst);
    let acknowledged = writer.join().unwrap();
    assert!(
        acknowledged.len() > 10,
        "only {} writes",
        acknowledged.len()
    );
    for id in 1..=3 {
        let present = ids(&cluster.node(id).query("select id from t order by id"));
        let missing = acknowledged
            .iter()
            .filter(|a| present.binary_search(a).is_err())
            .count();
        assert_eq!(missing, 0, "node {id} lacks {missing} acknowledged rows");
    }
}
