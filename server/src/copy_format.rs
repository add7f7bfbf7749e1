//! PostgreSQL's COPY data forms: the text format (delimiter-separated, backslash escapes,
//! `\N` for NULL) and CSV (quotes with doubled-quote escapes, an unquoted empty field for
//! NULL). Reading splits one line of COPY FROM data into fields; writing turns one result
//! row into one line of COPY TO data.

use plan::{CopyFormat, OutputColumn};
use sql::Value;

/// PostgreSQL's text COPY format: delimiter-separated, backslash escapes, `\N` for NULL.
pub fn text_fields(line: &str, delimiter: char, null: &str) -> Vec<Option<String>> {
    let mut out = Vec::new();
    for raw in line.split(delimiter) {
        if raw == null {
            out.push(None);
            continue;
        }
        let mut s = String::with_capacity(raw.len());
        let mut chars = raw.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                s.push(c);
                continue;
            }
            match chars.next() {
                Some('n') => s.push('\n'),
                Some('t') => s.push('\t'),
                Some('r') => s.push('\r'),
                Some('b') => s.push('\u{8}'),
                Some('f') => s.push('\u{c}'),
                Some('v') => s.push('\u{b}'),
                Some(other) => s.push(other),
                None => s.push('\\'),
            }
        }
        out.push(Some(s));
    }
    out
}

/// CSV fields: quotes with doubled-quote escapes; an unquoted field equal to `null` is NULL.
pub fn csv_fields(line: &str, delimiter: char, null: &str) -> Vec<Option<String>> {
    let mut out = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut was_quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if quoted {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    field.push('"');
                    chars.next();
                } else {
                    quoted = false;
                }
            } else {
                field.push(c);
            }
        } else if c == '"' {
            quoted = true;
            was_quoted = true;
        } else if c == delimiter {
            out.push(if !was_quoted && field == null {
                None
            } else {
                Some(std::mem::take(&mut field))
            });
            field.clear();
            was_quoted = false;
        } else {
            field.push(c);
        }
    }
    out.push(if !was_quoted && field == null {
        None
    } else {
        Some(field)
    });
    out
}

/// One row as a line of COPY TO data, newline included.
pub fn row_line(row: &[Value], columns: &[OutputColumn], format: &CopyFormat) -> Vec<u8> {
    let fields = row.iter().zip(columns).map(|(v, c)| v.to_pg_text(c.ty));
    line(fields, format)
}

/// The header line: the column names.
pub fn header_line(columns: &[OutputColumn], format: &CopyFormat) -> Vec<u8> {
    line(columns.iter().map(|c| Some(c.name.clone())), format)
}

fn line(fields: impl Iterator<Item = Option<String>>, format: &CopyFormat) -> Vec<u8> {
    let mut out = String::new();
    let fields: Vec<Option<String>> = fields.collect();
    let alone = fields.len() == 1;
    for (i, field) in fields.into_iter().enumerate() {
        if i > 0 {
            out.push(format.delimiter);
        }
        match field {
            None => out.push_str(&format.null),
            Some(text) if format.csv => csv_field(&mut out, &text, format, alone),
            Some(text) => text_field(&mut out, &text, format.delimiter),
        }
    }
    out.push('\n');
    out.into_bytes()
}

fn text_field(out: &mut String, text: &str, delimiter: char) {
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if c == delimiter => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
}

/// A CSV value is quoted when it holds the delimiter, a quote, a line break, or reads as
/// the NULL string (an empty string is `""`, NULL nothing), as PostgreSQL writes it; so is
/// `\.` alone on a line, which would read as the end of the data.
fn csv_field(out: &mut String, text: &str, format: &CopyFormat, alone: bool) {
    let quote = text == format.null
        || text.contains([format.delimiter, '"', '\n', '\r'])
        || (alone && text == "\\.");
    if !quote {
        out.push_str(text);
        return;
    }
    out.push('"');
    out.push_str(&text.replace('"', "\"\""));
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_copy_fields() {
        assert_eq!(
            text_fields("1\t\\N\ta\\tb", '\t', "\\N"),
            vec![Some("1".into()), None, Some("a\tb".into())]
        );
        assert_eq!(
            csv_fields("1,,\"a,\"\"b\"\"\",\"\"", ',', ""),
            vec![
                Some("1".into()),
                None,
                Some("a,\"b\"".into()),
                Some("".into())
            ]
        );
    }

    #[test]
    fn writes_copy_lines() {
        let columns = vec![
            OutputColumn::computed("id", sql::DataType::Int8),
            OutputColumn::computed("note", sql::DataType::Text),
        ];
        let text = CopyFormat::default();
        let row = [Value::Int(1), Value::text("a\tb\\c\nd")];
        assert_eq!(row_line(&row, &columns, &text), b"1\ta\\tb\\\\c\\nd\n");
        assert_eq!(
            row_line(&[Value::Int(2), Value::Null], &columns, &text),
            b"2\t\\N\n"
        );
        let csv = CopyFormat {
            csv: true,
            delimiter: ',',
            null: String::new(),
            header: true,
        };
        assert_eq!(header_line(&columns, &csv), b"id,note\n");
        for (value, line) in [
            (Value::text("x, \"y\""), &b"1,\"x, \"\"y\"\"\"\n"[..]),
            (Value::text(""), b"1,\"\"\n"),
            (Value::Null, b"1,\n"),
        ] {
            assert_eq!(row_line(&[Value::Int(1), value], &columns, &csv), line);
        }
        // What is written reads back.
        let written = String::from_utf8(row_line(&row, &columns, &text)).unwrap();
        assert_eq!(
            text_fields(written.trim_end_matches('\n'), '\t', "\\N"),
            vec![Some("1".into()), Some("a\tb\\c\nd".into())]
        );
    }
}
