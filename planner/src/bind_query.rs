//! Binding queries: WITH, WHERE, grouping and aggregates, the projection, ORDER BY, LIMIT
//! (FROM is `bind_from`'s; VALUES and UNION are `bind_set_operation`'s).

use plan::*;
use sql::ast;
use sql::{DataType, ErrorKind, SqlError, SqlResult};

use crate::bind::*;
use crate::bind_expr::*;
use crate::bind_from::{cardinality, element_at, row_numbers};
use crate::bind_window::{WindowContext, WINDOW_SLOT};
use crate::scope::{Scope, ScopeColumn};

/// A bound FROM item: its relation, its columns, whether it reads user tables, whether it
/// is a lateral one.
pub(crate) type FromItem = (Rel, Vec<ScopeColumn>, bool, bool);

impl Binder<'_> {
    pub(crate) fn query(&mut self, q: &ast::Query, outer: &Scope) -> SqlResult<SelectPlan> {
        // FOR UPDATE / FOR SHARE change nothing in the plan: a transaction block has the
        // rows such a query read checked at COMMIT instead of locking them (`Bound::locks_rows`).
        let saved = self.aggregate.take();
        let saved_window = self.window.take();
        let visible = self.ctes.len();
        let result = match &q.with {
            Some(with) => self
                .common_tables(with, outer)
                .and_then(|()| self.query_inner(q, outer)),
            None => self.query_inner(q, outer),
        };
        self.ctes.truncate(visible);
        self.aggregate = saved;
        self.window = saved_window;
        result
    }

    /// Binds the queries of a `WITH` clause in order (each sees the ones before it) and
    /// makes them visible to the rest of the query. A query is bound once, where it is
    /// defined, so an unused one is still checked, as in PostgreSQL; each reference runs a
    /// copy of its plan (reads see one log position, so the copies agree), with the outer
    /// row of the query that defined it.
    fn common_tables(&mut self, with: &ast::With, outer: &Scope) -> SqlResult<()> {
        let first = self.ctes.len();
        for cte in &with.cte_tables {
            let name = ident(&cte.alias.name);
            if self.ctes[first..].iter().any(|c| c.name == name) {
                return Err(SqlError::new(
                    ErrorKind::DuplicateAlias,
                    format!("WITH query name \"{name}\" specified more than once"),
                ));
            }
            let recursive = match with.recursive {
                true => self.recursive_query(&name, cte, outer)?,
                false => None,
            };
            let plan = match recursive {
                Some(plan) => plan,
                None => {
                    let mut plan = self.query(&cte.query, outer)?;
                    name_columns(&name, &mut plan, &cte.alias)?;
                    plan
                }
            };
            self.ctes.push(CommonTable {
                name,
                plan,
                outer_len: outer.columns.len(),
            });
        }
        Ok(())
    }

    /// `WITH RECURSIVE name AS (anchor UNION [ALL] recursive)` whose recursive part reads
    /// `name`: the anchor is bound first, its rows' columns are what `name` reads in the
    /// recursive part (`Rel::WorkingTable`). None when the query does not read itself
    /// (it is then an ordinary one).
    fn recursive_query(
        &mut self,
        name: &str,
        cte: &ast::Cte,
        outer: &Scope,
    ) -> SqlResult<Option<SelectPlan>> {
        let q = &cte.query;
        let ast::SetExpr::SetOperation {
            left,
            op: ast::SetOperator::Union,
            set_quantifier,
            right,
        } = q.body.as_ref()
        else {
            return Ok(None);
        };
        let all = match set_quantifier {
            ast::SetQuantifier::All => true,
            ast::SetQuantifier::Distinct | ast::SetQuantifier::None => false,
            other => return Err(SqlError::feature_not_supported(format!("UNION {other}"))),
        };
        let mut anchor = self.set_side(left, outer)?;
        name_columns(name, &mut anchor, &cte.alias)?;
        let id = self.recursive_queries;
        self.recursive_queries += 1;
        self.ctes.push(CommonTable {
            name: name.to_string(),
            plan: SelectPlan {
                rel: Rel::WorkingTable { id },
                columns: anchor.columns.clone(),
                reads_user_tables: false,
            },
            outer_len: outer.columns.len(),
        });
        let reads = self.working_table_reads.get();
        let recursive = self.set_side(right, outer);
        self.ctes.pop();
        let recursive = recursive?;
        if self.working_table_reads.get() == reads {
            return Ok(None);
        }
        if q.order_by.is_some() || q.limit_clause.is_some() {
            return Err(SqlError::feature_not_supported(
                "ORDER BY, LIMIT or OFFSET in a recursive query",
            ));
        }
        if recursive.columns.len() != anchor.columns.len() {
            return Err(SqlError::syntax(
                "each UNION query must have the same number of columns",
            ));
        }
        // The recursive part's values take the anchor's column types.
        let width = outer.columns.len();
        let mut casts = Vec::new();
        for (n, (a, r)) in anchor.columns.iter().zip(&recursive.columns).enumerate() {
            let column = Expr::Column(width + n, r.ty);
            let compatible = a.ty == r.ty
                || r.ty == DataType::Unknown
                || (a.ty.is_numeric_family() && r.ty.is_numeric_family())
                || (a.ty.is_text_family() && r.ty.is_text_family());
            if !compatible {
                return Err(SqlError::new(
                    ErrorKind::DatatypeMismatch,
                    format!(
                        "recursive query \"{name}\" column {} has type {} in non-recursive \
                         term but type {} overall",
                        n + 1,
                        a.ty.pg_name(),
                        r.ty.pg_name()
                    ),
                ));
            }
            casts.push(if a.ty == r.ty {
                column
            } else {
                Expr::Cast {
                    expr: Box::new(column),
                    ty: a.ty,
                }
            });
        }
        let same_types = casts.iter().all(|c| matches!(c, Expr::Column(..)));
        let recursive_rel = if same_types {
            recursive.rel
        } else {
            Rel::Project {
                input: Box::new(recursive.rel),
                exprs: casts,
            }
        };
        Ok(Some(SelectPlan {
            rel: Rel::RecursiveUnion {
                id,
                anchor: Box::new(anchor.rel),
                recursive: Box::new(recursive_rel),
                all,
            },
            columns: anchor.columns,
            reads_user_tables: anchor.reads_user_tables || recursive.reads_user_tables,
        }))
    }

    /// A reference to a `WITH` query in FROM, if `name` is one in scope (the innermost
    /// wins, and it hides a table of the same name).
    pub(crate) fn common_table_reference(
        &self,
        name: &str,
        alias: &Option<ast::TableAlias>,
    ) -> SqlResult<Option<FromItem>> {
        let Some(cte) = self.ctes.iter().rev().find(|c| c.name == name) else {
            return Ok(None);
        };
        if matches!(cte.plan.rel, Rel::WorkingTable { .. }) {
            self.working_table_reads
                .set(self.working_table_reads.get() + 1);
        }
        named_query(name, cte.plan.clone(), cte.outer_len, alias).map(Some)
    }

    pub(crate) fn query_inner(&mut self, q: &ast::Query, outer: &Scope) -> SqlResult<SelectPlan> {
        let order_by: &[ast::OrderByExpr] = match &q.order_by {
            Some(ast::OrderBy {
                kind: ast::OrderByKind::Expressions(list),
                ..
            }) => list,
            Some(_) => return Err(SqlError::feature_not_supported("ORDER BY ALL")),
            None => &[],
        };
        let (limit, offset) = match &q.limit_clause {
            Some(ast::LimitClause::LimitOffset {
                limit,
                offset,
                limit_by,
            }) if limit_by.is_empty() => (limit.as_ref(), offset.as_ref().map(|o| &o.value)),
            Some(ast::LimitClause::OffsetCommaLimit { offset, limit }) => {
                (Some(limit), Some(offset))
            }
            Some(_) => return Err(SqlError::feature_not_supported("LIMIT BY")),
            None => (None, None),
        };
        let mut plan = match q.body.as_ref() {
            ast::SetExpr::Select(select) => self.select(select, outer, order_by)?,
            ast::SetExpr::Query(inner) => {
                let mut p = self.query(inner, outer)?;
                if !order_by.is_empty() {
                    p = self.sort_output(p, order_by, outer)?;
                }
                p
            }
            ast::SetExpr::Values(values) => {
                let mut p = self.values(values, outer)?;
                if !order_by.is_empty() {
                    p = self.sort_output(p, order_by, outer)?;
                }
                p
            }
            ast::SetExpr::SetOperation {
                left,
                op,
                set_quantifier,
                right,
            } => {
                let mut p = self.set_operation(left, op, set_quantifier, right, outer)?;
                if !order_by.is_empty() {
                    p = self.sort_output(p, order_by, outer)?;
                }
                p
            }
            ast::SetExpr::Insert(_)
            | ast::SetExpr::Update(_)
            | ast::SetExpr::Delete(_)
            | ast::SetExpr::Merge(_) => {
                return Err(SqlError::feature_not_supported(
                    "INSERT, UPDATE or DELETE together with WITH",
                ))
            }
            other => {
                return Err(SqlError::feature_not_supported(format!(
                    "query form {}",
                    other.to_string().chars().take(30).collect::<String>()
                )))
            }
        };
        if limit.is_some() || offset.is_some() {
            let scope = Scope {
                columns: outer.columns.clone(),
                outer_len: outer.columns.len(),
            };
            let limit = match limit {
                Some(e) => Some(self.expr(e, &scope, Some(DataType::Int8))?),
                None => None,
            };
            let offset = match offset {
                Some(e) => Some(self.expr(e, &scope, Some(DataType::Int8))?),
                None => None,
            };
            crate::first_rows::limit_scan(
                &mut plan.rel,
                limit.as_ref(),
                offset.as_ref(),
                outer.columns.len(),
            );
            plan.rel = Rel::Limit {
                input: Box::new(plan.rel),
                limit,
                offset,
            };
        }
        Ok(plan)
    }

    pub(crate) fn set_side(&mut self, side: &ast::SetExpr, outer: &Scope) -> SqlResult<SelectPlan> {
        match side {
            ast::SetExpr::Select(s) => self.select(s, outer, &[]),
            ast::SetExpr::Query(q) => self.query(q, outer),
            ast::SetExpr::Values(v) => self.values(v, outer),
            ast::SetExpr::SetOperation {
                left,
                op,
                set_quantifier,
                right,
            } => self.set_operation(left, op, set_quantifier, right, outer),
            other => Err(SqlError::feature_not_supported(format!(
                "query form {}",
                other.to_string().chars().take(30).collect::<String>()
            ))),
        }
    }

    /// ORDER BY over a finished result (after a set operation or VALUES): only output
    /// columns by name or position.
    pub(crate) fn sort_output(
        &mut self,
        plan: SelectPlan,
        order_by: &[ast::OrderByExpr],
        outer: &Scope,
    ) -> SqlResult<SelectPlan> {
        let mut scope = Scope {
            columns: outer.columns.clone(),
            outer_len: outer.columns.len(),
        };
        for c in &plan.columns {
            scope.columns.push(ScopeColumn {
                qualifier: None,
                name: c.name.clone(),
                ty: c.ty,
                table_oid: 0,
                column_number: 0,
            });
        }
        let mut keys = Vec::new();
        for o in order_by {
            let expr = match ordinal(&o.expr) {
                Some(n) if n >= 1 && n <= plan.columns.len() => {
                    Expr::Column(scope.outer_len + n - 1, plan.columns[n - 1].ty)
                }
                Some(n) => {
                    return Err(SqlError::new(
                        ErrorKind::InvalidColumnReference,
                        format!("ORDER BY position {n} is not in select list"),
                    ))
                }
                None => self.expr(&o.expr, &scope, None)?,
            };
            keys.push(self.sort_key(expr, o));
        }
        Ok(SelectPlan {
            rel: Rel::Sort {
                input: Box::new(plan.rel),
                keys,
            },
            ..plan
        })
    }

    /// Set-returning functions in the select list (`SELECT unnest(a), generate_subscripts(a,
    /// 1), x FROM t`), as PostgreSQL runs them: each input row gives as many rows as its
    /// longest set, the shorter ones NULL beyond their end. The FROM row is joined with
    /// `generate_series(1, that length)`, and each function becomes an expression over the
    /// row number. Returns the functions' replacements (by select item) and the scope with
    /// the row number's column.
    fn select_list_sets(
        &mut self,
        items: &[(Option<ast::Expr>, Option<usize>, String)],
        rel: &mut Rel,
        scope: Scope,
        aggregating: bool,
    ) -> SqlResult<(Vec<(usize, Expr)>, Scope)> {
        let mut calls = Vec::new();
        for (n, (e, _, _)) in items.iter().enumerate() {
            // `(information_schema._pg_expandarray(a)).n`: one field of each row's record.
            let (e, field) = match e.as_ref().map(expanded_field) {
                Some(Some((call, field))) => (Some(call), Some(field)),
                _ => (e.as_ref(), None),
            };
            let Some(ast::Expr::Function(f)) = e else {
                continue;
            };
            let name = object_name(&f.name)?.1;
            let json_set = crate::bind_json::json_set_function(&name)
                .is_some_and(|(_, rest)| crate::bind_json::single_column(rest));
            let name = match (name.as_str(), field) {
                (EXPAND_ARRAY, Some(field)) => format!("{EXPAND_ARRAY}.{field}"),
                _ => name,
            };
            let expands = name == EXPAND_ARRAY || field.is_some();
            if !matches!(name.as_str(), "unnest" | "generate_subscripts") && !expands && !json_set {
                continue;
            }
            let ast::FunctionArguments::List(list) = &f.args else {
                continue;
            };
            let args: Vec<&ast::Expr> = list
                .args
                .iter()
                .filter_map(|a| match a {
                    ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Some(e),
                    _ => None,
                })
                .collect();
            calls.push((n, name, args));
        }
        if calls.is_empty() {
            return Ok((Vec::new(), scope));
        }
        if aggregating {
            return Err(SqlError::feature_not_supported(
                "set-returning functions in a select list with aggregates or GROUP BY",
            ));
        }
        // Each function's array and how many rows it gives (NULL: none).
        let mut arrays = Vec::new();
        let mut lengths = Vec::new();
        for (_, name, args) in &calls {
            let wanted = if name == "generate_subscripts" { 2 } else { 1 };
            if args.len() != wanted {
                return Err(SqlError::new(
                    ErrorKind::UndefinedFunction,
                    format!("function {name} takes {wanted} argument(s) here"),
                ));
            }
            let array = match self.json_set_array(name, args[0], &scope) {
                Some(array) => array?,
                None => self.array_argument(args[0], &scope, name)?,
            };
            if name == "generate_subscripts" {
                // Arrays here have one dimension: another gives no subscripts.
                let dimension = self.expr(args[1], &scope, Some(DataType::Int4))?;
                lengths.push(Expr::Case {
                    operand: None,
                    whens: vec![(
                        Expr::Binary {
                            op: BinaryOp::Eq,
                            left: Box::new(dimension),
                            right: Box::new(Expr::Literal(sql::Value::Int(1), DataType::Int4)),
                            ty: DataType::Bool,
                        },
                        cardinality(&array),
                    )],
                    otherwise: None,
                    ty: DataType::Int4,
                });
            } else {
                lengths.push(cardinality(&array));
            }
            arrays.push(array);
        }
        let input = std::mem::replace(rel, Rel::Values { rows: Vec::new() });
        *rel = Rel::Join {
            left: Box::new(input),
            right: Box::new(row_numbers(lengths.clone())),
            kind: JoinKind::Inner,
            on: None,
            lateral: true,
            right_width: 1,
        };
        let ordinal = Expr::Column(scope.columns.len(), DataType::Int8);
        let mut scope = scope;
        scope.columns.push(ScopeColumn {
            qualifier: None,
            // Not a name a query can write.
            name: "\u{0}ordinal".into(),
            ty: DataType::Int8,
            table_oid: 0,
            column_number: 0,
        });
        let replacements = calls
            .iter()
            .zip(arrays.into_iter().zip(lengths))
            .map(|((n, name, _), (array, rows))| {
                let numbered = || Expr::Case {
                    operand: None,
                    whens: vec![(
                        Expr::Binary {
                            op: BinaryOp::LtEq,
                            left: Box::new(ordinal.clone()),
                            right: Box::new(rows.clone()),
                            ty: DataType::Bool,
                        },
                        ordinal.clone(),
                    )],
                    otherwise: None,
                    ty: DataType::Int8,
                };
                // `_pg_expandarray`'s record (x, n) is carried as the array [x, n]: its
                // elements are integers (`indkey`), and `(r).x`/`(r).n` read it back.
                let e = if name == EXPAND_ARRAY {
                    let x = element_at(array, &ordinal);
                    Expr::Function {
                        func: Func::MakeArray,
                        args: vec![x.cast_to(DataType::Int8), numbered()],
                        ty: DataType::Int8Array,
                    }
                } else if name == &format!("{EXPAND_ARRAY}.x") {
                    element_at(array, &ordinal)
                } else if name == &format!("{EXPAND_ARRAY}.n") {
                    numbered()
                } else if name != "generate_subscripts" {
                    element_at(array, &ordinal)
                } else {
                    Expr::Case {
                        operand: None,
                        whens: vec![(
                            Expr::Binary {
                                op: BinaryOp::LtEq,
                                left: Box::new(ordinal.clone()),
                                right: Box::new(rows),
                                ty: DataType::Bool,
                            },
                            ordinal.clone(),
                        )],
                        otherwise: None,
                        ty: DataType::Int8,
                    }
                };
                (*n, e)
            })
            .collect();
        Ok((replacements, scope))
    }

    /// A column of the grouped input (one a wildcard gave) in the grouped output: its group
    /// key, named or functionally dependent on one, or 42803.
    fn grouped_column(&self, index: usize, scope: &Scope) -> SqlResult<Expr> {
        let ctx = self
            .aggregate
            .as_ref()
            .ok_or_else(|| SqlError::internal("a grouped column outside a grouped query"))?;
        let at = ctx
            .groups
            .iter()
            .position(|(_, g)| matches!(g, Expr::Column(c, _) if *c == index));
        let column = &scope.columns[index];
        match at {
            Some(g) => Ok(Expr::Column(scope.outer_len + g, column.ty)),
            None => {
                let name = match &column.qualifier {
                    Some(q) => format!("{q}.{}", column.name),
                    None => column.name.clone(),
                };
                Err(SqlError::new(
                    ErrorKind::GroupingError,
                    format!("column \"{name}\" must appear in the GROUP BY clause or be used in an aggregate function"),
                ))
            }
        }
    }

    /// Columns a GROUP BY determines without naming them: every column of a table whose
    /// primary key it groups by (PostgreSQL's functional dependency, which lets Django
    /// select a model's fields grouped by its id). They join the group keys — grouping by
    /// them splits no group — under a text no expression has.
    fn functionally_dependent(
        &self,
        scope: &Scope,
        groups: &[(String, Expr)],
    ) -> Vec<(String, Expr)> {
        let grouped = |index: usize| {
            groups
                .iter()
                .any(|(_, g)| matches!(g, Expr::Column(c, _) if *c == index))
        };
        let own = scope.outer_len..scope.columns.len();
        let mut out = Vec::new();
        let mut seen: Vec<(Option<String>, u32)> = Vec::new();
        for index in own.clone() {
            let column = &scope.columns[index];
            let key = (column.qualifier.clone(), column.table_oid);
            if column.table_oid == 0 || seen.contains(&key) {
                continue;
            }
            seen.push(key.clone());
            let Some(table) = self
                .catalog
                .tables
                .values()
                .find(|t| t.oid() == column.table_oid)
            else {
                continue;
            };
            let of_table: Vec<usize> = own
                .clone()
                .filter(|&i| {
                    let c = &scope.columns[i];
                    (c.qualifier.clone(), c.table_oid) == key
                })
                .collect();
            let key_grouped = table.has_primary_key()
                && table.primary_key.iter().all(|&pk| {
                    of_table
                        .iter()
                        .any(|&i| scope.columns[i].column_number as usize == pk + 1 && grouped(i))
                });
            if !key_grouped {
                continue;
            }
            for &i in &of_table {
                if !grouped(i) {
                    out.push((format!("\u{0}{i}"), Expr::Column(i, scope.columns[i].ty)));
                }
            }
        }
        out
    }

    pub(crate) fn select(
        &mut self,
        select: &ast::Select,
        outer: &Scope,
        order_by: &[ast::OrderByExpr],
    ) -> SqlResult<SelectPlan> {
        if select.into.is_some() {
            return Err(SqlError::feature_not_supported("SELECT INTO"));
        }
        let (mut rel, scope, reads) = self.bind_from(&select.from, outer)?;
        if let Some(w) = &select.selection {
            if contains_aggregate(w) {
                return Err(SqlError::new(
                    ErrorKind::GroupingError,
                    "aggregate functions are not allowed in WHERE",
                ));
            }
            let predicate = self.expr(w, &scope, Some(DataType::Bool))?;
            let predicate = crate::null_folding::where_condition(predicate);
            rel = match rel {
                Rel::Scan {
                    source: TableSource::User(table),
                    filter: None,
                    ..
                } => {
                    let access = choose_access(
                        &table,
                        &self.catalog.index_derivations,
                        Some(&predicate),
                        scope.outer_len,
                    );
                    Rel::Scan {
                        source: TableSource::User(table),
                        access,
                        filter: Some(predicate),
                    }
                }
                Rel::Scan {
                    source,
                    access,
                    filter: None,
                } => Rel::Scan {
                    source,
                    access,
                    filter: Some(predicate),
                },
                join @ Rel::Join { .. } => crate::joins::push_filter(
                    join,
                    &scope.columns[scope.outer_len..]
                        .iter()
                        .map(|c| c.ty)
                        .collect::<Vec<_>>(),
                    predicate,
                    scope.outer_len,
                    &self.catalog.index_derivations,
                ),
                other => Rel::Filter {
                    input: Box::new(other),
                    predicate,
                },
            };
        }
        let (group_exprs, grouping_sets) = match &select.group_by {
            ast::GroupByExpr::Expressions(exprs, modifiers) if modifiers.is_empty() => {
                crate::grouping_sets::expand(exprs)?
            }
            ast::GroupByExpr::Expressions(..) => {
                return Err(SqlError::feature_not_supported("GROUP BY modifiers"))
            }
            ast::GroupByExpr::All(_) => {
                return Err(SqlError::feature_not_supported("GROUP BY ALL"))
            }
        };
        // Expand the projection into (ast, output name) pairs first.
        let mut items: Vec<(Option<ast::Expr>, Option<usize>, String)> = Vec::new();
        for item in &select.projection {
            match item {
                ast::SelectItem::UnnamedExpr(e) => {
                    items.push((Some(e.clone()), None, output_name(e)))
                }
                ast::SelectItem::ExprWithAlias { expr, alias } => {
                    items.push((Some(expr.clone()), None, ident(alias)))
                }
                ast::SelectItem::Wildcard(_) => {
                    for i in scope.wildcard(None)? {
                        items.push((None, Some(i), scope.columns[i].name.clone()));
                    }
                }
                ast::SelectItem::QualifiedWildcard(kind, _) => {
                    let q = match kind {
                        ast::SelectItemQualifiedWildcardKind::ObjectName(n) => object_name(n)?.1,
                        _ => return Err(SqlError::feature_not_supported("this wildcard form")),
                    };
                    for i in scope.wildcard(Some(&q))? {
                        items.push((None, Some(i), scope.columns[i].name.clone()));
                    }
                }
                _ => return Err(SqlError::feature_not_supported("this select item form")),
            }
        }
        let aggregating = !group_exprs.is_empty()
            || grouping_sets.is_some()
            || items
                .iter()
                .any(|(e, _, _)| e.as_ref().is_some_and(contains_aggregate))
            || select.having.as_ref().is_some_and(contains_aggregate)
            || order_by.iter().any(|o| contains_aggregate(&o.expr));
        let (sets, scope) = self.select_list_sets(&items, &mut rel, scope, aggregating)?;
        let output_scope;
        if aggregating {
            let mut groups = Vec::new();
            for g in &group_exprs {
                let source = match ordinal(g) {
                    Some(n) if n >= 1 && n <= items.len() => match &items[n - 1] {
                        (Some(e), _, _) => e.clone(),
                        // A column a wildcard gave: grouped by itself.
                        (None, Some(i), _) => {
                            let key = Expr::Column(*i, scope.columns[*i].ty);
                            groups.push((format!("\u{0}{i}"), key));
                            continue;
                        }
                        (None, None, _) => {
                            return Err(SqlError::internal("a select item without an expression"))
                        }
                    },
                    Some(n) => {
                        return Err(SqlError::new(
                            ErrorKind::InvalidColumnReference,
                            format!("GROUP BY position {n} is not in select list"),
                        ))
                    }
                    None => g.clone(),
                };
                let bound = self.expr(&source, &scope, None)?;
                groups.push((source.to_string(), bound));
            }
            // With grouping sets a key's dependent columns are not grouped with it: a set
            // without the key has them NULL.
            if grouping_sets.is_none() {
                groups.extend(self.functionally_dependent(&scope, &groups));
            }
            self.aggregate = Some(AggregateContext {
                groups,
                aggregates: Vec::new(),
                input_scope: scope.clone(),
                input_order: None,
                grouping_calls: Vec::new(),
            });
            // After aggregation the row is: group values, then aggregate values (filled in as
            // the projection binds them). The scope only needs the outer part and a width.
            output_scope = Scope {
                columns: outer.columns.clone(),
                outer_len: outer.columns.len(),
            };
        } else {
            output_scope = scope.clone();
        }
        // Window functions may appear in the select list and ORDER BY, nowhere else.
        self.window = Some(WindowContext::new(&select.named_window)?);
        let mut exprs = Vec::new();
        let mut columns = Vec::new();
        for (n, (e, col, name)) in items.iter().enumerate() {
            let bound = match (e, col) {
                (Some(_), _) if sets.iter().any(|(at, _)| *at == n) => sets
                    .iter()
                    .find(|(at, _)| *at == n)
                    .map(|(_, e)| e.clone())
                    .expect("found above"),
                (Some(e), _) => self.expr(e, &output_scope, None)?,
                (None, Some(i)) if aggregating => self.grouped_column(*i, &scope)?,
                (None, Some(i)) => Expr::Column(*i, scope.columns[*i].ty),
                (None, None) => {
                    return Err(SqlError::internal("a select item without an expression"))
                }
            };
            let (table_oid, column_number) = match (&bound, aggregating) {
                (Expr::Column(i, _), false) => match scope.own_column(*i) {
                    Some(c) => (c.table_oid, c.column_number),
                    None => (0, 0),
                },
                _ => (0, 0),
            };
            let ty = if bound.ty() == DataType::Unknown {
                DataType::Text
            } else {
                bound.ty()
            };
            columns.push(OutputColumn {
                name: name.clone(),
                ty,
                table_oid,
                column_number,
            });
            exprs.push(bound);
        }
        let window = self.window.take();
        let having = match &select.having {
            Some(h) if aggregating => Some(self.expr(h, &output_scope, Some(DataType::Bool))?),
            Some(_) => {
                return Err(SqlError::new(
                    ErrorKind::GroupingError,
                    "HAVING needs GROUP BY or an aggregate",
                ))
            }
            None => None,
        };
        self.window = window;
        let visible = exprs.len();
        // ORDER BY and DISTINCT ON keys: an output position, an output name, or an
        // expression over the input, computed as a hidden extra column (one per distinct
        // expression text, so `DISTINCT ON (x + 1) ... ORDER BY x + 1` shares it).
        let mut hidden: Vec<(String, usize)> = Vec::new();
        let mut output_position = |binder: &mut Self,
                                   e: &ast::Expr,
                                   clause: &str,
                                   exprs: &mut Vec<Expr>|
         -> SqlResult<usize> {
            let by_name = match e {
                ast::Expr::Identifier(i) => columns.iter().position(|c| c.name == ident(i)),
                _ => None,
            };
            match (ordinal(e), by_name) {
                (Some(n), _) if n >= 1 && n <= visible => Ok(n - 1),
                (Some(n), _) => Err(SqlError::new(
                    ErrorKind::InvalidColumnReference,
                    format!("{clause} position {n} is not in select list"),
                )),
                (None, Some(i)) => Ok(i),
                (None, None) => {
                    let text = e.to_string();
                    if let Some((_, at)) = hidden.iter().find(|(t, _)| *t == text) {
                        return Ok(*at);
                    }
                    exprs.push(binder.expr(e, &output_scope, None)?);
                    hidden.push((text, exprs.len() - 1));
                    Ok(exprs.len() - 1)
                }
            }
        };
        let distinct_on = match &select.distinct {
            Some(ast::Distinct::On(on)) => {
                let mut positions = Vec::new();
                for e in on {
                    positions.push(output_position(self, e, "DISTINCT ON", &mut exprs)?);
                }
                Some(positions)
            }
            _ => None,
        };
        let mut keys = Vec::new();
        let mut key_positions = Vec::new();
        for o in order_by {
            let at = output_position(self, &o.expr, "ORDER BY", &mut exprs)?;
            key_positions.push(at);
            keys.push(self.sort_key(Expr::Column(outer.columns.len() + at, exprs[at].ty()), o));
        }
        if let Some(on) = &distinct_on {
            // Rows equal on the DISTINCT ON keys must be adjacent: the ORDER BY starts
            // with them (in any order), or they are the order.
            if keys.is_empty() {
                keys = on
                    .iter()
                    .map(|&at| SortKey {
                        expr: Expr::Column(outer.columns.len() + at, exprs[at].ty()),
                        descending: false,
                        nulls_first: false,
                    })
                    .collect();
            } else {
                let leading: std::collections::BTreeSet<usize> =
                    key_positions.iter().take(on.len()).copied().collect();
                let wanted: std::collections::BTreeSet<usize> = on.iter().copied().collect();
                if key_positions.len() < wanted.len() || leading != wanted {
                    return Err(SqlError::new(
                        ErrorKind::InvalidColumnReference,
                        "SELECT DISTINCT ON expressions must match initial ORDER BY expressions",
                    ));
                }
            }
        }
        let window = self.window.take().map(|w| w.calls).unwrap_or_default();
        // The row the select list sees (before window values): the FROM row, or the group
        // values and aggregates.
        let mut window_input = scope.columns.len();
        if let Some(ctx) = self.aggregate.take() {
            window_input = outer.columns.len() + ctx.groups.len() + ctx.aggregates.len();
            if let Some((_, keys)) = ctx.input_order {
                rel = Rel::Sort {
                    input: Box::new(rel),
                    keys,
                };
            }
            let group_by = ctx.groups.into_iter().map(|(_, e)| e).collect();
            rel = match &grouping_sets {
                Some(sets) => crate::grouping_sets::aggregate_sets(
                    rel,
                    group_by,
                    ctx.aggregates,
                    &ctx.grouping_calls,
                    sets,
                    outer.columns.len(),
                ),
                None => Rel::Aggregate {
                    input: Box::new(rel),
                    group_by,
                    aggregates: ctx.aggregates,
                },
            };
            if let Some(h) = having {
                rel = Rel::Filter {
                    input: Box::new(rel),
                    predicate: h,
                };
            }
        }
        if !window.is_empty() {
            for e in &mut exprs {
                e.renumber_columns(&|i| {
                    if i >= WINDOW_SLOT {
                        window_input + (i - WINDOW_SLOT)
                    } else {
                        i
                    }
                });
            }
            rel = Rel::Window {
                input: Box::new(rel),
                calls: window,
            };
        }
        let width = exprs.len();
        rel = Rel::Project {
            input: Box::new(rel),
            exprs,
        };
        match &select.distinct {
            None | Some(ast::Distinct::All) => {}
            Some(ast::Distinct::Distinct) => {
                if let Rel::Project { exprs, .. } = &rel {
                    if exprs.len() > visible {
                        return Err(SqlError::syntax(
                            "for SELECT DISTINCT, ORDER BY expressions must appear in select list",
                        ));
                    }
                }
                rel = Rel::Distinct {
                    input: Box::new(rel),
                };
            }
            Some(ast::Distinct::On(_)) => {}
        }
        if !keys.is_empty() {
            rel = Rel::Sort {
                input: Box::new(rel),
                keys,
            };
        }
        if let Some(on) = distinct_on {
            rel = Rel::DistinctOn {
                input: Box::new(rel),
                columns: on,
            };
        }
        if width > visible {
            let trim = (0..visible)
                .map(|i| Expr::Column(outer.columns.len() + i, columns[i].ty))
                .collect();
            rel = Rel::Project {
                input: Box::new(rel),
                exprs: trim,
            };
        }
        Ok(SelectPlan {
            rel,
            columns,
            reads_user_tables: reads,
        })
    }

    // ----- writes -----
}

/// A WITH query or a view read in FROM: its plan, run with the first `outer_len` values of
/// the outer row (`Rel::CommonTable`), its columns named by `name` or the alias.
pub(crate) fn named_query(
    name: &str,
    plan: SelectPlan,
    outer_len: usize,
    alias: &Option<ast::TableAlias>,
) -> SqlResult<FromItem> {
    let qualifier = alias
        .as_ref()
        .map_or_else(|| name.to_string(), |a| ident(&a.name));
    let mut cols = scope_columns(&plan.columns, Some(qualifier));
    rename_columns(&mut cols, alias)?;
    let rel = Rel::CommonTable {
        name: name.to_string(),
        input: Box::new(plan.rel),
        outer_len,
    };
    Ok((rel, cols, plan.reads_user_tables, false))
}

/// A query's output columns as the columns of a FROM item named `qualifier`.
pub(crate) fn scope_columns(
    columns: &[OutputColumn],
    qualifier: Option<String>,
) -> Vec<ScopeColumn> {
    columns
        .iter()
        .map(|c| ScopeColumn {
            qualifier: qualifier.clone(),
            name: c.name.clone(),
            ty: c.ty,
            table_oid: c.table_oid,
            column_number: c.column_number,
        })
        .collect()
}

/// PostgreSQL's `information_schema._pg_expandarray(a)`: the rows (x, n) of a's elements and
/// their positions (pgJDBC's DatabaseMetaData expands `pg_index.indkey` with it).
const EXPAND_ARRAY: &str = "_pg_expandarray";

/// `(_pg_expandarray(a)).x` or `.n`: the call and the field.
fn expanded_field(e: &ast::Expr) -> Option<(&ast::Expr, &'static str)> {
    let ast::Expr::CompoundFieldAccess { root, access_chain } = e else {
        return None;
    };
    let mut call = root.as_ref();
    while let ast::Expr::Nested(inner) = call {
        call = inner;
    }
    let ast::Expr::Function(f) = call else {
        return None;
    };
    if f.name.0.last()?.to_string() != EXPAND_ARRAY {
        return None;
    }
    match access_chain.as_slice() {
        [ast::AccessExpr::Dot(ast::Expr::Identifier(field))] => {
            match field.value.to_ascii_lowercase().as_str() {
                "x" => Some((call, "x")),
                "n" => Some((call, "n")),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Names a `WITH` query's columns by its alias's column list.
fn name_columns(name: &str, plan: &mut SelectPlan, alias: &ast::TableAlias) -> SqlResult<()> {
    if alias.columns.len() > plan.columns.len() {
        return Err(SqlError::syntax(format!(
            "WITH query \"{name}\" has {} columns available but {} columns specified",
            plan.columns.len(),
            alias.columns.len()
        )));
    }
    for (c, new) in plan.columns.iter_mut().zip(&alias.columns) {
        c.name = ident(&new.name);
    }
    Ok(())
}
