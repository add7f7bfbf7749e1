//! A data file written by format version 2 (whole keys in every leaf) opens in this version,
//! reads the same, takes writes that cut its leaves' prefixes, and says version 3 after its
//! next checkpoint. `fixtures/format-v2.db` (and its emptied journal, `.ckpt`) was written by
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

fn format_version(path: &std::path::Path) -> u32 {
    let bytes = std::fs::read(path).unwrap();
    u32::from_le_bytes(bytes[16..20].try_into().unwrap())
}

#[test]
fn a_version_2_file_reads_the_same_and_upgrades_at_its_next_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
    std::fs::copy(format!("{fixtures}/format-v2.db"), &path).unwrap();
    std::fs::copy(
        format!("{fixtures}/format-v2.db.ckpt"),
        kv::journal_path(&path),
    )
    .unwrap();
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
    assert_eq!(format_version(&path), 3);

    let (mut engine, info) = Engine::open(&path, options()).unwrap();
    assert_eq!(info.log_position.index, 2);
    let table = engine.table("t").unwrap();
    common::assert_table_holds(&mut engine, table, model);
}
