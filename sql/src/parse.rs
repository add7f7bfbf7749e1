//! Parsing: split a query string into statements, intercept the few PostgreSQL statements
//! sqlparser-rs does not accept (`VACUUM`, `ANALYZE`, `CHECKPOINT`, `COPY ... (freeze on)`,
//! PostgreSQL's `CREATE PROCEDURE` and `DROP PROCEDURE`, `CREATE SEQUENCE`'s options in any
//! order, `CREATE USER`, `GRANT role TO role`, `REASSIGN OWNED`, `DROP OWNED`),
//! and parse the rest with the PostgreSQL dialect.

use sqlparser::ast::Statement;
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use crate::error::{ErrorKind, SqlError, SqlResult};
use crate::insert_values::{parse_insert_values, ValueRows};
use crate::lexical::{after_dollar_quote, after_quoted, line_comment_end, skip_blank};
use crate::nesting::{depth_bound, MAX_EXPRESSION_DEPTH};
use crate::procedure::{parse_create_procedure, parse_drop_procedure, ProcedureText};
use crate::role_statement::{
    all_routines_as_functions, create_user_as_role, group_as_role, parse_role_statement,
    quote_negative_connection_limit, unsupported_role_statement, RoleStatement,
};
use crate::sequence_statement::{
    parse_alter_sequence, parse_create_sequence, reorder_identity_options, AlterSequence,
};

/// An identifier as PostgreSQL folds it: lower case unless quoted.
pub fn ident(i: &sqlparser::ast::Ident) -> String {
    if i.quote_style.is_some() {
        i.value.clone()
    } else {
        i.value.to_ascii_lowercase()
    }
}

/// One statement of a query string.
#[derive(Clone, Debug)]
pub enum Parsed {
    Statement(Box<Statement>),
    /// A maintenance statement PostgreSQL accepts that has nothing to do here (VACUUM,
    /// ANALYZE, CHECKPOINT); the command tag to answer with.
    Maintenance(&'static str),
    /// An `INSERT … VALUES` whose rows the row reader read (`insert_values`): `statement`
    /// holds one placeholder row in their place.
    InsertValues {
        statement: Box<Statement>,
        rows: Box<ValueRows>,
    },
    CreateProcedure(ProcedureText),
    DropProcedure {
        names: Vec<String>,
        if_exists: bool,
    },
    AlterSequence(Box<AlterSequence>),
    /// `INSERT ... OVERRIDING {SYSTEM | USER} VALUE ...`, the clause taken out (sqlparser-rs
    /// does not parse it).
    InsertOverriding {
        statement: Box<Statement>,
        overriding: Overriding,
    },
    /// A CREATE or ALTER TABLE whose identity columns name their sequences (`SEQUENCE
    /// NAME`, which sqlparser-rs does not parse; taken out): the names, in order.
    WithSequenceNames {
        statement: Box<Statement>,
        names: Vec<String>,
    },
    /// `CREATE USER`: the `CREATE ROLE` it is, which logs in unless it says NOLOGIN.
    CreateUser(Box<Statement>),
    /// A role statement of PostgreSQL's own grammar (`GRANT role TO role`, ...).
    Role(RoleStatement),
    /// A GRANT or REVOKE `ON ALL PROCEDURES | ROUTINES IN SCHEMA`, read as sqlparser's
    /// `ALL FUNCTIONS IN SCHEMA`.
    OnAllRoutines(Box<Statement>),
}

/// What `INSERT ... OVERRIDING` does to identity columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overriding {
    /// The given values go in, GENERATED ALWAYS or not.
    System,
    /// The given values of identity columns are ignored: the sequence gives them.
    User,
}

/// A statement with the text it came from.
#[derive(Clone, Debug)]
pub struct ParsedStatement {
    pub parsed: Parsed,
    pub text: String,
}

/// The bytes `split_statements` acts on: quotes, the starts of comments and dollar quotes,
/// and semicolons.
static STARTS_SOMETHING: [bool; 256] = {
    let mut table = [false; 256];
    let mut i = 0;
    let bytes = b"'\"-/$;";
    while i < bytes.len() {
        table[bytes[i] as usize] = true;
        i += 1;
    }
    table
};

/// Splits `sql` at top-level semicolons, honouring quotes, dollar quotes and comments.
/// Returns each statement's text (without the semicolon) and its byte offset; empty
/// statements are dropped.
pub fn split_statements(sql: &str) -> Vec<(usize, &str)> {
    let bytes = sql.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        // Most bytes (a bulk INSERT's digits, commas, parentheses) start nothing: passed
        // over before the `match`, whose jump table mispredicted on them.
        if !STARTS_SOMETHING[bytes[i] as usize] {
            i += 1;
            continue;
        }
        match bytes[i] {
            b'\'' | b'"' => {
                i = after_quoted(bytes, i, false).unwrap_or(bytes.len());
                continue;
            }
            b'-' if bytes.get(i + 1) == Some(&b'-') => i = line_comment_end(bytes, i),
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < bytes.len() && !(bytes[i] == b'*' && bytes[i + 1] == b'/') {
                    i += 1;
                }
                i += 1;
            }
            b'$' => {
                if let Some(end) = after_dollar_quote(sql, i) {
                    i = end;
                    continue;
                }
            }
            b';' => {
                push_statement(&mut out, sql, start, i);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    push_statement(&mut out, sql, start, bytes.len().min(sql.len()));
    out
}

fn push_statement<'a>(out: &mut Vec<(usize, &'a str)>, sql: &'a str, start: usize, end: usize) {
    let piece = &sql[start.min(sql.len())..end];
    if !skip_blank(piece).is_empty() {
        out.push((start, piece));
    }
}

/// Parses a whole query string into statements.
pub fn parse(sql: &str) -> SqlResult<Vec<ParsedStatement>> {
    let mut out = Vec::new();
    for (offset, text) in split_statements(sql) {
        // The statement's first words, which recognize it (read once for both paths).
        let words = first_words(text, 2);
        let parsed = match insert_values(text, &words) {
            Some(parsed) => parsed,
            None => {
                check_depth(text)?;
                parse_one(text, &words).map_err(|mut e| {
                    if let Some(p) = e.position {
                        e.position = Some(p + sql[..offset].chars().count() as u32);
                    }
                    e
                })?
            }
        };
        out.push(ParsedStatement {
            parsed,
            text: text.trim().to_string(),
        });
    }
    Ok(out)
}

/// Refuses `text` with 54001 when its expressions may nest deeper than the threads that
/// parse, bind and evaluate it have stack for.
fn check_depth(text: &str) -> SqlResult<()> {
    let depth = depth_bound(text);
    if depth > MAX_EXPRESSION_DEPTH {
        return Err(SqlError::new(
            ErrorKind::StatementTooComplex,
            format!(
                "not supported yet: expressions nested deeper than {MAX_EXPRESSION_DEPTH} levels (this statement's operators and parentheses nest up to {depth})"
            ),
        ));
    }
    Ok(())
}

/// An `INSERT … VALUES` whose rows the row reader reads (`crate::insert_values`), without
/// the depth bound read over the rows' text: the reader bounds each value itself, and only
/// the statement around the rows, which sqlparser parses, is checked here. None for
/// anything else, which `parse_one` parses after the whole statement's depth is checked.
fn insert_values(text: &str, words: &[String]) -> Option<Parsed> {
    if words.first().map(String::as_str) != Some("insert") || find_overriding(text).is_some() {
        return None;
    }
    let (statement, rows) = parse_insert_values(text, |rest| {
        check_depth(rest).ok()?;
        sqlparser_statement(rest).ok()
    })?;
    Some(Parsed::InsertValues {
        statement: Box::new(statement),
        rows: Box::new(rows),
    })
}

/// The first `n` words of a statement, lower-cased, for recognizing it: comments count as
/// whitespace, and `(` and `;` end a word. Reads no further than those words.
fn first_words(text: &str, n: usize) -> Vec<String> {
    let mut words = Vec::with_capacity(n);
    let mut rest = skip_blank(text);
    while words.len() < n && !rest.is_empty() {
        let end = rest
            .char_indices()
            .find(|&(i, c)| {
                c.is_whitespace()
                    || c == '('
                    || c == ';'
                    || rest[i..].starts_with("--")
                    || rest[i..].starts_with("/*")
            })
            .map_or(rest.len(), |(i, _)| i);
        if end == 0 {
            // A lone `(` or `;`.
            rest = skip_blank(&rest[1..]);
            continue;
        }
        words.push(rest[..end].to_ascii_lowercase());
        rest = skip_blank(&rest[end..]);
    }
    words
}

fn is_create_procedure(text: &str) -> bool {
    let words = first_words(text, 4);
    match words.get(1).map(String::as_str) {
        Some("procedure") => true,
        Some("or") => words.get(3).map(String::as_str) == Some("procedure"),
        _ => false,
    }
}

fn is_create_sequence(text: &str) -> bool {
    let words = first_words(text, 3);
    match words.get(1).map(String::as_str) {
        Some("sequence") => true,
        Some("temp" | "temporary") => words.get(2).map(String::as_str) == Some("sequence"),
        _ => false,
    }
}

/// Parses one statement, whose `first_words` (two) are `words`.
fn parse_one(text: &str, words: &[String]) -> SqlResult<Parsed> {
    let second = words.get(1).map(String::as_str);
    if let (Some("alter"), Some("view" | "sequence" | "procedure" | "function" | "group")) =
        (words.first().map(String::as_str), second)
    {
        if let Some(role) = parse_role_statement(text) {
            return role
                .map(Parsed::Role)
                .map_err(|e| syntax_error(text, &e.to_string()));
        }
    }
    if let (Some("create" | "drop"), Some("group")) = (words.first().map(String::as_str), second) {
        if let Some(role) = group_as_role(text) {
            return sqlparser_statement(&role).map(|s| Parsed::Statement(Box::new(s)));
        }
    }
    match words.first().map(String::as_str) {
        Some("vacuum") => return Ok(Parsed::Maintenance("VACUUM")),
        Some("analyze") | Some("analyse") => return Ok(Parsed::Maintenance("ANALYZE")),
        Some("checkpoint") => return Ok(Parsed::Maintenance("CHECKPOINT")),
        Some("create") if is_create_procedure(text) => {
            return parse_create_procedure(text).map(Parsed::CreateProcedure)
        }
        Some("create") if is_create_sequence(text) => {
            return parse_create_sequence(text)
                .map(|s| Parsed::Statement(Box::new(s)))
                .map_err(|e| syntax_error(text, &e.to_string()))
        }
        Some("alter") if words.get(1).map(String::as_str) == Some("sequence") => {
            return parse_alter_sequence(text)
                .map(|a| Parsed::AlterSequence(Box::new(a)))
                .map_err(|e| syntax_error(text, &e.to_string()))
        }
        Some("drop") if words.get(1).map(String::as_str) == Some("procedure") => {
            let (names, if_exists) = parse_drop_procedure(text)?;
            return Ok(Parsed::DropProcedure { names, if_exists });
        }
        Some("create") if words.get(1).map(String::as_str) == Some("user") => {
            if let Some(role) = create_user_as_role(text) {
                let role = quote_negative_connection_limit(&role).unwrap_or(role);
                return sqlparser_statement(&role).map(|s| Parsed::CreateUser(Box::new(s)));
            }
        }
        Some("create" | "alter")
            if matches!(words.get(1).map(String::as_str), Some("role" | "user")) =>
        {
            if let Some(quoted) = quote_negative_connection_limit(text) {
                return sqlparser_statement(&quoted).map(|s| Parsed::Statement(Box::new(s)));
            }
        }
        Some("grant" | "revoke" | "reassign") => {
            if let Some(role) = parse_role_statement(text) {
                return role
                    .map(Parsed::Role)
                    .map_err(|e| syntax_error(text, &e.to_string()));
            }
            if let Some(functions) = all_routines_as_functions(text) {
                return sqlparser_statement(&functions).map(|s| Parsed::OnAllRoutines(Box::new(s)));
            }
        }
        Some("drop") if words.get(1).map(String::as_str) == Some("owned") => {
            if let Some(role) = parse_role_statement(text) {
                return role
                    .map(Parsed::Role)
                    .map_err(|e| syntax_error(text, &e.to_string()));
            }
        }
        _ => {}
    }
    if words.first().map(String::as_str) == Some("insert") {
        if let Some((clause, overriding)) = find_overriding(text) {
            let without = format!("{} {}", &text[..clause.start], &text[clause.end..]);
            return sqlparser_statement(&without).map(|statement| Parsed::InsertOverriding {
                statement: Box::new(statement),
                overriding,
            });
        }
    }
    let rewritten;
    let text = match words.first().map(String::as_str) {
        Some("copy") => {
            rewritten = rewrite_copy_options(text);
            rewritten.as_str()
        }
        Some("create" | "alter") => match reorder_identity_options(text) {
            Some((r, names)) => {
                if !names.is_empty() {
                    return sqlparser_statement(&r).map(|statement| Parsed::WithSequenceNames {
                        statement: Box::new(statement),
                        names,
                    });
                }
                rewritten = r;
                rewritten.as_str()
            }
            None => text,
        },
        _ => text,
    };
    sqlparser_statement(text)
        .map(|statement| Parsed::Statement(Box::new(statement)))
        .map_err(|e| match unsupported_role_statement(text, words) {
            Some(what) => SqlError::feature_not_supported(what),
            None => e,
        })
}

/// Where an INSERT's `OVERRIDING SYSTEM VALUE` or `OVERRIDING USER VALUE` clause is (outside
/// quotes and comments, before the rows), and which it is.
fn find_overriding(text: &str) -> Option<(std::ops::Range<usize>, Overriding)> {
    let bytes = text.as_bytes();
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\'' | b'"' => i = after_quoted(bytes, i, false)?,
            b'-' if bytes.get(i + 1) == Some(&b'-') => i = line_comment_end(bytes, i),
            b if is_word(b) && (i == 0 || !is_word(bytes[i - 1])) => {
                let end = i + bytes[i..].iter().take_while(|b| is_word(**b)).count();
                let word = &text[i..end];
                // The clause comes before the rows: a bulk INSERT's are not scanned.
                if ["values", "select", "with", "default"]
                    .iter()
                    .any(|w| word.eq_ignore_ascii_case(w))
                {
                    return None;
                }
                if word.eq_ignore_ascii_case("overriding") {
                    let words = first_words(&text[end..], 2);
                    let overriding = match (words.first().map(String::as_str), words.get(1)) {
                        (Some("system"), Some(v)) if v == "value" => Overriding::System,
                        (Some("user"), Some(v)) if v == "value" => Overriding::User,
                        _ => return None,
                    };
                    let value = end + text[end..].to_ascii_lowercase().find("value")? + 5;
                    return Some((i..value, overriding));
                }
                i = end;
            }
            _ => i += 1,
        }
    }
    None
}

/// sqlparser's limit on how deeply it recurses (its default, 50, refused 49 nested
/// parentheses). Set above what `check_depth` lets through, whose bound never undercounts:
/// a statement too deep is refused there, before parsing, with 54001; anything it lets
/// through parses, on threads whose stacks are sized for it (`STATEMENT_STACK_BYTES`).
const PARSER_RECURSION_LIMIT: usize = 2 * MAX_EXPRESSION_DEPTH;

/// `text` as one statement, parsed by sqlparser with the PostgreSQL dialect.
pub(crate) fn sqlparser_statement(text: &str) -> SqlResult<Statement> {
    let syntax = |e: sqlparser::parser::ParserError| syntax_error(text, &e.to_string());
    let mut statements = Parser::new(&PostgreSqlDialect {})
        .with_recursion_limit(PARSER_RECURSION_LIMIT)
        .try_with_sql(text)
        .and_then(|mut p| p.parse_statements())
        .map_err(syntax)?;
    match statements.len() {
        1 => Ok(statements.remove(0)),
        _ => Err(SqlError::syntax("syntax error: expected one statement")),
    }
}

/// `COPY ... WITH (freeze on, header off)`: sqlparser accepts only true/false there.
fn rewrite_copy_options(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let Some(open) = lower.rfind("with (").or_else(|| lower.rfind("with(")) else {
        return text.to_string();
    };
    let mut out = text[..open].to_string();
    let options = &text[open..];
    let mut word = String::new();
    for c in options.chars().chain(std::iter::once(' ')) {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        match word.to_ascii_lowercase().as_str() {
            "on" => out.push_str("true"),
            "off" => out.push_str("false"),
            _ => out.push_str(&word),
        }
        word.clear();
        out.push(c);
    }
    out.pop();
    out
}

/// Turns sqlparser's "... at Line: L, Column: C" into a message and a character position.
fn syntax_error(text: &str, message: &str) -> SqlError {
    let message = message.trim_start_matches("sql parser error: ");
    let (clean, position) = match message.rfind(" at Line: ") {
        Some(at) => {
            let location = &message[at + " at Line: ".len()..];
            let mut parts = location.split(", Column: ");
            let line: usize = parts
                .next()
                .and_then(|l| l.trim().parse().ok())
                .unwrap_or(1);
            let column: usize = parts
                .next()
                .and_then(|c| c.trim().parse().ok())
                .unwrap_or(1);
            let before: usize = text
                .split_inclusive('\n')
                .take(line.saturating_sub(1))
                .map(|l| l.chars().count())
                .sum();
            (&message[..at], Some((before + column) as u32))
        }
        None => (message, None),
    };
    let error = SqlError::syntax(format!("syntax error: {clean}"));
    match position {
        Some(p) => error.with_position(p),
        None => error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_respecting_quotes_and_comments() {
        let parts: Vec<&str> =
            split_statements("select 'a;b'; -- x;y\nselect $$;$$;; select \"q;\"")
                .into_iter()
                .map(|(_, s)| s.trim())
                .collect();
        assert_eq!(
            parts,
            vec!["select 'a;b'", "-- x;y\nselect $$;$$", "select \"q;\""]
        );
        assert!(split_statements("  ;  ; -- only a comment").is_empty());
    }

    #[test]
    fn first_words_skip_comments_and_stop_early() {
        assert_eq!(
            first_words(
                "  /* a /* nested */ one */ CREATE -- x\n OR/**/Replace(procedure",
                4
            ),
            vec!["create", "or", "replace", "procedure"]
        );
        assert_eq!(
            first_words("insert into t values (1)", 2),
            vec!["insert", "into"]
        );
        assert_eq!(first_words(";(vacuum", 3), vec!["vacuum"]);
        assert!(first_words("-- only a comment", 2).is_empty());
        assert!(first_words("/* unclosed", 2).is_empty());
        assert!(skip_blank(" \t-- c\n/* d */\n").is_empty());
        assert_eq!(skip_blank("/**/ -x"), "-x");
    }

    #[test]
    fn takes_the_overriding_clause_out_of_an_insert() {
        let parsed = parse(
            "insert into t (id, v) OVERRIDING SYSTEM VALUE values (1, 'overriding user value')",
        )
        .unwrap();
        let Parsed::InsertOverriding {
            statement,
            overriding,
        } = &parsed[0].parsed
        else {
            panic!("{:?}", parsed[0].parsed);
        };
        assert_eq!(*overriding, Overriding::System);
        assert!(statement.to_string().contains("'overriding user value'"));
        assert!(matches!(
            parse("insert into t values ('overriding system value')").unwrap()[0].parsed,
            Parsed::InsertValues { .. } | Parsed::Statement(_)
        ));
    }

    #[test]
    fn intercepts_pgbench_statements() {
        let parsed = parse(
            "vacuum analyze pgbench_branches; copy pgbench_accounts from stdin with (freeze on)",
        )
        .unwrap();
        assert!(matches!(parsed[0].parsed, Parsed::Maintenance("VACUUM")));
        assert!(matches!(parsed[1].parsed, Parsed::Statement(_)));
    }

    #[test]
    fn syntax_errors_carry_a_position() {
        let e = parse("select 1; selec 2").unwrap_err();
        assert_eq!(e.sqlstate(), "42601");
        assert!(e.position.unwrap() >= 11, "{e:?}");
    }
}
