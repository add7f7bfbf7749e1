//! Reading ahead the pages of keys about to be used in a tree larger than the buffer pool,
//! at once (`Engine::page_in`) or left in flight (`submit_page_in`): the operations that
//! follow find their pages resident (or among the reads in flight), read the same values
//! as without it, writes made after reads were started stay, and a tree that fits reads
//! nothing ahead.

use kv::{Engine, EngineOptions, LogPosition};

fn open(dir: &tempfile::TempDir, pool_bytes: usize) -> Engine {
    let options = EngineOptions {
        page_size: 4096,
        pool_bytes,
        ..EngineOptions::default()
    };
    Engine::open(&dir.path().join("data"), options).unwrap().0
}

fn key(k: u64, keys: u64) -> [u8; 8] {
    (k * 2_654_435_761 % keys).to_be_bytes()
}

#[test]
fn the_pages_of_keys_read_ahead_are_resident_for_their_operations() {
    let dir = tempfile::tempdir().unwrap();
    let keys = 40_000;
    // A pool of 256 pages over ~1,500: nothing is resident.
    let (mut engine, table) = reopened_over_a_small_pool(&dir, keys);
    assert!(!engine.all_resident());
    for round in 0..20u64 {
        let wanted: Vec<[u8; 8]> = (0..24).map(|i| key(round * 997 + i * 31, keys)).collect();
        let slices: Vec<&[u8]> = wanted.iter().map(|k| k.as_slice()).collect();
        engine.page_in(table, &slices);
        let misses = engine.stats().pool.misses;
        for k in &wanted {
            let value = engine
                .get(table, k)
                .unwrap()
                .expect("every key was written");
            assert_eq!(value.len(), 100);
        }
        assert_eq!(
            engine.stats().pool.misses,
            misses,
            "round {round}: the gets found every page resident"
        );
    }
    let stats = engine.stats();
    // (Keys of a round share leaves, and later rounds find earlier rounds' pages.)
    assert!(stats.pool.read_ahead >= 100, "{stats:?}");
    assert!(stats.resident_pages <= 256, "within the pool: {stats:?}");
}

/// 40,000 keys of 100-byte values (~1,500 pages of 4 KiB), written and checkpointed, then
/// reopened with a pool of 256 pages.
fn reopened_over_a_small_pool(dir: &tempfile::TempDir, keys: u64) -> (Engine, kv::Table) {
    {
        let mut engine = open(dir, 64 << 20);
        let table = engine.create_table("t").unwrap();
        for k in 0..keys {
            engine.put(table, &key(k, keys), &[k as u8; 100]).unwrap();
        }
        engine
            .checkpoint(LogPosition { term: 1, index: 1 })
            .unwrap();
    }
    let engine = open(dir, 256 * 4096);
    let table = engine.table("t").unwrap();
    (engine, table)
}

#[test]
fn reads_left_in_flight_are_completed_by_the_next_miss_or_on_demand() {
    let dir = tempfile::tempdir().unwrap();
    let keys = 40_000;
    let (mut engine, table) = reopened_over_a_small_pool(&dir, keys);
    // The upper levels resident, as a working tree's are (a key stops at the first page it
    // must wait for): the reads left in flight are the leaves'.
    for k in 0..50 {
        engine.get(table, &key(k * 800 + 1, keys)).unwrap();
    }
    for round in 0..10u64 {
        let indexes: Vec<u64> = (0..24).map(|i| round * 991 + i * 37).collect();
        let wanted: Vec<[u8; 8]> = indexes.iter().map(|&k| key(k, keys)).collect();
        let slices: Vec<&[u8]> = wanted.iter().map(|k| k.as_slice()).collect();
        engine.submit_page_in(table, &slices);
        if round % 2 == 0 {
            engine.complete_page_in();
        }
        let misses = engine.stats().pool.misses;
        for (&k, wanted) in indexes.iter().zip(&wanted) {
            let value = engine
                .get(table, wanted)
                .unwrap()
                .expect("every key was written");
            assert_eq!(value, vec![k as u8; 100]);
        }
        // A leaf whose read is in flight is no miss: the first operation that misses
        // completes the reads in flight and finds it among them.
        assert!(
            engine.stats().pool.misses <= misses + 1,
            "round {round}: {:?}",
            engine.stats()
        );
    }
    assert!(engine.stats().pool.read_ahead > 0, "{:?}", engine.stats());
}

#[test]
fn pages_written_after_their_reads_were_started_keep_the_writes() {
    let dir = tempfile::tempdir().unwrap();
    let keys = 40_000;
    let (mut engine, table) = reopened_over_a_small_pool(&dir, keys);
    for k in 0..50 {
        engine.get(table, &key(k * 800 + 1, keys)).unwrap();
    }
    let wanted: Vec<[u8; 8]> = (0..48).map(|i| key(i * 101, keys)).collect();
    let slices: Vec<&[u8]> = wanted.iter().map(|k| k.as_slice()).collect();
    engine.submit_page_in(table, &slices);
    for k in &wanted {
        engine.put(table, k, b"new").unwrap();
    }
    // Reads started again for the same pages, now resident and dirty: nothing replaces them.
    engine.submit_page_in(table, &slices);
    engine.complete_page_in();
    engine
        .checkpoint(LogPosition { term: 1, index: 2 })
        .unwrap();
    drop(engine);
    let mut engine = open(&dir, 256 * 4096);
    for k in &wanted {
        assert_eq!(engine.get(table, k).unwrap().as_deref(), Some(&b"new"[..]));
    }
}

#[test]
fn a_tree_in_memory_reads_nothing_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open(&dir, 64 << 20);
    let table = engine.create_table("t").unwrap();
    for k in 0..5_000 {
        engine.put(table, &key(k, 5_000), b"v").unwrap();
    }
    assert!(engine.all_resident());
    let wanted = key(7, 5_000);
    engine.page_in(table, &[wanted.as_slice()]);
    assert_eq!(engine.stats().pool.read_ahead, 0);
    assert_eq!(
        engine.get(table, &wanted).unwrap().as_deref(),
        Some(&b"v"[..])
    );
}
