//! Reading an entry's pages while the log makes it durable. Once the ledger's tables
//! outgrow the buffer pool, an entry's transfers need pages that are on disk; reading them
//! when the entry comes up to apply (`Executor::page_in_ahead`, all at once) still leaves
//! the executor idle for a device latency per entry. So while some partition has pages
//! outside its pool, the executor says so (`ReadsWanted`), and the log hands it each entry's
//! commands as it starts writing them (`ExecutorHandle::read_ahead_of`): the executor starts
//! their reads and leaves them in flight (`kv::Engine::submit_page_in`) — they overlap the
//! log's write and flush and the entries applying before — and completes them when the
//! entry comes up to apply, by which time most have landed.
//!
//! A hint: nothing is applied or answered from it, and an entry that had none (or whose
//! reads could not all be started) reads what it misses when it applies.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::Coordinator;
use crate::command::{decode_command, Command};
use crate::executor::EntryPayload;

/// Whether the executor wants entries' commands ahead of applying them: set while some
/// partition has pages outside its buffer pool.
#[derive(Clone, Default)]
pub(crate) struct ReadsWanted(Arc<AtomicBool>);

impl ReadsWanted {
    pub(crate) fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    fn set(&self, wanted: bool) {
        if self.get() != wanted {
            self.0.store(wanted, Ordering::Relaxed);
        }
    }
}

pub(super) struct ReadAhead {
    wanted: ReadsWanted,
    /// The highest log index whose reads were started (and may not be completed yet).
    submitted_through: Option<u64>,
}

impl ReadAhead {
    pub(super) fn new(wanted: ReadsWanted) -> ReadAhead {
        ReadAhead {
            wanted,
            submitted_through: None,
        }
    }

    pub(super) fn wanted(&self) -> ReadsWanted {
        self.wanted.clone()
    }
}

/// An entry's commands, those this build reads (the others fail when they apply).
fn decoded(commands: &[Vec<u8>]) -> Vec<Command> {
    commands
        .iter()
        .filter_map(|bytes| decode_command(bytes).ok())
        .collect()
}

impl Coordinator {
    /// The commands of entry `index`, before it is durable: their reads are started.
    pub(super) fn start_reads_ahead(&mut self, index: u64, commands: &[Vec<u8>]) {
        if index > self.applied.index && self.executor.pages_outside_pool() {
            self.executor.page_in_ahead(&decoded(commands), true);
            self.read_ahead.submitted_through = Some(index);
        }
    }

    /// Before entry `index` applies: the reads started for it are completed, or, if none
    /// were, its pages are read now, all at once. Then says whether hints are wanted.
    pub(super) fn read_pages_ahead(&mut self, index: u64, payload: &EntryPayload) {
        let started = self
            .read_ahead
            .submitted_through
            .is_some_and(|through| through >= index);
        let outside = self.executor.pages_outside_pool();
        if started {
            self.executor.complete_page_in();
        } else if let EntryPayload::Commands(commands) = payload {
            if commands.len() > 1 && outside {
                self.executor.page_in_ahead(&decoded(commands), false);
            }
        }
        self.read_ahead.wanted.set(outside);
    }
}
