//! The Raft type configuration: entries carry opaque commands, responses opaque results.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A log entry's application payload: the commands proposed together, each encoded by the
/// layer above (group commit puts many in one entry). The second field is the proposer's
/// token for answering each command as it is applied (`early_reply`); it lives only in
/// memory and is 0 in an entry read back from the log, so the log holds just the commands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch(pub Vec<Vec<u8>>, pub u64);

/// One encoded result per command of a `Batch`, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BatchResults(pub Vec<Vec<u8>>);

// Both serialize as a sequence of byte strings, each written and read whole: serde's own
// `Vec<u8>` goes a byte at a time (a 40 KB command was 40,000 calls). In bincode the bytes
// are the same either way: a length, then the bytes.

impl Serialize for Batch {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize_byte_strings(&self.0, serializer)
    }
}

impl<'de> Deserialize<'de> for Batch {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Batch, D::Error> {
        Ok(Batch(deserialize_byte_strings(deserializer)?, 0))
    }
}

impl Serialize for BatchResults {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize_byte_strings(&self.0, serializer)
    }
}

impl<'de> Deserialize<'de> for BatchResults {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<BatchResults, D::Error> {
        Ok(BatchResults(deserialize_byte_strings(deserializer)?))
    }
}

fn serialize_byte_strings<S: Serializer>(
    strings: &[Vec<u8>],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    struct Bytes<'a>(&'a [u8]);
    impl Serialize for Bytes<'_> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.serialize_bytes(self.0)
        }
    }
    serializer.collect_seq(strings.iter().map(|s| Bytes(s)))
}

fn deserialize_byte_strings<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<Vec<u8>>, D::Error> {
    struct ByteString(Vec<u8>);
    struct Visitor;
    impl<'de> serde::de::Visitor<'de> for Visitor {
        type Value = ByteString;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a byte string")
        }
        fn visit_bytes<E: serde::de::Error>(self, bytes: &[u8]) -> Result<ByteString, E> {
            Ok(ByteString(bytes.to_vec()))
        }
        fn visit_byte_buf<E: serde::de::Error>(self, bytes: Vec<u8>) -> Result<ByteString, E> {
            Ok(ByteString(bytes))
        }
        // Formats without byte strings write a sequence of numbers.
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<ByteString, A::Error> {
            let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
            while let Some(b) = seq.next_element()? {
                bytes.push(b);
            }
            Ok(ByteString(bytes))
        }
    }
    impl<'de> Deserialize<'de> for ByteString {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ByteString, D::Error> {
            deserializer.deserialize_byte_buf(Visitor)
        }
    }
    let strings: Vec<ByteString> = Vec::deserialize(deserializer)?;
    Ok(strings.into_iter().map(|s| s.0).collect())
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
