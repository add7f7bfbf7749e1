//! Amounts and balances as the engine computes them: unsigned 128-bit integers
//! (TigerBeetle's u128), read from and written to columns of type NUMERIC(39,0) or — in a
//! ledger from before migration 0010, or a table declared so — BIGINT (`plan::AMOUNT`).
//!
//! Every balance the engine wrote is a whole number from 0 to its column's maximum; one
//! that is not is an impossible state, and reading it stops the executor.

use sql::{DataType, ErrorKind, Numeric, SqlError, SqlResult, Value};

/// A balance or amount the engine stored. NULL (a column added without a value) is 0.
pub(crate) fn stored(value: &Value) -> u128 {
    match value {
        Value::Int(v) => {
            assert!(*v >= 0, "a stored balance is negative: {v}");
            *v as u128
        }
        Value::Numeric(n) => n
            .to_u128()
            .unwrap_or_else(|| panic!("a stored balance is not a whole number ≥ 0: {n}")),
        Value::Null => 0,
        other => panic!("a stored balance is not a number: {other:?}"),
    }
}

/// An amount a client gave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Given {
    Missing,
    /// Below zero: TigerBeetle's unsigned amounts cannot express it (the text is for the
    /// error).
    Negative,
    Amount(u128),
}

/// Reads an amount a client gave, refusing one with a fraction (22023). A `Numeric` holds
/// no whole number beyond 2^128 − 1 (its magnitude is a u128), so every other one fits.
pub(crate) fn given(value: &Value) -> SqlResult<Given> {
    match value {
        Value::Null => Ok(Given::Missing),
        Value::Int(v) if *v < 0 => Ok(Given::Negative),
        Value::Int(v) => Ok(Given::Amount(*v as u128)),
        Value::Numeric(n) if n.is_negative() => Ok(Given::Negative),
        Value::Numeric(n) => n.to_u128().map(Given::Amount).ok_or_else(|| {
            SqlError::new(
                ErrorKind::InvalidParameterValue,
                format!("an amount is a whole number, not {n}"),
            )
        }),
        other => Err(SqlError::new(
            ErrorKind::DatatypeMismatch,
            format!(
                "an amount is a number, not {}",
                other.natural_type().pg_name()
            ),
        )),
    }
}

/// `n` as a value of a column of amount type `ty`: 22003 where a BIGINT column cannot hold
/// it.
pub(crate) fn cell(n: u128, ty: DataType) -> SqlResult<Value> {
    if ty == DataType::Int8 {
        return i64::try_from(n)
            .map(Value::Int)
            .map_err(|_| {
                SqlError::new(
                    ErrorKind::NumericOutOfRange,
                    format!("{n} is out of range for a bigint amount column (run migration 0010 to widen it)"),
                )
            });
    }
    Ok(Value::Numeric(Numeric::from_u128(n)))
}

/// A balance stored in a column of type `from`, as a value of a column of type `to`.
pub(crate) fn copied(value: &Value, from: DataType, to: DataType) -> SqlResult<Value> {
    if from == to {
        Ok(value.clone())
    } else {
        cell(stored(value), to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widest_amount_round_trips_through_both_column_types() {
        let max = cell(u128::MAX, plan::AMOUNT).unwrap();
        assert_eq!(stored(&max), u128::MAX);
        assert_eq!(given(&max).unwrap(), Given::Amount(u128::MAX));
        assert!(matches!(cell(7, DataType::Int8).unwrap(), Value::Int(7)));
        assert_eq!(
            cell(i64::MAX as u128 + 1, DataType::Int8).unwrap_err().kind,
            ErrorKind::NumericOutOfRange
        );
    }

    #[test]
    fn given_amounts_that_are_not_whole_and_unsigned_are_told_apart() {
        assert!(Numeric::parse("340282366920938463463374607431768211456").is_err());
        let fraction = Value::Numeric(Numeric::parse("1.5").unwrap());
        assert_eq!(
            given(&fraction).unwrap_err().kind,
            ErrorKind::InvalidParameterValue
        );
        let negative = Value::Numeric(Numeric::parse("-3").unwrap());
        assert_eq!(given(&negative).unwrap(), Given::Negative);
        assert_eq!(given(&Value::Null).unwrap(), Given::Missing);
    }
}
