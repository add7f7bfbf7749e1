//! `CREATE [OR REPLACE] PROCEDURE name(params) LANGUAGE sql AS $$ body $$` and
//! `DROP PROCEDURE [IF EXISTS] name[(types)], ...`, which sqlparser-rs parses only in other
//! dialects' forms. Parsed here with sqlparser's own token-level parser; the body stays text
//! (its statements are bound when the procedure is created and again when it is called).

use sqlparser::ast::DataType as AstType;
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Token;

use crate::error::{SqlError, SqlResult};
use crate::parse::ident;

/// A procedure definition as written.
#[derive(Clone, Debug)]
pub struct ProcedureText {
    pub name: String,
    pub or_replace: bool,
    pub params: Vec<(String, AstType)>,
    pub body: String,
}

fn error(e: impl std::fmt::Display) -> SqlError {
    SqlError::syntax(
        e.to_string()
            .trim_start_matches("sql parser error: ")
            .to_string(),
    )
}

fn procedure_name(parser: &mut Parser<'_>) -> SqlResult<String> {
    let name = parser.parse_object_name(false).map_err(error)?;
    let parts: Vec<String> = name
        .0
        .iter()
        .filter_map(|p| p.as_ident().map(ident))
        .collect();
    match parts.as_slice() {
        [n] => Ok(n.clone()),
        [schema, n] if schema == "public" => Ok(n.clone()),
        _ => Err(SqlError::feature_not_supported(format!(
            "procedure name {name}"
        ))),
    }
}

/// Parses `CREATE [OR REPLACE] PROCEDURE ...`.
pub fn parse_create_procedure(text: &str) -> SqlResult<ProcedureText> {
    let dialect = PostgreSqlDialect {};
    let mut parser = Parser::new(&dialect).try_with_sql(text).map_err(error)?;
    parser.expect_keyword(Keyword::CREATE).map_err(error)?;
    let or_replace = parser.parse_keywords(&[Keyword::OR, Keyword::REPLACE]);
    parser.expect_keyword(Keyword::PROCEDURE).map_err(error)?;
    let name = procedure_name(&mut parser)?;
    parser.expect_token(&Token::LParen).map_err(error)?;
    let mut params = Vec::new();
    if !parser.consume_token(&Token::RParen) {
        loop {
            if parser.parse_keyword(Keyword::OUT) || parser.parse_keyword(Keyword::INOUT) {
                return Err(SqlError::feature_not_supported(
                    "OUT and INOUT procedure parameters",
                ));
            }
            let _in = parser.parse_keyword(Keyword::IN);
            let param = parser.parse_identifier().map_err(error)?;
            let ty = parser.parse_data_type().map_err(error)?;
            if parser.parse_keyword(Keyword::DEFAULT) || parser.consume_token(&Token::Eq) {
                return Err(SqlError::feature_not_supported(
                    "parameter defaults in procedures",
                ));
            }
            let param = ident(&param);
            if params.iter().any(|(p, _)| *p == param) {
                return Err(SqlError::syntax(format!(
                    "parameter name \"{param}\" used more than once"
                )));
            }
            params.push((param, ty));
            if parser.consume_token(&Token::RParen) {
                break;
            }
            parser.expect_token(&Token::Comma).map_err(error)?;
        }
    }
    let mut language = None;
    let mut body = None;
    loop {
        if parser.parse_keyword(Keyword::LANGUAGE) {
            language = Some(ident(&parser.parse_identifier().map_err(error)?));
        } else if parser.parse_keyword(Keyword::AS) {
            body = Some(match parser.next_token().token {
                Token::DollarQuotedString(s) => s.value,
                Token::SingleQuotedString(s) => s,
                other => {
                    return Err(SqlError::syntax(format!(
                        "expected the procedure body as a $$-quoted string, found {other}"
                    )))
                }
            });
        } else if parser.consume_token(&Token::SemiColon) || parser.peek_token().token == Token::EOF
        {
            break;
        } else {
            return Err(SqlError::syntax(format!(
                "syntax error at or near \"{}\" in CREATE PROCEDURE",
                parser.peek_token().token
            )));
        }
    }
    match language.as_deref() {
        Some("sql") => {}
        Some(other) => {
            return Err(SqlError::feature_not_supported(format!(
                "procedures in LANGUAGE {other} (only LANGUAGE sql)"
            )))
        }
        None => {
            return Err(SqlError::syntax(
                "no language specified: write LANGUAGE sql",
            ))
        }
    }
    let body = body.ok_or_else(|| SqlError::syntax("CREATE PROCEDURE needs AS $$ body $$"))?;
    Ok(ProcedureText {
        name,
        or_replace,
        params,
        body,
    })
}

/// Parses `DROP PROCEDURE [IF EXISTS] name[(types)], ...`: the names.
pub fn parse_drop_procedure(text: &str) -> SqlResult<(Vec<String>, bool)> {
    let dialect = PostgreSqlDialect {};
    let mut parser = Parser::new(&dialect).try_with_sql(text).map_err(error)?;
    parser.expect_keyword(Keyword::DROP).map_err(error)?;
    parser.expect_keyword(Keyword::PROCEDURE).map_err(error)?;
    let if_exists = parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
    let mut names = Vec::new();
    loop {
        names.push(procedure_name(&mut parser)?);
        if parser.consume_token(&Token::LParen) {
            // The argument types only select among overloads, which do not exist here.
            let mut depth = 1;
            while depth > 0 {
                match parser.next_token().token {
                    Token::LParen => depth += 1,
                    Token::RParen => depth -= 1,
                    Token::EOF => return Err(SqlError::syntax("unterminated argument list")),
                    _ => {}
                }
            }
        }
        if !parser.consume_token(&Token::Comma) {
            break;
        }
    }
    // Nothing depends on a procedure: CASCADE and RESTRICT change nothing.
    let _cascade =
        parser.parse_keyword(Keyword::CASCADE) || parser.parse_keyword(Keyword::RESTRICT);
    let _end = parser.consume_token(&Token::SemiColon);
    if parser.peek_token().token != Token::EOF {
        return Err(SqlError::syntax(format!(
            "syntax error at or near \"{}\" in DROP PROCEDURE",
            parser.peek_token().token
        )));
    }
    Ok((names, if_exists))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_procedure_parses_params_language_and_body() {
        let p = parse_create_procedure(
            "CREATE OR REPLACE PROCEDURE pay(a bigint, IN b numeric(10,2)) LANGUAGE sql AS $$ update t set x = x + b where id = a; select 1 $$",
        )
        .unwrap();
        assert_eq!(p.name, "pay");
        assert!(p.or_replace);
        assert_eq!(p.params.len(), 2);
        assert_eq!(p.params[1].0, "b");
        assert!(p.body.contains("update t"));
        let q = parse_create_procedure("create procedure p() as 'select 1' language sql").unwrap();
        assert!(q.params.is_empty() && !q.or_replace);
        assert!(
            parse_create_procedure("create procedure p() language plpgsql as $$ $$")
                .unwrap_err()
                .message
                .contains("plpgsql")
        );
        assert!(parse_create_procedure("create procedure p(a int) as $$ $$").is_err());
    }

    #[test]
    fn drop_procedure_takes_names_with_or_without_types() {
        let (names, if_exists) =
            parse_drop_procedure("DROP PROCEDURE IF EXISTS pay(bigint, numeric), other").unwrap();
        assert_eq!(names, vec!["pay".to_string(), "other".to_string()]);
        assert!(if_exists);
        assert!(parse_drop_procedure("drop procedure p extra").is_err());
    }
}
