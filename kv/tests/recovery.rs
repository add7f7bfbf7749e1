//! Bad files and failing disks: each gives a typed error naming the file, nothing panics, and a
//! failed checkpoint never leaves a half-applied image after recovery.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

use kv::{Engine, EngineOptions, FaultPlan, KvError, LogPosition, Table};

fn position(index: u64) -> LogPosition {
    LogPosition { term: 1, index }
}

fn options(faults: FaultPlan) -> EngineOptions {
    EngineOptions {
        page_size: 4096,
        pool_bytes: 1 << 20,
        faults,
        ..EngineOptions::default()
    }
}

fn fill(engine: &mut Engine, table: Table, round: u8, keys: u32) {
    for k in 0..keys {
        let value = vec![round; 50 + (k % 300) as usize];
        engine.put(table, &k.to_be_bytes(), &value).unwrap();
    }
}

/// Every key holds a value made of `round` bytes.
fn assert_round(path: &Path, round: u8, keys: u32) {
    assert_round_opened(path, round, keys, options(FaultPlan::none()));
}

fn assert_round_opened(path: &Path, round: u8, keys: u32, options: EngineOptions) {
    let (mut engine, _) = Engine::open(path, options).unwrap();
    let table = engine.table("t").unwrap();
    for k in 0..keys {
        let value = engine
            .get(table, &k.to_be_bytes())
            .unwrap()
            .expect("key present");
        assert!(
            value.iter().all(|&b| b == round),
            "key {k}: expected round {round}, got {}",
            value[0]
        );
    }
    assert_eq!(engine.check_table(table).unwrap().keys, keys as usize);
}

fn database_at_round_one(path: &Path, keys: u32) {
    let (mut engine, _) = Engine::open(path, options(FaultPlan::none())).unwrap();
    let table = engine.create_table("t").unwrap();
    fill(&mut engine, table, 1, keys);
    engine.checkpoint(position(1)).unwrap();
}

/// Round 1 checkpointed, then round 2 written and not yet checkpointed, by an engine opened
/// with `options` (whose fault plan the caller arms).
fn round_two_unsaved(path: &Path, keys: u32, options: EngineOptions) -> (Engine, Table) {
    database_at_round_one(path, keys);
    let (mut engine, _) = Engine::open(path, options).unwrap();
    let table = engine.table("t").unwrap();
    fill(&mut engine, table, 2, keys);
    (engine, table)
}

#[test]
fn enospc_or_eio_at_any_write_of_a_checkpoint_leaves_old_or_new_never_a_mix() {
    let keys = 3000;
    let mut saw_page_failure = false;
    let mut saw_record_failure = false;
    for failing_write in 0..24 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let faults = FaultPlan::none();
        let (mut engine, table) = round_two_unsaved(&path, keys, options(faults.clone()));
        // Alternate a full disk and a failing disk.
        let errno = if failing_write % 4 < 2 {
            libc::ENOSPC
        } else {
            libc::EIO
        };
        faults.fail_writes_after(failing_write, errno);
        let result = engine.checkpoint(position(2));
        faults.heal();
        if let Err(err) = result {
            assert_eq!(err.is_no_space(), errno == libc::ENOSPC, "{err}");
            assert!(
                err.to_string().contains(dir.path().to_str().unwrap()),
                "names the file: {err}"
            );
            match engine.get(table, &0u32.to_be_bytes()) {
                // The page map record may be on disk: only recovery may go on.
                Err(KvError::Poisoned(_)) => saw_record_failure = true,
                Ok(_) => {
                    saw_page_failure = true;
                    // Retrying after the disk has room succeeds.
                    if failing_write % 2 == 0 {
                        engine.checkpoint(position(2)).unwrap();
                    }
                }
                Err(other) => panic!("unexpected error after a failed checkpoint: {other}"),
            }
        }
        drop(engine);
        // Whichever checkpoint recovery finds, it holds exactly that round.
        let (_, info) = Engine::open(&path, options(FaultPlan::none())).unwrap();
        assert_round(&path, info.log_position.index as u8, keys);
    }
    assert!(
        saw_page_failure && saw_record_failure,
        "the sweep covered both phases"
    );
}

#[test]
fn a_torn_page_map_record_leaves_the_previous_checkpoint_intact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let (mut engine, _) = round_two_unsaved(&path, 2000, options(FaultPlan::none()));
        engine.checkpoint(position(2)).unwrap();
    }
    // Round 2's record went to one of the pair; tearing it, as a crash while writing it
    // would, leaves round 1's record and the slots it names, which round 2 did not reuse.
    let newest = ["db.map0", "db.map1"]
        .map(|name| dir.path().join(name))
        .into_iter()
        .max_by_key(|p| std::fs::read(p).unwrap()[8])
        .unwrap();
    let record = OpenOptions::new().write(true).open(&newest).unwrap();
    record.write_all_at(&[0xEE; 64], 2 * 4096 + 100).unwrap();
    let (_, info) = Engine::open(&path, options(FaultPlan::none())).unwrap();
    assert_eq!(info.log_position, position(1));
    assert_round(&path, 1, 2000);
}

#[test]
fn a_damaged_page_is_a_typed_error_naming_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    database_at_round_one(&path, 2000);
    let data = OpenOptions::new().write(true).open(&path).unwrap();
    data.write_all_at(&[0x55; 16], 7 * 4096 + 1000).unwrap();
    let (mut engine, _) = Engine::open(&path, options(FaultPlan::none())).unwrap();
    let table = engine.table("t").unwrap();
    let mut first_error = None;
    for k in 0..2000u32 {
        if let Err(err) = engine.get(table, &k.to_be_bytes()) {
            first_error = Some(err);
            break;
        }
    }
    let err = first_error.expect("some key lives on the damaged page");
    assert!(
        matches!(err, KvError::Corrupt { offset: 28672, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("db"), "{err}");
}

#[test]
fn wrong_version_foreign_and_truncated_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    database_at_round_one(&path, 3000);

    let bytes = std::fs::read(&path).unwrap();
    let mut newer = bytes.clone();
    newer[16] = 99;
    std::fs::write(&path, &newer).unwrap();
    let err = Engine::open(&path, options(FaultPlan::none()))
        .err()
        .unwrap();
    assert!(
        matches!(
            err,
            KvError::FormatVersion {
                found: 99,
                expected: kv::FORMAT_VERSION,
                ..
            }
        ),
        "{err}"
    );

    std::fs::write(
        &path,
        b"PGDMP not a hotledger file, but long enough to read a header ....".repeat(10),
    )
    .unwrap();
    let err = Engine::open(&path, options(FaultPlan::none()))
        .err()
        .unwrap();
    assert!(matches!(err, KvError::NotOurFile { .. }), "{err}");

    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let err = Engine::open(&path, options(FaultPlan::none()))
        .err()
        .unwrap();
    assert!(matches!(err, KvError::Truncated { .. }), "{err}");
    assert!(err.to_string().contains("db"), "{err}");

    std::fs::write(&path, &bytes[..100]).unwrap();
    let err = Engine::open(&path, options(FaultPlan::none()))
        .err()
        .unwrap();
    assert!(matches!(err, KvError::Truncated { .. }), "{err}");
}

#[test]
fn oversized_keys_and_duplicate_tables_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (mut engine, _) = Engine::open(&dir.path().join("db"), options(FaultPlan::none())).unwrap();
    let table = engine.create_table("t").unwrap();
    let err = engine.put(table, &[1u8; 600], b"v").unwrap_err();
    assert!(
        matches!(err, KvError::KeyTooLarge { len: 600, max: 512 }),
        "{err}"
    );
    assert!(matches!(
        engine.create_table("t"),
        Err(KvError::TableExists(_))
    ));
    assert!(matches!(
        engine.drop_table("nope"),
        Err(KvError::NoSuchTable(_))
    ));
    let big = vec![7u8; 100_000];
    engine.put(table, b"big", &big).unwrap();
    assert_eq!(engine.get(table, b"big").unwrap().unwrap(), big);
    engine.delete(table, b"big").unwrap();
    let pages_before = engine.stats().page_count;
    engine.put(table, b"big", &big).unwrap();
    assert_eq!(
        engine.stats().page_count,
        pages_before,
        "freed overflow pages are reused"
    );
    assert!(matches!(
        Engine::open(
            &dir.path().join("x"),
            EngineOptions {
                page_size: 1000,
                ..options(FaultPlan::none())
            }
        ),
        Err(KvError::BadPageSize(1000))
    ));
}

#[test]
fn checkpoints_do_not_stop_updates_and_tables_survive_drop_and_recreate() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let (mut engine, _) = Engine::open(&path, options(FaultPlan::none())).unwrap();
    let table = engine.create_table("t").unwrap();
    let other = engine.create_table("other").unwrap();
    fill(&mut engine, table, 1, 5000);
    fill(&mut engine, other, 9, 100);
    engine.begin_checkpoint(position(1)).unwrap();
    // Updates continue while the writer works; the checkpoint keeps the round-1 image.
    fill(&mut engine, table, 2, 5000);
    assert!(matches!(
        engine.begin_checkpoint(position(2)),
        Err(KvError::CheckpointInProgress)
    ));
    engine.wait_checkpoint().unwrap();
    engine.drop_table("other").unwrap();
    drop(engine);
    assert_round(&path, 1, 5000);
    let (engine, info) = Engine::open(&path, options(FaultPlan::none())).unwrap();
    assert_eq!(info.log_position, position(1));
    assert!(
        engine.table("other").is_some(),
        "the drop came after the checkpoint"
    );
}

#[test]
fn engine_and_log_store_can_move_to_the_thread_that_owns_them() {
    fn assert_send<T: Send>() {}
    assert_send::<Engine>();
    assert_send::<kv::LogStore>();
}

fn gated(limit: Option<u64>) -> EngineOptions {
    EngineOptions {
        gated_checkpoints: true,
        commit_limit: limit,
        ..options(FaultPlan::none())
    }
}

/// Round 2 checkpointed up to a durable page map record that was never released, and the
/// files copied to `crashed` at that moment as a `kill -9` would leave them.
fn prepared_round_two(path: &Path, keys: u32, crashed: &Path) {
    let (mut engine, _) = round_two_unsaved(path, keys, gated(Some(1)));
    engine.begin_checkpoint(position(2)).unwrap();
    assert!(engine.wait_prepared().unwrap());
    assert!(engine.checkpoint_prepared());
    assert!(matches!(
        engine.wait_checkpoint(),
        Err(KvError::CheckpointInProgress)
    ));
    for suffix in ["", ".map0", ".map1"] {
        let name = format!("db{suffix}");
        std::fs::copy(path.with_file_name(&name), crashed.join(&name)).unwrap();
    }
    // Dropping an unreleased checkpoint abandons it: the owner never committed it.
}

#[test]
fn a_gated_checkpoint_beyond_the_commit_limit_is_not_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let crashed = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    prepared_round_two(&path, 2000, crashed.path());
    for path in [path, crashed.path().join("db")] {
        let (engine, info) = Engine::open(&path, gated(Some(1))).unwrap();
        assert_eq!(info.log_position, position(1));
        drop(engine);
        assert_round_opened(&path, 1, 2000, gated(Some(1)));
    }
}

#[test]
fn a_committed_gated_checkpoint_is_recovered_before_its_release() {
    let dir = tempfile::tempdir().unwrap();
    let crashed = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    prepared_round_two(&path, 2000, crashed.path());
    let path = crashed.path().join("db");
    let (engine, info) = Engine::open(&path, gated(Some(2))).unwrap();
    assert_eq!(info.log_position, position(2));
    drop(engine);
    assert_round(&path, 2, 2000);
}

/// A whole checkpoint of a gated engine whose owner commits it at once.
fn checkpoint_committed(engine: &mut Engine, at: LogPosition) -> Result<(), KvError> {
    engine.begin_checkpoint(at)?;
    engine.wait_prepared()?;
    engine.release_checkpoint();
    engine.wait_checkpoint().map(|_| ())
}

#[test]
fn every_failure_of_a_gated_checkpoint_before_its_commit_can_be_retried() {
    let keys = 3000;
    let mut saw_record_failure = false;
    for failing_write in 0..16 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let faults = FaultPlan::none();
        let failing = EngineOptions {
            faults: faults.clone(),
            ..gated(Some(1))
        };
        let (mut engine, table) = round_two_unsaved(&path, keys, failing);
        faults.fail_writes_after(failing_write, libc::EIO);
        let result = checkpoint_committed(&mut engine, position(2));
        faults.heal();
        if let Err(err) = result {
            saw_record_failure |= err.to_string().contains("db.map");
            engine
                .get(table, &0u32.to_be_bytes())
                .unwrap_or_else(|e| panic!("{err} stopped the engine: {e}"));
            checkpoint_committed(&mut engine, position(2)).unwrap();
        }
        drop(engine);
        assert_round_opened(&path, 2, keys, gated(Some(2)));
    }
    assert!(saw_record_failure, "the sweep reached the record");
}

#[test]
fn a_released_gated_checkpoint_becomes_durable_and_an_abandoned_one_can_be_retried() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    database_at_round_one(&path, 500);
    {
        let (mut engine, _) = Engine::open(&path, gated(Some(1))).unwrap();
        let table = engine.table("t").unwrap();
        fill(&mut engine, table, 2, 500);
        engine.begin_checkpoint(position(2)).unwrap();
        engine.abandon_checkpoint().unwrap();
        assert!(!engine.checkpoint_in_progress());
        assert_eq!(engine.durable_position(), position(1));
        // The abandoned checkpoint's pages are dirty again: the next one carries them.
        engine.begin_checkpoint(position(3)).unwrap();
        assert!(engine.wait_prepared().unwrap());
        engine.release_checkpoint();
        let report = engine.wait_checkpoint().unwrap().expect("released");
        assert_eq!(report.log_position, position(3));
        assert_eq!(engine.durable_position(), position(3));
    }
    let (_, info) = Engine::open(&path, gated(Some(3))).unwrap();
    assert_eq!(info.log_position, position(3));
    assert_round_opened(&path, 2, 500, gated(Some(3)));
}

#[test]
fn each_checkpoint_writes_a_page_once_and_reuses_the_slots_it_frees() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    database_at_round_one(&path, 2000);
    let data_len = || std::fs::metadata(&path).unwrap().len();
    let first = data_len();
    assert!(first >= 50 * 4096, "{first}");
    for round in 2..8u8 {
        let (mut engine, _) = Engine::open(&path, options(FaultPlan::none())).unwrap();
        let table = engine.table("t").unwrap();
        fill(&mut engine, table, round, 2000);
        let report = engine.checkpoint(position(u64::from(round))).unwrap();
        assert!(report.pages as u64 <= first / 4096, "{}", report.pages);
        drop(engine);
        assert_round(&path, round, 2000);
    }
    // Each checkpoint rewrites every page into slots the one before freed (the file holds
    // at most two images of each page), and its record is small.
    assert!(
        data_len() <= 2 * first + 4 * 4096,
        "{} vs {first}",
        data_len()
    );
    for record in ["db.map0", "db.map1"] {
        let len = std::fs::metadata(dir.path().join(record)).unwrap().len();
        assert!(len <= 3 * 4096, "{record}: {len}");
    }
}
