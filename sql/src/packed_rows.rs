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

use crate::value_codec::{put_int, put_value, read_slots, Cursor, Layout, Packed};
use crate::value_tag::put_varint;
use crate::{Numeric, Value};

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
        let mut reader = Cursor::new(&bytes);
        let count = Packed::length(&mut reader)?;
        let first_row = bytes.len() - reader.rest().len();
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
            reader: Cursor::new(&self.bytes[self.first_row..]),
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
            put_value::<Packed>(&mut self.rows, value);
        }
        self.count += 1;
    }

    /// Pushes a row of `shape`, its given columns' values from `given` (by their places in
    /// it), each already in its column's form: the bytes `push` would write for the whole row.
    pub fn push_shaped(&mut self, shape: &RowShape, given: &[Value]) {
        self.push_shaped_with(shape, |out, i| put_value::<Packed>(out, &given[i]));
    }

    /// `push_shaped` for rows whose given values are all integers: the bytes it writes for
    /// them as `Value::Int`s — or, at the places `numeric` marks, as whole
    /// `Value::Numeric`s — without the values made.
    pub fn push_shaped_ints(&mut self, shape: &RowShape, given: &[i64], numeric: &[bool]) {
        self.push_shaped_with(shape, |out, i| match numeric[i] {
            false => put_int::<Packed>(out, given[i]),
            true => put_value::<Packed>(out, &Value::Numeric(Numeric::from_i64(given[i]))),
        });
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
                    put_value::<Packed>(&mut shape.fixed, &value);
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
    reader: Cursor<'a>,
    left: usize,
}

impl Iterator for PackedRowIter<'_> {
    type Item = Result<Vec<Value>, String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let row = packed_row(&mut self.reader);
        if row.is_err() {
            // Nothing after a damaged row can be read.
            self.left = 0;
        } else if self.left == 0 && !self.reader.rest().is_empty() {
            return Some(Err(format!(
                "{} bytes after the last packed row",
                self.reader.rest().len()
            )));
        }
        Some(row)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for PackedRowIter<'_> {}

/// One row: its value count, then its values (`value_codec::read_slots`).
fn packed_row(c: &mut Cursor<'_>) -> Result<Vec<Value>, String> {
    let len = Packed::length(c)?;
    let mut row = Vec::with_capacity(len);
    row.resize_with(len, || Value::Int(0));
    read_slots::<Packed>(c, &mut row).map_err(|e| format!("packed rows: {e}"))?;
    Ok(row)
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
    use crate::value_tag::{ARRAY, INT, NULL};

    /// `value_codec`'s row of every kind, and an array of arrays (which the log's form holds).
    fn every_kind() -> Vec<Value> {
        let mut kinds = crate::value_codec::tests::every_kind();
        kinds.push(Value::Array(vec![
            Value::Int(1),
            Value::Array(vec![Value::Null]),
        ]));
        kinds
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
        deep.extend([ARRAY, 1].repeat(Packed::MAX_ARRAY_DEPTH + 1));
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
