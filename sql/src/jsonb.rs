//! `Jsonb`: PostgreSQL's `jsonb`, a parsed JSON document whose objects keep one value per
//! key in jsonb's key order (shorter keys first, then bytewise; the last of duplicate keys
//! wins) and whose numbers are NUMERIC, with its text forms, its ordering, containment
//! (`@>`), existence (`?`) and path access and edits. Also the reads of `json` text (kept as
//! written) that its operators need: the members of an object and the elements of an array
//! as slices of the text, and a SQL value written as JSON (`to_json`).
//!
//! Pure functions of their inputs, like the rest of this crate.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use crate::error::{ErrorKind, SqlError, SqlResult};
use crate::numeric::Numeric;
use crate::types::DataType;
use crate::value::Value;

/// How deep arrays and objects may nest: parsing, printing and comparing recurse.
const MAX_DEPTH: usize = 1_000;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Jsonb {
    Null,
    Bool(bool),
    Number(Numeric),
    String(String),
    Array(Vec<Jsonb>),
    /// Pairs in jsonb's key order, keys unique.
    Object(Vec<(String, Jsonb)>),
}

impl Jsonb {
    /// About how many bytes of memory the document takes (see `Value::memory_bytes`).
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Jsonb>()
            + match self {
                Jsonb::String(s) => s.len(),
                Jsonb::Array(items) => items.iter().map(Jsonb::memory_bytes).sum(),
                Jsonb::Object(pairs) => pairs.iter().map(|(k, v)| k.len() + v.memory_bytes()).sum(),
                Jsonb::Null | Jsonb::Bool(_) | Jsonb::Number(_) => 0,
            }
    }
}

fn invalid_json(detail: impl Into<String>) -> SqlError {
    SqlError::invalid_text("invalid input syntax for type json").with_detail(detail)
}

fn invalid_parameter(message: impl Into<String>) -> SqlError {
    SqlError::new(ErrorKind::InvalidParameterValue, message)
}

/// jsonb's order of object keys: by length, then by bytes.
fn key_order(a: &str, b: &str) -> Ordering {
    a.len()
        .cmp(&b.len())
        .then_with(|| a.as_bytes().cmp(b.as_bytes()))
}

/// Puts pairs into key order; of duplicate keys the last one stays.
fn object_of(mut pairs: Vec<(String, Jsonb)>) -> Jsonb {
    pairs.sort_by(|a, b| key_order(&a.0, &b.0));
    let mut out: Vec<(String, Jsonb)> = Vec::with_capacity(pairs.len());
    for pair in pairs {
        match out.last_mut() {
            Some(last) if last.0 == pair.0 => *last = pair,
            _ => out.push(pair),
        }
    }
    Jsonb::Object(out)
}

/// A recursive-descent reader of JSON text (RFC 8259, as PostgreSQL's `json` accepts it).
struct Reader<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(text: &'a str) -> Reader<'a> {
        Reader { text, pos: 0 }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn skip_space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn token_error(&self) -> SqlError {
        match self.text[self.pos..].chars().next() {
            None => invalid_json("The input string ended unexpectedly."),
            Some(c) => invalid_json(format!("Token \"{c}\" is invalid.")),
        }
    }

    fn expect(&mut self, byte: u8) -> SqlResult<()> {
        self.skip_space();
        if self.peek() != Some(byte) {
            return Err(self.token_error());
        }
        self.pos += 1;
        Ok(())
    }

    /// The whole text as one value, nothing but white space after it.
    fn document(mut self) -> SqlResult<Jsonb> {
        let value = self.value(0)?;
        self.end()?;
        Ok(value)
    }

    fn end(&mut self) -> SqlResult<()> {
        self.skip_space();
        if self.pos != self.text.len() {
            return Err(self.token_error());
        }
        Ok(())
    }

    fn value(&mut self, depth: usize) -> SqlResult<Jsonb> {
        if depth > MAX_DEPTH {
            return Err(SqlError::new(
                ErrorKind::StatementTooComplex,
                format!("JSON nests deeper than {MAX_DEPTH} levels"),
            ));
        }
        self.skip_space();
        Ok(match self.peek() {
            Some(b'{') => {
                let mut pairs = Vec::new();
                self.members(|r, key| {
                    pairs.push((key, r.value(depth + 1)?));
                    Ok(())
                })?;
                object_of(pairs)
            }
            Some(b'[') => {
                let mut items = Vec::new();
                self.elements(|r| {
                    items.push(r.value(depth + 1)?);
                    Ok(())
                })?;
                Jsonb::Array(items)
            }
            Some(b'"') => Jsonb::String(self.string()?),
            Some(b'-' | b'0'..=b'9') => Jsonb::Number(self.number()?),
            Some(_) => {
                let rest = &self.text[self.pos..];
                for (word, value) in [
                    ("true", Jsonb::Bool(true)),
                    ("false", Jsonb::Bool(false)),
                    ("null", Jsonb::Null),
                ] {
                    if rest.starts_with(word)
                        && !rest[word.len()..]
                            .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                    {
                        self.pos += word.len();
                        return Ok(value);
                    }
                }
                let word: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                let shown = if word.is_empty() {
                    rest.chars().take(1).collect()
                } else {
                    word
                };
                return Err(invalid_json(format!("Token \"{shown}\" is invalid.")));
            }
            None => return Err(self.token_error()),
        })
    }

    /// Reads an object (the reader at its `{`), calling `member` with each key and the
    /// reader at the key's value, which `member` must read.
    fn members(
        &mut self,
        mut member: impl FnMut(&mut Self, String) -> SqlResult<()>,
    ) -> SqlResult<()> {
        self.list(b'}', |r| {
            r.skip_space();
            let key = r.string()?;
            r.expect(b':')?;
            member(r, key)
        })
    }

    /// Reads an array (the reader at its `[`), calling `element` with the reader at each
    /// element, which `element` must read.
    fn elements(&mut self, element: impl FnMut(&mut Self) -> SqlResult<()>) -> SqlResult<()> {
        self.list(b']', element)
    }

    /// Reads `item`s separated by commas up to `close`, the opening bracket first.
    fn list(
        &mut self,
        close: u8,
        mut item: impl FnMut(&mut Self) -> SqlResult<()>,
    ) -> SqlResult<()> {
        self.pos += 1;
        self.skip_space();
        if self.peek() == Some(close) {
            self.pos += 1;
            return Ok(());
        }
        loop {
            item(self)?;
            self.skip_space();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(c) if c == close => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.token_error()),
            }
        }
    }

    fn number(&mut self) -> SqlResult<Numeric> {
        let start = self.pos;
        let bytes = self.text.as_bytes();
        let digits = |reader: &mut Reader| {
            let from = reader.pos;
            while bytes.get(reader.pos).is_some_and(u8::is_ascii_digit) {
                reader.pos += 1;
            }
            reader.pos - from
        };
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        let int_start = self.pos;
        let int_digits = digits(self);
        let mut valid = int_digits > 0 && (bytes[int_start] != b'0' || int_digits == 1);
        if self.peek() == Some(b'.') {
            self.pos += 1;
            valid &= digits(self) > 0;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            valid &= digits(self) > 0;
        }
        // A number runs into letters or digits only when it is malformed ("01", "1x").
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'.')
        {
            self.pos += 1;
            valid = false;
        }
        let token = &self.text[start..self.pos];
        if !valid {
            return Err(invalid_json(format!("Token \"{token}\" is invalid.")));
        }
        Numeric::parse(token)
    }

    /// A string token, its escapes decoded.
    fn string(&mut self) -> SqlResult<String> {
        if self.peek() != Some(b'"') {
            return Err(self.token_error());
        }
        self.pos += 1;
        let bytes = self.text.as_bytes();
        let mut out = String::new();
        loop {
            let run = self.pos;
            while bytes
                .get(self.pos)
                .is_some_and(|&c| c != b'"' && c != b'\\' && c >= 0x20)
            {
                self.pos += 1;
            }
            out.push_str(&self.text[run..self.pos]);
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let escape = self.peek().ok_or_else(|| self.token_error())?;
                    self.pos += 1;
                    match escape {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => out.push(self.unicode_escape()?),
                        _ => {
                            return Err(invalid_json(format!(
                                "Escape sequence \"\\{}\" is invalid.",
                                escape as char
                            )))
                        }
                    }
                }
                Some(_) => {
                    return Err(invalid_json(format!(
                        "Character with value 0x{:02x} must be escaped.",
                        bytes[self.pos]
                    )))
                }
                None => return Err(invalid_json("The input string ended unexpectedly.")),
            }
        }
    }

    fn hex4(&mut self) -> SqlResult<u32> {
        let digits = self
            .text
            .get(self.pos..self.pos + 4)
            .filter(|d| d.bytes().all(|c| c.is_ascii_hexdigit()))
            .ok_or_else(|| invalid_json("\"\\u\" must be followed by four hexadecimal digits."))?;
        self.pos += 4;
        Ok(u32::from_str_radix(digits, 16).expect("four hex digits"))
    }

    fn unicode_escape(&mut self) -> SqlResult<char> {
        let first = self.hex4()?;
        let code = match first {
            0 => {
                return Err(SqlError::new(
                    ErrorKind::UntranslatableCharacter,
                    "unsupported Unicode escape sequence",
                )
                .with_detail("\\u0000 cannot be converted to text."))
            }
            0xD800..=0xDBFF => {
                if !self.text[self.pos..].starts_with("\\u") {
                    return Err(invalid_json(
                        "Unicode high surrogate must not follow a high surrogate.",
                    ));
                }
                self.pos += 2;
                let low = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&low) {
                    return Err(invalid_json(
                        "Unicode low surrogate must follow a high surrogate.",
                    ));
                }
                0x10000 + ((first - 0xD800) << 10) + (low - 0xDC00)
            }
            0xDC00..=0xDFFF => {
                return Err(invalid_json(
                    "Unicode low surrogate must follow a high surrogate.",
                ))
            }
            other => other,
        };
        char::from_u32(code).ok_or_else(|| invalid_json("invalid Unicode escape"))
    }

    /// Skips one value, giving the text it spans.
    fn slice(&mut self, depth: usize) -> SqlResult<&'a str> {
        self.skip_space();
        let start = self.pos;
        self.value(depth)?;
        Ok(&self.text[start..self.pos])
    }
}

/// The top level of a `json` text: an object's members or an array's elements as the text
/// they were written in, or a scalar.
pub enum JsonLevel<'a> {
    Object(Vec<(String, &'a str)>),
    Array(Vec<&'a str>),
    Scalar(Jsonb),
}

/// Reads the top level of `json` text (checking all of it).
pub fn json_level(text: &str) -> SqlResult<JsonLevel<'_>> {
    let mut reader = Reader::new(text);
    reader.skip_space();
    let level = match reader.peek() {
        Some(b'{') => {
            let mut members = Vec::new();
            reader.members(|r, key| {
                members.push((key, r.slice(1)?));
                Ok(())
            })?;
            JsonLevel::Object(members)
        }
        Some(b'[') => {
            let mut items = Vec::new();
            reader.elements(|r| {
                items.push(r.slice(1)?);
                Ok(())
            })?;
            JsonLevel::Array(items)
        }
        _ => JsonLevel::Scalar(reader.value(0)?),
    };
    reader.end()?;
    Ok(level)
}

/// Checks that `text` is JSON (the input check of the `json` type).
pub fn check_json(text: &str) -> SqlResult<()> {
    Reader::new(text).document().map(drop)
}

/// `text` as a JSON string literal, escaped as PostgreSQL escapes it.
pub fn write_json_string(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A SQL value as JSON text, as `to_json` writes it: numbers and booleans bare, arrays as
/// arrays, `json` as written, `jsonb` in its text form, times in ISO 8601, everything else
/// as a string of its text.
pub fn write_json_value(value: &Value, ty: DataType, out: &mut String) {
    match (value, ty) {
        (Value::Null, _) => out.push_str("null"),
        (Value::Text(text), DataType::Json) => out.push_str(text),
        (Value::Jsonb(j), _) => j.write(out),
        (Value::Array(items), _) => {
            let element = ty.element().unwrap_or(DataType::Text);
            out.push('[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                write_json_value(item, element, out);
            }
            out.push(']');
        }
        _ => Jsonb::from_value(value, ty).write(out),
    }
}

impl Jsonb {
    /// Parses `jsonb` input text.
    pub fn parse(text: &str) -> SqlResult<Jsonb> {
        Reader::new(text).document()
    }

    /// A SQL value as jsonb (`to_jsonb`); NULL becomes JSON null.
    pub fn from_value(value: &Value, ty: DataType) -> Jsonb {
        let text = || value.to_pg_text(ty).unwrap_or_default();
        match value {
            Value::Null => Jsonb::Null,
            Value::Bool(b) => Jsonb::Bool(*b),
            Value::Int(i) => Jsonb::Number(Numeric::from_i64(*i)),
            Value::Numeric(n) => Jsonb::Number(*n),
            Value::Float(f) => match Numeric::parse(&text()) {
                Ok(n) if f.is_finite() => Jsonb::Number(n),
                _ => Jsonb::String(text()),
            },
            Value::Text(s) if ty == DataType::Json => Jsonb::parse(s).unwrap_or(Jsonb::Null),
            Value::Text(s) => Jsonb::String(s.clone()),
            Value::Jsonb(j) => (**j).clone(),
            Value::Timestamp(_) => Jsonb::String(text().replacen(' ', "T", 1)),
            Value::TimestampTz(_) => {
                let mut iso = text().replacen(' ', "T", 1);
                if iso.ends_with("+00") {
                    iso.push_str(":00");
                }
                Jsonb::String(iso)
            }
            Value::Array(items) => {
                let element = ty.element().unwrap_or(DataType::Text);
                Jsonb::Array(
                    items
                        .iter()
                        .map(|i| Jsonb::from_value(i, element))
                        .collect(),
                )
            }
            Value::Bytes(_)
            | Value::Date(_)
            | Value::Interval(_)
            | Value::Uuid(_)
            | Value::Time(_) => Jsonb::String(text()),
        }
    }

    /// PostgreSQL's text output of jsonb.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            Jsonb::Null => out.push_str("null"),
            Jsonb::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Jsonb::Number(n) => out.push_str(&n.to_string()),
            Jsonb::String(s) => write_json_string(s, out),
            Jsonb::Array(items) => {
                out.push('[');
                for (n, item) in items.iter().enumerate() {
                    if n > 0 {
                        out.push_str(", ");
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Jsonb::Object(pairs) => {
                out.push('{');
                for (n, (key, value)) in pairs.iter().enumerate() {
                    if n > 0 {
                        out.push_str(", ");
                    }
                    write_json_string(key, out);
                    out.push_str(": ");
                    value.write(out);
                }
                out.push('}');
            }
        }
    }

    /// `jsonb_pretty`: one member per line, four spaces per level.
    pub fn pretty(&self) -> String {
        let mut out = String::new();
        self.write_pretty(&mut out, 0);
        out
    }

    fn write_pretty(&self, out: &mut String, level: usize) {
        let indent = |out: &mut String, level: usize| {
            out.push('\n');
            out.push_str(&"    ".repeat(level));
        };
        match self {
            Jsonb::Array(items) => {
                out.push('[');
                for (n, item) in items.iter().enumerate() {
                    if n > 0 {
                        out.push(',');
                    }
                    indent(out, level + 1);
                    item.write_pretty(out, level + 1);
                }
                indent(out, level);
                out.push(']');
            }
            Jsonb::Object(pairs) => {
                out.push('{');
                for (n, (key, value)) in pairs.iter().enumerate() {
                    if n > 0 {
                        out.push(',');
                    }
                    indent(out, level + 1);
                    write_json_string(key, out);
                    out.push_str(": ");
                    value.write_pretty(out, level + 1);
                }
                indent(out, level);
                out.push('}');
            }
            scalar => scalar.write(out),
        }
    }

    /// `jsonb_typeof`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Jsonb::Null => "null",
            Jsonb::Bool(_) => "boolean",
            Jsonb::Number(_) => "number",
            Jsonb::String(_) => "string",
            Jsonb::Array(_) => "array",
            Jsonb::Object(_) => "object",
        }
    }

    fn is_scalar(&self) -> bool {
        !matches!(self, Jsonb::Array(_) | Jsonb::Object(_))
    }

    fn type_rank(&self) -> u8 {
        match self {
            Jsonb::Null => 0,
            Jsonb::String(_) => 1,
            Jsonb::Number(_) => 2,
            Jsonb::Bool(_) => 3,
            Jsonb::Array(_) => 4,
            Jsonb::Object(_) => 5,
        }
    }

    /// jsonb's B-tree order: objects > arrays > booleans > numbers > strings > null; more
    /// pairs or elements sort after fewer; then member by member. At the top level a
    /// scalar counts as an array of one element that sorts before a real one (so an empty
    /// array sorts before null, as in PostgreSQL).
    pub fn compare(&self, other: &Jsonb) -> Ordering {
        let as_top = |j: &Jsonb| match j {
            Jsonb::Array(items) => (4u8, items.len(), 1u8),
            Jsonb::Object(pairs) => (5, pairs.len(), 0),
            _ => (4, 1, 0),
        };
        let (a, b) = (as_top(self), as_top(other));
        if a != b {
            return a.cmp(&b);
        }
        self.compare_nested(other)
    }

    fn compare_nested(&self, other: &Jsonb) -> Ordering {
        match (self, other) {
            (Jsonb::Null, Jsonb::Null) => Ordering::Equal,
            (Jsonb::Bool(a), Jsonb::Bool(b)) => a.cmp(b),
            (Jsonb::Number(a), Jsonb::Number(b)) => a.cmp(b),
            (Jsonb::String(a), Jsonb::String(b)) => a.cmp(b),
            (Jsonb::Array(a), Jsonb::Array(b)) => a.len().cmp(&b.len()).then_with(|| {
                a.iter()
                    .zip(b)
                    .map(|(x, y)| x.compare_nested(y))
                    .find(|o| o.is_ne())
                    .unwrap_or(Ordering::Equal)
            }),
            (Jsonb::Object(a), Jsonb::Object(b)) => a.len().cmp(&b.len()).then_with(|| {
                a.iter()
                    .zip(b)
                    .map(|((ka, va), (kb, vb))| {
                        key_order(ka, kb).then_with(|| va.compare_nested(vb))
                    })
                    .find(|o| o.is_ne())
                    .unwrap_or(Ordering::Equal)
            }),
            _ => self.type_rank().cmp(&other.type_rank()),
        }
    }

    /// `@>`: whether this document contains `other` (PostgreSQL's rules: objects by their
    /// keys, arrays by their elements in any order, and a top-level array contains a
    /// scalar that is one of its elements).
    pub fn contains(&self, other: &Jsonb) -> bool {
        match (self, other) {
            (Jsonb::Array(items), scalar) if scalar.is_scalar() => {
                items.iter().any(|i| i.contains_nested(scalar))
            }
            _ => self.contains_nested(other),
        }
    }

    fn contains_nested(&self, other: &Jsonb) -> bool {
        match (self, other) {
            (Jsonb::Object(mine), Jsonb::Object(theirs)) => theirs.iter().all(|(key, value)| {
                Jsonb::object_get(mine, key).is_some_and(|v| v.contains_nested(value))
            }),
            (Jsonb::Array(mine), Jsonb::Array(theirs)) => theirs
                .iter()
                .all(|t| mine.iter().any(|m| m.contains_nested(t))),
            (a, b) if a.is_scalar() && b.is_scalar() => a.compare_nested(b).is_eq(),
            _ => false,
        }
    }

    fn object_get<'j>(pairs: &'j [(String, Jsonb)], key: &str) -> Option<&'j Jsonb> {
        pairs
            .binary_search_by(|(k, _)| key_order(k, key))
            .ok()
            .map(|at| &pairs[at].1)
    }

    /// `?`: a key of an object, a string element of an array, or the string itself.
    pub fn has_key(&self, key: &str) -> bool {
        match self {
            Jsonb::Object(pairs) => Jsonb::object_get(pairs, key).is_some(),
            Jsonb::Array(items) => items
                .iter()
                .any(|i| matches!(i, Jsonb::String(s) if s == key)),
            Jsonb::String(s) => s == key,
            _ => false,
        }
    }

    /// `-> 'key'`.
    pub fn get_key(&self, key: &str) -> Option<&Jsonb> {
        match self {
            Jsonb::Object(pairs) => Jsonb::object_get(pairs, key),
            _ => None,
        }
    }

    /// `-> n`: the n-th element (from 0; negative counts from the end).
    pub fn get_index(&self, index: i64) -> Option<&Jsonb> {
        match self {
            Jsonb::Array(items) => array_position(items.len(), index).map(|at| &items[at]),
            _ => None,
        }
    }

    /// `#> path`: each step a key of an object or the index of an array element.
    pub fn get_path(&self, path: &[String]) -> Option<&Jsonb> {
        path.iter().try_fold(self, |at, step| match at {
            Jsonb::Object(_) => at.get_key(step),
            Jsonb::Array(_) => at.get_index(step.trim().parse().ok()?),
            _ => None,
        })
    }

    /// The value as `->>` gives it: a string's contents, NULL for null, else its text.
    pub fn as_text(&self) -> Option<String> {
        match self {
            Jsonb::Null => None,
            Jsonb::String(s) => Some(s.clone()),
            other => Some(other.to_text()),
        }
    }

    /// `||`: two objects merge (the right one's keys win); otherwise the sides' elements
    /// (a non-array counting as an array of itself) are concatenated.
    pub fn concat(self, other: Jsonb) -> Jsonb {
        match (self, other) {
            (Jsonb::Object(mut a), Jsonb::Object(b)) => {
                a.extend(b);
                object_of(a)
            }
            (a, b) => {
                let mut items = match a {
                    Jsonb::Array(items) => items,
                    other => vec![other],
                };
                match b {
                    Jsonb::Array(more) => items.extend(more),
                    other => items.push(other),
                }
                Jsonb::Array(items)
            }
        }
    }

    /// `- 'key'`: without that key, or without the array's string elements equal to it.
    pub fn delete_key(self, key: &str) -> SqlResult<Jsonb> {
        Ok(match self {
            Jsonb::Object(mut pairs) => {
                pairs.retain(|(k, _)| k != key);
                Jsonb::Object(pairs)
            }
            Jsonb::Array(mut items) => {
                items.retain(|i| !matches!(i, Jsonb::String(s) if s == key));
                Jsonb::Array(items)
            }
            _ => return Err(invalid_parameter("cannot delete from scalar")),
        })
    }

    /// `- n`: without the n-th element.
    pub fn delete_index(self, index: i64) -> SqlResult<Jsonb> {
        match self {
            Jsonb::Array(mut items) => {
                if let Some(at) = array_position(items.len(), index) {
                    items.remove(at);
                }
                Ok(Jsonb::Array(items))
            }
            Jsonb::Object(_) => Err(invalid_parameter(
                "cannot delete from object using integer index",
            )),
            _ => Err(invalid_parameter("cannot delete from scalar")),
        }
    }

    /// `#- path`: without the value at the path (unchanged when there is none).
    pub fn delete_path(mut self, path: &[String]) -> SqlResult<Jsonb> {
        if self.is_scalar() {
            return Err(invalid_parameter("cannot delete path in scalar"));
        }
        if let Some((last, steps)) = path.split_last() {
            if let Some(parent) = self.path_mut(steps, 0)? {
                match parent {
                    Jsonb::Object(pairs) => pairs.retain(|(k, _)| k != last),
                    Jsonb::Array(items) => {
                        let index = path_index(last, path.len())?;
                        if let Some(at) = array_position(items.len(), index) {
                            items.remove(at);
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(self)
    }

    /// `jsonb_set(target, path, value, create_missing)`: replaces the value at the path; a
    /// missing last step is added when `create` (an array index past either end adds at
    /// that end); a missing step before it leaves the document unchanged.
    pub fn set_path(mut self, path: &[String], value: Jsonb, create: bool) -> SqlResult<Jsonb> {
        if self.is_scalar() {
            return Err(invalid_parameter("cannot set path in scalar"));
        }
        let Some((last, steps)) = path.split_last() else {
            return Ok(self);
        };
        if let Some(parent) = self.path_mut(steps, 0)? {
            match parent {
                Jsonb::Object(pairs) => match pairs.binary_search_by(|(k, _)| key_order(k, last)) {
                    Ok(at) => pairs[at].1 = value,
                    Err(at) if create => pairs.insert(at, (last.clone(), value)),
                    Err(_) => {}
                },
                Jsonb::Array(items) => {
                    let index = path_index(last, path.len())?;
                    match array_position(items.len(), index) {
                        Some(at) => items[at] = value,
                        None if create && index < 0 => items.insert(0, value),
                        None if create => items.push(value),
                        None => {}
                    }
                }
                _ => {}
            }
        }
        Ok(self)
    }

    /// The container at `path` (steps from position `done` + 1 on), for an edit.
    fn path_mut(&mut self, path: &[String], done: usize) -> SqlResult<Option<&mut Jsonb>> {
        let Some((step, rest)) = path.split_first() else {
            return Ok(Some(self));
        };
        let next = match self {
            Jsonb::Object(pairs) => match pairs.binary_search_by(|(k, _)| key_order(k, step)) {
                Ok(at) => &mut pairs[at].1,
                Err(_) => return Ok(None),
            },
            Jsonb::Array(items) => {
                let len = items.len();
                match array_position(len, path_index(step, done + 1)?) {
                    Some(at) => &mut items[at],
                    None => return Ok(None),
                }
            }
            _ => return Ok(None),
        };
        next.path_mut(rest, done + 1)
    }

    /// `jsonb_strip_nulls`: without object members whose value is null, at every level.
    pub fn strip_nulls(self) -> Jsonb {
        match self {
            Jsonb::Object(pairs) => Jsonb::Object(
                pairs
                    .into_iter()
                    .filter(|(_, v)| !matches!(v, Jsonb::Null))
                    .map(|(k, v)| (k, v.strip_nulls()))
                    .collect(),
            ),
            Jsonb::Array(items) => {
                Jsonb::Array(items.into_iter().map(Jsonb::strip_nulls).collect())
            }
            scalar => scalar,
        }
    }

    /// An object of these pairs (`jsonb_build_object`, `jsonb_object_agg`).
    pub fn object(pairs: Vec<(String, Jsonb)>) -> Jsonb {
        object_of(pairs)
    }

    /// The value cast to a SQL scalar type (`('{"a": 1}'::jsonb -> 'a')::int`).
    pub fn cast_scalar(&self, ty: DataType) -> SqlResult<Value> {
        let wanted = if ty == DataType::Bool {
            "boolean"
        } else {
            "number"
        };
        let mismatch = || {
            SqlError::new(
                ErrorKind::InvalidParameterValue,
                format!(
                    "cannot cast jsonb {} to type {}",
                    self.type_name(),
                    ty.pg_name()
                ),
            )
        };
        match (self, wanted) {
            (Jsonb::Bool(b), "boolean") => Ok(Value::Bool(*b)),
            (Jsonb::Number(n), "number") => Value::Numeric(*n).cast(ty),
            _ => Err(mismatch()),
        }
    }
}

/// The array position of index `index` (negative from the end) in `len` elements.
pub fn array_position(len: usize, index: i64) -> Option<usize> {
    let at = if index < 0 { len as i64 + index } else { index };
    (0..len as i64).contains(&at).then_some(at as usize)
}

/// A path step used as an array index.
fn path_index(step: &str, position: usize) -> SqlResult<i64> {
    step.trim().parse().map_err(|_| {
        SqlError::invalid_text(format!(
            "path element at position {position} is not an integer: \"{step}\""
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn j(text: &str) -> Jsonb {
        Jsonb::parse(text).unwrap()
    }

    #[test]
    fn text_form_orders_keys_and_keeps_the_last_duplicate() {
        assert_eq!(
            j(r#"{"bb": 1, "a": [1, 2.50, -0.5e1], "bb": {"x":null}, "c": "q\"\n"}"#).to_text(),
            r#"{"a": [1, 2.50, -5], "c": "q\"\n", "bb": {"x": null}}"#
        );
        assert_eq!(j(" \"\\u00e9\\ud83d\\ude00\" ").to_text(), "\"é😀\"");
    }

    #[test]
    fn bad_input_is_22p02_and_nul_22p05() {
        for bad in [
            "",
            "{",
            "[1,]",
            "01",
            "1.",
            "tru",
            "{\"a\" 1}",
            "\"a\n\"",
            "[1] x",
            "-",
        ] {
            assert_eq!(
                Jsonb::parse(bad).unwrap_err().kind.sqlstate(),
                "22P02",
                "{bad}"
            );
        }
        assert_eq!(
            Jsonb::parse("\"\\u0000\"").unwrap_err().kind.sqlstate(),
            "22P05"
        );
        // Statements run on threads with STATEMENT_STACK_BYTES of stack.
        let deep = std::thread::Builder::new()
            .stack_size(crate::STATEMENT_STACK_BYTES)
            .spawn(|| {
                Jsonb::parse(&"[".repeat(MAX_DEPTH + 2))
                    .unwrap_err()
                    .kind
                    .sqlstate()
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(deep, "54001");
    }

    #[test]
    fn order_follows_postgresql() {
        let sorted = [
            "[]",
            "null",
            "\"a\"",
            "\"b\"",
            "1",
            "2.5",
            "false",
            "true",
            "[0]",
            "[1, 2]",
            "[[1], 2]",
            "{}",
            "{\"a\": 1}",
            "{\"b\": 0}",
            "{\"a\": 1, \"b\": 2}",
        ];
        for pair in sorted.windows(2) {
            assert_eq!(j(pair[0]).compare(&j(pair[1])), Ordering::Less, "{pair:?}");
        }
        assert_eq!(j("1.0").compare(&j("1")), Ordering::Equal);
    }

    #[test]
    fn containment_and_existence() {
        assert!(j(r#"{"a": 1, "b": [1, 2, {"c": 3}]}"#).contains(&j(r#"{"b": [{"c": 3}, 1]}"#)));
        assert!(!j(r#"{"a": 1}"#).contains(&j(r#"{"a": 2}"#)));
        assert!(j("[1, 2, [3]]").contains(&j("2")));
        assert!(!j("[1, [2]]").contains(&j("[[[2]]]")));
        assert!(j(r#"["a", "b"]"#).has_key("b"));
        assert!(!j(r#"{"a": {"b": 1}}"#).has_key("b"));
    }

    #[test]
    fn paths_and_edits() {
        let doc = j(r#"{"a": [10, {"b": "x"}]}"#);
        let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            doc.get_path(&path(&["a", "-1", "b"])).unwrap().to_text(),
            "\"x\""
        );
        assert!(doc.get_path(&path(&["a", "x"])).is_none());
        let set = doc
            .clone()
            .set_path(&path(&["a", "5"]), j("7"), true)
            .unwrap();
        assert_eq!(set.to_text(), r#"{"a": [10, {"b": "x"}, 7]}"#);
        let set = doc
            .clone()
            .set_path(&path(&["z", "y"]), j("7"), true)
            .unwrap();
        assert_eq!(set.to_text(), doc.to_text());
        let gone = doc.delete_path(&path(&["a", "0"])).unwrap();
        assert_eq!(gone.to_text(), r#"{"a": [{"b": "x"}]}"#);
        assert_eq!(
            j("[1]").concat(j(r#"{"a": 1}"#)).to_text(),
            r#"[1, {"a": 1}]"#
        );
        assert_eq!(
            j("{\"a\": {\"b\": null}, \"c\": null}")
                .strip_nulls()
                .to_text(),
            "{\"a\": {}}"
        );
        assert_eq!(
            j("{\"a\": [], \"b\": {}}").pretty(),
            "{\n    \"a\": [\n    ],\n    \"b\": {\n    }\n}"
        );
    }

    #[test]
    fn json_levels_keep_the_written_text() {
        let JsonLevel::Object(members) = json_level(r#"{"a": [1,  2], "a": 3 }"#).unwrap() else {
            panic!("an object")
        };
        assert_eq!(members, vec![("a".into(), "[1,  2]"), ("a".into(), "3")]);
    }
}
