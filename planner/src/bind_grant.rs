//! Binding GRANT and REVOKE of privileges on tables, views, sequences, procedures, the
//! `public` schema and the database, and `ALTER TABLE ... OWNER TO`. The objects are
//! resolved here; what the statement's role may grant, and who is recorded as the grantor,
//! follows PostgreSQL: an object's owner (or a superuser) grants as the owner, anyone else
//! only what it holds with the grant option — a warning says when that is not all, an
//! error when it holds nothing.

use plan::*;
use sql::ast;
use sql::{ErrorKind, SqlError, SqlResult};

use crate::bind::{object_name, Binder};

/// The database's name: there is one.
const DATABASE: &str = "ledger";

fn target(object: ObjectId, name: &str, kind: ObjectKind) -> GrantTarget {
    GrantTarget {
        object,
        name: name.to_owned(),
        kind,
    }
}

impl Binder<'_> {
    /// A relation named in a GRANT, as table, view or sequence.
    pub(crate) fn relation_target(&self, name: &ast::ObjectName) -> SqlResult<GrantTarget> {
        let (schema, name) = object_name(name)?;
        if !matches!(schema.as_deref(), None | Some("public")) {
            return Err(SqlError::feature_not_supported(format!(
                "privileges on relations outside schema public ({})",
                schema.unwrap_or_default()
            )));
        }
        let catalog = self.catalog;
        if let Some(t) = catalog.table(&name) {
            return Ok(target(ObjectId::Relation(t.id), &name, ObjectKind::Table));
        }
        if let Some(v) = catalog.views.get(&name) {
            return Ok(target(ObjectId::Relation(v.id), &name, ObjectKind::View));
        }
        if let Some(s) = catalog.sequences.get(&name) {
            return Ok(target(
                ObjectId::Sequence(s.id),
                &name,
                ObjectKind::Sequence,
            ));
        }
        if SystemTable::lookup(None, &name).is_some() {
            return Err(SqlError::feature_not_supported(format!(
                "privileges on system catalog \"{name}\" (every role may read the catalogs)"
            )));
        }
        Err(SqlError::undefined_table(&name))
    }

    fn grant_targets(
        &self,
        objects: &ast::GrantObjects,
        routines: bool,
    ) -> SqlResult<Vec<GrantTarget>> {
        use ast::GrantObjects as G;
        Ok(match objects {
            G::Tables(names) => names
                .iter()
                .map(|n| self.relation_target(n))
                .collect::<SqlResult<_>>()?,
            G::Sequences(names) => {
                let mut out = Vec::new();
                for n in names {
                    let t = self.relation_target(n)?;
                    if t.kind != ObjectKind::Sequence {
                        return Err(SqlError::new(
                            ErrorKind::WrongObjectType,
                            format!("\"{}\" is not a sequence", t.name),
                        ));
                    }
                    out.push(t);
                }
                out
            }
            G::Schemas(names) => names
                .iter()
                .map(|n| {
                    public_schema(n)
                        .map(|s| target(ObjectId::Schema(s.clone()), &s, ObjectKind::Schema))
                })
                .collect::<SqlResult<_>>()?,
            G::Databases(names) => {
                for n in names {
                    let (_, name) = object_name(n)?;
                    if name != DATABASE {
                        return Err(SqlError::new(
                            ErrorKind::UndefinedDatabase,
                            format!("database \"{name}\" does not exist"),
                        ));
                    }
                }
                vec![target(ObjectId::Database, DATABASE, ObjectKind::Database)]
            }
            G::Procedure { name, .. } => vec![self.procedure_target(name, ObjectKind::Procedure)?],
            G::Function { name, .. } => vec![self.procedure_target(name, ObjectKind::Function)?],
            G::AllTablesInSchema { schemas } => self.all_in_schema(schemas, ObjectKind::Table)?,
            G::AllSequencesInSchema { schemas } => {
                self.all_in_schema(schemas, ObjectKind::Sequence)?
            }
            // hotledger's stored routines are all procedures, which ALL FUNCTIONS leaves out
            // (as PostgreSQL does); ALL PROCEDURES and ALL ROUTINES take them.
            G::AllFunctionsInSchema { schemas } if routines => {
                self.all_in_schema(schemas, ObjectKind::Procedure)?
            }
            G::AllFunctionsInSchema { schemas } => {
                self.all_in_schema(schemas, ObjectKind::Function)?
            }
            other => {
                return Err(SqlError::feature_not_supported(format!(
                    "privileges on {}",
                    other.to_string().chars().take(40).collect::<String>()
                )))
            }
        })
    }

    /// `ALL {TABLES | SEQUENCES | PROCEDURES | FUNCTIONS} IN SCHEMA public`: tables take the
    /// views too, as in PostgreSQL; there are no functions.
    fn all_in_schema(
        &self,
        schemas: &[ast::ObjectName],
        kind: ObjectKind,
    ) -> SqlResult<Vec<GrantTarget>> {
        for s in schemas {
            public_schema(s)?;
        }
        let catalog = self.catalog;
        Ok(match kind {
            ObjectKind::Table => catalog
                .tables
                .values()
                .map(|t| target(ObjectId::Relation(t.id), &t.name, ObjectKind::Table))
                .chain(
                    catalog
                        .views
                        .values()
                        .map(|v| target(ObjectId::Relation(v.id), &v.name, ObjectKind::View)),
                )
                .collect(),
            ObjectKind::Sequence => catalog
                .sequences
                .values()
                .map(|s| target(ObjectId::Sequence(s.id), &s.name, ObjectKind::Sequence))
                .collect(),
            ObjectKind::Procedure => catalog
                .procedures
                .keys()
                .map(|p| target(ObjectId::Procedure(p.clone()), p, ObjectKind::Procedure))
                .collect(),
            _ => Vec::new(),
        })
    }

    fn procedure_target(&self, name: &ast::ObjectName, kind: ObjectKind) -> SqlResult<GrantTarget> {
        let (_, name) = object_name(name)?;
        match self.catalog.procedures.get(&name) {
            Some(_) if kind == ObjectKind::Procedure => Ok(target(
                ObjectId::Procedure(name.clone()),
                &name,
                ObjectKind::Procedure,
            )),
            Some(_) => Err(SqlError::new(
                ErrorKind::WrongObjectType,
                format!("{name} is not a function"),
            )),
            None => Err(SqlError::new(
                ErrorKind::UndefinedFunction,
                format!("could not find a {} named \"{name}\"", kind.name()),
            )),
        }
    }

    /// The grantees of a GRANT or REVOKE by name (`public` for PUBLIC); each must exist.
    fn grantees(&self, grantees: &[ast::Grantee]) -> SqlResult<Vec<String>> {
        let mut out = Vec::new();
        for g in grantees {
            let name = match (&g.grantee_type, &g.name) {
                (ast::GranteesType::Public, _) => "public".to_owned(),
                (
                    ast::GranteesType::None
                    | ast::GranteesType::Role
                    | ast::GranteesType::User
                    | ast::GranteesType::Group,
                    Some(ast::GranteeName::ObjectName(n)),
                ) => match n.0.as_slice() {
                    [ast::ObjectNamePart::Identifier(i)] => {
                        let name = self.role_spec(i);
                        if name == "public" && i.quote_style.is_none() {
                            name
                        } else {
                            self.catalog
                                .authorization
                                .role(&name)
                                .ok_or_else(|| undefined_role(&name))?
                                .name
                                .clone()
                        }
                    }
                    _ => return Err(SqlError::syntax(format!("improper role name: {n}"))),
                },
                _ => return Err(SqlError::feature_not_supported(format!("grantee {g}"))),
            };
            out.push(name);
        }
        Ok(out)
    }

    /// `GRANT privileges ON objects TO grantees` (`routines`: written `ALL PROCEDURES` or
    /// `ALL ROUTINES IN SCHEMA`).
    pub(crate) fn grant(&mut self, grant: &ast::Grant, routines: bool) -> SqlResult<Plan> {
        if grant.as_grantor.is_some() || grant.granted_by.is_some() {
            return Err(SqlError::feature_not_supported("GRANTED BY"));
        }
        let Some(objects) = &grant.objects else {
            return Err(SqlError::syntax("GRANT needs ON and the objects"));
        };
        let targets = self.grant_targets(objects, routines)?;
        let grantees = self.grantees(&grant.grantees)?;
        if grant.with_grant_option && grantees.iter().any(|g| g == "public") {
            return Err(SqlError::new(
                ErrorKind::InvalidGrantOperation,
                "grant options can only be granted to roles",
            ));
        }
        let privileges = privileges(&grant.privileges)?;
        self.check_privilege_kinds(&targets, privileges)?;
        self.check_grant_rights(&targets, privileges, "granted")?;
        Ok(Plan::Ddl(DdlPlan::Roles(RolePlan::Grant {
            targets,
            grantees,
            privileges,
            grantable: grant.with_grant_option,
            actor: self.role,
        })))
    }

    pub(crate) fn revoke(&mut self, revoke: &ast::Revoke, routines: bool) -> SqlResult<Plan> {
        if revoke.granted_by.is_some() {
            return Err(SqlError::feature_not_supported("GRANTED BY"));
        }
        let Some(objects) = &revoke.objects else {
            return Err(SqlError::syntax("REVOKE needs ON and the objects"));
        };
        let targets = self.grant_targets(objects, routines)?;
        let grantees = self.grantees(&revoke.grantees)?;
        let privileges = privileges(&revoke.privileges)?;
        self.check_privilege_kinds(&targets, privileges)?;
        self.check_grant_rights(&targets, privileges, "revoked")?;
        Ok(Plan::Ddl(DdlPlan::Roles(RolePlan::Revoke {
            targets,
            grantees,
            privileges,
            options_only: revoke.grant_option_for,
            cascade: matches!(revoke.cascade, Some(ast::CascadeOption::Cascade)),
            actor: self.role,
        })))
    }

    /// A GRANT or REVOKE `ON ALL PROCEDURES | ROUTINES IN SCHEMA`.
    pub(crate) fn privileges_on_all_routines(
        &mut self,
        statement: &ast::Statement,
    ) -> SqlResult<Plan> {
        match statement {
            ast::Statement::Grant(g) => self.grant(g, true),
            ast::Statement::Revoke(r) => self.revoke(r, true),
            _ => Err(SqlError::internal("ALL ROUTINES outside GRANT or REVOKE")),
        }
    }

    /// Each privilege named must be one the object's kind has (0LP01).
    fn check_privilege_kinds(
        &self,
        targets: &[GrantTarget],
        privileges: Option<Privileges>,
    ) -> SqlResult<()> {
        let Some(privileges) = privileges else {
            return Ok(());
        };
        for t in targets {
            let extra = privileges.without(t.object.all_privileges());
            if let Some(first) = extra.each().next() {
                return Err(SqlError::new(
                    ErrorKind::InvalidGrantOperation,
                    format!(
                        "invalid privilege type {} for {}",
                        first.keywords(),
                        t.kind.name()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The statement's role holds nothing to grant on an object: an error when it holds no
    /// privilege there at all, else a warning; one that holds only some: a warning.
    fn check_grant_rights(
        &mut self,
        targets: &[GrantTarget],
        privileges: Option<Privileges>,
        verb: &str,
    ) -> SqlResult<()> {
        let could = if verb == "granted" {
            "were granted"
        } else {
            "could be revoked"
        };
        for t in targets {
            let wanted = privileges.unwrap_or_else(|| t.object.all_privileges());
            let rights = self
                .catalog
                .authorization
                .grant_rights(self.role, &t.object);
            if rights.grantable.is_empty() {
                if rights.held.is_empty() {
                    return Err(SqlError::new(
                        ErrorKind::InsufficientPrivilege,
                        format!("permission denied for {} {}", t.kind.name(), t.name),
                    ));
                }
                self.notices.push(SqlError::new(
                    ErrorKind::Warning,
                    format!("no privileges {could} for \"{}\"", t.name),
                ));
            } else if !rights.grantable.contains(wanted) {
                self.notices.push(SqlError::new(
                    ErrorKind::Warning,
                    format!("not all privileges {could} for \"{}\"", t.name),
                ));
            }
        }
        Ok(())
    }

    /// `ALTER TABLE name OWNER TO role` (a table, view or sequence): its owner, or a
    /// superuser, may give it to a role it is a member of that may create in `public`.
    pub(crate) fn set_owner(
        &mut self,
        name: &ast::ObjectName,
        owner: &ast::Owner,
    ) -> SqlResult<Plan> {
        let target = self.relation_target(name)?;
        let owner = match owner {
            ast::Owner::Ident(i) => self.role_spec(i),
            ast::Owner::CurrentRole | ast::Owner::CurrentUser | ast::Owner::SessionUser => {
                self.role_name()
            }
        };
        self.give_to(target, owner, ObjectKind::Table)
    }

    /// `ALTER {VIEW | SEQUENCE | PROCEDURE | FUNCTION} name OWNER TO role`: the object must
    /// be of the kind named (42809).
    pub(crate) fn set_owner_of(
        &mut self,
        kind: sql::OwnedKind,
        name: &ast::ObjectName,
        owner: &ast::Ident,
    ) -> SqlResult<Plan> {
        let target = match kind {
            sql::OwnedKind::Procedure => self.procedure_target(name, ObjectKind::Procedure)?,
            sql::OwnedKind::Function => self.procedure_target(name, ObjectKind::Function)?,
            sql::OwnedKind::View | sql::OwnedKind::Sequence => {
                let wanted = match kind {
                    sql::OwnedKind::View => ObjectKind::View,
                    _ => ObjectKind::Sequence,
                };
                let target = self.relation_target(name)?;
                if target.kind != wanted {
                    return Err(SqlError::new(
                        ErrorKind::WrongObjectType,
                        format!("\"{}\" is not a {}", target.name, wanted.name()),
                    ));
                }
                target
            }
        };
        let owner = self.role_spec(owner);
        let spelled = match kind {
            sql::OwnedKind::View => ObjectKind::View,
            sql::OwnedKind::Sequence => ObjectKind::Sequence,
            sql::OwnedKind::Procedure => ObjectKind::Procedure,
            sql::OwnedKind::Function => ObjectKind::Function,
        };
        self.give_to(target, owner, spelled)
    }

    /// Gives `target` to role `owner`: its owner, or a superuser, may give it to a role it
    /// is a member of that may create in `public`.
    fn give_to(
        &mut self,
        target: GrantTarget,
        owner: String,
        spelled: ObjectKind,
    ) -> SqlResult<Plan> {
        let auth = &self.catalog.authorization;
        let new = auth.role(&owner).ok_or_else(|| undefined_role(&owner))?.oid;
        self.need_owner(target.object.clone(), target.kind, &target.name);
        if !auth.is_superuser(self.role) {
            if !auth.member_of(self.role).contains(&new) {
                return Err(SqlError::new(
                    ErrorKind::InsufficientPrivilege,
                    format!("must be member of role \"{owner}\""),
                ));
            }
            let (held, _) = auth.held(new, &ObjectId::Schema("public".into()));
            if !held.contains(Privileges::CREATE) {
                return Err(SqlError::new(
                    ErrorKind::InsufficientPrivilege,
                    "permission denied for schema public",
                ));
            }
        }
        Ok(Plan::Ddl(DdlPlan::Roles(RolePlan::SetOwner {
            target,
            owner,
            spelled,
        })))
    }
}

impl Binder<'_> {
    /// `has_table_privilege([user,] table, privileges)` and its kin, `pg_has_role`: the
    /// forms without a user ask for the role the statement runs as.
    pub(crate) fn privilege_inquiry(
        &mut self,
        name: &str,
        args: &[ast::Expr],
        scope: &crate::scope::Scope,
    ) -> SqlResult<Expr> {
        let kind = name
            .trim_start_matches("has_")
            .trim_start_matches("pg_has_")
            .trim_end_matches("_privilege");
        let mut bound = Vec::with_capacity(4);
        bound.push(Expr::literal(sql::Value::text(kind)));
        if args.len() == 2 {
            bound.push(Expr::Literal(
                sql::Value::Int(i64::from(self.role)),
                sql::DataType::Oid,
            ));
        }
        for (i, a) in args.iter().enumerate() {
            let e = self.expr(a, scope, None)?;
            let last = i + 1 == args.len();
            bound.push(match e.ty() {
                // A name, or an OID (of the role, the object).
                sql::DataType::Oid | sql::DataType::Int4 | sql::DataType::Int8 if !last => e,
                _ => self.coerce(e, sql::DataType::Text)?,
            });
        }
        Ok(Expr::Function {
            func: Func::HasPrivilege,
            args: bound,
            ty: sql::DataType::Bool,
        })
    }

    /// `pg_get_userbyid(column)`.
    pub(crate) fn role_name_of(&mut self, oid: Expr) -> SqlResult<Expr> {
        Ok(Expr::Function {
            func: Func::UserById,
            args: vec![oid],
            ty: sql::DataType::Name,
        })
    }
}

/// The schema a GRANT names, which must be `public` (3F000 otherwise).
fn public_schema(name: &ast::ObjectName) -> SqlResult<String> {
    let (_, name) = object_name(name)?;
    match name.as_str() {
        "public" => Ok(name),
        "pg_catalog" | "information_schema" => Err(SqlError::feature_not_supported(format!(
            "privileges on schema {name} (every role may read the catalogs)"
        ))),
        _ => Err(SqlError::new(
            ErrorKind::InvalidSchemaName,
            format!("schema \"{name}\" does not exist"),
        )),
    }
}

/// A GRANT's privileges; None for ALL. Column lists are not supported.
fn privileges(p: &ast::Privileges) -> SqlResult<Option<Privileges>> {
    let actions = match p {
        ast::Privileges::All { .. } => return Ok(None),
        ast::Privileges::Actions(actions) => actions,
    };
    let mut set = Privileges::NONE;
    for action in actions {
        use ast::Action as A;
        let (privilege, columns) = match action {
            A::Select { columns } => (Privileges::SELECT, columns.as_ref()),
            A::Insert { columns } => (Privileges::INSERT, columns.as_ref()),
            A::Update { columns } => (Privileges::UPDATE, columns.as_ref()),
            A::References { columns } => (Privileges::REFERENCES, columns.as_ref()),
            A::Delete => (Privileges::DELETE, None),
            A::Truncate => (Privileges::TRUNCATE, None),
            A::Trigger => (Privileges::TRIGGER, None),
            A::Execute { obj_type: None } => (Privileges::EXECUTE, None),
            A::Usage => (Privileges::USAGE, None),
            A::Create { obj_type: None } => (Privileges::CREATE, None),
            A::Connect => (Privileges::CONNECT, None),
            A::Temporary => (Privileges::TEMPORARY, None),
            other => {
                return Err(SqlError::new(
                    ErrorKind::Syntax,
                    format!("unrecognized privilege type \"{other}\""),
                ))
            }
        };
        if columns.is_some_and(|c| !c.is_empty()) {
            return Err(SqlError::feature_not_supported(
                "column privileges (grant on the whole table)",
            ));
        }
        set = set.union(privilege);
    }
    Ok(Some(set))
}
