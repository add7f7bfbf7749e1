//! The executor: one thread that owns the storage engines (one per partition, see
//! `partition`), applies committed log entries in order, serves reads between them, and
//! takes checkpoints. Nothing else touches the engines, so nothing on this path takes a
//! lock.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, RwLock};
use std::thread;
use std::time::{Duration, Instant};

use kv::{Engine, EngineOptions, IoMode, LogPosition};
use planner::{Catalog, TableDef, WritePlan};
use sql::{ErrorKind, SqlError, SqlResult, Value};

use crate::command::{
    decode_command, encode_result, Command, CommandResult, Outcome, Overlay, QueryResult, Staged,
};
use crate::error::{is_storage_failure, kv_error};
use crate::partition::{
    combined_stats, is_partitioned, partition_file, partition_of_key, CommitRecord, Shard,
};
use crate::query::Reader;
use crate::row::{decode_row, encode_row};

const META_TABLE: &str = "__meta";
const META_CATALOG: &[u8] = b"catalog";
const META_APPLIED: &[u8] = b"applied_log_id";
const META_MEMBERSHIP: &[u8] = b"membership";
const META_LEDGER_CLOCK: &[u8] = b"ledger_clock";
const META_PARTITIONS: &[u8] = b"partitions";
/// Pending transfers with a timeout, keyed by (expiry time, transfer id).
const LEDGER_EXPIRY_TABLE: &str = "__ledger_expiry";

#[derive(Clone, Debug)]
pub struct ExecutorOptions {
    pub data_file: PathBuf,
    pub pool_bytes: usize,
    /// Checkpoint at least this often while there are changes.
    pub checkpoint_interval: Duration,
    pub io_mode: IoMode,
    /// How many partitions a new data directory gets (`None`: the number of cores). An
    /// existing one keeps the count it was created with; asking for another is an error.
    pub partitions: Option<usize>,
}

/// What a log entry carries, as far as the executor is concerned.
pub enum EntryPayload {
    /// A leader's no-op or a membership change: only the position advances.
    Blank,
    Membership(Vec<u8>),
    /// The commands of one entry, each encoded on its own.
    Commands(Vec<Vec<u8>>),
}

/// Opaque bytes the replication layer stores with the state: the id of the last applied
/// entry and the membership in force.
#[derive(Clone, Debug, Default)]
pub struct ReplicationMeta {
    pub applied_log_id: Option<Vec<u8>>,
    pub membership: Option<Vec<u8>>,
}

pub type Reply<T> = Box<dyn FnOnce(T) + Send>;

/// A stored row: its raw bytes (kept for undo), its version and its values.
pub(crate) type StoredRow = (Vec<u8>, u64, Vec<Value>);

pub enum Request {
    /// Applies one committed entry; the reply carries one encoded result per command.
    Apply {
        position: LogPosition,
        log_id: Vec<u8>,
        payload: EntryPayload,
        reply: Reply<Vec<Vec<u8>>>,
    },
    Query {
        plan: Arc<planner::SelectPlan>,
        params: Vec<Value>,
        now_micros: i64,
        overlay: Option<Arc<Overlay>>,
        record_reads: bool,
        reply: Reply<SqlResult<QueryResult>>,
    },
    Stage {
        plan: Arc<WritePlan>,
        params: Vec<Value>,
        now_micros: i64,
        overlay: Option<Arc<Overlay>>,
        record_reads: bool,
        reply: Reply<SqlResult<Staged>>,
    },
    /// The storage engine's counters (buffer pool residency and hit rate, file size).
    Stats {
        reply: Reply<kv::EngineStats>,
    },
    /// The replication meta of the state as applied now, and as of the last durable checkpoint.
    Meta {
        reply: Reply<(ReplicationMeta, ReplicationMeta)>,
    },
    Shutdown {
        reply: Reply<()>,
    },
}

/// A cheap, cloneable way to talk to the executor thread.
#[derive(Clone)]
pub struct ExecutorHandle {
    requests: Sender<Request>,
    catalog: Arc<RwLock<Arc<Catalog>>>,
}

impl ExecutorHandle {
    /// Sends a request; false when the executor has stopped.
    pub fn send(&self, request: Request) -> bool {
        self.requests.send(request).is_ok()
    }

    /// The catalog as of the last applied schema change.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.read().map(|c| c.clone()).unwrap_or_default()
    }
}

/// A write's prior state, for rolling back a command that fails halfway.
struct Undo {
    shard: usize,
    storage: kv::Table,
    key: Vec<u8>,
    old: Option<Vec<u8>>,
}

/// Where a SQL table's rows are stored: in every partition by key, or in partition 0.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Store {
    pub id: u32,
    pub partitioned: bool,
}

/// A checkpoint of every partition at one log position (see `partition`).
struct Checkpointing {
    meta: ReplicationMeta,
    position: LogPosition,
    /// The commit record names this position: the partitions may write in place.
    committed: bool,
}

pub struct Executor {
    /// Partition 0 first; it also holds the catalog, the metadata and non-ledger tables.
    pub(crate) shards: Vec<Shard>,
    pub(crate) catalog: Arc<Catalog>,
    published: Arc<RwLock<Arc<Catalog>>>,
    meta: kv::Table,
    commit_record: CommitRecord,
    applied: LogPosition,
    replication: ReplicationMeta,
    durable_replication: ReplicationMeta,
    checkpointing: Option<Checkpointing>,
    last_checkpoint: Instant,
    changed_since_checkpoint: bool,
    options: ExecutorOptions,
    undo: Vec<Undo>,
    pub(crate) rowid_next: u64,
    /// Set when applying hit an IO error: the state may no longer match the log, so every
    /// later command is refused until a restart replays the log.
    failed: Option<SqlError>,
    pub(crate) scratch: Vec<u8>,
    /// The ledger clock (see `transfer`): the latest `now()` of the commands applied.
    pub(crate) ledger_clock: i64,
    pub(crate) expiry: kv::Table,
    /// No pending transfer expires before this (None: none has a timeout).
    pub(crate) next_expiry: Option<i64>,
    pub(crate) ledger_schema: Option<(u64, Arc<planner::LedgerSchema>)>,
}

/// The partition count of a new data directory when none is asked for: one per core.
fn default_partitions() -> usize {
    thread::available_parallelism().map_or(1, |n| n.get())
}

/// Opens the data file, recovers, and starts the executor thread.
pub fn spawn(options: ExecutorOptions) -> SqlResult<(ExecutorHandle, LogPosition)> {
    let executor = Executor::open(options)?;
    let position = executor.applied;
    let catalog = executor.published.clone();
    let (tx, rx) = mpsc::channel();
    thread::Builder::new()
        .name("executor".into())
        .spawn(move || executor.run(rx))
        .map_err(|e| SqlError::internal(format!("cannot start the executor thread: {e}")))?;
    Ok((
        ExecutorHandle {
            requests: tx,
            catalog,
        },
        position,
    ))
}

impl Executor {
    pub fn open(options: ExecutorOptions) -> SqlResult<Executor> {
        let commit_record = CommitRecord::for_data_file(&options.data_file);
        let committed = commit_record.read()?;
        let engine_options = |partitions: usize| EngineOptions {
            pool_bytes: (options.pool_bytes / partitions).max(1 << 20),
            io_mode: options.io_mode,
            gated_checkpoints: true,
            // A data directory without a commit record is new (nothing to recover) or from
            // a build before partitions (one engine, whose journal is its own commit).
            journal_limit: committed.map(|p| p.index),
            ..EngineOptions::default()
        };
        let requested = options.partitions.map(|n| n.max(1));
        let guess = requested.unwrap_or_else(default_partitions);
        let (mut first, recovery) =
            Engine::open(&options.data_file, engine_options(guess)).map_err(kv_error)?;
        let meta = match first.table(META_TABLE) {
            Some(t) => t,
            None => first.create_table(META_TABLE).map_err(kv_error)?,
        };
        let stored = first.get(meta, META_PARTITIONS).map_err(kv_error)?;
        let partitions = match stored {
            Some(bytes) => {
                let count = bytes
                    .as_slice()
                    .try_into()
                    .map(u64::from_le_bytes)
                    .map_err(|_| SqlError::internal("stored partition count is unreadable"))?
                    as usize;
                if requested.is_some_and(|r| r != count) {
                    return Err(SqlError::feature_not_supported(format!(
                        "changing the partition count of a data directory (it has {count}; repartitioning is not supported yet)"
                    )));
                }
                count
            }
            // New, or made before partitions existed (then it has one).
            None => {
                let count = if recovery.created { guess } else { 1 };
                first
                    .put(meta, META_PARTITIONS, &(count as u64).to_le_bytes())
                    .map_err(kv_error)?;
                count
            }
        };
        if committed.is_none() {
            commit_record.write(recovery.log_position)?;
        }
        let catalog: Catalog = match first.get(meta, META_CATALOG).map_err(kv_error)? {
            Some(bytes) => bincode::deserialize(&bytes)
                .map_err(|e| SqlError::internal(format!("stored catalog is unreadable: {e}")))?,
            None => Catalog::default(),
        };
        let expiry = match first.table(LEDGER_EXPIRY_TABLE) {
            Some(t) => t,
            None => first.create_table(LEDGER_EXPIRY_TABLE).map_err(kv_error)?,
        };
        let ledger_clock = match first.get(meta, META_LEDGER_CLOCK).map_err(kv_error)? {
            Some(bytes) => i64::from_le_bytes(
                bytes
                    .as_slice()
                    .try_into()
                    .map_err(|_| SqlError::internal("stored ledger clock is unreadable"))?,
            ),
            None => 0,
        };
        let replication = ReplicationMeta {
            applied_log_id: first.get(meta, META_APPLIED).map_err(kv_error)?,
            membership: first.get(meta, META_MEMBERSHIP).map_err(kv_error)?,
        };
        let mut engines = vec![first];
        for index in 1..partitions {
            let path = partition_file(&options.data_file, index);
            let (engine, info) =
                Engine::open(&path, engine_options(partitions)).map_err(kv_error)?;
            if info.log_position != recovery.log_position {
                return Err(SqlError::new(
                    ErrorKind::Io,
                    format!(
                        "partition {index} ({}) is at log index {}, partition 0 at {}: the data directory is damaged",
                        path.display(),
                        info.log_position.index,
                        recovery.log_position.index
                    ),
                ));
            }
            engines.push(engine);
        }
        let mut shards = Vec::with_capacity(partitions);
        for mut engine in engines {
            let mut storage = HashMap::new();
            for table in catalog.tables.values() {
                let names = std::iter::once((table.id, &table.storage))
                    .chain(table.indexes.iter().map(|i| (i.id, &i.storage)));
                for (id, name) in names {
                    let handle = match engine.table(name) {
                        Some(handle) => handle,
                        // Partitions made before this one saw every table created.
                        None => engine.create_table(name).map_err(kv_error)?,
                    };
                    storage.insert(id, handle);
                }
            }
            shards.push(Shard {
                engine,
                storage,
                table_versions: HashMap::new(),
            });
        }
        let catalog = Arc::new(catalog);
        Ok(Executor {
            shards,
            published: Arc::new(RwLock::new(catalog.clone())),
            catalog,
            meta,
            commit_record,
            applied: recovery.log_position,
            durable_replication: replication.clone(),
            replication,
            checkpointing: None,
            last_checkpoint: Instant::now(),
            changed_since_checkpoint: false,
            options,
            undo: Vec::new(),
            rowid_next: 0,
            failed: None,
            scratch: Vec::new(),
            ledger_clock,
            expiry,
            // Unknown after a start: the first sweep looks.
            next_expiry: Some(i64::MIN),
            ledger_schema: None,
        })
    }

    fn checkpoint_in_progress(&self) -> bool {
        self.checkpointing.is_some()
    }

    fn run(mut self, requests: Receiver<Request>) {
        loop {
            let wait = if self.checkpoint_in_progress() {
                Duration::from_millis(1)
            } else {
                Duration::from_millis(100)
            };
            match requests.recv_timeout(wait) {
                Ok(Request::Shutdown { reply }) => {
                    self.shutdown();
                    reply(());
                    return;
                }
                Ok(request) => self.handle(request),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.shutdown();
                    return;
                }
            }
            self.maintain();
        }
    }

    fn handle(&mut self, request: Request) {
        match request {
            Request::Apply {
                position,
                log_id,
                payload,
                reply,
            } => {
                let results = self.apply_entry(position, log_id, payload);
                reply(results);
            }
            Request::Query {
                plan,
                params,
                now_micros,
                overlay,
                record_reads,
                reply,
            } => {
                let result =
                    self.query(&plan, &params, now_micros, overlay.as_deref(), record_reads);
                reply(result);
            }
            Request::Stage {
                plan,
                params,
                now_micros,
                overlay,
                record_reads,
                reply,
            } => {
                let result =
                    self.stage(&plan, &params, now_micros, overlay.as_deref(), record_reads);
                reply(result);
            }
            Request::Stats { reply } => reply(combined_stats(&self.shards)),
            Request::Meta { reply } => {
                reply((self.replication.clone(), self.durable_replication.clone()))
            }
            Request::Shutdown { reply } => reply(()),
        }
    }

    /// Finishes an in-flight checkpoint, so a clean stop leaves nothing to replay.
    fn shutdown(&mut self) {
        if self.failed.is_none() && self.changed_since_checkpoint && !self.checkpoint_in_progress()
        {
            self.begin_checkpoint();
        }
        if self.checkpointing.is_none() {
            return;
        }
        let journaled = self
            .shards
            .iter_mut()
            .try_for_each(|s| s.engine.wait_journaled().map(|_| ()));
        if let Err(e) = journaled {
            eprintln!("hotledger: checkpoint failed at shutdown: {e}");
            self.abandon_checkpoint();
            return;
        }
        self.commit_checkpoint();
        for shard in &mut self.shards {
            if let Err(e) = shard.engine.wait_checkpoint() {
                eprintln!("hotledger: checkpoint failed at shutdown: {e}");
            }
        }
        self.finish_checkpoint();
    }

    /// Starts a checkpoint of every partition at the position applied now.
    fn begin_checkpoint(&mut self) {
        let snapshot = self.replication.clone();
        let meta = self.meta;
        let clock = self.ledger_clock.to_le_bytes();
        let first = &mut self.shards[0].engine;
        let mut result = first.put(meta, META_LEDGER_CLOCK, &clock).map(|_| ());
        for (key, value) in [
            (META_APPLIED, &snapshot.applied_log_id),
            (META_MEMBERSHIP, &snapshot.membership),
        ] {
            if let (Ok(()), Some(v)) = (&result, value) {
                result = first.put(meta, key, v).map(|_| ());
            }
        }
        for shard in &mut self.shards {
            result = result.and_then(|()| shard.engine.begin_checkpoint(self.applied));
        }
        match result {
            Ok(()) => {
                self.checkpointing = Some(Checkpointing {
                    meta: snapshot,
                    position: self.applied,
                    committed: false,
                });
                self.changed_since_checkpoint = false;
                self.last_checkpoint = Instant::now();
            }
            Err(e) => self.fail(kv_error(e)),
        }
    }

    /// Every partition's journal is durable: record the position as committed, then let the
    /// partitions write in place.
    fn commit_checkpoint(&mut self) {
        let Some(checkpointing) = self.checkpointing.as_mut() else {
            return;
        };
        if let Err(e) = self.commit_record.write(checkpointing.position) {
            // Nothing is lost (the previous commit stands and the log holds everything
            // since), but the engines cannot go on: their journals wait for a commit.
            eprintln!("hotledger: checkpoint failed: {}", e.message);
            self.abandon_checkpoint();
            return;
        }
        checkpointing.committed = true;
        for shard in &mut self.shards {
            shard.engine.release_checkpoint();
        }
    }

    /// Gives up the checkpoint in flight before its commit: every partition keeps its previous
    /// checkpoint and its pages stay dirty for the next one.
    fn abandon_checkpoint(&mut self) {
        for shard in &mut self.shards {
            if let Err(e) = shard.engine.abandon_checkpoint() {
                eprintln!("hotledger: abandoning a checkpoint: {e}");
            }
        }
        self.checkpointing = None;
        self.last_checkpoint = Instant::now();
    }

    /// The checkpoint in flight is durable in every partition.
    fn finish_checkpoint(&mut self) {
        if let Some(checkpointing) = self.checkpointing.take() {
            if checkpointing.committed {
                self.durable_replication = checkpointing.meta;
            }
        }
    }

    fn maintain(&mut self) {
        if self.failed.is_some() {
            return;
        }
        if let Some(checkpointing) = &self.checkpointing {
            let committed = checkpointing.committed;
            let mut failure = None;
            for shard in &mut self.shards {
                if let Err(e) = shard.engine.poll_checkpoint() {
                    failure.get_or_insert(e);
                }
            }
            if let Some(e) = failure {
                // A failed journal leaves every partition's previous checkpoint intact and
                // the log still holds everything since: try again at the next interval. A
                // failure after the commit poisons that engine, and the next apply stops
                // the executor (see apply_command).
                eprintln!("hotledger: checkpoint failed: {e}");
                if committed {
                    self.checkpointing = None;
                } else {
                    self.abandon_checkpoint();
                }
                self.last_checkpoint = Instant::now();
                return;
            }
            if !committed {
                if self.shards.iter().all(|s| s.engine.checkpoint_journaled()) {
                    self.commit_checkpoint();
                }
            } else if self
                .shards
                .iter()
                .all(|s| !s.engine.checkpoint_in_progress())
            {
                self.finish_checkpoint();
            }
            return;
        }
        let due = self.changed_since_checkpoint
            && self.last_checkpoint.elapsed() >= self.options.checkpoint_interval;
        let needed = self.shards.iter().any(|s| s.engine.needs_checkpoint());
        if self.applied.index > 0 && (needed || due) {
            self.begin_checkpoint();
        }
    }

    fn fail(&mut self, error: SqlError) {
        if self.failed.is_none() {
            self.failed = Some(error);
        }
    }

    fn publish_catalog(&mut self, catalog: Catalog) -> SqlResult<()> {
        let bytes = bincode::serialize(&catalog).map_err(|e| SqlError::internal(e.to_string()))?;
        self.shards[0]
            .engine
            .put(self.meta, META_CATALOG, &bytes)
            .map_err(kv_error)?;
        self.catalog = Arc::new(catalog);
        if let Ok(mut published) = self.published.write() {
            *published = self.catalog.clone();
        }
        Ok(())
    }

    fn apply_entry(
        &mut self,
        position: LogPosition,
        log_id: Vec<u8>,
        payload: EntryPayload,
    ) -> Vec<Vec<u8>> {
        // Row ids of tables without a primary key: unique per log entry, and the same on
        // every replica.
        self.rowid_next = position.index << 24;
        let results: Vec<CommandResult> = match payload {
            EntryPayload::Blank => Vec::new(),
            EntryPayload::Membership(m) => {
                self.replication.membership = Some(m);
                Vec::new()
            }
            EntryPayload::Commands(commands) => commands
                .iter()
                .map(|bytes| {
                    decode_command(bytes).and_then(|c| self.apply_command(c, position.index))
                })
                .collect(),
        };
        self.applied = position;
        self.replication.applied_log_id = Some(log_id);
        self.changed_since_checkpoint = true;
        results.iter().map(encode_result).collect()
    }

    /// Refuses work after an IO error stopped the executor.
    fn check_running(&self) -> SqlResult<()> {
        match &self.failed {
            Some(e) => Err(SqlError::new(
                ErrorKind::Io,
                format!("the executor stopped after an IO error: {}", e.message),
            )),
            None => Ok(()),
        }
    }

    fn apply_command(&mut self, command: Command, version: u64) -> CommandResult {
        self.check_running()?;
        self.undo.clear();
        if let Some(now) = command.now_micros() {
            self.advance_clock(now);
            if let Err(e) = self.expire_pending(version) {
                if is_storage_failure(&e) {
                    self.fail(e.clone());
                    return Err(e);
                }
                self.rollback();
            }
            self.undo.clear();
        }
        let result = match command {
            Command::Write {
                plan,
                params,
                now_micros,
            } => self.apply_write(&plan, &params, now_micros, version),
            Command::Commit {
                isolation,
                reads,
                ops,
                now_micros,
            } => self.apply_commit(isolation, &reads, ops, now_micros, version),
            Command::Ddl { plan } => self.apply_ddl(plan, version),
            Command::Procedure {
                steps,
                params,
                now_micros,
            } => self.apply_procedure(&steps, &params, now_micros, version),
            Command::TransferBatch {
                table,
                columns,
                rows,
                linked,
                now_micros,
            } => self.apply_transfer_batch(&table, &columns, rows, &linked, now_micros, version),
            Command::Copy {
                table,
                columns,
                rows,
                now_micros,
            } => self.apply_copy(&table, &columns, rows, now_micros, version),
        };
        if let Err(e) = &result {
            // An IO failure is not a property of the command: replaying the log after a
            // restart may well apply it. Stop here, so nothing applies out of order and no
            // client is told a committed command failed for good.
            if is_storage_failure(e) {
                self.fail(e.clone());
                return Err(SqlError::new(
                    ErrorKind::Io,
                    format!(
                        "the executor stopped after an IO error ({}); restart the server to recover; whether this command applies is decided by the replicated log",
                        e.message
                    ),
                ));
            }
            self.rollback();
        }
        self.undo.clear();
        result
    }

    /// Puts (Some) or deletes (None) a raw kv entry of partition 0 (the executor's own
    /// tables), undoably.
    pub(crate) fn put_raw(
        &mut self,
        storage: kv::Table,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> SqlResult<()> {
        self.write_entry(0, storage, key, value)
    }

    /// Writes one kv entry of partition `shard` and records its prior state for undo.
    fn write_entry(
        &mut self,
        shard: usize,
        storage: kv::Table,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> SqlResult<()> {
        let engine = &mut self.shards[shard].engine;
        let old = engine.get(storage, key).map_err(kv_error)?;
        match value {
            Some(v) => engine.put(storage, key, v).map(|_| ()),
            None => engine.delete(storage, key).map(|_| ()),
        }
        .map_err(kv_error)?;
        self.undo.push(Undo {
            shard,
            storage,
            key: key.to_vec(),
            old,
        });
        Ok(())
    }

    fn rollback(&mut self) {
        self.rollback_to(0);
    }

    /// How many writes the current command has made (a mark for `rollback_to`).
    pub(crate) fn undo_len(&self) -> usize {
        self.undo.len()
    }

    /// Undoes the writes made since the undo log had `mark` entries.
    pub(crate) fn rollback_to(&mut self, mark: usize) {
        while self.undo.len() > mark {
            let Some(u) = self.undo.pop() else { return };
            let engine = &mut self.shards[u.shard].engine;
            let r = match &u.old {
                Some(old) => engine.put(u.storage, &u.key, old).map(|_| ()),
                None => engine.delete(u.storage, &u.key).map(|_| ()),
            };
            if let Err(e) = r {
                self.fail(kv_error(e));
                return;
            }
        }
    }

    pub(crate) fn resolve(&self, table: &planner::TableRef) -> SqlResult<Arc<TableDef>> {
        match self.catalog.table_by_id(table.id) {
            Some(t) if t.shape_version == table.shape_version => Ok(t.clone()),
            Some(_) => Err(SqlError::serialization_failure(format!(
                "table \"{}\" was changed after the statement was planned; retry",
                table.name
            ))),
            None => Err(SqlError::undefined_table(&table.name)),
        }
    }

    pub(crate) fn storage_of(&self, table: &TableDef) -> SqlResult<Store> {
        if !self.shards[0].storage.contains_key(&table.id) {
            return Err(SqlError::undefined_table(&table.name));
        }
        Ok(Store {
            id: table.id,
            partitioned: is_partitioned(table),
        })
    }

    /// The partition holding the row with storage key `key`.
    pub(crate) fn shard_of(&self, store: Store, key: &[u8]) -> usize {
        if store.partitioned {
            partition_of_key(key, self.shards.len())
        } else {
            0
        }
    }

    /// Reads a stored row: its raw bytes (for undo) and decoded form.
    pub(crate) fn get_row(&mut self, store: Store, key: &[u8]) -> SqlResult<Option<StoredRow>> {
        let index = self.shard_of(store, key);
        let shard = &mut self.shards[index];
        let handle = shard.handle(store.id)?;
        match shard.engine.get(handle, key).map_err(kv_error)? {
            Some(bytes) => {
                let (version, row) = decode_row(&bytes)?;
                Ok(Some((bytes, version, row)))
            }
            None => Ok(None),
        }
    }

    pub(crate) fn put_row(
        &mut self,
        table: &TableDef,
        key: &[u8],
        old: Option<Vec<u8>>,
        row: &[Value],
        version: u64,
    ) -> SqlResult<()> {
        let store = self.storage_of(table)?;
        let index = self.shard_of(store, key);
        if !table.indexes.is_empty() {
            let old_row = match &old {
                Some(bytes) => Some(decode_row(bytes)?.1),
                None => None,
            };
            self.update_indexes(table, index, key, old_row.as_deref(), Some(row))?;
        }
        encode_row(version, row, &mut self.scratch);
        let shard = &mut self.shards[index];
        let storage = shard.handle(store.id)?;
        shard
            .engine
            .put(storage, key, &self.scratch)
            .map_err(kv_error)?;
        shard.table_versions.insert(table.id, version);
        self.undo.push(Undo {
            shard: index,
            storage,
            key: key.to_vec(),
            old,
        });
        Ok(())
    }

    /// Moves a row's index entries from its old values to its new ones (either may be
    /// absent), checking unique indexes; every change is undoable. An index's entries live
    /// in the partition of their row.
    fn update_indexes(
        &mut self,
        table: &TableDef,
        shard: usize,
        row_key: &[u8],
        old: Option<&[Value]>,
        new: Option<&[Value]>,
    ) -> SqlResult<()> {
        for index in &table.indexes {
            let storage = self.shards[shard].handle(index.id)?;
            let old_entry = old.map(|r| index_entry(index, r, row_key)).transpose()?;
            let new_entry = new.map(|r| index_entry(index, r, row_key)).transpose()?;
            if old_entry == new_entry {
                continue;
            }
            if let Some(entry) = old_entry {
                self.write_entry(shard, storage, &entry, None)?;
            }
            if let Some(entry) = new_entry {
                // Entries of a non-unique index end with the row's own key: they cannot
                // collide, so only a unique index needs the lookup.
                let engine = &mut self.shards[shard].engine;
                let existing = if index.unique {
                    engine.get(storage, &entry).map_err(kv_error)?
                } else {
                    None
                };
                if let Some(existing) = existing {
                    if existing != row_key {
                        let row = new.unwrap_or_default();
                        return Err(crate::apply::unique_violation(
                            table,
                            &index.name,
                            &index.columns,
                            row,
                        ));
                    }
                }
                engine.put(storage, &entry, row_key).map_err(kv_error)?;
                self.undo.push(Undo {
                    shard,
                    storage,
                    key: entry,
                    old: None,
                });
            }
        }
        Ok(())
    }

    pub(crate) fn delete_row(
        &mut self,
        table: &TableDef,
        key: &[u8],
        old: Vec<u8>,
        version: u64,
    ) -> SqlResult<()> {
        let store = self.storage_of(table)?;
        let index = self.shard_of(store, key);
        if !table.indexes.is_empty() {
            let old_row = decode_row(&old)?.1;
            self.update_indexes(table, index, key, Some(&old_row), None)?;
        }
        let shard = &mut self.shards[index];
        let storage = shard.handle(store.id)?;
        shard.engine.delete(storage, key).map_err(kv_error)?;
        shard.table_versions.insert(table.id, version);
        self.undo.push(Undo {
            shard: index,
            storage,
            key: key.to_vec(),
            old: Some(old),
        });
        Ok(())
    }

    pub(crate) fn reader<'a>(
        &'a mut self,
        overlay: Option<&'a Overlay>,
        record_reads: bool,
    ) -> Reader<'a> {
        Reader {
            shards: Some(RefCell::new(&mut self.shards)),
            catalog: &self.catalog,
            overlay,
            record_reads,
            reads: RefCell::new(Vec::new()),
        }
    }

    fn query(
        &mut self,
        plan: &planner::SelectPlan,
        params: &[Value],
        now_micros: i64,
        overlay: Option<&Overlay>,
        record_reads: bool,
    ) -> SqlResult<QueryResult> {
        self.check_running()?;
        let reader = self.reader(overlay, record_reads);
        let env = reader.env(params, now_micros);
        let rows = reader.rows(&plan.rel, &[], &env)?;
        Ok(QueryResult {
            rows,
            reads: reader.reads.take(),
        })
    }

    /// The current version of a row, for validating a serializable read.
    pub(crate) fn current_version(&mut self, table: u32, key: &[u8]) -> SqlResult<u64> {
        let Some(def) = self.catalog.table_by_id(table).cloned() else {
            return Ok(0);
        };
        let store = self.storage_of(&def)?;
        Ok(self
            .get_row(store, key)?
            .map_or(0, |(_, version, _)| version))
    }

    /// The log index of the last write to a table, in any partition.
    pub(crate) fn table_version(&self, table: u32) -> u64 {
        self.shards
            .iter()
            .filter_map(|s| s.table_versions.get(&table).copied())
            .max()
            .unwrap_or(0)
    }

    pub(crate) fn set_catalog(&mut self, catalog: Catalog) -> SqlResult<()> {
        self.publish_catalog(catalog)
    }

    pub(crate) fn outcome(rows_affected: u64, rows: Vec<Vec<Value>>) -> Outcome {
        Outcome {
            rows_affected,
            rows,
        }
    }
}

/// The key of a row's entry in an index: the indexed values, then (unless the index is
/// unique and the values have no NULL, which never collide) the row's own key.
pub(crate) fn index_entry(
    index: &planner::IndexDef,
    row: &[Value],
    row_key: &[u8],
) -> SqlResult<Vec<u8>> {
    let values: Vec<Value> = index.columns.iter().map(|&c| row[c].clone()).collect();
    let mut key = crate::row::encode_key(&values)?;
    if !index.unique || values.iter().any(Value::is_null) {
        key.extend_from_slice(row_key);
    }
    Ok(key)
}
