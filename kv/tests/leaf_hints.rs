//! Leaf hints and look-aheads against a model: several trees in one engine, operated on in the interleaved,
//! partly ascending, partly repeated patterns that make hints hit (a hot key, runs of
//! ascending keys, a read then a write of the same key), mixed with everything that changes a
//! tree's shape or frees its pages for another tree (splits, merges, truncation, drop and
//! re-create). Small pages make all of that frequent. Every read is checked against a
//! `BTreeMap` per tree, and every tree's structure at the end.

mod common;

use std::collections::BTreeMap;

use kv::{Engine, EngineOptions, Table};
use proptest::prelude::*;

const TREES: usize = 3;

#[derive(Clone, Debug)]
enum Op {
    Put(usize, u16, usize),
    Insert(usize, u16, usize),
    Delete(usize, u16),
    Get(usize, u16),
    /// Reads `k`, then writes it with a value of another size (the account pattern).
    ReadThenWrite(usize, u16, usize),
    /// Inserts `n` ascending keys from `k` (transfer ids, index runs).
    Ascending(usize, u16, u16),
    /// Deletes `n` keys from `k` (merges).
    DeleteRun(usize, u16, u16),
    Truncate(usize),
    /// Drops the tree and creates it again: its pages go to the free list and come back.
    Recreate(usize),
    /// Finds the leaves of these keys ahead; the operations after start there while they
    /// provably still hold the keys.
    LookAhead(usize, Vec<u16>),
    ForgetLookAhead,
}

fn key(k: u16) -> Vec<u8> {
    format!("k{:05}", k).into_bytes()
}

fn value(k: u16, size: usize) -> Vec<u8> {
    (0..size).map(|i| (k as usize + i) as u8).collect()
}

fn op() -> impl Strategy<Value = Op> {
    let tree = 0..TREES;
    // A hot key (7) a third of the time, else any of 800.
    let k = prop_oneof![1 => Just(7u16), 2 => 0u16..800];
    let size = prop_oneof![3 => 0usize..30, 1 => 30usize..120];
    prop_oneof![
        20 => (tree.clone(), k.clone(), size.clone()).prop_map(|(t, k, s)| Op::Put(t, k, s)),
        5 => (tree.clone(), k.clone(), size.clone()).prop_map(|(t, k, s)| Op::Insert(t, k, s)),
        10 => (tree.clone(), k.clone()).prop_map(|(t, k)| Op::Delete(t, k)),
        15 => (tree.clone(), k.clone()).prop_map(|(t, k)| Op::Get(t, k)),
        15 => (tree.clone(), k.clone(), size).prop_map(|(t, k, s)| Op::ReadThenWrite(t, k, s)),
        6 => (tree.clone(), k.clone(), 1u16..120).prop_map(|(t, k, n)| Op::Ascending(t, k, n)),
        3 => (tree.clone(), k.clone(), 1u16..300).prop_map(|(t, k, n)| Op::DeleteRun(t, k, n)),
        1 => tree.clone().prop_map(Op::Truncate),
        1 => tree.clone().prop_map(Op::Recreate),
        4 => (tree, proptest::collection::vec(k, 1..80)).prop_map(|(t, ks)| Op::LookAhead(t, ks)),
        1 => Just(Op::ForgetLookAhead),
    ]
}

fn name(tree: usize) -> String {
    format!("t{tree}")
}

/// Runs `ops`; returns (operations that found their leaf from a hint, operations that
/// descended, operations that started at a leaf found ahead).
fn run(ops: Vec<Op>) -> (u64, u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let options = EngineOptions {
        page_size: 512,
        pool_bytes: 64 * 512,
        ..EngineOptions::default()
    };
    let (mut engine, _) = Engine::open(&dir.path().join("hints.db"), options).unwrap();
    let mut tables: Vec<Table> = (0..TREES)
        .map(|tree| engine.create_table(&name(tree)).unwrap())
        .collect();
    let mut models: Vec<BTreeMap<Vec<u8>, Vec<u8>>> = vec![BTreeMap::new(); TREES];
    for op in ops {
        match op {
            Op::Put(t, k, s) => {
                let existed = engine.put(tables[t], &key(k), &value(k, s)).unwrap();
                assert_eq!(existed, models[t].insert(key(k), value(k, s)).is_some());
            }
            Op::Insert(t, k, s) => {
                let inserted = engine.insert(tables[t], &key(k), &value(k, s)).unwrap();
                assert_eq!(inserted, !models[t].contains_key(&key(k)));
                models[t].entry(key(k)).or_insert_with(|| value(k, s));
            }
            Op::Delete(t, k) => assert_eq!(
                engine.delete(tables[t], &key(k)).unwrap(),
                models[t].remove(&key(k)).is_some()
            ),
            Op::Get(t, k) => assert_eq!(
                engine.get(tables[t], &key(k)).unwrap(),
                models[t].get(&key(k)).cloned()
            ),
            Op::ReadThenWrite(t, k, s) => {
                let read = engine.get(tables[t], &key(k)).unwrap();
                assert_eq!(read, models[t].get(&key(k)).cloned());
                let size = read.map_or(s, |old| (old.len() + s) % 120);
                engine.put(tables[t], &key(k), &value(k, size)).unwrap();
                models[t].insert(key(k), value(k, size));
            }
            Op::Ascending(t, k, n) => {
                for k in k..k.saturating_add(n) {
                    let inserted = engine.insert(tables[t], &key(k), &value(k, 40)).unwrap();
                    assert_eq!(inserted, !models[t].contains_key(&key(k)));
                    models[t].entry(key(k)).or_insert_with(|| value(k, 40));
                }
            }
            Op::DeleteRun(t, k, n) => {
                for k in k..k.saturating_add(n) {
                    assert_eq!(
                        engine.delete(tables[t], &key(k)).unwrap(),
                        models[t].remove(&key(k)).is_some()
                    );
                }
            }
            Op::Truncate(t) => {
                engine.truncate_table(tables[t]).unwrap();
                models[t].clear();
            }
            Op::Recreate(t) => {
                engine.drop_table(&name(t)).unwrap();
                tables[t] = engine.create_table(&name(t)).unwrap();
                models[t].clear();
            }
            Op::LookAhead(t, ks) => {
                let keys: Vec<Vec<u8>> = ks.into_iter().map(key).collect();
                let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
                engine.look_ahead(tables[t], &keys);
            }
            Op::ForgetLookAhead => engine.forget_look_ahead(),
        }
    }
    for (table, model) in tables.into_iter().zip(models) {
        common::assert_table_holds(&mut engine, table, model);
    }
    let stats = engine.stats();
    (
        stats.leaf_hint_hits,
        stats.leaf_hint_misses,
        stats.lookahead_used,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn hinted_operations_match_btreemaps_across_trees(
        ops in proptest::collection::vec(op(), 1..1200)
    ) {
        let _ = run(ops);
    }
}

#[test]
fn the_transfer_pattern_mostly_skips_the_descent() {
    // Per step: an ascending id into tree 0, a read-then-write of the hot key and of a
    // scattered key in tree 1, and an index entry after the hot key's run in tree 2.
    let mut ops = Vec::new();
    for step in 0..2_000u16 {
        ops.push(Op::Insert(0, step % 800, 20));
        ops.push(Op::ReadThenWrite(1, 7, 0));
        ops.push(Op::ReadThenWrite(1, step.wrapping_mul(7_919) % 800, 0));
        ops.push(Op::Put(2, 1_000 + step, 0));
    }
    let (hits, misses, _) = run(ops);
    assert!(
        hits > 2 * misses,
        "{hits} operations found their leaf from a hint, {misses} descended"
    );
}

#[test]
fn operations_start_at_the_leaves_found_ahead() {
    // A tree of 800 keys, then groups of 16 scattered keys: each group looked ahead at, then
    // read and written (the account pattern of a multi-row transfer statement), with
    // ascending inserts into the same tree in between, which split leaves.
    let mut ops = vec![Op::Ascending(1, 0, 800)];
    for group in 0..60u16 {
        let keys: Vec<u16> = (0..16u16)
            .map(|i| (group * 16 + i).wrapping_mul(7_919) % 800)
            .collect();
        ops.push(Op::LookAhead(1, keys.clone()));
        ops.extend(keys.into_iter().map(|k| Op::ReadThenWrite(1, k, 0)));
        ops.push(Op::Ascending(1, 800 + group * 4, 4));
    }
    let (_, _, used) = run(ops);
    assert!(
        used > 60 * 8,
        "{used} operations started at a leaf found ahead"
    );
}
