//! A real full disk (a small tmpfs mounted under the data directory; the test needs root and
//! says it was skipped otherwise): checkpoints fail, back off and say so a few times, not
//! hundreds; once the log cannot grow, writes wait instead of failing and the server stays
//! up serving reads; when space returns, writes resume by themselves and checkpoints succeed;
//! after kill -9 every acknowledged row is there and `hotledger check` finds the data
//! consistent.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{scalar, TestServer};

/// A tmpfs of `megabytes` at a directory, unmounted when dropped.
struct SmallDisk {
    at: PathBuf,
}

impl SmallDisk {
    fn mount(at: &Path, megabytes: u64) -> Option<SmallDisk> {
        std::fs::create_dir_all(at).ok()?;
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={megabytes}m"), "tmpfs"])
            .arg(at)
            .status()
            .ok()?
            .success();
        mounted.then(|| SmallDisk {
            at: at.to_path_buf(),
        })
    }

    /// Fills what is left with a file; returns its path.
    fn fill(&self) -> PathBuf {
        let path = self.at.join("filler");
        let mut file = std::fs::File::create(&path).unwrap();
        let chunk = vec![7u8; 1 << 20];
        while file.write_all(&chunk).is_ok() {}
        let _ = file.sync_all();
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.at).status();
    }
}

async fn count(c: &tokio_postgres::Client, sql: &str) -> u64 {
    scalar(c, sql).await.unwrap().parse().unwrap()
}

fn lines(log: &str, text: &str) -> usize {
    log.lines().filter(|l| l.contains(text)).count()
}

async fn wait_for(
    server: &TestServer,
    what: &str,
    limit: Duration,
    mut done: impl FnMut() -> bool,
) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; server log:\n{}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Inserts 500 rows of 1 KB per statement (logged with its rows), the ids of batch `base`
/// on, counting the statements acknowledged, until told to stop or its connection ends.
async fn write(url: String, base: u64, acknowledged: Arc<AtomicU64>, stop: Arc<AtomicBool>) {
    let Ok((client, connection)) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await
    else {
        return;
    };
    tokio::spawn(connection);
    let body = "z".repeat(1000);
    for batch in base.. {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let rows: Vec<String> = (0..500)
            .map(|i| format!("({}, '{body}')", batch * 500 + i))
            .collect();
        let sql = format!("insert into big values {}", rows.join(","));
        if client.batch_execute(&sql).await.is_err() {
            return;
        }
        acknowledged.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_makes_writes_wait_and_they_resume_when_space_returns() {
    let mut disk = None;
    let mut server = TestServer::start_prepared(&["--checkpoint-interval-s", "1"], |data| {
        // Two 64 MiB log segments (one in use, one spare) fill as the writer goes; once the
        // filler goes, room for the next segment and a checkpoint of everything.
        disk = SmallDisk::mount(data, 512);
    });
    let Some(disk) = disk else {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    };
    let c = server.client().await;
    c.batch_execute("create table big (id int primary key, body text)")
        .await
        .unwrap();
    let filler = disk.fill();

    // One writer: 500 rows of 1 KB per statement, each logged with its rows.
    let acknowledged = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(write(server.url(), 0, acknowledged.clone(), stop.clone()));
    // The log fills its segments; appends then wait for space.
    wait_for(&server, "the log to fill", Duration::from_secs(180), || {
        server.log().contains("the log's disk is full")
    })
    .await;
    let stalled = acknowledged.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        acknowledged.load(Ordering::SeqCst) <= stalled + 1,
        "writes went on"
    );
    // Reads still answer meanwhile, and the server is up.
    assert!(count(&c, "select count(*) from big").await >= stalled * 500);
    let log = server.log();
    assert!(lines(&log, "checkpoint failed") >= 1, "{log}");
    assert!(
        lines(&log, "checkpoint failed") <= 5,
        "failed checkpoints flood the log: {log}"
    );

    // A restart while the disk is still full serves: `hotledger check` passes, the server
    // comes up, every acknowledged row is there (the statement cut off may be too).
    drop(c);
    server.kill9_and_restart();
    writer.await.unwrap();
    let first = acknowledged.load(Ordering::SeqCst);
    let c = server.client().await;
    let rows = count(&c, "select count(*) from big").await;
    assert!(
        rows == first * 500 || rows == (first + 1) * 500,
        "{rows} rows for {first}"
    );
    let base = rows / 500;
    let acknowledged = Arc::new(AtomicU64::new(0));
    let writer = tokio::spawn(write(
        server.url(),
        base,
        acknowledged.clone(),
        stop.clone(),
    ));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let stalled = acknowledged.load(Ordering::SeqCst);
    assert!(
        stalled <= 1,
        "{stalled} statements committed on a full disk"
    );
    // A client with a statement timeout stops waiting (its write may still commit later).
    c.batch_execute("set statement_timeout = '1s'")
        .await
        .unwrap();
    let started = Instant::now();
    let e = c
        .batch_execute("insert into big values (-1, 'timed out')")
        .await
        .unwrap_err();
    assert_eq!(common::code(&e), "57014", "{e}");
    assert!(started.elapsed() < Duration::from_secs(10));

    // Space returns: writes resume by themselves, and (the writer pausing, so that the log
    // does not take the room again) a checkpoint succeeds.
    std::fs::remove_file(&filler).unwrap();
    wait_for(&server, "writes to resume", Duration::from_secs(30), || {
        acknowledged.load(Ordering::SeqCst) >= stalled + 3
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    writer.await.unwrap();
    wait_for(
        &server,
        "a checkpoint to succeed",
        Duration::from_secs(60),
        || server.log().contains("checkpoint succeeded after"),
    )
    .await;
    assert!(server.log().contains("appends resumed"));

    // kill -9: `hotledger check` finds the data consistent, and after the restart every
    // acknowledged statement's rows are there.
    let done = acknowledged.load(Ordering::SeqCst);
    drop(c);
    server.kill9_and_restart();
    let c = server.client().await;
    // (The timed-out insert of row -1 may have committed once there was room.)
    let rows = count(&c, "select count(*) from big where id >= 0").await;
    assert_eq!(
        rows,
        (base + done) * 500,
        "{done} acknowledged statements after {base}"
    );
}
