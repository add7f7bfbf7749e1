//! `ledger`: the executor. Its state is partitioned by account, one kv engine per partition;
//! a coordinator thread receives committed commands in log order and applies each one on
//! the partitions it touches — on that partition's own thread when it touches one other
//! than 0, else itself, holding them all — validating serializable reads, applying
//! `x = x + d` as a delta evaluated at apply time, checking constraints. It serves point
//! reads between entries, hands longer ones a snapshot of every partition to run off its
//! thread (`ReadView`, `query_on_view`), and checkpoints all partitions as one, recording
//! the log position they cover.
//!
//! The ledger's semantics (accounts, transfers, two-phase transfers and their expiry,
//! limits, idempotency, balancing and closing transfers, burned ids, imported events,
//! history, change events) are applied here too, in `transfer`; every account and transfer gets its own
//! timestamp, reserved per command in log order (`event_timestamps`).
//!
//! It must not know about Raft or sockets: log entries arrive as positions and opaque bytes,
//! and every reply is a callback. It runs plans (`plan`); it does not bind SQL (the one
//! binder question it asks, which views a DROP VIEW breaks, is handed to it in
//! `ExecutorOptions::dependent_views`). Commands are deterministic, so every replica
//! applying the same log reaches the same state.
//!
//! Invariants, asserted: log entries apply once each in increasing index
//! (`Coordinator::apply_entry`); every command starts with an empty undo log
//! (`Executor::run_command`); a partition's thread holds its partition, and only it, when it
//! applies (`Executor::lent`); no command creates more events than the timestamps it
//! reserved (`EventTimestamps::take`); an internal error stops the executor applying rather than
//! being answered and passed over (a replica that went on would diverge); debits equal
//! credits over all accounts after each entry in debug builds (`double_entry`).
//!
//! Key types: `ExecutorHandle` (the sessions' and the log's way in: `Request`), `Command`
//! (what a log entry carries), `Executor` (the state and the apply functions), `Reader`
//! (plans over storage), `ReadView` (every partition at one log position, read off the
//! executor), `UndoLog` (what makes a command atomic).
//!
//! Reading order: `executor.rs` (the `Executor`, `run_command`), `coordinator.rs` (the
//! thread, `apply_entry`, split runs), `command.rs`, `apply.rs` → `stage.rs` / `ddl.rs` /
//! `schema_transaction.rs` / `roles.rs` (writes, staged commits, schema and role changes),
//! `query.rs`, `index_scan.rs`,
//! `partitions_read.rs`, `read_view.rs`, `accumulator.rs` and `window.rs` (reads), `transfer.rs` → `amount.rs` / `two_phase.rs` / `change_events.rs` / `transfer_exists.rs` / `ledger_batch.rs` / `burned_ids.rs` / `event_timestamps.rs` / `imported.rs` / `account_set.rs` / `lookahead.rs` / `page_in.rs` (the ledger),
//! `share.rs`, `partition.rs`, `route.rs`, `worker.rs` (partitions), `prebuild.rs` (what a
//! session builds before proposing), `undo.rs`, `row.rs`, `integrity.rs` (the whole-state
//! check behind `hotledger check`).

mod account_set;
mod accumulator;
mod amount;
mod apply;
mod burned_ids;
mod change_events;
mod cluster_settings;
mod command;
mod coordinator;
mod ddl;
mod double_entry;
mod error;
mod event_timestamps;
mod executor;
mod foreign_keys;
mod imported;
mod index_scan;
mod install;
mod integrity;
mod ledger_batch;
mod lookahead;
mod page_in;
mod partition;
mod partitions_read;
mod prebuild;
mod query;
mod queue_depth;
mod read_view;
mod roles;
mod route;
mod row;
mod schema_transaction;
mod sequences;
mod share;
mod stage;
mod state_snapshot;
mod transfer;
mod transfer_activity;
mod transfer_exists;
mod two_phase;
mod undo;
mod window;
mod worker;

pub use amount::Balances;
pub use cluster_settings::ClusterSettings;
pub use command::{
    command_too_large, decode_command, decode_result, encode_command, encode_result, Command,
    CommandResult, Outcome, Overlay, QueryResult, ReadCheck, Staged, WriteOp, COMMAND_BYTES_MAX,
};
pub use coordinator::spawn;
pub use double_entry::AmountTotal;
pub use executor::{
    CommandApplied, EntryPayload, EntryResults, ExecutorHandle, ExecutorOptions, ExecutorStats,
    ReplicationMeta, Reply, Request, StatementContext, StatementValues,
};
pub use install::{stage, StagedInstall};
pub use integrity::IntegrityReport;
pub use prebuild::{prebuild_insert, prebuild_literal_insert, stage_insert_locally};
pub use query::{evaluate_with_sequences, evaluate_without_storage};
pub use queue_depth::QueueDepths;
pub use read_view::{query_on_view, ReadView};
pub use row::Row;
pub use schema_transaction::{SchemaChanges, SchemaStep};
pub use stage::{stage_on_view, stages_on_view};
pub use state_snapshot::{read_snapshot_header, SnapshotHeader, StateSnapshot};
pub use transfer_activity::{HotAccount, TransferActivity};
