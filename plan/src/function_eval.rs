//! Calling a function: `eval_function` evaluates the arguments, returns NULL for a strict
//! function given a NULL, and hands the values to the group the function belongs to — one
//! function per group below, the rest in `scalar_functions` and `json_functions`. The
//! dispatch is one exhaustive match, so a new `Func` does not compile until it has a group.

use std::cmp::Ordering;

use sql::datetime;
use sql::{DataType, ErrorKind, Numeric, SqlError, SqlResult, Value};

use crate::catalog::Catalog;
use crate::enum_type::invalid_label;
use crate::eval_env::EvalEnv;
use crate::expr::{
    compare_values, float_of, int_overflow, text_of, type_of_name, undefined_type, CastToResult,
    Expr, Func,
};
use crate::json_functions::{self, JsonFunc};
use crate::{scalar_functions, system};

pub(crate) fn eval_function(
    func: Func,
    args: &[Expr],
    ty: DataType,
    row: &[Value],
    env: &EvalEnv<'_>,
) -> SqlResult<Value> {
    if func == Func::Coalesce {
        for a in args {
            let v = a.eval(row, env)?;
            if !v.is_null() {
                return v.cast_to_result(ty);
            }
        }
        return Ok(Value::Null);
    }
    let values: Vec<Value> = args
        .iter()
        .map(|a| a.eval(row, env))
        .collect::<SqlResult<_>>()?;
    if is_strict(func) && values.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    match func {
        Func::Now
        | Func::Random
        | Func::GenRandomUuid
        | Func::CancelBackend
        | Func::TerminateBackend
        | Func::NextVal
        | Func::SetVal
        | Func::CurrVal
        | Func::LastVal => session_function(func, values, env),
        Func::PercentileCont | Func::PercentileDisc | Func::Mode => {
            ordered_set_function(func, values)
        }
        Func::ArrayContains
        | Func::ArrayOverlap
        | Func::ArrayRemove
        | Func::ArrayPosition
        | Func::ArraySubscript
        | Func::MakeArray
        | Func::ArrayUpper
        | Func::ArrayToString => array_function(func, values),
        Func::Lower
        | Func::Upper
        | Func::Length
        | Func::Substring
        | Func::Concat
        | Func::QuoteIdent
        | Func::Repeat
        | Func::Replace
        | Func::Left
        | Func::Right
        | Func::TrimBoth
        | Func::TrimLeading
        | Func::TrimTrailing => text_function(func, values),
        Func::NullIf
        | Func::Abs
        | Func::Round
        | Func::Trunc
        | Func::Floor
        | Func::Ceil
        | Func::Greatest
        | Func::Least => number_function(func, values, ty),
        Func::Age | Func::DateTrunc | Func::Extract | Func::DatePart => time_function(func, values),
        Func::EnumIn
        | Func::EnumPosition
        | Func::FormatType
        | Func::GetExpr
        | Func::RelationSize
        | Func::TableSize
        | Func::IndexesSize
        | Func::TotalRelationSize
        | Func::SizePretty
        | Func::RegClassOid
        | Func::ToRegType
        | Func::RegTypeName
        | Func::GetSerialSequence
        | Func::GetIndexDef
        | Func::GetConstraintDef
        | Func::RegClassName
        | Func::GetFunctionArguments
        | Func::GetViewDef => catalog_function(func, values, ty, env),
        Func::HasPrivilege => match env.subqueries.catalog() {
            Some(catalog) => crate::privilege_functions::has_privilege(catalog, &values),
            None => Ok(Value::Null),
        },
        Func::UserById => Ok(match (values.first(), env.subqueries.catalog()) {
            (Some(Value::Int(oid)), Some(catalog)) => {
                Value::Text(crate::privilege_functions::user_by_id(catalog, *oid))
            }
            _ => Value::Null,
        }),
        Func::Lpad
        | Func::Rpad
        | Func::SplitPart
        | Func::Strpos
        | Func::Initcap
        | Func::Reverse
        | Func::StartsWith
        | Func::Chr
        | Func::Ascii
        | Func::Translate
        | Func::ConcatWs
        | Func::ToHex
        | Func::Md5
        | Func::Format
        | Func::QuoteLiteral
        | Func::QuoteNullable
        | Func::RegexpMatch
        | Func::RegexpSplitToArray
        | Func::Sqrt
        | Func::Cbrt
        | Func::Exp
        | Func::Ln
        | Func::Log10
        | Func::Log
        | Func::Power
        | Func::Pi
        | Func::Sign
        | Func::Mod
        | Func::Div
        | Func::ArrayLength
        | Func::Cardinality
        | Func::StringToArray
        | Func::RegexpReplace
        | Func::ToTimestamp
        | Func::MakeDate
        | Func::ToChar => scalar_functions::eval(func, &values, ty),
        Func::Coalesce => Ok(Value::Null),
        Func::Json(f) => {
            let types: Vec<DataType> = args.iter().map(Expr::ty).collect();
            json_functions::eval(f, &values, &types, ty)
        }
        Func::JsonBuildObject => {
            let types: Vec<DataType> = args.iter().map(Expr::ty).collect();
            json_functions::eval(JsonFunc::BuildObject, &values, &types, DataType::Json)
        }
    }
}

/// Whether a NULL argument makes the result NULL without calling the function (PostgreSQL's
/// STRICT).
fn is_strict(func: Func) -> bool {
    !matches!(
        func,
        Func::Now
            | Func::Random
            | Func::Greatest
            | Func::Least
            | Func::Concat
            | Func::NullIf
            | Func::ArrayPosition
            | Func::MakeArray
            | Func::ConcatWs
            | Func::StringToArray
            | Func::LastVal
            // format_type(oid, NULL) is the type's name without a modifier, as in PostgreSQL
            // (where the function is not strict either).
            | Func::FormatType
            | Func::JsonBuildObject
            | Func::ArrayRemove
            | Func::Format
            | Func::QuoteNullable
    ) && !matches!(func, Func::Json(f) if f.takes_nulls())
}

/// Functions of the session and the moment: the time, random draws, sequences, signals to
/// other backends.
fn session_function(func: Func, values: Vec<Value>, env: &EvalEnv<'_>) -> SqlResult<Value> {
    let arg = |i: usize| values.get(i).cloned().unwrap_or(Value::Null);
    Ok(match func {
        Func::Now => Value::TimestampTz(env.now_micros),
        Func::Random | Func::GenRandomUuid if !env.random => {
            return Err(SqlError::feature_not_supported(format!(
                "{}() here: random values are drawn in queries, in the values and defaults of INSERT and COPY and in the SET of UPDATE and ON CONFLICT DO UPDATE, not in a WHERE of a write, a procedure body or an added column's default (evaluated again by each replica)",
                if func == Func::Random { "random" } else { "gen_random_uuid" }
            )))
        }
        Func::Random => Value::Float(rand::random::<f64>()),
        Func::CancelBackend | Func::TerminateBackend => {
            let Value::Int(pid) = arg(0) else {
                return Ok(Value::Null);
            };
            let pid = i32::try_from(pid).unwrap_or(0);
            Value::Bool(env.backends.signal(pid, func == Func::TerminateBackend)?)
        }
        Func::GenRandomUuid => Value::Uuid(sql::uuid::version4(rand::random())),
        Func::NextVal => {
            let sequence = sequence_catalog(env)?.sequence_named(&arg(0))?;
            Value::Int(env.sequences.next_value(sequence)?)
        }
        Func::SetVal => {
            let sequence = sequence_catalog(env)?.sequence_named(&arg(0))?;
            let Value::Int(value) = arg(1) else {
                return Err(SqlError::mismatch("setval's value must be a bigint"));
            };
            let called = !matches!(arg(2), Value::Bool(false));
            Value::Int(env.sequences.set_value(sequence, value, called)?)
        }
        Func::CurrVal => {
            let sequence = sequence_catalog(env)?.sequence_named(&arg(0))?;
            match env.sequences.current_value(sequence.id) {
                Some(v) => Value::Int(v),
                None => {
                    return Err(SqlError::new(
                        ErrorKind::ObjectNotInPrerequisiteState,
                        format!(
                            "currval of sequence \"{}\" is not yet defined in this session",
                            sequence.name
                        ),
                    ))
                }
            }
        }
        Func::LastVal => match env
            .sequences
            .last_sequence()
            .and_then(|id| env.sequences.current_value(id))
        {
            Some(v) => Value::Int(v),
            None => {
                return Err(SqlError::new(
                    ErrorKind::ObjectNotInPrerequisiteState,
                    "lastval is not yet defined in this session",
                ))
            }
        },
        other => return Err(misrouted(other)),
    })
}

/// The final step of the ordered-set aggregates (`percentile_cont`, `percentile_disc`,
/// `mode`): the aggregated values arrive as one array, with its sort direction.
fn ordered_set_function(func: Func, values: Vec<Value>) -> SqlResult<Value> {
    let arg = |i: usize| values.get(i).cloned().unwrap_or(Value::Null);
    Ok(match func {
        Func::PercentileCont | Func::PercentileDisc => {
            let fraction = float_of(&arg(0));
            if !(0.0..=1.0).contains(&fraction) {
                return Err(SqlError::numeric_out_of_range(format!(
                    "percentile value {fraction} is not between 0 and 1"
                )));
            }
            let sorted = sorted_values(arg(1), &arg(2));
            if sorted.is_empty() {
                return Ok(Value::Null);
            }
            let last = (sorted.len() - 1) as f64;
            if func == Func::PercentileDisc {
                // The first value at or past the fraction of the rows.
                let at = (fraction * sorted.len() as f64).ceil() as usize;
                return Ok(sorted[at.saturating_sub(1)].clone());
            }
            let position = fraction * last;
            let (low, high) = (position.floor(), position.ceil());
            let (a, b) = (
                float_of(&sorted[low as usize]),
                float_of(&sorted[high as usize]),
            );
            Value::Float(a + (b - a) * (position - low))
        }
        Func::Mode => {
            // The most frequent value; among equally frequent ones, the first in order.
            let sorted = sorted_values(arg(0), &arg(1));
            let mut best: Option<(&Value, usize)> = None;
            let mut run: Option<(&Value, usize)> = None;
            for v in &sorted {
                run = match run {
                    Some((r, n)) if r.group_eq(v) => Some((r, n + 1)),
                    _ => Some((v, 1)),
                };
                if let Some((r, n)) = run {
                    if best.is_none_or(|(_, m)| n > m) {
                        best = Some((r, n));
                    }
                }
            }
            best.map_or(Value::Null, |(v, _)| v.clone())
        }
        other => return Err(misrouted(other)),
    })
}

/// Functions of arrays.
fn array_function(func: Func, values: Vec<Value>) -> SqlResult<Value> {
    let arg = |i: usize| values.get(i).cloned().unwrap_or(Value::Null);
    Ok(match func {
        Func::ArrayContains => {
            let (container, items) = (array_items(arg(0)), array_items(arg(1)));
            Value::Bool(items.iter().all(|x| {
                !x.is_null()
                    && container
                        .iter()
                        .any(|c| c.compare(x) == Some(Ordering::Equal))
            }))
        }
        Func::ArrayOverlap => {
            let (a, b) = (array_items(arg(0)), array_items(arg(1)));
            Value::Bool(
                a.iter()
                    .any(|x| b.iter().any(|y| x.compare(y) == Some(Ordering::Equal))),
            )
        }
        Func::ArrayRemove => match arg(0) {
            Value::Null => Value::Null,
            // Removes what IS NOT DISTINCT FROM the element (NULLs for a NULL).
            array => {
                let gone = arg(1);
                Value::Array(
                    array_items(array)
                        .into_iter()
                        .filter(|x| !x.group_eq(&gone))
                        .collect(),
                )
            }
        },
        Func::ArrayPosition => match (arg(0), arg(1)) {
            (Value::Array(items), needle) if !needle.is_null() => items
                .iter()
                .position(|x| x.compare(&needle) == Some(Ordering::Equal))
                .map(|p| Value::Int(p as i64 + 1))
                .unwrap_or(Value::Null),
            _ => Value::Null,
        },
        Func::ArraySubscript => match (arg(0), arg(1)) {
            (Value::Array(items), Value::Int(i)) if i >= 1 => {
                items.get(i as usize - 1).cloned().unwrap_or(Value::Null)
            }
            _ => Value::Null,
        },
        Func::MakeArray => Value::Array(values),
        Func::ArrayUpper => match arg(0) {
            Value::Array(items) if !items.is_empty() => Value::Int(items.len() as i64),
            _ => Value::Null,
        },
        Func::ArrayToString => match arg(0) {
            Value::Array(items) => {
                let sep = text_of(&arg(1));
                Value::Text(
                    items
                        .iter()
                        .filter(|v| !v.is_null())
                        .map(text_of)
                        .collect::<Vec<_>>()
                        .join(&sep),
                )
            }
            v => {
                return Err(SqlError::mismatch(format!(
                    "array_to_string of {}",
                    v.natural_type()
                )))
            }
        },
        other => return Err(misrouted(other)),
    })
}

/// Functions of text (the rest are `scalar_functions`).
fn text_function(func: Func, values: Vec<Value>) -> SqlResult<Value> {
    let arg = |i: usize| values.get(i).cloned().unwrap_or(Value::Null);
    Ok(match func {
        Func::Lower => Value::Text(text_of(&arg(0)).to_lowercase()),
        Func::Upper => Value::Text(text_of(&arg(0)).to_uppercase()),
        Func::Length => Value::Int(match arg(0) {
            Value::Bytes(b) => b.len() as i64,
            v => text_of(&v).chars().count() as i64,
        }),
        Func::Substring => {
            let s: Vec<char> = text_of(&arg(0)).chars().collect();
            let start = match arg(1) {
                Value::Int(i) => i,
                _ => 1,
            };
            let len = match arg(2) {
                Value::Int(i) if i < 0 => {
                    return Err(SqlError::new(
                        ErrorKind::InvalidParameterValue,
                        "negative substring length not allowed",
                    ))
                }
                Value::Int(i) => Some(i),
                _ => None,
            };
            let from = (start.saturating_sub(1).max(0) as usize).min(s.len());
            let to = match len {
                Some(l) => (start.saturating_sub(1).saturating_add(l).max(0) as usize).min(s.len()),
                None => s.len(),
            };
            Value::Text(if from < to {
                s[from..to].iter().collect()
            } else {
                String::new()
            })
        }
        Func::Concat => Value::Text(
            values
                .iter()
                .filter(|v| !v.is_null())
                .map(text_of)
                .collect(),
        ),
        Func::QuoteIdent => Value::Text(sql::quote_ident(&text_of(&arg(0)))),
        Func::Repeat => {
            let text = text_of(&arg(0));
            let times = match arg(1) {
                Value::Int(n) => n.max(0) as usize,
                v => {
                    return Err(SqlError::mismatch(format!(
                        "repeat count must be an integer, not {}",
                        v.natural_type()
                    )))
                }
            };
            check_text_length(text.len().saturating_mul(times))?;
            Value::Text(text.repeat(times))
        }
        Func::Replace => {
            let (text, from, to) = (text_of(&arg(0)), text_of(&arg(1)), text_of(&arg(2)));
            if to.len() > from.len() && !from.is_empty() {
                let grows = text.matches(&from).count() * (to.len() - from.len());
                check_text_length(text.len().saturating_add(grows))?;
            }
            Value::Text(text.replace(&from, &to))
        }
        Func::Left | Func::Right => {
            let chars: Vec<char> = text_of(&arg(0)).chars().collect();
            let n = match arg(1) {
                Value::Int(n) => n,
                v => {
                    return Err(SqlError::mismatch(format!(
                        "{} length must be an integer",
                        v.natural_type()
                    )))
                }
            };
            let len = chars.len() as i64;
            // A negative n counts from the other end, as in PostgreSQL.
            let keep = if n >= 0 { n.min(len) } else { (len + n).max(0) } as usize;
            let picked: String = if func == Func::Left {
                chars[..keep].iter().collect()
            } else {
                chars[chars.len() - keep..].iter().collect()
            };
            Value::Text(picked)
        }
        Func::TrimBoth | Func::TrimLeading | Func::TrimTrailing => {
            let text = text_of(&arg(0));
            let set: Vec<char> = match values.get(1) {
                Some(v) => text_of(v).chars().collect(),
                None => vec![' '],
            };
            let trimmed = match func {
                Func::TrimLeading => text.trim_start_matches(|c| set.contains(&c)),
                Func::TrimTrailing => text.trim_end_matches(|c| set.contains(&c)),
                _ => text.trim_matches(|c| set.contains(&c)),
            };
            Value::Text(trimmed.to_string())
        }
        other => return Err(misrouted(other)),
    })
}

/// Functions of numbers, and those that compare their arguments (`nullif`, `greatest`, `least`).
fn number_function(func: Func, values: Vec<Value>, ty: DataType) -> SqlResult<Value> {
    let arg = |i: usize| values.get(i).cloned().unwrap_or(Value::Null);
    Ok(match func {
        Func::NullIf => {
            let (a, b) = (arg(0), arg(1));
            if !a.is_null() && !b.is_null() && compare_values(&a, &b)? == Ordering::Equal {
                Value::Null
            } else {
                a
            }
        }
        Func::Abs => match arg(0) {
            Value::Int(i) => Value::Int(i.checked_abs().ok_or_else(int_overflow)?),
            Value::Float(f) => Value::Float(f.abs()),
            Value::Numeric(n) => Value::Numeric(n.abs()),
            v => return Err(SqlError::mismatch(format!("abs of {}", v.natural_type()))),
        },
        Func::Round | Func::Trunc => {
            let digits = match arg(1) {
                Value::Null => 0,
                Value::Int(d) => d,
                v => {
                    return Err(SqlError::mismatch(format!(
                        "round precision must be an integer, not {}",
                        v.natural_type()
                    )))
                }
            };
            match arg(0) {
                Value::Int(i) => Value::Int(i),
                Value::Float(f) => {
                    let scale = 10f64.powi(digits as i32);
                    Value::Float(if func == Func::Round {
                        (f * scale).round() / scale
                    } else {
                        (f * scale).trunc() / scale
                    })
                }
                Value::Numeric(n) => {
                    let d = digits.clamp(0, 30) as u32;
                    if func == Func::Round {
                        Value::Numeric(n.rescale(d)?)
                    } else {
                        // PostgreSQL's scale: exactly `d` digits after the point.
                        Value::Numeric(n.trunc_to(d).rescale(d)?)
                    }
                }
                v => return Err(SqlError::mismatch(format!("round of {}", v.natural_type()))),
            }
        }
        Func::Floor | Func::Ceil => match arg(0) {
            Value::Int(i) => Value::Int(i),
            Value::Float(f) => Value::Float(if func == Func::Floor {
                f.floor()
            } else {
                f.ceil()
            }),
            Value::Numeric(n) => {
                let t = n.trunc();
                let adjust = if func == Func::Floor && n < t {
                    -1
                } else if func == Func::Ceil && n > t {
                    1
                } else {
                    0
                };
                Value::Numeric(t.add(&Numeric::from_i64(adjust))?)
            }
            v => return Err(SqlError::mismatch(format!("floor of {}", v.natural_type()))),
        },
        Func::Greatest | Func::Least => {
            let mut best: Option<Value> = None;
            for v in values.into_iter().filter(|v| !v.is_null()) {
                let better = match &best {
                    None => true,
                    Some(b) => {
                        let ord = compare_values(&v, b)?;
                        if func == Func::Greatest {
                            ord == Ordering::Greater
                        } else {
                            ord == Ordering::Less
                        }
                    }
                };
                if better {
                    best = Some(v);
                }
            }
            best.unwrap_or(Value::Null).cast_to_result(ty)?
        }
        other => return Err(misrouted(other)),
    })
}

/// Functions of dates and times.
fn time_function(func: Func, values: Vec<Value>) -> SqlResult<Value> {
    let arg = |i: usize| values.get(i).cloned().unwrap_or(Value::Null);
    Ok(match func {
        Func::Age => {
            let micros = |v: Value| match v {
                Value::Timestamp(us) | Value::TimestampTz(us) => Ok(us),
                Value::Date(d) => Ok(sql::datetime::date_micros(d)),
                other => Err(SqlError::mismatch(format!(
                    "age() of {}",
                    other.natural_type().pg_name()
                ))),
            };
            Value::Interval(sql::datetime::age(micros(arg(0))?, micros(arg(1))?)?)
        }
        Func::DateTrunc => {
            let field = text_of(&arg(0));
            match arg(1) {
                Value::Timestamp(us) => Value::Timestamp(datetime::trunc(&field, us, "timestamp")?),
                Value::TimestampTz(us) => {
                    Value::TimestampTz(datetime::trunc(&field, us, "timestamp with time zone")?)
                }
                Value::Date(d) => Value::TimestampTz(datetime::trunc(
                    &field,
                    datetime::date_micros(d),
                    "timestamp with time zone",
                )?),
                other => {
                    return Err(SqlError::new(
                        ErrorKind::UndefinedFunction,
                        format!(
                            "function date_trunc(text, {}) does not exist",
                            other.natural_type().pg_name()
                        ),
                    ))
                }
            }
        }
        Func::Extract => Value::Numeric(datetime::extract(&text_of(&arg(0)), &arg(1))?),
        Func::DatePart => Value::Float(datetime::extract(&text_of(&arg(0)), &arg(1))?.to_f64()),
        other => return Err(misrouted(other)),
    })
}

/// Functions of types and of the catalog: enum labels, type names, relation sizes, object
/// definitions.
fn catalog_function(
    func: Func,
    values: Vec<Value>,
    ty: DataType,
    env: &EvalEnv<'_>,
) -> SqlResult<Value> {
    let arg = |i: usize| values.get(i).cloned().unwrap_or(Value::Null);
    Ok(match func {
        Func::EnumIn => {
            let label = arg(0);
            if !array_items(arg(1)).iter().any(|l| l.group_eq(&label)) {
                let name = match ty {
                    DataType::Enum(e) => e.name,
                    _ => "enum",
                };
                let text = label.to_pg_text(DataType::Text).unwrap_or_default();
                return Err(invalid_label(name, &text));
            }
            label
        }
        Func::EnumPosition => {
            let label = arg(0);
            match array_items(arg(1)).iter().position(|l| l.group_eq(&label)) {
                Some(at) => Value::Int(at as i64),
                None => Value::Null,
            }
        }
        Func::FormatType => match (arg(0), arg(1)) {
            (Value::Int(oid), typmod) => {
                let typmod = match typmod {
                    Value::Int(t) => t as i32,
                    _ => -1,
                };
                match DataType::from_oid_and_typmod(oid as u32, typmod) {
                    Some(t) => Value::Text(t.pg_name()),
                    // The enum types the binder listed: (OIDs, names).
                    None => array_items(arg(2))
                        .iter()
                        .position(|o| matches!(o, Value::Int(o) if *o == oid))
                        .and_then(|at| array_items(arg(3)).get(at).cloned())
                        .unwrap_or_else(|| Value::text("???")),
                }
            }
            _ => Value::Null,
        },
        Func::GetExpr => arg(0),
        Func::RelationSize | Func::TableSize | Func::IndexesSize | Func::TotalRelationSize => {
            let Value::Int(oid) = arg(0) else {
                return Ok(Value::Null);
            };
            let fork = match func {
                Func::RelationSize => arg(1),
                _ => Value::Null,
            };
            let other_fork = matches!(&fork, Value::Text(f) if f != "main");
            match u32::try_from(oid) {
                // Only the main fork exists: the others are empty.
                Ok(_) if other_fork => Value::Int(0),
                Ok(oid) => env
                    .subqueries
                    .relation_bytes(oid, func)?
                    .map_or(Value::Null, Value::Int),
                Err(_) => Value::Null,
            }
        }
        Func::SizePretty => match arg(0) {
            Value::Int(bytes) => Value::Text(size_pretty(bytes)),
            _ => Value::Null,
        },
        Func::RegClassOid => {
            let Some(catalog) = env.subqueries.catalog() else {
                return Err(SqlError::feature_not_supported(
                    "a relation named at run time here",
                ));
            };
            Value::Int(system::regclass_oid(catalog, &text_of(&arg(0)))? as i64)
        }
        Func::ToRegType => match arg(0) {
            Value::Null => Value::Null,
            name => {
                type_of_name(&text_of(&name)).map_or(Value::Null, |t| Value::Int(t.oid() as i64))
            }
        },
        Func::RegTypeName => match arg(0) {
            Value::Int(oid) => Value::Text(
                DataType::from_oid(oid as u32).map_or_else(|| oid.to_string(), DataType::pg_name),
            ),
            Value::Null => Value::Null,
            name => {
                let name = text_of(&name);
                Value::Text(
                    type_of_name(&name)
                        .ok_or_else(|| undefined_type(&name))?
                        .pg_name(),
                )
            }
        },
        Func::GetSerialSequence => {
            let catalog = sequence_catalog(env)?;
            system::serial_sequence(catalog, &text_of(&arg(0)), &text_of(&arg(1)))?
                .map_or(Value::Null, Value::Text)
        }
        Func::GetIndexDef
        | Func::GetConstraintDef
        | Func::RegClassName
        | Func::GetFunctionArguments
        | Func::GetViewDef => {
            let oid = match arg(0) {
                Value::Int(oid) => oid,
                // `$1::regclass` with a name: the name (what a regclass shows).
                Value::Text(name) if func == Func::RegClassName => return Ok(Value::Text(name)),
                _ => return Ok(Value::Null),
            };
            let Some(catalog) = env.subqueries.catalog() else {
                return Ok(Value::Text(oid.to_string()));
            };
            // `pg_get_indexdef(oid, n, pretty)`: the index's n-th key only.
            if let (Func::GetIndexDef, Value::Int(n @ 1..)) = (func, arg(1)) {
                return Ok(system::index_key_def(catalog, oid as u32, n as usize)
                    .map(Value::Text)
                    .unwrap_or(Value::Null));
            }
            system::describe_oid(catalog, func, oid as u32)
                .map(Value::Text)
                .unwrap_or(Value::Null)
        }
        other => return Err(misrouted(other)),
    })
}

/// The most bytes a text value a function builds may take (PostgreSQL allows 1 GB, which
/// on this server's sizes would take several statements to the edge of its memory).
pub(crate) const MAX_TEXT_BYTES: usize = 256 << 20;

/// 54000 when a function's result would take `bytes`, past `MAX_TEXT_BYTES`: checked
/// before the text is built.
pub(crate) fn check_text_length(bytes: usize) -> SqlResult<()> {
    if bytes > MAX_TEXT_BYTES {
        return Err(SqlError::new(
            ErrorKind::ProgramLimitExceeded,
            "requested length too large",
        ));
    }
    Ok(())
}

/// An internal error: `eval_function` handed `func` to a group that does not have it.
fn misrouted(func: Func) -> SqlError {
    SqlError::internal(format!("{func:?} was handed to another group's evaluation"))
}

/// The catalog sequence functions resolve their sequence in.
fn sequence_catalog<'e>(env: &'e EvalEnv<'_>) -> SqlResult<&'e Catalog> {
    env.sequences
        .catalog()
        .or_else(|| env.subqueries.catalog())
        .ok_or_else(|| {
            SqlError::feature_not_supported(
                "sequence functions here (in a default or check evaluated outside the executor)",
            )
        })
}

/// `pg_size_pretty(bigint)` as PostgreSQL 15 prints it: bytes below 10 kB, then the largest
/// unit that keeps the number below 20 thousand-odd, rounded half away from zero.
fn size_pretty(bytes: i64) -> String {
    const LIMIT: i64 = 10 * 1024;
    const LIMIT2: i64 = LIMIT * 2 - 1;
    let half_rounded = |x: i64| (x + if x < 0 { -1 } else { 1 }) / 2;
    if bytes.abs() < LIMIT {
        return format!("{bytes} bytes");
    }
    // One extra bit kept for the rounding.
    let mut size = bytes >> 9;
    for unit in ["kB", "MB", "GB", "TB"] {
        if size.abs() < LIMIT2 {
            return format!("{} {unit}", half_rounded(size));
        }
        size >>= 10;
    }
    format!("{} PB", half_rounded(size))
}

/// An ordered-set aggregate's values: the group's non-NULL values in its WITHIN GROUP order.
fn sorted_values(array: Value, descending: &Value) -> Vec<Value> {
    let mut values: Vec<Value> = array_items(array)
        .into_iter()
        .filter(|v| !v.is_null())
        .collect();
    values.sort_by(Value::sort_cmp);
    if descending.is_true() {
        values.reverse();
    }
    values
}

/// An array value's elements (none for anything else).
fn array_items(v: Value) -> Vec<Value> {
    match v {
        Value::Array(items) => items,
        _ => Vec::new(),
    }
}
