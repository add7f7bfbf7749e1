//! Bad files and failing disks: each gives a typed error naming the file, nothing panics, and a
//! failed checkpoint never leaves a half-applied image after recovery.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

use kv::{journal_path, Engine, EngineOptions, FaultPlan, KvError, LogPosition, Table};

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

#[test]
fn enospc_or_eio_at_any_write_of_a_checkpoint_leaves_old_or_new_never_a_mix() {
    let keys = 3000;
    let mut saw_journal_failure = false;
    let mut saw_data_failure = false;
    for failing_write in 0..24 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        database_at_round_one(&path, keys);
        let faults = FaultPlan::none();
        let (mut engine, _) = Engine::open(&path, options(faults.clone())).unwrap();
        let table = engine.table("t").unwrap();
        fill(&mut engine, table, 2, keys);
        // Alternate a full disk and a failing disk.
        let errno = if failing_write % 4 < 2 {
            libc::ENOSPC
        } else {
            libc::EIO
        };
        faults.fail_writes_after(failing_write, errno);
        let result = engine.checkpoint(position(2));
        faults.heal();
        let expected_round = match result {
            Ok(_) => 2,
            Err(err) => {
                assert_eq!(err.is_no_space(), errno == libc::ENOSPC, "{err}");
                assert!(
                    err.to_string().contains(dir.path().to_str().unwrap()),
                    "names the file: {err}"
                );
                match engine.get(table, &0u32.to_be_bytes()) {
                    Err(KvError::Poisoned(_)) => {
                        // The journal was complete: recovery must finish the checkpoint.
                        saw_data_failure = true;
                        2
                    }
                    Ok(_) => {
                        saw_journal_failure = true;
                        // Retrying after the disk has room succeeds.
                        if failing_write % 2 == 0 {
                            engine.checkpoint(position(2)).unwrap();
                            2
                        } else {
                            1
                        }
                    }
                    Err(other) => panic!("unexpected error after a failed checkpoint: {other}"),
                }
            }
        };
        drop(engine);
        assert_round(&path, expected_round, keys);
    }
    assert!(
        saw_journal_failure && saw_data_failure,
        "the sweep covered both phases"
    );
}

#[test]
fn a_torn_journal_leaves_the_previous_checkpoint_intact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    database_at_round_one(&path, 2000);
    {
        let (mut engine, _) = Engine::open(&path, options(FaultPlan::none())).unwrap();
        let table = engine.table("t").unwrap();
        fill(&mut engine, table, 2, 2000);
        engine.checkpoint(position(2)).unwrap();
    }
    // Corrupt one page image inside the (complete) journal and roll the data file back to
    // round 1 by hand is not possible; instead damage the journal of a finished checkpoint:
    // the data file is complete, so recovery must ignore the damaged journal.
    let journal = OpenOptions::new()
        .write(true)
        .open(journal_path(&path))
        .unwrap();
    journal.write_all_at(&[0xEE; 64], 3 * 4096 + 100).unwrap();
    let (_, info) = Engine::open(&path, options(FaultPlan::none())).unwrap();
    assert!(!info.journal_replayed);
    assert_eq!(info.log_position, position(2));
    assert_round(&path, 2, 2000);
}

#[test]
fn a_torn_data_page_is_repaired_from_a_complete_journal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    database_at_round_one(&path, 2000);
    // A second checkpoint rewrites the first one's pages, through the journal (pages new
    // since the last checkpoint go straight to the data file before the commit, so a crash
    // can tear only pages the in-place phase rewrites).
    {
        let (mut engine, _) = Engine::open(&path, options(FaultPlan::none())).unwrap();
        let table = engine.table("t").unwrap();
        fill(&mut engine, table, 2, 2000);
        engine.checkpoint(position(2)).unwrap();
    }
    // Tear a page of the data file as a crash during the in-place phase would.
    let data = OpenOptions::new().write(true).open(&path).unwrap();
    data.write_all_at(&[0u8; 2048], 5 * 4096 + 2048).unwrap();
    let (_, info) = Engine::open(&path, options(FaultPlan::none())).unwrap();
    assert!(
        info.journal_replayed,
        "the last checkpoint's journal repairs the torn page"
    );
    assert_round(&path, 2, 2000);
}

#[test]
fn a_damaged_page_without_a_journal_is_a_typed_error_naming_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    database_at_round_one(&path, 2000);
    std::fs::remove_file(journal_path(&path)).unwrap();
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
    std::fs::remove_file(journal_path(&path)).unwrap();

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
        journal_limit: limit,
        ..options(FaultPlan::none())
    }
}

/// Round 2 checkpointed up to a durable journal that was never released: the data file
/// still holds round 1.
fn journaled_round_two(path: &Path, keys: u32) {
    database_at_round_one(path, keys);
    let (mut engine, _) = Engine::open(path, gated(Some(1))).unwrap();
    let table = engine.table("t").unwrap();
    fill(&mut engine, table, 2, keys);
    engine.begin_checkpoint(position(2)).unwrap();
    assert!(engine.wait_journaled().unwrap());
    assert!(engine.checkpoint_journaled());
    assert!(matches!(
        engine.wait_checkpoint(),
        Err(KvError::CheckpointInProgress)
    ));
    // Dropping an unreleased checkpoint abandons it: the owner never committed it.
}

#[test]
fn a_gated_checkpoint_beyond_the_journal_limit_is_not_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    journaled_round_two(&path, 2000);
    let (engine, info) = Engine::open(&path, gated(Some(1))).unwrap();
    assert!(!info.journal_replayed);
    assert_eq!(info.log_position, position(1));
    drop(engine);
    assert_round_opened(&path, 1, 2000, gated(Some(1)));
}

#[test]
fn a_committed_gated_journal_is_recovered_even_before_its_in_place_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    journaled_round_two(&path, 2000);
    let (engine, info) = Engine::open(&path, gated(Some(2))).unwrap();
    assert!(info.journal_replayed);
    assert_eq!(info.log_position, position(2));
    drop(engine);
    assert_round(&path, 2, 2000);
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
        assert!(engine.wait_journaled().unwrap());
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
fn pages_new_since_the_last_checkpoint_skip_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    // Every page of the first checkpoint is new: the journal holds only the superblock.
    database_at_round_one(&path, 2000);
    let journal_len = |path: &Path| std::fs::metadata(journal_path(path)).unwrap().len();
    let data_len = std::fs::metadata(&path).unwrap().len();
    assert!(data_len >= 50 * 4096, "{data_len}");
    assert!(journal_len(&path) <= 4 * 4096, "{}", journal_len(&path));
    // Rewriting those pages goes through the journal.
    let (mut engine, _) = Engine::open(&path, options(FaultPlan::none())).unwrap();
    let table = engine.table("t").unwrap();
    fill(&mut engine, table, 2, 2000);
    engine.checkpoint(position(2)).unwrap();
    drop(engine);
    assert!(journal_len(&path) >= data_len / 2, "{}", journal_len(&path));
    assert_round(&path, 2, 2000);
}
