//! How rows are stored: the key is the order-preserving encoding of the primary key (or of
//! a hidden row id); the value is the row's version (the log index that last wrote it, for
//! validating serializable reads) followed by its columns.
//!
//! Value layout: `version u64 LE | column count u16 LE | per column: tag u8, payload`, the
//! columns in `sql::value_codec`'s `Stored` layout (the one codec the log's packed rows use
//! too). Integers take one byte from 0 to 127 (the value in the tag) and a zigzag varint
//! beyond: a transfer's row is half the size it had with eight bytes each (rows written so
//! still read, tag INT).

use kv::keycode::{self, KeyPart};
use plan::TableDef;
use sql::value_codec::{put_value, read_slots, Cursor, Stored};
use sql::{DataType, SqlError, SqlResult, Value};

pub type Row = Vec<Value>;

/// Drops `row`; a row of values that own no memory is dropped without visiting each value.
/// The compiler drops a `Value` with a call, and bulk inserts drop every value of every
/// transfer and account row they handle (~2% of their CPU).
pub fn discard(mut row: Row) {
    if !row.iter().any(Value::owns_heap) {
        // SAFETY: shortening a vector exposes nothing uninitialized; the values it forgets
        // own nothing, so nothing leaks.
        unsafe { row.set_len(0) };
    }
}

pub fn encode_row(version: u64, row: &[Value], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(row.len() as u16).to_le_bytes());
    for v in row {
        put_value::<Stored>(out, v);
    }
}

fn corrupt() -> SqlError {
    SqlError::internal("stored row is malformed")
}

/// The version stamp of a stored row.
pub fn row_version(bytes: &[u8]) -> u64 {
    bytes
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .unwrap_or(0)
}

pub fn decode_row(bytes: &[u8]) -> SqlResult<(u64, Row)> {
    let mut c = Cursor::new(bytes);
    let version = u64::from_le_bytes(c.array().map_err(|_| corrupt())?);
    let count = u16::from_le_bytes(c.array().map_err(|_| corrupt())?) as usize;
    // Every value takes at least its tag byte.
    let count = c.within(count).map_err(|_| corrupt())?;
    let mut row = Vec::with_capacity(count);
    row.resize_with(count, || Value::Int(0));
    read_slots::<Stored>(&mut c, &mut row).map_err(|_| corrupt())?;
    Ok((version, row))
}

/// One key component for a value of a key column; None for a type keys cannot hold. (An
/// `Option`, not a `Result`: a `Result` carrying a `SqlError` is built on the stack and read
/// back at once, a stall per key column of every row a bulk insert writes.)
fn key_part(v: &Value) -> Option<KeyPart<'_>> {
    Some(match v {
        Value::Null => KeyPart::Null,
        Value::Bool(b) => KeyPart::Bool(*b),
        Value::Int(i) | Value::Timestamp(i) | Value::TimestampTz(i) | Value::Time(i) => {
            KeyPart::Int(*i)
        }
        Value::Date(d) => KeyPart::Int(*d as i64),
        Value::Float(f) => KeyPart::Float(*f),
        Value::Text(s) => KeyPart::Bytes(s.as_bytes()),
        Value::Bytes(b) => KeyPart::Bytes(b),
        Value::Uuid(u) => KeyPart::Bytes(u),
        Value::Numeric(_) | Value::Array(_) | Value::Interval(_) | Value::Jsonb(_) => return None,
    })
}

/// Encodes primary key values (already cast to the key columns' types).
pub fn encode_key(values: &[Value]) -> SqlResult<Vec<u8>> {
    let mut out = Vec::with_capacity(values.len() * 9);
    encode_key_into(values.iter(), &mut out)?;
    Ok(out)
}

/// Appends the encoded key values to `out`.
pub fn encode_key_into<'a>(
    values: impl Iterator<Item = &'a Value>,
    out: &mut Vec<u8>,
) -> SqlResult<()> {
    for v in values {
        if let Value::Numeric(n) = v {
            // Order-preserving bytes of their own, equal for equal values (`key_bytes`).
            let mut bytes = Vec::with_capacity(24);
            n.key_bytes(&mut bytes);
            keycode::encode_part(out, &KeyPart::Bytes(&bytes));
            continue;
        }
        let Some(part) = key_part(v) else {
            return Err(SqlError::feature_not_supported(
                "this type in a primary key",
            ));
        };
        keycode::encode_part(out, &part);
    }
    Ok(())
}

/// The storage key of a row of `table`; tables without a primary key use `rowid`.
pub fn row_key(table: &TableDef, row: &[Value], rowid: u64) -> SqlResult<Vec<u8>> {
    if table.primary_key.is_empty() {
        return Ok(keycode::encode_key(&[KeyPart::Int(rowid as i64)]));
    }
    let values: Vec<Value> = table.primary_key.iter().map(|&i| row[i].clone()).collect();
    encode_key(&values)
}

/// Casts key values to the key columns' types, so `WHERE id = 1.0` finds the row `id = 1`.
/// None when a value cannot be a key of that type (the filter then finds no row).
pub fn cast_key(table: &TableDef, values: &[Value]) -> Option<Vec<Value>> {
    table
        .primary_key
        .iter()
        .zip(values)
        .map(|(&c, v)| {
            let ty: DataType = table.columns[c].ty;
            if v.is_null() {
                return None;
            }
            v.cast(ty).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sql::value_tag::INT;
    use sql::{Interval, Numeric};

    #[test]
    fn rows_round_trip() {
        let row = vec![
            Value::Null,
            Value::Bool(true),
            Value::Int(-5),
            Value::Float(1.5),
            Value::Numeric(Numeric::parse("-12.345").unwrap()),
            Value::text("héllo"),
            Value::Bytes(vec![0, 1, 2]),
            Value::Timestamp(123),
            Value::TimestampTz(-456),
            Value::Date(19_000),
            Value::Uuid([7; 16]),
            Value::Time(1),
            Value::Interval(Interval {
                months: -14,
                days: 3,
                micros: 1_500_000,
            }),
            Value::Array(vec![Value::text("a"), Value::Null, Value::text("")]),
            Value::Array(Vec::new()),
        ];
        let mut out = Vec::new();
        encode_row(42, &row, &mut out);
        let (version, back) = decode_row(&out).unwrap();
        assert_eq!(version, 42);
        assert_eq!(format!("{row:?}"), format!("{back:?}"));
        assert!(decode_row(&out[..out.len() - 1]).is_err());
    }

    #[test]
    fn integers_take_the_bytes_they_need_and_old_rows_still_read() {
        let ints = [
            0,
            1,
            127,
            128,
            -1,
            -64,
            300,
            i64::MAX,
            i64::MIN,
            4_000_000_000_123,
        ];
        let row: Vec<Value> = ints.iter().map(|&i| Value::Int(i)).collect();
        let mut out = Vec::new();
        encode_row(7, &row, &mut out);
        let (_, back) = decode_row(&out).unwrap();
        assert_eq!(format!("{row:?}"), format!("{back:?}"));
        let mut small = Vec::new();
        encode_row(7, &[Value::Int(5), Value::Int(127)], &mut small);
        assert_eq!(small.len(), 8 + 2 + 2, "0..=127 in the tag byte");
        // A row as an earlier build wrote it: eight bytes per integer.
        let mut old = 9u64.to_le_bytes().to_vec();
        old.extend_from_slice(&2u16.to_le_bytes());
        for i in [-5i64, 1 << 40] {
            old.push(INT);
            old.extend_from_slice(&i.to_le_bytes());
        }
        let (version, back) = decode_row(&old).unwrap();
        assert_eq!(version, 9);
        assert_eq!(format!("{back:?}"), "[Int(-5), Int(1099511627776)]");
        // A varint cut short is corrupt, not a panic.
        let mut cut = Vec::new();
        encode_row(1, &[Value::Int(1 << 40)], &mut cut);
        assert!(decode_row(&cut[..cut.len() - 1]).is_err());
    }
}
