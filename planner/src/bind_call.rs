//! Binding CALL and CREATE PROCEDURE.
//!
//! `CALL transfer(...)` is an INSERT into the ledger's transfers table with the arguments as
//! its values, so it shares every rule and the apply path with `INSERT INTO transfers`.
//! `CALL create_transfers(...)` and `CALL create_accounts(...)` take one array per column
//! and apply each event with its own outcome (linked ones as chains).
//! `CALL name(...)` of a stored procedure binds the arguments (over the CALL's own
//! parameters) and the body's statements (over the procedure's parameters, `$1..$n` or by
//! name); the whole body then runs as one command on the executor.

use std::sync::Arc;

use plan::*;
use sql::ast;
use sql::{DataType, ErrorKind, Parsed, ProcedureText, SqlError, SqlResult};

use crate::bind::*;
use crate::bind_expr::ident;
use crate::scope::Scope;

fn no_such_procedure(name: &str) -> SqlError {
    SqlError::new(
        ErrorKind::UndefinedFunction,
        format!("procedure {name} does not exist"),
    )
}

/// Places each argument of a call by position or by name among `names`.
fn place_arguments<'a>(
    procedure: &str,
    names: &[&str],
    args: &'a [ast::FunctionArg],
) -> SqlResult<Vec<Option<&'a ast::Expr>>> {
    let mut slots: Vec<Option<&ast::Expr>> = vec![None; names.len()];
    let mut named = false;
    for (i, arg) in args.iter().enumerate() {
        let (slot, expr) = match arg {
            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => {
                if named {
                    return Err(SqlError::syntax(
                        "positional argument cannot follow named argument",
                    ));
                }
                if i >= names.len() {
                    return Err(SqlError::new(
                        ErrorKind::UndefinedFunction,
                        format!(
                            "procedure {procedure} takes at most {} arguments",
                            names.len()
                        ),
                    ));
                }
                (i, e)
            }
            ast::FunctionArg::Named {
                name,
                arg: ast::FunctionArgExpr::Expr(e),
                ..
            }
            | ast::FunctionArg::ExprNamed {
                name: ast::Expr::Identifier(name),
                arg: ast::FunctionArgExpr::Expr(e),
                ..
            } => {
                named = true;
                let given = ident(name);
                let slot = names.iter().position(|n| *n == given).ok_or_else(|| {
                    SqlError::new(
                        ErrorKind::UndefinedFunction,
                        format!(
                            "procedure {procedure} has no argument \"{given}\"; it takes {}",
                            names.join(", ")
                        ),
                    )
                })?;
                (slot, e)
            }
            _ => return Err(SqlError::feature_not_supported("this form of argument")),
        };
        if slots[slot].is_some() {
            return Err(SqlError::syntax(format!(
                "argument \"{}\" given more than once",
                names[slot]
            )));
        }
        slots[slot] = Some(expr);
    }
    Ok(slots)
}

/// What binding a procedure's body gives: its statements, the last one's result columns,
/// and the privileges the body needs of the role that calls it (a procedure runs with its
/// caller's rights, PostgreSQL's SECURITY INVOKER).
pub(crate) struct BoundBody {
    pub steps: Vec<Step>,
    pub columns: Vec<OutputColumn>,
    pub checks: Vec<AclCheck>,
}

/// Binds a procedure's body against `catalog` for a call by `role`, its parameters as
/// `$1..$n` and by name.
pub(crate) fn bind_body(
    catalog: &Catalog,
    procedure: &ProcedureDef,
    role: u32,
) -> SqlResult<BoundBody> {
    let in_body = |mut e: SqlError| {
        e.message = format!("in procedure {}: {}", procedure.name, e.message);
        e.position = None;
        e
    };
    let types: Vec<DataType> = procedure.params.iter().map(|(_, t)| *t).collect();
    let names: Vec<String> = procedure.params.iter().map(|(n, _)| n.clone()).collect();
    let mut steps = Vec::new();
    let mut columns = Vec::new();
    let mut checks = Vec::new();
    for statement in sql::parse(&procedure.body).map_err(in_body)? {
        let mut binder = Binder::new(catalog, types.clone(), names.clone());
        binder.role = role;
        let plan = match &statement.parsed {
            Parsed::Statement(s) => binder.statement(s).map_err(in_body)?,
            Parsed::InsertValues { statement, rows } => {
                binder.insert_values(statement, rows).map_err(in_body)?
            }
            _ => {
                return Err(in_body(SqlError::feature_not_supported(
                    "this statement in a procedure body",
                )))
            }
        };
        if binder.params.len() > types.len() {
            return Err(in_body(SqlError::new(
                ErrorKind::UndefinedParameter,
                format!("there is no parameter ${}", binder.params.len()),
            )));
        }
        checks.append(&mut binder.checks);
        match plan {
            Plan::Write(write, cols) => {
                columns = cols;
                steps.push(Step::Write(write));
            }
            Plan::Select(query) => {
                columns = query.columns.clone();
                steps.push(Step::Query(query));
            }
            _ => {
                let words: Vec<&str> = statement.text.split_whitespace().take(2).collect();
                return Err(in_body(SqlError::feature_not_supported(format!(
                    "{} in a procedure body (only SELECT, INSERT, UPDATE, DELETE and CALL transfer)",
                    words.join(" ")
                ))));
            }
        }
    }
    Ok(BoundBody {
        steps,
        columns,
        checks,
    })
}

impl Binder<'_> {
    pub(crate) fn call(&mut self, function: &ast::Function) -> SqlResult<Plan> {
        let (schema, name) = object_name(&function.name)?;
        let args: &[ast::FunctionArg] = match &function.args {
            ast::FunctionArguments::None => &[],
            ast::FunctionArguments::List(list) => &list.args,
            ast::FunctionArguments::Subquery(_) => {
                return Err(SqlError::feature_not_supported("CALL with a subquery"))
            }
        };
        if schema.as_deref() == Some("hotledger") {
            return self.call_cluster_change(&name, args);
        }
        if name == "transfer" {
            return self.call_transfer(args);
        }
        if name == "create_transfers" {
            return self.call_ledger_batch("create_transfers", LedgerRole::Transfers, args);
        }
        if name == "create_accounts" {
            return self.call_ledger_batch("create_accounts", LedgerRole::Accounts, args);
        }
        let procedure = self
            .catalog
            .procedures
            .get(&name)
            .cloned()
            .ok_or_else(|| no_such_procedure(&name))?;
        self.call_procedure(&procedure, args)
    }

    /// `CALL hotledger.add_node(id, raft_addr)`, `remove_node(id)`, `transfer_leader(id)`:
    /// run by the session against the cluster, not logged as a command.
    fn call_cluster_change(&mut self, name: &str, args: &[ast::FunctionArg]) -> SqlResult<Plan> {
        let (action, names, types): (ClusterAction, &[&str], &[DataType]) = match name {
            "add_node" => (
                ClusterAction::AddNode,
                &["id", "raft_addr"],
                &[DataType::Int8, DataType::Text],
            ),
            "remove_node" => (ClusterAction::RemoveNode, &["id"], &[DataType::Int8]),
            "transfer_leader" => (ClusterAction::TransferLeader, &["id"], &[DataType::Int8]),
            _ => return Err(no_such_procedure(&format!("hotledger.{name}"))),
        };
        let args = self.bind_arguments(&format!("hotledger.{name}"), names, types, args)?;
        Ok(Plan::ClusterChange(ClusterChangeCall { action, args }))
    }

    /// A call's arguments placed by position or name among `names` and bound as `types`;
    /// every one must be given.
    fn bind_arguments(
        &mut self,
        procedure: &str,
        names: &[&str],
        types: &[DataType],
        args: &[ast::FunctionArg],
    ) -> SqlResult<Vec<Expr>> {
        let slots = place_arguments(procedure, names, args)?;
        let mut bound = Vec::with_capacity(names.len());
        for ((slot, param), ty) in slots.into_iter().zip(names).zip(types) {
            let expr = slot.ok_or_else(|| {
                SqlError::new(
                    ErrorKind::UndefinedFunction,
                    format!(
                        "procedure {procedure}({}) needs the argument \"{param}\"",
                        names.join(", ")
                    ),
                )
            })?;
            let b = self.expr(expr, &Scope::default(), Some(*ty))?;
            bound.push(self.assign(b, *ty)?);
        }
        Ok(bound)
    }

    fn call_procedure(
        &mut self,
        procedure: &ProcedureDef,
        args: &[ast::FunctionArg],
    ) -> SqlResult<Plan> {
        let names: Vec<&str> = procedure.params.iter().map(|(n, _)| n.as_str()).collect();
        let types: Vec<DataType> = procedure.params.iter().map(|(_, t)| *t).collect();
        let bound = self.bind_arguments(&procedure.name, &names, &types, args)?;
        let BoundBody {
            steps,
            columns,
            checks,
        } = bind_body(self.catalog, procedure, self.role)?;
        self.checks.extend(checks);
        Ok(Plan::Call(Arc::new(CallPlan {
            name: procedure.name.clone(),
            args: bound,
            steps,
            columns,
        })))
    }

    pub(crate) fn create_procedure(&mut self, text: &ProcedureText) -> SqlResult<Plan> {
        if ["transfer", "create_transfers", "create_accounts"].contains(&text.name.as_str()) {
            return Err(SqlError::new(
                ErrorKind::DuplicateFunction,
                format!(
                    "procedure {} already exists: it is built into the ledger",
                    text.name
                ),
            ));
        }
        let params = text
            .params
            .iter()
            .map(|(n, t)| Ok((n.clone(), self.resolve_type(t)?)))
            .collect::<SqlResult<Vec<_>>>()?;
        let procedure = ProcedureDef {
            name: text.name.clone(),
            params,
            body: text.body.clone(),
        };
        if self.catalog.procedures.contains_key(&procedure.name) && !text.or_replace {
            return Err(SqlError::new(
                ErrorKind::DuplicateFunction,
                format!("procedure {} already exists", procedure.name),
            ));
        }
        // As PostgreSQL does for SQL functions, check the body now.
        bind_body(self.catalog, &procedure, self.role)?;
        Ok(Plan::Ddl(DdlPlan::CreateProcedure {
            procedure,
            or_replace: text.or_replace,
        }))
    }

    /// `create_transfers(id => bigint[], debit_account_id => bigint[], ..., linked =>
    /// boolean[])` (the arguments of `transfer`, each an array, plus `linked`), or
    /// `create_accounts(id => bigint[], ledger => int[], code => int[], ..., linked =>
    /// boolean[])` (the columns an INSERT into accounts may name).
    fn call_ledger_batch(
        &mut self,
        procedure: &'static str,
        role: LedgerRole,
        args: &[ast::FunctionArg],
    ) -> SqlResult<Plan> {
        let table = self
            .catalog
            .ledger_table(role)
            .cloned()
            .ok_or_else(|| no_such_procedure(procedure))?;
        let mut names: Vec<&str> = match role {
            LedgerRole::Accounts => ACCOUNT_ARGUMENTS.to_vec(),
            _ => TRANSFER_ARGUMENTS.to_vec(),
        };
        names.push("linked");
        let slots = place_arguments(procedure, &names, args)?;
        let mut columns = Vec::new();
        let mut linked = None;
        for (name, slot) in names.iter().zip(slots) {
            let Some(expr) = slot else { continue };
            let column = table.column_index(name);
            if column.is_none() && *name != "linked" {
                return Err(SqlError::internal(format!(
                    "the {} table has no column {name}",
                    table.name
                )));
            }
            let element = column.map_or(DataType::Bool, |c| table.columns[c].ty);
            let ty = element.array_of().ok_or_else(|| {
                SqlError::internal(format!("no array type for {}.{name}", table.name))
            })?;
            let bound = self.expr(expr, &Scope::default(), Some(ty))?;
            let bound = self.assign(bound, ty)?;
            match column {
                Some(c) => columns.push((c, bound)),
                None => linked = Some(bound),
            }
        }
        if columns.is_empty() {
            return Err(SqlError::new(
                ErrorKind::UndefinedFunction,
                format!(
                    "procedure {procedure}() needs arguments: {procedure}(id => bigint[], {} => ..., ...)",
                    names[1]
                ),
            ));
        }
        plan::check_insert(
            &table,
            &columns.iter().map(|(c, _)| *c).collect::<Vec<_>>(),
            false,
        )?;
        Ok(Plan::LedgerBatch(Arc::new(LedgerBatchPlan {
            procedure,
            table: table.reference(),
            columns,
            linked,
        })))
    }

    /// The ledger's transfers table, which the built-in `procedure` writes to.
    fn transfers_table(&self, procedure: &str) -> SqlResult<Arc<TableDef>> {
        self.catalog
            .ledger_table(LedgerRole::Transfers)
            .cloned()
            .ok_or_else(|| no_such_procedure(procedure))
    }

    fn call_transfer(&mut self, args: &[ast::FunctionArg]) -> SqlResult<Plan> {
        let table = self.transfers_table("transfer")?;
        let slots = place_arguments("transfer", TRANSFER_ARGUMENTS, args)?;
        let mut target_columns = Vec::new();
        let mut values = Vec::new();
        for (name, slot) in TRANSFER_ARGUMENTS.iter().zip(slots) {
            if let Some(expr) = slot {
                target_columns.push(table.column_index(name).ok_or_else(|| {
                    SqlError::internal(format!("the transfers table has no column {name}"))
                })?);
                values.push(expr);
            }
        }
        if target_columns.is_empty() {
            return Err(SqlError::new(
                ErrorKind::UndefinedFunction,
                "procedure transfer() needs arguments: transfer(id, debit_account_id, credit_account_id, amount, ledger, code, ...)",
            ));
        }
        plan::check_insert(&table, &target_columns, false)?;
        let row = self.values_row(&table, &target_columns, &values)?;
        let insert = InsertPlan {
            table: table.reference(),
            source: InsertSource::Values(vec![row]),
            target_columns,
            on_conflict: None,
            returning: None,
            call: true,
        };
        let columns = vec![
            OutputColumn::computed("id", DataType::Int8),
            OutputColumn::computed("status", DataType::Text),
        ];
        Ok(Plan::Write(Arc::new(WritePlan::Insert(insert)), columns))
    }
}
