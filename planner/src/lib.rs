//! `planner`: binds parsed statements against the catalog — every name resolved, every
//! expression typed, every parameter's type inferred — and plans them: point gets, range
//! scans, join order, aggregates, window functions, writes and DDL.
//!
//! It owns the binder (`Binder`, `Scope`), the planning decisions (which key or index a
//! filter uses, where a filter is pushed, in which order tables are joined) and the
//! privilege checks: what each statement needs of each object, checked as the role it runs
//! as (`BindContext`) before anything runs. What it
//! produces — `plan::Plan` and `plan::Expr` — and how that runs and evaluates lives in the
//! `plan` crate. It must not do IO or evaluate rows: the executor in `ledger` runs plans.
//!
//! Key entry points: `bind` (a statement against a catalog, as the bootstrap superuser),
//! `bind_in_session` (for a session's role, `BindContext`), `dependent_views` (what a DROP
//! would break).
//!
//! Reading order: `bind.rs` (the `Binder` and the statement dispatch), `scope.rs`,
//! `bind_expr.rs` (expressions; operators in `bind_operator.rs`, function calls and
//! aggregates in `bind_function.rs`), `bind_query.rs` (SELECT: WITH, grouping, ORDER BY) with
//! `bind_from.rs` (FROM, joins ordered by `joins.rs`), `bind_write.rs` (INSERT/UPDATE/DELETE), `first_rows.rs` (a LIMIT read from an index's order), `bind_ddl.rs` and
//! `alter_table.rs` (DDL), then the smaller binders (`bind_json`, `bind_array`,
//! `bind_window`, `bind_call`, `bind_sequence`, `bind_enum`, `bind_view`,
//! `bind_set_operation`, `bind_session_functions`), the role statements and privilege checks
//! (`bind_role`, `bind_grant`, `authorize`) and the typing rules
//! (`common_type.rs`, `null_folding.rs`, `row_values.rs`, `grouping_sets.rs`).

mod alter_table;
mod authorize;
mod bind;
mod bind_array;
mod bind_call;
mod bind_ddl;
mod bind_enum;
mod bind_expr;
mod bind_from;
mod bind_function;
mod bind_grant;
mod bind_json;
mod bind_operator;
mod bind_query;
mod bind_role;
mod bind_sequence;
mod bind_session_functions;
mod bind_set_operation;
mod bind_view;
mod bind_window;
mod bind_write;
mod common_type;
mod first_rows;
mod grouping_sets;
mod joins;
mod null_folding;
mod row_values;
mod scope;

pub use bind::{bind, bind_in_session, catalog_with_table, BindContext};
pub use bind_session_functions::{advisory_function, is_session_function};
pub use bind_view::dependent_views;
