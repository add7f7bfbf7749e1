//! Writes to the log that fail with EIO, injected at the log's IO layer through
//! `HOTLEDGER_TEST_FAULTS` as a failing disk would fail them: the server stops (a write or
//! fsync that failed cannot safely be retried) having acknowledged only what reached the
//! log; restarted on a healthy disk, every acknowledged transfer is there, none twice, and
//! `hotledger check` finds the data consistent. (A full disk, which makes writes wait
//! instead, is `disk_full.rs`, on a real file system.)

mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::TestServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_log_write_stops_the_server_and_loses_nothing_acknowledged() {
    // The log's 400th write from the start fails, and every one after it.
    let mut server = TestServer::start_with_env(
        &["--checkpoint-interval-s", "1"],
        &[("HOTLEDGER_TEST_FAULTS", "log-write:EIO:400")],
    );
    let c = server.client().await;
    c.batch_execute(
        "insert into accounts (id, ledger, code) values (1, 700, 10), (2, 700, 10), (3, 700, 10)",
    )
    .await
    .unwrap();
    drop(c);
    let acknowledged = Arc::new(Mutex::new(BTreeSet::new()));
    let writers: Vec<_> = (0..8i64)
        .map(|w| {
            let url = server.url();
            let acknowledged = acknowledged.clone();
            tokio::spawn(async move {
                let Ok((client, connection)) =
                    tokio_postgres::connect(&url, tokio_postgres::NoTls).await
                else {
                    return;
                };
                tokio::spawn(connection);
                for n in 1..100_000i64 {
                    let id = w * 1_000_000 + n;
                    let (debit, credit) = (n % 3 + 1, (n + 1) % 3 + 1);
                    let sql = format!("call transfer({id}, {debit}, {credit}, 1, 700, 1)");
                    if client.simple_query(&sql).await.is_err() {
                        return;
                    }
                    acknowledged.lock().unwrap().insert(id);
                }
            })
        })
        .collect();
    let status = tokio::task::block_in_place(|| server.wait_exit(Duration::from_secs(120)))
        .expect("the server stops when its log cannot be written");
    assert!(!status.success());
    for w in writers {
        w.await.unwrap();
    }
    let log = server.log();
    assert!(
        log.contains("Input/output error") && log.contains("can no longer apply the log"),
        "{log}"
    );
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(
        acknowledged.len() > 50,
        "{} acknowledged",
        acknowledged.len()
    );

    server.env.clear();
    server.check_data();
    server.restart();
    let c = server.client().await;
    let unique = common::stored_transfer_ids(&c).await;
    let lost: Vec<_> = acknowledged.difference(&unique).collect();
    assert!(lost.is_empty(), "acknowledged transfers lost: {lost:?}");
    // No more than were sent: at most one in flight per writer beyond the acknowledged.
    assert!(unique.len() <= acknowledged.len() + 8);
}
