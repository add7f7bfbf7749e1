//! Byte strings on the wire and in the log, each written and read whole. serde's own
//! `Vec<u8>` goes a byte at a time: a 40 KB command was 40,000 calls, and a 1 MiB snapshot
//! chunk took seconds to encode in a debug build. In bincode the bytes are the same either
//! way (a length, then the bytes), so what was written before still reads.
//!
//! `serialize`/`deserialize` take a sequence of byte strings (`#[serde(with = ...)]` on a
//! `Vec<Vec<u8>>`); `one` takes a single one; `snapshot_chunk` is openraft's
//! `InstallSnapshotRequest` with its data written whole.

use serde::de::{SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A byte string borrowed for writing.
struct Bytes<'a>(&'a [u8]);

impl Serialize for Bytes<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(self.0)
    }
}

/// A byte string read whole (or, from a format without byte strings, number by number).
struct ByteString(Vec<u8>);

struct ByteStringVisitor;

impl<'de> Visitor<'de> for ByteStringVisitor {
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
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ByteString, A::Error> {
        let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
        while let Some(b) = seq.next_element()? {
            bytes.push(b);
        }
        Ok(ByteString(bytes))
    }
}

impl<'de> Deserialize<'de> for ByteString {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ByteString, D::Error> {
        deserializer.deserialize_byte_buf(ByteStringVisitor)
    }
}

pub(crate) fn serialize<S: Serializer>(
    strings: &[Vec<u8>],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(strings.iter().map(|s| Bytes(s)))
}

pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<Vec<u8>>, D::Error> {
    let strings: Vec<ByteString> = Vec::deserialize(deserializer)?;
    Ok(strings.into_iter().map(|s| s.0).collect())
}

/// One byte string, for `#[serde(with = "byte_strings::one")]`.
pub(crate) mod one {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(bytes)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<u8>, D::Error> {
        Ok(ByteString::deserialize(deserializer)?.0)
    }
}

/// openraft's snapshot chunk, its fields in its own order with the data written whole.
pub(crate) mod snapshot_chunk {
    use openraft::raft::InstallSnapshotRequest;
    use openraft::{BasicNode, SnapshotMeta, Vote};

    use super::*;
    use crate::types::{NodeId, TypeConfig};

    #[derive(Serialize)]
    struct Out<'a> {
        vote: &'a Vote<NodeId>,
        meta: &'a SnapshotMeta<NodeId, BasicNode>,
        offset: u64,
        #[serde(with = "one")]
        data: &'a [u8],
        done: bool,
    }

    #[derive(Deserialize)]
    struct In {
        vote: Vote<NodeId>,
        meta: SnapshotMeta<NodeId, BasicNode>,
        offset: u64,
        #[serde(with = "one")]
        data: Vec<u8>,
        done: bool,
    }

    pub(crate) fn serialize<S: Serializer>(
        chunk: &InstallSnapshotRequest<TypeConfig>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        Out {
            vote: &chunk.vote,
            meta: &chunk.meta,
            offset: chunk.offset,
            data: &chunk.data,
            done: chunk.done,
        }
        .serialize(serializer)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<InstallSnapshotRequest<TypeConfig>, D::Error> {
        let chunk = In::deserialize(deserializer)?;
        Ok(InstallSnapshotRequest {
            vote: chunk.vote,
            meta: chunk.meta,
            offset: chunk.offset,
            data: chunk.data,
            done: chunk.done,
        })
    }
}

#[cfg(test)]
mod tests {
    use openraft::raft::InstallSnapshotRequest;
    use openraft::{SnapshotMeta, Vote};

    use super::*;
    use crate::types::TypeConfig;

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Chunk(#[serde(with = "snapshot_chunk")] InstallSnapshotRequest<TypeConfig>);

    /// A chunk encodes exactly as openraft's own derive does, so nodes of either kind
    /// understand each other, and decodes back whole.
    #[test]
    fn a_snapshot_chunk_encodes_as_openraft_s_own_and_back() {
        let chunk = InstallSnapshotRequest::<TypeConfig> {
            vote: Vote::new_committed(3, 2),
            meta: SnapshotMeta {
                last_log_id: None,
                last_membership: Default::default(),
                snapshot_id: "87-1".into(),
            },
            offset: 1 << 20,
            data: (0..=255).cycle().take(3000).collect(),
            done: true,
        };
        let ours = bincode::serialize(&Chunk(chunk.clone())).unwrap();
        assert_eq!(ours, bincode::serialize(&chunk).unwrap());
        let back: Chunk = bincode::deserialize(&ours).unwrap();
        assert_eq!(back.0, chunk);
    }

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Commands(#[serde(with = "self")] Vec<Vec<u8>>);

    #[test]
    fn byte_strings_encode_as_serde_s_own_and_back() {
        let commands = vec![b"one".to_vec(), vec![], vec![7; 1000]];
        let ours = bincode::serialize(&Commands(commands.clone())).unwrap();
        assert_eq!(ours, bincode::serialize(&commands).unwrap());
        assert_eq!(bincode::deserialize::<Commands>(&ours).unwrap().0, commands);
    }
}
