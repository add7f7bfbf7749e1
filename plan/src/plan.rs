//! Plans: what the binder produces and the executor runs. Relational operators (`Rel`)
//! produce rows; every expression inside a `Rel` is evaluated over the outer row (for
//! correlated and lateral subqueries) followed by the operator's input row.

use std::fmt::Write;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sql::{DataType, PackedRows, Value};

use crate::catalog::{ProcedureDef, TableDef, TableRef, ViewDef};
use crate::expr::{AggCall, Expr};
use crate::foreign_key::ForeignKeyDef;
use crate::sequence::SequenceDef;
use crate::system::SystemTable;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum TableSource {
    User(Arc<TableDef>),
    System(SystemTable),
}

/// How a scan reaches its rows through the primary key.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Access {
    /// Every primary key column fixed by an expression known before the scan.
    Point(Vec<Expr>),
    /// Bounds on the first primary key column: (expression, inclusive).
    Range {
        lower: Option<(Expr, bool)>,
        upper: Option<(Expr, bool)>,
    },
    /// Equality on the leading `key.len()` columns of the table's `index`-th index.
    Index {
        index: usize,
        name: String,
        key: Vec<Expr>,
    },
    Full,
    /// Equality on the leading `key.len()` columns of the table's `index`-th index and
    /// bounds (expression, inclusive) on the column after them; NULL entries of that column
    /// are outside any bound. With `first`, the index is read in its order only as far as
    /// the first rows a LIMIT above keeps (the sort above still orders them). A variant of
    /// its own, after the others, so plans in log entries written before it still decode.
    IndexRange {
        index: usize,
        name: String,
        key: Vec<Expr>,
        lower: Option<(Expr, bool)>,
        upper: Option<(Expr, bool)>,
        first: Option<Box<FirstRows>>,
    },
    /// Equality on the leading `key.len()` primary key columns (fewer than all of them) and
    /// bounds on the column after them; with `first`, read in key order (or against it) only
    /// as far as a LIMIT above keeps. After the others, so older plans still decode (they
    /// have only `Range` on the first column).
    KeyRange {
        key: Vec<Expr>,
        lower: Option<(Expr, bool)>,
        upper: Option<(Expr, bool)>,
        first: Option<Box<FirstRows>>,
    },
}

/// How far an ordered index read goes: `limit` + `offset` rows that pass the scan's filter,
/// in the index's order or (`descending`) against it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FirstRows {
    pub descending: bool,
    pub limit: Expr,
    pub offset: Option<Expr>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum JoinKind {
    Inner,
    Left,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SortKey {
    pub expr: Expr,
    pub descending: bool,
    pub nulls_first: bool,
}

/// One window function call: computed for every row from the rows of its partition (rows
/// with equal `partition_by` values), ordered by `order_by`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WindowCall {
    pub func: WindowFunc,
    /// The call's arguments (an aggregate's are in its `AggCall`).
    pub args: Vec<Expr>,
    pub partition_by: Vec<Expr>,
    pub order_by: Vec<SortKey>,
    pub frame: WindowFrame,
    pub ty: DataType,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum WindowFunc {
    RowNumber,
    Rank,
    DenseRank,
    PercentRank,
    CumeDist,
    /// `ntile(buckets)`.
    Ntile,
    /// `lag(value [, offset [, default]])`.
    Lag,
    /// `lead(value [, offset [, default]])`.
    Lead,
    FirstValue,
    LastValue,
    /// `nth_value(value, n)`.
    NthValue,
    /// An aggregate over the frame.
    Aggregate(AggCall),
}

/// The rows of its partition a window function sees from the current row: `ROWS` counts
/// rows, `RANGE` (only unbounded or current-row bounds) takes the current row's peers
/// (rows equal under ORDER BY) along. The default is `RANGE UNBOUNDED PRECEDING` to
/// `CURRENT ROW`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowFrame {
    pub rows: bool,
    pub start: FrameBound,
    pub end: FrameBound,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FrameBound {
    UnboundedPreceding,
    Preceding(u64),
    CurrentRow,
    Following(u64),
    UnboundedFollowing,
}

impl WindowFrame {
    pub const DEFAULT: WindowFrame = WindowFrame {
        rows: false,
        start: FrameBound::UnboundedPreceding,
        end: FrameBound::CurrentRow,
    };
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Rel {
    /// Rows of a table; `filter` is evaluated over outer ++ table row.
    Scan {
        source: TableSource,
        access: Access,
        filter: Option<Expr>,
    },
    /// Literal rows (also a FROM-less SELECT: one empty row).
    Values {
        rows: Vec<Vec<Expr>>,
    },
    Filter {
        input: Box<Rel>,
        predicate: Expr,
    },
    Project {
        input: Box<Rel>,
        exprs: Vec<Expr>,
    },
    /// A nested-loop join. A lateral right side is evaluated per left row with outer ++ left
    /// as its outer row; otherwise once. `on` sees outer ++ left ++ right.
    Join {
        left: Box<Rel>,
        right: Box<Rel>,
        kind: JoinKind,
        on: Option<Expr>,
        lateral: bool,
        right_width: usize,
    },
    /// Output: the group-by values, then one value per aggregate.
    Aggregate {
        input: Box<Rel>,
        group_by: Vec<Expr>,
        aggregates: Vec<AggCall>,
    },
    Sort {
        input: Box<Rel>,
        keys: Vec<SortKey>,
    },
    Limit {
        input: Box<Rel>,
        limit: Option<Expr>,
        offset: Option<Expr>,
    },
    Distinct {
        input: Box<Rel>,
    },
    /// `UNION [ALL]`.
    Union {
        left: Box<Rel>,
        right: Box<Rel>,
        all: bool,
    },
    /// `generate_series(start, stop [, step])`: one integer column.
    Series {
        start: Expr,
        stop: Expr,
        step: Option<Expr>,
    },
    /// `unnest(array)`: one row per element.
    Unnest {
        array: Expr,
    },
    /// A reference to a `WITH` query: its plan, run with the first `outer_len` values of the
    /// outer row, those of the query that defined it (a reference may sit deeper, where the
    /// outer row is longer).
    CommonTable {
        name: String,
        input: Box<Rel>,
        outer_len: usize,
    },
    /// Window functions: each input row followed by one value per call.
    Window {
        input: Box<Rel>,
        calls: Vec<WindowCall>,
    },
    /// `INTERSECT [ALL]` (`except` false) and `EXCEPT [ALL]`: rows of the left side, as
    /// sets or (ALL) multisets.
    SetDifference {
        left: Box<Rel>,
        right: Box<Rel>,
        except: bool,
        all: bool,
    },
    /// `SELECT DISTINCT ON (...)`: the first row of each run of rows equal in `columns`
    /// (positions in the row; the input is sorted so that such rows are adjacent).
    DistinctOn {
        input: Box<Rel>,
        columns: Vec<usize>,
    },
    /// A sequence read as a table: one row (last_value, log_cnt, is_called).
    SequenceState {
        sequence: u32,
    },
    /// `... WITH ORDINALITY`: `input`'s rows, each with its 1-based number appended.
    Ordinality {
        input: Box<Rel>,
    },
    /// A `WITH RECURSIVE` query: `anchor`'s rows, then `recursive` run again and again
    /// over the rows the run before it added (its `WorkingTable { id }`) until it adds
    /// none; without `all`, rows already produced are not added again.
    RecursiveUnion {
        id: u32,
        anchor: Box<Rel>,
        recursive: Box<Rel>,
        all: bool,
    },
    /// Inside `RecursiveUnion { id }`'s recursive part: the rows the last run added.
    WorkingTable {
        id: u32,
    },
}

/// One column of a result, as RowDescription reports it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OutputColumn {
    pub name: String,
    pub ty: DataType,
    /// The source table's OID and column number when the column is a plain table column.
    pub table_oid: u32,
    pub column_number: i16,
}

impl OutputColumn {
    /// A column that is not a plain table column.
    pub fn computed(name: &str, ty: DataType) -> OutputColumn {
        OutputColumn {
            name: name.into(),
            ty,
            table_oid: 0,
            column_number: 0,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SelectPlan {
    pub rel: Rel,
    pub columns: Vec<OutputColumn>,
    /// True when the plan reads user tables or relation sizes (and so must go through an
    /// executor).
    pub reads_user_tables: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum InsertSource {
    Values(Vec<Vec<Expr>>),
    Query(Box<Rel>),
    /// Complete rows, as `Packed` but logged before it (bincode's form of each value); still
    /// read from such logs, no longer proposed.
    Rows(Vec<Vec<Value>>),
    /// Complete rows — every column in table order, defaults filled in, values conformed to
    /// the column types — built from VALUES before the statement was proposed, because they
    /// evaluate the same anywhere (`ledger::prebuild_insert`). The executor only stores them.
    /// They travel through the log packed (`sql::PackedRows`).
    Packed(PackedRows),
}

/// What an INSERT does with a row that conflicts with a stored one. A bare action
/// arbitrates on the primary key; `Arbitrated` names another arbiter (a variant of its own,
/// added last, so plans already in the log keep their meaning).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum OnConflict {
    DoNothing,
    /// Assignments and filter see the existing row followed by the proposed (EXCLUDED) row.
    DoUpdate {
        assignments: Vec<(usize, Expr)>,
        filter: Option<Expr>,
    },
    Arbitrated {
        arbiter: ConflictArbiter,
        /// `DoNothing` or `DoUpdate`.
        action: Box<OnConflict>,
    },
}

/// A SET item: the column given and its new value.
pub type Assignment = (usize, Expr);

/// Which stored rows an ON CONFLICT clause arbitrates on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConflictArbiter {
    PrimaryKey,
    /// The unique index with this id (its columns plain, no predicate).
    Index(u32),
    /// Every unique constraint: `ON CONFLICT DO NOTHING` without a target.
    Any,
}

impl OnConflict {
    /// `DoNothing` or `DoUpdate`, whatever the arbiter.
    pub fn action(&self) -> &OnConflict {
        match self {
            OnConflict::Arbitrated { action, .. } => action.action(),
            action => action,
        }
    }

    pub fn arbiter(&self) -> ConflictArbiter {
        match self {
            OnConflict::Arbitrated { arbiter, .. } => *arbiter,
            _ => ConflictArbiter::PrimaryKey,
        }
    }

    /// `action` (`DoNothing` or `DoUpdate`) on `arbiter`.
    pub fn new(arbiter: ConflictArbiter, action: OnConflict) -> OnConflict {
        match arbiter {
            ConflictArbiter::PrimaryKey => action,
            arbiter => OnConflict::Arbitrated {
                arbiter,
                action: Box::new(action),
            },
        }
    }

    /// `action` with this clause's arbiter.
    pub fn with_action(&self, action: OnConflict) -> OnConflict {
        OnConflict::new(self.arbiter(), action)
    }

    /// The DO UPDATE's assignments and filter, if this is one.
    pub fn update(&self) -> Option<(&[Assignment], Option<&Expr>)> {
        match self.action() {
            OnConflict::DoUpdate {
                assignments,
                filter,
            } => Some((assignments, filter.as_ref())),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct InsertPlan {
    pub table: TableRef,
    pub source: InsertSource,
    /// For each source column, the table column it fills.
    pub target_columns: Vec<usize>,
    pub on_conflict: Option<OnConflict>,
    pub returning: Option<Vec<Expr>>,
    /// A `CALL transfer(...)`: answers with one (id, status) row per transfer, tagged CALL.
    pub call: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct UpdatePlan {
    pub table: TableRef,
    pub access: Access,
    pub filter: Option<Expr>,
    /// (column, expression over the old row).
    pub assignments: Vec<(usize, Expr)>,
    pub returning: Option<Vec<Expr>>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeletePlan {
    pub table: TableRef,
    pub access: Access,
    pub filter: Option<Expr>,
    pub returning: Option<Vec<Expr>>,
}

/// Any statement that writes rows.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum WritePlan {
    Insert(InsertPlan),
    Update(UpdatePlan),
    Delete(DeletePlan),
}

impl WritePlan {
    pub fn table(&self) -> &TableRef {
        match self {
            WritePlan::Insert(p) => &p.table,
            WritePlan::Update(p) => &p.table,
            WritePlan::Delete(p) => &p.table,
        }
    }

    pub fn returning(&self) -> Option<&Vec<Expr>> {
        match self {
            WritePlan::Insert(p) => p.returning.as_ref(),
            WritePlan::Update(p) => p.returning.as_ref(),
            WritePlan::Delete(p) => p.returning.as_ref(),
        }
    }

    /// The command tag verb: INSERT, UPDATE or DELETE.
    pub fn verb(&self) -> &'static str {
        match self {
            WritePlan::Insert(p) if p.call => "CALL",
            WritePlan::Insert(_) => "INSERT",
            WritePlan::Update(_) => "UPDATE",
            WritePlan::Delete(_) => "DELETE",
        }
    }
}

/// Schema changes; applied through the log like every other write.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum DdlPlan {
    CreateTable {
        table: TableDef,
        if_not_exists: bool,
    },
    DropTables {
        names: Vec<String>,
        if_exists: bool,
    },
    Truncate {
        tables: Vec<TableRef>,
    },
    AddPrimaryKey {
        table: TableRef,
        columns: Vec<usize>,
        name: String,
    },
    CreateIndex {
        table: TableRef,
        name: String,
        columns: Vec<usize>,
        unique: bool,
        if_not_exists: bool,
    },
    DropIndexes {
        names: Vec<String>,
        if_exists: bool,
    },
    CreateProcedure {
        procedure: ProcedureDef,
        or_replace: bool,
    },
    DropProcedures {
        names: Vec<String>,
        if_exists: bool,
    },
    /// ALTER TABLE's column and constraint changes: the table's new definition (same id;
    /// indexes it no longer lists are dropped) and how its stored rows follow.
    AlterTable {
        table: TableRef,
        new: Box<TableDef>,
        rows: RowChange,
    },
    CreateView {
        view: ViewDef,
        or_replace: bool,
    },
    DropViews {
        names: Vec<String>,
        if_exists: bool,
    },
    CreateSequence {
        sequence: SequenceDef,
        if_not_exists: bool,
    },
    DropSequences {
        names: Vec<String>,
        if_exists: bool,
    },
    /// A CREATE TABLE with SERIAL or identity columns, or an ALTER TABLE that makes columns
    /// identity columns (`ddl`): the sequences their defaults call are created with it, as
    /// one schema change, owned by the columns.
    WithSequences {
        ddl: Box<DdlPlan>,
        sequences: Vec<SequenceDef>,
    },
    /// ALTER SEQUENCE: the sequence's new definition (same id and name) and, for RESTART,
    /// the value its next `nextval` gives.
    AlterSequence {
        sequence: SequenceDef,
        restart: Option<i64>,
    },
    /// CREATE TABLE with foreign keys: the table (`ddl`), then its keys.
    WithForeignKeys {
        ddl: Box<DdlPlan>,
        foreign_keys: Vec<ForeignKeyDef>,
    },
    /// ALTER TABLE ... ADD [CONSTRAINT] FOREIGN KEY: checked against the existing rows.
    AddForeignKey {
        foreign_key: ForeignKeyDef,
    },
    /// ALTER TABLE ... DROP CONSTRAINT of a foreign key.
    DropForeignKey {
        table: u32,
        name: String,
        if_exists: bool,
    },
    /// CREATE TYPE ... AS ENUM (its id is given when it applies).
    CreateEnum {
        def: crate::enum_type::EnumDef,
    },
    /// ALTER TYPE of an enum: `new` replaces `old`, if that is still the definition.
    AlterEnum {
        old: crate::enum_type::EnumDef,
        new: crate::enum_type::EnumDef,
    },
    DropEnums {
        names: Vec<String>,
        if_exists: bool,
    },
    /// CREATE INDEX ... WHERE, or on expressions: `CreateIndex`'s fields and how the index
    /// is derived from the rows.
    CreateDerivedIndex {
        table: TableRef,
        name: String,
        columns: Vec<usize>,
        unique: bool,
        if_not_exists: bool,
        derivation: Box<crate::catalog::IndexDerivation>,
    },
    /// ALTER TABLE ... ADD CONSTRAINT ... UNIQUE: a unique index that is a constraint.
    AddUniqueConstraint {
        table: TableRef,
        name: String,
        columns: Vec<usize>,
    },
    /// Roles, memberships, privileges and owners (`role_plan.rs`).
    Roles(crate::role_plan::RolePlan),
    /// `ddl`, made by role `owner` (not the bootstrap superuser): the tables, views,
    /// sequences and procedures it creates are that role's.
    Owned {
        ddl: Box<DdlPlan>,
        owner: u32,
    },
}

impl DdlPlan {
    /// `ddl`, with `sequences` created alongside when there are any.
    pub fn with_sequences(ddl: DdlPlan, sequences: Vec<SequenceDef>) -> DdlPlan {
        if sequences.is_empty() {
            return ddl;
        }
        DdlPlan::WithSequences {
            ddl: Box::new(ddl),
            sequences,
        }
    }
}

/// What an ALTER TABLE does to the stored rows.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum RowChange {
    /// Nothing (renames, defaults, dropping NOT NULL).
    None,
    /// Every row is checked against the new NOT NULL and CHECK constraints.
    Validate,
    /// Every row is rebuilt, one value per new column, and checked.
    Rebuild(Vec<ColumnSource>),
}

/// Where a column of a rebuilt row takes its value from.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ColumnSource {
    /// The old row's column.
    Old(usize),
    /// A value computed once for every row (an added column's default, or NULL).
    Value(Expr),
    /// An expression over the old row (a column's new type: a cast, or `USING expr`).
    Convert(Expr),
}

/// `CALL create_transfers(...)` or `CALL create_accounts(...)`: events given as one array
/// per column, applied one by one with independent outcomes, except that an event with
/// `linked` chains the next one to it (TigerBeetle's batch semantics). One command; one
/// result row per event.
#[derive(Clone, Debug)]
pub struct LedgerBatchPlan {
    /// `create_transfers` or `create_accounts`.
    pub procedure: &'static str,
    /// The transfers or the accounts table.
    pub table: TableRef,
    /// (column of the transfers table, the array expression giving its values).
    pub columns: Vec<(usize, Expr)>,
    pub linked: Option<Expr>,
}

/// One statement of a procedure body, bound.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Step {
    Write(Arc<WritePlan>),
    Query(Arc<SelectPlan>),
}

/// `CALL name(args)` of a stored procedure: the arguments (expressions over the CALL's own
/// parameters) and the body's statements, bound with the arguments as `$1..$n`.
#[derive(Clone, Debug)]
pub struct CallPlan {
    pub name: String,
    pub args: Vec<Expr>,
    pub steps: Vec<Step>,
    /// The last statement's result columns (empty when it returns no rows).
    pub columns: Vec<OutputColumn>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Isolation {
    ReadCommitted,
    Serializable,
}

#[derive(Clone, Debug)]
pub struct CopyPlan {
    pub table: Arc<TableDef>,
    pub columns: Vec<usize>,
    pub format: CopyFormat,
    /// For each of `columns`, its enum type, whose labels its values must be.
    pub enums: Vec<Option<Arc<crate::EnumDef>>>,
}

/// How COPY writes or reads rows: PostgreSQL's text format (tab-separated, backslash
/// escapes, `\N` for NULL) or CSV.
#[derive(Clone, Debug)]
pub struct CopyFormat {
    pub csv: bool,
    pub delimiter: char,
    pub null: String,
    pub header: bool,
}

impl Default for CopyFormat {
    fn default() -> CopyFormat {
        CopyFormat {
            csv: false,
            delimiter: '\t',
            null: "\\N".into(),
            header: false,
        }
    }
}

/// What `DISCARD` resets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Discard {
    /// Everything below, and settings, prepared statements, portals, LISTEN registrations and
    /// session advisory locks: the session as a new connection has it.
    All,
    /// Prepared statements' plans (they are bound again at their next use).
    Plans,
    /// What `currval` and `lastval` remember.
    Sequences,
    /// Temporary tables (there are none).
    Temp,
}

impl Discard {
    pub fn tag(self) -> &'static str {
        match self {
            Discard::All => "DISCARD ALL",
            Discard::Plans => "DISCARD PLANS",
            Discard::Sequences => "DISCARD SEQUENCES",
            Discard::Temp => "DISCARD TEMP",
        }
    }
}

/// A bound statement.
#[derive(Clone, Debug)]
pub enum Plan {
    Select(Arc<SelectPlan>),
    Write(Arc<WritePlan>, Vec<OutputColumn>),
    Ddl(DdlPlan),
    /// `read_only`: Some(true) for READ ONLY, Some(false) for READ WRITE, None for the
    /// session's default.
    Begin {
        isolation: Option<Isolation>,
        read_only: Option<bool>,
    },
    Commit,
    Rollback,
    Savepoint {
        name: String,
    },
    RollbackToSavepoint {
        name: String,
    },
    ReleaseSavepoint {
        name: String,
    },
    SetTransaction {
        isolation: Option<Isolation>,
        read_only: Option<bool>,
    },
    /// SET name = value (value already rendered as text), or SET name TO DEFAULT (None);
    /// `local` for SET LOCAL, which lasts until the transaction ends.
    Set {
        name: String,
        value: Option<String>,
        local: bool,
    },
    Show {
        name: String,
    },
    /// `SELECT set_config(name, value, is_local)`: SET (LOCAL when `is_local`), answered
    /// with the value as a row.
    SetConfig {
        name: String,
        value: String,
        local: bool,
    },
    /// RESET name, or RESET ALL (None).
    Reset {
        name: Option<String>,
    },
    CopyFrom(CopyPlan),
    /// `COPY table|(query) TO STDOUT`: the query's rows, written in `format`.
    CopyTo {
        query: Arc<SelectPlan>,
        format: CopyFormat,
    },
    /// A statement with nothing to do here; the tag to answer with.
    NoOp(&'static str),
    /// `CHECKPOINT`: a checkpoint of every partition, answered once it is durable.
    Checkpoint,
    Explain(Box<Plan>),
    /// `PREPARE name [(types)] AS statement`: `statement` bound (against the catalog the
    /// session sees), kept by the session under `name` with the text it came from.
    Prepare {
        name: String,
        statement: Box<sql::ParsedStatement>,
        hints: Vec<DataType>,
        bound: Box<Bound>,
    },
    /// `EXECUTE name [(args)]`: the statement prepared as `name`, the arguments evaluated and
    /// cast to its parameters' types.
    Execute {
        name: String,
        args: Vec<Expr>,
    },
    /// `DEALLOCATE [PREPARE] name`, or `DEALLOCATE ALL` (None).
    Deallocate {
        name: Option<String>,
    },
    /// `DISCARD ALL | PLANS | SEQUENCES | TEMP`.
    Discard(Discard),
    Call(Arc<CallPlan>),
    LedgerBatch(Arc<LedgerBatchPlan>),
    /// `SELECT pg_advisory_lock(key)` and the other advisory lock functions, on their own.
    AdvisoryLock(AdvisoryLockCall),
    /// `LISTEN channel`.
    Listen(String),
    /// `UNLISTEN channel`, or `UNLISTEN *` (None).
    Unlisten(Option<String>),
    /// `NOTIFY channel [, payload]` or `SELECT pg_notify(channel, payload)`.
    Notify(NotifyCall),
    /// `CALL hotledger.add_node(id, raft_addr)`, `remove_node(id)`, `transfer_leader(id)`.
    ClusterChange(ClusterChangeCall),
}

impl Plan {
    /// BEGIN, COMMIT, ROLLBACK, the savepoint statements and SET TRANSACTION: what the
    /// session's transaction state machine runs.
    pub fn is_transaction_control(&self) -> bool {
        matches!(
            self,
            Plan::Begin { .. }
                | Plan::Commit
                | Plan::Rollback
                | Plan::Savepoint { .. }
                | Plan::RollbackToSavepoint { .. }
                | Plan::ReleaseSavepoint { .. }
                | Plan::SetTransaction { .. }
        )
    }

    /// The columns a client sees for this statement (empty for commands without rows).
    pub fn output_columns(&self) -> Vec<OutputColumn> {
        match self {
            Plan::Select(s) => s.columns.clone(),
            Plan::Write(_, cols) => cols.clone(),
            Plan::Call(call) => call.columns.clone(),
            Plan::LedgerBatch(_) => ledger_batch_columns(),
            Plan::AdvisoryLock(call) => vec![call.column.clone()],
            Plan::Notify(call) => call.column.iter().cloned().collect(),
            Plan::Show { name } => vec![OutputColumn {
                name: name.clone(),
                ty: DataType::Text,
                table_oid: 0,
                column_number: 0,
            }],
            Plan::SetConfig { .. } => vec![OutputColumn {
                name: "set_config".into(),
                ty: DataType::Text,
                table_oid: 0,
                column_number: 0,
            }],
            Plan::Explain(_) => vec![OutputColumn {
                name: "QUERY PLAN".into(),
                ty: DataType::Text,
                table_oid: 0,
                column_number: 0,
            }],
            Plan::ClusterChange(_) => vec![OutputColumn {
                name: "result".into(),
                ty: DataType::Text,
                table_oid: 0,
                column_number: 0,
            }],
            _ => Vec::new(),
        }
    }
}

/// EXPLAIN's text: one line per operator, indented by depth.
pub fn explain(plan: &Plan) -> Vec<String> {
    let mut lines = Vec::new();
    match plan {
        Plan::Select(s) => explain_rel(&s.rel, 0, &mut lines),
        Plan::Write(w, _) => {
            let (verb, access, table) = match w.as_ref() {
                WritePlan::Insert(p) => {
                    lines.push(format!("Insert on {} (one log command)", p.table.name));
                    if let InsertSource::Query(rel) = &p.source {
                        explain_rel(rel, 1, &mut lines);
                    }
                    return lines;
                }
                WritePlan::Update(p) => ("Update", &p.access, &p.table),
                WritePlan::Delete(p) => ("Delete", &p.access, &p.table),
            };
            lines.push(format!("{verb} on {} (one log command)", table.name));
            lines.push(format!("  -> {}", describe_access(access, &table.name)));
        }
        Plan::Ddl(_) => lines.push("Schema change (one log command)".into()),
        Plan::LedgerBatch(batch) => lines.push(format!(
            "{} on {} (one log command; each event its own outcome, linked ones as chains)",
            batch.procedure, batch.table.name
        )),
        Plan::Call(call) => {
            lines.push(format!(
                "Call {} ({} statements, one log command)",
                call.name,
                call.steps.len()
            ));
            for step in &call.steps {
                let inner = match step {
                    Step::Write(w) => explain(&Plan::Write(w.clone(), Vec::new())),
                    Step::Query(q) => explain(&Plan::Select(q.clone())),
                };
                lines.extend(
                    inner
                        .into_iter()
                        .map(|l| format!("  {}", l.replace(" (one log command)", ""))),
                );
            }
        }
        other => lines.push(
            format!("Utility statement: {other:?}")
                .chars()
                .take(80)
                .collect(),
        ),
    }
    lines
}

fn describe_access(access: &Access, table: &str) -> String {
    match access {
        Access::Point(_) => format!("Point Get on {table} using primary key"),
        Access::Range { .. } => format!("Range Scan on {table} using primary key"),
        Access::Index { name, .. } => format!("Index Scan on {table} using {name}"),
        Access::IndexRange { name, first, .. } => match first {
            None => format!("Index Scan on {table} using {name}"),
            Some(f) if f.descending => {
                format!("Index Scan Backward on {table} using {name} to the limit")
            }
            Some(_) => format!("Index Scan on {table} using {name} to the limit"),
        },
        Access::Full => format!("Full Scan on {table}"),
        Access::KeyRange { first, .. } => {
            let scan = format!("Range Scan on {table} using primary key");
            match first {
                None => scan,
                Some(f) if f.descending => {
                    format!("Range Scan Backward on {table} using primary key to the limit")
                }
                Some(_) => format!("{scan} to the limit"),
            }
        }
    }
}

fn explain_rel(rel: &Rel, depth: usize, lines: &mut Vec<String>) {
    let mut line = String::new();
    for _ in 0..depth {
        line.push_str("  ");
    }
    if depth > 0 {
        line.push_str("-> ");
    }
    match rel {
        Rel::Scan {
            source,
            access,
            filter,
        } => {
            let name = match source {
                TableSource::User(t) => t.name.clone(),
                TableSource::System(s) => s.name().to_string(),
            };
            line.push_str(&describe_access(access, &name));
            if filter.is_some() {
                line.push_str(" with filter");
            }
            lines.push(line);
        }
        Rel::Values { rows } => {
            let _ = write!(line, "Values ({} rows)", rows.len());
            lines.push(line);
        }
        Rel::Filter { input, .. } => {
            line.push_str("Filter");
            lines.push(line);
            explain_rel(input, depth + 1, lines);
        }
        Rel::Project { input, .. } => {
            line.push_str("Project");
            lines.push(line);
            explain_rel(input, depth + 1, lines);
        }
        Rel::Join {
            left,
            right,
            kind,
            lateral,
            ..
        } => {
            let _ = write!(
                line,
                "Nested Loop {kind:?} Join{}",
                if *lateral { " (lateral)" } else { "" }
            );
            lines.push(line);
            explain_rel(left, depth + 1, lines);
            explain_rel(right, depth + 1, lines);
        }
        Rel::Aggregate {
            input, group_by, ..
        } => {
            line.push_str(if group_by.is_empty() {
                "Aggregate"
            } else {
                "Group Aggregate"
            });
            lines.push(line);
            explain_rel(input, depth + 1, lines);
        }
        Rel::Sort { input, .. } => {
            line.push_str("Sort");
            lines.push(line);
            explain_rel(input, depth + 1, lines);
        }
        Rel::Limit { input, .. } => {
            line.push_str("Limit");
            lines.push(line);
            explain_rel(input, depth + 1, lines);
        }
        Rel::Distinct { input } => {
            line.push_str("Distinct");
            lines.push(line);
            explain_rel(input, depth + 1, lines);
        }
        Rel::Series { .. } => {
            line.push_str("Function Scan on generate_series");
            lines.push(line);
        }
        Rel::Unnest { .. } => {
            line.push_str("Function Scan on unnest");
            lines.push(line);
        }
        Rel::SequenceState { .. } => {
            line.push_str("Seq Scan on sequence");
            lines.push(line);
        }
        Rel::Ordinality { input } => {
            line.push_str("With Ordinality");
            lines.push(line);
            explain_rel(input, depth + 1, lines);
        }
        Rel::SetDifference {
            left,
            right,
            except,
            all,
        } => {
            line.push_str(match (except, all) {
                (false, false) => "Intersect",
                (false, true) => "Intersect All",
                (true, false) => "Except",
                (true, true) => "Except All",
            });
            lines.push(line);
            explain_rel(left, depth + 1, lines);
            explain_rel(right, depth + 1, lines);
        }
        Rel::DistinctOn { input, .. } => {
            line.push_str("Unique");
            lines.push(line);
            explain_rel(input, depth + 1, lines);
        }
        Rel::Window { input, .. } => {
            line.push_str("WindowAgg");
            lines.push(line);
            explain_rel(input, depth + 1, lines);
        }
        Rel::CommonTable { name, input, .. } => {
            let _ = write!(line, "CTE Scan on {name}");
            lines.push(line);
            explain_rel(input, depth + 1, lines);
        }
        Rel::Union { left, right, all } => {
            line.push_str(if *all { "Union All" } else { "Union" });
            lines.push(line);
            explain_rel(left, depth + 1, lines);
            explain_rel(right, depth + 1, lines);
        }
        Rel::RecursiveUnion {
            anchor, recursive, ..
        } => {
            line.push_str("Recursive Union");
            lines.push(line);
            explain_rel(anchor, depth + 1, lines);
            explain_rel(recursive, depth + 1, lines);
        }
        Rel::WorkingTable { .. } => {
            line.push_str("WorkTable Scan");
            lines.push(line);
        }
    }
}

/// Whether a plan reads system table `table` (subqueries included).
pub fn reads_system_table(rel: &Rel, table: SystemTable) -> bool {
    let mut found = false;
    visit_rel(rel, &mut |r| {
        found |= matches!(r, Rel::Scan { source: TableSource::System(s), .. } if *s == table);
    });
    found
}

/// Whether evaluating a relation may take long whatever tables it reads: anything beyond
/// one row of values, filtered or projected (a series, a join, a recursive query, a sort or
/// aggregate of many rows). Such a statement runs off the session's thread.
pub fn may_run_long(rel: &Rel) -> bool {
    let mut found = false;
    visit_rel(rel, &mut |r| {
        found |= !matches!(
            r,
            Rel::Values { .. } | Rel::Project { .. } | Rel::Filter { .. } | Rel::Limit { .. }
        );
    });
    found
}

/// Whether a relation reads nothing but rows found by their whole key (filtered, projected,
/// limited): a point read, quicker on the executor than a snapshot is to take.
pub fn reads_by_key_only(rel: &Rel) -> bool {
    let mut by_key = true;
    visit_rel(rel, &mut |r| {
        by_key &= matches!(
            r,
            Rel::Values { .. }
                | Rel::Project { .. }
                | Rel::Filter { .. }
                | Rel::Limit { .. }
                | Rel::Scan {
                    access: Access::Point(_),
                    ..
                }
        );
    });
    by_key
}

/// True when evaluating a relation needs the executor's storage: it scans a user table, or
/// asks for a relation's size.
pub fn reads_storage(rel: &Rel) -> bool {
    let mut found = false;
    visit_rel(rel, &mut |r| {
        found |= matches!(
            r,
            Rel::Scan {
                source: TableSource::User(_),
                ..
            } | Rel::SequenceState { .. }
        );
        for e in rel_parts(r).0 {
            e.visit(&mut |x| {
                if let Expr::Function { func, .. } = x {
                    found |= func.reads_storage();
                }
            });
        }
    });
    found
}

/// Calls `f` for every user table a relation (or any subquery inside it) scans.
pub fn visit_read_tables(rel: &Rel, f: &mut dyn FnMut(&TableDef)) {
    visit_rel(rel, &mut |r| {
        if let Rel::Scan {
            source: TableSource::User(table),
            ..
        } = r
        {
            f(table);
        }
    });
}

/// Calls `f` for every user table a subquery inside `expr` scans.
pub fn visit_expr_read_tables(expr: &Expr, f: &mut dyn FnMut(&TableDef)) {
    expr.visit(&mut |x| match x {
        Expr::Subquery { rel, .. } | Expr::InSubquery { rel, .. } => visit_read_tables(rel, f),
        _ => {}
    });
}

impl Access {
    /// Adds the expressions that compute the access path's keys to `out`.
    pub fn push_exprs<'e>(&'e self, out: &mut Vec<&'e Expr>) {
        match self {
            Access::Point(keys) => out.extend(keys),
            Access::Range { lower, upper } => {
                out.extend(lower.iter().map(|(e, _)| e));
                out.extend(upper.iter().map(|(e, _)| e));
            }
            Access::Index { key, .. } => out.extend(key),
            Access::IndexRange {
                key,
                lower,
                upper,
                first,
                ..
            }
            | Access::KeyRange {
                key,
                lower,
                upper,
                first,
            } => {
                out.extend(key);
                out.extend(lower.iter().map(|(e, _)| e));
                out.extend(upper.iter().map(|(e, _)| e));
                if let Some(f) = first {
                    out.push(&f.limit);
                    out.extend(&f.offset);
                }
            }
            Access::Full => {}
        }
    }
}

impl WritePlan {
    /// Calls `f` for every user table the statement reads besides its target: tables in its
    /// source query and in subqueries of its expressions.
    pub fn visit_read_tables(&self, f: &mut dyn FnMut(&TableDef)) {
        if let WritePlan::Insert(InsertPlan {
            source: InsertSource::Query(rel),
            ..
        }) = self
        {
            visit_read_tables(rel, f);
        }
        for e in self.own_exprs() {
            visit_expr_read_tables(e, f);
        }
    }

    /// The statement's own expressions (not those of an INSERT's source query): VALUES,
    /// access keys, filters, assignments, ON CONFLICT and RETURNING.
    pub fn own_exprs(&self) -> Vec<&Expr> {
        let mut exprs: Vec<&Expr> = Vec::new();
        match self {
            WritePlan::Insert(p) => {
                if let InsertSource::Values(rows) = &p.source {
                    rows.iter().for_each(|r| exprs.extend(r));
                }
                if let Some((assignments, filter)) =
                    p.on_conflict.as_ref().and_then(OnConflict::update)
                {
                    exprs.extend(assignments.iter().map(|(_, e)| e));
                    exprs.extend(filter);
                }
            }
            WritePlan::Update(p) => {
                p.access.push_exprs(&mut exprs);
                exprs.extend(&p.filter);
                exprs.extend(p.assignments.iter().map(|(_, e)| e));
            }
            WritePlan::Delete(p) => {
                p.access.push_exprs(&mut exprs);
                exprs.extend(&p.filter);
            }
        }
        if let Some(returning) = self.returning() {
            exprs.extend(returning);
        }
        exprs
    }
}

/// Calls `f` for every expression in a relation, its inputs and the subqueries inside them
/// (each subquery's own expressions too).
/// Whether `rel`, run as a subquery for a row of `outer_len` values, can give different rows
/// for different rows: it reads one of their values, draws random values, calls sequences,
/// or reads a recursive query's working table (which changes as the recursion runs).
pub fn rel_depends_on_row(rel: &Rel, outer_len: usize) -> bool {
    let mut depends = false;
    visit_rel(rel, &mut |r| {
        depends |= matches!(r, Rel::WorkingTable { .. } | Rel::SequenceState { .. });
    });
    visit_rel_exprs(rel, &mut |e| match e {
        Expr::Column(i, _) if *i < outer_len => depends = true,
        Expr::Function { func, .. } if func.draws_random() || func.uses_sequences() => {
            depends = true
        }
        _ => {}
    });
    depends
}

pub fn visit_rel_exprs(rel: &Rel, f: &mut dyn FnMut(&Expr)) {
    visit_rel(rel, &mut |r| {
        for e in rel_parts(r).0 {
            e.visit(&mut *f);
        }
    });
}

fn visit_rel(rel: &Rel, f: &mut dyn FnMut(&Rel)) {
    f(rel);
    let (exprs, children) = rel_parts(rel);
    for e in exprs {
        e.visit(&mut |x| match x {
            Expr::Subquery { rel, .. } | Expr::InSubquery { rel, .. } => visit_rel(rel, f),
            _ => {}
        });
    }
    for c in children {
        visit_rel(c, f);
    }
}

/// A relation node's own expressions and its input relations.
fn rel_parts(rel: &Rel) -> (Vec<&Expr>, Vec<&Rel>) {
    let mut exprs: Vec<&Expr> = Vec::new();
    let mut children: Vec<&Rel> = Vec::new();
    match rel {
        Rel::Scan { access, filter, .. } => {
            exprs.extend(filter);
            access.push_exprs(&mut exprs);
        }
        Rel::Values { rows } => rows.iter().for_each(|r| exprs.extend(r)),
        Rel::Filter { input, predicate } => {
            children.push(input);
            exprs.push(predicate);
        }
        Rel::Project { input, exprs: e } => {
            children.push(input);
            exprs.extend(e);
        }
        Rel::Join {
            left, right, on, ..
        } => {
            children.push(left);
            children.push(right);
            exprs.extend(on);
        }
        Rel::Aggregate {
            input,
            group_by,
            aggregates,
        } => {
            children.push(input);
            exprs.extend(group_by);
            aggregates.iter().for_each(|a| exprs.extend(&a.args));
        }
        Rel::Sort { input, keys } => {
            children.push(input);
            exprs.extend(keys.iter().map(|k| &k.expr));
        }
        Rel::Limit {
            input,
            limit,
            offset,
        } => {
            children.push(input);
            exprs.extend(limit);
            exprs.extend(offset);
        }
        Rel::Distinct { input }
        | Rel::CommonTable { input, .. }
        | Rel::DistinctOn { input, .. } => children.push(input),
        Rel::SetDifference { left, right, .. } => {
            children.push(left);
            children.push(right);
        }
        Rel::Window { input, calls } => {
            children.push(input);
            for call in calls {
                exprs.extend(&call.args);
                exprs.extend(&call.partition_by);
                exprs.extend(call.order_by.iter().map(|k| &k.expr));
                if let WindowFunc::Aggregate(a) = &call.func {
                    exprs.extend(&a.args);
                }
            }
        }
        Rel::Series { start, stop, step } => {
            exprs.push(start);
            exprs.push(stop);
            exprs.extend(step);
        }
        Rel::Unnest { array } => exprs.push(array),
        Rel::SequenceState { .. } => {}
        Rel::Ordinality { input } => children.push(input),
        Rel::Union { left, right, .. } => {
            children.push(left);
            children.push(right);
        }
        Rel::RecursiveUnion {
            anchor, recursive, ..
        } => {
            children.push(anchor);
            children.push(recursive);
        }
        Rel::WorkingTable { .. } => {}
    }
    (exprs, children)
}

/// The result columns of `CALL create_transfers(...)` and `CALL create_accounts(...)`: one
/// row per event.
pub fn ledger_batch_columns() -> Vec<OutputColumn> {
    [
        ("index", DataType::Int4),
        ("id", DataType::Int8),
        ("status", DataType::Text),
        ("result", DataType::Text),
        ("sqlstate", DataType::Text),
        ("message", DataType::Text),
    ]
    .into_iter()
    .map(|(name, ty)| OutputColumn::computed(name, ty))
    .collect()
}

/// A bound statement and the types of its parameters.
#[derive(Clone, Debug)]
pub struct Bound {
    pub plan: Plan,
    pub param_types: Vec<DataType>,
    /// Notices binding found (`role "x" is already a member of role "y"`), sent before
    /// the statement's result each time it runs.
    pub notices: Vec<sql::SqlError>,
    /// A query with `FOR UPDATE`/`FOR SHARE` (and their NOWAIT/SKIP LOCKED forms): inside a
    /// transaction block the rows it read are checked at COMMIT (see `Session::select`).
    pub locks_rows: bool,
}

/// The text a VALUES item holds when it says DEFAULT; the executor fills in the column's
/// default. (A real string literal cannot produce it: it is not valid UTF-8 text a client
/// can send, since it contains a NUL.)
pub const DEFAULT_MARKER: &str = "\0default\0";

/// What an advisory lock function does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdvisoryAction {
    /// Waits until the lock is free, then takes it.
    Lock,
    /// Takes the lock if it is free: true, else false.
    TryLock,
    /// Gives back one hold of the lock: whether the session held it.
    Unlock,
    /// Gives back every session-level lock of the session.
    UnlockAll,
}

/// One advisory lock call, its key still to evaluate (parameters).
#[derive(Clone, Debug)]
pub struct AdvisoryLockCall {
    pub action: AdvisoryAction,
    pub shared: bool,
    /// Held until the transaction ends rather than until unlocked or the session ends.
    pub transaction: bool,
    /// The key: one bigint, or two integers (a key space of its own).
    pub key: Vec<Expr>,
    pub column: OutputColumn,
}

/// What a `CALL hotledger.…` does to the cluster's membership.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterAction {
    AddNode,
    RemoveNode,
    TransferLeader,
}

/// A membership change, its arguments (the node id, then for `add_node` its Raft address)
/// still to evaluate (parameters).
#[derive(Clone, Debug)]
pub struct ClusterChangeCall {
    pub action: ClusterAction,
    pub args: Vec<Expr>,
}

/// `NOTIFY channel [, 'payload']` or `SELECT pg_notify(channel, payload)`, its arguments
/// still to evaluate (parameters).
#[derive(Clone, Debug)]
pub struct NotifyCall {
    pub channel: Expr,
    pub payload: Expr,
    /// The column `SELECT pg_notify(...)` answers with (None for NOTIFY).
    pub column: Option<OutputColumn>,
}
