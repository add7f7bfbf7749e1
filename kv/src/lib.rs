//! `kv`: hotledger's storage engine. It owns one database file of fixed-size pages with a
//! B+tree per table, a buffer pool, background checkpoints that write each page once to a
//! free slot and commit with a page map record, and the segmented log store that holds the
//! replicated log.
//!
//! Key types: [`Engine`] (tables, point and range operations, checkpoints, recovery),
//! [`Snapshot`] (the trees at one moment, readable from other threads while the owner writes),
//! [`LogStore`] (append/read/truncate/purge of log entries), [`BlockFile`] (io_uring or
//! portable file IO), [`keycode`] (order-preserving key encoding).
//!
//! What it deliberately does not do: it knows nothing of SQL, rows, Raft terms or networks;
//! keys and values are bytes. It takes no locks on the hot path: an `Engine` is driven by one
//! thread (the executor that owns it); only the checkpoint writer runs beside it, and it
//! touches nothing but page images handed to it, its files and its slot map. Between
//! checkpoints the caller's log is the durability: the engine never writes a slot the last
//! durable checkpoint uses.
//!
//! Reading order: `page` (format), `arena`, `pool` (with `pool/read_ahead`) and `pager`,
//! `btree` and `cursor`, `snapshot` (with `page_addresses` and `page_shares`),
//! `superblock`, `slots`,
//! `slot_holds`, `page_map` and `checkpoint`, `engine` (with `engine/insert_buffer`: a
//! table's second, small tree for writes whose leaf is out of the pool), then `log_store`
//! (`journal` only reads what format 3 left).

mod arena;
mod btree;
mod check;
mod checkpoint;
mod cursor;
mod engine;
mod error;
pub mod io;
mod journal;
pub mod keycode;
mod leaf_hints;
mod log_spares;
mod log_store;
mod lookahead;
mod page;
mod page_addresses;
mod page_map;
mod page_shares;
mod pager;
mod pool;
mod slot_holds;
mod slots;
mod snapshot;
mod superblock;

pub use btree::{max_inline_value_len, max_key_len, LOOK_AHEAD_KEYS};
pub use check::TreeShape;
pub use cursor::{Direction, Range};
pub use engine::{
    journal_path, CheckpointReport, Engine, EngineOptions, EngineStats, RecoveryInfo, Table,
};
pub use error::{IoOp, KvError, KvResult};
pub use io::{BlockFile, FaultPlan, IoMode};
pub use log_store::{LogStore, LogStoreOptions};
pub use pool::PoolStats;
pub use snapshot::{Snapshot, SnapshotRange};
pub use superblock::{LogPosition, FORMAT_VERSION};
