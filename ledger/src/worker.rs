//! A partition's thread: applies the commands the coordinator sends it with the partition
//! lent to it, and hands the partition back when asked. It never decides anything itself:
//! which commands it gets, and when, is the coordinator's routing (see `coordinator`).

use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::thread;

use plan::Catalog;
use sql::{SqlError, SqlResult};

use crate::command::{Command, CommandResult};
use crate::executor::Executor;
use crate::partition::Shard;
use crate::share::{AppliedShares, SplitShare};
use crate::undo::UndoLog;

/// What the coordinator sends a partition's thread.
pub(crate) enum Work {
    /// Apply `command` (whose clock and expiry the coordinator has already handled) with the
    /// partition, which comes with the first command of an entry.
    Run {
        shard: Option<Box<Shard>>,
        slot: usize,
        command: Box<Command>,
        catalog: Arc<Catalog>,
        clock: i64,
        /// The command's event timestamps, reserved in log order by the coordinator.
        timestamps: crate::event_timestamps::Reservation,
        version: u64,
        reports: Sender<Report>,
    },
    /// Give the partition back.
    Return { reports: Sender<Report> },
    /// Apply the partition's shares of a run of split statements (`share`), then hand the
    /// partition back with the writes made.
    Share {
        shard: Box<Shard>,
        shares: Arc<[SplitShare]>,
        /// An empty undo log to take the writes' place in the executor when they are
        /// handed back (one handed back before, kept for its capacity).
        spare_undo: UndoLog<kv::Table>,
        catalog: Arc<Catalog>,
        version: u64,
        reports: Sender<Report>,
    },
}

pub(crate) enum Report {
    Done {
        slot: usize,
        result: CommandResult,
    },
    Shard {
        partition: usize,
        shard: Box<Shard>,
    },
    /// Shares applied (up to the first that failed), with the partition and the writes
    /// they made.
    Share {
        partition: usize,
        shard: Box<Shard>,
        applied: AppliedShares,
        undo: UndoLog<kv::Table>,
    },
}

/// The thread of partition p ≥ 1: applies the commands that touch only its partition.
pub(crate) struct Worker {
    work: Option<Sender<Work>>,
    thread: Option<thread::JoinHandle<()>>,
    partition: usize,
    queues: Arc<crate::queue_depth::QueueDepths>,
}

impl Worker {
    pub fn start(
        partition: usize,
        mut executor: Executor,
        queues: Arc<crate::queue_depth::QueueDepths>,
    ) -> SqlResult<Worker> {
        let taken = queues.clone();
        let (work, inbox) = mpsc::channel::<Work>();
        // Expiry is the coordinator's: it runs before a command is sent here.
        executor.clock.next_expiry = None;
        let thread = thread::Builder::new()
            .name(format!("partition-{partition}"))
            .stack_size(sql::STATEMENT_STACK_BYTES)
            .spawn(move || {
                while let Ok(work) = inbox.recv() {
                    taken.taken(partition);
                    match work {
                        Work::Run {
                            shard,
                            slot,
                            command,
                            catalog,
                            clock,
                            timestamps,
                            version,
                            reports,
                        } => {
                            executor.lent(partition, shard, catalog, clock);
                            executor.clock.timestamps.current = timestamps;
                            let result = executor.run_command(*command, version);
                            let _ = reports.send(Report::Done { slot, result });
                        }
                        Work::Share {
                            shard,
                            shares,
                            spare_undo,
                            catalog,
                            version,
                            reports,
                        } => {
                            let clock = shares.first().map_or(0, |s| s.clock);
                            executor.lent(partition, Some(shard), catalog, clock);
                            let applied = executor.apply_shares(&shares, partition, version);
                            let undo = executor.take_undo(spare_undo);
                            if let Some(shard) = executor.shards[partition].take() {
                                let _ = reports.send(Report::Share {
                                    partition,
                                    shard: Box::new(shard),
                                    applied,
                                    undo,
                                });
                            }
                        }
                        Work::Return { reports } => {
                            if let Some(shard) = executor.shards[partition].take() {
                                let shard = Box::new(shard);
                                let _ = reports.send(Report::Shard { partition, shard });
                            }
                        }
                    }
                }
            })
            .map_err(|e| SqlError::internal(format!("cannot start a partition thread: {e}")))?;
        Ok(Worker {
            work: Some(work),
            thread: Some(thread),
            partition,
            queues,
        })
    }

    pub fn stopped(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    pub fn send(&self, work: Work) {
        if let Some(sender) = &self.work {
            // A thread that died answers nothing; the coordinator notices when it waits.
            // Counted before the send: the thread may take the work before `send` returns.
            self.queues.queued(self.partition);
            if sender.send(work).is_err() {
                self.queues.taken(self.partition);
            }
        }
    }
}

impl Executor {
    /// Takes what the coordinator lends with a command: the partition (with the first
    /// command of an entry), the catalog and the ledger clock it applies at.
    fn lent(
        &mut self,
        partition: usize,
        shard: Option<Box<Shard>>,
        catalog: Arc<Catalog>,
        clock: i64,
    ) {
        if let Some(shard) = shard {
            self.shards[partition] = Some(*shard);
        }
        // A partition's thread applies to its own partition, which it holds meanwhile, and
        // to no other (the coordinator holds those).
        assert!(
            (0..self.shards.len()).all(|p| self.holds(p) == (p == partition)),
            "partition {partition}'s thread applies without holding exactly its partition"
        );
        self.catalog = catalog;
        self.clock.now = clock;
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.work.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
