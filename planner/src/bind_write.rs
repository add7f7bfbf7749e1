//! Binding INSERT, UPDATE and DELETE (with ON CONFLICT and RETURNING).

use std::sync::Arc;

use plan::*;
use sql::ast;
use sql::{DataType, ErrorKind, NodeId, SqlError, SqlResult, Value, ValueRows};

use crate::bind::*;
use crate::bind_expr::*;
use crate::scope::Scope;

impl Binder<'_> {
    pub(crate) fn returning(
        &mut self,
        items: &Option<Vec<ast::SelectItem>>,
        scope: &Scope,
    ) -> SqlResult<(Option<Vec<Expr>>, Vec<OutputColumn>)> {
        let Some(items) = items else {
            return Ok((None, Vec::new()));
        };
        let mut exprs = Vec::new();
        let mut columns = Vec::new();
        for item in items {
            match item {
                ast::SelectItem::UnnamedExpr(e)
                | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                    let name = match item {
                        ast::SelectItem::ExprWithAlias { alias, .. } => ident(alias),
                        _ => output_name(e),
                    };
                    let bound = self.expr(e, scope, None)?;
                    let ty = if bound.ty() == DataType::Unknown {
                        DataType::Text
                    } else {
                        bound.ty()
                    };
                    columns.push(OutputColumn {
                        name,
                        ty,
                        table_oid: 0,
                        column_number: 0,
                    });
                    exprs.push(bound);
                }
                ast::SelectItem::Wildcard(_) => {
                    for i in scope.wildcard(None)? {
                        let c = &scope.columns[i];
                        columns.push(OutputColumn {
                            name: c.name.clone(),
                            ty: c.ty,
                            table_oid: c.table_oid,
                            column_number: c.column_number,
                        });
                        exprs.push(Expr::Column(i, c.ty));
                    }
                }
                _ => return Err(SqlError::feature_not_supported("this RETURNING item")),
            }
        }
        Ok((Some(exprs), columns))
    }

    /// `rows`: the VALUES rows when the row reader read them (`sql::Parsed::InsertValues`);
    /// `insert` then holds one placeholder row in their place.
    pub(crate) fn insert(
        &mut self,
        insert: &ast::Insert,
        rows: Option<&ValueRows>,
    ) -> SqlResult<Plan> {
        let ast::TableObject::TableName(name) = &insert.table else {
            return Err(SqlError::feature_not_supported(
                "INSERT into a table function",
            ));
        };
        let (_, table_name) = object_name(name)?;
        let table = self.user_table(&table_name)?;
        let alias = insert
            .table_alias
            .as_ref()
            .map(|a| ident(&a.alias))
            .unwrap_or_else(|| table.name.clone());
        // `INSERT INTO t DEFAULT VALUES` has no source: one row of defaults.
        let source_query = insert.source.as_deref();
        if source_query.is_none() && !insert.columns.is_empty() {
            return Err(SqlError::syntax(
                "INSERT ... DEFAULT VALUES takes no column list",
            ));
        }
        // Without a column list, the values fill the leading columns (PostgreSQL allows
        // fewer values than columns; the rest get their defaults).
        let implicit_width = match source_query.map(|q| q.body.as_ref()) {
            None => Some(0),
            Some(ast::SetExpr::Values(v)) => match rows {
                Some(rows) => (!rows.is_empty()).then(|| rows.row(0).len()),
                None => v.rows.first().map(|r| r.content.len()),
            },
            _ => None,
        };
        let mut target_columns: Vec<usize> = if insert.columns.is_empty() {
            (0..implicit_width
                .unwrap_or(usize::MAX)
                .min(table.columns.len()))
                .collect()
        } else {
            let mut cols = Vec::new();
            for c in &insert.columns {
                let (_, n) = object_name(c)?;
                let i = table.column_index(&n).ok_or_else(|| {
                    SqlError::undefined_column(&format!("{n}\" of relation \"{}", table.name))
                })?;
                if cols.contains(&i) {
                    return Err(SqlError::new(
                        ErrorKind::DuplicateColumn,
                        format!("column \"{n}\" specified more than once"),
                    ));
                }
                cols.push(i);
            }
            cols
        };
        let empty = Scope::default();
        let source = match source_query.map(|q| (q, q.body.as_ref())) {
            None => InsertSource::Values(vec![Vec::new()]),
            Some((source_query, ast::SetExpr::Values(values)))
                if source_query.order_by.is_none() && source_query.limit_clause.is_none() =>
            {
                let count = rows.map_or(values.rows.len(), ValueRows::len);
                let mut bound = Vec::with_capacity(count);
                for i in 0..count {
                    let width = match rows {
                        Some(rows) => rows.row(i).len(),
                        None => values.rows[i].content.len(),
                    };
                    if width > target_columns.len() {
                        return Err(SqlError::syntax(
                            "INSERT has more expressions than target columns",
                        ));
                    }
                    if width < target_columns.len() {
                        return Err(SqlError::syntax(
                            "INSERT has more target columns than expressions",
                        ));
                    }
                    bound.push(match rows {
                        Some(rows) => self.read_row(&table, &target_columns, rows, rows.row(i))?,
                        None => {
                            let values: Vec<&ast::Expr> = values.rows[i].content.iter().collect();
                            self.values_row(&table, &target_columns, &values)?
                        }
                    });
                }
                InsertSource::Values(bound)
            }
            Some((source_query, _)) => {
                let plan = self.query(source_query, &empty)?;
                if insert.columns.is_empty() && plan.columns.len() < target_columns.len() {
                    target_columns.truncate(plan.columns.len());
                }
                if plan.columns.len() != target_columns.len() {
                    return Err(SqlError::syntax(
                        "INSERT has more target columns than expressions",
                    ));
                }
                InsertSource::Query(Box::new(plan.rel))
            }
        };
        let scope = Scope {
            columns: table_scope(&table, &alias),
            outer_len: 0,
        };
        let on_conflict = match &insert.on {
            None => None,
            Some(ast::OnInsert::OnConflict(c)) => {
                let action = match &c.action {
                    ast::OnConflictAction::DoNothing => OnConflict::DoNothing,
                    ast::OnConflictAction::DoUpdate(update) => {
                        let mut both = scope.clone();
                        let mut excluded = table_scope(&table, "excluded");
                        both.columns.append(&mut excluded);
                        let assignments = self.assignments(&table, &update.assignments, &both)?;
                        let filter = match &update.selection {
                            Some(w) => Some(self.expr(w, &both, Some(DataType::Bool))?),
                            None => None,
                        };
                        OnConflict::DoUpdate {
                            assignments,
                            filter,
                        }
                    }
                };
                let arbiter = conflict_arbiter(&table, c.conflict_target.as_ref(), &action)?;
                Some(OnConflict::new(arbiter, action))
            }
            Some(_) => return Err(SqlError::feature_not_supported("ON DUPLICATE KEY")),
        };
        plan::check_insert(
            &table,
            &target_columns,
            on_conflict.as_ref().and_then(OnConflict::update).is_some(),
        )?;
        let source = self.apply_overriding(&table, &target_columns, source)?;
        let (returning, columns) = self.returning(&insert.returning, &scope)?;
        let plan = WritePlan::Insert(InsertPlan {
            table: table.reference(),
            source,
            target_columns,
            on_conflict,
            returning,
            call: false,
        });
        Ok(Plan::Write(Arc::new(plan), columns))
    }

    /// What an INSERT gives identity columns: only `DEFAULT` to GENERATED ALWAYS ones,
    /// unless `OVERRIDING SYSTEM VALUE`; with `OVERRIDING USER VALUE` the values given to
    /// identity columns are replaced by their defaults.
    fn apply_overriding(
        &self,
        table: &TableDef,
        target_columns: &[usize],
        mut source: InsertSource,
    ) -> SqlResult<InsertSource> {
        for (position, &column) in target_columns.iter().enumerate() {
            let name = &table.columns[column].name;
            let identity = self.catalog.identity_of(table.id, name);
            match (identity, self.overriding) {
                (None, _) | (Some(_), Some(sql::Overriding::System)) => continue,
                (Some(_), Some(sql::Overriding::User)) => {
                    let InsertSource::Values(rows) = &mut source else {
                        return Err(SqlError::feature_not_supported(
                            "OVERRIDING USER VALUE with a query as the source",
                        ));
                    };
                    for row in rows {
                        row[position] =
                            Expr::Literal(Value::Text(DEFAULT_MARKER.into()), DataType::Unknown);
                    }
                    continue;
                }
                (Some(Identity::ByDefault), None) => continue,
                (Some(Identity::Always), None) => {}
            }
            let all_default = match &source {
                InsertSource::Values(rows) => rows.iter().all(|row| {
                    matches!(&row[position], Expr::Literal(Value::Text(t), _) if t == DEFAULT_MARKER)
                }),
                _ => false,
            };
            if !all_default {
                return Err(generated_always(
                    name,
                    format!("cannot insert a non-DEFAULT value into column \"{name}\""),
                ));
            }
        }
        Ok(source)
    }

    /// One VALUES row of an INSERT, each value bound to its target column's type (`DEFAULT`
    /// becomes the marker the executor fills in).
    pub(crate) fn values_row(
        &mut self,
        table: &TableDef,
        target_columns: &[usize],
        values: &[&ast::Expr],
    ) -> SqlResult<Vec<Expr>> {
        let mut bound = Vec::with_capacity(values.len());
        for (e, col) in values.iter().zip(target_columns) {
            let ty = table.columns[*col].ty;
            let is_default = matches!(e, ast::Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"));
            if is_default {
                bound.push(Expr::Literal(
                    Value::Text(DEFAULT_MARKER.into()),
                    DataType::Unknown,
                ));
                continue;
            }
            let b = self.expr(e, &Scope::default(), Some(ty))?;
            bound.push(self.row_column(b, ty)?);
        }
        Ok(bound)
    }

    /// One row the row reader read, bound as `values_row` binds the same row's tree (the
    /// grammar has no `DEFAULT`).
    fn read_row(
        &mut self,
        table: &TableDef,
        target_columns: &[usize],
        rows: &ValueRows,
        values: &[NodeId],
    ) -> SqlResult<Vec<Expr>> {
        let mut bound = Vec::with_capacity(values.len());
        for (id, col) in values.iter().zip(target_columns) {
            let ty = table.columns[*col].ty;
            if let Some(literal) = integer_literal(rows, *id, ty) {
                bound.push(literal);
                continue;
            }
            let b = self.row_value(rows, *id, Some(ty))?;
            bound.push(self.row_column(b, ty)?);
        }
        Ok(bound)
    }

    /// A bound row value as its column's value.
    fn row_column(&mut self, value: Expr, ty: DataType) -> SqlResult<Expr> {
        // A constant row value is computed once here, not by the executor for every
        // replica and replay (a bulk INSERT's generated ids, say).
        Ok(self.assign(value, ty)?.folded())
    }

    pub(crate) fn assignments(
        &mut self,
        table: &TableDef,
        assignments: &[ast::Assignment],
        scope: &Scope,
    ) -> SqlResult<Vec<(usize, Expr)>> {
        let mut out: Vec<(usize, Expr)> = Vec::new();
        for a in assignments {
            let ast::AssignmentTarget::ColumnName(name) = &a.target else {
                return Err(SqlError::feature_not_supported("tuple assignment"));
            };
            let (_, column) = object_name(name)?;
            let i = table.column_index(&column).ok_or_else(|| {
                SqlError::undefined_column(&format!("{column}\" of relation \"{}", table.name))
            })?;
            if out.iter().any(|(c, _)| *c == i) {
                return Err(SqlError::new(
                    ErrorKind::DuplicateColumn,
                    format!("multiple assignments to same column \"{column}\""),
                ));
            }
            let ty = table.columns[i].ty;
            let is_default = matches!(&a.value, ast::Expr::Identifier(id) if id.quote_style.is_none() && id.value.eq_ignore_ascii_case("default"));
            if !is_default && self.catalog.identity_of(table.id, &column) == Some(Identity::Always)
            {
                return Err(generated_always(
                    &column,
                    format!("column \"{column}\" can only be updated to DEFAULT"),
                ));
            }
            let bound = if is_default {
                match &table.columns[i].default {
                    Some(d) => d.clone(),
                    None => Expr::Literal(Value::Null, ty),
                }
            } else {
                let b = self.expr(&a.value, scope, Some(ty))?;
                self.assign(b, ty)?
            };
            out.push((i, bound));
        }
        Ok(out)
    }

    pub(crate) fn single_table(
        &mut self,
        twj: &ast::TableWithJoins,
    ) -> SqlResult<(Arc<TableDef>, String)> {
        if !twj.joins.is_empty() {
            return Err(SqlError::feature_not_supported("joins in UPDATE or DELETE"));
        }
        match &twj.relation {
            ast::TableFactor::Table { name, alias, .. } => {
                let (_, table_name) = object_name(name)?;
                let table = self.user_table(&table_name)?;
                let alias = alias
                    .as_ref()
                    .map(|a| ident(&a.name))
                    .unwrap_or_else(|| table.name.clone());
                Ok((table, alias))
            }
            _ => Err(SqlError::feature_not_supported(
                "UPDATE or DELETE of a subquery",
            )),
        }
    }

    pub(crate) fn update(&mut self, update: &ast::Update) -> SqlResult<Plan> {
        let (table, alias) = self.single_table(&update.table)?;
        let scope = Scope {
            columns: table_scope(&table, &alias),
            outer_len: 0,
        };
        let (set, selection) = match &update.from {
            None => (update.assignments.clone(), update.selection.clone()),
            Some(
                ast::UpdateTableFromKind::AfterSet(from)
                | ast::UpdateTableFromKind::BeforeSet(from),
            ) => {
                let values: Vec<&ast::Expr> = update.assignments.iter().map(|a| &a.value).collect();
                let joined = JoinedWrite::new(&table, &alias, from, update.selection.as_ref());
                self.check_joined_names(&joined, &values)?;
                let set = update
                    .assignments
                    .iter()
                    .map(|a| {
                        Ok(ast::Assignment {
                            target: a.target.clone(),
                            value: joined.first_match(&a.value)?,
                        })
                    })
                    .collect::<SqlResult<_>>()?;
                (set, Some(joined.any_match()?))
            }
        };
        let assignments = self.assignments(&table, &set, &scope)?;
        let assigned: Vec<usize> = assignments.iter().map(|(c, _)| *c).collect();
        plan::check_update(&table, &assigned)?;
        let (filter, access) = self.where_clause(&table, selection.as_ref(), &scope)?;
        let (returning, columns) = self.returning(&update.returning, &scope)?;
        let plan = WritePlan::Update(UpdatePlan {
            table: table.reference(),
            access,
            filter,
            assignments,
            returning,
        });
        Ok(Plan::Write(Arc::new(plan), columns))
    }

    /// An UPDATE's or DELETE's WHERE, bound, and the access path it allows.
    fn where_clause(
        &mut self,
        table: &TableDef,
        selection: Option<&ast::Expr>,
        scope: &Scope,
    ) -> SqlResult<(Option<Expr>, Access)> {
        let filter = match selection {
            Some(w) => Some(crate::null_folding::where_condition(self.expr(
                w,
                scope,
                Some(DataType::Bool),
            )?)),
            None => None,
        };
        let access = choose_access(table, &self.catalog.index_derivations, filter.as_ref(), 0);
        Ok((filter, access))
    }

    pub(crate) fn delete(&mut self, delete: &ast::Delete) -> SqlResult<Plan> {
        let from = match &delete.from {
            ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
        };
        if from.len() != 1 {
            return Err(SqlError::feature_not_supported(
                "DELETE from several tables",
            ));
        }
        let (table, alias) = self.single_table(&from[0])?;
        plan::check_remove(&table)?;
        let scope = Scope {
            columns: table_scope(&table, &alias),
            outer_len: 0,
        };
        let selection = match &delete.using {
            None => delete.selection.clone(),
            Some(using) => {
                let joined = JoinedWrite::new(&table, &alias, using, delete.selection.as_ref());
                self.check_joined_names(&joined, &[])?;
                Some(joined.any_match()?)
            }
        };
        let (filter, access) = self.where_clause(&table, selection.as_ref(), &scope)?;
        let (returning, columns) = self.returning(&delete.returning, &scope)?;
        let plan = WritePlan::Delete(DeletePlan {
            table: table.reference(),
            access,
            filter,
            returning,
        });
        Ok(Plan::Write(Arc::new(plan), columns))
    }

    /// PostgreSQL resolves the names of an UPDATE ... FROM or DELETE ... USING over the
    /// target joined with the other tables: a name both have is ambiguous, one neither has
    /// unknown. The rewrite into subqueries would prefer the other tables' column instead,
    /// so the statement is bound once as that join first, and only for its errors.
    fn check_joined_names(&mut self, joined: &JoinedWrite, values: &[&ast::Expr]) -> SqlResult<()> {
        let mut items: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        items.push(
            joined
                .selection
                .as_ref()
                .map_or_else(|| "true".to_string(), |w| w.to_string()),
        );
        let text = format!(
            "SELECT {} FROM {} AS {}, {}",
            items.join(", "),
            quoted(&joined.table),
            quoted(&joined.alias),
            joined.from
        );
        let query = parse_query(&text)?;
        self.query(&query, &Scope::default()).map(|_| ())
    }

    // ----- schema -----
}

/// An UPDATE with FROM or a DELETE with USING, rewritten over the target's row: a value
/// comes from the first joined row that passes the WHERE (PostgreSQL takes an unspecified
/// one), and a row is written when any does. Each becomes a correlated subquery, evaluated
/// per target row (a nested loop).
struct JoinedWrite {
    table: String,
    alias: String,
    from: String,
    selection: Option<ast::Expr>,
}

impl JoinedWrite {
    fn new(
        table: &TableDef,
        alias: &str,
        from: &[ast::TableWithJoins],
        selection: Option<&ast::Expr>,
    ) -> JoinedWrite {
        JoinedWrite {
            table: table.name.clone(),
            alias: alias.to_string(),
            from: from
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            selection: selection.cloned(),
        }
    }

    fn where_text(&self) -> String {
        self.selection
            .as_ref()
            .map(|w| format!(" WHERE {w}"))
            .unwrap_or_default()
    }

    /// `(SELECT value FROM ... WHERE ... LIMIT 1)`.
    fn first_match(&self, value: &ast::Expr) -> SqlResult<ast::Expr> {
        let text = format!(
            "SELECT {value} FROM {}{} LIMIT 1",
            self.from,
            self.where_text()
        );
        Ok(ast::Expr::Subquery(parse_query(&text)?))
    }

    /// `EXISTS (SELECT 1 FROM ... WHERE ...)`.
    fn any_match(&self) -> SqlResult<ast::Expr> {
        let text = format!("SELECT 1 FROM {}{}", self.from, self.where_text());
        Ok(ast::Expr::Exists {
            subquery: parse_query(&text)?,
            negated: false,
        })
    }
}

fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// 428C9, for a value given to a GENERATED ALWAYS identity column.
fn generated_always(column: &str, message: String) -> SqlError {
    SqlError::new(ErrorKind::GeneratedAlways, message).with_detail(format!(
        "Column \"{column}\" is an identity column defined as GENERATED ALWAYS."
    ))
}

/// The arbiter of an ON CONFLICT clause, as PostgreSQL infers it: the primary key or the
/// unique index whose columns are the target's (in any order), or the constraint named; with
/// no target, DO NOTHING arbitrates on every unique constraint and DO UPDATE is refused.
fn conflict_arbiter(
    table: &TableDef,
    target: Option<&ast::ConflictTarget>,
    action: &OnConflict,
) -> SqlResult<ConflictArbiter> {
    let plain_unique = |index: &&IndexDef| index.unique && !index.is_derived();
    let no_match = || {
        SqlError::new(
            ErrorKind::InvalidColumnReference,
            "there is no unique or exclusion constraint matching the ON CONFLICT specification",
        )
    };
    let arbiter = match target {
        None if matches!(action, OnConflict::DoUpdate { .. }) => {
            return Err(SqlError::syntax(
                "ON CONFLICT DO UPDATE requires inference specification or constraint name",
            ))
        }
        // Without a unique index, "every unique constraint" is the primary key alone.
        None if table.indexes.iter().any(|i| i.unique) => ConflictArbiter::Any,
        None => ConflictArbiter::PrimaryKey,
        Some(ast::ConflictTarget::Columns(columns)) => {
            let mut named: Vec<usize> = columns
                .iter()
                .map(|c| {
                    let name = ident(c);
                    table
                        .column_index(&name)
                        .ok_or_else(|| SqlError::undefined_column(&name))
                })
                .collect::<SqlResult<_>>()?;
            named.sort_unstable();
            named.dedup();
            match plan::unique_key_on(table, &named) {
                Some(UniqueKey::PrimaryKey) => ConflictArbiter::PrimaryKey,
                Some(UniqueKey::Index(index)) => ConflictArbiter::Index(index.id),
                None if table
                    .indexes
                    .iter()
                    .any(|i| i.unique && plan::same_columns(&i.columns, &named)) =>
                {
                    return Err(SqlError::feature_not_supported(
                        "ON CONFLICT on a partial or expression unique index",
                    ))
                }
                None => return Err(no_match()),
            }
        }
        Some(ast::ConflictTarget::OnConstraint(name)) => {
            let (_, name) = object_name(name)?;
            match table.indexes.iter().find(|i| i.name == name) {
                _ if table.has_primary_key() && name == table.key_name() => {
                    ConflictArbiter::PrimaryKey
                }
                Some(index) if plain_unique(&index) => ConflictArbiter::Index(index.id),
                Some(index) if index.unique => {
                    return Err(SqlError::feature_not_supported(
                        "ON CONFLICT on a partial or expression unique index",
                    ))
                }
                _ => {
                    return Err(SqlError::new(
                        ErrorKind::UndefinedObject,
                        format!(
                            "constraint \"{name}\" for table \"{}\" does not exist",
                            table.name
                        ),
                    ))
                }
            }
        }
    };
    if table.ledger.is_some() && arbiter != ConflictArbiter::PrimaryKey {
        return Err(SqlError::feature_not_supported(format!(
            "ON CONFLICT on another constraint than the primary key of \"{}\"",
            table.name
        )));
    }
    Ok(arbiter)
}

/// An integer literal (`42`, `-7`) for an integer column or a NUMERIC one that holds every
/// bigint (a ledger amount), bound at once to what binding it as an expression, assigning
/// it to the column and folding would give: the bulk-load form's commonest value without an
/// expression tree built and evaluated for it. None for anything else, or a value outside
/// the column's range (binding reports those).
fn integer_literal(rows: &ValueRows, id: NodeId, ty: DataType) -> Option<Expr> {
    integer_literal_value(rows, id, ty).map(|v| Expr::Literal(v, ty))
}

#[cfg(test)]
mod tests {
    use sql::{Parsed, ParsedStatement};

    use crate::bind::{bind, catalog_with_table};
    use plan::Catalog;

    fn catalog() -> Catalog {
        catalog_with_table(
            &Catalog::default(),
            "CREATE TABLE t (i INT PRIMARY KEY, b BIGINT, s SMALLINT, n NUMERIC, \
             m NUMERIC(10, 2), f DOUBLE PRECISION, x TEXT, v VARCHAR(3), ok BOOLEAN, \
             at TIMESTAMPTZ, d DATE)",
        )
        .unwrap()
    }

    fn one(text: &str) -> ParsedStatement {
        let mut parsed = sql::parse(text).unwrap();
        assert_eq!(parsed.len(), 1, "{text}");
        parsed.remove(0)
    }

    /// The row reader's rows bind to exactly the plan (or the error) sqlparser's tree binds to.
    #[test]
    fn read_rows_bind_as_parsed_rows() {
        let catalog = catalog();
        let cases = [
            "INSERT INTO t (i) VALUES (1), (2), (-3), (+4), (- -5)",
            "INSERT INTO t (i, b, s) VALUES (2147483647, 9223372036854775807, 32767)",
            "INSERT INTO t (i, b) VALUES (-2147483648, -9223372036854775808)",
            "INSERT INTO t (i, b) VALUES (-(2147483648), 9223372036854775808)",
            "INSERT INTO t (i, b) VALUES (2147483648, 1)",
            "INSERT INTO t (i, s) VALUES (1, 32768)",
            "INSERT INTO t (i, s, b) VALUES (-0, -32768, 007), (1, -32769, -9223372036854775809)",
            "INSERT INTO t (i, n, f) VALUES (1, 12, -3), (2, -0, 4)",
            "INSERT INTO t (i, b, n, m, f) VALUES (1, 4000000000 * 1000 + 7, 1.5 * 3, 2.345, 1 / 3)",
            "INSERT INTO t (i, b) VALUES (1 + 2 * 3 - 4 / 5 % 6, 2 + (4000000000 * 7919 + 1) % 100000)",
            "INSERT INTO t (i, b) VALUES (1 / 0, 1), (2147483647 + 1, 2)",
            "INSERT INTO t (i, n) VALUES (1, 123456789012345678901234567890 * 10)",
            "INSERT INTO t (i, x, v, ok) VALUES (1, 'it''s', 'abc', true), (2, '', NULL, FALSE)",
            "INSERT INTO t (i, v) VALUES (1, 'abcd')",
            "INSERT INTO t (i, x) VALUES (1, 2)",
            "INSERT INTO t (i, ok) VALUES (1, 1)",
            "INSERT INTO t (i, ok) VALUES (1, 't'), (2, 'no')",
            "INSERT INTO t (i) VALUES ('12'), ('x')",
            "INSERT INTO t (i, at, d) VALUES (1, '2026-11-22 10:00:00+00', '2026-11-22')",
            "INSERT INTO t (i, at) VALUES (1, 'yesterday-ish')",
            "INSERT INTO t (i, x) VALUES (1, 'a' + 1)",
            "INSERT INTO t (i, b, x) VALUES ($1, $2 * 2, $3), ($4, -$2, NULL)",
            "INSERT INTO t (i, n) VALUES ($1 + $2, $2)",
            "INSERT INTO t (i, b, n) VALUES ($1, -2147483648 + $2, -(5) * $3 - -2.5)",
            "INSERT INTO t (i, b) VALUES ($1, (($2)) % -(7 + 1))",
            "INSERT INTO t (i) VALUES ($0)",
            "INSERT INTO t (i) VALUES (NULL + 1)",
            "INSERT INTO t VALUES (1, 2, 3)",
            "INSERT INTO t (i, b) VALUES (1, 2), (3)",
            "INSERT INTO t (i) VALUES (1, 2)",
            "INSERT INTO t (i) VALUES (1) ON CONFLICT (i) DO UPDATE SET b = 2 RETURNING i, b",
            "INSERT INTO nope VALUES (1)",
            "INSERT INTO t (nope) VALUES (1)",
        ];
        for text in cases {
            let fast = one(text);
            assert!(
                matches!(fast.parsed, Parsed::InsertValues { .. }),
                "not read by the row reader: {text}"
            );
            // The row reader does not take a statement that opens with a comment.
            let slow = one(&format!("/* */ {text}"));
            assert!(matches!(slow.parsed, Parsed::Statement(_)), "{text}");
            let fast = format!("{:?}", bind(&catalog, &fast, &[]));
            let slow = format!("{:?}", bind(&catalog, &slow, &[]));
            assert_eq!(fast, slow, "{text}");
        }
    }
}
