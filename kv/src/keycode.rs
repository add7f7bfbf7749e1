//! Order-preserving byte encoding of primary keys: comparing encodings with `memcmp` gives the
//! same order as comparing the values, including for composite keys.
//!
//! Every component starts with a tag byte, so NULL sorts first and components of different
//! types never compare as equal:
//!
//! | value  | encoding |
//! |--------|----------|
//! | NULL   | `0x01` |
//! | false/true | `0x02 0x00` / `0x02 0x01` |
//! | integer (i64) | `0x03` then 8 bytes big-endian with the sign bit flipped |
//! | float (f64) | `0x04` then 8 bytes: sign bit flipped for positives, all bits flipped for negatives |
//! | text / bytes | `0x05` then the bytes with `0x00` escaped as `0x00 0xFF`, closed by `0x00 0x01` |
//!
//! The escape keeps a string's prefix sorting before the string (`"ab" < "ab\0" < "abc"`) and
//! lets a following component start right after the terminator.

const TAG_NULL: u8 = 0x01;
const TAG_BOOL: u8 = 0x02;
const TAG_INT: u8 = 0x03;
const TAG_FLOAT: u8 = 0x04;
const TAG_BYTES: u8 = 0x05;

/// One component of a key.
#[derive(Clone, Debug, PartialEq)]
pub enum KeyPart<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Bytes(&'a [u8]),
}

/// Appends the encoding of `part` to `out`.
pub fn encode_part(out: &mut Vec<u8>, part: &KeyPart<'_>) {
    match part {
        KeyPart::Null => out.push(TAG_NULL),
        KeyPart::Bool(value) => {
            out.push(TAG_BOOL);
            out.push(u8::from(*value));
        }
        KeyPart::Int(value) => {
            out.push(TAG_INT);
            out.extend_from_slice(&((*value as u64) ^ (1 << 63)).to_be_bytes());
        }
        KeyPart::Float(value) => {
            out.push(TAG_FLOAT);
            // -0.0 and 0.0 are equal values and must encode alike.
            let value = if *value == 0.0 { 0.0 } else { *value };
            let bits = value.to_bits();
            let ordered = if bits >> 63 == 0 {
                bits ^ (1 << 63)
            } else {
                !bits
            };
            out.extend_from_slice(&ordered.to_be_bytes());
        }
        KeyPart::Bytes(bytes) => {
            out.push(TAG_BYTES);
            for &byte in *bytes {
                out.push(byte);
                if byte == 0 {
                    out.push(0xFF);
                }
            }
            out.extend_from_slice(&[0x00, 0x01]);
        }
    }
}

/// Encodes a whole (possibly composite) key.
pub fn encode_key(parts: &[KeyPart<'_>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.len() * 9);
    for part in parts {
        encode_part(&mut out, part);
    }
    out
}

/// A decoded key component, owning its bytes.
#[derive(Clone, Debug, PartialEq)]
pub enum KeyValue {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Bytes(Vec<u8>),
}

/// The first component of a key when it is an integer (without decoding the rest).
pub fn decode_first_int(bytes: &[u8]) -> Option<i64> {
    match bytes.split_first() {
        Some((&TAG_INT, rest)) => {
            let raw = u64::from_be_bytes(rest.get(..8)?.try_into().ok()?);
            Some((raw ^ (1 << 63)) as i64)
        }
        _ => None,
    }
}

/// What follows the first `parts` components of a key (`None` if the bytes do not start with
/// that many valid components): an index entry's row key after its indexed values.
pub fn skip_parts(mut bytes: &[u8], parts: usize) -> Option<&[u8]> {
    for _ in 0..parts {
        let (&tag, rest) = bytes.split_first()?;
        bytes = match tag {
            TAG_NULL => rest,
            TAG_BOOL => rest.get(1..)?,
            TAG_INT | TAG_FLOAT => rest.get(8..)?,
            TAG_BYTES => {
                // The terminator is 0x00 0x01; an escaped zero is 0x00 0xFF.
                let mut at = 0;
                loop {
                    let zero = at + rest.get(at..)?.iter().position(|&b| b == 0)?;
                    match rest.get(zero + 1)? {
                        0x01 => break rest.get(zero + 2..)?,
                        0xFF => at = zero + 2,
                        _ => return None,
                    }
                }
            }
            _ => return None,
        };
    }
    Some(bytes)
}

/// Decodes a key made by `encode_key`; `None` if the bytes are not a valid encoding.
pub fn decode_key(mut bytes: &[u8]) -> Option<Vec<KeyValue>> {
    let mut parts = Vec::new();
    while let Some((&tag, rest)) = bytes.split_first() {
        bytes = rest;
        match tag {
            TAG_NULL => parts.push(KeyValue::Null),
            TAG_BOOL => {
                let (&value, rest) = bytes.split_first()?;
                parts.push(KeyValue::Bool(value != 0));
                bytes = rest;
            }
            TAG_INT | TAG_FLOAT => {
                let raw = u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?);
                bytes = &bytes[8..];
                if tag == TAG_INT {
                    parts.push(KeyValue::Int((raw ^ (1 << 63)) as i64));
                } else {
                    let bits = if raw >> 63 == 1 {
                        raw ^ (1 << 63)
                    } else {
                        !raw
                    };
                    parts.push(KeyValue::Float(f64::from_bits(bits)));
                }
            }
            TAG_BYTES => {
                let mut value = Vec::new();
                loop {
                    let (&byte, rest) = bytes.split_first()?;
                    bytes = rest;
                    if byte != 0 {
                        value.push(byte);
                        continue;
                    }
                    let (&next, rest) = bytes.split_first()?;
                    bytes = rest;
                    match next {
                        0xFF => value.push(0),
                        0x01 => break,
                        _ => return None,
                    }
                }
                parts.push(KeyValue::Bytes(value));
            }
            _ => return None,
        }
    }
    Some(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn int_key(values: &[i64]) -> Vec<u8> {
        encode_key(&values.iter().map(|v| KeyPart::Int(*v)).collect::<Vec<_>>())
    }

    #[test]
    fn text_prefixes_and_nul_bytes_sort_like_the_values() {
        let words: [&[u8]; 5] = [b"", b"ab", b"ab\0", b"ab\0\0", b"abc"];
        for pair in words.windows(2) {
            let a = encode_key(&[KeyPart::Bytes(pair[0]), KeyPart::Int(9)]);
            let b = encode_key(&[KeyPart::Bytes(pair[1]), KeyPart::Int(1)]);
            assert!(a < b, "{:?} must sort before {:?}", pair[0], pair[1]);
        }
        assert!(encode_key(&[KeyPart::Null]) < encode_key(&[KeyPart::Int(i64::MIN)]));
    }

    proptest! {
        #[test]
        fn integers_keep_order(a: i64, b: i64, c: i64, d: i64) {
            prop_assert_eq!(int_key(&[a, b]).cmp(&int_key(&[c, d])), (a, b).cmp(&(c, d)));
        }

        #[test]
        fn floats_keep_order(a: f64, b: f64) {
            prop_assume!(!a.is_nan() && !b.is_nan());
            let ka = encode_key(&[KeyPart::Float(a)]);
            let kb = encode_key(&[KeyPart::Float(b)]);
            prop_assert_eq!(ka.cmp(&kb), a.partial_cmp(&b).unwrap());
        }

        #[test]
        fn composite_text_keys_keep_order_and_round_trip(
            a: Vec<u8>, b: i64, c: Vec<u8>, d: i64
        ) {
            let ka = encode_key(&[KeyPart::Bytes(&a), KeyPart::Int(b)]);
            let kc = encode_key(&[KeyPart::Bytes(&c), KeyPart::Int(d)]);
            prop_assert_eq!(ka.cmp(&kc), (&a, b).cmp(&(&c, d)));
            prop_assert_eq!(
                decode_key(&ka).unwrap(),
                vec![KeyValue::Bytes(a.clone()), KeyValue::Int(b)]
            );
        }

        #[test]
        fn skipping_parts_finds_what_follows(
            text: Vec<u8>, flag: bool, number: i64, real: f64, tail: Vec<u8>
        ) {
            let parts = [
                KeyPart::Bytes(&text),
                KeyPart::Null,
                KeyPart::Bool(flag),
                KeyPart::Int(number),
                KeyPart::Float(real),
            ];
            let mut key = encode_key(&parts);
            key.extend_from_slice(&tail);
            for n in 0..=parts.len() {
                let rest = skip_parts(&key, n).unwrap();
                prop_assert_eq!(rest, &key[encode_key(&parts[..n]).len()..]);
            }
            prop_assert_eq!(skip_parts(&key, parts.len()).unwrap(), tail.as_slice());
            // A key cut inside a component has no such part.
            let cut = encode_key(&parts[..1]).len() - 1;
            prop_assert_eq!(skip_parts(&key[..cut], 1), None);
        }
    }
}
