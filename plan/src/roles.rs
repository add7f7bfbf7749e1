//! Roles, as PostgreSQL's `pg_authid` and `pg_auth_members` hold them: who may log in,
//! with which attributes, and which roles are members of which.
//!
//! The bootstrap superuser (the server's `--user`, OID 10) is no stored role: its name and
//! password come from the command line at every start, so an operator can never lock
//! themselves out. Every other role is created by SQL and replicated with the catalog.
//!
//! Invariants, kept by the code that changes them (`Authorization`'s methods): role names
//! and OIDs are unique, and the bootstrap role's name is none of theirs; a membership names
//! two existing roles and makes no cycle (no role is a member of itself, directly or not).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sql::{ErrorKind, SqlError, SqlResult};

use crate::privileges::{AclItem, ObjectId};

/// The bootstrap superuser's OID, as in PostgreSQL.
pub const BOOTSTRAP_ROLE_OID: u32 = 10;
/// The grantee `PUBLIC` in an ACL: every role.
pub const PUBLIC_ROLE_OID: u32 = 0;
/// Roles' OIDs are counted from here, apart from the relations' (`FIRST_USER_OID`).
const FIRST_ROLE_OID: u32 = 0x2000_0000;

/// A role's attributes (`CREATE ROLE ... [NO]SUPERUSER, [NO]LOGIN, ...`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleAttributes {
    pub superuser: bool,
    pub inherit: bool,
    pub create_role: bool,
    pub create_db: bool,
    pub login: bool,
    pub replication: bool,
    pub bypass_rls: bool,
    /// -1: no limit.
    pub connection_limit: i32,
}

impl RoleAttributes {
    /// What `CREATE ROLE` (`login` false) or `CREATE USER` (true) gives by default.
    pub fn new_role(login: bool) -> RoleAttributes {
        RoleAttributes {
            superuser: false,
            inherit: true,
            create_role: false,
            create_db: false,
            login,
            replication: false,
            bypass_rls: false,
            connection_limit: -1,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleDef {
    pub oid: u32,
    pub name: String,
    pub attributes: RoleAttributes,
    /// A SCRAM-SHA-256 verifier (`scram.rs`); None: no password, so no login.
    pub password: Option<String>,
    /// `VALID UNTIL`: microseconds since the Unix epoch after which the password no longer
    /// logs in; None: always.
    pub valid_until: Option<i64>,
    /// `ALTER ROLE ... SET name = value`: the defaults its sessions start with.
    pub settings: BTreeMap<String, String>,
}

/// `member` is a member of `role` (`GRANT role TO member`), granted by `grantor`; with
/// `admin`, it may grant the membership on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleMembership {
    pub role: u32,
    pub member: u32,
    pub grantor: u32,
    pub admin: bool,
}

/// Who exists and what each may do: the stored roles, their memberships, every object's
/// ACL that differs from its default and every owner other than the bootstrap superuser.
/// Stored under a key of its own (the executor's `META_AUTHORIZATION`), as views are.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Authorization {
    pub roles: BTreeMap<String, Arc<RoleDef>>,
    pub memberships: Vec<RoleMembership>,
    pub acls: BTreeMap<ObjectId, Vec<AclItem>>,
    pub owners: BTreeMap<ObjectId, u32>,
    pub next_role_oid: u32,
    /// The server's `--user`, never stored (see the module's header).
    #[serde(skip, default = "bootstrap_role")]
    pub bootstrap: Arc<RoleDef>,
}

impl Default for Authorization {
    fn default() -> Authorization {
        Authorization {
            roles: BTreeMap::new(),
            memberships: Vec::new(),
            acls: BTreeMap::new(),
            owners: BTreeMap::new(),
            next_role_oid: FIRST_ROLE_OID,
            bootstrap: bootstrap_role(),
        }
    }
}

fn bootstrap_role() -> Arc<RoleDef> {
    bootstrap_named("ledger")
}

fn bootstrap_named(name: &str) -> Arc<RoleDef> {
    Arc::new(RoleDef {
        oid: BOOTSTRAP_ROLE_OID,
        name: name.to_owned(),
        attributes: RoleAttributes {
            superuser: true,
            inherit: true,
            create_role: true,
            create_db: true,
            login: true,
            replication: true,
            bypass_rls: true,
            connection_limit: -1,
        },
        password: None,
        valid_until: None,
        settings: BTreeMap::new(),
    })
}

pub fn undefined_role(name: &str) -> SqlError {
    SqlError::new(
        ErrorKind::UndefinedObject,
        format!("role \"{name}\" does not exist"),
    )
}

/// PostgreSQL's checks of a new role's name: `public` and `none` are keywords there,
/// and `pg_` names are the system's (42939).
pub fn check_new_role_name(name: &str) -> SqlResult<()> {
    let reserved = |message: String| SqlError::new(ErrorKind::ReservedName, message);
    if name == "public" || name == "none" {
        return Err(reserved(format!("role name \"{name}\" is reserved")));
    }
    if name.starts_with("pg_") {
        let mut e = reserved(format!("role name \"{name}\" is reserved"));
        e.detail = Some("Role names starting with \"pg_\" are reserved.".into());
        return Err(e);
    }
    if name.is_empty() {
        return Err(SqlError::new(
            ErrorKind::InvalidName,
            "zero-length delimited identifier",
        ));
    }
    Ok(())
}

impl Authorization {
    /// The bootstrap superuser is called `name` (the server's `--user`).
    pub fn set_bootstrap_name(&mut self, name: &str) {
        if self.bootstrap.name != name {
            self.bootstrap = bootstrap_named(name);
        }
    }

    pub fn role(&self, name: &str) -> Option<&Arc<RoleDef>> {
        if self.bootstrap.name == name {
            return Some(&self.bootstrap);
        }
        self.roles.get(name)
    }

    pub fn role_by_oid(&self, oid: u32) -> Option<&Arc<RoleDef>> {
        if oid == BOOTSTRAP_ROLE_OID {
            return Some(&self.bootstrap);
        }
        self.roles.values().find(|r| r.oid == oid)
    }

    /// The role's name, or its OID in digits for one that no longer exists.
    pub fn role_name(&self, oid: u32) -> String {
        self.role_by_oid(oid)
            .map_or_else(|| oid.to_string(), |r| r.name.clone())
    }

    /// Every role, the bootstrap superuser first.
    pub fn all_roles(&self) -> impl Iterator<Item = &Arc<RoleDef>> {
        std::iter::once(&self.bootstrap).chain(self.roles.values())
    }

    pub fn is_superuser(&self, oid: u32) -> bool {
        self.role_by_oid(oid)
            .is_some_and(|r| r.attributes.superuser)
    }

    /// The roles whose privileges `oid` has: itself and, through INHERIT, the roles it is
    /// a member of, and theirs in turn where those inherit (PostgreSQL's
    /// `has_privs_of_role`).
    pub fn privileged_as(&self, oid: u32) -> BTreeSet<u32> {
        self.closure(oid, true)
    }

    /// The roles `oid` is a member of, directly or not, whatever INHERIT says
    /// (`is_member_of_role`), itself included.
    pub fn member_of(&self, oid: u32) -> BTreeSet<u32> {
        self.closure(oid, false)
    }

    fn closure(&self, oid: u32, inheriting: bool) -> BTreeSet<u32> {
        let mut seen = BTreeSet::from([oid]);
        let mut frontier = vec![oid];
        while let Some(next) = frontier.pop() {
            let inherits = self.role_by_oid(next).is_none_or(|r| r.attributes.inherit);
            if inheriting && !inherits {
                continue;
            }
            for m in self.memberships.iter().filter(|m| m.member == next) {
                if seen.insert(m.role) {
                    frontier.push(m.role);
                }
            }
        }
        seen
    }

    /// Whether `oid` may grant membership in `role` to others: a superuser, a role with
    /// CREATEROLE for a role that is not a superuser, or one holding the membership
    /// WITH ADMIN OPTION (directly or through a role it is a member of).
    pub fn may_administer(&self, oid: u32, role: u32) -> bool {
        let Some(actor) = self.role_by_oid(oid) else {
            return false;
        };
        if actor.attributes.superuser {
            return true;
        }
        if actor.attributes.create_role && !self.is_superuser(role) {
            return true;
        }
        let mine = self.member_of(oid);
        self.memberships
            .iter()
            .any(|m| m.role == role && m.admin && mine.contains(&m.member))
    }

    /// A new role's OID.
    pub fn allocate_role_oid(&mut self) -> u32 {
        let oid = self.next_role_oid;
        self.next_role_oid += 1;
        oid
    }

    /// Makes `member` a member of `role`; a note when it already was (PostgreSQL's NOTICE),
    /// an error when that would make a cycle (0LP01).
    pub fn add_membership(
        &mut self,
        role: u32,
        member: u32,
        grantor: u32,
        admin: bool,
    ) -> SqlResult<Option<String>> {
        let (role_name, member_name) = (self.role_name(role), self.role_name(member));
        if self.member_of(role).contains(&member) {
            return Err(SqlError::new(
                ErrorKind::InvalidGrantOperation,
                format!("role \"{role_name}\" is a member of role \"{member_name}\""),
            ));
        }
        if let Some(existing) = self
            .memberships
            .iter_mut()
            .find(|m| m.role == role && m.member == member)
        {
            if admin && !existing.admin {
                existing.admin = true;
                return Ok(None);
            }
            return Ok(Some(format!(
                "role \"{member_name}\" is already a member of role \"{role_name}\""
            )));
        }
        self.memberships.push(RoleMembership {
            role,
            member,
            grantor,
            admin,
        });
        Ok(None)
    }

    /// Ends `member`'s membership in `role` (or only its admin option); a warning when
    /// there was none (PostgreSQL's).
    pub fn remove_membership(
        &mut self,
        role: u32,
        member: u32,
        admin_only: bool,
    ) -> Option<String> {
        let position = self
            .memberships
            .iter()
            .position(|m| m.role == role && m.member == member);
        match position {
            Some(i) if admin_only => {
                self.memberships[i].admin = false;
                None
            }
            Some(i) => {
                self.memberships.remove(i);
                None
            }
            None => Some(format!(
                "role \"{}\" is not a member of role \"{}\"",
                self.role_name(member),
                self.role_name(role),
            )),
        }
    }

    /// What still refers to role `oid` and keeps it from being dropped: objects it owns
    /// and privileges granted to it or by it, as PostgreSQL's DETAIL lists them.
    pub fn dependents_of_role(
        &self,
        oid: u32,
        describe: impl Fn(&ObjectId) -> String,
    ) -> Vec<String> {
        let mut found = Vec::new();
        for (object, owner) in &self.owners {
            if *owner == oid {
                found.push(format!("owner of {}", describe(object)));
            }
        }
        for (object, acl) in &self.acls {
            if acl.iter().any(|a| a.grantee == oid || a.grantor == oid) {
                found.push(format!("privileges for {}", describe(object)));
            }
        }
        found
    }

    /// Drops role `oid` (its dependents checked already): its memberships go with it.
    pub fn remove_role(&mut self, oid: u32) {
        self.roles.retain(|_, r| r.oid != oid);
        self.memberships
            .retain(|m| m.role != oid && m.member != oid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(auth: &mut Authorization, name: &str, inherit: bool) -> u32 {
        let oid = auth.allocate_role_oid();
        let mut attributes = RoleAttributes::new_role(true);
        attributes.inherit = inherit;
        auth.roles.insert(
            name.into(),
            Arc::new(RoleDef {
                oid,
                name: name.into(),
                attributes,
                password: None,
                valid_until: None,
                settings: BTreeMap::new(),
            }),
        );
        oid
    }

    #[test]
    fn privileges_follow_inherit_and_membership_follows_every_path() {
        let mut auth = Authorization::default();
        let readers = role(&mut auth, "readers", true);
        let staff = role(&mut auth, "staff", false);
        let alice = role(&mut auth, "alice", true);
        auth.add_membership(readers, staff, 10, false).unwrap();
        auth.add_membership(staff, alice, 10, false).unwrap();
        // alice inherits staff's privileges, but staff does not inherit readers'.
        assert_eq!(auth.privileged_as(alice), BTreeSet::from([alice, staff]));
        assert_eq!(
            auth.member_of(alice),
            BTreeSet::from([alice, staff, readers])
        );
        let again = auth.add_membership(staff, alice, 10, false).unwrap();
        assert_eq!(
            again.as_deref(),
            Some("role \"alice\" is already a member of role \"staff\"")
        );
        let cycle = auth.add_membership(alice, readers, 10, false).unwrap_err();
        assert_eq!(cycle.kind, ErrorKind::InvalidGrantOperation);
        assert!(auth.add_membership(alice, alice, 10, false).is_err());
        auth.remove_role(staff);
        assert_eq!(auth.member_of(alice), BTreeSet::from([alice]));
    }

    #[test]
    fn the_bootstrap_role_is_found_by_its_given_name() {
        let mut auth = Authorization::default();
        auth.set_bootstrap_name("admin");
        assert_eq!(auth.role("admin").map(|r| r.oid), Some(BOOTSTRAP_ROLE_OID));
        assert!(auth.role("ledger").is_none());
        assert!(auth.is_superuser(BOOTSTRAP_ROLE_OID));
        assert!(check_new_role_name("pg_monitor").is_err());
        assert!(check_new_role_name("public").is_err());
        assert!(check_new_role_name("alice").is_ok());
    }
}
