//! `Value`: one SQL value, with PostgreSQL's text forms, casts, comparison and arithmetic.
//! Times are microseconds since the Unix epoch (UTC); dates are days since it.

use std::cmp::Ordering;
use std::fmt::Write;

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Utc};
use serde::{Deserialize, Serialize};

use crate::datetime::{date_micros, epoch, epoch_days};
use crate::error::{ErrorKind, SqlError, SqlResult};
use crate::interval::{Interval, MICROS_PER_DAY, MICROS_PER_SECOND};
use crate::numeric::Numeric;
use crate::types::DataType;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Numeric(Numeric),
    Text(String),
    Bytes(Vec<u8>),
    Timestamp(i64),
    TimestampTz(i64),
    Date(i32),
    Array(Vec<Value>),
    Interval(Interval),
    Jsonb(Box<crate::jsonb::Jsonb>),
    Uuid([u8; 16]),
    /// `time`: microseconds since midnight ([`crate::time_of_day`]).
    Time(i64),
}

impl Value {
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Makes the value the integer `v`; when it is an integer already, by storing the number
    /// alone (no drop of the old value, no copy of a whole new one).
    #[inline]
    pub fn set_int(&mut self, v: i64) {
        match self {
            Value::Int(n) => *n = v,
            other => *other = Value::Int(v),
        }
    }

    /// Sets the value to the whole numeric `v`, in place when it is a numeric already.
    pub fn set_whole_numeric(&mut self, v: u128) {
        match self {
            Value::Numeric(n) => *n = Numeric::from_u128(v),
            other => *other = Value::Numeric(Numeric::from_u128(v)),
        }
    }

    /// Whether the value owns memory of its own (text, bytes, an array, a document): the
    /// ones whose drop frees something.
    pub fn owns_heap(&self) -> bool {
        match self {
            Value::Text(_) | Value::Bytes(_) | Value::Array(_) | Value::Jsonb(_) => true,
            Value::Null
            | Value::Bool(_)
            | Value::Int(_)
            | Value::Float(_)
            | Value::Numeric(_)
            | Value::Timestamp(_)
            | Value::TimestampTz(_)
            | Value::Date(_)
            | Value::Interval(_)
            | Value::Uuid(_)
            | Value::Time(_) => false,
        }
    }

    /// About how many bytes of memory the value takes, itself and what it owns: what
    /// memory limits count (an estimate, not an allocator's figure).
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Value>()
            + match self {
                Value::Text(s) => s.len(),
                Value::Bytes(b) => b.len(),
                Value::Array(items) => items.iter().map(Value::memory_bytes).sum(),
                Value::Jsonb(doc) => doc.memory_bytes(),
                _ => 0,
            }
    }

    pub fn text(s: impl Into<String>) -> Value {
        Value::Text(s.into())
    }

    /// The natural type of a value when nothing else decides it.
    pub fn natural_type(&self) -> DataType {
        match self {
            Value::Null => DataType::Unknown,
            Value::Bool(_) => DataType::Bool,
            Value::Int(_) => DataType::Int8,
            Value::Float(_) => DataType::Float8,
            Value::Numeric(_) => DataType::UNCONSTRAINED_NUMERIC,
            Value::Text(_) => DataType::Text,
            Value::Bytes(_) => DataType::Bytea,
            Value::Timestamp(_) => DataType::Timestamp,
            Value::TimestampTz(_) => DataType::TimestampTz,
            Value::Date(_) => DataType::Date,
            Value::Array(_) => DataType::TextArray,
            Value::Interval(_) => DataType::Interval,
            Value::Jsonb(_) => DataType::Jsonb,
            Value::Uuid(_) => DataType::Uuid,
            Value::Time(_) => DataType::Time,
        }
    }

    /// SQL truth of a value in a WHERE clause: NULL counts as false.
    pub fn is_true(&self) -> bool {
        matches!(self, Value::Bool(true))
    }

    /// PostgreSQL's text output for a value of type `ty`, or None for NULL.
    pub fn to_pg_text(&self, ty: DataType) -> Option<String> {
        Some(match self {
            Value::Null => return None,
            Value::Bool(b) => if *b { "t" } else { "f" }.to_string(),
            Value::Int(i) => i.to_string(),
            Value::Float(f) => format_float(*f, ty),
            Value::Numeric(n) => n.to_string(),
            Value::Text(s) => match ty {
                DataType::Char(n) => pad_char(s, n),
                _ => s.clone(),
            },
            Value::Bytes(b) => {
                let mut out = String::with_capacity(2 + b.len() * 2);
                out.push_str("\\x");
                for byte in b {
                    let _ = write!(out, "{byte:02x}");
                }
                out
            }
            Value::Timestamp(us) => format_timestamp(*us, false),
            Value::TimestampTz(us) => format_timestamp(*us, true),
            Value::Date(d) => format_date(*d),
            Value::Interval(i) => i.to_string(),
            Value::Jsonb(j) => j.to_text(),
            Value::Uuid(u) => crate::uuid::format(u),
            Value::Time(us) => crate::time_of_day::format(*us),
            Value::Array(items) if ty == DataType::Int2Vector => items
                .iter()
                .map(|i| i.to_pg_text(DataType::Int2).unwrap_or_default())
                .collect::<Vec<_>>()
                .join(" "),
            Value::Array(items) => {
                let mut out = String::from("{");
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    match item.to_pg_text(ty.element().unwrap_or(DataType::Text)) {
                        None => out.push_str("NULL"),
                        Some(s)
                            if s.is_empty()
                                || s.eq_ignore_ascii_case("null")
                                || s.contains([',', '"', '{', '}', '\\'])
                                || s.contains(|c: char| c.is_ascii_whitespace()) =>
                        {
                            out.push('"');
                            out.push_str(&s.replace('\\', "\\\\").replace('"', "\\\""));
                            out.push('"');
                        }
                        Some(s) => out.push_str(&s),
                    }
                }
                out.push('}');
                out
            }
        })
    }

    /// Parses PostgreSQL text input for a column or parameter of type `ty`.
    pub fn parse_text(text: &str, ty: DataType) -> SqlResult<Value> {
        let invalid = |name: &str| {
            SqlError::invalid_text(format!("invalid input syntax for type {name}: \"{text}\""))
        };
        Ok(match ty {
            DataType::Bool => match text.trim().to_ascii_lowercase().as_str() {
                "t" | "true" | "yes" | "on" | "1" | "y" => Value::Bool(true),
                "f" | "false" | "no" | "off" | "0" | "n" => Value::Bool(false),
                _ => return Err(invalid("boolean")),
            },
            DataType::Int2 | DataType::Int4 | DataType::Int8 | DataType::Oid => {
                let v: i64 = text.trim().parse().map_err(|_| {
                    if text
                        .trim()
                        .bytes()
                        .all(|c| c.is_ascii_digit() || c == b'-' || c == b'+')
                        && !text.trim().is_empty()
                    {
                        SqlError::numeric_out_of_range(format!(
                            "value \"{text}\" is out of range for type {}",
                            ty.pg_name()
                        ))
                    } else {
                        invalid(&ty.pg_name())
                    }
                })?;
                check_int_range(v, ty)?
            }
            DataType::Float4 | DataType::Float8 => {
                let t = text.trim().to_ascii_lowercase();
                let v = match t.as_str() {
                    "nan" => f64::NAN,
                    "infinity" | "inf" => f64::INFINITY,
                    "-infinity" | "-inf" => f64::NEG_INFINITY,
                    _ => t.parse().map_err(|_| invalid(&ty.pg_name()))?,
                };
                Value::Float(v)
            }
            DataType::Numeric { precision, scale } => {
                let n = Numeric::parse(text)?;
                Value::Numeric(match precision {
                    Some(p) => n.fit(p, scale)?,
                    None => n,
                })
            }
            // An enum's label is checked against its type by the binder (`Binder::enum_value`).
            DataType::Text | DataType::Name | DataType::Unknown | DataType::Enum(_) => {
                Value::Text(text.to_string())
            }
            DataType::Varchar(_) | DataType::Char(_) => Value::Text(text.to_string()).cast(ty)?,
            DataType::CatalogChar => Value::Text(text.chars().take(1).collect()),
            DataType::Bytea => Value::Bytes(parse_bytea(text)?),
            DataType::Timestamp => Value::Timestamp(parse_timestamp(text, false)?),
            DataType::TimestampTz => Value::TimestampTz(parse_timestamp(text, true)?),
            DataType::Date => Value::Date(parse_date(text)?),
            DataType::Interval => Value::Interval(Interval::parse(text)?),
            DataType::Json => {
                crate::jsonb::check_json(text)?;
                Value::Text(text.to_string())
            }
            DataType::Jsonb => Value::Jsonb(Box::new(crate::jsonb::Jsonb::parse(text)?)),
            DataType::Uuid => Value::Uuid(crate::uuid::parse(text)?),
            DataType::Time => Value::Time(crate::time_of_day::parse(text)?),
            DataType::Int2Vector => Value::Array(
                text.split_whitespace()
                    .map(|n| Value::parse_text(n, DataType::Int2))
                    .collect::<SqlResult<_>>()?,
            ),
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
            | DataType::ByteaArray => parse_array(text, ty)?,
        })
    }

    /// Casts to `ty` with PostgreSQL's rules for explicit casts and assignment.
    pub fn cast(&self, ty: DataType) -> SqlResult<Value> {
        if self.is_null() {
            return Ok(Value::Null);
        }
        let cannot = || {
            SqlError::new(
                ErrorKind::CannotCoerce,
                format!(
                    "cannot cast type {} to {}",
                    self.natural_type().pg_name(),
                    ty.pg_name()
                ),
            )
        };
        Ok(match (self, ty) {
            (Value::Text(s), _) if !ty.is_text_family() && ty != DataType::CatalogChar => {
                Value::parse_text(s, ty)?
            }
            (Value::Bool(b), DataType::Bool) => Value::Bool(*b),
            (Value::Bool(b), DataType::Int4 | DataType::Int8) => Value::Int(*b as i64),
            (Value::Int(i), DataType::Bool) => Value::Bool(*i != 0),
            (Value::Int(i), t) if t.is_integer() => check_int_range(*i, t)?,
            (Value::Int(i), DataType::Float4 | DataType::Float8) => Value::Float(*i as f64),
            (Value::Int(i), DataType::Numeric { precision, scale }) => {
                fit_numeric(Numeric::from_i64(*i), precision, scale)?
            }
            (Value::Float(f), t) if t.is_integer() => {
                if !f.is_finite() || f.round() > i64::MAX as f64 || f.round() < i64::MIN as f64 {
                    return Err(SqlError::numeric_out_of_range(format!(
                        "{} out of range",
                        t.pg_name()
                    )));
                }
                check_int_range(f.round_ties_even() as i64, t)?
            }
            (Value::Float(f), DataType::Float4) => Value::Float(*f as f32 as f64),
            (Value::Float(f), DataType::Float8) => Value::Float(*f),
            (Value::Float(f), DataType::Numeric { precision, scale }) => {
                fit_numeric(Numeric::from_f64(*f)?, precision, scale)?
            }
            (Value::Numeric(n), t) if t.is_integer() => {
                let v = n.round_i64().ok_or_else(|| {
                    SqlError::numeric_out_of_range(format!("{} out of range", t.pg_name()))
                })?;
                check_int_range(v, t)?
            }
            (Value::Numeric(n), DataType::Float4 | DataType::Float8) => Value::Float(n.to_f64()),
            (Value::Numeric(n), DataType::Numeric { precision, scale }) => {
                fit_numeric(*n, precision, scale)?
            }
            (Value::Timestamp(us), DataType::Timestamp) => Value::Timestamp(*us),
            (Value::Timestamp(us), DataType::TimestampTz) => Value::TimestampTz(*us),
            (Value::TimestampTz(us), DataType::TimestampTz) => Value::TimestampTz(*us),
            (Value::TimestampTz(us), DataType::Timestamp) => Value::Timestamp(*us),
            (Value::Timestamp(us) | Value::TimestampTz(us), DataType::Date) => {
                Value::Date(us.div_euclid(MICROS_PER_DAY) as i32)
            }
            (Value::Date(d), DataType::Date) => Value::Date(*d),
            (Value::Date(d), DataType::Timestamp) => Value::Timestamp(date_micros(*d)),
            (Value::Date(d), DataType::TimestampTz) => Value::TimestampTz(date_micros(*d)),
            (Value::Bytes(b), DataType::Bytea) => Value::Bytes(b.clone()),
            (Value::Interval(i), DataType::Interval) => Value::Interval(*i),
            (Value::Uuid(u), DataType::Uuid) => Value::Uuid(*u),
            (Value::Time(us), DataType::Time) => Value::Time(*us),
            (Value::Timestamp(us) | Value::TimestampTz(us), DataType::Time) => {
                Value::Time(crate::time_of_day::of_timestamp(*us))
            }
            (Value::Time(us), DataType::Interval) => Value::Interval(Interval {
                months: 0,
                days: 0,
                micros: *us,
            }),
            (Value::Jsonb(j), DataType::Jsonb) => Value::Jsonb(j.clone()),
            (Value::Jsonb(j), DataType::Json) => Value::Text(j.to_text()),
            (Value::Jsonb(j), t) if t.is_numeric_family() || t == DataType::Bool => {
                j.cast_scalar(t)?
            }
            (Value::Array(a), t) if t.element().is_some() => {
                let element = t.element().unwrap_or(DataType::Text);
                Value::Array(
                    a.iter()
                        .map(|v| {
                            if v.is_null() {
                                Ok(Value::Null)
                            } else {
                                v.cast(element)
                            }
                        })
                        .collect::<SqlResult<_>>()?,
                )
            }
            (_, DataType::Varchar(limit)) => {
                let s = self.cast_text();
                if let Some(n) = limit {
                    if s.chars().count() > n as usize {
                        let trimmed = s.trim_end_matches(' ');
                        if trimmed.chars().count() > n as usize {
                            return Err(SqlError::new(
                                ErrorKind::StringTooLong,
                                format!("value too long for type character varying({n})"),
                            ));
                        }
                        return Ok(Value::Text(trimmed.chars().take(n as usize).collect()));
                    }
                }
                Value::Text(s)
            }
            (_, DataType::Char(n)) => {
                let s = self.cast_text();
                let trimmed = s.trim_end_matches(' ');
                if trimmed.chars().count() > n as usize {
                    return Err(SqlError::new(
                        ErrorKind::StringTooLong,
                        format!("value too long for type character({n})"),
                    ));
                }
                // CHAR(n) stores without trailing blanks and pads on output, as comparisons
                // in PostgreSQL ignore them anyway.
                Value::Text(trimmed.to_string())
            }
            (_, DataType::Text | DataType::Name | DataType::Unknown) => {
                Value::Text(self.cast_text())
            }
            (_, DataType::CatalogChar) => Value::Text(
                self.to_pg_text(self.natural_type())
                    .unwrap_or_default()
                    .chars()
                    .take(1)
                    .collect(),
            ),
            _ => return Err(cannot()),
        })
    }

    /// The text a value becomes when cast to a text type (booleans spell themselves out, as
    /// in PostgreSQL's `true::text`).
    fn cast_text(&self) -> String {
        match self {
            Value::Bool(b) => if *b { "true" } else { "false" }.to_string(),
            other => other.to_pg_text(other.natural_type()).unwrap_or_default(),
        }
    }

    /// Compares two non-NULL values of compatible types; None when they are not comparable.
    pub fn compare(&self, other: &Value) -> Option<Ordering> {
        use Value::*;
        Some(match (self, other) {
            (Null, _) | (_, Null) => return None,
            (Bool(a), Bool(b)) => a.cmp(b),
            (Int(a), Int(b)) => a.cmp(b),
            (Float(a), Float(b)) => a.total_cmp(b),
            (Int(a), Float(b)) => (*a as f64).total_cmp(b),
            (Float(a), Int(b)) => a.total_cmp(&(*b as f64)),
            (Numeric(a), Numeric(b)) => a.cmp(b),
            (Int(a), Numeric(b)) => crate::numeric::Numeric::from_i64(*a).cmp(b),
            (Numeric(a), Int(b)) => a.cmp(&crate::numeric::Numeric::from_i64(*b)),
            (Numeric(a), Float(b)) => a.to_f64().total_cmp(b),
            (Float(a), Numeric(b)) => a.total_cmp(&b.to_f64()),
            (Text(a), Text(b)) => a.cmp(b),
            (Bytes(a), Bytes(b)) => a.cmp(b),
            (Timestamp(a) | TimestampTz(a), Timestamp(b) | TimestampTz(b)) => a.cmp(b),
            (Date(a), Date(b)) => a.cmp(b),
            (Interval(a), Interval(b)) => a.cmp_span(b),
            (Jsonb(a), Jsonb(b)) => a.compare(b),
            (Uuid(a), Uuid(b)) => a.cmp(b),
            (Time(a), Time(b)) => a.cmp(b),
            (Date(a), Timestamp(b) | TimestampTz(b)) => date_micros(*a).cmp(b),
            (Timestamp(a) | TimestampTz(a), Date(b)) => a.cmp(&date_micros(*b)),
            (Array(a), Array(b)) => {
                for (x, y) in a.iter().zip(b) {
                    match x.compare(y) {
                        Some(Ordering::Equal) => continue,
                        other => return other,
                    }
                }
                a.len().cmp(&b.len())
            }
            // Comparing text with another type casts the text, as PostgreSQL does for
            // unknown literals.
            (Text(a), b) => Value::parse_text(a, b.natural_type()).ok()?.compare(b)?,
            (a, Text(b)) => a.compare(&Value::parse_text(b, a.natural_type()).ok()?)?,
            _ => return None,
        })
    }

    /// A total order for sorting and grouping: NULLs last, incomparable values by kind.
    pub fn sort_cmp(&self, other: &Value) -> Ordering {
        match (self.is_null(), other.is_null()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            // Text against a non-text value orders by kind: parsing the text (as SQL
            // comparison does for untyped literals) would not give a total order.
            _ if matches!(self, Value::Text(_)) != matches!(other, Value::Text(_)) => {
                self.kind_rank().cmp(&other.kind_rank())
            }
            _ => self
                .compare(other)
                .unwrap_or_else(|| self.kind_rank().cmp(&other.kind_rank())),
        }
    }

    fn kind_rank(&self) -> u8 {
        match self {
            Value::Null => 0,
            Value::Bool(_) => 1,
            Value::Int(_) | Value::Float(_) | Value::Numeric(_) => 2,
            Value::Text(_) => 3,
            Value::Bytes(_) => 4,
            Value::Timestamp(_) | Value::TimestampTz(_) | Value::Date(_) => 5,
            Value::Array(_) => 6,
            Value::Interval(_) => 7,
            Value::Jsonb(_) => 8,
            Value::Uuid(_) => 9,
            Value::Time(_) => 10,
        }
    }

    /// SQL equality for grouping and DISTINCT: NULLs group together.
    pub fn group_eq(&self, other: &Value) -> bool {
        self.sort_cmp(other) == Ordering::Equal
    }
}

fn fit_numeric(n: Numeric, precision: Option<u32>, scale: u32) -> SqlResult<Value> {
    Ok(Value::Numeric(match precision {
        Some(p) => n.fit(p, scale)?,
        None => n,
    }))
}

/// Rejects an integer that does not fit the column's width.
pub fn check_int_range(v: i64, ty: DataType) -> SqlResult<Value> {
    let ok = match ty {
        DataType::Int2 => i16::try_from(v).is_ok(),
        DataType::Int4 => i32::try_from(v).is_ok(),
        DataType::Oid => u32::try_from(v).is_ok() || i32::try_from(v).is_ok(),
        _ => true,
    };
    if !ok {
        return Err(SqlError::numeric_out_of_range(format!(
            "{} out of range",
            ty.pg_name()
        )));
    }
    Ok(Value::Int(v))
}

fn pad_char(s: &str, n: u32) -> String {
    let len = s.chars().count();
    let mut out = s.to_string();
    for _ in len..n as usize {
        out.push(' ');
    }
    out
}

fn format_float(f: f64, ty: DataType) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if ty == DataType::Float4 {
        return format!("{}", f as f32);
    }
    // Rust's shortest round-trip form matches PostgreSQL 12+'s extra_float_digits = 1 output
    // except for exponents, which PostgreSQL writes as e+NN.
    let s = format!("{f}");
    if s.len() > 17 && f.abs() >= 1e16 {
        let e = format!("{f:e}");
        return match e.split_once('e') {
            Some((m, exp)) if !exp.starts_with('-') => format!("{m}e+{exp:0>2}"),
            Some((m, exp)) => format!("{m}e-{:0>2}", &exp[1..]),
            None => e,
        };
    }
    s
}

fn format_timestamp(us: i64, tz: bool) -> String {
    let secs = us.div_euclid(MICROS_PER_SECOND);
    let frac = us.rem_euclid(MICROS_PER_SECOND);
    let Some(dt) = DateTime::<Utc>::from_timestamp(secs, 0) else {
        return "infinity".into();
    };
    let mut out = dt.format("%Y-%m-%d %H:%M:%S").to_string();
    if frac != 0 {
        let f = format!(".{frac:06}");
        out.push_str(f.trim_end_matches('0'));
    }
    if tz {
        out.push_str("+00");
    }
    out
}

fn format_date(days: i32) -> String {
    match epoch().checked_add_signed(chrono::Duration::days(days as i64)) {
        Some(d) => d.format("%Y-%m-%d").to_string(),
        None => "infinity".into(),
    }
}

fn parse_date(text: &str) -> SqlResult<i32> {
    let t = text.trim();
    let d = NaiveDate::parse_from_str(t, "%Y-%m-%d").map_err(|_| {
        SqlError::new(
            ErrorKind::InvalidDatetimeFormat,
            format!("invalid input syntax for type date: \"{text}\""),
        )
    })?;
    Ok(epoch_days(d))
}

fn parse_timestamp(text: &str, tz: bool) -> SqlResult<i64> {
    let invalid = || {
        SqlError::new(
            ErrorKind::InvalidDatetimeFormat,
            format!(
                "invalid input syntax for type {}: \"{text}\"",
                if tz {
                    "timestamp with time zone"
                } else {
                    "timestamp without time zone"
                }
            ),
        )
    };
    let t = text.trim();
    if let Ok(dt) = DateTime::parse_from_rfc3339(t) {
        return Ok(dt.timestamp_micros());
    }
    for fmt in [
        "%Y-%m-%d %H:%M:%S%.f%#z",
        "%Y-%m-%d %H:%M:%S%#z",
        "%Y-%m-%dT%H:%M:%S%.f%#z",
        "%Y-%m-%d %H:%M%#z",
    ] {
        if let Ok(dt) = DateTime::parse_from_str(t, fmt) {
            return Ok(dt.timestamp_micros());
        }
    }
    for fmt in [
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(dt) = NaiveDateTime::parse_from_str(t, fmt) {
            return Ok(dt.and_utc().timestamp_micros());
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        return Ok(d.and_time(NaiveTime::MIN).and_utc().timestamp_micros());
    }
    Err(invalid())
}

/// A one-dimensional array literal: `{a,b,"c d",NULL}`.
fn parse_array(text: &str, ty: DataType) -> SqlResult<Value> {
    let invalid = || SqlError::invalid_text(format!("malformed array literal: \"{text}\""));
    let inner = text
        .trim()
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .ok_or_else(invalid)?;
    let mut items = Vec::new();
    if inner.trim().is_empty() {
        return Ok(Value::Array(items));
    }
    let mut chars = inner.chars().peekable();
    loop {
        let mut item = String::new();
        let mut quoted = false;
        while chars.peek() == Some(&' ') {
            chars.next();
        }
        if chars.peek() == Some(&'"') {
            quoted = true;
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => item.extend(chars.next()),
                    c => item.push(c),
                }
            }
        }
        while let Some(&c) = chars.peek() {
            if c == ',' {
                break;
            }
            item.push(c);
            chars.next();
        }
        let element = if !quoted && item.trim().eq_ignore_ascii_case("null") {
            Value::Null
        } else if let Some(element) = ty.element().filter(|e| !e.is_text_family()) {
            Value::parse_text(item.trim(), element)?
        } else {
            Value::Text(if quoted {
                item
            } else {
                item.trim().to_string()
            })
        };
        items.push(element);
        if chars.next().is_none() {
            break;
        }
    }
    Ok(Value::Array(items))
}

fn parse_bytea(text: &str) -> SqlResult<Vec<u8>> {
    let invalid =
        || SqlError::invalid_text(format!("invalid input syntax for type bytea: \"{text}\""));
    if let Some(hex) = text.strip_prefix("\\x") {
        if hex.len() % 2 != 0 {
            return Err(invalid());
        }
        return (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).map_err(|_| invalid()))
            .collect();
    }
    Ok(text.as_bytes().to_vec())
}

/// Microseconds between the Unix epoch and PostgreSQL's epoch (2000-01-01).
pub const PG_EPOCH_OFFSET_MICROS: i64 = 946_684_800 * MICROS_PER_SECOND;
/// Days between the Unix epoch and PostgreSQL's epoch.
pub const PG_EPOCH_OFFSET_DAYS: i32 = 10_957;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trips() {
        let cases = [
            ("2024-02-29 13:45:01.5", DataType::Timestamp),
            ("2024-02-29", DataType::Date),
            ("t", DataType::Bool),
            ("-42", DataType::Int8),
            ("1.5", DataType::Float8),
            ("\\x00ff", DataType::Bytea),
        ];
        for (text, ty) in cases {
            let v = Value::parse_text(text, ty).unwrap();
            assert_eq!(v.to_pg_text(ty).unwrap(), text);
        }
        assert_eq!(
            Value::parse_text("2024-01-01 00:00:00+02", DataType::TimestampTz)
                .unwrap()
                .to_pg_text(DataType::TimestampTz)
                .unwrap(),
            "2023-12-31 22:00:00+00"
        );
    }

    #[test]
    fn casts_check_ranges_and_lengths() {
        assert!(Value::Int(40_000).cast(DataType::Int2).is_err());
        assert!(Value::text("abcd")
            .cast(DataType::Varchar(Some(3)))
            .is_err());
        assert_eq!(
            Value::text("ab  ")
                .cast(DataType::Char(2))
                .unwrap()
                .to_pg_text(DataType::Char(3))
                .unwrap(),
            "ab "
        );
        assert_eq!(
            Value::Float(2.5)
                .cast(DataType::Int4)
                .unwrap()
                .to_pg_text(DataType::Int4)
                .unwrap(),
            "2"
        );
        assert!(Value::text("x1").cast(DataType::Int4).is_err());
    }
}
