//! The checkpoint writer: a background thread that makes a captured page image durable while
//! the executor keeps updating pages.
//!
//! Protocol for checkpoint `seq` (see `journal` for why it is crash safe):
//! 1. write every captured page and the new superblock to the journal, fsync;
//! 2. reserve the data file's new length (so ENOSPC hits here, not mid-write);
//! 3. write the same pages in place, superblock included, fsync.
//!
//! A failure in step 1 leaves the data file untouched: the executor marks the pages dirty again
//! and may retry. A failure in steps 2–3 leaves a complete journal that recovery must replay,
//! so the engine refuses further work until it is reopened (`KvError::Poisoned`).

use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{KvError, KvResult};
use crate::io::BlockFile;
use crate::journal::{self, JournalPage};

pub struct CheckpointJob {
    pub seq: u64,
    pub page_size: usize,
    pub file_len: u64,
    /// Captured pages; the superblock (page 0) is last.
    pub pages: Vec<(u64, JournalPage)>,
}

/// How a checkpoint ended.
pub enum CheckpointOutcome {
    Durable {
        pages: usize,
        elapsed: Duration,
    },
    /// The data file is untouched; the checkpoint can be retried.
    JournalFailed(KvError),
    /// The data file may be partially written; only recovery (reopen) may continue.
    DataFailed(KvError),
}

/// A finished checkpoint: its sequence number, outcome, and the page images handed back for
/// reuse.
pub struct Finished {
    pub seq: u64,
    pub outcome: CheckpointOutcome,
    pub pages: Vec<(u64, JournalPage)>,
}

pub struct CheckpointWriter {
    jobs: Option<Sender<CheckpointJob>>,
    outcomes: Receiver<Finished>,
    thread: Option<JoinHandle<()>>,
}

impl CheckpointWriter {
    pub fn start(data: Arc<BlockFile>, journal: BlockFile) -> KvResult<CheckpointWriter> {
        let (jobs, job_queue) = channel::<CheckpointJob>();
        let (outcome_sender, outcomes) = channel();
        let thread = std::thread::Builder::new()
            .name("kv-checkpoint".into())
            .spawn(move || {
                lower_thread_priority();
                for job in job_queue {
                    let outcome = run(&data, &journal, &job);
                    let finished = Finished {
                        seq: job.seq,
                        outcome,
                        pages: job.pages,
                    };
                    if outcome_sender.send(finished).is_err() {
                        return;
                    }
                }
            })
            .map_err(|source| {
                KvError::io(
                    std::path::Path::new("kv-checkpoint"),
                    crate::error::IoOp::Open,
                    0,
                    source,
                )
            })?;
        Ok(CheckpointWriter {
            jobs: Some(jobs),
            outcomes,
            thread: Some(thread),
        })
    }

    pub fn submit(&self, job: CheckpointJob) {
        let sender = self.jobs.as_ref().expect("writer is running until dropped");
        sender
            .send(job)
            .expect("checkpoint thread outlives the writer handle");
    }

    /// The outcome of the checkpoint in flight, if it has finished.
    pub fn poll(&self) -> Option<Finished> {
        match self.outcomes.try_recv() {
            Ok(outcome) => Some(outcome),
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
        self.jobs.take();
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

fn run(data: &BlockFile, journal_file: &BlockFile, job: &CheckpointJob) -> CheckpointOutcome {
    let started = Instant::now();
    if let Err(err) = journal::write(journal_file, job.seq, job.page_size, &job.pages) {
        return CheckpointOutcome::JournalFailed(err);
    }
    let in_place = || -> KvResult<()> {
        if data.len()? < job.file_len {
            data.allocate(job.file_len)?;
        }
        journal::for_each_sealed_chunk(&job.pages, job.page_size, |first, bytes| {
            let writes: Vec<(u64, &[u8])> = job.pages[first..]
                .iter()
                .zip(bytes.chunks(job.page_size))
                .map(|((page_id, _), image)| (page_id * job.page_size as u64, image))
                .collect();
            data.write_batch(&writes)
        })?;
        data.sync()
    };
    match in_place() {
        Ok(()) => CheckpointOutcome::Durable {
            pages: job.pages.len(),
            elapsed: started.elapsed(),
        },
        Err(err) => CheckpointOutcome::DataFailed(err),
    }
}
