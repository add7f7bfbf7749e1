//! One value codec for the two byte forms of a row: rows stored in pages (`Stored`, framed
//! by `ledger::row`) and rows packed into log commands (`Packed`, framed by
//! [`crate::PackedRows`]). Both open each value with a `value_tag` byte, hold the integers
//! 0..=127 in the tag itself and the other integers as zigzag varints; they differ only in
//! how a payload writes its numbers — fixed-width little-endian in pages, varints in the
//! log — which a [`Layout`] says. Both forms are on disk, so neither layout may change a
//! byte: the tests pin each one's bytes.
//!
//! Decoding assigns each value into a slot made beforehand (`read_slots`): a value pushed
//! onto a `Vec` (or returned in a `Result`) is built on the stack and copied, and that
//! copy's wide loads wait on the narrow stores that just built it — most of the time
//! decoding took under bulk inserts. Integers, the common kind, are read before anything
//! else and only their payload is stored (`Value::set_int`).

use crate::value_tag::{
    put_varint, read_varint, unzigzag, zigzag, ARRAY, BYTES, DATE, FALSE, FLOAT, INT, INTERVAL,
    JSONB, NULL, NUMERIC, SMALL_INT, SMALL_NUMERIC, TEXT, TIME, TIMESTAMP, TIMESTAMPTZ, TRUE, UUID,
    VARINT, WHOLE_NUMERIC, WIDE_NUMERIC,
};
use crate::{Interval, Jsonb, Numeric, Value};

/// Why bytes did not decode (the framing layer adds where they came from).
pub type Malformed = String;

/// How one byte form writes the numbers inside a value's payload.
pub trait Layout {
    /// The tag of an integer outside 0..=127 (its payload a zigzag varint).
    const INT_TAG: u8;
    /// How deep arrays nest: 1 is arrays of scalars only.
    const MAX_ARRAY_DEPTH: usize;
    /// A length: of text, bytes, jsonb's text, an array.
    fn put_length(out: &mut Vec<u8>, n: usize);
    /// A 64-bit payload: timestamps, times, an interval's microseconds.
    fn put_i64(out: &mut Vec<u8>, v: i64);
    /// A 32-bit payload: dates, an interval's months and days.
    fn put_i32(out: &mut Vec<u8>, v: i32);
    fn put_scale(out: &mut Vec<u8>, scale: u32);
    fn length(c: &mut Cursor<'_>) -> Result<usize, Malformed>;
    fn i64(c: &mut Cursor<'_>) -> Result<i64, Malformed>;
    fn i32(c: &mut Cursor<'_>) -> Result<i32, Malformed>;
    fn scale(c: &mut Cursor<'_>) -> Result<u32, Malformed>;
    /// A value under a tag only this layout reads (rows stored by earlier builds); None when
    /// `tag` is not one.
    fn legacy(tag: u8, c: &mut Cursor<'_>) -> Option<Result<Value, Malformed>>;
}

/// Rows as stored in pages: fixed-width little-endian payloads, arrays of scalars.
pub struct Stored;

/// Rows as packed into log commands: varint payloads, arrays nested up to 64 deep.
pub struct Packed;

impl Layout for Stored {
    const INT_TAG: u8 = VARINT;
    const MAX_ARRAY_DEPTH: usize = 1;
    fn put_length(out: &mut Vec<u8>, n: usize) {
        out.extend_from_slice(&(n as u32).to_le_bytes());
    }
    fn put_i64(out: &mut Vec<u8>, v: i64) {
        out.extend_from_slice(&v.to_le_bytes());
    }
    fn put_i32(out: &mut Vec<u8>, v: i32) {
        out.extend_from_slice(&v.to_le_bytes());
    }
    fn put_scale(out: &mut Vec<u8>, scale: u32) {
        out.push(scale as u8);
    }
    fn length(c: &mut Cursor<'_>) -> Result<usize, Malformed> {
        let n = u32::from_le_bytes(c.array()?) as usize;
        c.within(n)
    }
    fn i64(c: &mut Cursor<'_>) -> Result<i64, Malformed> {
        Ok(i64::from_le_bytes(c.array()?))
    }
    fn i32(c: &mut Cursor<'_>) -> Result<i32, Malformed> {
        Ok(i32::from_le_bytes(c.array()?))
    }
    fn scale(c: &mut Cursor<'_>) -> Result<u32, Malformed> {
        Ok(c.byte()? as u32)
    }
    /// Integers as builds before varints stored them: eight bytes.
    fn legacy(tag: u8, c: &mut Cursor<'_>) -> Option<Result<Value, Malformed>> {
        (tag == INT).then(|| c.array().map(|b| Value::Int(i64::from_le_bytes(b))))
    }
}

impl Layout for Packed {
    const INT_TAG: u8 = INT;
    const MAX_ARRAY_DEPTH: usize = 64;
    fn put_length(out: &mut Vec<u8>, n: usize) {
        put_varint(out, n as u64);
    }
    fn put_i64(out: &mut Vec<u8>, v: i64) {
        put_varint(out, zigzag(v));
    }
    fn put_i32(out: &mut Vec<u8>, v: i32) {
        put_varint(out, zigzag(v as i64));
    }
    fn put_scale(out: &mut Vec<u8>, scale: u32) {
        put_varint(out, scale as u64);
    }
    fn length(c: &mut Cursor<'_>) -> Result<usize, Malformed> {
        let n = c.varint()?;
        c.within(usize::try_from(n).unwrap_or(usize::MAX))
    }
    fn i64(c: &mut Cursor<'_>) -> Result<i64, Malformed> {
        Ok(unzigzag(c.varint()?))
    }
    fn i32(c: &mut Cursor<'_>) -> Result<i32, Malformed> {
        i32::try_from(unzigzag(c.varint()?)).map_err(|e| e.to_string())
    }
    fn scale(c: &mut Cursor<'_>) -> Result<u32, Malformed> {
        u32::try_from(c.varint()?).map_err(|e| e.to_string())
    }
    fn legacy(_: u8, _: &mut Cursor<'_>) -> Option<Result<Value, Malformed>> {
        None
    }
}

/// Appends `value` in layout `L`.
pub fn put_value<L: Layout>(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.push(NULL),
        Value::Bool(false) => out.push(FALSE),
        Value::Bool(true) => out.push(TRUE),
        Value::Int(i) => put_int::<L>(out, *i),
        Value::Float(f) => {
            out.push(FLOAT);
            out.extend_from_slice(&f.to_le_bytes());
        }
        Value::Numeric(n) => match n.mantissa() {
            _ if n.scale() == 0 && !n.is_negative() && n.magnitude() <= u64::MAX as u128 => {
                out.push(WHOLE_NUMERIC);
                put_varint(out, n.magnitude() as u64);
            }
            Some(mantissa) if i64::try_from(mantissa).is_ok() => {
                out.push(SMALL_NUMERIC);
                put_varint(out, zigzag(mantissa as i64));
                L::put_scale(out, n.scale());
            }
            Some(mantissa) => {
                out.push(NUMERIC);
                out.extend_from_slice(&mantissa.to_le_bytes());
                L::put_scale(out, n.scale());
            }
            None => {
                out.push(WIDE_NUMERIC);
                out.push(n.is_negative() as u8);
                out.extend_from_slice(&n.magnitude().to_le_bytes());
                L::put_scale(out, n.scale());
            }
        },
        Value::Text(s) => put_bytes::<L>(out, TEXT, s.as_bytes()),
        Value::Bytes(b) => put_bytes::<L>(out, BYTES, b),
        Value::Jsonb(j) => put_bytes::<L>(out, JSONB, j.to_text().as_bytes()),
        Value::Timestamp(t) => put_tagged_i64::<L>(out, TIMESTAMP, *t),
        Value::TimestampTz(t) => put_tagged_i64::<L>(out, TIMESTAMPTZ, *t),
        Value::Time(t) => put_tagged_i64::<L>(out, TIME, *t),
        Value::Date(d) => {
            out.push(DATE);
            L::put_i32(out, *d);
        }
        Value::Interval(i) => {
            out.push(INTERVAL);
            L::put_i32(out, i.months);
            L::put_i32(out, i.days);
            L::put_i64(out, i.micros);
        }
        Value::Uuid(u) => {
            out.push(UUID);
            out.extend_from_slice(u);
        }
        // A one-dimensional array: its length, then each element as a value.
        Value::Array(items) => {
            out.push(ARRAY);
            L::put_length(out, items.len());
            for item in items {
                put_value::<L>(out, item);
            }
        }
    }
}

/// An integer: in the tag from 0 to 127, else `L::INT_TAG` and a zigzag varint.
pub fn put_int<L: Layout>(out: &mut Vec<u8>, i: i64) {
    if (0..128).contains(&i) {
        out.push(SMALL_INT + i as u8)
    } else {
        out.push(L::INT_TAG);
        put_varint(out, zigzag(i));
    }
}

fn put_bytes<L: Layout>(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
    out.push(tag);
    L::put_length(out, bytes.len());
    out.extend_from_slice(bytes);
}

fn put_tagged_i64<L: Layout>(out: &mut Vec<u8>, tag: u8, v: i64) {
    out.push(tag);
    L::put_i64(out, v);
}

/// Bytes being read, from the front.
pub struct Cursor<'a> {
    bytes: &'a [u8],
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor { bytes }
    }

    /// What is left to read.
    pub fn rest(&self) -> &'a [u8] {
        self.bytes
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if self.bytes.len() < n {
            return Err("the bytes end in the middle of a value".into());
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], Malformed> {
        Ok(self.take(N)?.try_into().expect("length checked"))
    }

    pub fn byte(&mut self) -> Result<u8, Malformed> {
        Ok(self.take(1)?[0])
    }

    pub fn varint(&mut self) -> Result<u64, Malformed> {
        let (v, len) =
            read_varint(self.bytes).ok_or("a varint is cut short or longer than ten bytes")?;
        self.bytes = &self.bytes[len..];
        Ok(v)
    }

    /// `n` as a count of things still to read, each at least a byte: never more than the
    /// bytes left, so damaged bytes cannot ask for a huge allocation.
    pub fn within(&self, n: usize) -> Result<usize, Malformed> {
        if n > self.bytes.len() {
            return Err(format!(
                "{n} items announced with {} bytes left",
                self.bytes.len()
            ));
        }
        Ok(n)
    }
}

/// Reads `row.len()` values into the slots of `row` (see the module's header).
pub fn read_slots<L: Layout>(c: &mut Cursor<'_>, row: &mut [Value]) -> Result<(), Malformed> {
    for slot in row.iter_mut() {
        match c.bytes.first() {
            Some(&tag @ SMALL_INT..) => {
                c.bytes = &c.bytes[1..];
                slot.set_int((tag - SMALL_INT) as i64);
            }
            Some(&tag) if tag == L::INT_TAG => {
                c.bytes = &c.bytes[1..];
                slot.set_int(unzigzag(c.varint()?));
            }
            Some(&WHOLE_NUMERIC) => {
                c.bytes = &c.bytes[1..];
                slot.set_whole_numeric(c.varint()?.into());
            }
            _ => read_value::<L>(c, slot, 0)?,
        }
    }
    Ok(())
}

/// Reads one value into `out`; `depth` is how many arrays enclose it.
pub fn read_value<L: Layout>(
    c: &mut Cursor<'_>,
    out: &mut Value,
    depth: usize,
) -> Result<(), Malformed> {
    let tag = c.byte()?;
    *out = match tag {
        SMALL_INT.. => Value::Int((tag - SMALL_INT) as i64),
        tag if tag == L::INT_TAG => Value::Int(unzigzag(c.varint()?)),
        NULL => Value::Null,
        FALSE => Value::Bool(false),
        TRUE => Value::Bool(true),
        FLOAT => Value::Float(f64::from_le_bytes(c.array()?)),
        NUMERIC => {
            let mantissa = i128::from_le_bytes(c.array()?);
            let scale = L::scale(c)?;
            Value::Numeric(Numeric::new(mantissa, scale).map_err(|e| e.message)?)
        }
        WHOLE_NUMERIC => Value::Numeric(Numeric::from_u128(c.varint()?.into())),
        SMALL_NUMERIC => {
            let mantissa = unzigzag(c.varint()?);
            let scale = L::scale(c)?;
            Value::Numeric(Numeric::new(mantissa.into(), scale).map_err(|e| e.message)?)
        }
        WIDE_NUMERIC => {
            let negative = c.byte()? != 0;
            let magnitude = u128::from_le_bytes(c.array()?);
            let scale = L::scale(c)?;
            let n = Numeric::from_parts(negative, magnitude, scale).map_err(|e| e.message)?;
            Value::Numeric(n)
        }
        TEXT => {
            let len = L::length(c)?;
            Value::Text(text(c, len)?.to_owned())
        }
        BYTES => {
            let len = L::length(c)?;
            Value::Bytes(c.take(len)?.to_vec())
        }
        JSONB => {
            let len = L::length(c)?;
            Value::Jsonb(Box::new(
                Jsonb::parse(text(c, len)?).map_err(|e| e.message)?,
            ))
        }
        TIMESTAMP => Value::Timestamp(L::i64(c)?),
        TIMESTAMPTZ => Value::TimestampTz(L::i64(c)?),
        TIME => Value::Time(L::i64(c)?),
        DATE => Value::Date(L::i32(c)?),
        INTERVAL => Value::Interval(Interval {
            months: L::i32(c)?,
            days: L::i32(c)?,
            micros: L::i64(c)?,
        }),
        UUID => Value::Uuid(c.array()?),
        ARRAY if depth < L::MAX_ARRAY_DEPTH => {
            let len = L::length(c)?;
            let mut items = Vec::with_capacity(len);
            items.resize_with(len, || Value::Int(0));
            for item in items.iter_mut() {
                read_value::<L>(c, item, depth + 1)?;
            }
            Value::Array(items)
        }
        ARRAY => return Err("arrays nest deeper than this form allows".into()),
        tag => match L::legacy(tag, c) {
            Some(value) => value?,
            None => return Err(format!("unknown value tag {tag}")),
        },
    };
    Ok(())
}

fn text<'a>(c: &mut Cursor<'a>, len: usize) -> Result<&'a str, Malformed> {
    std::str::from_utf8(c.take(len)?).map_err(|e| e.to_string())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A row with a value of every kind, an array of scalars among them.
    pub(crate) fn every_kind() -> Vec<Value> {
        vec![
            Value::Null,
            Value::Bool(false),
            Value::Bool(true),
            Value::Int(0),
            Value::Int(127),
            Value::Int(128),
            Value::Int(-1),
            Value::Int(i64::MIN),
            Value::Int(i64::MAX),
            Value::Float(-2.5),
            Value::Numeric(Numeric::new(-123_456_789_012_345_678_901_234_567, 7).unwrap()),
            Value::Text("ünïcode '' text".into()),
            Value::Text(String::new()),
            Value::Bytes(vec![0, 255, 7]),
            Value::Timestamp(-1),
            Value::TimestampTz(1_790_000_000_000_000),
            Value::Date(i32::MIN),
            Value::Array(vec![Value::Int(1), Value::Null, Value::text("a")]),
            Value::Interval(Interval {
                months: -14,
                days: 3,
                micros: i64::MIN,
            }),
            Value::Time(86_400_000_000),
            Value::Uuid([7; 16]),
            Value::Jsonb(Box::new(Jsonb::parse("{\"a\": [1, 2.5]}").unwrap())),
        ]
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn encoded<L: Layout>(row: &[Value]) -> Vec<u8> {
        let mut out = Vec::new();
        for v in row {
            put_value::<L>(&mut out, v);
        }
        out
    }

    fn decoded<L: Layout>(bytes: &[u8], n: usize) -> Result<Vec<Value>, Malformed> {
        let mut row = vec![Value::Int(0); n];
        let mut c = Cursor::new(bytes);
        read_slots::<L>(&mut c, &mut row)?;
        assert!(c.rest().is_empty(), "bytes left over");
        Ok(row)
    }

    // Each layout's bytes for `every_kind`, as the builds before this module wrote them
    // (`ledger::row::encode_row` past its 10-byte header; `PackedRows::pack` past its row
    // and value counts): a change here is a change of the stored or the logged format.
    const STORED: &str =
        "00010280ff108002100110ffffffffffffffffff0110feffffffffffffffff010400000000000004\
        c00579b460d3570da70e02e199ffffffffff070611000000c3bc6ec3af636f646520272720746578\
        740600000000070300000000ff0708ffffffffffffffff0900e025dafe5b06000a000000800b0300\
        000081000601000000610cf2ffffff0300000000000000000000800f0060d71d140000000e070707\
        070707070707070707070707070d0f0000007b2261223a205b312c20322e355d7d";
    const PACKED: &str =
        "00010280ff038002030103ffffffffffffffffff0103feffffffffffffffff010400000000000004\
        c00579b460d3570da70e02e199ffffffffff070611c3bc6ec3af636f646520272720746578740600\
        070300ff070801098080afa2dbffad060affffffff0f0b0381000601610c1b06ffffffffffffffff\
        ff010f8080bbdd83050e070707070707070707070707070707070d0f7b2261223a205b312c20322e\
        355d7d";

    /// Numerics past an i128 mantissa, under their own tag, in both layouts.
    #[test]
    fn wide_numerics_round_trip() {
        let row = vec![
            Value::Numeric(Numeric::from_u128(u128::MAX)),
            Value::Numeric(Numeric::from_parts(true, u128::MAX - 1, 30).unwrap()),
            Value::Numeric(Numeric::from_parts(false, 1 << 127, 0).unwrap()),
        ];
        for bytes in [encoded::<Stored>(&row), encoded::<Packed>(&row)] {
            assert_eq!(bytes[0], WIDE_NUMERIC);
        }
        let stored = decoded::<Stored>(&encoded::<Stored>(&row), row.len()).unwrap();
        let packed = decoded::<Packed>(&encoded::<Packed>(&row), row.len()).unwrap();
        for back in [stored, packed] {
            assert_eq!(format!("{back:?}"), format!("{row:?}"));
        }
    }

    /// Whole numerics to 2^64 − 1 take their varint alone, others whose mantissa fits an
    /// i64 a zigzag varint and a scale; the SMALL_NUMERIC and 18-byte NUMERIC forms builds
    /// before wrote for whole ones still read.
    #[test]
    fn small_numerics_take_a_few_bytes_and_old_ones_still_read() {
        let row = vec![
            Value::Numeric(Numeric::from_u128(5)),
            Value::Numeric(Numeric::from_u128(u64::MAX as u128)),
            Value::Numeric(Numeric::new(-12_345, 2).unwrap()),
            Value::Numeric(Numeric::from_i64(i64::MIN)),
        ];
        for bytes in [encoded::<Stored>(&row), encoded::<Packed>(&row)] {
            assert_eq!(&bytes[..2], &[WHOLE_NUMERIC, 5]);
            assert_eq!(bytes[13], SMALL_NUMERIC);
            assert_eq!(bytes.len(), 2 + 11 + 5 + 12, "{}", hex(&bytes));
        }
        for back in [
            decoded::<Stored>(&encoded::<Stored>(&row), row.len()).unwrap(),
            decoded::<Packed>(&encoded::<Packed>(&row), row.len()).unwrap(),
        ] {
            assert_eq!(format!("{back:?}"), format!("{row:?}"));
        }
        let mut old = vec![NUMERIC];
        old.extend_from_slice(&5i128.to_le_bytes());
        old.extend_from_slice(&[0, SMALL_NUMERIC, 10, 0]);
        let back = decoded::<Stored>(&old, 2).unwrap();
        assert_eq!(format!("{back:?}"), format!("{:?}", [&row[0], &row[0]]));
    }

    #[test]
    fn each_layout_writes_the_bytes_it_always_wrote() {
        let row = every_kind();
        assert_eq!(hex(&encoded::<Stored>(&row)), STORED);
        assert_eq!(hex(&encoded::<Packed>(&row)), PACKED);
    }

    #[test]
    fn every_kind_round_trips_in_both_layouts() {
        let row = every_kind();
        type Decode = fn(&[u8], usize) -> Result<Vec<Value>, Malformed>;
        let layouts: [(Vec<u8>, Decode); 2] = [
            (encoded::<Stored>(&row), decoded::<Stored>),
            (encoded::<Packed>(&row), decoded::<Packed>),
        ];
        for (bytes, decode) in layouts {
            let back = decode(&bytes, row.len()).unwrap();
            assert_eq!(format!("{row:?}"), format!("{back:?}"));
            // Cut anywhere, the bytes are refused, never a panic.
            for cut in 0..bytes.len() {
                assert!(decode(&bytes[..cut], row.len()).is_err());
            }
        }
    }

    #[test]
    fn stored_rows_of_earlier_builds_still_read() {
        // Eight bytes per integer under INT, as builds before varints stored them.
        let mut old = vec![INT];
        old.extend_from_slice(&(-5i64).to_le_bytes());
        let back = decoded::<Stored>(&old, 1).unwrap();
        assert_eq!(format!("{back:?}"), "[Int(-5)]");
        // The log never had that form: INT is its varint integer.
        assert!(decoded::<Packed>(&old, 1).is_err());
    }
}
