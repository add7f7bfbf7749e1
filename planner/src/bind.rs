//! Binding statements: names resolved against a `Catalog`, types checked, parameters typed,
//! access paths chosen. The result is a `Plan` that any executor can run.

use std::sync::Arc;

use sql::ast;
use sql::{DataType, ErrorKind, Parsed, ParsedStatement, SqlError, SqlResult, Value};

use crate::bind_expr::{contains_aggregate, data_type_of, ident, literal_text, AggregateContext};
use crate::catalog::{Catalog, CheckDef, ColumnDef, IndexDef, TableDef};
use crate::expr::{BinaryOp, Expr};
use crate::plan::*;
use crate::scope::{Scope, ScopeColumn};
use crate::system::SystemTable;

/// A bound statement and the types of its parameters.
#[derive(Clone, Debug)]
pub struct Bound {
    pub plan: Plan,
    pub param_types: Vec<DataType>,
}

pub struct Binder<'a> {
    pub(crate) catalog: &'a Catalog,
    pub(crate) params: Vec<DataType>,
    pub(crate) aggregate: Option<AggregateContext>,
}

/// Binds one parsed statement. `param_hints` are the types the client declared (Unknown
/// where it left them open).
pub fn bind(
    catalog: &Catalog,
    statement: &ParsedStatement,
    param_hints: &[DataType],
) -> SqlResult<Bound> {
    let mut binder = Binder {
        catalog,
        params: param_hints.to_vec(),
        aggregate: None,
    };
    let plan = match &statement.parsed {
        Parsed::Maintenance(tag) => Plan::NoOp(tag),
        Parsed::Statement(s) => binder.statement(s)?,
    };
    let param_types = binder
        .params
        .iter()
        .map(|t| {
            if *t == DataType::Unknown {
                DataType::Text
            } else {
                *t
            }
        })
        .collect();
    Ok(Bound { plan, param_types })
}

fn object_name(name: &ast::ObjectName) -> SqlResult<(Option<String>, String)> {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| match p {
            ast::ObjectNamePart::Identifier(i) => Ok(ident(i)),
            _ => Err(SqlError::feature_not_supported(format!("name {name}"))),
        })
        .collect::<SqlResult<_>>()?;
    match parts.as_slice() {
        [n] => Ok((None, n.clone())),
        [s, n] => Ok((Some(s.clone()), n.clone())),
        [_, s, n] => Ok((Some(s.clone()), n.clone())),
        _ => Err(SqlError::syntax(format!("improper qualified name: {name}"))),
    }
}

fn table_scope(table: &TableDef, alias: &str) -> Vec<ScopeColumn> {
    table
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| ScopeColumn {
            qualifier: Some(alias.to_string()),
            name: c.name.clone(),
            ty: c.ty,
            table_oid: table.oid(),
            column_number: i as i16 + 1,
        })
        .collect()
}

fn isolation_of(level: &ast::TransactionIsolationLevel) -> Isolation {
    match level {
        ast::TransactionIsolationLevel::ReadUncommitted
        | ast::TransactionIsolationLevel::ReadCommitted => Isolation::ReadCommitted,
        _ => Isolation::Serializable,
    }
}

fn modes_isolation(modes: &[ast::TransactionMode]) -> (Option<Isolation>, bool) {
    let mut isolation = None;
    let mut read_only = false;
    for m in modes {
        match m {
            ast::TransactionMode::IsolationLevel(l) => isolation = Some(isolation_of(l)),
            ast::TransactionMode::AccessMode(ast::TransactionAccessMode::ReadOnly) => {
                read_only = true
            }
            ast::TransactionMode::AccessMode(_) => {}
        }
    }
    (isolation, read_only)
}

/// Splits a predicate into its AND-ed parts.
fn conjuncts(e: Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::Binary {
            op: BinaryOp::And,
            left,
            right,
            ..
        } => {
            conjuncts(*left, out);
            conjuncts(*right, out);
        }
        other => out.push(other),
    }
}

/// True when a filter is nothing but equalities between primary-key columns and values
/// known before the scan (so a point lookup decides it completely).
pub fn filter_is_key_equality(table: &TableDef, filter: Option<&Expr>) -> bool {
    let Some(filter) = filter else { return false };
    let mut parts = Vec::new();
    conjuncts(filter.clone(), &mut parts);
    parts.iter().all(|p| match p {
        Expr::Binary {
            op: BinaryOp::Eq,
            left,
            right,
            ..
        } => match (left.as_ref(), right.as_ref()) {
            (Expr::Column(c, _), other) | (other, Expr::Column(c, _)) => {
                table.primary_key.contains(c) && other.is_independent_of(0)
            }
            _ => false,
        },
        _ => false,
    })
}

/// Picks the primary-key access path a filter allows. The filter stays whole: it is
/// re-checked on every row the access path returns, so the key only narrows the search.
pub fn choose_access(table: &TableDef, filter: Option<&Expr>, own_start: usize) -> Access {
    let Some(filter) = filter else {
        return Access::Full;
    };
    let mut parts = Vec::new();
    conjuncts(filter.clone(), &mut parts);
    // (column, op, independent expression) for each comparison against a known value.
    let mut comparisons: Vec<(usize, BinaryOp, Expr)> = Vec::new();
    for p in &parts {
        if let Expr::Binary {
            op, left, right, ..
        } = p
        {
            if !op.is_comparison() || *op == BinaryOp::NotEq {
                continue;
            }
            match (left.as_ref(), right.as_ref()) {
                (Expr::Column(c, _), other)
                    if *c >= own_start && other.is_independent_of(own_start) =>
                {
                    comparisons.push((*c - own_start, *op, other.clone()))
                }
                (other, Expr::Column(c, _))
                    if *c >= own_start && other.is_independent_of(own_start) =>
                {
                    comparisons.push((*c - own_start, op.flipped(), other.clone()))
                }
                _ => {}
            }
        }
    }
    let equal = |col: usize| {
        comparisons
            .iter()
            .find(|(c, op, _)| *c == col && *op == BinaryOp::Eq)
            .map(|(_, _, e)| e.clone())
    };
    if !table.primary_key.is_empty() {
        let key: Option<Vec<Expr>> = table.primary_key.iter().map(|c| equal(*c)).collect();
        if let Some(key) = key {
            return Access::Point(key);
        }
    }
    // The index whose leading columns the filter fixes the most of (a unique index fixed
    // completely first).
    let best_index = table
        .indexes
        .iter()
        .enumerate()
        .map(|(i, index)| {
            let key: Vec<Expr> = index.columns.iter().map_while(|c| equal(*c)).collect();
            let complete = key.len() == index.columns.len();
            (i, key, complete && index.unique)
        })
        .filter(|(_, key, _)| !key.is_empty())
        .max_by_key(|(_, key, unique)| (*unique, key.len()));
    if let Some((index, key, unique)) = &best_index {
        if *unique || table.primary_key.is_empty() || equal(table.primary_key[0]).is_none() {
            return Access::Index {
                index: *index,
                name: table.indexes[*index].name.clone(),
                key: key.clone(),
            };
        }
    }
    if table.primary_key.is_empty() {
        return Access::Full;
    }
    let first = table.primary_key[0];
    if table.primary_key.len() > 1 {
        if let Some(e) = equal(first) {
            return Access::Range {
                lower: Some((e.clone(), true)),
                upper: Some((e, true)),
            };
        }
    }
    let mut lower = None;
    let mut upper = None;
    for (c, op, e) in &comparisons {
        if *c != first {
            continue;
        }
        match op {
            BinaryOp::Gt => lower = Some((e.clone(), false)),
            BinaryOp::GtEq => lower = Some((e.clone(), true)),
            BinaryOp::Lt => upper = Some((e.clone(), false)),
            BinaryOp::LtEq => upper = Some((e.clone(), true)),
            _ => {}
        }
    }
    if lower.is_some() || upper.is_some() {
        Access::Range { lower, upper }
    } else {
        Access::Full
    }
}

fn output_name(item: &ast::Expr) -> String {
    match item {
        ast::Expr::Identifier(i) => ident(i),
        ast::Expr::CompoundIdentifier(parts) => parts.last().map(ident).unwrap_or_default(),
        ast::Expr::Function(f) => {
            let name = f
                .name
                .0
                .last()
                .map(|p| p.to_string())
                .unwrap_or_default()
                .to_ascii_lowercase();
            match name.as_str() {
                "current_timestamp" => "current_timestamp".into(),
                _ => name.trim_matches('"').to_string(),
            }
        }
        ast::Expr::Cast {
            expr, data_type, ..
        } => match expr.as_ref() {
            ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_) => output_name(expr),
            _ => data_type
                .to_string()
                .to_ascii_lowercase()
                .split('(')
                .next()
                .unwrap_or_default()
                .trim()
                .to_string(),
        },
        ast::Expr::Nested(inner) => output_name(inner),
        ast::Expr::Exists { .. } => "exists".into(),
        ast::Expr::Case { .. } => "case".into(),
        _ => "?column?".into(),
    }
}

impl<'a> Binder<'a> {
    pub(crate) fn set_param_type(&mut self, index: usize, ty: DataType) {
        if self.params.len() <= index {
            self.params.resize(index + 1, DataType::Unknown);
        }
        if self.params[index] == DataType::Unknown {
            self.params[index] = ty;
        }
    }

    fn statement(&mut self, s: &ast::Statement) -> SqlResult<Plan> {
        use ast::Statement as S;
        Ok(match s {
            S::Query(q) => {
                let mut plan = self.query(q, &Scope::default())?;
                plan.reads_user_tables = reads_user_tables(&plan.rel);
                Plan::Select(Arc::new(plan))
            }
            S::Insert(insert) => self.insert(insert)?,
            S::Update(update) => self.update(update)?,
            S::Delete(delete) => self.delete(delete)?,
            S::CreateTable(create) => self.create_table(create)?,
            S::Drop {
                object_type: ast::ObjectType::Table,
                if_exists,
                names,
                ..
            } => {
                let names = names
                    .iter()
                    .map(|n| object_name(n).map(|(_, n)| n))
                    .collect::<SqlResult<_>>()?;
                Plan::Ddl(DdlPlan::DropTables {
                    names,
                    if_exists: *if_exists,
                })
            }
            S::Drop {
                object_type: ast::ObjectType::Index,
                if_exists,
                names,
                ..
            } => {
                let names = names
                    .iter()
                    .map(|n| object_name(n).map(|(_, n)| n))
                    .collect::<SqlResult<_>>()?;
                Plan::Ddl(DdlPlan::DropIndexes {
                    names,
                    if_exists: *if_exists,
                })
            }
            S::Drop { object_type, .. } => {
                return Err(SqlError::feature_not_supported(format!(
                    "DROP {object_type}"
                )))
            }
            S::Truncate(t) => {
                let mut tables = Vec::new();
                for target in &t.table_names {
                    let (_, name) = object_name(&target.name)?;
                    let table = self.user_table(&name)?;
                    tables.push(table.reference());
                }
                Plan::Ddl(DdlPlan::Truncate { tables })
            }
            S::AlterTable(alter) => self.alter_table(alter)?,
            S::StartTransaction { modes, .. } => {
                let (isolation, read_only) = modes_isolation(modes);
                Plan::Begin {
                    isolation,
                    read_only,
                }
            }
            S::Commit { chain: false, .. } => Plan::Commit,
            S::Rollback {
                chain: false,
                savepoint: None,
            } => Plan::Rollback,
            S::Rollback {
                savepoint: Some(_), ..
            } => return Err(SqlError::feature_not_supported("savepoints")),
            S::Savepoint { .. } | S::ReleaseSavepoint { .. } => {
                return Err(SqlError::feature_not_supported("savepoints"))
            }
            S::Set(set) => self.set(set)?,
            S::Reset(reset) => match &reset.reset {
                ast::Reset::ALL => Plan::Reset { name: None },
                ast::Reset::ConfigurationParameter(name) => Plan::Reset {
                    name: Some(name.to_string().to_ascii_lowercase()),
                },
                ast::Reset::SessionAuthorization => Plan::NoOp("RESET"),
            },
            S::ShowVariable { variable } => {
                let name = variable.iter().map(ident).collect::<Vec<_>>().join(" ");
                Plan::Show { name }
            }
            S::Copy {
                source,
                to: false,
                target: ast::CopyTarget::Stdin,
                options,
                legacy_options,
                ..
            } => self.copy_from(source, options, legacy_options)?,
            S::Copy { .. } => {
                return Err(SqlError::feature_not_supported(
                    "COPY other than FROM STDIN",
                ))
            }
            S::Explain {
                statement,
                analyze: false,
                ..
            } => Plan::Explain(Box::new(self.statement(statement)?)),
            S::Explain { analyze: true, .. } => {
                return Err(SqlError::feature_not_supported("EXPLAIN ANALYZE"))
            }
            S::Deallocate { name, .. } => {
                let n = ident(name);
                Plan::Deallocate {
                    name: if n == "all" { None } else { Some(n) },
                }
            }
            S::Discard { .. } => Plan::NoOp("DISCARD ALL"),
            S::CreateIndex(index) => self.create_index(index)?,
            other => {
                let text = other.to_string();
                let words: Vec<&str> = text.split_whitespace().take(2).collect();
                return Err(SqlError::feature_not_supported(words.join(" ")));
            }
        })
    }

    fn set(&mut self, set: &ast::Set) -> SqlResult<Plan> {
        Ok(match set {
            ast::Set::SingleAssignment {
                variable, values, ..
            } => {
                let name = variable.to_string().to_ascii_lowercase();
                let value = values
                    .iter()
                    .map(|v| match v {
                        ast::Expr::Value(v) => literal_text(&v.value),
                        ast::Expr::Identifier(i) => Ok(i.value.clone()),
                        other => Ok(other.to_string()),
                    })
                    .collect::<SqlResult<Vec<_>>>()?
                    .join(", ");
                if value.eq_ignore_ascii_case("default") {
                    Plan::Set { name, value: None }
                } else {
                    Plan::Set {
                        name,
                        value: Some(value),
                    }
                }
            }
            ast::Set::SetTimeZone { value, .. } => {
                let v = match value {
                    ast::Expr::Value(v) => literal_text(&v.value)?,
                    other => other.to_string(),
                };
                Plan::Set {
                    name: "timezone".into(),
                    value: Some(v),
                }
            }
            ast::Set::SetNames { charset_name, .. } => Plan::Set {
                name: "client_encoding".into(),
                value: Some(charset_name.value.clone()),
            },
            ast::Set::SetTransaction { modes, session, .. } => {
                let (isolation, _) = modes_isolation(modes);
                if *session {
                    let value = match isolation {
                        Some(Isolation::Serializable) => "serializable",
                        _ => "read committed",
                    };
                    Plan::Set {
                        name: "default_transaction_isolation".into(),
                        value: Some(value.into()),
                    }
                } else {
                    Plan::SetTransaction { isolation }
                }
            }
            other => {
                return Err(SqlError::feature_not_supported(format!(
                    "SET form {}",
                    other.to_string().chars().take(40).collect::<String>()
                )))
            }
        })
    }

    pub(crate) fn user_table(&self, name: &str) -> SqlResult<Arc<TableDef>> {
        match self.catalog.table(name) {
            Some(t) => Ok(t.clone()),
            None if SystemTable::lookup(None, name).is_some() => Err(SqlError::new(
                ErrorKind::FeatureNotSupported,
                format!("not supported yet: writing to system catalog \"{name}\""),
            )),
            None => Err(SqlError::undefined_table(name)),
        }
    }

    // ----- queries -----

    pub(crate) fn query(&mut self, q: &ast::Query, outer: &Scope) -> SqlResult<SelectPlan> {
        if q.with.is_some() {
            return Err(SqlError::feature_not_supported(
                "WITH (common table expressions)",
            ));
        }
        if !q.locks.is_empty() {
            // FOR UPDATE / FOR SHARE: transactions are validated at commit instead of locking,
            // so the clause changes nothing; accept it as PostgreSQL's clients expect.
        }
        let saved = self.aggregate.take();
        let result = self.query_inner(q, outer);
        self.aggregate = saved;
        result
    }

    fn query_inner(&mut self, q: &ast::Query, outer: &Scope) -> SqlResult<SelectPlan> {
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
                op: ast::SetOperator::Union,
                set_quantifier,
                right,
            } => {
                let all = matches!(set_quantifier, ast::SetQuantifier::All);
                let mut p = self.union(left, right, all, outer)?;
                if !order_by.is_empty() {
                    p = self.sort_output(p, order_by, outer)?;
                }
                p
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
            plan.rel = Rel::Limit {
                input: Box::new(plan.rel),
                limit,
                offset,
            };
        }
        Ok(plan)
    }

    fn set_side(&mut self, side: &ast::SetExpr, outer: &Scope) -> SqlResult<SelectPlan> {
        match side {
            ast::SetExpr::Select(s) => self.select(s, outer, &[]),
            ast::SetExpr::Query(q) => self.query(q, outer),
            ast::SetExpr::Values(v) => self.values(v, outer),
            ast::SetExpr::SetOperation {
                left,
                op: ast::SetOperator::Union,
                set_quantifier,
                right,
            } => self.union(
                left,
                right,
                matches!(set_quantifier, ast::SetQuantifier::All),
                outer,
            ),
            _ => Err(SqlError::feature_not_supported("INTERSECT and EXCEPT")),
        }
    }

    fn union(
        &mut self,
        left: &ast::SetExpr,
        right: &ast::SetExpr,
        all: bool,
        outer: &Scope,
    ) -> SqlResult<SelectPlan> {
        let l = self.set_side(left, outer)?;
        let r = self.set_side(right, outer)?;
        if l.columns.len() != r.columns.len() {
            return Err(SqlError::syntax(
                "each UNION query must have the same number of columns",
            ));
        }
        Ok(SelectPlan {
            rel: Rel::Union {
                left: Box::new(l.rel),
                right: Box::new(r.rel),
                all,
            },
            columns: l.columns,
            reads_user_tables: l.reads_user_tables || r.reads_user_tables,
        })
    }

    fn values(&mut self, values: &ast::Values, outer: &Scope) -> SqlResult<SelectPlan> {
        let scope = Scope {
            columns: outer.columns.clone(),
            outer_len: outer.columns.len(),
        };
        let mut rows = Vec::new();
        for row in &values.rows {
            let mut bound = Vec::new();
            for e in &row.content {
                bound.push(self.expr(e, &scope, None)?);
            }
            rows.push(bound);
        }
        let width = rows.first().map(Vec::len).unwrap_or(0);
        if rows.iter().any(|r| r.len() != width) {
            return Err(SqlError::syntax("VALUES lists must all be the same length"));
        }
        let columns = (0..width)
            .map(|i| OutputColumn {
                name: format!("column{}", i + 1),
                ty: rows[0][i].ty(),
                table_oid: 0,
                column_number: 0,
            })
            .collect();
        Ok(SelectPlan {
            rel: Rel::Values { rows },
            columns,
            reads_user_tables: false,
        })
    }

    /// ORDER BY over a finished result (after a set operation or VALUES): only output
    /// columns by name or position.
    fn sort_output(
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
            keys.push(sort_key(expr, o));
        }
        Ok(SelectPlan {
            rel: Rel::Sort {
                input: Box::new(plan.rel),
                keys,
            },
            ..plan
        })
    }

    fn table_function(
        &mut self,
        name: &ast::ObjectName,
        args: &[ast::FunctionArg],
        alias: &Option<ast::TableAlias>,
        outer: &Scope,
    ) -> SqlResult<(Rel, Vec<ScopeColumn>, bool, bool)> {
        let (_, function) = object_name(name)?;
        if function != "generate_series" {
            return Err(SqlError::new(
                ErrorKind::UndefinedFunction,
                format!("function {function}() does not exist"),
            ));
        }
        let scope = Scope {
            columns: outer.columns.clone(),
            outer_len: outer.columns.len(),
        };
        let mut bound = Vec::new();
        for a in args {
            match a {
                ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => {
                    bound.push(self.expr(e, &scope, Some(DataType::Int8))?)
                }
                _ => {
                    return Err(SqlError::feature_not_supported(
                        "this argument form in generate_series()",
                    ))
                }
            }
        }
        if !(2..=3).contains(&bound.len()) {
            return Err(SqlError::new(
                ErrorKind::UndefinedFunction,
                "function generate_series takes 2 or 3 arguments",
            ));
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
        let alias_name = alias
            .as_ref()
            .map(|a| ident(&a.name))
            .unwrap_or_else(|| "generate_series".into());
        let column = alias
            .as_ref()
            .and_then(|a| a.columns.first().map(|c| ident(&c.name)))
            .unwrap_or_else(|| alias_name.clone());
        let cols = vec![ScopeColumn {
            qualifier: Some(alias_name),
            name: column,
            ty,
            table_oid: 0,
            column_number: 0,
        }];
        Ok((Rel::Series { start, stop, step }, cols, false, false))
    }

    fn bind_from_item(
        &mut self,
        factor: &ast::TableFactor,
        outer: &Scope,
        left: Option<&Scope>,
    ) -> SqlResult<(Rel, Vec<ScopeColumn>, bool, bool)> {
        match factor {
            ast::TableFactor::Table {
                name,
                alias,
                args: Some(args),
                ..
            } => self.table_function(name, &args.args, alias, outer),
            ast::TableFactor::Function {
                lateral: false,
                name,
                args,
                alias,
                ..
            } => self.table_function(name, args, alias, outer),
            ast::TableFactor::Table {
                name,
                alias,
                args: None,
                ..
            } => {
                let (schema, table_name) = object_name(name)?;
                let alias_name = alias
                    .as_ref()
                    .map(|a| ident(&a.name))
                    .unwrap_or_else(|| table_name.clone());
                let user = match schema.as_deref() {
                    None | Some("public") => self.catalog.table(&table_name).cloned(),
                    _ => None,
                };
                if let Some(table) = user {
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
                let mut cols: Vec<ScopeColumn> = plan
                    .columns
                    .iter()
                    .map(|c| ScopeColumn {
                        qualifier: alias_name.clone(),
                        name: c.name.clone(),
                        ty: c.ty,
                        table_oid: c.table_oid,
                        column_number: c.column_number,
                    })
                    .collect();
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
    fn bind_from(
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

    fn select(
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
            rel = match rel {
                Rel::Scan {
                    source: TableSource::User(table),
                    filter: None,
                    ..
                } => {
                    let access = choose_access(&table, Some(&predicate), scope.outer_len);
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
                other => Rel::Filter {
                    input: Box::new(other),
                    predicate,
                },
            };
        }
        let group_exprs: Vec<ast::Expr> = match &select.group_by {
            ast::GroupByExpr::Expressions(exprs, modifiers) if modifiers.is_empty() => {
                exprs.clone()
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
            || items
                .iter()
                .any(|(e, _, _)| e.as_ref().is_some_and(contains_aggregate))
            || select.having.as_ref().is_some_and(contains_aggregate)
            || order_by.iter().any(|o| contains_aggregate(&o.expr));
        let output_scope;
        if aggregating {
            if items.iter().any(|(e, _, _)| e.is_none()) {
                return Err(SqlError::new(
                    ErrorKind::GroupingError,
                    "SELECT * is not allowed with GROUP BY",
                ));
            }
            let mut groups = Vec::new();
            for g in &group_exprs {
                let source = match ordinal(g) {
                    Some(n) if n >= 1 && n <= items.len() => {
                        items[n - 1].0.clone().expect("checked above")
                    }
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
            self.aggregate = Some(AggregateContext {
                groups,
                aggregates: Vec::new(),
                input_scope: scope.clone(),
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
        let mut exprs = Vec::new();
        let mut columns = Vec::new();
        for (e, col, name) in &items {
            let bound = match (e, col) {
                (Some(e), _) => self.expr(e, &output_scope, None)?,
                (None, Some(i)) => Expr::Column(*i, scope.columns[*i].ty),
                (None, None) => {
                    return Err(SqlError::internal("a select item without an expression"))
                }
            };
            let (table_oid, column_number) = match (&bound, aggregating) {
                (Expr::Column(i, _), false) if *i >= scope.outer_len => {
                    (scope.columns[*i].table_oid, scope.columns[*i].column_number)
                }
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
        // ORDER BY keys: an output position, an output name, or an expression over the input
        // (computed as a hidden extra column).
        let visible = exprs.len();
        let mut keys = Vec::new();
        for o in order_by {
            let by_name = match &o.expr {
                ast::Expr::Identifier(i) => columns.iter().position(|c| c.name == ident(i)),
                _ => None,
            };
            let key = match (ordinal(&o.expr), by_name) {
                (Some(n), _) if n >= 1 && n <= visible => {
                    Expr::Column(outer.columns.len() + n - 1, columns[n - 1].ty)
                }
                (Some(n), _) => {
                    return Err(SqlError::new(
                        ErrorKind::InvalidColumnReference,
                        format!("ORDER BY position {n} is not in select list"),
                    ))
                }
                (None, Some(i)) => Expr::Column(outer.columns.len() + i, columns[i].ty),
                (None, None) => {
                    let bound = self.expr(&o.expr, &output_scope, None)?;
                    let ty = bound.ty();
                    exprs.push(bound);
                    Expr::Column(outer.columns.len() + exprs.len() - 1, ty)
                }
            };
            keys.push(sort_key(key, o));
        }
        if let Some(ctx) = self.aggregate.take() {
            let group_by = ctx.groups.into_iter().map(|(_, e)| e).collect();
            rel = Rel::Aggregate {
                input: Box::new(rel),
                group_by,
                aggregates: ctx.aggregates,
            };
            if let Some(h) = having {
                rel = Rel::Filter {
                    input: Box::new(rel),
                    predicate: h,
                };
            }
        }
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
            Some(ast::Distinct::On(_)) => {
                return Err(SqlError::feature_not_supported("DISTINCT ON"))
            }
        }
        if !keys.is_empty() {
            rel = Rel::Sort {
                input: Box::new(rel),
                keys,
            };
        }
        if let Rel::Sort { input, .. } = &rel {
            if let Rel::Project { exprs, .. } = input.as_ref() {
                if exprs.len() > visible {
                    let trim = (0..visible)
                        .map(|i| Expr::Column(outer.columns.len() + i, columns[i].ty))
                        .collect();
                    rel = Rel::Project {
                        input: Box::new(rel),
                        exprs: trim,
                    };
                }
            }
        }
        Ok(SelectPlan {
            rel,
            columns,
            reads_user_tables: reads,
        })
    }

    // ----- writes -----

    fn returning(
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

    fn insert(&mut self, insert: &ast::Insert) -> SqlResult<Plan> {
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
        let source_query = insert
            .source
            .as_ref()
            .ok_or_else(|| SqlError::feature_not_supported("INSERT without VALUES or SELECT"))?;
        // Without a column list, the values fill the leading columns (PostgreSQL allows
        // fewer values than columns; the rest get their defaults).
        let implicit_width = match source_query.body.as_ref() {
            ast::SetExpr::Values(v) => v.rows.first().map(|r| r.content.len()),
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
        let source = match source_query.body.as_ref() {
            ast::SetExpr::Values(values)
                if source_query.order_by.is_none() && source_query.limit_clause.is_none() =>
            {
                let mut rows = Vec::with_capacity(values.rows.len());
                for row in &values.rows {
                    if row.content.len() > target_columns.len() {
                        return Err(SqlError::syntax(
                            "INSERT has more expressions than target columns",
                        ));
                    }
                    if row.content.len() < target_columns.len() {
                        return Err(SqlError::syntax(
                            "INSERT has more target columns than expressions",
                        ));
                    }
                    let mut bound = Vec::with_capacity(row.content.len());
                    for (e, col) in row.content.iter().zip(&target_columns) {
                        let ty = table.columns[*col].ty;
                        let is_default = matches!(e, ast::Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"));
                        if is_default {
                            bound.push(Expr::Literal(
                                Value::Text(DEFAULT_MARKER.into()),
                                DataType::Unknown,
                            ));
                            continue;
                        }
                        let b = self.expr(e, &empty, Some(ty))?;
                        bound.push(self.assign(b, ty)?);
                    }
                    rows.push(bound);
                }
                InsertSource::Values(rows)
            }
            _ => {
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
                if let Some(ast::ConflictTarget::Columns(cols)) = &c.conflict_target {
                    let named: Vec<usize> = cols
                        .iter()
                        .map(|c| {
                            table
                                .column_index(&ident(c))
                                .ok_or_else(|| SqlError::undefined_column(&ident(c)))
                        })
                        .collect::<SqlResult<_>>()?;
                    let mut sorted = named.clone();
                    sorted.sort_unstable();
                    let mut pk = table.primary_key.clone();
                    pk.sort_unstable();
                    if sorted != pk {
                        return Err(SqlError::new(
                            ErrorKind::InvalidColumnReference,
                            "there is no unique or exclusion constraint matching the ON CONFLICT specification",
                        ));
                    }
                }
                Some(match &c.action {
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
                })
            }
            Some(_) => return Err(SqlError::feature_not_supported("ON DUPLICATE KEY")),
        };
        if on_conflict.is_some() && !table.has_primary_key() {
            return Err(SqlError::new(
                ErrorKind::InvalidColumnReference,
                "there is no unique or exclusion constraint matching the ON CONFLICT specification",
            ));
        }
        let (returning, columns) = self.returning(&insert.returning, &scope)?;
        let plan = WritePlan::Insert(InsertPlan {
            table: table.reference(),
            source,
            target_columns,
            on_conflict,
            returning,
        });
        Ok(Plan::Write(Arc::new(plan), columns))
    }

    fn assignments(
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

    fn single_table(&mut self, twj: &ast::TableWithJoins) -> SqlResult<(Arc<TableDef>, String)> {
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

    fn update(&mut self, update: &ast::Update) -> SqlResult<Plan> {
        if update.from.is_some() {
            return Err(SqlError::feature_not_supported("UPDATE ... FROM"));
        }
        let (table, alias) = self.single_table(&update.table)?;
        let scope = Scope {
            columns: table_scope(&table, &alias),
            outer_len: 0,
        };
        let assignments = self.assignments(&table, &update.assignments, &scope)?;
        let filter = match &update.selection {
            Some(w) => Some(self.expr(w, &scope, Some(DataType::Bool))?),
            None => None,
        };
        let access = choose_access(&table, filter.as_ref(), 0);
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

    fn delete(&mut self, delete: &ast::Delete) -> SqlResult<Plan> {
        let from = match &delete.from {
            ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
        };
        if from.len() != 1 || delete.using.is_some() {
            return Err(SqlError::feature_not_supported(
                "DELETE from several tables",
            ));
        }
        let (table, alias) = self.single_table(&from[0])?;
        let scope = Scope {
            columns: table_scope(&table, &alias),
            outer_len: 0,
        };
        let filter = match &delete.selection {
            Some(w) => Some(self.expr(w, &scope, Some(DataType::Bool))?),
            None => None,
        };
        let access = choose_access(&table, filter.as_ref(), 0);
        let (returning, columns) = self.returning(&delete.returning, &scope)?;
        let plan = WritePlan::Delete(DeletePlan {
            table: table.reference(),
            access,
            filter,
            returning,
        });
        Ok(Plan::Write(Arc::new(plan), columns))
    }

    // ----- schema -----

    fn create_table(&mut self, create: &ast::CreateTable) -> SqlResult<Plan> {
        if create.temporary {
            return Err(SqlError::feature_not_supported("temporary tables"));
        }
        if create.query.is_some() {
            return Err(SqlError::feature_not_supported("CREATE TABLE AS"));
        }
        let (schema, name) = object_name(&create.name)?;
        if schema.as_deref().is_some_and(|s| s != "public") {
            return Err(SqlError::feature_not_supported(format!(
                "schema \"{}\"",
                schema.unwrap_or_default()
            )));
        }
        if create.columns.is_empty() {
            return Err(SqlError::feature_not_supported("tables without columns"));
        }
        let mut columns: Vec<ColumnDef> = Vec::new();
        let mut primary_key: Vec<usize> = Vec::new();
        let mut primary_key_name = None;
        let mut check_asts: Vec<(Option<String>, ast::Expr)> = Vec::new();
        let mut uniques: Vec<(Option<String>, Vec<usize>)> = Vec::new();
        for (i, c) in create.columns.iter().enumerate() {
            let column_name = ident(&c.name);
            if columns.iter().any(|x| x.name == column_name) {
                return Err(SqlError::new(
                    ErrorKind::DuplicateColumn,
                    format!("column \"{column_name}\" specified more than once"),
                ));
            }
            let ty = data_type_of(&c.data_type)?;
            let mut def = ColumnDef {
                name: column_name.clone(),
                ty,
                nullable: true,
                default: None,
                default_sql: None,
            };
            for option in &c.options {
                match &option.option {
                    ast::ColumnOption::Null => def.nullable = true,
                    ast::ColumnOption::NotNull => def.nullable = false,
                    ast::ColumnOption::Default(e) => {
                        let b = self.expr(e, &Scope::default(), Some(ty))?;
                        def.default = Some(self.assign(b, ty)?);
                        def.default_sql = Some(e.to_string());
                    }
                    ast::ColumnOption::PrimaryKey(_) => {
                        if !primary_key.is_empty() {
                            return Err(SqlError::new(
                                ErrorKind::InvalidPrimaryKey,
                                format!(
                                    "multiple primary keys for table \"{name}\" are not allowed"
                                ),
                            ));
                        }
                        primary_key = vec![i];
                        primary_key_name = option.name.as_ref().map(ident);
                    }
                    ast::ColumnOption::Check(check) => {
                        check_asts.push((option.name.as_ref().map(ident), (*check.expr).clone()))
                    }
                    ast::ColumnOption::Unique(_) => {
                        uniques.push((option.name.as_ref().map(ident), vec![i]))
                    }
                    ast::ColumnOption::ForeignKey(_) => {
                        return Err(SqlError::feature_not_supported("foreign keys"))
                    }
                    other => {
                        return Err(SqlError::feature_not_supported(format!(
                            "column option {other}"
                        )))
                    }
                }
            }
            columns.push(def);
        }
        for constraint in &create.constraints {
            match constraint {
                ast::TableConstraint::PrimaryKey(pk) => {
                    if !primary_key.is_empty() {
                        return Err(SqlError::new(
                            ErrorKind::InvalidPrimaryKey,
                            format!("multiple primary keys for table \"{name}\" are not allowed"),
                        ));
                    }
                    primary_key = self.key_columns(&columns, &pk.columns)?;
                    primary_key_name = pk.name.as_ref().map(ident);
                }
                ast::TableConstraint::Check(check) => {
                    check_asts.push((check.name.as_ref().map(ident), (*check.expr).clone()))
                }
                ast::TableConstraint::Unique(u) => {
                    let cols = self.key_columns(&columns, &u.columns)?;
                    uniques.push((u.name.as_ref().map(ident), cols));
                }
                ast::TableConstraint::ForeignKey(_) => {
                    return Err(SqlError::feature_not_supported("foreign keys"))
                }
                other => {
                    return Err(SqlError::feature_not_supported(format!(
                        "table constraint {other}"
                    )))
                }
            }
        }
        for &k in &primary_key {
            columns[k].nullable = false;
            if matches!(columns[k].ty, DataType::Numeric { .. } | DataType::Float4) {
                return Err(SqlError::feature_not_supported(format!(
                    "a primary key column of type {}",
                    columns[k].ty.pg_name()
                )));
            }
        }
        let mut table = TableDef {
            id: 0,
            name: name.clone(),
            columns,
            primary_key,
            primary_key_name,
            checks: Vec::new(),
            indexes: Vec::new(),
            shape_version: 0,
            storage: String::new(),
        };
        for (index_name, cols) in uniques {
            if cols == table.primary_key {
                continue;
            }
            let default = format!(
                "{name}_{}_key",
                cols.iter()
                    .map(|&c| table.columns[c].name.as_str())
                    .collect::<Vec<_>>()
                    .join("_")
            );
            let index_name = index_name.unwrap_or(default);
            if table.indexes.iter().any(|i| i.name == index_name) {
                return Err(SqlError::new(
                    ErrorKind::DuplicateTable,
                    format!("relation \"{index_name}\" already exists"),
                ));
            }
            table.indexes.push(IndexDef {
                id: 0,
                name: index_name,
                columns: cols,
                unique: true,
                storage: String::new(),
            });
        }
        let scope = Scope {
            columns: table_scope(&table, &name),
            outer_len: 0,
        };
        for (n, (check_name, e)) in check_asts.into_iter().enumerate() {
            let expr = self.expr(&e, &scope, Some(DataType::Bool))?;
            if expr.ty() != DataType::Bool {
                return Err(SqlError::mismatch("argument of CHECK must be type boolean"));
            }
            let default_name = match &expr {
                Expr::Binary { left, .. } => match left.as_ref() {
                    Expr::Column(i, _) => format!("{name}_{}_check", table.columns[*i].name),
                    _ => format!("{name}_check{}", n + 1),
                },
                _ => format!("{name}_check{}", n + 1),
            };
            table.checks.push(CheckDef {
                name: check_name.unwrap_or(default_name),
                expr,
                sql: e.to_string(),
            });
        }
        if !self.params.is_empty() {
            return Err(SqlError::feature_not_supported(
                "parameters in CREATE TABLE",
            ));
        }
        Ok(Plan::Ddl(DdlPlan::CreateTable {
            table,
            if_not_exists: create.if_not_exists,
        }))
    }

    fn create_index(&mut self, index: &ast::CreateIndex) -> SqlResult<Plan> {
        if index.predicate.is_some() {
            return Err(SqlError::feature_not_supported("partial indexes"));
        }
        if !index.include.is_empty() {
            return Err(SqlError::feature_not_supported("INCLUDE columns"));
        }
        if let Some(using) = &index.using {
            if !using.to_string().eq_ignore_ascii_case("btree") {
                return Err(SqlError::feature_not_supported(format!(
                    "index method {using}"
                )));
            }
        }
        let (_, table_name) = object_name(&index.table_name)?;
        let table = self.user_table(&table_name)?;
        let columns = self.key_columns(&table.columns, &index.columns)?;
        let name = match &index.name {
            Some(n) => object_name(n)?.1,
            None => {
                let cols = columns
                    .iter()
                    .map(|&c| table.columns[c].name.as_str())
                    .collect::<Vec<_>>()
                    .join("_");
                format!(
                    "{}_{cols}_{}",
                    table.name,
                    if index.unique { "key" } else { "idx" }
                )
            }
        };
        Ok(Plan::Ddl(DdlPlan::CreateIndex {
            table: table.reference(),
            name,
            columns,
            unique: index.unique,
            if_not_exists: index.if_not_exists,
        }))
    }

    fn key_columns(
        &self,
        columns: &[ColumnDef],
        index_columns: &[ast::IndexColumn],
    ) -> SqlResult<Vec<usize>> {
        let mut out = Vec::new();
        for c in index_columns {
            let ast::Expr::Identifier(i) = &c.column.expr else {
                return Err(SqlError::feature_not_supported("expressions in a key"));
            };
            let n = ident(i);
            let position = columns
                .iter()
                .position(|c| c.name == n)
                .ok_or_else(|| SqlError::undefined_column(&format!("{n}\" named in key")))?;
            out.push(position);
        }
        Ok(out)
    }

    fn alter_table(&mut self, alter: &ast::AlterTable) -> SqlResult<Plan> {
        let (_, name) = object_name(&alter.name)?;
        let table = self.user_table(&name)?;
        match alter.operations.as_slice() {
            [ast::AlterTableOperation::AddConstraint {
                constraint: ast::TableConstraint::PrimaryKey(pk),
                ..
            }] => {
                if table.has_primary_key() {
                    return Err(SqlError::new(
                        ErrorKind::InvalidPrimaryKey,
                        format!("multiple primary keys for table \"{name}\" are not allowed"),
                    ));
                }
                let columns = self.key_columns(&table.columns, &pk.columns)?;
                let key_name = pk
                    .name
                    .as_ref()
                    .map(ident)
                    .unwrap_or_else(|| format!("{name}_pkey"));
                Ok(Plan::Ddl(DdlPlan::AddPrimaryKey {
                    table: table.reference(),
                    columns,
                    name: key_name,
                }))
            }
            _ => Err(SqlError::feature_not_supported(format!(
                "ALTER TABLE {}",
                alter
                    .operations
                    .iter()
                    .map(|o| o.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
                    .chars()
                    .take(50)
                    .collect::<String>()
            ))),
        }
    }

    fn copy_from(
        &mut self,
        source: &ast::CopySource,
        options: &[ast::CopyOption],
        legacy: &[ast::CopyLegacyOption],
    ) -> SqlResult<Plan> {
        let ast::CopySource::Table {
            table_name,
            columns,
        } = source
        else {
            return Err(SqlError::feature_not_supported("COPY (query) FROM"));
        };
        let (_, name) = object_name(table_name)?;
        let table = self.user_table(&name)?;
        let columns: Vec<usize> = if columns.is_empty() {
            (0..table.columns.len()).collect()
        } else {
            columns
                .iter()
                .map(|c| {
                    table
                        .column_index(&ident(c))
                        .ok_or_else(|| SqlError::undefined_column(&ident(c)))
                })
                .collect::<SqlResult<_>>()?
        };
        let mut plan = CopyPlan {
            table,
            columns,
            csv: false,
            delimiter: '\t',
            null: "\\N".into(),
            header: false,
        };
        for o in options {
            match o {
                ast::CopyOption::Format(f) => match f.value.to_ascii_lowercase().as_str() {
                    "csv" => {
                        plan.csv = true;
                        plan.delimiter = ',';
                        plan.null = String::new();
                    }
                    "text" => {}
                    other => {
                        return Err(SqlError::feature_not_supported(format!(
                            "COPY format {other}"
                        )))
                    }
                },
                ast::CopyOption::Freeze(_) => {}
                ast::CopyOption::Delimiter(d) => plan.delimiter = *d,
                ast::CopyOption::Null(n) => plan.null = n.clone(),
                ast::CopyOption::Header(h) => plan.header = *h,
                ast::CopyOption::Encoding(_) => {}
                other => {
                    return Err(SqlError::feature_not_supported(format!(
                        "COPY option {other}"
                    )))
                }
            }
        }
        for o in legacy {
            match o {
                ast::CopyLegacyOption::Csv(_) => {
                    plan.csv = true;
                    plan.delimiter = ',';
                    plan.null = String::new();
                }
                ast::CopyLegacyOption::Header => plan.header = true,
                ast::CopyLegacyOption::Delimiter(d) => plan.delimiter = *d,
                ast::CopyLegacyOption::Null(n) => plan.null = n.clone(),
                other => {
                    return Err(SqlError::feature_not_supported(format!(
                        "COPY option {other}"
                    )))
                }
            }
        }
        Ok(Plan::CopyFrom(plan))
    }
}

/// The text a VALUES item holds when it says DEFAULT; the executor fills in the column's
/// default. (A real string literal cannot produce it: it is not valid UTF-8 text a client
/// can send, since it contains a NUL.)
pub const DEFAULT_MARKER: &str = "\0default\0";

fn ordinal(e: &ast::Expr) -> Option<usize> {
    match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => n.parse().ok(),
            _ => None,
        },
        _ => None,
    }
}

fn sort_key(expr: Expr, o: &ast::OrderByExpr) -> SortKey {
    let descending = matches!(o.options.sort, Some(ast::OrderBySort::Desc));
    // PostgreSQL: NULLs sort as larger than everything, so first when descending.
    let nulls_first = o.options.nulls_first.unwrap_or(descending);
    SortKey {
        expr,
        descending,
        nulls_first,
    }
}

fn rename_columns(cols: &mut [ScopeColumn], alias: &Option<ast::TableAlias>) -> SqlResult<()> {
    if let Some(a) = alias {
        if a.columns.len() > cols.len() {
            return Err(SqlError::syntax(format!(
                "table \"{}\" has {} columns available but {} columns specified",
                ident(&a.name),
                cols.len(),
                a.columns.len()
            )));
        }
        for (c, new) in cols.iter_mut().zip(&a.columns) {
            c.name = ident(&new.name);
        }
    }
    Ok(())
}
