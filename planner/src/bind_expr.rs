//! Binding expressions: AST expressions to typed `Expr`s, inferring parameter types from
//! their context (pgbench and most drivers send parameters untyped).

use std::sync::Arc;

use plan::{
    arithmetic_type, scalar_functions, AggCall, AggFunc, BinaryOp, Expr, Func, Rel, SelectPlan,
    SortKey, SubqueryKind,
};
use sql::ast;
use sql::{
    DataType, ErrorKind, NodeId, Numeric, Operator, RowValue, SqlError, SqlResult, Value, ValueRows,
};

use crate::bind::Binder;
use crate::bind_window::NOT_ALLOWED_HERE;
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

/// (negated, case-insensitive) when the operator is a regular-expression match.
fn regex_operator(op: &ast::BinaryOperator) -> Option<(bool, bool)> {
    use ast::BinaryOperator as B;
    match op {
        B::PGRegexMatch => Some((false, false)),
        B::PGRegexIMatch => Some((false, true)),
        B::PGRegexNotMatch => Some((true, false)),
        B::PGRegexNotIMatch => Some((true, true)),
        B::PGCustomBinaryOperator(parts) => match parts.last().map(String::as_str) {
            Some("~") => Some((false, false)),
            Some("~*") => Some((false, true)),
            Some("!~") => Some((true, false)),
            Some("!~*") => Some((true, true)),
            _ => None,
        },
        _ => None,
    }
}

fn map_binary(op: &ast::BinaryOperator) -> SqlResult<BinaryOp> {
    use ast::BinaryOperator as B;
    Ok(match op {
        B::Plus => BinaryOp::Add,
        B::Minus => BinaryOp::Sub,
        B::Multiply => BinaryOp::Mul,
        B::Divide => BinaryOp::Div,
        B::Modulo => BinaryOp::Mod,
        B::Eq => BinaryOp::Eq,
        B::NotEq => BinaryOp::NotEq,
        B::Lt => BinaryOp::Lt,
        B::LtEq => BinaryOp::LtEq,
        B::Gt => BinaryOp::Gt,
        B::GtEq => BinaryOp::GtEq,
        B::And => BinaryOp::And,
        B::Or => BinaryOp::Or,
        B::StringConcat => BinaryOp::Concat,
        B::BitwiseAnd => BinaryOp::BitAnd,
        B::BitwiseOr => BinaryOp::BitOr,
        B::PGBitwiseXor => BinaryOp::BitXor,
        B::PGBitwiseShiftLeft => BinaryOp::ShiftLeft,
        B::PGBitwiseShiftRight => BinaryOp::ShiftRight,
        other => return Err(SqlError::feature_not_supported(format!("operator {other}"))),
    })
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
                        (None, "current_user" | "session_user" | "user" | "current_role") => {
                            Expr::Literal(Value::text("ledger"), DataType::Name)
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
            } => {
                let all = matches!(e, E::AllOp { .. });
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
                if let E::Subquery(q) = right.as_ref() {
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
                Expr::AnyArray {
                    expr: Box::new(subject),
                    op,
                    array: Box::new(array),
                    all,
                }
            }
            E::CompoundFieldAccess { root, access_chain } => {
                // `a[i]`, `t.col[i]`, `doc['k'][0]`: a (qualified) column, then subscripts.
                let dots = access_chain
                    .iter()
                    .take_while(|a| matches!(a, ast::AccessExpr::Dot(_)))
                    .count();
                let (dots, subscripts) = access_chain.split_at(dots);
                let plain = (dots.is_empty()
                    || (matches!(root.as_ref(), ast::Expr::Identifier(_))
                        && dots
                            .iter()
                            .all(|d| matches!(d, ast::AccessExpr::Dot(ast::Expr::Identifier(_))))))
                    && !subscripts.is_empty()
                    && subscripts.iter().all(|s| {
                        matches!(s, ast::AccessExpr::Subscript(ast::Subscript::Index { .. }))
                    });
                if !plain {
                    return self.record_field(root, access_chain, scope, e);
                }
                let mut value = if dots.is_empty() {
                    self.expr(root, scope, None)?
                } else {
                    let mut parts = Vec::new();
                    if let ast::Expr::Identifier(i) = root.as_ref() {
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
                value
            }
            E::Array(array) => {
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
                let all =
                    |f: fn(DataType) -> bool| !typed.is_empty() && typed.iter().all(|t| f(*t));
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
                Expr::Function {
                    func: Func::MakeArray,
                    args: items,
                    ty,
                }
            }
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
            } => {
                if let Some(fields) = crate::row_values::row_in_list(expr, list, *negated) {
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
                Expr::InList {
                    expr: Box::new(subject),
                    list: items,
                    negated: *negated,
                }
            }
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
            } => {
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
                Expr::Case {
                    operand,
                    whens,
                    otherwise,
                    ty,
                }
            }
            E::Cast {
                expr,
                data_type,
                kind: ast::CastKind::Cast | ast::CastKind::DoubleColon,
                format: None,
            } => {
                let type_text = data_type.to_string().to_ascii_lowercase();
                let type_text = type_text.trim_start_matches("pg_catalog.");
                if type_text == "regclass" {
                    return self.regclass(expr, scope);
                }
                if type_text == "regtype" {
                    return self.regtype(expr, scope);
                }
                if type_text == "regproc" {
                    if let ast::Expr::Value(v) = expr.as_ref() {
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
                match inner {
                    Expr::Literal(v, _) => Expr::Literal(v.cast(ty)?, ty),
                    Expr::Param(i, DataType::Unknown) => {
                        self.set_param_type(i, ty);
                        Expr::Param(i, ty)
                    }
                    other => Expr::Cast {
                        expr: Box::new(other),
                        ty,
                    },
                }
            }
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
    fn regclass_of_name(&self, name: &str) -> SqlResult<Expr> {
        let oid = plan::regclass_oid(self.catalog, name)?;
        Ok(Expr::Literal(Value::Int(oid as i64), DataType::Oid))
    }

    fn comparable(
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
    fn unify(&mut self, l: Expr, r: Expr) -> SqlResult<(Expr, Expr)> {
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

    fn binary(
        &mut self,
        op: BinaryOp,
        left: &ast::Expr,
        right: &ast::Expr,
        scope: &Scope,
        expected: Option<DataType>,
    ) -> SqlResult<Expr> {
        if op == BinaryOp::Concat {
            let l = self.expr(left, scope, None)?;
            let r = self.expr(right, scope, None)?;
            let (l, r) = match self.jsonb_concat(l, r)? {
                Ok(concat) => return Ok(concat),
                Err(sides) => sides,
            };
            if let Some(array) = [l.ty(), r.ty()].into_iter().find(|t| t.element().is_some()) {
                return self.array_concat(l, r, array);
            }
            // Untyped literals next to || are text, whatever the other side is.
            let l = self.coerce(l, DataType::Text)?;
            let r = self.coerce(r, DataType::Text)?;
            return Ok(crate::null_folding::null_if_strict_operand_null(
                Expr::Binary {
                    op,
                    left: Box::new(l),
                    right: Box::new(r),
                    ty: DataType::Text,
                },
            ));
        }
        if matches!(op, BinaryOp::And | BinaryOp::Or) {
            let l = self.expr(left, scope, Some(DataType::Bool))?;
            let r = self.expr(right, scope, Some(DataType::Bool))?;
            // FALSE AND x is false and TRUE OR x true, whatever x would give (PostgreSQL
            // folds them so; x is never evaluated).
            let decides = op == BinaryOp::Or;
            for side in [&l, &r] {
                if matches!(side, Expr::Literal(Value::Bool(b), _) if *b == decides) {
                    return Ok(Expr::Literal(Value::Bool(decides), DataType::Bool));
                }
            }
            return Ok(Expr::Binary {
                op,
                left: Box::new(l),
                right: Box::new(r),
                ty: DataType::Bool,
            });
        }
        let l = self.expr(left, scope, None)?;
        let r = self.expr(right, scope, None)?;
        if op == BinaryOp::Sub && l.ty() == DataType::Jsonb {
            return self.jsonb_delete(l, r);
        }
        if matches!(
            op,
            BinaryOp::BitAnd
                | BinaryOp::BitOr
                | BinaryOp::BitXor
                | BinaryOp::ShiftLeft
                | BinaryOp::ShiftRight
        ) {
            return self.bitwise(op, l, r);
        }
        self.bound_binary(op, l, r, expected)
    }

    /// Integer bitwise operators: both sides integers (an untyped side is one), the result
    /// the wider type (a shift's, its left side's).
    fn bitwise(&mut self, op: BinaryOp, l: Expr, r: Expr) -> SqlResult<Expr> {
        let integer = |binder: &mut Self, e: Expr, other: DataType| {
            if e.ty() == DataType::Unknown {
                let ty = if other.is_integer() && other != DataType::Oid {
                    other
                } else {
                    DataType::Int4
                };
                binder.coerce(e, ty)
            } else {
                Ok(e)
            }
        };
        let l_ty = l.ty();
        let l = integer(self, l, r.ty())?;
        let r = integer(self, r, l_ty)?;
        let (lt, rt) = (l.ty(), r.ty());
        let ok = |t: DataType| t.is_integer() && t != DataType::Oid;
        if !ok(lt) || !ok(rt) {
            return Err(no_operator(lt, op, rt));
        }
        let ty = if matches!(op, BinaryOp::ShiftLeft | BinaryOp::ShiftRight) {
            lt
        } else {
            arithmetic_type(lt, rt)
        };
        Ok(Expr::Binary {
            op,
            left: Box::new(l),
            right: Box::new(r),
            ty,
        })
    }

    /// `||` with an array on either side, as PostgreSQL resolves it: two arrays concatenate
    /// (an untyped literal or NULL next to an array is an array), an element beside an array
    /// is appended or prepended. The result has the type of the (first) array.
    fn array_concat(&mut self, l: Expr, r: Expr, array: DataType) -> SqlResult<Expr> {
        let element = array.element().expect("an array type");
        let no_operator = SqlError::new(
            ErrorKind::UndefinedFunction,
            format!(
                "operator does not exist: {} || {}",
                l.ty().pg_name(),
                r.ty().pg_name()
            ),
        );
        let side = |binder: &mut Self, e: Expr| {
            let ty = e.ty();
            let width = |t: DataType| match t {
                DataType::Int2 => 2,
                DataType::Int4 => 4,
                DataType::Int8 => 8,
                _ => 0,
            };
            let want = match ty {
                t if t == array || t == element => return Ok(e),
                // Integers are one kind of value: a narrower one fits as it is.
                t if width(t) > 0 && width(t) <= width(element) => return Ok(e),
                DataType::Unknown => array,
                t if t.element().is_some() => return Err(no_operator.clone()),
                _ => element,
            };
            let coerced = binder.coerce(e, want)?;
            match coerced.ty() == want {
                true => Ok(coerced),
                false => Err(no_operator.clone()),
            }
        };
        let l = side(self, l)?;
        let r = side(self, r)?;
        Ok(Expr::Binary {
            op: BinaryOp::Concat,
            left: Box::new(l),
            right: Box::new(r),
            ty: array,
        })
    }

    /// A comparison or arithmetic operator over its bound operands (an untyped side takes
    /// the other side's type, see `unify`). These operators are strict, so one with a NULL
    /// constant operand is NULL, folded here without the other operand ever being
    /// evaluated, as PostgreSQL's planner folds it: `a / 0 = NULL` is NULL, not an error.
    fn bound_binary(
        &mut self,
        op: BinaryOp,
        l: Expr,
        r: Expr,
        expected: Option<DataType>,
    ) -> SqlResult<Expr> {
        let bound = self.bound_binary_unfolded(op, l, r, expected)?;
        Ok(crate::null_folding::null_if_strict_operand_null(bound))
    }

    fn bound_binary_unfolded(
        &mut self,
        op: BinaryOp,
        l: Expr,
        r: Expr,
        expected: Option<DataType>,
    ) -> SqlResult<Expr> {
        // Date and time arithmetic decides an untyped side's type by the operator, not by
        // the other side's type alone.
        if !op.is_comparison() && [l.ty(), r.ty()].iter().any(|t| is_temporal(*t)) {
            return self.temporal_binary(op, l, r);
        }
        let (l, r) = self.unify(l, r)?;
        if op.is_comparison() {
            check_comparable(&l, &r, op)?;
            let (l, r) = if matches!(op, BinaryOp::Eq | BinaryOp::NotEq) {
                (l, r)
            } else {
                (self.ordered(l), self.ordered(r))
            };
            return Ok(Expr::Binary {
                op,
                left: Box::new(l),
                right: Box::new(r),
                ty: DataType::Bool,
            });
        }
        let (l, r) = match (l.ty(), r.ty()) {
            (DataType::Unknown, DataType::Unknown) => {
                let t = expected
                    .filter(|t| t.is_numeric_family())
                    .unwrap_or(DataType::UNCONSTRAINED_NUMERIC);
                (self.coerce(l, t)?, self.coerce(r, t)?)
            }
            _ => (l, r),
        };
        for side in [&l, &r] {
            if !side.ty().is_numeric_family() && side.ty() != DataType::Unknown {
                return Err(no_operator(l.ty(), op, r.ty()));
            }
        }
        let ty = arithmetic_type(l.ty(), r.ty());
        Ok(Expr::Binary {
            op,
            left: Box::new(l),
            right: Box::new(r),
            ty,
        })
    }

    /// Arithmetic with a date, timestamp or interval side: an untyped side takes the type
    /// PostgreSQL's operators suggest (an interval where its text reads as one), then the
    /// operand types decide the result's.
    fn temporal_binary(&mut self, op: BinaryOp, l: Expr, r: Expr) -> SqlResult<Expr> {
        use DataType::*;
        let untyped_type = |unknown: &Expr, other: DataType| -> DataType {
            let text = match unknown {
                Expr::Literal(Value::Text(s), _) => Some(s.as_str()),
                _ => None,
            };
            let reads_as_interval = text.is_some_and(|s| sql::Interval::parse(s).is_ok());
            let reads_as_int = text.is_some_and(|s| s.trim().parse::<i32>().is_ok());
            match (op, other) {
                (BinaryOp::Mul | BinaryOp::Div, Interval) => Float8,
                (_, Interval) if reads_as_interval || text.is_none() => Interval,
                (_, Interval) => Timestamp,
                (_, Date) if reads_as_int || (text.is_none() && op == BinaryOp::Add) => Int4,
                _ if reads_as_interval || (text.is_none() && op == BinaryOp::Add) => Interval,
                (_, t) => t,
            }
        };
        let (l, r) = match (l.ty(), r.ty()) {
            (Unknown, t) => {
                let ty = untyped_type(&l, t);
                (self.coerce(l, ty)?, r)
            }
            (t, Unknown) => {
                let ty = untyped_type(&r, t);
                let r = self.coerce(r, ty)?;
                (l, r)
            }
            _ => (l, r),
        };
        let timestamp = |t: DataType| matches!(t, Timestamp | TimestampTz);
        let ty = match (l.ty(), op, r.ty()) {
            (t, BinaryOp::Add | BinaryOp::Sub, Interval) if timestamp(t) => t,
            (Interval, BinaryOp::Add, t) if timestamp(t) => t,
            (Date, BinaryOp::Add | BinaryOp::Sub, Interval) | (Interval, BinaryOp::Add, Date) => {
                Timestamp
            }
            (Date, BinaryOp::Add | BinaryOp::Sub, t) if t.is_integer() => Date,
            (t, BinaryOp::Add, Date) if t.is_integer() => Date,
            (Date, BinaryOp::Sub, Date) => Int4,
            (a, BinaryOp::Sub, b) if (timestamp(a) || a == Date) && (timestamp(b) || b == Date) => {
                Interval
            }
            (Time, BinaryOp::Add | BinaryOp::Sub, Interval) | (Interval, BinaryOp::Add, Time) => {
                Time
            }
            (Time, BinaryOp::Sub, Time) => Interval,
            (Date, BinaryOp::Add, Time) | (Time, BinaryOp::Add, Date) => Timestamp,
            (Interval, BinaryOp::Add | BinaryOp::Sub, Interval) => Interval,
            (Interval, BinaryOp::Mul | BinaryOp::Div, t) if t.is_numeric_family() => Interval,
            (t, BinaryOp::Mul, Interval) if t.is_numeric_family() => Interval,
            (a, _, b) => return Err(no_operator(a, op, b)),
        };
        Ok(Expr::Binary {
            op,
            left: Box::new(l),
            right: Box::new(r),
            ty,
        })
    }

    /// The date, timestamp or interval argument of `extract`, `date_part` or `date_trunc`
    /// (an untyped one is a timestamp with time zone, as in PostgreSQL).
    fn datetime_argument(
        &mut self,
        e: &ast::Expr,
        scope: &Scope,
        function: &str,
    ) -> SqlResult<Expr> {
        let value = self.expr(e, scope, None)?;
        let value = if value.ty() == DataType::Unknown {
            self.coerce(value, DataType::TimestampTz)?
        } else {
            value
        };
        if !is_temporal(value.ty()) {
            return Err(SqlError::new(
                ErrorKind::UndefinedFunction,
                format!(
                    "function {function}(text, {}) does not exist",
                    value.ty().pg_name()
                ),
            ));
        }
        Ok(value)
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

    fn function(
        &mut self,
        f: &ast::Function,
        scope: &Scope,
        expected: Option<DataType>,
    ) -> SqlResult<Expr> {
        let name = function_name(&f.name);
        if !f.within_group.is_empty() {
            return self.ordered_set_aggregate(&name, f, scope);
        }
        if f.null_treatment.is_some() {
            return Err(SqlError::feature_not_supported(
                "IGNORE NULLS and RESPECT NULLS",
            ));
        }
        if !matches!(f.parameters, ast::FunctionArguments::None) {
            return Err(SqlError::feature_not_supported(format!(
                "parameters before the arguments of {name}()"
            )));
        }
        let args = match &f.args {
            ast::FunctionArguments::None => Vec::new(),
            ast::FunctionArguments::Subquery(q) if name == "array" => {
                let plan = self.subquery(q, scope)?;
                let ty = match plan.columns.first().map(|c| c.ty) {
                    Some(t) if t.is_integer() => t.array_of().unwrap_or(DataType::Int2Array),
                    Some(t) => t.array_of().unwrap_or(DataType::TextArray),
                    None => DataType::TextArray,
                };
                return Ok(Expr::Subquery {
                    rel: Arc::new(plan.rel),
                    kind: SubqueryKind::Array,
                    negated: false,
                    ty,
                });
            }
            ast::FunctionArguments::Subquery(_) => {
                return Err(SqlError::feature_not_supported("function over a subquery"))
            }
            ast::FunctionArguments::List(list) => {
                let call = CallArgs::of(&name, list)?;
                if let Some(over) = &f.over {
                    return self.window_call(&name, &call, f.filter.as_deref(), over, scope);
                }
                if AGGREGATES.contains(&name.as_str()) {
                    return self.aggregate_call(&name, &call, f.filter.as_deref(), scope);
                }
                if !call.order_by.is_empty() {
                    return Err(not_an_aggregate("ORDER BY", &name));
                }
                if call.distinct {
                    return Err(not_an_aggregate("DISTINCT", &name));
                }
                if call.star {
                    return Err(not_an_aggregate(&format!("{name}(*)"), &name));
                }
                call.exprs
            }
        };
        if let Some(over) = &f.over {
            let call = CallArgs::default();
            return self.window_call(&name, &call, f.filter.as_deref(), over, scope);
        }
        if AGGREGATES.contains(&name.as_str()) {
            let call = CallArgs::default();
            return self.aggregate_call(&name, &call, f.filter.as_deref(), scope);
        }
        if f.filter.is_some() {
            return Err(not_an_aggregate("FILTER", &name));
        }
        if crate::is_session_function(&name) {
            return Err(crate::bind_session_functions::not_alone(&name));
        }
        if let Some(call) = self.json_call(&name, &args, scope) {
            return call;
        }
        if let Some(call) = self.array_call(&name, &args, scope) {
            return call;
        }
        if let Some(call) = self.enum_call(&name, &args, scope) {
            return call;
        }
        let mut bound = Vec::with_capacity(args.len());
        let fixed = |v: Value, ty: DataType| Ok(Expr::Literal(v, ty));
        match (name.as_str(), args.len()) {
            (
                "now"
                | "current_timestamp"
                | "transaction_timestamp"
                | "statement_timestamp"
                | "localtimestamp",
                0,
            ) => {
                return Ok(Expr::Function {
                    func: Func::Now,
                    args: Vec::new(),
                    ty: DataType::TimestampTz,
                })
            }
            // age(ts) is age(current_date, ts): from midnight today.
            ("age", 1 | 2) => {
                let mut bound = Vec::with_capacity(2);
                for a in &args {
                    let value = self.expr(a, scope, None)?;
                    let value = self.coerce(value, DataType::TimestampTz)?;
                    if !matches!(
                        value.ty(),
                        DataType::Timestamp | DataType::TimestampTz | DataType::Date
                    ) {
                        return Err(SqlError::new(
                            ErrorKind::UndefinedFunction,
                            format!("function age({}) does not exist", value.ty().pg_name()),
                        ));
                    }
                    bound.push(value);
                }
                if bound.len() == 1 {
                    bound.insert(0, now_as(DataType::Date));
                }
                return Ok(Expr::Function {
                    func: Func::Age,
                    args: bound,
                    ty: DataType::Interval,
                });
            }
            // The session's time zone is UTC, so the local time of day is UTC's.
            ("localtime", 0) => return Ok(now_as(DataType::Time)),
            ("current_date", 0) => return Ok(now_as(DataType::Date)),
            ("current_database" | "current_catalog", 0) => {
                return fixed(Value::text("ledger"), DataType::Name)
            }
            ("current_schema", 0) => return fixed(Value::text("public"), DataType::Name),
            ("current_user" | "session_user" | "user", 0) => {
                return fixed(Value::text("ledger"), DataType::Name)
            }
            ("current_schemas", 1) => {
                return fixed(
                    Value::Array(vec![Value::text("pg_catalog"), Value::text("public")]),
                    DataType::TextArray,
                )
            }
            ("version", 0) => {
                return fixed(
                    Value::text(format!(
                        "PostgreSQL 15.0 (hotledger {})",
                        env!("CARGO_PKG_VERSION")
                    )),
                    DataType::Text,
                )
            }
            // The argument's type is known here; PostgreSQL's result is a regtype, shown as
            // this name.
            ("pg_typeof", 1) => {
                let ty = self.expr(&args[0], scope, None)?.ty();
                return fixed(Value::Text(ty.pg_name()), DataType::Text);
            }
            // Its rows are the relation and the tables it is a partition of; no table here is
            // a partition, so the one row is the relation itself.
            ("pg_partition_ancestors", 1) => {
                let arg = self.expr(&args[0], scope, None)?;
                return match arg {
                    Expr::Literal(Value::Text(name), _) => self.regclass_of_name(&name),
                    other => Ok(other),
                };
            }
            ("pg_backend_pid", 0) => {
                return fixed(Value::Int(self.backend_pid as i64), DataType::Int4)
            }
            (
                "pg_table_is_visible"
                | "pg_function_is_visible"
                | "pg_type_is_visible"
                | "has_table_privilege"
                | "has_schema_privilege",
                _,
            ) => return fixed(Value::Bool(true), DataType::Bool),
            ("pg_get_userbyid", 1) => return fixed(Value::text("ledger"), DataType::Name),
            // There are no triggers (pg_trigger is empty): nothing to describe.
            ("pg_get_triggerdef", 1 | 2) => return fixed(Value::Null, DataType::Text),
            ("pg_relation_is_publishable", 1) => return fixed(Value::Bool(false), DataType::Bool),
            ("pg_encoding_to_char", 1) => return fixed(Value::text("UTF8"), DataType::Name),
            // Procedures return nothing; there are no stored functions.
            ("pg_get_function_result", 1) => return fixed(Value::Null, DataType::Text),
            (
                "pg_get_statisticsobjdef_columns"
                | "obj_description"
                | "col_description"
                | "shobj_description",
                _,
            ) => return fixed(Value::Null, DataType::Text),
            ("uuid_nil", 0) => return fixed(Value::Uuid([0; 16]), DataType::Uuid),
            _ => {}
        }
        let (func, ty) = match name.as_str() {
            "coalesce" | "greatest" | "least" => {
                for a in &args {
                    bound.push(self.expr(a, scope, expected)?);
                }
                let construct = name.to_ascii_uppercase();
                let (converted, ty) = self.resolve_common_type(bound, &construct, expected)?;
                bound = converted;
                let func = match name.as_str() {
                    "coalesce" => Func::Coalesce,
                    "greatest" => Func::Greatest,
                    _ => Func::Least,
                };
                // They compare values as such; an enum orders by its labels' positions.
                if func != Func::Coalesce && matches!(ty, DataType::Enum(_)) {
                    return Err(SqlError::feature_not_supported(format!(
                        "{name}() of an enum type"
                    )));
                }
                (func, ty)
            }
            "date_trunc" | "date_part" => {
                let [field, value] = args.as_slice() else {
                    return Err(wrong_args(&name));
                };
                let field = self.expr(field, scope, Some(DataType::Text))?;
                let value = self.datetime_argument(value, scope, &name)?;
                let ty = match (name.as_str(), value.ty()) {
                    ("date_part", _) => DataType::Float8,
                    (_, DataType::Timestamp) => DataType::Timestamp,
                    (_, DataType::TimestampTz | DataType::Date) => DataType::TimestampTz,
                    _ => return Err(SqlError::feature_not_supported("date_trunc of an interval")),
                };
                let func = if name == "date_part" {
                    Func::DatePart
                } else {
                    Func::DateTrunc
                };
                bound = vec![field, value];
                (func, ty)
            }
            // PostgreSQL compares with `=`, which promotes the first argument when the
            // second's type is wider (NULLIF(1, 2.2) is numeric): its result is that type.
            "nullif" => {
                let (l, r) = match args.as_slice() {
                    [a, b] => self.comparable(a, b, scope)?,
                    _ => return Err(wrong_args(&name)),
                };
                let (converted, ty) = self.resolve_common_type(vec![l, r], "NULLIF", None)?;
                bound = converted;
                (Func::NullIf, ty)
            }
            _ => {
                for a in &args {
                    bound.push(self.expr(a, scope, None)?);
                }
                let types: Vec<DataType> = bound.iter().map(|b| b.ty()).collect();
                if let Some(signature) = scalar_functions::signature(&name, &types) {
                    let signature = signature?;
                    let mut coerced = Vec::with_capacity(bound.len());
                    for (b, want) in bound.drain(..).zip(&signature.args) {
                        coerced.push(self.coerce(b, *want)?);
                    }
                    return Ok(Expr::Function {
                        func: signature.func,
                        args: coerced,
                        ty: signature.result,
                    });
                }
                let first = bound.first().map(|b| b.ty()).unwrap_or(DataType::Unknown);
                let (func, ty, arity) = match name.as_str() {
                    "lower" => (Func::Lower, DataType::Text, 1..=1),
                    "upper" => (Func::Upper, DataType::Text, 1..=1),
                    "length" | "char_length" | "character_length" | "octet_length" => {
                        (Func::Length, DataType::Int4, 1..=1)
                    }
                    "abs" => (Func::Abs, first, 1..=1),
                    "round" => (Func::Round, first, 1..=2),
                    "trunc" => (Func::Trunc, first, 1..=2),
                    "floor" => (Func::Floor, first, 1..=1),
                    "ceil" | "ceiling" => (Func::Ceil, first, 1..=1),
                    "substr" | "substring" => (Func::Substring, DataType::Text, 2..=3),
                    "concat" => (Func::Concat, DataType::Text, 0..=100),
                    "array_position" => (Func::ArrayPosition, DataType::Int4, 2..=2),
                    "array_to_string" => (Func::ArrayToString, DataType::Text, 2..=2),
                    "array_upper" => (Func::ArrayUpper, DataType::Int4, 2..=2),
                    "repeat" => (Func::Repeat, DataType::Text, 2..=2),
                    "replace" => (Func::Replace, DataType::Text, 3..=3),
                    "left" => (Func::Left, DataType::Text, 2..=2),
                    "right" => (Func::Right, DataType::Text, 2..=2),
                    "btrim" => (Func::TrimBoth, DataType::Text, 1..=2),
                    "ltrim" => (Func::TrimLeading, DataType::Text, 1..=2),
                    "rtrim" => (Func::TrimTrailing, DataType::Text, 1..=2),
                    "format_type" => (Func::FormatType, DataType::Text, 2..=2),
                    "pg_get_expr" => (Func::GetExpr, DataType::Text, 2..=3),
                    "pg_get_indexdef" => (Func::GetIndexDef, DataType::Text, 1..=3),
                    "pg_get_constraintdef" => (Func::GetConstraintDef, DataType::Text, 1..=2),
                    "pg_get_viewdef" => (Func::GetViewDef, DataType::Text, 1..=2),
                    "pg_get_function_arguments" | "pg_get_function_identity_arguments" => {
                        (Func::GetFunctionArguments, DataType::Text, 1..=1)
                    }
                    "pg_relation_size" => (Func::RelationSize, DataType::Int8, 1..=2),
                    "pg_table_size" => (Func::TableSize, DataType::Int8, 1..=1),
                    "pg_indexes_size" => (Func::IndexesSize, DataType::Int8, 1..=1),
                    "pg_total_relation_size" => (Func::TotalRelationSize, DataType::Int8, 1..=1),
                    "pg_size_pretty" => (Func::SizePretty, DataType::Text, 1..=1),
                    "nextval" => (Func::NextVal, DataType::Int8, 1..=1),
                    "currval" => (Func::CurrVal, DataType::Int8, 1..=1),
                    "setval" => (Func::SetVal, DataType::Int8, 2..=3),
                    "lastval" => (Func::LastVal, DataType::Int8, 0..=0),
                    "pg_get_serial_sequence" => (Func::GetSerialSequence, DataType::Text, 2..=2),
                    "quote_ident" => (Func::QuoteIdent, DataType::Text, 1..=1),
                    "to_regtype" => (Func::ToRegType, DataType::Oid, 1..=1),
                    "random" => (Func::Random, DataType::Float8, 0..=0),
                    "pg_cancel_backend" => (Func::CancelBackend, DataType::Bool, 1..=1),
                    "pg_terminate_backend" => (Func::TerminateBackend, DataType::Bool, 1..=2),
                    "gen_random_uuid" | "uuid_generate_v4" => {
                        (Func::GenRandomUuid, DataType::Uuid, 0..=0)
                    }
                    _ => {
                        return Err(SqlError::new(
                            ErrorKind::UndefinedFunction,
                            format!("function {name}() does not exist"),
                        ))
                    }
                };
                if !arity.contains(&bound.len()) {
                    return Err(wrong_args(&name));
                }
                let ty = if ty == DataType::Unknown {
                    DataType::UNCONSTRAINED_NUMERIC
                } else {
                    ty
                };
                let mut coerced = Vec::with_capacity(bound.len());
                for (i, b) in bound.drain(..).enumerate() {
                    // The size functions take a regclass: a quoted name is a relation's.
                    if let (true, 0, Expr::Literal(Value::Text(name), DataType::Unknown)) =
                        (func.reads_storage(), i, &b)
                    {
                        coerced.push(self.regclass_of_name(name)?);
                        continue;
                    }
                    // A sequence is named by text or regclass; a quoted name is checked now.
                    if func.uses_sequences() && i == 0 {
                        if let Expr::Literal(Value::Text(name), _) = &b {
                            self.catalog.sequence_named(&Value::Text(name.clone()))?;
                        }
                        if b.ty() != DataType::Oid {
                            coerced.push(self.coerce(b, DataType::Text)?);
                        } else {
                            coerced.push(b);
                        }
                        continue;
                    }
                    let want = match func {
                        Func::GetExpr if i == 0 => DataType::Text,
                        Func::FormatType
                        | Func::GetExpr
                        | Func::GetIndexDef
                        | Func::GetConstraintDef
                        | Func::GetViewDef
                        | Func::GetFunctionArguments
                        | Func::TableSize
                        | Func::IndexesSize
                        | Func::TotalRelationSize
                        | Func::SizePretty => DataType::Int8,
                        // pg_relation_size(oid, fork): only the main fork exists.
                        Func::RelationSize if i == 0 => DataType::Int8,
                        Func::ArrayUpper if i > 0 => DataType::Int4,
                        Func::SetVal if i == 1 => DataType::Int8,
                        Func::CancelBackend | Func::TerminateBackend if i == 0 => DataType::Int4,
                        // pg_terminate_backend's timeout: it returns at once here.
                        Func::TerminateBackend => DataType::Int8,
                        Func::SetVal => DataType::Bool,
                        Func::Repeat | Func::Left | Func::Right if i > 0 => DataType::Int4,
                        Func::ArrayUpper => DataType::Unknown,
                        Func::Round | Func::Trunc | Func::Substring if i > 0 => DataType::Int4,
                        Func::Abs | Func::Round | Func::Trunc | Func::Floor | Func::Ceil => ty,
                        _ => DataType::Text,
                    };
                    coerced.push(self.coerce(b, want)?);
                }
                bound = coerced;
                (func, ty)
            }
        };
        if func == Func::FormatType {
            bound.extend(self.enum_names());
        }
        Ok(Expr::Function {
            func,
            args: bound,
            ty,
        })
    }

    fn aggregate_call(
        &mut self,
        name: &str,
        call: &CallArgs,
        filter: Option<&ast::Expr>,
        scope: &Scope,
    ) -> SqlResult<Expr> {
        let Some(mut ctx) = self.aggregate.take() else {
            return Err(SqlError::new(
                ErrorKind::GroupingError,
                format!("aggregate function {name}() is not allowed here"),
            ));
        };
        if name == "grouping" {
            let grouping = crate::grouping_sets::grouping_call(&mut ctx, call, scope);
            self.aggregate = Some(ctx);
            return grouping;
        }
        // Arguments see the rows before grouping, and no window functions.
        let window = self.window.take();
        let input_scope = ctx.input_scope.clone();
        let json_aggregate = crate::bind_json::JsonAggregate::of(name);
        let mut json_structured = false;
        let mut enum_extreme = None;
        let result = (|| -> SqlResult<(AggCall, Option<AggregateOrder>)> {
            let mut bound = Vec::new();
            for a in &call.exprs {
                // `json_agg(t)`: a whole row, as an object.
                if let Some(row) =
                    json_aggregate.and_then(|j| self.whole_row(a, &input_scope, j.result()))
                {
                    bound.push(row);
                    continue;
                }
                bound.push(self.expr(a, &input_scope, None).map_err(|e| {
                    if e.kind == ErrorKind::WindowingError && e.message == NOT_ALLOWED_HERE {
                        SqlError::new(
                            ErrorKind::GroupingError,
                            "aggregate function calls cannot contain window function calls",
                        )
                    } else {
                        e
                    }
                })?);
            }
            // The JSON aggregates are array_agg of their elements, then a last step.
            // A FILTER leaves their element NULL, which the last step skips.
            let (name, bound, filter) = match json_aggregate {
                Some(j) if !call.star => {
                    let element = j.element(self, bound)?;
                    json_structured = crate::bind_json::JsonAggregate::structured(&element);
                    let element = match filter {
                        Some(f) => {
                            let condition = self.expr(f, &input_scope, Some(DataType::Bool))?;
                            let ty = element.ty();
                            Expr::Case {
                                operand: None,
                                whens: vec![(condition, element)],
                                otherwise: None,
                                ty,
                            }
                        }
                        None => element,
                    };
                    ("array_agg", vec![element], None)
                }
                _ => (name, bound, filter),
            };
            // min and max of an enum: of its labels' positions, then the label there.
            let bound = match (name, bound.as_slice()) {
                ("min" | "max", [value]) if matches!(value.ty(), DataType::Enum(_)) => {
                    enum_extreme = Some(value.ty());
                    bound.into_iter().map(|v| self.ordered(v)).collect()
                }
                _ => bound,
            };
            let (func, ty) = aggregate_signature(name, call.star, &bound)?;
            let (func, args) = match filter {
                Some(f) => {
                    let condition = self.expr(f, &input_scope, Some(DataType::Bool))?;
                    filtered(func, bound, condition)?
                }
                None => (func, bound),
            };
            let mut order = None;
            if !call.order_by.is_empty() {
                let mut keys = Vec::new();
                for o in &call.order_by {
                    let key = self.expr(&o.expr, &input_scope, None)?;
                    keys.push(self.sort_key(key, o));
                }
                let text = call
                    .order_by
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ");
                order = Some((text, keys));
            }
            Ok((
                AggCall {
                    func,
                    args,
                    distinct: call.distinct,
                    ty,
                },
                order,
            ))
        })();
        self.window = window;
        let (call, order) = match result {
            Ok(bound) => bound,
            Err(e) => {
                self.aggregate = Some(ctx);
                return Err(e);
            }
        };
        // One ORDER BY orders the input of every aggregate of the query: the aggregates
        // that care (string_agg) see their rows in that order, the others do not mind.
        if let Some((text, keys)) = order {
            match &ctx.input_order {
                Some((other, _)) if *other != text => {
                    self.aggregate = Some(ctx);
                    return Err(SqlError::feature_not_supported(
                        "aggregates ordered differently in one query",
                    ));
                }
                Some(_) => {}
                None => ctx.input_order = Some((text, keys)),
            }
        }
        let ty = call.ty;
        let position = scope.outer_len + ctx.groups.len() + ctx.aggregates.len();
        ctx.aggregates.push(call);
        self.aggregate = Some(ctx);
        let column = Expr::Column(position, ty);
        Ok(match (json_aggregate, enum_extreme) {
            (Some(j), _) => j.finish(column, json_structured),
            (None, Some(ty)) => self.enum_at(column, ty),
            (None, None) => column,
        })
    }
}

impl Binder<'_> {
    /// `percentile_cont(f)`, `percentile_disc(f)` and `mode()` `WITHIN GROUP (ORDER BY x)`:
    /// the group's `array_agg(x)`, then a last step that orders the values and picks (an
    /// ordered aggregate of its own, so it does not share the query's one input order).
    fn ordered_set_aggregate(
        &mut self,
        name: &str,
        f: &ast::Function,
        scope: &Scope,
    ) -> SqlResult<Expr> {
        let func = match name {
            "percentile_cont" => Func::PercentileCont,
            "percentile_disc" => Func::PercentileDisc,
            "mode" => Func::Mode,
            // As PostgreSQL, which looks for an ordered-set aggregate of that name.
            _ => {
                return Err(SqlError::new(
                    ErrorKind::UndefinedFunction,
                    format!("function {name}(...) WITHIN GROUP (ORDER BY ...) does not exist"),
                ))
            }
        };
        let [order] = f.within_group.as_slice() else {
            return Err(SqlError::feature_not_supported(
                "WITHIN GROUP with more than one ORDER BY expression",
            ));
        };
        if f.over.is_some() {
            return Err(SqlError::new(
                ErrorKind::WrongObjectType,
                format!("OVER is not supported for ordered-set aggregate {name}"),
            ));
        }
        let direct = unnamed_args(f).ok_or_else(|| wrong_args(name))?;
        let fraction = match (func, direct.as_slice()) {
            (Func::Mode, []) => None,
            (Func::PercentileCont | Func::PercentileDisc, [fraction]) => Some(*fraction),
            _ => return Err(wrong_args(name)),
        };
        // The last step skips NULLs, so a FILTER is a CASE that leaves the others out.
        let value = match f.filter.as_deref() {
            Some(condition) => ast::Expr::Case {
                case_token: ast::helpers::attached_token::AttachedToken::empty(),
                end_token: ast::helpers::attached_token::AttachedToken::empty(),
                operand: None,
                conditions: vec![ast::CaseWhen {
                    condition: condition.clone(),
                    result: order.expr.clone(),
                }],
                else_result: None,
            },
            None => order.expr.clone(),
        };
        let call = CallArgs {
            exprs: vec![value],
            ..CallArgs::default()
        };
        let values = self.aggregate_call("array_agg", &call, None, scope)?;
        let element = values.ty().element().unwrap_or(DataType::Text);
        let ty = match func {
            Func::PercentileCont if element.is_numeric_family() => DataType::Float8,
            Func::PercentileCont => {
                return Err(SqlError::new(
                    ErrorKind::UndefinedFunction,
                    format!(
                        "function percentile_cont(double precision ORDER BY {}) does not exist",
                        element.pg_name()
                    ),
                ))
            }
            _ => element,
        };
        let descending = Expr::literal(Value::Bool(matches!(
            order.options.sort,
            Some(ast::OrderBySort::Desc)
        )));
        let mut args = Vec::new();
        if let Some(fraction) = fraction {
            let bound = self.expr(fraction, scope, Some(DataType::Float8))?;
            args.push(self.coerce(bound, DataType::Float8)?);
        }
        args.push(values);
        args.push(descending);
        Ok(Expr::Function { func, args, ty })
    }
}

/// A function call's argument list: expressions, `*`, DISTINCT and an ORDER BY inside.
#[derive(Default)]
pub(crate) struct CallArgs {
    pub exprs: Vec<ast::Expr>,
    pub distinct: bool,
    pub star: bool,
    pub order_by: Vec<ast::OrderByExpr>,
}

impl CallArgs {
    fn of(name: &str, list: &ast::FunctionArgumentList) -> SqlResult<CallArgs> {
        let mut call = CallArgs {
            distinct: matches!(
                list.duplicate_treatment,
                Some(ast::DuplicateTreatment::Distinct)
            ),
            ..CallArgs::default()
        };
        for a in &list.args {
            match a {
                ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) => {
                    call.exprs.push(x.clone())
                }
                ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard) => call.star = true,
                _ => {
                    return Err(SqlError::feature_not_supported(format!(
                        "this argument form in {name}()"
                    )))
                }
            }
        }
        for clause in &list.clauses {
            match clause {
                ast::FunctionArgumentClause::OrderBy(keys) => call.order_by.extend(keys.clone()),
                other => {
                    return Err(SqlError::feature_not_supported(format!(
                        "{} in the arguments of {name}()",
                        truncate(&other.to_string())
                    )))
                }
            }
        }
        Ok(call)
    }
}

/// The aggregate function `name` over arguments of these types, and its result type.
pub(crate) fn aggregate_signature(
    name: &str,
    star: bool,
    bound: &[Expr],
) -> SqlResult<(AggFunc, DataType)> {
    let first_ty = bound.first().map(|b| b.ty()).unwrap_or(DataType::Unknown);
    let (func, ty) = match (name, star, bound.len()) {
        ("count", true, 0) => (AggFunc::CountStar, DataType::Int8),
        ("count", false, 1) => (AggFunc::Count, DataType::Int8),
        ("sum", false, 1) => (
            AggFunc::Sum,
            match first_ty {
                DataType::Int2 | DataType::Int4 => DataType::Int8,
                DataType::Float4 | DataType::Float8 => DataType::Float8,
                _ => DataType::UNCONSTRAINED_NUMERIC,
            },
        ),
        ("avg", false, 1) => (
            AggFunc::Avg,
            if matches!(first_ty, DataType::Float4 | DataType::Float8) {
                DataType::Float8
            } else {
                DataType::UNCONSTRAINED_NUMERIC
            },
        ),
        ("min", false, 1) => (AggFunc::Min, first_ty),
        ("max", false, 1) => (AggFunc::Max, first_ty),
        ("bool_and" | "every", false, 1) => (AggFunc::BoolAnd, DataType::Bool),
        ("bool_or", false, 1) => (AggFunc::BoolOr, DataType::Bool),
        ("string_agg", false, 2) => (AggFunc::StringAgg, DataType::Text),
        ("array_agg", false, 1) => {
            let element = if first_ty == DataType::Unknown {
                DataType::Text
            } else {
                first_ty
            };
            match element.array_of() {
                Some(array) => (AggFunc::ArrayAgg, array),
                None => {
                    return Err(SqlError::feature_not_supported(format!(
                        "array_agg of {}",
                        element.pg_name()
                    )))
                }
            }
        }
        _ => return Err(wrong_args(name)),
    };
    if matches!(func, AggFunc::Sum | AggFunc::Avg)
        && !first_ty.is_numeric_family()
        && first_ty != DataType::Unknown
    {
        return Err(SqlError::new(
            ErrorKind::UndefinedFunction,
            format!("function {name}({}) does not exist", first_ty.pg_name()),
        ));
    }
    Ok((func, ty))
}

/// `agg(x, ...) FILTER (WHERE condition)` as `agg(CASE WHEN condition THEN x END, ...)`:
/// every aggregate here skips a row whose first argument is NULL, so a row the condition
/// rejects counts for nothing; `count(*)` becomes `count(CASE WHEN condition THEN 1 END)`.
pub(crate) fn filtered(
    func: AggFunc,
    mut args: Vec<Expr>,
    condition: Expr,
) -> SqlResult<(AggFunc, Vec<Expr>)> {
    let (func, first) = match func {
        // It keeps NULLs, so the rewrite would not drop the rejected rows.
        AggFunc::ArrayAgg => return Err(SqlError::feature_not_supported("FILTER on array_agg")),
        AggFunc::CountStar => (AggFunc::Count, Expr::literal(Value::Int(1))),
        _ if args.is_empty() => return Ok((func, args)),
        _ => (func, args.remove(0)),
    };
    let ty = first.ty();
    args.insert(
        0,
        Expr::Case {
            operand: None,
            whens: vec![(condition, first)],
            otherwise: None,
            ty,
        },
    );
    Ok((func, args))
}

fn not_an_aggregate(clause: &str, name: &str) -> SqlError {
    SqlError::new(
        ErrorKind::WrongObjectType,
        format!("{clause} specified, but {name} is not an aggregate function"),
    )
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

fn check_comparable(l: &Expr, r: &Expr, op: BinaryOp) -> SqlResult<()> {
    let (a, b) = (l.ty(), r.ty());
    let family = |t: DataType| -> u8 {
        if t.is_numeric_family() {
            1
        } else if t.is_text_family() || t == DataType::CatalogChar {
            2
        } else {
            match t {
                DataType::Bool => 3,
                DataType::Timestamp | DataType::TimestampTz | DataType::Date => 4,
                DataType::Bytea => 5,
                t if t.element().is_some() => 6,
                DataType::Interval => 7,
                DataType::Jsonb => 8,
                DataType::Uuid => 9,
                DataType::Time => 10,
                _ => 0,
            }
        }
    };
    // `json` has no comparison operators (jsonb has).
    if a == DataType::Json || b == DataType::Json {
        return Err(no_operator(a, op, b));
    }
    // An enum compares with its own type only.
    if matches!(a, DataType::Enum(_)) || matches!(b, DataType::Enum(_)) {
        return match a == b || a == DataType::Unknown || b == DataType::Unknown {
            true => Ok(()),
            false => Err(no_operator(a, op, b)),
        };
    }
    if a == DataType::Unknown || b == DataType::Unknown || family(a) == family(b) {
        return Ok(());
    }
    Err(no_operator(a, op, b))
}

/// 42883 for an operator no operand types of this kind have.
fn no_operator(a: DataType, op: BinaryOp, b: DataType) -> SqlError {
    SqlError::new(
        ErrorKind::UndefinedFunction,
        format!(
            "operator does not exist: {} {} {}",
            a.pg_name(),
            op.symbol(),
            b.pg_name()
        ),
    )
}

fn is_temporal(ty: DataType) -> bool {
    matches!(
        ty,
        DataType::Timestamp
            | DataType::TimestampTz
            | DataType::Date
            | DataType::Interval
            | DataType::Time
    )
}

/// The statement's time as `ty` (today's date, the time of day).
fn now_as(ty: DataType) -> Expr {
    Expr::Cast {
        expr: Box::new(Expr::Function {
            func: Func::Now,
            args: Vec::new(),
            ty: DataType::TimestampTz,
        }),
        ty,
    }
}

fn wrong_args(name: &str) -> SqlError {
    SqlError::new(
        ErrorKind::UndefinedFunction,
        format!("function {name} with these arguments does not exist"),
    )
}

fn truncate(s: &str) -> String {
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
