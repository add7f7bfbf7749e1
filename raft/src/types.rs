//! The Raft type configuration: entries carry opaque commands, responses opaque results.

use std::io::Cursor;

use serde::{Deserialize, Serialize};

/// A log entry's application payload: the commands proposed together, each encoded by the
/// layer above (group commit puts many in one entry). The second field is the proposer's
/// token for answering each command as it is applied (`early_reply`); it lives only in
/// memory and is 0 in an entry read back from the log, so the log holds just the commands.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch(pub Vec<Vec<u8>>, #[serde(skip)] pub u64);

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

#[cfg(test)]
mod tests {
    use super::*;

    /// The token is not part of the log format: an entry encodes as its commands alone, as
    /// before the token existed, and decodes with token 0.
    #[test]
    fn the_token_is_not_written() {
        let commands = vec![b"one".to_vec(), b"two".to_vec()];
        let bytes = bincode::serialize(&Batch(commands.clone(), 42)).unwrap();
        assert_eq!(bytes, bincode::serialize(&commands).unwrap());
        assert_eq!(
            bincode::deserialize::<Batch>(&bytes).unwrap(),
            Batch(commands, 0)
        );
    }
}
