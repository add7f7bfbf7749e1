//! Binding ALTER TABLE's column and constraint changes: ADD/DROP/RENAME COLUMN, RENAME TO,
//! ALTER COLUMN SET/DROP DEFAULT and SET/DROP NOT NULL, ADD CONSTRAINT ... CHECK. The
//! actions apply in order to a working copy of the table's definition; the plan carries the
//! new definition and how the stored rows follow it (`RowChange`), so the executor only
//! checks and applies it.

use plan::*;
use sql::ast;
use sql::{DataType, ErrorKind, SqlError, SqlResult, Value};

use crate::bind::*;
use crate::bind_expr::*;
use crate::scope::Scope;

/// A table's definition while an ALTER TABLE's actions apply to it.
struct TableChange {
    def: TableDef,
    /// Where each column of `def` takes its values from in the stored rows.
    sources: Vec<ColumnSource>,
    /// The old width, to tell whether the rows change at all.
    old_width: usize,
    /// A new NOT NULL or CHECK the existing rows must satisfy.
    validate: bool,
    /// Sequences of columns made identity columns (ADD GENERATED ... AS IDENTITY).
    sequences: Vec<SequenceDef>,
}

impl TableChange {
    fn column(&self, name: &str) -> SqlResult<usize> {
        self.def.column_index(name).ok_or_else(|| {
            SqlError::new(
                ErrorKind::UndefinedColumn,
                format!(
                    "column \"{name}\" of relation \"{}\" does not exist",
                    self.def.name
                ),
            )
        })
    }

    /// Whether every column still comes, in place, from the stored row.
    fn rows_unchanged(&self) -> bool {
        self.sources.len() == self.old_width
            && self
                .sources
                .iter()
                .enumerate()
                .all(|(i, s)| matches!(s, ColumnSource::Old(j) if *j == i))
    }

    fn rows(self) -> (TableDef, RowChange) {
        let rows = match (self.rows_unchanged(), self.validate) {
            (false, _) => RowChange::Rebuild(self.sources),
            (true, true) => RowChange::Validate,
            (true, false) => RowChange::None,
        };
        (self.def, rows)
    }

    /// Drops column `i`: indexes and CHECK constraints that use it go with it (as in
    /// PostgreSQL), the others are renumbered.
    fn drop_column(&mut self, i: usize) -> SqlResult<()> {
        let name = self.def.columns[i].name.clone();
        if self.def.primary_key.contains(&i) {
            return Err(SqlError::feature_not_supported(format!(
                "dropping primary key column \"{name}\""
            )));
        }
        if self.def.columns.len() == 1 {
            return Err(SqlError::feature_not_supported("tables without columns"));
        }
        let shift = |c: usize| if c > i { c - 1 } else { c };
        self.def.indexes.retain(|index| !index.columns.contains(&i));
        for index in &mut self.def.indexes {
            for c in &mut index.columns {
                *c = shift(*c);
            }
        }
        self.def.checks.retain(|check| !uses_column(&check.expr, i));
        for check in &mut self.def.checks {
            check.expr.renumber_columns(&shift);
        }
        for c in &mut self.def.primary_key {
            *c = shift(*c);
        }
        self.def.columns.remove(i);
        self.sources.remove(i);
        Ok(())
    }
}

/// DROP CONSTRAINT of a CHECK or a UNIQUE constraint (with its index); a unique index made
/// by CREATE UNIQUE INDEX on plain columns is taken too (PostgreSQL refuses it: an index is
/// not a constraint there; databases from builds that did not tell them apart have such).
fn drop_constraint(change: &mut TableChange, name: &str, if_exists: bool) -> SqlResult<()> {
    let table = &mut change.def;
    if let Some(n) = table.checks.iter().position(|c| c.name == name) {
        table.checks.remove(n);
        return Ok(());
    }
    let unique = table
        .indexes
        .iter()
        .position(|i| i.name == name && i.unique && !i.is_derived());
    if let Some(n) = unique {
        table.indexes.remove(n);
        return Ok(());
    }
    if table.has_primary_key() && name == table.key_name() {
        return Err(SqlError::feature_not_supported(
            "dropping a primary key (the rows are stored by it)",
        ));
    }
    if if_exists {
        return Ok(());
    }
    Err(SqlError::new(
        ErrorKind::UndefinedObject,
        format!(
            "constraint \"{name}\" of relation \"{}\" does not exist",
            table.name
        ),
    ))
}

/// ADD COLUMN: a change the ledger's accounts and transfers tables take (the engine finds
/// its columns by name, and a row stays in its partition).
fn adds_column(operation: &ast::AlterTableOperation) -> bool {
    matches!(operation, ast::AlterTableOperation::AddColumn { .. })
}

fn uses_column(expr: &Expr, column: usize) -> bool {
    let mut found = false;
    expr.visit(&mut |e| found |= matches!(e, Expr::Column(c, _) if *c == column));
    found
}

impl Binder<'_> {
    /// What `operations` do to a table in the ledger's `role` (see `plan::LedgerAlter`).
    fn ledger_alter(
        &self,
        role: plan::LedgerRole,
        operations: &[ast::AlterTableOperation],
    ) -> plan::LedgerAlter {
        if operations.iter().all(adds_column) {
            return plan::LedgerAlter::AddsColumns;
        }
        let widens = |operation: &ast::AlterTableOperation| {
            let ast::AlterTableOperation::AlterColumn {
                column_name,
                op:
                    ast::AlterColumnOperation::SetDataType {
                        data_type,
                        using: None,
                        ..
                    },
            } = operation
            else {
                return false;
            };
            role.amount_field(&ident(column_name))
                && self.resolve_type(data_type).ok() == Some(plan::AMOUNT)
        };
        if operations.iter().all(widens) {
            plan::LedgerAlter::WidensAmounts
        } else {
            plan::LedgerAlter::Other
        }
    }

    /// ALTER TABLE with anything but ADD PRIMARY KEY (see `alter_table`).
    pub(crate) fn alter_table_columns(
        &mut self,
        table: &TableDef,
        operations: &[ast::AlterTableOperation],
    ) -> SqlResult<Plan> {
        if let Some(role) = table.ledger {
            plan::check_ledger_alter(table, role, self.ledger_alter(role, operations))?;
        }
        if let Some(plan) = self.alter_foreign_keys(table, operations)? {
            return Ok(plan);
        }
        let mut change = TableChange {
            def: table.clone(),
            sources: (0..table.columns.len()).map(ColumnSource::Old).collect(),
            old_width: table.columns.len(),
            validate: false,
            sequences: Vec::new(),
        };
        for operation in operations {
            self.alter_action(&mut change, operation)?;
        }
        if !self.params.is_empty() {
            return Err(SqlError::feature_not_supported("parameters in ALTER TABLE"));
        }
        let sequences = std::mem::take(&mut change.sequences);
        let (new, rows) = change.rows();
        if let Some(role) = table.ledger {
            plan::check_ledger_fields(&new, role)?;
        }
        let alter = DdlPlan::AlterTable {
            table: table.reference(),
            new: Box::new(new),
            rows,
        };
        Ok(Plan::Ddl(DdlPlan::with_sequences(alter, sequences)))
    }

    /// ALTER TABLE ... ADD [CONSTRAINT] FOREIGN KEY and DROP CONSTRAINT of a foreign key,
    /// each a statement of its own (None: the statement is not one of those).
    fn alter_foreign_keys(
        &self,
        table: &TableDef,
        operations: &[ast::AlterTableOperation],
    ) -> SqlResult<Option<Plan>> {
        use ast::AlterTableOperation as Op;
        let is_foreign_key = |op: &Op| match op {
            Op::AddConstraint {
                constraint: ast::TableConstraint::ForeignKey(_),
                ..
            } => true,
            // A foreign key's, or one no constraint has (its error is the same).
            Op::DropConstraint { name, .. } => {
                let name = ident(name);
                let other = table.checks.iter().any(|c| c.name == name)
                    || table.indexes.iter().any(|i| i.name == name)
                    || (table.has_primary_key() && table.key_name() == name);
                !other
            }
            _ => false,
        };
        if !operations.iter().any(is_foreign_key) {
            return Ok(None);
        }
        if operations.len() > 1 {
            return Err(SqlError::feature_not_supported(
                "adding or dropping a foreign key together with other ALTER TABLE actions",
            ));
        }
        if !self.params.is_empty() {
            return Err(SqlError::feature_not_supported("parameters in ALTER TABLE"));
        }
        Ok(Some(Plan::Ddl(match &operations[0] {
            Op::AddConstraint {
                constraint: ast::TableConstraint::ForeignKey(fk),
                ..
            } => {
                let columns = crate::bind_ddl::named_columns(&table.columns, &fk.columns)?;
                DdlPlan::AddForeignKey {
                    foreign_key: self.foreign_key(table, columns, fk, false)?,
                }
            }
            Op::DropConstraint {
                name, if_exists, ..
            } => DdlPlan::DropForeignKey {
                table: table.id,
                name: ident(name),
                if_exists: *if_exists,
            },
            _ => return Ok(None),
        })))
    }

    /// A partial or expression index keeps its predicate and keys as bound positions and as
    /// written: a column they read keeps its name, type and place, and no column before one
    /// of them may go (it would move them). Others change freely.
    fn refuse_if_derived_index_uses(
        &self,
        table: &TableDef,
        column: usize,
        doing: &str,
    ) -> SqlResult<()> {
        for index in table.indexes.iter().filter(|i| i.is_derived()) {
            let mut used = index.columns.clone();
            if let Some(d) = self.catalog.index_derivations.get(&index.id) {
                for e in d.predicate.iter().chain(&d.keys) {
                    e.expr.visit(&mut |x| {
                        if let Expr::Column(c, _) = x {
                            used.push(*c);
                        }
                    });
                }
            }
            // Dropping a column moves the ones after it.
            let dropping = doing == "dropping";
            let blocked = if dropping {
                used.iter().any(|&c| c >= column)
            } else {
                used.contains(&column)
            };
            if blocked {
                return Err(SqlError::feature_not_supported(format!(
                    "{doing} column \"{}\", which partial or expression index \"{}\" reads{}",
                    table.columns[column].name,
                    index.name,
                    if dropping { " (or one after it)" } else { "" }
                )));
            }
        }
        Ok(())
    }

    /// A column a sequence belongs to (SERIAL, identity, OWNED BY) keeps its name: the
    /// sequence names its owner by it; so does a column of a foreign key, on either side.
    fn refuse_if_owns_sequence(
        &self,
        table: &TableDef,
        column: usize,
        doing: &str,
    ) -> SqlResult<()> {
        let name = &table.columns[column].name;
        if let Some(fk) = self.catalog.foreign_key_using(table, name) {
            let referenced = fk.parent == table.id && fk.parent_columns.contains(name);
            if referenced && doing == "dropping" {
                return Err(SqlError::new(
                    ErrorKind::DependentObjectsStillExist,
                    format!(
                        "cannot drop column {name} of table {} because other objects depend on it",
                        table.name
                    ),
                ));
            }
            return Err(SqlError::feature_not_supported(format!(
                "{doing} column \"{name}\", which foreign key \"{}\" uses",
                fk.name
            )));
        }
        match self.catalog.sequence_of_column(table.id, name) {
            Some(s) => Err(SqlError::feature_not_supported(format!(
                "{doing} column \"{name}\", which owns sequence \"{}\"",
                s.name
            ))),
            None => Ok(()),
        }
    }

    fn alter_action(
        &mut self,
        change: &mut TableChange,
        operation: &ast::AlterTableOperation,
    ) -> SqlResult<()> {
        use ast::AlterTableOperation as Op;
        match operation {
            Op::AddColumn {
                if_not_exists,
                column_def,
                column_position: None,
                ..
            } => {
                let name = ident(&column_def.name);
                if change.def.column_index(&name).is_some() {
                    if *if_not_exists {
                        return Ok(());
                    }
                    return Err(SqlError::new(
                        ErrorKind::DuplicateColumn,
                        format!(
                            "column \"{name}\" of relation \"{}\" already exists",
                            change.def.name
                        ),
                    ));
                }
                self.add_column(change, column_def)
            }
            Op::DropColumn {
                column_names,
                if_exists,
                ..
            } => {
                for n in column_names {
                    match change.column(&ident(n)) {
                        Ok(i) => {
                            self.refuse_if_owns_sequence(&change.def, i, "dropping")?;
                            self.refuse_if_derived_index_uses(&change.def, i, "dropping")?;
                            change.drop_column(i)?
                        }
                        Err(_) if *if_exists => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(())
            }
            Op::RenameColumn {
                old_column_name,
                new_column_name,
            } => {
                let i = change.column(&ident(old_column_name))?;
                self.refuse_if_owns_sequence(&change.def, i, "renaming")?;
                self.refuse_if_derived_index_uses(&change.def, i, "renaming")?;
                let new_name = ident(new_column_name);
                if change.def.column_index(&new_name).is_some() {
                    return Err(SqlError::new(
                        ErrorKind::DuplicateColumn,
                        format!(
                            "column \"{new_name}\" of relation \"{}\" already exists",
                            change.def.name
                        ),
                    ));
                }
                // A CHECK is kept as bound positions and as its text for \d; the text
                // would go on naming the old column.
                if change.def.checks.iter().any(|c| uses_column(&c.expr, i)) {
                    return Err(SqlError::feature_not_supported(
                        "renaming a column that a CHECK constraint uses",
                    ));
                }
                change.def.columns[i].name = new_name;
                Ok(())
            }
            Op::RenameTable { table_name } => {
                let (ast::RenameTableNameKind::To(new) | ast::RenameTableNameKind::As(new)) =
                    table_name;
                let (_, new_name) = object_name(new)?;
                if self.catalog.relation_exists(&new_name) {
                    return Err(SqlError::new(
                        ErrorKind::DuplicateTable,
                        format!("relation \"{new_name}\" already exists"),
                    ));
                }
                change.def.name = new_name;
                Ok(())
            }
            Op::AlterColumn { column_name, op } => {
                let i = change.column(&ident(column_name))?;
                let name = change.def.columns[i].name.clone();
                let identity = self.catalog.identity_of(change.def.id, &name).is_some()
                    || change
                        .sequences
                        .iter()
                        .any(|s| s.owner.as_ref().is_some_and(|o| o.column == name));
                let in_state = |message: String| {
                    Err(SqlError::new(
                        ErrorKind::ObjectNotInPrerequisiteState,
                        message,
                    ))
                };
                let table_name = change.def.name.clone();
                match op {
                    ast::AlterColumnOperation::AddGenerated {
                        generated_as,
                        sequence_options,
                    } => {
                        let column = &change.def.columns[i];
                        if column.nullable {
                            return in_state(format!("column \"{name}\" of relation \"{table_name}\" must be declared NOT NULL before identity can be added"));
                        }
                        if identity {
                            return in_state(format!("column \"{name}\" of relation \"{table_name}\" is already an identity column"));
                        }
                        if column.default.is_some() {
                            return in_state(format!("column \"{name}\" of relation \"{table_name}\" already has a default value"));
                        }
                        let kind = match generated_as {
                            Some(ast::GeneratedAs::ByDefault) => Identity::ByDefault,
                            _ => Identity::Always,
                        };
                        let options = sequence_options.clone().unwrap_or_default();
                        let taken = change.sequences.clone();
                        let mut def = change.def.columns[i].clone();
                        let mut sequence = self.sequence_column(
                            &table_name,
                            &mut def,
                            Some(kind),
                            &options,
                            &taken,
                        )?;
                        if let Some(owner) = &mut sequence.owner {
                            owner.table = change.def.id;
                        }
                        change.def.columns[i] = def;
                        change.sequences.push(sequence);
                    }
                    ast::AlterColumnOperation::SetDefault { .. }
                    | ast::AlterColumnOperation::DropDefault
                        if identity =>
                    {
                        return Err(SqlError::syntax(format!(
                            "column \"{name}\" of relation \"{table_name}\" is an identity column"
                        )));
                    }
                    ast::AlterColumnOperation::SetNotNull => {
                        if change.def.columns[i].nullable {
                            change.def.columns[i].nullable = false;
                            change.validate = true;
                        }
                    }
                    ast::AlterColumnOperation::DropNotNull => {
                        if change.def.primary_key.contains(&i) {
                            return Err(SqlError::new(
                                ErrorKind::InvalidPrimaryKey,
                                format!(
                                    "column \"{}\" is in a primary key",
                                    change.def.columns[i].name
                                ),
                            ));
                        }
                        change.def.columns[i].nullable = true;
                    }
                    ast::AlterColumnOperation::SetDefault { value } => {
                        let ty = change.def.columns[i].ty;
                        let bound = self.expr(value, &Scope::default(), Some(ty))?;
                        change.def.columns[i].default = Some(self.assign(bound, ty)?);
                        change.def.columns[i].default_sql =
                            Some(self.default_text(change.def.columns[i].default.as_ref(), value));
                    }
                    ast::AlterColumnOperation::DropDefault => {
                        change.def.columns[i].default = None;
                        change.def.columns[i].default_sql = None;
                    }
                    ast::AlterColumnOperation::SetDataType {
                        data_type, using, ..
                    } => {
                        if let Some(fk) = self.catalog.foreign_key_using(&change.def, &name) {
                            return Err(SqlError::feature_not_supported(format!(
                                "changing the type of column \"{name}\", which foreign key \"{}\" uses",
                                fk.name
                            )));
                        }
                        self.refuse_if_derived_index_uses(&change.def, i, "changing the type of")?;
                        self.set_data_type(change, i, data_type, using.as_ref())?
                    }
                }
                Ok(())
            }
            Op::AddConstraint {
                constraint: ast::TableConstraint::Check(check),
                ..
            } => {
                let name = check.name.as_ref().map(ident);
                self.add_check(change, name, &check.expr)
            }
            // A foreign key's is its own plan (`alter_foreign_keys`).
            Op::DropConstraint {
                name, if_exists, ..
            } => drop_constraint(change, &ident(name), *if_exists),
            other => Err(SqlError::feature_not_supported(format!(
                "ALTER TABLE {}",
                other.to_string().chars().take(50).collect::<String>()
            ))),
        }
    }

    /// ADD COLUMN: appended; existing rows get its default (evaluated once, as PostgreSQL
    /// does for a non-volatile default) or NULL.
    fn add_column(&mut self, change: &mut TableChange, c: &ast::ColumnDef) -> SqlResult<()> {
        let generated = c
            .options
            .iter()
            .any(|o| matches!(o.option, ast::ColumnOption::Generated { .. }));
        if crate::bind_sequence::serial_type(&c.data_type).is_some() || generated {
            return Err(SqlError::feature_not_supported(
                "SERIAL or identity columns added by ALTER TABLE",
            ));
        }
        let ty = self.resolve_type(&c.data_type)?;
        crate::bind_ddl::storable_column_type(ty)?;
        let mut def = ColumnDef {
            name: ident(&c.name),
            ty,
            nullable: true,
            default: None,
            default_sql: None,
        };
        let mut checks = Vec::new();
        let mut unique = None;
        for option in &c.options {
            if self.nullability_or_default(&mut def, &option.option)? {
                continue;
            }
            match &option.option {
                ast::ColumnOption::Check(check) => {
                    checks.push((option.name.as_ref().map(ident), (*check.expr).clone()))
                }
                // Its index is made when the change applies (id 0 until then).
                ast::ColumnOption::Unique(_) => {
                    let name = option.name.as_ref().map(ident);
                    unique = Some(
                        name.unwrap_or_else(|| format!("{}_{}_key", change.def.name, def.name)),
                    );
                }
                other => {
                    return Err(SqlError::feature_not_supported(format!(
                        "ADD COLUMN with {other} (add the column, then the constraint or index)"
                    )))
                }
            }
        }
        let mut calls_sequences = false;
        if let Some(default) = &def.default {
            default.visit(&mut |e| {
                if let Expr::Function { func, .. } = e {
                    calls_sequences |= func.uses_sequences();
                }
            });
        }
        if calls_sequences {
            return Err(SqlError::feature_not_supported(
                "ADD COLUMN with a default that calls a sequence function (add the column, then SET DEFAULT)",
            ));
        }
        if !def.nullable {
            change.validate = true;
        }
        let fill = def
            .default
            .clone()
            .unwrap_or(Expr::Literal(Value::Null, ty));
        change.def.columns.push(def);
        change.sources.push(ColumnSource::Value(fill));
        if let Some(name) = unique {
            change.def.indexes.push(IndexDef {
                id: 0,
                name,
                columns: vec![change.def.columns.len() - 1],
                unique: true,
                storage: String::new(),
            });
        }
        for (name, e) in checks {
            self.add_check(change, name, &e)?;
        }
        Ok(())
    }

    /// ALTER COLUMN ... TYPE: every row's value cast (or computed by `USING`, over the old
    /// row) to the new type. Not yet for a column a key, an index or a CHECK uses, whose
    /// stored entries or bound expressions depend on the old type.
    fn set_data_type(
        &mut self,
        change: &mut TableChange,
        i: usize,
        data_type: &ast::DataType,
        using: Option<&ast::Expr>,
    ) -> SqlResult<()> {
        let ty = self.resolve_type(data_type)?;
        crate::bind_ddl::storable_column_type(ty)?;
        let name = change.def.columns[i].name.clone();
        let old_ty = change.def.columns[i].ty;
        // The type it has: nothing to convert (as in PostgreSQL, no rewrite).
        if ty == old_ty && using.is_none() && matches!(change.sources[i], ColumnSource::Old(_)) {
            return Ok(());
        }
        let in_key = change.def.primary_key.contains(&i)
            || change.def.indexes.iter().any(|x| x.columns.contains(&i));
        // Between integer types, or between text and varchar of any length, a value that
        // converts stays the same value: its key and index entries stay valid (Django
        // widens keys and varchar columns this way).
        let same_values = using.is_none()
            && ((old_ty.is_integer() && ty.is_integer() && old_ty != DataType::Oid)
                || (matches!(old_ty, DataType::Text | DataType::Varchar(_))
                    && matches!(ty, DataType::Text | DataType::Varchar(_))));
        if !same_values && (in_key || change.def.checks.iter().any(|c| uses_column(&c.expr, i))) {
            return Err(SqlError::feature_not_supported(format!(
                "changing the type of column \"{name}\", which a key, an index or a CHECK uses"
            )));
        }
        let source = match (&change.sources[i], using) {
            // USING sees the row as it is stored: only columns that were there before.
            (_, Some(e)) => {
                if !change.rows_unchanged() {
                    return Err(SqlError::feature_not_supported(
                        "USING together with other column changes in one ALTER TABLE",
                    ));
                }
                let table_name = change.def.name.clone();
                let scope = Scope {
                    columns: table_scope(&change.def, &table_name),
                    outer_len: 0,
                };
                let bound = self.expr(e, &scope, Some(ty))?;
                ColumnSource::Convert(bound.cast_to(ty))
            }
            (ColumnSource::Old(j), None) => {
                ColumnSource::Convert(Expr::Column(*j, old_ty).cast_to(ty))
            }
            (ColumnSource::Value(v), None) => ColumnSource::Value(v.clone().cast_to(ty)),
            (ColumnSource::Convert(v), None) => ColumnSource::Convert(v.clone().cast_to(ty)),
        };
        if let Some(default) = change.def.columns[i].default.take() {
            change.def.columns[i].default = Some(default.cast_to(ty));
        }
        change.def.columns[i].ty = ty;
        change.sources[i] = source;
        Ok(())
    }

    fn add_check(
        &mut self,
        change: &mut TableChange,
        name: Option<String>,
        e: &ast::Expr,
    ) -> SqlResult<()> {
        let table_name = change.def.name.clone();
        let check = self.bind_check(&change.def, name, e, &format!("{table_name}_check"))?;
        if change.def.checks.iter().any(|c| c.name == check.name) {
            return Err(SqlError::new(
                ErrorKind::DuplicateObject,
                format!(
                    "constraint \"{}\" for relation \"{table_name}\" already exists",
                    check.name
                ),
            ));
        }
        change.def.checks.push(check);
        change.validate = true;
        Ok(())
    }
}
