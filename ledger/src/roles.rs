//! Applying role changes (`plan::RolePlan`) to the catalog's `Authorization`: roles,
//! memberships, privileges and owners. Like every schema change it is decided here against
//! the catalog as the command applies, so every replica reaches the same roles: names the
//! binder checked may have gone since, and are checked again.
//!
//! Who may make a change was checked as the statement bound (`planner::bind_role`,
//! `bind_grant`); what is checked here is what the catalog must hold: roles exist, names
//! are unique, memberships make no cycle, a role that still owns or is granted something is
//! not dropped.

use std::collections::BTreeSet;
use std::sync::Arc;

use plan::{
    undefined_role, Authorization, Catalog, GrantTarget, ObjectId, Privileges, RoleAttributes,
    RoleChange, RoleDef, RoleOptions, RolePlan, BOOTSTRAP_ROLE_OID, PUBLIC_ROLE_OID,
};
use sql::{ErrorKind, SqlError, SqlResult};

pub(crate) fn apply(catalog: &mut Catalog, plan: RolePlan) -> SqlResult<()> {
    let description = describer(catalog);
    let live = owned_objects(catalog);
    let auth = &mut catalog.authorization;
    match plan {
        RolePlan::CreateRole {
            name,
            options,
            memberships,
        } => create_role(auth, name, options, memberships)?,
        RolePlan::AlterRole { name, change } => alter_role(auth, &name, change)?,
        RolePlan::DropRoles { names, if_exists } => {
            drop_roles(auth, &names, if_exists, &description)?
        }
        RolePlan::GrantRoles {
            roles,
            members,
            admin,
            grantor,
        } => {
            for (r, m) in memberships(auth, &roles, &members)? {
                auth.add_membership(r, m, grantor, admin)?;
            }
        }
        RolePlan::RevokeRoles {
            roles,
            members,
            admin_option_only,
        } => {
            for (r, m) in memberships(auth, &roles, &members)? {
                let _ = auth.remove_membership(r, m, admin_option_only);
            }
        }
        RolePlan::Grant {
            targets,
            grantees,
            privileges,
            grantable,
            actor,
        } => {
            let grantees = grantee_oids(auth, &grantees)?;
            for (object, grantor, given) in rights(auth, &live, targets, privileges, actor)? {
                if given.is_empty() {
                    continue;
                }
                for &grantee in &grantees {
                    auth.grant(&object, grantee, grantor, given, grantable);
                }
            }
        }
        RolePlan::Revoke {
            targets,
            grantees,
            privileges,
            options_only,
            cascade,
            actor,
        } => {
            let grantees = grantee_oids(auth, &grantees)?;
            for (object, grantor, taken) in rights(auth, &live, targets, privileges, actor)? {
                for &grantee in &grantees {
                    auth.revoke(&object, grantee, grantor, taken, options_only, cascade)?;
                }
            }
        }
        RolePlan::SetOwner { target, owner, .. } => {
            let owner = oid_of(auth, &owner)?;
            for t in live_targets(&live, vec![target])? {
                auth.set_owner(&t.object, owner);
            }
        }
        RolePlan::ReassignOwned { from, to } => reassign_owned(auth, &from, &to)?,
        RolePlan::DropOwned { roles } => drop_owned(auth, &roles)?,
    }
    Ok(())
}

fn create_role(
    auth: &mut Authorization,
    name: String,
    options: RoleOptions,
    memberships: Vec<(String, String, bool)>,
) -> SqlResult<()> {
    if auth.role(&name).is_some() {
        return Err(role_exists(&name));
    }
    let mut attributes = RoleAttributes::new_role(false);
    apply_options(&mut attributes, &options);
    let oid = auth.allocate_role_oid();
    auth.roles.insert(
        name.clone(),
        Arc::new(RoleDef {
            oid,
            name,
            attributes,
            password: options.password.flatten(),
            valid_until: options.valid_until.flatten(),
            settings: Default::default(),
        }),
    );
    for (role, member, admin) in memberships {
        let (role, member) = (oid_of(auth, &role)?, oid_of(auth, &member)?);
        auth.add_membership(role, member, BOOTSTRAP_ROLE_OID, admin)?;
    }
    Ok(())
}

fn drop_roles(
    auth: &mut Authorization,
    names: &[String],
    if_exists: bool,
    describe: &impl Fn(&ObjectId) -> String,
) -> SqlResult<()> {
    for name in names {
        let Some(role) = auth.role(name).cloned() else {
            if if_exists {
                continue;
            }
            return Err(undefined_role(name));
        };
        let dependents = auth.dependents_of_role(role.oid, describe);
        if !dependents.is_empty() {
            return Err(SqlError::new(
                ErrorKind::DependentObjectsStillExist,
                format!("role \"{name}\" cannot be dropped because some objects depend on it"),
            )
            .with_detail(dependents.join("\n")));
        }
        auth.remove_role(role.oid);
    }
    Ok(())
}

/// Every (role, member) pair of a GRANT or REVOKE of memberships, by OID.
fn memberships(
    auth: &Authorization,
    roles: &[String],
    members: &[String],
) -> SqlResult<Vec<(u32, u32)>> {
    let mut pairs = Vec::with_capacity(roles.len() * members.len());
    for role in roles {
        for member in members {
            pairs.push((oid_of(auth, role)?, oid_of(auth, member)?));
        }
    }
    Ok(pairs)
}

/// For each object a GRANT or REVOKE names: whom `actor` grants as there, and which of
/// `privileges` (None: all there are on it) it may grant or revoke.
fn rights(
    auth: &Authorization,
    live: &BTreeSet<ObjectId>,
    targets: Vec<GrantTarget>,
    privileges: Option<Privileges>,
    actor: u32,
) -> SqlResult<Vec<(ObjectId, u32, Privileges)>> {
    Ok(live_targets(live, targets)?
        .into_iter()
        .map(|t| {
            let rights = auth.grant_rights(actor, &t.object);
            let wanted = privileges.unwrap_or_else(|| t.object.all_privileges());
            (
                t.object,
                rights.grantor,
                wanted.intersection(rights.grantable),
            )
        })
        .collect())
}

fn reassign_owned(auth: &mut Authorization, from: &[String], to: &str) -> SqlResult<()> {
    let to = oid_of(auth, to)?;
    for name in from {
        let from = oid_of(auth, name)?;
        let owned: Vec<ObjectId> = auth
            .owners
            .iter()
            .filter(|(_, o)| **o == from)
            .map(|(object, _)| object.clone())
            .collect();
        for object in owned {
            auth.set_owner(&object, to);
        }
    }
    Ok(())
}

/// `DROP OWNED BY`: the privileges granted to the roles go (memberships stay, as in
/// PostgreSQL 15); a role that owns objects is refused, since dropping them is not built.
fn drop_owned(auth: &mut Authorization, roles: &[String]) -> SqlResult<()> {
    for name in roles {
        let role = oid_of(auth, name)?;
        if auth.owners.values().any(|o| *o == role) {
            return Err(SqlError::feature_not_supported(format!(
                "DROP OWNED BY a role that owns objects (\"{name}\" does: REASSIGN OWNED BY {name} TO another role first, or drop them)"
            )));
        }
        for acl in auth.acls.values_mut() {
            acl.retain(|i| i.grantee != role);
        }
    }
    Ok(())
}

fn role_exists(name: &str) -> SqlError {
    SqlError::new(
        ErrorKind::DuplicateObject,
        format!("role \"{name}\" already exists"),
    )
}

fn oid_of(auth: &Authorization, name: &str) -> SqlResult<u32> {
    auth.role(name)
        .map(|r| r.oid)
        .ok_or_else(|| undefined_role(name))
}

fn grantee_oids(auth: &Authorization, names: &[String]) -> SqlResult<Vec<u32>> {
    names
        .iter()
        .map(|n| match n.as_str() {
            "public" => Ok(PUBLIC_ROLE_OID),
            name => oid_of(auth, name),
        })
        .collect()
}

fn apply_options(attributes: &mut RoleAttributes, options: &RoleOptions) {
    let set = |field: &mut bool, value: Option<bool>| {
        if let Some(v) = value {
            *field = v;
        }
    };
    set(&mut attributes.superuser, options.superuser);
    set(&mut attributes.inherit, options.inherit);
    set(&mut attributes.create_role, options.create_role);
    set(&mut attributes.create_db, options.create_db);
    set(&mut attributes.login, options.login);
    set(&mut attributes.replication, options.replication);
    set(&mut attributes.bypass_rls, options.bypass_rls);
    if let Some(limit) = options.connection_limit {
        attributes.connection_limit = limit;
    }
}

fn alter_role(auth: &mut Authorization, name: &str, change: RoleChange) -> SqlResult<()> {
    let Some(old) = auth.roles.get(name).cloned() else {
        return Err(match auth.role(name) {
            Some(_) => SqlError::feature_not_supported(
                "changing the bootstrap superuser (the server's --user and --password)",
            ),
            None => undefined_role(name),
        });
    };
    let mut role = (*old).clone();
    match change {
        RoleChange::Options(options) => {
            apply_options(&mut role.attributes, &options);
            if let Some(password) = options.password {
                role.password = password;
            }
            if let Some(valid_until) = options.valid_until {
                role.valid_until = valid_until;
            }
        }
        RoleChange::Rename(new) => {
            if auth.role(&new).is_some() {
                return Err(role_exists(&new));
            }
            auth.roles.remove(name);
            role.name = new;
        }
        RoleChange::Setting(setting, Some(value)) => {
            role.settings.insert(setting, value);
        }
        RoleChange::Setting(setting, None) => {
            role.settings.remove(&setting);
        }
        RoleChange::ResetAllSettings => role.settings.clear(),
    }
    auth.roles.insert(role.name.clone(), Arc::new(role));
    Ok(())
}

/// How DROP ROLE's detail names an object: `table t`, `schema public`, ...
fn describer(catalog: &Catalog) -> impl Fn(&ObjectId) -> String {
    let names: Vec<(ObjectId, String)> = catalog
        .tables
        .values()
        .map(|t| (ObjectId::Relation(t.id), format!("table {}", t.name)))
        .chain(
            catalog
                .views
                .values()
                .map(|v| (ObjectId::Relation(v.id), format!("view {}", v.name))),
        )
        .chain(
            catalog
                .sequences
                .values()
                .map(|s| (ObjectId::Sequence(s.id), format!("sequence {}", s.name))),
        )
        .collect();
    move |object| match object {
        ObjectId::Procedure(name) => format!("procedure {name}"),
        ObjectId::Schema(name) => format!("schema {name}"),
        ObjectId::Database => "database ledger".to_owned(),
        other => names
            .iter()
            .find(|(o, _)| o == other)
            .map_or_else(|| format!("{other:?}"), |(_, n)| n.clone()),
    }
}

/// The targets that still exist: one dropped since the statement bound is the error it
/// would have been then.
fn live_targets(
    live: &BTreeSet<ObjectId>,
    targets: Vec<GrantTarget>,
) -> SqlResult<Vec<GrantTarget>> {
    for t in &targets {
        match &t.object {
            ObjectId::Relation(_) | ObjectId::Sequence(_) if !live.contains(&t.object) => {
                return Err(SqlError::undefined_table(&t.name))
            }
            ObjectId::Procedure(_) if !live.contains(&t.object) => {
                return Err(SqlError::new(
                    ErrorKind::UndefinedFunction,
                    format!("procedure {} does not exist", t.name),
                ))
            }
            _ => {}
        }
    }
    Ok(targets)
}

/// The objects roles can own, as they are now (`own_new_objects` compares).
pub(crate) fn owned_objects(catalog: &Catalog) -> BTreeSet<ObjectId> {
    let relations = catalog
        .tables
        .values()
        .map(|t| ObjectId::Relation(t.id))
        .chain(catalog.views.values().map(|v| ObjectId::Relation(v.id)));
    let sequences = catalog.sequences.values().map(|s| ObjectId::Sequence(s.id));
    let procedures = catalog
        .procedures
        .keys()
        .map(|p| ObjectId::Procedure(p.clone()));
    relations.chain(sequences).chain(procedures).collect()
}

/// What a change by role `owner` created (what was not there `before`) is `owner`'s.
pub(crate) fn own_new_objects(catalog: &mut Catalog, before: &BTreeSet<ObjectId>, owner: u32) {
    for object in owned_objects(catalog).difference(before) {
        catalog.authorization.owners.insert(object.clone(), owner);
    }
}

/// Objects that are gone take their ACLs and owners with them.
pub(crate) fn forget_dropped_objects(catalog: &mut Catalog) {
    let live = owned_objects(catalog);
    let kept = |object: &ObjectId| {
        matches!(object, ObjectId::Schema(_) | ObjectId::Database) || live.contains(object)
    };
    catalog.authorization.acls.retain(|o, _| kept(o));
    catalog.authorization.owners.retain(|o, _| kept(o));
}
