//! Amounts and balances as the engine computes them: unsigned 128-bit integers
//! (TigerBeetle's u128), read from and written to columns of type NUMERIC(39,0) or — in a
//! ledger from before migration 0010, or a table declared so — BIGINT (`plan::AMOUNT`).
//!
//! Every balance the engine wrote is a whole number from 0 to its column's maximum; one
//! that is not is an impossible state, and reading it stops the executor.

use plan::{AccountColumns, LedgerSchema, TableDef};
use sql::{DataType, ErrorKind, SqlError, SqlResult, Value};

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

/// Writes `n` into `slot`, a cell of a column of amount type `ty`: 22003 where a BIGINT
/// column cannot hold it. In place and without building a `Value` to return: a transfer
/// writes a dozen of these, and returning each as a `SqlResult<Value>` cost more than the
/// rest of the conversion.
#[inline]
pub(crate) fn set_cell(slot: &mut Value, n: u128, ty: DataType) -> SqlResult<()> {
    if ty != DataType::Int8 {
        slot.set_whole_numeric(n);
        return Ok(());
    }
    match i64::try_from(n) {
        Ok(v) => {
            slot.set_int(v);
            Ok(())
        }
        Err(_) => Err(too_big_for_bigint(n)),
    }
}

#[cold]
#[inline(never)]
fn too_big_for_bigint(n: u128) -> SqlError {
    SqlError::new(
        ErrorKind::NumericOutOfRange,
        format!("{n} is out of range for a bigint amount column (run migration 0010 to widen it)"),
    )
}

/// `n` as a value of a column of amount type `ty` (`set_cell`).
pub(crate) fn cell(n: u128, ty: DataType) -> SqlResult<Value> {
    let mut value = Value::Null;
    set_cell(&mut value, n, ty)?;
    Ok(value)
}

/// An account's four balances, as the engine computes with them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Balances {
    pub debits_pending: u128,
    pub debits_posted: u128,
    pub credits_pending: u128,
    pub credits_posted: u128,
}

/// One of an account's balances.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Balance {
    DebitsPending,
    DebitsPosted,
    CreditsPending,
    CreditsPosted,
}

impl Balances {
    /// The balances stored in an account's `row`.
    pub(crate) fn of(a: &AccountColumns, row: &[Value]) -> Balances {
        Balances {
            debits_pending: stored(&row[a.debits_pending]),
            debits_posted: stored(&row[a.debits_posted]),
            credits_pending: stored(&row[a.credits_pending]),
            credits_posted: stored(&row[a.credits_posted]),
        }
    }

    pub(crate) fn get(&self, b: Balance) -> u128 {
        match b {
            Balance::DebitsPending => self.debits_pending,
            Balance::DebitsPosted => self.debits_posted,
            Balance::CreditsPending => self.credits_pending,
            Balance::CreditsPosted => self.credits_posted,
        }
    }

    pub(crate) fn get_mut(&mut self, b: Balance) -> &mut u128 {
        match b {
            Balance::DebitsPending => &mut self.debits_pending,
            Balance::DebitsPosted => &mut self.debits_posted,
            Balance::CreditsPending => &mut self.credits_pending,
            Balance::CreditsPosted => &mut self.credits_posted,
        }
    }

    /// Writes the balances into an account's `row`, each in its column's type.
    pub(crate) fn write_into(&self, schema: &LedgerSchema, row: &mut [Value]) -> SqlResult<()> {
        let a = &schema.account;
        let columns = [
            a.debits_pending,
            a.debits_posted,
            a.credits_pending,
            a.credits_posted,
        ];
        self.write_columns(&schema.accounts, columns, row)
    }

    /// Writes the balances into `columns` of a `row` of `table` — debits pending and
    /// posted, credits pending and posted, in that order — each in its column's type: an
    /// account's row, a balance history entry, a change event's side.
    pub(crate) fn write_columns(
        &self,
        table: &TableDef,
        columns: [usize; 4],
        row: &mut [Value],
    ) -> SqlResult<()> {
        let values = [
            self.debits_pending,
            self.debits_posted,
            self.credits_pending,
            self.credits_posted,
        ];
        for (column, n) in columns.into_iter().zip(values) {
            set_cell(&mut row[column], n, table.columns[column].ty)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sql::Numeric;

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
