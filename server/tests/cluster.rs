//! Clusters of real `hotledger serve` processes on 127.0.0.1, replicating through openraft
//! over TCP: statements on any node (a follower forwards its writes to the leader), strong
//! reads that see every write acknowledged before them, and no acknowledged write lost when
//! any one node (the leader included) is killed with SIGKILL while clients write.

mod common;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::cluster::{ids, leader_seen_by, psql_at, signal, Cluster};
use common::{binary, free_port, stdout, PASSWORD};

/// Inserts rows through `ports` in turn until stopped, recording the ids acknowledged and
/// the ids tried; a failed insert (no leader yet, a node down) is tried with the next id.
fn writer(ports: Vec<u16>, first: i64, stop: Arc<AtomicBool>) -> (Vec<i64>, Vec<i64>) {
    let mut acknowledged = Vec::new();
    let mut tried = Vec::new();
    let mut id = first;
    while !stop.load(Ordering::SeqCst) {
        let port = ports[id as usize % ports.len()];
        tried.push(id);
        if psql_at(port, &format!("insert into w values ({id})"))
            .status
            .success()
        {
            acknowledged.push(id);
        }
        id += 1;
    }
    (acknowledged, tried)
}

/// Three nodes: a table created on one, rows written on each (followers forward), read back
/// at once on the node that wrote them and on the others; ledger transfers through a
/// follower; then each node in turn is killed with SIGKILL while two clients write through
/// the others, writes resume within seconds, and every acknowledged row is on every node
/// after the killed one is back.
#[test]
fn a_three_node_cluster_forwards_writes_and_loses_nothing_when_any_node_dies() {
    let mut cluster = Cluster::start(3);
    cluster
        .node(1)
        .query("create table t (id int primary key, node int)");
    for id in 1..=3usize {
        let node = cluster.node(id);
        node.query(&format!("insert into t values ({id}, {id})"));
        // A strong read on the node that wrote sees the write at once.
        assert_eq!(
            node.query(&format!("select node from t where id = {id}")),
            id.to_string()
        );
    }
    for id in 1..=3 {
        assert_eq!(cluster.node(id).query("select count(*) from t"), "3");
    }
    cluster
        .node(2)
        .query("insert into accounts (id, ledger, code) values (1, 1, 1), (2, 1, 1)");
    assert_eq!(
        cluster.node(3).query("call transfer(10, 1, 2, 250, 1, 1)"),
        "10|created"
    );
    assert_eq!(
        cluster
            .node(1)
            .query("select debits_posted, credits_posted from accounts order by id"),
        "250|0\n0|250"
    );

    // Roles replicate with the catalog: one made through a follower logs in on every node,
    // with its privileges there.
    cluster
        .node(2)
        .query("create role teller login password 'teller-pw'; grant select on t to teller");
    for id in 1..=3 {
        let out = std::process::Command::new("psql")
            .args(["-X", "-At", "-h", "127.0.0.1", "-p"])
            .arg(cluster.node(id).port.to_string())
            .args(["-U", "teller", "-d", "ledger"])
            .args(["-c", "select count(*) from t", "-c", "delete from t"])
            .env("PGPASSWORD", "teller-pw")
            .output()
            .unwrap();
        assert_eq!(common::stdout(&out).trim(), "3", "node {id}");
        assert!(
            common::stderr(&out).contains("permission denied for table t"),
            "node {id}: {}",
            common::stderr(&out)
        );
    }

    cluster.node(1).query("create table w (id int primary key)");
    let mut all_acknowledged = Vec::new();
    let mut all_tried = Vec::new();
    for victim in [1usize, 2, 3] {
        let others: Vec<u16> = (1..=3)
            .filter(|&id| id != victim)
            .map(|id| cluster.node(id).port)
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let results = Arc::new(Mutex::new(Vec::new()));
        let writers: Vec<_> = (0..2)
            .map(|w| {
                let (ports, stop, results) = (others.clone(), stop.clone(), results.clone());
                let first = (victim as i64) * 1_000_000 + w * 100_000;
                std::thread::spawn(move || {
                    let r = writer(ports, first, stop);
                    results.lock().unwrap().push(r);
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(700));
        cluster.kill9(victim);
        let killed_at = Instant::now();
        // Writes go on through the two survivors (a new leader if the victim led).
        let survivor = cluster.node(if victim == 1 { 2 } else { 1 });
        let mut resumed = false;
        while killed_at.elapsed() < Duration::from_secs(20) {
            let probe = victim as i64 * 1_000_000 + 999_999;
            if survivor
                .psql(&format!(
                    "insert into w values ({probe}) on conflict do nothing"
                ))
                .status
                .success()
            {
                resumed = true;
                all_acknowledged.push(probe);
                all_tried.push(probe);
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(
            resumed,
            "no write succeeded within 20 s of killing node {victim}: {}",
            survivor.log()
        );
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::SeqCst);
        for w in writers {
            w.join().unwrap();
        }
        for (acknowledged, tried) in results.lock().unwrap().drain(..) {
            assert!(
                !acknowledged.is_empty(),
                "a writer got no write through beside node {victim}'s death"
            );
            all_acknowledged.extend(acknowledged);
            all_tried.extend(tried);
        }
        cluster.restart(victim);
    }
    all_acknowledged.sort_unstable();
    all_tried.sort_unstable();
    for id in 1..=3 {
        let present = ids(&cluster.node(id).query("select id from w order by id"));
        let missing: Vec<_> = all_acknowledged
            .iter()
            .filter(|a| present.binary_search(a).is_err())
            .collect();
        assert!(
            missing.is_empty(),
            "node {id} lacks acknowledged rows {missing:?}"
        );
        let invented: Vec<_> = present
            .iter()
            .filter(|p| all_tried.binary_search(p).is_err())
            .collect();
        assert!(
            invented.is_empty(),
            "node {id} has rows never written: {invented:?}"
        );
    }
    // And the ledger stayed whole.
    assert_eq!(
        cluster
            .node(3)
            .query("select sum(debits_posted) - sum(credits_posted) from accounts"),
        "0"
    );
}

/// Five nodes keep committing with two of them down, and refuse writes (rather than
/// accept what they cannot make durable on a majority) with three down.
#[test]
fn a_five_node_cluster_commits_with_two_down_and_not_with_three() {
    let mut cluster = Cluster::start(5);
    cluster.node(5).query("create table f (id int primary key)");
    cluster.kill9(1);
    cluster.kill9(2);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut committed = false;
    while Instant::now() < deadline && !committed {
        committed = cluster
            .node(3)
            .psql("insert into f values (1)")
            .status
            .success();
        if !committed {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    assert!(
        committed,
        "no commit with 3 of 5 up: {}",
        cluster.node(3).log()
    );
    assert_eq!(cluster.node(4).query("select count(*) from f"), "1");
    cluster.kill9(3);
    let out = Command::new("psql")
        .args(["-h", "127.0.0.1", "-p", &cluster.node(4).port.to_string()])
        .args([
            "-U",
            "ledger",
            "-d",
            "ledger",
            "-c",
            "insert into f values (2)",
        ])
        .env("PGPASSWORD", PASSWORD)
        .env("PGOPTIONS", "-c statement_timeout=3s")
        .output()
        .unwrap();
    assert!(!out.status.success(), "a write committed with 2 of 5 up");
    // A weak read still answers from what the node has.
    let weak = cluster
        .node(5)
        .query("set read_consistency = weak; select count(*) from f");
    assert_eq!(weak.lines().last(), Some("1"), "{weak}");
    let out = cluster.node(5).psql("select count(*) from f");
    assert!(
        !out.status.success(),
        "a strong read answered with 2 of 5 up: {}",
        stdout(&out)
    );
}

/// A base port whose client ports (P, P+1, P+2), peer ports (P+100, …) and console ports
/// (P+200, …) are all free.
fn free_base_port() -> u16 {
    for _ in 0..100 {
        let base = free_port();
        if base > 31_700 {
            continue;
        }
        let free = (1..3)
            .map(|i| base + i)
            .chain((0..3).map(|i| base + 100 + i))
            .chain((0..3).map(|i| base + 200 + i))
            .all(common::claim_port);
        if free {
            return base;
        }
    }
    panic!("no free block of ports");
}

/// `hotledger cluster --nodes 3` starts three processes that form one cluster, prints how
/// to reach each, gives each its share of the cores as partitions, and stops them all on
/// Ctrl-C (SIGINT).
#[test]
fn hotledger_cluster_starts_three_nodes_and_stops_them_on_ctrl_c() {
    let dir = tempfile::tempdir().unwrap();
    let base = free_base_port();
    let mut cluster = Command::new(binary())
        .args(["cluster", "--nodes", "3", "--pool-mb", "32", "--base-port"])
        .arg(base.to_string())
        .arg("--data-dir")
        .arg(dir.path())
        .env("HOTLEDGER_PASSWORD", PASSWORD)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let ready = |port: u16| psql_at(port, "select 1").status.success();
    while !(ready(base) && ready(base + 2)) {
        assert!(Instant::now() < deadline, "the cluster did not come up");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(psql_at(
        base,
        "create table c (id int primary key); insert into c values (7)"
    )
    .status
    .success());
    assert_eq!(stdout(&psql_at(base + 2, "select id from c")).trim(), "7");
    // The nodes share this machine's cores: each gets its share as partitions.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let stats = stdout(&psql_at(base + 1, "show storage_stats"));
    let expected = format!(" partitions={} ", (cores / 3).max(1));
    assert!(stats.contains(&expected), "{expected} in {stats}");
    // SAFETY: a signal to our own child process.
    unsafe { libc::kill(cluster.id() as i32, libc::SIGINT) };
    let status = cluster.wait().unwrap();
    assert!(status.success(), "{status}");
    let mut printed = String::new();
    std::io::Read::read_to_string(cluster.stdout.as_mut().unwrap(), &mut printed).unwrap();
    for (node, port) in [(1, base), (2, base + 1), (3, base + 2)] {
        assert!(
            printed.contains(&format!(
                "node {node}: psql -h 127.0.0.1 -p {port} -U ledger"
            )),
            "{printed}"
        );
    }
    for port in [base, base + 1, base + 2] {
        assert!(!ready(port), "a node still answers on {port} after Ctrl-C");
    }
}

/// `hotledger.cluster` on every node: one row per member, itself marked, all agreeing on
/// one leader; the leader knows how far each follower's log is. After the leader is killed,
/// the survivors name a new one within 5 s, and show the old one unreachable.
#[test]
fn hotledger_cluster_view_names_the_leader_and_follows_a_failover() {
    let mut cluster = Cluster::start(3);
    cluster.node(1).query("create table v (id int primary key)");
    let leader = leader_seen_by(&cluster, 1).expect("a leader");
    for id in 1..=3 {
        assert_eq!(leader_seen_by(&cluster, id), Some(leader), "node {id}");
        let rows = cluster
            .node(id)
            .query("select node_id, voter, is_self, reachable, pg_addr from hotledger.cluster order by node_id");
        let expected: Vec<String> = (1..=3)
            .map(|n| {
                format!(
                    "{n}|t|{}|t|127.0.0.1:{}",
                    if n == id { "t" } else { "f" },
                    cluster.node(n).port
                )
            })
            .collect();
        assert_eq!(rows, expected.join("\n"), "node {id}");
    }
    let lags = cluster.node(leader).query(
        "select count(*) from hotledger.cluster where lag_entries is not null and last_log_index > 0",
    );
    assert_eq!(lags, "3");
    // A follower asks each member for its positions, and the leader for its log.
    let follower = (1..=3).find(|&n| n != leader).unwrap();
    let known = cluster.node(follower).query(
        "select count(*) from hotledger.cluster where term is not null and last_log_index > 0 \
         and applied_index > 0 and lag_entries is not null",
    );
    assert_eq!(known, "3", "node {follower}");

    // A pending transfer expires at its deadline on every replica, with no write after it:
    // the leader's pulse is an entry in the log.
    cluster.node(1).query(
        "insert into accounts (id, ledger, code) values (1, 1, 1), (2, 1, 1); \
         call transfer(id => 1, debit_account_id => 1, credit_account_id => 2, amount => 5, \
                       ledger => 1, code => 1, pending => true, timeout => 1)",
    );
    std::thread::sleep(Duration::from_millis(2_000));
    for id in 1..=3 {
        let seen = cluster.node(id).query(
            "set read_consistency = weak; \
             select status, (select debits_pending from accounts where id = 1) from pending_transfers where id = 1",
        );
        assert_eq!(seen, "SET\nexpired|0", "node {id}");
    }

    cluster.kill9(leader);
    let survivor = if leader == 1 { 2 } else { 1 };
    let started = Instant::now();
    let new_leader = loop {
        match leader_seen_by(&cluster, survivor) {
            Some(l) if l != leader => break l,
            _ => {
                assert!(
                    started.elapsed() < Duration::from_secs(5),
                    "no new leader within 5 s"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    };
    assert_ne!(new_leader, leader);
    let old = cluster.node(survivor).query(&format!(
        "select reachable, role from hotledger.cluster where node_id = {leader}"
    ));
    assert_eq!(old, "f|follower");
    // A strong read during and after the election answers (with the write before it).
    cluster.node(survivor).query("insert into v values (1)");
    for id in (1..=3).filter(|&n| n != leader) {
        assert_eq!(cluster.node(id).query("select count(*) from v"), "1");
    }
}

/// What one transfer client saw: the ids it sent, those acknowledged, and when the last
/// acknowledgement came.
#[derive(Default)]
struct TransferLog {
    tried: Vec<i64>,
    acknowledged: Vec<(i64, Instant)>,
}

/// A client sending hot-account transfers (to account 1) through `ports`, starting at the
/// `client`-th; it moves to the next node when its connection breaks.
async fn transfer_client(ports: Vec<u16>, client: usize, stop: Arc<AtomicBool>) -> TransferLog {
    let mut log = TransferLog::default();
    let mut node = client % ports.len();
    let mut n = 0i64;
    while !stop.load(Ordering::SeqCst) {
        let url = format!(
            "host=127.0.0.1 port={} user=ledger password={PASSWORD} dbname=ledger connect_timeout=2",
            ports[node]
        );
        let Ok((db, connection)) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await
        else {
            node = (node + 1) % ports.len();
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        tokio::spawn(connection);
        while !stop.load(Ordering::SeqCst) {
            n += 1;
            let id = (client as i64 + 1) * 1_000_000 + n;
            let debit = 2 + n % 9;
            log.tried.push(id);
            let call = format!("call transfer({id}, {debit}, 1, 1, 1, 1)");
            match db.simple_query(&call).await {
                Ok(_) => log.acknowledged.push((id, Instant::now())),
                Err(_) if db.is_closed() => break,
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
        node = (node + 1) % ports.len();
    }
    log
}

/// Kill -9 the leader while 32 connections spread over all three nodes send hot-account
/// transfers: a new leader serves writes within 5 s; every acknowledged transfer is on
/// every replica exactly once and none that was never sent; debits equal credits; the old
/// leader restarts, catches up, and every replica has the same balances.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_leader_under_32_transfer_connections_loses_no_acknowledged_transfer() {
    kill_the_leader_under_transfer_load(&[]).await;
}

/// The same over 1 MiB pools the tables outgrow: pages are evicted and read back (ahead of
/// their entries, the log offering each appended entry before writing it, on a follower
/// too, where an entry may still be truncated), index entries whose leaf is out go through
/// insert buffers, and the replicas still end with the same transfers and balances.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_leader_over_pools_the_data_outgrows_loses_no_acknowledged_transfer() {
    let cluster = kill_the_leader_under_transfer_load(&[
        "--pool-mb",
        "1",
        "--page-size",
        "4096",
        "--partitions",
        "1",
    ])
    .await;
    // The tables outgrew the pools. (Whether pages were read ahead depends on which leaves
    // the ten accounts' rightmost entries keep hot: with insert buffers often none are.)
    let stats: Vec<_> = (1..=3)
        .map(|id| common::stat_fields(&cluster.node(id).query("show storage_stats")))
        .collect();
    assert!(
        stats
            .iter()
            .all(|s| s["file_pages"] > s["pool_capacity_pages"]),
        "the data fit in a pool: {stats:?}"
    );
}

async fn kill_the_leader_under_transfer_load(extra_args: &[&str]) -> Cluster {
    let mut cluster = Cluster::start_with(3, extra_args);
    let accounts: Vec<String> = (1..=10).map(|id| format!("({id}, 1, 1)")).collect();
    cluster.node(1).query(&format!(
        "insert into accounts (id, ledger, code) values {}",
        accounts.join(", ")
    ));
    let leader = leader_seen_by(&cluster, 1).expect("a leader");
    let ports: Vec<u16> = (1..=3).map(|id| cluster.node(id).port).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..32)
        .map(|c| tokio::spawn(transfer_client(ports.clone(), c, stop.clone())))
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    cluster.kill9(leader);
    let killed_at = Instant::now();
    tokio::time::sleep(Duration::from_secs(6)).await;
    stop.store(true, Ordering::SeqCst);
    let mut acknowledged = Vec::new();
    let mut tried = Vec::new();
    for client in clients {
        let log = client.await.unwrap();
        tried.extend(log.tried);
        acknowledged.extend(log.acknowledged);
    }
    let first_after = acknowledged
        .iter()
        .filter(|(_, at)| *at > killed_at)
        .map(|(_, at)| at.duration_since(killed_at))
        .min()
        .expect("no transfer was acknowledged after the leader died");
    assert!(
        first_after < Duration::from_secs(5),
        "writes resumed after {first_after:?}"
    );
    eprintln!(
        "{} transfers sent, {} acknowledged; the first acknowledged {first_after:?} after the leader died",
        tried.len(),
        acknowledged.len()
    );
    cluster.restart(leader);
    let mut acknowledged: Vec<i64> = acknowledged.into_iter().map(|(id, _)| id).collect();
    acknowledged.sort_unstable();
    tried.sort_unstable();
    let mut balances = Vec::new();
    for id in 1..=3 {
        let node = cluster.node(id);
        let present = ids(&node.query("select id from transfers where id >= 1000000 order by id"));
        let missing = acknowledged
            .iter()
            .filter(|a| present.binary_search(a).is_err())
            .count();
        assert_eq!(
            missing, 0,
            "node {id} lacks {missing} acknowledged transfers"
        );
        let mut distinct = present.clone();
        distinct.dedup();
        assert_eq!(
            distinct.len(),
            present.len(),
            "node {id} has a transfer twice"
        );
        assert!(
            present.iter().all(|p| tried.binary_search(p).is_ok()),
            "node {id} invented a transfer"
        );
        assert_eq!(
            node.query("select sum(debits_posted) = sum(credits_posted) from accounts"),
            "t"
        );
        balances.push(node.query(
            "select string_agg(id || ':' || debits_posted || ':' || credits_posted, ',' order by id) from accounts",
        ));
    }
    assert!(balances.windows(2).all(|w| w[0] == w[1]), "{balances:?}");
    assert!(
        acknowledged.len() > 100,
        "only {} transfers acknowledged",
        acknowledged.len()
    );
    cluster
}

/// The leader stopped (SIGSTOP) for a while, as a partition would cut it off: the other two
/// elect a new leader and commit; when the old one resumes (SIGCONT) it still believes it
/// leads, yet a strong read through it sees what was committed without it — it cannot
/// confirm its leadership, so it asks the new leader — and a write through it commits once.
#[test]
fn a_leader_cut_off_and_back_serves_no_stale_strong_read() {
    let cluster = Cluster::start(3);
    cluster.node(1).query("create table p (id int primary key)");
    cluster.node(1).query("insert into p values (1)");
    let leader = leader_seen_by(&cluster, 1).expect("a leader");
    let other = if leader == 1 { 2 } else { 1 };
    signal(&cluster, leader, libc::SIGSTOP);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cluster
        .node(other)
        .psql("insert into p values (2)")
        .status
        .success()
    {
        assert!(Instant::now() < deadline, "the majority did not commit");
        std::thread::sleep(Duration::from_millis(100));
    }
    // A weak read on the stopped node would be stale; it is stopped, so resume it and ask
    // for a strong read at once.
    signal(&cluster, leader, libc::SIGCONT);
    assert_eq!(
        cluster.node(leader).query("select count(*) from p"),
        "2",
        "a strong read through the old leader missed a committed row"
    );
    cluster.node(leader).query("insert into p values (3)");
    for id in 1..=3 {
        assert_eq!(
            cluster.node(id).query("select count(*) from p"),
            "3",
            "node {id}"
        );
    }
}
