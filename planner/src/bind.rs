//! Binding statements: names resolved against a `Catalog`, types checked, parameters typed,
//! access paths chosen. The result is a `Plan` that any executor can run.

use std::sync::Arc;

use sql::ast;
use sql::{DataType, ErrorKind, Parsed, ParsedStatement, SqlError, SqlResult, Value, ValueRows};

pub(crate) use crate::bind_expr::ident;
use plan::*;

use crate::bind_expr::{literal_text, AggregateContext};
use crate::bind_window::WindowContext;
use crate::scope::{Scope, ScopeColumn};

pub struct Binder<'a> {
    pub(crate) catalog: &'a Catalog,
    pub(crate) params: Vec<DataType>,
    pub(crate) aggregate: Option<AggregateContext>,
    /// Inside a procedure body: its parameters' names, which name `$1..$n` where no column
    /// of that name is in scope (as in PostgreSQL's SQL functions).
    pub(crate) param_names: Vec<String>,
    /// The common table expressions in scope, innermost last (see `Binder::query`).
    pub(crate) ctes: Vec<CommonTable>,
    /// While binding a select list or its ORDER BY: the window functions found.
    pub(crate) window: Option<WindowContext>,
    /// The views whose queries are being bound, outermost first (a view reading itself
    /// is refused).
    pub(crate) expanding_views: Vec<String>,
    /// An INSERT's `OVERRIDING` clause.
    pub(crate) overriding: Option<sql::Overriding>,
    /// The names identity columns give their sequences (`SEQUENCE NAME`), in order.
    pub(crate) sequence_names: std::collections::VecDeque<String>,
    /// The `WITH RECURSIVE` queries bound so far (their ids are 0..n).
    pub(crate) recursive_queries: u32,
    /// How many references to a recursive query's working table were bound.
    pub(crate) working_table_reads: std::cell::Cell<u32>,
    /// What `pg_backend_pid()` answers: the session's process id.
    pub(crate) backend_pid: i32,
    /// The role the statement runs as (`current_user`).
    pub(crate) role: u32,
    /// The role the session logged in as (`session_user`).
    pub(crate) session_role: u32,
    /// The privileges the statement needs, checked once it is bound.
    pub(crate) checks: Vec<AclCheck>,
    /// While a view's query is bound: the view's owner, whose privileges it reads with.
    pub(crate) checking_as: Option<u32>,
    /// Notices for the client (`Bound::notices`).
    pub(crate) notices: Vec<SqlError>,
}

/// A `WITH` query, bound where it is defined; each reference to it runs a copy of its plan.
pub(crate) struct CommonTable {
    pub name: String,
    pub plan: SelectPlan,
    /// The outer row's length where it was defined (see `Rel::CommonTable`).
    pub outer_len: usize,
}

impl<'a> Binder<'a> {
    pub(crate) fn new(
        catalog: &'a Catalog,
        params: Vec<DataType>,
        param_names: Vec<String>,
    ) -> Binder<'a> {
        Binder {
            catalog,
            params,
            aggregate: None,
            param_names,
            ctes: Vec::new(),
            window: None,
            expanding_views: Vec::new(),
            overriding: None,
            sequence_names: Default::default(),
            recursive_queries: 0,
            working_table_reads: Default::default(),
            backend_pid: std::process::id() as i32,
            role: plan::BOOTSTRAP_ROLE_OID,
            session_role: plan::BOOTSTRAP_ROLE_OID,
            checks: Vec::new(),
            checking_as: None,
            notices: Vec::new(),
        }
    }

    /// The statement needs one of `privileges` on `object` (`kind` and `name` for the
    /// message), as the role it runs as — or, in a view's query, as the view's owner.
    pub(crate) fn need(
        &mut self,
        object: ObjectId,
        privileges: Privileges,
        kind: ObjectKind,
        name: &str,
    ) {
        if self.passes_every_check() {
            return;
        }
        self.checks.push(AclCheck {
            object,
            need: Need::AnyOf(privileges),
            name: name.to_owned(),
            kind,
            as_role: self.checking_as,
        });
    }

    /// The statement changes or drops `object`: only its owner (or a member of its owner's
    /// role, or a superuser) may.
    pub(crate) fn need_owner(&mut self, object: ObjectId, kind: ObjectKind, name: &str) {
        if self.passes_every_check() {
            return;
        }
        self.checks.push(AclCheck {
            object,
            need: Need::Ownership,
            name: name.to_owned(),
            kind,
            as_role: self.checking_as,
        });
    }

    /// Whoever the checks are made as now is a superuser: nothing to note (the hot path of
    /// the bootstrap superuser's statements notes nothing).
    fn passes_every_check(&self) -> bool {
        let who = self.checking_as.unwrap_or(self.role);
        who == plan::BOOTSTRAP_ROLE_OID || self.catalog.authorization.is_superuser(who)
    }

    /// `SELECT ... FOR UPDATE` (or SHARE) needs UPDATE as well as SELECT on the tables it
    /// reads, as in PostgreSQL.
    fn need_update_to_lock(&mut self) {
        let locked: Vec<AclCheck> = self
            .checks
            .iter()
            .filter(|c| {
                matches!(c.object, ObjectId::Relation(_))
                    && c.kind == ObjectKind::Table
                    && c.as_role.is_none()
            })
            .map(|c| AclCheck {
                need: Need::AnyOf(Privileges::UPDATE),
                ..c.clone()
            })
            .collect();
        self.checks.extend(locked);
    }

    /// A new object in schema `public`: CREATE on it.
    pub(crate) fn need_create_in_public(&mut self) {
        self.need(
            ObjectId::Schema("public".into()),
            Privileges::CREATE,
            ObjectKind::Schema,
            "public",
        );
    }

    /// The name of the role the statement runs as.
    pub(crate) fn role_name(&self) -> String {
        self.catalog.authorization.role_name(self.role)
    }

    /// The name of the role the session logged in as.
    pub(crate) fn session_role_name(&self) -> String {
        self.catalog.authorization.role_name(self.session_role)
    }
}

/// `catalog` with the table one `CREATE TABLE` statement defines added as binding defines it
/// (no storage behind it): for tests and tools that need a catalog without an executor.
pub fn catalog_with_table(catalog: &Catalog, create: &str) -> SqlResult<Catalog> {
    let parsed = sql::parse(create)?
        .into_iter()
        .next()
        .ok_or_else(|| SqlError::internal("no statement"))?;
    let Plan::Ddl(DdlPlan::CreateTable { table, .. }) = bind(catalog, &parsed, &[])?.plan else {
        return Err(SqlError::internal("not a CREATE TABLE"));
    };
    let mut catalog = catalog.clone();
    catalog.tables.insert(table.name.clone(), Arc::new(table));
    Ok(catalog)
}

/// `SELECT [pg_catalog.]set_config('name', 'value', is_local)` on its own (pg_dump's scripts
/// begin with one): a SET. None for any other query.
fn set_config_call(q: &ast::Query) -> SqlResult<Option<Plan>> {
    let ast::SetExpr::Select(select) = q.body.as_ref() else {
        return Ok(None);
    };
    let [item] = select.projection.as_slice() else {
        return Ok(None);
    };
    let (ast::SelectItem::UnnamedExpr(ast::Expr::Function(f))
    | ast::SelectItem::ExprWithAlias {
        expr: ast::Expr::Function(f),
        ..
    }) = item
    else {
        return Ok(None);
    };
    let name = f.name.to_string().to_ascii_lowercase();
    if !select.from.is_empty() || !matches!(name.as_str(), "set_config" | "pg_catalog.set_config") {
        return Ok(None);
    }
    let ast::FunctionArguments::List(list) = &f.args else {
        return Ok(None);
    };
    let args: Vec<&ast::Value> = list
        .args
        .iter()
        .filter_map(|a| match a {
            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(ast::Expr::Value(v))) => {
                Some(&v.value)
            }
            _ => None,
        })
        .collect();
    match args.as_slice() {
        [name, value, ast::Value::Boolean(local)] => Ok(Some(Plan::SetConfig {
            name: literal_text(name)?.to_ascii_lowercase(),
            value: literal_text(value)?,
            local: *local,
        })),
        _ => Err(SqlError::feature_not_supported(
            "set_config() with arguments other than constants",
        )),
    }
}

/// `CREATE EXTENSION` of one of the extensions whose functions hotledger has built in:
/// nothing to do. Any other is refused (0A000).
fn create_extension(e: &ast::CreateExtension) -> SqlResult<Plan> {
    let name = e.name.value.to_ascii_lowercase();
    match name.as_str() {
        "plpgsql" | "pgcrypto" | "uuid-ossp" => Ok(Plan::NoOp("CREATE EXTENSION")),
        _ => Err(SqlError::feature_not_supported(format!(
            "extension \"{name}\" (built in: plpgsql, pgcrypto's gen_random_uuid(), uuid-ossp's uuid_generate_v4() and uuid_nil())"
        ))),
    }
}

/// Who a statement is bound for: the process id its client got at startup (what
/// `pg_backend_pid()` answers) and the role it runs as (`current_user`; its privileges are
/// checked as it binds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BindContext {
    pub backend_pid: i32,
    /// `current_user`: the role the session logged in as, or the one `SET ROLE` chose.
    pub role: u32,
    /// `session_user`: the role the session logged in as.
    pub session_role: u32,
}

impl BindContext {
    /// This process, as the bootstrap superuser: migrations, tools and tests.
    pub fn superuser() -> BindContext {
        BindContext {
            backend_pid: std::process::id() as i32,
            role: plan::BOOTSTRAP_ROLE_OID,
            session_role: plan::BOOTSTRAP_ROLE_OID,
        }
    }
}

/// Binds one parsed statement as the bootstrap superuser. `param_hints` are the types the
/// client declared (Unknown where it left them open).
pub fn bind(
    catalog: &Catalog,
    statement: &ParsedStatement,
    param_hints: &[DataType],
) -> SqlResult<Bound> {
    bind_in_session(catalog, statement, param_hints, BindContext::superuser())
}

/// `PREPARE name [(types)] AS inner`: the inner statement bound now, as PostgreSQL does, so
/// its errors come at PREPARE; kept with the whole text (what `pg_prepared_statements`
/// shows).
fn prepare(
    catalog: &Catalog,
    whole: &ParsedStatement,
    name: String,
    data_types: &[ast::DataType],
    inner: &ast::Statement,
    context: BindContext,
) -> SqlResult<Plan> {
    let preparable = matches!(
        inner,
        ast::Statement::Query(_)
            | ast::Statement::Insert(_)
            | ast::Statement::Update(_)
            | ast::Statement::Delete(_)
    );
    if !preparable {
        return Err(SqlError::syntax(
            "PREPARE takes a SELECT, VALUES, INSERT, UPDATE or DELETE",
        ));
    }
    let hints = data_types
        .iter()
        .map(crate::bind_expr::data_type_of)
        .collect::<SqlResult<Vec<_>>>()?;
    let statement = ParsedStatement {
        parsed: Parsed::Statement(Box::new(inner.clone())),
        text: whole.text.clone(),
    };
    let bound = bind_in_session(catalog, &statement, &hints, context)?;
    Ok(Plan::Prepare {
        name,
        statement: Box::new(statement),
        hints,
        bound: Box::new(bound),
    })
}

/// `bind` for a client session (`context`): its role's privileges are checked against
/// everything the statement reads, writes, calls or changes (42501 when one is missing).
pub fn bind_in_session(
    catalog: &Catalog,
    statement: &ParsedStatement,
    param_hints: &[DataType],
    context: BindContext,
) -> SqlResult<Bound> {
    let mut binder = Binder::new(catalog, param_hints.to_vec(), Vec::new());
    binder.backend_pid = context.backend_pid;
    binder.role = context.role;
    binder.session_role = context.session_role;
    let plan = match &statement.parsed {
        Parsed::Maintenance(tag) => binder.maintenance(tag)?,
        Parsed::Statement(s) => match s.as_ref() {
            ast::Statement::Prepare {
                name,
                data_types,
                statement: inner,
            } => prepare(catalog, statement, ident(name), data_types, inner, context)?,
            _ => binder.statement(s)?,
        },
        Parsed::InsertValues { statement, rows } => binder.insert_values(statement, rows)?,
        Parsed::CreateProcedure(p) => binder.create_procedure(p)?,
        Parsed::AlterSequence(a) => binder.alter_sequence(a)?,
        Parsed::WithSequenceNames { statement, names } => {
            binder.sequence_names = names.iter().cloned().collect();
            binder.statement(statement)?
        }
        Parsed::InsertOverriding {
            statement,
            overriding,
        } => {
            binder.overriding = Some(*overriding);
            binder.statement(statement)?
        }
        Parsed::DropProcedure { names, if_exists } => binder.drop_procedures(names, *if_exists)?,
        Parsed::CreateUser(s) => binder.create_role(s, true)?,
        Parsed::Role(r) => binder.role_statement(r)?,
        Parsed::OnAllRoutines(s) => binder.privileges_on_all_routines(s)?,
    };
    binder.plan_checks(&plan)?;
    let locks_rows = matches!(
        &statement.parsed,
        Parsed::Statement(s) if matches!(s.as_ref(), ast::Statement::Query(q) if !q.locks.is_empty())
    );
    if locks_rows {
        binder.need_update_to_lock();
    }
    catalog.authorization.check(context.role, &binder.checks)?;
    let plan = match plan {
        // What a role other than the bootstrap superuser creates is its own.
        Plan::Ddl(ddl) if context.role != plan::BOOTSTRAP_ROLE_OID && creates_objects(&ddl) => {
            Plan::Ddl(DdlPlan::Owned {
                ddl: Box::new(ddl),
                owner: context.role,
            })
        }
        other => other,
    };
    let param_types = binder
        .params
        .iter()
        .map(|t| {
            if *t == DataType::Unknown {
                DataType::Text
            } else {
                *t
            }
        })
        .collect();
    Ok(Bound {
        plan,
        param_types,
        notices: binder.notices,
        locks_rows,
    })
}

/// Whether `ddl` creates a table, view, sequence or procedure (which its creator owns).
fn creates_objects(ddl: &DdlPlan) -> bool {
    matches!(
        ddl,
        DdlPlan::CreateTable { .. }
            | DdlPlan::CreateView { .. }
            | DdlPlan::CreateSequence { .. }
            | DdlPlan::CreateProcedure { .. }
            | DdlPlan::WithSequences { .. }
            | DdlPlan::WithForeignKeys { .. }
    )
}

impl Binder<'_> {
    fn drop_procedures(&mut self, names: &[String], if_exists: bool) -> SqlResult<Plan> {
        Ok(Plan::Ddl(DdlPlan::DropProcedures {
            names: names.to_vec(),
            if_exists,
        }))
    }
}

/// The name a new relation is created under: only the `public` schema exists.
pub(crate) fn public_name(name: &ast::ObjectName) -> SqlResult<String> {
    match object_name(name)? {
        (Some(schema), _) if schema != "public" => Err(SqlError::feature_not_supported(format!(
            "schema \"{schema}\""
        ))),
        (_, name) => Ok(name),
    }
}

/// The relation names of a DROP, schema left out.
pub(crate) fn object_names(names: &[ast::ObjectName]) -> SqlResult<Vec<String>> {
    names
        .iter()
        .map(|n| object_name(n).map(|(_, n)| n))
        .collect()
}

pub(crate) fn object_name(name: &ast::ObjectName) -> SqlResult<(Option<String>, String)> {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| match p {
            ast::ObjectNamePart::Identifier(i) => Ok(ident(i)),
            _ => Err(SqlError::feature_not_supported(format!("name {name}"))),
        })
        .collect::<SqlResult<_>>()?;
    match parts.as_slice() {
        [n] => Ok((None, n.clone())),
        [s, n] => Ok((Some(s.clone()), n.clone())),
        [_, s, n] => Ok((Some(s.clone()), n.clone())),
        _ => Err(SqlError::syntax(format!("improper qualified name: {name}"))),
    }
}

pub(crate) fn table_scope(table: &TableDef, alias: &str) -> Vec<ScopeColumn> {
    table
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| ScopeColumn {
            qualifier: Some(alias.to_string()),
            name: c.name.clone(),
            ty: c.ty,
            table_oid: table.oid(),
            column_number: i as i16 + 1,
        })
        .collect()
}

fn isolation_of(level: &ast::TransactionIsolationLevel) -> Isolation {
    match level {
        ast::TransactionIsolationLevel::ReadUncommitted
        | ast::TransactionIsolationLevel::ReadCommitted => Isolation::ReadCommitted,
        _ => Isolation::Serializable,
    }
}

/// `SET SESSION CHARACTERISTICS AS TRANSACTION ...`: the session's default isolation or
/// access mode.
fn session_characteristics(
    isolation: Option<Isolation>,
    read_only: Option<bool>,
) -> SqlResult<Plan> {
    let (name, value) = match (isolation, read_only) {
        (Some(i), None) => (
            "default_transaction_isolation",
            match i {
                Isolation::Serializable => "serializable",
                Isolation::ReadCommitted => "read committed",
            },
        ),
        (None, Some(r)) => (
            "default_transaction_read_only",
            if r { "on" } else { "off" },
        ),
        _ => {
            return Err(SqlError::feature_not_supported(
                "SET SESSION CHARACTERISTICS with both an isolation level and an access mode \
                 (set them one at a time)",
            ))
        }
    };
    Ok(Plan::Set {
        name: name.into(),
        value: Some(value.into()),
        local: false,
    })
}

/// A transaction's modes: its isolation and whether it is READ ONLY (Some(true)) or READ
/// WRITE (Some(false)), each None where not given.
fn transaction_modes(modes: &[ast::TransactionMode]) -> (Option<Isolation>, Option<bool>) {
    let mut isolation = None;
    let mut read_only = None;
    for m in modes {
        match m {
            ast::TransactionMode::IsolationLevel(l) => isolation = Some(isolation_of(l)),
            ast::TransactionMode::AccessMode(mode) => {
                read_only = Some(matches!(mode, ast::TransactionAccessMode::ReadOnly))
            }
        }
    }
    (isolation, read_only)
}

pub(crate) fn output_name(item: &ast::Expr) -> String {
    match item {
        ast::Expr::Identifier(i) => ident(i),
        ast::Expr::CompoundIdentifier(parts) => parts.last().map(ident).unwrap_or_default(),
        ast::Expr::Function(f) => {
            let name = f
                .name
                .0
                .last()
                .map(|p| p.to_string())
                .unwrap_or_default()
                .to_ascii_lowercase();
            match name.as_str() {
                "current_timestamp" => "current_timestamp".into(),
                _ => name.trim_matches('"').to_string(),
            }
        }
        ast::Expr::Cast {
            expr, data_type, ..
        } => match expr.as_ref() {
            ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_) => output_name(expr),
            _ => data_type
                .to_string()
                .to_ascii_lowercase()
                .split('(')
                .next()
                .unwrap_or_default()
                .trim()
                .to_string(),
        },
        ast::Expr::Nested(inner) => output_name(inner),
        // `(r).x` is named after the field; `a[1]`, `(f(x))[1]` after what is subscripted.
        ast::Expr::CompoundFieldAccess { root, access_chain } => match access_chain.as_slice() {
            [ast::AccessExpr::Dot(ast::Expr::Identifier(field))] => ident(field),
            chain
                if chain
                    .iter()
                    .all(|a| matches!(a, ast::AccessExpr::Subscript(_))) =>
            {
                output_name(root)
            }
            _ => "?column?".into(),
        },
        // A scalar subquery is named after its one column, as in PostgreSQL.
        ast::Expr::Subquery(q) => match q.body.as_ref() {
            ast::SetExpr::Select(s) => match s.projection.as_slice() {
                [ast::SelectItem::UnnamedExpr(e)] => output_name(e),
                [ast::SelectItem::ExprWithAlias { alias, .. }] => ident(alias),
                _ => "?column?".into(),
            },
            _ => "?column?".into(),
        },
        ast::Expr::Exists { .. } => "exists".into(),
        // Named after its ELSE when that is a column or a call, as in PostgreSQL.
        ast::Expr::Case {
            else_result: Some(otherwise),
            ..
        } if matches!(
            otherwise.as_ref(),
            ast::Expr::Identifier(_)
                | ast::Expr::CompoundIdentifier(_)
                | ast::Expr::Function(_)
                | ast::Expr::Case { .. }
        ) =>
        {
            output_name(otherwise)
        }
        ast::Expr::Case { .. } => "case".into(),
        ast::Expr::Interval(_) => "interval".into(),
        ast::Expr::Extract { .. } => "extract".into(),
        _ => "?column?".into(),
    }
}

impl<'a> Binder<'a> {
    pub(crate) fn set_param_type(&mut self, index: usize, ty: DataType) {
        if self.params.len() <= index {
            self.params.resize(index + 1, DataType::Unknown);
        }
        if self.params[index] == DataType::Unknown {
            self.params[index] = ty;
        }
    }

    /// `sql::Parsed::InsertValues`: an INSERT with the rows the row reader read.
    pub(crate) fn insert_values(
        &mut self,
        statement: &ast::Statement,
        rows: &ValueRows,
    ) -> SqlResult<Plan> {
        match statement {
            ast::Statement::Insert(insert) => self.insert(insert, Some(rows)),
            _ => Err(SqlError::internal(
                "the row reader's statement is not an INSERT",
            )),
        }
    }

    pub(crate) fn statement(&mut self, s: &ast::Statement) -> SqlResult<Plan> {
        use ast::Statement as S;
        Ok(match s {
            S::Query(q) => {
                if let Some(plan) = set_config_call(q)? {
                    return Ok(plan);
                }
                if let Some(plan) = self.advisory_lock_call(q)? {
                    return Ok(plan);
                }
                if let Some(plan) = self.notify_call(q)? {
                    return Ok(plan);
                }
                let mut plan = self.query(q, &Scope::default())?;
                plan.reads_user_tables = reads_storage(&plan.rel);
                Plan::Select(Arc::new(plan))
            }
            S::Insert(insert) => self.insert(insert, None)?,
            S::Update(update) => self.update(update)?,
            S::Delete(delete) => self.delete(delete)?,
            S::CreateTable(create) => self.create_table(create)?,
            S::Drop {
                object_type: kind @ (ast::ObjectType::Table | ast::ObjectType::Index),
                if_exists,
                names,
                ..
            } => {
                let names = object_names(names)?;
                if *kind == ast::ObjectType::Table {
                    for name in &names {
                        if let Some(table) = self.catalog.table(name) {
                            plan::check_remove(table)?;
                        }
                    }
                }
                let if_exists = *if_exists;
                Plan::Ddl(match kind {
                    ast::ObjectType::Table => DdlPlan::DropTables { names, if_exists },
                    _ => DdlPlan::DropIndexes { names, if_exists },
                })
            }
            S::Drop {
                object_type: ast::ObjectType::View,
                if_exists,
                names,
                cascade,
                ..
            } => {
                let mut names = object_names(names)?;
                let dependents = crate::bind_view::dependent_views(self.catalog, &names);
                if !dependents.is_empty() && !cascade {
                    return Err(plan::views_depend_error(&names, &dependents));
                }
                // CASCADE: the views that read them go too.
                names.extend(dependents);
                Plan::Ddl(DdlPlan::DropViews {
                    names,
                    if_exists: *if_exists,
                })
            }
            S::CreateView(create) => self.create_view(create)?,
            S::CreateSequence {
                temporary,
                if_not_exists,
                name,
                data_type,
                sequence_options,
                owned_by,
            } => {
                if *temporary {
                    return Err(SqlError::feature_not_supported("temporary sequences"));
                }
                self.create_sequence(
                    *if_not_exists,
                    name,
                    data_type.as_ref(),
                    sequence_options,
                    owned_by.as_ref(),
                )?
            }
            S::Drop {
                object_type: ast::ObjectType::Sequence,
                if_exists,
                names,
                ..
            } => Plan::Ddl(DdlPlan::DropSequences {
                names: object_names(names)?,
                if_exists: *if_exists,
            }),
            S::Drop {
                object_type: ast::ObjectType::Type,
                if_exists,
                names,
                cascade,
                ..
            } => self.drop_types(names, *if_exists, *cascade)?,
            S::CreateType {
                name,
                representation,
            } => self.create_type(name, representation.as_ref())?,
            S::AlterType(alter) => self.alter_type(alter)?,
            S::Drop {
                object_type: ast::ObjectType::Role | ast::ObjectType::User,
                if_exists,
                names,
                ..
            } => self.drop_roles(names, *if_exists)?,
            S::Drop { object_type, .. } => {
                return Err(SqlError::feature_not_supported(format!(
                    "DROP {object_type}"
                )))
            }
            S::CreateRole(_) => self.create_role(s, false)?,
            S::AlterRole { name, operation } => self.alter_role(name, operation)?,
            S::Grant(grant) => self.grant(grant, false)?,
            S::Revoke(revoke) => self.revoke(revoke, false)?,
            S::AlterTable(alter)
                if matches!(
                    alter.operations.as_slice(),
                    [ast::AlterTableOperation::OwnerTo { .. }]
                ) =>
            {
                let [ast::AlterTableOperation::OwnerTo { new_owner }] = alter.operations.as_slice()
                else {
                    unreachable!("matched above")
                };
                self.set_owner(&alter.name, new_owner)?
            }
            S::Truncate(t) => {
                let mut tables = Vec::new();
                for target in &t.table_names {
                    let (_, name) = object_name(&target.name)?;
                    let table = self.user_table(&name)?;
                    plan::check_remove(&table)?;
                    tables.push(table.reference());
                }
                Plan::Ddl(DdlPlan::Truncate { tables })
            }
            S::AlterTable(alter) => self.alter_table(alter)?,
            S::StartTransaction { modes, .. } => {
                let (isolation, read_only) = transaction_modes(modes);
                Plan::Begin {
                    isolation,
                    read_only,
                }
            }
            S::Commit { chain: false, .. } => Plan::Commit,
            S::Rollback {
                chain: false,
                savepoint: None,
            } => Plan::Rollback,
            S::Rollback {
                chain: false,
                savepoint: Some(name),
            } => Plan::RollbackToSavepoint { name: ident(name) },
            S::Savepoint { name } => Plan::Savepoint { name: ident(name) },
            S::ReleaseSavepoint { name } => Plan::ReleaseSavepoint { name: ident(name) },
            S::Set(set) => self.set(set)?,
            S::Reset(reset) => match &reset.reset {
                ast::Reset::ALL => Plan::Reset { name: None },
                ast::Reset::ConfigurationParameter(name) => Plan::Reset {
                    name: Some(name.to_string().to_ascii_lowercase()),
                },
                ast::Reset::SessionAuthorization => Plan::NoOp("RESET"),
            },
            S::ShowVariable { variable } => {
                let words = variable.iter().map(ident).collect::<Vec<_>>().join(" ");
                // PostgreSQL's grammar spells two settings in words.
                let name = match words.as_str() {
                    "transaction isolation level" => "transaction_isolation".to_string(),
                    "time zone" => "timezone".to_string(),
                    _ => words,
                };
                Plan::Show { name }
            }
            S::Copy {
                source,
                to: false,
                target: ast::CopyTarget::Stdin,
                options,
                legacy_options,
                ..
            } => self.copy_from(source, options, legacy_options)?,
            S::Copy {
                source,
                to: true,
                target: ast::CopyTarget::Stdout,
                options,
                legacy_options,
                ..
            } => self.copy_to(source, options, legacy_options)?,
            S::Copy { .. } => {
                return Err(SqlError::feature_not_supported(
                    "COPY other than FROM STDIN and TO STDOUT (files and programs belong to psql's \\copy)",
                ))
            }
            S::Explain {
                statement,
                analyze: false,
                ..
            } => Plan::Explain(Box::new(self.statement(statement)?)),
            S::Explain { analyze: true, .. } => {
                return Err(SqlError::feature_not_supported("EXPLAIN ANALYZE"))
            }
            S::Deallocate { name, .. } => {
                let n = ident(name);
                Plan::Deallocate {
                    name: if n == "all" { None } else { Some(n) },
                }
            }
            S::Discard { object_type } => Plan::Discard(match object_type {
                ast::DiscardObject::ALL => plan::Discard::All,
                ast::DiscardObject::PLANS => plan::Discard::Plans,
                ast::DiscardObject::SEQUENCES => plan::Discard::Sequences,
                ast::DiscardObject::TEMP => plan::Discard::Temp,
            }),
            S::Execute {
                name: Some(name),
                parameters,
                immediate: false,
                into,
                using,
                output: false,
                default: false,
                ..
            } if into.is_empty() && using.is_empty() => {
                let (_, name) = object_name(name)?;
                let args = parameters
                    .iter()
                    .map(|p| self.expr(p, &Scope::default(), None))
                    .collect::<SqlResult<Vec<_>>>()?;
                Plan::Execute { name, args }
            }
            S::CreateIndex(index) => self.create_index(index)?,
            S::Call(function) => self.call(function)?,
            S::CreateExtension(e) => create_extension(e)?,
            S::LISTEN { channel } => Plan::Listen(ident(channel)),
            S::UNLISTEN { channel } if channel.value == "*" => Plan::Unlisten(None),
            S::UNLISTEN { channel } => Plan::Unlisten(Some(ident(channel))),
            S::NOTIFY { channel, payload } => Plan::Notify(plan::NotifyCall {
                channel: Expr::literal(Value::Text(ident(channel))),
                payload: Expr::literal(Value::Text(payload.clone().unwrap_or_default())),
                column: None,
            }),
            S::DropExtension(_) => {
                return Err(SqlError::feature_not_supported(
                    "DROP EXTENSION (the extensions hotledger accepts are built in)",
                ))
            }
            other => {
                let text = other.to_string();
                let words: Vec<&str> = text.split_whitespace().take(2).collect();
                return Err(SqlError::feature_not_supported(words.join(" ")));
            }
        })
    }

    fn set(&mut self, set: &ast::Set) -> SqlResult<Plan> {
        Ok(match set {
            ast::Set::SingleAssignment {
                variable,
                values,
                scope,
                ..
            } => {
                let local = matches!(scope, Some(ast::ContextModifier::Local));
                let name = variable.to_string().to_ascii_lowercase();
                let value = values
                    .iter()
                    .map(|v| match v {
                        ast::Expr::Value(v) => literal_text(&v.value),
                        ast::Expr::Identifier(i) => Ok(i.value.clone()),
                        other => Ok(other.to_string()),
                    })
                    .collect::<SqlResult<Vec<_>>>()?
                    .join(", ");
                let value = (!value.eq_ignore_ascii_case("default")).then_some(value);
                Plan::Set { name, value, local }
            }
            ast::Set::SetTimeZone { value, local } => {
                let v = match value {
                    ast::Expr::Value(v) => literal_text(&v.value)?,
                    other => other.to_string(),
                };
                Plan::Set {
                    name: "timezone".into(),
                    value: Some(v),
                    local: *local,
                }
            }
            ast::Set::SetNames { charset_name, .. } => Plan::Set {
                name: "client_encoding".into(),
                value: Some(charset_name.value.clone()),
                local: false,
            },
            ast::Set::SetRole {
                context_modifier,
                role_name,
            } => Plan::Set {
                name: "role".into(),
                value: Some(role_name.as_ref().map_or_else(|| "none".into(), ident)),
                local: matches!(context_modifier, Some(ast::ContextModifier::Local)),
            },
            ast::Set::SetTransaction { modes, session, .. } => {
                let (isolation, read_only) = transaction_modes(modes);
                if *session {
                    session_characteristics(isolation, read_only)?
                } else {
                    Plan::SetTransaction {
                        isolation,
                        read_only,
                    }
                }
            }
            other => {
                return Err(SqlError::feature_not_supported(format!(
                    "SET form {}",
                    other.to_string().chars().take(40).collect::<String>()
                )))
            }
        })
    }

    pub(crate) fn user_table(&self, name: &str) -> SqlResult<Arc<TableDef>> {
        match self.catalog.table(name) {
            Some(t) => Ok(t.clone()),
            None if self.catalog.views.contains_key(name) => Err(SqlError::feature_not_supported(
                format!("writing to or altering view \"{name}\""),
            )),
            None if SystemTable::lookup(None, name).is_some() => Err(SqlError::new(
                ErrorKind::FeatureNotSupported,
                format!("not supported yet: writing to system catalog \"{name}\""),
            )),
            None => Err(SqlError::undefined_table(name)),
        }
    }

    // ----- queries -----
}

/// One query's text, parsed (a view's stored query, the subqueries UPDATE ... FROM is
/// rewritten into).
pub(crate) fn parse_query(text: &str) -> SqlResult<Box<ast::Query>> {
    let parsed = sql::parse(text)?;
    if let Some(Parsed::Statement(statement)) = parsed.into_iter().next().map(|s| s.parsed) {
        if let ast::Statement::Query(q) = *statement {
            return Ok(q);
        }
    }
    Err(SqlError::internal(format!("not a query: {text}")))
}

pub(crate) fn ordinal(e: &ast::Expr) -> Option<usize> {
    match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => n.parse().ok(),
            _ => None,
        },
        _ => None,
    }
}

impl Binder<'_> {
    /// An ORDER BY item sorting by `expr` (an enum by its labels' order).
    pub(crate) fn sort_key(&self, expr: Expr, o: &ast::OrderByExpr) -> SortKey {
        let descending = matches!(o.options.sort, Some(ast::OrderBySort::Desc));
        // PostgreSQL: NULLs sort as larger than everything, so first when descending.
        let nulls_first = o.options.nulls_first.unwrap_or(descending);
        SortKey {
            expr: self.ordered(expr),
            descending,
            nulls_first,
        }
    }
}

pub(crate) fn rename_columns(
    cols: &mut [ScopeColumn],
    alias: &Option<ast::TableAlias>,
) -> SqlResult<()> {
    if let Some(a) = alias {
        if a.columns.len() > cols.len() {
            return Err(SqlError::syntax(format!(
                "table \"{}\" has {} columns available but {} columns specified",
                ident(&a.name),
                cols.len(),
                a.columns.len()
            )));
        }
        for (c, new) in cols.iter_mut().zip(&a.columns) {
            c.name = ident(&new.name);
        }
    }
    Ok(())
}
