//! Privileges on objects, as PostgreSQL's ACLs hold them: which role may SELECT a table,
//! EXECUTE a procedure, CREATE in a schema; who owns each object; and what a statement
//! needs (`AclCheck`), checked by the session before it runs anything
//! (`Authorization::check`).
//!
//! An object with no ACL of its own has its kind's default (PostgreSQL's `acldefault`): its
//! owner holds every privilege of the kind; PUBLIC may EXECUTE procedures, USE the
//! `public` schema (as of PostgreSQL 15 only its owner may CREATE there) and CONNECT to the
//! database. The first GRANT or REVOKE gives the object an ACL of its own, starting from
//! that default. A superuser passes every check.

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use sql::{ErrorKind, SqlError, SqlResult};

use crate::roles::{Authorization, BOOTSTRAP_ROLE_OID, PUBLIC_ROLE_OID};

/// A set of privileges, one bit each in the order PostgreSQL writes their letters in an
/// ACL (`arwdDxtXUCTc`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Privileges(pub u16);

/// Each privilege: its bit, its letter in an ACL, its keyword.
const NAMES: [(u16, char, &str); 12] = [
    (1, 'a', "INSERT"),
    (1 << 1, 'r', "SELECT"),
    (1 << 2, 'w', "UPDATE"),
    (1 << 3, 'd', "DELETE"),
    (1 << 4, 'D', "TRUNCATE"),
    (1 << 5, 'x', "REFERENCES"),
    (1 << 6, 't', "TRIGGER"),
    (1 << 7, 'X', "EXECUTE"),
    (1 << 8, 'U', "USAGE"),
    (1 << 9, 'C', "CREATE"),
    (1 << 10, 'T', "TEMPORARY"),
    (1 << 11, 'c', "CONNECT"),
];

impl Privileges {
    pub const NONE: Privileges = Privileges(0);
    pub const INSERT: Privileges = Privileges(1);
    pub const SELECT: Privileges = Privileges(1 << 1);
    pub const UPDATE: Privileges = Privileges(1 << 2);
    pub const DELETE: Privileges = Privileges(1 << 3);
    pub const TRUNCATE: Privileges = Privileges(1 << 4);
    pub const REFERENCES: Privileges = Privileges(1 << 5);
    pub const TRIGGER: Privileges = Privileges(1 << 6);
    pub const EXECUTE: Privileges = Privileges(1 << 7);
    pub const USAGE: Privileges = Privileges(1 << 8);
    pub const CREATE: Privileges = Privileges(1 << 9);
    pub const TEMPORARY: Privileges = Privileges(1 << 10);
    pub const CONNECT: Privileges = Privileges(1 << 11);

    pub fn union(self, other: Privileges) -> Privileges {
        Privileges(self.0 | other.0)
    }

    pub fn intersection(self, other: Privileges) -> Privileges {
        Privileges(self.0 & other.0)
    }

    pub fn without(self, other: Privileges) -> Privileges {
        Privileges(self.0 & !other.0)
    }

    pub fn contains(self, other: Privileges) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// A privilege by its keyword (`SELECT`, `TEMP`), as GRANT spells it.
    pub fn named(keyword: &str) -> Option<Privileges> {
        let upper = keyword.to_ascii_uppercase();
        let upper = if upper == "TEMP" { "TEMPORARY" } else { &upper };
        NAMES
            .iter()
            .find(|(_, _, name)| *name == upper)
            .map(|(bit, _, _)| Privileges(*bit))
    }

    /// The keywords of the privileges held, comma-separated, for messages.
    pub fn keywords(self) -> String {
        NAMES
            .iter()
            .filter(|(bit, _, _)| self.0 & bit != 0)
            .map(|(_, _, name)| *name)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// One privilege at a time, in ACL order.
    pub fn each(self) -> impl Iterator<Item = Privileges> {
        NAMES
            .iter()
            .filter(move |(bit, _, _)| self.0 & bit != 0)
            .map(|(bit, _, _)| Privileges(*bit))
    }
}

/// An object privileges are granted on.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ObjectId {
    /// A table or view, by its id (`TableDef::id`, `ViewDef::id`).
    Relation(u32),
    Sequence(u32),
    Procedure(String),
    Schema(String),
    Database,
}

impl ObjectId {
    /// Every privilege there is on an object of this kind (what ALL grants).
    pub fn all_privileges(&self) -> Privileges {
        match self {
            ObjectId::Relation(_) => Privileges(0b111_1111),
            ObjectId::Sequence(_) => Privileges::SELECT
                .union(Privileges::UPDATE)
                .union(Privileges::USAGE),
            ObjectId::Procedure(_) => Privileges::EXECUTE,
            ObjectId::Schema(_) => Privileges::USAGE.union(Privileges::CREATE),
            ObjectId::Database => Privileges::CREATE
                .union(Privileges::TEMPORARY)
                .union(Privileges::CONNECT),
        }
    }

    /// What PUBLIC holds by default.
    fn public_default(&self) -> Privileges {
        match self {
            ObjectId::Procedure(_) => Privileges::EXECUTE,
            ObjectId::Schema(_) => Privileges::USAGE,
            ObjectId::Database => Privileges::TEMPORARY.union(Privileges::CONNECT),
            ObjectId::Relation(_) | ObjectId::Sequence(_) => Privileges::NONE,
        }
    }
}

/// One entry of an ACL: `grantee` holds `privileges` (`PUBLIC_ROLE_OID`: every role),
/// granted by `grantor`, and may grant on those in `grant_options`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclItem {
    pub grantee: u32,
    pub grantor: u32,
    pub privileges: Privileges,
    pub grant_options: Privileges,
}

/// What kind of object a message names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ObjectKind {
    Table,
    View,
    Sequence,
    Procedure,
    Function,
    Schema,
    Database,
    Index,
}

impl ObjectKind {
    /// As PostgreSQL's messages spell it ("permission denied for table t").
    pub fn name(self) -> &'static str {
        match self {
            ObjectKind::Table => "table",
            ObjectKind::View => "view",
            ObjectKind::Sequence => "sequence",
            ObjectKind::Procedure => "procedure",
            ObjectKind::Function => "function",
            ObjectKind::Schema => "schema",
            ObjectKind::Database => "database",
            ObjectKind::Index => "index",
        }
    }
}

/// What a statement needs of one object, found by the binder: `privileges` on `object`,
/// held by the session's role — or, inside a view, by the view's owner (`as_role`), whose
/// rights a view's query runs with, as in PostgreSQL. `name` and `kind` are for the
/// message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclCheck {
    pub object: ObjectId,
    pub need: Need,
    pub name: String,
    pub kind: ObjectKind,
    pub as_role: Option<u32>,
}

/// What a role may grant on an object (`Authorization::grant_rights`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrantRights {
    /// Whom a grant it makes is recorded as coming from.
    pub grantor: u32,
    /// The privileges it may grant (or revoke, as that grantor).
    pub grantable: Privileges,
    /// The privileges it holds.
    pub held: Privileges,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Need {
    /// Any one of these privileges.
    AnyOf(Privileges),
    /// To own the object (or be a member of its owner).
    Ownership,
}

impl Authorization {
    pub fn owner(&self, object: &ObjectId) -> u32 {
        self.owners
            .get(object)
            .copied()
            .unwrap_or(BOOTSTRAP_ROLE_OID)
    }

    /// The object's ACL: its own, or its kind's default for its owner.
    pub fn acl(&self, object: &ObjectId) -> Cow<'_, [AclItem]> {
        if let Some(acl) = self.acls.get(object) {
            return Cow::Borrowed(acl);
        }
        let owner = self.owner(object);
        let mut acl = vec![AclItem {
            grantee: owner,
            grantor: owner,
            privileges: object.all_privileges(),
            grant_options: Privileges::NONE,
        }];
        let public = object.public_default();
        if !public.is_empty() {
            acl.push(AclItem {
                grantee: PUBLIC_ROLE_OID,
                grantor: owner,
                privileges: public,
                grant_options: Privileges::NONE,
            });
        }
        Cow::Owned(acl)
    }

    /// The privileges `role` holds on `object` (a superuser: all), and those it may grant
    /// on (its owner: all).
    pub fn held(&self, role: u32, object: &ObjectId) -> (Privileges, Privileges) {
        let all = object.all_privileges();
        if self.is_superuser(role) {
            return (all, all);
        }
        let roles = self.privileged_as(role);
        let mut held = Privileges::NONE;
        let mut grantable = Privileges::NONE;
        for item in self.acl(object).iter() {
            if item.grantee == PUBLIC_ROLE_OID || roles.contains(&item.grantee) {
                held = held.union(item.privileges);
                if item.grantee != PUBLIC_ROLE_OID {
                    grantable = grantable.union(item.grant_options);
                }
            }
        }
        if roles.contains(&self.owner(object)) {
            grantable = all;
        }
        (held, grantable)
    }

    /// What `actor` may grant or revoke on `object`, and as whom (PostgreSQL's
    /// `select_best_grantor`): its owner (or a superuser) acts as the owner, with every
    /// privilege; anyone else as the role among those whose privileges it has (itself
    /// first) that holds the most grant options there.
    pub fn grant_rights(&self, actor: u32, object: &ObjectId) -> GrantRights {
        let owner = self.owner(object);
        if self.owns(actor, object) {
            let all = object.all_privileges();
            return GrantRights {
                grantor: owner,
                grantable: all,
                held: all,
            };
        }
        let (held, _) = self.held(actor, object);
        let acl = self.acl(object);
        let options_of = |role: u32| {
            acl.iter()
                .filter(|i| i.grantee == role)
                .fold(Privileges::NONE, |o, i| o.union(i.grant_options))
        };
        let mut best = (actor, options_of(actor));
        for role in self.privileged_as(actor) {
            let options = options_of(role);
            if options.0.count_ones() > best.1 .0.count_ones() {
                best = (role, options);
            }
        }
        GrantRights {
            grantor: best.0,
            grantable: best.1,
            held,
        }
    }

    /// Whether `role` owns `object`, is a member of its owner, or is a superuser.
    pub fn owns(&self, role: u32, object: &ObjectId) -> bool {
        self.is_superuser(role) || self.privileged_as(role).contains(&self.owner(object))
    }

    /// Refuses the first check `role` fails (42501, PostgreSQL's messages).
    pub fn check(&self, role: u32, checks: &[AclCheck]) -> SqlResult<()> {
        for c in checks {
            let who = c.as_role.unwrap_or(role);
            let passed = match c.need {
                Need::AnyOf(wanted) => {
                    let (held, _) = self.held(who, &c.object);
                    !held.intersection(wanted).is_empty()
                }
                Need::Ownership => self.owns(who, &c.object),
            };
            if !passed {
                let message = match c.need {
                    Need::AnyOf(_) => {
                        format!("permission denied for {} {}", c.kind.name(), c.name)
                    }
                    Need::Ownership => format!("must be owner of {} {}", c.kind.name(), c.name),
                };
                return Err(SqlError::new(ErrorKind::InsufficientPrivilege, message));
            }
        }
        Ok(())
    }

    /// The ACL as PostgreSQL prints it (`{ledger=arwdDxt/ledger,alice=r*/ledger}`), or
    /// None where the object has its default (an ACL column is then NULL).
    pub fn acl_text(&self, object: &ObjectId) -> Option<Vec<String>> {
        let acl = self.acls.get(object)?;
        Some(acl.iter().map(|item| self.acl_item_text(item)).collect())
    }

    fn acl_item_text(&self, item: &AclItem) -> String {
        let grantee = if item.grantee == PUBLIC_ROLE_OID {
            String::new()
        } else {
            quote_role(&self.role_name(item.grantee))
        };
        let mut letters = String::new();
        for (bit, letter, _) in NAMES {
            if item.privileges.0 & bit != 0 {
                letters.push(letter);
                if item.grant_options.0 & bit != 0 {
                    letters.push('*');
                }
            }
        }
        format!(
            "{grantee}={letters}/{}",
            quote_role(&self.role_name(item.grantor))
        )
    }

    /// Gives `grantee` `privileges` on `object` from `grantor` (with the grant option
    /// when `grantable`).
    pub fn grant(
        &mut self,
        object: &ObjectId,
        grantee: u32,
        grantor: u32,
        privileges: Privileges,
        grantable: bool,
    ) {
        let mut acl = self.acl(object).into_owned();
        let options = if grantable {
            privileges
        } else {
            Privileges::NONE
        };
        match acl
            .iter_mut()
            .find(|i| i.grantee == grantee && i.grantor == grantor)
        {
            Some(item) => {
                item.privileges = item.privileges.union(privileges);
                item.grant_options = item.grant_options.union(options);
            }
            None => acl.push(AclItem {
                grantee,
                grantor,
                privileges,
                grant_options: options,
            }),
        }
        self.acls.insert(object.clone(), acl);
    }

    /// Takes `privileges` (or only their grant options) granted by `grantor` from
    /// `grantee`. What `grantee` granted on from them goes too with `cascade`, and is
    /// otherwise an error (2BP01), as in PostgreSQL.
    pub fn revoke(
        &mut self,
        object: &ObjectId,
        grantee: u32,
        grantor: u32,
        privileges: Privileges,
        options_only: bool,
        cascade: bool,
    ) -> SqlResult<()> {
        let mut acl = self.acl(object).into_owned();
        let Some(item) = acl
            .iter_mut()
            .find(|i| i.grantee == grantee && i.grantor == grantor)
        else {
            self.acls.insert(object.clone(), acl);
            return Ok(());
        };
        let lost_options = item.grant_options.intersection(privileges);
        item.grant_options = item.grant_options.without(privileges);
        if !options_only {
            item.privileges = item.privileges.without(privileges);
        }
        acl.retain(|i| !i.privileges.is_empty());
        // What `grantee` granted on from the options it lost, unless another grant still
        // gives it those options.
        let still_grantable = acl
            .iter()
            .filter(|i| i.grantee == grantee)
            .fold(Privileges::NONE, |held, i| held.union(i.grant_options))
            .contains(lost_options);
        let dependents: BTreeSet<u32> =
            if lost_options.is_empty() || grantee == PUBLIC_ROLE_OID || still_grantable {
                BTreeSet::new()
            } else {
                acl.iter()
                    .filter(|i| {
                        i.grantor == grantee && !i.privileges.intersection(lost_options).is_empty()
                    })
                    .map(|i| i.grantee)
                    .collect()
            };
        if !dependents.is_empty() && !cascade {
            return Err(SqlError::new(
                ErrorKind::DependentObjectsStillExist,
                "dependent privileges exist",
            )
            .with_detail("Use CASCADE to revoke them too."));
        }
        self.acls.insert(object.clone(), acl);
        for dependent in dependents {
            self.revoke(object, dependent, grantee, lost_options, false, true)?;
        }
        Ok(())
    }

    /// The object is gone: its ACL and owner with it.
    pub fn forget(&mut self, object: &ObjectId) {
        self.acls.remove(object);
        self.owners.remove(object);
    }

    /// `object` is owned by `owner` from now on; an ACL of its own follows, the old
    /// owner's entries becoming the new owner's, as PostgreSQL's `aclnewowner` does.
    pub fn set_owner(&mut self, object: &ObjectId, owner: u32) {
        let old = self.owner(object);
        if let Some(acl) = self.acls.get_mut(object) {
            let mut merged: Vec<AclItem> = Vec::with_capacity(acl.len());
            for mut item in acl.drain(..) {
                if item.grantee == old {
                    item.grantee = owner;
                }
                if item.grantor == old {
                    item.grantor = owner;
                }
                match merged
                    .iter_mut()
                    .find(|m| m.grantee == item.grantee && m.grantor == item.grantor)
                {
                    Some(m) => {
                        m.privileges = m.privileges.union(item.privileges);
                        m.grant_options = m.grant_options.union(item.grant_options);
                    }
                    None => merged.push(item),
                }
            }
            *acl = merged;
        }
        if owner == BOOTSTRAP_ROLE_OID {
            self.owners.remove(object);
        } else {
            self.owners.insert(object.clone(), owner);
        }
    }
}

/// A role's name as an ACL writes it: double-quoted where it is not a plain lower-case
/// identifier.
fn quote_role(name: &str) -> String {
    let plain = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if plain {
        name.to_owned()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roles::{RoleAttributes, RoleDef};
    use std::sync::Arc;

    fn role(auth: &mut Authorization, name: &str) -> u32 {
        let oid = auth.allocate_role_oid();
        auth.roles.insert(
            name.into(),
            Arc::new(RoleDef {
                oid,
                name: name.into(),
                attributes: RoleAttributes::new_role(true),
                password: None,
                valid_until: None,
                settings: Default::default(),
            }),
        );
        oid
    }

    fn check(auth: &Authorization, role: u32, object: ObjectId, wanted: Privileges) -> bool {
        let checks = [AclCheck {
            object,
            need: Need::AnyOf(wanted),
            name: "t".into(),
            kind: ObjectKind::Table,
            as_role: None,
        }];
        auth.check(role, &checks).is_ok()
    }

    #[test]
    fn defaults_grants_and_their_text_match_postgresql() {
        let mut auth = Authorization::default();
        let alice = role(&mut auth, "alice");
        let t = ObjectId::Relation(1);
        assert!(check(
            &auth,
            BOOTSTRAP_ROLE_OID,
            t.clone(),
            Privileges::SELECT
        ));
        assert!(!check(&auth, alice, t.clone(), Privileges::SELECT));
        assert!(check(
            &auth,
            alice,
            ObjectId::Procedure("p".into()),
            Privileges::EXECUTE
        ));
        assert!(!check(
            &auth,
            alice,
            ObjectId::Schema("public".into()),
            Privileges::CREATE
        ));
        assert_eq!(auth.acl_text(&t), None);
        auth.grant(&t, alice, BOOTSTRAP_ROLE_OID, Privileges::SELECT, false);
        auth.grant(&t, alice, BOOTSTRAP_ROLE_OID, Privileges::INSERT, true);
        assert_eq!(
            auth.acl_text(&t).unwrap(),
            ["ledger=arwdDxt/ledger", "alice=a*r/ledger"]
        );
        assert!(check(&auth, alice, t.clone(), Privileges::SELECT));
        let denied = auth
            .check(
                alice,
                &[AclCheck {
                    object: t.clone(),
                    need: Need::AnyOf(Privileges::DELETE),
                    name: "t".into(),
                    kind: ObjectKind::Table,
                    as_role: None,
                }],
            )
            .unwrap_err();
        assert_eq!(denied.message, "permission denied for table t");
        assert_eq!(denied.kind, ErrorKind::InsufficientPrivilege);
    }

    #[test]
    fn a_lost_grant_option_takes_what_was_granted_from_it_only_with_cascade() {
        let mut auth = Authorization::default();
        let (alice, bob) = (role(&mut auth, "alice"), role(&mut auth, "bob"));
        let t = ObjectId::Relation(1);
        auth.grant(&t, alice, BOOTSTRAP_ROLE_OID, Privileges::SELECT, true);
        auth.grant(&t, bob, alice, Privileges::SELECT, false);
        let refused = auth
            .revoke(
                &t,
                alice,
                BOOTSTRAP_ROLE_OID,
                Privileges::SELECT,
                false,
                false,
            )
            .unwrap_err();
        assert_eq!(refused.kind, ErrorKind::DependentObjectsStillExist);
        auth.revoke(
            &t,
            alice,
            BOOTSTRAP_ROLE_OID,
            Privileges::SELECT,
            false,
            true,
        )
        .unwrap();
        assert!(!check(&auth, bob, t.clone(), Privileges::SELECT));
        assert_eq!(auth.acl_text(&t).unwrap(), ["ledger=arwdDxt/ledger"]);
    }

    #[test]
    fn a_new_owner_takes_the_old_ones_entries() {
        let mut auth = Authorization::default();
        let alice = role(&mut auth, "alice");
        let t = ObjectId::Relation(1);
        auth.grant(&t, alice, BOOTSTRAP_ROLE_OID, Privileges::SELECT, false);
        auth.set_owner(&t, alice);
        assert_eq!(auth.acl_text(&t).unwrap(), ["alice=arwdDxt/alice"]);
        assert!(auth.owns(alice, &t));
    }
}
