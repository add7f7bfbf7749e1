//! Foreign keys, checked as rows are written: a row's foreign key values (all set) must
//! find their parent row; a parent row deleted, or its key changed, takes its referencing
//! rows' action (NO ACTION and RESTRICT refuse, CASCADE follows, SET NULL clears). Every
//! check reads the state as the command has left it so far, so the rows a statement (or a
//! transaction's COMMIT) wrote before count.
//!
//! Only tables outside the ledger take part (the binder refuses the others), and those
//! live in partition 0, so every check stays on the executor running the command.

use plan::{Access, EvalEnv, ForeignKeyDef, ReferentialAction, TableDef};
use sql::{ErrorKind, SqlError, SqlResult, Value};

use crate::apply::key_description;
use crate::executor::Executor;
use crate::query::{same_key_value, Reader};

impl Executor {
    /// `row`, written into `table` (in place of `old` when updated): its foreign keys whose
    /// values it sets (or changes) must find their parent rows.
    pub(crate) fn check_parents(
        &mut self,
        table: &TableDef,
        row: &[Value],
        old: Option<&[Value]>,
    ) -> SqlResult<()> {
        if self.catalog.foreign_keys.is_empty() {
            return Ok(());
        }
        let catalog = self.catalog.clone();
        for fk in catalog.foreign_keys_of(table.id) {
            let columns = ForeignKeyDef::positions(table, &fk.columns)?;
            if old.is_some_and(|old| columns.iter().all(|&c| same_key_value(&old[c], &row[c]))) {
                continue;
            }
            self.check_parent(fk, table, &columns, row)?;
        }
        Ok(())
    }

    /// `row` of `table` (`columns`: `fk`'s there) finds its parent, or has a NULL in them.
    fn check_parent(
        &mut self,
        fk: &ForeignKeyDef,
        table: &TableDef,
        columns: &[usize],
        row: &[Value],
    ) -> SqlResult<()> {
        if columns.iter().any(|&c| row[c].is_null()) {
            return Ok(());
        }
        let catalog = self.catalog.clone();
        let parent = catalog
            .table_by_id(fk.parent)
            .ok_or_else(|| SqlError::internal("a foreign key's parent table is missing"))?;
        let (parent_columns, key) = parent_key(fk, parent, columns, row)?;
        if self
            .command_reader()
            .rows_with(parent, &parent_columns, &key)?
            .is_empty()
        {
            return Err(missing_parent(fk, table, columns, row, parent));
        }
        Ok(())
    }

    /// `old`, a row of `table`, is being deleted (`new` None) or changed to `new`: the rows
    /// referencing its key (if the key changes) take their foreign key's action.
    pub(crate) fn act_on_children(
        &mut self,
        table: &TableDef,
        old: &[Value],
        new: Option<&[Value]>,
        env: &EvalEnv<'_>,
        version: u64,
    ) -> SqlResult<()> {
        if self.catalog.foreign_keys.is_empty() {
            return Ok(());
        }
        let catalog = self.catalog.clone();
        for fk in catalog.references_to(table.id) {
            let parent_columns = ForeignKeyDef::positions(table, &fk.parent_columns)?;
            if parent_columns.iter().any(|&c| old[c].is_null()) {
                continue;
            }
            if new.is_some_and(|new| {
                parent_columns
                    .iter()
                    .all(|&c| same_key_value(&old[c], &new[c]))
            }) {
                continue;
            }
            let child = catalog
                .table_by_id(fk.table)
                .ok_or_else(|| SqlError::internal("a foreign key's table is missing"))?
                .clone();
            let columns = ForeignKeyDef::positions(&child, &fk.columns)?;
            let key = key_in(&child, &columns, &parent_columns, old)?;
            let children = self.command_reader().rows_with(&child, &columns, &key)?;
            if children.is_empty() {
                continue;
            }
            let action = if new.is_some() {
                fk.on_update
            } else {
                fk.on_delete
            };
            match action {
                ReferentialAction::NoAction | ReferentialAction::Restrict => {
                    return Err(SqlError::new(
                        ErrorKind::ForeignKeyViolation,
                        format!(
                            "update or delete on table \"{}\" violates foreign key constraint \"{}\" on table \"{}\"",
                            table.name, fk.name, child.name
                        ),
                    )
                    .with_detail(format!(
                        "{} is still referenced from table \"{}\".",
                        key_description(table, &parent_columns, old),
                        child.name
                    )));
                }
                ReferentialAction::Cascade | ReferentialAction::SetNull => {
                    for target in children {
                        let old_bytes = crate::apply::stored_bytes(target.version, &target.row);
                        let mut row = target.row.clone();
                        match (action, new) {
                            (ReferentialAction::Cascade, None) => {
                                self.act_on_children(&child, &target.row, None, env, version)?;
                                self.delete_row(&child, &target.key, old_bytes, version)?;
                                continue;
                            }
                            (ReferentialAction::Cascade, Some(new)) => {
                                for (&c, &p) in columns.iter().zip(&parent_columns) {
                                    row[c] = new[p].cast(child.columns[c].ty)?;
                                }
                            }
                            _ => {
                                for &c in &columns {
                                    row[c] = Value::Null;
                                }
                            }
                        }
                        self.replace_row(&child, &target.key, old_bytes, &row, env, version)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// ALTER TABLE ... ADD FOREIGN KEY: every existing row of its table must find its parent.
    pub(crate) fn check_existing_rows(&mut self, fk: &ForeignKeyDef) -> SqlResult<()> {
        let catalog = self.catalog.clone();
        let table = catalog.table_by_id(fk.table).ok_or_else(|| {
            SqlError::serialization_failure(
                "the table changed while the foreign key was planned; retry",
            )
        })?;
        let columns = ForeignKeyDef::positions(table, &fk.columns)?;
        let env = EvalEnv::without_subqueries(&[], 0);
        let rows = self
            .command_reader()
            .scan_stored(table, &Access::Full, None, &[], &env)?;
        for r in rows {
            self.check_parent(fk, table, &columns, &r.row)?;
        }
        Ok(())
    }
}

/// A transaction stages `row` into `table`: a foreign key (to another table) whose parent
/// is missing from what the transaction sees fails the statement now, as in PostgreSQL. The
/// COMMIT checks again (and checks keys of a table to itself, whose parent may be a row of
/// the same statement).
pub(crate) fn check_staged_parents(
    reader: &Reader<'_>,
    table: &TableDef,
    row: &[Value],
) -> SqlResult<()> {
    let catalog = reader.catalog;
    for fk in catalog
        .foreign_keys_of(table.id)
        .filter(|f| f.parent != table.id)
    {
        let columns = ForeignKeyDef::positions(table, &fk.columns)?;
        if columns.iter().any(|&c| row[c].is_null()) {
            continue;
        }
        let Some(parent) = catalog.table_by_id(fk.parent) else {
            continue;
        };
        let (parent_columns, key) = parent_key(fk, parent, &columns, row)?;
        if reader.rows_with(parent, &parent_columns, &key)?.is_empty() {
            return Err(missing_parent(fk, table, &columns, row, parent));
        }
    }
    Ok(())
}

/// `fk`'s referenced columns in `parent`, and a parent row holding the values `row` (of the
/// referencing table, `columns` being the key's) gives them there (other columns NULL).
fn parent_key(
    fk: &ForeignKeyDef,
    parent: &TableDef,
    columns: &[usize],
    row: &[Value],
) -> SqlResult<(Vec<usize>, Vec<Value>)> {
    let parent_columns = ForeignKeyDef::positions(parent, &fk.parent_columns)?;
    let key = key_in(parent, &parent_columns, columns, row)?;
    Ok((parent_columns, key))
}

/// A row of `table` holding at its `columns` the values `row` has at `from` (cast to their
/// types), NULL elsewhere: a key to look `table` up by, from the other side of a foreign key.
fn key_in(
    table: &TableDef,
    columns: &[usize],
    from: &[usize],
    row: &[Value],
) -> SqlResult<Vec<Value>> {
    let mut key = vec![Value::Null; table.columns.len()];
    for (&c, &f) in columns.iter().zip(from) {
        key[c] = row[f].cast(table.columns[c].ty)?;
    }
    Ok(key)
}

/// PostgreSQL's error for a row of `table` whose parent row does not exist.
fn missing_parent(
    fk: &ForeignKeyDef,
    table: &TableDef,
    columns: &[usize],
    row: &[Value],
    parent: &TableDef,
) -> SqlError {
    SqlError::new(
        ErrorKind::ForeignKeyViolation,
        format!(
            "insert or update on table \"{}\" violates foreign key constraint \"{}\"",
            table.name, fk.name
        ),
    )
    .with_detail(format!(
        "{} is not present in table \"{}\".",
        key_description(table, columns, row),
        parent.name
    ))
}
