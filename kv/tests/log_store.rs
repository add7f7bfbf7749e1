//! The log store: batches, reads, suffix truncation (Raft conflicts), prefix purge with
//! segment reuse, the caller's durable blob, and recovery of all of it after reopening.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

use kv::{KvError, LogStore, LogStoreOptions};

fn options() -> LogStoreOptions {
    LogStoreOptions {
        segment_bytes: 64 << 10,
        ..LogStoreOptions::default()
    }
}

fn payload(index: u64, generation: u8) -> Vec<u8> {
    vec![generation; 100 + (index % 50) as usize]
}

fn batch(from: u64, to: u64, generation: u8) -> Vec<(u64, Vec<u8>)> {
    (from..to)
        .map(|index| (index, payload(index, generation)))
        .collect()
}

fn assert_holds(store: &LogStore, from: u64, to: u64, generation: u8) {
    for (index, bytes) in store.read(from, to).unwrap() {
        assert_eq!(bytes, payload(index, generation), "entry {index}");
    }
}

/// Reopens the store (recovery) and checks the range of indices it holds.
fn reopen_holding(dir: &Path, first: u64, last: u64) -> LogStore {
    let store = LogStore::open(dir, options()).unwrap();
    assert_eq!(
        (store.first_index(), store.last_index()),
        (Some(first), Some(last))
    );
    store
}

fn segment_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|entry| {
            entry
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("seg-")
        })
        .count()
}

#[test]
fn appends_span_segments_and_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = LogStore::open(dir.path(), options()).unwrap();
    assert_eq!(store.last_index(), None);
    for start in (1..2000).step_by(100) {
        store.append(&batch(start, start + 100, 1)).unwrap();
    }
    assert!(
        segment_files(dir.path()) > 3,
        "2000 entries of ~150 bytes fill several 64 KiB segments"
    );
    drop(store);
    let store = reopen_holding(dir.path(), 1, 2000);
    assert_holds(&store, 1, 2001, 1);
}

#[test]
fn out_of_order_and_oversized_appends_are_rejected_without_effect() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = LogStore::open(dir.path(), options()).unwrap();
    store.append(&batch(5, 10, 1)).unwrap();
    assert!(matches!(
        store.append(&batch(11, 12, 1)),
        Err(KvError::LogOutOfOrder {
            expected: 10,
            got: 11
        })
    ));
    let huge = vec![(10u64, vec![0u8; 70 << 10])];
    assert!(matches!(
        store.append(&huge),
        Err(KvError::LogEntryTooLarge { .. })
    ));
    assert!(matches!(
        store.read(3, 6),
        Err(KvError::LogGap { index: 3, .. })
    ));
    assert_eq!(store.last_index(), Some(9));
}

#[test]
fn truncation_removes_the_suffix_durably_and_new_entries_replace_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = LogStore::open(dir.path(), options()).unwrap();
    store.append(&batch(1, 1000, 1)).unwrap();
    store.truncate_from(400).unwrap();
    assert_eq!(store.last_index(), Some(399));
    drop(store);
    // The cut survives a restart even though the old entries' bytes are still on disk.
    let mut store = LogStore::open(dir.path(), options()).unwrap();
    assert_eq!(store.last_index(), Some(399));
    store.append(&batch(400, 450, 2)).unwrap();
    drop(store);
    let store = LogStore::open(dir.path(), options()).unwrap();
    assert_eq!(
        store.last_index(),
        Some(449),
        "stale generation-1 entries after 449 are not revived"
    );
    assert_holds(&store, 1, 400, 1);
    assert_holds(&store, 400, 450, 2);
}

#[test]
fn purge_recycles_segments_and_keeps_the_rest_readable() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = LogStore::open(dir.path(), options()).unwrap();
    store.append(&batch(1, 2000, 1)).unwrap();
    let before = segment_files(dir.path());
    store.purge_through(1500).unwrap();
    assert_eq!(store.first_index(), Some(1501));
    assert!(segment_files(dir.path()) < before);
    assert!(matches!(
        store.read(1500, 1501),
        Err(KvError::LogGap { .. })
    ));
    store.append(&batch(2000, 3000, 1)).unwrap();
    drop(store);
    let store = reopen_holding(dir.path(), 1501, 2999);
    assert_eq!(store.purged_through(), Some(1500));
    assert_holds(&store, 1501, 3000, 1);
    let spares = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|entry| {
            entry
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("spare-")
        })
        .count();
    assert!(spares <= 4);
}

#[test]
fn purging_everything_then_appending_continues_after_the_purge_point() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = LogStore::open(dir.path(), options()).unwrap();
    store.append(&batch(1, 100, 1)).unwrap();
    store.purge_through(99).unwrap();
    assert_eq!(store.last_index(), None);
    assert!(
        store.append(&batch(50, 51, 1)).is_err(),
        "indices at or below the purge point"
    );
    store.append(&batch(100, 110, 3)).unwrap();
    drop(store);
    let store = reopen_holding(dir.path(), 100, 109);
    assert_holds(&store, 100, 110, 3);
}

/// Raft purges past the last entry when it installs a snapshot: the next append starts
/// after a gap, and recovery must keep it and everything after it.
#[test]
fn appends_after_a_purge_past_the_last_entry_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = LogStore::open(dir.path(), options()).unwrap();
    store.append(&batch(1, 100, 1)).unwrap();
    store.purge_through(499).unwrap();
    assert_eq!((store.first_index(), store.last_index()), (None, None));
    // Enough to fill more than one segment after the gap.
    store.append(&batch(500, 1500, 2)).unwrap();
    drop(store);
    let mut store = reopen_holding(dir.path(), 500, 1499);
    assert_holds(&store, 500, 1500, 2);
    store.purge_through(999).unwrap();
    store.append(&batch(1500, 1600, 2)).unwrap();
    drop(store);
    let store = reopen_holding(dir.path(), 1000, 1599);
    assert_holds(&store, 1000, 1600, 2);
}

#[test]
fn a_torn_tail_is_cut_at_the_last_whole_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = LogStore::open(dir.path(), options()).unwrap();
    store.append(&batch(1, 50, 1)).unwrap();
    drop(store);
    // Damage a byte inside record 30's payload in the only segment.
    let segment = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| {
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("seg-")
        })
        .unwrap();
    let offset_of_30: u64 = 64
        + (1..30)
            .map(|i| 24 + payload(i, 1).len() as u64)
            .sum::<u64>();
    let file = OpenOptions::new().write(true).open(&segment).unwrap();
    file.write_all_at(&[0xAB], offset_of_30 + 30).unwrap();
    let mut store = LogStore::open(dir.path(), options()).unwrap();
    assert_eq!(store.last_index(), Some(29));
    store.append(&batch(30, 40, 2)).unwrap();
    drop(store);
    let store = LogStore::open(dir.path(), options()).unwrap();
    assert_eq!(store.last_index(), Some(39));
    assert_holds(&store, 30, 40, 2);
}

#[test]
fn the_caller_blob_survives_reopen_and_a_torn_slot() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = LogStore::open(dir.path(), options()).unwrap();
    store.save_user_meta(b"vote term=3 node=1").unwrap();
    store.save_user_meta(b"vote term=4 node=2").unwrap();
    assert!(store.save_user_meta(&vec![0u8; 5000]).is_err());
    drop(store);
    let store = LogStore::open(dir.path(), options()).unwrap();
    assert_eq!(store.user_meta(), b"vote term=4 node=2");
    drop(store);
    // Tear the newer slot: the older one is still valid.
    let meta = OpenOptions::new()
        .write(true)
        .open(dir.path().join("meta"))
        .unwrap();
    meta.write_all_at(&[0xFF; 8], 64).unwrap();
    let store = LogStore::open(dir.path(), options()).unwrap();
    assert_eq!(store.user_meta(), b"vote term=3 node=1");
}

fn names_starting(dir: &Path, prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(prefix))
        .collect();
    names.sort();
    names
}

fn wait_for_spare(dir: &Path) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let spares = names_starting(dir, "spare-");
        if !spares.is_empty() || std::time::Instant::now() > deadline {
            return spares;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// The segment after the current one is zero-filled ahead of need by a background thread (an
/// append that fills a segment renames it instead of writing a segment of zeros); a
/// half-prepared file left by a crash is deleted at open, and none is left after a close.
#[test]
fn the_next_segment_is_prepared_in_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let leftover = dir.path().join("prep-00000000000000ff.tmp");
    std::fs::write(&leftover, b"half a spare").unwrap();
    let mut store = LogStore::open(dir.path(), options()).unwrap();
    assert!(
        !leftover.exists(),
        "a crash's half-prepared spare is removed"
    );
    let spares = wait_for_spare(dir.path());
    assert_eq!(spares.len(), 1, "a spare is prepared at open");
    let len = std::fs::metadata(dir.path().join(&spares[0]))
        .unwrap()
        .len();
    assert_eq!(len, 64 << 10, "a spare is a whole segment");
    // Appends across many segments: each roll takes the spare and asks for the next one.
    for from in (1..4000).step_by(100) {
        store.append(&batch(from, from + 100, 1)).unwrap();
    }
    assert!(names_starting(dir.path(), "seg-").len() > 5);
    assert_eq!(
        wait_for_spare(dir.path()).len(),
        1,
        "the next spare is ready"
    );
    store.purge_through(3000).unwrap();
    drop(store);
    assert!(names_starting(dir.path(), "prep-").is_empty());
    let spares = names_starting(dir.path(), "spare-");
    let mut unique = spares.clone();
    unique.dedup();
    assert_eq!(spares, unique);
    let store = reopen_holding(dir.path(), 3001, 4000);
    assert_holds(&store, 3001, 4001, 1);
}

/// The bytes of entries `from..=to` as `payload` makes them.
fn payload_bytes(from: u64, to: u64) -> u64 {
    (from..=to).map(|i| payload(i, 1).len() as u64).sum()
}

/// The lowest index whose entries through `through` fit in `bytes`, the slow way.
fn first_within_bytes_by_hand(first: u64, through: u64, bytes: u64) -> u64 {
    (first..=through + 1)
        .find(|&i| i > through || payload_bytes(i, through) <= bytes)
        .unwrap()
}

#[test]
fn the_entries_within_a_byte_bound_are_found_across_purge_truncation_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = LogStore::open(dir.path(), options()).unwrap();
    assert_eq!(store.first_within_bytes(10, 1_000), None);
    store.append(&batch(1, 2_001, 1)).unwrap();
    let check = |store: &LogStore, first: u64, last: u64| {
        for through in [first, first + 7, (first + last) / 2, last, last + 100] {
            for bytes in [0, 99, 100, 149, 5_000, 123_456, u64::MAX] {
                let expected = first_within_bytes_by_hand(first, through.min(last), bytes);
                assert_eq!(
                    store.first_within_bytes(through, bytes),
                    Some(expected),
                    "through {through}, {bytes} bytes, holding {first}..={last}"
                );
            }
        }
        assert_eq!(store.first_within_bytes(first - 1, 1_000), None);
    };
    check(&store, 1, 2_000);
    store.purge_through(700).unwrap();
    check(&store, 701, 2_000);
    store.truncate_from(1_500).unwrap();
    store.append(&batch(1_500, 1_800, 1)).unwrap();
    check(&store, 701, 1_799);
    drop(store);
    let store = reopen_holding(dir.path(), 701, 1_799);
    check(&store, 701, 1_799);
}
