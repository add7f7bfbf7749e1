//! A minority cut off by the network: every node reaches the others through proxies of the
//! test's own, and the leader's links are cut both ways. The majority elects a leader and
//! keeps serving; the old leader, which still believes it leads, acknowledges no write and
//! serves no strong read; a weak read there is stale but never shows its own uncommitted
//! write; once healed, every node agrees and that write is nowhere.

mod common;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::cluster::{leader_seen_by, Cluster};
use common::{output_within, PASSWORD, PSQL_LIMIT};

/// Runs `statements` on `port`, each its own query (so none is in an implicit block).
fn psql_each(port: u16, statements: &[&str]) -> Output {
    let mut command = Command::new("psql");
    command
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["-U", "ledger", "-d", "ledger", "-X", "-A", "-t"])
        .args(["-v", "ON_ERROR_STOP=1"]);
    for statement in statements {
        command.args(["-c", statement]);
    }
    command.env("PGPASSWORD", PASSWORD);
    output_within(&mut command, PSQL_LIMIT)
}

fn last_line(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_leader_cut_off_by_the_network_acknowledges_nothing_and_serves_no_strong_read() {
    let (cluster, links) = Cluster::start_behind_proxies(3);
    cluster.node(1).query("create table p (id int primary key)");
    cluster.node(1).query("insert into p values (1)");
    let old = leader_seen_by(&cluster, 1).expect("a leader");
    let majority: Vec<usize> = (1..=3).filter(|&n| n != old).collect();
    for &id in &majority {
        assert_eq!(cluster.node(id).query("select count(*) from p"), "1");
    }
    links.isolate(old);

    // The majority elects a leader of its own and commits. An attempt during the election
    // may fail with its outcome unknown (40003) and yet have applied: a retry then finds
    // the row (the count below checks it is there once).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = cluster.node(majority[0]).psql("insert into p values (2)");
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        if out.status.success() || stderr.contains("duplicate key value") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the majority did not commit: {stderr}\n{}",
            cluster.node(majority[0]).log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        cluster.node(majority[1]).query("select count(*) from p"),
        "2"
    );

    // The old leader acknowledges no write and serves no strong read.
    let port = cluster.node(old).port;
    let write = psql_each(
        port,
        &["set statement_timeout = '3s'", "insert into p values (100)"],
    );
    assert!(
        !write.status.success(),
        "a write was acknowledged by a leader cut off from the majority"
    );
    let strong = psql_each(
        port,
        &["set statement_timeout = '3s'", "select count(*) from p"],
    );
    assert!(
        !strong.status.success(),
        "a strong read was served by a leader cut off from the majority: {}",
        last_line(&strong)
    );
    // A write with no statement_timeout ends too: the leader it reached is cut off, so
    // after a few seconds without a quorum it says the write may or may not apply (40003),
    // rather than wait for a heal that may never come.
    let began = Instant::now();
    let unbounded = psql_each(
        port,
        &["\\set VERBOSITY verbose", "insert into p values (101)"],
    );
    let stderr = String::from_utf8_lossy(&unbounded.stderr);
    assert!(!unbounded.status.success());
    assert!(stderr.contains("40003"), "{stderr}");
    assert!(
        began.elapsed() < Duration::from_secs(30),
        "the write took {:?}",
        began.elapsed()
    );
    // A weak read there is stale, and does not show the write it could not commit.
    let weak = psql_each(
        port,
        &["set read_consistency = weak", "select count(*) from p"],
    );
    assert!(weak.status.success());
    assert_eq!(last_line(&weak), "1");

    links.heal_all();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let seen: Vec<String> = (1..=3)
            .map(|id| {
                last_line(&psql_each(
                    cluster.node(id).port,
                    &["select string_agg(id::text, ',' order by id) from p"],
                ))
            })
            .collect();
        if seen.iter().all(|s| s == "1,2") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the nodes did not converge: {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // And the cluster goes on through the old leader.
    cluster.node(old).query("insert into p values (3)");
    for id in 1..=3 {
        assert_eq!(cluster.node(id).query("select count(*) from p"), "3");
    }
}
