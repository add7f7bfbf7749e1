//! The bulk-load form of INSERT without sqlparser's per-row cost: `INSERT INTO t [(cols)]
//! VALUES (row), (row), ... [tail]` whose row expressions are literals (numbers, strings,
//! NULL, TRUE, FALSE), parameters (`$n`), unary `+`/`-`, `+ - * / %` and parentheses.
//!
//! sqlparser spends tens of microseconds on each row of such a statement (a token for every
//! lexeme, a data-type attempt and a formatted error for many literals, large `Expr` moves,
//! and as much again to drop the tree): for a 1,000-row INSERT that was most of a session's
//! CPU. Here the rows are read into [`ValueRows`], one arena of small nodes shaped exactly as
//! sqlparser's tree would be, which the binder binds directly; sqlparser parses only the
//! statement around them: the head up to `VALUES`, one placeholder row and the tail
//! (`ON CONFLICT`, `RETURNING`). Anything outside this grammar — comments or dollar quotes
//! before the rows, identifiers, casts, function calls, string prefixes, multi-character
//! operators — returns `None`, and the caller parses the whole statement with sqlparser. So the
//! fast path changes neither a result nor an error message: the tests here compare the trees
//! (`ValueRows::to_ast`), the planner's tests compare the bound plans.

use std::borrow::Cow;

use sqlparser::ast::{SetExpr, Statement};

use crate::lexical::{after_quoted, is_operator_byte};
use crate::nesting::{depth_bound, MAX_EXPRESSION_DEPTH};

/// Deeper nesting than this goes to sqlparser, which reports its own recursion limit.
const MAX_DEPTH: usize = 32;

/// The rows of an `INSERT … VALUES` as the row reader read them. Every value is a tree of
/// nodes in one arena, shaped as sqlparser's `Expr` would be; literal nodes point into
/// `source`, the text of the rows.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueRows {
    source: String,
    nodes: Vec<Node>,
    /// The root node of every value, row after row.
    values: Vec<NodeId>,
    /// Where each row's values end in `values`.
    row_ends: Vec<u32>,
    /// Every value's number, in `values`' order, when every value is an integer literal
    /// (digits without a point, or minus them) within i64: the bulk-load form's rows, whose
    /// numbers the reader works out as it reads them.
    integers: Option<Vec<i64>>,
}

/// A node of [`ValueRows`]; its index in the arena.
pub type NodeId = u32;

/// A byte range of `ValueRows::source`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    start: u32,
    end: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
    Number(Span),
    /// The text between the quotes, `''` still doubled.
    String(Span),
    Null,
    Boolean(bool),
    /// `$n`, with the dollar.
    Placeholder(Span),
    Nested(NodeId),
    Minus(NodeId),
    Plus(NodeId),
    Binary(Operator, NodeId, NodeId),
}

/// The binary operators of the fast grammar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operator {
    Plus,
    Minus,
    Multiply,
    Divide,
    Modulo,
}

/// One node of a row value, as the binder reads it.
#[derive(Clone, Debug, PartialEq)]
pub enum RowValue<'a> {
    Number(&'a str),
    String(Cow<'a, str>),
    Null,
    Boolean(bool),
    /// `$n`, with the dollar.
    Placeholder(&'a str),
    Nested(NodeId),
    Minus(NodeId),
    Plus(NodeId),
    Binary(Operator, NodeId, NodeId),
}

impl ValueRows {
    /// The number of rows.
    pub fn len(&self) -> usize {
        self.row_ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.row_ends.is_empty()
    }

    /// The root nodes of row `i`'s values.
    pub fn row(&self, i: usize) -> &[NodeId] {
        let start = if i == 0 { 0 } else { self.row_ends[i - 1] };
        &self.values[start as usize..self.row_ends[i] as usize]
    }

    /// Whether every value of every row is an integer literal within i64.
    pub fn all_integers(&self) -> bool {
        self.integers.is_some()
    }

    /// Row `i`'s numbers when every value of every row is an integer literal within i64.
    pub fn integer_row(&self, i: usize) -> Option<&[i64]> {
        let start = if i == 0 { 0 } else { self.row_ends[i - 1] };
        Some(&self.integers.as_ref()?[start as usize..self.row_ends[i] as usize])
    }

    /// The first `n` rows alone: what a statement of only those rows would read to.
    pub fn head(&self, n: usize) -> ValueRows {
        let n = n.min(self.len());
        let row_ends = self.row_ends[..n].to_vec();
        let values = self.values[..row_ends.last().map_or(0, |&end| end as usize)].to_vec();
        // A value's nodes are pushed as it is read, its root last, and rows one after
        // another: the first rows' nodes are those up to their last root.
        let nodes = self.nodes[..values.last().map_or(0, |&root| root as usize + 1)].to_vec();
        let source_end = nodes
            .iter()
            .filter_map(|node| match node {
                Node::Number(s) | Node::String(s) | Node::Placeholder(s) => Some(s.end as usize),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        let integers = self
            .integers
            .as_ref()
            .map(|all| all[..values.len()].to_vec());
        ValueRows {
            source: self.source[..source_end].to_string(),
            nodes,
            values,
            row_ends,
            integers,
        }
    }

    pub fn value(&self, id: NodeId) -> RowValue<'_> {
        let text = |s: Span| &self.source[s.start as usize..s.end as usize];
        match self.nodes[id as usize] {
            Node::Number(s) => RowValue::Number(text(s)),
            Node::String(s) => {
                let raw = text(s);
                RowValue::String(if raw.contains("''") {
                    Cow::Owned(raw.replace("''", "'"))
                } else {
                    Cow::Borrowed(raw)
                })
            }
            Node::Null => RowValue::Null,
            Node::Boolean(b) => RowValue::Boolean(b),
            Node::Placeholder(s) => RowValue::Placeholder(text(s)),
            Node::Nested(n) => RowValue::Nested(n),
            Node::Minus(n) => RowValue::Minus(n),
            Node::Plus(n) => RowValue::Plus(n),
            Node::Binary(op, l, r) => RowValue::Binary(op, l, r),
        }
    }

    /// The rows as sqlparser's tree, for comparing the two parsers.
    #[cfg(test)]
    pub(crate) fn to_ast(&self) -> Vec<sqlparser::ast::Parens<Vec<sqlparser::ast::Expr>>> {
        use sqlparser::ast::helpers::attached_token::AttachedToken;
        use sqlparser::ast::{BinaryOperator, Expr, Parens, UnaryOperator, Value};
        fn expr(rows: &ValueRows, id: NodeId) -> Expr {
            let unary = |op, n| Expr::UnaryOp {
                op,
                expr: Box::new(expr(rows, n)),
            };
            match rows.value(id) {
                RowValue::Number(n) => Expr::value(Value::Number(n.to_string(), false)),
                RowValue::String(s) => Expr::value(Value::SingleQuotedString(s.into_owned())),
                RowValue::Null => Expr::value(Value::Null),
                RowValue::Boolean(b) => Expr::value(Value::Boolean(b)),
                RowValue::Placeholder(p) => Expr::value(Value::Placeholder(p.to_string())),
                RowValue::Nested(n) => Expr::Nested(Box::new(expr(rows, n))),
                RowValue::Minus(n) => unary(UnaryOperator::Minus, n),
                RowValue::Plus(n) => unary(UnaryOperator::Plus, n),
                RowValue::Binary(op, l, r) => Expr::BinaryOp {
                    left: Box::new(expr(rows, l)),
                    op: match op {
                        Operator::Plus => BinaryOperator::Plus,
                        Operator::Minus => BinaryOperator::Minus,
                        Operator::Multiply => BinaryOperator::Multiply,
                        Operator::Divide => BinaryOperator::Divide,
                        Operator::Modulo => BinaryOperator::Modulo,
                    },
                    right: Box::new(expr(rows, r)),
                },
            }
        }
        (0..self.len())
            .map(|i| Parens {
                opening_token: AttachedToken::empty(),
                content: self.row(i).iter().map(|v| expr(self, *v)).collect(),
                closing_token: AttachedToken::empty(),
            })
            .collect()
    }
}

/// Parses `text` as an INSERT … VALUES when its rows are in the fast grammar; `None` means
/// "parse it with sqlparser". `parse_rest` parses the statement with one placeholder row,
/// which stays in the returned statement in place of the rows.
pub(crate) fn parse_insert_values(
    text: &str,
    parse_rest: impl FnOnce(&str) -> Option<Statement>,
) -> Option<(Statement, ValueRows)> {
    let rows_start = after_values_keyword(text)?;
    let rows_text = &text[rows_start..];
    u32::try_from(rows_text.len()).ok()?;
    // Room for as many values as typical rows of short literals hold (`(1, 2, 3),` is
    // three bytes a value): a large statement's vectors then grow at most once or twice
    // instead of doubling a dozen times, each a copy.
    let values_guess = rows_text.len() / 3;
    let mut reader = RowReader {
        text: rows_text,
        pos: 0,
        depth: 0,
        nodes: Vec::with_capacity(values_guess),
        integers: Some(Vec::with_capacity(values_guess)),
    };
    let (values, row_ends) = reader.rows()?;
    let rest = format!("{} (NULL){}", &text[..rows_start], &rows_text[reader.pos..]);
    let mut statement = parse_rest(&rest)?;
    let Statement::Insert(insert) = &mut statement else {
        return None;
    };
    let query = insert.source.as_mut()?;
    let SetExpr::Values(values_clause) = query.body.as_mut() else {
        return None;
    };
    if values_clause.rows.len() != 1 || values_clause.explicit_row || values_clause.value_keyword {
        return None;
    }
    let rows = ValueRows {
        source: rows_text[..reader.pos].to_string(),
        nodes: reader.nodes,
        values,
        row_ends,
        integers: reader.integers,
    };
    Some((statement, rows))
}

/// The byte offset just after a top-level `VALUES` keyword of a statement that starts with
/// `INSERT`; `None` when there is none before anything this module does not scan.
fn after_values_keyword(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace())?;
    if !starts_with_word(bytes, start, b"insert") {
        return None;
    }
    let mut depth = 0usize;
    let mut i = start;
    while i < bytes.len() {
        match bytes[i] {
            b'\'' | b'"' => i = after_quoted(bytes, i, false)?,
            b'-' if bytes.get(i + 1) == Some(&b'-') => return None,
            b'/' if bytes.get(i + 1) == Some(&b'*') => return None,
            b'$' => return None,
            b'(' => {
                depth += 1;
                i += 1;
            }
            b')' => {
                depth = depth.checked_sub(1)?;
                i += 1;
            }
            b'v' | b'V'
                if depth == 0
                    && (bytes[i - 1].is_ascii_whitespace() || bytes[i - 1] == b')')
                    && starts_with_word(bytes, i, b"values") =>
            {
                return Some(i + b"values".len());
            }
            _ => i += 1,
        }
    }
    None
}

/// Whether `word` (lower case) starts at `at`, case-insensitively, followed by a non-word byte.
fn starts_with_word(bytes: &[u8], at: usize, word: &[u8]) -> bool {
    bytes.len() >= at + word.len()
        && bytes[at..at + word.len()].eq_ignore_ascii_case(word)
        && bytes.get(at + word.len()).is_none_or(|b| !is_word_byte(*b))
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// Reads the rows after `VALUES` into an arena; `pos` ends just after the last row.
struct RowReader<'a> {
    text: &'a str,
    pos: usize,
    depth: usize,
    nodes: Vec<Node>,
    /// Every value's number so far, until a value is not an integer literal.
    integers: Option<Vec<i64>>,
}

impl<'a> RowReader<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// Every value's root node and where each row's values end.
    fn rows(&mut self) -> Option<(Vec<NodeId>, Vec<u32>)> {
        let mut values = Vec::with_capacity(self.nodes.capacity());
        let mut row_ends = Vec::new();
        loop {
            self.expect(b'(')?;
            loop {
                values.push(self.value()?);
                match self.next_byte()? {
                    b',' => continue,
                    b')' => break,
                    _ => return None,
                }
            }
            row_ends.push(u32::try_from(values.len()).ok()?);
            if self.peek() != Some(b',') {
                return Some((values, row_ends));
            }
            self.pos += 1;
        }
    }

    /// One value: an integer literal ending the value is read at once, with its number;
    /// anything else through `expr`. A value whose operators may nest deeper than a
    /// statement's expressions may goes to sqlparser (which the depth bound over the whole
    /// statement then refuses): no value read here is deeper, so the caller checks the
    /// depth of the statement around the rows alone (`crate::parse`).
    fn value(&mut self) -> Option<NodeId> {
        if let Some((id, number)) = self.integer_value() {
            if let Some(integers) = &mut self.integers {
                integers.push(number);
            }
            return Some(id);
        }
        self.integers = None;
        let start = self.pos;
        let id = self.expr(0)?;
        (depth_bound(&self.text[start..self.pos]) < MAX_EXPRESSION_DEPTH).then_some(id)
    }

    /// A value that is digits, or `-` and digits, within i64 and followed by the row's `,`
    /// or `)`: the nodes `expr` pushes for it (a number, under a minus) and its number. None,
    /// with nothing consumed, for anything else.
    fn integer_value(&mut self) -> Option<(NodeId, i64)> {
        let start = self.pos;
        let read = self.integer_literal();
        if read.is_none() {
            self.pos = start;
        }
        read
    }

    fn integer_literal(&mut self) -> Option<(NodeId, i64)> {
        let negative = self.peek()? == b'-';
        if negative {
            self.operator()?;
            self.skip_whitespace();
        }
        let start = self.pos;
        let mut magnitude = 0u64;
        while let Some(digit) = self.bytes().get(self.pos).filter(|b| b.is_ascii_digit()) {
            magnitude = magnitude
                .checked_mul(10)?
                .checked_add(u64::from(digit - b'0'))?;
            self.pos += 1;
        }
        let end = self.pos;
        if end == start
            || !matches!(self.bytes().get(end), Some(b) if b.is_ascii_whitespace() || b"),".contains(b))
        {
            return None;
        }
        if !matches!(self.peek(), Some(b',' | b')')) {
            return None;
        }
        let number = match negative {
            true => 0i64.checked_sub_unsigned(magnitude)?,
            false => i64::try_from(magnitude).ok()?,
        };
        let mut id = self.push(Node::Number(self.span(start, end)))?;
        if negative {
            id = self.push(Node::Minus(id))?;
        }
        Some((id, number))
    }

    fn push(&mut self, node: Node) -> Option<NodeId> {
        let id = NodeId::try_from(self.nodes.len()).ok()?;
        self.nodes.push(node);
        Some(id)
    }

    fn span(&self, start: usize, end: usize) -> Span {
        // The caller checked that the rows' text fits in u32.
        Span {
            start: start as u32,
            end: end as u32,
        }
    }

    fn skip_whitespace(&mut self) {
        while self.pos < self.bytes().len() && self.bytes()[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    /// The next byte after whitespace, without consuming it.
    fn peek(&mut self) -> Option<u8> {
        self.skip_whitespace();
        self.bytes().get(self.pos).copied()
    }

    fn next_byte(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.pos += 1;
        Some(b)
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.next_byte()? == byte).then_some(())
    }

    /// Precedence climbing with sqlparser's PostgreSQL precedences: `* / %` bind at 40,
    /// `+ -` at 30, both left-associative.
    fn expr(&mut self, min_precedence: u8) -> Option<NodeId> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return None;
        }
        let mut left = self.prefix()?;
        loop {
            let (op, precedence) = match self.peek() {
                Some(b'+') => (Operator::Plus, 30),
                Some(b'-') => (Operator::Minus, 30),
                Some(b'*') => (Operator::Multiply, 40),
                Some(b'/') => (Operator::Divide, 40),
                Some(b'%') => (Operator::Modulo, 40),
                _ => break,
            };
            if precedence <= min_precedence {
                break;
            }
            self.operator()?;
            let right = self.expr(precedence)?;
            left = self.push(Node::Binary(op, left, right))?;
        }
        self.depth -= 1;
        Some(left)
    }

    /// Consumes a one-character operator; `None` if another operator character follows.
    fn operator(&mut self) -> Option<()> {
        self.pos += 1;
        match self.bytes().get(self.pos) {
            Some(b) if is_operator_byte(*b) => None,
            _ => Some(()),
        }
    }

    fn prefix(&mut self) -> Option<NodeId> {
        let b = self.peek()?;
        let start = self.pos;
        let node = match b {
            b'(' => {
                self.pos += 1;
                let inner = self.expr(0)?;
                self.expect(b')')?;
                return self.push(Node::Nested(inner));
            }
            b'-' | b'+' => {
                self.operator()?;
                // As sqlparser: the operand binds like `*`, so `-2 * 3` is `(-2) * 3`.
                let operand = self.expr(40)?;
                return self.push(if b == b'-' {
                    Node::Minus(operand)
                } else {
                    Node::Plus(operand)
                });
            }
            b'0'..=b'9' => {
                self.digits();
                if self.bytes().get(self.pos) == Some(&b'.') {
                    self.pos += 1;
                    if self.digits() == 0 {
                        return None;
                    }
                }
                Node::Number(self.span(start, self.pos))
            }
            b'\'' => {
                let end = after_quoted(self.bytes(), start, false)?;
                self.pos = end;
                Node::String(self.span(start + 1, end - 1))
            }
            b'$' => {
                self.pos += 1;
                if self.digits() == 0 {
                    return None;
                }
                Node::Placeholder(self.span(start, self.pos))
            }
            b if b.is_ascii_alphabetic() => {
                while self.bytes().get(self.pos).is_some_and(|b| is_word_byte(*b)) {
                    self.pos += 1;
                }
                let word = &self.bytes()[start..self.pos];
                if word.eq_ignore_ascii_case(b"null") {
                    Node::Null
                } else if word.eq_ignore_ascii_case(b"true") {
                    Node::Boolean(true)
                } else if word.eq_ignore_ascii_case(b"false") {
                    Node::Boolean(false)
                } else {
                    return None;
                }
            }
            _ => return None,
        };
        // A literal must end where sqlparser's token ends: at whitespace, a separator or a
        // one-character operator (`1e5`, `'a'::int`, `$1abc` go to sqlparser).
        match self.bytes().get(self.pos) {
            None => {}
            Some(b) if b.is_ascii_whitespace() || b"),+-*/%".contains(b) => {}
            Some(_) => return None,
        }
        self.push(node)
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while self.bytes().get(self.pos).is_some_and(u8::is_ascii_digit) {
            self.pos += 1;
        }
        self.pos - start
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::sqlparser_statement;

    fn sqlparser_one(text: &str) -> Option<Statement> {
        sqlparser_statement(text).ok()
    }

    /// The fast path's statement with its rows put back as sqlparser's tree.
    fn fast(text: &str) -> Option<Statement> {
        let (mut statement, rows) = parse_insert_values(text, sqlparser_one)?;
        let Statement::Insert(insert) = &mut statement else {
            panic!("not an insert: {text}");
        };
        let SetExpr::Values(values) = insert.source.as_mut().unwrap().body.as_mut() else {
            panic!("no values: {text}");
        };
        values.rows = rows.to_ast();
        Some(statement)
    }

    /// Statements the fast path takes must parse to exactly sqlparser's tree.
    #[test]
    fn matches_sqlparser_on_the_fast_grammar() {
        let cases = [
            "INSERT INTO t VALUES (1)",
            "insert into t (a, b) values (1, 'x'), (2, 'y')",
            "INSERT INTO t (a,b)VALUES(1,2),(3,4)",
            "INSERT INTO \"Odd values\" (\"values\") VALUES (1)",
            "INSERT INTO t VALUES (-1, +2, - -3, 1.25, 0.5, 123456789012345678901234567890)",
            "INSERT INTO t VALUES (1 + 2 * 3 - 4 / 5 % 6, (1 + 2) * 3, -2 * 3, - (4))",
            "INSERT INTO t VALUES (1 - 2 - 3, 8 / 4 / 2, 2 * (3 + (4 - 5)))",
            "INSERT INTO t VALUES ('it''s', '', 'a\\b', 'naïve ☃', NULL, true, FALSE, Null)",
            "INSERT INTO t VALUES ($1, $2 * 2, -$3)",
            "INSERT INTO transfers (id, debit_account_id, credit_account_id, amount, ledger, code) VALUES\n\
             (4000000000 * 1000 + 0, 2 + (4000000000 * 7919 + 0) % 100000, 1, 1, 1, 1),\n\
             (4000000000 * 1000 + 1, 2 + (4000000000 * 7919 + 104729) % 100000, 1, 1, 1, 1)",
            "INSERT INTO t VALUES (1), (2) ON CONFLICT (a) DO NOTHING",
            "INSERT INTO t VALUES (1), (2) RETURNING a, b * 2",
            "INSERT INTO t VALUES (1) -- trailing comment",
            "  INSERT INTO s.t AS x (a) VALUES (1)\n",
            "INSERT INTO t VALUES ( 1 , - 2 ) ,(3\n),(-4,5- 6, 7 -8, 9-10)",
            "INSERT INTO t VALUES (9223372036854775807, -9223372036854775808, 9223372036854775808)",
        ];
        for text in cases {
            let expected = sqlparser_one(text).expect(text);
            assert_eq!(fast(text).as_ref(), Some(&expected), "{text}");
        }
    }

    #[test]
    fn a_head_holds_the_first_rows() {
        let text = "INSERT INTO t VALUES (1, 'a''b'), (-(2 + 3), NULL), ((4) * $1, 'c'), (5, 'd')";
        let (_, rows) = parse_insert_values(text, sqlparser_one).unwrap();
        let all = rows.to_ast();
        for n in 0..=5 {
            let head = rows.head(n);
            assert_eq!(head.len(), n.min(4));
            assert_eq!(head.to_ast(), all[..n.min(4)], "{n} rows");
        }
        assert!(rows.head(1).source.len() < rows.source.len());
    }

    /// Everything outside the grammar is left to sqlparser, including all syntax errors.
    #[test]
    fn leaves_everything_else_to_sqlparser() {
        let cases = [
            "SELECT 1",
            "INSERT INTO t SELECT 1",
            "INSERT INTO t VALUES (DEFAULT)",
            "INSERT INTO t VALUES (now())",
            "INSERT INTO t VALUES (1::int)",
            "INSERT INTO t VALUES (1e5)",
            "INSERT INTO t VALUES (.5)",
            "INSERT INTO t VALUES (1.)",
            "INSERT INTO t VALUES (E'a')",
            "INSERT INTO t VALUES ('a' 'b')",
            "INSERT INTO t VALUES ((1, 2))",
            "INSERT INTO t VALUES (1 --2\n)",
            "INSERT INTO t VALUES (1 /* c */)",
            "INSERT INTO t VALUES (1 || 2)",
            "INSERT INTO t VALUES ($$x$$)",
            "INSERT INTO t VALUES (1), ROW(2)",
            "INSERT INTO t VALUES (1,)",
            "INSERT INTO t VALUES (1",
            "INSERT INTO t VALUES ()",
            "INSERT INTO t VALUES (1) garbage",
            "INSERT /* c */ INTO t VALUES (1)",
            "INSERT INTO t (a) SELECT * FROM (VALUES (1)) v",
            "INSERT INTO t VALUES (1) UNION SELECT 2",
        ];
        for text in cases {
            assert_eq!(fast(text), None, "{text}");
        }
        let deep = format!(
            "INSERT INTO t VALUES ({}1{})",
            "(".repeat(40),
            ")".repeat(40)
        );
        assert_eq!(fast(&deep), None);
        // A chain whose depth a statement may not have (the whole statement's depth bound
        // then refuses it); one just within is read here.
        let chain = |terms| vec!["1"; terms].join("+");
        let long = format!("INSERT INTO t VALUES ({})", chain(MAX_EXPRESSION_DEPTH + 1));
        assert!(parse_insert_values(&long, sqlparser_one).is_none());
        let fits = format!("INSERT INTO t VALUES ({})", chain(MAX_EXPRESSION_DEPTH - 1));
        assert!(parse_insert_values(&fits, sqlparser_one).is_some());
    }

    /// The bulk-load form's numbers are read with the rows; a statement with any other
    /// value has none.
    #[test]
    fn reads_the_numbers_of_integer_rows() {
        let text = "INSERT INTO t VALUES (1, -2), (9223372036854775807, - 9223372036854775808 )";
        let (_, rows) = parse_insert_values(text, sqlparser_one).unwrap();
        assert!(rows.all_integers());
        assert_eq!(rows.integer_row(0), Some(&[1, -2][..]));
        assert_eq!(rows.integer_row(1), Some(&[i64::MAX, i64::MIN][..]));
        assert_eq!(rows.head(1).integer_row(0), Some(&[1, -2][..]));
        for value in [
            "2.5",
            "+2",
            "(2)",
            "1 + 1",
            "-2 * 3",
            "9223372036854775808",
            "-9223372036854775809",
            "'2'",
            "NULL",
            "$1",
        ] {
            let text = format!("INSERT INTO t VALUES (1, 2), (3, {value}), (5, 6)");
            let (_, rows) = parse_insert_values(&text, sqlparser_one).unwrap();
            assert!(!rows.all_integers(), "{value}");
            assert_eq!(rows.integer_row(0), None, "{value}");
        }
    }

    #[test]
    fn reads_every_row() {
        let rows: Vec<String> = (0..1000).map(|k| format!("({k}, 'r{k}')")).collect();
        let text = format!("INSERT INTO t (a, b) VALUES {}", rows.join(", "));
        assert_eq!(fast(&text), sqlparser_one(&text));
    }
}
