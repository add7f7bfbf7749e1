//! `StateSnapshot`: the executor's whole state at one log position, as replication ships it
//! to a replica too far behind to catch up from the log.
//!
//! The coordinator takes one as it begins a checkpoint (`Coordinator::begin_snapshot`): the
//! checkpoint's metadata is written into the meta table first, then a `kv::Snapshot` of
//! every partition is taken at the same moment, so the snapshot holds exactly what that
//! checkpoint makes durable — what a restart from it would recover. It is answered once the
//! checkpoint is durable, so the log before its position may be purged.
//!
//! The stream is every partition's tables, each as its sorted (key, value) pairs, read from
//! the kv snapshots on the caller's thread (never the executor's) and written through a
//! `Write` — never whole in memory. A replica reads it back into fresh data files
//! (`install::stage`), which the executor swaps in under itself.
//!
//! Format (little-endian): `HLSNAP01`, a header (u32 length, bincode `SnapshotHeader`),
//! then records — `P` u32 partition, `T` u32 length + table name (`B` for a table with an
//! insert buffer, `kv::Engine::create_buffered_table`), `K` u32 length + key,
//! u32 length + value — then `E` and the CRC-32C of every byte before it.

use std::io::{BufReader, BufWriter, Read, Write};
use std::ops::Bound;

use kv::{Direction, LogPosition};
use serde::{Deserialize, Serialize};
use sql::{ErrorKind, SqlError, SqlResult};

use crate::error::kv_error;
use crate::executor::ReplicationMeta;

pub(crate) const MAGIC: &[u8; 8] = b"HLSNAP01";
pub(crate) const RECORD_PARTITION: u8 = b'P';
pub(crate) const RECORD_TABLE: u8 = b'T';
pub(crate) const RECORD_BUFFERED_TABLE: u8 = b'B';
pub(crate) const RECORD_PAIR: u8 = b'K';
pub(crate) const RECORD_END: u8 = b'E';

/// The longest header, table name, key or value a reader accepts: a damaged length fails
/// cleanly instead of allocating gigabytes.
pub(crate) const MAX_FIELD_BYTES: u32 = 256 << 20;

/// What a snapshot covers: its log position, the replication layer's bytes for it (the id
/// of the last entry and the membership), and the shape of the data files it fills.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct SnapshotHeader {
    pub index: u64,
    pub term: u64,
    pub applied_log_id: Option<Vec<u8>>,
    pub membership: Option<Vec<u8>>,
    pub partitions: u32,
    pub page_size: u32,
}

impl SnapshotHeader {
    pub fn position(&self) -> LogPosition {
        LogPosition {
            index: self.index,
            term: self.term,
        }
    }

    pub fn meta(&self) -> ReplicationMeta {
        ReplicationMeta {
            applied_log_id: self.applied_log_id.clone(),
            membership: self.membership.clone(),
        }
    }
}

/// One partition as of the snapshot: its kv snapshot and every kv table in it, by name.
pub(crate) struct PartitionSnapshot {
    pub snapshot: kv::Snapshot,
    pub tables: Vec<(String, kv::Table)>,
}

/// Every partition of the executor at one log position (see the module documentation).
/// `Send` and `Sync`: written out on any thread while the executor goes on.
pub struct StateSnapshot {
    pub(crate) header: SnapshotHeader,
    pub(crate) partitions: Vec<PartitionSnapshot>,
}

impl StateSnapshot {
    pub fn header(&self) -> &SnapshotHeader {
        &self.header
    }

    /// Writes the snapshot to `out` (buffered here); returns the bytes written.
    pub fn write_to(&self, out: impl Write) -> SqlResult<u64> {
        let mut out = Checksummed::new(BufWriter::with_capacity(1 << 20, out));
        out.put(MAGIC)?;
        let header = bincode::serialize(&self.header)
            .map_err(|e| SqlError::internal(format!("snapshot header: {e}")))?;
        out.put_field(&header)?;
        for (index, partition) in self.partitions.iter().enumerate() {
            out.put(&[RECORD_PARTITION])?;
            out.put(&(index as u32).to_le_bytes())?;
            for (name, table) in &partition.tables {
                out.put(&[match table.is_buffered() {
                    true => RECORD_BUFFERED_TABLE,
                    false => RECORD_TABLE,
                }])?;
                out.put_field(name.as_bytes())?;
                let pairs = partition
                    .snapshot
                    .range(
                        *table,
                        Bound::Unbounded,
                        Bound::Unbounded,
                        Direction::Forward,
                    )
                    .map_err(kv_error)?;
                for pair in pairs {
                    let (key, value) = pair.map_err(kv_error)?;
                    out.put(&[RECORD_PAIR])?;
                    out.put_field(&key)?;
                    out.put_field(&value)?;
                }
            }
        }
        out.put(&[RECORD_END])?;
        let crc = out.crc;
        out.put(&crc.to_le_bytes())?;
        out.inner.flush().map_err(write_error)?;
        Ok(out.written)
    }
}

fn write_error(e: std::io::Error) -> SqlError {
    SqlError::new(ErrorKind::Io, format!("cannot write a snapshot: {e}"))
}

/// A snapshot that cannot be read: damaged, cut short, or not a snapshot.
pub(crate) fn damaged(what: impl std::fmt::Display) -> SqlError {
    SqlError::new(
        ErrorKind::DataCorrupted,
        format!("the snapshot is damaged: {what}"),
    )
}

/// A writer that keeps the CRC-32C and count of what went through it.
struct Checksummed<W: Write> {
    inner: W,
    crc: u32,
    written: u64,
}

impl<W: Write> Checksummed<W> {
    fn new(inner: W) -> Self {
        Checksummed {
            inner,
            crc: 0,
            written: 0,
        }
    }

    fn put(&mut self, bytes: &[u8]) -> SqlResult<()> {
        self.inner.write_all(bytes).map_err(write_error)?;
        self.crc = crc32c::crc32c_append(self.crc, bytes);
        self.written += bytes.len() as u64;
        Ok(())
    }

    fn put_field(&mut self, bytes: &[u8]) -> SqlResult<()> {
        let len = u32::try_from(bytes.len())
            .ok()
            .filter(|&n| n <= MAX_FIELD_BYTES)
            .ok_or_else(|| SqlError::internal("a snapshot field is longer than 256 MiB"))?;
        self.put(&len.to_le_bytes())?;
        self.put(bytes)
    }
}

/// What a reader of the stream meets next.
pub(crate) enum Record {
    Partition(u32),
    /// A table's name, and whether it has an insert buffer.
    Table(String, bool),
    Pair(Vec<u8>, Vec<u8>),
    /// The end, its checksum verified.
    End,
}

/// Reads a snapshot stream back, record by record, checking its checksum at the end.
pub(crate) struct SnapshotReader<R: Read> {
    inner: BufReader<R>,
    crc: u32,
}

impl<R: Read> SnapshotReader<R> {
    /// Opens the stream: its magic and header.
    pub fn open(inner: R) -> SqlResult<(SnapshotReader<R>, SnapshotHeader)> {
        let mut reader = SnapshotReader {
            inner: BufReader::with_capacity(1 << 20, inner),
            crc: 0,
        };
        let mut magic = [0u8; 8];
        reader.take(&mut magic)?;
        if &magic != MAGIC {
            return Err(damaged("it does not start like a hotledger snapshot"));
        }
        let header = reader.field()?;
        let header = bincode::deserialize(&header).map_err(|e| damaged(format!("header: {e}")))?;
        Ok((reader, header))
    }

    fn take(&mut self, buf: &mut [u8]) -> SqlResult<()> {
        self.inner
            .read_exact(buf)
            .map_err(|e| damaged(format!("cut short ({e})")))?;
        self.crc = crc32c::crc32c_append(self.crc, buf);
        Ok(())
    }

    fn word(&mut self) -> SqlResult<u32> {
        let mut bytes = [0u8; 4];
        self.take(&mut bytes)?;
        Ok(u32::from_le_bytes(bytes))
    }

    fn field(&mut self) -> SqlResult<Vec<u8>> {
        let len = self.word()?;
        if len > MAX_FIELD_BYTES {
            return Err(damaged(format!("a field claims {len} bytes")));
        }
        let mut bytes = vec![0u8; len as usize];
        self.take(&mut bytes)?;
        Ok(bytes)
    }

    pub fn next_record(&mut self) -> SqlResult<Record> {
        let mut tag = [0u8; 1];
        self.take(&mut tag)?;
        match tag[0] {
            RECORD_PARTITION => Ok(Record::Partition(self.word()?)),
            tag @ (RECORD_TABLE | RECORD_BUFFERED_TABLE) => String::from_utf8(self.field()?)
                .map(|name| Record::Table(name, tag == RECORD_BUFFERED_TABLE))
                .map_err(|_| damaged("a table name is not UTF-8")),
            RECORD_PAIR => {
                let key = self.field()?;
                Ok(Record::Pair(key, self.field()?))
            }
            RECORD_END => {
                let expected = self.crc;
                let mut stored = [0u8; 4];
                self.inner
                    .read_exact(&mut stored)
                    .map_err(|e| damaged(format!("cut short ({e})")))?;
                if u32::from_le_bytes(stored) != expected {
                    return Err(damaged("its checksum does not match"));
                }
                Ok(Record::End)
            }
            other => Err(damaged(format!("unknown record {other:#04x}"))),
        }
    }
}

/// The header of the snapshot in `input`, without reading the rest.
pub fn read_snapshot_header(input: impl Read) -> SqlResult<SnapshotHeader> {
    SnapshotReader::open(input).map(|(_, header)| header)
}
