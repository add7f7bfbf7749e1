//! Integer literals read straight from a statement's text (`sql::ValueRows`), without an
//! expression: the fast path of multi-row INSERT ... VALUES, which the binder types and the
//! session's prebuild packs.

use sql::{DataType, NodeId, RowValue, ValueRows};

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
