//! `Snapshot`: the engine's trees as they were at one moment, readable from any thread while
//! the owner goes on writing.
//!
//! Taking one shares the pool's chunks of page addresses (`page_addresses`: a reference
//! count per 512 pages) and registers a share with the buffer pool
//! (`BufferPool::share_resident`, `page_shares`): before the owner writes to, reuses or
//! frees a buffer the snapshot may be reading, the pool hands it to the share and goes on
//! with a copy — the copy-on-write it already does for checkpoints — so the snapshot's
//! pages never change. The cost is a handle per 512 pages when taken, and, while a
//! snapshot holds them, one page copy per page the owner writes and one 4-KiB copy per
//! chunk of addresses it changes.
//!
//! A page that was not resident is clean: the snapshot reads it from its slot in the data
//! file, as the last durable checkpoint left it (the pool's slot map, shared, not copied).
//! The checkpoint writer keeps such slots from reuse while the snapshot lives
//! (`slot_holds`), so what is there stays the page as of the snapshot — until the engine is
//! closed: from then on such a read fails.

use std::ops::Bound;
use std::sync::Arc;

use crate::cursor::{Direction, PageSource, TableScan};
use crate::engine::Table;
use crate::error::{KvError, KvResult};
use crate::io::BlockFile;
use crate::page_addresses::SharedAddresses;
use crate::page_shares::Share;
use crate::pool::verify_loaded;
use crate::slot_holds::SlotHold;

/// A read-only view of an engine's trees at the moment `Engine::snapshot` was called.
/// `Send` and `Sync`: any thread may read it, several at once.
pub struct Snapshot {
    /// The bytes of each page by page id; null where the page was not resident.
    pages: SharedAddresses,
    /// Keeps the buffers `pages` point at as they were (`page_shares`).
    _share: Arc<Share>,
    /// Each page's slot in `file` when the snapshot was taken, for those not resident.
    slots: Arc<Vec<u32>>,
    file: Arc<BlockFile>,
    hold: SlotHold,
    page_size: usize,
}

// SAFETY: every non-null address in `pages` is the start of a page buffer that nothing
// writes to, reuses or frees while the snapshot's share lives: the pool hands each such
// buffer to the share before it would (`page_shares`), and the share lives as long as the
// snapshot. Any thread may read them, several at once.
unsafe impl Send for Snapshot {}
unsafe impl Sync for Snapshot {}

impl Snapshot {
    pub(crate) fn new(
        (pages, share): (SharedAddresses, Arc<Share>),
        slots: Arc<Vec<u32>>,
        file: Arc<BlockFile>,
        hold: SlotHold,
        page_size: usize,
    ) -> Snapshot {
        Snapshot {
            pages,
            _share: share,
            slots,
            file,
            hold,
            page_size,
        }
    }

    /// Page `page_id` as of the snapshot: its shared buffer, or read from its slot into
    /// `scratch`.
    fn page_bytes<'a>(&'a self, page_id: u64, scratch: &'a mut Vec<u8>) -> KvResult<&'a [u8]> {
        let resident = self.pages.get(page_id).ok_or_else(|| {
            KvError::Poisoned(format!(
                "a snapshot of {} pages was asked for page {page_id}",
                self.pages.page_count()
            ))
        })?;
        if !resident.is_null() {
            // SAFETY: see `Send for Snapshot`: the page's bytes, unchanged since the
            // snapshot was taken, alive while `self` is.
            return Ok(unsafe { std::slice::from_raw_parts(resident, self.page_size) });
        }
        if !self.hold.holds() {
            return Err(KvError::Poisoned(format!(
                "page {page_id} is not in the snapshot's memory and its engine is closed"
            )));
        }
        let slot = self.slots.get(page_id as usize).copied().unwrap_or(0);
        if slot == 0 {
            return Err(KvError::Poisoned(format!(
                "page {page_id} is in neither the snapshot's memory nor the data file"
            )));
        }
        scratch.resize(self.page_size, 0);
        let offset = u64::from(slot) * self.page_size as u64;
        self.file.pread_exact_at(scratch, offset)?;
        verify_loaded(&self.file, page_id, offset, scratch)?;
        Ok(scratch)
    }

    /// How many of the snapshot's pages were resident when it was taken (the rest are read
    /// from the data file).
    pub fn resident_pages(&self) -> usize {
        self.pages.resident()
    }

    /// The value of `key` in `table` as of the snapshot, copied into `out`; false when the
    /// table had no such key.
    pub fn get_into(&self, table: Table, key: &[u8], out: &mut Vec<u8>) -> KvResult<bool> {
        let mut range = self.range(
            table,
            Bound::Included(key),
            Bound::Included(key),
            Direction::Forward,
        )?;
        match range.next() {
            Some(entry) => {
                let (_, value) = entry?;
                *out = value;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    pub fn get(&self, table: Table, key: &[u8]) -> KvResult<Option<Vec<u8>>> {
        let mut out = Vec::new();
        Ok(self.get_into(table, key, &mut out)?.then_some(out))
    }

    /// The `(key, value)` pairs of `table` between the bounds, as of the snapshot.
    pub fn range(
        &self,
        table: Table,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> KvResult<SnapshotRange<'_>> {
        let mut pages = SnapshotPages {
            snapshot: self,
            scratch: Vec::new(),
        };
        let scan = TableScan::new(&mut pages, table.roots(), lower, upper, direction)?;
        Ok(SnapshotRange { pages, scan })
    }
}

/// A snapshot as a cursor's page source, with a buffer for the page last read from disk.
pub(crate) struct SnapshotPages<'a> {
    snapshot: &'a Snapshot,
    scratch: Vec<u8>,
}

impl PageSource for SnapshotPages<'_> {
    fn page(&mut self, page_id: u64) -> KvResult<&[u8]> {
        self.snapshot.page_bytes(page_id, &mut self.scratch)
    }
}

/// An iterator over a key range of a snapshot's table.
pub struct SnapshotRange<'a> {
    pages: SnapshotPages<'a>,
    scan: TableScan,
}

impl Iterator for SnapshotRange<'_> {
    type Item = KvResult<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.scan.next(&mut self.pages)
    }
}
