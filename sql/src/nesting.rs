//! A bound on how deeply a statement's expressions nest, read from its text before any parser
//! builds a tree. Parsing, binding, folding and evaluating all recurse over expression trees,
//! and a chain such as `1+1+…+1` of tens of thousands of terms — which sqlparser's recursion
//! limit does not see, since it reads a chain in a loop — overflowed a thread's stack and took
//! the server down. Statements whose bound exceeds [`MAX_EXPRESSION_DEPTH`] are refused with
//! 54001 before they are parsed; the threads that handle statements have stacks sized for
//! that depth (`STATEMENT_STACK_BYTES`).
//!
//! The bound counts, along the innermost open parentheses and every group around them, the
//! operators chained so far (a run of operator characters, `AND`, `OR`, `NOT`, `::`) plus the
//! groups themselves; a comma starts a new list element. It never undercounts a tree's depth
//! and overcounts by a small factor (`x = 1 OR x = 2` counts the `=`s too).

use crate::lexical::{
    after_block_comment, after_dollar_quote, after_quoted, is_operator_byte, line_comment_end,
};

/// The deepest expression a statement may have (as bounded here).
pub const MAX_EXPRESSION_DEPTH: usize = 2000;

/// The stack of every thread that parses, binds or evaluates a statement. A debug build
/// needs over 32 KiB per level of a `+` chain (sqlparser, binding, folding, evaluating and
/// dropping each recurse), so this leaves `MAX_EXPRESSION_DEPTH` four times the room it
/// needs there, and far more in a release build. It is address space: only the pages a
/// thread touches take memory.
pub const STATEMENT_STACK_BYTES: usize = 256 << 20;

/// An upper bound on the nesting depth of `text`'s expressions.
pub fn depth_bound(text: &str) -> usize {
    let bytes = text.as_bytes();
    let mut groups: Vec<usize> = Vec::new();
    let (mut current, mut outer, mut deepest) = (0usize, 0usize, 0usize);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        // Digits, spaces and points change no count: skipped before the `match`, whose
        // jump table mispredicted on them (most of a bulk INSERT's bytes).
        if matches!(b, b'0'..=b'9' | b' ' | b'\t' | b'\n' | b'\r' | b'.') {
            i += 1;
            continue;
        }
        match b {
            b'\'' | b'"' => {
                let escapes = b == b'\'' && i > 0 && matches!(bytes[i - 1], b'e' | b'E');
                i = after_quoted(bytes, i, escapes).unwrap_or(bytes.len());
                continue;
            }
            b'-' if bytes.get(i + 1) == Some(&b'-') => {
                i = line_comment_end(bytes, i);
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = after_block_comment(bytes, i);
                continue;
            }
            b'$' => {
                i = after_dollar_quote(text, i).unwrap_or(i + 1);
                continue;
            }
            b'(' | b'[' => {
                groups.push(current);
                outer += current + 1;
                current = 0;
            }
            b')' | b']' => {
                if let Some(parent) = groups.pop() {
                    outer -= parent + 1;
                    current = parent;
                }
            }
            b',' => current = 0,
            b if is_operator_byte(b) => {
                while i + 1 < bytes.len() && is_operator_byte(bytes[i + 1]) {
                    // A comment opening inside the run ends it.
                    if matches!(&bytes[i + 1..], [b'-', b'-', ..] | [b'/', b'*', ..]) {
                        break;
                    }
                    i += 1;
                }
                current += 1;
            }
            b if b.is_ascii_alphabetic() || b == b'_' => {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                let word = &bytes[start..i];
                if [&b"and"[..], b"or", b"not"]
                    .iter()
                    .any(|w| word.eq_ignore_ascii_case(w))
                {
                    current += 1;
                    deepest = deepest.max(outer + current);
                }
                continue;
            }
            _ => {}
        }
        deepest = deepest.max(outer + current);
        i += 1;
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::depth_bound;

    #[test]
    fn counts_chains_groups_and_keywords() {
        assert_eq!(depth_bound("SELECT 1"), 0);
        assert_eq!(depth_bound("SELECT 1 + 2 + 3"), 2);
        assert_eq!(depth_bound("SELECT (1 + (2 * (3 - 4)))"), 6);
        assert_eq!(depth_bound("SELECT f(1 + 2, 3 + 4)"), 2);
        assert_eq!(
            depth_bound("SELECT a FROM t WHERE x = 1 AND y = 2 OR NOT z"),
            5
        );
        assert_eq!(depth_bound("SELECT 1::int::text"), 2);
        assert_eq!(depth_bound("SELECT 1 >= 2"), 1);
        assert_eq!(depth_bound("SELECT 1e5+x1 - 2.5, (3)"), 2);
        assert_eq!(depth_bound("VALUES (1, 2),\n\t(3 , -4.25)"), 2);
    }

    #[test]
    fn skips_strings_identifiers_comments_and_dollar_quotes() {
        assert_eq!(depth_bound("SELECT '+ + (+' , \"a+b\""), 0);
        assert_eq!(depth_bound("SELECT 'it''s + (' -- + + +\n"), 0);
        assert_eq!(depth_bound("SELECT /* + /* nested + */ + */ 1"), 0);
        assert_eq!(depth_bound("SELECT $$ + + $$, $a$ ( + $a$"), 0);
        assert_eq!(depth_bound("SELECT E'\\' + ' + 1"), 1);
        // Text that only looks like a string start is still scanned.
        assert_eq!(depth_bound("SELECT $1 + $2"), 1);
    }

    #[test]
    fn long_chains_are_deep() {
        let chain = vec!["1"; 10_001].join("+");
        assert_eq!(
            depth_bound(&format!("INSERT INTO t VALUES ({chain})")),
            10_001
        );
        let rows = vec!["(1 + 2, 3 * 4)"; 10_000].join(", ");
        assert_eq!(depth_bound(&format!("INSERT INTO t VALUES {rows}")), 2);
    }
}
