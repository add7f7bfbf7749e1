//! The address of every resident page's bytes, by page id, in copy-on-write chunks of
//! `CHUNK_PAGES`: what a snapshot shares with the buffer pool instead of copying.
//!
//! The pool keeps one address a page beside its page table (`BufferPool::map`, its
//! copy-on-write in `write`, eviction and release set it). Taking a snapshot clones the
//! chunks' handles — one reference count per 512 pages, not one address per page — and the
//! pool's next change to a chunk a snapshot shares copies that chunk (4 KiB) first, so the
//! snapshot's addresses stay as they were. Hits never touch the chunks (the page table's
//! usage counts and write tags stay the pool's own), so reading costs nothing here.
//!
//! An address is only a number here: whether its bytes may be read is the share's business
//! (`page_shares`): the pool hands a buffer to the live shares before it writes to, reuses
//! or frees it.

use std::sync::Arc;

/// Pages per chunk: a snapshot costs a handle per this many pages, and the pool's first
/// change to a shared chunk copies this many addresses.
pub(crate) const CHUNK_PAGES: usize = 512;

#[derive(Clone)]
struct Chunk([*const u8; CHUNK_PAGES]);

// SAFETY: a chunk holds addresses and never dereferences them; who reads the bytes behind
// one answers for it (`Snapshot`, under its share).
unsafe impl Send for Chunk {}
unsafe impl Sync for Chunk {}

impl Chunk {
    const EMPTY: Chunk = Chunk([std::ptr::null(); CHUNK_PAGES]);
}

fn split(page_id: u64) -> (usize, usize) {
    let id = page_id as usize;
    (id / CHUNK_PAGES, id % CHUNK_PAGES)
}

/// The pool's side: addresses by page id, null where a page is not resident.
#[derive(Default)]
pub(crate) struct PageAddresses {
    chunks: Vec<Arc<Chunk>>,
}

impl PageAddresses {
    /// Page `page_id`'s bytes are at `address` now (null: not resident). Copies the page's
    /// chunk first when a snapshot shares it.
    #[inline]
    pub fn set(&mut self, page_id: u64, address: *const u8) {
        let (chunk, index) = split(page_id);
        if chunk >= self.chunks.len() {
            if address.is_null() {
                return;
            }
            self.chunks
                .resize_with(chunk + 1, || Arc::new(Chunk::EMPTY));
        }
        Arc::make_mut(&mut self.chunks[chunk]).0[index] = address;
    }

    /// The addresses of pages `0..page_count` as they are now, for a snapshot.
    pub fn share(&self, page_count: u64) -> SharedAddresses {
        let chunks = (page_count as usize)
            .div_ceil(CHUNK_PAGES)
            .min(self.chunks.len());
        SharedAddresses {
            chunks: self.chunks[..chunks].to_vec(),
            page_count,
        }
    }
}

/// A snapshot's side: the addresses of its pages as they were when it was taken.
pub(crate) struct SharedAddresses {
    chunks: Vec<Arc<Chunk>>,
    page_count: u64,
}

impl SharedAddresses {
    /// Page `page_id`'s address (null: not resident then); None past the snapshot's pages.
    #[inline]
    pub fn get(&self, page_id: u64) -> Option<*const u8> {
        if page_id >= self.page_count {
            return None;
        }
        let (chunk, index) = split(page_id);
        Some(
            self.chunks
                .get(chunk)
                .map_or(std::ptr::null(), |c| c.0[index]),
        )
    }

    /// How many pages the snapshot covers.
    pub fn page_count(&self) -> u64 {
        self.page_count
    }

    /// How many of them were resident.
    pub fn resident(&self) -> usize {
        (0..self.page_count)
            .filter(|&id| self.get(id).is_some_and(|a| !a.is_null()))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_keeps_the_addresses_of_its_moment() {
        let (a, b) = (0x1000 as *const u8, 0x2000 as *const u8);
        let mut pool = PageAddresses::default();
        pool.set(3, a);
        pool.set(CHUNK_PAGES as u64 + 1, b);
        let before = pool.share(CHUNK_PAGES as u64 + 2);
        pool.set(3, b);
        pool.set(CHUNK_PAGES as u64 + 1, std::ptr::null());
        pool.set(4 * CHUNK_PAGES as u64, a);
        assert_eq!(before.get(3), Some(a));
        assert_eq!(before.get(CHUNK_PAGES as u64 + 1), Some(b));
        assert_eq!(before.get(4), Some(std::ptr::null()));
        assert_eq!(before.get(CHUNK_PAGES as u64 + 2), None);
        assert_eq!(before.resident(), 2);
        let after = pool.share(5 * CHUNK_PAGES as u64);
        assert_eq!(after.get(3), Some(b));
        assert_eq!(after.get(CHUNK_PAGES as u64 + 1), Some(std::ptr::null()));
        assert_eq!(after.get(4 * CHUNK_PAGES as u64), Some(a));
        // A page the pool never had, inside the snapshot's count: not resident.
        assert_eq!(after.get(2 * CHUNK_PAGES as u64), Some(std::ptr::null()));
        assert_eq!(after.resident(), 2);
        // Unshared, a chunk is written in place (no copy).
        drop((before, after));
        let chunk = Arc::as_ptr(&pool.chunks[0]);
        pool.set(5, a);
        assert_eq!(Arc::as_ptr(&pool.chunks[0]), chunk);
    }
}
