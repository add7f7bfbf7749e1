//! Partitions of the executor's state. Each partition is one kv engine (its own data file,
//! buffer pool and checkpoints) holding its share of the ledger tables' rows: an account
//! and its balance history live in the partition of the account id, a transfer and its
//! pending state in the partition of the transfer id. Every other table, the catalog and
//! the executor's own metadata live in partition 0.
//!
//! Checkpoints of all partitions are one checkpoint: each engine stops once its pages and
//! page map record are durable (a gated checkpoint), the executor records the log position
//! in the commit record once every partition is prepared, and only then are the engines
//! released. Recovery takes a record only up to the committed position, so after a crash
//! every partition is at the same log position and the log replays from there.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use kv::{Engine, EngineStats, LogPosition};
use plan::TableDef;
use rustc_hash::FxHashMap;
use sql::{SqlError, SqlResult};

/// One partition's storage: its engine, the kv table of each SQL table and index in it, and
/// the log index of the last write to each table (for validating serializable scans).
pub(crate) struct Shard {
    pub engine: Engine,
    /// Looked up for every row and index write: keyed by small ids, so a fast hash.
    pub storage: FxHashMap<u32, kv::Table>,
    pub table_versions: FxHashMap<u32, u64>,
    /// Whether this partition holds any burned transfer id (`burned_ids`): None until
    /// first asked. Ids are never unburned, so once true it stays true; while false, a
    /// transfer skips the lookup.
    pub burned_ids: Option<bool>,
}

impl Shard {
    pub fn handle(&self, id: u32) -> SqlResult<kv::Table> {
        crate::partitions_read::storage_handle(&self.storage, id)
    }
}

/// Every entry of kv table `table` in a partition, in key order.
pub(crate) fn entries(shard: &mut Shard, table: kv::Table) -> SqlResult<kv::Range<'_>> {
    shard
        .engine
        .range(
            table,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            kv::Direction::Forward,
        )
        .map_err(crate::error::kv_error)
}

/// Partition `index` of an executor's partitions, if it holds it (a partition lent to its
/// thread is None here).
pub(crate) fn held(shards: &mut [Option<Shard>], index: usize) -> SqlResult<&mut Shard> {
    shards
        .get_mut(index)
        .and_then(Option::as_mut)
        .ok_or_else(|| {
            SqlError::internal(format!(
                "partition {index} is not held by the executor running this command"
            ))
        })
}

/// The log index of the last write to `table` in any of the partitions held.
pub(crate) fn last_write(shards: &[Option<Shard>], table: u32) -> u64 {
    shards
        .iter()
        .flatten()
        .filter_map(|s| s.table_versions.get(&table).copied())
        .max()
        .unwrap_or(0)
}

/// Every partition's table versions, for the checkpoint (partition 0's meta table keeps
/// them): `last_write` decides whether a SERIALIZABLE commit fails with 40001, so a node
/// that restarts from a checkpoint — or a replica that installs one — must know the writes
/// before it as well as one that applied every entry, or the same commit could succeed on
/// one and fail on another. Sorted, so equal states encode alike.
pub(crate) fn encode_table_versions(shards: &[Option<Shard>]) -> Vec<u8> {
    let versions: Vec<Vec<(u32, u64)>> = shards
        .iter()
        .map(|shard| {
            let shard = shard
                .as_ref()
                .expect("every partition is home between log entries, when checkpoints start");
            let mut versions: Vec<(u32, u64)> =
                shard.table_versions.iter().map(|(&t, &v)| (t, v)).collect();
            versions.sort_unstable();
            versions
        })
        .collect();
    bincode::serialize(&versions).expect("table versions serialize")
}

/// Puts back the table versions `encode_table_versions` stored.
pub(crate) fn restore_table_versions(shards: &mut [Option<Shard>], bytes: &[u8]) -> SqlResult<()> {
    let versions: Vec<Vec<(u32, u64)>> = bincode::deserialize(bytes)
        .map_err(|e| SqlError::internal(format!("stored table versions are unreadable: {e}")))?;
    if versions.len() != shards.len() {
        return Err(SqlError::internal(format!(
            "stored table versions name {} partitions, the data directory has {}",
            versions.len(),
            shards.len()
        )));
    }
    for (shard, versions) in shards.iter_mut().zip(versions) {
        if let Some(shard) = shard {
            shard.table_versions = versions.into_iter().collect();
        }
    }
    Ok(())
}

/// The most partitions a data directory can have (a command's partitions are a 64-bit set).
pub const MAX_PARTITIONS: usize = 64;

/// Whether the rows of `table` are spread over the partitions (the ledger's tables) or all
/// live in partition 0.
pub(crate) fn is_partitioned(table: &TableDef) -> bool {
    table.ledger.is_some()
}

/// The partition of an account or transfer id: a fixed mix of its bits (so consecutive ids
/// spread evenly), modulo the partition count. Part of the data directory's format.
pub fn partition_of_id(id: i64, partitions: usize) -> usize {
    if partitions <= 1 {
        return 0;
    }
    // splitmix64's finaliser.
    let mut x = id as u64;
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    (x % partitions as u64) as usize
}

/// The partition holding the row of `table` with storage key `key`.
pub(crate) fn partition_of_row(table: &TableDef, key: &[u8], partitions: usize) -> usize {
    if is_partitioned(table) {
        partition_of_key(key, partitions)
    } else {
        0
    }
}

/// The partition of a row of a partitioned table, from its storage key: every ledger table's
/// key starts with the id that places it (`accounts.id`, `transfers.id`,
/// `pending_transfers.id`, `account_balances.account_id`).
pub(crate) fn partition_of_key(key: &[u8], partitions: usize) -> usize {
    if partitions <= 1 {
        return 0;
    }
    match kv::keycode::decode_first_int(key) {
        Some(id) => partition_of_id(id, partitions),
        // Not an integer key (never for the ledger's tables): a stable place all the same.
        None => (crc32c::crc32c(key) as usize) % partitions,
    }
}

/// The data file of partition `index`: partition 0 is the configured file, the others sit
/// next to it.
pub(crate) fn partition_file(data_file: &Path, index: usize) -> PathBuf {
    if index == 0 {
        return data_file.to_path_buf();
    }
    let mut name = data_file.as_os_str().to_owned();
    name.push(format!(".p{index}"));
    PathBuf::from(name)
}

/// The log position up to which the partitions' checkpoints are committed, and the
/// partition count of the data directory: a small file replaced atomically (write, fsync,
/// rename, fsync the directory) once every partition's checkpoint for that position is
/// prepared. It is read before any engine is opened.
pub(crate) struct CommitRecord {
    path: PathBuf,
    /// The data directory's partition count, written with every position.
    pub partitions: usize,
}

/// What a commit record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Committed {
    pub position: LogPosition,
    pub partitions: usize,
}

const COMMIT_MAGIC: &[u8; 8] = b"HLCOMMIT";
const COMMIT_LEN: usize = 8 + 8 + 8 + 8 + 4;

impl CommitRecord {
    pub fn for_data_file(data_file: &Path) -> CommitRecord {
        let mut name = data_file.as_os_str().to_owned();
        name.push(".commit");
        CommitRecord {
            path: PathBuf::from(name),
            partitions: 1,
        }
    }

    /// What the record holds; `None` when no record has been written yet.
    pub fn read(&self) -> SqlResult<Option<Committed>> {
        let bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.error("read", e)),
        };
        if bytes.len() != COMMIT_LEN
            || &bytes[..8] != COMMIT_MAGIC
            || crc32c::crc32c(&bytes[..32]).to_le_bytes() != bytes[32..36]
        {
            return Err(SqlError::new(
                sql::ErrorKind::Io,
                format!(
                    "{} is damaged: the checkpoint commit record fails its checksum",
                    self.path.display()
                ),
            ));
        }
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or([0; 8]));
        Ok(Some(Committed {
            position: LogPosition {
                index: word(8),
                term: word(16),
            },
            partitions: word(24) as usize,
        }))
    }

    /// Makes `position` the committed checkpoint, durably.
    pub fn write(&self, position: LogPosition) -> SqlResult<()> {
        let mut bytes = Vec::with_capacity(COMMIT_LEN);
        bytes.extend_from_slice(COMMIT_MAGIC);
        bytes.extend_from_slice(&position.index.to_le_bytes());
        bytes.extend_from_slice(&position.term.to_le_bytes());
        bytes.extend_from_slice(&(self.partitions as u64).to_le_bytes());
        let crc = crc32c::crc32c(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        let mut temporary = self.path.as_os_str().to_owned();
        temporary.push(".new");
        let temporary = PathBuf::from(temporary);
        let file: File = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temporary)
            .map_err(|e| self.error("create", e))?;
        file.write_all_at(&bytes, 0)
            .and_then(|()| file.sync_data())
            .map_err(|e| self.error("write", e))?;
        drop(file);
        std::fs::rename(&temporary, &self.path).map_err(|e| self.error("rename", e))?;
        let directory = self.path.parent().unwrap_or(Path::new("."));
        File::open(directory)
            .and_then(|d| d.sync_all())
            .map_err(|e| self.error("sync the directory of", e))
    }

    fn error(&self, what: &str, e: std::io::Error) -> SqlError {
        SqlError::new(
            sql::ErrorKind::Io,
            format!("cannot {what} {}: {e}", self.path.display()),
        )
    }
}

/// The counters of all partitions' engines, added up.
pub(crate) fn combined_stats<'a>(shards: impl IntoIterator<Item = &'a Shard>) -> EngineStats {
    let mut all = shards.into_iter().map(|s| s.engine.stats());
    let Some(mut total) = all.next() else {
        return EngineStats::default();
    };
    for s in all {
        total.pool.hits += s.pool.hits;
        total.pool.misses += s.pool.misses;
        total.pool.evictions += s.pool.evictions;
        total.pool.read_ahead += s.pool.read_ahead;
        total.page_count += s.page_count;
        total.resident_pages += s.resident_pages;
        total.pool_capacity_pages += s.pool_capacity_pages;
        total.dirty_pages += s.dirty_pages;
        total.mapped_pages += s.mapped_pages;
        total.peak_buffer_pages += s.peak_buffer_pages;
        total.snapshot_pages += s.snapshot_pages;
        total.last_checkpoint_pages += s.last_checkpoint_pages;
        total.leaf_hint_hits += s.leaf_hint_hits;
        total.leaf_hint_misses += s.leaf_hint_misses;
        total.lookahead_keys += s.lookahead_keys;
        total.lookahead_used += s.lookahead_used;
        total.insert_buffer_bytes += s.insert_buffer_bytes;
        total.insert_buffer_drained += s.insert_buffer_drained;
        total.last_checkpoint_elapsed =
            total.last_checkpoint_elapsed.max(s.last_checkpoint_elapsed);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_spread_evenly_and_keys_place_like_their_ids() {
        let mut counts = [0usize; 4];
        for id in 1..=10_000i64 {
            let p = partition_of_id(id, 4);
            counts[p] += 1;
            let key = crate::row::encode_key(&[sql::Value::Int(id)]).unwrap();
            assert_eq!(partition_of_key(&key, 4), p);
            let history = crate::row::encode_key(&[
                sql::Value::Int(id),
                sql::Value::TimestampTz(5),
                sql::Value::Int(9),
            ])
            .unwrap();
            assert_eq!(partition_of_key(&history, 4), p);
        }
        assert!(
            counts.iter().all(|&c| (2_300..2_700).contains(&c)),
            "{counts:?}"
        );
        assert_eq!(partition_of_id(12345, 1), 0);
    }

    #[test]
    fn the_commit_record_round_trips_and_detects_damage() {
        let dir = tempfile::tempdir().unwrap();
        let mut record = CommitRecord::for_data_file(&dir.path().join("data.hl"));
        record.partitions = 4;
        assert_eq!(record.read().unwrap(), None);
        let at = LogPosition { term: 3, index: 77 };
        record.write(at).unwrap();
        let expected = Committed {
            position: at,
            partitions: 4,
        };
        assert_eq!(record.read().unwrap(), Some(expected));
        let path = dir.path().join("data.hl.commit");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[9] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        assert!(record.read().is_err());
    }
}
