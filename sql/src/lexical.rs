//! Byte-level pieces of SQL's lexical grammar, shared by the scanners that read statement
//! text without parsing it: splitting statements (`parse`), the bulk-INSERT row reader
//! (`insert_values`), the nesting bound (`nesting`) and the first words of a statement.

/// Bytes that may begin or continue an operator. A `match` compiles to a bit test; the
/// slice search it replaced called `memchr` for every byte a scanner read (5% of the server's
/// CPU under 1,000-row INSERTs, in `nesting::depth_bound`).
pub(crate) fn is_operator_byte(b: u8) -> bool {
    matches!(
        b,
        b'+' | b'-'
            | b'*'
            | b'/'
            | b'%'
            | b'<'
            | b'>'
            | b'='
            | b'~'
            | b'!'
            | b'@'
            | b'#'
            | b'^'
            | b'&'
            | b'|'
            | b'`'
            | b'?'
            | b':'
    )
}

/// The offset after the quoted text opening at `open` (`''` or `""` inside is an escaped
/// quote; with `backslash_escapes`, as in an `E'…'` string, so is `\'`). `None` when the
/// quote is not closed.
pub(crate) fn after_quoted(bytes: &[u8], open: usize, backslash_escapes: bool) -> Option<usize> {
    let quote = bytes[open];
    let mut i = open + 1;
    loop {
        match *bytes.get(i)? {
            b'\\' if backslash_escapes => i += 2,
            b if b == quote && bytes.get(i + 1) == Some(&quote) => i += 2,
            b if b == quote => return Some(i + 1),
            _ => i += 1,
        }
    }
}

/// The offset of the newline ending the `--` comment at `open` (or the end).
pub(crate) fn line_comment_end(bytes: &[u8], open: usize) -> usize {
    bytes[open..]
        .iter()
        .position(|b| *b == b'\n')
        .map_or(bytes.len(), |n| open + n)
}

/// The offset after a dollar-quoted string opening at `open` (`$tag$…$tag$`, the tag an
/// identifier or empty), or the end when it is not closed; `None` when no dollar quote opens
/// there (`$1`, say).
pub(crate) fn after_dollar_quote(text: &str, open: usize) -> Option<usize> {
    let rest = &text[open + 1..];
    let end = rest.find('$')?;
    let tag = &rest[..end];
    if !tag.chars().all(|c| c.is_alphanumeric() || c == '_')
        || tag.starts_with(|c: char| c.is_ascii_digit())
    {
        return None;
    }
    let delimiter = &text[open..open + end + 2];
    let body = open + end + 2;
    Some(match text[body..].find(delimiter) {
        Some(close) => body + close + delimiter.len(),
        None => text.len(),
    })
}

/// The offset after the block comment opening at `open` (nested ones too, as PostgreSQL
/// reads them), or the end when it is not closed.
pub(crate) fn after_block_comment(bytes: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    let mut i = open;
    while i + 1 < bytes.len() {
        match (bytes[i], bytes[i + 1]) {
            (b'/', b'*') => {
                depth += 1;
                i += 2;
            }
            (b'*', b'/') => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return i;
                }
            }
            _ => i += 1,
        }
    }
    bytes.len()
}

/// `text` from its first character that is neither whitespace nor inside a comment (empty
/// when there is none).
pub(crate) fn skip_blank(text: &str) -> &str {
    let mut rest = text.trim_start();
    loop {
        let bytes = rest.as_bytes();
        let end = match bytes.get(..2) {
            Some(b"--") => line_comment_end(bytes, 0),
            Some(b"/*") => after_block_comment(bytes, 0),
            _ => return rest,
        };
        rest = rest[end..].trim_start();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn operator_bytes_are_postgres_operator_characters() {
        // PostgreSQL's operator characters, plus `:` for casts and `` ` `` (not an operator
        // there, but never part of an identifier or number either).
        let expected = b"+-*/%<>=~!@#^&|`?:";
        for b in 0..=u8::MAX {
            assert_eq!(
                super::is_operator_byte(b),
                expected.contains(&b),
                "byte {b}"
            );
        }
    }
}
