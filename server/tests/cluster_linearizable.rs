//! A linearizability check of strong reads and writes under leader kills: clients of the
//! Go program in tests/linearizability record every read and write of a few registers
//! through all three nodes while the leader is killed with SIGKILL and restarted twice;
//! Porcupine checks the history. The checker first proves on known histories that it
//! refuses a stale read.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::cluster::{leader_seen_by, Cluster};
use common::{repo_root, PASSWORD};

/// Builds the checker into `dir`.
fn build_checker(dir: &std::path::Path) -> PathBuf {
    let binary = dir.join("linearizability");
    let built = Command::new("go")
        .args(["build", "-o"])
        .arg(&binary)
        .arg(".")
        .current_dir(repo_root().join("tests/linearizability"))
        .output()
        .expect("go is installed (tools/setup.sh)");
    assert!(
        built.status.success(),
        "go build: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    binary
}

fn current_leader(cluster: &Cluster, alive: &[usize]) -> usize {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        for &id in alive {
            if let Some(leader) = leader_seen_by(cluster, id).filter(|l| alive.contains(l)) {
                return leader;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no leader among {alive:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn strong_reads_and_writes_stay_linearizable_when_leaders_are_killed() {
    let work = tempfile::tempdir().unwrap();
    let checker = build_checker(work.path());
    let self_test = Command::new(&checker).arg("--self-test").output().unwrap();
    assert!(
        self_test.status.success(),
        "{}",
        String::from_utf8_lossy(&self_test.stdout)
    );

    let mut cluster = Cluster::start(3);
    cluster
        .node(1)
        .query("create table reg (k int primary key, v bigint not null)");
    cluster
        .node(1)
        .query("insert into reg values (0, 0), (1, 0), (2, 0), (3, 0)");
    let ports: Vec<String> = (1..=3)
        .map(|id| cluster.node(id).port.to_string())
        .collect();
    let run = Command::new(&checker)
        .args([
            "--ports",
            &ports.join(","),
            "--seconds",
            "12",
            "--clients",
            "6",
        ])
        .arg("--viz")
        .arg(work.path().join("failure.html"))
        .env("PGPASSWORD", PASSWORD)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    for _ in 0..2 {
        std::thread::sleep(Duration::from_secs(2));
        let leader = current_leader(&cluster, &[1, 2, 3]);
        cluster.kill9(leader);
        std::thread::sleep(Duration::from_millis(1500));
        cluster.restart(leader);
    }
    let out = run.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    eprintln!("{report}");
    assert!(out.status.success(), "not linearizable: {report}");
    assert!(report.contains("write ok"), "{report}");
    assert!(report.contains("read ok"), "{report}");
}
