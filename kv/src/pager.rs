//! The pager: page allocation over the buffer pool, the free list, and overflow chains for
//! values too large to live in a leaf.
//!
//! Free pages form a linked list through their `link` field, headed by `freelist_head` in the
//! superblock (0 = empty; page 0 is the superblock and never free). Freeing a page rewrites it
//! as a free page, so the list is persisted by the next checkpoint like any other change.

use crate::cursor::PageSource;
use crate::error::{KvError, KvResult};
use crate::leaf_hints::LeafHints;
use crate::lookahead::Lookahead;
use crate::page::{self, PageKind, HEADER_SIZE};
use crate::pool::BufferPool;

/// Allocation state that the superblock persists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocState {
    /// Pages in the file image, including the superblock (page ids are `0..page_count`).
    pub page_count: u64,
    pub freelist_head: u64,
}

pub struct Pager {
    pub pool: BufferPool,
    pub alloc: AllocState,
    /// Leaves recent point operations landed in, per tree (`leaf_hints`); the B+tree keeps
    /// them true.
    pub leaf_hints: LeafHints,
    /// Where recent inserts into leaves put their cells (`LeafInserts`).
    pub leaf_inserts: LeafInserts,
    /// Leaves found ahead of the operations on their keys (`btree::look_ahead`).
    pub lookahead: Lookahead,
    /// Pages freed so far: a leaf found ahead is used only while no page was freed since.
    pub frees: u64,
    /// Where the last get found its key (`btree::last_found`).
    pub last_found: Option<Found>,
    /// The buffer the last put encoded its cell in, kept for the next (`btree::put`).
    pub cell_buffer: Vec<u8>,
    page_size: usize,
}

/// A key's cell as a get found it: tree, leaf, index in the leaf, and `Pager::frees` then.
#[derive(Clone, Copy)]
pub struct Found {
    pub root: u64,
    pub leaf: u64,
    pub index: usize,
    pub frees: u64,
}

/// Leaves remembered by `LeafInserts` (direct-mapped by page id).
const LEAF_INSERT_SLOTS: usize = 64;

/// The slot of the last insert into each of recently written leaves, so a split can tell an
/// ascending run (this insert goes into the slot right after the leaf's previous one) from
/// inserts at scattered places (`btree::split`). Per leaf, not one for the engine: a ledger
/// transfer inserts into three trees in turn, and each tree's run must be seen on its own.
/// A forgotten or stale entry only makes a split take the middle.
pub struct LeafInserts {
    slots: [(u64, usize); LEAF_INSERT_SLOTS],
}

impl Default for LeafInserts {
    fn default() -> LeafInserts {
        LeafInserts {
            slots: [(0, 0); LEAF_INSERT_SLOTS],
        }
    }
}

impl LeafInserts {
    pub fn record(&mut self, leaf: u64, position: usize) {
        self.slots[leaf as usize % LEAF_INSERT_SLOTS] = (leaf, position);
    }

    /// Whether an insert at `position` of `leaf` goes right after the leaf's last insert.
    pub fn continues_run(&self, leaf: u64, position: usize) -> bool {
        position > 0 && self.slots[leaf as usize % LEAF_INSERT_SLOTS] == (leaf, position - 1)
    }
}

impl Pager {
    pub fn new(pool: BufferPool, alloc: AllocState, page_size: usize) -> Pager {
        Pager {
            pool,
            alloc,
            leaf_hints: LeafHints::default(),
            leaf_inserts: LeafInserts::default(),
            lookahead: Lookahead::default(),
            frees: 0,
            last_found: None,
            cell_buffer: Vec::new(),
            page_size,
        }
    }

    pub fn page_size(&self) -> usize {
        self.page_size
    }

    pub fn read(&mut self, page_id: u64) -> KvResult<&[u8]> {
        debug_assert!(
            page_id != 0 && page_id < self.alloc.page_count,
            "page {page_id}"
        );
        self.pool.read(page_id)
    }

    /// `read`, with the leaf hints borrowed alongside so a descent can note the separators it
    /// passes while it holds a page.
    pub fn read_with_hints(&mut self, page_id: u64) -> KvResult<(&[u8], &mut LeafHints)> {
        debug_assert!(
            page_id != 0 && page_id < self.alloc.page_count,
            "page {page_id}"
        );
        Ok((self.pool.read(page_id)?, &mut self.leaf_hints))
    }

    pub fn write(&mut self, page_id: u64) -> KvResult<&mut [u8]> {
        debug_assert!(
            page_id != 0 && page_id < self.alloc.page_count,
            "page {page_id}"
        );
        self.pool.write(page_id)
    }

    /// Allocates a page and initializes it as an empty page of `kind`.
    pub fn allocate(&mut self, kind: PageKind) -> KvResult<u64> {
        let page_id = if self.alloc.freelist_head != 0 {
            let page_id = self.alloc.freelist_head;
            let buffer = self.pool.write(page_id)?;
            if page::kind(buffer) != PageKind::Free as u8 {
                return Err(KvError::Poisoned(format!(
                    "free list points at page {page_id} of kind {}",
                    page::kind(buffer)
                )));
            }
            self.alloc.freelist_head = page::link(buffer);
            page_id
        } else {
            let page_id = self.alloc.page_count;
            self.alloc.page_count += 1;
            self.pool.install_new(page_id);
            page_id
        };
        let buffer = self.pool.write(page_id)?;
        page::init_node(buffer, kind);
        Ok(page_id)
    }

    /// Returns a page to the free list.
    pub fn free(&mut self, page_id: u64) -> KvResult<()> {
        assert!(page_id != 0, "the superblock is never freed");
        self.frees += 1;
        let head = self.alloc.freelist_head;
        let buffer = self.pool.write(page_id)?;
        buffer.fill(0);
        buffer[4] = PageKind::Free as u8;
        page::set_link(buffer, head);
        self.alloc.freelist_head = page_id;
        Ok(())
    }

    fn overflow_capacity(&self) -> usize {
        self.page_size - HEADER_SIZE
    }

    /// Stores `value` in a new chain of overflow pages; returns the first page id.
    pub fn write_overflow(&mut self, value: &[u8]) -> KvResult<u64> {
        let capacity = self.overflow_capacity();
        let chunks: Vec<&[u8]> = value.chunks(capacity).collect();
        let mut next = 0u64;
        // Written back to front so each page can point at the one after it.
        for chunk in chunks.iter().rev() {
            let page_id = self.allocate(PageKind::Overflow)?;
            let buffer = self.pool.write(page_id)?;
            buffer[4] = PageKind::Overflow as u8;
            page::write_u32(buffer, 12, chunk.len() as u32);
            page::set_link(buffer, next);
            buffer[HEADER_SIZE..HEADER_SIZE + chunk.len()].copy_from_slice(chunk);
            next = page_id;
        }
        Ok(next)
    }

    /// Reads a whole overflow chain of `len` bytes into `out`.
    pub fn read_overflow(
        &mut self,
        first_page: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> KvResult<()> {
        let mut source = self;
        PageSource::overflow(&mut source, first_page, len, out)
    }

    /// Frees an overflow chain.
    pub fn free_overflow(&mut self, first_page: u64) -> KvResult<()> {
        let mut page_id = first_page;
        while page_id != 0 {
            let next = page::link(self.read(page_id)?);
            self.free(page_id)?;
            page_id = next;
        }
        Ok(())
    }
}
