//! A client session: its transaction (reads and buffered writes, no locks held), its
//! settings, an in-progress COPY, and running one bound statement to a result.
//!
//! Here: the session's state, `execute` (one bound statement, dispatched by plan) and the
//! two ways to the executor (`ask` a request, `propose` a command through the log). By job:
//! `transaction` (the state machine: blocks and implicit transactions, COMMIT, savepoints),
//! `write` and `read` (the statement paths), `copy_from`, `settings` (SET/SHOW; `stats` the
//! server's SHOW lines), `prepare` (SQL prepared statements), `reset` (DISCARD, RESET),
//! `between_sessions` (advisory locks, NOTIFY), `own_sequences` (a transaction's new
//! sequences in a SELECT).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ledger::{
    decode_result, encode_command, Command, ExecutorHandle, Outcome, Overlay, QueryResult,
    ReadCheck, Request, Row, Staged, StatementContext, WriteOp,
};
use plan::{
    explain, Bound, CallPlan, Catalog, CopyPlan, DdlPlan, EvalEnv, Expr, Func, InsertPlan,
    InsertSource, Isolation, LedgerBatchPlan, OutputColumn, Plan, SelectPlan, SessionSequences,
    TableDef, WritePlan,
};
use raft::{ProposeError, Proposer};
use sql::{DataType, ErrorKind, SqlError, SqlResult, Value};
use tokio::sync::oneshot;

use crate::activity::{self, Activity};
use crate::advisory_locks::{AdvisoryLocks, Holder, LockKey};
use crate::copy_format::{csv_fields, header_line, row_line, text_fields};
use crate::notifications::{Inbox, Notification, Notifications, MAX_PAYLOAD_BYTES};
use crate::statements::Statements;

mod between_sessions;
mod cluster_change;
mod copy_from;
mod node_views;
mod own_sequences;
mod prepare;
mod read;
mod reset;
mod settings;
mod stats;
mod timeouts;
mod transaction;
mod write;

use copy_from::CopyState;
pub(crate) use node_views::{gather as gather_node_views, stage_totals};
use settings::SettingChange;
use settings::{setting_key, SETTINGS};
pub use transaction::Block;
use transaction::Transaction;

/// What the whole server shares with every session.
pub struct Shared {
    pub executor: ExecutorHandle,
    pub proposer: Proposer,
    /// What a strong read waits for in a cluster (nothing on a single node).
    pub read_barrier: raft::ReadBarrier,
    /// The replication group as this node sees it (`hotledger.cluster`).
    pub cluster_status: raft::ClusterStatus,
    /// Entries and fsyncs of the Raft log, for `SHOW group_commit_stats`.
    pub log_stats: Arc<raft::LogStats>,
    /// The advisory locks of this node's sessions.
    pub advisory_locks: AdvisoryLocks,
    /// Who LISTENs on which channel, on this node.
    pub notifications: Notifications,
    /// What the node's client sessions are doing (`pg_stat_activity`).
    pub activity: Activity,
    /// Adding and removing the cluster's members (`CALL hotledger.add_node`).
    pub membership: raft::Membership,
    /// `--max-connections`, as SHOW shows it.
    pub max_connections: usize,
    /// What the node counts and measures (`hotledger.metrics`, `/metrics`).
    pub metrics: Arc<crate::metrics::NodeMetrics>,
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
    /// The settings the client gave at startup, which RESET and DISCARD ALL go back to.
    startup_settings: BTreeMap<String, String>,
    /// The connection's named prepared statements (the protocol's and SQL PREPARE's).
    pub statements: Statements,
    /// Prepared statements bound in an earlier generation are bound again at their next
    /// run (`DISCARD PLANS` starts a new one).
    plan_generation: u64,
    /// DISCARD ALL ran: the connection's portals are to be closed.
    portals_discarded: bool,
    copy: Option<CopyState>,
    /// What this session's `nextval` calls left, for `currval` and `lastval`.
    sequences: SessionSequences,
    /// Warnings to send before the statement's result.
    pub notices: Vec<SqlError>,
    /// The statement being run is a SELECT ... FOR UPDATE/FOR SHARE.
    locking_read: bool,
    /// What stops the statements of the query message being run (`begin_query`).
    interrupt: plan::Interrupt,
    /// How other sessions, the watchdog and the connection loop reach this connection.
    control: Option<Arc<activity::ConnectionControl>>,
    /// The role the session logged in as (`session_user`, and `current_user`): its
    /// privileges are what every statement is checked against.
    role: u32,
    /// Read-only whatever the session SETs (`lock_writes`).
    writes_locked: bool,
}

/// The OID of the role a session logs in as, `user` of its startup message: the bootstrap
/// superuser for a session with no user (the server's own, running migrations). A role
/// dropped since it logged in has no OID any role has, so no privilege.
pub fn role_of(catalog: &plan::Catalog, user: Option<&str>) -> u32 {
    match user {
        None => plan::BOOTSTRAP_ROLE_OID,
        Some(user) => catalog.authorization.role(user).map_or(u32::MAX, |r| r.oid),
    }
}

pub fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

impl Session {
    /// In a cluster, a strong read (`read_consistency`, the default) first applies every
    /// entry committed before it; a weak one reads what this node has applied.
    async fn read_barrier(&self) -> SqlResult<()> {
        if !self.shared.read_barrier.in_cluster()
            || self.setting("read_consistency").as_deref() == Some("weak")
        {
            return Ok(());
        }
        self.shared.read_barrier.wait().await.map_err(propose_error)
    }
}

fn propose_error(e: ProposeError) -> SqlError {
    match e {
        ProposeError::NotLeader => SqlError::new(ErrorKind::SerializationFailure, e.to_string()),
        ProposeError::Unknown(m) => SqlError::new(ErrorKind::StatementCompletionUnknown, m),
        ProposeError::Stopped => SqlError::new(
            ErrorKind::AdminShutdown,
            "terminating connection due to administrator command",
        ),
        ProposeError::Raft(m) => {
            SqlError::new(ErrorKind::Io, format!("the replicated log failed: {m}"))
        }
    }
}

/// Sends the executor the request `make` builds around its reply, and waits for the reply.
pub(crate) async fn ask_executor<T: Send + 'static>(
    executor: &ExecutorHandle,
    make: impl FnOnce(Box<dyn FnOnce(T) + Send>) -> Request,
) -> SqlResult<T> {
    let (tx, rx) = oneshot::channel();
    if !executor.send(make(Box::new(move |r| drop(tx.send(r))))) {
        return Err(stopped());
    }
    rx.await.map_err(|_| stopped())
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
        let options = startup
            .get("options")
            .map(|o| settings::startup_options(o))
            .unwrap_or_default();
        let catalog = shared.executor.catalog();
        let role = role_of(&catalog, startup.get("user").map(String::as_str));
        // The role's own defaults (ALTER ROLE ... SET), which the client's startup settings
        // override, as in PostgreSQL.
        let role_settings = catalog
            .authorization
            .role_by_oid(role)
            .map(|r| r.settings.clone())
            .unwrap_or_default();
        for (k, v) in role_settings
            .iter()
            .chain(startup.iter())
            .chain(options.iter().map(|(k, v)| (k, v)))
        {
            let key = setting_key(k);
            let valid = !timeouts::TIMEOUTS.contains(&key.as_str())
                || timeouts::milliseconds(&key, v).is_ok();
            // The role is the one that logged in: `SET ROLE` chooses another, with its checks.
            if valid && key != "role" && SETTINGS.iter().any(|(n, _)| *n == key) {
                settings.insert(key, v.clone());
            }
        }
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let now = now_micros();
        let record = Arc::new(std::sync::Mutex::new(plan::SessionActivity {
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
            shared.metrics.session_opened();
        }
        Session {
            shared,
            id,
            pid,
            inbox,
            activity: record,
            transaction: None,
            failed: false,
            startup_settings: settings.clone(),
            settings,
            statements: Statements::default(),
            plan_generation: 0,
            portals_discarded: false,
            copy: None,
            sequences: SessionSequences::default(),
            notices: Vec::new(),
            locking_read: false,
            interrupt: plan::Interrupt::new(),
            control: None,
            role,
            writes_locked: false,
        }
    }

    /// Who the session's statements are bound for: its client's process id, the role it
    /// runs as and the one it logged in as.
    pub fn bind_context(&self) -> planner::BindContext {
        planner::BindContext {
            backend_pid: self.pid,
            role: self.role(),
            session_role: self.role,
        }
    }

    /// `bind_context` for a statement parsed maybe before the session took its startup
    /// (then the client's process id and user say who it is).
    pub fn bind_context_for(&self, pid: i32, user: Option<&str>) -> planner::BindContext {
        if self.pid != 0 {
            return self.bind_context();
        }
        let role = role_of(&self.catalog(), user);
        planner::BindContext {
            backend_pid: pid,
            role,
            session_role: role,
        }
    }

    /// The role the session runs as: the one `SET ROLE` chose, else the one it logged in
    /// as.
    pub fn role(&self) -> u32 {
        match self.settings.get("role") {
            Some(name) => self
                .catalog()
                .authorization
                .role(name)
                .map_or(u32::MAX, |r| r.oid),
            None => self.role,
        }
    }

    /// Where the client connects from, for `pg_stat_activity`.
    pub fn set_client(&mut self, address: std::net::SocketAddr) {
        let mut a = activity::lock(&self.activity);
        a.client_addr = Some(address.ip().to_string());
        a.client_port = Some(address.port() as i32);
    }

    /// Lets other sessions cancel this one's statements and end its connection, the
    /// watchdog stop them, and the connection loop apply its idle timeouts.
    pub fn attach_control(&mut self, control: Arc<activity::ConnectionControl>) {
        self.shared
            .activity
            .attach_control(self.id, control.clone());
        self.control = Some(control);
        self.publish_idle_timeouts();
    }

    /// A query message (a simple Query, or an Execute) starts: what stops its statements,
    /// which a cancel request for it raises.
    pub fn begin_query(&mut self) -> plan::Interrupt {
        crate::read_pacing::note_statement();
        self.interrupt = plan::Interrupt::new();
        self.interrupt.clone()
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
        drop(a);
        self.publish_idle_timeouts();
    }

    /// Runs one bound statement. An error inside a transaction marks it failed.
    pub async fn execute(&mut self, bound: &Bound, params: &[Value]) -> SqlResult<StatementResult> {
        self.locking_read = bound.locks_rows;
        let timeout = self.timeout("statement_timeout");
        match &self.control {
            Some(control) => control.start_statement(&self.interrupt, timeout),
            None => self.interrupt.clear_timeout(),
        }
        self.notices.extend(bound.notices.iter().cloned());
        let started = std::time::Instant::now();
        let result = match self.interrupt.check() {
            Ok(()) => self.execute_inner(&bound.plan, params).await,
            Err(stop) => Err(stop),
        };
        if self.pid != 0 {
            let kind = crate::metrics::StatementKind::of(&bound.plan);
            self.shared
                .metrics
                .statement(kind, started.elapsed(), result.is_err());
        }
        if let Some(control) = &self.control {
            control.end_statement();
        }
        self.locking_read = false;
        self.end_statement(result.is_err());
        if result.is_err() && self.transaction.is_some() {
            self.failed = true;
        }
        result
    }

    async fn execute_inner(&mut self, plan: &Plan, params: &[Value]) -> SqlResult<StatementResult> {
        self.refuse_when_failed(plan)?;
        if self.locking_read {
            self.refuse_if_read_only("SELECT FOR UPDATE")?;
        }
        let queries = matches!(
            plan,
            Plan::Select(_)
                | Plan::Write(..)
                | Plan::Ddl(_)
                | Plan::Call(_)
                | Plan::LedgerBatch(_)
                | Plan::CopyFrom(_)
                | Plan::CopyTo { .. }
        );
        if let (true, Some(t)) = (queries, &mut self.transaction) {
            t.queried = true;
        }
        match plan {
            Plan::Select(select) => {
                // System views (pg_catalog, hotledger.cluster) describe this node.
                if select.reads_user_tables {
                    self.read_barrier().await?;
                }
                let rows = self.select(select, params).await?;
                Ok(StatementResult::Rows {
                    columns: select.columns.clone(),
                    rows,
                    tag: "SELECT".into(),
                })
            }
            Plan::Write(write, columns) => self.write(write, columns, params).await,
            Plan::Ddl(ddl) => self.ddl(ddl).await,
            Plan::Begin { .. }
            | Plan::Commit
            | Plan::Rollback
            | Plan::Savepoint { .. }
            | Plan::RollbackToSavepoint { .. }
            | Plan::ReleaseSavepoint { .. }
            | Plan::SetTransaction { .. } => self.transaction_control(plan).await,
            Plan::Set { name, value, local } => {
                self.set_scoped(name, value.as_deref(), *local)?;
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
            Plan::ClusterChange(call) => self.cluster_change(call, params).await,
            Plan::SetConfig { name, value, local } => {
                self.set_scoped(name, Some(value), *local)?;
                Ok(StatementResult::Rows {
                    columns: plan.output_columns(),
                    rows: vec![vec![Value::Text(value.clone())]],
                    tag: "SELECT".into(),
                })
            }
            Plan::Reset { name } => {
                self.reset(name.as_deref())?;
                Ok(StatementResult::Command("RESET".into()))
            }
            Plan::Show { name } => self.show(name, plan).await,
            Plan::CopyFrom(copy) => {
                self.refuse_if_read_only("COPY FROM")?;
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
            Plan::Checkpoint => {
                self.ask(|reply| Request::Checkpoint { reply }).await??;
                Ok(StatementResult::Command("CHECKPOINT".into()))
            }
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
            Plan::Prepare {
                name,
                statement,
                hints,
                bound,
            } => self.prepare(name, statement, hints, bound),
            Plan::Execute { name, args } => self.execute_prepared(name, args, params).await,
            Plan::Deallocate { name } => self.deallocate(name.as_deref()),
            Plan::Discard(what) => self.discard(*what),
            Plan::Call(call) => self.call(call, params).await,
            Plan::LedgerBatch(batch) => self.ledger_batch(batch, params).await,
        }
    }

    // ----- executor and log -----

    async fn ask<T: Send + 'static>(
        &self,
        make: impl FnOnce(Box<dyn FnOnce(T) + Send>) -> Request,
    ) -> SqlResult<T> {
        ask_executor(&self.shared.executor, make).await
    }

    async fn propose(&mut self, command: &Command) -> SqlResult<Outcome> {
        let encoded = encode_command(command);
        // One command is one part of one log entry; the log refuses entries past 64 MiB, and a
        // refused append would stop replication, so a command that large is refused here.
        if encoded.len() > ledger::COMMAND_BYTES_MAX {
            return Err(ledger::command_too_large(encoded.len()));
        }
        let proposed = std::time::Instant::now();
        let bytes = self.propose_interruptibly(encoded).await?;
        let outcome = decode_result(&bytes)?;
        self.shared.metrics.commit(proposed.elapsed());
        self.sequences.absorb(&outcome.sequences);
        Ok(outcome)
    }

    /// A proposal may wait long — for a majority that is down, or for a full disk to make
    /// room for the log: a cancel or the statement's timeout stops the wait (not the
    /// command, which is in the log and may still commit, as the error says).
    async fn propose_interruptibly(&self, encoded: Vec<u8>) -> SqlResult<Vec<u8>> {
        let propose = self.shared.proposer.propose(encoded);
        tokio::pin!(propose);
        loop {
            tokio::select! {
                result = &mut propose => return result.map_err(propose_error),
                _ = tokio::time::sleep(Duration::from_millis(20)) => {
                    if let Err(mut stop) = self.interrupt.check() {
                        stop.message.push_str(
                            " (the statement was sent to the replicated log and may still commit)",
                        );
                        return Err(stop);
                    }
                }
            }
        }
    }

    fn statement_time(&self) -> i64 {
        self.transaction
            .as_ref()
            .map(|t| t.now_micros)
            .unwrap_or_else(now_micros)
    }
}

impl Session {
    /// Whether the statement being run is in a read-only transaction: the open one's mode,
    /// or outside one, the session's `default_transaction_read_only` (the statement's own
    /// implicit transaction).
    pub(super) fn read_only(&self) -> bool {
        self.writes_locked
            || match &self.transaction {
                Some(t) => t.read_only,
                None => self.default_read_only(),
            }
    }

    /// Holds the session read-only whatever it SETs (the console's sessions, until their
    /// user unlocks writes in the page), or lets it write again.
    pub fn lock_writes(&mut self, locked: bool) {
        self.writes_locked = locked;
    }

    /// 25006 for `what` (a write, a schema change, a sequence advance) in a read-only
    /// transaction.
    pub(super) fn refuse_if_read_only(&self, what: &str) -> SqlResult<()> {
        if self.read_only() {
            return Err(SqlError::new(
                ErrorKind::ReadOnlyTransaction,
                format!("cannot execute {what} in a read-only transaction"),
            ));
        }
        Ok(())
    }
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
