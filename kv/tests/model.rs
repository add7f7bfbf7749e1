//! Model-based test: random operation sequences run against the engine and a `BTreeMap`, with
//! small pages (deep trees, many splits and merges) and a small buffer pool (evictions), across
//! checkpoints and reopens. Runs on the IO path named by `HOTLEDGER_IO` (CI runs both).

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;

use kv::{Direction, Engine, EngineOptions, LogPosition, Snapshot, Table};
use proptest::prelude::*;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Clone, Debug)]
enum Op {
    Put(u16, usize),
    /// `put_blind` of a key the model does not hold (skipped when it does): on a buffered
    /// table it lands in the insert buffer while its leaf is out of the pool.
    PutBlind(u16, usize),
    /// `put_saving_old`: the replaced value must come back.
    PutSavingOld(u16, usize),
    Insert(u16, usize),
    Update(u16, usize),
    Delete(u16),
    DeleteSavingOld(u16),
    DeleteRun(u16, u16),
    Get(u16),
    Scan(Option<u16>, Option<u16>, bool, bool),
    Checkpoint,
    /// Starts a checkpoint that later operations capture incrementally.
    BeginCheckpoint,
    Poll,
    Reopen,
    /// Takes a snapshot, kept with the model as it is now (the last three are kept).
    Snapshot,
    /// Reads every kept snapshot whole: it must still hold its moment's model.
    CheckSnapshots,
}

fn key(k: u16) -> Vec<u8> {
    // Variable-length keys: a prefix that spreads keys plus a length that varies with k. Keys
    // from 450 on share a long start instead, so their leaves cut long prefixes, which the
    // keys at the border of both kinds cut shorter.
    // (At most 64 bytes, the largest key of a 512-byte page.)
    if k >= 450 {
        let mut key = [b"long-".as_slice(), &[b'x'; 40]].concat();
        key.extend(format!("{:05}", k).into_bytes());
        key.extend(std::iter::repeat_n(b'k', (k % 5) as usize * 3));
        return key;
    }
    let mut key = format!("key-{:05}", k).into_bytes();
    key.extend(std::iter::repeat_n(b'k', (k % 7) as usize * 5));
    key
}

fn value(k: u16, size: usize) -> Vec<u8> {
    (0..size).map(|i| (k as usize * 31 + i) as u8).collect()
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0u16..600;
    let size = prop_oneof![4 => 0usize..40, 2 => 40usize..140, 1 => 140usize..2000];
    prop_oneof![
        25 => (k.clone(), size.clone()).prop_map(|(k, s)| Op::Put(k, s)),
        20 => (k.clone(), size.clone()).prop_map(|(k, s)| Op::PutBlind(k, s)),
        5 => (k.clone(), size.clone()).prop_map(|(k, s)| Op::PutSavingOld(k, s)),
        5 => (k.clone(), size.clone()).prop_map(|(k, s)| Op::Insert(k, s)),
        5 => (k.clone(), size).prop_map(|(k, s)| Op::Update(k, s)),
        16 => k.clone().prop_map(Op::Delete),
        4 => k.clone().prop_map(Op::DeleteSavingOld),
        2 => (k.clone(), 1u16..200).prop_map(|(k, n)| Op::DeleteRun(k, n)),
        10 => k.clone().prop_map(Op::Get),
        4 => (proptest::option::of(k.clone()), proptest::option::of(k), any::<bool>(), any::<bool>())
            .prop_map(|(a, b, inclusive, backward)| Op::Scan(a, b, inclusive, backward)),
        1 => Just(Op::Checkpoint),
        2 => Just(Op::BeginCheckpoint),
        6 => Just(Op::Poll),
        1 => Just(Op::Reopen),
        2 => Just(Op::Snapshot),
        3 => Just(Op::CheckSnapshots),
    ]
}

fn options() -> EngineOptions {
    EngineOptions {
        page_size: 512,
        pool_bytes: 64 * 512,
        // A few pages' worth: blind writes fill the buffer and drain it over and over.
        insert_buffer_bytes: Some(1500),
        ..EngineOptions::default()
    }
}

/// What a run saw: the greatest tree depth at checkpoints, and the entries drained from
/// the insert buffer (all engines the run opened).
struct Seen {
    depth_max: usize,
    drained: u64,
}

/// Runs `ops` on a table, with an insert buffer when `buffered`.
fn run(ops: Vec<Op>, buffered: bool) -> Seen {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.db");
    let (mut engine, _) = Engine::open(&path, options()).unwrap();
    let mut table = match buffered {
        true => engine.create_buffered_table("t").unwrap(),
        false => engine.create_table("t").unwrap(),
    };
    assert_eq!(table.is_buffered(), buffered);
    let mut drained = 0;
    engine.checkpoint(LogPosition::default()).unwrap();
    let mut model = Model::new();
    let mut durable = model.clone();
    // What the insert buffer held as of the durable checkpoint: a reopen must count as much.
    let buffer_bytes = |engine: &Engine| engine.stats().insert_buffer_bytes;
    let mut durable_buffered = 0;
    // The model and buffered bytes as of a checkpoint in flight, and its position.
    let mut in_flight: Option<(Model, u64, u64)> = None;
    let mut position = 0u64;
    let mut depth_max = 0;
    let mut snapshots: Vec<(Snapshot, Model, Table)> = Vec::new();
    for op in ops {
        match op {
            Op::Put(k, s) => {
                let existed = engine.put(table, &key(k), &value(k, s)).unwrap();
                assert_eq!(existed, model.insert(key(k), value(k, s)).is_some());
            }
            Op::PutBlind(k, s) => {
                if let std::collections::btree_map::Entry::Vacant(slot) = model.entry(key(k)) {
                    engine.put_blind(table, &key(k), &value(k, s)).unwrap();
                    slot.insert(value(k, s));
                }
            }
            Op::PutSavingOld(k, s) => {
                let mut old = b"untouched".to_vec();
                let existed = engine
                    .put_saving_old(table, &key(k), &value(k, s), &mut old)
                    .unwrap();
                let expected = model.insert(key(k), value(k, s));
                assert_eq!(existed, expected.is_some());
                assert_eq!(old, expected.unwrap_or_else(|| b"untouched".to_vec()));
            }
            Op::DeleteSavingOld(k) => {
                let mut old = b"untouched".to_vec();
                let existed = engine.delete_saving_old(table, &key(k), &mut old).unwrap();
                let expected = model.remove(&key(k));
                assert_eq!(existed, expected.is_some());
                assert_eq!(old, expected.unwrap_or_else(|| b"untouched".to_vec()));
            }
            Op::Insert(k, s) => {
                let inserted = engine.insert(table, &key(k), &value(k, s)).unwrap();
                assert_eq!(inserted, !model.contains_key(&key(k)));
                model.entry(key(k)).or_insert_with(|| value(k, s));
            }
            Op::Update(k, s) => {
                let updated = engine.update(table, &key(k), &value(k, s)).unwrap();
                assert_eq!(updated, model.contains_key(&key(k)));
                if let Some(v) = model.get_mut(&key(k)) {
                    *v = value(k, s);
                }
            }
            Op::Delete(k) => {
                assert_eq!(
                    engine.delete(table, &key(k)).unwrap(),
                    model.remove(&key(k)).is_some()
                );
            }
            Op::DeleteRun(k, n) => {
                for k in k..k.saturating_add(n) {
                    assert_eq!(
                        engine.delete(table, &key(k)).unwrap(),
                        model.remove(&key(k)).is_some()
                    );
                }
            }
            Op::Get(k) => assert_eq!(
                engine.get(table, &key(k)).unwrap(),
                model.get(&key(k)).cloned()
            ),
            Op::Scan(a, b, inclusive, backward) => {
                let (a, b) = (a.map(key), b.map(key));
                if let (Some(a), Some(b)) = (&a, &b) {
                    if a > b {
                        continue;
                    }
                }
                let lower = a.as_deref().map_or(Bound::Unbounded, Bound::Included);
                let upper = b.as_deref().map_or(Bound::Unbounded, |b| {
                    if inclusive {
                        Bound::Included(b)
                    } else {
                        Bound::Excluded(b)
                    }
                });
                let direction = if backward {
                    Direction::Backward
                } else {
                    Direction::Forward
                };
                let got: Vec<_> = engine
                    .range(table, lower, upper, direction)
                    .unwrap()
                    .map(Result::unwrap)
                    .collect();
                let mut want: Vec<_> = model
                    .range::<[u8], _>((lower, upper))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                if backward {
                    want.reverse();
                }
                assert_eq!(got, want);
            }
            Op::Checkpoint => {
                let shape = engine.check_table(table).unwrap();
                depth_max = depth_max.max(shape.depth);
                // Counting from the inner nodes finds every page a full walk does.
                let page_size = u64::from(options().page_size);
                assert_eq!(
                    engine.table_bytes(table).unwrap(),
                    shape.pages as u64 * page_size
                );
                if in_flight.take().is_some() {
                    engine.wait_checkpoint().unwrap();
                }
                position += 1;
                engine
                    .checkpoint(LogPosition {
                        term: 1,
                        index: position,
                    })
                    .unwrap();
                durable = model.clone();
                durable_buffered = buffer_bytes(&engine);
            }
            Op::BeginCheckpoint => {
                if in_flight.is_none() {
                    position += 1;
                    engine
                        .begin_checkpoint(LogPosition {
                            term: 1,
                            index: position,
                        })
                        .unwrap();
                    in_flight = Some((model.clone(), buffer_bytes(&engine), position));
                }
            }
            Op::Poll => {
                if let Some(report) = engine.poll_checkpoint().unwrap() {
                    let (image, bytes, at) =
                        in_flight.take().expect("a report means one was in flight");
                    assert_eq!(report.log_position.index, at);
                    durable = image;
                    durable_buffered = bytes;
                }
            }
            Op::Snapshot => {
                if snapshots.len() == 3 {
                    snapshots.remove(0);
                }
                snapshots.push((engine.snapshot().unwrap(), model.clone(), table));
            }
            Op::CheckSnapshots => {
                for (snapshot, image, at) in &snapshots {
                    assert_snapshot_holds(snapshot, *at, image);
                }
            }
            Op::Reopen => {
                // Without a checkpoint, changes since the last one are gone: the caller's log
                // would replay them. The model falls back to the durable image. Dropping the
                // engine finishes a checkpoint in flight. Snapshots end with their engine.
                snapshots.clear();
                drained += engine.stats().insert_buffer_drained;
                drop(engine);
                if let Some((image, bytes, _)) = in_flight.take() {
                    durable = image;
                    durable_buffered = bytes;
                }
                let (reopened, info) = Engine::open(&path, options()).unwrap();
                engine = reopened;
                assert_eq!(info.log_position.index, position);
                table = engine.table("t").unwrap();
                assert_eq!(table.is_buffered(), buffered);
                // The catalog recorded the buffer's bytes with the checkpoint.
                assert_eq!(buffer_bytes(&engine), durable_buffered);
                model = durable.clone();
            }
        }
    }
    common::assert_table_holds(&mut engine, table, model);
    for (snapshot, image, at) in &snapshots {
        assert_snapshot_holds(snapshot, *at, image);
    }
    Seen {
        depth_max,
        drained: drained + engine.stats().insert_buffer_drained,
    }
}

/// A snapshot holds `image`: a whole scan gives exactly it, pages that were not resident
/// when it was taken read from the data file; each key reads its value.
fn assert_snapshot_holds(snapshot: &Snapshot, table: Table, image: &Model) {
    let scan = common::snapshot_scan(snapshot, table).expect("a snapshot's scan");
    let want: Vec<_> = image.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(scan, want, "a snapshot's scan");
    for (k, v) in image {
        let got = snapshot.get(table, k).expect("a snapshot's get");
        assert_eq!(got.as_ref(), Some(v), "a snapshot's get");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn engine_matches_btreemap(ops in proptest::collection::vec(op(), 1..1500)) {
        let _ = run(ops, false);
    }

    #[test]
    fn buffered_engine_matches_btreemap(ops in proptest::collection::vec(op(), 1..1500)) {
        let _ = run(ops, true);
    }
}

#[test]
fn blind_writes_out_of_the_pool_are_buffered_and_drained_in_key_order() {
    // Scattered keys, far more than the 64-page pool holds with these values: most leaves
    // are out of the pool when their key comes, so the writes go to the buffer, which
    // drains into the tree; deletes, updates and scans meet keys in both.
    let mut ops: Vec<Op> = (0..450u16)
        .map(|k| Op::PutBlind(k * 97 % 450, 120))
        .collect();
    ops.push(Op::Scan(None, None, true, false));
    ops.push(Op::Checkpoint);
    ops.extend((0..450).step_by(3).map(Op::Delete));
    ops.extend((1..450).step_by(3).map(|k| Op::Update(k, 30)));
    ops.push(Op::Scan(None, None, true, true));
    ops.push(Op::Snapshot);
    ops.extend((0..450u16).step_by(3).map(|k| Op::PutBlind(k, 200)));
    ops.push(Op::CheckSnapshots);
    ops.push(Op::Checkpoint);
    ops.push(Op::Reopen);
    ops.push(Op::Scan(Some(100), Some(300), false, true));
    let seen = run(ops, true);
    assert!(seen.drained > 0, "no buffered entry was drained");
}

/// A buffer's bytes come back from the catalog on open, as the last checkpoint recorded
/// them: after blind writes, and after a truncate empties the buffer.
#[test]
fn a_buffers_bytes_are_recorded_with_each_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("counts.db");
    // A budget the test never reaches: what it buffers stays buffered.
    let options = || EngineOptions {
        insert_buffer_bytes: Some(1 << 20),
        ..options()
    };
    let reopen = |engine: Engine, at: u64| {
        drop(engine);
        let (engine, info) = Engine::open(&path, options()).unwrap();
        assert_eq!(info.log_position.index, at);
        engine
    };
    let at = |index| LogPosition { term: 1, index };
    let (mut engine, _) = Engine::open(&path, options()).unwrap();
    let table = engine.create_buffered_table("t").unwrap();
    // The first keys fill the tree; once they are checkpointed their leaves can leave the
    // pool, and the next keys' writes find them out of it.
    for k in 0..450u16 {
        engine
            .put_blind(table, &key(2 * (k * 97 % 450)), &value(k, 120))
            .unwrap();
    }
    engine.checkpoint(at(0)).unwrap();
    for k in 0..450u16 {
        engine
            .put_blind(table, &key(2 * (k * 97 % 450) + 1), &value(k, 120))
            .unwrap();
    }
    let held = engine.stats().insert_buffer_bytes;
    assert!(held > 0, "some blind writes were buffered");
    engine.checkpoint(at(1)).unwrap();
    // Writes after the checkpoint are the log's to replay: the count is the checkpoint's.
    engine
        .put_blind(table, &key(1000), &value(1000, 40))
        .unwrap();
    let mut engine = reopen(engine, 1);
    assert_eq!(engine.stats().insert_buffer_bytes, held);
    let table = engine.table("t").unwrap();
    engine.truncate_table(table).unwrap();
    assert_eq!(engine.stats().insert_buffer_bytes, 0);
    engine.checkpoint(at(2)).unwrap();
    let engine = reopen(engine, 2);
    assert_eq!(engine.stats().insert_buffer_bytes, 0);
}

#[test]
fn fill_and_drain_builds_and_collapses_every_level() {
    let mut ops: Vec<Op> = (0..600).map(|k| Op::Put(k, 60)).collect();
    ops.push(Op::Checkpoint);
    ops.extend((0..600).rev().step_by(2).map(Op::Delete));
    ops.push(Op::Reopen);
    ops.extend((0..600).step_by(2).map(Op::Delete));
    ops.push(Op::Scan(None, None, true, true));
    ops.push(Op::Checkpoint);
    assert!(
        run(ops, false).depth_max >= 3,
        "600 keys in 512-byte pages make at least three levels"
    );
}

/// Pages used by `count` 100-byte values under 8-byte keys inserted in `order`.
fn pages_after_inserting(order: impl Iterator<Item = u64>) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let (mut engine, _) =
        Engine::open(&dir.path().join("fill.db"), EngineOptions::default()).unwrap();
    let table = engine.create_table("t").unwrap();
    let before = engine.stats().page_count;
    for k in order {
        engine.insert(table, &k.to_be_bytes(), &[7u8; 100]).unwrap();
    }
    engine.stats().page_count - before
}

#[test]
fn ascending_keys_fill_pages() {
    const COUNT: u64 = 20_000;
    let page_size = EngineOptions::default().page_size as u64;
    let raw_pages = COUNT * 108 / page_size;
    let ascending = pages_after_inserting(0..COUNT);
    // A multiplicative permutation of 0..COUNT: the same keys in a scattered order.
    let scattered = pages_after_inserting((0..COUNT).map(|k| k * 7_919 % COUNT));
    assert!(
        ascending * 100 <= raw_pages * 125,
        "{ascending} pages for {raw_pages} pages of keys and values inserted in order"
    );
    assert!(
        ascending * 100 < scattered * 80,
        "in order {ascending} pages, scattered {scattered}"
    );
}

#[test]
fn ascending_runs_at_scattered_places_fill_pages() {
    // Runs of 500 consecutive keys, each starting at a scattered place among the others (as a
    // statement inserting a block of consecutive ids at a random base does).
    const RUNS: u64 = 40;
    const RUN: u64 = 500;
    let page_size = EngineOptions::default().page_size as u64;
    let raw_pages = RUNS * RUN * 108 / page_size;
    let runs = pages_after_inserting(
        (0..RUNS).flat_map(|r| ((r * 7_919 % RUNS) << 32..).take(RUN as usize)),
    );
    assert!(
        runs * 100 <= raw_pages * 130,
        "{runs} pages for {raw_pages} pages of keys and values inserted in scattered runs"
    );
}
