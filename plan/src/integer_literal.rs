//! Integer literals read straight from a statement's text (`sql::ValueRows`), without an
//! expression: the fast path of multi-row INSERT ... VALUES, which the binder types and the
//! session's prebuild packs.

use sql::{DataType, NodeId, Numeric, RowValue, Value, ValueRows};

/// The number `integer_literal`'s expression holds (as a `Value::Int`): what the row
/// reader's value `id` gives a column of type `ty` when it is an integer literal in the
/// column's range.
pub fn integer_literal_number(rows: &ValueRows, id: NodeId, ty: DataType) -> Option<i64> {
    let range = integer_range(ty)?;
    let value = match rows.value(id) {
        RowValue::Number(digits) => digits.parse::<i64>().ok()?,
        RowValue::Minus(inner) => match rows.value(inner) {
            RowValue::Number(digits) => negative(digits)?,
            _ => return None,
        },
        _ => return None,
    };
    range.contains(&value).then_some(value)
}

/// What an integer literal gives a column of type `ty`, as `integer_literal_number` reads
/// it: its number for an integer column; for a NUMERIC column of scale 0 that holds every
/// bigint (a ledger amount, `NUMERIC(39,0)`), the same number as a numeric — what binding
/// the literal and assigning it to the column gives. None for anything else.
pub fn integer_literal_value(rows: &ValueRows, id: NodeId, ty: DataType) -> Option<Value> {
    let (_, numeric) = literal_integers(ty)?;
    let n = integer_literal_number(rows, id, if numeric { DataType::Int8 } else { ty })?;
    Some(if numeric {
        Value::Numeric(Numeric::from_i64(n))
    } else {
        Value::Int(n)
    })
}

/// The integers a literal can give a column of type `ty` as they are, and whether the
/// column takes them as numerics (`integer_literal_value`); None for a column whose values
/// integer literals are not.
pub fn literal_integers(ty: DataType) -> Option<(std::ops::RangeInclusive<i64>, bool)> {
    match integer_range(ty) {
        Some(range) => Some((range, false)),
        None => holds_every_bigint(ty).then_some((i64::MIN..=i64::MAX, true)),
    }
}

/// Whether `ty` is a NUMERIC of scale 0 with room for 19 digits (or no limit).
fn holds_every_bigint(ty: DataType) -> bool {
    matches!(ty, DataType::Numeric { precision, scale: 0 } if precision.is_none_or(|p| p >= 19))
}

/// The values of an integer type; None for other types.
pub fn integer_range(ty: DataType) -> Option<std::ops::RangeInclusive<i64>> {
    match ty {
        DataType::Int2 => Some(i16::MIN as i64..=i16::MAX as i64),
        DataType::Int4 => Some(i32::MIN as i64..=i32::MAX as i64),
        DataType::Int8 => Some(i64::MIN..=i64::MAX),
        _ => None,
    }
}

/// `-digits` as an i64 (i64::MIN included).
fn negative(digits: &str) -> Option<i64> {
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let magnitude: u64 = digits.parse().ok()?;
    0i64.checked_sub_unsigned(magnitude)
}
