//! The coordinator: the executor thread. It receives committed log entries in order,
//! routes each command to the partitions it touches (running single-partition commands on
//! their partition's thread and everything else itself), serves reads between entries with
//! every partition in hand, and checkpoints all partitions as one.

use std::collections::BTreeMap;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, RwLock};
use std::thread;
use std::time::{Duration, Instant};

use kv::{Engine, EngineOptions, LogPosition};
use plan::{Catalog, WritePlan};
use rustc_hash::FxHashMap;
use sql::{ErrorKind, SqlError, SqlResult};

use crate::command::{decode_command, encode_result, Command, CommandResult};
use crate::error::{is_storage_failure, kv_error};
use crate::executor::{
    CommandApplied, EntryPayload, Executor, ExecutorHandle, ExecutorOptions, ExecutorStats,
    ReplicationMeta, Reply, Request, StatementContext, StoredClock, LEDGER_EXPIRY_TABLE,
    META_APPLIED, META_AUTHORIZATION, META_CATALOG, META_ENUMS, META_FOREIGN_KEYS,
    META_INDEX_DERIVATIONS, META_LEDGER_CLOCK, META_MEMBERSHIP, META_TABLE, META_TABLE_VERSIONS,
    META_UNIQUE_CONSTRAINTS, META_VIEWS,
};
use crate::install;
use crate::partition::{
    combined_stats, partition_file, restore_table_versions, CommitRecord, Shard, MAX_PARTITIONS,
};
use crate::read_view::PublishedView;
use crate::route::{Reach, Router};
use crate::sequences::{decode_state, state_key, SequenceStore, META_SEQUENCES};
use crate::share::{self, SplitShare};
use crate::state_snapshot::StateSnapshot;
use crate::undo::UndoLog;
use crate::worker::{Report, Work, Worker};

mod checkpoint_requests;
mod checkpoint_retry;
mod checkpoints;
mod read_ahead;
pub(crate) use read_ahead::ReadsWanted;
mod snapshots;

pub(crate) struct Coordinator {
    /// Holds partition 0 always and every partition between entries.
    executor: Executor,
    /// The thread of each partition p ≥ 1 (index 0 is None: partition 0 is applied here).
    workers: Vec<Option<Worker>>,
    commit_record: CommitRecord,
    applied: LogPosition,
    replication: ReplicationMeta,
    durable_replication: ReplicationMeta,
    checkpointing: Option<Checkpointing>,
    /// How many requests wait for each executor thread (the handle counts them in).
    queues: Arc<crate::queue_depth::QueueDepths>,
    /// The last checkpoints that became durable, newest last (`hotledger.checkpoints`).
    recent_checkpoints: std::collections::VecDeque<plan::CheckpointRow>,
    last_checkpoint: Instant,
    changed_since_checkpoint: bool,
    options: ExecutorOptions,
    routing: Routing,
    /// Undo logs of split runs done with, emptied, to go out with the next run's shares.
    spare_undo: Vec<UndoLog<kv::Table>>,
    /// Checkpoints that failed since the start: a wait for pool room gives up when one does.
    checkpoint_failures: u64,
    /// When a checkpoint may be tried again after failures, and what the log said of them.
    checkpoint_retry: checkpoint_retry::CheckpointRetry,
    pool_waits: PoolWaits,
    /// How long the last entry took to apply (`wait_for_pool_room` paces by it).
    last_apply: Duration,
    /// When the last entry finished applying.
    applied_at: Instant,
    /// The read view published for the sessions' point reads.
    published_view: Arc<PublishedView>,
    /// Who asked for a snapshot of the state (`Request::BuildSnapshot`), answered when the
    /// checkpoint it is taken with is durable.
    snapshot_requests: Vec<Reply<SqlResult<Arc<StateSnapshot>>>>,
    /// The snapshot taken as the checkpoint in flight began, until that checkpoint is durable.
    snapshot_taken: Option<Arc<StateSnapshot>>,
    /// Sessions' CHECKPOINTs, answered when a checkpoint covering them is durable.
    checkpoint_requests: checkpoint_requests::CheckpointRequests,
    /// Reads started for entries the log is still writing, and whether more are wanted
    /// (`read_ahead`).
    read_ahead: read_ahead::ReadAhead,
}

/// What the executor handle shares with the coordinator, kept across a snapshot install.
struct SharedWithHandle {
    published: Arc<RwLock<Arc<Catalog>>>,
    published_view: Arc<PublishedView>,
    activity: Arc<crate::transfer_activity::TransferActivity>,
    queues: Arc<crate::queue_depth::QueueDepths>,
    reads_wanted: ReadsWanted,
}

/// How long the executor stays without an entry before it publishes a read view.
const PUBLISH_AFTER_IDLE: Duration = Duration::from_millis(5);

/// The longest pause before one entry while a buffer pool is past its size but under its
/// limit.
const MAX_POOL_PAUSE: Duration = Duration::from_millis(50);

/// Entries that waited for a checkpoint to make room in a buffer pool, and how long in all.
#[derive(Default)]
struct PoolWaits {
    entries: u64,
    waited: Duration,
}

/// How commands were routed since the start (see `ExecutorStats`).
#[derive(Default)]
struct Routing {
    on_partition_threads: u64,
    on_coordinator: u64,
    handovers: u64,
    split: u64,
}

/// A checkpoint of every partition at one log position (see `partition`).
struct Checkpointing {
    meta: ReplicationMeta,
    position: LogPosition,
    started: Instant,
    /// The commit record names this position: the partitions may write in place.
    committed: bool,
}

/// The partition count of a new data directory when none is asked for: one per core.
fn default_partitions() -> usize {
    thread::available_parallelism().map_or(1, |n| n.get().min(MAX_PARTITIONS))
}

/// Opens the data file, recovers, and starts the executor thread.
pub fn spawn(options: ExecutorOptions) -> SqlResult<(ExecutorHandle, LogPosition)> {
    let data_file = options.data_file.clone();
    let io_mode = options.io_mode;
    let coordinator = Coordinator::open(options, None)?;
    let position = coordinator.applied;
    let catalog = coordinator.executor.published.clone();
    let published_view = coordinator.published_view.clone();
    let activity = coordinator.executor.activity.clone();
    let queues = coordinator.queues.clone();
    let reads_wanted = coordinator.read_ahead.wanted();
    let (tx, rx) = mpsc::channel();
    thread::Builder::new()
        .name("executor".into())
        // Evaluating a statement's expressions recurses over them.
        .stack_size(sql::STATEMENT_STACK_BYTES)
        .spawn(move || coordinator.run(rx))
        .map_err(|e| SqlError::internal(format!("cannot start the executor thread: {e}")))?;
    Ok((
        ExecutorHandle {
            requests: tx,
            catalog,
            published_view,
            data_file,
            io_mode,
            activity,
            queues,
            reads_wanted,
        },
        position,
    ))
}

impl Coordinator {
    /// Opens the data directory (finishing a snapshot install a stop interrupted), recovers,
    /// and starts the partitions' threads. `shared`: what an executor handle already holds,
    /// when this reopens under it after an install.
    fn open(options: ExecutorOptions, shared: Option<SharedWithHandle>) -> SqlResult<Coordinator> {
        install::recover_interrupted(&options.data_file)?;
        let mut commit_record = CommitRecord::for_data_file(&options.data_file);
        let committed = commit_record.read()?;
        let requested = options.partitions.map(|n| n.clamp(1, MAX_PARTITIONS));
        let partitions = match committed {
            Some(c) => c.partitions,
            // Made before partitions existed: one engine.
            None if options.data_file.exists() => 1,
            None => requested.unwrap_or_else(default_partitions),
        };
        if requested.is_some_and(|r| r != partitions) {
            return Err(SqlError::feature_not_supported(format!(
                "changing the partition count of a data directory (it has {partitions}; repartitioning is not supported yet)"
            )));
        }
        commit_record.partitions = partitions;
        let engine_options = EngineOptions {
            pool_bytes: (options.pool_bytes / partitions).max(1 << 20),
            prefault_pool: options.prefault_pool,
            page_size: options.page_size,
            io_mode: options.io_mode,
            gated_checkpoints: true,
            checkpoint_spread: options.checkpoint_spread,
            // A data directory without a commit record is new (nothing to recover) or from
            // a build before partitions (one engine, whose checkpoint is its own commit).
            commit_limit: committed.map(|c| c.position.index),
            ..EngineOptions::default()
        };
        let (mut first, recovery) =
            Engine::open(&options.data_file, engine_options.clone()).map_err(kv_error)?;
        let meta = match first.table(META_TABLE) {
            Some(t) => t,
            None => first.create_table(META_TABLE).map_err(kv_error)?,
        };
        if committed.is_none() {
            commit_record.write(recovery.log_position)?;
        }
        let mut catalog: Catalog =
            load_part(&mut first, meta, META_CATALOG, "catalog")?.unwrap_or_default();
        // The parts kept under keys of their own (see `Executor::publish_catalog`).
        if let Some(views) = load_part(&mut first, meta, META_VIEWS, "views")? {
            catalog.views = views;
        }
        let derivations = load_part(&mut first, meta, META_INDEX_DERIVATIONS, "index predicates")?;
        if let Some(derivations) = derivations {
            catalog.index_derivations = derivations;
        }
        let constraints = load_part(
            &mut first,
            meta,
            META_UNIQUE_CONSTRAINTS,
            "unique constraints",
        )?;
        if let Some(constraints) = constraints {
            catalog.unique_constraints = constraints;
        }
        if let Some(enums) = load_part(&mut first, meta, META_ENUMS, "enum types")? {
            catalog.enums = enums;
        }
        if let Some(foreign_keys) = load_part(&mut first, meta, META_FOREIGN_KEYS, "foreign keys")?
        {
            catalog.foreign_keys = foreign_keys;
        }
        if let Some(sequences) = load_part(&mut first, meta, META_SEQUENCES, "sequences")? {
            catalog.sequences = sequences;
        }
        if let Some(authorization) =
            load_part(&mut first, meta, META_AUTHORIZATION, "roles and privileges")?
        {
            catalog.authorization = authorization;
        }
        catalog
            .authorization
            .set_bootstrap_name(&options.bootstrap_role);
        let mut sequence_states = BTreeMap::new();
        for sequence in catalog.sequences.values() {
            if let Some(bytes) = first.get(meta, &state_key(sequence.id)).map_err(kv_error)? {
                sequence_states.insert(sequence.id, decode_state(&bytes)?);
            }
        }
        let expiry = match first.table(LEDGER_EXPIRY_TABLE) {
            Some(t) => t,
            None => first.create_table(LEDGER_EXPIRY_TABLE).map_err(kv_error)?,
        };
        let ledger_clock = match first.get(meta, META_LEDGER_CLOCK).map_err(kv_error)? {
            Some(bytes) => StoredClock::decode(&bytes)
                .ok_or_else(|| SqlError::internal("stored ledger clock is unreadable"))?,
            None => StoredClock::default(),
        };
        let replication = ReplicationMeta {
            applied_log_id: first.get(meta, META_APPLIED).map_err(kv_error)?,
            membership: first.get(meta, META_MEMBERSHIP).map_err(kv_error)?,
        };
        let mut engines = vec![first];
        for index in 1..partitions {
            let path = partition_file(&options.data_file, index);
            let (engine, info) = Engine::open(&path, engine_options.clone()).map_err(kv_error)?;
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
        for engine in engines {
            let mut storage = FxHashMap::default();
            for (id, name) in catalog.storages() {
                let handle = engine.table(name).ok_or_else(|| {
                    SqlError::internal(format!(
                        "storage {name} is missing from {}",
                        engine.path().display()
                    ))
                })?;
                storage.insert(id, handle);
            }
            shards.push(Some(Shard {
                engine,
                storage,
                table_versions: FxHashMap::default(),
                burned_ids: None,
            }));
        }
        let catalog = Arc::new(catalog);
        let reads_wanted = shared
            .as_ref()
            .map(|shared| shared.reads_wanted.clone())
            .unwrap_or_default();
        let (published, published_view, activity, queues) = match shared {
            Some(shared) => {
                *shared.published.write().unwrap_or_else(|e| e.into_inner()) = catalog.clone();
                (
                    shared.published,
                    shared.published_view,
                    shared.activity,
                    shared.queues,
                )
            }
            None => (
                Arc::new(RwLock::new(catalog.clone())),
                Arc::default(),
                Arc::new(crate::transfer_activity::TransferActivity::new(partitions)),
                Arc::new(crate::queue_depth::QueueDepths::new(partitions)),
            ),
        };
        let mut workers = Vec::with_capacity(partitions);
        workers.push(None);
        for partition in 1..partitions {
            let mut held = Vec::with_capacity(partitions);
            held.resize_with(partitions, || None);
            let mut executor = Executor::new(
                held,
                catalog.clone(),
                published.clone(),
                meta,
                expiry,
                ledger_clock,
            );
            executor.activity = activity.clone();
            executor.activity_thread = partition;
            workers.push(Some(Worker::start(partition, executor, queues.clone())?));
        }
        if let Some(bytes) = first_meta_of(&mut shards, meta, META_TABLE_VERSIONS)? {
            restore_table_versions(&mut shards, &bytes)?;
        }
        let mut executor = Executor::new(shards, catalog, published, meta, expiry, ledger_clock);
        executor.activity = activity;
        executor.sequences = Arc::new(SequenceStore::owning(sequence_states));
        executor.dependent_views = Some(options.dependent_views);
        executor.look_up_next_expiry()?;
        executor
            .activity
            .publish_next_expiry(executor.clock.next_expiry);
        Ok(Coordinator {
            executor,
            workers,
            commit_record,
            applied: recovery.log_position,
            durable_replication: replication.clone(),
            replication,
            checkpointing: None,
            queues,
            recent_checkpoints: Default::default(),
            last_checkpoint: Instant::now(),
            changed_since_checkpoint: false,
            checkpoint_failures: 0,
            checkpoint_retry: Default::default(),
            pool_waits: PoolWaits::default(),
            last_apply: Duration::ZERO,
            applied_at: Instant::now(),
            published_view,
            snapshot_requests: Vec::new(),
            checkpoint_requests: Default::default(),
            read_ahead: read_ahead::ReadAhead::new(reads_wanted),
            snapshot_taken: None,
            options,
            routing: Routing::default(),
            spare_undo: Vec::new(),
        })
    }

    /// Every partition: the coordinator holds them all between log entries.
    fn shards(&mut self) -> impl Iterator<Item = &mut Shard> {
        self.executor.shards.iter_mut().flatten()
    }

    fn checkpoint_in_progress(&self) -> bool {
        self.checkpointing.is_some()
    }

    /// Runs a session's statement on the executor in its transaction's context: after the
    /// transaction's schema changes, when it made any.
    fn in_context<T>(
        &mut self,
        context: &StatementContext,
        run: impl FnOnce(&mut Executor) -> SqlResult<T>,
    ) -> SqlResult<T> {
        self.executor
            .with_schema_changes(context.schema.as_deref(), context.now_micros, run)
    }

    fn run(mut self, requests: Receiver<Request>) {
        loop {
            let wait = if self.checkpoint_in_progress() {
                Duration::from_millis(1)
            } else {
                Duration::from_millis(100)
            };
            let request = requests.recv_timeout(wait);
            if request.is_ok() {
                self.queues.taken(0);
            }
            match request {
                Ok(Request::Shutdown { reply }) => {
                    self.shutdown();
                    reply(());
                    return;
                }
                Ok(Request::InstallSnapshot { staged, reply }) => {
                    if let Err(e) = self.can_install(&staged) {
                        reply(Err(e));
                        continue;
                    }
                    match self.install(staged) {
                        Ok(reopened) => {
                            self = reopened;
                            reply(Ok(()));
                        }
                        // The engines are closed: nothing more can be applied or read. A
                        // restart finishes the install or reopens the old state.
                        Err(e) => {
                            eprintln!("hotledger: installing a snapshot failed: {}", e.message);
                            reply(Err(e));
                            return;
                        }
                    }
                }
                Ok(request) => self.handle(request),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.shutdown();
                    return;
                }
            }
            self.maintain();
            if self.queues.depth(0) == 0 {
                // Nothing waits: a view taken now stays current until the next entry
                // begins, and point reads until then need no hop here.
                self.publish_view_when_idle(Duration::ZERO);
            }
        }
    }

    fn handle(&mut self, request: Request) {
        match request {
            Request::Apply {
                position,
                log_id,
                payload,
                applied,
                reply,
            } => {
                self.wait_for_pool_room();
                // Before anything of the entry can be answered: the published view stops
                // being current.
                self.published_view.begin_apply(position.index);
                self.read_pages_ahead(position.index, &payload);
                let started = Instant::now();
                let results = self.apply_entry(position, log_id, payload, applied);
                self.last_apply = started.elapsed();
                self.applied_at = Instant::now();
                reply(self.executor.check_running().map(|()| results));
            }
            Request::Query {
                plan,
                context,
                sequences,
                reply,
            } => reply(self.in_context(&context, |ex| ex.query(&plan, &context, sequences))),
            Request::ReadAhead { index, commands } => self.start_reads_ahead(index, &commands),
            Request::ReadView { reply } => reply(self.executor.read_view()),
            Request::Stage {
                plan,
                context,
                sequences,
                reply,
            } => reply(self.in_context(&context, |ex| ex.stage(&plan, &context, sequences))),
            Request::PlanSchemaChanges { schema, reply } => reply(
                self.executor
                    .with_schema_changes(Some(&schema), 0, |ex| Ok(ex.catalog.clone())),
            ),
            Request::Stats { reply } => reply(ExecutorStats {
                storage: combined_stats(self.executor.shards.iter().flatten()),
                partitions: self.workers.len(),
                on_partition_threads: self.routing.on_partition_threads,
                on_coordinator: self.routing.on_coordinator,
                handovers: self.routing.handovers,
                split: self.routing.split,
                pool_waits: self.pool_waits.entries,
                pool_wait: self.pool_waits.waited,
                recent_checkpoints: self.recent_checkpoints.iter().cloned().collect(),
            }),
            Request::CheckIntegrity { reply } => reply(self.executor.check_integrity()),
            Request::Meta { reply } => {
                reply((self.replication.clone(), self.durable_replication.clone()))
            }
            Request::BuildSnapshot { reply } => self.snapshot_requests.push(reply),
            Request::Checkpoint { reply } => self.request_checkpoint(reply),
            Request::Shutdown { reply } => reply(()),
            Request::InstallSnapshot { reply, .. } => reply(Err(SqlError::internal(
                "a snapshot install reached the request handler",
            ))),
        }
    }

    /// Publishes a read view for the sessions' point reads once no entry has come for
    /// `idle` and the published one is stale (every partition held: none is lent).
    fn publish_view_when_idle(&mut self, idle: Duration) {
        if self.applied_at.elapsed() < idle
            || !self.published_view.stale()
            || self.executor.shards.iter().any(Option::is_none)
        {
            return;
        }
        if let Ok(view) = self.executor.read_view() {
            self.published_view.publish(view);
        }
    }

    fn maintain(&mut self) {
        if self.executor.failed.is_some() {
            self.answer_snapshot_requests(false);
            self.answer_checkpoint_requests(None);
            return;
        }
        self.publish_view_when_idle(PUBLISH_AFTER_IDLE);
        // Polled between entries even with no checkpoint in flight: a durable checkpoint's
        // pages become clean, and so evictable, in steps.
        let mut failure = None;
        for shard in self.shards() {
            if let Err(e) = shard.engine.poll_checkpoint() {
                failure.get_or_insert(e);
            }
        }
        if let Some(e) = failure {
            // A checkpoint that failed before its commit leaves every partition's previous
            // checkpoint intact and the log still holds everything since: try again at the
            // next interval. A failure that poisons an engine (an abandoned record it could
            // not unmake) stops the executor at the next apply (see apply_command).
            self.checkpoint_failures += 1;
            self.checkpoint_retry.failed(&e.to_string());
            match self.checkpointing.as_ref().map(|c| c.committed) {
                Some(true) => self.checkpointing = None,
                Some(false) => self.abandon_checkpoint(),
                None => {}
            }
            self.answer_snapshot_requests(false);
            self.answer_checkpoint_requests(None);
            self.last_checkpoint = Instant::now();
            return;
        }
        if let Some(checkpointing) = &self.checkpointing {
            if !checkpointing.committed {
                if self.shards().all(|s| s.engine.checkpoint_prepared()) {
                    self.commit_checkpoint();
                }
            } else if self.shards().all(|s| !s.engine.checkpoint_in_progress()) {
                self.finish_checkpoint();
            }
            return;
        }
        if !self.checkpoint_retry.may_begin() {
            return;
        }
        if !self.snapshot_requests.is_empty() {
            self.begin_snapshot();
            return;
        }
        if self.begin_requested_checkpoint() {
            return;
        }
        let due = self.changed_since_checkpoint
            && self.last_checkpoint.elapsed() >= self.options.checkpoint_interval;
        let needed = self.shards().any(|s| s.engine.needs_checkpoint());
        if self.applied.index > 0 && (needed || due) {
            self.begin_checkpoint();
        }
    }

    /// Holds the next entry back while a partition's buffer pool is past its size: its
    /// checkpoints clean pages more slowly than entries dirty them, and no-steal would let the
    /// pool grow without bound (the batch load once took a 256 MiB pool to 1.8 GB). Below the
    /// limit (a quarter past the size) the executor pauses in proportion to how far past it
    /// is — its share of time applying falls from 1 toward 0, which also leaves the CPU to the
    /// checkpoint writer; at the limit it polls the checkpoint in flight, or starts one, until
    /// the pool is back under. Memory stays bounded and throughput falls to what checkpoints
    /// sustain. Gives up when a checkpoint fails (the next one retries after a pause) or
    /// the executor has failed.
    fn wait_for_pool_room(&mut self) {
        let overshoot = self.pool_overshoot();
        // While checkpoints fail (a full disk) none can make room: entries apply on, past the
        // pool's size, rather than wait for a retry that cannot succeed yet.
        if overshoot <= 0.0 || !self.checkpoint_retry.may_begin() {
            return;
        }
        let started = Instant::now();
        self.pool_waits.entries += 1;
        self.maintain();
        if overshoot < 1.0 {
            let pause = self
                .last_apply
                .mul_f64(overshoot / (1.0 - overshoot))
                .min(MAX_POOL_PAUSE);
            thread::sleep(pause);
            self.maintain();
        } else {
            let failures = self.checkpoint_failures;
            while self.executor.failed.is_none()
                && self.checkpoint_failures == failures
                && self.pool_overshoot() >= 1.0
            {
                thread::sleep(Duration::from_micros(500));
                self.maintain();
            }
        }
        self.pool_waits.waited += started.elapsed();
    }

    /// The largest `Engine::pool_overshoot` of the partitions.
    fn pool_overshoot(&mut self) -> f64 {
        self.shards()
            .map(|s| s.engine.pool_overshoot())
            .fold(0.0, f64::max)
    }

    fn apply_entry(
        &mut self,
        position: LogPosition,
        log_id: Vec<u8>,
        payload: EntryPayload,
        applied: Option<CommandApplied>,
    ) -> Vec<Vec<u8>> {
        // Entries apply once each, in log order: the first after a start follows the
        // position recovery found (index 0 is the first entry of a new log).
        assert!(
            position.index > self.applied.index || self.applied == LogPosition::default(),
            "log entry {} applied after entry {}",
            position.index,
            self.applied.index
        );
        // Row ids of tables without a primary key: unique per log entry, and the same on
        // every replica.
        self.executor.rowid_next = position.index << 24;
        let commands = match &payload {
            EntryPayload::Commands(commands) => commands.len(),
            _ => 0,
        };
        let mut results = Results::new(commands, applied);
        match payload {
            EntryPayload::Blank => {}
            EntryPayload::Membership(m) => self.replication.membership = Some(m),
            EntryPayload::Commands(commands) if self.workers.len() <= 1 => {
                self.routing.on_coordinator += commands.len() as u64;
                for (slot, bytes) in commands.iter().enumerate() {
                    let result = self
                        .decode(bytes, position.index)
                        .and_then(|c| self.executor.apply_command(c, position.index));
                    results.set(slot, &result);
                }
            }
            EntryPayload::Commands(commands) => {
                self.apply_partitioned(&commands, position.index, &mut results)
            }
        }
        self.applied = position;
        self.executor
            .activity
            .publish_next_expiry(self.executor.clock.next_expiry);
        self.replication.applied_log_id = Some(log_id);
        self.changed_since_checkpoint = true;
        if cfg!(debug_assertions) {
            self.executor.assert_double_entry();
        }
        results.into_encoded()
    }

    /// A command of log entry `index`, or, when this build cannot read it, an error after
    /// which the executor applies nothing more. Every replica decodes the same bytes, so
    /// such a command is one written by a newer build (a node not yet upgraded, in a cluster
    /// being upgraded) or damage the log's checksums missed: skipping it would leave this
    /// replica's state different from the others' for good, and applying what follows would
    /// build on that. A restart on a build that reads it replays the log from the last
    /// checkpoint (see `Executor::fail`).
    fn decode(&mut self, bytes: &[u8], index: u64) -> SqlResult<Command> {
        self.executor.check_running()?;
        decode_command(bytes).map_err(|e| {
            let stop = SqlError::new(
                ErrorKind::DataCorrupted,
                format!(
                    "log entry {index} holds a command this build of hotledger cannot read ({}); it was probably written by a newer version: upgrade this node and restart it",
                    e.message
                ),
            );
            self.executor.fail(stop.clone());
            stop
        })
    }

    /// Applies an entry's commands over several partitions. In log order, each command is
    /// routed (`route`): one that touches a single partition other than 0 is sent to that
    /// partition's thread, which the partition is lent to; any other runs here, holding
    /// every partition it touches — a partition lent out is taken back first, after its
    /// thread has finished the commands sent to it, and stays here for the rest of the
    /// entry (so a busy entry costs at most one hand-over each way per partition). Every
    /// partition thus applies the commands that touch it in log order, and a command
    /// touching several applies at its log position with all of them held: the result is
    /// the same as applying the log on one partition.
    fn apply_partitioned(&mut self, commands: &[Vec<u8>], version: u64, results: &mut Results) {
        let partitions = self.workers.len();
        let mut dispatch = Dispatch {
            results,
            lent: vec![false; partitions],
            taken_back: vec![false; partitions],
            reports: mpsc::channel(),
        };
        let mut next = 0;
        while next < commands.len() {
            let slot = next;
            next += 1;
            let command = match self.decode(&commands[slot], version) {
                Ok(command) => command,
                Err(e) => {
                    dispatch.results.set(slot, &Err(e));
                    continue;
                }
            };
            // The clock moves and expired pending transfers are voided before every
            // command, in log order; voiding touches every partition.
            if self.executor.expiry_due(command.now_micros()) {
                self.take_back(&mut dispatch, Reach::all(partitions));
            }
            if let Err(e) = self.executor.prepare_command(&command, version) {
                dispatch.results.set(slot, &Err(e));
                continue;
            }
            let reach = self.reach(&command);
            // A command whose events cannot be counted beforehand (its reservation has no
            // end) applies alone: it takes timestamps as it goes (`event_timestamps`).
            let bounded = self.executor.clock.timestamps.current.end.is_some();
            let thread = reach
                .single()
                .filter(|_| bounded)
                .filter(|&p| !dispatch.taken_back[p])
                .and_then(|p| Some((p, self.workers[p].as_ref()?)));
            match thread {
                Some((p, worker)) => {
                    let shard = if dispatch.lent[p] {
                        None
                    } else {
                        dispatch.lent[p] = true;
                        self.routing.handovers += 1;
                        self.executor.shards[p].take().map(Box::new)
                    };
                    self.routing.on_partition_threads += 1;
                    let kinds = command.event_kinds(&self.executor.catalog);
                    self.executor.clock.timestamps.lent(kinds);
                    worker.send(Work::Run {
                        shard,
                        slot,
                        command: Box::new(command),
                        catalog: self.executor.catalog.clone(),
                        clock: self.executor.clock.now,
                        timestamps: self.executor.clock.timestamps.current,
                        version,
                        reports: dispatch.reports.0.clone(),
                    });
                }
                None => match self.split_plan(&command) {
                    Some(plan) => {
                        self.take_back(&mut dispatch, Reach::all(partitions));
                        let first = SplitStatement {
                            slot,
                            command,
                            share: SplitShare {
                                plan,
                                clock: self.executor.clock.now,
                                timestamps: self.executor.clock.timestamps.current,
                            },
                        };
                        let run = self.split_run(first, commands, version);
                        next = slot + self.apply_split(&mut dispatch, run, version);
                    }
                    None => {
                        self.routing.on_coordinator += 1;
                        self.take_back(&mut dispatch, reach);
                        let result = self.executor.run_command(command, version);
                        dispatch.results.set(slot, &result);
                    }
                },
            }
        }
        self.take_back(&mut dispatch, Reach::all(partitions));
    }

    /// `first`, a split statement already prepared, with the commands after it in the entry
    /// that split too and need nothing done between them (no pending transfer expiring
    /// before one), each prepared in turn: a run of statements whose shares each partition
    /// takes in one hand-over.
    fn split_run(
        &mut self,
        first: SplitStatement,
        commands: &[Vec<u8>],
        version: u64,
    ) -> Vec<SplitStatement> {
        let mut run = vec![first];
        for (slot, bytes) in commands.iter().enumerate().skip(run[0].slot + 1) {
            // A command that does not decode is left for the loop, which reports it.
            let Ok(command) = decode_command(bytes) else {
                break;
            };
            if self.executor.expiry_due(command.now_micros()) {
                break;
            }
            if self.reach(&command).single().is_some() {
                break;
            }
            let Some(plan) = self.split_plan(&command) else {
                break;
            };
            // Prepared (its clock moved, its timestamps reserved) only once it is sure to
            // join the run: a command left for the loop is prepared there.
            if self.executor.prepare_command(&command, version).is_err() {
                break;
            }
            let clock = self.executor.clock.now;
            let timestamps = self.executor.clock.timestamps.current;
            run.push(SplitStatement {
                slot,
                command,
                share: SplitShare {
                    plan,
                    clock,
                    timestamps,
                },
            });
        }
        run
    }

    /// The partitions `command` touches (`route`).
    fn reach(&mut self, command: &Command) -> Reach {
        let catalog = self.executor.catalog.clone();
        let router = Router {
            catalog: &catalog,
            schema: self.executor.ledger_schema().ok(),
            partitions: self.workers.len(),
        };
        router.command(command)
    }

    /// The plan of `command` when it is split across the partitions' threads (`share`): a
    /// splittable statement into the transfers table, with every partition's thread running.
    fn split_plan(&self, command: &Command) -> Option<Arc<WritePlan>> {
        let running = self.workers[1..]
            .iter()
            .all(|w| w.as_ref().is_some_and(|w| !w.stopped()));
        share::splittable(command)
            .filter(|plan| running && self.executor.inserts_transfers(plan))
            .cloned()
    }

    /// Applies `run`, consecutive split statements of one entry, with every partition
    /// taking its shares of all of them in order, each partition on its own thread (0 here);
    /// all partitions are held here before and after. When a share fails, the statements
    /// before it stand, every partition's writes for it and the statements after it are
    /// rolled back, and it applies whole here, its outcome the answer (see `share`); the
    /// statements after it are left to the caller to apply again. Returns how many of the
    /// run's statements were answered.
    fn apply_split(
        &mut self,
        dispatch: &mut Dispatch,
        mut run: Vec<SplitStatement>,
        version: u64,
    ) -> usize {
        let shares: Arc<[SplitShare]> = run.iter().map(|s| s.share.clone()).collect();
        let partitions = self.workers.len();
        let mut waiting = Vec::new();
        for p in 1..partitions {
            let (Some(worker), Some(shard)) = (&self.workers[p], self.executor.shards[p].take())
            else {
                continue;
            };
            worker.send(Work::Share {
                shard: Box::new(shard),
                shares: shares.clone(),
                spare_undo: self.spare_undo.pop().unwrap_or_default(),
                catalog: self.executor.catalog.clone(),
                version,
                reports: dispatch.reports.0.clone(),
            });
            waiting.push(p);
        }
        let own = self.executor.apply_shares(&shares, 0, version);
        let spare = self.spare_undo.pop().unwrap_or_default();
        let mut applied = vec![(own, self.executor.take_undo(spare))];
        while !waiting.is_empty() {
            match dispatch.reports.1.recv_timeout(Duration::from_millis(100)) {
                Ok(Report::Share {
                    partition,
                    shard,
                    applied: theirs,
                    undo,
                }) => {
                    self.executor.shards[partition] = Some(*shard);
                    waiting.retain(|&p| p != partition);
                    applied.push((theirs, undo));
                }
                Ok(_) => {}
                Err(_) => {
                    if let Some(&p) = waiting
                        .iter()
                        .find(|&&p| self.workers[p].as_ref().is_none_or(|w| w.stopped()))
                    {
                        let stop = SqlError::internal(format!("partition {p}'s thread stopped"));
                        self.executor.fail(stop.clone());
                        for statement in &run {
                            dispatch.results.set(statement.slot, &Err(stop.clone()));
                        }
                        return run.len();
                    }
                }
            }
        }
        // Each partition's first failing share: the first of them is the statement the ones
        // before it stand on; a storage failure anywhere stops the executor.
        let failures: Vec<(usize, &SqlError)> = applied
            .iter()
            .filter_map(|(shares, _)| shares.failure())
            .collect();
        let failed = failures.iter().map(|&(at, _)| at).min();
        let storage_failure = failures
            .iter()
            .find(|(_, e)| is_storage_failure(e))
            .map(|(_, e)| (*e).clone());
        let stands = failed.unwrap_or(run.len());
        for (i, statement) in run[..stands].iter().enumerate() {
            let rows = applied[0].0.results[i].as_ref().map_or(0, |rows| *rows);
            dispatch
                .results
                .set(statement.slot, &Ok(Executor::outcome(rows, Vec::new())));
        }
        self.routing.split += stands as u64;
        let Some(at) = failed else {
            for (_, mut undo) in applied {
                undo.clear();
                self.spare_undo.push(undo);
            }
            return run.len();
        };
        if let Some(e) = storage_failure {
            // As after any IO error: stop, and leave the state to recovery.
            self.executor.fail(e);
        } else {
            for (shares, undo) in applied {
                // Every partition applied up to `at` (only a failure stops one early).
                let mark = shares.marks.get(at).copied().unwrap_or(usize::MAX);
                self.executor.roll_back_from(undo, mark);
            }
        }
        let statement = run.swap_remove(at);
        // As if the run had stopped before the statements after it: they are prepared
        // again, and reserve the timestamps they would have without the split.
        self.executor.clock.now = statement.share.clock;
        self.executor.clock.timestamps.current = statement.share.timestamps;
        self.executor.clock.timestamps.reserved_to = statement
            .share
            .timestamps
            .end
            .unwrap_or(statement.share.timestamps.next);
        self.routing.on_coordinator += 1;
        let result = self.executor.run_command(statement.command, version);
        dispatch.results.set(statement.slot, &result);
        at + 1
    }

    /// Takes back every partition in `reach` that is lent to its thread, once the thread has
    /// applied everything sent to it; collects the results that arrive meanwhile.
    fn take_back(&mut self, dispatch: &mut Dispatch, reach: Reach) {
        for p in reach.iter() {
            if p >= self.workers.len() || !dispatch.lent[p] {
                continue;
            }
            dispatch.taken_back[p] = true;
            dispatch.lent[p] = false;
            let Some(worker) = &self.workers[p] else {
                continue;
            };
            worker.send(Work::Return {
                reports: dispatch.reports.0.clone(),
            });
            loop {
                match dispatch.reports.1.recv_timeout(Duration::from_millis(100)) {
                    Ok(Report::Done { slot, result }) => {
                        if let Err(e) = &result {
                            if is_storage_failure(e) {
                                // A partition thread stopped after an IO error: stop
                                // everything.
                                self.executor.fail(e.clone());
                            }
                        }
                        dispatch.results.set(slot, &result);
                    }
                    Ok(Report::Shard { partition, shard })
                    | Ok(Report::Share {
                        partition, shard, ..
                    }) => {
                        // (A share is always collected by `apply_split`.)
                        self.executor.shards[partition] = Some(*shard);
                        if partition == p {
                            break;
                        }
                    }
                    Err(_) if worker.stopped() => {
                        // A thread that died (a bug) took its partition with it: nothing
                        // more can be applied until a restart replays the log.
                        self.executor.fail(SqlError::internal(format!(
                            "partition {p}'s thread stopped"
                        )));
                        return;
                    }
                    Err(_) => {}
                }
            }
        }
    }
}

/// A statement of a split run: its slot in the entry, its command (applied whole when a
/// share fails) and its share.
struct SplitStatement {
    slot: usize,
    command: Command,
    share: SplitShare,
}

/// An entry's encoded results, each passed on as soon as it is known.
struct Results {
    encoded: Vec<Option<Vec<u8>>>,
    applied: Option<CommandApplied>,
}

impl Results {
    fn new(commands: usize, applied: Option<CommandApplied>) -> Results {
        Results {
            encoded: vec![None; commands],
            applied,
        }
    }

    fn set(&mut self, slot: usize, result: &CommandResult) {
        let encoded = encode_result(result);
        if let Some(applied) = &mut self.applied {
            applied(slot, &encoded);
        }
        self.encoded[slot] = Some(encoded);
    }

    /// The results in command order; a command nothing reported on (a partition thread
    /// that stopped) fails.
    fn into_encoded(self) -> Vec<Vec<u8>> {
        self.encoded
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|| {
                    encode_result(&Err(SqlError::internal(
                        "a partition did not report a command",
                    )))
                })
            })
            .collect()
    }
}

/// One entry's progress over the partitions.
struct Dispatch<'a> {
    results: &'a mut Results,
    /// Partition p is with its thread.
    lent: Vec<bool>,
    /// Partition p was taken back in this entry and is not lent again until the next.
    taken_back: Vec<bool>,
    reports: (Sender<Report>, Receiver<Report>),
}

/// A part of the catalog stored under `key` of the meta table, if there is one.
/// A value of partition 0's meta table.
fn first_meta_of(
    shards: &mut [Option<Shard>],
    meta: kv::Table,
    key: &[u8],
) -> SqlResult<Option<Vec<u8>>> {
    let first = shards[0]
        .as_mut()
        .ok_or_else(|| SqlError::internal("partition 0 is missing at open"))?;
    first.engine.get(meta, key).map_err(kv_error)
}

fn load_part<T: serde::de::DeserializeOwned>(
    engine: &mut Engine,
    meta: kv::Table,
    key: &[u8],
    what: &str,
) -> SqlResult<Option<T>> {
    match engine.get(meta, key).map_err(kv_error)? {
        Some(bytes) => bincode::deserialize(&bytes)
            .map(Some)
            .map_err(|e| SqlError::internal(format!("stored {what} are unreadable: {e}"))),
        None => Ok(None),
    }
}

#[cfg(test)]
mod amounts_upgrade;
#[cfg(test)]
mod integrity_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{decode_result, Outcome};
    use std::sync::{Arc, Mutex};

    fn entry(coordinator: &mut Coordinator, index: u64, commands: Vec<Vec<u8>>) -> Vec<SqlError> {
        let position = LogPosition { term: 1, index };
        let payload = EntryPayload::Commands(commands);
        coordinator
            .apply_entry(position, vec![], payload, None)
            .iter()
            .map(|r| decode_result(r).expect_err("the command fails"))
            .collect()
    }

    #[test]
    fn a_command_this_build_cannot_read_stops_applying() {
        for partitions in [1, 2] {
            let dir = tempfile::tempdir().unwrap();
            let mut coordinator = open(partitions, dir.path());
            // The compact marker, then an enum variant no build has.
            let unknown = vec![0xC1, 0x7f, 0, 0];
            let ddl = crate::command::encode_command(&Command::Ddl {
                plan: plan::DdlPlan::DropTables {
                    names: vec!["t".into()],
                    if_exists: true,
                },
            });
            let errors = entry(&mut coordinator, 1, vec![unknown, ddl.clone()]);
            assert_eq!(errors[0].kind, ErrorKind::DataCorrupted, "{errors:?}");
            assert!(errors[0].message.contains("log entry 1"), "{errors:?}");
            assert!(errors[0].message.contains("upgrade"), "{errors:?}");
            // Neither the rest of the entry nor a later one applies.
            for error in errors[1..]
                .iter()
                .chain(&entry(&mut coordinator, 2, vec![ddl]))
            {
                assert_eq!(error.kind, ErrorKind::DataCorrupted, "{error:?}");
                assert!(error.message.contains("stopped applying"), "{error:?}");
            }
        }
    }

    pub(super) fn open(partitions: usize, dir: &std::path::Path) -> Coordinator {
        Coordinator::open(options(partitions, dir), None).unwrap()
    }

    pub(super) fn options(partitions: usize, dir: &std::path::Path) -> ExecutorOptions {
        ExecutorOptions::small(dir, partitions, planner::dependent_views)
    }

    /// `text` bound against the coordinator's catalog and encoded as a session proposes
    /// it: a write with its rows built, or a schema change.
    pub(super) fn command(coordinator: &Coordinator, text: &str, now_micros: i64) -> Vec<u8> {
        let catalog = &coordinator.executor.catalog;
        let parsed = sql::parse(text).unwrap().remove(0);
        let command = match planner::bind(catalog, &parsed, &[]).unwrap().plan {
            plan::Plan::Ddl(plan) => Command::Ddl { plan },
            plan::Plan::Write(plan, _) => Command::Write {
                plan: Arc::new(
                    match crate::prebuild_insert(&plan, catalog, &[], now_micros) {
                        Some(built) => built.unwrap(),
                        None => (*plan).clone(),
                    },
                ),
                params: vec![],
                now_micros,
            },
            _ => panic!("neither a write nor a schema change: {text}"),
        };
        crate::command::encode_command(&command)
    }

    /// Applies `commands` as log entry `index`; each command's answer, as text.
    pub(super) fn answers(
        coordinator: &mut Coordinator,
        index: u64,
        commands: Vec<Vec<u8>>,
    ) -> Vec<String> {
        let position = LogPosition { term: 1, index };
        coordinator
            .apply_entry(position, vec![], EntryPayload::Commands(commands), None)
            .iter()
            .map(|r| match decode_result(r) {
                Ok(outcome) => format!("{} rows", outcome.rows_affected),
                Err(e) => format!("{:?}: {}", e.kind, e.message),
            })
            .collect()
    }

    pub(super) fn table_versions(c: &Coordinator) -> Vec<Vec<(u32, u64)>> {
        c.executor
            .shards
            .iter()
            .map(|s| {
                let mut v: Vec<_> = s
                    .as_ref()
                    .unwrap()
                    .table_versions
                    .clone()
                    .into_iter()
                    .collect();
                v.sort_unstable();
                v
            })
            .collect()
    }

    /// A node restarted from a checkpoint knows the last write to each table as well as one
    /// that applied every entry (SERIALIZABLE validation decides 40001 by it, and must
    /// decide alike on every replica).
    #[test]
    fn table_versions_survive_a_checkpoint_and_reopen() {
        let now = 1_790_000_000_000_000;
        let dir = tempfile::tempdir().unwrap();
        let mut c = open(2, dir.path());
        let mut index = 0;
        let ledger = include_str!("../../migrations/0002_ledger.sql");
        for (_, text) in sql::split_statements(ledger) {
            index += 1;
            let ddl = command(&c, text, now);
            answers(&mut c, index, vec![ddl]);
        }
        for text in [
            "CREATE TABLE notes (id int PRIMARY KEY, body text)",
            "INSERT INTO notes VALUES (1, 'a'), (2, 'b')",
            "INSERT INTO accounts (id, ledger, code) VALUES (1, 1, 1), (2, 1, 1), (3, 1, 1)",
            "UPDATE notes SET body = 'c' WHERE id = 2",
        ] {
            index += 1;
            let write = command(&c, text, now);
            assert!(!answers(&mut c, index, vec![write])[0].contains(':'));
        }
        let before = table_versions(&c);
        assert!(before.iter().all(|v| !v.is_empty()), "{before:?}");
        c.shutdown();
        drop(c);
        let c = open(2, dir.path());
        assert_eq!(table_versions(&c), before);
    }

    /// Four split transfer statements in one log entry, the third failing at its 61st row
    /// after the partitions' shares have applied the 60 before it (and, on the other
    /// partition, its shares of the fourth): the first two stand, the third's answer is
    /// its whole statement's, the fourth applies after it, and every stored row is the one
    /// a single partition applying them one at a time stores.
    #[test]
    fn a_run_of_split_statements_answers_as_applied_one_at_a_time() {
        let now = 1_790_000_000_000_000;
        let mut outcomes = Vec::new();
        for partitions in [1, 2] {
            let dir = tempfile::tempdir().unwrap();
            let mut c = open(partitions, dir.path());
            let mut index = 0;
            let migrations = [
                include_str!("../../migrations/0002_ledger.sql"),
                include_str!("../../migrations/0003_history_indexes.sql"),
            ];
            for (_, text) in migrations.iter().flat_map(|m| sql::split_statements(m)) {
                index += 1;
                let ddl = command(&c, text, now);
                assert_eq!(answers(&mut c, index, vec![ddl]).len(), 1);
            }
            let accounts: Vec<String> = (1..=300).map(|id| format!("({id}, 1, 1)")).collect();
            let text = format!(
                "INSERT INTO accounts (id, ledger, code) VALUES {}",
                accounts.join(", ")
            );
            index += 1;
            let insert = command(&c, &text, now);
            let created = answers(&mut c, index, vec![insert]);
            assert_eq!(created, ["300 rows"]);
            let statements: Vec<Vec<u8>> = (0..4i64)
                .map(|s| {
                    let rows: Vec<String> = (0..100i64)
                        .map(|k| {
                            let debit = (k * 7 + s * 13) % 299 + 2;
                            let credit = if s == 2 && k == 60 { 999 } else if k % 2 == 0 { 1 } else { debit % 300 + 1 };
                            format!("({}, {debit}, {credit}, {}, 1, 1)", 1_000 * (s + 1) + k, k % 9 + 1)
                        })
                        .collect();
                    let text = format!(
                        "INSERT INTO transfers (id, debit_account_id, credit_account_id, amount, ledger, code) VALUES {}",
                        rows.join(", ")
                    );
                    command(&c, &text, now + s)
                })
                .collect();
            index += 1;
            let answered = answers(&mut c, index, statements);
            assert_eq!(answered[0], "100 rows", "{answered:?}");
            assert_eq!(answered[1], "100 rows", "{answered:?}");
            assert!(answered[2].contains("999"), "{answered:?}");
            assert_eq!(answered[3], "100 rows", "{answered:?}");
            let split = c.routing.split;
            assert_eq!(split, if partitions == 2 { 3 } else { 0 });
            // Every account's and every transfer's stored row.
            let schema = c.executor.ledger_schema().unwrap();
            let mut rows = Vec::new();
            for (table, ids) in [
                (&schema.accounts, 1..=300),
                (&schema.transfers, 1_000..=4_099),
            ] {
                let store = c.executor.storage_of(table).unwrap();
                for id in ids {
                    let key = crate::row::encode_key(&[sql::Value::Int(id)]).unwrap();
                    rows.push(
                        c.executor
                            .get_row(store, &key)
                            .unwrap()
                            .map(|(_, _, row)| row),
                    );
                }
            }
            assert_eq!(rows.iter().filter(|r| r.is_some()).count(), 300 + 300);
            outcomes.push((answered, format!("{rows:?}")));
        }
        assert_eq!(outcomes[0], outcomes[1]);
    }

    #[test]
    fn each_result_is_passed_on_when_set_and_a_missing_one_fails() {
        let heard = Arc::new(Mutex::new(Vec::new()));
        let log = heard.clone();
        let applied: CommandApplied = Box::new(move |slot, bytes: &[u8]| {
            log.lock().unwrap().push((slot, bytes.to_vec()));
        });
        let mut results = Results::new(3, Some(applied));
        let second = Ok(Outcome {
            rows_affected: 2,
            ..Outcome::default()
        });
        results.set(1, &second);
        assert_eq!(*heard.lock().unwrap(), vec![(1, encode_result(&second))]);
        let first = Err(SqlError::syntax("no"));
        results.set(0, &first);
        let encoded = results.into_encoded();
        assert_eq!(encoded[0], encode_result(&first));
        assert_eq!(encoded[1], encode_result(&second));
        let missing = decode_result(&encoded[2]).unwrap_err();
        assert!(missing.message.contains("did not report"), "{missing:?}");
        assert_eq!(heard.lock().unwrap().len(), 2);
    }
}
