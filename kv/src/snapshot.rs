//! `Snapshot`: the engine's trees as they were at one moment, readable from any thread while
//! the owner goes on writing.
//!
//! Taking one hands every resident page's buffer (`Arc<PageBuf>`) to the snapshot and marks
//! the frames shared (`BufferPool::share_resident`): the owner's next write to such a page
//! copies it first — the copy-on-write the buffer pool already does for checkpoints — so
//! the snapshot's pages never change. The cost is one `Arc` clone per resident page when
//! taken, and one page copy per page the owner writes while a snapshot holds it.
//!
//! A page that was not resident when the snapshot was taken is not in it: reading one
//! fails with `KvError::SnapshotIncomplete`, and the caller reads through the engine
//! instead. (Reading such pages from the data file needs their slots kept from reuse while
//! the snapshot lives; not done yet.)

use std::ops::Bound;
use std::sync::Arc;

use crate::cursor::{Cursor, Direction, PageSource};
use crate::engine::Table;
use crate::error::{KvError, KvResult};
use crate::pool::PageBuf;

/// A read-only view of an engine's trees at the moment `Engine::snapshot` was called.
/// `Send` and `Sync`: any thread may read it, several at once.
pub struct Snapshot {
    /// Page buffers by page id; None where the page was not resident.
    pages: Vec<Option<Arc<PageBuf>>>,
    page_size: usize,
}

impl Snapshot {
    pub(crate) fn new(pages: Vec<Option<Arc<PageBuf>>>, page_size: usize) -> Snapshot {
        Snapshot { pages, page_size }
    }

    fn page_bytes(&self, page_id: u64) -> KvResult<&[u8]> {
        match self.pages.get(page_id as usize) {
            Some(Some(buffer)) => Ok(&buffer.bytes()[..self.page_size]),
            _ => Err(KvError::SnapshotIncomplete { page_id }),
        }
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
        Cursor::new(SnapshotPages(self), table.root(), lower, upper, direction).map(SnapshotRange)
    }
}

/// A snapshot as a cursor's page source.
pub(crate) struct SnapshotPages<'a>(&'a Snapshot);

impl PageSource for SnapshotPages<'_> {
    fn page(&mut self, page_id: u64) -> KvResult<&[u8]> {
        self.0.page_bytes(page_id)
    }
}

/// An iterator over a key range of a snapshot's table.
pub struct SnapshotRange<'a>(Cursor<SnapshotPages<'a>>);

impl Iterator for SnapshotRange<'_> {
    type Item = KvResult<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next()
    }
}
