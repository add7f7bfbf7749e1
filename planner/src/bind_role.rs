//! Binding role statements: CREATE/ALTER/DROP ROLE (and USER), GRANT and REVOKE of role
//! memberships, REASSIGN OWNED and DROP OWNED. Who may do what is PostgreSQL 15's rule,
//! checked here against the catalog as the statement binds (42501); what the statement does
//! is checked again as it applies (`ledger::roles`), against the catalog then.

use plan::*;
use sql::ast;
use sql::{ErrorKind, RoleStatement, SqlError, SqlResult, Value};

use crate::bind::Binder;
use crate::bind_expr::ident;

fn denied(message: impl Into<String>) -> SqlError {
    SqlError::new(ErrorKind::InsufficientPrivilege, message)
}

/// The bootstrap superuser is the server's `--user` and `--password`, given at every start.
fn bootstrap_unchangeable(what: &str) -> SqlError {
    SqlError::feature_not_supported(format!(
        "{what} the bootstrap superuser (its name and password are the server's --user and --password)"
    ))
}

impl Binder<'_> {
    fn actor(&self) -> std::sync::Arc<RoleDef> {
        self.catalog
            .authorization
            .role_by_oid(self.role)
            .cloned()
            .unwrap_or_else(|| self.catalog.authorization.bootstrap.clone())
    }

    /// A role named in a statement, which must exist (42704).
    fn existing_role(&self, name: &str) -> SqlResult<std::sync::Arc<RoleDef>> {
        self.catalog
            .authorization
            .role(name)
            .cloned()
            .ok_or_else(|| undefined_role(name))
    }

    /// A role as a GRANT or REVOKE names it: `CURRENT_USER`, `SESSION_USER` and
    /// `CURRENT_ROLE` are the role the statement runs as.
    pub(crate) fn role_spec(&self, i: &ast::Ident) -> String {
        match (i.quote_style, i.value.to_ascii_lowercase().as_str()) {
            (None, "current_user" | "session_user" | "current_role") => self.role_name(),
            _ => ident(i),
        }
    }

    /// `CREATE ROLE`, or `CREATE USER` (`user`: LOGIN unless it says NOLOGIN).
    pub(crate) fn create_role(
        &mut self,
        statement: &ast::Statement,
        user: bool,
    ) -> SqlResult<Plan> {
        let ast::Statement::CreateRole(create) = statement else {
            return Err(SqlError::internal("CREATE USER that is not a CREATE ROLE"));
        };
        let actor = self.actor();
        if !actor.attributes.superuser && !actor.attributes.create_role {
            return Err(denied("permission denied to create role"));
        }
        let mut options = self.create_role_options(create)?;
        if user && options.login.is_none() {
            options.login = Some(true);
        }
        self.check_attribute_rights(&actor, &options, "create")?;
        let [name] = create.names.as_slice() else {
            return Err(SqlError::syntax("CREATE ROLE takes one role name"));
        };
        let name = crate::bind::object_name(name)?.1;
        check_new_role_name(&name)?;
        if self.catalog.authorization.role(&name).is_some() {
            return Err(role_exists(&name));
        }
        let mut memberships = Vec::new();
        for role in &create.in_role {
            let role = self.existing_role(&ident(role))?;
            self.check_administers(&actor, &role)?;
            memberships.push((role.name.clone(), name.clone(), false));
        }
        for member in create.role.iter().chain(&create.user) {
            memberships.push((
                name.clone(),
                self.existing_role(&ident(member))?.name.clone(),
                false,
            ));
        }
        for admin in &create.admin {
            memberships.push((
                name.clone(),
                self.existing_role(&ident(admin))?.name.clone(),
                true,
            ));
        }
        if !create.in_group.is_empty() || create.authorization_owner.is_some() {
            return Err(SqlError::feature_not_supported("CREATE ROLE ... IN GROUP"));
        }
        Ok(Plan::Ddl(DdlPlan::Roles(RolePlan::CreateRole {
            name,
            options,
            memberships,
        })))
    }

    fn create_role_options(&self, create: &ast::CreateRole) -> SqlResult<RoleOptions> {
        Ok(RoleOptions {
            superuser: create.superuser,
            inherit: create.inherit,
            create_role: create.create_role,
            create_db: create.create_db,
            login: create.login,
            replication: create.replication,
            bypass_rls: create.bypassrls,
            connection_limit: create
                .connection_limit
                .as_ref()
                .map(connection_limit)
                .transpose()?,
            password: create.password.as_ref().map(password).transpose()?,
            valid_until: create.valid_until.as_ref().map(valid_until).transpose()?,
        })
    }

    /// Only a superuser gives the attributes that bypass every check.
    fn check_attribute_rights(
        &self,
        actor: &RoleDef,
        options: &RoleOptions,
        verb: &str,
    ) -> SqlResult<()> {
        if actor.attributes.superuser {
            return Ok(());
        }
        let (superusers, replication, bypass) = match verb {
            "create" => (
                "must be superuser to create superusers",
                "must be superuser to create replication users",
                "must be superuser to create bypassrls users",
            ),
            _ => (
                "must be superuser to alter superuser roles or change superuser attribute",
                "must be superuser to alter replication roles or change replication attribute",
                "must be superuser to change bypassrls attribute",
            ),
        };
        if options.superuser.is_some() {
            return Err(denied(superusers));
        }
        if options.replication.is_some() {
            return Err(denied(replication));
        }
        if options.bypass_rls.is_some() {
            return Err(denied(bypass));
        }
        Ok(())
    }

    /// `actor` may grant membership in `role` (PostgreSQL 15: a superuser; CREATEROLE for
    /// a role that is not a superuser; or the admin option).
    fn check_administers(&self, actor: &RoleDef, role: &RoleDef) -> SqlResult<()> {
        if self
            .catalog
            .authorization
            .may_administer(actor.oid, role.oid)
        {
            return Ok(());
        }
        if role.attributes.superuser {
            return Err(denied("must be superuser to alter superusers"));
        }
        Err(denied(format!(
            "must have admin option on role \"{}\"",
            role.name
        )))
    }

    pub(crate) fn alter_role(
        &mut self,
        name: &ast::Ident,
        operation: &ast::AlterRoleOperation,
    ) -> SqlResult<Plan> {
        let target = self.existing_role(&ident(name))?;
        let actor = self.actor();
        let manages = actor.attributes.superuser
            || (actor.attributes.create_role && !target.attributes.superuser);
        // A role may change its own settings.
        let sets = manages || target.oid == actor.oid;
        let change = match operation {
            ast::AlterRoleOperation::WithOptions { options } => {
                self.alter_role_options(&actor, &target, manages, options)?
            }
            ast::AlterRoleOperation::RenameRole { role_name } => {
                self.rename_role(&target, manages, ident(role_name))?
            }
            ast::AlterRoleOperation::Set {
                config_name,
                config_value,
                in_database: None,
            } if sets => {
                let name = config_name.to_string().to_ascii_lowercase();
                let value = match config_value {
                    ast::SetConfigValue::Default => None,
                    ast::SetConfigValue::FromCurrent => {
                        return Err(SqlError::feature_not_supported("SET ... FROM CURRENT"))
                    }
                    ast::SetConfigValue::Value(e) => Some(setting_value(e)?),
                };
                RoleChange::Setting(name, value)
            }
            ast::AlterRoleOperation::Reset {
                config_name,
                in_database: None,
            } if sets => match config_name {
                ast::ResetConfig::ALL => RoleChange::ResetAllSettings,
                ast::ResetConfig::ConfigName(n) => {
                    RoleChange::Setting(n.to_string().to_ascii_lowercase(), None)
                }
            },
            ast::AlterRoleOperation::Set {
                in_database: None, ..
            }
            | ast::AlterRoleOperation::Reset {
                in_database: None, ..
            } => return Err(denied("permission denied")),
            other => {
                return Err(SqlError::feature_not_supported(format!(
                    "ALTER ROLE {}",
                    other.to_string().chars().take(40).collect::<String>()
                )))
            }
        };
        Ok(Plan::Ddl(DdlPlan::Roles(RolePlan::AlterRole {
            name: target.name.clone(),
            change,
        })))
    }

    /// `ALTER ROLE name [WITH] options`: a role that `manages` the target changes any of
    /// them but the superuser's; any role its own password.
    fn alter_role_options(
        &self,
        actor: &RoleDef,
        target: &RoleDef,
        manages: bool,
        options: &[ast::RoleOption],
    ) -> SqlResult<RoleChange> {
        let options = role_options(options)?;
        self.check_attribute_rights(actor, &options, "alter")?;
        if target.attributes.superuser && !actor.attributes.superuser {
            return Err(denied(
                "must be superuser to alter superuser roles or change superuser attribute",
            ));
        }
        let own_password = target.oid == actor.oid
            && options
                == RoleOptions {
                    password: options.password.clone(),
                    ..RoleOptions::default()
                };
        if !manages && !own_password {
            return Err(denied("permission denied"));
        }
        if target.oid == BOOTSTRAP_ROLE_OID {
            return Err(bootstrap_unchangeable(
                "changing the attributes or password of",
            ));
        }
        Ok(RoleChange::Options(options))
    }

    fn rename_role(&self, target: &RoleDef, manages: bool, new: String) -> SqlResult<RoleChange> {
        if target.oid == BOOTSTRAP_ROLE_OID {
            return Err(bootstrap_unchangeable("renaming"));
        }
        if target.oid == self.role {
            return Err(SqlError::feature_not_supported("renaming the current user"));
        }
        if !manages {
            return Err(denied("permission denied to rename role"));
        }
        check_new_role_name(&new)?;
        if self.catalog.authorization.role(&new).is_some() {
            return Err(role_exists(&new));
        }
        Ok(RoleChange::Rename(new))
    }

    pub(crate) fn drop_roles(
        &mut self,
        names: &[ast::ObjectName],
        if_exists: bool,
    ) -> SqlResult<Plan> {
        let actor = self.actor();
        if !actor.attributes.superuser && !actor.attributes.create_role {
            return Err(denied("permission denied to drop role"));
        }
        let mut dropped = Vec::new();
        for name in crate::bind::object_names(names)? {
            let Some(role) = self.catalog.authorization.role(&name).cloned() else {
                if if_exists {
                    self.notices.push(SqlError::new(
                        ErrorKind::Notice,
                        format!("role \"{name}\" does not exist, skipping"),
                    ));
                    continue;
                }
                return Err(undefined_role(&name));
            };
            if role.oid == self.role {
                return Err(SqlError::new(
                    ErrorKind::ObjectInUse,
                    "current user cannot be dropped",
                ));
            }
            if role.oid == BOOTSTRAP_ROLE_OID {
                return Err(SqlError::new(
                    ErrorKind::DependentObjectsStillExist,
                    format!(
                        "cannot drop role {name} because it is required by the database system"
                    ),
                ));
            }
            if role.attributes.superuser && !actor.attributes.superuser {
                return Err(denied("must be superuser to drop superusers"));
            }
            dropped.push(name);
        }
        Ok(Plan::Ddl(DdlPlan::Roles(RolePlan::DropRoles {
            names: dropped,
            if_exists,
        })))
    }

    pub(crate) fn role_statement(&mut self, statement: &RoleStatement) -> SqlResult<Plan> {
        let plan = match statement {
            RoleStatement::GrantRoles {
                roles,
                members,
                admin,
                granted_by,
            } => {
                self.refuse_granted_by(granted_by.as_ref())?;
                let (roles, members) = self.membership_names(roles, members)?;
                self.notice_existing_memberships(&roles, &members);
                RolePlan::GrantRoles {
                    roles,
                    members,
                    admin: *admin,
                    grantor: self.role,
                }
            }
            RoleStatement::RevokeRoles {
                roles,
                members,
                admin_option_only,
                granted_by,
                cascade: _,
            } => {
                self.refuse_granted_by(granted_by.as_ref())?;
                let (roles, members) = self.membership_names(roles, members)?;
                self.warn_missing_memberships(&roles, &members);
                RolePlan::RevokeRoles {
                    roles,
                    members,
                    admin_option_only: *admin_option_only,
                }
            }
            RoleStatement::ReassignOwned { from, to } => {
                let from: Vec<String> = from.iter().map(|r| self.role_spec(r)).collect();
                let to = self.role_spec(to);
                for name in from.iter().chain(std::iter::once(&to)) {
                    let role = self.existing_role(name)?;
                    self.check_acts_for(&role, "permission denied to reassign objects")?;
                }
                if from.iter().any(|n| {
                    self.catalog.authorization.role(n).map(|r| r.oid) == Some(BOOTSTRAP_ROLE_OID)
                }) {
                    return Err(SqlError::new(
                        ErrorKind::DependentObjectsStillExist,
                        format!(
                            "cannot reassign ownership of objects owned by role {} because they are required by the database system",
                            self.catalog.authorization.bootstrap.name
                        ),
                    ));
                }
                RolePlan::ReassignOwned { from, to }
            }
            RoleStatement::OwnerTo { kind, name, owner } => {
                return self.set_owner_of(*kind, name, owner)
            }
            RoleStatement::DropOwned { roles, cascade: _ } => {
                let roles: Vec<String> = roles.iter().map(|r| self.role_spec(r)).collect();
                for name in &roles {
                    let role = self.existing_role(name)?;
                    self.check_acts_for(&role, "permission denied to drop objects")?;
                    if role.oid == BOOTSTRAP_ROLE_OID {
                        return Err(SqlError::new(
                            ErrorKind::DependentObjectsStillExist,
                            format!(
                                "cannot drop objects owned by role {name} because they are required by the database system"
                            ),
                        ));
                    }
                }
                RolePlan::DropOwned { roles }
            }
        };
        Ok(Plan::Ddl(DdlPlan::Roles(plan)))
    }

    fn refuse_granted_by(&self, granted_by: Option<&ast::Ident>) -> SqlResult<()> {
        match granted_by {
            Some(g) if self.role_spec(g) != self.role_name() => Err(
                SqlError::feature_not_supported("GRANTED BY a role other than the current one"),
            ),
            _ => Ok(()),
        }
    }

    /// A GRANT or REVOKE of memberships: every role exists and the statement's role may
    /// administer each granted role.
    fn membership_names(
        &self,
        roles: &[ast::Ident],
        members: &[ast::Ident],
    ) -> SqlResult<(Vec<String>, Vec<String>)> {
        let actor = self.actor();
        let mut role_names = Vec::new();
        for r in roles {
            let role = self.existing_role(&self.role_spec(r))?;
            self.check_administers(&actor, &role)?;
            role_names.push(role.name.clone());
        }
        let mut member_names = Vec::new();
        for m in members {
            member_names.push(self.existing_role(&self.role_spec(m))?.name.clone());
        }
        Ok((role_names, member_names))
    }

    fn notice_existing_memberships(&mut self, roles: &[String], members: &[String]) {
        for (role, member) in self.memberships_held(roles, members, true) {
            self.notices.push(SqlError::new(
                ErrorKind::Notice,
                format!("role \"{member}\" is already a member of role \"{role}\""),
            ));
        }
    }

    fn warn_missing_memberships(&mut self, roles: &[String], members: &[String]) {
        for (role, member) in self.memberships_held(roles, members, false) {
            self.notices.push(SqlError::new(
                ErrorKind::Warning,
                format!("role \"{member}\" is not a member of role \"{role}\""),
            ));
        }
    }

    /// The (role, member) pairs named that are (`held`) or are not memberships now.
    fn memberships_held<'n>(
        &self,
        roles: &'n [String],
        members: &'n [String],
        held: bool,
    ) -> Vec<(&'n str, &'n str)> {
        let auth = &self.catalog.authorization;
        let mut pairs = Vec::new();
        for role in roles {
            for member in members {
                let (Some(r), Some(m)) = (auth.role(role), auth.role(member)) else {
                    continue;
                };
                let is = auth
                    .memberships
                    .iter()
                    .any(|x| x.role == r.oid && x.member == m.oid);
                if is == held {
                    pairs.push((role.as_str(), member.as_str()));
                }
            }
        }
        pairs
    }

    /// The statement's role has `role`'s privileges (or is a superuser).
    fn check_acts_for(&self, role: &RoleDef, message: &str) -> SqlResult<()> {
        let auth = &self.catalog.authorization;
        if auth.is_superuser(self.role) || auth.privileged_as(self.role).contains(&role.oid) {
            Ok(())
        } else {
            Err(denied(message))
        }
    }

    /// `pg_authid` holds the roles' password verifiers: a superuser's alone, as in
    /// PostgreSQL (every role may read `pg_roles`, which shows them as `********`).
    pub(crate) fn check_system_table(&self, table: SystemTable) -> SqlResult<()> {
        if table == SystemTable::PgAuthid && !self.catalog.authorization.is_superuser(self.role) {
            return Err(denied("permission denied for table pg_authid"));
        }
        Ok(())
    }

    /// VACUUM, ANALYZE and CHECKPOINT, which have nothing to do here; CHECKPOINT is a
    /// superuser's, as in PostgreSQL.
    pub(crate) fn maintenance(&self, tag: &'static str) -> SqlResult<Plan> {
        if tag == "CHECKPOINT" {
            if !self.catalog.authorization.is_superuser(self.role) {
                return Err(denied(
                    "must be superuser or have privileges of pg_checkpoint to do CHECKPOINT",
                ));
            }
            return Ok(Plan::Checkpoint);
        }
        Ok(Plan::NoOp(tag))
    }
}

fn role_exists(name: &str) -> SqlError {
    SqlError::new(
        ErrorKind::DuplicateObject,
        format!("role \"{name}\" already exists"),
    )
}

/// ALTER ROLE's options as CREATE ROLE's fields.
fn role_options(options: &[ast::RoleOption]) -> SqlResult<RoleOptions> {
    let mut out = RoleOptions::default();
    for option in options {
        match option {
            ast::RoleOption::BypassRLS(b) => out.bypass_rls = Some(*b),
            ast::RoleOption::ConnectionLimit(e) => {
                out.connection_limit = Some(connection_limit(e)?)
            }
            ast::RoleOption::CreateDB(b) => out.create_db = Some(*b),
            ast::RoleOption::CreateRole(b) => out.create_role = Some(*b),
            ast::RoleOption::Inherit(b) => out.inherit = Some(*b),
            ast::RoleOption::Login(b) => out.login = Some(*b),
            ast::RoleOption::Password(p) => out.password = Some(password(p)?),
            ast::RoleOption::Replication(b) => out.replication = Some(*b),
            ast::RoleOption::SuperUser(b) => out.superuser = Some(*b),
            ast::RoleOption::ValidUntil(e) => out.valid_until = Some(valid_until(e)?),
        }
    }
    Ok(out)
}

fn constant_text(e: &ast::Expr) -> SqlResult<String> {
    match e {
        ast::Expr::Value(v) => crate::bind_expr::literal_text(&v.value),
        other => Err(SqlError::syntax(format!(
            "expected a constant, found {other}"
        ))),
    }
}

fn connection_limit(e: &ast::Expr) -> SqlResult<i32> {
    let text = match e {
        ast::Expr::UnaryOp {
            op: ast::UnaryOperator::Minus,
            expr,
        } => format!("-{}", constant_text(expr)?),
        other => constant_text(other)?,
    };
    // A negative limit arrives counted down from 2^32 (see sql's role statements).
    let n = match text.parse::<i64>() {
        Ok(n) if n > i64::from(i32::MAX) => n - sql::NEGATIVE_LIMIT_BASE as i64,
        Ok(n) => n,
        Err(_) => {
            return Err(SqlError::new(
                ErrorKind::InvalidText,
                format!("invalid input syntax for type integer: \"{text}\""),
            ))
        }
    };
    match i32::try_from(n) {
        Ok(n) if n >= -1 => Ok(n),
        _ => Err(SqlError::new(
            ErrorKind::InvalidParameterValue,
            format!("invalid connection limit: {n}"),
        )),
    }
}

/// `PASSWORD 'text'` as the verifier it is stored as; `PASSWORD NULL` as None.
fn password(p: &ast::Password) -> SqlResult<Option<String>> {
    match p {
        ast::Password::NullPassword => Ok(None),
        ast::Password::Password(e) => {
            let text = match e {
                ast::Expr::Value(v) if matches!(v.value, ast::Value::Null) => return Ok(None),
                other => constant_text(other)?,
            };
            if plan::scram::is_md5_hash(&text) {
                return Err(SqlError::feature_not_supported(
                    "MD5 password hashes (hotledger logs in with SCRAM-SHA-256 only: give the password itself or a SCRAM-SHA-256 verifier)",
                ));
            }
            if text.is_empty() {
                // PostgreSQL stores no password for an empty one, with a notice.
                return Ok(None);
            }
            Ok(Some(plan::scram::stored_password(&text)))
        }
    }
}

/// `VALID UNTIL 'timestamp'`: None for 'infinity'.
fn valid_until(e: &ast::Expr) -> SqlResult<Option<i64>> {
    let text = constant_text(e)?;
    if text.trim().eq_ignore_ascii_case("infinity") {
        return Ok(None);
    }
    match Value::Text(text).cast(sql::DataType::TimestampTz)? {
        Value::TimestampTz(us) => Ok(Some(us)),
        _ => Err(SqlError::internal("a timestamptz cast gave another type")),
    }
}

/// A role setting's value as SET would take it.
fn setting_value(e: &ast::Expr) -> SqlResult<String> {
    match e {
        ast::Expr::Value(v) => crate::bind_expr::literal_text(&v.value),
        ast::Expr::Identifier(i) => Ok(i.value.clone()),
        other => Ok(other.to_string()),
    }
}
