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
use crate::statements::Statements;

mod copy_from;
mod own_sequences;
mod prepare;
mod reset;
mod settings;
mod transaction;

use copy_from::CopyState;
use settings::SettingChange;
use settings::{setting_key, SETTINGS};
pub use transaction::Block;
use transaction::Transaction;

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
}

pub fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
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
            startup_settings: settings.clone(),
            settings,
            statements: Statements::default(),
            plan_generation: 0,
            portals_discarded: false,
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
        self.refuse_when_failed(plan)?;
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
        self.refuse_in_transaction(
            "create_transfers",
            "each of its chains is a transaction of its own",
        )?;
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
    /// Outside a transaction, the body is applied as one command; inside one (a block, or
    /// several statements before a Sync or in one query string) its statements run in the
    /// transaction one after another, as PostgreSQL runs them, staged like the client's own.
    async fn call(&mut self, call: &CallPlan, params: &[Value]) -> SqlResult<StatementResult> {
        let now = self.statement_time();
        let args = {
            let env = EvalEnv::without_subqueries(params, now);
            call.args
                .iter()
                .map(|a| a.eval(&[], &env))
                .collect::<SqlResult<Vec<Value>>>()?
        };
        let rows = if self.transaction.is_some() {
            self.call_in_transaction(&call.steps, &args).await?
        } else {
            let command = Command::Procedure {
                steps: call.steps.clone(),
                params: args,
                now_micros: now,
            };
            self.propose(&command).await?.rows
        };
        if call.columns.is_empty() {
            return Ok(StatementResult::Command("CALL".into()));
        }
        Ok(StatementResult::Rows {
            columns: call.columns.clone(),
            rows,
            tag: "CALL".into(),
        })
    }

    /// A procedure's body run in the open transaction: the last statement's rows.
    async fn call_in_transaction(
        &mut self,
        steps: &[planner::Step],
        args: &[Value],
    ) -> SqlResult<Vec<Row>> {
        let mut last = Vec::new();
        for step in steps {
            last = match step {
                planner::Step::Write(plan) => {
                    if self.transaction.as_ref().is_some_and(|t| t.read_only) {
                        return Err(read_only_error("CALL"));
                    }
                    self.stage(plan.clone(), args).await?.1
                }
                planner::Step::Query(plan) => self.select(plan, args).await?,
            };
        }
        Ok(last)
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
                    self.notices.push(SqlError::new(
                        ErrorKind::Warning,
                        format!("you don't own a lock of type {mode}"),
                    ));
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
        let own = Transaction::new(
            Block::Query,
            Isolation::ReadCommitted,
            false,
            &self.settings,
        );
        self.transaction = Some(own);
        let staged = self.stage(plan.clone(), params).await;
        let own = self.transaction.take();
        match (staged, own) {
            (Ok(staged), Some(own)) => self.commit_transaction(own).await.map(|_| staged),
            (Ok(_), None) => Err(SqlError::internal("a statement's own transaction vanished")),
            (Err(e), _) => Err(e),
        }
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
        // The views of the session's own state are evaluated here, on a copy of the catalog
        // that carries it.
        let reads = |t| planner::reads_system_table(&plan.rel, t);
        let activity = reads(planner::SystemTable::PgStatActivity);
        let statements = reads(planner::SystemTable::PgPreparedStatements);
        if (activity || statements) && plan.reads_user_tables {
            let view = if activity {
                "pg_stat_activity"
            } else {
                "pg_prepared_statements"
            };
            return Err(SqlError::feature_not_supported(format!(
                "{view} in a query that also reads tables"
            )));
        }
        if !plan.reads_user_tables {
            let mut catalog = self.catalog();
            if activity || statements {
                let mut with_session = (*catalog).clone();
                if activity {
                    with_session.activity = Arc::new(self.shared.activity.snapshot());
                }
                if statements {
                    with_session.prepared_statements = Arc::new(self.statements.listing());
                }
                catalog = Arc::new(with_session);
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
            if !plan.reads_user_tables {
                return self.select_own_sequences(plan, params);
            }
            return Err(SqlError::feature_not_supported(
                "nextval() or setval() in a SELECT that reads tables inside a transaction block that changed the schema",
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
}

fn read_only_error(what: &str) -> SqlError {
    SqlError::new(
        ErrorKind::ReadOnlyTransaction,
        format!("cannot execute {what} in a read-only transaction"),
    )
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
