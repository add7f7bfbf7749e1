//! Applying writes: statements outside transactions, transaction commits (validate, then
//! apply every op or none), COPY chunks, and schema changes; plus staging, which evaluates a
//! write statement inside a transaction without applying it.

use std::borrow::Cow;
use std::sync::Arc;

use planner::{
    Assignment, Catalog, ColumnSource, ConflictArbiter, DdlPlan, EvalEnv, Expr, Func, InsertPlan,
    InsertSource, LedgerRole, OnConflict, RowChange, Step, TableDef, TableRef, WritePlan,
    DEFAULT_MARKER,
};
use sql::{
    ColumnFill, DataType, ErrorKind, Packer, RowShape, SqlError, SqlResult, Value, ValueRows,
};

use crate::command::{CommandResult, Outcome, Overlay, ReadCheck, Staged, WriteOp};
use crate::error::kv_error;
use crate::executor::{Executor, StatementValues, Store, StoredRow};
use crate::lookahead::RowsAhead;
use crate::partition::Shard;
use crate::row::{encode_key, row_key, Row};

fn row_text(row: &[Value], table: &TableDef) -> String {
    row.iter()
        .zip(&table.columns)
        .map(|(v, c)| v.to_pg_text(c.ty).unwrap_or_else(|| "null".into()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A constraint a row breaks.
enum Violation<'t> {
    NotNull(&'t str),
    Check(&'t str),
}

/// The first NOT NULL or CHECK constraint of `table` that `row` breaks.
fn violation<'t>(
    table: &'t TableDef,
    row: &[Value],
    env: &EvalEnv<'_>,
) -> SqlResult<Option<Violation<'t>>> {
    for (i, c) in table.columns.iter().enumerate() {
        if !c.nullable && row[i].is_null() {
            return Ok(Some(Violation::NotNull(&c.name)));
        }
    }
    for check in &table.checks {
        if let Value::Bool(false) = check.expr.eval(row, env)? {
            return Ok(Some(Violation::Check(&check.name)));
        }
    }
    Ok(None)
}

/// NOT NULL and CHECK constraints of one row a statement writes.
fn check_row(table: &TableDef, row: &[Value], env: &EvalEnv<'_>) -> SqlResult<()> {
    let error = match violation(table, row, env)? {
        None => return Ok(()),
        Some(Violation::NotNull(column)) => SqlError::new(
            ErrorKind::NotNullViolation,
            format!(
                "null value in column \"{column}\" of relation \"{}\" violates not-null constraint",
                table.name
            ),
        ),
        Some(Violation::Check(check)) => SqlError::new(
            ErrorKind::CheckViolation,
            format!(
                "new row for relation \"{}\" violates check constraint \"{check}\"",
                table.name
            ),
        ),
    };
    Err(error.with_detail(format!("Failing row contains ({}).", row_text(row, table))))
}

/// DROP of catalog entries by name: every name must exist (unless IF EXISTS) before any
/// goes.
fn drop_named<T>(
    entries: &mut std::collections::BTreeMap<String, T>,
    names: &[String],
    if_exists: bool,
    missing: impl Fn(&str) -> SqlError,
) -> SqlResult<()> {
    if let Some(n) = names
        .iter()
        .find(|n| !entries.contains_key(*n) && !if_exists)
    {
        return Err(missing(n));
    }
    for n in names {
        entries.remove(n);
    }
    Ok(())
}

/// New sequences' names, checked before anything is created (a schema change fails whole):
/// none may be taken, or be `also` (a table created with them).
fn check_sequence_names(
    catalog: &Catalog,
    sequences: &[planner::SequenceDef],
    also: Option<&str>,
) -> SqlResult<()> {
    for (i, s) in sequences.iter().enumerate() {
        if catalog.relation_exists(&s.name)
            || also == Some(s.name.as_str())
            || sequences[..i].iter().any(|t| t.name == s.name)
        {
            return Err(SqlError::new(
                ErrorKind::DuplicateTable,
                format!("relation \"{}\" already exists", s.name),
            ));
        }
    }
    Ok(())
}

/// Every row a partition holds of relation `id`, with its storage key.
fn stored_rows(shard: &mut Shard, id: u32) -> SqlResult<Vec<(Vec<u8>, Row)>> {
    every_entry(shard, id)?
        .map(|item| {
            let (key, bytes) = item.map_err(kv_error)?;
            Ok((key, crate::row::decode_row(&bytes)?.1))
        })
        .collect()
}

/// Every kv entry of relation `id` in a partition, in key order.
fn every_entry(shard: &mut Shard, id: u32) -> SqlResult<kv::Range<'_>> {
    let handle = shard.handle(id)?;
    shard
        .engine
        .range(
            handle,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            kv::Direction::Forward,
        )
        .map_err(kv_error)
}

/// A table a view reads can be neither dropped nor altered (PostgreSQL would need CASCADE,
/// or check the view's columns).
fn refuse_if_viewed(catalog: &Catalog, table: &TableDef, what: &str) -> SqlResult<()> {
    match catalog.views_reading(table.id).next() {
        Some(view) => Err(SqlError::new(
            ErrorKind::DependentObjectsStillExist,
            format!(
                "cannot {what} table {} because other objects depend on it",
                table.name
            ),
        )
        .with_detail(format!(
            "view {} depends on table {}",
            view.name, table.name
        ))),
        None => Ok(()),
    }
}

/// A stored row against a table's altered definition, failing as PostgreSQL's ALTER TABLE
/// does: a column that must not be NULL, a CHECK some row breaks.
fn check_altered_row(table: &TableDef, row: &[Value], env: &EvalEnv<'_>) -> SqlResult<()> {
    match violation(table, row, env)? {
        None => Ok(()),
        Some(Violation::NotNull(column)) => Err(SqlError::new(
            ErrorKind::NotNullViolation,
            format!(
                "column \"{column}\" of relation \"{}\" contains null values",
                table.name
            ),
        )),
        Some(Violation::Check(check)) => Err(SqlError::new(
            ErrorKind::CheckViolation,
            format!(
                "check constraint \"{check}\" of relation \"{}\" is violated by some row",
                table.name
            ),
        )),
    }
}

/// A row's stored form, rebuilt from the version and values a scan returned (it equals the
/// bytes read, so undo can restore it without reading the row again).
pub(crate) fn stored_bytes(version: u64, row: &[Value]) -> Vec<u8> {
    let mut bytes = Vec::new();
    crate::row::encode_row(version, row, &mut bytes);
    bytes
}

/// A row a committed op applies to: its table, stored bytes (for undo) and values.
type CommitTarget = (Arc<TableDef>, Vec<u8>, Row);

/// `Key (a, b)=(1, x)`: how PostgreSQL names the key values in a uniqueness error.
pub(crate) fn key_description(table: &TableDef, columns: &[usize], row: &[Value]) -> String {
    let names: Vec<&str> = columns
        .iter()
        .map(|&c| table.columns[c].name.as_str())
        .collect();
    let values: Vec<String> = columns
        .iter()
        .map(|&c| row[c].to_pg_text(table.columns[c].ty).unwrap_or_default())
        .collect();
    format!("Key ({})=({})", names.join(", "), values.join(", "))
}

/// The error for a row whose unique key (primary key or unique index `name`) is taken.
pub(crate) fn unique_violation(
    table: &TableDef,
    name: &str,
    columns: &[usize],
    row: &[Value],
) -> SqlError {
    unique_violation_described(name, key_description(table, columns, row))
}

/// `unique_violation` with the key already described (`Key (...)=(...)`).
pub(crate) fn unique_violation_described(name: &str, key: String) -> SqlError {
    SqlError::new(
        ErrorKind::UniqueViolation,
        format!("duplicate key value violates unique constraint \"{name}\""),
    )
    .with_detail(format!("{key} already exists."))
}

/// The unique index an ON CONFLICT clause arbitrates on.
fn unique_arbiter(table: &TableDef, id: u32) -> SqlResult<&planner::IndexDef> {
    table.indexes.iter().find(|i| i.id == id).ok_or_else(|| {
        SqlError::serialization_failure(format!(
            "the unique index ON CONFLICT names on \"{}\" was dropped; retry",
            table.name
        ))
    })
}

fn duplicate_key(table: &TableDef, row: &[Value]) -> SqlError {
    unique_violation(table, &table.key_name(), &table.primary_key, row)
}

/// Casts every value to its column's type.
fn conform(table: &TableDef, row: &mut [Value]) -> SqlResult<()> {
    for (v, c) in row.iter_mut().zip(&table.columns) {
        conform_value(v, c.ty)?;
    }
    Ok(())
}

/// `v` in the form of a column of type `ty`.
fn conform_value(v: &mut Value, ty: DataType) -> SqlResult<()> {
    // The common cases already have their column's form (a bigint, a boolean, a
    // timestamptz); everything else goes through the cast.
    let conforms = match (&*v, ty) {
        (Value::Null, _) => true,
        (Value::Int(_), DataType::Int8) => true,
        (Value::Int(i), DataType::Int4) => i32::try_from(*i).is_ok(),
        (Value::Bool(_), DataType::Bool) => true,
        (Value::TimestampTz(_), DataType::TimestampTz) => true,
        _ => false,
    };
    if !conforms {
        *v = v.cast(ty)?;
    }
    Ok(())
}

/// A full row from the values given for `target_columns`, defaults for the rest.
pub(crate) fn build_row(
    table: &TableDef,
    target_columns: &[usize],
    values: Vec<Value>,
    env: &EvalEnv<'_>,
) -> SqlResult<Row> {
    let mut row = Vec::new();
    RowBuilder::new(table, target_columns).build_into(&mut row, values.into_iter().map(Ok), env)?;
    Ok(row)
}

/// Builds the full rows of one statement's insert: the values given for `target_columns`,
/// defaults for the rest, every value in its column's type. A default that gives every row
/// of the statement the same value (no random draw, no sequence; `now()` is the
/// statement's) is evaluated once, when a row first needs it, not once per row.
pub(crate) struct RowBuilder<'a> {
    table: &'a TableDef,
    target_columns: &'a [usize],
    /// Per column, its default's value once evaluated, when every row gets the same one.
    defaults: Vec<Option<Value>>,
}

impl<'a> RowBuilder<'a> {
    pub(crate) fn new(table: &'a TableDef, target_columns: &'a [usize]) -> RowBuilder<'a> {
        RowBuilder {
            table,
            target_columns,
            defaults: vec![None; table.columns.len()],
        }
    }

    /// Builds the row of `values` (in `target_columns` order) into `row`, which is emptied
    /// first and keeps its memory.
    pub(crate) fn build_into(
        &mut self,
        row: &mut Row,
        values: impl IntoIterator<Item = SqlResult<Value>>,
        env: &EvalEnv<'_>,
    ) -> SqlResult<()> {
        let width = self.table.columns.len();
        row.clear();
        row.resize_with(width, || Value::Null);
        // Which columns were given, on the stack for tables of up to 64 columns.
        let (mut few, mut many) = ([false; 64], Vec::new());
        let given: &mut [bool] = if width <= few.len() {
            &mut few[..width]
        } else {
            many.resize(width, false);
            &mut many
        };
        for (v, &c) in values.into_iter().zip(self.target_columns) {
            let v = v?;
            if matches!(&v, Value::Text(t) if t == DEFAULT_MARKER) {
                continue;
            }
            row[c] = v;
            given[c] = true;
        }
        for (i, given) in given.iter().enumerate() {
            if !given {
                row[i] = self.default(i, env)?;
            }
        }
        conform(self.table, row)
    }

    /// Column `i`'s default value (NULL without a default).
    fn default(&mut self, i: usize, env: &EvalEnv<'_>) -> SqlResult<Value> {
        if let Some(value) = &self.defaults[i] {
            return Ok(value.clone());
        }
        let Some(default) = &self.table.columns[i].default else {
            return Ok(Value::Null);
        };
        let value = default.eval(&[], env)?;
        // `now()` is the statement's time; other volatile calls differ from row to row.
        if !default.calls(|f| f.is_volatile() && f != Func::Now) {
            self.defaults[i] = Some(value.clone());
        }
        Ok(value)
    }
}

/// A row of a plan with built rows (`InsertSource::Packed`, or `Rows` from an older log).
pub(crate) fn prebuilt_row(table: &TableDef, row: Row) -> SqlResult<Row> {
    if row.len() != table.columns.len() {
        return Err(SqlError::internal("a prebuilt row does not fit its table"));
    }
    Ok(row)
}

fn assign(
    table: &TableDef,
    old: &[Value],
    assignments: &[(usize, Expr)],
    context: &[Value],
    env: &EvalEnv<'_>,
) -> SqlResult<Row> {
    let mut new = old.to_vec();
    for (c, e) in assignments {
        new[*c] = e.eval(context, env)?;
    }
    conform(table, &mut new)?;
    Ok(new)
}

fn returning(
    exprs: Option<&Vec<Expr>>,
    row: &[Value],
    env: &EvalEnv<'_>,
    out: &mut Vec<Row>,
) -> SqlResult<()> {
    if let Some(exprs) = exprs {
        out.push(
            exprs
                .iter()
                .map(|e| e.eval(row, env))
                .collect::<SqlResult<_>>()?,
        );
    }
    Ok(())
}

/// Assignments with their random values drawn (`Expr::with_random_drawn`).
fn draw_all(exprs: &[(usize, Expr)]) -> SqlResult<Vec<(usize, Expr)>> {
    exprs
        .iter()
        .map(|(c, e)| Ok((*c, e.with_random_drawn()?)))
        .collect()
}

/// Whether a SET list or its WHERE has subqueries (they read tables when evaluated).
fn reads_tables(assignments: &[Assignment], filter: Option<&Expr>) -> bool {
    assignments.iter().any(|(_, e)| e.has_subquery()) || filter.is_some_and(Expr::has_subquery)
}

/// A staged write's SET list and WHERE as the commit will evaluate them on `row` (the row
/// they see): subqueries replaced by their values there, parameters and `now()` fixed.
fn fixed_on_row(
    assignments: &[Assignment],
    filter: Option<&Expr>,
    row: &[Value],
    env: &EvalEnv<'_>,
) -> SqlResult<(Vec<Assignment>, Option<Expr>)> {
    let fixed = |e: &Expr| {
        e.with_subqueries_evaluated(row, env)?
            .bind_constants(env.params, env.now_micros)
    };
    let assignments = assignments
        .iter()
        .map(|(c, e)| Ok((*c, fixed(e)?)))
        .collect::<SqlResult<_>>()?;
    Ok((assignments, filter.map(fixed).transpose()?))
}

fn bind_filter(
    filter: Option<&Expr>,
    params: &[Value],
    now_micros: i64,
) -> SqlResult<Option<Expr>> {
    filter
        .map(|f| f.bind_constants(params, now_micros))
        .transpose()
}

fn bind_all(
    exprs: &[(usize, Expr)],
    params: &[Value],
    now_micros: i64,
) -> SqlResult<Vec<(usize, Expr)>> {
    exprs
        .iter()
        .map(|(c, e)| Ok((*c, e.bind_constants(params, now_micros)?)))
        .collect()
}

impl Executor {
    fn next_rowid(&mut self) -> u64 {
        self.rowid_next += 1;
        self.rowid_next
    }

    /// Inserts one full row; returns the row as stored (None when ON CONFLICT DO NOTHING
    /// skipped it or the DO UPDATE filter rejected it).
    pub(crate) fn insert_row(
        &mut self,
        table: &TableDef,
        row: Row,
        on_conflict: Option<&OnConflict>,
        env: &EvalEnv<'_>,
        version: u64,
    ) -> SqlResult<Option<Row>> {
        let row = match table.ledger {
            Some(LedgerRole::Transfers) => {
                check_row(table, &row, env)?;
                return self.create_transfer(table, row, on_conflict, version);
            }
            Some(LedgerRole::Accounts) => self.prepare_account(row)?,
            _ => row,
        };
        check_row(table, &row, env)?;
        let rowid = if table.has_primary_key() {
            0
        } else {
            self.next_rowid()
        };
        let key = row_key(table, &row, rowid)?;
        let storage = self.storage_of(table)?;
        let arbiter = on_conflict.map_or(ConflictArbiter::PrimaryKey, OnConflict::arbiter);
        let conflict = self.conflict_on(table, storage, arbiter, &key, &row)?;
        let Some((existing_key, (old_bytes, _, existing))) = conflict else {
            if matches!(arbiter, ConflictArbiter::Index(_))
                && self.get_row(storage, &key)?.is_some()
            {
                return Err(duplicate_key(table, &row));
            }
            let mark = self.undo_len();
            match self.put_row(table, &key, None, &row, version) {
                // Every unique constraint arbitrates: one found only on writing (an
                // expression or partial index's) skips the row too.
                Err(e)
                    if arbiter == ConflictArbiter::Any && e.kind == ErrorKind::UniqueViolation =>
                {
                    self.rollback_to(mark);
                    return Ok(None);
                }
                written => written?,
            }
            self.check_parents(table, &row, None)?;
            return Ok(Some(row));
        };
        let Some((assignments, filter)) = on_conflict.and_then(OnConflict::update) else {
            return match on_conflict {
                None => Err(duplicate_key(table, &row)),
                Some(_) => Ok(None),
            };
        };
        let mut context = existing.clone();
        context.extend(row.iter().cloned());
        // Subqueries in the DO UPDATE read the tables as they are now, the statement's
        // earlier rows included.
        let subqueries = reads_tables(assignments, filter);
        let updated = |env: &EvalEnv<'_>| -> SqlResult<Option<Row>> {
            if let Some(f) = filter {
                if !f.eval(&context, env)?.is_true() {
                    return Ok(None);
                }
            }
            assign(table, &existing, assignments, &context, env).map(Some)
        };
        let new = if subqueries {
            let reader = self.command_reader();
            updated(&reader.env(env.params, env.now_micros))?
        } else {
            updated(env)?
        };
        let Some(new) = new else {
            return Ok(None);
        };
        check_row(table, &new, env)?;
        if table.has_primary_key() && row_key(table, &new, 0)? != existing_key {
            return Err(SqlError::feature_not_supported(
                "ON CONFLICT DO UPDATE that changes the primary key",
            ));
        }
        self.put_row(table, &existing_key, Some(old_bytes), &new, version)?;
        self.check_parents(table, &new, Some(&existing))?;
        self.act_on_children(table, &existing, Some(&new), env, version)?;
        Ok(Some(new))
    }

    /// The stored row (its key, bytes and values) that `row`, stored under `key`, conflicts
    /// with on `arbiter`, if any.
    fn conflict_on(
        &mut self,
        table: &TableDef,
        storage: Store,
        arbiter: ConflictArbiter,
        key: &[u8],
        row: &[Value],
    ) -> SqlResult<Option<(Vec<u8>, StoredRow)>> {
        let by_key = |stored: Option<StoredRow>| stored.map(|s| (key.to_vec(), s));
        match arbiter {
            ConflictArbiter::PrimaryKey => Ok(by_key(self.get_row(storage, key)?)),
            ConflictArbiter::Index(id) => {
                let index = unique_arbiter(table, id)?;
                self.conflict_through(table, &index.columns, row)
            }
            ConflictArbiter::Any => {
                if let Some(found) = by_key(self.get_row(storage, key)?) {
                    return Ok(Some(found));
                }
                for index in table.indexes.iter().filter(|i| i.unique && !i.is_derived()) {
                    if let Some(found) = self.conflict_through(table, &index.columns, row)? {
                        return Ok(Some(found));
                    }
                }
                Ok(None)
            }
        }
    }

    /// The stored row (key, bytes and values) whose `columns` hold `row`'s values there,
    /// none NULL: the row a unique index's entry for `row` would collide with.
    fn conflict_through(
        &mut self,
        table: &TableDef,
        columns: &[usize],
        row: &[Value],
    ) -> SqlResult<Option<(Vec<u8>, StoredRow)>> {
        if columns.iter().any(|&c| row[c].is_null()) {
            return Ok(None);
        }
        let found = self.command_reader().rows_with(table, columns, row)?.pop();
        Ok(found.map(|f| {
            let bytes = stored_bytes(f.version, &f.row);
            (f.key, (bytes, f.version, f.row))
        }))
    }

    /// Replaces a stored row with `new`, moving it when its primary key changed; then its
    /// foreign keys are checked and the rows referencing it take their actions.
    pub(crate) fn replace_row(
        &mut self,
        table: &TableDef,
        key: &[u8],
        old_bytes: Vec<u8>,
        new: &[Value],
        env: &EvalEnv<'_>,
        version: u64,
    ) -> SqlResult<()> {
        if self.catalog.foreign_keys.is_empty() {
            return self.replace_stored_row(table, key, old_bytes, new, env, version);
        }
        let old = crate::row::decode_row(&old_bytes)?.1;
        self.replace_stored_row(table, key, old_bytes, new, env, version)?;
        self.check_parents(table, new, Some(&old))?;
        self.act_on_children(table, &old, Some(new), env, version)
    }

    fn replace_stored_row(
        &mut self,
        table: &TableDef,
        key: &[u8],
        old_bytes: Vec<u8>,
        new: &[Value],
        env: &EvalEnv<'_>,
        version: u64,
    ) -> SqlResult<()> {
        check_row(table, new, env)?;
        if !table.has_primary_key() {
            return self.put_row(table, key, Some(old_bytes), new, version);
        }
        let new_key = row_key(table, new, 0)?;
        if new_key == key {
            return self.put_row(table, key, Some(old_bytes), new, version);
        }
        let storage = self.storage_of(table)?;
        if self.get_row(storage, &new_key)?.is_some() {
            return Err(duplicate_key(table, new));
        }
        self.delete_row(table, key, old_bytes, version)?;
        self.put_row(table, &new_key, None, new, version)
    }

    /// The stored rows an UPDATE or DELETE applied outside a transaction touches.
    fn write_targets(
        &mut self,
        table: &TableDef,
        access: &planner::Access,
        filter: Option<&Expr>,
        params: &[Value],
        now_micros: i64,
    ) -> SqlResult<Vec<crate::query::ScannedRow>> {
        let reader = self.command_reader();
        let env = reader.env(params, now_micros);
        reader.scan_stored(table, access, filter, &[], &env)
    }

    /// Inserts an INSERT's source rows (built from `p`'s target columns, or already built
    /// when the plan carries them) into `table`: how many it stored, with RETURNING
    /// (or a CALL's id and status) rows added to `out`.
    fn insert_rows(
        &mut self,
        table: &TableDef,
        p: &InsertPlan,
        sources: impl ExactSizeIterator<Item = SqlResult<Row>>,
        env: &EvalEnv<'_>,
        version: u64,
        out: &mut Vec<Row>,
    ) -> SqlResult<u64> {
        let count = sources.len();
        let prebuilt = matches!(p.source, InsertSource::Rows(_) | InsertSource::Packed(_));
        let mut affected = 0;
        // The keys of the rows a DO UPDATE statement stored: changing one twice is an error.
        let updates = p
            .on_conflict
            .as_ref()
            .and_then(OnConflict::update)
            .is_some();
        let mut touched =
            (updates && table.has_primary_key()).then(std::collections::HashSet::<Vec<u8>>::new);
        let mut builder = RowBuilder::new(table, &p.target_columns);
        let rows = sources.map(|values| {
            values.and_then(|values| {
                if prebuilt {
                    prebuilt_row(table, values)
                } else {
                    let mut row = Vec::new();
                    builder.build_into(&mut row, values.into_iter().map(Ok), env)?;
                    Ok(row)
                }
            })
        });
        // A multi-row transfer statement (its account working set is open) reads its rows a
        // group ahead and finds the leaves they will touch before applying them.
        let look_ahead =
            table.ledger == Some(LedgerRole::Transfers) && self.account_set.is_some() && count > 1;
        let mut rows = RowsAhead::new(rows, look_ahead);
        for n in 0..count {
            let Some(row) = rows.next(self, table) else {
                break;
            };
            let inserted = row
                .and_then(|row| {
                    let id = p.call.then(|| call_id(table, &row));
                    let stored =
                        self.insert_row(table, row, p.on_conflict.as_ref(), env, version)?;
                    Ok((id, stored))
                })
                .map_err(|e| in_row(table, e, n, count))?;
            match inserted {
                (Some(id), stored) => {
                    affected += stored.is_some() as u64;
                    let status = if stored.is_some() {
                        "created"
                    } else {
                        "exists"
                    };
                    out.push(vec![id, Value::Text(status.into())]);
                }
                (None, Some(stored)) => {
                    if let Some(touched) = &mut touched {
                        if !touched.insert(row_key(table, &stored, 0)?) {
                            return Err(in_row(table, affected_twice(), n, count));
                        }
                    }
                    affected += 1;
                    returning(p.returning.as_ref(), &stored, env, out)?;
                }
                (None, None) => {}
            }
        }
        Ok(affected)
    }

    /// Applies a write statement.
    pub(crate) fn apply_write(
        &mut self,
        plan: &WritePlan,
        params: &[Value],
        now_micros: i64,
        version: u64,
    ) -> CommandResult {
        let table = self.resolve(plan.table())?;
        let sequences = self.command_sequences();
        let mut out = Vec::new();
        let mut affected = 0;
        match plan {
            WritePlan::Insert(p) => {
                // Packed rows are decoded one at a time, as they are stored.
                let sources: Box<dyn ExactSizeIterator<Item = SqlResult<Row>>> = match &p.source {
                    InsertSource::Packed(rows) => {
                        Box::new(rows.rows().map(|row| row.map_err(undecodable)))
                    }
                    source => {
                        let reader = self.command_reader();
                        let env = reader.env(params, now_micros);
                        Box::new(insert_sources(&reader, source, &env)?.into_iter().map(Ok))
                    }
                };
                let env =
                    EvalEnv::without_subqueries(params, now_micros).with_sequences(&sequences);
                // A multi-row INSERT INTO transfers reads and writes its accounts once.
                affected = self.with_account_set(
                    &table,
                    sources.len(),
                    version,
                    |ex| ex.insert_rows(&table, p, sources, &env, version, &mut out),
                    |e| e,
                )?;
            }
            WritePlan::Update(p) => {
                let targets =
                    self.write_targets(&table, &p.access, p.filter.as_ref(), params, now_micros)?;
                // Every new row is computed before any is written, so a subquery in SET
                // (UPDATE ... FROM) reads the tables as the statement found them.
                let new_rows: Vec<Row> = {
                    let reader = self.command_reader();
                    let env = reader.env(params, now_micros);
                    targets
                        .iter()
                        .map(|t| assign(&table, &t.row, &p.assignments, &t.row, &env))
                        .collect::<SqlResult<_>>()?
                };
                let env =
                    EvalEnv::without_subqueries(params, now_micros).with_sequences(&sequences);
                for (target, new) in targets.into_iter().zip(new_rows) {
                    let (key, old) = (target.key, target.row);
                    let old_bytes = stored_bytes(target.version, &old);
                    self.replace_row(&table, &key, old_bytes, &new, &env, version)?;
                    affected += 1;
                    returning(p.returning.as_ref(), &new, &env, &mut out)?;
                }
            }
            WritePlan::Delete(p) => {
                let targets =
                    self.write_targets(&table, &p.access, p.filter.as_ref(), params, now_micros)?;
                let env =
                    EvalEnv::without_subqueries(params, now_micros).with_sequences(&sequences);
                for target in targets {
                    let (key, old) = (target.key, target.row);
                    let old_bytes = stored_bytes(target.version, &old);
                    self.act_on_children(&table, &old, None, &env, version)?;
                    self.delete_row(&table, &key, old_bytes, version)?;
                    affected += 1;
                    returning(p.returning.as_ref(), &old, &env, &mut out)?;
                }
            }
        }
        Ok(Executor::outcome(affected, out))
    }

    /// The row a committed UPDATE or DELETE op applies to, as it is now. Read committed: a
    /// row deleted meanwhile is skipped, and the statement's WHERE is re-checked.
    fn commit_target(
        &mut self,
        table: &TableRef,
        key: &[u8],
        recheck: Option<&Expr>,
        env: &EvalEnv<'_>,
    ) -> SqlResult<Option<CommitTarget>> {
        let def = self.resolve(table)?;
        let storage = self.storage_of(&def)?;
        let Some((old_bytes, _, old)) = self.get_row(storage, key)? else {
            return Ok(None);
        };
        if let Some(r) = recheck {
            if !r.eval(&old, env)?.is_true() {
                return Ok(None);
            }
        }
        Ok(Some((def, old_bytes, old)))
    }

    /// A transaction's commit: its recorded reads checked (a session records them for
    /// SERIALIZABLE transactions and for SELECT ... FOR UPDATE in any), then its writes.
    pub(crate) fn apply_commit(
        &mut self,
        reads: &[ReadCheck],
        ops: Vec<WriteOp>,
        now_micros: i64,
        version: u64,
    ) -> CommandResult {
        for check in reads {
            let unchanged = match check {
                ReadCheck::Row {
                    table,
                    key,
                    version,
                } => self.current_version(*table, key)? == *version,
                ReadCheck::Table { table, version } => self.table_version(*table) <= *version,
                ReadCheck::Exists { table, key, exists } => {
                    (self.current_version(*table, key)? > 0) == *exists
                }
            };
            if !unchanged {
                return Err(SqlError::serialization_failure(
                    "could not serialize access due to a concurrent update",
                )
                .with_detail("Another transaction changed data this transaction read. Retry the transaction."));
            }
        }
        let env = EvalEnv::without_subqueries(&[], now_micros);
        let mut affected = 0;
        for op in ops {
            match op {
                WriteOp::Insert {
                    table,
                    row,
                    on_conflict,
                } => {
                    let def = self.resolve(&table)?;
                    if self
                        .insert_row(&def, row, on_conflict.as_ref(), &env, version)?
                        .is_some()
                    {
                        affected += 1;
                    }
                }
                WriteOp::Update {
                    table,
                    key,
                    assignments,
                    recheck,
                } => {
                    let Some((def, old_bytes, old)) =
                        self.commit_target(&table, &key, recheck.as_ref(), &env)?
                    else {
                        continue;
                    };
                    let new = assign(&def, &old, &assignments, &old, &env)?;
                    self.replace_row(&def, &key, old_bytes, &new, &env, version)?;
                    affected += 1;
                }
                WriteOp::Delete {
                    table,
                    key,
                    recheck,
                } => {
                    let Some((def, old_bytes, old)) =
                        self.commit_target(&table, &key, recheck.as_ref(), &env)?
                    else {
                        continue;
                    };
                    self.act_on_children(&def, &old, None, &env, version)?;
                    self.delete_row(&def, &key, old_bytes, version)?;
                    affected += 1;
                }
            }
        }
        Ok(Executor::outcome(affected, Vec::new()))
    }

    pub(crate) fn apply_copy(
        &mut self,
        table: &TableRef,
        columns: &[usize],
        rows: Vec<Row>,
        now_micros: i64,
        version: u64,
    ) -> CommandResult {
        let def = self.resolve(table)?;
        let sequences = self.command_sequences();
        let env = EvalEnv::without_subqueries(&[], now_micros).with_sequences(&sequences);
        let count = rows.len();
        let copy = |ex: &mut Executor| {
            let mut affected = 0;
            for (n, values) in rows.into_iter().enumerate() {
                let inserted = build_row(&def, columns, values, &env)
                    .and_then(|row| ex.insert_row(&def, row, None, &env, version))
                    .map_err(|e| in_row(&def, e, n, count))?;
                affected += inserted.is_some() as u64;
            }
            Ok(affected)
        };
        let affected = self.with_account_set(&def, count, version, copy, |e| e)?;
        Ok(Executor::outcome(affected, Vec::new()))
    }

    /// A procedure body: every statement in order, each seeing the ones before; a failure
    /// anywhere undoes them all (the command's undo log).
    pub(crate) fn apply_procedure(
        &mut self,
        steps: &[Step],
        params: &[Value],
        now_micros: i64,
        version: u64,
    ) -> CommandResult {
        let mut last = Outcome::default();
        for step in steps {
            last = match step {
                Step::Write(plan) => self.apply_write(plan, params, now_micros, version)?,
                Step::Query(plan) => {
                    let reader = self.command_reader();
                    let env = reader.env(params, now_micros);
                    let rows = reader.rows(&plan.rel, &[], &env)?;
                    Executor::outcome(rows.len() as u64, rows)
                }
            };
        }
        Ok(last)
    }

    /// Schema changes validate everything before changing anything, so a failure leaves
    /// no trace.
    pub(crate) fn apply_ddl(&mut self, plan: DdlPlan, version: u64) -> CommandResult {
        let mut catalog: Catalog = (*self.catalog).clone();
        catalog.version += 1;
        match plan {
            DdlPlan::CreateTable {
                table,
                if_not_exists,
            } => {
                if !self.create_table(&mut catalog, table, if_not_exists, TableKeys::default())? {
                    return Ok(Outcome::default());
                }
            }
            DdlPlan::WithSequences { ddl, sequences } => {
                match *ddl {
                    DdlPlan::CreateTable {
                        table,
                        if_not_exists,
                    } => {
                        let keys = TableKeys {
                            sequences,
                            foreign_keys: Vec::new(),
                        };
                        if !self.create_table(&mut catalog, table, if_not_exists, keys)? {
                            return Ok(Outcome::default());
                        }
                    }
                    DdlPlan::AlterTable { table, new, rows } => {
                        check_sequence_names(&catalog, &sequences, None)?;
                        self.alter_table(&mut catalog, &table, *new, rows, version)?;
                        for sequence in sequences {
                            self.create_sequence(&mut catalog, sequence)?;
                        }
                    }
                    _ => return Err(SqlError::internal(
                        "sequences planned with a schema change other than CREATE or ALTER TABLE",
                    )),
                }
            }
            DdlPlan::CreateSequence {
                sequence,
                if_not_exists,
            } => {
                if catalog.relation_exists(&sequence.name) && if_not_exists {
                    return Ok(Outcome::default());
                }
                if let Some(owner) = &sequence.owner {
                    if catalog.table_by_id(owner.table).is_none() {
                        return Err(SqlError::serialization_failure(
                            "the sequence's owning table changed while it was planned; retry",
                        ));
                    }
                }
                self.create_sequence(&mut catalog, sequence)?;
            }
            DdlPlan::DropSequences { names, if_exists } => {
                self.drop_sequences(&mut catalog, &names, if_exists)?;
            }
            DdlPlan::AlterSequence { sequence, restart } => {
                self.alter_sequence(&mut catalog, sequence, restart)?;
            }
            DdlPlan::DropTables { names, if_exists } => {
                let dropped: Vec<u32> = names
                    .iter()
                    .filter_map(|n| catalog.tables.get(n).map(|t| t.id))
                    .collect();
                for n in &names {
                    if !catalog.tables.contains_key(n) && !if_exists {
                        return Err(SqlError::undefined_table(n));
                    }
                    if let Some(t) = catalog.tables.get(n) {
                        refuse_if_viewed(&catalog, t, "drop")?;
                        refuse_if_referenced(&catalog, t, &dropped)?;
                    }
                }
                catalog.foreign_keys.retain(|f| !dropped.contains(&f.table));
                for n in &names {
                    if let Some(t) = catalog.tables.remove(n) {
                        self.drop_storage(t.id, &t.storage)?;
                        for index in &t.indexes {
                            self.drop_storage(index.id, &index.storage)?;
                        }
                        self.drop_owned_sequences(&mut catalog, t.id)?;
                    }
                }
            }
            DdlPlan::Truncate { tables } => {
                if self.in_schema_transaction() {
                    // A transaction block's TRUNCATE is staged as deletes (the session's).
                    return Err(SqlError::internal(
                        "TRUNCATE reached a transaction's schema changes",
                    ));
                }
                let defs: Vec<Arc<TableDef>> = tables
                    .iter()
                    .map(|t| self.resolve(t))
                    .collect::<SqlResult<_>>()?;
                let truncated: Vec<u32> = defs.iter().map(|d| d.id).collect();
                for d in &defs {
                    if let Some(fk) = catalog
                        .references_to(d.id)
                        .find(|f| !truncated.contains(&f.table))
                    {
                        let child = catalog.table_by_id(fk.table).map(|t| t.name.clone());
                        return Err(SqlError::feature_not_supported(
                            "cannot truncate a table referenced in a foreign key constraint",
                        )
                        .with_detail(format!(
                            "Table \"{}\" references \"{}\".",
                            child.unwrap_or_default(),
                            d.name
                        )));
                    }
                }
                for d in defs {
                    for shard in self.every_shard()? {
                        let ids = std::iter::once(d.id).chain(d.indexes.iter().map(|i| i.id));
                        for id in ids {
                            let handle = shard.handle(id)?;
                            shard.engine.truncate_table(handle).map_err(kv_error)?;
                        }
                        shard.table_versions.insert(d.id, version);
                    }
                }
                catalog.version -= 1;
                return Ok(Outcome::default());
            }
            DdlPlan::AddPrimaryKey {
                table,
                columns,
                name,
            } => {
                let old = self.resolve(&table)?;
                refuse_on_ledger_table(&old, "adding a primary key")?;
                if !old.indexes.is_empty() {
                    return Err(SqlError::feature_not_supported(
                        "adding a primary key to a table that has indexes",
                    ));
                }
                let mut def = (*old).clone();
                def.primary_key = columns.clone();
                def.primary_key_name = Some(name);
                def.shape_version += 1;
                for &c in &columns {
                    def.columns[c].nullable = false;
                }
                def.storage = format!("t{}.{}", def.id, def.shape_version);
                self.rebuild_keyed(&old, &def)?;
                catalog.tables.insert(def.name.clone(), Arc::new(def));
            }
            DdlPlan::CreateIndex {
                table,
                name,
                columns,
                unique,
                if_not_exists,
            } => {
                let index = NewIndex {
                    name,
                    columns,
                    unique,
                    if_not_exists,
                    derivation: None,
                };
                self.create_index(&mut catalog, &table, index)?;
            }
            DdlPlan::CreateDerivedIndex {
                table,
                name,
                columns,
                unique,
                if_not_exists,
                derivation,
            } => {
                let index = NewIndex {
                    name,
                    columns,
                    unique,
                    if_not_exists,
                    derivation: Some(*derivation),
                };
                self.create_index(&mut catalog, &table, index)?;
            }
            DdlPlan::AddUniqueConstraint {
                table,
                name,
                columns,
            } => {
                let index = NewIndex {
                    name,
                    columns,
                    unique: true,
                    if_not_exists: false,
                    derivation: None,
                };
                let id = self.create_index(&mut catalog, &table, index)?;
                catalog.unique_constraints.extend(id);
            }
            DdlPlan::CreateProcedure {
                procedure,
                or_replace,
            } => {
                if catalog.procedures.contains_key(&procedure.name) && !or_replace {
                    return Err(SqlError::new(
                        ErrorKind::DuplicateFunction,
                        format!("procedure {} already exists", procedure.name),
                    ));
                }
                catalog
                    .procedures
                    .insert(procedure.name.clone(), Arc::new(procedure));
            }
            DdlPlan::DropProcedures { names, if_exists } => {
                drop_named(&mut catalog.procedures, &names, if_exists, |n| {
                    SqlError::new(
                        ErrorKind::UndefinedFunction,
                        format!("procedure {n} does not exist"),
                    )
                })?;
            }
            DdlPlan::AlterTable { table, new, rows } => {
                self.alter_table(&mut catalog, &table, *new, rows, version)?;
            }
            DdlPlan::CreateView {
                mut view,
                or_replace,
            } => {
                match catalog.views.get(&view.name) {
                    Some(old) if or_replace => {
                        old.check_replacement(&view)?;
                        view.id = old.id;
                    }
                    _ => view.id = catalog.new_relation_id(&view.name)?,
                }
                // The tables it reads must still be the ones it was bound against.
                for id in &view.tables {
                    if catalog.table_by_id(*id).is_none() {
                        return Err(SqlError::serialization_failure(
                            "a table the view reads changed while the view was planned; retry",
                        ));
                    }
                }
                catalog.views.insert(view.name.clone(), Arc::new(view));
            }
            DdlPlan::CreateEnum { def } => planner::create_enum(&mut catalog, def)?,
            DdlPlan::AlterEnum { old, new } => planner::alter_enum(&mut catalog, old, new)?,
            DdlPlan::DropEnums { names, if_exists } => {
                planner::drop_enums(&mut catalog, &names, if_exists)?
            }
            DdlPlan::DropViews { names, if_exists } => {
                // A view created since the statement was bound may read one of them.
                let dependents = planner::dependent_views(&catalog, &names);
                if !dependents.is_empty() {
                    return Err(planner::views_depend_error(&names, &dependents));
                }
                drop_named(&mut catalog.views, &names, if_exists, |n| {
                    SqlError::new(
                        ErrorKind::UndefinedTable,
                        format!("view \"{n}\" does not exist"),
                    )
                })?;
            }
            DdlPlan::WithForeignKeys { ddl, foreign_keys } => {
                for fk in &foreign_keys {
                    if fk.parent != planner::SELF_REFERENCE {
                        let parent = catalog.table_by_id(fk.parent).ok_or_else(|| {
                            SqlError::serialization_failure(
                                "a referenced table changed while the foreign key was planned; retry",
                            )
                        })?;
                        fk.check_parent_key(parent)?;
                    }
                }
                let (create, sequences) = match *ddl {
                    DdlPlan::WithSequences { ddl, sequences } => (*ddl, sequences),
                    other => (other, Vec::new()),
                };
                let DdlPlan::CreateTable {
                    table,
                    if_not_exists,
                } = create
                else {
                    return Err(SqlError::internal(
                        "foreign keys planned with a schema change other than CREATE TABLE",
                    ));
                };
                let keys = TableKeys {
                    sequences,
                    foreign_keys,
                };
                if !self.create_table(&mut catalog, table, if_not_exists, keys)? {
                    return Ok(Outcome::default());
                }
            }
            DdlPlan::AddForeignKey { foreign_key } => {
                let table = catalog
                    .table_by_id(foreign_key.table)
                    .cloned()
                    .ok_or_else(|| {
                        SqlError::serialization_failure(
                            "the table changed while the foreign key was planned; retry",
                        )
                    })?;
                let parent = catalog.table_by_id(foreign_key.parent).ok_or_else(|| {
                    SqlError::serialization_failure(
                        "a referenced table changed while the foreign key was planned; retry",
                    )
                })?;
                foreign_key.check_parent_key(parent)?;
                if catalog
                    .foreign_keys_of(table.id)
                    .any(|f| f.name == foreign_key.name)
                {
                    return Err(SqlError::new(
                        ErrorKind::DuplicateObject,
                        format!(
                            "constraint \"{}\" for relation \"{}\" already exists",
                            foreign_key.name, table.name
                        ),
                    ));
                }
                self.check_existing_rows(&foreign_key)?;
                catalog.add_foreign_key(foreign_key);
            }
            DdlPlan::DropForeignKey {
                table,
                name,
                if_exists,
            } => {
                let before = catalog.foreign_keys.len();
                catalog
                    .foreign_keys
                    .retain(|f| !(f.table == table && f.name == name));
                if catalog.foreign_keys.len() == before {
                    if if_exists {
                        return Ok(Outcome::default());
                    }
                    let table = catalog
                        .table_by_id(table)
                        .map(|t| t.name.clone())
                        .unwrap_or_default();
                    return Err(SqlError::new(
                        ErrorKind::UndefinedObject,
                        format!("constraint \"{name}\" of relation \"{table}\" does not exist"),
                    ));
                }
            }
            DdlPlan::DropIndexes { names, if_exists } => {
                for n in &names {
                    match catalog.index(n) {
                        Some((table, position)) => {
                            let mut def = (**table).clone();
                            let index = def.indexes.remove(position);
                            if catalog.unique_constraints.contains(&index.id) {
                                return Err(SqlError::new(
                                    ErrorKind::DependentObjectsStillExist,
                                    format!(
                                        "cannot drop index {n} because constraint {n} on table {} requires it",
                                        table.name
                                    ),
                                )
                                .with_detail(format!(
                                    "You can drop constraint {n} on table {} instead.",
                                    table.name
                                )));
                            }
                            foreign_keys_hold(&catalog, &def, &format!("drop index {n}"))?;
                        }
                        None if !if_exists => {
                            return Err(SqlError::new(
                                ErrorKind::UndefinedObject,
                                format!("index \"{n}\" does not exist"),
                            ));
                        }
                        None => {}
                    }
                }
                for n in &names {
                    let Some((table, position)) = catalog.index(n) else {
                        continue;
                    };
                    let mut def = (**table).clone();
                    let index = def.indexes.remove(position);
                    def.shape_version += 1;
                    self.drop_storage(index.id, &index.storage)?;
                    catalog.tables.insert(def.name.clone(), Arc::new(def));
                }
            }
        }
        // The derivations of partial and expression indexes that went (with DROP INDEX or
        // their table) go too.
        let live: std::collections::HashSet<u32> = catalog
            .tables
            .values()
            .flat_map(|t| t.indexes.iter().map(|i| i.id))
            .collect();
        catalog.index_derivations.retain(|id, _| live.contains(id));
        catalog.unique_constraints.retain(|id| live.contains(id));
        self.set_catalog(catalog)?;
        Ok(Outcome::default())
    }

    /// ALTER TABLE's new definition `new` for `table`, the rows rebuilt or checked as
    /// `rows` says.
    fn alter_table(
        &mut self,
        catalog: &mut Catalog,
        table: &TableRef,
        new: TableDef,
        rows: RowChange,
        version: u64,
    ) -> SqlResult<()> {
        let old = self.resolve(table)?;
        refuse_on_ledger_table(&old, "ALTER TABLE")?;
        refuse_if_viewed(catalog, &old, "alter")?;
        let mut def = new;
        def.id = old.id;
        def.shape_version = old.shape_version + 1;
        def.storage = old.storage.clone();
        if def.name != old.name && catalog.relation_exists(&def.name) {
            return Err(SqlError::new(
                ErrorKind::DuplicateTable,
                format!("relation \"{}\" already exists", def.name),
            ));
        }
        foreign_keys_hold(catalog, &def, &format!("alter table {}", old.name))?;
        let env = EvalEnv::without_subqueries(&[], 0);
        // A UNIQUE constraint of an added column (id 0 until now): every row takes the
        // column's one fill value, so two rows and a value that is not NULL are a duplicate.
        // Decided before the rows change, which cannot be taken back.
        let added: Vec<usize> = (0..def.indexes.len())
            .filter(|&n| def.indexes[n].id == 0)
            .collect();
        let mut rows_beyond_one = None;
        for &n in &added {
            let index = &def.indexes[n];
            let RowChange::Rebuild(sources) = &rows else {
                return Err(SqlError::internal("a new index without new columns"));
            };
            for &c in &index.columns {
                let ColumnSource::Value(fill) = &sources[c] else {
                    return Err(SqlError::internal("a new index on an existing column"));
                };
                if fill.eval(&[], &env)?.is_null() {
                    continue;
                }
                let beyond_one = match rows_beyond_one {
                    Some(known) => known,
                    None => *rows_beyond_one.insert(self.stored_rows_beyond(&old, 1)?),
                };
                if beyond_one {
                    return Err(SqlError::new(
                        ErrorKind::UniqueViolation,
                        format!("could not create unique index \"{}\"", index.name),
                    )
                    .with_detail("Every row takes the column's default."));
                }
            }
        }
        for &n in &added {
            let id = catalog.new_relation_id(&def.indexes[n].name)?;
            def.indexes[n].id = id;
            def.indexes[n].storage = format!("i{id}");
        }
        match rows {
            RowChange::None => {}
            RowChange::Validate => {
                for (_, row) in self.every_row(&old)? {
                    check_altered_row(&def, &row, &env)?;
                }
            }
            RowChange::Rebuild(sources) => {
                def.storage = format!("t{}.{}", def.id, def.shape_version);
                self.rebuild_rows(&old, &def, &sources, version)?;
            }
        }
        for index in &old.indexes {
            if !def.indexes.iter().any(|i| i.id == index.id) {
                self.drop_storage(index.id, &index.storage)?;
            }
        }
        for &n in &added {
            self.build_index(&def, &def.indexes[n], None)?;
            catalog.unique_constraints.insert(def.indexes[n].id);
        }
        for shard in self.every_shard()? {
            shard.table_versions.insert(def.id, version);
        }
        catalog.tables.remove(&old.name);
        catalog.tables.insert(def.name.clone(), Arc::new(def));
        Ok(())
    }

    /// Adds `table` to `catalog` with its indexes, the sequences its columns own and its
    /// foreign keys, under new ids, and creates their storage. False (nothing done) when a
    /// relation has its name and `if_not_exists` is set.
    fn create_table(
        &mut self,
        catalog: &mut Catalog,
        mut table: TableDef,
        if_not_exists: bool,
        keys: TableKeys,
    ) -> SqlResult<bool> {
        let TableKeys {
            sequences,
            foreign_keys,
        } = keys;
        if if_not_exists && catalog.relation_exists(&table.name) {
            return Ok(false);
        }
        table.id = catalog.new_relation_id(&table.name)?;
        // Checked before any storage is made: a schema change fails whole.
        check_sequence_names(catalog, &sequences, Some(&table.name))?;
        table.storage = format!("t{}.{}", table.id, table.shape_version);
        self.create_storage(table.id, &table.storage)?;
        for index in &mut table.indexes {
            index.id = catalog.new_relation_id(&index.name)?;
            index.storage = format!("i{}", index.id);
            self.create_storage(index.id, &index.storage)?;
            // CREATE TABLE makes unique indexes only for its UNIQUE constraints.
            if index.unique {
                catalog.unique_constraints.insert(index.id);
            }
        }
        let id = table.id;
        catalog.tables.insert(table.name.clone(), Arc::new(table));
        for mut sequence in sequences {
            if let Some(owner) = &mut sequence.owner {
                owner.table = id;
            }
            self.create_sequence(catalog, sequence)?;
        }
        for mut fk in foreign_keys {
            fk.table = id;
            if fk.parent == planner::SELF_REFERENCE {
                fk.parent = id;
            }
            catalog.add_foreign_key(fk);
        }
        Ok(true)
    }

    /// Creates the kv table of a new SQL table or index in every partition.
    fn create_storage(&mut self, id: u32, name: &str) -> SqlResult<()> {
        for partition in 0..self.partitions() {
            let shard = self.shard(partition)?;
            let handle = shard.engine.create_table(name).map_err(kv_error)?;
            shard.storage.insert(id, handle);
            self.note_created_storage(partition, id, name);
        }
        Ok(())
    }

    /// Drops the kv table of a SQL table or index from every partition.
    fn drop_storage(&mut self, id: u32, name: &str) -> SqlResult<()> {
        self.drop_kv_table_everywhere(name, Some(id))
    }

    /// CREATE INDEX: the index of `table` built from its rows (as `index.derivation` derives
    /// them, for a partial or expression index) and added to `catalog`; returns its id, or
    /// None (nothing done) when the name is taken and `if_not_exists` is set.
    fn create_index(
        &mut self,
        catalog: &mut Catalog,
        table: &TableRef,
        index: NewIndex,
    ) -> SqlResult<Option<u32>> {
        let NewIndex {
            name,
            columns,
            unique,
            if_not_exists,
            derivation,
        } = index;
        if catalog.relation_exists(&name) {
            if if_not_exists {
                return Ok(None);
            }
            return Err(SqlError::new(
                ErrorKind::DuplicateTable,
                format!("relation \"{name}\" already exists"),
            ));
        }
        let old = self.resolve(table)?;
        if unique {
            refuse_on_ledger_table(&old, "a unique index")?;
        }
        let mut def = (*old).clone();
        let id = catalog.next_table_id + 1;
        catalog.next_table_id += 1;
        let index = planner::IndexDef {
            id,
            name,
            columns,
            unique,
            storage: format!("{}{id}", if derivation.is_some() { 'd' } else { 'i' }),
        };
        self.build_index(&old, &index, derivation.as_ref())?;
        if let Some(derivation) = derivation {
            catalog.index_derivations.insert(id, Arc::new(derivation));
        }
        def.indexes.push(index);
        def.shape_version += 1;
        catalog.tables.insert(def.name.clone(), Arc::new(def));
        Ok(Some(id))
    }

    fn build_index(
        &mut self,
        table: &TableDef,
        index: &planner::IndexDef,
        derivation: Option<&planner::IndexDerivation>,
    ) -> SqlResult<()> {
        self.fill_new_storage(
            table,
            index.id,
            &index.storage,
            |row_key, row| {
                let mut entry = Vec::new();
                let value =
                    crate::executor::row_entry_into(index, derivation, row, row_key, &mut entry)?;
                Ok(value.map(|value| (entry, value.to_vec())))
            },
            |row| {
                SqlError::new(
                    ErrorKind::UniqueViolation,
                    format!("could not create unique index \"{}\"", index.name),
                )
                .with_detail(format!(
                    "{} is duplicated.",
                    key_description(table, &index.columns, row)
                ))
            },
        )
    }

    /// Copies every row of `old` into fresh storage keyed by `new`'s primary key, checking
    /// NOT NULL and uniqueness, then swaps the storage. On failure the new storage is dropped
    /// and `old` is untouched.
    fn rebuild_keyed(&mut self, old: &TableDef, new: &TableDef) -> SqlResult<()> {
        self.fill_new_storage(
            old,
            new.id,
            &new.storage,
            |_, row| {
                if let Some(&c) = new.primary_key.iter().find(|&&c| row[c].is_null()) {
                    return Err(SqlError::new(
                        ErrorKind::NotNullViolation,
                        format!(
                            "column \"{}\" of relation \"{}\" contains null values",
                            new.columns[c].name, new.name
                        ),
                    ));
                }
                let key_values: Vec<Value> =
                    new.primary_key.iter().map(|&c| row[c].clone()).collect();
                let mut value = Vec::new();
                crate::row::encode_row(0, row, &mut value);
                Ok(Some((encode_key(&key_values)?, value)))
            },
            |row| {
                let mut e = duplicate_key(new, row);
                e.message = format!(
                    "could not create unique index \"{}\"",
                    new.primary_key_name.clone().unwrap_or_default()
                );
                e
            },
        )?;
        self.drop_kv_table_everywhere(&old.storage, None)
    }

    /// Whether `table` holds more than `count` rows (over all partitions), reading keys only
    /// until it knows.
    fn stored_rows_beyond(&mut self, table: &TableDef, count: usize) -> SqlResult<bool> {
        self.holds_every_shard()?;
        let mut seen = 0;
        for index in 0..self.partitions() {
            for item in every_entry(self.shard(index)?, table.id)? {
                item.map_err(kv_error)?;
                seen += 1;
                if seen > count {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// Every row of a table in every partition, with its storage key.
    fn every_row(&mut self, table: &TableDef) -> SqlResult<Vec<(Vec<u8>, Row)>> {
        self.holds_every_shard()?;
        let mut out = Vec::new();
        for index in 0..self.partitions() {
            out.extend(stored_rows(self.shard(index)?, table.id)?);
        }
        Ok(out)
    }

    /// ALTER TABLE's rewrite: every row of `old` rebuilt column by column from `sources`
    /// into `new`'s fresh storage under the same key, checked against `new`'s constraints;
    /// then the old storage goes. On failure nothing changes.
    fn rebuild_rows(
        &mut self,
        old: &TableDef,
        new: &TableDef,
        sources: &[ColumnSource],
        version: u64,
    ) -> SqlResult<()> {
        let env = EvalEnv::without_subqueries(&[], 0);
        let values: Vec<Option<Value>> = sources
            .iter()
            .zip(&new.columns)
            .map(|(source, column)| match source {
                ColumnSource::Old(_) | ColumnSource::Convert(_) => Ok(None),
                ColumnSource::Value(e) => Ok(Some(e.eval(&[], &env)?.cast(column.ty)?)),
            })
            .collect::<SqlResult<_>>()?;
        self.fill_new_storage(
            old,
            new.id,
            &new.storage,
            |row_key, row| {
                let rebuilt: Row = sources
                    .iter()
                    .zip(&values)
                    .zip(&new.columns)
                    .map(|((source, value), column)| match (source, value) {
                        (ColumnSource::Old(i), _) => {
                            Ok(row.get(*i).cloned().unwrap_or(Value::Null))
                        }
                        (ColumnSource::Convert(e), _) => e.eval(row, &env)?.cast(column.ty),
                        (ColumnSource::Value(_), value) => Ok(value.clone().unwrap_or(Value::Null)),
                    })
                    .collect::<SqlResult<_>>()?;
                check_altered_row(new, &rebuilt, &env)?;
                let mut bytes = Vec::new();
                crate::row::encode_row(version, &rebuilt, &mut bytes);
                Ok(Some((row_key.to_vec(), bytes)))
            },
            |_| SqlError::internal("a row key repeated while a table was rebuilt"),
        )?;
        self.drop_kv_table_everywhere(&old.storage, None)
    }

    /// Creates kv table `name` in every partition, holding one entry per row of `source` (in
    /// the row's partition), made by `entry`, and registers it as the storage of `id`; a key
    /// already present fails with `duplicate`. On any failure the new tables are dropped
    /// again and the registration is left as it was.
    fn fill_new_storage(
        &mut self,
        source: &TableDef,
        id: u32,
        name: &str,
        entry: impl Fn(&[u8], &Row) -> SqlResult<Option<(Vec<u8>, Vec<u8>)>>,
        duplicate: impl Fn(&Row) -> SqlError,
    ) -> SqlResult<()> {
        self.holds_every_shard()?;
        let mut created = Vec::with_capacity(self.partitions());
        let result = (|| -> SqlResult<()> {
            for index in 0..self.partitions() {
                let shard = self.shard(index)?;
                let rows = stored_rows(shard, source.id)?;
                let target = shard.engine.create_table(name).map_err(kv_error)?;
                created.push(target);
                for (row_key, row) in &rows {
                    let Some((key, value)) = entry(row_key, row)? else {
                        continue;
                    };
                    if !shard
                        .engine
                        .insert(target, &key, &value)
                        .map_err(kv_error)?
                    {
                        return Err(duplicate(row));
                    }
                }
            }
            Ok(())
        })();
        match result {
            Ok(()) => {
                for (partition, target) in created.into_iter().enumerate() {
                    self.shard(partition)?.storage.insert(id, target);
                    self.note_created_storage(partition, id, name);
                }
                Ok(())
            }
            Err(e) => {
                for shard in self.every_shard()?.take(created.len()) {
                    shard.engine.drop_table(name).map_err(kv_error)?;
                }
                Err(e)
            }
        }
    }

    /// Evaluates a write statement inside a transaction: which rows it touches, what they
    /// become, and the ops the commit will apply. Nothing is written.
    pub(crate) fn stage(
        &mut self,
        plan: &WritePlan,
        params: &[Value],
        now_micros: i64,
        overlay: Option<&Overlay>,
        record_reads: bool,
        sequences: StatementValues,
    ) -> SqlResult<Staged> {
        let table = self.resolve(plan.table())?;
        let table_ref = table.reference();
        let mut staged = Staged::default();
        let sequences = self.statement_sequences(sequences);
        let mut reader = self.reader(overlay, record_reads);
        reader.sequences = Some(Box::new(&sequences));
        // An INSERT's rows go into the commit as built here, so they may draw random values;
        // what the commit evaluates again (assignments of UPDATE and ON CONFLICT DO UPDATE,
        // evaluated where `commit_env` is) may not.
        reader.random = matches!(plan, WritePlan::Insert(_));
        let env = reader.env(params, now_micros);
        let commit_env = reader.env(params, now_micros).with_random(false);
        match plan {
            WritePlan::Insert(p) => {
                let sources = insert_sources(&reader, &p.source, &env)?;
                // A DO UPDATE with subqueries is evaluated for each row it changes, and
                // travels with their values (as a staged UPDATE's do).
                let conflict_subqueries = p
                    .on_conflict
                    .as_ref()
                    .and_then(OnConflict::update)
                    .is_some_and(|(assignments, filter)| reads_tables(assignments, filter));
                let on_conflict = match &p.on_conflict {
                    Some(clause) => match clause.update() {
                        Some((assignments, filter)) if !conflict_subqueries => {
                            Some(clause.with_action(OnConflict::DoUpdate {
                                assignments: bind_all(assignments, params, now_micros)?,
                                filter: bind_filter(filter, params, now_micros)?,
                            }))
                        }
                        _ => Some(clause.clone()),
                    },
                    None => None,
                };
                let temp_base = overlay.map(|o| o.len()).unwrap_or(0);
                let mut conflicts = StagedConflicts::new(&table, on_conflict.as_ref())?;
                let mut own_unique = std::collections::HashSet::new();
                let conflict_draws = on_conflict
                    .as_ref()
                    .and_then(OnConflict::update)
                    .is_some_and(|(assignments, _)| {
                        assignments.iter().any(|(_, e)| e.calls(Func::draws_random))
                    });
                for (n, values) in sources.into_iter().enumerate() {
                    // An ON CONFLICT DO UPDATE's random values are drawn once per row, as
                    // an UPDATE's are.
                    let on_conflict =
                        match on_conflict.as_ref().and_then(|c| Some((c, c.update()?))) {
                            Some((clause, (assignments, filter))) if conflict_draws => {
                                Cow::Owned(Some(clause.with_action(OnConflict::DoUpdate {
                                    assignments: draw_all(assignments)?,
                                    filter: filter.cloned(),
                                })))
                            }
                            _ => Cow::Borrowed(&on_conflict),
                        };
                    let action = on_conflict.as_ref().as_ref().map(OnConflict::action);
                    let row = build_row(&table, &p.target_columns, values, &env)?;
                    check_row(&table, &row, &env)?;
                    crate::foreign_keys::check_staged_parents(&reader, &table, &row)?;
                    // Rows of tables without a primary key get their row id when the commit
                    // applies; until then they live under a key no stored row can have.
                    let key = if table.has_primary_key() {
                        row_key(&table, &row, 0)?
                    } else {
                        encode_key(&[Value::Int(-1 - (temp_base + n) as i64)])?
                    };
                    let existing = match conflicts.find(&reader, &table, &row, &key)? {
                        StagedConflict::Own => match action {
                            None => return Err(duplicate_key(&table, &row)),
                            Some(OnConflict::DoUpdate { .. }) => return Err(affected_twice()),
                            Some(_) => continue,
                        },
                        StagedConflict::Stored(existing) => Some(existing),
                        StagedConflict::New(claims) => {
                            match check_staged_unique(&reader, &table, &row, &mut own_unique) {
                                // Every unique constraint arbitrates: skip the row.
                                Err(e)
                                    if conflicts.arbiter == ConflictArbiter::Any
                                        && e.kind == ErrorKind::UniqueViolation =>
                                {
                                    continue
                                }
                                checked => checked?,
                            }
                            conflicts.claim(claims);
                            None
                        }
                    };
                    let mut evaluated_conflict = None;
                    let stored = match (existing, action) {
                        (None, _) => Some((key, row.clone())),
                        (Some(_), None) => return Err(duplicate_key(&table, &row)),
                        (
                            Some(old),
                            Some(OnConflict::DoUpdate {
                                assignments,
                                filter,
                            }),
                        ) => {
                            if !conflicts.updated.insert(old.key.clone()) {
                                return Err(affected_twice());
                            }
                            let mut context = old.row.clone();
                            context.extend(row.iter().cloned());
                            if conflict_subqueries {
                                let (assignments, filter) = fixed_on_row(
                                    assignments,
                                    filter.as_ref(),
                                    &context,
                                    &commit_env,
                                )?;
                                let clause = OnConflict::DoUpdate {
                                    assignments,
                                    filter,
                                };
                                evaluated_conflict =
                                    on_conflict.as_ref().as_ref().map(|c| c.with_action(clause));
                            }
                            let pass = match filter {
                                Some(f) => f.eval(&context, &commit_env)?.is_true(),
                                None => true,
                            };
                            if pass {
                                let new =
                                    assign(&table, &old.row, assignments, &context, &commit_env)?;
                                if table.has_primary_key() && row_key(&table, &new, 0)? != old.key {
                                    return Err(SqlError::feature_not_supported(
                                        "ON CONFLICT DO UPDATE that changes the primary key",
                                    ));
                                }
                                Some((old.key, new))
                            } else {
                                None
                            }
                        }
                        (Some(_), Some(_)) => None,
                    };
                    staged.ops.push(WriteOp::Insert {
                        table: table_ref.clone(),
                        row,
                        on_conflict: match evaluated_conflict {
                            Some(clause) => Some(clause),
                            None => on_conflict.into_owned(),
                        },
                    });
                    if let Some((key, stored)) = stored {
                        staged.rows_affected += 1;
                        if p.call {
                            let id = call_id(&table, &stored);
                            staged.rows.push(vec![id, Value::Text("staged".into())]);
                        }
                        returning(p.returning.as_ref(), &stored, &env, &mut staged.rows)?;
                        staged.overlay.push(((table.id, key), Some(stored)));
                    }
                }
            }
            WritePlan::Update(p) => {
                let targets = reader.scan(&table, &p.access, p.filter.as_ref(), &[], &env)?;
                let subqueries = reads_tables(&p.assignments, p.filter.as_ref());
                let (assignments, recheck) = match subqueries {
                    true => (Vec::new(), None),
                    false => (
                        bind_all(&p.assignments, params, now_micros)?,
                        bind_filter(p.filter.as_ref(), params, now_micros)?,
                    ),
                };
                let draws = p
                    .assignments
                    .iter()
                    .any(|(_, e)| e.calls(Func::draws_random));
                for (key, old) in targets {
                    if !table.has_primary_key() && is_temporary_key(&key) {
                        return Err(SqlError::feature_not_supported("changing a row inserted earlier in the same transaction into a table without a primary key"));
                    }
                    // Subqueries are evaluated here, once per row, and travel as their
                    // values; the commit evaluates the rest again on the row as it is then.
                    let (assignments, recheck) = match subqueries {
                        true => {
                            let (assignments, recheck) =
                                fixed_on_row(&p.assignments, p.filter.as_ref(), &old, &env)?;
                            (Cow::Owned(assignments), Cow::Owned(recheck))
                        }
                        false => (Cow::Borrowed(&assignments), Cow::Borrowed(&recheck)),
                    };
                    // Random values are drawn here, once per row; the commit evaluates the
                    // assignments again with them.
                    let drawn = draws.then(|| draw_all(&assignments)).transpose()?;
                    let new = match &drawn {
                        Some(drawn) => assign(&table, &old, drawn, &old, &env)?,
                        None => assign(&table, &old, &p.assignments, &old, &env)?,
                    };
                    check_row(&table, &new, &env)?;
                    staged.rows_affected += 1;
                    returning(p.returning.as_ref(), &new, &env, &mut staged.rows)?;
                    let new_key = if table.has_primary_key() {
                        row_key(&table, &new, 0)?
                    } else {
                        key.clone()
                    };
                    if new_key != key {
                        staged.overlay.push(((table.id, key.clone()), None));
                    }
                    staged.overlay.push(((table.id, new_key), Some(new)));
                    staged.ops.push(WriteOp::Update {
                        table: table_ref.clone(),
                        key,
                        assignments: drawn.unwrap_or_else(|| assignments.into_owned()),
                        recheck: recheck.into_owned(),
                    });
                }
            }
            WritePlan::Delete(p) => {
                let targets = reader.scan(&table, &p.access, p.filter.as_ref(), &[], &env)?;
                let subqueries = p.filter.as_ref().is_some_and(Expr::has_subquery);
                let recheck = match subqueries {
                    true => None,
                    false => bind_filter(p.filter.as_ref(), params, now_micros)?,
                };
                for (key, old) in targets {
                    // As an UPDATE's: subqueries travel as their values on this row.
                    let recheck = match subqueries {
                        true => fixed_on_row(&[], p.filter.as_ref(), &old, &env)?.1,
                        false => recheck.clone(),
                    };
                    if !table.has_primary_key() && is_temporary_key(&key) {
                        return Err(SqlError::feature_not_supported("deleting a row inserted earlier in the same transaction into a table without a primary key"));
                    }
                    staged.rows_affected += 1;
                    returning(p.returning.as_ref(), &old, &env, &mut staged.rows)?;
                    staged.overlay.push(((table.id, key.clone()), None));
                    staged.ops.push(WriteOp::Delete {
                        table: table_ref.clone(),
                        key,
                        recheck,
                    });
                }
            }
        }
        staged.reads = reader.reads.take();
        drop(reader);
        staged.sequences = sequences.own.take();
        // `UPDATE ... SET x = x + d WHERE pk = k` depends only on whether the row exists:
        // its assignments are evaluated when the commit applies. Recording the row's version
        // would make every concurrent increment of a hot row a conflict.
        if let Some(key) = key_only_target(&table, plan, params, now_micros) {
            let exists = staged.rows_affected > 0;
            staged
                .reads
                .retain(|r| !matches!(r, ReadCheck::Row { table: t, .. } if *t == table.id));
            if record_reads {
                staged.reads.push(ReadCheck::Exists {
                    table: table.id,
                    key,
                    exists,
                });
            }
        }
        Ok(staged)
    }
}

/// The key an UPDATE or DELETE targets when its WHERE is nothing but primary-key equality
/// with constants and it returns nothing, so its outcome depends only on the row existing.
fn key_only_target(
    table: &TableDef,
    plan: &WritePlan,
    params: &[Value],
    now_micros: i64,
) -> Option<Vec<u8>> {
    let (access, filter, returning) = match plan {
        WritePlan::Update(p) => (&p.access, &p.filter, &p.returning),
        WritePlan::Delete(p) => (&p.access, &p.filter, &p.returning),
        WritePlan::Insert(_) => return None,
    };
    if returning.is_some() {
        return None;
    }
    let planner::Access::Point(key_exprs) = access else {
        return None;
    };
    if !planner::filter_is_key_equality(table, filter.as_ref()) {
        return None;
    }
    let env = EvalEnv::without_subqueries(params, now_micros);
    let values: Vec<Value> = key_exprs
        .iter()
        .map(|e| e.eval(&[], &env).ok())
        .collect::<Option<_>>()?;
    encode_key(&crate::row::cast_key(table, &values)?).ok()
}

/// Temporary keys of uncommitted rows in tables without a primary key are negative row ids.
fn is_temporary_key(key: &[u8]) -> bool {
    matches!(kv::keycode::decode_key(key).as_deref(), Some([kv::keycode::KeyValue::Int(i)]) if *i < 0)
}

/// Whether an expression can be evaluated on the session's thread for rows that are then
/// recorded in the log: given the statement's parameters and `now()` it gives what the
/// executor would (no subquery, nothing that reads the catalog or a sequence), or draws a
/// random value that the log then carries.
fn evaluates_at_the_session(expr: &Expr) -> bool {
    // (A bulk INSERT's values are mostly these: no walk.)
    if matches!(expr, Expr::Literal(..) | Expr::Param(..)) {
        return true;
    }
    let mut same = true;
    expr.visit(&mut |e| match e {
        Expr::Subquery { .. } | Expr::InSubquery { .. } => same = false,
        Expr::Function { func, .. } => {
            same &= !matches!(
                func,
                Func::NextVal
                    | Func::CurrVal
                    | Func::SetVal
                    | Func::LastVal
                    | Func::GetSerialSequence
                    | Func::FormatType
                    | Func::GetExpr
                    | Func::GetIndexDef
                    | Func::GetConstraintDef
                    | Func::RegClassName
                    | Func::GetFunctionArguments
            ) && !func.reads_storage()
        }
        _ => {}
    });
    same
}

/// An INSERT ... VALUES with its rows built before it is proposed (`InsertSource::Packed`),
/// when the values and the defaults they leave to fill evaluate the same anywhere: the
/// evaluation, defaults and type conformance then run on the session's thread instead of the
/// executor's, which only checks and stores the rows. The rows are exactly what the executor
/// would build (the same `build_row`, with the command's parameters and `now()`), and the
/// plan keeps the table's shape version, so a schema change in between refuses the command.
/// None (propose the plan as it is) when anything is out of reach here, including a value
/// that fails to evaluate: the executor then reports the error as it always has. Rows that
/// draw random values can only be built here, so their error is the answer.
pub fn prebuild_insert(
    plan: &WritePlan,
    catalog: &Catalog,
    params: &[Value],
    now_micros: i64,
) -> Option<SqlResult<WritePlan>> {
    let (p, table, rows) = prebuildable(plan, catalog)?;
    if !column_defaults(table).all(evaluates_at_the_session)
        || !rows.iter().flatten().all(evaluates_at_the_session)
    {
        return None;
    }
    let env = EvalEnv::without_subqueries(params, now_micros).with_random(true);
    let rows_values = rows
        .iter()
        .map(|values| values.iter().map(|e| e.eval(&[], &env)));
    let marked = rows
        .iter()
        .flatten()
        .any(|e| matches!(e, Expr::Literal(Value::Text(t), _) if t == DEFAULT_MARKER));
    match pack_rows(p, table, rows_values, &env, marked) {
        Ok(plan) => Some(Ok(plan)),
        Err(e)
            if column_defaults(table)
                .chain(rows.iter().flatten())
                .any(|e| e.calls(Func::draws_random)) =>
        {
            Some(Err(e))
        }
        Err(_) => None,
    }
}

/// `prebuild_insert` for a large INSERT ... VALUES of integer literals straight from the
/// row reader's `rows`, without an expression bound for each value: `plan` is the statement
/// bound with its first row alone (`ValueRows::head`), which checked everything but the
/// other rows. Each value is what binding it would give (`planner::integer_literal_number`),
/// so the rows are the ones `prebuild_insert` builds from the whole statement bound. None
/// (bind the whole statement) when a row has another width, a value is anything but an
/// integer literal in its column's range, or a default cannot be evaluated here (a random
/// draw, a sequence): the whole statement then gives its own answer.
pub fn prebuild_literal_insert(
    plan: &WritePlan,
    catalog: &Catalog,
    rows: &ValueRows,
    now_micros: i64,
) -> Option<WritePlan> {
    let (p, table, _) = prebuildable(plan, catalog)?;
    let types: Vec<DataType> = p
        .target_columns
        .iter()
        .map(|&c| table.columns[c].ty)
        .collect();
    if !column_defaults(table).all(evaluates_at_the_session)
        || (0..rows.len()).any(|i| rows.row(i).len() != types.len())
    {
        return None;
    }
    // (Random draws are not allowed here: a default that draws fails to evaluate.)
    let env = EvalEnv::without_subqueries(&[], now_micros);
    let number = |id, ty| planner::integer_literal_number(rows, id, ty);
    let Some(shape) = row_shape(p, table, &env) else {
        let rows_values = (0..rows.len()).map(|i| {
            rows.row(i).iter().zip(&types).map(|(&id, &ty)| {
                number(id, ty)
                    .map(Value::Int)
                    .ok_or_else(|| SqlError::internal("not an integer literal"))
            })
        });
        return build_and_pack(p, table, rows_values, &env).ok();
    };
    // The numbers are their columns' values already (in range for the column's type).
    let mut packer = Packer::default();
    // When every value is an integer literal, the row reader read their numbers with them:
    // only the columns' ranges are left to check.
    let ranges = types
        .iter()
        .map(|&ty| planner::integer_range(ty))
        .collect::<Option<Vec<_>>>()
        .filter(|_| rows.all_integers());
    let mut built = Vec::with_capacity(types.len());
    for i in 0..rows.len() {
        let given = match &ranges {
            Some(ranges) => {
                let given = rows.integer_row(i)?;
                let in_range = given.iter().zip(ranges).all(|(n, r)| r.contains(n));
                in_range.then_some(given)?
            }
            None => {
                built.clear();
                for (&id, &ty) in rows.row(i).iter().zip(&types) {
                    built.push(number(id, ty)?);
                }
                &built
            }
        };
        packer.push_shaped_ints(&shape, given);
        if i == 0 {
            packer.reserve_rows(rows.len() - 1);
        }
    }
    Some(packed_plan(p, table, packer))
}

/// The insert of `plan` with its table and its VALUES rows, when it can be built before it
/// is proposed: the table as the plan saw it, and no ON CONFLICT DO UPDATE drawing random
/// values (the executor applying built rows could not draw them).
fn prebuildable<'a>(
    plan: &'a WritePlan,
    catalog: &'a Catalog,
) -> Option<(&'a InsertPlan, &'a TableDef, &'a [Vec<Expr>])> {
    let WritePlan::Insert(p) = plan else {
        return None;
    };
    let InsertSource::Values(rows) = &p.source else {
        return None;
    };
    let table = catalog
        .table_by_id(p.table.id)
        .filter(|t| t.shape_version == p.table.shape_version)?;
    let conflict_draws = p
        .on_conflict
        .as_ref()
        .and_then(OnConflict::update)
        .is_some_and(|(assignments, _)| {
            assignments.iter().any(|(_, e)| e.calls(Func::draws_random))
        });
    (!conflict_draws).then_some((p, table, rows.as_slice()))
}

fn column_defaults(table: &TableDef) -> impl Iterator<Item = &Expr> {
    table.columns.iter().filter_map(|c| c.default.as_ref())
}

/// `p` with `rows` (each the values of its target columns) built — defaults filled in,
/// values conformed — and packed, row by row. `marked` when a value may be the `DEFAULT`
/// marker, which only `RowBuilder` fills in.
fn pack_rows<V: IntoIterator<Item = SqlResult<Value>>>(
    p: &InsertPlan,
    table: &TableDef,
    rows: impl Iterator<Item = V>,
    env: &EvalEnv<'_>,
    marked: bool,
) -> SqlResult<WritePlan> {
    let Some(shape) = row_shape(p, table, env).filter(|_| !marked) else {
        return build_and_pack(p, table, rows, env);
    };
    let mut packer = Packer::default();
    let mut given = Vec::with_capacity(p.target_columns.len());
    for values in rows {
        given.clear();
        for (value, &column) in values.into_iter().zip(&p.target_columns) {
            let mut value = value?;
            conform_value(&mut value, table.columns[column].ty)?;
            given.push(value);
        }
        packer.push_shaped(&shape, &given);
    }
    Ok(packed_plan(p, table, packer))
}

/// `pack_rows` without a row shape: each row built whole by `RowBuilder` (defaults
/// evaluated as each row needs them, `DEFAULT` markers filled in), then packed.
fn build_and_pack<V: IntoIterator<Item = SqlResult<Value>>>(
    p: &InsertPlan,
    table: &TableDef,
    rows: impl Iterator<Item = V>,
    env: &EvalEnv<'_>,
) -> SqlResult<WritePlan> {
    let mut builder = RowBuilder::new(table, &p.target_columns);
    let (mut packer, mut row) = (Packer::default(), Vec::new());
    for values in rows {
        builder.build_into(&mut row, values, env)?;
        packer.push(&row);
    }
    Ok(packed_plan(p, table, packer))
}

/// The shape of `p`'s rows when every column it leaves to its default gets the same value
/// in every row (no volatile call but `now()`, which is the statement's): those defaults
/// evaluated and conformed once. None when one differs from row to row or fails to
/// evaluate (`RowBuilder` then evaluates it as each row needs it, and reports its error
/// where it always has).
fn row_shape(p: &InsertPlan, table: &TableDef, env: &EvalEnv<'_>) -> Option<RowShape> {
    let mut given_at = vec![None; table.columns.len()];
    for (place, &column) in p.target_columns.iter().enumerate() {
        given_at[column] = Some(place);
    }
    let mut fills = Vec::with_capacity(table.columns.len());
    for (column, place) in table.columns.iter().zip(given_at) {
        fills.push(match place {
            Some(place) => ColumnFill::Given(place),
            None => {
                let mut value = match &column.default {
                    None => Value::Null,
                    Some(d) if d.calls(|f| f.is_volatile() && f != Func::Now) => return None,
                    Some(d) => d.eval(&[], env).ok()?,
                };
                conform_value(&mut value, column.ty).ok()?;
                ColumnFill::Fixed(value)
            }
        });
    }
    Some(RowShape::new(fills))
}

/// `p` with the rows `packer` packed, whole rows of `table`.
fn packed_plan(p: &InsertPlan, table: &TableDef, packer: Packer) -> WritePlan {
    WritePlan::Insert(InsertPlan {
        table: p.table.clone(),
        source: InsertSource::Packed(packer.finish()),
        target_columns: (0..table.columns.len()).collect(),
        on_conflict: p.on_conflict.clone(),
        returning: p.returning.clone(),
        call: p.call,
    })
}

/// Stages an INSERT ... VALUES without the executor when nothing in storage can change its
/// outcome: a table with no primary key and no index (no duplicate to find), values without
/// subqueries. The session then saves a round trip to the executor; the commit applies the
/// rows exactly as if the executor had staged them.
pub fn stage_insert_locally(
    plan: &WritePlan,
    table: &TableDef,
    params: &[Value],
    now_micros: i64,
    overlay_len: usize,
) -> Option<SqlResult<Staged>> {
    let WritePlan::Insert(p) = plan else {
        return None;
    };
    if table.has_primary_key()
        || !table.indexes.is_empty()
        || p.on_conflict.is_some()
        || p.table.shape_version != table.shape_version
        || planner::write_calls(plan, table, Func::uses_sequences)
    {
        return None;
    }
    let InsertSource::Values(rows) = &p.source else {
        return None;
    };
    if rows
        .iter()
        .flatten()
        .chain(p.returning.iter().flatten())
        .any(Expr::has_subquery)
    {
        return None;
    }
    // The rows go into the commit as built here, so they may draw random values.
    let env = EvalEnv::without_subqueries(params, now_micros).with_random(true);
    let stage = || -> SqlResult<Staged> {
        let mut staged = Staged::default();
        for (n, values) in eval_values(rows, &env)?.into_iter().enumerate() {
            let row = build_row(table, &p.target_columns, values, &env)?;
            check_row(table, &row, &env)?;
            let key = encode_key(&[Value::Int(-1 - (overlay_len + n) as i64)])?;
            returning(p.returning.as_ref(), &row, &env, &mut staged.rows)?;
            staged.rows_affected += 1;
            staged.overlay.push(((table.id, key), Some(row.clone())));
            staged.ops.push(WriteOp::Insert {
                table: p.table.clone(),
                row,
                on_conflict: None,
            });
        }
        Ok(staged)
    };
    Some(stage())
}

/// Names the row of a multi-row INSERT or COPY into a ledger table that failed: the whole
/// statement is one linked chain, and the client needs to know which link broke.
fn in_row(table: &TableDef, mut e: SqlError, n: usize, count: usize) -> SqlError {
    if table.ledger.is_some() && count > 1 {
        e.message = format!("row {} of {count}: {}", n + 1, e.message);
    }
    e
}

/// The transfer id a `CALL transfer(...)` answers with.
fn call_id(table: &TableDef, row: &[Value]) -> Value {
    table
        .column_index("id")
        .map_or(Value::Null, |i| row[i].clone())
}

/// An INSERT's VALUES rows evaluated (they hold no column references).
fn eval_values(rows: &[Vec<Expr>], env: &EvalEnv<'_>) -> SqlResult<Vec<Row>> {
    rows.iter()
        .map(|r| r.iter().map(|e| e.eval(&[], env)).collect())
        .collect()
}

/// Packed rows of a log command that do not decode (a damaged entry).
pub(crate) fn undecodable(e: String) -> SqlError {
    SqlError::internal(format!("undecodable rows in a log command: {e}"))
}

/// The rows an INSERT's source produces: its VALUES evaluated, or its query run.
fn insert_sources(
    reader: &crate::query::Reader<'_>,
    source: &InsertSource,
    env: &EvalEnv<'_>,
) -> SqlResult<Vec<Row>> {
    match source {
        InsertSource::Values(rows) => eval_values(rows, env),
        InsertSource::Query(rel) => reader.rows(rel, &[], env),
        InsertSource::Rows(rows) => Ok(rows.clone()),
        InsertSource::Packed(rows) => rows.unpack().map_err(undecodable),
    }
}

/// Schema changes that would have to compare rows across partitions (a unique index, a new
/// primary key) are refused on the ledger's partitioned tables.
fn refuse_on_ledger_table(table: &TableDef, what: &str) -> SqlResult<()> {
    if crate::partition::is_partitioned(table) {
        return Err(SqlError::feature_not_supported(format!(
            "{what} on the ledger table \"{}\"",
            table.name
        )));
    }
    Ok(())
}

/// What a new table brings besides itself: the sequences its columns own and its foreign
/// keys (both get their ids when the table has its own).
#[derive(Default)]
struct TableKeys {
    sequences: Vec<planner::SequenceDef>,
    foreign_keys: Vec<planner::ForeignKeyDef>,
}

/// A row a transaction stages into `table`: a unique index's values (none NULL) that a row
/// the transaction sees already has, or one this statement staged (`own`: index and
/// values), fail the statement now, as in PostgreSQL. The COMMIT checks again.
fn check_staged_unique(
    reader: &crate::query::Reader<'_>,
    table: &TableDef,
    row: &[Value],
    own: &mut std::collections::HashSet<(usize, Vec<u8>)>,
) -> SqlResult<()> {
    for (n, index) in table.indexes.iter().enumerate().filter(|(_, i)| i.unique) {
        let values: Vec<Value> = index.columns.iter().map(|&c| row[c].clone()).collect();
        if values.iter().any(Value::is_null) {
            continue;
        }
        // A partial index: only rows its predicate accepts count, on either side. An
        // expression index is left to the COMMIT (finding equal keys takes a scan).
        let derivation = reader.catalog.index_derivations.get(&index.id);
        if derivation.is_some_and(|d| !d.keys.is_empty()) {
            continue;
        }
        let counts = |r: &[Value]| {
            derivation.map_or(Ok(true), |d| {
                d.key_of(r, &index.columns).map(|key| key.is_some())
            })
        };
        if !counts(row)? {
            continue;
        }
        let mut others = false;
        for other in reader.rows_with(table, &index.columns, row)? {
            others |= counts(&other.row)?;
        }
        let taken = !own.insert((n, encode_key(&values)?)) || others;
        if taken {
            return Err(unique_violation(table, &index.name, &index.columns, row));
        }
    }
    Ok(())
}

fn affected_twice() -> SqlError {
    SqlError::new(
        ErrorKind::CardinalityViolation,
        "ON CONFLICT DO UPDATE command cannot affect row a second time",
    )
    .with_detail("Ensure that no rows proposed for insertion within the same command have duplicate constrained values.")
}

/// What a row an INSERT stages conflicts with on its ON CONFLICT arbiter.
enum StagedConflict {
    /// None: the row is new; it claims these (arbiter, values) once it is staged.
    New(Vec<(usize, Vec<u8>)>),
    /// A row the same statement staged before it.
    Own,
    /// A row the transaction sees (stored or staged by an earlier statement).
    Stored(crate::query::ScannedRow),
}

/// The conflicts an INSERT staged in a transaction looks for: the column sets its ON
/// CONFLICT arbitrates on (the primary key's without one), and what its own rows took.
struct StagedConflicts<'t> {
    arbiter: ConflictArbiter,
    arbiters: Vec<&'t [usize]>,
    /// (arbiter, its values) of the rows this statement staged.
    own: std::collections::HashSet<(usize, Vec<u8>)>,
    /// The primary keys of this statement's rows, when the primary key does not arbitrate.
    own_keys: Option<std::collections::HashSet<Vec<u8>>>,
    /// Rows a DO UPDATE changed: a second change is an error.
    updated: std::collections::HashSet<Vec<u8>>,
}

impl<'t> StagedConflicts<'t> {
    fn new(table: &'t TableDef, on_conflict: Option<&OnConflict>) -> SqlResult<Self> {
        let arbiter = on_conflict.map_or(ConflictArbiter::PrimaryKey, OnConflict::arbiter);
        let primary_key = table.has_primary_key().then_some(&table.primary_key[..]);
        let arbiters: Vec<&[usize]> = match arbiter {
            // A transfer's id is checked when the commit applies: a retry with the same
            // fields is not an error there.
            _ if table.ledger == Some(LedgerRole::Transfers) => Vec::new(),
            ConflictArbiter::PrimaryKey => primary_key.into_iter().collect(),
            ConflictArbiter::Index(id) => vec![&unique_arbiter(table, id)?.columns],
            ConflictArbiter::Any => primary_key
                .into_iter()
                .chain(
                    table
                        .indexes
                        .iter()
                        .filter(|i| i.unique && !i.is_derived())
                        .map(|i| &i.columns[..]),
                )
                .collect(),
        };
        let own_keys = matches!(arbiter, ConflictArbiter::Index(_) if table.has_primary_key())
            .then(Default::default);
        Ok(StagedConflicts {
            arbiter,
            arbiters,
            own: Default::default(),
            own_keys,
            updated: Default::default(),
        })
    }

    /// The conflict of `row` (stored under `key`) on the arbiter. A primary key that does
    /// not arbitrate is a duplicate error when taken.
    fn find(
        &mut self,
        reader: &crate::query::Reader<'_>,
        table: &TableDef,
        row: &[Value],
        key: &[u8],
    ) -> SqlResult<StagedConflict> {
        let mut claims = Vec::new();
        for (n, columns) in self.arbiters.iter().enumerate() {
            if columns.iter().any(|&c| row[c].is_null()) {
                continue;
            }
            let values: Vec<Value> = columns.iter().map(|&c| row[c].clone()).collect();
            let values = encode_key(&values)?;
            if self.own.contains(&(n, values.clone())) {
                return Ok(StagedConflict::Own);
            }
            if let Some(found) = reader.rows_with(table, columns, row)?.pop() {
                return Ok(StagedConflict::Stored(found));
            }
            claims.push((n, values));
        }
        if let Some(own_keys) = &mut self.own_keys {
            if !own_keys.insert(key.to_vec())
                || !reader.rows_with(table, &table.primary_key, row)?.is_empty()
            {
                return Err(duplicate_key(table, row));
            }
        }
        Ok(StagedConflict::New(claims))
    }

    /// A new row is staged: later rows of the statement collide with its values.
    fn claim(&mut self, claims: Vec<(usize, Vec<u8>)>) {
        self.own.extend(claims);
    }
}

/// A CREATE INDEX's definition as the binder gave it.
struct NewIndex {
    name: String,
    columns: Vec<usize>,
    unique: bool,
    if_not_exists: bool,
    derivation: Option<planner::IndexDerivation>,
}

/// Refuses to drop `table` while a foreign key of a table not dropped with it (`dropped`)
/// references it.
fn refuse_if_referenced(catalog: &Catalog, table: &TableDef, dropped: &[u32]) -> SqlResult<()> {
    match catalog
        .references_to(table.id)
        .find(|f| !dropped.contains(&f.table))
    {
        Some(fk) => Err(dependent_foreign_key(
            catalog,
            fk,
            &format!("drop table {}", table.name),
            &table.name,
        )),
        None => Ok(()),
    }
}

/// Checks that `table`'s new definition keeps every foreign key it takes part in: its own
/// columns, and the referenced columns with their primary key or unique index.
fn foreign_keys_hold(catalog: &Catalog, table: &TableDef, doing: &str) -> SqlResult<()> {
    for fk in catalog.foreign_keys_of(table.id) {
        planner::ForeignKeyDef::positions(table, &fk.columns)
            .map_err(|_| dependent_foreign_key(catalog, fk, doing, &table.name))?;
    }
    for fk in catalog.references_to(table.id) {
        fk.check_parent_key(table)
            .map_err(|_| dependent_foreign_key(catalog, fk, doing, &table.name))?;
    }
    Ok(())
}

fn dependent_foreign_key(
    catalog: &Catalog,
    fk: &planner::ForeignKeyDef,
    doing: &str,
    what: &str,
) -> SqlError {
    let child = catalog
        .table_by_id(fk.table)
        .map(|t| t.name.clone())
        .unwrap_or_default();
    SqlError::new(
        ErrorKind::DependentObjectsStillExist,
        format!("cannot {doing} because other objects depend on it"),
    )
    .with_detail(format!(
        "constraint {} on table {child} depends on table {what}",
        fk.name
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use planner::{
        bind, catalog_with_table, Catalog, EvalEnv, InsertPlan, InsertSource, Plan, TableDef,
        WritePlan,
    };
    use sql::{PackedRows, Value};

    use super::{build_row, eval_values, prebuild_insert, RowBuilder};

    fn catalog() -> Catalog {
        catalog_with_table(
            &Catalog::default(),
            "CREATE TABLE t (i INT PRIMARY KEY, b BIGINT DEFAULT 7, ok BOOLEAN NOT NULL \
             DEFAULT false, at TIMESTAMPTZ DEFAULT now(), x TEXT)",
        )
        .unwrap()
    }

    fn write(catalog: &Catalog, text: &str) -> WritePlan {
        let parsed = sql::parse(text).unwrap().remove(0);
        match bind(catalog, &parsed, &[]).unwrap().plan {
            Plan::Write(plan, _) => (*plan).clone(),
            _ => panic!("not a write: {text}"),
        }
    }

    /// The rows `RowBuilder` builds from the VALUES of `plan`, an INSERT into `table`.
    fn built_rows(table: &TableDef, plan: &WritePlan, env: &EvalEnv<'_>) -> Vec<Vec<Value>> {
        let WritePlan::Insert(p) = plan else {
            panic!("not an insert: {plan:?}")
        };
        let InsertSource::Values(values) = &p.source else {
            panic!("not VALUES: {plan:?}")
        };
        eval_values(values, env)
            .unwrap()
            .into_iter()
            .map(|v| build_row(table, &p.target_columns, v, env).unwrap())
            .collect()
    }

    /// The packed rows of a prebuilt INSERT.
    fn packed_rows(plan: &WritePlan) -> &PackedRows {
        match plan {
            WritePlan::Insert(InsertPlan {
                source: InsertSource::Packed(rows),
                ..
            }) => rows,
            _ => panic!("not a prebuilt insert: {plan:?}"),
        }
    }

    #[test]
    fn prebuilt_rows_are_the_rows_the_executor_would_build() {
        let catalog = catalog();
        let table = catalog.tables["t"].clone();
        let now = 1_790_000_000_000_000;
        let plan = write(
            &catalog,
            "INSERT INTO t (i, x, b) VALUES (1, 'a', DEFAULT), (2 * 3, NULL, 2 + 2)",
        );
        let WritePlan::Insert(p) = &plan else {
            unreachable!()
        };
        let env = EvalEnv::without_subqueries(&[], now);
        let expected = built_rows(&table, &plan, &env);
        let Some(Ok(WritePlan::Insert(prebuilt))) = prebuild_insert(&plan, &catalog, &[], now)
        else {
            panic!("constant VALUES are prebuilt");
        };
        let InsertSource::Packed(packed) = &prebuilt.source else {
            panic!("prebuilt plans carry rows");
        };
        let rows = packed.unpack().unwrap();
        // Values compare by their debug form (they have no PartialEq: NULL is not equal to
        // itself in SQL).
        assert_eq!(format!("{rows:?}"), format!("{expected:?}"));
        assert!(matches!(rows[0][1], Value::Int(7)), "the default of b");
        assert!(matches!(rows[1][1], Value::Int(4)));
        assert!(
            matches!(rows[1][3], Value::TimestampTz(t) if t == now),
            "now() is the command's"
        );
        assert_eq!(prebuilt.target_columns, vec![0, 1, 2, 3, 4]);
        assert_eq!(prebuilt.table, p.table);
    }

    /// Rows whose defaults are the statement's are packed through a row shape (the defaults
    /// packed once); the bytes are those of the rows `RowBuilder` builds.
    #[test]
    fn shaped_rows_are_the_rows_the_builder_builds() {
        let catalog = catalog_with_table(
            &Catalog::default(),
            "CREATE TABLE s (a SMALLINT, b INT DEFAULT 2, c BIGINT, d NUMERIC DEFAULT 1.5, \
             e TEXT DEFAULT 'e', at TIMESTAMPTZ DEFAULT now(), ok BOOLEAN DEFAULT true)",
        )
        .unwrap();
        let table = catalog.tables["s"].clone();
        let now = 1_790_000_000_000_000;
        let env = EvalEnv::without_subqueries(&[], now);
        for text in [
            "INSERT INTO s (c, a) VALUES (1, 2), (3 * 4, -5), (NULL, NULL)",
            "INSERT INTO s (e, d, b) VALUES ('x', 2, 3), (NULL, 0.25, '7')",
            "INSERT INTO s VALUES (1, 2, 3, 4, 'five', '2026-11-24 10:00:00+00', false)",
        ] {
            let plan = write(&catalog, text);
            let expected = built_rows(&table, &plan, &env);
            let Some(Ok(prebuilt)) = prebuild_insert(&plan, &catalog, &[], now) else {
                panic!("not prebuilt: {text}");
            };
            assert_eq!(
                packed_rows(&prebuilt).as_bytes(),
                PackedRows::pack(&expected).as_bytes(),
                "{text}"
            );
        }
    }

    #[test]
    fn a_statement_evaluates_fixed_defaults_once_and_random_ones_per_row() {
        let catalog = catalog_with_table(
            &Catalog::default(),
            "CREATE TABLE r (i INT, u UUID DEFAULT gen_random_uuid(), at TIMESTAMPTZ DEFAULT now())",
        )
        .unwrap();
        let table = catalog.tables["r"].clone();
        let now = 1_790_000_000_000_000;
        let env = EvalEnv::without_subqueries(&[], now).with_random(true);
        let mut builder = RowBuilder::new(&table, &[0]);
        let rows: Vec<Vec<Value>> = (0..3)
            .map(|i| {
                let mut row = Vec::new();
                builder
                    .build_into(&mut row, [Ok(Value::Int(i))], &env)
                    .unwrap();
                row
            })
            .collect();
        let uuids: std::collections::HashSet<String> =
            rows.iter().map(|r| format!("{:?}", r[1])).collect();
        assert_eq!(
            uuids.len(),
            3,
            "a random default is drawn for every row: {rows:?}"
        );
        assert!(rows
            .iter()
            .all(|r| matches!(r[2], Value::TimestampTz(t) if t == now)));
        assert!(builder.defaults[1].is_none());
        assert!(matches!(builder.defaults[2], Some(Value::TimestampTz(_))));
    }

    /// The statement `text` bound with its first row alone, and its rows.
    fn head_and_rows(catalog: &Catalog, text: &str) -> (WritePlan, sql::ValueRows) {
        let parsed = sql::parse(text).unwrap().remove(0);
        let sql::Parsed::InsertValues { statement, rows } = parsed.parsed else {
            panic!("not read by the row reader: {text}");
        };
        let head = sql::ParsedStatement {
            parsed: sql::Parsed::InsertValues {
                statement,
                rows: Box::new(rows.head(1)),
            },
            text: String::new(),
        };
        match bind(catalog, &head, &[]).unwrap().plan {
            Plan::Write(plan, _) => ((*plan).clone(), *rows),
            _ => panic!("not a write: {text}"),
        }
    }

    #[test]
    fn literal_rows_build_as_the_whole_statement_bound() {
        // One table per catalog: each numbers its table alike.
        let t = catalog();
        let n = catalog_with_table(
            &Catalog::default(),
            "CREATE TABLE n (a SMALLINT, b INT NOT NULL, c BIGINT DEFAULT 3, \
             at TIMESTAMPTZ DEFAULT now(), x TEXT DEFAULT 'x')",
        )
        .unwrap();
        let catalog_of = |text: &str| if text.contains(" n ") { &n } else { &t };
        let now = 1_790_000_000_000_000;
        for text in [
            "INSERT INTO t (i, b) VALUES (1, 2), (-3, -9223372036854775808), (007, 4)",
            "INSERT INTO t (b, i) VALUES (9223372036854775807, 2147483647), (0, -2147483648)",
            "INSERT INTO n VALUES (-32768, 1, 2), (32767, -1, -2)",
            "INSERT INTO n (c, b) VALUES (1, 2), (3, 4)",
            // NOT NULL is the executor's to check, for both.
            "INSERT INTO n (a, c) VALUES (1, 2), (3, 4)",
        ] {
            let catalog = catalog_of(text);
            let whole = write(catalog, text);
            let Some(Ok(expected)) = prebuild_insert(&whole, catalog, &[], now) else {
                panic!("not prebuilt: {text}");
            };
            let (head, rows) = head_and_rows(catalog, text);
            let built = super::prebuild_literal_insert(&head, catalog, &rows, now)
                .unwrap_or_else(|| panic!("not built from literals: {text}"));
            assert_eq!(format!("{built:?}"), format!("{expected:?}"), "{text}");
            assert_eq!(
                packed_rows(&built).as_bytes(),
                packed_rows(&expected).as_bytes(),
                "{text}"
            );
        }
        for text in [
            "INSERT INTO t (i, b) VALUES (1, 2), (2, 3 + 4)",
            "INSERT INTO t (i, x) VALUES (1, 'a'), (2, 'b')",
            "INSERT INTO t (i, b) VALUES (1, 2), (2, NULL)",
            "INSERT INTO n (a, b) VALUES (1, 2), (32768, 3)",
            "INSERT INTO n (a, b) VALUES (1, 2), (-32769, 3)",
            "INSERT INTO n (a, b) VALUES (1, 2), (3)",
            "INSERT INTO t (i, b) VALUES (1, 2), ($1, 3)",
        ] {
            let catalog = catalog_of(text);
            let (head, rows) = head_and_rows(catalog, text);
            assert!(
                super::prebuild_literal_insert(&head, catalog, &rows, now).is_none(),
                "{text}"
            );
        }
        let random = catalog_with_table(
            &Catalog::default(),
            "CREATE TABLE r (i INT, u UUID DEFAULT gen_random_uuid())",
        )
        .unwrap();
        let (head, rows) = head_and_rows(&random, "INSERT INTO r (i) VALUES (1), (2)");
        assert!(super::prebuild_literal_insert(&head, &random, &rows, now).is_none());
    }

    #[test]
    fn what_might_differ_or_fail_is_left_to_the_executor() {
        let catalog = catalog();
        let text_param = [Value::Text("not a number".into())];
        for (text, params) in [
            ("INSERT INTO t (i, b) VALUES (1, (SELECT 1))", &[][..]),
            ("INSERT INTO t (i) VALUES (2147483647 + 1)", &[]),
            ("INSERT INTO t (i, b) VALUES (1, $1)", &text_param),
            ("INSERT INTO t (i) SELECT 1", &[]),
        ] {
            let plan = write(&catalog, text);
            assert!(
                prebuild_insert(&plan, &catalog, params, 0).is_none(),
                "{text}"
            );
        }
        let plan = write(&catalog, "INSERT INTO t (i) VALUES (1)");
        let mut changed = catalog.clone();
        let mut table = (*changed.tables["t"]).clone();
        table.shape_version += 1;
        changed.tables.insert("t".into(), Arc::new(table));
        assert!(
            prebuild_insert(&plan, &changed, &[], 0).is_none(),
            "planned against another shape"
        );
    }

    #[test]
    fn random_values_are_drawn_once_here_and_their_errors_answered_here() {
        let catalog = catalog();
        let plan = write(
            &catalog,
            "INSERT INTO t (i, b) VALUES (1, (random() * 1000)::int), (2, (random() * 1000)::int)",
        );
        let Some(Ok(WritePlan::Insert(prebuilt))) = prebuild_insert(&plan, &catalog, &[], 0) else {
            panic!("random() in VALUES is prebuilt");
        };
        let InsertSource::Packed(packed) = &prebuilt.source else {
            panic!("prebuilt plans carry rows");
        };
        assert_eq!(packed.unpack().unwrap().len(), 2);
        let plan = write(
            &catalog,
            "INSERT INTO t (i, b) VALUES (2147483647 + 1, (random() * 10)::int)",
        );
        let e = prebuild_insert(&plan, &catalog, &[], 0)
            .expect("answered here")
            .unwrap_err();
        assert_eq!(e.sqlstate(), "22003");
    }
}
