//! Page buffers carved from large, huge-page-backed memory chunks.
//!
//! The buffer pool's working set is accessed at random; with 4 KiB pages every access to a
//! cold page also costs a TLB miss, and under virtualization a page walk is many memory
//! references. Carving buffers from 2 MiB-aligned chunks advised `MADV_HUGEPAGE` lets the
//! kernel back them with huge pages. Freed buffers go back to the arena's free list, so a
//! checkpoint's copy-on-write copies cost no allocation.
//!
//! Buffers are freed from either thread (the executor or the checkpoint writer), hence the
//! mutex on the free list; it is taken only when a buffer is created or dropped, never on a
//! read or write of page bytes.
//!
//! The first write to fresh anonymous memory faults, and the kernel zeroes the whole huge
//! page then: while the pool grows, that was 8–10% of a busy executor's time (every B+tree
//! split takes a new page). So a chunk is mapped and touched before it is needed: when the
//! free list runs low, a short-lived thread maps the next chunk and faults it in (at idle
//! priority), and the thread that allocates puts its pages on the free list; it maps one
//! itself only if it runs dry first.
//!
//! On a loaded machine that thread gets little: the pool grows with the data (~70 MB/s
//! under the batch workload) and its owner ends up faulting most chunks itself. An arena
//! made with `pre_paged` therefore maps the pool's whole size ahead, from the start, on the
//! same idle-priority thread: a server that had idle time before its load (any that has
//! been up a while) meets the load with its memory backed.

use std::ptr::NonNull;
use std::sync::atomic::{
    AtomicBool, AtomicUsize,
    Ordering::{AcqRel, Acquire, Relaxed, Release},
};
use std::sync::{Arc, Mutex};

const CHUNK_BYTES: usize = 8 << 20;
const HUGE_PAGE_BYTES: usize = 2 << 20;
/// Below this many free bytes a prepared chunk is taken and more are prepared in the
/// background...
const LOW_WATER_BYTES: usize = 2 * CHUNK_BYTES;
/// ...up to this many waiting at once.
const PREPARED_MAX: usize = 2;

pub struct PageArena {
    page_size: usize,
    free: Mutex<Vec<usize>>,
    chunks: Mutex<Vec<(usize, usize)>>,
    /// Buffers handed out and not yet dropped, whoever holds them.
    in_use: AtomicUsize,
    /// Of those, the buffers the pool let go of while snapshots still held them
    /// (`PageBuf::leave_to_snapshots`).
    snapshot_only: AtomicUsize,
    /// The most buffers that were in use at once.
    peak_in_use: AtomicUsize,
    /// A thread is preparing the next chunk.
    refilling: AtomicBool,
    /// Chunks that thread prepared, for the allocating thread to take (0: an empty slot):
    /// `PREPARED_MAX` slots, or as many as pre-paging maps ahead.
    prepared: Box<[AtomicUsize]>,
    /// Chunks mapped so far, by either thread.
    mapped_chunks: AtomicUsize,
    /// Chunks to map ahead, whether asked for or not (`pre_paged`; 0: none).
    pre_page_chunks: usize,
    /// The arena's owner has gone: the preparing thread stops mapping.
    stopping: AtomicBool,
}

impl PageArena {
    pub fn new(page_size: usize) -> Arc<PageArena> {
        PageArena::with_slots(page_size, 0)
    }

    /// An arena that maps `bytes` (rounded up to whole chunks) ahead in the background,
    /// starting now, at idle priority: the memory's first touches are paid while the machine
    /// has time to spare rather than as the pool grows under load. `stop_preparing` ends it.
    pub fn pre_paged(page_size: usize, bytes: usize) -> Arc<PageArena> {
        let arena = PageArena::with_slots(page_size, bytes.div_ceil(CHUNK_BYTES));
        arena.refill_in_background();
        arena
    }

    fn with_slots(page_size: usize, pre_page_chunks: usize) -> Arc<PageArena> {
        assert!(CHUNK_BYTES.is_multiple_of(page_size), "pages tile a chunk");
        Arc::new(PageArena {
            page_size,
            free: Mutex::new(Vec::new()),
            chunks: Mutex::new(Vec::new()),
            in_use: AtomicUsize::new(0),
            snapshot_only: AtomicUsize::new(0),
            peak_in_use: AtomicUsize::new(0),
            refilling: AtomicBool::new(false),
            prepared: (0..pre_page_chunks.max(PREPARED_MAX))
                .map(|_| AtomicUsize::new(0))
                .collect(),
            mapped_chunks: AtomicUsize::new(0),
            pre_page_chunks,
            stopping: AtomicBool::new(false),
        })
    }

    /// Stops the background thread's mapping (its owner has gone, or shuts down).
    pub fn stop_preparing(&self) {
        self.stopping.store(true, Relaxed);
    }

    /// A page buffer with unspecified content.
    pub fn allocate(self: &Arc<Self>) -> PageBuf {
        let address = loop {
            let mut free = self.free_list();
            if let Some(address) = free.pop() {
                if free.len() * self.page_size < LOW_WATER_BYTES {
                    drop(free);
                    if let Some(chunk) = self.take_prepared() {
                        self.add_chunk(chunk);
                    }
                    self.refill_in_background();
                }
                break address;
            }
            drop(free);
            let chunk = self.take_prepared().unwrap_or_else(|| self.map_chunk());
            self.add_chunk(chunk);
        };
        let in_use = self.in_use.fetch_add(1, Relaxed) + 1;
        // Only the owning thread allocates (others only drop), so load-then-store is exact.
        if in_use > self.peak_in_use.load(Relaxed) {
            self.peak_in_use.store(in_use, Relaxed);
        }
        PageBuf {
            ptr: NonNull::new(address as *mut u8).expect("mapped memory is not null"),
            len: self.page_size,
            home: Arc::clone(self),
            snapshot_only: AtomicBool::new(false),
        }
    }

    /// Buffers only snapshots hold: alive, but no longer the pool's.
    pub fn snapshot_only(&self) -> usize {
        self.snapshot_only.load(Relaxed)
    }

    /// Buffers alive now: the pool's frames and the images a checkpoint still holds.
    pub fn in_use(&self) -> usize {
        self.in_use.load(Relaxed)
    }

    /// The most buffers that were alive at once since the arena was made.
    pub fn peak_in_use(&self) -> usize {
        self.peak_in_use.load(Relaxed)
    }

    /// Page buffers mapped so far: in use, on the free list or in a chunk waiting for it.
    pub fn mapped_pages(&self) -> usize {
        self.mapped_chunks.load(Relaxed) * (CHUNK_BYTES / self.page_size)
    }

    fn free_list(&self) -> std::sync::MutexGuard<'_, Vec<usize>> {
        self.free
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts a thread that prepares chunks until `PREPARED_MAX` wait (and, pre-paging, until
    /// the chunks to map ahead are mapped), unless one is at it already. Should no thread
    /// start, or the prepared chunks run out first, the allocating thread maps a chunk
    /// itself when the list runs dry.
    ///
    /// The thread faults its chunk in at `SCHED_IDLE`, on a CPU nothing else wants: on a
    /// virtual machine the first touch of memory is the host's to back, ~2.4 s of CPU per GiB
    /// on the reference machine, and at normal priority that took ~6% of a loaded machine
    /// from the executors while the pool grew. It takes no lock: it leaves its chunks in
    /// `prepared`, and the allocating thread puts their pages on the free list, so a thread
    /// starved at idle priority never holds up one that allocates or frees.
    fn refill_in_background(self: &Arc<Self>) {
        if self.refilling.swap(true, Relaxed) {
            return;
        }
        let arena = Arc::clone(self);
        let started = std::thread::Builder::new()
            .name("kv-arena".into())
            .spawn(move || {
                set_idle_priority();
                while arena.wants_prepared() {
                    // Only this thread fills slots, so an empty one stays empty until filled.
                    let Some(slot) = arena.prepared.iter().find(|s| s.load(Acquire) == 0) else {
                        break;
                    };
                    slot.store(arena.map_chunk(), Release);
                }
                arena.refilling.store(false, Relaxed);
            });
        if started.is_err() {
            self.refilling.store(false, Relaxed);
        }
    }

    /// Whether the background thread should map another chunk: fewer than `PREPARED_MAX`
    /// wait, or pre-paging has not mapped all it maps ahead.
    fn wants_prepared(&self) -> bool {
        if self.stopping.load(Relaxed) {
            return false;
        }
        let waiting = self
            .prepared
            .iter()
            .filter(|s| s.load(Acquire) != 0)
            .count();
        waiting < PREPARED_MAX || self.mapped_chunks.load(Relaxed) < self.pre_page_chunks
    }

    /// A chunk the background thread prepared, if one waits.
    fn take_prepared(&self) -> Option<usize> {
        self.prepared.iter().find_map(|slot| {
            // A load first: pre-paging leaves many slots, most of them empty.
            if slot.load(Relaxed) == 0 {
                return None;
            }
            match slot.swap(0, AcqRel) {
                0 => None,
                chunk => Some(chunk),
            }
        })
    }

    /// Puts a mapped chunk's pages on the free list, lowest address on top.
    fn add_chunk(&self, chunk: usize) {
        self.chunks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push((chunk, CHUNK_BYTES));
        self.free_list().extend(
            (0..CHUNK_BYTES / self.page_size)
                .rev()
                .map(|index| chunk + index * self.page_size),
        );
    }

    /// Maps a 2 MiB-aligned chunk, advises huge pages and faults every page in; returns its
    /// address.
    fn map_chunk(&self) -> usize {
        // Over-map by one huge page so a 2 MiB-aligned chunk fits, then trim the ends.
        let mapped_len = CHUNK_BYTES + HUGE_PAGE_BYTES;
        // SAFETY: an anonymous private mapping; no existing memory is affected.
        let mapped = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if mapped == libc::MAP_FAILED {
            std::alloc::handle_alloc_error(
                std::alloc::Layout::from_size_align(CHUNK_BYTES, 4096).expect("valid layout"),
            );
        }
        let start = mapped as usize;
        let aligned = start.next_multiple_of(HUGE_PAGE_BYTES);
        // SAFETY: both ranges lie inside the mapping just made and are not used by anyone.
        unsafe {
            if aligned > start {
                libc::munmap(mapped, aligned - start);
            }
            let tail = start + mapped_len - (aligned + CHUNK_BYTES);
            if tail > 0 {
                libc::munmap((aligned + CHUNK_BYTES) as *mut libc::c_void, tail);
            }
            // Advice only: without transparent huge pages the chunk simply uses small pages.
            libc::madvise(
                aligned as *mut libc::c_void,
                CHUNK_BYTES,
                libc::MADV_HUGEPAGE,
            );
            // One write per small page faults the chunk in (one fault per huge page with
            // them, the kernel zeroing it), here rather than on the page's first user.
            for offset in (0..CHUNK_BYTES).step_by(4096) {
                std::ptr::write_volatile((aligned + offset) as *mut u8, 0);
            }
        }
        self.mapped_chunks.fetch_add(1, Relaxed);
        aligned
    }

    fn release(&self, address: usize) {
        self.in_use.fetch_sub(1, Relaxed);
        self.free_list().push(address);
    }
}

/// Moves the calling thread to `SCHED_IDLE`. Advice only: where the call fails the thread
/// keeps its policy.
fn set_idle_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: changes only the calling thread's (pid 0) scheduling policy.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
}

impl Drop for PageArena {
    fn drop(&mut self) {
        let chunks = self
            .chunks
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for slot in self.prepared.iter() {
            let chunk = slot.swap(0, AcqRel);
            if chunk != 0 {
                chunks.push((chunk, CHUNK_BYTES));
            }
        }
        for (address, len) in chunks.drain(..) {
            // SAFETY: every buffer holds an `Arc` to the arena, so none is alive any more.
            unsafe { libc::munmap(address as *mut libc::c_void, len) };
        }
    }
}

/// One page of memory owned exclusively by its holder.
pub struct PageBuf {
    ptr: NonNull<u8>,
    len: usize,
    home: Arc<PageArena>,
    /// The pool let go of this buffer while snapshots held it: counted in the arena's
    /// `snapshot_only` until dropped.
    snapshot_only: AtomicBool,
}

// SAFETY: a `PageBuf` owns its memory exclusively (like a `Box<[u8]>`); the arena it returns
// the memory to is synchronized.
unsafe impl Send for PageBuf {}
// SAFETY: shared references only allow reading.
unsafe impl Sync for PageBuf {}

impl PageBuf {
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` points at `len` bytes owned by this buffer for its whole life.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// The address of the bytes, for callers that cache it next to the owning `Arc`.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// A new buffer from the same arena holding a copy of this one.
    pub fn duplicate(&self) -> PageBuf {
        let mut copy = self.home.allocate();
        copy.bytes_mut().copy_from_slice(self.bytes());
        copy
    }
}

impl PageBuf {
    /// The pool lets go of this buffer, which snapshots still hold: from now on it counts
    /// as theirs, not the pool's (`PageArena::snapshot_only`), until the last one drops it.
    pub fn leave_to_snapshots(&self) {
        if !self.snapshot_only.swap(true, Relaxed) {
            self.home.snapshot_only.fetch_add(1, Relaxed);
        }
    }
}

impl Drop for PageBuf {
    fn drop(&mut self) {
        if *self.snapshot_only.get_mut() {
            self.home.snapshot_only.fetch_sub(1, Relaxed);
        }
        self.home.release(self.ptr.as_ptr() as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_distinct_reused_and_outlive_nothing() {
        let arena = PageArena::new(4096);
        let mut a = arena.allocate();
        let mut b = arena.allocate();
        a.bytes_mut().fill(0);
        b.bytes_mut().fill(0);
        a.bytes_mut()[0] = 1;
        b.bytes_mut()[4095] = 2;
        assert_eq!((a.bytes()[0], a.bytes()[4095], b.bytes()[0]), (1, 0, 0));
        let address = a.as_ptr();
        drop(a);
        let c = arena.allocate();
        assert_eq!(c.as_ptr(), address, "a freed buffer is handed out again");
        let copy = b.duplicate();
        assert_eq!(copy.bytes(), b.bytes());
        assert_eq!(arena.in_use(), 3, "b, c and the copy");
        let many: Vec<PageBuf> = (0..3000).map(|_| arena.allocate()).collect();
        assert_eq!(many.len(), 3000, "more than one chunk");
        drop(arena);
        assert_eq!(
            many[2999].bytes().len(),
            4096,
            "buffers keep the arena alive"
        );
    }

    /// Waits up to 10 s for `done`.
    fn eventually(what: &str, done: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "{what}");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    #[test]
    fn a_pre_paged_arena_maps_its_size_ahead_and_stops_when_told() {
        let per_chunk = CHUNK_BYTES / 4096;
        let arena = PageArena::pre_paged(4096, 2 * CHUNK_BYTES + 1);
        eventually("three chunks mapped ahead", || {
            !arena.refilling.load(Relaxed) && arena.mapped_pages() >= 3 * per_chunk
        });
        assert_eq!(arena.mapped_pages(), 3 * per_chunk, "no more than asked");
        let held: Vec<PageBuf> = (0..2 * per_chunk).map(|_| arena.allocate()).collect();
        assert_eq!(held.len(), arena.in_use());
        assert!(arena.mapped_pages() >= 3 * per_chunk);

        let endless = PageArena::pre_paged(4096, 1 << 40);
        endless.stop_preparing();
        eventually("the preparing thread stops", || {
            !endless.refilling.load(Relaxed)
        });
        assert!(
            endless.mapped_pages() * 4096 < 1 << 30,
            "stopped long before its size"
        );
    }

    #[test]
    fn the_next_chunk_is_mapped_before_the_free_list_runs_dry() {
        let arena = PageArena::new(4096);
        let per_chunk = CHUNK_BYTES / 4096;
        let held: Vec<PageBuf> = (0..per_chunk * 3 / 4).map(|_| arena.allocate()).collect();
        eventually(
            "no second chunk after using three quarters of the first",
            || arena.mapped_pages() >= 2 * per_chunk,
        );
        assert_eq!(held.len(), arena.in_use());
        let all: Vec<PageBuf> = (0..per_chunk).map(|_| arena.allocate()).collect();
        let mut addresses: Vec<_> = held.iter().chain(&all).map(|b| b.as_ptr()).collect();
        addresses.sort();
        addresses.dedup();
        assert_eq!(
            addresses.len(),
            held.len() + all.len(),
            "every buffer distinct"
        );
    }
}
