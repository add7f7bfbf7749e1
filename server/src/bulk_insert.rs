//! A large `INSERT ... VALUES` of integer literals sent as text (the bulk-load form of
//! batch loaders and ORMs), bound without an expression for every value.
//!
//! Binding such a statement whole builds an expression per value, which the session then
//! evaluates, packs and drops: for a 1,000-row insert, about half of the CPU the sessions
//! spent on it. Here the statement is bound with its first row alone — every check of the
//! table, the columns, their types and the first row's values — and the rows are packed
//! straight from the row reader's values, the defaults packed once for all of them
//! (`ledger::prebuild_literal_insert`): exactly the rows binding the whole statement and
//! `ledger::prebuild_insert` give, which is what a write outside a transaction block
//! proposes. Anything else — a transaction block (whose statements are staged, with the
//! block's time), RETURNING or ON CONFLICT (which the executor evaluates with the command's
//! time), a value that is not an integer literal in its column's range, a default that
//! differs from row to row — binds the whole statement as before, so no answer or error
//! changes.

use std::sync::Arc;

use plan::{Bound, Catalog, Plan, WritePlan};
use planner::bind_in_session;
use sql::{Parsed, ParsedStatement};

/// Fewer rows than this are bound whole: binding the first row twice would cost more than
/// the expressions it saves.
const LITERAL_ROWS: usize = 64;

/// Binds one statement of a simple query; `alone` when it runs outside a transaction block.
pub(crate) fn bind_simple(
    catalog: &Catalog,
    statement: &ParsedStatement,
    context: planner::BindContext,
    alone: bool,
) -> sql::SqlResult<Bound> {
    if alone {
        if let Some(bound) = bind_literal_insert(catalog, statement, context) {
            return Ok(bound);
        }
    }
    bind_in_session(catalog, statement, &[], context)
}

/// `statement` bound with its rows built, when it is a large INSERT of integer literals
/// whose rows build here (see the module's documentation).
fn bind_literal_insert(
    catalog: &Catalog,
    statement: &ParsedStatement,
    context: planner::BindContext,
) -> Option<Bound> {
    let Parsed::InsertValues {
        statement: insert,
        rows,
    } = &statement.parsed
    else {
        return None;
    };
    if rows.len() < LITERAL_ROWS {
        return None;
    }
    let head = ParsedStatement {
        parsed: Parsed::InsertValues {
            statement: insert.clone(),
            rows: Box::new(rows.head(1)),
        },
        text: String::new(),
    };
    let bound = bind_in_session(catalog, &head, &[], context).ok()?;
    let Plan::Write(plan, columns) = &bound.plan else {
        return None;
    };
    let WritePlan::Insert(p) = plan.as_ref() else {
        return None;
    };
    if p.returning.is_some() || p.on_conflict.is_some() {
        return None;
    }
    let now = crate::session::now_micros();
    let built = ledger::prebuild_literal_insert(plan, catalog, rows, now)?;
    Some(Bound {
        plan: Plan::Write(Arc::new(built), columns.clone()),
        ..bound
    })
}
