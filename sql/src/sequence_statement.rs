//! `CREATE SEQUENCE` with its options in any order, as PostgreSQL takes them (pg_dump
//! writes `START WITH ... INCREMENT BY ... NO MINVALUE ...`); sqlparser-rs accepts only one
//! order. The result is sqlparser's own statement, so binding is the same either way.
//! `ALTER SEQUENCE`, which sqlparser-rs does not parse, becomes an `AlterSequence`.

use sqlparser::ast::{DataType, Expr, ObjectName, SequenceOptions, Statement};
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
    let mut owned_by = None;
    let options = sequence_options(&mut p, &mut data_type, &mut owned_by)?;
    end_of_statement(&mut p)?;
    Ok(Statement::CreateSequence {
        temporary,
        if_not_exists,
        name,
        data_type,
        sequence_options: options,
        owned_by,
    })
}

/// `ALTER SEQUENCE [IF EXISTS] name [AS type] [options] [RESTART [[WITH] n]]
/// [OWNED BY table.column | NONE]`, or `... RENAME TO new`.
#[derive(Clone, Debug)]
pub struct AlterSequence {
    pub if_exists: bool,
    pub name: ObjectName,
    pub data_type: Option<DataType>,
    pub options: Vec<SequenceOptions>,
    /// `RESTART` (Some(None): from the start value) or `RESTART WITH n`.
    pub restart: Option<Option<Expr>>,
    pub owned_by: Option<ObjectName>,
    pub rename_to: Option<ObjectName>,
}

pub(crate) fn parse_alter_sequence(text: &str) -> Result<AlterSequence, ParserError> {
    let dialect = PostgreSqlDialect {};
    let mut p = Parser::new(&dialect).try_with_sql(text)?;
    p.expect_keyword(Keyword::ALTER)?;
    p.expect_keyword(Keyword::SEQUENCE)?;
    let if_exists = p.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
    let name = p.parse_object_name(false)?;
    let mut alter = AlterSequence {
        if_exists,
        name,
        data_type: None,
        options: Vec::new(),
        restart: None,
        owned_by: None,
        rename_to: None,
    };
    if p.parse_keywords(&[Keyword::RENAME, Keyword::TO]) {
        alter.rename_to = Some(p.parse_object_name(false)?);
    } else {
        loop {
            let options = sequence_options(&mut p, &mut alter.data_type, &mut alter.owned_by)?;
            let more = !options.is_empty();
            alter.options.extend(options);
            if p.parse_keyword(Keyword::RESTART) {
                let with = p.parse_keyword(Keyword::WITH);
                let value = match p.peek_token().token {
                    Token::Number(..) | Token::Minus => Some(p.parse_number()?),
                    _ if with => return p.expected("a number", p.peek_token()),
                    _ => None,
                };
                alter.restart = Some(value);
            } else if !more {
                break;
            }
        }
    }
    end_of_statement(&mut p)?;
    Ok(alter)
}

fn end_of_statement(p: &mut Parser) -> Result<(), ParserError> {
    let _ = p.consume_token(&Token::SemiColon);
    let next = p.peek_token();
    if next.token != Token::EOF {
        return p.expected("a sequence option or the end of the statement", next);
    }
    Ok(())
}

/// CREATE SEQUENCE's options, in any order, up to the first word that is not one; `AS`
/// and `OWNED BY` go to `data_type` and `owned_by`.
fn sequence_options(
    p: &mut Parser,
    data_type: &mut Option<DataType>,
    owned_by: &mut Option<ObjectName>,
) -> Result<Vec<SequenceOptions>, ParserError> {
    let mut options = Vec::new();
    loop {
        if p.parse_keyword(Keyword::AS) {
            *data_type = Some(p.parse_data_type()?);
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
            *owned_by = Some(if p.parse_keyword(Keyword::NONE) {
                ObjectName::from(vec![sqlparser::ast::Ident::new("NONE")])
            } else {
                p.parse_object_name(false)?
            });
        } else {
            return Ok(options);
        }
    }
}

/// Rewrites every `AS IDENTITY ( options )` of a CREATE or ALTER TABLE so its options come
/// in the one order sqlparser-rs accepts, taking out `SEQUENCE NAME name` (which it does not
/// parse): the rewritten text and those names, in order. None when there is nothing to
/// rewrite or the options do not parse (sqlparser then reports the error).
pub(crate) fn reorder_identity_options(text: &str) -> Option<(String, Vec<String>)> {
    let lower = text.to_ascii_lowercase();
    let mut out = String::new();
    let mut names = Vec::new();
    let mut done = 0;
    let mut search = 0;
    while let Some(found) = lower[search..].find("identity") {
        let at = search + found + "identity".len();
        search = at;
        let rest = &lower[at..];
        let open = at + rest.len() - rest.trim_start().len();
        if !lower[open..].starts_with('(') {
            continue;
        }
        let close = open + lower[open..].find(')')?;
        let dialect = PostgreSqlDialect {};
        let mut p = Parser::new(&dialect)
            .try_with_sql(&text[open + 1..close])
            .ok()?;
        let (mut data_type, mut owned_by) = (None, None);
        let mut options = Vec::new();
        loop {
            options.extend(sequence_options(&mut p, &mut data_type, &mut owned_by).ok()?);
            if p.parse_keywords(&[Keyword::SEQUENCE, Keyword::NAME]) {
                names.push(p.parse_object_name(false).ok()?.to_string());
            } else {
                break;
            }
        }
        if p.peek_token().token != Token::EOF || data_type.is_some() || owned_by.is_some() {
            return None;
        }
        options.sort_by_key(|o| match o {
            SequenceOptions::IncrementBy(..) => 0,
            SequenceOptions::MinValue(_) => 1,
            SequenceOptions::MaxValue(_) => 2,
            SequenceOptions::StartWith(..) => 3,
            SequenceOptions::Cache(_) => 4,
            SequenceOptions::Cycle(_) => 5,
        });
        out.push_str(&text[done..open + 1]);
        for o in &options {
            out.push_str(&o.to_string());
        }
        done = close;
        search = close;
    }
    (done > 0).then(|| {
        out.push_str(&text[done..]);
        (out, names)
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
    fn identity_options_are_put_in_sqlparsers_order() {
        let text = "create table t (id int generated always as identity (start with 100 increment by 10 cycle), v text)";
        let (rewritten, names) = reorder_identity_options(text).unwrap();
        assert_eq!(
            rewritten,
            "create table t (id int generated always as identity ( INCREMENT BY 10 START WITH 100 CYCLE), v text)"
        );
        assert!(names.is_empty());
        let (rewritten, names) = reorder_identity_options(
            "ALTER TABLE public.t ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (\n    SEQUENCE NAME public.t_id_seq\n    START WITH 1\n    INCREMENT BY 1\n    NO MINVALUE\n    CACHE 1\n)",
        )
        .unwrap();
        assert_eq!(names, vec!["public.t_id_seq".to_string()]);
        assert!(
            !rewritten.to_ascii_lowercase().contains("sequence name"),
            "{rewritten}"
        );
        assert!(reorder_identity_options("create table t (id int)").is_none());
    }

    #[test]
    fn alter_takes_options_restart_and_owner() {
        let a = parse_alter_sequence(
            "ALTER SEQUENCE IF EXISTS s RESTART WITH 5 INCREMENT BY 2 NO CYCLE OWNED BY t.id",
        )
        .unwrap();
        assert!(a.if_exists);
        assert_eq!(a.options.len(), 2);
        assert_eq!(a.restart.unwrap().unwrap().to_string(), "5");
        assert_eq!(a.owned_by.unwrap().to_string(), "t.id");
        assert!(
            parse_alter_sequence("alter sequence s restart")
                .unwrap()
                .restart
                == Some(None)
        );
        assert!(parse_alter_sequence("alter sequence s rename to r")
            .unwrap()
            .rename_to
            .is_some());
        assert!(parse_alter_sequence("alter sequence s owner to x").is_err());
    }

    #[test]
    fn refuses_what_is_not_an_option() {
        assert!(parse_create_sequence("create sequence s increment by 1 banana").is_err());
        assert!(parse_create_sequence("create sequence s start").is_err());
    }
}
