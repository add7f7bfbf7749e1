//! `uuid`: 16 bytes, read and written in PostgreSQL's text forms, ordered as bytes.
//!
//! Input is what PostgreSQL's `uuid_in` takes: 32 hex digits in either case, a hyphen
//! allowed after any group of four, the whole optionally in braces, nothing around it.
//! Output is the canonical lowercase 8-4-4-4-12 form.

use crate::error::{SqlError, SqlResult};

/// Parses a uuid's text form.
pub fn parse(text: &str) -> SqlResult<[u8; 16]> {
    let invalid =
        || SqlError::invalid_text(format!("invalid input syntax for type uuid: \"{text}\""));
    let bytes = text.as_bytes();
    let (mut at, braces) = match bytes.first() {
        Some(b'{') => (1, true),
        _ => (0, false),
    };
    let mut out = [0u8; 16];
    for (i, byte) in out.iter_mut().enumerate() {
        let pair = bytes.get(at..at + 2).ok_or_else(invalid)?;
        let high = hex_digit(pair[0]).ok_or_else(invalid)?;
        let low = hex_digit(pair[1]).ok_or_else(invalid)?;
        *byte = high << 4 | low;
        at += 2;
        if i % 2 == 1 && i < 15 && bytes.get(at) == Some(&b'-') {
            at += 1;
        }
    }
    if braces {
        if bytes.get(at) != Some(&b'}') {
            return Err(invalid());
        }
        at += 1;
    }
    if at != bytes.len() {
        return Err(invalid());
    }
    Ok(out)
}

fn hex_digit(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// The canonical text form: `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, lowercase.
pub fn format(uuid: &[u8; 16]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(36);
    for (i, byte) in uuid.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        out.push(DIGITS[(byte >> 4) as usize] as char);
        out.push(DIGITS[(byte & 0x0f) as usize] as char);
    }
    out
}

/// A version 4 (random) uuid from 16 random bytes: the version and variant bits set as
/// RFC 9562 says, the other 122 bits as given.
pub fn version4(mut random: [u8; 16]) -> [u8; 16] {
    random[6] = (random[6] & 0x0f) | 0x40;
    random[8] = (random[8] & 0x3f) | 0x80;
    random
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_form_postgresql_reads() {
        let canonical = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11";
        for text in [
            canonical,
            "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11",
            "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}",
            "a0eebc999c0b4ef8bb6d6bb9bd380a11",
            "a0ee-bc99-9c0b-4ef8-bb6d-6bb9-bd38-0a11",
            "{a0eebc99-9c0b4ef8-bb6d6bb9-bd380a11}",
        ] {
            assert_eq!(format(&parse(text).unwrap()), canonical, "{text}");
        }
    }

    #[test]
    fn refuses_what_postgresql_refuses() {
        for text in [
            "",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a111",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1g",
            " a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11 ",
            "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}",
            "a0eeb-c99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "a0eebc99--9c0b-4ef8-bb6d-6bb9bd380a11",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11-",
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.sqlstate(), "22P02", "{text}");
        }
    }

    #[test]
    fn version4_sets_version_and_variant() {
        let u = version4([0xff; 16]);
        assert_eq!(format(&u), "ffffffff-ffff-4fff-bfff-ffffffffffff");
        let u = version4([0; 16]);
        assert_eq!(format(&u), "00000000-0000-4000-8000-000000000000");
    }
}
