//! Which partitions a command touches, decided from the command alone before it runs, so
//! the executor knows whether it can run on one partition's thread or must hold several.
//!
//! The answer may be larger than what the command ends up touching (when in doubt: every
//! partition), never smaller: a command runs holding exactly the partitions named here.

use std::sync::Arc;

use plan::{Catalog, EvalEnv, InsertSource, LedgerRole, LedgerSchema, TableDef, WritePlan};
use sql::Value;

use crate::apply::build_row;
use crate::command::{Command, ReadCheck, WriteOp};
use crate::partition::{is_partitioned, partition_of_id, partition_of_row};
use crate::row::Row;
use crate::transfer::flag_at;

/// A set of partitions as bits (at most 64 partitions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reach(pub u64);

impl Reach {
    pub const NONE: Reach = Reach(0);

    pub fn all(partitions: usize) -> Reach {
        Reach(if partitions >= 64 {
            u64::MAX
        } else {
            (1u64 << partitions) - 1
        })
    }

    pub fn one(partition: usize) -> Reach {
        Reach(1 << partition)
    }

    pub fn with(self, other: Reach) -> Reach {
        Reach(self.0 | other.0)
    }

    pub fn contains(self, partition: usize) -> bool {
        self.0 & (1 << partition) != 0
    }

    /// The partition, when exactly one.
    pub fn single(self) -> Option<usize> {
        (self.0.count_ones() == 1).then(|| self.0.trailing_zeros() as usize)
    }

    pub fn iter(self) -> impl Iterator<Item = usize> {
        (0..64).filter(move |&p| self.contains(p))
    }
}

/// What the router needs to know: the catalog in force, the ledger's columns (None before
/// the ledger migration), the partition count.
pub(crate) struct Router<'a> {
    pub catalog: &'a Catalog,
    pub schema: Option<Arc<LedgerSchema>>,
    pub partitions: usize,
}

impl Router<'_> {
    fn all(&self) -> Reach {
        Reach::all(self.partitions)
    }

    /// Where a table's rows may be when nothing narrows it down.
    fn table(&self, table: &TableDef) -> Reach {
        if is_partitioned(table) {
            self.all()
        } else {
            Reach::one(0)
        }
    }

    fn table_id(&self, id: u32) -> Reach {
        match self.catalog.table_by_id(id) {
            Some(t) => self.table(t),
            None => Reach::one(0),
        }
    }

    fn key(&self, id: u32, key: &[u8]) -> Reach {
        match self.catalog.table_by_id(id) {
            Some(t) => Reach::one(partition_of_row(t, key, self.partitions)),
            None => Reach::one(0),
        }
    }

    fn id(&self, value: &Value) -> Reach {
        match value {
            Value::Int(id) => Reach::one(partition_of_id(*id, self.partitions)),
            _ => Reach::NONE,
        }
    }

    pub fn command(&self, command: &Command) -> Reach {
        if self.partitions <= 1 {
            return Reach::one(0);
        }
        match command {
            Command::Write {
                plan,
                params,
                now_micros,
            } => self.write(plan, params, *now_micros),
            Command::Commit { reads, ops, .. } => {
                let mut reach = Reach::NONE;
                for check in reads {
                    reach = reach.with(match check {
                        ReadCheck::Row { table, key, .. }
                        | ReadCheck::Exists { table, key, .. } => self.key(*table, key),
                        ReadCheck::Table { table, .. } => self.table_id(*table),
                    });
                }
                for op in ops {
                    reach = reach.with(self.op(op));
                }
                if reach == Reach::NONE {
                    Reach::one(0)
                } else {
                    reach
                }
            }
            // Sequence states live with the coordinator (see `sequences`).
            Command::Ddl { .. }
            | Command::CommitWithSchema { .. }
            | Command::WriteWithSequences { .. }
            | Command::QueryWithSequences { .. }
            | Command::AllocateSequenceValues { .. } => self.all(),
            // The meta table is partition 0's; the partition count is the executor's.
            Command::ClusterSettings(_) | Command::Pulse { .. } => Reach::one(0),
            Command::Procedure {
                steps,
                params,
                now_micros,
            } => {
                let mut reach = Reach::one(0);
                for step in steps {
                    reach = reach.with(match step {
                        plan::Step::Write(plan) => self.write(plan, params, *now_micros),
                        plan::Step::Query(plan)
                            if plan::rel_calls(&plan.rel, plan::Func::uses_sequences) =>
                        {
                            self.all()
                        }
                        plan::Step::Query(plan) => {
                            let mut r = Reach::NONE;
                            plan::visit_read_tables(&plan.rel, &mut |t| r = r.with(self.table(t)));
                            r
                        }
                    });
                }
                reach
            }
            Command::LedgerBatch {
                table,
                columns,
                rows,
                now_micros,
                ..
            } => self.rows(table.id, columns, rows, *now_micros),
            Command::Copy {
                table,
                columns,
                rows,
                now_micros,
            } => self.rows(table.id, columns, rows, *now_micros),
        }
    }

    fn write(&self, plan: &WritePlan, params: &[Value], now_micros: i64) -> Reach {
        let mut reach = Reach::NONE;
        plan.visit_read_tables(&mut |t| reach = reach.with(self.table(t)));
        let Some(table) = self.catalog.table_by_id(plan.table().id) else {
            return reach.with(Reach::one(0));
        };
        if !self.catalog.sequences.is_empty()
            && plan::write_calls(plan, table, plan::Func::uses_sequences)
        {
            return self.all();
        }
        let target = match plan {
            WritePlan::Insert(insert) if is_partitioned(table) => match &insert.source {
                InsertSource::Values(rows) => {
                    let env = EvalEnv::without_subqueries(params, now_micros);
                    let values = rows
                        .iter()
                        .map(|row| row.iter().map(|e| e.eval(&[], &env).ok()).collect());
                    self.rows_of(table, &insert.target_columns, values, &env)
                }
                InsertSource::Query(_) => self.all(),
                InsertSource::Rows(rows) => self.full_rows(table, rows.iter().map(Some)),
                InsertSource::Packed(rows) => self.full_rows(table, rows.rows().map(Result::ok)),
            },
            _ => self.table(table),
        };
        reach.with(target)
    }

    fn op(&self, op: &WriteOp) -> Reach {
        let mut reach = match op {
            WriteOp::Insert { table, row, .. } => match self.catalog.table_by_id(table.id) {
                Some(def) => self.full_row(def, row),
                None => Reach::one(0),
            },
            WriteOp::Update { table, key, .. } | WriteOp::Delete { table, key, .. } => {
                self.key(table.id, key)
            }
        };
        let exprs: Vec<&plan::Expr> = match op {
            WriteOp::Insert { .. } => Vec::new(),
            WriteOp::Update {
                assignments,
                recheck,
                ..
            } => assignments.iter().map(|(_, e)| e).chain(recheck).collect(),
            WriteOp::Delete { recheck, .. } => recheck.iter().collect(),
        };
        for e in exprs {
            plan::visit_expr_read_tables(e, &mut |t| reach = reach.with(self.table(t)));
        }
        reach
    }

    fn rows(&self, table: u32, columns: &[usize], rows: &[Row], now_micros: i64) -> Reach {
        let Some(def) = self.catalog.table_by_id(table) else {
            return Reach::one(0);
        };
        if !is_partitioned(def) {
            return Reach::one(0);
        }
        let env = EvalEnv::without_subqueries(&[], now_micros);
        self.rows_of(def, columns, rows.iter().map(|r| Some(r.clone())), &env)
    }

    /// Rows given for some columns of a partitioned table (None: a row whose values could
    /// not be computed here), defaults filled in as the insert will.
    fn rows_of(
        &self,
        table: &TableDef,
        columns: &[usize],
        rows: impl Iterator<Item = Option<Vec<Value>>>,
        env: &EvalEnv,
    ) -> Reach {
        // The insert fails the same way wherever it runs: a row that cannot be built here
        // reaches every partition.
        let built = rows.map(|values| values.and_then(|v| build_row(table, columns, v, env).ok()));
        self.full_rows(table, built)
    }

    /// Complete rows of a partitioned table (None: a row not known here).
    fn full_rows<R: AsRef<[Value]>>(
        &self,
        table: &TableDef,
        rows: impl Iterator<Item = Option<R>>,
    ) -> Reach {
        let mut reach = Reach::NONE;
        for row in rows {
            // A big multi-row insert reaches every partition after a few rows.
            if reach == self.all() {
                break;
            }
            reach = reach.with(match row {
                Some(row) => self.full_row(table, row.as_ref()),
                None => self.all(),
            });
        }
        reach
    }

    /// The partitions an insert of `row` into `table` touches.
    fn full_row(&self, table: &TableDef, row: &[Value]) -> Reach {
        let Some(schema) = self.schema.as_deref() else {
            return self.table(table);
        };
        match table.ledger {
            None => Reach::one(0),
            // An imported event looks up the stored timestamps of every partition.
            Some(LedgerRole::Accounts) if flag_at(row, schema.account.imported) => self.all(),
            Some(LedgerRole::Transfers) if flag_at(row, schema.transfer.imported) => self.all(),
            Some(LedgerRole::Accounts) => match row.get(schema.account.id) {
                Some(id @ Value::Int(_)) => self.id(id),
                _ => self.all(),
            },
            Some(LedgerRole::Transfers) => self.transfer(schema, row),
            Some(
                LedgerRole::PendingTransfers
                | LedgerRole::AccountBalances
                | LedgerRole::TransferFailures
                | LedgerRole::ChangeEvents,
            ) => self.all(),
        }
    }

    /// A transfer reads and writes its own row (partition of its id) and its two accounts;
    /// a pending one with a timeout also the expiry schedule (partition 0). Posting or
    /// voiding reaches the pending transfer's accounts, known only from the stored
    /// transfer: every partition.
    fn transfer(&self, schema: &LedgerSchema, row: &[Value]) -> Reach {
        let t = &schema.transfer;
        let flag = |c: usize| matches!(row.get(c), Some(Value::Bool(true)));
        if flag(t.post_pending) || flag(t.void_pending) {
            return self.all();
        }
        let mut reach = Reach::NONE;
        for c in [t.id, t.debit_account_id, t.credit_account_id] {
            reach = reach.with(self.id(row.get(c).unwrap_or(&Value::Null)));
        }
        let no_timeout = matches!(row.get(t.timeout), Some(Value::Int(0)) | Some(Value::Null));
        if flag(t.pending) && !no_timeout {
            reach = reach.with(Reach::one(0));
        }
        if reach == Reach::NONE {
            // No id at all: it fails before touching anything, on partition 0.
            return Reach::one(0);
        }
        reach
    }
}
