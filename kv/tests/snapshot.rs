//! Snapshots: a snapshot reads exactly the trees of its moment while the engine goes on
//! writing — updates, deletes, inserts that split and merge pages, values in overflow chains,
//! checkpoints — from the owner's thread and from others at once; pages that were not
//! resident come from the data file, whose slots stay unused while the snapshot lives.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use kv::{Direction, Engine, EngineOptions, LogPosition, Snapshot, Table};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options() -> EngineOptions {
    EngineOptions {
        page_size: 1024,
        pool_bytes: 64 << 20,
        ..EngineOptions::default()
    }
}

fn key(k: u32) -> Vec<u8> {
    format!("account-{k:06}").into_bytes()
}

/// Mostly small values; every 97th larger than a page (an overflow chain).
fn value(k: u32, round: u32) -> Vec<u8> {
    let len = if k.is_multiple_of(97) {
        3000
    } else {
        20 + (k % 50) as usize
    };
    (0..len)
        .map(|i| (k as usize + i + round as usize) as u8)
        .collect()
}

fn scan(snapshot: &Snapshot, table: Table, direction: Direction) -> Vec<(Vec<u8>, Vec<u8>)> {
    snapshot
        .range(table, Bound::Unbounded, Bound::Unbounded, direction)
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn assert_holds(snapshot: &Snapshot, table: Table, image: &Model) {
    let want: Vec<_> = image.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(scan(snapshot, table, Direction::Forward), want);
    let mut backward = scan(snapshot, table, Direction::Backward);
    backward.reverse();
    assert_eq!(backward, want);
    for k in (0..6_000).step_by(7) {
        assert_eq!(
            snapshot.get(table, &key(k)).unwrap(),
            image.get(&key(k)).cloned()
        );
    }
    let lower = key(1_000);
    let upper = key(1_500);
    let part: Vec<_> = snapshot
        .range(
            table,
            Bound::Included(&lower),
            Bound::Excluded(&upper),
            Direction::Forward,
        )
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let want: Vec<_> = image
        .range(lower.clone()..upper.clone())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(part, want);
}

/// Random puts and deletes over 6,000 keys, `ops` of them, into both engine and model.
fn churn(
    engine: &mut Engine,
    table: Table,
    model: &mut Model,
    rng: &mut impl Rng,
    ops: usize,
    round: u32,
) {
    for _ in 0..ops {
        let k = rng.gen_range(0..6_000);
        if rng.gen_bool(0.3) {
            engine.delete(table, &key(k)).unwrap();
            model.remove(&key(k));
        } else {
            engine.put(table, &key(k), &value(k, round)).unwrap();
            model.insert(key(k), value(k, round));
        }
    }
}

/// A new engine with table "t" after `ops` random changes (seeded with `seed`), and the
/// model and generator to go on with.
fn churned(
    options: EngineOptions,
    seed: u64,
    ops: usize,
) -> (tempfile::TempDir, Engine, Table, Model, StdRng) {
    let dir = tempfile::tempdir().unwrap();
    let (mut engine, _) = Engine::open(&dir.path().join("db"), options).unwrap();
    let table = engine.create_table("t").unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Model::new();
    churn(&mut engine, table, &mut model, &mut rng, ops, 0);
    (dir, engine, table, model, rng)
}

#[test]
fn a_snapshot_reads_its_moment_while_the_engine_changes() {
    let (_dir, mut engine, table, mut model, mut rng) = churned(options(), 47, 8_000);
    let mut kept = Vec::new();
    for round in 1..=6 {
        kept.push((engine.snapshot().unwrap(), model.clone()));
        churn(&mut engine, table, &mut model, &mut rng, 3_000, round);
        if round % 2 == 0 {
            engine
                .checkpoint(LogPosition {
                    term: 1,
                    index: u64::from(round),
                })
                .unwrap();
        }
        for (snapshot, image) in &kept {
            assert_holds(snapshot, table, image);
        }
    }
    // Deleting nearly everything merges pages away; the snapshots still hold their pages.
    for k in 0..6_000 {
        if k % 10 != 0 {
            engine.delete(table, &key(k)).unwrap();
            model.remove(&key(k));
        }
    }
    for (snapshot, image) in &kept {
        assert_holds(snapshot, table, image);
    }
    common::assert_table_holds(&mut engine, table, model);
}

#[test]
fn other_threads_read_a_snapshot_while_the_owner_writes() {
    let (_dir, mut engine, table, mut model, mut rng) = churned(options(), 48, 10_000);
    let snapshot = Arc::new(engine.snapshot().unwrap());
    let image = Arc::new(model.clone());
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (snapshot, image) = (snapshot.clone(), image.clone());
            std::thread::spawn(move || {
                for _ in 0..20 {
                    assert_holds(&snapshot, table, &image);
                }
            })
        })
        .collect();
    for round in 1..=20 {
        churn(&mut engine, table, &mut model, &mut rng, 1_000, round);
    }
    engine
        .checkpoint(LogPosition { term: 1, index: 1 })
        .unwrap();
    for reader in readers {
        reader.join().expect("a reader saw its snapshot whole");
    }
    assert_holds(&snapshot, table, &image);
    common::assert_table_holds(&mut engine, table, model);
}

#[test]
fn pages_not_in_memory_are_read_from_slots_kept_until_the_snapshot_ends() {
    // 32 pages of memory for a table of several hundred: most pages are on disk only.
    let small_pool = EngineOptions {
        pool_bytes: 32 * 1024,
        ..options()
    };
    let (_dir, mut engine, table, mut model, mut rng) = churned(small_pool, 49, 8_000);
    let mut index = 0;
    let mut checkpoint = |engine: &mut Engine| {
        index += 1;
        engine.checkpoint(LogPosition { term: 1, index }).unwrap();
    };
    checkpoint(&mut engine);
    let snapshot = engine.snapshot().unwrap();
    let image = model.clone();
    assert!(
        snapshot.resident_pages() * 4 < engine.stats().page_count as usize,
        "most of the snapshot's pages are on disk"
    );
    // Every page rewritten several times over, each version checkpointed to a new slot:
    // without the hold, the snapshot's slots would be reused.
    for round in 1..=4 {
        churn(&mut engine, table, &mut model, &mut rng, 6_000, round);
        checkpoint(&mut engine);
        assert_holds(&snapshot, table, &image);
    }
    assert!(engine.slots_held_for_snapshots() > 0);
    // The pages the snapshot shared were evicted or rewritten since: their buffers are the
    // snapshot's, not the pool's, so they do not hold the owner back.
    assert!(engine.stats().snapshot_pages > 0);
    assert!(engine.pool_overshoot() < 1.0, "{}", engine.pool_overshoot());
    drop(snapshot);
    assert_eq!(engine.stats().snapshot_pages, 0);
    checkpoint(&mut engine);
    assert_eq!(
        engine.slots_held_for_snapshots(),
        0,
        "reclaimed at the next checkpoint"
    );
    common::assert_table_holds(&mut engine, table, model.clone());

    // A snapshot outliving its engine stops reading the data file instead of reading slots
    // another engine may have reused.
    let snapshot = engine.snapshot().unwrap();
    drop(engine);
    let err = common::snapshot_scan(&snapshot, table)
        .expect_err("the engine is closed")
        .to_string();
    assert!(err.contains("engine is closed"), "{err}");
}

#[test]
fn resident_pages_stay_readable_after_the_engine_is_gone() {
    let (_dir, mut engine, table, model, _) = churned(options(), 50, 8_000);
    // The pool holds the whole table: the scan below reads only pages that were resident
    // (one it had to read from the data file would fail, the engine being closed).
    let snapshot = engine.snapshot().unwrap();
    drop(engine);
    assert_holds(&snapshot, table, &model);
}
