//! `sql`: the language layer. It owns parsing (sqlparser-rs with the PostgreSQL dialect, plus
//! the few statements it cannot parse), the SQL value and type system with PostgreSQL's text
//! forms, and `SqlError`, the one place where an error becomes a SQLSTATE.
//!
//! It must not touch storage, the network or the catalog: everything here is a pure function
//! of its inputs.
//!
//! Key types: `Parsed` / `ParsedStatement` (what `parse` gives), `Value` and `DataType`,
//! `Numeric`, `Jsonb`, `ValueRows` (a bulk INSERT's rows, read without sqlparser),
//! `PackedRows` (rows as the log carries them; `value_codec` writes and reads the values of
//! both stored and packed rows), `SqlError` / `ErrorKind`.
//!
//! Reading order: `parse.rs`, `types.rs`, `value.rs`, `error.rs`, then the types
//! (`numeric.rs`, `jsonb.rs`, `interval.rs`, `datetime.rs`, `uuid.rs`, `time_of_day.rs`),
//! `insert_values.rs`, `value_tag.rs`, `value_codec.rs` and `packed_rows.rs`, `nesting.rs`,
//! `role_statement.rs` (the role statements of PostgreSQL's grammar sqlparser lacks).

pub mod datetime;
mod error;
mod insert_values;
mod interval;
pub mod jsonb;
mod lexical;
mod nesting;
mod numeric;
mod packed_rows;
mod parse;
mod procedure;
mod role_statement;
mod sequence_statement;
pub mod time_of_day;
mod types;
pub mod uuid;
mod value;
pub mod value_codec;
pub mod value_tag;

pub use error::{ErrorKind, SqlError, SqlResult};
pub use insert_values::{NodeId, Operator, RowValue, ValueRows};
pub use interval::Interval;
pub use jsonb::Jsonb;
pub use nesting::{depth_bound, MAX_EXPRESSION_DEPTH, STATEMENT_STACK_BYTES};
pub use numeric::Numeric;
pub use packed_rows::{ColumnFill, PackedRows, Packer, RowShape};
pub use parse::{ident, parse, split_statements, Overriding, Parsed, ParsedStatement};
pub use procedure::ProcedureText;
pub use role_statement::{OwnedKind, RoleStatement, NEGATIVE_LIMIT_BASE};
pub use sequence_statement::AlterSequence;
pub use sqlparser::ast;
pub use types::{quote_ident, DataType, EnumType};
pub use value::{check_int_range, Value, PG_EPOCH_OFFSET_DAYS, PG_EPOCH_OFFSET_MICROS};
