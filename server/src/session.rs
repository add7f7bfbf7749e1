//! A client session: its transaction (reads and buffered writes, no locks held), its
//! settings, an in-progress COPY, and running one bound statement to a result.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use ledger::{
    decode_result, encode_command, Command, ExecutorHandle, Outcome, Overlay, QueryResult,
    ReadCheck, Request, Row, Staged, WriteOp,
};
use planner::{
    explain, Bound, CallPlan, Catalog, CopyPlan, DdlPlan, EvalEnv, Expr, Func, InsertPlan,
    InsertSource, Isolation, OutputColumn, Plan, SelectPlan, SessionSequences, TableDef,
    TransferBatchPlan, WritePlan,
};
use raft::{ProposeError, Proposer};
use sql::{DataType, ErrorKind, SqlError, SqlResult, Value};
use tokio::sync::oneshot;

use crate::activity::{self, Activity};
use crate::advisory_locks::{AdvisoryLocks, Holder, LockKey};
use crate::copy_format::{csv_fields, header_line, row_line, text_fields};
use crate::notifications::{Inbox, Notification, Notifications, MAX_PAYLOAD_BYTES};

/// What the whole server shares with every session.
pub struct Shared {
    pub executor: ExecutorHandle,
    pub proposer: Proposer,
    /// Entries and fsyncs of the Raft log, for `SHOW group_commit_stats`.
    pub log_stats: Arc<raft::LogStats>,
    /// The advisory locks of this node's sessions.
    pub advisory_locks: AdvisoryLocks,
    /// Who LISTENs on which channel, on this node.
    pub notifications: Notifications,
    /// What the node's client sessions are doing (`pg_stat_activity`).
    pub activity: Activity,
}

/// What running a statement produced.
#[derive(Debug)]
pub enum StatementResult {
    /// Rows and the command tag without its count (`SELECT`, `INSERT 0`, ...).
    Rows {
        columns: Vec<OutputColumn>,
        rows: Vec<Row>,
        tag: String,
    },
    /// A command tag, complete.
    Command(String),
    TransactionStart(String),
    TransactionEnd(String),
    CopyIn {
        columns: usize,
    },
    /// COPY TO STDOUT: one line of data per row (the header line first, if asked for).
    CopyOut {
        columns: usize,
        lines: Vec<Vec<u8>>,
        rows: usize,
    },
}

struct Transaction {
    isolation: Isolation,
    read_only: bool,
    now_micros: i64,
    ops: Vec<WriteOp>,
    reads: Vec<ReadCheck>,
    /// NOTIFYs sent in the transaction, delivered when it commits.
    notifies: Vec<Notification>,
    overlay: Arc<Overlay>,
    /// Open savepoints, innermost last.
    savepoints: Vec<Savepoint>,
    /// Its schema changes so far (they apply at COMMIT).
    schema: Option<Arc<SchemaChanges>>,
    /// The states of the sequences its schema changes made, as its statements left them
    /// (never taken back by ROLLBACK TO: a value handed out stays handed out).
    own_sequences: BTreeMap<u32, planner::SequenceState>,
}

impl Transaction {
    fn new(isolation: Isolation, read_only: bool) -> Transaction {
        Transaction {
            isolation,
            read_only,
            now_micros: now_micros(),
            ops: Vec::new(),
            reads: Vec::new(),
            notifies: Vec::new(),
            overlay: Arc::new(Overlay::new()),
            savepoints: Vec::new(),
            schema: None,
            own_sequences: BTreeMap::new(),
        }
    }
}

/// A transaction's schema changes, planned against catalog version `base_version`, each
/// with how many of the transaction's writes came before it, and the catalog the
/// transaction sees after them (its statements are bound against it).
#[derive(Clone)]
struct SchemaChanges {
    base_version: u64,
    changes: Vec<(usize, DdlPlan)>,
    catalog: Arc<Catalog>,
}

impl SchemaChanges {
    /// The changes with the writes `ops` made before each, in the order they were made, then
    /// the states the transaction's statements left its own sequences in; and the writes
    /// made after the last change.
    fn steps(
        &self,
        ops: &[WriteOp],
        sequences: &BTreeMap<u32, planner::SequenceState>,
    ) -> (ledger::SchemaChanges, Vec<WriteOp>) {
        let mut steps = Vec::new();
        let mut done = 0;
        for (before, change) in &self.changes {
            if *before > done {
                steps.push(ledger::SchemaStep::Writes(ops[done..*before].to_vec()));
                done = *before;
            }
            steps.push(ledger::SchemaStep::Change(change.clone()));
        }
        if !sequences.is_empty() {
            steps.push(ledger::SchemaStep::SequenceStates(
                sequences.iter().map(|(id, s)| (*id, *s)).collect(),
            ));
        }
        let schema = ledger::SchemaChanges {
            base_version: self.base_version,
            steps,
        };
        (schema, ops[done..].to_vec())
    }
}

/// Versions for the catalogs transactions see after their own schema changes: never one
/// the shared catalog has, so a statement prepared against one is bound again outside it.
static TRANSACTION_CATALOG_VERSION: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(1 << 62);

/// Where a transaction stood at `SAVEPOINT name`: its writes so far and its overlay then
/// (shared until the transaction writes again).
struct Savepoint {
    name: String,
    ops: usize,
    overlay: Arc<Overlay>,
    schema: Option<Arc<SchemaChanges>>,
}

struct CopyState {
    plan: CopyPlan,
    partial: Vec<u8>,
    rows: Vec<Row>,
    bytes: usize,
    header_pending: bool,
    error: Option<SqlError>,
}

/// The most COPY data accepted in one statement; it becomes one log command.
const COPY_BYTES_MAX: usize = 48 << 20;
/// The largest encoded command proposed to the log (the proposer adds up to 8 MiB of other
/// commands to an entry, and the log store's limit is 64 MiB per entry).
const COMMAND_BYTES_MAX: usize = 48 << 20;

pub struct Session {
    shared: Arc<Shared>,
    /// This session among the node's, as a holder of advisory locks and a listener.
    id: u64,
    /// The process id its client was given (BackendKeyData), which its notifications carry.
    pid: i32,
    /// Where notifications for this session's connection wait to be sent.
    inbox: Arc<Inbox>,
    /// What `pg_stat_activity` shows of this session.
    activity: activity::Record,
    transaction: Option<Transaction>,
    /// An error happened inside the transaction: only ROLLBACK/COMMIT are accepted.
    failed: bool,
    settings: BTreeMap<String, String>,
    copy: Option<CopyState>,
    /// What this session's `nextval` calls left, for `currval` and `lastval`.
    sequences: SessionSequences,
    /// Warnings to send before the statement's result.
    pub notices: Vec<String>,
    /// The statement being run is a SELECT ... FOR UPDATE/FOR SHARE.
    locking_read: bool,
}

pub fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// Settings a client may SET and SHOW, with their defaults.
const SETTINGS: &[(&str, &str)] = &[
    ("application_name", ""),
    ("client_encoding", "UTF8"),
    ("datestyle", "ISO, MDY"),
    ("timezone", "UTC"),
    ("search_path", "\"$user\", public"),
    ("extra_float_digits", "1"),
    ("statement_timeout", "0"),
    ("lock_timeout", "0"),
    ("idle_in_transaction_session_timeout", "0"),
    ("default_transaction_isolation", "read committed"),
    ("default_transaction_read_only", "off"),
    ("standard_conforming_strings", "on"),
    ("client_min_messages", "notice"),
    ("intervalstyle", "postgres"),
    ("synchronous_commit", "on"),
    ("bytea_output", "hex"),
    ("read_consistency", "strong"),
    ("work_mem", "4MB"),
    ("jit", "off"),
    ("row_security", "on"),
    ("max_parallel_workers_per_gather", "0"),
    ("geqo", "on"),
    // What pg_dump's scripts set first; none changes what this server does.
    ("check_function_bodies", "on"),
    ("xmloption", "content"),
    ("default_tablespace", ""),
    ("default_table_access_method", "heap"),
];

/// The server's own settings (`planner::SERVER_SETTINGS`): shown, never changed.
fn read_only(key: &str) -> bool {
    planner::SERVER_SETTINGS.iter().any(|(n, _)| *n == key)
}

/// Every setting SHOW knows, with its default: the session's, then the server's.
fn known_settings() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    SETTINGS.iter().chain(planner::SERVER_SETTINGS)
}

fn setting_key(name: &str) -> String {
    name.to_ascii_lowercase()
}

fn propose_error(e: ProposeError) -> SqlError {
    match e {
        ProposeError::NotLeader => SqlError::new(
            ErrorKind::ReadOnlyTransaction,
            "this node is not the leader",
        ),
        ProposeError::Stopped => SqlError::new(
            ErrorKind::AdminShutdown,
            "terminating connection due to administrator command",
        ),
        ProposeError::Raft(m) => {
            SqlError::new(ErrorKind::Io, format!("the replicated log failed: {m}"))
        }
    }
}

fn stopped() -> SqlError {
    SqlError::new(ErrorKind::AdminShutdown, "the executor has stopped")
}

fn isolation_name(i: Isolation) -> &'static str {
    match i {
        Isolation::ReadCommitted => "read committed",
        Isolation::Serializable => "serializable",
    }
}

impl Session {
    pub fn new(
        shared: Arc<Shared>,
        startup: &std::collections::HashMap<String, String>,
        pid: i32,
        inbox: Arc<Inbox>,
    ) -> Session {
        let mut settings = BTreeMap::new();
        for (k, v) in startup {
            let key = setting_key(k);
            if SETTINGS.iter().any(|(n, _)| *n == key) {
                settings.insert(key, v.clone());
            }
        }
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let now = now_micros();
        let record = Arc::new(std::sync::Mutex::new(planner::SessionActivity {
            pid,
            user: startup.get("user").cloned().unwrap_or_default(),
            database: startup.get("database").cloned().unwrap_or_default(),
            application_name: startup.get("application_name").cloned().unwrap_or_default(),
            backend_start: now,
            state_change: now,
            state: "idle".into(),
            ..Default::default()
        }));
        // A client's session (not the one a connection has before its startup, nor the
        // migrations').
        if pid != 0 {
            shared.activity.register(id, record.clone());
        }
        Session {
            shared,
            id,
            pid,
            inbox,
            activity: record,
            transaction: None,
            failed: false,
            settings,
            copy: None,
            sequences: SessionSequences::default(),
            notices: Vec::new(),
            locking_read: false,
        }
    }

    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The process id its client got at startup, which `pg_backend_pid()` answers.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Where the client connects from, for `pg_stat_activity`.
    pub fn set_client(&mut self, address: std::net::SocketAddr) {
        let mut a = activity::lock(&self.activity);
        a.client_addr = Some(address.ip().to_string());
        a.client_port = Some(address.port() as i32);
    }

    /// Lets other sessions cancel this one's statements and end its connection.
    pub fn attach_control(&self, control: Arc<activity::ConnectionControl>) {
        self.shared.activity.attach_control(self.id, control);
    }

    /// A statement starts: `pg_stat_activity` shows it as the session's active query.
    pub fn begin_statement(&mut self, sql: &str) {
        let now = now_micros();
        let mut a = activity::lock(&self.activity);
        activity::set_query(&mut a, sql);
        a.state.clear();
        a.state.push_str("active");
        a.query_start = Some(now);
        a.state_change = now;
        if a.xact_start.is_none() {
            a.xact_start = Some(now);
        }
    }

    /// The statement ended: the session is idle, in its transaction block or not.
    fn end_statement(&mut self, failed: bool) {
        let state = match &self.transaction {
            None => "idle",
            Some(_) if self.failed || failed => "idle in transaction (aborted)",
            Some(_) => "idle in transaction",
        };
        let xact_start = self.transaction.as_ref().map(|t| t.now_micros);
        let mut a = activity::lock(&self.activity);
        a.state.clear();
        a.state.push_str(state);
        a.state_change = now_micros();
        a.xact_start = xact_start;
    }

    pub fn in_transaction(&self) -> bool {
        self.transaction.is_some()
    }

    pub fn is_failed(&self) -> bool {
        self.failed
    }

    /// A statement failed before it ran (parse or bind): inside a transaction that aborts it.
    pub fn execute_failed(&mut self) {
        if self.transaction.is_some() {
            self.failed = true;
        }
        self.end_statement(true);
    }

    fn setting(&self, name: &str) -> Option<String> {
        let key = setting_key(name);
        if key == "transaction_isolation" {
            return Some(match &self.transaction {
                Some(t) => isolation_name(t.isolation).to_string(),
                None => self
                    .setting("default_transaction_isolation")
                    .unwrap_or_default(),
            });
        }
        self.settings.get(&key).cloned().or_else(|| {
            known_settings()
                .find(|(n, _)| *n == key)
                .map(|(_, v)| v.to_string())
        })
    }

    /// How well group commit works since start: commands proposed, Raft entries they went
    /// into, entries written to the log and the fsyncs that made them durable.
    fn group_commit_stats(&self) -> String {
        use std::sync::atomic::Ordering::Relaxed;
        let proposer = self.shared.proposer.stats();
        let log = &self.shared.log_stats;
        format!(
            "commands={} entries={} log_entries={} fsyncs={}",
            proposer.commands.load(Relaxed),
            proposer.entries.load(Relaxed),
            log.entries.load(Relaxed),
            log.flushes.load(Relaxed)
        )
    }

    /// The storage engine's buffer pool and file, for `SHOW storage_stats`: pages resident in
    /// the pool and its capacity, page buffers in memory, the page size, pages in the data
    /// file, pool hits and misses, the checkpoints, the executor partitions, and how many
    /// point operations found their leaf from a leaf hint or descended from the root (or
    /// started at a leaf a multi-row statement's lookahead found), and how often and how
    /// long entries waited for a checkpoint to make room in the pool.
    async fn storage_stats(&self) -> SqlResult<String> {
        let all = self.ask(|reply| Request::Stats { reply }).await?;
        let stats = all.storage;
        Ok(format!(
            "page_size={} pool_capacity_pages={} resident_pages={} dirty_pages={} mapped_pages={} peak_buffer_pages={} file_pages={} hits={} misses={} checkpoint_seq={} last_checkpoint_pages={} last_checkpoint_ms={} partitions={} commands_on_partition_threads={} commands_on_coordinator={} partition_handovers={} commands_split={} leaf_hint_hits={} leaf_hint_misses={} lookahead_keys={} lookahead_used={} pool_waits={} pool_wait_ms={}",
            stats.page_size,
            stats.pool_capacity_pages,
            stats.resident_pages,
            stats.dirty_pages,
            stats.mapped_pages,
            stats.peak_buffer_pages,
            stats.page_count,
            stats.pool.hits,
            stats.pool.misses,
            stats.checkpoint_seq,
            stats.last_checkpoint_pages,
            stats.last_checkpoint_elapsed.as_millis(),
            all.partitions,
            all.on_partition_threads,
            all.on_coordinator,
            all.handovers,
            all.split,
            stats.leaf_hint_hits,
            stats.leaf_hint_misses,
            stats.lookahead_keys,
            stats.lookahead_used,
            all.pool_waits,
            all.pool_wait.as_millis()
        ))
    }

    fn default_isolation(&self) -> Isolation {
        match self
            .setting("default_transaction_isolation")
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("serializable") | Some("repeatable read") => Isolation::Serializable,
            _ => Isolation::ReadCommitted,
        }
    }

    /// Runs one bound statement. An error inside a transaction marks it failed.
    pub async fn execute(&mut self, bound: &Bound, params: &[Value]) -> SqlResult<StatementResult> {
        self.locking_read = bound.locks_rows;
        let result = self.execute_inner(&bound.plan, params).await;
        self.locking_read = false;
        self.end_statement(result.is_err());
        if result.is_err() && self.transaction.is_some() {
            self.failed = true;
        }
        result
    }

    async fn execute_inner(&mut self, plan: &Plan, params: &[Value]) -> SqlResult<StatementResult> {
        if self.failed
            && !matches!(
                plan,
                Plan::Commit | Plan::Rollback | Plan::RollbackToSavepoint { .. }
            )
        {
            return Err(SqlError::new(
                ErrorKind::InFailedTransaction,
                "current transaction is aborted, commands ignored until end of transaction block",
            ));
        }
        match plan {
            Plan::Select(select) => {
                let rows = self.select(select, params).await?;
                Ok(StatementResult::Rows {
                    columns: select.columns.clone(),
                    rows,
                    tag: "SELECT".into(),
                })
            }
            Plan::Write(write, columns) => self.write(write, columns, params).await,
            Plan::Ddl(ddl) => self.ddl(ddl).await,
            Plan::Begin {
                isolation,
                read_only,
            } => {
                if self.transaction.is_some() {
                    self.notices
                        .push("there is already a transaction in progress".into());
                    return Ok(StatementResult::TransactionStart("BEGIN".into()));
                }
                let read_only = *read_only
                    || self.setting("default_transaction_read_only").as_deref() == Some("on");
                let isolation = isolation.unwrap_or_else(|| self.default_isolation());
                self.transaction = Some(Transaction::new(isolation, read_only));
                Ok(StatementResult::TransactionStart("BEGIN".into()))
            }
            Plan::Commit => self.commit().await,
            Plan::Rollback => {
                self.release_transaction_locks();
                if self.transaction.take().is_none() {
                    self.notices
                        .push("there is no transaction in progress".into());
                }
                self.failed = false;
                Ok(StatementResult::TransactionEnd("ROLLBACK".into()))
            }
            Plan::Savepoint { name } => {
                let t = self.transaction_for("SAVEPOINT")?;
                let mark = Savepoint {
                    name: name.clone(),
                    ops: t.ops.len(),
                    overlay: t.overlay.clone(),
                    schema: t.schema.clone(),
                };
                t.savepoints.push(mark);
                Ok(StatementResult::Command("SAVEPOINT".into()))
            }
            Plan::RollbackToSavepoint { name } => {
                let t = self.transaction_for("ROLLBACK TO SAVEPOINT")?;
                let at = savepoint_position(&t.savepoints, name)?;
                // The savepoint stays; later ones go. Reads are kept: what the rolled-back
                // statements read may still have shaped what the client does next.
                t.savepoints.truncate(at + 1);
                let mark = &t.savepoints[at];
                t.ops.truncate(mark.ops);
                t.overlay = mark.overlay.clone();
                t.schema = mark.schema.clone();
                self.failed = false;
                Ok(StatementResult::Command("ROLLBACK".into()))
            }
            Plan::ReleaseSavepoint { name } => {
                let t = self.transaction_for("RELEASE SAVEPOINT")?;
                let at = savepoint_position(&t.savepoints, name)?;
                t.savepoints.truncate(at);
                Ok(StatementResult::Command("RELEASE".into()))
            }
            Plan::SetTransaction { isolation } => {
                match (&mut self.transaction, isolation) {
                    (Some(t), Some(i)) => {
                        if !t.ops.is_empty() || !t.reads.is_empty() || t.schema.is_some() {
                            return Err(SqlError::new(
                                ErrorKind::ActiveTransaction,
                                "SET TRANSACTION ISOLATION LEVEL must be called before any query",
                            ));
                        }
                        t.isolation = *i;
                    }
                    (None, _) => self
                        .notices
                        .push("SET TRANSACTION can only be used in transaction blocks".into()),
                    _ => {}
                }
                Ok(StatementResult::Command("SET".into()))
            }
            Plan::Set { name, value } => {
                self.set(name, value.as_deref())?;
                Ok(StatementResult::Command("SET".into()))
            }
            Plan::AdvisoryLock(call) => self.advisory_lock(call, params).await,
            Plan::Listen(channel) => {
                let shared = self.shared.clone();
                shared.notifications.listen(self.id, channel, &self.inbox);
                Ok(StatementResult::Command("LISTEN".into()))
            }
            Plan::Unlisten(channel) => {
                self.shared
                    .notifications
                    .unlisten(self.id, channel.as_deref());
                Ok(StatementResult::Command("UNLISTEN".into()))
            }
            Plan::Notify(call) => self.notify(call, params),
            Plan::SetConfig { name, value } => {
                self.set(name, Some(value))?;
                Ok(StatementResult::Rows {
                    columns: plan.output_columns(),
                    rows: vec![vec![Value::Text(value.clone())]],
                    tag: "SELECT".into(),
                })
            }
            Plan::Reset { name } => {
                match name {
                    Some(name) => self.set(name, None)?,
                    None => self.settings.clear(),
                }
                Ok(StatementResult::Command("RESET".into()))
            }
            Plan::Show { name } => {
                let key = setting_key(name);
                if key == "all" {
                    let rows = known_settings()
                        .map(|(n, _)| {
                            vec![
                                Value::text(*n),
                                Value::Text(self.setting(n).unwrap_or_default()),
                            ]
                        })
                        .collect();
                    let columns = ["name", "setting"]
                        .iter()
                        .map(|n| OutputColumn {
                            name: n.to_string(),
                            ty: DataType::Text,
                            table_oid: 0,
                            column_number: 0,
                        })
                        .collect();
                    return Ok(StatementResult::Rows {
                        columns,
                        rows,
                        tag: "SHOW".into(),
                    });
                }
                let value = if key == "group_commit_stats" {
                    self.group_commit_stats()
                } else if key == "storage_stats" {
                    self.storage_stats().await?
                } else {
                    self.setting(&key).ok_or_else(|| unknown_setting(name))?
                };
                Ok(StatementResult::Rows {
                    columns: plan.output_columns(),
                    rows: vec![vec![Value::Text(value)]],
                    tag: "SHOW".into(),
                })
            }
            Plan::CopyFrom(copy) => {
                if self.transaction.as_ref().is_some_and(|t| t.read_only) {
                    return Err(read_only_error("COPY FROM"));
                }
                let columns = copy.columns.len();
                self.copy = Some(CopyState {
                    plan: copy.clone(),
                    partial: Vec::new(),
                    rows: Vec::new(),
                    bytes: 0,
                    header_pending: copy.format.header,
                    error: None,
                });
                Ok(StatementResult::CopyIn { columns })
            }
            Plan::CopyTo { query, format } => {
                let rows = self.select(query, params).await?;
                let mut lines = Vec::with_capacity(rows.len() + 1);
                if format.header {
                    lines.push(header_line(&query.columns, format));
                }
                lines.extend(rows.iter().map(|r| row_line(r, &query.columns, format)));
                Ok(StatementResult::CopyOut {
                    columns: query.columns.len(),
                    lines,
                    rows: rows.len(),
                })
            }
            Plan::NoOp(tag) => Ok(StatementResult::Command(tag.to_string())),
            Plan::Explain(inner) => {
                let rows = explain(inner)
                    .into_iter()
                    .map(|l| vec![Value::Text(l)])
                    .collect();
                Ok(StatementResult::Rows {
                    columns: plan.output_columns(),
                    rows,
                    tag: "EXPLAIN".into(),
                })
            }
            Plan::Deallocate { name } => Ok(StatementResult::Command(if name.is_some() {
                "DEALLOCATE".into()
            } else {
                "DEALLOCATE ALL".into()
            })),
            Plan::Call(call) => self.call(call, params).await,
            Plan::TransferBatch(batch) => self.transfer_batch(batch, params).await,
        }
    }

    /// `create_transfers`: the arrays evaluated here and turned into rows, applied as one
    /// command with an outcome per transfer.
    async fn transfer_batch(
        &mut self,
        batch: &TransferBatchPlan,
        params: &[Value],
    ) -> SqlResult<StatementResult> {
        if self.transaction.is_some() {
            return Err(SqlError::feature_not_supported(
                "create_transfers inside a transaction block (each of its chains is its own transaction)",
            ));
        }
        let now = now_micros();
        let (columns, rows, linked) = {
            let env = EvalEnv::without_subqueries(params, now);
            let array = |e: &Expr| -> SqlResult<Vec<Value>> {
                match e.eval(&[], &env)? {
                    Value::Array(items) => Ok(items),
                    Value::Null => Ok(Vec::new()),
                    other => Err(SqlError::mismatch(format!(
                        "create_transfers takes arrays, not {other:?}"
                    ))),
                }
            };
            let mut columns = Vec::with_capacity(batch.columns.len());
            let mut arrays = Vec::with_capacity(batch.columns.len());
            for (column, e) in &batch.columns {
                columns.push(*column);
                arrays.push(array(e)?);
            }
            let linked = match &batch.linked {
                Some(e) => array(e)?,
                None => Vec::new(),
            };
            let count = arrays.iter().map(Vec::len).max().unwrap_or(0);
            let lengths_differ = arrays.iter().any(|a| a.len() != count)
                || (batch.linked.is_some() && linked.len() != count);
            if lengths_differ {
                return Err(SqlError::new(
                    ErrorKind::InvalidParameterValue,
                    "create_transfers: every array must have one element per transfer (the arrays have different lengths)",
                ));
            }
            let mut rows: Vec<Row> = (0..count)
                .map(|_| Vec::with_capacity(arrays.len()))
                .collect();
            for array in arrays {
                for (row, value) in rows.iter_mut().zip(array) {
                    row.push(value);
                }
            }
            let linked: Vec<bool> = linked
                .into_iter()
                .map(|v| matches!(v, Value::Bool(true)))
                .collect();
            (columns, rows, linked)
        };
        let outcome = self
            .propose(&Command::TransferBatch {
                table: batch.table.clone(),
                columns,
                rows,
                linked,
                now_micros: now,
            })
            .await?;
        Ok(StatementResult::Rows {
            columns: planner::transfer_batch_columns(),
            rows: outcome.rows,
            tag: "CALL".into(),
        })
    }

    /// A stored procedure: its arguments evaluated here, its body applied as one command.
    async fn call(&mut self, call: &CallPlan, params: &[Value]) -> SqlResult<StatementResult> {
        if self.transaction.is_some() {
            return Err(SqlError::feature_not_supported(
                "CALL of a stored procedure inside a transaction block (a procedure is its own transaction)",
            ));
        }
        let now = now_micros();
        let args = {
            let env = EvalEnv::without_subqueries(params, now);
            call.args
                .iter()
                .map(|a| a.eval(&[], &env))
                .collect::<SqlResult<Vec<Value>>>()?
        };
        let outcome = self
            .propose(&Command::Procedure {
                steps: call.steps.clone(),
                params: args,
                now_micros: now,
            })
            .await?;
        if call.columns.is_empty() {
            return Ok(StatementResult::Command("CALL".into()));
        }
        Ok(StatementResult::Rows {
            columns: call.columns.clone(),
            rows: outcome.rows,
            tag: "CALL".into(),
        })
    }

    fn set(&mut self, name: &str, value: Option<&str>) -> SqlResult<()> {
        let key = setting_key(name);
        if key == "transaction_isolation" {
            if let (Some(t), Some(v)) = (&mut self.transaction, value) {
                t.isolation = if v.eq_ignore_ascii_case("serializable")
                    || v.eq_ignore_ascii_case("repeatable read")
                {
                    Isolation::Serializable
                } else {
                    Isolation::ReadCommitted
                };
            }
            return Ok(());
        }
        if read_only(&key) {
            return Err(SqlError::new(
                ErrorKind::CannotConnectNow,
                format!("parameter \"{key}\" cannot be changed"),
            ));
        }
        if !SETTINGS.iter().any(|(n, _)| *n == key) && !key.contains('.') {
            return Err(unknown_setting(name));
        }
        match (key.as_str(), value) {
            ("client_encoding", Some(v))
                if !matches!(
                    v.to_ascii_uppercase().as_str(),
                    "UTF8" | "UTF-8" | "UNICODE"
                ) =>
            {
                return Err(SqlError::feature_not_supported(format!(
                    "client_encoding {v}: only UTF8"
                )));
            }
            ("read_consistency", Some(v)) if !matches!(v, "strong" | "weak") => {
                return Err(SqlError::new(
                    ErrorKind::InvalidParameterValue,
                    format!("invalid value for parameter \"read_consistency\": \"{v}\""),
                ));
            }
            _ => {}
        }
        match value {
            Some(v) => self.settings.insert(key, v.to_string()),
            None => self.settings.remove(&key),
        };
        Ok(())
    }

    // ----- executor and log -----

    async fn ask<T: Send + 'static>(
        &self,
        make: impl FnOnce(Box<dyn FnOnce(T) + Send>) -> Request,
    ) -> SqlResult<T> {
        let (tx, rx) = oneshot::channel();
        if !self
            .shared
            .executor
            .send(make(Box::new(move |r| drop(tx.send(r)))))
        {
            return Err(stopped());
        }
        rx.await.map_err(|_| stopped())
    }

    async fn propose(&mut self, command: &Command) -> SqlResult<Outcome> {
        let encoded = encode_command(command);
        // One command is one part of one log entry; the log refuses entries past 64 MiB, and a
        // refused append would stop replication, so a command that large is refused here.
        if encoded.len() > COMMAND_BYTES_MAX {
            return Err(SqlError::new(
                ErrorKind::ProgramLimitExceeded,
                format!(
                    "not supported yet: a write of {} MiB in one command (the limit is {} MiB); split the transaction or statement",
                    encoded.len() >> 20,
                    COMMAND_BYTES_MAX >> 20
                ),
            ));
        }
        let bytes = self
            .shared
            .proposer
            .propose(encoded)
            .await
            .map_err(propose_error)?;
        let outcome = decode_result(&bytes)?;
        self.sequences.absorb(&outcome.sequences);
        Ok(outcome)
    }

    /// A write outside a transaction block: proposed as one command, its INSERT ... VALUES
    /// rows built here when they can be (`ledger::prebuild_insert`), its sequence calls with
    /// this session's values; one that draws random values and cannot be built here goes
    /// through a transaction of its own.
    async fn write_alone(
        &mut self,
        plan: &Arc<WritePlan>,
        params: &[Value],
    ) -> SqlResult<(u64, Vec<Row>)> {
        let now = now_micros();
        let catalog = self.shared.executor.catalog();
        let table = catalog.table_by_id(plan.table().id);
        let calls = |which| table.is_some_and(|t| planner::write_calls(plan, t, which));
        let sequences = !catalog.sequences.is_empty() && calls(Func::uses_sequences);
        let draws_random = calls(Func::draws_random);
        // Only an INSERT ... VALUES can be prebuilt.
        let values = matches!(
            plan.as_ref(),
            WritePlan::Insert(InsertPlan {
                source: InsertSource::Values(_),
                ..
            })
        );
        let prebuilt = (values && !sequences)
            .then(|| ledger::prebuild_insert(plan, &catalog, params, now))
            .flatten()
            .transpose()?;
        let command = match prebuilt {
            Some(prebuilt) => Command::Write {
                // Built rows hold their values: only ON CONFLICT and RETURNING could still
                // read a parameter (a 1,000-row INSERT's 6,000 parameters would otherwise
                // travel in the log and be decoded by the executor for nothing).
                params: match &prebuilt {
                    WritePlan::Insert(p) if p.on_conflict.is_none() && p.returning.is_none() => {
                        Vec::new()
                    }
                    _ => params.to_vec(),
                },
                plan: Arc::new(prebuilt),
                now_micros: now,
            },
            None if draws_random => return self.write_in_own_transaction(plan, params).await,
            None if sequences => Command::WriteWithSequences {
                plan: plan.clone(),
                params: params.to_vec(),
                now_micros: now,
                session: self.sequences.clone(),
            },
            None => Command::Write {
                plan: plan.clone(),
                params: params.to_vec(),
                now_micros: now,
            },
        };
        let outcome = self.propose(&command).await?;
        Ok((outcome.rows_affected, outcome.rows))
    }

    /// `SELECT pg_advisory_lock(key)` and the other advisory lock functions: the lock
    /// table is the node's (`Shared::advisory_locks`); a transaction-level lock outside a
    /// transaction block is given back when the statement ends, as in PostgreSQL.
    async fn advisory_lock(
        &mut self,
        call: &planner::AdvisoryLockCall,
        params: &[Value],
    ) -> SqlResult<StatementResult> {
        use planner::AdvisoryAction as A;
        let key = {
            let env = EvalEnv::without_subqueries(params, now_micros());
            call.key
                .iter()
                .map(|e| e.eval(&[], &env))
                .collect::<SqlResult<Vec<Value>>>()?
        };
        let answer = |v: Value| StatementResult::Rows {
            columns: vec![call.column.clone()],
            rows: vec![vec![v]],
            tag: "SELECT".into(),
        };
        let key = match key.as_slice() {
            [] => None,
            [Value::Int(k)] => Some(LockKey::Big(*k)),
            [Value::Int(a), Value::Int(b)] => Some(LockKey::Pair(*a as i32, *b as i32)),
            // The functions are strict: a NULL key locks nothing.
            _ => return Ok(answer(Value::Null)),
        };
        let in_block = self.transaction.is_some();
        let holder = Holder {
            session: self.id,
            transaction: call.transaction && in_block,
        };
        let locks = &self.shared.advisory_locks;
        let result = match (call.action, key) {
            (A::UnlockAll, _) => {
                locks.unlock_all(self.id, Some(false));
                Value::Text(String::new())
            }
            (_, None) => return Err(SqlError::internal("an advisory lock without a key")),
            (A::Lock, Some(key)) => {
                locks.lock(holder, key, call.shared).await;
                Value::Text(String::new())
            }
            (A::TryLock, Some(key)) => Value::Bool(locks.try_lock(holder, key, call.shared)),
            (A::Unlock, Some(key)) => {
                let held = locks.unlock(holder, key, call.shared);
                if !held {
                    let mode = if call.shared {
                        "ShareLock"
                    } else {
                        "ExclusiveLock"
                    };
                    self.notices
                        .push(format!("you don't own a lock of type {mode}"));
                }
                Value::Bool(held)
            }
        };
        // A transaction-level lock outside a transaction block: the statement was its
        // transaction, which has ended.
        let taken = matches!(call.action, A::Lock) || matches!(result, Value::Bool(true));
        if call.transaction && !in_block && taken {
            if let Some(key) = key {
                locks.unlock(holder, key, call.shared);
            }
        }
        Ok(answer(result))
    }

    /// NOTIFY or `SELECT pg_notify(...)`: delivered to the listening sessions at once, or
    /// when the transaction block commits (nothing if it rolls back), as in PostgreSQL.
    fn notify(
        &mut self,
        call: &planner::NotifyCall,
        params: &[Value],
    ) -> SqlResult<StatementResult> {
        let env = EvalEnv::without_subqueries(params, now_micros());
        let text = |e: &planner::Expr| -> SqlResult<Option<String>> {
            Ok(match e.eval(&[], &env)? {
                Value::Null => None,
                v => Some(v.to_pg_text(DataType::Text).unwrap_or_default()),
            })
        };
        let channel = text(&call.channel)?.unwrap_or_default();
        let payload = text(&call.payload)?.unwrap_or_default();
        if channel.is_empty() {
            return Err(SqlError::new(
                ErrorKind::InvalidParameterValue,
                "channel name cannot be empty",
            ));
        }
        if payload.len() > MAX_PAYLOAD_BYTES {
            return Err(SqlError::new(
                ErrorKind::InvalidParameterValue,
                "payload string too long",
            ));
        }
        let n = Notification {
            pid: self.pid,
            channel,
            payload,
        };
        match &mut self.transaction {
            Some(t) if !t.notifies.contains(&n) => t.notifies.push(n),
            Some(_) => {}
            None => self.shared.notifications.notify(&n),
        }
        Ok(match &call.column {
            Some(column) => StatementResult::Rows {
                columns: vec![column.clone()],
                rows: vec![vec![Value::Text(String::new())]],
                tag: "SELECT".into(),
            },
            None => StatementResult::Command("NOTIFY".into()),
        })
    }

    /// Gives back the transaction-level advisory locks when a transaction ends.
    fn release_transaction_locks(&self) {
        self.shared.advisory_locks.unlock_all(self.id, Some(true));
    }

    /// A write outside a transaction block that draws random values and cannot be built
    /// before it is proposed (an INSERT ... SELECT, defaults that also call `nextval`):
    /// staged as a transaction of its own, so its rows are drawn once on the executor and
    /// the commit carries them to every replica, then committed at once. Its reads are
    /// not validated (READ COMMITTED), as a statement on its own reads one snapshot.
    async fn write_in_own_transaction(
        &mut self,
        plan: &Arc<WritePlan>,
        params: &[Value],
    ) -> SqlResult<(u64, Vec<Row>)> {
        self.transaction = Some(Transaction::new(Isolation::ReadCommitted, false));
        let staged = self.stage(plan.clone(), params).await;
        let result = match staged {
            Ok(staged) => self.commit().await.map(|_| staged),
            Err(e) => Err(e),
        };
        self.transaction = None;
        result
    }

    fn overlay(&self) -> Option<Arc<Overlay>> {
        self.transaction
            .as_ref()
            .filter(|t| !t.overlay.is_empty())
            .map(|t| t.overlay.clone())
    }

    /// Whether the statement's reads are recorded to be checked at COMMIT: every read of a
    /// SERIALIZABLE transaction, and in any transaction block those of SELECT ... FOR
    /// UPDATE/FOR SHARE. Rows are not locked: instead a transaction whose locking read
    /// another transaction has changed since fails at COMMIT (40001), so two transactions
    /// that read the same row FOR UPDATE and then change it cannot both commit.
    fn record_reads(&self) -> bool {
        self.transaction
            .as_ref()
            .is_some_and(|t| t.isolation == Isolation::Serializable || self.locking_read)
    }

    fn statement_time(&self) -> i64 {
        self.transaction
            .as_ref()
            .map(|t| t.now_micros)
            .unwrap_or_else(now_micros)
    }

    async fn select(&mut self, plan: &Arc<SelectPlan>, params: &[Value]) -> SqlResult<Vec<Row>> {
        if planner::rel_calls(&plan.rel, Func::advances_sequences) {
            return self.select_advancing_sequences(plan, params).await;
        }
        let activity = planner::reads_system_table(&plan.rel, planner::SystemTable::PgStatActivity);
        if activity && plan.reads_user_tables {
            return Err(SqlError::feature_not_supported(
                "pg_stat_activity in a query that also reads tables",
            ));
        }
        if !plan.reads_user_tables {
            let mut catalog = self.catalog();
            if activity {
                let mut with_sessions = (*catalog).clone();
                with_sessions.activity = Arc::new(self.shared.activity.snapshot());
                catalog = Arc::new(with_sessions);
            }
            return ledger::evaluate_without_storage(
                plan,
                &catalog,
                params,
                self.statement_time(),
                &self.sequences,
                &self.shared.activity,
            );
        }
        let (overlay, record, now) = (self.overlay(), self.record_reads(), self.statement_time());
        let schema = self.schema_changes()?;
        let plan = plan.clone();
        let params = params.to_vec();
        let sequences = self.sequences.clone();
        let result: QueryResult = self
            .ask(move |reply| Request::Query {
                plan,
                params,
                now_micros: now,
                overlay,
                record_reads: record,
                schema,
                sequences,
                reply,
            })
            .await??;
        if let Some(t) = &mut self.transaction {
            t.reads.extend(result.reads);
        }
        Ok(result.rows)
    }

    /// A query calling `nextval` or `setval` runs in log order, as a write does.
    async fn select_advancing_sequences(
        &mut self,
        plan: &Arc<SelectPlan>,
        params: &[Value],
    ) -> SqlResult<Vec<Row>> {
        if let Some(t) = &self.transaction {
            if t.read_only {
                return Err(read_only_error("nextval()"));
            }
            // Applied in log order, the query reads what is committed: what a READ COMMITTED
            // statement may see, unless the transaction has writes of its own to see.
            if plan.reads_user_tables && (self.overlay().is_some() || self.record_reads()) {
                return Err(SqlError::feature_not_supported(
                    "nextval() or setval() in a query that reads tables inside a transaction block that has written or is SERIALIZABLE",
                ));
            }
        }
        if self
            .transaction
            .as_ref()
            .is_some_and(|t| t.schema.is_some())
        {
            return Err(SqlError::feature_not_supported(
                "nextval() or setval() in a SELECT inside a transaction block that changed the schema",
            ));
        }
        let outcome = self
            .propose(&Command::QueryWithSequences {
                plan: plan.clone(),
                params: params.to_vec(),
                now_micros: self.statement_time(),
                session: self.sequences.clone(),
            })
            .await?;
        Ok(outcome.rows)
    }

    async fn stage(
        &mut self,
        plan: Arc<WritePlan>,
        params: &[Value],
    ) -> SqlResult<(u64, Vec<Row>)> {
        let catalog = self.catalog();
        let plan = match catalog.table_by_id(plan.table().id) {
            Some(table) => self.with_source_rows(plan, table, params).await?,
            None => plan,
        };
        let (overlay, record, now) = (self.overlay(), self.record_reads(), self.statement_time());
        let mut sequences = ledger::StatementValues {
            session: self.sequences.clone(),
            allocated: BTreeMap::new(),
        };
        if let Some(table) = catalog.table_by_id(plan.table().id) {
            let overlay_len = overlay.as_ref().map(|o| o.len()).unwrap_or(0);
            if let Some(local) =
                ledger::stage_insert_locally(&plan, table, params, now, overlay_len)
            {
                return self.absorb(local?);
            }
            if planner::write_calls(&plan, table, Func::advances_sequences) {
                sequences.allocated = self
                    .allocate_sequence_values(&plan, table, &catalog)
                    .await?;
            }
        }
        let params = params.to_vec();
        let schema = self.schema_changes()?;
        let staged: Staged = self
            .ask(move |reply| Request::Stage {
                plan,
                params,
                now_micros: now,
                overlay,
                record_reads: record,
                schema,
                sequences,
                reply,
            })
            .await??;
        self.absorb(staged)
    }

    /// An `INSERT ... SELECT` whose defaults call `nextval` (SQLAlchemy's many-row INSERT
    /// of a SERIAL table), with the SELECT's rows read now, so the statement knows how many
    /// values to allocate before it is staged; other statements as they are.
    async fn with_source_rows(
        &mut self,
        plan: Arc<WritePlan>,
        table: &TableDef,
        params: &[Value],
    ) -> SqlResult<Arc<WritePlan>> {
        let WritePlan::Insert(insert) = plan.as_ref() else {
            return Ok(plan);
        };
        let InsertSource::Query(rel) = &insert.source else {
            return Ok(plan);
        };
        if planner::rel_calls(rel, Func::advances_sequences)
            || !planner::write_calls(&plan, table, Func::advances_sequences)
        {
            return Ok(plan);
        }
        let query = Arc::new(SelectPlan {
            rel: (**rel).clone(),
            columns: Vec::new(),
            reads_user_tables: true,
        });
        let rows = self.select(&query, params).await?;
        let mut insert = insert.clone();
        insert.source = InsertSource::Values(
            rows.into_iter()
                .map(|row| row.into_iter().map(Expr::literal).collect())
                .collect(),
        );
        Ok(Arc::new(WritePlan::Insert(insert)))
    }

    /// The values a staged statement's `nextval` calls will take, allocated now through
    /// the log (so they are never handed out twice, as PostgreSQL's are not, whether or
    /// not the transaction commits).
    async fn allocate_sequence_values(
        &mut self,
        plan: &WritePlan,
        table: &planner::TableDef,
        catalog: &planner::Catalog,
    ) -> SqlResult<BTreeMap<u32, VecDeque<i64>>> {
        let calls = planner::nextval_calls(plan, table, catalog)?;
        let setval = planner::write_calls(plan, table, |f| f == Func::SetVal);
        let Some(calls) = calls.filter(|_| !setval) else {
            return Err(SqlError::feature_not_supported(
                "nextval() or setval() inside a transaction block other than in INSERT ... VALUES, INSERT ... SELECT (whose SELECT does not call them) or a SELECT that reads no table",
            ));
        };
        // A sequence this transaction made exists for it alone until COMMIT: its values are
        // drawn here, and its state goes into the COMMIT. The others' come from the log.
        let shared = self.shared.executor.catalog();
        let oid = |id: u32| Value::Int((planner::FIRST_USER_OID + id) as i64);
        let mut allocated: BTreeMap<u32, VecDeque<i64>> = BTreeMap::new();
        let mut from_log = Vec::new();
        for (id, n) in calls {
            if shared.sequence_named(&oid(id)).is_ok() {
                from_log.push((id, n as u64));
                continue;
            }
            let sequence = catalog.sequence_named(&oid(id))?;
            let Some(t) = &mut self.transaction else {
                return Err(SqlError::internal(
                    "a transaction's own sequence outside it",
                ));
            };
            let mut state = t
                .own_sequences
                .get(&id)
                .copied()
                .unwrap_or_else(|| sequence.initial_state());
            let values = allocated.entry(id).or_default();
            for _ in 0..n {
                state = sequence.next(state)?;
                values.push_back(state.last);
            }
            t.own_sequences.insert(id, state);
        }
        if from_log.is_empty() {
            return Ok(allocated);
        }
        let outcome = self
            .propose(&Command::AllocateSequenceValues {
                sequences: from_log,
            })
            .await?;
        for row in outcome.rows {
            if let [Value::Int(id), Value::Int(value)] = row.as_slice() {
                allocated.entry(*id as u32).or_default().push_back(*value);
            }
        }
        Ok(allocated)
    }

    /// Adds a staged statement's writes, overlay rows and reads to the transaction.
    /// Returns what the statement reports: rows affected and RETURNING rows.
    fn absorb(&mut self, staged: Staged) -> SqlResult<(u64, Vec<Row>)> {
        let Some(t) = &mut self.transaction else {
            return Err(SqlError::internal("staging outside a transaction"));
        };
        let overlay = Arc::make_mut(&mut t.overlay);
        overlay.extend(staged.overlay);
        t.reads.extend(staged.reads);
        t.ops.extend(staged.ops);
        self.sequences.absorb(&staged.sequences);
        Ok((staged.rows_affected, staged.rows))
    }

    async fn write(
        &mut self,
        plan: &Arc<WritePlan>,
        columns: &[OutputColumn],
        params: &[Value],
    ) -> SqlResult<StatementResult> {
        let (affected, rows) = match &self.transaction {
            Some(t) if t.read_only => return Err(read_only_error(plan.verb())),
            Some(_) => self.stage(plan.clone(), params).await?,
            None => self.write_alone(plan, params).await?,
        };
        let verb = plan.verb();
        if plan.returning().is_some() || verb == "CALL" {
            let tag = if verb == "INSERT" {
                "INSERT 0".to_string()
            } else {
                verb.to_string()
            };
            return Ok(StatementResult::Rows {
                columns: columns.to_vec(),
                rows,
                tag,
            });
        }
        Ok(StatementResult::Command(match verb {
            "INSERT" => format!("INSERT 0 {affected}"),
            other => format!("{other} {affected}"),
        }))
    }

    async fn ddl(&mut self, ddl: &DdlPlan) -> SqlResult<StatementResult> {
        let tag = match ddl {
            DdlPlan::CreateTable { .. } => "CREATE TABLE",
            DdlPlan::DropTables { .. } => "DROP TABLE",
            DdlPlan::Truncate { .. } => "TRUNCATE TABLE",
            DdlPlan::AddPrimaryKey { .. } => "ALTER TABLE",
            DdlPlan::CreateIndex { .. } | DdlPlan::CreateDerivedIndex { .. } => "CREATE INDEX",
            DdlPlan::DropIndexes { .. } => "DROP INDEX",
            DdlPlan::CreateProcedure { .. } => "CREATE PROCEDURE",
            DdlPlan::DropProcedures { .. } => "DROP PROCEDURE",
            DdlPlan::AlterTable { .. } => "ALTER TABLE",
            DdlPlan::CreateView { .. } => "CREATE VIEW",
            DdlPlan::DropViews { .. } => "DROP VIEW",
            DdlPlan::CreateEnum { .. } => "CREATE TYPE",
            DdlPlan::AlterEnum { .. } => "ALTER TYPE",
            DdlPlan::DropEnums { .. } => "DROP TYPE",
            DdlPlan::CreateSequence { .. } => "CREATE SEQUENCE",
            DdlPlan::DropSequences { .. } => "DROP SEQUENCE",
            DdlPlan::AlterSequence { .. } => "ALTER SEQUENCE",
            DdlPlan::WithSequences { ddl, .. } => match ddl.as_ref() {
                DdlPlan::CreateTable { .. } => "CREATE TABLE",
                _ => "ALTER TABLE",
            },
            DdlPlan::WithForeignKeys { .. } => "CREATE TABLE",
            DdlPlan::AddForeignKey { .. }
            | DdlPlan::DropForeignKey { .. }
            | DdlPlan::AddUniqueConstraint { .. } => "ALTER TABLE",
        };
        if let Some(t) = &self.transaction {
            if t.read_only {
                return Err(read_only_error(tag));
            }
            let DdlPlan::Truncate { tables } = ddl else {
                let plan = with_constants_bound(ddl)?;
                self.plan_schema_change(plan).await?;
                return Ok(StatementResult::Command(tag.into()));
            };
            // Inside a transaction TRUNCATE deletes the rows it sees, so it commits or rolls
            // back with the rest of the transaction.
            for table in tables {
                let plan = WritePlan::Delete(planner::DeletePlan {
                    table: table.clone(),
                    access: planner::Access::Full,
                    filter: None,
                    returning: None,
                });
                self.stage(Arc::new(plan), &[]).await?;
            }
            return Ok(StatementResult::Command(tag.into()));
        }
        let plan = with_constants_bound(ddl)?;
        self.propose(&Command::Ddl { plan }).await?;
        Ok(StatementResult::Command(tag.into()))
    }

    /// A schema change inside a transaction block: tried now after the transaction's earlier
    /// ones (its errors come now), kept to apply at COMMIT; later statements see its catalog.
    async fn plan_schema_change(&mut self, plan: DdlPlan) -> SqlResult<()> {
        let shared_version = self.shared.executor.catalog().version;
        let Some(t) = &self.transaction else {
            return Err(SqlError::internal(
                "a schema change planned outside a transaction",
            ));
        };
        let mut changes = match &t.schema {
            Some(s) => (**s).clone(),
            None => SchemaChanges {
                base_version: shared_version,
                changes: Vec::new(),
                catalog: self.shared.executor.catalog(),
            },
        };
        if let DdlPlan::AlterSequence { sequence, .. } = &plan {
            if t.own_sequences.contains_key(&sequence.id) {
                return Err(SqlError::feature_not_supported(
                    "ALTER SEQUENCE of a sequence this transaction block created and drew values from (commit first)",
                ));
            }
        }
        changes.changes.push((t.ops.len(), plan));
        let (schema, _) = changes.steps(&t.ops, &t.own_sequences);
        let schema = Arc::new(schema);
        let catalog = self
            .ask(|reply| Request::PlanSchemaChanges { schema, reply })
            .await??;
        let mut catalog = (*catalog).clone();
        catalog.version =
            TRANSACTION_CATALOG_VERSION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        changes.catalog = Arc::new(catalog);
        if let Some(t) = &mut self.transaction {
            t.schema = Some(Arc::new(changes));
            // The writes so far now apply before the change: statements see them there.
            t.overlay = Arc::new(Overlay::new());
        }
        Ok(())
    }

    /// The catalog statements are bound against: the open transaction's, after its schema
    /// changes, else the shared one.
    pub fn catalog(&self) -> Arc<Catalog> {
        match self.transaction.as_ref().and_then(|t| t.schema.as_ref()) {
            Some(schema) => schema.catalog.clone(),
            None => self.shared.executor.catalog(),
        }
    }

    /// The open transaction's schema changes with the writes made before each, which its
    /// reads and staged writes must see. A SERIALIZABLE transaction reads nothing after a
    /// schema change: its reads are validated before the changes apply.
    fn schema_changes(&self) -> SqlResult<Option<Arc<ledger::SchemaChanges>>> {
        let Some(t) = &self.transaction else {
            return Ok(None);
        };
        let Some(schema) = &t.schema else {
            return Ok(None);
        };
        if t.isolation == Isolation::Serializable {
            return Err(SqlError::feature_not_supported(
                "reading or writing tables after a schema change in a SERIALIZABLE transaction block",
            ));
        }
        Ok(Some(Arc::new(schema.steps(&t.ops, &t.own_sequences).0)))
    }

    /// The open transaction, for a statement that only runs inside one.
    fn transaction_for(&mut self, statement: &str) -> SqlResult<&mut Transaction> {
        self.transaction.as_mut().ok_or_else(|| {
            SqlError::new(
                ErrorKind::NoActiveTransaction,
                format!("{statement} can only be used in transaction blocks"),
            )
        })
    }

    async fn commit(&mut self) -> SqlResult<StatementResult> {
        self.release_transaction_locks();
        let Some(mut t) = self.transaction.take() else {
            self.notices
                .push("there is no transaction in progress".into());
            return Ok(StatementResult::TransactionEnd("COMMIT".into()));
        };
        if self.failed {
            self.failed = false;
            return Ok(StatementResult::TransactionEnd("ROLLBACK".into()));
        }
        let notifies = std::mem::take(&mut t.notifies);
        let committed = self.commit_transaction(t).await?;
        for n in &notifies {
            self.shared.notifications.notify(n);
        }
        Ok(committed)
    }

    /// Proposes what a transaction block did, if anything, for its COMMIT.
    async fn commit_transaction(&mut self, t: Transaction) -> SqlResult<StatementResult> {
        if let Some(schema) = t.schema {
            let (schema, ops) = schema.steps(&t.ops, &t.own_sequences);
            self.propose(&Command::CommitWithSchema {
                schema,
                isolation: t.isolation,
                reads: t.reads,
                ops,
                now_micros: now_micros(),
            })
            .await?;
            return Ok(StatementResult::TransactionEnd("COMMIT".into()));
        }
        // Reads are recorded under SERIALIZABLE and for SELECT ... FOR UPDATE; a READ
        // COMMITTED transaction's locking reads matter only to its writes.
        let needs_validation =
            !t.reads.is_empty() && (t.isolation == Isolation::Serializable || !t.ops.is_empty());
        if t.ops.is_empty() && !needs_validation {
            return Ok(StatementResult::TransactionEnd("COMMIT".into()));
        }
        self.propose(&Command::Commit {
            isolation: t.isolation,
            reads: t.reads,
            ops: t.ops,
            now_micros: now_micros(),
        })
        .await?;
        Ok(StatementResult::TransactionEnd("COMMIT".into()))
    }

    // ----- COPY FROM STDIN -----

    pub fn copy_data(&mut self, data: &[u8]) {
        let Some(copy) = &mut self.copy else { return };
        if copy.error.is_some() {
            return;
        }
        copy.bytes += data.len();
        if copy.bytes > COPY_BYTES_MAX {
            copy.error = Some(SqlError::new(
                ErrorKind::ProgramLimitExceeded,
                format!(
                    "not supported yet: COPY of more than {} MiB in one statement; split the data",
                    COPY_BYTES_MAX >> 20
                ),
            ));
            return;
        }
        copy.partial.extend_from_slice(data);
        let mut start = 0;
        while let Some(nl) = copy.partial[start..].iter().position(|&b| b == b'\n') {
            let line = copy.partial[start..start + nl].to_vec();
            start += nl + 1;
            if let Err(e) = copy_line(copy, &line) {
                copy.error = Some(e);
                return;
            }
        }
        copy.partial.drain(..start);
    }

    pub fn copy_fail(&mut self) {
        self.copy = None;
    }

    /// Finishes COPY: all rows become one command (or staged writes in a transaction).
    pub async fn copy_done(&mut self) -> SqlResult<u64> {
        let Some(mut copy) = self.copy.take() else {
            return Err(SqlError::new(
                ErrorKind::ProtocolViolation,
                "no COPY in progress",
            ));
        };
        if !copy.partial.is_empty() && copy.error.is_none() {
            let line = std::mem::take(&mut copy.partial);
            if let Err(e) = copy_line(&mut copy, &line) {
                copy.error = Some(e);
            }
        }
        if let Some(e) = copy.error {
            if self.transaction.is_some() {
                self.failed = true;
            }
            return Err(e);
        }
        let count = copy.rows.len() as u64;
        let table = copy.plan.table.reference();
        // Rows whose defaults draw random values are inserted as an INSERT ... VALUES is,
        // which draws them once, before the rows are proposed or staged.
        let defaults_draw_random = copy.plan.table.columns.iter().enumerate().any(|(i, c)| {
            !copy.plan.columns.contains(&i)
                && c.default
                    .as_ref()
                    .is_some_and(|d| d.calls(Func::draws_random))
        });
        if self.transaction.is_some() || defaults_draw_random {
            let rows = copy
                .rows
                .into_iter()
                .map(|r| {
                    r.into_iter()
                        .map(|v| Expr::Literal(v, DataType::Unknown))
                        .collect()
                })
                .collect();
            let plan = WritePlan::Insert(InsertPlan {
                table,
                source: InsertSource::Values(rows),
                target_columns: copy.plan.columns.clone(),
                on_conflict: None,
                returning: None,
                call: false,
            });
            if self.transaction.is_none() {
                return Ok(self.write_alone(&Arc::new(plan), &[]).await?.0);
            }
            if let Err(e) = self.stage(Arc::new(plan), &[]).await {
                self.failed = true;
                return Err(e);
            }
            return Ok(count);
        }
        self.propose(&Command::Copy {
            table,
            columns: copy.plan.columns.clone(),
            rows: copy.rows,
            now_micros: now_micros(),
        })
        .await?;
        Ok(count)
    }
}

fn unknown_setting(name: &str) -> SqlError {
    SqlError::new(
        ErrorKind::UndefinedObject,
        format!("unrecognized configuration parameter \"{name}\""),
    )
}

/// The innermost savepoint named `name`.
fn savepoint_position(savepoints: &[Savepoint], name: &str) -> SqlResult<usize> {
    savepoints
        .iter()
        .rposition(|s| s.name == name)
        .ok_or_else(|| {
            SqlError::new(
                ErrorKind::InvalidSavepoint,
                format!("savepoint \"{name}\" does not exist"),
            )
        })
}

fn read_only_error(what: &str) -> SqlError {
    SqlError::new(
        ErrorKind::ReadOnlyTransaction,
        format!("cannot execute {what} in a read-only transaction"),
    )
}

/// Parses one line of COPY input into a row.
fn copy_line(copy: &mut CopyState, line: &[u8]) -> SqlResult<()> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line == b"\\." {
        return Ok(());
    }
    if copy.header_pending {
        copy.header_pending = false;
        return Ok(());
    }
    let text = std::str::from_utf8(line)
        .map_err(|_| SqlError::invalid_text("invalid UTF-8 in COPY data"))?;
    let format = &copy.plan.format;
    let fields: Vec<Option<String>> = if format.csv {
        csv_fields(text, format.delimiter, &format.null)
    } else {
        text_fields(text, format.delimiter, &format.null)
    };
    let table = &copy.plan.table;
    if fields.len() != copy.plan.columns.len() {
        let what = if fields.len() < copy.plan.columns.len() {
            "missing data for a column"
        } else {
            "extra data after last expected column"
        };
        return Err(SqlError::new(
            ErrorKind::InvalidText,
            format!("{what} (COPY {}, line {})", table.name, copy.rows.len() + 1),
        ));
    }
    let mut row = Vec::with_capacity(fields.len());
    for ((f, &c), labels) in fields
        .into_iter()
        .zip(&copy.plan.columns)
        .zip(&copy.plan.enums)
    {
        row.push(match (f, labels) {
            (None, _) => Value::Null,
            (Some(s), Some(def)) => def.value(s)?,
            (Some(s), None) => Value::parse_text(&s, table.columns[c].ty)?,
        });
    }
    copy.rows.push(row);
    Ok(())
}

/// A schema change as proposed: an added column's default is computed once, here, so
/// `now()` is this statement's time on every replica.
fn with_constants_bound(ddl: &DdlPlan) -> SqlResult<DdlPlan> {
    let mut plan = ddl.clone();
    let alter = match &mut plan {
        DdlPlan::WithSequences { ddl, .. } => ddl.as_mut(),
        other => other,
    };
    if let DdlPlan::AlterTable {
        rows: planner::RowChange::Rebuild(sources),
        ..
    } = alter
    {
        let now = now_micros();
        for source in sources {
            if let planner::ColumnSource::Value(e) = source {
                *e = e.bind_constants(&[], now)?;
            }
        }
    }
    Ok(plan)
}

impl Drop for Session {
    /// A session's advisory locks, channels and `pg_stat_activity` row go with it (a closed
    /// connection, a session replaced at startup).
    fn drop(&mut self) {
        self.shared.activity.remove(self.id);
        self.shared.advisory_locks.unlock_all(self.id, None);
        self.shared.notifications.unlisten(self.id, None);
    }
}
