//! A replica whose executor stops applying the log stops as a whole: the state machine
//! reports a fatal storage error to openraft (the node no longer votes or takes entries)
//! and the server exits, instead of answering every statement with an error while the rest
//! of a cluster commits. The same path runs whether the entry is replayed at start (as
//! here) or applied while serving (`main.rs` exits when `Node::stopped` resolves).

mod common;

use std::time::Duration;

use common::TestServer;
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId};

/// Appends to the data directory's Raft log an entry holding a command no build can read
/// (as a newer build's command would be to this one), after the last entry. Returns its
/// index.
fn append_unreadable_entry(data_dir: &std::path::Path) -> u64 {
    let mut log = kv::LogStore::open(&data_dir.join("log"), kv::LogStoreOptions::default())
        .expect("the log opens");
    let last = log.last_index().expect("the log holds entries");
    let bytes = log.read(last, last + 1).unwrap().remove(0).1;
    let previous: Entry<raft::TypeConfig> = bincode::deserialize(&bytes).unwrap();
    let leader = previous.log_id.leader_id;
    let entry: Entry<raft::TypeConfig> = Entry {
        log_id: LogId::new(
            CommittedLeaderId::new(leader.term, leader.node_id),
            last + 1,
        ),
        // The command encoding's compact marker, then a variant no build has.
        payload: EntryPayload::Normal(raft::Batch(vec![vec![0xC1, 0x7f, 0, 0]], 0)),
    };
    log.append(&[(last + 1, bincode::serialize(&entry).unwrap())])
        .unwrap();
    last + 1
}

#[test]
fn a_replica_that_cannot_apply_a_logged_command_exits() {
    let mut server = TestServer::start();
    let out = server.psql(&[
        "-c",
        "create table t (id int primary key); insert into t values (1)",
    ]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert!(server.stop().success());
    let index = append_unreadable_entry(server.data_dir().join("data").as_path());

    let status = server
        .restart_expecting_exit(Duration::from_secs(60))
        .unwrap_or_else(|| panic!("the server kept running: {}", server.log()));
    assert!(!status.success());
    let log = server.log();
    assert!(
        log.contains(&format!(
            "log entry {index} was not applied, this replica stops"
        )),
        "{log}"
    );

    // The data directory is intact up to the entry: without it, the node starts and has
    // the row.
    let mut store =
        kv::LogStore::open(&server.data_dir().join("data/log"), Default::default()).unwrap();
    store.truncate_from(index).unwrap();
    drop(store);
    server.restart();
    let out = server.psql(&["-Atc", "select count(*) from t"]);
    assert_eq!(common::stdout(&out).trim(), "1", "{}", server.log());
}
