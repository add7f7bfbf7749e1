//! Dirty pages against the buffer pool's size: a checkpoint keeps pace however rarely its
//! owner polls it, and the pool reports how far dirty pages pushed it past its size until
//! checkpoints bring it back.

use std::time::Duration;

use kv::{Engine, EngineOptions, LogPosition};

fn position(index: u64) -> LogPosition {
    LogPosition { term: 1, index }
}

fn open(dir: &tempfile::TempDir) -> Engine {
    let options = EngineOptions {
        page_size: 4096,
        pool_bytes: 1 << 20,
        ..EngineOptions::default()
    };
    Engine::open(&dir.path().join("data"), options).unwrap().0
}

/// Writes `keys` 100-byte values under scattered keys (every leaf gets dirty).
fn fill(engine: &mut Engine, keys: u64) {
    let table = engine
        .table("t")
        .unwrap_or_else(|| engine.create_table("t").unwrap());
    for k in 0..keys {
        let key = (k * 2_654_435_761 % keys).to_be_bytes();
        engine.put(table, &key, &[k as u8; 100]).unwrap();
    }
}

#[test]
fn a_rarely_polled_checkpoint_still_keeps_pace() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open(&dir);
    // ~5,500 dirty pages (the pool holds 256; no-steal keeps them all until a checkpoint).
    fill(&mut engine, 150_000);
    engine.begin_checkpoint(position(1)).unwrap();
    // An owner busy for 100 ms between polls (as one applying a few 1,000-row statements per
    // entry is): a fixed step of 256 pages per poll would take over twenty polls for the
    // capture alone; keeping pace, the writer's own time decides.
    let mut polls = 0;
    while engine.checkpoint_in_progress() {
        std::thread::sleep(Duration::from_millis(100));
        engine.poll_checkpoint().unwrap();
        polls += 1;
        assert!(polls < 200, "the checkpoint must finish");
    }
    let stats = engine.stats();
    assert!(stats.last_checkpoint_pages > 5_000, "{stats:?}");
    assert!(
        polls <= 10,
        "{polls} polls for a checkpoint of {} pages",
        stats.last_checkpoint_pages
    );
}

#[test]
fn the_pool_reports_its_overshoot_until_checkpoints_clean_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = open(&dir);
    assert_eq!(engine.pool_overshoot(), 0.0);
    fill(&mut engine, 60_000);
    let stats = engine.stats();
    assert!(
        engine.pool_overshoot() > 1.0,
        "{} buffers in a pool of {}",
        stats.peak_buffer_pages,
        stats.pool_capacity_pages
    );
    assert!(stats.peak_buffer_pages > stats.pool_capacity_pages * 5 / 4);
    engine.begin_checkpoint(position(1)).unwrap();
    engine.wait_checkpoint().unwrap();
    assert_eq!(engine.pool_overshoot(), 0.0);
    assert!(engine.stats().resident_pages <= engine.stats().pool_capacity_pages);
    // The peak stays as a record of how far the pool went.
    assert_eq!(engine.stats().peak_buffer_pages, stats.peak_buffer_pages);
}
