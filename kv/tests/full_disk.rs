//! A real full disk: the engine and the log store on a 2 MiB tmpfs. A checkpoint that does not
//! fit fails with ENOSPC naming the file, nothing panics, and after the filesystem grows,
//! recovery yields the old or the new checkpoint, never a mix.
//!
//! Needs root to mount tmpfs (CI runs as root); set `HOTLEDGER_SKIP_MOUNT_TESTS=1` to opt out
//! on machines where mounting is impossible.

use std::path::{Path, PathBuf};
use std::process::Command;

use kv::{Engine, EngineOptions, KvError, LogPosition, LogStore, LogStoreOptions};

struct Tmpfs {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        if std::env::var_os("HOTLEDGER_SKIP_MOUNT_TESTS").is_some() {
            eprintln!("HOTLEDGER_SKIP_MOUNT_TESTS is set: not running the full-disk test");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&path)
            .status()
            .expect("run mount");
        assert!(
            status.success(),
            "mounting tmpfs failed (needs root; set HOTLEDGER_SKIP_MOUNT_TESTS=1 to opt out)"
        );
        Some(Tmpfs { _dir: dir, path })
    }

    fn grow(&self, size: &str) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.path)
            .status()
            .expect("run mount");
        assert!(status.success());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
    }
}

fn options() -> EngineOptions {
    EngineOptions {
        page_size: 4096,
        pool_bytes: 64 << 20,
        ..EngineOptions::default()
    }
}

fn fill(engine: &mut Engine, round: u8, keys: u32) {
    let table = engine.table("t").unwrap();
    for k in 0..keys {
        engine.put(table, &k.to_be_bytes(), &[round; 200]).unwrap();
    }
}

fn round_of(path: &Path, keys: u32) -> u8 {
    let (mut engine, _) = Engine::open(path, options()).unwrap();
    let table = engine.table("t").unwrap();
    let first = engine.get(table, &0u32.to_be_bytes()).unwrap().unwrap()[0];
    for k in 0..keys {
        let value = engine.get(table, &k.to_be_bytes()).unwrap().unwrap();
        assert!(
            value.iter().all(|&b| b == first),
            "key {k} mixes checkpoints"
        );
    }
    first
}

/// Fills `disk` past what a second checkpoint can hold; returns the round recovery must see.
fn checkpoint_until_full(disk: &Tmpfs, path: &Path, keys: u32, extra_keys: u32) -> u8 {
    let (mut engine, _) = Engine::open(path, options()).unwrap();
    engine.create_table("t").unwrap();
    fill(&mut engine, 1, keys);
    engine
        .checkpoint(LogPosition { term: 1, index: 1 })
        .unwrap();
    fill(&mut engine, 2, keys);
    let table = engine.table("t").unwrap();
    for k in keys..keys + extra_keys {
        engine.put(table, &k.to_be_bytes(), &[2; 200]).unwrap();
    }
    let err = engine
        .checkpoint(LogPosition { term: 1, index: 2 })
        .unwrap_err();
    assert!(err.is_no_space(), "{err}");
    assert!(
        err.to_string().contains(disk.path.to_str().unwrap()),
        "names the file: {err}"
    );
    // A failure of the page writes leaves the old checkpoint standing; one of the record
    // (not on a full disk: see below) stops the engine, and recovery takes the new checkpoint
    // if its record is whole.
    match engine.get(table, &0u32.to_be_bytes()) {
        Err(KvError::Poisoned(_)) => 2,
        Ok(_) => 1,
        Err(other) => panic!("unexpected error after a failed checkpoint: {other}"),
    }
}

#[test]
fn a_checkpoint_on_a_full_disk_fails_cleanly_and_recovers_after_space_is_freed() {
    let keys = 1000;
    // A checkpoint's pages go to free slots or past the end of the data file before its
    // page map record is written, and the record (a few blocks) fits where the last one was
    // or nearly: a full disk fails the page writes, and the old checkpoint stands, whatever
    // the growth.
    for extra_keys in [12000, 24000] {
        let Some(disk) = Tmpfs::mount("2m") else {
            return;
        };
        let path = disk.path.join("db");
        let expected_round = checkpoint_until_full(&disk, &path, keys, extra_keys);
        assert_eq!(expected_round, 1, "a full disk fails before the commit");
        disk.grow("64m");
        assert_eq!(
            round_of(&path, keys),
            expected_round,
            "old or new checkpoint, never a mix"
        );
    }
}

#[test]
fn a_log_append_on_a_full_disk_is_a_typed_error_and_loses_nothing_appended_before() {
    let Some(disk) = Tmpfs::mount("1m") else {
        return;
    };
    let dir = disk.path.join("wal");
    let options = LogStoreOptions {
        segment_bytes: 256 << 10,
        ..LogStoreOptions::default()
    };
    let mut store = LogStore::open(&dir, options.clone()).unwrap();
    let mut next = 1u64;
    let err = loop {
        let batch: Vec<(u64, Vec<u8>)> = (next..next + 50)
            .map(|index| (index, vec![7u8; 500]))
            .collect();
        match store.append(&batch) {
            Ok(()) => next += 50,
            Err(err) => break err,
        }
        assert!(next < 100_000, "a 1 MiB filesystem must fill up");
    };
    assert!(
        matches!(&err, KvError::Io { .. }) && err.is_no_space(),
        "{err}"
    );
    drop(store);
    disk.grow("16m");
    let store = LogStore::open(&dir, options).unwrap();
    assert!(
        store.last_index().unwrap() >= next - 1,
        "every acknowledged entry survives"
    );
    for (index, payload) in store.read(1, next).unwrap() {
        assert_eq!(payload, vec![7u8; 500], "entry {index}");
    }
}
