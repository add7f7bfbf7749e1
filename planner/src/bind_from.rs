//! Binding FROM: tables, views, subqueries, common table expressions, LATERAL, joins, and
//! the set-returning functions (`generate_series`, `unnest`, the JSON ones) as relations.

use plan::*;
use sql::ast;
use sql::{DataType, ErrorKind, SqlError, SqlResult};

use crate::bind::*;
use crate::bind_expr::*;
use crate::bind_query::*;
use crate::scope::{Scope, ScopeColumn};

impl Binder<'_> {
    pub(crate) fn table_function(
        &mut self,
        name: &ast::ObjectName,
        args: &[ast::FunctionArg],
        alias: &Option<ast::TableAlias>,
        outer: &Scope,
    ) -> SqlResult<FromItem> {
        let (_, function) = object_name(name)?;
        if function == "unnest" {
            let arrays: Vec<&ast::Expr> = args
                .iter()
                .map(|a| match a {
                    ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Ok(e),
                    _ => Err(SqlError::feature_not_supported(
                        "this argument form in unnest()",
                    )),
                })
                .collect::<SqlResult<_>>()?;
            return self.unnest(&arrays, alias, outer);
        }
        // The arguments may read the enclosing query's columns (lateral).
        let scope = outer.nested();
        if let Some(item) = self.json_table_function(&function, args, alias, &scope) {
            return item;
        }
        if function == "pg_partition_ancestors" {
            // No table here is a partition: the one ancestor is the relation itself.
            let [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e))] = args else {
                return Err(SqlError::new(
                    ErrorKind::UndefinedFunction,
                    "function pg_partition_ancestors takes one argument",
                ));
            };
            let relation = self.expr(e, &scope, Some(DataType::Oid))?;
            let array = Expr::Function {
                func: Func::MakeArray,
                args: vec![relation],
                ty: DataType::Int4Array,
            };
            let cols = function_column(alias, "pg_partition_ancestors", DataType::Oid);
            return Ok((Rel::Unnest { array }, cols, false, false));
        }
        if function != "generate_series" {
            return Err(SqlError::new(
                ErrorKind::UndefinedFunction,
                format!("function {function}() does not exist"),
            ));
        }
        let mut exprs = Vec::new();
        for a in args {
            match a {
                ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => exprs.push(e),
                _ => {
                    return Err(SqlError::feature_not_supported(
                        "this argument form in generate_series()",
                    ))
                }
            }
        }
        if !(2..=3).contains(&exprs.len()) {
            return Err(SqlError::new(
                ErrorKind::UndefinedFunction,
                "function generate_series takes 2 or 3 arguments",
            ));
        }
        // Over times when the start is one: timestamps, or timestamptz (also for dates and
        // untyped literals next to a time, as PostgreSQL resolves them).
        let first = self.expr(exprs[0], &scope, None)?;
        let second = self.expr(exprs[1], &scope, None)?;
        let temporal = |t: DataType| {
            matches!(
                t,
                DataType::Timestamp | DataType::TimestampTz | DataType::Date
            )
        };
        if temporal(first.ty()) || temporal(second.ty()) {
            let ty = match (first.ty(), second.ty()) {
                (DataType::Timestamp, DataType::Timestamp | DataType::Unknown)
                | (DataType::Unknown, DataType::Timestamp) => DataType::Timestamp,
                _ => DataType::TimestampTz,
            };
            let [_, _, step] = exprs.as_slice() else {
                return Err(SqlError::new(
                    ErrorKind::UndefinedFunction,
                    format!(
                        "function generate_series({0}, {0}) does not exist",
                        ty.pg_name()
                    ),
                ));
            };
            let step = self.expr(step, &scope, Some(DataType::Interval))?;
            let step = self.coerce(step, DataType::Interval)?;
            if step.ty() != DataType::Interval {
                return Err(SqlError::new(
                    ErrorKind::UndefinedFunction,
                    format!(
                        "function generate_series({0}, {0}, {1}) does not exist",
                        ty.pg_name(),
                        step.ty().pg_name()
                    ),
                ));
            }
            let start = self.coerce(first, ty)?.cast_to(ty);
            let stop = self.coerce(second, ty)?.cast_to(ty);
            let cols = function_column(alias, "generate_series", ty);
            let rel = Rel::Series {
                start,
                stop,
                step: Some(step),
            };
            return Ok((rel, cols, false, false));
        }
        let mut bound = vec![
            self.coerce(first, DataType::Int8)?,
            self.coerce(second, DataType::Int8)?,
        ];
        if let Some(step) = exprs.get(2) {
            bound.push(self.expr(step, &scope, Some(DataType::Int8))?);
        }
        let rank = |t: &DataType| match t {
            DataType::Int8 => 3,
            DataType::Int4 => 2,
            _ => 1,
        };
        let ty = bound
            .iter()
            .map(|b| b.ty())
            .max_by_key(rank)
            .unwrap_or(DataType::Int8);
        if !ty.is_integer() {
            return Err(SqlError::feature_not_supported(format!(
                "generate_series over {}",
                ty.pg_name()
            )));
        }
        let mut it = bound.into_iter();
        let (start, stop, step) = (
            it.next().expect("two arguments"),
            it.next().expect("two arguments"),
            it.next(),
        );
        let cols = function_column(alias, "generate_series", ty);
        Ok((Rel::Series { start, stop, step }, cols, false, false))
    }

    /// `unnest(array)` in FROM: one row per element, in order, in one column named after the
    /// alias (or `unnest`); a NULL or empty array gives no rows. Its argument may refer to
    /// the enclosing query's columns, as in psql's `\d+`.
    fn unnest(
        &mut self,
        arrays: &[&ast::Expr],
        alias: &Option<ast::TableAlias>,
        outer: &Scope,
    ) -> SqlResult<FromItem> {
        let scope = Scope {
            columns: outer.columns.clone(),
            outer_len: outer.columns.len(),
        };
        let [array] = arrays else {
            return self.unnest_together(arrays, alias, &scope);
        };
        let array = self.array_argument(array, &scope, "unnest")?;
        let element = array.ty().element().unwrap_or(DataType::Text);
        let cols = function_column(alias, "unnest", element);
        Ok((Rel::Unnest { array }, cols, false, false))
    }

    /// An array argument of set-returning function `function`.
    pub(crate) fn array_argument(
        &mut self,
        e: &ast::Expr,
        scope: &Scope,
        function: &str,
    ) -> SqlResult<Expr> {
        let array = self.expr(e, scope, None)?;
        if array.ty().element().is_none() {
            return Err(SqlError::new(
                ErrorKind::UndefinedFunction,
                format!(
                    "function {function}({}) does not exist",
                    array.ty().pg_name()
                ),
            ));
        }
        Ok(array)
    }

    /// `unnest(a, b, ...)` in FROM: as many rows as the longest array, one column per
    /// array, the shorter ones NULL past their end (Django reads `pg_index` so): the row
    /// numbers `generate_series(1, longest)` with each array subscripted by them.
    fn unnest_together(
        &mut self,
        arrays: &[&ast::Expr],
        alias: &Option<ast::TableAlias>,
        scope: &Scope,
    ) -> SqlResult<FromItem> {
        let mut bound = Vec::new();
        for a in arrays {
            bound.push(self.array_argument(a, scope, "unnest")?);
        }
        let lengths = bound.iter().map(cardinality).collect();
        let ordinal = Expr::Column(scope.outer_len, DataType::Int8);
        let qualifier = alias
            .as_ref()
            .map(|a| ident(&a.name))
            .unwrap_or_else(|| "unnest".into());
        let mut cols = Vec::new();
        let mut exprs = Vec::new();
        for (n, array) in bound.into_iter().enumerate() {
            let ty = array.ty().element().unwrap_or(DataType::Text);
            let name = alias
                .as_ref()
                .and_then(|a| a.columns.get(n).map(|c| ident(&c.name)))
                .unwrap_or_else(|| "unnest".into());
            cols.push(ScopeColumn {
                qualifier: Some(qualifier.clone()),
                name,
                ty,
                table_oid: 0,
                column_number: 0,
            });
            exprs.push(element_at(array, &ordinal));
        }
        let rel = Rel::Project {
            input: Box::new(row_numbers(lengths)),
            exprs,
        };
        Ok((rel, cols, false, false))
    }

    pub(crate) fn bind_from_item(
        &mut self,
        factor: &ast::TableFactor,
        outer: &Scope,
        left: Option<&Scope>,
    ) -> SqlResult<FromItem> {
        if let ast::TableFactor::Table {
            sample: Some(_), ..
        }
        | ast::TableFactor::Derived {
            sample: Some(_), ..
        } = factor
        {
            return Err(SqlError::feature_not_supported("TABLESAMPLE"));
        }
        match factor {
            ast::TableFactor::Table {
                name,
                alias,
                args: Some(args),
                with_ordinality: numbered,
                ..
            } => lateral_function(
                with_ordinality(
                    self.table_function(name, &args.args, alias, left.unwrap_or(outer)),
                    *numbered,
                    alias,
                ),
                left,
            ),
            // A function in FROM is LATERAL whether or not it says so.
            ast::TableFactor::Function {
                name, args, alias, ..
            } => lateral_function(
                self.table_function(name, args, alias, left.unwrap_or(outer)),
                left,
            ),
            ast::TableFactor::UNNEST {
                alias,
                array_exprs,
                with_offset: false,
                with_ordinality: numbered,
                ..
            } => lateral_function(
                with_ordinality(
                    self.unnest(
                        &array_exprs.iter().collect::<Vec<_>>(),
                        alias,
                        left.unwrap_or(outer),
                    ),
                    *numbered,
                    alias,
                ),
                left,
            ),
            ast::TableFactor::Table {
                name,
                alias,
                args: None,
                ..
            } => {
                let (schema, table_name) = object_name(name)?;
                if schema.is_none() {
                    if let Some(found) = self.common_table_reference(&table_name, alias)? {
                        return Ok(found);
                    }
                }
                if matches!(schema.as_deref(), None | Some("public")) {
                    if let Some(found) = self.view_reference(&table_name, alias)? {
                        return Ok(found);
                    }
                    if let Some(sequence) = self.catalog.sequences.get(&table_name) {
                        self.need(
                            ObjectId::Sequence(sequence.id),
                            Privileges::SELECT,
                            ObjectKind::Sequence,
                            &table_name,
                        );
                        let qualifier = alias
                            .as_ref()
                            .map_or_else(|| table_name.clone(), |a| ident(&a.name));
                        let columns = [
                            ("last_value", DataType::Int8),
                            ("log_cnt", DataType::Int8),
                            ("is_called", DataType::Bool),
                        ]
                        .map(|(name, ty)| OutputColumn {
                            name: name.into(),
                            ty,
                            table_oid: sequence.oid(),
                            column_number: 0,
                        });
                        let mut cols = scope_columns(&columns, Some(qualifier));
                        rename_columns(&mut cols, alias)?;
                        let rel = Rel::SequenceState {
                            sequence: sequence.id,
                        };
                        return Ok((rel, cols, true, false));
                    }
                }
                let alias_name = alias
                    .as_ref()
                    .map(|a| ident(&a.name))
                    .unwrap_or_else(|| table_name.clone());
                let user = match schema.as_deref() {
                    None | Some("public") => self.catalog.table(&table_name).cloned(),
                    _ => None,
                };
                if let Some(table) = user {
                    self.need(
                        ObjectId::Relation(table.id),
                        Privileges::SELECT,
                        ObjectKind::Table,
                        &table.name,
                    );
                    let mut cols = table_scope(&table, &alias_name);
                    rename_columns(&mut cols, alias)?;
                    let rel = Rel::Scan {
                        source: TableSource::User(table),
                        access: Access::Full,
                        filter: None,
                    };
                    return Ok((rel, cols, true, false));
                }
                if let Some(system) = SystemTable::lookup(schema.as_deref(), &table_name) {
                    self.check_system_table(system)?;
                    let mut cols: Vec<ScopeColumn> = system
                        .columns()
                        .into_iter()
                        .map(|(n, ty)| ScopeColumn {
                            qualifier: Some(alias_name.clone()),
                            name: n.to_string(),
                            ty,
                            table_oid: 0,
                            column_number: 0,
                        })
                        .collect();
                    rename_columns(&mut cols, alias)?;
                    let rel = Rel::Scan {
                        source: TableSource::System(system),
                        access: Access::Full,
                        filter: None,
                    };
                    return Ok((rel, cols, false, false));
                }
                let shown = match schema {
                    Some(s) => format!("{s}.{table_name}"),
                    None => table_name,
                };
                Err(SqlError::undefined_table(&shown))
            }
            ast::TableFactor::Derived {
                lateral,
                subquery,
                alias,
                ..
            } => {
                let sub_outer = match (lateral, left) {
                    (true, Some(l)) => l.nested(),
                    _ => Scope {
                        columns: outer.columns.clone(),
                        outer_len: outer.columns.len(),
                    },
                };
                let plan = self.query(subquery, &sub_outer)?;
                let alias_name = alias.as_ref().map(|a| ident(&a.name));
                let mut cols = scope_columns(&plan.columns, alias_name);
                rename_columns(&mut cols, alias)?;
                Ok((
                    plan.rel,
                    cols,
                    plan.reads_user_tables,
                    *lateral && left.is_some(),
                ))
            }
            ast::TableFactor::NestedJoin {
                table_with_joins,
                alias: None,
            } => {
                let (rel, scope, reads) =
                    self.bind_from(std::slice::from_ref(table_with_joins), outer)?;
                Ok((rel, scope.own().to_vec(), reads, false))
            }
            other => Err(SqlError::feature_not_supported(format!(
                "FROM item {}",
                other.to_string().chars().take(40).collect::<String>()
            ))),
        }
    }

    /// Binds FROM: joins left to right. Returns the relation, its scope (outer columns
    /// first), and whether it reads user tables.
    pub(crate) fn bind_from(
        &mut self,
        from: &[ast::TableWithJoins],
        outer: &Scope,
    ) -> SqlResult<(Rel, Scope, bool)> {
        let mut scope = Scope {
            columns: outer.columns.clone(),
            outer_len: outer.columns.len(),
        };
        if from.is_empty() {
            return Ok((
                Rel::Values {
                    rows: vec![Vec::new()],
                },
                scope,
                false,
            ));
        }
        let mut current: Option<Rel> = None;
        let mut reads = false;
        let items = from.iter().flat_map(|twj| {
            std::iter::once((&twj.relation, None)).chain(
                twj.joins
                    .iter()
                    .map(|j| (&j.relation, Some(&j.join_operator))),
            )
        });
        for (factor, operator) in items {
            let left_scope = scope.clone();
            let (rel, cols, r, lateral) =
                self.bind_from_item(factor, outer, current.as_ref().map(|_| &left_scope))?;
            reads |= r;
            let right_width = cols.len();
            scope.columns.extend(cols);
            current = Some(match current {
                None => rel,
                Some(left) => {
                    let (kind, constraint) = match operator {
                        None => (JoinKind::Inner, None),
                        Some(ast::JoinOperator::Join(c) | ast::JoinOperator::Inner(c)) => {
                            (JoinKind::Inner, Some(c))
                        }
                        Some(ast::JoinOperator::Left(c) | ast::JoinOperator::LeftOuter(c)) => {
                            (JoinKind::Left, Some(c))
                        }
                        Some(ast::JoinOperator::CrossJoin(c)) => (JoinKind::Inner, Some(c)),
                        Some(other) => {
                            return Err(SqlError::feature_not_supported(
                                format!("join type {other:?}")
                                    .chars()
                                    .take(40)
                                    .collect::<String>(),
                            ))
                        }
                    };
                    let on = match constraint {
                        Some(ast::JoinConstraint::On(e)) => {
                            Some(self.expr(e, &scope, Some(DataType::Bool))?)
                        }
                        Some(ast::JoinConstraint::Using(cols)) => {
                            let mut preds = Vec::new();
                            for c in cols {
                                let (_, name) = object_name(c)?;
                                let right_start = scope.columns.len() - right_width;
                                let l = (scope.outer_len..right_start)
                                    .find(|&i| scope.columns[i].name == name);
                                let r = (right_start..scope.columns.len())
                                    .find(|&i| scope.columns[i].name == name);
                                match (l, r) {
                                    (Some(l), Some(r)) => preds.push(Expr::Binary {
                                        op: BinaryOp::Eq,
                                        left: Box::new(Expr::Column(l, scope.columns[l].ty)),
                                        right: Box::new(Expr::Column(r, scope.columns[r].ty)),
                                        ty: DataType::Bool,
                                    }),
                                    _ => return Err(SqlError::undefined_column(&name)),
                                }
                            }
                            preds.into_iter().reduce(|a, b| Expr::Binary {
                                op: BinaryOp::And,
                                left: Box::new(a),
                                right: Box::new(b),
                                ty: DataType::Bool,
                            })
                        }
                        Some(ast::JoinConstraint::Natural) => {
                            return Err(SqlError::feature_not_supported("NATURAL JOIN"))
                        }
                        Some(ast::JoinConstraint::None) | None => None,
                    };
                    if kind == JoinKind::Left && on.is_none() {
                        return Err(SqlError::syntax("LEFT JOIN needs an ON or USING clause"));
                    }
                    Rel::Join {
                        left: Box::new(left),
                        right: Box::new(rel),
                        kind,
                        on,
                        lateral,
                        right_width,
                    }
                }
            });
        }
        Ok((current.expect("at least one FROM item"), scope, reads))
    }
}

/// The one column of a set-returning function in FROM: named by the alias's first column,
/// else by the alias, else by the function, as PostgreSQL names it.
pub(crate) fn function_column(
    alias: &Option<ast::TableAlias>,
    function: &str,
    ty: DataType,
) -> Vec<ScopeColumn> {
    let alias_name = alias
        .as_ref()
        .map(|a| ident(&a.name))
        .unwrap_or_else(|| function.into());
    let column = alias
        .as_ref()
        .and_then(|a| a.columns.first().map(|c| ident(&c.name)))
        .unwrap_or_else(|| alias_name.clone());
    vec![ScopeColumn {
        qualifier: Some(alias_name),
        name: column,
        ty,
        table_oid: 0,
        column_number: 0,
    }]
}

/// A function in FROM, numbering its rows in a column of its own when asked to (named
/// by the alias's next column name, else `ordinality`).
fn with_ordinality(
    item: SqlResult<FromItem>,
    with_ordinality: bool,
    alias: &Option<ast::TableAlias>,
) -> SqlResult<FromItem> {
    let (rel, mut cols, a, b) = item?;
    if !with_ordinality {
        return Ok((rel, cols, a, b));
    }
    let name = alias
        .as_ref()
        .and_then(|al| al.columns.get(cols.len()).map(|c| ident(&c.name)))
        .unwrap_or_else(|| "ordinality".into());
    let qualifier = cols.first().and_then(|c| c.qualifier.clone());
    cols.push(ScopeColumn {
        qualifier,
        name,
        ty: DataType::Int8,
        table_oid: 0,
        column_number: 0,
    });
    Ok((
        Rel::Ordinality {
            input: Box::new(rel),
        },
        cols,
        a,
        b,
    ))
}

/// A function in FROM after other items may use their columns (PostgreSQL makes such a
/// function LATERAL without being asked): it is evaluated per row of the items before it,
/// which `left` (their scope) being present says.
fn lateral_function(item: SqlResult<FromItem>, left: Option<&Scope>) -> SqlResult<FromItem> {
    let (rel, cols, reads, _) = item?;
    Ok((rel, cols, reads, left.is_some()))
}

/// `cardinality(array)`.
pub(crate) fn cardinality(array: &Expr) -> Expr {
    Expr::Function {
        func: Func::Cardinality,
        args: vec![array.clone()],
        ty: DataType::Int4,
    }
}

/// `generate_series(1, n)` for n the greatest of `lengths` (none when all are NULL): the row
/// numbers of set-returning functions run side by side.
pub(crate) fn row_numbers(mut lengths: Vec<Expr>) -> Rel {
    let stop = if lengths.len() == 1 {
        lengths.remove(0)
    } else {
        Expr::Function {
            func: Func::Greatest,
            args: lengths,
            ty: DataType::Int4,
        }
    };
    Rel::Series {
        start: Expr::Literal(sql::Value::Int(1), DataType::Int8),
        stop,
        step: None,
    }
}

/// `array[ordinal]` (NULL past its end).
pub(crate) fn element_at(array: Expr, ordinal: &Expr) -> Expr {
    let ty = array.ty().element().unwrap_or(DataType::Text);
    Expr::Function {
        func: Func::ArraySubscript,
        args: vec![array, ordinal.clone()],
        ty,
    }
}
