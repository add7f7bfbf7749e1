//! The role statements sqlparser-rs does not parse as PostgreSQL writes them: `CREATE USER`
//! (a `CREATE ROLE` that logs in by default), `GRANT role TO role` and `REVOKE role FROM
//! role` (sqlparser reads only privilege grants), `REASSIGN OWNED BY`, `DROP OWNED BY`, and
//! privileges `ON ALL PROCEDURES | ROUTINES IN SCHEMA`.

use sqlparser::ast::{Ident, ObjectName};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::Token;

/// A role statement of PostgreSQL's own grammar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RoleStatement {
    /// `GRANT role [, ...] TO member [, ...] [WITH ADMIN OPTION] [GRANTED BY role]`.
    GrantRoles {
        roles: Vec<Ident>,
        members: Vec<Ident>,
        admin: bool,
        granted_by: Option<Ident>,
    },
    /// `REVOKE [ADMIN OPTION FOR] role [, ...] FROM member [, ...] [GRANTED BY role]
    /// [CASCADE | RESTRICT]`.
    RevokeRoles {
        roles: Vec<Ident>,
        members: Vec<Ident>,
        admin_option_only: bool,
        granted_by: Option<Ident>,
        cascade: bool,
    },
    /// `REASSIGN OWNED BY role [, ...] TO role`.
    ReassignOwned { from: Vec<Ident>, to: Ident },
    /// `DROP OWNED BY role [, ...] [CASCADE | RESTRICT]`.
    DropOwned { roles: Vec<Ident>, cascade: bool },
    /// `ALTER {VIEW | SEQUENCE | PROCEDURE | FUNCTION} name [(types)] OWNER TO role`
    /// (what pg_dump writes after each object; ALTER TABLE's is sqlparser's).
    OwnerTo {
        kind: OwnedKind,
        name: ObjectName,
        owner: Ident,
    },
}

/// What an `ALTER ... OWNER TO` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnedKind {
    View,
    Sequence,
    Procedure,
    Function,
}

/// `CREATE USER ...` as the `CREATE ROLE` it is (its LOGIN default is the caller's).
pub(crate) fn create_user_as_role(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let create = lower.find("create")?;
    let user = create + lower[create..].find("user")?;
    let between = &lower[create + "create".len()..user];
    between
        .trim()
        .is_empty()
        .then(|| format!("{}role{}", &text[..user], &text[user + "user".len()..]))
}

/// `... ON ALL PROCEDURES|ROUTINES IN SCHEMA ...` written as `ALL FUNCTIONS`, which
/// sqlparser reads (hotledger's routines are all procedures, so the two mean the same).
pub(crate) fn all_routines_as_functions(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    for word in ["all procedures in schema", "all routines in schema"] {
        if let Some(at) = lower.find(word) {
            let kind = &word["all ".len()..word.len() - " in schema".len()];
            let start = at + "all ".len();
            return Some(format!(
                "{}functions{}",
                &text[..start],
                &text[start + kind.len()..]
            ));
        }
    }
    None
}

/// `CONNECTION LIMIT -1` (PostgreSQL's "no limit", which pg_dumpall writes) with its
/// number written as `2^32 - n`, which sqlparser reads (it takes no sign there) and the
/// binder reads back (`NEGATIVE_LIMIT_BASE`: a limit is an int4, so no real one is that
/// large); None when the statement has no negative limit.
pub(crate) fn quote_negative_connection_limit(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let at = lower.find("connection limit")? + "connection limit".len();
    let rest = &text[at..];
    let sign = at + (rest.len() - rest.trim_start().len());
    let digits = text[sign..].strip_prefix('-')?;
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    if end == 0 {
        return None;
    }
    let number_end = sign + 1 + end;
    let n: u64 = digits[..end].parse().ok()?;
    Some(format!(
        "{}{}{}",
        &text[..sign],
        NEGATIVE_LIMIT_BASE.checked_sub(n)?,
        &text[number_end..]
    ))
}

/// What `quote_negative_connection_limit` counts a negative limit down from.
pub const NEGATIVE_LIMIT_BASE: u64 = 1 << 32;

/// `CREATE GROUP` and `DROP GROUP`, PostgreSQL's old spellings of `CREATE ROLE` and `DROP
/// ROLE`, written as those.
pub(crate) fn group_as_role(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let verb = ["create", "drop"]
        .into_iter()
        .find(|v| lower.trim_start().starts_with(v))?;
    let start = lower.find(verb)? + verb.len();
    let group = start + lower[start..].find("group")?;
    lower[start..group]
        .trim()
        .is_empty()
        .then(|| format!("{}role{}", &text[..group], &text[group + "group".len()..]))
}

/// What PostgreSQL has and hotledger does not yet, named (0A000) where sqlparser would only
/// call it a syntax error: `words` are the statement's first, lower-cased.
pub(crate) fn unsupported_role_statement(text: &str, words: &[String]) -> Option<&'static str> {
    let first: Vec<&str> = words.iter().map(String::as_str).collect();
    if first.starts_with(&["alter", "default"]) {
        return Some("ALTER DEFAULT PRIVILEGES");
    }
    if matches!(first.first(), Some(&"grant") | Some(&"revoke")) {
        let lower = text.to_ascii_lowercase();
        for object in [
            " on type ",
            " on domain ",
            " on language ",
            " on foreign ",
            " on large object",
            " on tablespace ",
            " on parameter ",
            " on routine ",
        ] {
            if lower.contains(object) {
                return Some("privileges on types, domains, languages, foreign data, large objects, tablespaces and parameters, or GRANT ON ROUTINE (grant on the procedure)");
            }
        }
    }
    None
}

/// Parses one of PostgreSQL's role statements, or says it is none (None) so that the
/// caller reports its own parser's error.
pub(crate) fn parse_role_statement(text: &str) -> Option<Result<RoleStatement, ParserError>> {
    let dialect = PostgreSqlDialect {};
    let mut p = Parser::new(&dialect).try_with_sql(text).ok()?;
    let statement = match p.next_token().token {
        Token::Word(w) if w.keyword == Keyword::GRANT => {
            if mentions_on(text) {
                return None;
            }
            grant_roles(&mut p)
        }
        Token::Word(w) if w.keyword == Keyword::REVOKE => {
            if mentions_on(text) {
                return None;
            }
            revoke_roles(&mut p)
        }
        Token::Word(w) if w.value.eq_ignore_ascii_case("reassign") => reassign_owned(&mut p),
        Token::Word(w) if w.keyword == Keyword::ALTER => alter_owner_or_group(&mut p)?,
        Token::Word(w) if w.keyword == Keyword::DROP => {
            if !p.parse_keyword(Keyword::OWNED) {
                return None;
            }
            drop_owned(&mut p)
        }
        _ => return None,
    };
    Some(statement.and_then(|s| {
        let _ = p.consume_token(&Token::SemiColon);
        match p.peek_token().token {
            Token::EOF => Ok(s),
            _ => p.expected("end of statement", p.peek_token()),
        }
    }))
}

/// Whether the statement has an `ON` at the top level: a privilege grant, not a role's.
fn mentions_on(text: &str) -> bool {
    let dialect = PostgreSqlDialect {};
    sqlparser::tokenizer::Tokenizer::new(&dialect, text)
        .tokenize()
        .map(|tokens| {
            tokens
                .iter()
                .any(|t| matches!(t, Token::Word(w) if w.keyword == Keyword::ON))
        })
        .unwrap_or(false)
}

fn roles(p: &mut Parser) -> Result<Vec<Ident>, ParserError> {
    p.parse_comma_separated(|p| p.parse_identifier())
}

fn granted_by(p: &mut Parser) -> Result<Option<Ident>, ParserError> {
    if p.parse_keywords(&[Keyword::GRANTED, Keyword::BY]) {
        Ok(Some(p.parse_identifier()?))
    } else {
        Ok(None)
    }
}

fn cascade(p: &mut Parser) -> bool {
    matches!(
        p.parse_one_of_keywords(&[Keyword::CASCADE, Keyword::RESTRICT]),
        Some(Keyword::CASCADE)
    )
}

fn grant_roles(p: &mut Parser) -> Result<RoleStatement, ParserError> {
    let roles = roles(p)?;
    p.expect_keyword(Keyword::TO)?;
    let members = roles_after_group(p)?;
    let admin = if p.parse_keywords(&[Keyword::WITH, Keyword::ADMIN]) {
        if !p.parse_keyword(Keyword::OPTION) && !p.parse_keyword(Keyword::TRUE) {
            return p.expected("OPTION", p.peek_token());
        }
        true
    } else {
        false
    };
    Ok(RoleStatement::GrantRoles {
        roles,
        members,
        admin,
        granted_by: granted_by(p)?,
    })
}

/// The members of a role grant, each optionally written `GROUP name`.
fn roles_after_group(p: &mut Parser) -> Result<Vec<Ident>, ParserError> {
    p.parse_comma_separated(|p| {
        let _ = p.parse_keyword(Keyword::GROUP);
        p.parse_identifier()
    })
}

fn revoke_roles(p: &mut Parser) -> Result<RoleStatement, ParserError> {
    let admin_option_only = p.parse_keywords(&[Keyword::ADMIN, Keyword::OPTION, Keyword::FOR]);
    let roles = roles(p)?;
    p.expect_keyword(Keyword::FROM)?;
    let members = roles_after_group(p)?;
    let granted_by = granted_by(p)?;
    Ok(RoleStatement::RevokeRoles {
        roles,
        members,
        admin_option_only,
        granted_by,
        cascade: cascade(p),
    })
}

fn reassign_owned(p: &mut Parser) -> Result<RoleStatement, ParserError> {
    p.expect_keywords(&[Keyword::OWNED, Keyword::BY])?;
    let from = roles(p)?;
    p.expect_keyword(Keyword::TO)?;
    Ok(RoleStatement::ReassignOwned {
        from,
        to: p.parse_identifier()?,
    })
}

/// `ALTER {VIEW | SEQUENCE | PROCEDURE | FUNCTION} name OWNER TO role`, or `ALTER GROUP
/// group {ADD | DROP} USER role, ...`; None for any other ALTER.
fn alter_owner_or_group(p: &mut Parser) -> Option<Result<RoleStatement, ParserError>> {
    let kind = match p.parse_one_of_keywords(&[
        Keyword::VIEW,
        Keyword::SEQUENCE,
        Keyword::PROCEDURE,
        Keyword::FUNCTION,
        Keyword::GROUP,
    ])? {
        Keyword::GROUP => return Some(alter_group(p)),
        Keyword::VIEW => OwnedKind::View,
        Keyword::SEQUENCE => OwnedKind::Sequence,
        Keyword::PROCEDURE => OwnedKind::Procedure,
        _ => OwnedKind::Function,
    };
    let name = p.parse_object_name(false).ok()?;
    if p.consume_token(&Token::LParen) {
        // The argument types, which name the one procedure of that name there is.
        let mut depth = 1;
        while depth > 0 {
            match p.next_token().token {
                Token::LParen => depth += 1,
                Token::RParen => depth -= 1,
                Token::EOF => return None,
                _ => {}
            }
        }
    }
    if !p.parse_keywords(&[Keyword::OWNER, Keyword::TO]) {
        return None;
    }
    Some(
        p.parse_identifier()
            .map(|owner| RoleStatement::OwnerTo { kind, name, owner }),
    )
}

fn alter_group(p: &mut Parser) -> Result<RoleStatement, ParserError> {
    let group = p.parse_identifier()?;
    let add = match p.parse_one_of_keywords(&[Keyword::ADD, Keyword::DROP]) {
        Some(Keyword::ADD) => true,
        Some(_) => false,
        None => return p.expected("ADD USER or DROP USER", p.peek_token()),
    };
    p.expect_keyword(Keyword::USER)?;
    let members = roles(p)?;
    Ok(if add {
        RoleStatement::GrantRoles {
            roles: vec![group],
            members,
            admin: false,
            granted_by: None,
        }
    } else {
        RoleStatement::RevokeRoles {
            roles: vec![group],
            members,
            admin_option_only: false,
            granted_by: None,
            cascade: false,
        }
    })
}

fn drop_owned(p: &mut Parser) -> Result<RoleStatement, ParserError> {
    p.expect_keyword(Keyword::BY)?;
    let roles = roles(p)?;
    Ok(RoleStatement::DropOwned {
        roles,
        cascade: cascade(p),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(ids: &[Ident]) -> Vec<&str> {
        ids.iter().map(|i| i.value.as_str()).collect()
    }

    #[test]
    fn reads_role_grants_and_leaves_privilege_grants() {
        let Some(Ok(RoleStatement::GrantRoles {
            roles,
            members,
            admin,
            ..
        })) = parse_role_statement("GRANT readers, writers TO alice, GROUP bob WITH ADMIN OPTION")
        else {
            panic!("a role grant")
        };
        assert_eq!(names(&roles), ["readers", "writers"]);
        assert_eq!(names(&members), ["alice", "bob"]);
        assert!(admin);
        assert!(parse_role_statement("GRANT SELECT ON t TO alice").is_none());
        assert!(parse_role_statement("select 1").is_none());
        let revoke = parse_role_statement("revoke admin option for readers from alice cascade");
        assert!(matches!(
            revoke,
            Some(Ok(RoleStatement::RevokeRoles {
                admin_option_only: true,
                cascade: true,
                ..
            }))
        ));
        assert!(matches!(
            parse_role_statement("reassign owned by a, b to c"),
            Some(Ok(RoleStatement::ReassignOwned { .. }))
        ));
        assert!(matches!(
            parse_role_statement("drop owned by a restrict"),
            Some(Ok(RoleStatement::DropOwned { cascade: false, .. }))
        ));
        assert!(parse_role_statement("drop owned a").unwrap().is_err());
        assert!(parse_role_statement("grant a to b extra").unwrap().is_err());
    }

    #[test]
    fn reads_owners_and_groups() {
        assert!(matches!(
            parse_role_statement("ALTER SEQUENCE public.s OWNER TO alice"),
            Some(Ok(RoleStatement::OwnerTo {
                kind: OwnedKind::Sequence,
                ..
            }))
        ));
        assert!(matches!(
            parse_role_statement("alter procedure p(int, text) owner to alice"),
            Some(Ok(RoleStatement::OwnerTo {
                kind: OwnedKind::Procedure,
                ..
            }))
        ));
        assert!(parse_role_statement("alter sequence s restart").is_none());
        assert!(parse_role_statement("alter table t owner to alice").is_none());
        assert!(matches!(
            parse_role_statement("alter group staff add user alice, bob"),
            Some(Ok(RoleStatement::GrantRoles { .. }))
        ));
        assert!(matches!(
            parse_role_statement("alter group staff drop user alice"),
            Some(Ok(RoleStatement::RevokeRoles { .. }))
        ));
        assert_eq!(
            group_as_role("DROP GROUP IF EXISTS staff").as_deref(),
            Some("DROP role IF EXISTS staff")
        );
    }

    #[test]
    fn rewrites_what_sqlparser_reads_otherwise() {
        assert_eq!(
            quote_negative_connection_limit("ALTER ROLE a CONNECTION LIMIT -1 LOGIN").as_deref(),
            Some("ALTER ROLE a CONNECTION LIMIT 4294967295 LOGIN")
        );
        assert_eq!(
            quote_negative_connection_limit("create role a connection limit 3"),
            None
        );
        assert_eq!(
            create_user_as_role("CREATE USER bob WITH PASSWORD 'x'").as_deref(),
            Some("CREATE role bob WITH PASSWORD 'x'")
        );
        assert_eq!(
            all_routines_as_functions(
                "REVOKE EXECUTE ON ALL PROCEDURES IN SCHEMA public FROM PUBLIC"
            )
            .as_deref(),
            Some("REVOKE EXECUTE ON ALL functions IN SCHEMA public FROM PUBLIC")
        );
    }
}
