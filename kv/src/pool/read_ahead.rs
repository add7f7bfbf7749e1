//! The pool's reads of pages before the operations that need them: a batch of missing
//! pages read with all their reads in flight together (`load_batch`), or started and left
//! in flight while the owner does other work (`submit_batch`, then `complete_reads`), and
//! the direct (`O_DIRECT`) reads of misses. A frame being read is `Loading`: out of
//! eviction and unmapped until its read is done. A miss completes every read in flight
//! first (`BufferPool::load`), so none can land after its page was loaded, changed and
//! written elsewhere.

use std::sync::Arc;

use super::{verify_loaded, BufferPool, FrameState, DIRECT_ALIGN, READ_AHEAD_MAX};
use crate::io::BlockFile;

impl BufferPool {
    /// Reads missed pages through `file` (the data file opened with `O_DIRECT`) from now on,
    /// and, if it has a ring, reads ahead in the background through it (`submit_batch`);
    /// only when the page size is a multiple of the 4 KiB direct IO needs, else the reads
    /// stay buffered.
    pub fn set_direct_file(&mut self, file: BlockFile) {
        if self.page_size.is_multiple_of(DIRECT_ALIGN) {
            self.direct = Some(file);
        }
    }

    /// The file the pool's reads go through: the direct one when there is one.
    fn reads_file(&self) -> &BlockFile {
        self.direct.as_ref().unwrap_or(&self.file)
    }

    /// Reads the pages of `page_ids` that are not resident, all in one batch of IO
    /// (`BlockFile::read_batch`), so that their device latencies overlap. A hint for the
    /// operations that follow: a page that cannot be read (or has no place in the file) is
    /// left out, and the operation that needs it reads it and reports why.
    pub fn load_batch(&mut self, page_ids: &[u64]) {
        self.complete_reads();
        let mut taken: Vec<(u64, usize, u64)> = Vec::with_capacity(page_ids.len());
        self.take_frames_for_reads(page_ids, &mut taken, usize::MAX);
        if taken.is_empty() {
            return;
        }
        let page_size = self.page_size;
        let mut reads: Vec<(u64, &mut [u8])> = taken
            .iter()
            .map(|&(_, index, offset)| {
                let buffer = self.loading_buffer(index);
                // SAFETY: each frame of the batch is distinct and owns its buffer of
                // `page_size` bytes (`own_buffer`); nothing else touches those frames until
                // the reads below are done and `reads` is dropped.
                (offset, unsafe {
                    std::slice::from_raw_parts_mut(buffer, page_size)
                })
            })
            .collect();
        let file = self.reads_file();
        let results = file.read_batch(&mut reads);
        let loaded: Vec<bool> = results
            .into_iter()
            .zip(reads.iter())
            .zip(taken.iter())
            .map(|((result, (offset, bytes)), &(page_id, _, _))| {
                result
                    .and_then(|()| verify_loaded(file, page_id, *offset, bytes))
                    .is_ok()
            })
            .collect();
        drop(reads);
        for (&(page_id, index, _), ok) in taken.iter().zip(loaded) {
            if ok {
                self.set_state(index, FrameState::Clean);
                self.map(page_id, index);
                self.stats.read_ahead += 1;
            } else {
                self.release_frame(index);
            }
        }
    }

    /// Takes a frame (`Loading`: kept out of eviction) for each page of `page_ids` to be
    /// read, appending page, frame and offset to `reads` while it holds fewer than `max`:
    /// not a page resident, already in `reads`, or without a place in the file, and none
    /// once only growing past the capacity would make room (the rest is left to misses).
    fn take_frames_for_reads(
        &mut self,
        page_ids: &[u64],
        reads: &mut Vec<(u64, usize, u64)>,
        max: usize,
    ) {
        for &page_id in page_ids {
            if reads.len() >= max {
                break;
            }
            let slot = self.slots.get(page_id as usize).copied().unwrap_or(0);
            let queued = reads.iter().any(|&(id, _, _)| id == page_id);
            if self.frame_of(page_id).is_some() || slot == 0 || queued {
                continue;
            }
            if self.buffer_pages() >= self.capacity && self.clean_frames == 0 {
                break;
            }
            let index = self.take_frame(page_id);
            self.set_state(index, FrameState::Loading);
            Self::own_buffer(&mut self.frames[index], &self.arena, &mut self.shares);
            reads.push((page_id, index, u64::from(slot) * self.page_size as u64));
        }
    }

    /// The buffer of a frame `take_frames_for_reads` took, for its read to land in.
    fn loading_buffer(&mut self, index: usize) -> *mut u8 {
        debug_assert!(self.frames[index].state == FrameState::Loading);
        let buffer = Arc::get_mut(&mut self.frames[index].data)
            .expect("own_buffer gave the frame its own buffer")
            .bytes_mut()
            .as_mut_ptr();
        debug_assert!(self.direct.is_none() || (buffer as usize).is_multiple_of(DIRECT_ALIGN));
        buffer
    }

    /// Starts reading the pages of `page_ids` that are not resident (nor already being
    /// read) and returns without waiting: their frames are taken and kept out of eviction
    /// until `complete_reads` maps them — which the next miss, batch load or call does.
    /// At most `READ_AHEAD_MAX` reads are in flight; past that, and past the clean frames
    /// the pool can give without growing, pages are left out. A hint, like `load_batch`.
    pub fn submit_batch(&mut self, page_ids: &[u64]) {
        if !self.direct.as_ref().is_some_and(BlockFile::uses_uring) {
            return self.load_batch(page_ids);
        }
        let first = self.pending.len();
        let mut pending = std::mem::take(&mut self.pending);
        self.take_frames_for_reads(page_ids, &mut pending, READ_AHEAD_MAX);
        let page_size = self.page_size;
        let reads: Vec<(u64, *mut u8, usize, u64)> = pending[first..]
            .iter()
            .enumerate()
            .map(|(n, &(_, index, offset))| {
                let tag = (first + n) as u64;
                (offset, self.loading_buffer(index), page_size, tag)
            })
            .collect();
        self.pending = pending;
        let file = self.reads_file();
        // SAFETY: each buffer belongs to a `Loading` frame, which nothing evicts, releases
        // or reads until `complete_reads` has reaped its read (the pool's drop does too).
        if reads.is_empty() || unsafe { file.submit_reads(&reads) } {
            return;
        }
        for (_, index, _) in self.pending.split_off(first) {
            self.release_frame(index);
        }
    }

    /// Waits for the reads `submit_batch` started and maps each page read whole and sound
    /// (unless a miss loaded it meanwhile); the others' frames are released.
    pub fn complete_reads(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let reaped = match self.reads_file().reap_reads(self.pending.len()) {
            Ok(reaped) => reaped,
            Err(err) => {
                // The ring failed: the reads not reaped may still land in their frames'
                // buffers, so those frames stay taken (`Loading`) for good, and reads go
                // through the buffered file from now on.
                eprintln!("hotledger: reads ahead abandoned: {err}");
                self.pending.clear();
                self.direct = None;
                return;
            }
        };
        let pending = std::mem::take(&mut self.pending);
        for (tag, result) in reaped {
            let (page_id, index, offset) = pending[tag as usize];
            let bytes = self.frames[index].data.as_ptr();
            // SAFETY: the read into this frame's buffer is reaped; the buffer is the
            // frame's own, of `page_size` bytes.
            let bytes = unsafe { std::slice::from_raw_parts(bytes, self.page_size) };
            let whole = result == self.page_size as i32
                && verify_loaded(self.reads_file(), page_id, offset, bytes).is_ok();
            if whole && self.frame_of(page_id).is_none() {
                self.set_state(index, FrameState::Clean);
                self.map(page_id, index);
                self.stats.read_ahead += 1;
            } else {
                self.release_frame(index);
            }
        }
    }
}
