//! What a role statement becomes: `DdlPlan::Roles`, applied by the executor like any
//! schema change (one command in the log, validated against the catalog as it applies, so
//! every replica decides it alike).
//!
//! Passwords travel as SCRAM verifiers only: the binder derives one (with a random salt)
//! before the statement is logged, so no cleartext password reaches the log or a replica.

use serde::{Deserialize, Serialize};

use crate::privileges::{ObjectId, ObjectKind, Privileges};

/// The attributes a CREATE or ALTER ROLE gives; None where it says nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleOptions {
    pub superuser: Option<bool>,
    pub inherit: Option<bool>,
    pub create_role: Option<bool>,
    pub create_db: Option<bool>,
    pub login: Option<bool>,
    pub replication: Option<bool>,
    pub bypass_rls: Option<bool>,
    pub connection_limit: Option<i32>,
    /// Some(None): `PASSWORD NULL`; Some(Some(verifier)).
    pub password: Option<Option<String>>,
    /// Some(None): `VALID UNTIL 'infinity'`.
    pub valid_until: Option<Option<i64>>,
}

/// What an ALTER ROLE changes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RoleChange {
    Options(RoleOptions),
    Rename(String),
    /// `SET name = value`, or `RESET name` (None).
    Setting(String, Option<String>),
    ResetAllSettings,
}

/// The objects of a GRANT or REVOKE of privileges, each with the name and kind its
/// messages use.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantTarget {
    pub object: ObjectId,
    pub name: String,
    pub kind: ObjectKind,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RolePlan {
    /// `members`: (role, member, admin) memberships the statement's IN ROLE, ROLE and ADMIN
    /// clauses add, with the new role's name where it takes part.
    CreateRole {
        name: String,
        options: RoleOptions,
        memberships: Vec<(String, String, bool)>,
    },
    AlterRole {
        name: String,
        change: RoleChange,
    },
    DropRoles {
        names: Vec<String>,
        if_exists: bool,
    },
    GrantRoles {
        roles: Vec<String>,
        members: Vec<String>,
        admin: bool,
        grantor: u32,
    },
    RevokeRoles {
        roles: Vec<String>,
        members: Vec<String>,
        admin_option_only: bool,
    },
    /// Grantees by name; `public` is PUBLIC. `privileges` None: ALL (of each object's kind).
    Grant {
        targets: Vec<GrantTarget>,
        grantees: Vec<String>,
        privileges: Option<Privileges>,
        grantable: bool,
        /// The role the statement runs as: the grant is recorded as made by the object's
        /// owner when it owns the object (or is a superuser), else by the role that holds
        /// the grant option, as PostgreSQL records it.
        actor: u32,
    },
    Revoke {
        targets: Vec<GrantTarget>,
        grantees: Vec<String>,
        privileges: Option<Privileges>,
        options_only: bool,
        cascade: bool,
        actor: u32,
    },
    /// `spelled`: the kind the statement named (`ALTER TABLE` of a view is ALTER TABLE's).
    SetOwner {
        target: GrantTarget,
        owner: String,
        spelled: ObjectKind,
    },
    ReassignOwned {
        from: Vec<String>,
        to: String,
    },
    /// `DROP OWNED BY`: the privileges granted to the roles are revoked (owning objects
    /// still keeps a role from it: see `ledger::roles`).
    DropOwned {
        roles: Vec<String>,
    },
}

impl RolePlan {
    /// The command tag PostgreSQL answers with.
    pub fn tag(&self) -> &'static str {
        match self {
            RolePlan::CreateRole { .. } => "CREATE ROLE",
            RolePlan::AlterRole { .. } => "ALTER ROLE",
            RolePlan::DropRoles { .. } => "DROP ROLE",
            RolePlan::GrantRoles { .. } => "GRANT ROLE",
            RolePlan::RevokeRoles { .. } => "REVOKE ROLE",
            RolePlan::Grant { .. } => "GRANT",
            RolePlan::Revoke { .. } => "REVOKE",
            RolePlan::SetOwner { spelled, .. } => match spelled {
                ObjectKind::View => "ALTER VIEW",
                ObjectKind::Sequence => "ALTER SEQUENCE",
                ObjectKind::Procedure => "ALTER PROCEDURE",
                ObjectKind::Function => "ALTER FUNCTION",
                _ => "ALTER TABLE",
            },
            RolePlan::ReassignOwned { .. } => "REASSIGN OWNED",
            RolePlan::DropOwned { .. } => "DROP OWNED",
        }
    }
}
