//! Applying writes: statements outside transactions, transaction commits (validate, then
//! apply every op or none), COPY chunks and procedures, and the row checks and builders
//! every write shares. Schema changes are `ddl`'s, staging inside a transaction `stage`'s,
//! rows built on the session's thread `prebuild`'s.

use std::sync::Arc;

use plan::{
    Assignment, ConflictArbiter, EvalEnv, Expr, Func, InsertPlan, InsertSource, LedgerRole,
    OnConflict, Step, TableDef, TableRef, WritePlan, DEFAULT_MARKER,
};
use sql::{DataType, ErrorKind, SqlError, SqlResult, Value};

use crate::command::{CommandResult, Outcome, ReadCheck, WriteOp};
use crate::executor::{Executor, Store, StoredRow};
use crate::lookahead::RowsAhead;
use crate::row::{row_key, Row};

fn row_text(row: &[Value], table: &TableDef) -> String {
    row.iter()
        .zip(&table.columns)
        .map(|(v, c)| v.to_pg_text(c.ty).unwrap_or_else(|| "null".into()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A constraint a row breaks.
pub(crate) enum Violation<'t> {
    NotNull(&'t str),
    Check(&'t str),
}

/// The first NOT NULL or CHECK constraint of `table` that `row` breaks.
pub(crate) fn violation<'t>(
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
pub(crate) fn check_row(table: &TableDef, row: &[Value], env: &EvalEnv<'_>) -> SqlResult<()> {
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
pub(crate) fn unique_arbiter(table: &TableDef, id: u32) -> SqlResult<&plan::IndexDef> {
    table.indexes.iter().find(|i| i.id == id).ok_or_else(|| {
        SqlError::serialization_failure(format!(
            "the unique index ON CONFLICT names on \"{}\" was dropped; retry",
            table.name
        ))
    })
}

pub(crate) fn duplicate_key(table: &TableDef, row: &[Value]) -> SqlError {
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
pub(crate) fn conform_value(v: &mut Value, ty: DataType) -> SqlResult<()> {
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
    pub(crate) defaults: Vec<Option<Value>>,
}

impl<'a> RowBuilder<'a> {
    pub(crate) fn new(table: &'a TableDef, target_columns: &'a [usize]) -> RowBuilder<'a> {
        RowBuilder {
            table,
            target_columns,
            defaults: vec![None; table.columns.len()],
        }
    }

    /// The row an INSERT of plan `p` stores for one of its sources' `values`: as they are
    /// when the plan carries built rows (`InsertSource::Rows` or `Packed`), else built from
    /// `values` in `target_columns` order.
    pub(crate) fn insert_row(
        &mut self,
        p: &InsertPlan,
        values: Row,
        env: &EvalEnv<'_>,
    ) -> SqlResult<Row> {
        if matches!(p.source, InsertSource::Rows(_) | InsertSource::Packed(_)) {
            return prebuilt_row(self.table, values);
        }
        let mut row = Vec::new();
        self.build_into(&mut row, values.into_iter().map(Ok), env)?;
        Ok(row)
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

pub(crate) fn assign(
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

pub(crate) fn returning(
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
pub(crate) fn draw_all(exprs: &[(usize, Expr)]) -> SqlResult<Vec<(usize, Expr)>> {
    exprs
        .iter()
        .map(|(c, e)| Ok((*c, e.with_random_drawn()?)))
        .collect()
}

/// Whether a SET list or its WHERE has subqueries (they read tables when evaluated).
pub(crate) fn reads_tables(assignments: &[Assignment], filter: Option<&Expr>) -> bool {
    assignments.iter().any(|(_, e)| e.has_subquery()) || filter.is_some_and(Expr::has_subquery)
}

/// A staged write's SET list and WHERE as the commit will evaluate them on `row` (the row
/// they see): subqueries replaced by their values there, parameters and `now()` fixed.
pub(crate) fn fixed_on_row(
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

pub(crate) fn bind_filter(
    filter: Option<&Expr>,
    params: &[Value],
    now_micros: i64,
) -> SqlResult<Option<Expr>> {
    filter
        .map(|f| f.bind_constants(params, now_micros))
        .transpose()
}

pub(crate) fn bind_all(
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
            Some(LedgerRole::Accounts) => match self.create_account(table, row, on_conflict)? {
                Some(row) => row,
                None => return Ok(None),
            },
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
        access: &plan::Access,
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
        let rows =
            sources.map(|values| values.and_then(|values| builder.insert_row(p, values, env)));
        // A multi-row transfer statement (its account working set is open) reads its rows a
        // group ahead and finds the leaves they will touch before applying them.
        let look_ahead = table.ledger == Some(LedgerRole::Transfers)
            && self.transfers.account_set.is_some()
            && count > 1;
        let mut rows = RowsAhead::new(rows, look_ahead);
        let mut resent = ResentChain::new(table, count, p.on_conflict.is_some());
        for n in 0..count {
            let Some(row) = rows.next(self, table) else {
                break;
            };
            let inserted = row
                .and_then(|row| {
                    let id = (p.call || resent.is_some()).then(|| call_id(table, &row));
                    let stored =
                        self.insert_row(table, row, p.on_conflict.as_ref(), env, version)?;
                    Ok((id, stored))
                })
                .map_err(|e| in_row(table, e, n, count))?;
            if let (Some(chain), (Some(id), stored)) = (&mut resent, &inserted) {
                chain.saw(table, n, count, id, stored.is_some())?;
            }
            let (id, stored) = inserted;
            match (id.filter(|_| p.call), stored) {
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
}

/// TigerBeetle's rule for a resent linked chain, kept by a statement of several rows into a
/// ledger table (one chain, without ON CONFLICT): all its rows may exist already (the same
/// chain sent again: nothing to do), or none. One that would create some rows while others
/// exist is refused, as TigerBeetle fails a chain with an `exists` in it, so a resend that
/// is not the same chain applies nothing.
struct ResentChain {
    /// The first row found existing: its position and id.
    existing: Option<(usize, Value)>,
    created: bool,
}

impl ResentChain {
    fn new(table: &TableDef, count: usize, on_conflict: bool) -> Option<ResentChain> {
        let ledger = matches!(
            table.ledger,
            Some(LedgerRole::Transfers | LedgerRole::Accounts)
        );
        (ledger && count > 1 && !on_conflict).then_some(ResentChain {
            existing: None,
            created: false,
        })
    }

    fn saw(
        &mut self,
        table: &TableDef,
        n: usize,
        count: usize,
        id: &Value,
        stored: bool,
    ) -> SqlResult<()> {
        if stored {
            self.created = true;
        } else if self.existing.is_none() {
            self.existing = Some((n, id.clone()));
        }
        let (Some((at, id)), true) = (&self.existing, self.created) else {
            return Ok(());
        };
        let noun = match table.ledger {
            Some(LedgerRole::Accounts) => "account",
            _ => "transfer",
        };
        let id = id.to_pg_text(DataType::Int8).unwrap_or_default();
        Err(SqlError::new(
            ErrorKind::UniqueViolation,
            format!(
                "row {} of {count}: {noun} {id} already exists, and others of the statement's rows do not: its rows are one linked chain, applied whole or not at all, so a resend must be the same rows",
                at + 1
            ),
        )
        .with_detail("result: exists"))
    }
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
pub(crate) fn call_id(table: &TableDef, row: &[Value]) -> Value {
    table
        .column_index("id")
        .map_or(Value::Null, |i| row[i].clone())
}

/// An INSERT's VALUES rows evaluated (they hold no column references).
pub(crate) fn eval_values(rows: &[Vec<Expr>], env: &EvalEnv<'_>) -> SqlResult<Vec<Row>> {
    rows.iter()
        .map(|r| r.iter().map(|e| e.eval(&[], env)).collect())
        .collect()
}

/// Packed rows of a log command that do not decode (a damaged entry).
pub(crate) fn undecodable(e: String) -> SqlError {
    SqlError::internal(format!("undecodable rows in a log command: {e}"))
}

/// The rows an INSERT's source produces: its VALUES evaluated, or its query run.
pub(crate) fn insert_sources(
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
pub(crate) fn refuse_on_ledger_table(table: &TableDef, what: &str) -> SqlResult<()> {
    if crate::partition::is_partitioned(table) {
        return Err(SqlError::feature_not_supported(format!(
            "{what} on the ledger table \"{}\"",
            table.name
        )));
    }
    Ok(())
}

pub(crate) fn affected_twice() -> SqlError {
    SqlError::new(
        ErrorKind::CardinalityViolation,
        "ON CONFLICT DO UPDATE command cannot affect row a second time",
    )
    .with_detail("Ensure that no rows proposed for insertion within the same command have duplicate constrained values.")
}
