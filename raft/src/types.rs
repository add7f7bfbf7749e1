//! The Raft type configuration: entries carry opaque commands, responses opaque results.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::byte_strings;

/// A log entry's application payload: the commands proposed together, each encoded by the
/// layer above (group commit puts many in one entry). The second field is the proposer's
/// token for answering each command as it is applied (`early_reply`); it lives only in
/// memory and is 0 in an entry read back from the log, so the log holds just the commands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch(pub Vec<Vec<u8>>, pub u64);

/// One encoded result per command of a `Batch`, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BatchResults(pub Vec<Vec<u8>>);

// Both serialize as a sequence of byte strings, each written and read whole
// (`byte_strings`).

impl Serialize for Batch {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        byte_strings::serialize(&self.0, serializer)
    }
}

impl<'de> Deserialize<'de> for Batch {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Batch, D::Error> {
        Ok(Batch(byte_strings::deserialize(deserializer)?, 0))
    }
}

impl Serialize for BatchResults {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        byte_strings::serialize(&self.0, serializer)
    }
}

impl<'de> Deserialize<'de> for BatchResults {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<BatchResults, D::Error> {
        Ok(BatchResults(byte_strings::deserialize(deserializer)?))
    }
}

openraft::declare_raft_types!(
    pub TypeConfig:
        D = Batch,
        R = BatchResults,
        SnapshotData = tokio::fs::File,
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

    /// Written and read whole, a byte string encodes as serde's `Vec<u8>` does (the log's
    /// format is unchanged), in bincode and in a self-describing format alike.
    #[test]
    fn commands_encode_as_before() {
        let commands = vec![vec![], (0..=255u8).collect::<Vec<u8>>(), vec![7; 40_000]];
        let bytes = bincode::serialize(&Batch(commands.clone(), 0)).unwrap();
        assert_eq!(bytes, bincode::serialize(&commands).unwrap());
        let results = BatchResults(commands.clone());
        assert_eq!(
            bincode::deserialize::<BatchResults>(&bincode::serialize(&results).unwrap()).unwrap(),
            results
        );
        let json = serde_json::to_string(&Batch(commands.clone(), 0)).unwrap();
        assert_eq!(json, serde_json::to_string(&commands).unwrap());
        assert_eq!(
            serde_json::from_str::<Batch>(&json).unwrap(),
            Batch(commands, 0)
        );
    }
}
