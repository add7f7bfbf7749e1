//! `CREATE SEQUENCE` with its options in any order, as PostgreSQL takes them (pg_dump
//! writes `START WITH ... INCREMENT BY ... NO MINVALUE ...`); sqlparser-rs accepts only one
//! order. The result is sqlparser's own statement, so binding is the same either way.

use sqlparser::ast::{ObjectName, SequenceOptions, Statement};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::Token;

/// Parses `CREATE [TEMP|TEMPORARY] SEQUENCE [IF NOT EXISTS] name [options]`.
pub(crate) fn parse_create_sequence(text: &str) -> Result<Statement, ParserError> {
    let dialect = PostgreSqlDialect {};
    let mut p = Parser::new(&dialect).try_with_sql(text)?;
    p.expect_keyword(Keyword::CREATE)?;
    let temporary = p.parse_keyword(Keyword::TEMP) || p.parse_keyword(Keyword::TEMPORARY);
    p.expect_keyword(Keyword::SEQUENCE)?;
    let if_not_exists = p.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = p.parse_object_name(false)?;
    let mut data_type = None;
    let mut options = Vec::new();
    let mut owned_by = None;
    loop {
        if p.parse_keyword(Keyword::AS) {
            data_type = Some(p.parse_data_type()?);
        } else if p.parse_keyword(Keyword::INCREMENT) {
            let by = p.parse_keyword(Keyword::BY);
            options.push(SequenceOptions::IncrementBy(p.parse_number()?, by));
        } else if p.parse_keyword(Keyword::MINVALUE) {
            options.push(SequenceOptions::MinValue(Some(p.parse_number()?)));
        } else if p.parse_keyword(Keyword::MAXVALUE) {
            options.push(SequenceOptions::MaxValue(Some(p.parse_number()?)));
        } else if p.parse_keywords(&[Keyword::NO, Keyword::MINVALUE]) {
            options.push(SequenceOptions::MinValue(None));
        } else if p.parse_keywords(&[Keyword::NO, Keyword::MAXVALUE]) {
            options.push(SequenceOptions::MaxValue(None));
        } else if p.parse_keywords(&[Keyword::NO, Keyword::CYCLE]) {
            // sqlparser's flag is true for NO CYCLE.
            options.push(SequenceOptions::Cycle(true));
        } else if p.parse_keyword(Keyword::CYCLE) {
            options.push(SequenceOptions::Cycle(false));
        } else if p.parse_keyword(Keyword::START) {
            let with = p.parse_keyword(Keyword::WITH);
            options.push(SequenceOptions::StartWith(p.parse_number()?, with));
        } else if p.parse_keyword(Keyword::CACHE) {
            options.push(SequenceOptions::Cache(p.parse_number()?));
        } else if p.parse_keywords(&[Keyword::OWNED, Keyword::BY]) {
            owned_by = Some(if p.parse_keyword(Keyword::NONE) {
                ObjectName::from(vec![sqlparser::ast::Ident::new("NONE")])
            } else {
                p.parse_object_name(false)?
            });
        } else {
            break;
        }
    }
    let _ = p.consume_token(&Token::SemiColon);
    let next = p.peek_token();
    if next.token != Token::EOF {
        return p.expected("a sequence option or the end of the statement", next);
    }
    Ok(Statement::CreateSequence {
        temporary,
        if_not_exists,
        name,
        data_type,
        sequence_options: options,
        owned_by,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_options_in_any_order() {
        let s = parse_create_sequence(
            "CREATE SEQUENCE public.t_id_seq AS integer START WITH 5 INCREMENT BY 2 NO MINVALUE NO MAXVALUE CACHE 1 CYCLE OWNED BY t.id;",
        )
        .unwrap();
        let Statement::CreateSequence {
            sequence_options,
            owned_by,
            data_type,
            ..
        } = s
        else {
            panic!("not a CREATE SEQUENCE");
        };
        assert_eq!(sequence_options.len(), 6);
        assert!(data_type.is_some());
        assert_eq!(owned_by.unwrap().to_string(), "t.id");
    }

    #[test]
    fn refuses_what_is_not_an_option() {
        assert!(parse_create_sequence("create sequence s increment by 1 banana").is_err());
        assert!(parse_create_sequence("create sequence s start").is_err());
    }
}
