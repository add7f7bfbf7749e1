//! The executor: applies one command at a time over the partitions it holds (see
//! `partition`), with an undo list that spans them, and runs reads. The coordinator thread
//! owns one and lends partitions to the partition threads, which own one each (see
//! `coordinator`); a partition is only ever held by one of them, so nothing on this path
//! takes a lock.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::mpsc::Sender;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use kv::{IoMode, LogPosition};
use plan::{Catalog, SequenceSource, SessionSequences, TableDef, WritePlan};
use sql::{ErrorKind, SqlError, SqlResult, Value};

use crate::command::{Command, CommandResult, Outcome, Overlay, QueryResult, Staged};
use crate::error::{is_storage_failure, kv_error};
use crate::partition::{held, is_partitioned, last_write, partition_of_key, Shard};
use crate::partitions_read::Partitions;
use crate::query::Reader;
use crate::row::{decode_row, encode_row, row_version};
use crate::schema_transaction::SchemaChanges;
use crate::sequences::{
    encode_state, state_key, CommandSequences, SequenceStore, StatementSequences, META_SEQUENCES,
};
use crate::undo::UndoLog;

pub(crate) const META_TABLE: &str = "__meta";
pub(crate) const META_CATALOG: &[u8] = b"catalog";
/// The catalog's views (kept apart: see `Catalog::views`).
pub(crate) const META_VIEWS: &[u8] = b"views";
pub(crate) const META_ENUMS: &[u8] = b"enums";
pub(crate) const META_INDEX_DERIVATIONS: &[u8] = b"index_derivations";
pub(crate) const META_UNIQUE_CONSTRAINTS: &[u8] = b"unique_constraints";
/// The catalog's foreign keys (kept apart, as views are).
pub(crate) const META_FOREIGN_KEYS: &[u8] = b"foreign_keys";
/// Roles, memberships, ACLs and owners (`plan::Authorization`).
pub(crate) const META_AUTHORIZATION: &[u8] = b"authorization";
pub(crate) const META_APPLIED: &[u8] = b"applied_log_id";
pub(crate) const META_MEMBERSHIP: &[u8] = b"membership";
pub(crate) const META_LEDGER_CLOCK: &[u8] = b"ledger_clock";
/// Each partition's `Shard::table_versions` as of the checkpoint (see `partition.rs`).
pub(crate) const META_TABLE_VERSIONS: &[u8] = b"table_versions";
/// Pending transfers with a timeout, keyed by (expiry time, transfer id).
pub(crate) const LEDGER_EXPIRY_TABLE: &str = "__ledger_expiry";

#[derive(Clone, Debug)]
pub struct ExecutorOptions {
    pub data_file: PathBuf,
    pub pool_bytes: usize,
    /// Fault the pools' memory in from the start (`kv::EngineOptions::prefault_pool`).
    pub prefault_pool: bool,
    /// Page size of a new data directory's files (an existing one keeps its own).
    pub page_size: u32,
    /// Checkpoint at least this often while there are changes.
    pub checkpoint_interval: Duration,
    /// Pace each checkpoint's writes to take about this long (`None`: full speed); see
    /// `kv::EngineOptions::checkpoint_spread`.
    pub checkpoint_spread: Option<Duration>,
    pub io_mode: IoMode,
    /// How many partitions a new data directory gets (`None`: the number of cores). An
    /// existing one keeps the count it was created with; asking for another is an error.
    pub partitions: Option<usize>,
    /// Which views a DROP VIEW would break, rechecked when it applies: the binder's
    /// `planner::dependent_views` (this crate runs plans; it does not bind SQL).
    pub dependent_views: plan::DependentViews,
    /// The bootstrap superuser's name (the server's `--user`): never stored, given at each
    /// start (`plan::Authorization::bootstrap`).
    pub bootstrap_role: String,
}

impl ExecutorOptions {
    /// A small executor in `dir` (tests): an 8 MiB pool of 4 KiB pages, portable IO, no
    /// checkpoint but those asked for, the bootstrap superuser `ledger`.
    pub fn small(
        dir: &std::path::Path,
        partitions: usize,
        dependent_views: plan::DependentViews,
    ) -> ExecutorOptions {
        ExecutorOptions {
            data_file: dir.join("data"),
            pool_bytes: 8 << 20,
            prefault_pool: false,
            page_size: 4096,
            checkpoint_interval: Duration::from_secs(3600),
            checkpoint_spread: None,
            io_mode: IoMode::Portable,
            partitions: Some(partitions),
            dependent_views,
            bootstrap_role: "ledger".into(),
        }
    }
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

/// Told each command's encoded result (by its position in the entry) as soon as the command
/// is applied, before the rest of its entry.
pub type CommandApplied = Box<dyn FnMut(usize, &[u8]) + Send>;

/// What applying an entry answers: each command's encoded result, in order.
pub type EntryResults = SqlResult<Vec<Vec<u8>>>;

/// Row buffers `Executor::recycle` keeps at most (a statement's rows pass through a few at a
/// time).
const SPARE_ROWS: usize = 64;
/// The largest row buffer kept (a large row's is freed, not held on to).
const SPARE_ROW_BYTES: usize = 4096;

/// A stored row: its raw bytes (kept for undo), its version and its values.
pub(crate) type StoredRow = (Vec<u8>, u64, Vec<Value>);

/// What a session's statement runs with on the executor, a query's or a staged write's
/// alike: its parameters and time, and the transaction it runs in — its own writes so far
/// (`overlay`), its schema changes, whether its reads are recorded for validation.
#[derive(Clone)]
pub struct StatementContext {
    pub params: Vec<Value>,
    pub now_micros: i64,
    pub overlay: Option<Arc<Overlay>>,
    pub record_reads: bool,
    /// The transaction's schema changes, if it made any: the statement sees them.
    pub schema: Option<Arc<SchemaChanges>>,
    /// Raised when the statement must stop (a cancel, its timeout, its client gone).
    pub interrupt: plan::Interrupt,
    /// The bytes the transaction's writes staged so far take in the log's encoding: a
    /// statement staging past `COMMAND_BYTES_MAX` with them fails.
    pub staged_bytes: usize,
}

pub enum Request {
    /// Applies one committed entry; the reply carries one encoded result per command, and
    /// `applied`, when given, hears each result as soon as its command is applied. The
    /// reply is the error the executor stopped with instead, when it stopped applying (an
    /// IO error, a command this build cannot read): its state no longer follows the log,
    /// and the replica must stop.
    Apply {
        position: LogPosition,
        log_id: Vec<u8>,
        payload: EntryPayload,
        applied: Option<CommandApplied>,
        reply: Reply<EntryResults>,
    },
    /// The commands of log entry `index`, before it is durable: start reading the pages
    /// they will need (`read_ahead`). Nothing is applied or answered.
    ReadAhead {
        index: u64,
        commands: Vec<Vec<u8>>,
    },
    /// A query, run between entries.
    Query {
        plan: Arc<plan::SelectPlan>,
        context: StatementContext,
        /// The session's sequence values, for `currval` and `lastval`.
        sequences: SessionSequences,
        reply: Reply<SqlResult<QueryResult>>,
    },
    /// Every partition as of now, for a query the session runs off the executor
    /// (`read_view.rs`).
    ReadView {
        reply: Reply<SqlResult<crate::read_view::ReadView>>,
    },
    /// A write inside a transaction, staged (evaluated, not applied) between entries.
    Stage {
        plan: Arc<WritePlan>,
        context: StatementContext,
        /// The session's sequence values, and those it allocated for this statement's
        /// `nextval` calls.
        sequences: StatementValues,
        reply: Reply<SqlResult<Staged>>,
    },
    /// The catalog a transaction sees after its schema changes (planned against catalog
    /// version `base_version`), or the error one of them meets.
    PlanSchemaChanges {
        schema: Arc<SchemaChanges>,
        reply: Reply<SqlResult<Arc<Catalog>>>,
    },
    /// The storage engine's counters (buffer pool residency and hit rate, file size).
    Stats {
        reply: Reply<ExecutorStats>,
    },
    /// Checks the whole state (`integrity`): trees, checksums of the pages read, indexes
    /// against their tables, double entry.
    CheckIntegrity {
        reply: Reply<SqlResult<crate::integrity::IntegrityReport>>,
    },
    /// The replication meta of the state as applied now, and as of the last durable checkpoint.
    Meta {
        reply: Reply<(ReplicationMeta, ReplicationMeta)>,
    },
    /// A snapshot of the whole state, taken with a checkpoint and answered once that
    /// checkpoint is durable (`state_snapshot`): the log before its position may then go.
    BuildSnapshot {
        reply: Reply<SqlResult<Arc<crate::state_snapshot::StateSnapshot>>>,
    },
    /// `CHECKPOINT`: answered once a checkpoint covering everything applied now is durable.
    Checkpoint {
        reply: Reply<SqlResult<()>>,
    },
    /// Replaces the whole state with a staged snapshot (`install`): the engines close, the
    /// staged files take the data files' place, and the executor reopens at the snapshot's
    /// position. An error leaves the executor stopped.
    InstallSnapshot {
        staged: crate::install::StagedInstall,
        reply: Reply<SqlResult<()>>,
    },
    Shutdown {
        reply: Reply<()>,
    },
}

/// The storage engines' counters (all partitions added up) and how commands were routed.
#[derive(Clone, Debug)]
pub struct ExecutorStats {
    pub storage: kv::EngineStats,
    pub partitions: usize,
    /// Commands applied on a partition's own thread (they touched one partition, not 0).
    pub on_partition_threads: u64,
    /// Commands applied by the coordinator (partition 0, or several partitions).
    pub on_coordinator: u64,
    /// Times a partition was lent to its thread and taken back.
    pub handovers: u64,
    /// Multi-row transfer statements applied by every partition's thread at once
    /// (`share`).
    pub split: u64,
    /// Entries paused or held back while a buffer pool was past its size, and for how long
    /// in all (`Coordinator::wait_for_pool_room`).
    pub pool_waits: u64,
    pub pool_wait: std::time::Duration,
    /// The last checkpoints that became durable, newest last.
    pub recent_checkpoints: Vec<plan::CheckpointRow>,
}

/// A cheap, cloneable way to talk to the executor thread.
#[derive(Clone)]
pub struct ExecutorHandle {
    pub(crate) requests: Sender<Request>,
    pub(crate) catalog: Arc<RwLock<Arc<Catalog>>>,
    pub(crate) published_view: Arc<crate::read_view::PublishedView>,
    /// Partition 0's data file and the IO mode: where a snapshot is staged.
    pub(crate) data_file: std::path::PathBuf,
    pub(crate) io_mode: IoMode,
    /// What the executor tells of the transfers it applies (`hotledger.hot_accounts`).
    pub(crate) activity: Arc<crate::transfer_activity::TransferActivity>,
    /// How many requests wait for each executor thread.
    pub(crate) queues: Arc<crate::queue_depth::QueueDepths>,
    /// Whether the executor reads pages ahead of entries (`read_ahead`).
    pub(crate) reads_wanted: crate::coordinator::ReadsWanted,
}

impl ExecutorHandle {
    /// How many requests wait for the coordinator (first) and each partition's thread.
    pub fn queue_depths(&self) -> Vec<u64> {
        self.queues.depths()
    }

    /// Transfers created, and the accounts taking the most (`transfer_activity`).
    pub fn transfer_activity(&self) -> &crate::transfer_activity::TransferActivity {
        &self.activity
    }

    /// Sends a request; false when the executor has stopped.
    pub fn send(&self, request: Request) -> bool {
        // Counted before the send: the thread may take the request before `send` returns.
        self.queues.queued(0);
        let sent = self.requests.send(request).is_ok();
        if !sent {
            self.queues.taken(0);
        }
        sent
    }

    /// The catalog as of the last applied schema change.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.read().map(|c| c.clone()).unwrap_or_default()
    }

    /// Reads a snapshot stream into data files staged beside this executor's, for
    /// `Request::InstallSnapshot`. Blocks on file IO: call it off the async runtime.
    pub fn stage_snapshot(
        &self,
        input: impl std::io::Read,
    ) -> SqlResult<crate::install::StagedInstall> {
        crate::install::stage(input, &self.data_file, self.io_mode)
    }

    /// The read view the executor published while idle, if no entry has begun since.
    pub fn current_view(&self) -> Option<Arc<crate::read_view::ReadView>> {
        self.published_view.current()
    }

    /// Point reads served on a published view and those that went to the executor.
    pub fn point_reads_on_views(&self) -> (u64, u64) {
        self.published_view.point_reads()
    }

    /// Tells the executor of an entry about to be made durable (log `index`, its encoded
    /// commands), so that it starts reading the pages its transfers will need while the
    /// log writes it — only while its partitions' pages do not all fit in memory (else
    /// this sends nothing). A hint: the entry still arrives to apply as any other.
    pub fn read_ahead_of(&self, index: u64, commands: &[Vec<u8>]) {
        if self.reads_wanted.get() {
            self.send(Request::ReadAhead {
                index,
                commands: commands.to_vec(),
            });
        }
    }
}

/// How `Executor::store_row` writes a row: only where its key is absent, or over what the
/// key held (`old`, for the undo log).
enum RowWrite {
    InsertOnly,
    Put { old: Option<Vec<u8>> },
}

/// Where a SQL table's rows are stored: in every partition by key, or in partition 0.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Store {
    pub id: u32,
    pub partitioned: bool,
}

/// Applies commands and runs reads over the partitions it holds. The coordinator's
/// executor always holds partition 0 and, between log entries, every partition; a partition
/// thread's executor holds only its own, lent to it for the commands it runs (see
/// `coordinator`). A command touching a partition this executor does not hold is a routing
/// bug: an internal error, which stops the executor (see `run_command`).
pub struct Executor {
    /// Indexed by partition; None while that partition is held elsewhere.
    pub(crate) shards: Vec<Option<Shard>>,
    pub(crate) catalog: Arc<Catalog>,
    pub(crate) published: Arc<RwLock<Arc<Catalog>>>,
    pub(crate) meta: kv::Table,
    undo: UndoLog<kv::Table>,
    pub(crate) rowid_next: u64,
    /// Set when applying hit an IO error or an internal one: the state may no longer match
    /// the log, so every later command is refused until a restart replays the log.
    pub(crate) failed: Option<SqlError>,
    /// Buffers kept for their capacity between writes and reads.
    pub(crate) buffers: Buffers,
    /// The ledger clock and the expiry of pending transfers it drives.
    pub(crate) clock: LedgerClock,
    /// What applying transfers keeps between statements.
    pub(crate) transfers: TransferState,
    /// Sequence states (owned by the coordinator's executor only).
    pub(crate) sequences: Arc<SequenceStore>,
    /// Open while a transaction's schema changes apply (`schema_transaction`).
    pub(crate) schema_transaction: Option<crate::schema_transaction::SchemaTransaction>,
    /// The coordinator's executor's (the one that applies schema changes); None on a
    /// partition thread's.
    pub(crate) dependent_views: Option<plan::DependentViews>,
    /// Debug builds: set once the accounts outgrow `double_entry`'s check.
    pub(crate) double_entry_unchecked: bool,
    /// Where transfers applied are told (`transfer_activity`), and this executor thread's
    /// place there (0 the coordinator's, else its partition's).
    pub(crate) activity: Arc<crate::transfer_activity::TransferActivity>,
    pub(crate) activity_thread: usize,
}

/// Buffers an executor keeps for their capacity, so a write or a read allocates nothing.
#[derive(Default)]
pub(crate) struct Buffers {
    /// A row being encoded.
    pub(crate) row: Vec<u8>,
    /// An index entry being written.
    pub(crate) entry: Vec<u8>,
    /// The value an index entry's write replaced, on its way to the undo log.
    pub(crate) old: Vec<u8>,
    /// Buffers of stored rows read and done with, for the next reads (`recycle`).
    pub(crate) spare_rows: Vec<Vec<u8>>,
}

/// The ledger clock as a checkpoint records it: the clock, and where the reserved event
/// timestamps end (`event_timestamps`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StoredClock {
    pub now: i64,
    pub timestamps_reserved_to: i64,
    /// `EventTimestamps::latest`.
    pub latest_timestamps: [i64; 2],
}

impl StoredClock {
    pub(crate) fn encode(&self) -> [u8; 32] {
        let mut bytes = [0; 32];
        let words = [
            self.now,
            self.timestamps_reserved_to,
            self.latest_timestamps[0],
            self.latest_timestamps[1],
        ];
        for (chunk, word) in bytes.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        bytes
    }

    /// The stored form. Earlier versions stored 8 bytes (the clock: event timestamps start
    /// at it) or 16 (and where the reserved timestamps end): every event's is below that.
    pub(crate) fn decode(bytes: &[u8]) -> Option<StoredClock> {
        if !bytes.len().is_multiple_of(8) {
            return None;
        }
        let words: Vec<i64> = bytes
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        let (now, reserved_to, latest) = match words[..] {
            [now] => (now, now.saturating_mul(1_000), None),
            [now, reserved_to] => (now, reserved_to, None),
            [now, reserved_to, accounts, transfers] => {
                (now, reserved_to, Some([accounts, transfers]))
            }
            _ => return None,
        };
        Some(StoredClock {
            now,
            timestamps_reserved_to: reserved_to,
            latest_timestamps: latest.unwrap_or([reserved_to; 2]),
        })
    }
}

/// The ledger clock (see `transfer`): the latest `now()` of the commands applied, which
/// `created_at` and the expiry of pending transfers follow.
pub(crate) struct LedgerClock {
    pub(crate) now: i64,
    /// The timestamps of the accounts and transfers commands create (`event_timestamps`).
    pub(crate) timestamps: crate::event_timestamps::EventTimestamps,
    /// Pending transfers with a timeout, by the time they expire.
    pub(crate) expiry: kv::Table,
    /// No pending transfer expires before this (None: none has a timeout).
    pub(crate) next_expiry: Option<i64>,
}

/// What applying transfers keeps from one statement to the next.
#[derive(Default)]
pub(crate) struct TransferState {
    /// The ledger tables resolved, with the catalog version they were resolved at.
    pub(crate) schema: Option<(u64, Arc<plan::LedgerSchema>)>,
    /// The keys of the group of rows a multi-row transfer statement looks ahead at.
    pub(crate) lookahead_keys: crate::lookahead::LookaheadKeys,
    /// Open while a multi-row transfer statement runs (see `account_set`).
    pub(crate) account_set: Option<crate::account_set::AccountSet>,
    /// The set's memory between statements (empty).
    pub(crate) spare_account_set: crate::account_set::AccountSet,
    /// Transfer ids that failed for a reason that can change, with the result: burned
    /// (`transfer_failures`) once what the failure rolls back is rolled back.
    pub(crate) burned: Vec<(i64, &'static str)>,
    /// Whether the command's first account and first transfer were imported (each kind's
    /// first decides for the rest: `imported`); None until one is seen.
    pub(crate) first_imported: [Option<bool>; 2],
}

/// What a statement running outside log order may know of sequences: the session's
/// values, and values allocated through the log for its `nextval` calls.
#[derive(Clone, Debug, Default)]
pub struct StatementValues {
    pub session: SessionSequences,
    pub allocated: BTreeMap<u32, VecDeque<i64>>,
}

impl Executor {
    pub(crate) fn new(
        shards: Vec<Option<Shard>>,
        catalog: Arc<Catalog>,
        published: Arc<RwLock<Arc<Catalog>>>,
        meta: kv::Table,
        expiry: kv::Table,
        ledger_clock: StoredClock,
    ) -> Executor {
        Executor {
            shards,
            catalog,
            published,
            meta,
            undo: UndoLog::default(),
            rowid_next: 0,
            failed: None,
            buffers: Buffers::default(),
            clock: LedgerClock {
                now: ledger_clock.now,
                timestamps: crate::event_timestamps::EventTimestamps::restored(
                    ledger_clock.timestamps_reserved_to,
                    ledger_clock.latest_timestamps,
                ),
                expiry,
                // Unknown after a start: the first sweep looks.
                next_expiry: Some(i64::MIN),
            },
            transfers: TransferState::default(),
            sequences: Default::default(),
            schema_transaction: None,
            dependent_views: None,
            double_entry_unchecked: false,
            activity: Arc::new(crate::transfer_activity::TransferActivity::new(1)),
            activity_thread: 0,
        }
    }

    /// The sequence source of the command applying now.
    pub(crate) fn command_sequences(&self) -> CommandSequences {
        CommandSequences {
            catalog: self.catalog.clone(),
            store: self.sequences.clone(),
        }
    }

    /// A statement's sequence source outside log order (see `StatementValues`).
    pub(crate) fn statement_sequences(&self, values: StatementValues) -> StatementSequences {
        StatementSequences {
            catalog: self.catalog.clone(),
            store: self.sequences.clone(),
            session: values.session,
            allocated: RefCell::new(values.allocated),
            own: RefCell::default(),
        }
    }

    /// A reader for a command applying in log order: its sequence calls advance the
    /// stored states.
    pub(crate) fn command_reader(&mut self) -> Reader<'_> {
        let sequences = self.command_sequences();
        let mut reader = self.reader(None, false);
        reader.sequences = Some(Box::new(sequences));
        reader
    }

    /// Partition `index`, if this executor holds it.
    pub(crate) fn shard(&mut self, index: usize) -> SqlResult<&mut Shard> {
        held(&mut self.shards, index)
    }

    pub(crate) fn holds(&self, index: usize) -> bool {
        self.shards.get(index).is_some_and(Option::is_some)
    }

    /// Every partition; only an executor holding them all may ask (schema changes).
    pub(crate) fn every_shard(&mut self) -> SqlResult<impl Iterator<Item = &mut Shard>> {
        self.holds_every_shard()?;
        Ok(self.shards.iter_mut().flatten())
    }

    pub(crate) fn holds_every_shard(&mut self) -> SqlResult<()> {
        match self.shards.iter().position(Option::is_none) {
            Some(index) => held(&mut self.shards, index).map(|_| ()),
            None => Ok(()),
        }
    }

    pub(crate) fn partitions(&self) -> usize {
        self.shards.len()
    }

    /// Every command starts with an empty undo log: one left over would be rolled back
    /// with the next command's writes, undoing a command that stood.
    fn assert_no_undo(&self, what: &str) {
        assert!(
            self.undo.is_empty(),
            "{what} starts with {} writes of another in the undo log",
            self.undo.len()
        );
    }

    pub(crate) fn fail(&mut self, error: SqlError) {
        if self.failed.is_none() {
            self.failed = Some(error);
        }
    }

    fn publish_catalog(&mut self, catalog: Catalog) -> SqlResult<()> {
        fn encode<T: serde::Serialize>(value: &T) -> SqlResult<Vec<u8>> {
            bincode::serialize(value).map_err(|e| SqlError::internal(e.to_string()))
        }
        // The catalog, and the parts kept under keys of their own so that its stored layout
        // stays what earlier builds wrote.
        let parts = [
            (META_CATALOG, encode(&catalog)?),
            (META_VIEWS, encode(&catalog.views)?),
            (META_SEQUENCES, encode(&catalog.sequences)?),
            (META_FOREIGN_KEYS, encode(&catalog.foreign_keys)?),
            (META_ENUMS, encode(&catalog.enums)?),
            (META_INDEX_DERIVATIONS, encode(&catalog.index_derivations)?),
            (
                META_UNIQUE_CONSTRAINTS,
                encode(&catalog.unique_constraints)?,
            ),
            (META_AUTHORIZATION, encode(&catalog.authorization)?),
        ];
        let meta = self.meta;
        let engine = &mut self.shard(0)?.engine;
        for (key, bytes) in parts {
            engine.put(meta, key, &bytes).map_err(kv_error)?;
        }
        self.catalog = Arc::new(catalog);
        if let Ok(mut published) = self.published.write() {
            *published = self.catalog.clone();
        }
        Ok(())
    }

    /// Refuses work after an IO error stopped the executor.
    pub(crate) fn check_running(&self) -> SqlResult<()> {
        match &self.failed {
            Some(e) => Err(SqlError::new(
                e.kind,
                format!("the executor stopped applying commands: {}", e.message),
            )),
            None => Ok(()),
        }
    }

    /// Moves the ledger clock to a command's `now()` and voids the pending transfers that
    /// expired by then: what happens before every command, in log order.
    pub(crate) fn prepare_command(&mut self, command: &Command, version: u64) -> SqlResult<()> {
        self.check_running()?;
        self.assert_no_undo("a command's preparation");
        let now_micros = command.now_micros();
        if let Some(now) = now_micros {
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
        // After the expiries, which take timestamps before the command's range.
        self.clock
            .timestamps
            .reserve(self.clock.now, command.event_bound());
        Ok(())
    }

    /// True when `prepare_command` for a command at `now_micros` would void expired pending
    /// transfers (which touches every partition).
    pub(crate) fn expiry_due(&self, now_micros: Option<i64>) -> bool {
        let Some(now) = now_micros else {
            return false;
        };
        let clock = self.clock.now.max(now);
        self.clock.next_expiry.is_some_and(|at| at <= clock)
    }

    pub(crate) fn apply_command(&mut self, command: Command, version: u64) -> CommandResult {
        self.prepare_command(&command, version)?;
        self.run_command(command, version)
    }

    /// Applies one command atomically: all of it, or (after an error) none of it.
    pub(crate) fn run_command(&mut self, command: Command, version: u64) -> CommandResult {
        self.check_running()?;
        self.assert_no_undo("a command");
        // Ids burned by a failure are written as the command that failed ends: one left
        // over would be burned at another log position on this replica than on others.
        assert!(
            self.transfers.burned.is_empty(),
            "burned transfer ids left over from an earlier command"
        );
        self.transfers.first_imported = [None; 2];
        // Without sequences (the hot paths) nothing can call one: no bookkeeping.
        let sequences = !self.catalog.sequences.is_empty();
        if sequences {
            self.sequences.begin(match &command {
                Command::WriteWithSequences { session, .. }
                | Command::QueryWithSequences { session, .. } => session.clone(),
                _ => SessionSequences::default(),
            });
        }
        let result = match command {
            Command::Write {
                plan,
                params,
                now_micros,
            }
            | Command::WriteWithSequences {
                plan,
                params,
                now_micros,
                ..
            } => self.apply_write(&plan, &params, now_micros, version),
            Command::QueryWithSequences {
                plan,
                params,
                now_micros,
                ..
            } => {
                let reader = self.command_reader();
                let env = reader.env(&params, now_micros);
                reader
                    .rows(&plan.rel, &[], &env)
                    .map(|rows| Executor::outcome(rows.len() as u64, rows))
            }
            Command::AllocateSequenceValues { sequences } => {
                self.allocate_sequence_values(&sequences)
            }
            Command::ClusterSettings(proposed) => self.apply_cluster_settings(proposed),
            // `prepare_command` moved the clock and expired what was due.
            Command::Pulse { .. } => Ok(Executor::outcome(0, Vec::new())),
            // The isolation level is the session's business: it decides which reads a
            // commit carries, and the executor checks whichever it carries.
            Command::Commit {
                reads,
                ops,
                now_micros,
                ..
            } => self.apply_commit(&reads, ops, now_micros, version),
            Command::Ddl { plan } => self.apply_ddl(plan, version),
            Command::CommitWithSchema {
                schema,
                reads,
                ops,
                now_micros,
                ..
            } => self.apply_commit_with_schema(schema, &reads, ops, now_micros, version),
            Command::Procedure {
                steps,
                params,
                now_micros,
            } => self.apply_procedure(&steps, &params, now_micros, version),
            Command::LedgerBatch {
                table,
                columns,
                rows,
                linked,
                now_micros,
            } => self.apply_ledger_batch(&table, &columns, rows, &linked, now_micros, version),
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
            // An internal error is a state the executor's own rules say cannot happen (a
            // routing bug, a table its catalog names but storage lacks, a row that does not
            // fit its table). Answering it and going on would leave this replica applying
            // later commands to a state the others may not share: stop applying instead.
            if e.kind == ErrorKind::Internal {
                eprintln!(
                    "hotledger: the executor stops: internal error: {}",
                    e.message
                );
                self.fail(e.clone());
                return Err(SqlError::internal(format!(
                    "the executor stopped after an internal error ({}); restart the server",
                    e.message
                )));
            }
            self.rollback();
            // Burned ids stay burned whatever became of the command (TigerBeetle's rule).
            if let Err(e) = self.burn_failed_ids(version) {
                self.fail(e.clone());
                return Err(e);
            }
        }
        self.undo.clear();
        if !sequences {
            return result;
        }
        // Sequence calls stay made whatever became of the command (see `sequences`).
        let (handed_out, changed) = self.sequences.finish();
        if let Err(e) = self.write_sequence_states(&changed) {
            self.fail(e.clone());
            return Err(e);
        }
        result.map(|mut outcome| {
            outcome.sequences = handed_out;
            outcome
        })
    }

    fn write_sequence_states(&mut self, changed: &[(u32, plan::SequenceState)]) -> SqlResult<()> {
        if changed.is_empty() {
            return Ok(());
        }
        let meta = self.meta;
        let engine = &mut self.shard(0)?.engine;
        for (id, state) in changed {
            engine
                .put(meta, &state_key(*id), &encode_state(*state))
                .map_err(kv_error)?;
        }
        Ok(())
    }

    /// `AllocateSequenceValues`: `count` `nextval` calls of each sequence, in order.
    fn allocate_sequence_values(&mut self, sequences: &[(u32, u64)]) -> CommandResult {
        let source = self.command_sequences();
        let mut rows = Vec::new();
        for &(id, count) in sequences {
            let oid = plan::FIRST_USER_OID + id;
            let sequence = self.catalog.sequence_named(&Value::Int(oid as i64))?;
            for _ in 0..count {
                let value = source.next_value(sequence)?;
                rows.push(vec![Value::Int(id as i64), Value::Int(value)]);
            }
        }
        self.sequences.forget_handed_out();
        Ok(Executor::outcome(rows.len() as u64, rows))
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
        let engine = &mut held(&mut self.shards, shard)?.engine;
        let old = &mut self.buffers.old;
        let existed = match value {
            Some(v) => engine.put_saving_old(storage, key, v, old),
            None => engine.delete_saving_old(storage, key, old),
        }
        .map_err(kv_error)?;
        self.undo
            .push(shard, storage, key, existed.then_some(&old[..]));
        Ok(())
    }

    pub(crate) fn rollback(&mut self) {
        self.rollback_to(0);
    }

    pub(crate) fn clear_undo(&mut self) {
        self.undo.clear();
    }

    /// The writes of the command so far, handed over (a partition's shares of a split run,
    /// for the coordinator to keep or roll back); `spare`, an empty log handed back from an
    /// earlier run, takes its place, so the log does not grow from nothing every run.
    pub(crate) fn take_undo(&mut self, spare: UndoLog<kv::Table>) -> UndoLog<kv::Table> {
        std::mem::replace(&mut self.undo, spare)
    }

    /// Takes back the writes `undo` (a partition's shares of a split run, handed over)
    /// holds past its first `mark`: the statements from there on did not stand.
    pub(crate) fn roll_back_from(&mut self, undo: UndoLog<kv::Table>, mark: usize) {
        self.undo = undo;
        self.rollback_to(mark);
        self.undo.clear();
    }

    /// The ledger's transfers table in each partition this executor holds, if there is one.
    fn transfers_storage(&mut self) -> Option<Vec<Option<kv::Table>>> {
        let table = self
            .catalog
            .ledger_table(plan::LedgerRole::Transfers)?
            .storage
            .clone();
        Some(
            self.shards
                .iter()
                .map(|s| s.as_ref().and_then(|s| s.engine.table(&table)))
                .collect(),
        )
    }

    /// How many writes the current command has made (a mark for `rollback_to`).
    pub(crate) fn undo_len(&self) -> usize {
        self.undo.len()
    }

    /// Undoes the writes made since the undo log had `mark` entries.
    pub(crate) fn rollback_to(&mut self, mark: usize) {
        if self.undo.len() <= mark {
            return;
        }
        let transfers = self.transfers_storage();
        while self.undo.len() > mark {
            let Some(u) = self.undo.pop() else { return };
            // A transfer created and now taken back is not one (`transfer_activity`).
            if u.old.is_none()
                && transfers
                    .as_deref()
                    .is_some_and(|t| t.get(u.shard) == Some(&Some(u.storage)))
            {
                self.activity.taken_back();
            }
            let engine = match self.shard(u.shard) {
                Ok(shard) => &mut shard.engine,
                Err(e) => return self.fail(e),
            };
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

    pub(crate) fn resolve(&self, table: &plan::TableRef) -> SqlResult<Arc<TableDef>> {
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
        if self.catalog.table_by_id(table.id).is_none() {
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

    /// A stored row's bytes.
    pub(crate) fn get_raw(&mut self, store: Store, key: &[u8]) -> SqlResult<Option<Vec<u8>>> {
        let index = self.shard_of(store, key);
        self.get_raw_in(store.id, index, key)
    }

    /// The bytes of the row with key `key` of table `id` in partition `index`, wherever its
    /// key places it (a table stored in parts, `change_events`, is not placed by key).
    pub(crate) fn get_raw_in(
        &mut self,
        id: u32,
        index: usize,
        key: &[u8],
    ) -> SqlResult<Option<Vec<u8>>> {
        let mut out = self.buffers.spare_rows.pop().unwrap_or_default();
        let shard = self.shard(index)?;
        let handle = shard.handle(id)?;
        if shard
            .engine
            .get_into(handle, key, &mut out)
            .map_err(kv_error)?
        {
            Ok(Some(out))
        } else {
            self.recycle(out);
            Ok(None)
        }
    }

    /// Keeps `bytes` (a stored row read and done with) for a later read to fill: reading an
    /// account into a fresh allocation and freeing it after its write was ~5% of a batch of
    /// transfers.
    pub(crate) fn recycle(&mut self, bytes: Vec<u8>) {
        if self.buffers.spare_rows.len() < SPARE_ROWS && bytes.capacity() <= SPARE_ROW_BYTES {
            self.buffers.spare_rows.push(bytes);
        }
    }

    /// Reads a stored row: its raw bytes (for undo) and decoded form.
    pub(crate) fn get_row(&mut self, store: Store, key: &[u8]) -> SqlResult<Option<StoredRow>> {
        match self.get_raw(store, key)? {
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
        self.store_row(table, index, key, RowWrite::Put { old }, row, version)?;
        Ok(())
    }

    /// Writes the part of a row of `table` stored in partition `index` (see `get_raw_in`);
    /// such a table has no indexes.
    pub(crate) fn put_row_in(
        &mut self,
        table: &TableDef,
        index: usize,
        key: &[u8],
        old: Option<Vec<u8>>,
        row: &[Value],
        version: u64,
    ) -> SqlResult<()> {
        assert!(
            table.indexes.is_empty(),
            "table \"{}\" is stored in parts and has an index",
            table.name
        );
        self.store_row(table, index, key, RowWrite::Put { old }, row, version)?;
        Ok(())
    }

    /// Writes a whole row of a table stored in parts (`put_row_in`) whose key must be new,
    /// in partition `index`: false, with nothing written, when that partition has the key.
    pub(crate) fn insert_new_row_in(
        &mut self,
        table: &TableDef,
        index: usize,
        key: &[u8],
        row: &[Value],
        version: u64,
    ) -> SqlResult<bool> {
        assert!(
            table.indexes.is_empty(),
            "table \"{}\" is stored in parts and has an index",
            table.name
        );
        self.store_row(table, index, key, RowWrite::InsertOnly, row, version)
    }

    /// Writes a row whose key must be new, in one descent of its table's tree: false, with
    /// nothing written, when a row with that key exists.
    pub(crate) fn insert_new_row(
        &mut self,
        table: &TableDef,
        key: &[u8],
        row: &[Value],
        version: u64,
    ) -> SqlResult<bool> {
        let store = self.storage_of(table)?;
        let index = self.shard_of(store, key);
        if !self.store_row(table, index, key, RowWrite::InsertOnly, row, version)? {
            return Ok(false);
        }
        if !table.indexes.is_empty() {
            self.update_indexes(table, index, key, None, Some(row))?;
        }
        Ok(true)
    }

    /// Encodes `row` and writes it under `key` in partition `index`, undoably; false, with
    /// nothing written, when `RowWrite::InsertOnly` finds the key.
    fn store_row(
        &mut self,
        table: &TableDef,
        index: usize,
        key: &[u8],
        how: RowWrite,
        row: &[Value],
        version: u64,
    ) -> SqlResult<bool> {
        encode_row(version, row, &mut self.buffers.row);
        let shard = held(&mut self.shards, index)?;
        let storage = shard.handle(table.id)?;
        let (written, old) = match how {
            RowWrite::InsertOnly => (shard.engine.insert(storage, key, &self.buffers.row), None),
            RowWrite::Put { old } => (
                shard
                    .engine
                    .put(storage, key, &self.buffers.row)
                    .map(|_| true),
                old,
            ),
        };
        if !written.map_err(kv_error)? {
            return Ok(false);
        }
        shard.table_versions.insert(table.id, version);
        self.undo.push(index, storage, key, old.as_deref());
        if let Some(old) = old {
            self.recycle(old);
        }
        Ok(true)
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
            let storage = self.shard(shard)?.handle(index.id)?;
            let derivation = match index.is_derived() {
                true => Some(
                    self.catalog
                        .index_derivations
                        .get(&index.id)
                        .cloned()
                        .ok_or_else(|| {
                            SqlError::internal(format!(
                                "index \"{}\" lost its definition",
                                index.name
                            ))
                        })?,
                ),
                false => None,
            };
            let derivation = derivation.as_deref();
            let old_entry = match old {
                Some(row) => {
                    let mut entry = Vec::new();
                    row_entry_into(index, derivation, row, row_key, &mut entry)?.map(|_| entry)
                }
                None => None,
            };
            let mut new_entry = std::mem::take(&mut self.buffers.entry);
            let new_entry = match new {
                Some(row) => row_entry_into(index, derivation, row, row_key, &mut new_entry)?
                    .map(|value| (new_entry, value)),
                None => None,
            };
            if old_entry.as_ref() == new_entry.as_ref().map(|(entry, _)| entry) {
                self.buffers.entry = new_entry.map(|(entry, _)| entry).unwrap_or_default();
                continue;
            }
            if let Some(entry) = old_entry {
                self.write_entry(shard, storage, &entry, None)?;
            }
            if let Some((entry, value)) = new_entry {
                // Entries that end with the row's own key (a non-unique index, or NULL in a
                // unique one; their value is empty) cannot collide, so only the others need
                // the lookup.
                let engine = &mut self.shard(shard)?.engine;
                let existing = if !value.is_empty() {
                    engine.get(storage, &entry).map_err(kv_error)?
                } else {
                    None
                };
                if let Some(existing) = existing {
                    if existing != row_key {
                        let row = new.unwrap_or_default();
                        return Err(match derivation.filter(|d| !d.keys.is_empty()) {
                            Some(d) => crate::apply::unique_violation_described(
                                &index.name,
                                d.key_description(
                                    &d.key_of(row, &index.columns)?.unwrap_or_default(),
                                ),
                            ),
                            None => crate::apply::unique_violation(
                                table,
                                &index.name,
                                &index.columns,
                                row,
                            ),
                        });
                    }
                }
                // An entry ending with its row's key is new here: written blind, it may go
                // to the index's insert buffer without reading its leaf.
                match value.is_empty() {
                    true => engine.put_blind(storage, &entry, value),
                    false => engine.put(storage, &entry, value).map(|_| ()),
                }
                .map_err(kv_error)?;
                self.undo.push(shard, storage, &entry, None);
                self.buffers.entry = entry;
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
        let shard = self.shard(index)?;
        let storage = shard.handle(store.id)?;
        shard.engine.delete(storage, key).map_err(kv_error)?;
        shard.table_versions.insert(table.id, version);
        self.undo.push(index, storage, key, Some(&old));
        self.recycle(old);
        Ok(())
    }

    pub(crate) fn reader<'a>(
        &'a mut self,
        overlay: Option<&'a Overlay>,
        record_reads: bool,
    ) -> Reader<'a> {
        Reader {
            partitions: Some(Partitions::Live(RefCell::new(&mut self.shards))),
            catalog: &self.catalog,
            overlay,
            record_reads,
            reads: RefCell::new(Vec::new()),
            sizes: false,
            sequences: None,
            working: RefCell::default(),
            random: false,
            backends: None,
            shared_subqueries: RefCell::default(),
            interrupt: plan::Interrupt::never(),
            memory: plan::memory::StatementMemory::unlimited(),
        }
    }

    pub(crate) fn query(
        &mut self,
        plan: &plan::SelectPlan,
        context: &StatementContext,
        sequences: SessionSequences,
    ) -> SqlResult<QueryResult> {
        self.check_running()?;
        let sequences = self.statement_sequences(StatementValues {
            session: sequences,
            allocated: BTreeMap::new(),
        });
        let mut reader = self.reader(context.overlay.as_deref(), context.record_reads);
        reader.sizes = true;
        reader.random = true;
        reader.sequences = Some(Box::new(sequences));
        reader.interrupt = context.interrupt.clone();
        reader.memory = plan::memory::StatementMemory::start();
        let env = reader.env(&context.params, context.now_micros);
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
        Ok(self.get_raw(store, key)?.as_deref().map_or(0, row_version))
    }

    /// The log index of the last write to a table, in any partition held.
    pub(crate) fn table_version(&self, table: u32) -> u64 {
        last_write(&self.shards, table)
    }

    /// The catalog after a schema change: published, unless the change is part of a
    /// transaction's, which publishes when they all hold.
    pub(crate) fn set_catalog(&mut self, catalog: Catalog) -> SqlResult<()> {
        if self.in_schema_transaction() {
            self.catalog = Arc::new(catalog);
            return Ok(());
        }
        self.publish_catalog(catalog)
    }

    pub(crate) fn outcome(rows_affected: u64, rows: Vec<Vec<Value>>) -> Outcome {
        Outcome {
            rows_affected,
            rows,
            sequences: SessionSequences::default(),
        }
    }
}

/// The key of a row's entry in an index, written into `out` (emptied first): the indexed
/// values, then (unless the index is unique and the values have no NULL, which never
/// collide) the row's own key. Returns the value to store under it: the row key, or nothing
/// when the entry already ends with it (a fifth of a history-index entry, stored twice
/// before). An entry with an empty value cannot collide with another row's.
pub(crate) fn index_entry_into<'k>(
    index: &plan::IndexDef,
    row: &[Value],
    row_key: &'k [u8],
    out: &mut Vec<u8>,
) -> SqlResult<&'k [u8]> {
    entry_of_values(
        index.columns.iter().map(|&c| &row[c]),
        index.unique,
        row_key,
        out,
    )
}

/// `index_entry_into` for any index: a derived one's entry is made of the keys its
/// `derivation` gives; None when it leaves the row out.
pub(crate) fn row_entry_into<'k>(
    index: &plan::IndexDef,
    derivation: Option<&plan::IndexDerivation>,
    row: &[Value],
    row_key: &'k [u8],
    out: &mut Vec<u8>,
) -> SqlResult<Option<&'k [u8]>> {
    match derivation {
        None => index_entry_into(index, row, row_key, out).map(Some),
        Some(d) => match d.key_of(row, &index.columns)? {
            None => Ok(None),
            Some(key) => entry_of_values(key.iter(), index.unique, row_key, out).map(Some),
        },
    }
}

/// An index entry for key values `values` (an index's columns' or a derived index's), as
/// `index_entry_into` describes it.
pub(crate) fn entry_of_values<'v, 'k>(
    values: impl Iterator<Item = &'v Value> + Clone,
    unique: bool,
    row_key: &'k [u8],
    out: &mut Vec<u8>,
) -> SqlResult<&'k [u8]> {
    out.clear();
    crate::row::encode_key_into(values.clone(), out)?;
    if !unique || values.into_iter().any(Value::is_null) {
        out.extend_from_slice(row_key);
        return Ok(&[]);
    }
    Ok(row_key)
}

/// The row key an index entry points at: its value, or when that is empty (entries written
/// since values stopped repeating the key) what follows the indexed values in its key.
pub(crate) fn indexed_row_key(
    index: &plan::IndexDef,
    entry: Vec<u8>,
    value: Vec<u8>,
) -> SqlResult<Vec<u8>> {
    if !value.is_empty() {
        return Ok(value);
    }
    kv::keycode::skip_parts(&entry, index.columns.len())
        .filter(|row_key| !row_key.is_empty())
        .map(<[u8]>::to_vec)
        .ok_or_else(|| SqlError::internal(format!("unreadable entry in index \"{}\"", index.name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_clock_reads_every_earlier_form() {
        let clock = StoredClock {
            now: 7,
            timestamps_reserved_to: 7_003,
            latest_timestamps: [7_001, 7_002],
        };
        assert_eq!(StoredClock::decode(&clock.encode()), Some(clock));
        // Before event timestamps: they start at the clock.
        let old = StoredClock::decode(&7i64.to_le_bytes()).unwrap();
        assert_eq!(
            (old.timestamps_reserved_to, old.latest_timestamps),
            (7_000, [7_000; 2])
        );
        // Before the latest of each kind: no event is past where the ranges end.
        let mut two = 7i64.to_le_bytes().to_vec();
        two.extend_from_slice(&7_003i64.to_le_bytes());
        let two = StoredClock::decode(&two).unwrap();
        assert_eq!(two.latest_timestamps, [7_003; 2]);
        assert_eq!(StoredClock::decode(&[0; 12]), None);
        assert_eq!(StoredClock::decode(&[0; 24]), None);
    }

    #[test]
    fn index_entries_find_their_row_key_stored_either_way() {
        let index = plan::IndexDef {
            id: 7,
            name: "t_a_b".into(),
            columns: vec![1, 2],
            unique: false,
            storage: "i7".into(),
        };
        let row = [Value::Int(1), Value::text("x\0y"), Value::Null];
        let row_key = crate::row::encode_key(&[Value::Int(1)]).unwrap();
        let mut entry = Vec::new();
        let value = index_entry_into(&index, &row, &row_key, &mut entry).unwrap();
        assert!(value.is_empty());
        // Entries written since values stopped repeating the key, and entries written before.
        for stored in [value.to_vec(), row_key.clone()] {
            assert_eq!(
                indexed_row_key(&index, entry.clone(), stored).unwrap(),
                row_key
            );
        }
        // A unique index without NULLs keeps the row key as the value.
        let unique = plan::IndexDef {
            unique: true,
            columns: vec![1],
            ..index.clone()
        };
        assert_eq!(
            index_entry_into(&unique, &row, &row_key, &mut entry).unwrap(),
            row_key.as_slice()
        );
        // A damaged entry is an error, not a wrong row.
        assert!(indexed_row_key(&index, entry[..3].to_vec(), Vec::new()).is_err());
    }
}
