//! A session's transaction block: its staged writes, reads, savepoints and schema changes,
//! and the statements that begin, end and roll it back.

use super::*;

/// How a transaction began, which says how it ends. PostgreSQL runs the statements of one
/// simple Query message, and the extended protocol's statements up to the next Sync, as one
/// transaction when no BEGIN opened one: all of them or none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Block {
    /// BEGIN: ends at COMMIT or ROLLBACK; an error leaves it failed until then.
    Explicit,
    /// Extended-protocol statements: ends at the next Sync.
    Pipeline,
    /// The statements of one simple Query message: ends after its last.
    Query,
}

pub(super) struct Transaction {
    pub(super) block: Block,
    pub(super) isolation: Isolation,
    pub(super) read_only: bool,
    /// A statement that reads or writes (not BEGIN, SET or SHOW) has run in it: its
    /// isolation and read-write mode are fixed from then on, as PostgreSQL's snapshot fixes
    /// them.
    pub(super) queried: bool,
    pub(super) now_micros: i64,
    pub(super) ops: Vec<WriteOp>,
    /// The ops' bytes in the log's encoding (`ledger::Staged::bytes`, added up).
    pub(super) staged_bytes: usize,
    pub(super) reads: Vec<ReadCheck>,
    /// NOTIFYs sent in the transaction, delivered when it commits.
    pub(super) notifies: Vec<Notification>,
    pub(super) overlay: Arc<Overlay>,
    /// Open savepoints, innermost last.
    pub(super) savepoints: Vec<Savepoint>,
    /// Its schema changes so far (they apply at COMMIT).
    pub(super) schema: Option<Arc<SchemaChanges>>,
    /// The states of the sequences its schema changes made, as its statements left them
    /// (never taken back by ROLLBACK TO: a value handed out stays handed out).
    pub(super) own_sequences: BTreeMap<u32, plan::SequenceState>,
    /// The session's settings when it began, kept at its first SET (None: it made none),
    /// which a rollback restores and a commit restores too before it makes its non-LOCAL
    /// SETs again (`settings_made`).
    pub(super) settings_before: Option<BTreeMap<String, String>>,
    pub(super) settings_made: Vec<SettingChange>,
}

impl Transaction {
    /// SET TRANSACTION ISOLATION LEVEL, or BEGIN's, which must come before it reads or writes.
    fn set_isolation(&mut self, isolation: Isolation) -> SqlResult<()> {
        if self.queried {
            return Err(SqlError::new(
                ErrorKind::ActiveTransaction,
                "SET TRANSACTION ISOLATION LEVEL must be called before any query",
            ));
        }
        self.isolation = isolation;
        Ok(())
    }

    /// SET TRANSACTION READ ONLY / READ WRITE. A transaction may always become read-only; it
    /// may become read-write only before its first query, as in PostgreSQL.
    pub(super) fn set_read_only(&mut self, read_only: bool) -> SqlResult<()> {
        if self.read_only && !read_only && self.queried {
            return Err(SqlError::new(
                ErrorKind::ActiveTransaction,
                "transaction read-write mode must be set before any query",
            ));
        }
        self.read_only = read_only;
        Ok(())
    }

    pub(super) fn new(block: Block, isolation: Isolation, read_only: bool) -> Transaction {
        Transaction {
            settings_before: None,
            settings_made: Vec::new(),
            block,
            isolation,
            read_only,
            queried: false,
            now_micros: now_micros(),
            ops: Vec::new(),
            staged_bytes: 0,
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
pub(super) struct SchemaChanges {
    pub(super) base_version: u64,
    pub(super) changes: Vec<(usize, DdlPlan)>,
    pub(super) catalog: Arc<Catalog>,
}

impl SchemaChanges {
    /// The changes with the writes `ops` made before each, in the order they were made, then
    /// the states the transaction's statements left its own sequences in; and the writes
    /// made after the last change.
    pub(super) fn steps(
        &self,
        ops: &[WriteOp],
        sequences: &BTreeMap<u32, plan::SequenceState>,
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
pub(super) static TRANSACTION_CATALOG_VERSION: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(1 << 62);

/// Where a transaction stood at `SAVEPOINT name`: its writes so far and its overlay then
/// (shared until the transaction writes again).
pub(super) struct Savepoint {
    pub(super) name: String,
    pub(super) ops: usize,
    pub(super) staged_bytes: usize,
    pub(super) overlay: Arc<Overlay>,
    pub(super) schema: Option<Arc<SchemaChanges>>,
    /// The session's settings then, and how many SETs the transaction had made.
    pub(super) settings: BTreeMap<String, String>,
    pub(super) settings_made: usize,
}

impl Session {
    /// Whether the session is inside a transaction block (BEGIN), which ReadyForQuery
    /// reports as 'T', or 'E' once failed.
    pub fn in_block(&self) -> bool {
        self.transaction
            .as_ref()
            .is_some_and(|t| t.block == Block::Explicit)
    }

    /// Whether a transaction is open, a block or an implicit one: its statements are staged
    /// and commit together.
    pub fn in_transaction(&self) -> bool {
        self.transaction.is_some()
    }

    /// A statement of the block failed: only ROLLBACK, ROLLBACK TO SAVEPOINT and COMMIT
    /// (which then rolls back) are accepted until it ends.
    pub fn is_failed(&self) -> bool {
        self.failed && self.in_block()
    }

    /// A statement failed, wherever it failed (Parse, Bind, Describe, Execute, COPY): the
    /// transaction it ran in, block or implicit, has failed.
    pub fn statement_failed(&mut self) {
        if self.transaction.is_some() {
            self.failed = true;
        }
        self.end_statement(true);
    }

    /// The error a statement gets before it runs when the block has failed, unless it ends
    /// the block or rolls back to a savepoint (PostgreSQL refuses at Parse and Bind too).
    pub fn refuse_when_failed(&self, plan: &Plan) -> SqlResult<()> {
        let ends_block = matches!(
            plan,
            Plan::Commit | Plan::Rollback | Plan::RollbackToSavepoint { .. }
        );
        if self.failed && !ends_block {
            return Err(SqlError::new(
                ErrorKind::InFailedTransaction,
                "current transaction is aborted, commands ignored until end of transaction block",
            ));
        }
        Ok(())
    }

    /// Refuses `what`, which applies as a transaction of its own (`why`), inside another.
    pub(super) fn refuse_in_transaction(&self, what: &str, why: &str) -> SqlResult<()> {
        let Some(t) = &self.transaction else {
            return Ok(());
        };
        let message = match t.block {
            Block::Explicit => format!("{what} inside a transaction block ({why})"),
            Block::Pipeline => format!(
                "{what} with other statements before one Sync, which are one transaction ({why}; follow it with a Sync)"
            ),
            Block::Query => format!(
                "{what} with other statements in one query string, which are one transaction ({why}; send it on its own)"
            ),
        };
        Err(SqlError::feature_not_supported(message))
    }

    /// Starts an implicit transaction for the statements that follow, unless one is open.
    pub fn open_implicit(&mut self, block: Block) {
        debug_assert!(block != Block::Explicit);
        if self.transaction.is_none() {
            let (isolation, read_only) = (self.default_isolation(), self.default_read_only());
            self.transaction = Some(Transaction::new(block, isolation, read_only));
        }
    }

    /// Ends the implicit transaction of kind `block`, if one is open: commits it, or rolls it
    /// back when one of its statements failed. An error is the commit's.
    pub async fn close_implicit(&mut self, block: Block) -> SqlResult<()> {
        if !self.transaction.as_ref().is_some_and(|t| t.block == block) {
            return Ok(());
        }
        if self.failed {
            self.abandon_transaction();
            return Ok(());
        }
        self.commit().await.map(|_| ())
    }

    /// Drops the open transaction, whatever it staged, and the locks it held.
    pub(super) fn abandon_transaction(&mut self) {
        self.release_transaction_locks();
        if let Some(t) = self.transaction.take() {
            self.settle_settings(t.settings_before, &t.settings_made, false);
        }
        self.failed = false;
        self.end_statement(false);
    }

    /// BEGIN, COMMIT, ROLLBACK, savepoints and SET TRANSACTION.
    pub(super) async fn transaction_control(&mut self, plan: &Plan) -> SqlResult<StatementResult> {
        match plan {
            Plan::Begin {
                isolation,
                read_only,
            } => self.begin(*isolation, *read_only),
            Plan::Commit => self.commit().await,
            Plan::Rollback => {
                if !self.in_block() {
                    self.notices.push(SqlError::new(
                        ErrorKind::NoActiveTransaction,
                        "there is no transaction in progress",
                    ));
                }
                self.abandon_transaction();
                Ok(StatementResult::TransactionEnd("ROLLBACK".into()))
            }
            Plan::Savepoint { name } => {
                let settings = self.settings.clone();
                let t = self.transaction_for("SAVEPOINT")?;
                let mark = Savepoint {
                    name: name.clone(),
                    ops: t.ops.len(),
                    staged_bytes: t.staged_bytes,
                    overlay: t.overlay.clone(),
                    schema: t.schema.clone(),
                    settings,
                    settings_made: t.settings_made.len(),
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
                t.staged_bytes = mark.staged_bytes;
                t.overlay = mark.overlay.clone();
                t.schema = mark.schema.clone();
                t.settings_made.truncate(mark.settings_made);
                self.settings = mark.settings.clone();
                self.failed = false;
                Ok(StatementResult::Command("ROLLBACK".into()))
            }
            Plan::ReleaseSavepoint { name } => {
                let t = self.transaction_for("RELEASE SAVEPOINT")?;
                let at = savepoint_position(&t.savepoints, name)?;
                t.savepoints.truncate(at);
                Ok(StatementResult::Command("RELEASE".into()))
            }
            Plan::SetTransaction {
                isolation,
                read_only,
            } => {
                if !self.in_block() {
                    self.notices.push(SqlError::new(
                        ErrorKind::NoActiveTransaction,
                        "SET TRANSACTION can only be used in transaction blocks",
                    ));
                }
                if let Some(t) = &mut self.transaction {
                    if let Some(i) = isolation {
                        t.set_isolation(*i)?;
                    }
                    if let Some(r) = read_only {
                        t.set_read_only(*r)?;
                    }
                }
                Ok(StatementResult::Command("SET".into()))
            }
            _ => Err(SqlError::internal("not a transaction control statement")),
        }
    }

    /// BEGIN: opens a block, or makes the implicit transaction of the statements before it
    /// (in the same Query or before the same Sync) one, as PostgreSQL does.
    fn begin(
        &mut self,
        isolation: Option<Isolation>,
        read_only: Option<bool>,
    ) -> SqlResult<StatementResult> {
        let default_read_only = self.default_read_only();
        match &mut self.transaction {
            Some(t) if t.block == Block::Explicit => {
                self.notices.push(SqlError::new(
                    ErrorKind::ActiveTransaction,
                    "there is already a transaction in progress",
                ));
            }
            Some(t) => {
                t.block = Block::Explicit;
                if let Some(r) = read_only {
                    t.set_read_only(r)?;
                }
                if let Some(i) = isolation {
                    t.set_isolation(i)?;
                }
            }
            None => {
                let isolation = isolation.unwrap_or_else(|| self.default_isolation());
                self.transaction = Some(Transaction::new(
                    Block::Explicit,
                    isolation,
                    read_only.unwrap_or(default_read_only),
                ));
            }
        }
        Ok(StatementResult::TransactionStart("BEGIN".into()))
    }

    /// A schema change inside a transaction block: tried now after the transaction's earlier
    /// ones (its errors come now), kept to apply at COMMIT; later statements see its catalog.
    pub(super) async fn plan_schema_change(&mut self, plan: DdlPlan) -> SqlResult<()> {
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
    pub(super) fn schema_changes(&self) -> SqlResult<Option<Arc<ledger::SchemaChanges>>> {
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

    /// The open transaction block, for a statement that only runs inside one.
    pub(super) fn transaction_for(&mut self, statement: &str) -> SqlResult<&mut Transaction> {
        match &mut self.transaction {
            Some(t) if t.block == Block::Explicit => Ok(t),
            _ => Err(SqlError::new(
                ErrorKind::NoActiveTransaction,
                format!("{statement} can only be used in transaction blocks"),
            )),
        }
    }

    /// COMMIT: proposes what the transaction did, or rolls it back if it failed. Outside a
    /// block it warns, and commits the statements before it in the same Query or pipeline.
    pub(super) async fn commit(&mut self) -> SqlResult<StatementResult> {
        if !self.in_block() {
            self.notices.push(SqlError::new(
                ErrorKind::NoActiveTransaction,
                "there is no transaction in progress",
            ));
        }
        if self.failed {
            self.abandon_transaction();
            return Ok(StatementResult::TransactionEnd("ROLLBACK".into()));
        }
        self.release_transaction_locks();
        let Some(mut t) = self.transaction.take() else {
            return Ok(StatementResult::TransactionEnd("COMMIT".into()));
        };
        let before = std::mem::take(&mut t.settings_before);
        let made = std::mem::take(&mut t.settings_made);
        let notifies = std::mem::take(&mut t.notifies);
        let committed = self.commit_transaction(t).await;
        self.settle_settings(before, &made, committed.is_ok());
        let committed = committed?;
        for n in &notifies {
            self.shared.notifications.notify(n);
        }
        Ok(committed)
    }

    /// Proposes what a transaction block did, if anything, for its COMMIT.
    pub(super) async fn commit_transaction(
        &mut self,
        t: Transaction,
    ) -> SqlResult<StatementResult> {
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
}

/// The innermost savepoint named `name`.
pub(super) fn savepoint_position(savepoints: &[Savepoint], name: &str) -> SqlResult<usize> {
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
