//! Where a `Reader` reads rows: the executor's partitions between entries, or snapshots of
//! them off the executor (`read_view.rs`). The few operations a read needs — a relation's
//! storage in a partition, a point get, an ordered walk, a table's version — the same over
//! both.

use std::cell::{Cell, RefCell};
use std::ops::Bound;

use kv::Direction;
use plan::TableDef;
use rustc_hash::FxHashMap;
use sql::{SqlError, SqlResult};

use crate::error::kv_error;
use crate::partition::{held, last_write, Shard};
use crate::read_view::ShardSnapshot;

pub(crate) enum Partitions<'a> {
    /// The executor's own, borrowed between entries.
    Live(RefCell<&'a mut Vec<Option<Shard>>>),
    /// Snapshots taken at one log position. `incomplete` is set when a read needs what only
    /// the executor has (`needs_executor`): the statement is then run there instead.
    Snapshot {
        shards: &'a [ShardSnapshot],
        incomplete: Cell<bool>,
    },
}

/// The kv table of relation `id` in a partition's storage map.
pub(crate) fn storage_handle(storage: &FxHashMap<u32, kv::Table>, id: u32) -> SqlResult<kv::Table> {
    storage
        .get(&id)
        .copied()
        .ok_or_else(|| SqlError::internal(format!("storage of relation {id} is missing")))
}

/// The kv table of a SQL table; a table without one does not exist (any more).
pub(crate) fn table_handle(
    storage: &FxHashMap<u32, kv::Table>,
    table: &TableDef,
) -> SqlResult<kv::Table> {
    storage
        .get(&table.id)
        .copied()
        .ok_or_else(|| SqlError::undefined_table(&table.name))
}

impl Partitions<'_> {
    pub fn count(&self) -> usize {
        match self {
            Partitions::Live(shards) => shards.borrow().len(),
            Partitions::Snapshot { shards, .. } => shards.len(),
        }
    }

    /// Whether a read needed the executor.
    pub fn incomplete(&self) -> bool {
        matches!(self, Partitions::Snapshot { incomplete, .. } if incomplete.get())
    }

    /// An error for a read a snapshot cannot do: marked, so the statement is run on the
    /// executor instead.
    pub fn needs_executor(&self, what: &str) -> SqlError {
        if let Partitions::Snapshot { incomplete, .. } = self {
            incomplete.set(true);
        }
        SqlError::internal(format!("{what} are read on the executor"))
    }

    /// Partition `index`'s storage map, handed to `pick`.
    fn storage<T>(
        &self,
        index: usize,
        pick: impl FnOnce(&FxHashMap<u32, kv::Table>) -> SqlResult<T>,
    ) -> SqlResult<T> {
        match self {
            Partitions::Live(shards) => pick(&held(&mut shards.borrow_mut(), index)?.storage),
            Partitions::Snapshot { shards, .. } => pick(&snapshot_at(shards, index)?.storage),
        }
    }

    /// Relation `id`'s storage in partition `index`.
    pub fn handle(&self, index: usize, id: u32) -> SqlResult<kv::Table> {
        self.storage(index, |storage| storage_handle(storage, id))
    }

    /// A SQL table's storage in partition `index`; missing storage means it no longer exists.
    pub fn table(&self, index: usize, table: &TableDef) -> SqlResult<kv::Table> {
        self.storage(index, |storage| table_handle(storage, table))
    }

    pub fn get(&self, index: usize, handle: kv::Table, key: &[u8]) -> SqlResult<Option<Vec<u8>>> {
        match self {
            Partitions::Live(shards) => {
                let mut shards = shards.borrow_mut();
                let shard = held(&mut shards, index)?;
                shard.engine.get(handle, key).map_err(kv_error)
            }
            Partitions::Snapshot { shards, .. } => snapshot_at(shards, index)?
                .snapshot
                .get(handle, key)
                .map_err(kv_error),
        }
    }

    /// Hands `each` every entry of `handle` in partition `index` between the bounds, in key
    /// order. `each` runs while the partitions are borrowed: it may not read tables.
    pub fn for_each(
        &self,
        index: usize,
        handle: kv::Table,
        bounds: (Bound<&[u8]>, Bound<&[u8]>),
        each: &mut dyn FnMut(Vec<u8>, Vec<u8>) -> SqlResult<()>,
    ) -> SqlResult<()> {
        self.walk(
            index,
            handle,
            bounds,
            Direction::Forward,
            &mut |key, value| each(key, value).map(|()| true),
        )
    }

    /// Hands `each` the entries of `handle` in partition `index` between the bounds, in
    /// `direction`, until it answers false. `each` runs while the partitions are borrowed:
    /// it may not read tables.
    pub fn walk(
        &self,
        index: usize,
        handle: kv::Table,
        (lower, upper): (Bound<&[u8]>, Bound<&[u8]>),
        direction: Direction,
        each: &mut dyn FnMut(Vec<u8>, Vec<u8>) -> SqlResult<bool>,
    ) -> SqlResult<()> {
        match self {
            Partitions::Live(shards) => {
                let mut shards = shards.borrow_mut();
                let shard = held(&mut shards, index)?;
                let range = shard.engine.range(handle, lower, upper, direction);
                hand_over(range.map_err(kv_error)?, each)
            }
            Partitions::Snapshot { shards, .. } => {
                let snapshot = &snapshot_at(shards, index)?.snapshot;
                let range = snapshot.range(handle, lower, upper, direction);
                hand_over(range.map_err(kv_error)?, each)
            }
        }
    }

    /// The log index of the last write to table `id`, in any partition.
    pub fn table_version(&self, id: u32) -> u64 {
        match self {
            Partitions::Live(shards) => last_write(&shards.borrow(), id),
            Partitions::Snapshot { shards, .. } => shards
                .iter()
                .filter_map(|s| s.table_versions.get(&id).copied())
                .max()
                .unwrap_or(0),
        }
    }
}

/// Hands `each` the entries of a kv range until it answers false.
fn hand_over(
    range: impl Iterator<Item = kv::KvResult<(Vec<u8>, Vec<u8>)>>,
    each: &mut dyn FnMut(Vec<u8>, Vec<u8>) -> SqlResult<bool>,
) -> SqlResult<()> {
    for item in range {
        let (key, value) = item.map_err(kv_error)?;
        if !each(key, value)? {
            break;
        }
    }
    Ok(())
}

fn snapshot_at(shards: &[ShardSnapshot], index: usize) -> SqlResult<&ShardSnapshot> {
    shards
        .get(index)
        .ok_or_else(|| SqlError::internal(format!("partition {index} is not in the read view")))
}
