//! PostgreSQL's privilege inquiry functions — `has_table_privilege`, `has_sequence_privilege`,
//! `has_schema_privilege`, `has_database_privilege`, `has_function_privilege` and
//! `pg_has_role` — over the catalog's `Authorization`. The binder gives each call its kind
//! and, in the forms without a user, the role the statement runs as
//! (`Func::HasPrivilege`'s arguments: kind, role, object, privileges).

use sql::{ErrorKind, SqlError, SqlResult, Value};

use crate::catalog::{Catalog, FIRST_USER_OID};
use crate::privileges::{ObjectId, Privileges};
use crate::system::procedure_oid;

/// The privileges a privilege string names ("SELECT", "select, insert", "UPDATE WITH
/// GRANT OPTION"), and whether it asks for the grant option.
fn privileges_asked(text: &str) -> SqlResult<Vec<(Privileges, bool)>> {
    text.split(',')
        .map(|part| {
            let words: Vec<String> = part
                .split_whitespace()
                .map(|w| w.to_ascii_uppercase())
                .collect();
            let (name, grant) = match words.as_slice() {
                [name] => (name.as_str(), false),
                [name, w, g, o] if w == "WITH" && g == "GRANT" && o == "OPTION" => {
                    (name.as_str(), true)
                }
                _ => ("", false),
            };
            // pg_has_role's modes.
            let privilege = match name {
                "MEMBER" => Some(Privileges::NONE),
                "SET" => Some(Privileges::CREATE),
                _ => Privileges::named(name),
            };
            privilege.map(|p| (p, grant)).ok_or_else(|| {
                SqlError::new(
                    ErrorKind::InvalidParameterValue,
                    format!("unrecognized privilege type: \"{}\"", part.trim()),
                )
            })
        })
        .collect()
}

/// A role named by name or OID; None for an OID no role has (the function answers NULL).
fn role_of(catalog: &Catalog, role: &Value) -> SqlResult<Option<u32>> {
    let auth = &catalog.authorization;
    match role {
        Value::Int(oid) => Ok(auth.role_by_oid(*oid as u32).map(|r| r.oid)),
        Value::Text(name) if name.eq_ignore_ascii_case("public") => {
            Ok(Some(crate::roles::PUBLIC_ROLE_OID))
        }
        Value::Text(name) => auth
            .role(name)
            .map(|r| Some(r.oid))
            .ok_or_else(|| crate::roles::undefined_role(name)),
        _ => Ok(None),
    }
}

/// The object a call names, by name or OID; None for an OID nothing has.
fn object_of(catalog: &Catalog, kind: &str, object: &Value) -> SqlResult<Option<ObjectId>> {
    if let Value::Int(oid) = object {
        let oid = *oid as u32;
        let id = oid.wrapping_sub(FIRST_USER_OID);
        return Ok(match kind {
            "table" | "sequence" => {
                if catalog.sequence_by_id(id).is_some() {
                    Some(ObjectId::Sequence(id))
                } else if catalog.table_by_id(id).is_some()
                    || catalog.views.values().any(|v| v.id == id)
                {
                    Some(ObjectId::Relation(id))
                } else {
                    None
                }
            }
            "function" => catalog
                .procedures
                .keys()
                .find(|p| procedure_oid(p) == oid)
                .map(|p| ObjectId::Procedure(p.clone())),
            "schema" => (oid == crate::system::PUBLIC_NAMESPACE as u32)
                .then(|| ObjectId::Schema("public".into())),
            _ => (oid == crate::system::DATABASE_OID as u32).then_some(ObjectId::Database),
        });
    }
    let Value::Text(name) = object else {
        return Ok(None);
    };
    let bare = name.trim_start_matches("public.").trim_matches('"');
    let found = match kind {
        "table" | "sequence" => {
            if let Some(s) = catalog.sequences.get(bare) {
                Some(ObjectId::Sequence(s.id))
            } else if let Some(t) = catalog.table(bare) {
                (kind == "table").then_some(ObjectId::Relation(t.id))
            } else {
                catalog
                    .views
                    .get(bare)
                    .filter(|_| kind == "table")
                    .map(|v| ObjectId::Relation(v.id))
            }
        }
        "function" => {
            let name = bare.split('(').next().unwrap_or_default().trim();
            catalog
                .procedures
                .contains_key(name)
                .then(|| ObjectId::Procedure(name.to_owned()))
        }
        "schema" => matches!(bare, "public" | "pg_catalog" | "information_schema")
            .then(|| ObjectId::Schema(bare.to_owned())),
        _ => (bare == "ledger").then_some(ObjectId::Database),
    };
    found.map(Some).ok_or_else(|| match kind {
        "table" | "sequence" if catalog.relation_exists(bare) => SqlError::new(
            ErrorKind::WrongObjectType,
            format!("\"{bare}\" is not a {kind}"),
        ),
        "table" | "sequence" => SqlError::undefined_table(bare),
        "function" => SqlError::new(
            ErrorKind::UndefinedFunction,
            format!("function \"{bare}\" does not exist"),
        ),
        "schema" => SqlError::new(
            ErrorKind::InvalidSchemaName,
            format!("schema \"{bare}\" does not exist"),
        ),
        _ => SqlError::new(
            ErrorKind::UndefinedDatabase,
            format!("database \"{bare}\" does not exist"),
        ),
    })
}

/// `has_<kind>_privilege(role, object, privileges)` or `pg_has_role(role, role, mode)`:
/// whether `role` holds any of the privileges; NULL for an OID nothing has.
pub fn has_privilege(catalog: &Catalog, args: &[Value]) -> SqlResult<Value> {
    let [Value::Text(kind), role, object, Value::Text(asked)] = args else {
        return Ok(Value::Null);
    };
    let Some(role) = role_of(catalog, role)? else {
        return Ok(Value::Null);
    };
    let asked = privileges_asked(asked)?;
    let auth = &catalog.authorization;
    if kind == "role" {
        let Some(target) = role_of(catalog, object)? else {
            return Ok(Value::Null);
        };
        let held = asked.iter().any(|(mode, admin)| {
            let member = if *mode == Privileges::USAGE {
                auth.privileged_as(role).contains(&target)
            } else {
                auth.member_of(role).contains(&target)
            };
            member && (!admin || auth.may_administer(role, target))
        });
        return Ok(Value::Bool(held || auth.is_superuser(role)));
    }
    // The system schemas: every role may use them, none create there.
    if kind == "schema" && matches!(object, Value::Text(s) if s != "public") {
        return Ok(Value::Bool(
            asked.iter().any(|(p, _)| *p == Privileges::USAGE) || auth.is_superuser(role),
        ));
    }
    let Some(object) = object_of(catalog, kind, object)? else {
        return Ok(Value::Null);
    };
    let (held, grantable) = auth.held(role, &object);
    Ok(Value::Bool(asked.iter().any(|(p, grant)| {
        let have = if *grant { grantable } else { held };
        !p.is_empty() && have.contains(*p)
    })))
}

/// `pg_get_userbyid(oid)`: the role's name, or PostgreSQL's `unknown (OID=n)`.
pub fn user_by_id(catalog: &Catalog, oid: i64) -> String {
    u32::try_from(oid)
        .ok()
        .and_then(|oid| catalog.authorization.role_by_oid(oid))
        .map_or_else(|| format!("unknown (OID={oid})"), |r| r.name.clone())
}
