//! Staging: a write statement inside a transaction evaluated against the state plus the
//! transaction's overlay without being applied — the rows it touches, their new images and
//! the ops its COMMIT will apply (see docs/paths.md, "The write path, as built").

use std::borrow::Cow;
use std::sync::Arc;

use plan::{
    ConflictArbiter, DeletePlan, EvalEnv, Expr, Func, InsertPlan, LedgerRole, OnConflict, TableDef,
    UpdatePlan, WritePlan,
};
use sql::{ErrorKind, SqlError, SqlResult, Value};

use crate::apply::*;
use crate::command::{ReadCheck, Staged, WriteOp};
use crate::executor::{Executor, StatementContext, StatementValues};
use crate::query::Reader;
use crate::row::{encode_key, row_key, Row};

impl Executor {
    /// Evaluates a write statement inside a transaction: which rows it touches, what they
    /// become, and the ops the commit will apply. Nothing is written.
    pub(crate) fn stage(
        &mut self,
        plan: &WritePlan,
        context: &StatementContext,
        sequences: StatementValues,
    ) -> SqlResult<Staged> {
        let table = self.resolve(plan.table())?;
        let sequences = self.statement_sequences(sequences);
        let mut reader = self.reader(context.overlay.as_deref(), context.record_reads);
        reader.sequences = Some(Box::new(&sequences));
        let mut staged = stage_with(&mut reader, &table, plan, context)?;
        drop(reader);
        staged.sequences = sequences.own.take();
        Ok(staged)
    }
}

/// Stages a point UPDATE or DELETE on `view`, the state the executor published while idle,
/// on the caller's thread: the result is what `Executor::stage` gives at the view's
/// position, which is the executor's state while the view is current (no entry has begun
/// since). None when the view cannot answer it and the executor stages it instead: an
/// INSERT (its conflicts and sequences are the executor's), a statement that is not a
/// primary-key point, that reads other tables or calls a sequence, a serializable or
/// locking transaction's (its reads are validated against the executor's table
/// versions), a transaction with its own schema changes, or a ledger table.
pub fn stage_on_view(
    view: &crate::read_view::ReadView,
    plan: &WritePlan,
    context: &StatementContext,
) -> Option<SqlResult<Staged>> {
    if !stages_on_view(plan, context) {
        return None;
    }
    let table = view
        .catalog()
        .table_by_id(plan.table().id)
        .filter(|t| t.shape_version == plan.table().shape_version && t.ledger.is_none())?
        .clone();
    if plan::write_calls(plan, &table, Func::uses_sequences) {
        return None;
    }
    let mut reader = view.reader(context);
    let staged = stage_with(&mut reader, &table, plan, context);
    if reader.incomplete() {
        return None;
    }
    Some(staged)
}

/// Whether `plan`, in a transaction of `context`, is one `stage_on_view` may stage: a point
/// UPDATE or DELETE reading no other table, of a read-committed transaction without schema
/// changes of its own (the view's catalog decides the rest).
pub fn stages_on_view(plan: &WritePlan, context: &StatementContext) -> bool {
    let (access, assignments, filter) = match plan {
        WritePlan::Update(p) => (&p.access, &p.assignments[..], p.filter.as_ref()),
        WritePlan::Delete(p) => (&p.access, &[][..], p.filter.as_ref()),
        WritePlan::Insert(_) => return false,
    };
    matches!(access, plan::Access::Point(_))
        && context.schema.is_none()
        && !context.record_reads
        && !reads_tables(assignments, filter)
}

/// The staging of `plan` into `table` with `reader` (the executor's partitions or a view of
/// them) and the transaction's overlay it carries.
fn stage_with(
    reader: &mut Reader<'_>,
    table: &Arc<TableDef>,
    plan: &WritePlan,
    context: &StatementContext,
) -> SqlResult<Staged> {
    let (params, now_micros) = (&context.params[..], context.now_micros);
    reader.interrupt = context.interrupt.clone();
    reader.memory = plan::memory::StatementMemory::start();
    // An INSERT's rows go into the commit as built here, so they may draw random values;
    // what the commit evaluates again (assignments of UPDATE and ON CONFLICT DO UPDATE,
    // evaluated where `commit_env` is) may not.
    reader.random = matches!(plan, WritePlan::Insert(_));
    let reader = &*reader;
    let env = reader.env(params, now_micros);
    let staging = Staging {
        reader,
        table,
        table_ref: table.reference(),
        context,
        env: &env,
        earlier: context.staged_bytes,
    };
    let mut staged = Staged::default();
    match plan {
        WritePlan::Insert(p) => {
            let commit_env = reader.env(params, now_micros).with_random(false);
            staging.insert(p, &commit_env, &mut staged)?
        }
        WritePlan::Update(p) => staging.update(p, &mut staged)?,
        WritePlan::Delete(p) => staging.delete(p, &mut staged)?,
    }
    staged.reads = reader.reads.take();
    existence_only(table, plan, context, &mut staged);
    Ok(staged)
}

/// One statement being staged: where it reads, the table it writes, its values, and what
/// the transaction staged before it.
struct Staging<'s, 'r> {
    reader: &'s Reader<'r>,
    table: &'s Arc<TableDef>,
    table_ref: plan::TableRef,
    context: &'s StatementContext,
    env: &'s EvalEnv<'s>,
    /// What the transaction staged before this statement, in the log's encoding.
    earlier: usize,
}

impl Staging<'_, '_> {
    /// An INSERT's rows, each with its conflict found (in storage, in the overlay, among the
    /// statement's own rows) and its ON CONFLICT action decided.
    fn insert(
        &self,
        p: &InsertPlan,
        commit_env: &EvalEnv<'_>,
        staged: &mut Staged,
    ) -> SqlResult<()> {
        let (reader, table, context, env) = (self.reader, self.table, self.context, self.env);
        let (params, now_micros) = (&context.params[..], context.now_micros);
        let overlay = context.overlay.as_deref();
        let sources = insert_sources(reader, &p.source, env)?;
        let (on_conflict, conflict_subqueries) = bound_on_conflict(p, params, now_micros)?;
        let temp_base = overlay.map(|o| o.len()).unwrap_or(0);
        let mut conflicts = StagedConflicts::new(table, on_conflict.as_ref())?;
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
            let on_conflict = match on_conflict.as_ref().and_then(|c| Some((c, c.update()?))) {
                Some((clause, (assignments, filter))) if conflict_draws => {
                    Cow::Owned(Some(clause.with_action(OnConflict::DoUpdate {
                        assignments: draw_all(assignments)?,
                        filter: filter.cloned(),
                    })))
                }
                _ => Cow::Borrowed(&on_conflict),
            };
            let action = on_conflict.as_ref().as_ref().map(OnConflict::action);
            let row = build_row(table, &p.target_columns, values, env)?;
            check_row(table, &row, env)?;
            crate::foreign_keys::check_staged_parents(reader, table, &row)?;
            // Rows of tables without a primary key get their row id when the commit
            // applies; until then they live under a key no stored row can have.
            let key = if table.has_primary_key() {
                row_key(table, &row, 0)?
            } else {
                encode_key(&[Value::Int(-1 - (temp_base + n) as i64)])?
            };
            let existing =
                match conflicts.resolve(reader, table, (&row, &key), action, &mut own_unique)? {
                    Resolved::Skipped => continue,
                    Resolved::New => None,
                    Resolved::Existing(existing) => Some(existing),
                };
            let mut evaluated_conflict = None;
            let stored = match (existing, action) {
                (None, _) => Some((key, row.clone())),
                (Some(_), None) => return Err(duplicate_key(table, &row)),
                (Some(old), Some(action @ OnConflict::DoUpdate { .. })) => {
                    if !conflicts.updated.insert(old.key.clone()) {
                        return Err(affected_twice());
                    }
                    let subqueries = conflict_subqueries.then_some(on_conflict.as_ref().as_ref());
                    let (stored, evaluated) = update_on_conflict(
                        table,
                        old,
                        &row,
                        action,
                        subqueries.flatten(),
                        commit_env,
                    )?;
                    evaluated_conflict = evaluated;
                    stored
                }
                (Some(_), Some(_)) => None,
            };
            staged.push_op(
                WriteOp::Insert {
                    table: self.table_ref.clone(),
                    row,
                    on_conflict: match evaluated_conflict {
                        Some(clause) => Some(clause),
                        None => on_conflict.into_owned(),
                    },
                },
                self.earlier,
            )?;
            if let Some((key, stored)) = stored {
                staged.rows_affected += 1;
                if p.call {
                    let id = call_id(table, &stored);
                    staged.rows.push(vec![id, Value::Text("staged".into())]);
                }
                returning(p.returning.as_ref(), &stored, env, &mut staged.rows)?;
                staged.overlay.push(((table.id, key), Some(stored)));
            }
        }
        Ok(())
    }

    /// An UPDATE's rows: their new images for the overlay, and ops whose assignments the commit
    /// evaluates again on the row as it is then.
    fn update(&self, p: &UpdatePlan, staged: &mut Staged) -> SqlResult<()> {
        let (reader, table, context, env) = (self.reader, self.table, self.context, self.env);
        let (params, now_micros) = (&context.params[..], context.now_micros);
        let targets = reader.scan(table, &p.access, p.filter.as_ref(), &[], env)?;
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
                        fixed_on_row(&p.assignments, p.filter.as_ref(), &old, env)?;
                    (Cow::Owned(assignments), Cow::Owned(recheck))
                }
                false => (Cow::Borrowed(&assignments), Cow::Borrowed(&recheck)),
            };
            // Random values are drawn here, once per row; the commit evaluates the
            // assignments again with them.
            let drawn = draws.then(|| draw_all(&assignments)).transpose()?;
            let new = match &drawn {
                Some(drawn) => assign(table, &old, drawn, &old, env)?,
                None => assign(table, &old, &p.assignments, &old, env)?,
            };
            check_row(table, &new, env)?;
            staged.rows_affected += 1;
            returning(p.returning.as_ref(), &new, env, &mut staged.rows)?;
            let new_key = if table.has_primary_key() {
                row_key(table, &new, 0)?
            } else {
                key.clone()
            };
            if new_key != key {
                staged.overlay.push(((table.id, key.clone()), None));
            }
            staged.overlay.push(((table.id, new_key), Some(new)));
            staged.push_op(
                WriteOp::Update {
                    table: self.table_ref.clone(),
                    key,
                    assignments: drawn.unwrap_or_else(|| assignments.into_owned()),
                    recheck: recheck.into_owned(),
                },
                self.earlier,
            )?;
        }
        Ok(())
    }

    /// A DELETE's rows, gone from the overlay, and their ops.
    fn delete(&self, p: &DeletePlan, staged: &mut Staged) -> SqlResult<()> {
        let (reader, table, context, env) = (self.reader, self.table, self.context, self.env);
        let (params, now_micros) = (&context.params[..], context.now_micros);
        let targets = reader.scan(table, &p.access, p.filter.as_ref(), &[], env)?;
        let subqueries = p.filter.as_ref().is_some_and(Expr::has_subquery);
        let recheck = match subqueries {
            true => None,
            false => bind_filter(p.filter.as_ref(), params, now_micros)?,
        };
        for (key, old) in targets {
            // As an UPDATE's: subqueries travel as their values on this row.
            let recheck = match subqueries {
                true => fixed_on_row(&[], p.filter.as_ref(), &old, env)?.1,
                false => recheck.clone(),
            };
            if !table.has_primary_key() && is_temporary_key(&key) {
                return Err(SqlError::feature_not_supported("deleting a row inserted earlier in the same transaction into a table without a primary key"));
            }
            staged.rows_affected += 1;
            returning(p.returning.as_ref(), &old, env, &mut staged.rows)?;
            staged.overlay.push(((table.id, key.clone()), None));
            staged.push_op(
                WriteOp::Delete {
                    table: self.table_ref.clone(),
                    key,
                    recheck,
                },
                self.earlier,
            )?;
        }
        Ok(())
    }
}

/// An INSERT's ON CONFLICT clause with a DO UPDATE's parameters bound, and whether that DO
/// UPDATE has subqueries: then it stays unbound, is evaluated for each row it changes, and
/// travels with their values (as a staged UPDATE's do).
fn bound_on_conflict(
    p: &InsertPlan,
    params: &[Value],
    now_micros: i64,
) -> SqlResult<(Option<OnConflict>, bool)> {
    let subqueries = p
        .on_conflict
        .as_ref()
        .and_then(OnConflict::update)
        .is_some_and(|(assignments, filter)| reads_tables(assignments, filter));
    let clause = match &p.on_conflict {
        Some(clause) => match clause.update() {
            Some((assignments, filter)) if !subqueries => {
                Some(clause.with_action(OnConflict::DoUpdate {
                    assignments: bind_all(assignments, params, now_micros)?,
                    filter: bind_filter(filter, params, now_micros)?,
                }))
            }
            _ => Some(clause.clone()),
        },
        None => None,
    };
    Ok((clause, subqueries))
}

/// A row and its storage key.
type KeyedRow = (Vec<u8>, Row);

/// A DO UPDATE `action` on `old`, the row an inserted `row` conflicts with: the row it
/// leaves (None when its filter rejects the change), and — for `with_subqueries`, the
/// clause whose subqueries are evaluated here — the clause with their values on this row,
/// for the commit.
fn update_on_conflict(
    table: &TableDef,
    old: crate::query::ScannedRow,
    row: &[Value],
    action: &OnConflict,
    with_subqueries: Option<&OnConflict>,
    commit_env: &EvalEnv<'_>,
) -> SqlResult<(Option<KeyedRow>, Option<OnConflict>)> {
    let OnConflict::DoUpdate {
        assignments,
        filter,
    } = action
    else {
        return Err(SqlError::internal(
            "an ON CONFLICT action that is not DO UPDATE",
        ));
    };
    let mut context = old.row.clone();
    context.extend(row.iter().cloned());
    let evaluated = match with_subqueries {
        Some(clause) => {
            let (assignments, filter) =
                fixed_on_row(assignments, filter.as_ref(), &context, commit_env)?;
            Some(clause.with_action(OnConflict::DoUpdate {
                assignments,
                filter,
            }))
        }
        None => None,
    };
    let pass = match filter {
        Some(f) => f.eval(&context, commit_env)?.is_true(),
        None => true,
    };
    if !pass {
        return Ok((None, evaluated));
    }
    let new = assign(table, &old.row, assignments, &context, commit_env)?;
    if table.has_primary_key() && row_key(table, &new, 0)? != old.key {
        return Err(SqlError::feature_not_supported(
            "ON CONFLICT DO UPDATE that changes the primary key",
        ));
    }
    Ok((Some((old.key, new)), evaluated))
}

/// `UPDATE ... SET x = x + d WHERE pk = k` depends only on whether the row exists: its
/// assignments are evaluated when the commit applies. Recording the row's version would
/// make every concurrent increment of a hot row a conflict, so such a statement's row reads
/// are replaced by the one existence check.
fn existence_only(
    table: &TableDef,
    plan: &WritePlan,
    context: &StatementContext,
    staged: &mut Staged,
) {
    let (params, now_micros) = (&context.params[..], context.now_micros);
    let (overlay, record_reads) = (context.overlay.as_deref(), context.record_reads);
    if let Some(key) = key_only_target(table, plan, params, now_micros) {
        let exists = staged.rows_affected > 0;
        staged
            .reads
            .retain(|r| !matches!(r, ReadCheck::Row { table: t, .. } if *t == table.id));
        // A row the transaction wrote itself exists or not by its own doing, as a read of
        // it from the overlay records nothing: the stored row's check is its first write's
        // (a second DELETE of one row finds it gone, which the stored row is not until the
        // commit applies the first).
        let own = overlay.is_some_and(|o| o.contains_key(&(table.id, key.clone())));
        if record_reads && !own {
            staged.reads.push(ReadCheck::Exists {
                table: table.id,
                key,
                exists,
            });
        }
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
    let plan::Access::Point(key_exprs) = access else {
        return None;
    };
    if !plan::filter_is_key_equality(table, filter.as_ref()) {
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

/// What becomes of an inserted row once its conflicts are looked for.
enum Resolved {
    /// Left out: DO NOTHING, or a unique violation every constraint arbitrates.
    Skipped,
    New,
    /// The row the transaction sees that it conflicts with.
    Existing(crate::query::ScannedRow),
}

impl<'t> StagedConflicts<'t> {
    /// Finds what the inserted `row` (storage key `key`) conflicts with and decides by
    /// `action`, its ON CONFLICT action: an error for a duplicate without one, or for a
    /// DO UPDATE of a row this statement staged; a new row claims its unique values.
    fn resolve(
        &mut self,
        reader: &crate::query::Reader<'_>,
        table: &TableDef,
        (row, key): (&[Value], &[u8]),
        action: Option<&OnConflict>,
        own_unique: &mut std::collections::HashSet<(usize, Vec<u8>)>,
    ) -> SqlResult<Resolved> {
        match self.find(reader, table, row, key)? {
            StagedConflict::Own => match action {
                None => Err(duplicate_key(table, row)),
                Some(OnConflict::DoUpdate { .. }) => Err(affected_twice()),
                Some(_) => Ok(Resolved::Skipped),
            },
            StagedConflict::Stored(existing) => Ok(Resolved::Existing(existing)),
            StagedConflict::New(claims) => {
                match check_staged_unique(reader, table, row, own_unique) {
                    // Every unique constraint arbitrates: skip the row.
                    Err(e)
                        if self.arbiter == ConflictArbiter::Any
                            && e.kind == ErrorKind::UniqueViolation =>
                    {
                        return Ok(Resolved::Skipped)
                    }
                    checked => checked?,
                }
                self.claim(claims);
                Ok(Resolved::New)
            }
        }
    }

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
