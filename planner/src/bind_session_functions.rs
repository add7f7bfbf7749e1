//! Binding the functions that act on the session rather than on data: PostgreSQL's
//! advisory lock functions (`pg_advisory_lock`, `pg_try_advisory_lock`,
//! `pg_advisory_unlock`, their `_shared` and `_xact_` forms, `pg_advisory_unlock_all`) and
//! `pg_notify`, with LISTEN, UNLISTEN and NOTIFY. A lock belongs to a session and taking
//! one may wait for another session, and a notification goes to other sessions, so they
//! run in the session, never on an executor: a statement that is one call on its own
//! (`SELECT pg_advisory_lock($1)`, as migration tools send it) becomes `Plan::AdvisoryLock`
//! or `Plan::Notify`; a call anywhere else is refused.

use plan::{AdvisoryAction, AdvisoryLockCall, Expr, NotifyCall, OutputColumn, Plan};
use sql::ast;
use sql::{DataType, ErrorKind, SqlError, SqlResult};

use crate::bind::Binder;
use crate::bind_expr::{function_name, unnamed_args};
use crate::scope::Scope;

/// (action, shared, transaction) of an advisory lock function's name.
pub fn advisory_function(name: &str) -> Option<(AdvisoryAction, bool, bool)> {
    use AdvisoryAction::*;
    Some(match name {
        "pg_advisory_lock" => (Lock, false, false),
        "pg_advisory_lock_shared" => (Lock, true, false),
        "pg_try_advisory_lock" => (TryLock, false, false),
        "pg_try_advisory_lock_shared" => (TryLock, true, false),
        "pg_advisory_unlock" => (Unlock, false, false),
        "pg_advisory_unlock_shared" => (Unlock, true, false),
        "pg_advisory_unlock_all" => (UnlockAll, false, false),
        "pg_advisory_xact_lock" => (Lock, false, true),
        "pg_advisory_xact_lock_shared" => (Lock, true, true),
        "pg_try_advisory_xact_lock" => (TryLock, false, true),
        "pg_try_advisory_xact_lock_shared" => (TryLock, true, true),
        _ => return None,
    })
}

/// 0A000 for a session function used inside a larger statement.
pub(crate) fn not_alone(name: &str) -> SqlError {
    SqlError::feature_not_supported(format!(
        "{name}() other than on its own in a SELECT (SELECT {name}(...))"
    ))
}

/// Whether a function name is one of those that run in the session.
pub fn is_session_function(name: &str) -> bool {
    advisory_function(name).is_some() || name == "pg_notify"
}

impl Binder<'_> {
    /// `SELECT pg_notify(channel, payload) [AS name]`; None for any other query.
    pub(crate) fn notify_call(&mut self, q: &ast::Query) -> SqlResult<Option<Plan>> {
        let Some((f, alias, name)) = sole_call(q, |n| n == "pg_notify")? else {
            return Ok(None);
        };
        let args = plain_args(f, &name)?;
        let [channel, payload] = args.as_slice() else {
            return Err(SqlError::new(
                ErrorKind::UndefinedFunction,
                format!(
                    "function pg_notify() with {} arguments does not exist",
                    args.len()
                ),
            ));
        };
        let mut text = |e: &ast::Expr| -> SqlResult<Expr> {
            let bound = self.expr(e, &Scope::default(), Some(DataType::Text))?;
            let bound = self.coerce(bound, DataType::Text)?;
            if !reads_nothing(&bound) || !bound.ty().is_text_family() {
                return Err(not_alone(&name));
            }
            Ok(bound)
        };
        Ok(Some(Plan::Notify(NotifyCall {
            channel: text(channel)?,
            payload: text(payload)?,
            column: Some(OutputColumn::computed(
                alias.as_deref().unwrap_or(&name),
                DataType::Text,
            )),
        })))
    }

    /// `SELECT f(key) [AS name]` for an advisory lock function `f`; None for any other
    /// query.
    pub(crate) fn advisory_lock_call(&mut self, q: &ast::Query) -> SqlResult<Option<Plan>> {
        let Some((f, alias, name)) = sole_call(q, |n| advisory_function(n).is_some())? else {
            return Ok(None);
        };
        let (action, shared, transaction) =
            advisory_function(&name).expect("an advisory lock function");
        let args = plain_args(f, &name)?;
        let key_type = match (action, args.len()) {
            (AdvisoryAction::UnlockAll, 0) => DataType::Int8,
            (AdvisoryAction::UnlockAll, _) => return Err(no_such_function(&name, args.len())),
            (_, 1) => DataType::Int8,
            (_, 2) => DataType::Int4,
            _ => return Err(no_such_function(&name, args.len())),
        };
        let mut key = Vec::with_capacity(args.len());
        for a in args {
            let bound = self.expr(a, &Scope::default(), Some(key_type))?;
            let bound = self.coerce(bound, key_type)?;
            if !bound.ty().is_integer() || !reads_nothing(&bound) {
                return Err(no_such_function(&name, key.len() + 1));
            }
            key.push(bound);
        }
        let ty = match action {
            AdvisoryAction::TryLock | AdvisoryAction::Unlock => DataType::Bool,
            // PostgreSQL's `void`, which it sends as an empty string.
            AdvisoryAction::Lock | AdvisoryAction::UnlockAll => DataType::Text,
        };
        Ok(Some(Plan::AdvisoryLock(AdvisoryLockCall {
            action,
            shared,
            transaction,
            key,
            column: OutputColumn::computed(alias.as_deref().unwrap_or(&name), ty),
        })))
    }
}

/// The function call a query is made of, when it is `SELECT f(...) [AS alias]` for an `f`
/// that `wanted` picks, with its alias and name: 0A000 when such an `f` is called inside a
/// larger query.
fn sole_call(
    q: &ast::Query,
    wanted: impl Fn(&str) -> bool,
) -> SqlResult<Option<(&ast::Function, Option<String>, String)>> {
    let ast::SetExpr::Select(select) = q.body.as_ref() else {
        return Ok(None);
    };
    let (f, alias) = match select.projection.as_slice() {
        [ast::SelectItem::UnnamedExpr(ast::Expr::Function(f))] => (f, None),
        [ast::SelectItem::ExprWithAlias {
            expr: ast::Expr::Function(f),
            alias,
        }] => (f, Some(sql::ident(alias))),
        _ => return Ok(None),
    };
    let name = function_name(&f.name);
    if !wanted(&name) {
        return Ok(None);
    }
    let plain = select.from.is_empty()
        && select.selection.is_none()
        && q.with.is_none()
        && q.order_by.is_none()
        && q.limit_clause.is_none()
        && f.over.is_none()
        && f.filter.is_none();
    if !plain {
        return Err(not_alone(&name));
    }
    Ok(Some((f, alias, name)))
}

/// The arguments of a call, each a plain expression.
fn plain_args<'f>(f: &'f ast::Function, name: &str) -> SqlResult<Vec<&'f ast::Expr>> {
    unnamed_args(f).ok_or_else(|| not_alone(name))
}

/// An argument that is a value of its own: no column, no subquery.
fn reads_nothing(e: &Expr) -> bool {
    let mut reads = false;
    e.visit(&mut |x| {
        reads |= matches!(
            x,
            Expr::Column(..) | Expr::Subquery { .. } | Expr::InSubquery { .. }
        )
    });
    !reads
}

fn no_such_function(name: &str, args: usize) -> SqlError {
    let types = vec!["bigint"; args].join(", ");
    SqlError::new(
        ErrorKind::UndefinedFunction,
        format!("function {name}({types}) does not exist"),
    )
}
