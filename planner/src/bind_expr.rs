//! Binding expressions: AST expressions to typed `Expr`s, inferring parameter types from
//! their context (pgbench and most drivers send parameters untyped).

use std::sync::Arc;

use plan::{AggCall, BinaryOp, Expr, Func, Rel, SelectPlan, SortKey, SubqueryKind};
use sql::ast;
use sql::{
    DataType, ErrorKind, NodeId, Numeric, Operator, RowValue, SqlError, SqlResult, Value, ValueRows,
};

use crate::bind::Binder;
use crate::bind_operator::{map_binary, regex_operator};
use crate::scope::{Scope, ScopeColumn};

/// While binding the output of a grouped query: the group keys and the aggregates found.
pub struct AggregateContext {
    /// Group-by expressions bound over the input scope, with their source text.
    pub groups: Vec<(String, Expr)>,
    pub aggregates: Vec<AggCall>,
    pub input_scope: Scope,
    /// The ORDER BY inside the aggregates' arguments (its text, its keys over the input
    /// scope): the input is sorted by it before grouping.
    pub input_order: Option<AggregateOrder>,
    /// The `GROUPING(...)` calls: each one's aggregate slot and its arguments' positions
    /// among `groups` (`grouping_sets::aggregate_sets` gives each set's value).
    pub grouping_calls: Vec<(usize, Vec<usize>)>,
}

/// An ORDER BY inside aggregate arguments: its text (to tell two apart) and its keys.
pub type AggregateOrder = (String, Vec<SortKey>);

pub(crate) const AGGREGATES: [&str; 15] = [
    "jsonb_agg",
    "json_agg",
    "jsonb_object_agg",
    "json_object_agg",
    "array_agg",
    "count",
    "sum",
    "min",
    "max",
    "avg",
    "bool_and",
    "bool_or",
    "string_agg",
    "every",
    "grouping",
];

/// A call's arguments when each is a plain expression (no names, no `*`, no subquery in
/// place of the list); None otherwise.
pub(crate) fn unnamed_args(f: &ast::Function) -> Option<Vec<&ast::Expr>> {
    match &f.args {
        ast::FunctionArguments::None => Some(Vec::new()),
        ast::FunctionArguments::List(list) => list
            .args
            .iter()
            .map(|a| match a {
                ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Some(e),
                _ => None,
            })
            .collect(),
        ast::FunctionArguments::Subquery(_) => None,
    }
}

pub fn function_name(name: &ast::ObjectName) -> String {
    let full = name.to_string().to_ascii_lowercase();
    full.trim_start_matches("pg_catalog.")
        .trim_matches('"')
        .to_string()
}

/// True when the expression contains an aggregate call outside any subquery.
pub fn contains_aggregate(e: &ast::Expr) -> bool {
    use ast::Expr as E;
    match e {
        E::Function(f) => {
            let windowed = match &f.over {
                // An ordered-set aggregate (`percentile_cont(0.5) WITHIN GROUP (...)`).
                None if !f.within_group.is_empty() => true,
                None => AGGREGATES.contains(&function_name(&f.name).as_str()),
                // A windowed aggregate is not a grouped one, but its window may hold one.
                Some(ast::WindowType::WindowSpec(spec)) => {
                    spec.partition_by.iter().any(contains_aggregate)
                        || spec.order_by.iter().any(|o| contains_aggregate(&o.expr))
                }
                Some(ast::WindowType::NamedWindow(_)) => false,
            };
            windowed
                || match &f.args {
                    ast::FunctionArguments::List(list) => list.args.iter().any(|a| match a {
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x))
                        | ast::FunctionArg::Named {
                            arg: ast::FunctionArgExpr::Expr(x),
                            ..
                        } => contains_aggregate(x),
                        _ => false,
                    }),
                    _ => false,
                }
        }
        E::BinaryOp { left, right, .. } => contains_aggregate(left) || contains_aggregate(right),
        E::UnaryOp { expr, .. } | E::Nested(expr) | E::Cast { expr, .. } => {
            contains_aggregate(expr)
        }
        E::IsNull(x)
        | E::IsNotNull(x)
        | E::IsTrue(x)
        | E::IsFalse(x)
        | E::IsNotTrue(x)
        | E::IsNotFalse(x) => contains_aggregate(x),
        E::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            operand.as_deref().is_some_and(contains_aggregate)
                || conditions
                    .iter()
                    .any(|c| contains_aggregate(&c.condition) || contains_aggregate(&c.result))
                || else_result.as_deref().is_some_and(contains_aggregate)
        }
        E::Between {
            expr, low, high, ..
        } => contains_aggregate(expr) || contains_aggregate(low) || contains_aggregate(high),
        E::InList { expr, list, .. } => {
            contains_aggregate(expr) || list.iter().any(contains_aggregate)
        }
        _ => false,
    }
}

/// Parses a type as sqlparser prints it: `INT`, `VARCHAR(20)`, `NUMERIC(10,2)`, `TEXT[]`.
pub fn data_type_of(t: &ast::DataType) -> SqlResult<DataType> {
    let text = t.to_string();
    let (name, args) = match text.find('(') {
        Some(open) => {
            let close = text.rfind(')').unwrap_or(text.len());
            let args: Vec<u32> = text[open + 1..close]
                .split(',')
                .map(|a| a.trim().parse::<u32>())
                .collect::<Result<_, _>>()
                .map_err(|_| SqlError::syntax(format!("invalid type modifier in {text}")))?;
            let rest = text[close + 1..].trim();
            (
                format!(
                    "{}{}{}",
                    text[..open].trim(),
                    if rest.is_empty() { "" } else { " " },
                    rest
                ),
                args,
            )
        }
        None => (text.clone(), Vec::new()),
    };
    // `varchar(20)[]` is `varchar []` with its modifier taken out.
    let lower = name.to_ascii_lowercase().replace(" []", "[]");
    let normalized = match lower.as_str() {
        "timestamp with time zone" | "timestamptz" => "timestamptz",
        "timestamp without time zone" | "timestamp" => "timestamp",
        other => other,
    };
    DataType::from_sql_name(normalized, &args)
}

impl Binder<'_> {
    /// Gives an untyped literal or parameter the type its context needs.
    pub fn coerce(&mut self, e: Expr, ty: DataType) -> SqlResult<Expr> {
        if ty == DataType::Unknown {
            return Ok(e);
        }
        Ok(match e {
            Expr::Literal(v, DataType::Unknown) => {
                let cast = self.enum_constant(v.cast(ty)?, ty)?;
                Expr::Literal(cast, ty)
            }
            Expr::Param(i, DataType::Unknown) => {
                self.set_param_type(i, ty);
                self.enum_checked(Expr::Param(i, ty), ty)
            }
            other => other,
        })
    }

    /// Coerces to `ty` and adds an assignment cast when the types still differ.
    pub fn assign(&mut self, e: Expr, ty: DataType) -> SqlResult<Expr> {
        let e = self.coerce(e, ty)?;
        let from = e.ty();
        if from == ty || matches!(e, Expr::Literal(Value::Null, _)) {
            return Ok(e);
        }
        let compatible = (from.is_numeric_family() && ty.is_numeric_family())
            || (from.is_text_family() && ty.is_text_family())
            || from == DataType::Unknown
            || matches!(
                (from.element(), ty.element()),
                (Some(a), Some(b)) if (a.is_numeric_family() && b.is_numeric_family())
                    || (a.is_text_family() && b.is_text_family())
            )
            || matches!(
                (from, ty),
                (
                    DataType::Timestamp | DataType::TimestampTz | DataType::Date,
                    DataType::Timestamp | DataType::TimestampTz | DataType::Date
                )
            )
            || from == ty;
        if !compatible {
            return Err(SqlError::mismatch(format!(
                "column is of type {} but expression is of type {}",
                ty.pg_name(),
                from.pg_name()
            )));
        }
        Ok(Expr::Cast {
            expr: Box::new(e),
            ty,
        })
    }

    pub fn expr(
        &mut self,
        e: &ast::Expr,
        scope: &Scope,
        expected: Option<DataType>,
    ) -> SqlResult<Expr> {
        if self.aggregate.is_some() {
            if let Some(bound) = self.match_group(e, scope)? {
                return Ok(bound);
            }
        }
        let bound = self.expr_inner(e, scope, expected)?;
        match expected {
            Some(ty) => self.coerce(bound, ty),
            None => Ok(bound),
        }
    }

    /// A subquery in an expression over `scope`. Its own columns follow the row it is given
    /// (the outer row), so that row must be as long when it runs as the scope was when it
    /// was bound. In a grouped query's output (select list, HAVING, ORDER BY) the row is the
    /// outer columns, then the group keys, then the aggregates: the subquery sees the group
    /// keys (by name where a key is a column) and runs with the row cut after them.
    pub(crate) fn subquery(&mut self, q: &ast::Query, scope: &Scope) -> SqlResult<SelectPlan> {
        let Some(ctx) = &self.aggregate else {
            let mut plan = self.query(q, &scope.nested())?;
            // In a select list or ORDER BY the row may carry window functions' values after
            // the scope's columns: the subquery runs with the row cut to the scope.
            if self.window.is_some() {
                plan.rel = Rel::CommonTable {
                    name: String::new(),
                    input: Box::new(plan.rel),
                    outer_len: scope.columns.len(),
                };
            }
            return Ok(plan);
        };
        let mut columns = scope.columns.clone();
        for (text, key) in &ctx.groups {
            columns.push(match key {
                Expr::Column(c, _) => ctx.input_scope.columns[*c].clone(),
                other => ScopeColumn {
                    qualifier: None,
                    name: text.clone(),
                    ty: other.ty(),
                    table_oid: 0,
                    column_number: 0,
                },
            });
        }
        let width = columns.len();
        let visible = Scope {
            columns,
            outer_len: width,
        };
        let mut plan = self.query(q, &visible)?;
        plan.rel = Rel::CommonTable {
            name: String::new(),
            input: Box::new(plan.rel),
            outer_len: width,
        };
        Ok(plan)
    }

    /// In a grouped query, an expression equal to a group key reads the key's output column.
    fn match_group(&mut self, e: &ast::Expr, scope: &Scope) -> SqlResult<Option<Expr>> {
        let Some(ctx) = &self.aggregate else {
            return Ok(None);
        };
        let text = e.to_string();
        if let Some(i) = ctx.groups.iter().position(|(t, _)| *t == text) {
            return Ok(Some(Expr::Column(
                scope.outer_len + i,
                ctx.groups[i].1.ty(),
            )));
        }
        if matches!(
            e,
            ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_)
        ) {
            let input = ctx.input_scope.clone();
            let (q, name) = identifier_parts(e)?;
            if let Ok((index, _)) = input.resolve(q.as_deref(), &name) {
                if index >= input.outer_len {
                    let ctx = self.aggregate.as_ref().expect("checked above");
                    if let Some(g) = ctx
                        .groups
                        .iter()
                        .position(|(_, g)| matches!(g, Expr::Column(c, _) if *c == index))
                    {
                        return Ok(Some(Expr::Column(
                            scope.outer_len + g,
                            ctx.groups[g].1.ty(),
                        )));
                    }
                    return Err(SqlError::new(
                        ErrorKind::GroupingError,
                        format!("column \"{name}\" must appear in the GROUP BY clause or be used in an aggregate function"),
                    ));
                }
            }
        }
        Ok(None)
    }

    fn expr_inner(
        &mut self,
        e: &ast::Expr,
        scope: &Scope,
        expected: Option<DataType>,
    ) -> SqlResult<Expr> {
        use ast::Expr as E;
        Ok(match e {
            E::Identifier(_) | E::CompoundIdentifier(_) => {
                let (q, name) = identifier_parts(e)?;
                match scope.resolve(q.as_deref(), &name) {
                    Ok((index, ty)) => Expr::Column(index, ty),
                    Err(err) => match (q.as_deref(), name.as_str()) {
                        (None, "current_user" | "user" | "current_role") => {
                            Expr::Literal(Value::text(self.role_name()), DataType::Name)
                        }
                        (None, "session_user") => {
                            Expr::Literal(Value::text(self.session_role_name()), DataType::Name)
                        }
                        (None, "current_schema") => {
                            Expr::Literal(Value::text("public"), DataType::Name)
                        }
                        (None, "current_catalog") => {
                            Expr::Literal(Value::text("ledger"), DataType::Name)
                        }
                        (None, n) => match self.param_names.iter().position(|p| p == n) {
                            Some(i) => Expr::Param(
                                i,
                                self.params.get(i).copied().unwrap_or(DataType::Unknown),
                            ),
                            None => return Err(err),
                        },
                        _ => return Err(err),
                    },
                }
            }
            E::Value(v) => self.literal(&v.value)?,
            E::Extract { field, expr, .. } => {
                let value = self.datetime_argument(expr, scope, "extract")?;
                Expr::Function {
                    func: Func::Extract,
                    args: vec![
                        Expr::literal(Value::text(field.to_string().to_ascii_lowercase())),
                        value,
                    ],
                    ty: DataType::UNCONSTRAINED_NUMERIC,
                }
            }
            E::Interval(interval) => self.interval_literal(interval, scope)?,
            // position(a IN b) is strpos(b, a).
            E::Position { expr, r#in } => {
                let haystack = self.expr(r#in, scope, Some(DataType::Text))?;
                let needle = self.expr(expr, scope, Some(DataType::Text))?;
                Expr::Function {
                    func: Func::Strpos,
                    args: vec![haystack, needle],
                    ty: DataType::Int4,
                }
            }
            E::TypedString(ts) => {
                let ty = self.resolve_type(&ts.data_type)?;
                let text = literal_text(&ts.value.value)?;
                Expr::Literal(self.enum_constant(Value::parse_text(&text, ty)?, ty)?, ty)
            }
            E::Nested(inner) => self.expr(inner, scope, expected)?,
            E::UnaryOp { op, expr } => match op {
                ast::UnaryOperator::Not => {
                    Expr::Not(Box::new(self.expr(expr, scope, Some(DataType::Bool))?))
                }
                ast::UnaryOperator::Minus => {
                    if let E::Value(v) = expr.as_ref() {
                        if let ast::Value::Number(n, _) = &v.value {
                            return self.number(&format!("-{n}"));
                        }
                    }
                    let operand = self.expr(expr, scope, expected)?;
                    prefix_operand("-", &operand)?;
                    Expr::Negate(Box::new(operand))
                }
                ast::UnaryOperator::Plus => {
                    let operand = self.expr(expr, scope, expected)?;
                    prefix_operand("+", &operand)?;
                    // An untyped operand reads as double precision, as PostgreSQL's does.
                    self.coerce(operand, DataType::Float8)?
                }
                other => return Err(SqlError::feature_not_supported(format!("operator {other}"))),
            },
            E::BinaryOp { left, op, right } => {
                if let Some(fields) = crate::row_values::row_comparison(left, op, right) {
                    return self.expr(&fields?, scope, expected);
                }
                if let Some((negated, case_insensitive)) = regex_operator(op) {
                    let expr = self.expr(left, scope, Some(DataType::Text))?;
                    let pattern = self.expr(right, scope, Some(DataType::Text))?;
                    return Ok(Expr::Regex {
                        expr: Box::new(expr),
                        pattern: Box::new(pattern),
                        negated,
                        case_insensitive,
                    });
                }
                if matches!(op, ast::BinaryOperator::PGOverlap) {
                    return self.array_overlap(left, right, scope);
                }
                if let Some(e) = self.json_operator(op, left, right, scope)? {
                    return Ok(e);
                }
                let op = map_binary(op)?;
                self.binary(op, left, right, scope, expected)?
            }
            E::Collate { expr, .. } => self.expr(expr, scope, expected)?,
            E::AnyOp {
                left,
                compare_op,
                right,
                ..
            }
            | E::AllOp {
                left,
                compare_op,
                right,
            } => self.any_or_all(left, compare_op, right, matches!(e, E::AllOp { .. }), scope)?,
            E::CompoundFieldAccess { root, access_chain } => {
                self.field_access(root, access_chain, scope, e)?
            }
            E::Array(array) => self.array_literal(array, scope, expected)?,
            E::IsNull(x) => Expr::IsNull {
                expr: Box::new(self.expr(x, scope, None)?),
                negated: false,
            },
            E::IsNotNull(x) => Expr::IsNull {
                expr: Box::new(self.expr(x, scope, None)?),
                negated: true,
            },
            E::IsTrue(x) | E::IsNotFalse(x) | E::IsFalse(x) | E::IsNotTrue(x) => {
                let value = matches!(e, E::IsTrue(_) | E::IsNotTrue(_));
                let negated = matches!(e, E::IsNotFalse(_) | E::IsNotTrue(_));
                let inner = self.expr(x, scope, Some(DataType::Bool))?;
                Expr::IsDistinct {
                    left: Box::new(inner),
                    right: Box::new(Expr::literal(Value::Bool(value))),
                    negated: !negated,
                }
            }
            E::IsDistinctFrom(a, b) | E::IsNotDistinctFrom(a, b) => {
                let (l, r) = self.comparable(a, b, scope)?;
                Expr::IsDistinct {
                    left: Box::new(l),
                    right: Box::new(r),
                    negated: matches!(e, E::IsNotDistinctFrom(..)),
                }
            }
            E::InList {
                expr,
                list,
                negated,
            } => self.in_list(expr, list, *negated, scope, expected)?,
            E::InSubquery {
                expr,
                subquery,
                negated,
            } => {
                let subject = self.expr(expr, scope, None)?;
                let plan = self.subquery(subquery, scope)?;
                if plan.columns.len() != 1 {
                    return Err(SqlError::syntax("subquery has too many columns"));
                }
                let subject = self.coerce(subject, plan.columns[0].ty)?;
                Expr::InSubquery {
                    expr: Box::new(subject),
                    rel: Arc::new(plan.rel),
                    negated: *negated,
                }
            }
            E::Between {
                expr,
                negated,
                low,
                high,
            } => {
                let subject = self.expr(expr, scope, None)?;
                let ty = subject.ty();
                let low = self.expr(low, scope, Some(ty))?;
                let high = self.expr(high, scope, Some(ty))?;
                let both = Expr::Binary {
                    op: BinaryOp::And,
                    left: Box::new(self.bound_binary(
                        BinaryOp::GtEq,
                        subject.clone(),
                        low,
                        None,
                    )?),
                    right: Box::new(self.bound_binary(BinaryOp::LtEq, subject, high, None)?),
                    ty: DataType::Bool,
                };
                if *negated {
                    Expr::Not(Box::new(both))
                } else {
                    both
                }
            }
            E::Like {
                negated,
                expr,
                pattern,
                escape_char: None,
                any: false,
            }
            | E::ILike {
                negated,
                expr,
                pattern,
                escape_char: None,
                any: false,
            } => Expr::Like {
                expr: Box::new(self.expr(expr, scope, Some(DataType::Text))?),
                pattern: Box::new(self.expr(pattern, scope, Some(DataType::Text))?),
                negated: *negated,
                case_insensitive: matches!(e, E::ILike { .. }),
            },
            E::Case {
                operand,
                conditions,
                else_result,
                ..
            } => self.case(
                operand.as_deref(),
                conditions,
                else_result.as_deref(),
                scope,
                expected,
            )?,
            E::Cast {
                expr,
                data_type,
                kind: ast::CastKind::Cast | ast::CastKind::DoubleColon,
                format: None,
            } => self.cast(expr, data_type, scope)?,
            E::Function(f) => self.function(f, scope, expected)?,
            E::Exists { subquery, negated } => {
                let plan = self.subquery(subquery, scope)?;
                Expr::Subquery {
                    rel: Arc::new(plan.rel),
                    kind: SubqueryKind::Exists,
                    negated: *negated,
                    ty: DataType::Bool,
                }
            }
            E::Subquery(q) => {
                let plan = self.subquery(q, scope)?;
                if plan.columns.len() != 1 {
                    return Err(SqlError::syntax("subquery must return only one column"));
                }
                Expr::Subquery {
                    rel: Arc::new(plan.rel),
                    kind: SubqueryKind::Scalar,
                    negated: false,
                    ty: plan.columns[0].ty,
                }
            }
            E::Substring {
                expr,
                substring_from,
                substring_for,
                ..
            } => {
                let mut args = vec![self.expr(expr, scope, Some(DataType::Text))?];
                args.push(match substring_from {
                    Some(x) => self.expr(x, scope, Some(DataType::Int8))?,
                    None => Expr::literal(Value::Int(1)),
                });
                if let Some(x) = substring_for {
                    args.push(self.expr(x, scope, Some(DataType::Int8))?);
                }
                Expr::Function {
                    func: Func::Substring,
                    args,
                    ty: DataType::Text,
                }
            }
            E::Trim {
                expr,
                trim_where,
                trim_what,
                trim_characters: None,
            } => {
                let func = match trim_where {
                    Some(ast::TrimWhereField::Leading) => Func::TrimLeading,
                    Some(ast::TrimWhereField::Trailing) => Func::TrimTrailing,
                    _ => Func::TrimBoth,
                };
                let mut args = vec![self.expr(expr, scope, Some(DataType::Text))?];
                if let Some(what) = trim_what {
                    args.push(self.expr(what, scope, Some(DataType::Text))?);
                }
                Expr::Function {
                    func,
                    args,
                    ty: DataType::Text,
                }
            }
            E::Ceil { expr, .. } | E::Floor { expr, .. } => {
                let arg = self.expr(expr, scope, None)?;
                let ty = arg.ty();
                Expr::Function {
                    func: if matches!(e, E::Ceil { .. }) {
                        Func::Ceil
                    } else {
                        Func::Floor
                    },
                    args: vec![arg],
                    ty,
                }
            }
            other => {
                return Err(SqlError::feature_not_supported(format!(
                    "expression {}",
                    truncate(&other.to_string())
                )))
            }
        })
    }

    /// `x op ANY (array)`, `x op ALL (array)` and `x = ANY (subquery)`.
    fn any_or_all(
        &mut self,
        left: &ast::Expr,
        compare_op: &ast::BinaryOperator,
        right: &ast::Expr,
        all: bool,
        scope: &Scope,
    ) -> SqlResult<Expr> {
        let op = map_binary(compare_op)?;
        if !op.is_comparison() {
            return Err(SqlError::feature_not_supported(format!(
                "operator {compare_op} with ANY/ALL"
            )));
        }
        let subject = self.expr(left, scope, None)?;
        if matches!(subject.ty(), DataType::Enum(_))
            && !matches!(op, BinaryOp::Eq | BinaryOp::NotEq)
        {
            return Err(SqlError::feature_not_supported(format!(
                "an enum compared with {compare_op} ANY/ALL"
            )));
        }
        if let ast::Expr::Subquery(q) = right {
            if op == BinaryOp::Eq && !all {
                let plan = self.subquery(q, scope)?;
                return Ok(Expr::InSubquery {
                    expr: Box::new(subject),
                    rel: Arc::new(plan.rel),
                    negated: false,
                });
            }
            return Err(SqlError::feature_not_supported(
                "this form of ANY/ALL (subquery)",
            ));
        }
        let array = self.expr(right, scope, None)?;
        let array = match subject.ty() {
            t if t.is_integer() || t == DataType::Bool => {
                let ty = t.array_of().unwrap_or(DataType::Int8Array);
                self.coerce(array, ty)?
            }
            _ => self.coerce(array, DataType::TextArray)?,
        };
        Ok(Expr::AnyArray {
            expr: Box::new(subject),
            op,
            array: Box::new(array),
            all,
        })
    }

    /// `a[i]`, `t.col[i]`, `doc['k'][0]`, and fields of a record (`record_field`).
    fn field_access(
        &mut self,
        root: &ast::Expr,
        access_chain: &[ast::AccessExpr],
        scope: &Scope,
        e: &ast::Expr,
    ) -> SqlResult<Expr> {
        // `a[i]`, `t.col[i]`, `doc['k'][0]`: a (qualified) column, then subscripts.
        let dots = access_chain
            .iter()
            .take_while(|a| matches!(a, ast::AccessExpr::Dot(_)))
            .count();
        let (dots, subscripts) = access_chain.split_at(dots);
        let plain = (dots.is_empty()
            || (matches!(root, ast::Expr::Identifier(_))
                && dots
                    .iter()
                    .all(|d| matches!(d, ast::AccessExpr::Dot(ast::Expr::Identifier(_))))))
            && !subscripts.is_empty()
            && subscripts
                .iter()
                .all(|s| matches!(s, ast::AccessExpr::Subscript(ast::Subscript::Index { .. })));
        if !plain {
            return self.record_field(root, access_chain, scope, e);
        }
        let mut value = if dots.is_empty() {
            self.expr(root, scope, None)?
        } else {
            let mut parts = Vec::new();
            if let ast::Expr::Identifier(i) = root {
                parts.push(i.clone());
            }
            for d in dots {
                if let ast::AccessExpr::Dot(ast::Expr::Identifier(i)) = d {
                    parts.push(i.clone());
                }
            }
            self.expr(&ast::Expr::CompoundIdentifier(parts), scope, None)?
        };
        for s in subscripts {
            let ast::AccessExpr::Subscript(ast::Subscript::Index { index }) = s else {
                unreachable!("checked above");
            };
            value = self.subscript(value, index, scope)?;
        }
        Ok(value)
    }

    /// `ARRAY[...]`: its type from the expected type, else from its typed elements.
    fn array_literal(
        &mut self,
        array: &ast::Array,
        scope: &Scope,
        expected: Option<DataType>,
    ) -> SqlResult<Expr> {
        let wanted = expected.filter(|t| t.element().is_some());
        let mut items = Vec::new();
        for item in &array.elem {
            let element = wanted.and_then(DataType::element);
            let bound = self.expr(item, scope, element)?;
            items.push(match element {
                Some(el) => self.assign(bound, el)?,
                None => bound,
            });
        }
        // The typed elements decide; NULLs and untyped literals then take their type.
        let typed: Vec<DataType> = items
            .iter()
            .map(Expr::ty)
            .filter(|t| *t != DataType::Unknown)
            .collect();
        let all = |f: fn(DataType) -> bool| !typed.is_empty() && typed.iter().all(|t| f(*t));
        let ty = if let Some(t) = wanted {
            t
        } else if all(|t| matches!(t, DataType::Int2 | DataType::Int4)) {
            DataType::Int4Array
        } else if all(DataType::is_integer) {
            DataType::Int8Array
        } else if all(DataType::is_numeric_family) {
            match typed
                .iter()
                .any(|t| matches!(t, DataType::Float4 | DataType::Float8))
            {
                true => DataType::Float8Array,
                false => DataType::NumericArray {
                    precision: None,
                    scale: 0,
                },
            }
        } else {
            // Elements of one kind make an array of it; anything else is text.
            let first = typed.first().and_then(|t| t.array_of());
            match first {
                Some(array) if typed.iter().all(|t| t.array_of() == Some(array)) => array,
                _ => DataType::TextArray,
            }
        };
        if let Some(element) = ty.element().filter(|_| wanted.is_none()) {
            items = items
                .into_iter()
                .map(|i| match i.ty() {
                    DataType::Unknown => self.coerce(i, element),
                    _ => Ok(i),
                })
                .collect::<SqlResult<_>>()?;
        }
        Ok(Expr::Function {
            func: Func::MakeArray,
            args: items,
            ty,
        })
    }

    /// `x [NOT] IN (a, b, ...)`, and a row compared with a list of rows.
    fn in_list(
        &mut self,
        expr: &ast::Expr,
        list: &[ast::Expr],
        negated: bool,
        scope: &Scope,
        expected: Option<DataType>,
    ) -> SqlResult<Expr> {
        if let Some(fields) = crate::row_values::row_in_list(expr, list, negated) {
            return self.expr(&fields?, scope, expected);
        }
        let subject = self.expr(expr, scope, None)?;
        let ty = subject.ty();
        let mut items = Vec::with_capacity(list.len());
        for item in list {
            let bound = self.expr(item, scope, Some(ty))?;
            items.push(bound);
        }
        let subject = match items.first() {
            Some(first) if ty == DataType::Unknown => self.coerce(subject, first.ty())?,
            _ => subject,
        };
        Ok(Expr::InList {
            expr: Box::new(subject),
            list: items,
            negated,
        })
    }

    /// `CASE [operand] WHEN ... THEN ... [ELSE ...] END`, its type resolved as PostgreSQL does (ELSE first).
    fn case(
        &mut self,
        operand: Option<&ast::Expr>,
        conditions: &[ast::CaseWhen],
        else_result: Option<&ast::Expr>,
        scope: &Scope,
        expected: Option<DataType>,
    ) -> SqlResult<Expr> {
        let operand = match operand {
            Some(o) => Some(Box::new(self.expr(o, scope, None)?)),
            None => None,
        };
        let mut conditions_bound = Vec::with_capacity(conditions.len());
        let mut results = Vec::with_capacity(conditions.len() + 1);
        for c in conditions {
            let when_expected = operand.as_ref().map(|o| o.ty()).or(Some(DataType::Bool));
            conditions_bound.push(self.expr(&c.condition, scope, when_expected)?);
            results.push(self.expr(&c.result, scope, expected)?);
        }
        // PostgreSQL weighs ELSE first when it resolves the type.
        let has_else = else_result.is_some();
        if let Some(x) = else_result {
            results.insert(0, self.expr(x, scope, expected)?);
        }
        let (mut results, ty) = self.resolve_common_type(results, "CASE", expected)?;
        let otherwise = has_else.then(|| Box::new(results.remove(0)));
        let whens = conditions_bound.into_iter().zip(results).collect();
        Ok(Expr::Case {
            operand,
            whens,
            otherwise,
            ty,
        })
    }

    /// `CAST(x AS type)` and `x::type`, with the `reg*` types and enums.
    fn cast(
        &mut self,
        expr: &ast::Expr,
        data_type: &ast::DataType,
        scope: &Scope,
    ) -> SqlResult<Expr> {
        let type_text = data_type.to_string().to_ascii_lowercase();
        let type_text = type_text.trim_start_matches("pg_catalog.");
        if type_text == "regclass" {
            return self.regclass(expr, scope);
        }
        if type_text == "regtype" {
            return self.regtype(expr, scope);
        }
        if type_text == "regproc" {
            if let ast::Expr::Value(v) = expr {
                if let ast::Value::SingleQuotedString(name) = &v.value {
                    return plan::regproc_oid(name)
                        .map(|oid| Expr::Literal(Value::Int(oid as i64), DataType::Oid));
                }
            }
        }
        let ty = self.resolve_type(data_type)?;
        let inner = self.expr(expr, scope, None)?;
        if [ty, inner.ty()]
            .iter()
            .any(|t| matches!(t, DataType::Enum(_)))
        {
            return self.enum_cast(inner, ty);
        }
        // An int2vector's text is its numbers apart by spaces.
        if inner.ty() == DataType::Int2Vector && ty.is_text_family() {
            return Ok(Expr::Function {
                func: Func::ArrayToString,
                args: vec![inner, Expr::Literal(Value::text(" "), DataType::Text)],
                ty,
            });
        }
        Ok(match inner {
            Expr::Literal(v, _) => Expr::Literal(v.cast(ty)?, ty),
            Expr::Param(i, DataType::Unknown) => {
                self.set_param_type(i, ty);
                Expr::Param(i, ty)
            }
            other => Expr::Cast {
                expr: Box::new(other),
                ty,
            },
        })
    }

    fn regclass(&mut self, expr: &ast::Expr, scope: &Scope) -> SqlResult<Expr> {
        let inner = self.expr(expr, scope, None)?;
        match inner {
            Expr::Literal(Value::Text(name), _) => self.regclass_of_name(&name),
            // A name known only when the statement runs: its relation's oid then.
            other if other.ty().is_text_family() => Ok(Expr::Function {
                func: Func::RegClassOid,
                args: vec![other],
                ty: DataType::Oid,
            }),
            other => Ok(Expr::Function {
                func: Func::RegClassName,
                args: vec![other],
                ty: DataType::Name,
            }),
        }
    }

    /// `x::regtype`: a type's name given as text becomes its oid now; an oid shows as the
    /// type's name.
    fn regtype(&mut self, expr: &ast::Expr, scope: &Scope) -> SqlResult<Expr> {
        let inner = self.expr(expr, scope, None)?;
        match inner {
            Expr::Literal(Value::Text(name), _) => {
                let ty = plan::type_of_name(&name).ok_or_else(|| plan::undefined_type(&name))?;
                Ok(Expr::Literal(Value::Int(ty.oid() as i64), DataType::Oid))
            }
            other => Ok(Expr::Function {
                func: Func::RegTypeName,
                args: vec![other],
                ty: DataType::Name,
            }),
        }
    }

    /// `'name'::regclass`: the oid of a user table or of a catalog (as an oid literal).
    pub(crate) fn regclass_of_name(&self, name: &str) -> SqlResult<Expr> {
        let oid = plan::regclass_oid(self.catalog, name)?;
        Ok(Expr::Literal(Value::Int(oid as i64), DataType::Oid))
    }

    pub(crate) fn comparable(
        &mut self,
        a: &ast::Expr,
        b: &ast::Expr,
        scope: &Scope,
    ) -> SqlResult<(Expr, Expr)> {
        let l = self.expr(a, scope, None)?;
        let r = self.expr(b, scope, None)?;
        self.unify(l, r)
    }

    /// Gives an untyped side the other side's type.
    pub(crate) fn unify(&mut self, l: Expr, r: Expr) -> SqlResult<(Expr, Expr)> {
        let (lt, rt) = (l.ty(), r.ty());
        Ok(match (lt, rt) {
            (DataType::Unknown, DataType::Unknown) => (l, r),
            (DataType::Unknown, t) => (self.coerce(l, t)?, r),
            (t, DataType::Unknown) => {
                let r = self.coerce(r, t)?;
                (l, r)
            }
            _ => (l, r),
        })
    }

    /// `value[index]`: an array's element, or jsonb's member by key or element by index.
    fn subscript(&mut self, value: Expr, index: &ast::Expr, scope: &Scope) -> SqlResult<Expr> {
        match value.ty() {
            DataType::Jsonb => self.jsonb_subscript(value, index, scope),
            t if t.element().is_some() => {
                let index = self.expr(index, scope, Some(DataType::Int4))?;
                let ty = t.element().unwrap_or(DataType::Text);
                Ok(Expr::Function {
                    func: Func::ArraySubscript,
                    args: vec![value, index],
                    ty,
                })
            }
            t => Err(SqlError::new(
                ErrorKind::DatatypeMismatch,
                format!(
                    "cannot subscript type {} because it does not support subscripting",
                    t.pg_name()
                ),
            )),
        }
    }

    /// `INTERVAL 'text'` and `INTERVAL 'n' unit`.
    fn interval_literal(&mut self, interval: &ast::Interval, scope: &Scope) -> SqlResult<Expr> {
        if interval.last_field.is_some() {
            return Err(SqlError::feature_not_supported("INTERVAL ... TO ..."));
        }
        let value = self.expr(&interval.value, scope, None)?;
        match (value, &interval.leading_field) {
            (Expr::Literal(v, _), field) => {
                let text = v.to_pg_text(v.natural_type()).unwrap_or_default();
                let text = match field {
                    Some(f) => format!("{text} {f}"),
                    None => text,
                };
                Ok(Expr::Literal(
                    Value::Interval(sql::Interval::parse(&text)?),
                    DataType::Interval,
                ))
            }
            (other, None) => match self.coerce(other, DataType::Interval)? {
                e if e.ty() == DataType::Interval => Ok(e),
                e => Ok(Expr::Cast {
                    expr: Box::new(e),
                    ty: DataType::Interval,
                }),
            },
            (_, Some(_)) => Err(SqlError::feature_not_supported(
                "INTERVAL with a unit after a non-literal value",
            )),
        }
    }

    fn number(&mut self, text: &str) -> SqlResult<Expr> {
        if let Ok(i) = text.parse::<i64>() {
            let ty = if i32::try_from(i).is_ok() {
                DataType::Int4
            } else {
                DataType::Int8
            };
            return Ok(Expr::Literal(Value::Int(i), ty));
        }
        Ok(Expr::Literal(
            Value::Numeric(Numeric::parse(text)?),
            DataType::UNCONSTRAINED_NUMERIC,
        ))
    }

    fn literal(&mut self, v: &ast::Value) -> SqlResult<Expr> {
        Ok(match v {
            ast::Value::Number(n, _) => return self.number(n),
            ast::Value::Boolean(b) => Expr::literal(Value::Bool(*b)),
            ast::Value::Null => Expr::Literal(Value::Null, DataType::Unknown),
            ast::Value::Placeholder(p) => return self.placeholder(p),
            other => Expr::Literal(Value::Text(literal_text(other)?), DataType::Unknown),
        })
    }

    /// `$n`.
    fn placeholder(&mut self, p: &str) -> SqlResult<Expr> {
        let n: usize = p
            .trim_start_matches('$')
            .parse()
            .map_err(|_| SqlError::syntax(format!("invalid parameter reference {p}")))?;
        if n == 0 || n > 65_535 {
            return Err(SqlError::syntax(format!("invalid parameter reference {p}")));
        }
        if self.params.len() < n {
            self.params.resize(n, DataType::Unknown);
        }
        Ok(Expr::Param(n - 1, self.params[n - 1]))
    }

    /// A value of a row the row reader read (`sql::ValueRows`), bound exactly as `expr` binds
    /// the sqlparser tree it stands for: this mirrors `expr_inner`'s arms for the row
    /// reader's grammar, and the tests bind statements both ways and compare the plans.
    pub(crate) fn row_value(
        &mut self,
        rows: &ValueRows,
        id: NodeId,
        expected: Option<DataType>,
    ) -> SqlResult<Expr> {
        let bound = match rows.value(id) {
            RowValue::Number(n) => self.number(n)?,
            RowValue::String(s) => Expr::Literal(Value::Text(s.into_owned()), DataType::Unknown),
            RowValue::Null => Expr::Literal(Value::Null, DataType::Unknown),
            RowValue::Boolean(b) => Expr::literal(Value::Bool(b)),
            RowValue::Placeholder(p) => self.placeholder(p)?,
            RowValue::Nested(inner) | RowValue::Plus(inner) => {
                self.row_value(rows, inner, expected)?
            }
            RowValue::Minus(inner) => match rows.value(inner) {
                RowValue::Number(n) => self.number(&format!("-{n}"))?,
                _ => Expr::Negate(Box::new(self.row_value(rows, inner, expected)?)),
            },
            RowValue::Binary(op, left, right) => {
                let op = match op {
                    Operator::Plus => BinaryOp::Add,
                    Operator::Minus => BinaryOp::Sub,
                    Operator::Multiply => BinaryOp::Mul,
                    Operator::Divide => BinaryOp::Div,
                    Operator::Modulo => BinaryOp::Mod,
                };
                let l = self.row_value(rows, left, None)?;
                let r = self.row_value(rows, right, None)?;
                self.bound_binary(op, l, r, expected)?
            }
        };
        match expected {
            Some(ty) => self.coerce(bound, ty),
            None => Ok(bound),
        }
    }
}

/// The operand of prefix `+` or `-`: a number (or for `-` an interval); an untyped one is
/// a number for `+` and ambiguous for `-` (42725), as in PostgreSQL.
fn prefix_operand(op: &str, operand: &Expr) -> SqlResult<()> {
    let ty = operand.ty();
    let fits = ty.is_numeric_family()
        || (op == "-" && ty == DataType::Interval)
        || (op == "+" && ty == DataType::Unknown);
    if fits {
        return Ok(());
    }
    if ty == DataType::Unknown {
        return Err(SqlError::new(
            ErrorKind::AmbiguousFunction,
            format!("operator is not unique: {op} unknown"),
        ));
    }
    Err(SqlError::new(
        ErrorKind::UndefinedFunction,
        format!("operator does not exist: {op} {}", ty.pg_name()),
    ))
}

/// The statement's time as `ty` (today's date, the time of day).
pub(crate) fn now_as(ty: DataType) -> Expr {
    Expr::Cast {
        expr: Box::new(Expr::Function {
            func: Func::Now,
            args: Vec::new(),
            ty: DataType::TimestampTz,
        }),
        ty,
    }
}

pub(crate) fn wrong_args(name: &str) -> SqlError {
    SqlError::new(
        ErrorKind::UndefinedFunction,
        format!("function {name} with these arguments does not exist"),
    )
}

pub(crate) fn truncate(s: &str) -> String {
    s.chars().take(60).collect()
}

/// The text of a string-like literal.
pub fn literal_text(v: &ast::Value) -> SqlResult<String> {
    Ok(match v {
        ast::Value::SingleQuotedString(s)
        | ast::Value::EscapedStringLiteral(s)
        | ast::Value::NationalStringLiteral(s)
        | ast::Value::UnicodeStringLiteral(s) => s.clone(),
        ast::Value::DollarQuotedString(d) => d.value.clone(),
        ast::Value::Number(n, _) => n.clone(),
        ast::Value::Boolean(b) => b.to_string(),
        ast::Value::HexStringLiteral(h) => h.clone(),
        other => return Err(SqlError::feature_not_supported(format!("literal {other}"))),
    })
}

/// `(qualifier, name)` of a column reference, lower-cased unless quoted.
pub fn identifier_parts(e: &ast::Expr) -> SqlResult<(Option<String>, String)> {
    match e {
        ast::Expr::Identifier(i) => Ok((None, ident(i))),
        ast::Expr::CompoundIdentifier(parts) => {
            let n = parts.len();
            match n {
                2 => Ok((Some(ident(&parts[0])), ident(&parts[1]))),
                3 | 4 => Ok((Some(ident(&parts[n - 2])), ident(&parts[n - 1]))),
                _ => Err(SqlError::syntax(format!("improper qualified name: {e}"))),
            }
        }
        _ => Err(SqlError::internal("not an identifier")),
    }
}

pub use sql::ident;

impl Binder<'_> {
    /// `(r).x` or `(r).n` of a record `information_schema._pg_expandarray` gave (carried as
    /// the integer array [x, n], see `Binder::select_list_sets`); other field access is not
    /// supported yet.
    fn record_field(
        &mut self,
        root: &ast::Expr,
        access_chain: &[ast::AccessExpr],
        scope: &Scope,
        e: &ast::Expr,
    ) -> SqlResult<Expr> {
        let unsupported = || SqlError::feature_not_supported(format!("field access {e}"));
        let [ast::AccessExpr::Dot(ast::Expr::Identifier(field))] = access_chain else {
            return Err(unsupported());
        };
        let position = match field.value.to_ascii_lowercase().as_str() {
            "x" => 1,
            "n" => 2,
            _ => return Err(unsupported()),
        };
        let record = self.expr(root, scope, None)?;
        if record.ty() != DataType::Int8Array {
            return Err(unsupported());
        }
        Ok(Expr::Function {
            func: Func::ArraySubscript,
            args: vec![
                record,
                Expr::Literal(sql::Value::Int(position), DataType::Int4),
            ],
            ty: DataType::Int8,
        })
    }
}
