//! `plan`: what the binder produces and the executor runs — the catalog's shape, plans,
//! bound expressions and their evaluation, the function library, and the virtual
//! `pg_catalog` and `information_schema` tables.
//!
//! It owns: `Catalog` and its definitions (`TableDef`, `IndexDef`, `ViewDef`, `EnumDef`,
//! `SequenceDef`, `ForeignKeyDef`); `Plan` and its parts (`SelectPlan`, `Rel`, `WritePlan`,
//! `DdlPlan`); `Expr`, evaluated by `Expr::eval` against a row and an `EvalEnv`; every
//! function's signature and body (`Func`, `scalar_functions`, `json_functions`); casts and
//! arithmetic (`arithmetic`, `compare_values`); the key a filter pins (`choose_access`) and
//! the keys a join matches on (`equi_keys`); `Interrupt`, how a running statement learns
//! it must stop; `memory`, the heap each thread and the server hold against the server's
//! budget; `Authorization` (roles, memberships, ACLs, owners), the privilege checks a bound
//! statement is held to (`AclCheck`), `RolePlan` and SCRAM verifiers (`scram`).
//!
//! It must not: read SQL text or bind names (that is `planner`, which turns
//! `sql::ParsedStatement` into these types), or do IO (the executor in `ledger` runs plans
//! over storage; subqueries, sequences and other sessions reach evaluation through the
//! `SubqueryRunner`, `SequenceSource` and `BackendSignals` traits).
//!
//! Reading order: `catalog.rs` (what a schema is), `plan.rs` (what a statement becomes),
//! `expr.rs` (expressions: `Expr`, `Func`, `Expr::eval`) and `eval_env.rs` (`EvalEnv`), then the function
//! library (`function_eval.rs`, the dispatch by group, then `scalar_functions.rs` and
//! `json_functions.rs`), `access.rs` and `join_keys.rs`
//! (keys), `sequence.rs`, `enum_type.rs`, `foreign_key.rs`, `ledger.rs` (the ledger
//! tables' rules), `roles.rs`, `privileges.rs`, `role_plan.rs`, `scram.rs` and
//! `privilege_functions.rs` (who may do what), and `system.rs` / `information_schema.rs`
//! (the virtual tables).

mod access;
mod catalog;
mod enum_type;
mod eval_env;
mod expr;
mod foreign_key;
mod function_eval;
mod information_schema;
mod integer_literal;
mod interrupt;
mod join_keys;
pub mod json_functions;
mod ledger;
pub mod memory;
mod node_views;
mod plan;
mod privilege_functions;
mod privileges;
mod role_plan;
mod roles;
pub mod scalar_functions;
pub mod scram;
mod sequence;
mod system;

pub use access::*;
pub use catalog::*;
pub use enum_type::*;
pub use eval_env::*;
pub use expr::*;
pub use foreign_key::*;
pub use integer_literal::*;
pub use interrupt::{Interrupt, StopReason};
pub use join_keys::*;
pub use json_functions::JsonFunc;
pub use ledger::*;
pub use node_views::*;
pub use plan::*;
pub use privileges::*;
pub use role_plan::*;
pub use roles::*;
pub use sequence::*;
pub use system::*;
