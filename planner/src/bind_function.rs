//! Binding function calls: scalar functions (by name and argument types, through
//! `plan::scalar_functions::signature` and the JSON functions), aggregates with DISTINCT,
//! FILTER and ORDER BY inside, and the ordered-set aggregates (`WITHIN GROUP`).

use std::sync::Arc;

use plan::{scalar_functions, AggCall, AggFunc, Expr, Func, SubqueryKind};
use sql::ast;
use sql::{DataType, ErrorKind, SqlError, SqlResult, Value};

use crate::bind::Binder;
use crate::bind_expr::*;
use crate::bind_window::NOT_ALLOWED_HERE;
use crate::scope::Scope;

impl Binder<'_> {
    pub(crate) fn function(
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
            ("current_user" | "user" | "current_role", 0) => {
                return fixed(Value::text(self.role_name()), DataType::Name)
            }
            ("session_user", 0) => {
                return fixed(Value::text(self.session_role_name()), DataType::Name)
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
            ("pg_table_is_visible" | "pg_function_is_visible" | "pg_type_is_visible", _) => {
                return fixed(Value::Bool(true), DataType::Bool)
            }
            (
                "has_table_privilege"
                | "has_sequence_privilege"
                | "has_schema_privilege"
                | "has_database_privilege"
                | "has_function_privilege"
                | "pg_has_role",
                2 | 3,
            ) => return self.privilege_inquiry(&name, &args, scope),
            ("pg_get_userbyid", 1) => {
                let oid = self.expr(&args[0], scope, None)?;
                return match oid {
                    Expr::Literal(Value::Int(oid), _) => fixed(
                        Value::Text(self.catalog.authorization.role_name(oid as u32)),
                        DataType::Name,
                    ),
                    _ => self.role_name_of(oid),
                };
            }
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
                        if let Expr::Literal(name @ (Value::Text(_) | Value::Int(_)), _) = &b {
                            let sequence = self.catalog.sequence_named(name)?.clone();
                            self.need_on_sequence(func, &sequence);
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
