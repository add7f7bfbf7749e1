//! The tag byte that opens each value in hotledger's byte forms of rows: rows as stored
//! (`ledger::row`) and rows packed into the log ([`crate::PackedRows`]). Both forms are on
//! disk, so a tag is never renumbered, only added.

pub const NULL: u8 = 0;
pub const FALSE: u8 = 1;
pub const TRUE: u8 = 2;
pub const INT: u8 = 3;
pub const FLOAT: u8 = 4;
pub const NUMERIC: u8 = 5;
pub const TEXT: u8 = 6;
pub const BYTES: u8 = 7;
pub const TIMESTAMP: u8 = 8;
pub const TIMESTAMPTZ: u8 = 9;
pub const DATE: u8 = 10;
/// A one-dimensional array: its length, then each element as a value.
pub const ARRAY: u8 = 11;
/// An interval: months, days, microseconds.
pub const INTERVAL: u8 = 12;
/// jsonb: its text form, as TEXT is stored (parsed again when read).
pub const JSONB: u8 = 13;
/// uuid: its 16 bytes.
pub const UUID: u8 = 14;
/// time: microseconds since midnight.
pub const TIME: u8 = 15;
