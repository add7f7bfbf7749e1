//! The Raft type configuration: entries carry opaque commands, responses opaque results.

use std::io::Cursor;

use serde::{Deserialize, Serialize};

/// A log entry's application payload: the commands proposed together, each encoded by the
/// layer above (group commit puts many in one entry).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch(pub Vec<Vec<u8>>);

/// One encoded result per command of a `Batch`, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchResults(pub Vec<Vec<u8>>);

openraft::declare_raft_types!(
    pub TypeConfig:
        D = Batch,
        R = BatchResults,
);

pub type NodeId = u64;
pub type Raft = openraft::Raft<TypeConfig>;
