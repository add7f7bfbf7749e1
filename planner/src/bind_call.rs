//! Binding CALL. `CALL transfer(...)` is an INSERT into the ledger's transfers table with
//! the arguments as its values, so it shares every rule and the apply path with
//! `INSERT INTO transfers`.

use std::sync::Arc;

use sql::ast;
use sql::{DataType, ErrorKind, Parsed, SqlError, SqlResult};

use crate::bind::*;
use crate::bind_expr::ident;
use crate::ledger::{LedgerRole, TRANSFER_ARGUMENTS};
use crate::plan::*;

fn no_such_procedure(name: &str) -> SqlError {
    SqlError::new(
        ErrorKind::UndefinedFunction,
        format!("procedure {name} does not exist"),
    )
}

impl Binder<'_> {
    pub(crate) fn call(&mut self, function: &ast::Function) -> SqlResult<Plan> {
        let (_, name) = object_name(&function.name)?;
        let args: &[ast::FunctionArg] = match &function.args {
            ast::FunctionArguments::None => &[],
            ast::FunctionArguments::List(list) => &list.args,
            ast::FunctionArguments::Subquery(_) => {
                return Err(SqlError::feature_not_supported("CALL with a subquery"))
            }
        };
        match name.as_str() {
            "transfer" => self.call_transfer(args),
            _ => Err(no_such_procedure(&name)),
        }
    }

    fn call_transfer(&mut self, args: &[ast::FunctionArg]) -> SqlResult<Plan> {
        let table = self
            .catalog
            .ledger_table(LedgerRole::Transfers)
            .cloned()
            .ok_or_else(|| no_such_procedure("transfer"))?;
        let mut columns: Vec<&str> = Vec::new();
        let mut values: Vec<String> = Vec::new();
        let mut named = false;
        for (i, arg) in args.iter().enumerate() {
            let (column, expr) = match arg {
                ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => {
                    if named {
                        return Err(SqlError::syntax(
                            "positional argument cannot follow named argument",
                        ));
                    }
                    let column = TRANSFER_ARGUMENTS.get(i).copied().ok_or_else(|| {
                        SqlError::new(
                            ErrorKind::UndefinedFunction,
                            format!(
                                "procedure transfer takes at most {} arguments",
                                TRANSFER_ARGUMENTS.len()
                            ),
                        )
                    })?;
                    (column, e)
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
                    let column = TRANSFER_ARGUMENTS
                        .iter()
                        .copied()
                        .find(|a| *a == given)
                        .ok_or_else(|| {
                            SqlError::new(
                                ErrorKind::UndefinedFunction,
                                format!(
                                    "procedure transfer has no argument \"{given}\"; it takes {}",
                                    TRANSFER_ARGUMENTS.join(", ")
                                ),
                            )
                        })?;
                    (column, e)
                }
                _ => return Err(SqlError::feature_not_supported("this form of argument")),
            };
            if columns.contains(&column) {
                return Err(SqlError::syntax(format!(
                    "argument \"{column}\" given more than once"
                )));
            }
            columns.push(column);
            values.push(expr.to_string());
        }
        if columns.is_empty() {
            return Err(SqlError::new(
                ErrorKind::UndefinedFunction,
                "procedure transfer() needs arguments: transfer(id, debit_account_id, credit_account_id, amount, ledger, code, ...)",
            ));
        }
        let text = format!(
            "INSERT INTO {} ({}) VALUES ({})",
            table.name,
            columns.join(", "),
            values.join(", ")
        );
        let mut parsed = sql::parse(&text)?;
        let Some(Parsed::Statement(statement)) = parsed.pop().map(|p| p.parsed) else {
            return Err(SqlError::internal("CALL transfer did not become an INSERT"));
        };
        let ast::Statement::Insert(insert) = *statement else {
            return Err(SqlError::internal("CALL transfer did not become an INSERT"));
        };
        let Plan::Write(plan, _) = self.insert(&insert)? else {
            return Err(SqlError::internal("CALL transfer did not become an INSERT"));
        };
        let WritePlan::Insert(mut insert) = Arc::unwrap_or_clone(plan) else {
            return Err(SqlError::internal("CALL transfer did not become an INSERT"));
        };
        insert.call = true;
        let columns = vec![
            OutputColumn {
                name: "id".into(),
                ty: DataType::Int8,
                table_oid: 0,
                column_number: 0,
            },
            OutputColumn {
                name: "status".into(),
                ty: DataType::Text,
                table_oid: 0,
                column_number: 0,
            },
        ];
        Ok(Plan::Write(Arc::new(WritePlan::Insert(insert)), columns))
    }
}
