//! Which page buffers live snapshots hold, without touching a page to take one.
//!
//! A snapshot shares the pool's buffer addresses (`BufferPool::share_resident`,
//! `page_addresses`) and registers a `Share`, numbered in the order snapshots are taken.
//! Each frame remembers how many shares had been taken when its buffer became its own
//! (`Frame::buffer_since`): a live share with a higher number may be reading that buffer. Before the pool writes to
//! such a buffer, or reuses or drops it, it hands the buffer to every such share (`keep`),
//! which keeps it alive and unchanged until the snapshot ends; the pool goes on with a copy
//! or a fresh buffer. Taking a snapshot so costs no work per page: the addresses are shared
//! in copy-on-write chunks of 512, where cloning every resident page's `Arc` and marking
//! its frame cost 21–25 ns a page, a cache miss on each.

use std::sync::{Arc, Mutex, Weak};

use crate::arena::PageBuf;

/// What one snapshot holds besides its addresses: the buffers the pool let go of while the
/// snapshot lived, which it reads through those addresses.
pub(crate) struct Share {
    /// How many shares had been taken when this one was, itself included.
    number: u64,
    kept: Mutex<Vec<Arc<PageBuf>>>,
}

/// The pool's side: how many shares it has handed out, and the ones still alive.
#[derive(Default)]
pub(crate) struct Shares {
    taken: u64,
    /// Oldest first; an ended share's entry stays until `keep` next looks.
    live: Vec<Weak<Share>>,
}

impl Shares {
    /// A new share, holding every buffer a frame has now.
    pub fn take(&mut self) -> Arc<Share> {
        self.taken += 1;
        let share = Arc::new(Share {
            number: self.taken,
            kept: Mutex::new(Vec::new()),
        });
        self.live.retain(|s| s.strong_count() > 0);
        self.live.push(Arc::downgrade(&share));
        share
    }

    /// The shares taken so far: what a frame's `buffer_since` is set to when its buffer
    /// becomes its own.
    pub fn taken(&self) -> u64 {
        self.taken
    }

    /// Whether a live share may hold a buffer that became its frame's own when `since`
    /// shares had been taken. Cheap enough for every write that leaves the fast path.
    #[inline]
    pub fn may_hold(&self, since: u64) -> bool {
        since < self.taken && !self.live.is_empty()
    }

    /// Hands `buffer` to every live share taken after `since` (each keeps a reference);
    /// true when one took it — the caller must then neither write to it nor reuse it, and
    /// leaves it to the snapshots (`PageBuf::leave_to_snapshots`) unless a checkpoint
    /// holds it too.
    pub fn keep(&mut self, buffer: &Arc<PageBuf>, since: u64) -> bool {
        if !self.may_hold(since) {
            return false;
        }
        self.live.retain(|s| s.strong_count() > 0);
        let mut kept = false;
        for share in self.live.iter().filter_map(Weak::upgrade) {
            if share.number > since {
                let mut buffers = share.kept.lock().unwrap_or_else(|e| e.into_inner());
                buffers.push(Arc::clone(buffer));
                kept = true;
            }
        }
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena::PageArena;

    #[test]
    fn a_buffer_is_kept_by_the_live_shares_taken_after_it_became_its_frames() {
        let arena = PageArena::new(4096);
        let mut shares = Shares::default();
        let before = shares.taken();
        let first = shares.take();
        let buffer = Arc::new(arena.allocate());
        // Installed after the first share: no live share holds it.
        assert!(!shares.keep(&buffer, shares.taken()));
        let second = shares.take();
        assert!(shares.keep(&buffer, before));
        assert_eq!(first.kept.lock().unwrap().len(), 1);
        assert_eq!(second.kept.lock().unwrap().len(), 1);
        drop((first, second));
        assert!(!shares.keep(&buffer, before), "ended shares hold nothing");
        assert_eq!(Arc::strong_count(&buffer), 1);
    }
}
