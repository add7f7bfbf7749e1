//! A data file written by format version 2 (whole keys in every leaf) opens in this version,
//! reads the same, takes writes that cut its leaves' prefixes, and says version 4 (pages in
//! slots named by a page map record) after its next checkpoint. `fixtures/format-v2.db` (and its emptied journal, `.ckpt`) was written by
//! commit 66cadb4's engine: 512-byte pages, table "t" with 600 keys
//! `account-{k / 12 * 7:05}-entry-{k % 12:03}` whose values are `k % 23` bytes of `k % 251`,
//! put in key order, then one checkpoint at log index 1.

mod common;

use std::collections::BTreeMap;

use kv::{Engine, EngineOptions, LogPosition};

fn fixture_model() -> BTreeMap<Vec<u8>, Vec<u8>> {
    (0..600u32)
        .map(|k| {
            let key = format!("account-{:05}-entry-{:03}", k / 12 * 7, k % 12);
            (key.into_bytes(), vec![(k % 251) as u8; (k % 23) as usize])
        })
        .collect()
}

/// A fixture data file and its journal, copied to a fresh directory as `db`.
fn copy_fixture(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    // Read when the test runs, not compiled in: a clone sharing the target directory reuses
    // a test binary built in another checkout.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let fixtures = format!("{manifest}/tests/fixtures");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    std::fs::copy(format!("{fixtures}/{name}"), &path).unwrap();
    std::fs::copy(format!("{fixtures}/{name}.ckpt"), kv::journal_path(&path)).unwrap();
    (dir, path)
}

fn format_version(path: &std::path::Path) -> u32 {
    let bytes = std::fs::read(path).unwrap();
    u32::from_le_bytes(bytes[16..20].try_into().unwrap())
}

#[test]
fn a_version_2_file_reads_the_same_and_upgrades_at_its_next_checkpoint() {
    let (_dir, path) = copy_fixture("format-v2.db");
    assert_eq!(format_version(&path), 2);
    let options = || EngineOptions {
        create: false,
        ..EngineOptions::default()
    };
    let mut model = fixture_model();
    let (mut engine, info) = Engine::open(&path, options()).unwrap();
    assert_eq!(info.log_position.index, 1);
    let table = engine.table("t").unwrap();
    common::assert_table_holds(&mut engine, table, model.clone());

    // Writes into the old leaves: between their keys, before the first, after the last, and
    // deletes; each leaf they rebuild cuts its prefix from then on.
    for k in (0..700u32).step_by(3) {
        let key = format!("account-{:05}-entry-{:03}x", k / 12 * 7, k % 12).into_bytes();
        let value = vec![7u8; (k % 31) as usize];
        engine.put(table, &key, &value).unwrap();
        model.insert(key, value);
    }
    for k in (0..600u32).step_by(5) {
        let key = format!("account-{:05}-entry-{:03}", k / 12 * 7, k % 12).into_bytes();
        assert!(engine.delete(table, &key).unwrap());
        model.remove(&key);
    }
    for key in [b"a".to_vec(), b"zzz".to_vec()] {
        engine.put(table, &key, b"edge").unwrap();
        model.insert(key, b"edge".to_vec());
    }
    common::assert_table_holds(&mut engine, table, model.clone());
    engine
        .checkpoint(LogPosition { term: 1, index: 2 })
        .unwrap();
    drop(engine);
    assert_eq!(format_version(&path), 4);

    // Later checkpoints write their pages to the slots the earlier ones freed.
    for round in 3..6u64 {
        let (mut engine, info) = Engine::open(&path, options()).unwrap();
        assert_eq!(info.log_position.index, round - 1);
        assert!(!kv::journal_path(&path).exists(), "the old journal is gone");
        let table = engine.table("t").unwrap();
        common::assert_table_holds(&mut engine, table, model.clone());
        for k in (0..700u32).step_by(round as usize) {
            let key = format!("account-{:05}-entry-{:03}x", k / 12 * 7, k % 12).into_bytes();
            let value = vec![round as u8; (k % 29) as usize];
            engine.put(table, &key, &value).unwrap();
            model.insert(key, value);
        }
        engine
            .checkpoint(LogPosition {
                term: 1,
                index: round,
            })
            .unwrap();
    }
    let (mut engine, _) = Engine::open(&path, options()).unwrap();
    let table = engine.table("t").unwrap();
    common::assert_table_holds(&mut engine, table, model);
    // The file holds at most two images of each page: slots are reused.
    let slots = std::fs::metadata(&path).unwrap().len() / 512;
    let pages = engine.stats().page_count;
    assert!(slots <= 2 * pages + 2, "{slots} slots for {pages} pages");
}

fn key(k: u32) -> Vec<u8> {
    format!("account-{:05}-entry-{:03}", k / 12 * 7, k % 12).into_bytes()
}

/// `fixtures/format-v3-journaled.db` and its journal were written by commit f21dd0e's engine
/// with gated checkpoints and 512-byte pages: table "t" with the 600 keys above, committed
/// and written in place at log index 1; then every fourth key set to `round-2` and every
/// seventh deleted, checkpointed at index 2 up to a durable journal, and the process ended
/// there (as a crash before the owner's commit would leave it).
fn v3_model(round: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = fixture_model();
    if round == 2 {
        for k in (0..600u32).step_by(4) {
            model.insert(key(k), b"round-2".to_vec());
        }
        for k in (0..600u32).step_by(7) {
            model.remove(&key(k));
        }
    }
    model
}

#[test]
fn a_version_3_file_takes_its_journal_only_when_committed_then_upgrades() {
    for committed in [1u64, 2] {
        let (_dir, path) = copy_fixture("format-v3-journaled.db");
        assert_eq!(format_version(&path), 3);
        let options = || EngineOptions {
            create: false,
            gated_checkpoints: true,
            commit_limit: Some(committed),
            ..EngineOptions::default()
        };
        let (mut engine, info) = Engine::open(&path, options()).unwrap();
        assert_eq!(info.log_position.index, committed);
        assert_eq!(info.journal_replayed, committed == 2);
        let table = engine.table("t").unwrap();
        let mut model = v3_model(committed);
        common::assert_table_holds(&mut engine, table, model.clone());
        for k in (1..600u32).step_by(5) {
            engine.put(table, &key(k), b"round-3").unwrap();
            model.insert(key(k), b"round-3".to_vec());
        }
        // A first checkpoint that is never committed leaves the file as format 3.
        engine
            .begin_checkpoint(LogPosition { term: 1, index: 3 })
            .unwrap();
        assert!(engine.wait_prepared().unwrap());
        engine.abandon_checkpoint().unwrap();
        assert_eq!(format_version(&path), 3);
        engine
            .begin_checkpoint(LogPosition { term: 1, index: 3 })
            .unwrap();
        assert!(engine.wait_prepared().unwrap());
        engine.release_checkpoint();
        engine.wait_checkpoint().unwrap();
        drop(engine);
        assert_eq!(format_version(&path), 4);
        let (mut engine, info) = Engine::open(
            &path,
            EngineOptions {
                commit_limit: Some(3),
                ..options()
            },
        )
        .unwrap();
        assert_eq!(info.log_position.index, 3);
        assert!(!info.journal_replayed);
        let table = engine.table("t").unwrap();
        common::assert_table_holds(&mut engine, table, model);
    }
}
