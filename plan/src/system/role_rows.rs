//! The rows of the catalogs that describe roles and privileges — `pg_roles`, `pg_authid`,
//! `pg_user`, `pg_auth_members`, `information_schema.table_privileges` — and the owner
//! and ACL columns of the object catalogs (`relowner`/`relacl`, `proowner`/`proacl`,
//! `nspacl`, `datacl`), from the catalog's `Authorization`.

use super::*;
use crate::privileges::ObjectId;
use crate::roles::{RoleDef, PUBLIC_ROLE_OID};

fn b(v: bool) -> Value {
    Value::Bool(v)
}

fn valid_until(role: &RoleDef) -> Value {
    role.valid_until.map_or(Value::Null, Value::TimestampTz)
}

fn settings(role: &RoleDef) -> Value {
    if role.settings.is_empty() {
        return Value::Null;
    }
    Value::Array(
        role.settings
            .iter()
            .map(|(k, v)| Value::Text(format!("{k}={v}")))
            .collect(),
    )
}

/// `pg_roles`: every role, its password shown as `********` as PostgreSQL does.
pub(super) fn pg_roles(catalog: &Catalog) -> Vec<Vec<Value>> {
    catalog
        .authorization
        .all_roles()
        .map(|r| {
            let a = &r.attributes;
            vec![
                text(&r.name),
                b(a.superuser),
                b(a.inherit),
                b(a.create_role),
                b(a.create_db),
                b(a.login),
                b(a.replication),
                int(a.connection_limit),
                text("********"),
                valid_until(r),
                b(a.bypass_rls),
                settings(r),
                int(r.oid),
            ]
        })
        .collect()
}

/// `pg_authid`: `pg_roles` with the stored verifiers (the binder lets only a superuser
/// read it). The bootstrap superuser's password is the server's, never stored: NULL.
pub(super) fn pg_authid(catalog: &Catalog) -> Vec<Vec<Value>> {
    catalog
        .authorization
        .all_roles()
        .map(|r| {
            let a = &r.attributes;
            vec![
                int(r.oid),
                text(&r.name),
                b(a.superuser),
                b(a.inherit),
                b(a.create_role),
                b(a.create_db),
                b(a.login),
                b(a.replication),
                b(a.bypass_rls),
                int(a.connection_limit),
                r.password.as_deref().map_or(Value::Null, text),
                valid_until(r),
            ]
        })
        .collect()
}

/// `pg_user`: the roles that may log in.
pub(super) fn pg_user(catalog: &Catalog) -> Vec<Vec<Value>> {
    catalog
        .authorization
        .all_roles()
        .filter(|r| r.attributes.login)
        .map(|r| {
            let a = &r.attributes;
            vec![
                text(&r.name),
                int(r.oid),
                b(a.create_db),
                b(a.superuser),
                b(a.replication),
                b(a.bypass_rls),
                text("********"),
                valid_until(r),
                settings(r),
            ]
        })
        .collect()
}

/// `pg_auth_members` (PostgreSQL 15's columns).
pub(super) fn pg_auth_members(catalog: &Catalog) -> Vec<Vec<Value>> {
    catalog
        .authorization
        .memberships
        .iter()
        .map(|m| vec![int(m.role), int(m.member), int(m.grantor), b(m.admin)])
        .collect()
}

/// The object a relation's OID is (a table or view, or a sequence).
pub(super) fn relation_object(catalog: &Catalog, oid: i64) -> Option<ObjectId> {
    let id = u32::try_from(oid).ok()?.checked_sub(FIRST_USER_OID)?;
    if catalog.sequence_by_id(id).is_some() {
        return Some(ObjectId::Sequence(id));
    }
    let is_relation =
        catalog.table_by_id(id).is_some() || catalog.views.values().any(|v| v.id == id);
    is_relation.then_some(ObjectId::Relation(id))
}

/// An object's owner's OID, as `relowner` and its kin show it.
pub(super) fn owner(catalog: &Catalog, object: &ObjectId) -> Value {
    int(catalog.authorization.owner(object))
}

/// An object's ACL as `relacl` and its kin show it: NULL while it has the default.
pub(super) fn acl(catalog: &Catalog, object: &ObjectId) -> Value {
    catalog
        .authorization
        .acl_text(object)
        .map_or(Value::Null, |items| {
            Value::Array(items.into_iter().map(Value::Text).collect())
        })
}

/// `pg_class` rows with their owners and ACLs filled in (`relowner`, `relacl`).
pub(super) fn with_relation_owners(
    catalog: &Catalog,
    mut rows: Vec<Vec<Value>>,
) -> Vec<Vec<Value>> {
    const RELOWNER: usize = 5;
    const RELACL: usize = 23;
    for row in &mut rows {
        let Some(Value::Int(oid)) = row.first() else {
            continue;
        };
        if let Some(object) = relation_object(catalog, *oid) {
            row[RELOWNER] = owner(catalog, &object);
            row[RELACL] = acl(catalog, &object);
        }
    }
    rows
}

/// `information_schema.table_privileges`: one row per privilege granted on a table or
/// view, for every grantee (PUBLIC included) — as PostgreSQL lists them, to every role.
pub(super) fn info_table_privileges(catalog: &Catalog) -> Vec<Vec<Value>> {
    let auth = &catalog.authorization;
    let relations = catalog
        .tables
        .values()
        .map(|t| (t.id, t.name.as_str()))
        .chain(catalog.views.values().map(|v| (v.id, v.name.as_str())));
    let mut rows = Vec::new();
    for (id, name) in relations {
        let object = ObjectId::Relation(id);
        for item in auth.acl(&object).iter() {
            let grantee = if item.grantee == PUBLIC_ROLE_OID {
                "PUBLIC".to_owned()
            } else {
                auth.role_name(item.grantee)
            };
            for privilege in item.privileges.each() {
                rows.push(vec![
                    text(&auth.role_name(item.grantor)),
                    text(&grantee),
                    text("ledger"),
                    text("public"),
                    text(name),
                    text(&privilege.keywords()),
                    text(
                        if item.grant_options.contains(privilege)
                            || item.grantee == auth.owner(&object)
                        {
                            "YES"
                        } else {
                            "NO"
                        },
                    ),
                    text(if privilege == crate::Privileges::SELECT {
                        "YES"
                    } else {
                        "NO"
                    }),
                ]);
            }
        }
    }
    rows
}
