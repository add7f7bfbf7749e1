//! The checkpoint writer: a background thread that makes a captured page image durable while
//! the executor keeps updating pages.
//!
//! The executor sends `Begin`, then the captured pages in batches as it captures them, then
//! `End`. Protocol for checkpoint `seq` (see `journal` for why it is crash safe):
//! 1. stream every captured page to the journal as it arrives and let go of its image —
//!    except pages the last durable checkpoint does not contain (ids at or past its page
//!    count), which go straight to the data file, since that checkpoint never reads them;
//!    at `End` fsync the data file if any did, then add the new superblock, the page id
//!    table and the header to the journal, fsync;
//! 2. reserve the data file's new length (so ENOSPC hits here, not mid-write);
//! 3. read the pages back from the journal and write them in place, superblock included,
//!    fsync — the same code recovery runs.
//!
//! A *gated* checkpoint (for an owner that commits several engines' checkpoints together)
//! stops between steps 1 and 2: the writer reports `Journaled` and waits for `Release`
//! (go on in place) or `Abandon` (leave the data file alone; the pages become dirty again).
//!
//! A failure in step 1 leaves the data file untouched: the executor marks the pages dirty again
//! and may retry. A failure in steps 2–3 leaves a complete journal that recovery must replay,
//! so the engine refuses further work until it is reopened (`KvError::Poisoned`).

use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{IoOp, KvError, KvResult};
use crate::io::BlockFile;
use crate::journal::{write_new_pages, JournalPage, JournalWriter, ValidJournal};

/// What the executor sends the writer.
pub enum WriterMessage {
    Begin {
        seq: u64,
        page_size: usize,
        file_len: u64,
        superblock: Vec<u8>,
        /// Pages the capture will send at most (the dirty pages at its start).
        expected_pages: usize,
        /// The last durable checkpoint's page count: pages from here on are new and skip
        /// the journal.
        new_from: u64,
        /// Pace the writes so the checkpoint takes about this long (`None`: full speed).
        spread: Option<Duration>,
        /// Wait for `Release` or `Abandon` once the journal is durable.
        gated: bool,
    },
    Pages(Vec<(u64, JournalPage)>),
    End,
    /// A gated checkpoint's journal is committed: write the pages in place.
    Release,
    /// A gated checkpoint will not be committed: leave the data file as it is.
    Abandon,
}

/// How a checkpoint ended.
pub enum CheckpointOutcome {
    /// A gated checkpoint's journal is durable; the writer waits for `Release` or `Abandon`.
    Journaled,
    /// A gated checkpoint was abandoned after its journal: the data file is untouched.
    Abandoned,
    Durable {
        pages: usize,
        elapsed: Duration,
    },
    /// The data file is untouched; the checkpoint can be retried.
    JournalFailed(KvError),
    /// The data file may be partially written; only recovery (reopen) may continue.
    DataFailed(KvError),
}

/// A finished checkpoint: its sequence number and outcome. The writer drops each batch of
/// page images as soon as it is in the journal (returning buffers the executor has since
/// replaced to the pool's arena), so a page is copied on write only while its image waits
/// to be journaled, and finishing costs the executor nothing per page.
pub struct Finished {
    pub seq: u64,
    pub outcome: CheckpointOutcome,
}

pub struct CheckpointWriter {
    messages: Option<Sender<WriterMessage>>,
    outcomes: Receiver<Finished>,
    thread: Option<JoinHandle<()>>,
}

impl CheckpointWriter {
    pub fn start(data: Arc<BlockFile>, journal: BlockFile) -> KvResult<CheckpointWriter> {
        let (messages, inbox) = channel::<WriterMessage>();
        let (outcome_sender, outcomes) = channel();
        let thread = std::thread::Builder::new()
            .name("kv-checkpoint".into())
            .spawn(move || {
                lower_thread_priority();
                while let Some(finished) = run_one(&data, &journal, &inbox, &outcome_sender) {
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

/// Checkpoints are background work: on a machine with few cores the writer's copying and
/// checksumming must not take CPU time from the executor. Best effort; failure is harmless.
fn lower_thread_priority() {
    // SAFETY: plain syscalls on the calling thread; no memory is shared.
    unsafe {
        let thread_id = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, thread_id, 10);
    }
}

/// Runs one checkpoint from `Begin` to `End`; `None` when the executor hung up.
fn run_one(
    data: &BlockFile,
    journal_file: &BlockFile,
    inbox: &Receiver<WriterMessage>,
    outcomes: &Sender<Finished>,
) -> Option<Finished> {
    let (seq, page_size, file_len, superblock, mut pacer, gated, new_from) = loop {
        match inbox.recv().ok()? {
            WriterMessage::Begin {
                seq,
                page_size,
                file_len,
                superblock,
                expected_pages,
                new_from,
                spread,
                gated,
            } => {
                // Most pages are written twice: to the journal and in place.
                let pacer = Pacer::new(2 * (expected_pages + 1) * page_size, spread);
                break (seq, page_size, file_len, superblock, pacer, gated, new_from);
            }
            WriterMessage::Pages(_)
            | WriterMessage::End
            | WriterMessage::Release
            | WriterMessage::Abandon => continue,
        }
    };
    let started = Instant::now();
    let mut writer = JournalWriter::new(journal_file, page_size);
    let mut journal_error: Option<KvError> = None;
    let (mut new_pages, mut new_chunk) = (0, Vec::new());
    loop {
        match inbox.recv().ok()? {
            WriterMessage::Pages(batch) if journal_error.is_none() => {
                let (new, old): (Vec<_>, Vec<_>) = batch
                    .into_iter()
                    .partition(|(page_id, _)| *page_id >= new_from);
                journal_error = writer
                    .append(&old)
                    .and_then(|()| write_new_pages(data, &new, page_size, &mut new_chunk))
                    .err();
                new_pages += new.len();
                pacer.account((old.len() + new.len()) * page_size);
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
    let superblock = [(0u64, JournalPage::Owned(superblock))];
    let journaled = match journal_error {
        Some(err) => Err(err),
        None => make_new_pages_durable(data, new_pages, file_len)
            .and_then(|()| writer.append(&superblock))
            .and_then(|()| writer.finish(seq)),
    };
    if gated && journaled.is_ok() {
        outcomes
            .send(Finished {
                seq,
                outcome: CheckpointOutcome::Journaled,
            })
            .ok()?;
        match inbox.recv().ok()? {
            WriterMessage::Release => {}
            WriterMessage::Abandon => {
                return Some(Finished {
                    seq,
                    outcome: CheckpointOutcome::Abandoned,
                })
            }
            _ => unreachable!("a gated checkpoint waits for Release or Abandon"),
        }
    }
    let outcome = match journaled {
        Err(err) => CheckpointOutcome::JournalFailed(err),
        Ok(journal) => match write_in_place(data, journal_file, &journal, file_len, &mut pacer) {
            Ok(()) => CheckpointOutcome::Durable {
                pages: journal.page_ids.len() + new_pages,
                elapsed: started.elapsed(),
            },
            Err(err) => CheckpointOutcome::DataFailed(err),
        },
    };
    Some(Finished { seq, outcome })
}

/// New pages are durable, and the data file as long as the checkpoint says, before the
/// journal that commits them: recovery from that journal then finds the whole checkpoint.
fn make_new_pages_durable(data: &BlockFile, new_pages: usize, file_len: u64) -> KvResult<()> {
    if new_pages == 0 {
        return Ok(());
    }
    reserve_len(data, file_len)?;
    data.sync()
}

/// Reserves the data file's length up to `file_len` (so a full disk fails here, not in the
/// middle of writing pages).
fn reserve_len(data: &BlockFile, file_len: u64) -> KvResult<()> {
    if data.file_len()? < file_len {
        data.allocate(file_len)?;
    }
    Ok(())
}

/// Copies the journaled images (read back from the journal, which the page cache still
/// holds) to their places in the data file, exactly as recovery would, and fsyncs it.
fn write_in_place(
    data: &BlockFile,
    journal_file: &BlockFile,
    journal: &ValidJournal,
    file_len: u64,
    pacer: &mut Pacer,
) -> KvResult<()> {
    reserve_len(data, file_len)?;
    journal.apply_reporting(journal_file, data, |bytes| pacer.account(bytes))
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
