//! Rows of values in the compact byte form they travel in through the replicated log.
//!
//! A 1,000-row `INSERT INTO transfers` is proposed with its rows already built, and every
//! replica's executor decodes them before it stores them. Through serde, bincode reads each
//! value as an enum variant through a visitor and every row as a sequence of them: about a
//! tenth of the executor's time under bulk inserts. [`PackedRows`] serializes the rows as one
//! byte string instead, written and read here by a loop over a tag byte per value: integers
//! (and the time types) as zigzag varints, small non-negative integers in the tag itself.
//!
//! The form is part of the log's format: its tags are `value_tag`'s, and small integers take
//! the tags from 128 up.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::value_tag::{
    put_varint, read_varint, unzigzag, zigzag, ARRAY, BYTES, DATE, FALSE, FLOAT, INT, INTERVAL,
    JSONB, NULL, NUMERIC, SMALL_INT, TEXT, TIME, TIMESTAMP, TIMESTAMPTZ, TRUE, UUID,
};
use crate::{Interval, Numeric, Value};

/// Rows of values in the packed form, read a row at a time ([`PackedRows::rows`]): the
/// executor decodes each row just before it stores it, while its few hundred bytes are in
/// cache, instead of a whole statement's rows into memory first.
#[derive(Clone)]
pub struct PackedRows {
    count: usize,
    /// The row count, then the rows (see [`PackedRows::pack`]).
    bytes: Vec<u8>,
    /// Where the first row starts in `bytes` (after the count).
    first_row: usize,
}

impl PackedRows {
    /// Packs `rows`: the row count, then each row's value count and values, as varints and
    /// tagged values.
    pub fn pack<R: AsRef<[Value]>>(rows: &[R]) -> PackedRows {
        let mut packer = Packer::default();
        for row in rows {
            packer.push(row.as_ref());
        }
        packer.finish()
    }

    /// Takes packed bytes as they came from [`PackedRows::as_bytes`]: only the row count is
    /// read here; a damaged row is an error when [`PackedRows::rows`] reaches it.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<PackedRows, String> {
        let mut reader = Reader {
            bytes: &bytes,
            at: 0,
        };
        let count = reader.length()?;
        let first_row = reader.at;
        Ok(PackedRows {
            count,
            bytes,
            first_row,
        })
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The rows in order, each decoded as it is reached; an error names what is wrong with
    /// damaged bytes (bytes left after the last row make it an error too).
    pub fn rows(&self) -> PackedRowIter<'_> {
        PackedRowIter {
            reader: Reader {
                bytes: &self.bytes,
                at: self.first_row,
            },
            left: self.count,
        }
    }

    /// Every row, decoded.
    pub fn unpack(&self) -> Result<Vec<Vec<Value>>, String> {
        self.rows().collect()
    }
}

/// Packs rows one at a time, as they are built: [`PackedRows::pack`] without the rows
/// gathered in memory first.
#[derive(Default)]
pub struct Packer {
    count: usize,
    /// The rows, without the count that goes before them.
    rows: Vec<u8>,
}

impl Packer {
    pub fn push(&mut self, row: &[Value]) {
        put_varint(&mut self.rows, row.len() as u64);
        for value in row {
            put_value(&mut self.rows, value);
        }
        self.count += 1;
    }

    /// Pushes a row of `shape`, its given columns' values from `given` (by their places in
    /// it), each already in its column's form: the bytes `push` would write for the whole row.
    pub fn push_shaped(&mut self, shape: &RowShape, given: &[Value]) {
        self.push_shaped_with(shape, |out, i| put_value(out, &given[i]));
    }

    /// `push_shaped` for rows whose given values are all integers: the bytes it writes for
    /// them as `Value::Int`s, without the values made.
    pub fn push_shaped_ints(&mut self, shape: &RowShape, given: &[i64]) {
        self.push_shaped_with(shape, |out, i| put_int(out, given[i]));
    }

    fn push_shaped_with(
        &mut self,
        shape: &RowShape,
        mut put_given: impl FnMut(&mut Vec<u8>, usize),
    ) {
        put_varint(&mut self.rows, shape.width as u64);
        for part in &shape.parts {
            match part {
                ShapePart::Given(i) => put_given(&mut self.rows, *i),
                ShapePart::Fixed(start, end) => {
                    self.rows.extend_from_slice(&shape.fixed[*start..*end])
                }
            }
        }
        self.count += 1;
    }

    /// Makes room for `more` rows as large as the rows so far are on average (a statement
    /// of many rows then grows its buffer once rather than doubling it again and again).
    pub fn reserve_rows(&mut self, more: usize) {
        if let Some(average) = self.rows.len().checked_div(self.count) {
            self.rows.reserve((average + 1) * more);
        }
    }

    pub fn finish(self) -> PackedRows {
        let mut bytes = Vec::with_capacity(10 + self.rows.len());
        put_varint(&mut bytes, self.count as u64);
        let first_row = bytes.len();
        bytes.extend_from_slice(&self.rows);
        PackedRows {
            count: self.count,
            bytes,
            first_row,
        }
    }
}

/// What fills one column of the rows a [`RowShape`] packs.
pub enum ColumnFill {
    /// The value given for the row at this place.
    Given(usize),
    /// The same value in every row.
    Fixed(Value),
}

/// Rows whose columns are each either given per row or the same in every row (an INSERT's
/// defaults): the fixed ones are packed once, here, and copied into every row
/// ([`Packer::push_shaped`]).
pub struct RowShape {
    width: usize,
    parts: Vec<ShapePart>,
    fixed: Vec<u8>,
}

enum ShapePart {
    Given(usize),
    /// A run of fixed columns' bytes in `RowShape::fixed`.
    Fixed(usize, usize),
}

impl RowShape {
    pub fn new(columns: impl IntoIterator<Item = ColumnFill>) -> RowShape {
        let mut shape = RowShape {
            width: 0,
            parts: Vec::new(),
            fixed: Vec::new(),
        };
        for column in columns {
            shape.width += 1;
            match column {
                ColumnFill::Given(i) => shape.parts.push(ShapePart::Given(i)),
                ColumnFill::Fixed(value) => {
                    let start = shape.fixed.len();
                    put_value(&mut shape.fixed, &value);
                    let end = shape.fixed.len();
                    match shape.parts.last_mut() {
                        Some(ShapePart::Fixed(_, run_end)) if *run_end == start => *run_end = end,
                        _ => shape.parts.push(ShapePart::Fixed(start, end)),
                    }
                }
            }
        }
        shape
    }
}

impl std::fmt::Debug for PackedRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.rows()).finish()
    }
}

/// The rows of a [`PackedRows`], decoded one at a time.
pub struct PackedRowIter<'a> {
    reader: Reader<'a>,
    left: usize,
}

impl Iterator for PackedRowIter<'_> {
    type Item = Result<Vec<Value>, String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let row = self.reader.row();
        if row.is_err() {
            // Nothing after a damaged row can be read.
            self.left = 0;
        } else if self.left == 0 && self.reader.at != self.reader.bytes.len() {
            return Some(Err(format!(
                "{} bytes after the last packed row",
                self.reader.bytes.len() - self.reader.at
            )));
        }
        Some(row)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for PackedRowIter<'_> {}

/// Arrays nest at most this deep in packed rows (deeper ones are refused when read, so
/// damaged bytes cannot exhaust the stack).
const MAX_ARRAY_DEPTH: usize = 64;

fn put_tagged_int(out: &mut Vec<u8>, tag: u8, v: i64) {
    out.push(tag);
    put_varint(out, zigzag(v));
}

fn put_int(out: &mut Vec<u8>, i: i64) {
    if (0..128).contains(&i) {
        out.push(SMALL_INT + i as u8)
    } else {
        put_tagged_int(out, INT, i)
    }
}

fn put_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.push(NULL),
        Value::Bool(false) => out.push(FALSE),
        Value::Bool(true) => out.push(TRUE),
        Value::Int(i) => put_int(out, *i),
        Value::Float(f) => {
            out.push(FLOAT);
            out.extend_from_slice(&f.to_le_bytes());
        }
        Value::Numeric(n) => {
            out.push(NUMERIC);
            out.extend_from_slice(&n.mantissa().to_le_bytes());
            put_varint(out, n.scale() as u64);
        }
        Value::Text(s) => {
            out.push(TEXT);
            put_varint(out, s.len() as u64);
            out.extend_from_slice(s.as_bytes());
        }
        Value::Bytes(b) => {
            out.push(BYTES);
            put_varint(out, b.len() as u64);
            out.extend_from_slice(b);
        }
        Value::Timestamp(t) => put_tagged_int(out, TIMESTAMP, *t),
        Value::TimestampTz(t) => put_tagged_int(out, TIMESTAMPTZ, *t),
        Value::Date(d) => put_tagged_int(out, DATE, *d as i64),
        Value::Time(t) => put_tagged_int(out, TIME, *t),
        Value::Interval(i) => {
            out.push(INTERVAL);
            for part in [i.months as i64, i.days as i64, i.micros] {
                put_varint(out, zigzag(part));
            }
        }
        Value::Jsonb(j) => {
            let text = j.to_text();
            out.push(JSONB);
            put_varint(out, text.len() as u64);
            out.extend_from_slice(text.as_bytes());
        }
        Value::Uuid(u) => {
            out.push(UUID);
            out.extend_from_slice(u);
        }
        Value::Array(items) => {
            out.push(ARRAY);
            put_varint(out, items.len() as u64);
            for item in items {
                put_value(out, item);
            }
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    /// One row. Its slots are made first (all `Int(0)`) and each value is assigned into its
    /// own: a value pushed onto a `Vec` (or returned in a `Result`) is built on the stack and
    /// copied, and that copy's wide loads wait on the narrow stores that just built it —
    /// most of the time decoding took under bulk inserts. Integers, the common kind, are
    /// read here and only their payload is stored.
    fn row(&mut self) -> Result<Vec<Value>, String> {
        let len = self.length()?;
        let mut row = Vec::with_capacity(len);
        row.resize_with(len, || Value::Int(0));
        for slot in row.iter_mut() {
            match self.bytes.get(self.at) {
                Some(&tag @ SMALL_INT..) => {
                    self.at += 1;
                    slot.set_int((tag - SMALL_INT) as i64);
                }
                Some(&INT) => {
                    self.at += 1;
                    let v = self.int()?;
                    slot.set_int(v);
                }
                _ => self.read_value(slot, 0)?,
            }
        }
        Ok(row)
    }

    fn byte(&mut self) -> Result<u8, String> {
        let b = *self
            .bytes
            .get(self.at)
            .ok_or("packed rows end in the middle of a value")?;
        self.at += 1;
        Ok(b)
    }

    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or("packed rows end in the middle of a value")?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn varint(&mut self) -> Result<u64, String> {
        let (v, len) = read_varint(&self.bytes[self.at..])
            .ok_or("a varint in packed rows is cut short or longer than ten bytes")?;
        self.at += len;
        Ok(v)
    }

    /// A count of things still to read, each at least a byte: never more than the bytes
    /// left, so damaged bytes cannot ask for a huge allocation.
    fn length(&mut self) -> Result<usize, String> {
        let n = self.varint()?;
        if n > (self.bytes.len() - self.at) as u64 {
            return Err(format!(
                "packed rows announce {n} items with {} bytes left",
                self.bytes.len() - self.at
            ));
        }
        Ok(n as usize)
    }

    fn int(&mut self) -> Result<i64, String> {
        Ok(unzigzag(self.varint()?))
    }

    /// Reads one value into `out`, a slot of the row (see `row`).
    fn read_value(&mut self, out: &mut Value, depth: usize) -> Result<(), String> {
        match self.byte()? {
            tag @ SMALL_INT.. => *out = Value::Int((tag - SMALL_INT) as i64),
            NULL => *out = Value::Null,
            FALSE => *out = Value::Bool(false),
            TRUE => *out = Value::Bool(true),
            INT => *out = Value::Int(self.int()?),
            FLOAT => {
                let bytes = self.take(8)?.try_into().expect("eight bytes");
                *out = Value::Float(f64::from_le_bytes(bytes))
            }
            NUMERIC => {
                let mantissa = i128::from_le_bytes(self.take(16)?.try_into().expect("16 bytes"));
                let scale = u32::try_from(self.varint()?).map_err(|e| e.to_string())?;
                *out = Value::Numeric(Numeric::new(mantissa, scale).map_err(|e| e.to_string())?)
            }
            TEXT => {
                let len = self.length()?;
                let text = std::str::from_utf8(self.take(len)?).map_err(|e| e.to_string())?;
                *out = Value::Text(text.to_owned())
            }
            BYTES => {
                let len = self.length()?;
                *out = Value::Bytes(self.take(len)?.to_vec())
            }
            TIMESTAMP => *out = Value::Timestamp(self.int()?),
            TIME => *out = Value::Time(self.int()?),
            TIMESTAMPTZ => *out = Value::TimestampTz(self.int()?),
            DATE => *out = Value::Date(i32::try_from(self.int()?).map_err(|e| e.to_string())?),
            ARRAY if depth < MAX_ARRAY_DEPTH => {
                let len = self.length()?;
                let mut items = Vec::with_capacity(len);
                items.resize_with(len, || Value::Int(0));
                for item in items.iter_mut() {
                    self.read_value(item, depth + 1)?;
                }
                *out = Value::Array(items)
            }
            ARRAY => return Err("arrays in packed rows nest too deep".into()),
            INTERVAL => {
                let months = i32::try_from(self.int()?).map_err(|e| e.to_string())?;
                let days = i32::try_from(self.int()?).map_err(|e| e.to_string())?;
                let micros = self.int()?;
                *out = Value::Interval(Interval {
                    months,
                    days,
                    micros,
                })
            }
            JSONB => {
                let len = self.length()?;
                let text = std::str::from_utf8(self.take(len)?).map_err(|e| e.to_string())?;
                let j = crate::Jsonb::parse(text).map_err(|e| e.message)?;
                *out = Value::Jsonb(Box::new(j))
            }
            UUID => *out = Value::Uuid(self.take(16)?.try_into().expect("16 bytes")),
            tag => return Err(format!("unknown value tag {tag} in packed rows")),
        }
        Ok(())
    }
}

impl Serialize for PackedRows {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&self.bytes)
    }
}

impl<'de> Deserialize<'de> for PackedRows {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Bytes;
        impl serde::de::Visitor<'_> for Bytes {
            type Value = PackedRows;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("packed rows")
            }
            fn visit_bytes<E: serde::de::Error>(self, bytes: &[u8]) -> Result<PackedRows, E> {
                PackedRows::from_bytes(bytes.to_vec()).map_err(E::custom)
            }

            fn visit_byte_buf<E: serde::de::Error>(self, bytes: Vec<u8>) -> Result<PackedRows, E> {
                PackedRows::from_bytes(bytes).map_err(E::custom)
            }
        }
        deserializer.deserialize_byte_buf(Bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_kind() -> Vec<Value> {
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
            Value::Array(vec![Value::Int(1), Value::Array(vec![Value::Null])]),
            Value::Interval(Interval {
                months: -14,
                days: 3,
                micros: i64::MIN,
            }),
            Value::Time(86_400_000_000),
        ]
    }

    #[test]
    fn shaped_rows_pack_as_whole_rows() {
        let kinds = every_kind();
        // Every other column given, the rest fixed, runs of both.
        let given_at = |c: usize| c % 3 != 1;
        let shape = RowShape::new((0..kinds.len()).map(|c| {
            if given_at(c) {
                ColumnFill::Given(c)
            } else {
                ColumnFill::Fixed(kinds[c].clone())
            }
        }));
        let mut shaped = Packer::default();
        let mut whole = Packer::default();
        for round in 0..3i64 {
            let row: Vec<Value> = kinds
                .iter()
                .enumerate()
                .map(|(c, v)| match v {
                    Value::Int(i) if given_at(c) => Value::Int(i.wrapping_add(round)),
                    v => v.clone(),
                })
                .collect();
            shaped.push_shaped(&shape, &row);
            whole.push(&row);
        }
        assert_eq!(shaped.finish().as_bytes(), whole.finish().as_bytes());
    }

    /// Values have SQL's equality, not Rust's (NULL is not equal to NULL): compare the
    /// exact forms instead.
    fn same(a: &[Vec<Value>], b: &[Vec<Value>]) -> bool {
        format!("{a:?}") == format!("{b:?}")
    }

    fn decode(bytes: &[u8]) -> Result<Vec<Vec<Value>>, String> {
        PackedRows::from_bytes(bytes.to_vec())?.unpack()
    }

    #[test]
    fn every_kind_of_value_round_trips() {
        let rows = vec![every_kind(), vec![], every_kind()];
        let packed = PackedRows::pack(&rows);
        assert_eq!(packed.len(), 3);
        assert!(same(&decode(packed.as_bytes()).unwrap(), &rows));
        let through_bincode: PackedRows =
            bincode::deserialize(&bincode::serialize(&packed).unwrap()).unwrap();
        assert!(same(&through_bincode.unpack().unwrap(), &rows));
        assert_eq!(
            format!("{through_bincode:?}"),
            format!("{:?}", rows.iter().map(Ok::<_, String>).collect::<Vec<_>>())
        );
    }

    #[test]
    fn small_integers_take_one_byte() {
        let row = vec![Value::Int(1), Value::Int(0), Value::Int(127), Value::Null];
        // Row count, value count, then a byte per value.
        assert_eq!(PackedRows::pack(&[row]).as_bytes().len(), 2 + 4);
    }

    #[test]
    fn damaged_bytes_are_errors_not_panics() {
        let bytes = PackedRows::pack(&[every_kind()]).as_bytes().to_vec();
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut flipped = bytes.clone();
        for i in 0..flipped.len() {
            for bit in 0..8 {
                flipped[i] ^= 1 << bit;
                let _ = decode(&flipped);
                flipped[i] ^= 1 << bit;
            }
        }
        assert!(decode(&[1, 1, 12]).is_err(), "unknown tag");
        assert!(
            decode(&[1, 1, INT, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0])
                .is_err(),
            "overlong varint"
        );
        assert!(decode(&[0xff, 0xff, 0xff, 0x0f]).is_err(), "huge count");
        let mut deep = vec![1, 1];
        deep.extend([ARRAY, 1].repeat(MAX_ARRAY_DEPTH + 1));
        deep.push(NULL);
        assert!(decode(&deep).is_err(), "nested too deep");
        let mut extra = bytes;
        extra.push(NULL);
        assert!(decode(&extra).is_err(), "trailing bytes");
        // A damaged row ends the rows: nothing after it is read.
        let two = PackedRows::pack(&[vec![Value::Int(1)], vec![Value::Int(2)]]);
        let mut damaged = two.as_bytes().to_vec();
        damaged[2] = 12;
        let rows: Vec<_> = PackedRows::from_bytes(damaged).unwrap().rows().collect();
        assert_eq!(rows.len(), 1);
        assert!(rows[0].is_err());
    }
}
