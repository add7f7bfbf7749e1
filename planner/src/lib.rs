//! `planner`: binds parsed statements against the catalog and produces plans — point gets,
//! range scans, joins, aggregates, and write commands — with every name resolved, every
//! expression typed and every parameter's type inferred.
//!
//! It owns the catalog's shape (`TableDef`), bound expressions (`Expr`) and their evaluation,
//! the virtual `pg_catalog` tables, and EXPLAIN's text. It must not do IO: the executor in
//! `ledger` runs plans over storage.

mod access;
mod alter_table;
mod bind;
mod bind_array;
mod bind_call;
mod bind_ddl;
mod bind_expr;
mod bind_json;
mod bind_query;
mod bind_sequence;
mod bind_session_functions;
mod bind_set_operation;
mod bind_view;
mod bind_window;
mod bind_write;
mod catalog;
mod common_type;
mod enum_type;
mod expr;
mod foreign_key;
mod grouping_sets;
mod information_schema;
mod joins;
mod json_functions;
mod ledger;
mod null_folding;
mod plan;
mod row_values;
mod scalar_functions;
mod scope;
mod sequence;
mod system;

pub use access::{choose_access, filter_is_key_equality};
pub use bind::{bind, bind_in_session, catalog_with_table, Bound, DEFAULT_MARKER};
pub use bind_session_functions::{
    advisory_function, is_session_function, AdvisoryAction, AdvisoryLockCall, NotifyCall,
};
pub use bind_view::{dependent_views, views_depend_error};
pub use bind_write::{integer_literal_number, integer_range};
pub use catalog::{
    Catalog, CheckDef, ColumnDef, IndexDef, IndexDerivation, IndexExpr, PreparedStatementInfo,
    SessionActivity, TableDef, TableRef, ViewDef, FIRST_USER_OID,
};
pub use enum_type::{alter_enum, create_enum, drop_enums, EnumDef};
pub use expr::{
    arithmetic, compare_values, AggCall, AggFunc, BackendSignals, BinaryOp, EvalEnv, Expr, Func,
    NoBackends, NoSubqueries, SubqueryKind, SubqueryRunner,
};
pub use foreign_key::{same_columns, unique_on, ForeignKeyDef, ReferentialAction, SELF_REFERENCE};
pub use joins::equi_keys;
pub use ledger::{
    check_insert, check_remove, check_update, LedgerRole, LedgerSchema, TRANSFER_ARGUMENTS,
};
pub use plan::*;
pub use sequence::{nextval_calls, rel_calls, write_calls};
pub use sequence::{
    Identity, NoSequences, SequenceDef, SequenceOptions, SequenceOwner, SequenceSource,
    SequenceState, SessionSequences, SessionView,
};
pub use system::{relation_storage, SystemTable, SERVER_SETTINGS};
