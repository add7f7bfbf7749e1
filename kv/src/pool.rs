//! The buffer pool: page frames in memory, a page table, and GCLOCK eviction.
//!
//! Policy (no-steal): a dirty page never leaves memory before a checkpoint has written it.
//! Between checkpoints the replicated log is the durability and the data file holds the last
//! checkpoint's image; a page evicted dirty would have nowhere to be read back from. (Since
//! checkpoints write to free slots, a dirty page could be written early to one without harming
//! the last checkpoint; that is not done.) When every frame is dirty the pool grows past its
//! capacity and says so (`over_capacity`), which tells the owner to checkpoint.
//!
//! Frames hold `Arc<PageBuf>`. A checkpoint's image is captured incrementally, so starting
//! one costs O(1): `begin_capture` opens a new dirty epoch and takes the list of frames
//! dirtied before it; `capture_step` then hands out a bounded number of their `Arc`s at a time
//! (the owner calls it between operations). A write to a frame dirtied before the epoch and
//! not yet captured captures it first, so the image is exactly the state at `begin_capture`.
//! A write to a captured page copies it (into a buffer from the arena) if the writer thread
//! still holds the image: that is the copy-on-write that lets updates continue during a
//! checkpoint.
//!
//! The page table maps a page id to a `Mapping`: the address of the page's bytes, its frame
//! and its usage count, 16 bytes in one cache line. A read that hits touches that line and
//! the page, never the frame (a frame is a cold line of its own for every cold page). A write
//! goes the same short way when the mapping says the frame was made writable in the current
//! capture epoch (dirty since the epoch began, its buffer not shared); otherwise it takes the
//! frame's path, which captures or copies as needed, and marks the mapping. Starting a capture
//! moves the epoch on, which takes that mark back from every page at once.
//!
//! The table has an entry for every page id up to the highest ever resident, 16 bytes each:
//! 0.4% of a data file of 4 KiB pages.
//!
//! Eviction is GCLOCK: a hit raises a page's usage count (up to `USAGE_MAX`), the clock hand
//! lowers it, and a clean frame at zero is evicted. Pages touched on every lookup (the upper
//! levels of each B+tree, the hot leaves under a skewed load) keep a high count and stay.

use std::sync::Arc;

use crate::arena::PageArena;
pub use crate::arena::PageBuf;
use crate::error::{KvError, KvResult};
use crate::io::BlockFile;
use crate::page;
use crate::page_addresses::{PageAddresses, SharedAddresses};
use crate::page_shares::{Share, Shares};

mod read_ahead;

const USAGE_MAX: u8 = 5;
/// Alignment of buffers, offsets and lengths for direct IO (at least any device's block).
const DIRECT_ALIGN: usize = 4096;
/// Reads `submit_batch` keeps in flight at most (the read-ahead ring's size).
pub const READ_AHEAD_MAX: usize = 256;
/// Frames the clock hand examines per eviction at most.
const EVICTION_SCAN_MAX: usize = 512;
const NOT_RESIDENT: u32 = u32::MAX;

/// A page table entry.
#[derive(Clone, Copy)]
struct Mapping {
    /// The page's bytes: its frame's `bytes`. Null when not resident.
    bytes: *mut u8,
    /// The frame holding the page, `NOT_RESIDENT` when the page is only on disk.
    frame: u32,
    /// `BufferPool::write_tag` of the epoch in which a write made the frame writable in place
    /// (state `Dirty`, dirtied in that epoch, buffer not shared); 0 when none.
    write_tag: u16,
    /// GCLOCK usage count.
    usage: u8,
}

impl Mapping {
    const ABSENT: Mapping = Mapping {
        bytes: std::ptr::null_mut(),
        frame: NOT_RESIDENT,
        write_tag: 0,
        usage: 0,
    };
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FrameState {
    /// Same content as the data file; evictable.
    Clean,
    /// Changed since the last checkpoint was taken.
    Dirty,
    /// Captured by the checkpoint in flight and not changed since; not evictable until the
    /// checkpoint is durable (the file does not hold this content yet).
    Flushing,
    /// Holds no page (evicted to shrink the pool, or released after a failed read); listed
    /// in `free_frames`.
    Free,
    /// Taken for a page `load_batch` or `submit_batch` is reading: not evictable, not
    /// mapped yet.
    Loading,
}

struct Frame {
    page_id: u64,
    data: Arc<PageBuf>,
    state: FrameState,
    /// Set when `data` may have another owner (an image handed to a checkpoint, or the
    /// shared empty buffer); cleared once a write has made sure it has not. While clear, a
    /// write goes straight to the bytes: checking the `Arc` costs an atomic read-modify-write on
    /// a line of its own, a cache miss on every write to a cold page.
    shared: bool,
    /// The capture epoch in which the frame last turned dirty.
    dirty_epoch: u64,
    /// The epoch of the capture that last took this frame's image (meaningful while
    /// `Flushing`): only that checkpoint's completion may mark the frame clean.
    capture_epoch: u64,
    /// `Shares::taken` when `data` became this frame's own (`page_shares`): a live
    /// snapshot taken since may be reading it. `u64::MAX` while the frame holds no page.
    buffer_since: u64,
}

/// Frames still to be captured for the checkpoint being started.
struct Capture {
    pending: Vec<u32>,
    cursor: usize,
}

/// Counters for the pool; `hit_rate` is what the benchmark reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    /// Pages `load_batch` and `submit_batch` read ahead of the operations that need them
    /// (not counted in `misses`).
    pub read_ahead: u64,
}

impl PoolStats {
    pub fn hit_rate(&self) -> f64 {
        let total = self.hits + self.misses;
        if total == 0 {
            1.0
        } else {
            self.hits as f64 / total as f64
        }
    }
}

pub struct BufferPool {
    page_size: usize,
    capacity: usize,
    frames: Vec<Frame>,
    /// Page id → where the page is in memory.
    page_table: Vec<Mapping>,
    /// Page id → the address of its bytes (null: not resident), kept in step with
    /// `page_table`'s: what snapshots share (`page_addresses`).
    addresses: PageAddresses,
    /// Frames that turned dirty since the last capture (may hold stale entries).
    dirty: Vec<u32>,
    /// Frames in state `Free`, taken before growing or evicting.
    free_frames: Vec<u32>,
    hand: usize,
    /// Frames in state `Clean` (the only evictable ones), so a pool full of dirty pages
    /// gives up on eviction at once instead of sweeping.
    clean_frames: usize,
    stats: PoolStats,
    file: Arc<BlockFile>,
    /// The same file opened for direct IO, which the pool's own reads use when its pages
    /// are whole device blocks (`set_direct_file`): a page read from disk goes straight
    /// into its frame (the arena's buffers are aligned for it), without a copy kept in the
    /// page cache beside the pool. With a ring it also carries the reads `submit_batch`
    /// leaves in flight; any other read on it comes after `complete_reads` reaped those, so
    /// the completions each call reaps are its own.
    direct: Option<BlockFile>,
    /// Reads submitted and not yet completed: page, frame (`Loading`) and offset.
    pending: Vec<(u64, usize, u64)>,
    /// The data file slot of each page as the last durable checkpoint left it (0: none), for
    /// reading pages that are not resident (see `slots`). Shared with snapshots, which read
    /// their non-resident pages from the same slots; copied when a checkpoint changes it
    /// while one holds it.
    slots: Arc<Vec<u32>>,
    epoch: u64,
    /// Moved on by every capture and every snapshot: `write_tag` derives from it, so
    /// moving it takes the write tag back from every page at once.
    tag_round: u64,
    /// The snapshots that may be reading frames' buffers (`page_shares`).
    shares: Shares,
    capture: Option<Capture>,
    /// Pre-images captured by writes during a capture, handed out by the next `capture_step`.
    captured_early: Vec<(u64, Arc<PageBuf>)>,
    arena: Arc<PageArena>,
    /// The buffer of frames that hold no page and no memory (evicted to shrink the pool).
    /// Shared, so the next use of such a frame takes a fresh buffer like any shared image.
    empty: Arc<PageBuf>,
}

// SAFETY: the only non-`Send` field is each mapping's cached `bytes` pointer, which points
// into its frame's `data` and moves with it.
unsafe impl Send for BufferPool {}

impl Drop for BufferPool {
    fn drop(&mut self) {
        // Reads in flight land in frames' buffers: they must be done before those go.
        self.complete_reads();
        // Live snapshots read on after the pool is gone: they keep the buffers they see.
        for frame in &self.frames {
            if self.shares.keep(&frame.data, frame.buffer_since) {
                frame.data.leave_to_snapshots();
            }
        }
        // Buffers a checkpoint still holds keep the arena alive; its preparing stops here.
        self.arena.stop_preparing();
    }
}

impl BufferPool {
    pub fn new(
        file: Arc<BlockFile>,
        slots: Vec<u32>,
        page_size: usize,
        capacity_bytes: usize,
        prefault: bool,
    ) -> BufferPool {
        let capacity = (capacity_bytes / page_size).max(16);
        let arena = if prefault {
            PageArena::pre_paged(page_size, capacity * page_size)
        } else {
            PageArena::new(page_size)
        };
        let empty = Arc::new(arena.allocate());
        BufferPool {
            page_size,
            capacity,
            frames: Vec::with_capacity(capacity.min(1 << 20)),
            page_table: Vec::new(),
            addresses: PageAddresses::default(),
            dirty: Vec::new(),
            free_frames: Vec::new(),
            hand: 0,
            clean_frames: 0,
            stats: PoolStats::default(),
            file,
            slots: Arc::new(slots),
            epoch: 0,
            tag_round: 0,
            shares: Shares::default(),
            capture: None,
            captured_early: Vec::new(),
            arena,
            empty,
            direct: None,
            pending: Vec::new(),
        }
    }

    pub fn stats(&self) -> PoolStats {
        self.stats
    }

    pub fn resident_pages(&self) -> usize {
        self.frames.len() - self.free_frames.len()
    }

    /// Page buffers in memory (see `PageArena::mapped_pages`).
    pub fn mapped_pages(&self) -> usize {
        self.arena.mapped_pages()
    }

    pub fn capacity_pages(&self) -> usize {
        self.capacity
    }

    /// Page buffers alive that are the pool's: the frames' and the images a checkpoint
    /// still holds. This, not the resident pages, is what the capacity bounds, so a
    /// checkpoint's copy-on-write images take their room from clean pages instead of adding
    /// to the pool's memory. Buffers the pool let go of while snapshots held them are the
    /// snapshots' (`snapshot_pages`): they end with them, and no checkpoint can make them
    /// room, so counting them here would stall writes until a long read ends.
    pub fn buffer_pages(&self) -> usize {
        // In this order: buffers of snapshots dropped between the two reads only make the
        // difference larger, never negative.
        let in_use = self.arena.in_use();
        in_use.saturating_sub(1 + self.arena.snapshot_only())
    }

    /// Page buffers only snapshots hold: memory beside the pool's capacity, at most the
    /// pages resident when each live snapshot was taken.
    pub fn snapshot_pages(&self) -> usize {
        self.arena.snapshot_only()
    }

    /// The most page buffers alive at once since the pool was made (`buffer_pages` at its
    /// highest): how far dirty pages ever pushed the pool past its capacity.
    pub fn peak_buffer_pages(&self) -> usize {
        self.arena.peak_in_use().saturating_sub(1)
    }

    /// True when dirty pages forced the pool past its configured size.
    pub fn over_capacity(&self) -> bool {
        self.buffer_pages() > self.capacity
    }

    /// How far dirty pages have pushed the pool past its size, as a fraction of the quarter
    /// of its size it may grow by: 0 within its size, 1 or more at the limit. Past its size,
    /// checkpoints clean pages more slowly than the owner dirties them, and without slowing
    /// down the pool (no-steal) would grow without bound (`Engine::pool_overshoot`).
    pub fn overshoot(&self) -> f64 {
        let allowed = (self.capacity / 4).max(1);
        self.buffer_pages().saturating_sub(self.capacity) as f64 / allowed as f64
    }

    /// True when the owner should checkpoint to keep the pool within its size: it is already
    /// past it, or it is full and half of it is dirty. Starting at half leaves the other half
    /// clean for the misses that arrive while the checkpoint runs (no-steal: only clean pages
    /// can make room), so a working set larger than the pool does not push the pool past its
    /// size. Writing earlier costs little: once the data outgrows the pool, nearly every
    /// dirty page is a different leaf, so pages written per update barely depend on how
    /// many updates a checkpoint covers.
    pub fn wants_checkpoint(&self) -> bool {
        self.over_capacity()
            || (self.buffer_pages() >= self.capacity && self.dirty.len() >= self.capacity / 2)
    }

    /// Evicts up to `max_evictions` clean pages while the pool's buffers exceed its capacity:
    /// dirty pages may push the pool past its size until a checkpoint cleans them,
    /// and this brings it back. The frames are kept for reuse; their buffers go back to the
    /// arena.
    pub fn shrink_to_capacity(&mut self, max_evictions: usize) {
        let mut evicted = 0;
        while evicted < max_evictions && self.over_capacity() {
            let Some(index) = self.evict_one() else {
                return;
            };
            self.release_frame(index);
            evicted += 1;
        }
    }

    /// Number of frames changed since the last checkpoint capture (an upper bound).
    pub fn dirty_frames(&self) -> usize {
        self.dirty.len()
    }

    fn frame_of(&self, page_id: u64) -> Option<usize> {
        match self.page_table.get(page_id as usize) {
            Some(mapping) if mapping.frame != NOT_RESIDENT => Some(mapping.frame as usize),
            _ => None,
        }
    }

    /// The tag of the current round (a capture epoch, or the time since the last snapshot
    /// within one) in `Mapping::write_tag`: never 0, and the same for two rounds only
    /// 65,535 rounds apart (`next_tag_round` clears the tags between).
    fn write_tag(&self) -> u16 {
        (self.tag_round % u64::from(u16::MAX)) as u16 + 1
    }

    /// Takes the write tag back from every page: the next write to each goes the frame's
    /// way, which sees what changed (a capture begun, a snapshot taken). O(1), but every
    /// 65,535th round clears the tags.
    fn next_tag_round(&mut self) {
        self.tag_round += 1;
        if self.write_tag() == 1 {
            // The tags have gone round: none from 65,535 rounds ago may pass for this one.
            for mapping in &mut self.page_table {
                mapping.write_tag = 0;
            }
        }
    }

    /// The bytes of a resident page, without counting a hit or loading anything.
    pub fn peek(&self, page_id: u64) -> Option<*const u8> {
        let mapping = self.page_table.get(page_id as usize)?;
        (mapping.frame != NOT_RESIDENT).then_some(mapping.bytes as *const u8)
    }

    /// The mapping of a resident page, counting the hit.
    fn hit(&mut self, page_id: u64) -> Option<Mapping> {
        let mapping = self.page_table.get_mut(page_id as usize)?;
        if mapping.frame == NOT_RESIDENT {
            return None;
        }
        if mapping.usage < USAGE_MAX {
            mapping.usage += 1;
        }
        self.stats.hits += 1;
        Some(*mapping)
    }

    /// The page's bytes, loading it from the data file on a miss.
    pub fn read(&mut self, page_id: u64) -> KvResult<&[u8]> {
        let bytes = match self.hit(page_id) {
            Some(mapping) => mapping.bytes,
            None => {
                let index = self.load(page_id)?;
                self.frames[index].data.as_ptr()
            }
        };
        // SAFETY: the mapping's (or the loaded frame's) `bytes` point at the `page_size` bytes
        // of the frame's `data`, which lives as long as the frame holds the page; they change
        // only through `write`, which needs `&mut self`.
        Ok(unsafe { std::slice::from_raw_parts(bytes, self.page_size) })
    }

    /// The page's bytes for writing; marks it dirty (copying it first if a checkpoint in
    /// flight still holds this image).
    pub fn write(&mut self, page_id: u64) -> KvResult<&mut [u8]> {
        let tag = self.write_tag();
        let index = match self.hit(page_id) {
            Some(mapping) if mapping.write_tag == tag => {
                debug_assert!({
                    let frame = &self.frames[mapping.frame as usize];
                    frame.state == FrameState::Dirty
                        && frame.dirty_epoch == self.epoch
                        && !frame.shared
                        && frame.data.as_ptr() == mapping.bytes
                });
                // SAFETY: as below; the tag says nothing has shared the buffer since.
                return Ok(unsafe {
                    std::slice::from_raw_parts_mut(mapping.bytes, self.page_size)
                });
            }
            Some(mapping) => mapping.frame as usize,
            None => self.load(page_id)?,
        };
        let frame = &mut self.frames[index];
        // Anyone else holding a frame's buffer holds it for the checkpoint (while it is
        // flushing) or for snapshots.
        let mut for_checkpoint = frame.state == FrameState::Flushing;
        if self.capture.is_some()
            && frame.state == FrameState::Dirty
            && frame.dirty_epoch < self.epoch
        {
            for_checkpoint = true;
            // This image belongs to the checkpoint being captured: capture it before changing.
            self.captured_early
                .push((frame.page_id, Arc::clone(&frame.data)));
            frame.shared = true;
            frame.capture_epoch = self.epoch;
            self.set_state(index, FrameState::Flushing);
        }
        self.mark_dirty(index);
        let frame = &mut self.frames[index];
        let kept = self.shares.keep(&frame.data, frame.buffer_since);
        if kept && !for_checkpoint {
            frame.data.leave_to_snapshots();
        }
        if kept || (frame.shared && Arc::get_mut(&mut frame.data).is_none()) {
            // A live snapshot reads this image, or a checkpoint in flight holds it: the page
            // goes on in a copy.
            frame.data = Arc::new(frame.data.duplicate());
        }
        frame.shared = false;
        frame.buffer_since = self.shares.taken();
        debug_assert_eq!(Arc::strong_count(&frame.data), 1);
        let bytes = frame.data.as_ptr();
        let mapping = &mut self.page_table[page_id as usize];
        if mapping.bytes != bytes {
            mapping.bytes = bytes;
            self.addresses.set(page_id, bytes);
        }
        mapping.write_tag = tag;
        // SAFETY: `bytes` points at the `page_size` bytes of `frame.data`, and `shared` is
        // clear, so no other `Arc` of that buffer exists (every clone sets it): the bytes are
        // ours alone for as long as `&mut self` is borrowed.
        Ok(unsafe { std::slice::from_raw_parts_mut(bytes, self.page_size) })
    }

    /// The address of every resident page's bytes as they are now, by page id below
    /// `page_count` (null: not resident), and the share that keeps them so: the pages of a
    /// snapshot. Shares the chunks of addresses (`page_addresses`: a handle per 512 pages)
    /// and touches no frame (`page_shares`); the write tags are taken back, so the next
    /// write to each page goes the frame's way, which hands the buffer to the share and
    /// writes to a copy while the snapshot lives.
    pub fn share_resident(&mut self, page_count: u64) -> (SharedAddresses, Arc<Share>) {
        let pages = self.addresses.share(page_count);
        self.next_tag_round();
        (pages, self.shares.take())
    }

    /// The slot of every page as the last durable checkpoint left it, and the data file:
    /// where a snapshot reads the pages `share_resident` did not give it.
    pub fn shared_slots(&self) -> (Arc<Vec<u32>>, Arc<BlockFile>) {
        (Arc::clone(&self.slots), Arc::clone(&self.file))
    }

    /// Installs a page that has no content on disk yet (a newly allocated page id), zeroed
    /// and dirty.
    pub fn install_new(&mut self, page_id: u64) -> &mut [u8] {
        assert!(
            self.frame_of(page_id).is_none(),
            "page {page_id} is already resident"
        );
        let index = self.take_frame(page_id);
        self.mark_dirty(index);
        Self::own_buffer(&mut self.frames[index], &self.arena, &mut self.shares);
        self.map(page_id, index);
        let buffer = Arc::get_mut(&mut self.frames[index].data)
            .expect("the frame owns its buffer")
            .bytes_mut();
        buffer.fill(0);
        buffer
    }

    /// The frame's buffer, for a page about to be loaded or created in it (content
    /// unspecified). A frame without memory of its own (shrunk or released), or whose evicted
    /// image a snapshot still holds, gets a fresh buffer from the arena first.
    fn own_buffer<'f>(
        frame: &'f mut Frame,
        arena: &Arc<PageArena>,
        shares: &mut Shares,
    ) -> &'f mut PageBuf {
        let kept = shares.keep(&frame.data, frame.buffer_since);
        if kept {
            // An evicted page's image a snapshot reads: the snapshot's now.
            frame.data.leave_to_snapshots();
        }
        if kept || Arc::get_mut(&mut frame.data).is_none() {
            // (Not its own either: the pool's empty buffer, of a frame without memory.)
            frame.data = Arc::new(arena.allocate());
        }
        frame.shared = false;
        frame.buffer_since = shares.taken();
        Arc::get_mut(&mut frame.data).expect("the frame owns its buffer")
    }

    fn set_state(&mut self, index: usize, state: FrameState) {
        let frame = &mut self.frames[index];
        let was_clean = frame.state == FrameState::Clean;
        frame.state = state;
        match (was_clean, state == FrameState::Clean) {
            (true, false) => self.clean_frames -= 1,
            (false, true) => self.clean_frames += 1,
            _ => {}
        }
    }

    fn mark_dirty(&mut self, index: usize) {
        if self.frames[index].state != FrameState::Dirty {
            self.set_state(index, FrameState::Dirty);
            self.frames[index].dirty_epoch = self.epoch;
            self.dirty.push(index as u32);
        }
    }

    /// Reads a page that is not resident into a frame; returns the frame.
    fn load(&mut self, page_id: u64) -> KvResult<usize> {
        if !self.pending.is_empty() {
            // The page may be among the reads in flight; and none may complete after this
            // page is loaded, changed and written elsewhere, with its old image.
            self.complete_reads();
            if let Some(index) = self.frame_of(page_id) {
                return Ok(index);
            }
        }
        self.stats.misses += 1;
        let slot = self.slots.get(page_id as usize).copied().unwrap_or(0);
        if slot == 0 && page_id != 0 {
            return Err(KvError::Poisoned(format!(
                "page {page_id} is not resident and has no place in the data file"
            )));
        }
        let index = self.take_frame(page_id);
        let offset = u64::from(slot) * self.page_size as u64;
        let loaded = {
            let frame = &mut self.frames[index];
            let buffer = Self::own_buffer(frame, &self.arena, &mut self.shares).bytes_mut();
            let file = self.direct.as_ref().unwrap_or(&self.file);
            debug_assert!(
                self.direct.is_none() || (buffer.as_ptr() as usize).is_multiple_of(DIRECT_ALIGN)
            );
            file.read_exact_at(buffer, offset)
                .and_then(|()| verify_loaded(file, page_id, offset, buffer))
        };
        if let Err(err) = loaded {
            self.release_frame(index);
            return Err(err);
        }
        self.map(page_id, index);
        Ok(index)
    }

    /// Points the page table at frame `index`, whose buffer holds (or is about to hold)
    /// `page_id`.
    fn map(&mut self, page_id: u64, index: usize) {
        let bytes = self.frames[index].data.as_ptr();
        self.addresses.set(page_id, bytes);
        self.page_table[page_id as usize] = Mapping {
            bytes,
            frame: index as u32,
            write_tag: 0,
            usage: 1,
        };
    }

    /// Finds a frame for `page_id` (free, evicted, or new); the content is stale, and the
    /// caller maps the page (`map`) once the frame's buffer is the one that will hold it.
    fn take_frame(&mut self, page_id: u64) -> usize {
        // Below capacity a free frame (or a new one) is used; at capacity a clean page is
        // evicted, and only when every page is dirty does the pool grow.
        let evicted = if self.buffer_pages() < self.capacity {
            None
        } else {
            self.evict_one()
        };
        let index = match evicted {
            Some(index) => index,
            None => match self.free_frames.pop() {
                Some(index) => index as usize,
                None => self.push_frame(),
            },
        };
        if self.page_table.len() <= page_id as usize {
            let wanted = (page_id as usize + 1).next_power_of_two();
            self.page_table.resize(wanted, Mapping::ABSENT);
        }
        self.set_state(index, FrameState::Clean);
        self.frames[index].page_id = page_id;
        index
    }

    fn push_frame(&mut self) -> usize {
        // Content unspecified: every caller overwrites it (a read from disk, or a zero fill).
        let data = Arc::new(self.arena.allocate());
        self.frames.push(Frame {
            page_id: u64::MAX,
            data,
            state: FrameState::Clean,
            shared: false,
            dirty_epoch: 0,
            capture_epoch: 0,
            buffer_since: self.shares.taken(),
        });
        self.clean_frames += 1;
        self.frames.len() - 1
    }

    /// Runs the clock hand over at most `EVICTION_SCAN_MAX` frames, lowering usage counts,
    /// and evicts the first clean frame at zero, or else the least-used clean frame it passed.
    /// The bound matters when few frames are clean: an unbounded clock would sweep thousands
    /// of dirty frames several times per miss. `None` (no clean frame in reach) makes the
    /// pool grow, which `wants_checkpoint` reports.
    fn evict_one(&mut self) -> Option<usize> {
        if self.clean_frames == 0 {
            return None;
        }
        let mut best: Option<(u8, usize)> = None;
        for _ in 0..EVICTION_SCAN_MAX.min(self.frames.len()) {
            let index = self.hand;
            self.hand = (self.hand + 1) % self.frames.len();
            let frame = &self.frames[index];
            if frame.state != FrameState::Clean {
                continue;
            }
            let mapping = &mut self.page_table[frame.page_id as usize];
            if mapping.usage == 0 {
                best = Some((0, index));
                break;
            }
            mapping.usage -= 1;
            if best.is_none_or(|(usage, _)| mapping.usage < usage) {
                best = Some((mapping.usage, index));
            }
        }
        let (_, index) = best?;
        let frame = &mut self.frames[index];
        self.page_table[frame.page_id as usize] = Mapping::ABSENT;
        self.addresses.set(frame.page_id, std::ptr::null());
        frame.page_id = u64::MAX;
        self.stats.evictions += 1;
        Some(index)
    }

    /// Puts a frame on the free list; its buffer goes back to the arena.
    fn release_frame(&mut self, index: usize) {
        let frame = &mut self.frames[index];
        if frame.page_id != u64::MAX {
            self.page_table[frame.page_id as usize] = Mapping::ABSENT;
            self.addresses.set(frame.page_id, std::ptr::null());
        }
        frame.page_id = u64::MAX;
        if self.shares.keep(&frame.data, frame.buffer_since) {
            frame.data.leave_to_snapshots();
        }
        frame.buffer_since = u64::MAX;
        frame.data = Arc::clone(&self.empty);
        frame.shared = true;
        self.set_state(index, FrameState::Free);
        self.free_frames.push(index as u32);
    }

    /// Starts capturing a checkpoint image of every page dirty now. O(1). Returns the
    /// capture's epoch, which identifies it to `checkpoint_done` and `checkpoint_failed`.
    pub fn begin_capture(&mut self) -> u64 {
        assert!(self.capture.is_none(), "one capture at a time");
        self.epoch += 1;
        self.next_tag_round();
        self.capture = Some(Capture {
            pending: std::mem::take(&mut self.dirty),
            cursor: 0,
        });
        self.epoch
    }

    /// Hands out up to about `max_frames` captured images (shared, not copied); each becomes
    /// `Flushing`. Returns true as the second value when the capture is complete.
    pub fn capture_step(&mut self, max_frames: usize) -> (Vec<(u64, Arc<PageBuf>)>, bool) {
        let mut batch = std::mem::take(&mut self.captured_early);
        let Some(mut capture) = self.capture.take() else {
            return (batch, true);
        };
        let mut examined = 0;
        while examined < max_frames && capture.cursor < capture.pending.len() {
            let index = capture.pending[capture.cursor] as usize;
            capture.cursor += 1;
            examined += 1;
            let frame = &mut self.frames[index];
            if frame.state == FrameState::Dirty && frame.dirty_epoch < self.epoch {
                batch.push((frame.page_id, Arc::clone(&frame.data)));
                frame.shared = true;
                frame.capture_epoch = self.epoch;
                self.set_state(index, FrameState::Flushing);
            }
        }
        let done = capture.cursor == capture.pending.len();
        if !done {
            self.capture = Some(capture);
        }
        (batch, done)
    }

    /// Captures everything at once.
    #[cfg(test)]
    pub fn capture_all(&mut self) -> Vec<(u64, Arc<PageBuf>)> {
        self.begin_capture();
        let mut all = Vec::new();
        loop {
            let (batch, done) = self.capture_step(usize::MAX);
            all.extend(batch);
            if done {
                return all;
            }
        }
    }

    /// Frames of `page_id` captured by capture `epoch` and not changed since.
    fn flushing_frame(&self, page_id: u64, epoch: u64) -> Option<usize> {
        self.frame_of(page_id).filter(|&index| {
            let frame = &self.frames[index];
            frame.state == FrameState::Flushing && frame.capture_epoch == epoch
        })
    }

    /// A checkpoint is durable with `pages` now in `slots`: where the pool (and snapshots
    /// taken from now on) read them once they are no longer resident. All at once, as the
    /// writer has freed their old slots; the pages stay resident until `checkpoint_done`
    /// marks them clean. Copies the map if a snapshot holds it.
    pub fn checkpoint_slots(&mut self, pages: &[u64], slots: &[u32]) {
        let page_slots = Arc::make_mut(&mut self.slots);
        for (&page_id, &slot) in pages.iter().zip(slots) {
            let index = page_id as usize;
            if page_slots.len() <= index {
                page_slots.resize(index + 1, 0);
            }
            page_slots[index] = slot;
        }
    }

    /// The checkpoint of capture `epoch`, holding `pages`, is durable (`checkpoint_slots`
    /// told where): those pages not changed since become clean. May run in parts, even
    /// after the next capture has begun.
    pub fn checkpoint_done(&mut self, pages: &[u64], epoch: u64) {
        for &page_id in pages {
            if let Some(index) = self.flushing_frame(page_id, epoch) {
                self.set_state(index, FrameState::Clean);
            }
        }
    }

    /// The checkpoint of capture `epoch` failed: its pages are dirty again for the next one.
    pub fn checkpoint_failed(&mut self, pages: &[u64], epoch: u64) {
        for &page_id in pages {
            if let Some(index) = self.flushing_frame(page_id, epoch) {
                self.mark_dirty(index);
            }
        }
    }
}

/// Checks a page just read from `offset` of `file` (the pool's misses, a snapshot's pages
/// not in memory): its checksum holds and it is page `page_id`.
pub(crate) fn verify_loaded(
    file: &BlockFile,
    page_id: u64,
    offset: u64,
    bytes: &[u8],
) -> KvResult<()> {
    if page::verify(page_id, bytes) {
        return Ok(());
    }
    Err(KvError::corrupt(
        file.path(),
        offset,
        format!("checksum mismatch in page {page_id} (torn or damaged write)"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{FaultPlan, IoMode};
    use std::os::unix::fs::FileExt;

    /// Test pools keep page `p` in slot `p`.
    fn same_slots(ids: &[u64]) -> Vec<u32> {
        ids.iter().map(|&id| id as u32).collect()
    }

    fn pool_over_file(pages: u64, capacity_pages: usize) -> (tempfile::TempDir, BufferPool) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pool");
        let file = BlockFile::open(&path, true, IoMode::Portable, FaultPlan::none()).unwrap();
        let mut image = vec![0u8; 512];
        for page_id in 0..pages {
            image.fill(page_id as u8);
            page::seal(page_id, &mut image);
            file.write_batch(&[(page_id * 512, &image)]).unwrap();
        }
        let slots = (0..pages as u32).collect();
        let pool = BufferPool::new(Arc::new(file), slots, 512, capacity_pages * 512, false);
        (dir, pool)
    }

    #[test]
    fn hot_pages_survive_a_scan_of_cold_ones() {
        let (_dir, mut pool) = pool_over_file(200, 16);
        for round in 0..50u64 {
            for hot in 0..4 {
                assert_eq!(pool.read(hot).unwrap()[10], hot as u8);
            }
            let cold = 4 + (round * 3) % 196;
            assert_eq!(pool.read(cold).unwrap()[10], cold as u8);
        }
        let before = pool.stats();
        for hot in 0..4 {
            pool.read(hot).unwrap();
        }
        assert_eq!(
            pool.stats().misses,
            before.misses,
            "hot pages stayed resident"
        );
        assert!(pool.stats().hit_rate() > 0.75, "{:?}", pool.stats());
    }

    #[test]
    fn a_batch_load_reads_what_is_missing_and_leaves_out_what_it_cannot_read() {
        let (_dir, mut pool) = pool_over_file(64, 16);
        pool.write(3).unwrap()[100] = 0xAA;
        // Page 3 is resident (and dirty), 70 has no place in the file, 5 is asked twice.
        let mut wanted: Vec<u64> = (1..15).collect();
        wanted.extend([5, 70, 40, 41]);
        pool.load_batch(&wanted);
        let stats = pool.stats();
        assert_eq!(stats.read_ahead, 15, "{stats:?}");
        assert_eq!(
            stats.misses, 1,
            "only the write's own read missed: {stats:?}"
        );
        assert!(pool.peek(70).is_none());
        assert_eq!(
            pool.read(3).unwrap()[100],
            0xAA,
            "a resident page is left as it is"
        );
        for page_id in [40, 41] {
            assert_eq!(pool.read(page_id).unwrap()[10], page_id as u8);
        }
        assert_eq!(pool.stats().misses, 1, "the pages read ahead are hits");
        // A batch larger than the room clean pages leave stops there, within the capacity.
        pool.load_batch(&(20..40).collect::<Vec<u64>>());
        assert_eq!(pool.stats().read_ahead, 30, "{:?}", pool.stats());
        assert_eq!(pool.buffer_pages(), 16);
        assert_eq!(pool.read(20).unwrap()[10], 20);
    }

    #[test]
    fn a_page_that_fails_its_checksum_is_left_for_its_reader_to_report() {
        let (dir, mut pool) = pool_over_file(8, 8);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join("pool"))
            .unwrap();
        file.write_all_at(&[0x55; 8], 2 * 512 + 200).unwrap();
        pool.load_batch(&[1, 2]);
        assert!(pool.peek(1).is_some() && pool.peek(2).is_none());
        let err = pool.read(2).unwrap_err();
        assert!(err.to_string().contains("checksum"), "{err}");
    }

    #[test]
    fn checkpoint_images_take_their_room_from_clean_pages() {
        let (_dir, mut pool) = pool_over_file(64, 16);
        for page_id in 0..8 {
            pool.read(page_id).unwrap();
        }
        for page_id in 8..16 {
            pool.write(page_id).unwrap()[100] = 0xAA;
        }
        assert_eq!(pool.buffer_pages(), 16);
        let captured = pool.capture_all();
        for page_id in 8..16 {
            pool.write(page_id).unwrap()[100] = 0xBB;
        }
        assert_eq!(
            pool.buffer_pages(),
            24,
            "eight copies beside the eight images"
        );
        assert!(pool.over_capacity() && pool.wants_checkpoint());
        pool.shrink_to_capacity(usize::MAX);
        assert_eq!(
            (pool.buffer_pages(), pool.resident_pages()),
            (16, 8),
            "the clean pages made room for the images"
        );
        drop(captured);
        assert_eq!(
            pool.buffer_pages(),
            8,
            "journaled images go back to the arena"
        );
        for page_id in 20..40 {
            assert_eq!(pool.read(page_id).unwrap()[10], page_id as u8);
            assert!(pool.buffer_pages() <= 16, "misses stay within the capacity");
        }
        assert_eq!(pool.read(9).unwrap()[100], 0xBB, "dirty pages stay");
    }

    #[test]
    fn dirty_pages_are_never_evicted_and_checkpoint_copies_on_write() {
        let (_dir, mut pool) = pool_over_file(64, 16);
        for page_id in 0..20 {
            pool.write(page_id).unwrap()[100] = 0xAA;
        }
        assert!(pool.over_capacity(), "20 dirty pages in a 16-page pool");
        let captured = pool.capture_all();
        let epoch = pool.epoch;
        assert_eq!(captured.len(), 20);
        pool.write(3).unwrap()[100] = 0xBB;
        let image = &captured.iter().find(|(id, _)| *id == 3).unwrap().1;
        assert_eq!(
            image.bytes()[100],
            0xAA,
            "the checkpoint keeps the captured image"
        );
        let ids: Vec<u64> = captured.iter().map(|(id, _)| *id).collect();
        pool.checkpoint_slots(&ids, &same_slots(&ids));
        pool.checkpoint_done(&ids, epoch);
        assert_eq!(
            pool.capture_all().len(),
            1,
            "only page 3 changed after the capture"
        );
    }

    #[test]
    fn a_write_tag_does_not_outlive_its_round_of_epochs() {
        let (_dir, mut pool) = pool_over_file(8, 8);
        pool.write(3).unwrap()[100] = 1;
        // Page 3 is checkpointed and clean; its mapping keeps the tag of the epoch it was
        // written in, which comes round again after 65,535 captures.
        for _ in 0..u16::MAX {
            let ids: Vec<u64> = pool.capture_all().iter().map(|(id, _)| *id).collect();
            pool.checkpoint_slots(&ids, &same_slots(&ids));
            pool.checkpoint_done(&ids, pool.epoch);
        }
        assert_eq!(pool.write_tag(), 1);
        pool.write(3).unwrap()[100] = 2;
        let captured = pool.capture_all();
        assert_eq!(captured.len(), 1, "the write made page 3 dirty again");
        assert_eq!(captured[0].1.bytes()[100], 2);
    }

    #[test]
    fn an_incremental_capture_is_the_image_at_its_start() {
        let (_dir, mut pool) = pool_over_file(64, 64);
        for page_id in 0..40 {
            pool.write(page_id).unwrap()[100] = 1;
        }
        let epoch = pool.begin_capture();
        let (first, done) = pool.capture_step(10);
        assert!(!done);
        // Pages 0..10 were captured by the step; page 30 is captured by this write first.
        pool.write(30).unwrap()[100] = 2;
        pool.write(5).unwrap()[100] = 2;
        pool.write(50).unwrap()[100] = 2;
        let mut images: Vec<(u64, u8)> = first
            .iter()
            .map(|(id, image)| (*id, image.bytes()[100]))
            .collect();
        loop {
            let (batch, done) = pool.capture_step(7);
            images.extend(batch.iter().map(|(id, image)| (*id, image.bytes()[100])));
            if done {
                break;
            }
        }
        images.sort_unstable();
        let expected: Vec<(u64, u8)> = (0..40).map(|id| (id, 1)).collect();
        assert_eq!(
            images, expected,
            "every page exactly once, as it was at begin_capture"
        );
        let ids: Vec<u64> = (0..40).collect();
        pool.checkpoint_slots(&ids, &same_slots(&ids));
        pool.checkpoint_done(&ids, epoch);
        let mut next: Vec<u64> = pool.capture_all().iter().map(|(id, _)| *id).collect();
        next.sort_unstable();
        assert_eq!(
            next,
            vec![5, 30, 50],
            "pages written during the capture go to the next one"
        );
    }

    #[test]
    fn a_damaged_page_is_reported_with_file_and_offset() {
        let (dir, mut pool) = pool_over_file(8, 16);
        let path = dir.path().join("pool");
        let raw = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        raw.write_all_at(&[0xFF], 5 * 512 + 77).unwrap();
        let err = pool.read(5).unwrap_err().to_string();
        assert!(
            err.contains("pool") && err.contains("2560") && err.contains("checksum"),
            "{err}"
        );
        assert_eq!(pool.read(4).unwrap()[10], 4, "other pages still read");
    }

    #[test]
    fn a_frame_released_by_a_failed_read_is_reused_and_dirty_pools_give_up_eviction() {
        let (dir, mut pool) = pool_over_file(40, 16);
        let path = dir.path().join("pool");
        let raw = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        raw.write_all_at(&[0xFF], 39 * 512 + 77).unwrap();
        for page_id in 0..16 {
            pool.read(page_id).unwrap();
        }
        assert!(pool.read(39).is_err());
        for page_id in 16..39 {
            assert_eq!(pool.read(page_id).unwrap()[10], page_id as u8);
        }
        assert_eq!(
            pool.resident_pages(),
            16,
            "the released frame was reused, not leaked"
        );
        for page_id in 0..20 {
            pool.write(page_id).unwrap()[100] = 1;
        }
        assert_eq!(pool.clean_frames, 0);
        assert_eq!(
            pool.read(30).unwrap()[10],
            30,
            "reads still work past capacity"
        );
        assert!(pool.over_capacity());
        // Do the checkpoint writer's job: put the captured images in the file.
        let captured = pool.capture_all();
        for (page_id, image) in &captured {
            let mut sealed = image.bytes().to_vec();
            page::seal(*page_id, &mut sealed);
            pool.file.write_batch(&[(page_id * 512, &sealed)]).unwrap();
        }
        let ids: Vec<u64> = captured.iter().map(|(id, _)| *id).collect();
        drop(captured);
        pool.checkpoint_slots(&ids, &same_slots(&ids));
        pool.checkpoint_done(&ids, pool.epoch);
        pool.shrink_to_capacity(usize::MAX);
        assert_eq!(
            pool.resident_pages(),
            16,
            "clean pages are evicted back to capacity"
        );
        for page_id in 0..39 {
            let written = pool.read(page_id).unwrap()[100] == 1;
            assert_eq!(
                written,
                page_id < 20,
                "page {page_id} reads back after eviction"
            );
        }
        assert_eq!(
            pool.resident_pages(),
            16,
            "misses reuse frames within capacity"
        );
    }
}
