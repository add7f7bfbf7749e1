//! The engines under test behind one trait. Each is driven by the benchmark's single thread.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::{key_of, Config, VALUE_LEN};

pub trait BenchEngine {
    fn name(&self) -> &str;
    /// Inserts every id (in the given order) with `value`, then makes the state durable.
    fn load(&mut self, ids: &[u64], value: &[u8]);
    fn update(&mut self, key: &[u8], value: &[u8]);
    fn read(&mut self, key: &[u8]) -> bool;
    /// Called every few hundred operations; starts/finishes background durability work.
    /// Returns whether such work is running now.
    fn housekeeping(&mut self) -> bool;
    /// A short free-form description of engine state (hit rate, checkpoints) since the
    /// current workload began.
    fn notes(&self) -> String;
    /// Marks the start of a workload (resets per-workload counters).
    fn begin_workload(&mut self) {}
    fn close(&mut self);
}

pub fn open(name: &str, dir: &Path, config: &Config) -> Result<Box<dyn BenchEngine>, String> {
    match name {
        "hotledger" => Ok(Box::new(Hotledger::open(dir, config)?)),
        "redb" => Ok(Box::new(Redb::open(dir, config)?)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(Box::new(rocks::Rocks::open(dir)?)),
        #[cfg(not(feature = "rocksdb"))]
        "rocksdb" => Err("rocksdb: rebuild with `--features rocksdb`".into()),
        other => Err(format!("unknown engine {other}")),
    }
}

pub struct Hotledger {
    engine: kv::Engine,
    table: kv::Table,
    interval: Duration,
    last_checkpoint_start: Instant,
    position: u64,
    checkpoints: u64,
    checkpoint_seconds: f64,
    checkpoint_pages: usize,
    /// Longest housekeeping call (starting a checkpoint, capturing a step of pages,
    /// finishing one): the executor's pause for checkpoint work.
    housekeeping_pause_max: Duration,
    /// Pool counters when the current workload began.
    pool_at_start: kv::PoolStats,
    value: Vec<u8>,
}

impl Hotledger {
    fn open(dir: &Path, config: &Config) -> Result<Hotledger, String> {
        let options = kv::EngineOptions {
            page_size: config.page_size,
            pool_bytes: config.pool_mb << 20,
            io_mode: config.io,
            checkpoint_spread: Some(config.checkpoint_spread),
            ..kv::EngineOptions::default()
        };
        let (mut engine, _) =
            kv::Engine::open(&dir.join("data"), options).map_err(|err| err.to_string())?;
        let table = engine
            .create_table("bench")
            .map_err(|err| err.to_string())?;
        Ok(Hotledger {
            engine,
            table,
            interval: config.checkpoint_interval,
            last_checkpoint_start: Instant::now(),
            position: 0,
            checkpoints: 0,
            checkpoint_seconds: 0.0,
            checkpoint_pages: 0,
            housekeeping_pause_max: Duration::ZERO,
            pool_at_start: kv::PoolStats::default(),
            value: Vec::with_capacity(VALUE_LEN),
        })
    }
}

impl BenchEngine for Hotledger {
    fn name(&self) -> &str {
        "hotledger"
    }

    fn load(&mut self, ids: &[u64], value: &[u8]) {
        for id in ids {
            self.engine
                .put(self.table, &key_of(*id), value)
                .expect("hotledger put");
        }
        self.position += 1;
        self.engine
            .checkpoint(kv::LogPosition {
                term: 1,
                index: self.position,
            })
            .expect("hotledger checkpoint");
        self.last_checkpoint_start = Instant::now();
    }

    fn update(&mut self, key: &[u8], value: &[u8]) {
        let found = self
            .engine
            .update(self.table, key, value)
            .expect("hotledger update");
        debug_assert!(found);
    }

    fn read(&mut self, key: &[u8]) -> bool {
        self.engine
            .get_into(self.table, key, &mut self.value)
            .expect("hotledger get")
    }

    fn housekeeping(&mut self) -> bool {
        let started = Instant::now();
        if let Some(report) = self.engine.poll_checkpoint().expect("hotledger checkpoint") {
            self.checkpoints += 1;
            self.checkpoint_seconds += report.elapsed.as_secs_f64();
            self.checkpoint_pages += report.pages;
        }
        if !self.engine.checkpoint_in_progress()
            && (self.last_checkpoint_start.elapsed() >= self.interval
                || self.engine.needs_checkpoint())
        {
            self.position += 1;
            self.engine
                .begin_checkpoint(kv::LogPosition {
                    term: 1,
                    index: self.position,
                })
                .expect("hotledger begin checkpoint");
            self.last_checkpoint_start = started;
        }
        self.housekeeping_pause_max = self.housekeeping_pause_max.max(started.elapsed());
        self.engine.checkpoint_in_progress()
    }

    fn begin_workload(&mut self) {
        self.pool_at_start = self.engine.stats().pool;
        self.checkpoints = 0;
        self.checkpoint_seconds = 0.0;
        self.checkpoint_pages = 0;
        self.housekeeping_pause_max = Duration::ZERO;
    }

    fn notes(&self) -> String {
        let stats = self.engine.stats();
        let pool = kv::PoolStats {
            hits: stats.pool.hits - self.pool_at_start.hits,
            misses: stats.pool.misses - self.pool_at_start.misses,
            evictions: stats.pool.evictions - self.pool_at_start.evictions,
            read_ahead: stats.pool.read_ahead - self.pool_at_start.read_ahead,
        };
        let average = if self.checkpoints == 0 {
            0.0
        } else {
            self.checkpoint_seconds / self.checkpoints as f64
        };
        format!(
            "pool hit rate {:.4}, {} pages of {} B ({} MiB file), io_uring {}, {} checkpoints averaging {:.2} s and {} pages, longest checkpoint housekeeping pause {} us",
            pool.hit_rate(),
            stats.page_count,
            stats.page_size,
            (stats.page_count * stats.page_size as u64) >> 20,
            stats.uses_uring,
            self.checkpoints,
            average,
            self.checkpoint_pages.checked_div(self.checkpoints as usize).unwrap_or(0),
            self.housekeeping_pause_max.as_micros(),
        )
    }

    fn close(&mut self) {
        let _ = self.engine.wait_checkpoint();
    }
}

type RedbReader = redb::ReadOnlyTable<&'static [u8], &'static [u8]>;

const REDB_TABLE: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("bench");

/// redb: updates go through write transactions of `batch` operations committed with
/// `Durability::None`; every checkpoint interval one commit is `Immediate` (fsync).
pub struct Redb {
    db: redb::Database,
    batch: usize,
    pending: Option<redb::WriteTransaction>,
    in_batch: usize,
    interval: Duration,
    last_durable: Instant,
    durable_commits: u64,
    /// A read-only table kept open for `batch` reads, like the write batching.
    reader: Option<(RedbReader, usize)>,
}

impl Redb {
    fn open(dir: &Path, config: &Config) -> Result<Redb, String> {
        let db = redb::Builder::new()
            .set_cache_size(config.pool_mb << 20)
            .create(dir.join("redb"))
            .map_err(|err| err.to_string())?;
        Ok(Redb {
            db,
            batch: config.redb_batch,
            pending: None,
            in_batch: 0,
            interval: config.checkpoint_interval,
            last_durable: Instant::now(),
            durable_commits: 0,
            reader: None,
        })
    }

    fn write_txn(&mut self) -> &mut redb::WriteTransaction {
        if self.pending.is_none() {
            let mut txn = self.db.begin_write().expect("redb begin_write");
            let durable = self.last_durable.elapsed() >= self.interval;
            txn.set_durability(if durable {
                redb::Durability::Immediate
            } else {
                redb::Durability::None
            });
            if durable {
                self.last_durable = Instant::now();
                self.durable_commits += 1;
            }
            self.pending = Some(txn);
        }
        self.pending.as_mut().expect("just set")
    }

    fn commit(&mut self) {
        if let Some(txn) = self.pending.take() {
            txn.commit().expect("redb commit");
        }
        self.in_batch = 0;
    }
}

impl BenchEngine for Redb {
    fn name(&self) -> &str {
        "redb"
    }

    fn load(&mut self, ids: &[u64], value: &[u8]) {
        for chunk in ids.chunks(50_000) {
            let txn = self.db.begin_write().expect("redb begin_write");
            {
                let mut table = txn.open_table(REDB_TABLE).expect("redb open_table");
                for id in chunk {
                    table
                        .insert(key_of(*id).as_slice(), value)
                        .expect("redb insert");
                }
            }
            txn.commit().expect("redb commit");
        }
    }

    fn update(&mut self, key: &[u8], value: &[u8]) {
        self.reader = None;
        {
            let txn = self.write_txn();
            let mut table = txn.open_table(REDB_TABLE).expect("redb open_table");
            table.insert(key, value).expect("redb insert");
        }
        self.in_batch += 1;
        if self.in_batch >= self.batch {
            self.commit();
        }
    }

    fn read(&mut self, key: &[u8]) -> bool {
        self.commit();
        if self
            .reader
            .as_ref()
            .is_none_or(|(_, reads)| *reads >= self.batch)
        {
            let txn = self.db.begin_read().expect("redb begin_read");
            self.reader = Some((txn.open_table(REDB_TABLE).expect("redb open_table"), 0));
        }
        let (table, reads) = self.reader.as_mut().expect("just set");
        *reads += 1;
        table.get(key).expect("redb get").is_some()
    }

    fn housekeeping(&mut self) -> bool {
        false
    }

    fn notes(&self) -> String {
        format!(
            "batch {} ops per write transaction, {} durable commits",
            self.batch, self.durable_commits
        )
    }

    fn close(&mut self) {
        self.commit();
    }
}

#[cfg(feature = "rocksdb")]
mod rocks {
    use super::*;

    /// RocksDB with the WAL off: memtable inserts, background flushes and compactions.
    pub struct Rocks {
        db: rocksdb::DB,
        write: rocksdb::WriteOptions,
    }

    impl Rocks {
        pub fn open(dir: &Path) -> Result<Rocks, String> {
            let mut options = rocksdb::Options::default();
            options.create_if_missing(true);
            options.increase_parallelism(2);
            let db =
                rocksdb::DB::open(&options, dir.join("rocksdb")).map_err(|err| err.to_string())?;
            let mut write = rocksdb::WriteOptions::default();
            write.disable_wal(true);
            Ok(Rocks { db, write })
        }
    }

    impl BenchEngine for Rocks {
        fn name(&self) -> &str {
            "rocksdb"
        }

        fn load(&mut self, ids: &[u64], value: &[u8]) {
            for id in ids {
                self.db
                    .put_opt(key_of(*id), value, &self.write)
                    .expect("rocksdb put");
            }
            self.db.flush().expect("rocksdb flush");
        }

        fn update(&mut self, key: &[u8], value: &[u8]) {
            self.db
                .put_opt(key, value, &self.write)
                .expect("rocksdb put");
        }

        fn read(&mut self, key: &[u8]) -> bool {
            self.db.get_pinned(key).expect("rocksdb get").is_some()
        }

        fn housekeeping(&mut self) -> bool {
            let busy = |property: &str| {
                self.db
                    .property_int_value(property)
                    .ok()
                    .flatten()
                    .unwrap_or(0)
                    > 0
            };
            busy("rocksdb.num-running-flushes") || busy("rocksdb.num-running-compactions")
        }

        fn notes(&self) -> String {
            let value = |property: &str| {
                self.db
                    .property_int_value(property)
                    .ok()
                    .flatten()
                    .unwrap_or(0)
            };
            format!(
                "WAL off; {} L0 files, {} MiB SST",
                value("rocksdb.num-files-at-level0"),
                value("rocksdb.total-sst-files-size") >> 20
            )
        }

        fn close(&mut self) {
            let _ = self.db.flush();
        }
    }
}
