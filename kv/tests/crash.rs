//! Crash test with real processes: a worker process appends operations to a `LogStore`
//! (durably), applies them to an `Engine`, prints each acknowledged log index and runs
//! checkpoints back to back, purging the log behind them. The parent `kill -9`s it at random
//! moments (during updates, checkpoints, purges or its own recovery), then recovers like a
//! server would — last checkpoint plus log replay — and compares every key with a model built
//! from the same deterministic operation stream up to the recovered log end.
//!
//! The worker is this test binary re-run with `KV_CRASH_WORKER` set. `KV_CRASH_ROUNDS` sets the
//! number of kills (default 12).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kv::{Engine, EngineOptions, LogPosition, LogStore, LogStoreOptions, Table};
use rand::Rng;

const KEYS: u64 = 3000;

enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Operation number `index` of the stream (indices start at 1).
fn op(index: u64) -> Op {
    let h = mix(index);
    let key = format!("k{:06}", h % KEYS).into_bytes();
    if (h >> 20) % 10 < 2 {
        return Op::Delete(key);
    }
    let size = if (h >> 40).is_multiple_of(40) {
        1500 + (h >> 50) as usize % 3000
    } else {
        8 + (h >> 32) as usize % 200
    };
    let mut value = index.to_le_bytes().to_vec();
    value.resize(size, (index % 251) as u8);
    Op::Put(key, value)
}

fn encode(op: &Op) -> Vec<u8> {
    match op {
        Op::Put(key, value) => [&[1u8][..], key, value].concat(),
        Op::Delete(key) => [&[2u8][..], key].concat(),
    }
}

fn apply(engine: &mut Engine, table: Table, op: &Op) {
    match op {
        Op::Put(key, value) => {
            engine.put(table, key, value).unwrap();
        }
        Op::Delete(key) => {
            engine.delete(table, key).unwrap();
        }
    }
}

fn engine_options() -> EngineOptions {
    EngineOptions {
        page_size: 4096,
        pool_bytes: 512 << 10,
        ..EngineOptions::default()
    }
}

fn log_options() -> LogStoreOptions {
    LogStoreOptions {
        segment_bytes: 256 << 10,
        ..LogStoreOptions::default()
    }
}

/// Opens both stores and replays the log past the checkpoint, as a server start does.
fn recover(dir: &Path) -> (Engine, LogStore, Table) {
    let (mut engine, info) = Engine::open(&dir.join("data"), engine_options()).unwrap();
    let log = LogStore::open(&dir.join("wal"), log_options()).unwrap();
    let table = match engine.table("t") {
        Some(table) => table,
        None => {
            assert_eq!(
                log.last_index(),
                None,
                "the log starts only after the table exists durably"
            );
            let table = engine.create_table("t").unwrap();
            engine.checkpoint(LogPosition::default()).unwrap();
            table
        }
    };
    if let Some(last) = log.last_index() {
        let from = info.log_position.index + 1;
        assert!(
            log.first_index().unwrap() <= from,
            "the log was purged past the checkpoint"
        );
        for (index, payload) in log.read(from, last + 1).unwrap() {
            let op = op(index);
            assert_eq!(
                payload,
                encode(&op),
                "log entry {index} holds what was appended"
            );
            apply(&mut engine, table, &op);
        }
    }
    (engine, log, table)
}

#[test]
fn crash_worker() {
    let Some(dir) = std::env::var_os("KV_CRASH_WORKER") else {
        return;
    };
    let dir = PathBuf::from(dir);
    let (mut engine, mut log, table) = recover(&dir);
    let mut next = log.last_index().map_or(1, |last| last + 1);
    let mut since_checkpoint = 0;
    let mut stdout = std::io::stdout();
    let mut rng = rand::thread_rng();
    loop {
        let count = rng.gen_range(1..20u64);
        let entries: Vec<(u64, Vec<u8>)> = (next..next + count)
            .map(|index| (index, encode(&op(index))))
            .collect();
        log.append(&entries).unwrap();
        for index in next..next + count {
            apply(&mut engine, table, &op(index));
        }
        next += count;
        since_checkpoint += count;
        writeln!(stdout, "acked {}", next - 1).unwrap();
        stdout.flush().unwrap();
        if let Some(report) = engine.poll_checkpoint().unwrap() {
            log.purge_through(report.log_position.index).unwrap();
            writeln!(stdout, "checkpoint {}", report.seq).unwrap();
        }
        if !engine.checkpoint_in_progress() && since_checkpoint >= 200 {
            engine
                .begin_checkpoint(LogPosition {
                    term: 1,
                    index: next - 1,
                })
                .unwrap();
            since_checkpoint = 0;
        }
    }
}

fn verify(dir: &Path, acked: u64) -> u64 {
    let (mut engine, log, table) = recover(dir);
    let last = log.last_index().unwrap_or(0);
    assert!(
        last >= acked,
        "acknowledged index {acked} lost: the log ends at {last}"
    );
    let mut model = BTreeMap::new();
    for index in 1..=last {
        match op(index) {
            Op::Put(key, value) => {
                model.insert(key, value);
            }
            Op::Delete(key) => {
                model.remove(&key);
            }
        }
    }
    assert_eq!(engine.check_table(table).unwrap().keys, model.len());
    for (key, value) in &model {
        assert_eq!(
            engine.get(table, key).unwrap().as_ref(),
            Some(value),
            "key {:?}",
            String::from_utf8_lossy(key)
        );
    }
    last
}

#[test]
fn kill_9_at_random_points_loses_no_acknowledged_operation() {
    let rounds: u32 = std::env::var("KV_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::thread_rng();
    let mut checkpoints = 0;
    let mut last = 0;
    for _ in 0..rounds {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["crash_worker", "--exact", "--nocapture", "--test-threads=1"])
            .env("KV_CRASH_WORKER", dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let acked = Arc::new(AtomicU64::new(0));
        let seen_checkpoints = Arc::new(AtomicU64::new(0));
        let reader = {
            let stdout = child.stdout.take().unwrap();
            let (acked, seen_checkpoints) = (Arc::clone(&acked), Arc::clone(&seen_checkpoints));
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if let Some(index) = line.strip_prefix("acked ") {
                        acked.store(index.parse().unwrap(), Ordering::SeqCst);
                    } else if line.starts_with("checkpoint ") {
                        seen_checkpoints.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        };
        std::thread::sleep(Duration::from_millis(rng.gen_range(150..900)));
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        reader.join().unwrap();
        assert!(
            status.code().is_none(),
            "the worker must die by the signal, not exit: {status}"
        );
        let acked = acked.load(Ordering::SeqCst);
        checkpoints += seen_checkpoints.load(Ordering::SeqCst);
        last = verify(dir.path(), acked);
        eprintln!("round: acknowledged {acked}, recovered through {last}, checkpoints so far {checkpoints}");
    }
    assert!(last > 0, "the workers made progress");
    assert!(checkpoints > 0, "checkpoints ran between kills");
}
