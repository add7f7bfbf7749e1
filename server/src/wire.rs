//! Values on the wire: text and binary encodings of results, decoding of parameters, row
//! descriptions, and the one place a `SqlError` becomes an ErrorResponse.

use bytes::{BufMut, BytesMut};
use pgwire::api::results::{FieldFormat, FieldInfo};
use pgwire::api::Type;
use pgwire::error::{ErrorInfo, PgWireError};
use pgwire::messages::data::DataRow;
use plan::OutputColumn;
use sql::{
    DataType, Interval, Numeric, SqlError, SqlResult, Value, PG_EPOCH_OFFSET_DAYS,
    PG_EPOCH_OFFSET_MICROS,
};

pub fn pg_type(ty: DataType) -> Type {
    Type::from_oid(ty.oid()).unwrap_or(Type::TEXT)
}

pub fn field_infos(
    columns: &[OutputColumn],
    format: impl Fn(usize) -> FieldFormat,
) -> Vec<FieldInfo> {
    columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let table = if c.table_oid == 0 {
                None
            } else {
                Some(c.table_oid as i32)
            };
            let column = if c.column_number == 0 {
                None
            } else {
                Some(c.column_number)
            };
            FieldInfo::new(c.name.clone(), table, column, pg_type(c.ty), format(i))
                .with_type_size(c.ty.wire_size())
                .with_type_modifier(c.ty.typmod())
        })
        .collect()
}

/// The ErrorResponse for an error: SQLSTATE, message, detail and position.
pub fn error_info(e: &SqlError) -> ErrorInfo {
    // Errors that end the connection are FATAL, as PostgreSQL sends them.
    let severity = match e.kind {
        sql::ErrorKind::AdminShutdown
        | sql::ErrorKind::IdleInTransactionSessionTimeout
        | sql::ErrorKind::IdleSessionTimeout => "FATAL",
        _ => "ERROR",
    };
    let mut info = ErrorInfo::new(
        severity.to_owned(),
        e.sqlstate().to_owned(),
        e.message.clone(),
    );
    info.detail = e.detail.clone();
    info.position = e.position.map(|p| p.to_string());
    info
}

pub fn pg_error(e: &SqlError) -> PgWireError {
    PgWireError::UserError(Box::new(error_info(e)))
}

/// Encodes one row as a DataRow, each column in text or binary.
pub fn data_row(
    row: &[Value],
    columns: &[OutputColumn],
    binary: impl Fn(usize) -> bool,
) -> SqlResult<DataRow> {
    let mut data = BytesMut::with_capacity(row.len() * 12);
    for (i, (v, c)) in row.iter().zip(columns).enumerate() {
        if v.is_null() {
            data.put_i32(-1);
            continue;
        }
        if binary(i) {
            let start = data.len();
            data.put_i32(0);
            encode_binary(v, c.ty, &mut data)?;
            let len = (data.len() - start - 4) as i32;
            data[start..start + 4].copy_from_slice(&len.to_be_bytes());
        } else {
            let text = v.to_pg_text(c.ty).unwrap_or_default();
            data.put_i32(text.len() as i32);
            data.put_slice(text.as_bytes());
        }
    }
    Ok(DataRow::new(data, row.len() as i16))
}

fn encode_binary(v: &Value, ty: DataType, out: &mut BytesMut) -> SqlResult<()> {
    let v = if v.natural_type() == ty
        || matches!((v, ty), (Value::Text(_), _) if ty.is_text_family())
    {
        v.clone()
    } else {
        v.cast(ty)?
    };
    match (&v, ty) {
        (Value::Bool(b), _) => out.put_u8(*b as u8),
        (Value::Int(i), DataType::Int2) => out.put_i16(*i as i16),
        (Value::Int(i), DataType::Int4) => out.put_i32(*i as i32),
        (Value::Int(i), DataType::Oid) => out.put_u32(*i as u32),
        (Value::Int(i), _) => out.put_i64(*i),
        (Value::Float(f), DataType::Float4) => out.put_f32(*f as f32),
        (Value::Float(f), _) => out.put_f64(*f),
        (Value::Numeric(n), _) => {
            let mut buf = Vec::new();
            n.to_pg_binary(&mut buf);
            out.put_slice(&buf);
        }
        (Value::Text(s), DataType::Char(n)) => out.put_slice(
            v.to_pg_text(DataType::Char(n))
                .unwrap_or_else(|| s.clone())
                .as_bytes(),
        ),
        (Value::Text(s), _) => out.put_slice(s.as_bytes()),
        (Value::Bytes(b), _) => out.put_slice(b),
        (Value::Timestamp(t) | Value::TimestampTz(t), _) => out.put_i64(t - PG_EPOCH_OFFSET_MICROS),
        (Value::Date(d), _) => out.put_i32(d - PG_EPOCH_OFFSET_DAYS),
        (Value::Time(t), _) => out.put_i64(*t),
        (Value::Interval(i), _) => {
            out.put_i64(i.micros);
            out.put_i32(i.days);
            out.put_i32(i.months);
        }
        (Value::Array(items), t) if t.element().is_some() => {
            let element = t.element().unwrap_or(DataType::Text);
            let has_nulls = items.iter().any(Value::is_null);
            out.put_i32(if items.is_empty() { 0 } else { 1 });
            out.put_i32(has_nulls as i32);
            out.put_u32(element.oid());
            if !items.is_empty() {
                out.put_i32(items.len() as i32);
                out.put_i32(1);
            }
            for item in items {
                if item.is_null() {
                    out.put_i32(-1);
                    continue;
                }
                let mut bytes = BytesMut::new();
                encode_binary(item, element, &mut bytes)?;
                out.put_i32(bytes.len() as i32);
                out.put_slice(&bytes);
            }
        }
        (Value::Array(_), _) => {
            return Err(SqlError::feature_not_supported("arrays in binary format"))
        }
        // jsonb's binary form: a version byte, then the text.
        (Value::Jsonb(j), _) => {
            out.put_u8(1);
            out.put_slice(j.to_text().as_bytes());
        }
        (Value::Uuid(u), _) => out.put_slice(u),
        (Value::Null, _) => {}
    }
    Ok(())
}

fn invalid_binary(ty: DataType) -> SqlError {
    SqlError::invalid_binary(format!(
        "incorrect binary data format in bind parameter of type {}",
        ty.pg_name()
    ))
}

/// Decodes a Bind parameter of type `ty` (the client's declared type, or the inferred one).
pub fn decode_param(raw: Option<&[u8]>, ty: DataType, binary: bool) -> SqlResult<Value> {
    let Some(raw) = raw else {
        return Ok(Value::Null);
    };
    if !binary {
        let text = std::str::from_utf8(raw)
            .map_err(|_| SqlError::invalid_text("invalid UTF-8 in a parameter"))?;
        return Value::parse_text(text, ty);
    }
    let fixed = |n: usize| -> SqlResult<&[u8]> {
        if raw.len() == n {
            Ok(raw)
        } else {
            Err(invalid_binary(ty))
        }
    };
    Ok(match ty {
        DataType::Bool => Value::Bool(fixed(1)?[0] != 0),
        DataType::Int2 => {
            Value::Int(i16::from_be_bytes(fixed(2)?.try_into().expect("2 bytes")) as i64)
        }
        DataType::Int4 => {
            Value::Int(i32::from_be_bytes(fixed(4)?.try_into().expect("4 bytes")) as i64)
        }
        DataType::Oid => {
            Value::Int(u32::from_be_bytes(fixed(4)?.try_into().expect("4 bytes")) as i64)
        }
        DataType::Int8 => Value::Int(i64::from_be_bytes(fixed(8)?.try_into().expect("8 bytes"))),
        DataType::Float4 => {
            Value::Float(f32::from_be_bytes(fixed(4)?.try_into().expect("4 bytes")) as f64)
        }
        DataType::Float8 => {
            Value::Float(f64::from_be_bytes(fixed(8)?.try_into().expect("8 bytes")))
        }
        DataType::Numeric { .. } => Value::Numeric(Numeric::from_pg_binary(raw)?),
        DataType::Bytea => Value::Bytes(raw.to_vec()),
        DataType::Timestamp => Value::Timestamp(
            i64::from_be_bytes(fixed(8)?.try_into().expect("8 bytes")) + PG_EPOCH_OFFSET_MICROS,
        ),
        DataType::TimestampTz => Value::TimestampTz(
            i64::from_be_bytes(fixed(8)?.try_into().expect("8 bytes")) + PG_EPOCH_OFFSET_MICROS,
        ),
        DataType::Date => Value::Date(
            i32::from_be_bytes(fixed(4)?.try_into().expect("4 bytes")) + PG_EPOCH_OFFSET_DAYS,
        ),
        DataType::Interval => {
            let raw = fixed(16)?;
            let int = |at: usize| i32::from_be_bytes(raw[at..at + 4].try_into().expect("4 bytes"));
            Value::Interval(Interval {
                micros: i64::from_be_bytes(raw[..8].try_into().expect("8 bytes")),
                days: int(8),
                months: int(12),
            })
        }
        DataType::Text
        | DataType::Varchar(_)
        | DataType::Char(_)
        | DataType::Name
        | DataType::Unknown
        | DataType::CatalogChar
        | DataType::Enum(_) => Value::Text(
            String::from_utf8(raw.to_vec())
                .map_err(|_| SqlError::invalid_text("invalid UTF-8 in a parameter"))?,
        ),
        DataType::Uuid => Value::Uuid(fixed(16)?.try_into().expect("16 bytes")),
        DataType::Time => {
            let us = i64::from_be_bytes(fixed(8)?.try_into().expect("8 bytes"));
            if !(0..=sql::time_of_day::END_OF_DAY).contains(&us) {
                return Err(invalid_binary(ty));
            }
            Value::Time(us)
        }
        DataType::Json => Value::parse_text(
            std::str::from_utf8(raw)
                .map_err(|_| SqlError::invalid_text("invalid UTF-8 in a parameter"))?,
            ty,
        )?,
        DataType::Jsonb => match raw.split_first() {
            Some((1, text)) => Value::parse_text(
                std::str::from_utf8(text)
                    .map_err(|_| SqlError::invalid_text("invalid UTF-8 in a parameter"))?,
                ty,
            )?,
            _ => {
                return Err(SqlError::invalid_binary(
                    "unsupported jsonb version number in a parameter",
                ))
            }
        },
        DataType::TextArray
        | DataType::Int2Array
        | DataType::Int4Array
        | DataType::Int8Array
        | DataType::BoolArray
        | DataType::JsonbArray
        | DataType::JsonArray
        | DataType::UuidArray
        | DataType::Float4Array
        | DataType::Float8Array
        | DataType::NumericArray { .. }
        | DataType::DateArray
        | DataType::TimestampArray
        | DataType::TimestampTzArray
        | DataType::IntervalArray
        | DataType::TimeArray
        | DataType::ByteaArray
        | DataType::Int2Vector => decode_binary_array(raw, ty)?,
    })
}

/// PostgreSQL's binary array format: dimensions, a null flag, the element type, each
/// dimension's length and lower bound, then each element length-prefixed (-1 for NULL).
/// One dimension (or none, for an empty array).
fn decode_binary_array(raw: &[u8], ty: DataType) -> SqlResult<Value> {
    let mut r = raw;
    let int = |r: &mut &[u8]| -> SqlResult<i32> {
        let (head, rest) = r
            .split_first_chunk::<4>()
            .ok_or_else(|| invalid_binary(ty))?;
        *r = rest;
        Ok(i32::from_be_bytes(*head))
    };
    let dimensions = int(&mut r)?;
    let _has_nulls = int(&mut r)?;
    let element_oid = int(&mut r)? as u32;
    if dimensions == 0 {
        return Ok(Value::Array(Vec::new()));
    }
    if dimensions != 1 {
        return Err(SqlError::feature_not_supported("multidimensional arrays"));
    }
    let length = int(&mut r)?;
    let _lower_bound = int(&mut r)?;
    let element = DataType::from_oid(element_oid)
        .filter(|e| e.array_of().is_some())
        .ok_or_else(|| invalid_binary(ty))?;
    let mut items = Vec::with_capacity(length.clamp(0, 1 << 16) as usize);
    for _ in 0..length {
        let n = int(&mut r)?;
        if n < 0 {
            items.push(Value::Null);
            continue;
        }
        let n = n as usize;
        if r.len() < n {
            return Err(invalid_binary(ty));
        }
        let (bytes, rest) = r.split_at(n);
        r = rest;
        items.push(decode_param(Some(bytes), element, true)?);
    }
    if !r.is_empty() {
        return Err(invalid_binary(ty));
    }
    Value::Array(items).cast(ty)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_parameters_round_trip() {
        let cases = [
            (Value::Int(-7), DataType::Int2),
            (Value::Int(1 << 40), DataType::Int8),
            (Value::Float(2.5), DataType::Float8),
            (Value::Timestamp(1_700_000_000_000_000), DataType::Timestamp),
            (Value::Date(19_000), DataType::Date),
            (
                Value::Interval(Interval {
                    months: -3,
                    days: 40,
                    micros: -1,
                }),
                DataType::Interval,
            ),
            (
                Value::Numeric(Numeric::parse("-12.5").unwrap()),
                DataType::UNCONSTRAINED_NUMERIC,
            ),
        ];
        for (v, ty) in cases {
            let mut out = BytesMut::new();
            encode_binary(&v, ty, &mut out).unwrap();
            let back = decode_param(Some(&out), ty, true).unwrap();
            assert_eq!(back.compare(&v), Some(std::cmp::Ordering::Equal), "{v:?}");
        }
        assert!(decode_param(Some(&[1, 2, 3]), DataType::Int4, true).is_err());
    }
}
