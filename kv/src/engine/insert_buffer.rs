//! Insert buffers: a second, small tree beside a table's tree that takes the writes whose
//! leaf is not in the buffer pool, and moves them into the table's tree in key order, many
//! to a leaf.
//!
//! Why: a secondary index keyed by something other than time (a transfer history keyed by
//! account, then timestamp) takes each insert in a random leaf. Once the index outgrows the
//! pool, nearly every insert reads a leaf from disk and leaves it dirty for the next
//! checkpoint: about one page read and one written per row. Its buffer is small enough to
//! stay in the pool, so an insert there reads nothing, and the pages it dirties are few and
//! the same ones over and over. When the buffers hold more than their budget, the oldest
//! part of the key space is drained: the next run of buffered keys in key order (a sweep
//! that wraps around) is read ahead in one batch, then moved. A leaf of the table's tree
//! then takes every entry buffered for it since the sweep last passed, in one read and one
//! write. This is InnoDB's change buffer, kept as a tree of its own in the same file: it is
//! checkpointed, recovered and snapshotted like any other tree, and the replicated log
//! replays into it like into any other.
//!
//! What must hold: a key is in at most one of a table's two trees. Only `put_blind` writes
//! to the buffer, and its caller promises the key is absent from the table (an index entry
//! that ends with its row's own key); every other operation finds the key's tree first
//! (`tree_holding`) and acts there. Reads merge the two trees (`cursor::TableScan`), and
//! assert they are disjoint.

use std::collections::BTreeMap;
use std::ops::Bound;

use super::{Engine, Table};
use crate::btree::{self, PutMode};
use crate::cursor::{Direction, Range};
use crate::error::KvResult;

/// Buffered keys moved into the table's tree at a time: read ahead in one batch of IO.
const DRAIN_RUN: usize = 64;

/// Bytes a buffered entry is counted for: its key, its value and about a cell's overhead.
fn entry_bytes(key: &[u8], value_len: usize) -> u64 {
    (key.len() + value_len + 8) as u64
}

/// The buffers of one engine's tables and their budget.
#[derive(Debug, Default)]
pub(crate) struct InsertBuffers {
    /// Buffered bytes (all tables) above which each buffered write drains a run.
    budget: u64,
    total: u64,
    /// Entries moved from buffers into their tables' trees since open.
    drained: u64,
    tables: BTreeMap<u64, Buffered>,
}

#[derive(Debug)]
struct Buffered {
    table: Table,
    bytes: u64,
    /// The last key the sweep moved; `None`: it starts again from the lowest key.
    sweep: Option<Vec<u8>>,
    /// The bytes the table's catalog value records (written at checkpoints, read on open);
    /// `None` for a value written before counts were recorded.
    recorded: Option<u64>,
}

impl InsertBuffers {
    pub(crate) fn new(budget: u64) -> InsertBuffers {
        InsertBuffers {
            budget,
            ..InsertBuffers::default()
        }
    }

    /// Bytes held in buffers now, and entries drained from them since open.
    pub(crate) fn counts(&self) -> (u64, u64) {
        (self.total, self.drained)
    }

    fn add(&mut self, id: u64, bytes: u64) {
        let buffered = self
            .tables
            .get_mut(&id)
            .expect("a buffered table is registered");
        buffered.bytes += bytes;
        self.total += bytes;
    }

    fn remove(&mut self, id: u64, bytes: u64) {
        let buffered = self
            .tables
            .get_mut(&id)
            .expect("a buffered table is registered");
        assert!(
            buffered.bytes >= bytes && self.total >= bytes,
            "table {id}'s insert buffer counts fewer bytes than it gives back"
        );
        buffered.bytes -= bytes;
        self.total -= bytes;
    }

    /// Adds `table`, whose buffer holds `bytes`, and what its catalog value records.
    pub(super) fn register(&mut self, table: Table, bytes: u64, recorded: Option<u64>) {
        let buffered = Buffered {
            table,
            bytes,
            sweep: None,
            recorded,
        };
        self.tables.insert(table.id, buffered);
        self.total += bytes;
    }

    /// Counts `id`'s buffer as empty (its table was truncated); its catalog value still
    /// records what it held until the next checkpoint writes it.
    pub(super) fn emptied(&mut self, id: u64) {
        let buffered = self
            .tables
            .get_mut(&id)
            .expect("a buffered table is registered");
        self.total -= buffered.bytes;
        buffered.bytes = 0;
        buffered.sweep = None;
    }

    pub(super) fn forget(&mut self, id: u64) {
        if let Some(buffered) = self.tables.remove(&id) {
            self.total -= buffered.bytes;
        }
    }
}

impl Engine {
    /// Creates a table whose writes through `put_blind` go to an insert buffer while their
    /// leaf is not in the pool (see the module's doc). For tables of keys that are never
    /// written twice, like a non-unique index's entries.
    pub fn create_buffered_table(&mut self, name: &str) -> KvResult<Table> {
        self.create_table_with(name, true)
    }

    /// Registers each buffered table with the bytes its buffer holds (on open): as its
    /// catalog value records them, or counted by a scan of the buffer for a value written
    /// before counts were recorded. Debug builds count every buffer and check the record.
    pub(super) fn count_buffers(&mut self, recorded: &BTreeMap<u64, u64>) -> KvResult<()> {
        let tables: Vec<Table> = self
            .tables
            .values()
            .copied()
            .filter(|t| t.is_buffered())
            .collect();
        for table in tables {
            let known = recorded.get(&table.id).copied();
            let bytes = match known {
                Some(bytes) if !cfg!(debug_assertions) => bytes,
                Some(bytes) => {
                    let counted = self.buffer_bytes(table)?;
                    assert_eq!(
                        bytes, counted,
                        "table {}: its catalog value records other bytes than its buffer holds",
                        table.id
                    );
                    bytes
                }
                None => self.buffer_bytes(table)?,
            };
            self.buffers.register(table, bytes, known);
        }
        Ok(())
    }

    /// The bytes `table`'s buffer holds, counted entry by entry.
    fn buffer_bytes(&mut self, table: Table) -> KvResult<u64> {
        let scan = Range::new(
            &mut self.pager,
            (table.buffer, None),
            Bound::Unbounded,
            Bound::Unbounded,
            Direction::Forward,
        )?;
        let mut bytes = 0;
        for entry in scan {
            let (key, value) = entry?;
            bytes += entry_bytes(&key, value.len());
        }
        Ok(bytes)
    }

    /// Writes the bytes each buffer holds into its table's catalog value where they changed
    /// since it was last written: a checkpoint calls it before capturing, so that the image
    /// it writes records what its buffers hold and the next open need not count them.
    pub(super) fn record_buffer_counts(&mut self) -> KvResult<()> {
        let changed: Vec<(String, Table, u64)> = self
            .tables
            .iter()
            .filter_map(|(name, table)| {
                let buffered = self.buffers.tables.get(&table.id)?;
                (buffered.recorded != Some(buffered.bytes))
                    .then(|| (name.clone(), *table, buffered.bytes))
            })
            .collect();
        for (name, table, bytes) in changed {
            let existed = btree::put(
                &mut self.pager,
                self.catalog_root,
                name.as_bytes(),
                &table.catalog_value(bytes),
                PutMode::UpdateOnly,
                &mut self.path_scratch,
                None,
            )?;
            assert!(
                existed,
                "table {}: a buffered table is in the catalog",
                table.id
            );
            if let Some(buffered) = self.buffers.tables.get_mut(&table.id) {
                buffered.recorded = Some(bytes);
            }
        }
        Ok(())
    }

    /// Writes `key`, which the caller knows is absent from `table` (an index entry that ends
    /// with its row's own key: it cannot already be there). On a buffered table whose leaf
    /// for `key` is not in the pool it goes to the insert buffer, and reads nothing. Since
    /// the key is promised absent from both trees, neither is looked up first.
    pub fn put_blind(&mut self, table: Table, key: &[u8], value: &[u8]) -> KvResult<()> {
        self.check_usable()?;
        let to_buffer = table.is_buffered() && !btree::path_resident(&self.pager, table.root, key);
        if cfg!(debug_assertions) {
            let found = self.get(table, key)?;
            assert!(
                found.is_none(),
                "table {}: a blind write found its key",
                table.id
            );
        }
        let root = if to_buffer { table.buffer } else { table.root };
        self.insert_absent(root, key, value, "a blind write found its key")?;
        if to_buffer {
            self.buffers.add(table.id, entry_bytes(key, value.len()));
            if self.buffers.total > self.buffers.budget {
                self.drain_run()?;
            }
        }
        Ok(())
    }

    /// Inserts `key` in tree `root`, where it must be absent: finding it there means the
    /// table's two trees no longer hold disjoint keys, and the engine stops (`broken`).
    fn insert_absent(&mut self, root: u64, key: &[u8], value: &[u8], broken: &str) -> KvResult<()> {
        let existed = btree::put(
            &mut self.pager,
            root,
            key,
            value,
            PutMode::InsertOnly,
            &mut self.path_scratch,
            None,
        )?;
        assert!(!existed, "tree {root}: {broken}");
        Ok(())
    }

    /// The root of the tree of `table` that holds `key`, or that a write of it goes to: the
    /// buffer when `key` is buffered (with its value's length), the table's tree otherwise.
    pub(super) fn tree_holding(
        &mut self,
        table: Table,
        key: &[u8],
    ) -> KvResult<(u64, Option<usize>)> {
        if !table.is_buffered() {
            return Ok((table.root, None));
        }
        let mut value = Vec::new();
        let buffered = btree::get(
            &mut self.pager,
            table.buffer,
            key,
            &mut self.path_scratch,
            &mut value,
        )?;
        Ok(match buffered {
            true => (table.buffer, Some(value.len())),
            false => (table.root, None),
        })
    }

    /// Counts a write to a table's buffer that replaced (`new_len: Some`) or removed a
    /// buffered entry of `old_len` bytes of value.
    pub(super) fn note_buffer_change(
        &mut self,
        table: Table,
        key: &[u8],
        old_len: usize,
        new_len: Option<usize>,
    ) {
        self.buffers.remove(table.id, entry_bytes(key, old_len));
        if let Some(len) = new_len {
            self.buffers.add(table.id, entry_bytes(key, len));
        }
    }

    /// Moves the next run of keys of the fullest buffer, in key order from where its sweep
    /// stopped, into its table's tree: their leaves read in one batch, then each entry
    /// deleted from the buffer and inserted in the tree.
    fn drain_run(&mut self) -> KvResult<()> {
        let Some(buffered) = self.buffers.tables.values().max_by_key(|b| b.bytes) else {
            return Ok(());
        };
        let (table, sweep) = (buffered.table, buffered.sweep.clone());
        let run: Vec<(Vec<u8>, Vec<u8>)> = Range::new(
            &mut self.pager,
            (table.buffer, None),
            sweep.as_deref().map_or(Bound::Unbounded, Bound::Excluded),
            Bound::Unbounded,
            Direction::Forward,
        )?
        .take(DRAIN_RUN)
        .collect::<KvResult<_>>()?;
        let keys: Vec<&[u8]> = run.iter().map(|(key, _)| key.as_slice()).collect();
        btree::page_in(&mut self.pager, table.root, &keys, false);
        let mut bytes = 0;
        for (key, value) in &run {
            let was_buffered = btree::delete(
                &mut self.pager,
                table.buffer,
                key,
                &mut self.path_scratch,
                None,
            )?;
            assert!(
                was_buffered,
                "table {}: a drained key left its buffer",
                table.id
            );
            self.insert_absent(table.root, key, value, "a buffered key was in its tree too")?;
            bytes += entry_bytes(key, value.len());
        }
        self.buffers.remove(table.id, bytes);
        self.buffers.drained += run.len() as u64;
        let sweep = match run.len() {
            DRAIN_RUN => run.last().map(|(key, _)| key.clone()),
            _ => None,
        };
        if let Some(buffered) = self.buffers.tables.get_mut(&table.id) {
            buffered.sweep = sweep;
        }
        Ok(())
    }
}
