//! The checkpoint writer: a background thread that makes a captured page image durable while
//! the executor keeps updating pages.
//!
//! The executor sends `Begin`, then the captured pages in batches as it captures them, then
//! `End`. Every page is written once (see `slots` for why it is crash safe):
//! 1. each captured page goes to a free slot of the data file (one the last durable checkpoint
//!    does not use: the lowest free first, then past the end) as it arrives, and its image
//!    is let go. The writes are direct (`O_DIRECT`) where the file system allows: a page
//!    leaves the writer's buffer for the device without a copy into the page cache, and no
//!    kernel worker thread copies it there;
//! 2. at `End`, fsync the data file, then write the page map record (superblock and every
//!    page's slot) to the record file that does not hold the last durable one, and fsync it;
//! 3. the slots the pages had before are free — once no snapshot that may read them lives
//!    (`slot_holds`).
//!
//! A *gated* checkpoint (for an owner that commits several engines' checkpoints together)
//! stops between steps 2 and 3: the writer reports `Prepared` and waits for `Release` (go on)
//! or `Abandon` (unmake the record; the pages become dirty again).
//!
//! A failure in step 1 or the data file's fsync leaves the last durable checkpoint as it was:
//! the executor marks the pages dirty again and may retry; so does a failed record of a gated
//! checkpoint (recovery ignores a record its owner never committed). An ungated record that
//! failed may still be on disk for recovery to take, and so may an abandoned record that could
//! not be unmade; their slots must then never be reused, so the engine refuses further work
//! until it is reopened (`KvError::Poisoned`).

use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{IoOp, KvError, KvResult};
use crate::io::{self, BlockFile};
use crate::page;
use crate::page_map;
use crate::pool::PageBuf;
use crate::slot_holds::SlotHolds;
use crate::slots::SlotMap;
use crate::superblock::Superblock;

/// Pages copied and written per IO batch.
const CHUNK_PAGES: usize = 128;
/// Alignment of the buffer direct writes leave from (at least any device's block size).
const DIRECT_ALIGN: usize = 4096;

/// What the executor sends the writer.
pub enum WriterMessage {
    Begin {
        superblock: Superblock,
        /// Pages the capture will send at most (the dirty pages at its start).
        expected_pages: usize,
        /// Pace the writes so the checkpoint takes about this long (`None`: full speed).
        spread: Option<Duration>,
        /// Wait for `Release` or `Abandon` once the record is durable.
        gated: bool,
    },
    Pages(Vec<(u64, Arc<PageBuf>)>),
    End,
    /// A gated checkpoint is committed: its pages' old slots may be reused.
    Release,
    /// A gated checkpoint will not be committed: unmake its record.
    Abandon,
}

/// How a checkpoint ended.
pub enum CheckpointOutcome {
    /// A gated checkpoint's pages and record are durable; the writer waits for `Release` or
    /// `Abandon`.
    Prepared,
    /// A gated checkpoint was abandoned after its record: the last durable one stands.
    Abandoned,
    Durable {
        /// The slot each page sent went to, in the order they were sent.
        slots: Vec<u32>,
        elapsed: Duration,
    },
    /// The last durable checkpoint stands; this one can be retried.
    WriteFailed(KvError),
    /// A record may have reached the disk; only recovery (reopen) may continue.
    DataFailed(KvError),
}

/// A finished checkpoint: its sequence number and outcome. The writer drops each batch of
/// page images as soon as it is written (returning buffers the executor has since replaced
/// to the pool's arena), so a page is copied on write only while its image waits to be
/// written, and finishing costs the executor nothing per page.
pub struct Finished {
    pub seq: u64,
    pub outcome: CheckpointOutcome,
}

/// The files and the slot map the writer owns.
pub struct WriterState {
    pub data: Arc<BlockFile>,
    /// The data file opened for direct IO, when the file system does it.
    pub direct: Option<BlockFile>,
    pub records: [BlockFile; 2],
    /// The record file the next checkpoint writes (the other holds the last durable record).
    pub next_record: usize,
    pub map: SlotMap,
    /// Snapshots that keep freed slots from reuse.
    pub holds: Arc<SlotHolds>,
    /// Slot 0 still holds a format-3 superblock: after the first durable record it becomes
    /// the format-4 file header, which older builds refuse.
    pub legacy_header: bool,
}

pub struct CheckpointWriter {
    messages: Option<Sender<WriterMessage>>,
    outcomes: Receiver<Finished>,
    thread: Option<JoinHandle<()>>,
}

impl CheckpointWriter {
    pub fn start(state: WriterState) -> KvResult<CheckpointWriter> {
        let (messages, inbox) = channel::<WriterMessage>();
        let (outcome_sender, outcomes) = channel();
        let thread = std::thread::Builder::new()
            .name("kv-checkpoint".into())
            .spawn(move || {
                // Checkpoints are background work: on a machine with few cores the writer's
                // copying and checksumming must not take CPU time from the executor.
                io::lower_thread_priority();
                let mut writer = Writer {
                    state,
                    chunk: Vec::new(),
                    chunk_start: 0,
                };
                while let Some(finished) = writer.run_one(&inbox, &outcome_sender) {
                    if outcome_sender.send(finished).is_err() {
                        return;
                    }
                }
            })
            .map_err(|source| {
                KvError::io(
                    std::path::Path::new("kv-checkpoint thread"),
                    IoOp::Open,
                    0,
                    source,
                )
            })?;
        Ok(CheckpointWriter {
            messages: Some(messages),
            outcomes,
            thread: Some(thread),
        })
    }

    pub fn send(&self, message: WriterMessage) {
        let sender = self
            .messages
            .as_ref()
            .expect("writer is running until dropped");
        sender
            .send(message)
            .expect("checkpoint thread outlives the writer handle");
    }

    /// The outcome of the checkpoint in flight, if it has finished.
    pub fn poll(&self) -> Option<Finished> {
        match self.outcomes.try_recv() {
            Ok(finished) => Some(finished),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => panic!("checkpoint thread died"),
        }
    }

    /// Blocks until the checkpoint in flight finishes.
    pub fn wait(&self) -> Finished {
        self.outcomes.recv().expect("checkpoint thread died")
    }
}

impl Drop for CheckpointWriter {
    fn drop(&mut self) {
        self.messages.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A page of the checkpoint in flight: where it was and where it went.
struct Placed {
    page_id: u64,
    old_slot: u32,
    slot: u32,
}

struct Writer {
    state: WriterState,
    /// Reused buffer the images are sealed into; they start at `chunk_start`, aligned for
    /// direct writes.
    chunk: Vec<u8>,
    chunk_start: usize,
}

impl Writer {
    /// Runs one checkpoint from `Begin` on; `None` when the executor hung up.
    fn run_one(
        &mut self,
        inbox: &Receiver<WriterMessage>,
        outcomes: &Sender<Finished>,
    ) -> Option<Finished> {
        let (superblock, mut pacer, gated) = loop {
            match inbox.recv().ok()? {
                WriterMessage::Begin {
                    superblock,
                    expected_pages,
                    spread,
                    gated,
                } => {
                    let page_size = superblock.page_size as usize;
                    let pacer = Pacer::new((expected_pages + 1) * page_size, spread);
                    break (superblock, pacer, gated);
                }
                WriterMessage::Pages(_)
                | WriterMessage::End
                | WriterMessage::Release
                | WriterMessage::Abandon => continue,
            }
        };
        let seq = superblock.checkpoint_seq;
        let finished = |outcome| Some(Finished { seq, outcome });
        let started = Instant::now();
        let page_size = superblock.page_size as usize;
        self.state.holds.reclaim(&mut self.state.map);
        self.state.map.rewind();
        let mut placed = Vec::new();
        let mut failure: Option<KvError> = None;
        loop {
            match inbox.recv().ok()? {
                WriterMessage::Pages(batch) if failure.is_none() => {
                    failure = self.write_pages(&batch, page_size, &mut placed).err();
                    pacer.account(batch.len() * page_size);
                    // The images are written now: dropping them here ends the executor's
                    // copy-on-write for these pages.
                }
                // A failed checkpoint still takes the rest of its pages, to let go of them.
                WriterMessage::Pages(_) => {}
                WriterMessage::End => break,
                WriterMessage::Begin { .. } | WriterMessage::Release | WriterMessage::Abandon => {
                    unreachable!("a checkpoint begins only after the previous one ended")
                }
            }
        }
        let written = match failure {
            Some(err) => Err(err),
            None => self.state.data.sync(),
        };
        if let Err(err) = written {
            self.unplace(&placed);
            return finished(CheckpointOutcome::WriteFailed(err));
        }
        self.state.map.cover(superblock.alloc.page_count);
        let record = &self.state.records[self.state.next_record];
        let slot_count = self.state.map.slot_count();
        if let Err(err) = page_map::write(record, &superblock, self.state.map.slots(), slot_count) {
            if !gated {
                return finished(CheckpointOutcome::DataFailed(err));
            }
            // A gated record covers a position its owner has not committed: recovery
            // ignores it, and the next checkpoint writes this same file before any commit
            // could reach that position. Its slots may be reused.
            self.unplace(&placed);
            return finished(CheckpointOutcome::WriteFailed(err));
        }
        if gated {
            outcomes
                .send(Finished {
                    seq,
                    outcome: CheckpointOutcome::Prepared,
                })
                .ok()?;
            match inbox.recv().ok()? {
                WriterMessage::Release => {}
                WriterMessage::Abandon => {
                    if let Err(err) = page_map::invalidate(record) {
                        return finished(CheckpointOutcome::DataFailed(err));
                    }
                    self.unplace(&placed);
                    return finished(CheckpointOutcome::Abandoned);
                }
                _ => unreachable!("a gated checkpoint waits for Release or Abandon"),
            }
        }
        let old_slots = placed
            .iter()
            .map(|page| page.old_slot)
            .filter(|&slot| slot != 0)
            .collect();
        self.state.holds.release(old_slots, &mut self.state.map);
        self.state.next_record ^= 1;
        if self.state.legacy_header {
            let header = Superblock::file_header(superblock.page_size).encode();
            if let Err(err) = self.state.data.write_batch_sync(&[(0, &header)]) {
                return finished(CheckpointOutcome::DataFailed(err));
            }
            self.state.legacy_header = false;
        }
        finished(CheckpointOutcome::Durable {
            slots: placed.iter().map(|page| page.slot).collect(),
            elapsed: started.elapsed(),
        })
    }

    /// Writes a batch of images to free slots, sealed, in groups of `CHUNK_PAGES`; each
    /// run of consecutive slots is one write.
    fn write_pages(
        &mut self,
        batch: &[(u64, Arc<PageBuf>)],
        page_size: usize,
        placed: &mut Vec<Placed>,
    ) -> KvResult<()> {
        if self.chunk.is_empty() {
            self.chunk = vec![0u8; CHUNK_PAGES * page_size + DIRECT_ALIGN];
            let misalignment = self.chunk.as_ptr() as usize % DIRECT_ALIGN;
            self.chunk_start = (DIRECT_ALIGN - misalignment) % DIRECT_ALIGN;
        }
        let chunk = &mut self.chunk[self.chunk_start..self.chunk_start + CHUNK_PAGES * page_size];
        for group in batch.chunks(CHUNK_PAGES) {
            let first = placed.len();
            for ((page_id, image), target) in group.iter().zip(chunk.chunks_mut(page_size)) {
                let slot = self.state.map.allocate()?;
                let old_slot = self.state.map.assign(*page_id, slot);
                placed.push(Placed {
                    page_id: *page_id,
                    old_slot,
                    slot,
                });
                target.copy_from_slice(image.bytes());
                page::seal(*page_id, target);
            }
            let mut writes: Vec<(u64, &[u8])> = Vec::new();
            let mut run_start = 0;
            let group_placed = &placed[first..];
            for index in 1..=group_placed.len() {
                let run_ends = index == group_placed.len()
                    || group_placed[index].slot != group_placed[index - 1].slot + 1;
                if run_ends {
                    let offset = u64::from(group_placed[run_start].slot) * page_size as u64;
                    writes.push((offset, &chunk[run_start * page_size..index * page_size]));
                    run_start = index;
                }
            }
            write_runs(&mut self.state.direct, &self.state.data, &writes)?;
        }
        Ok(())
    }

    /// Gives the pages of a checkpoint that will not be durable their old slots back and
    /// frees the slots they were written to.
    fn unplace(&mut self, placed: &[Placed]) {
        for page in placed.iter().rev() {
            self.state.map.assign(page.page_id, page.old_slot);
            self.state.map.release(page.slot);
        }
    }
}

/// Writes runs of sealed pages: direct when the file system allows (falling back to the page
/// cache for good the first time it refuses), otherwise buffered with writeback started.
fn write_runs(
    direct: &mut Option<BlockFile>,
    data: &BlockFile,
    writes: &[(u64, &[u8])],
) -> KvResult<()> {
    if let Some(file) = direct {
        match file.write_batch(writes) {
            Ok(()) => return Ok(()),
            Err(err) if err.is_invalid_argument() => *direct = None,
            Err(err) => return Err(err),
        }
    }
    data.write_batch(writes)?;
    data.start_writeback();
    Ok(())
}

/// Spreads a checkpoint's writes over a target duration (like PostgreSQL's
/// `checkpoint_completion_target`), so the background writer never takes memory bandwidth,
/// CPU and disk time from the executor and the log in one burst.
struct Pacer {
    started: Instant,
    bytes_per_second: Option<f64>,
    accounted: usize,
}

impl Pacer {
    fn new(total_bytes: usize, spread: Option<Duration>) -> Pacer {
        let bytes_per_second = spread
            .filter(|spread| !spread.is_zero())
            .map(|spread| total_bytes as f64 / spread.as_secs_f64());
        Pacer {
            started: Instant::now(),
            bytes_per_second,
            accounted: 0,
        }
    }

    /// Records `bytes` as written and sleeps while ahead of schedule.
    fn account(&mut self, bytes: usize) {
        self.accounted += bytes;
        let Some(rate) = self.bytes_per_second else {
            return;
        };
        let due = Duration::from_secs_f64(self.accounted as f64 / rate);
        if let Some(ahead) = due.checked_sub(self.started.elapsed()) {
            std::thread::sleep(ahead);
        }
    }
}
