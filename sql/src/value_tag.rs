//! The tag byte that opens each value in hotledger's byte forms of rows: rows as stored
//! (`ledger::row`) and rows packed into the log ([`crate::PackedRows`]). Both forms are on
//! disk, so a tag is never renumbered, only added. Also the variable-length integers both
//! forms write.

pub const NULL: u8 = 0;
pub const FALSE: u8 = 1;
pub const TRUE: u8 = 2;
pub const INT: u8 = 3;
pub const FLOAT: u8 = 4;
pub const NUMERIC: u8 = 5;
pub const TEXT: u8 = 6;
pub const BYTES: u8 = 7;
pub const TIMESTAMP: u8 = 8;
pub const TIMESTAMPTZ: u8 = 9;
pub const DATE: u8 = 10;
/// A one-dimensional array: its length, then each element as a value.
pub const ARRAY: u8 = 11;
/// An interval: months, days, microseconds.
pub const INTERVAL: u8 = 12;
/// jsonb: its text form, as TEXT is stored (parsed again when read).
pub const JSONB: u8 = 13;
/// uuid: its 16 bytes.
pub const UUID: u8 = 14;
/// time: microseconds since midnight.
pub const TIME: u8 = 15;
/// An integer as a zigzag varint, in stored rows (packed rows write INT so).
pub const VARINT: u8 = 16;
/// A numeric whose magnitude does not fit an i128 mantissa (past 2^127 − 1): its sign
/// byte, its 128-bit magnitude, then its scale as NUMERIC's.
pub const WIDE_NUMERIC: u8 = 17;
/// A numeric whose mantissa fits an i64 (every ledger amount below 2^63): the mantissa as a
/// zigzag varint, then its scale as NUMERIC's — 3 bytes for a small whole number, where
/// NUMERIC takes 18.
pub const SMALL_NUMERIC: u8 = 18;
/// A whole numeric from 0 to 2^64 − 1 (a ledger amount or balance, as nearly all are): its
/// magnitude as a varint, nothing else — 2 bytes for 1 to 127, 5 for a few billion.
pub const WHOLE_NUMERIC: u8 = 19;
/// Tags from here up are the integers 0..=127, in both forms: `Value::Int(tag - SMALL_INT)`.
pub const SMALL_INT: u8 = 128;

/// Writes `v` seven bits a byte, least significant first, the high bit set on all bytes but
/// the last.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The varint at the start of `bytes` and its length; None when the bytes end inside it
/// or it runs past ten bytes.
pub fn read_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &b) in bytes.iter().take(10).enumerate() {
        v |= ((b & 0x7f) as u64) << (7 * i);
        if b < 0x80 {
            return Some((v, i + 1));
        }
    }
    None
}

/// Small magnitudes of either sign as small unsigned numbers.
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

pub fn unzigzag(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_refuse_damage() {
        for v in [0, 1, -1, 63, -64, 64, 127, 128, i64::MAX, i64::MIN, 1 << 40] {
            let mut out = Vec::new();
            put_varint(&mut out, zigzag(v));
            assert_eq!(read_varint(&out), Some((zigzag(v), out.len())), "{v}");
            assert_eq!(unzigzag(zigzag(v)), v);
            assert_eq!(read_varint(&out[..out.len() - 1]), None, "{v} cut short");
        }
        assert_eq!(read_varint(&[0x80; 11]), None, "longer than ten bytes");
        let mut out = Vec::new();
        put_varint(&mut out, 300);
        assert_eq!(out, [0xac, 0x02]);
    }
}
