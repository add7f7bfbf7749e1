//! `raft`: replication through openraft. It owns the log storage adapter (on kv's
//! `LogStore`, with appends grouped into one fdatasync), the state machine adapter that hands
//! committed entries to the executor, group commit above openraft (`Proposer`) with a reply
//! to each command as soon as it is applied (`early_reply`), snapshots (which are the
//! executor's checkpoints), the network between replicas (TCP), forwarding a follower's
//! writes and strong reads to the leader, and starting a node — alone or one of a cluster.
//!
//! It must not know about SQL: commands and results are opaque bytes encoded by the layers
//! above.
//!
//! Key types: `Node` (a started node: its `Raft`, `Proposer`, `ReadBarrier` and
//! `ClusterStatus`), `Proposer`, `ReadBarrier`, `Batch` (a log entry's commands),
//! `TypeConfig`.
//!
//! Reading order: `node.rs` (start and replay), `proposer.rs` (group commit, and where a
//! batch goes), `log_store.rs` (openraft's log storage on `kv::LogStore`),
//! `state_machine.rs` (entries to the executor), `apply_ahead.rs` (a single node's durable
//! entries handed to the executor by the log thread), `network.rs` (peers over TCP),
//! `read_barrier.rs` (strong reads), `status.rs` (`hotledger.cluster`), `early_reply.rs`,
//! `types.rs`, `byte_strings.rs` (byte strings on the wire, written whole); `log_conformance.rs`
//! runs openraft's storage suite.

// openraft's trait signatures return its `StorageError` by value; helpers follow suit.
#![allow(clippy::result_large_err)]

mod apply_ahead;
mod byte_strings;
mod early_reply;
#[cfg(test)]
mod log_conformance;
mod log_store;
mod membership;
mod network;
mod node;
mod peer_link;
mod proposer;
mod purge;
mod read_barrier;
mod snapshot;
mod snapshot_files;
mod state_machine;
mod status;
mod transfer_leader;
mod types;

pub use log_store::LogStats;
pub use membership::{Membership, MembershipChange, MembershipError};
pub use node::{start, Node, NodeOptions, StartError};
pub use proposer::{ProposeError, Proposer, ProposerStats};
pub use read_barrier::ReadBarrier;
pub use status::{ClusterStatus, MemberStatus};
pub use types::{Batch, BatchResults, NodeId, Raft, TypeConfig};
