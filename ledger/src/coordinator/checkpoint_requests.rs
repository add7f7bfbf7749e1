//! `CHECKPOINT`: a session asks for a checkpoint that covers everything applied when it
//! asked, and is answered once one is durable — as PostgreSQL's CHECKPOINT returns when
//! its checkpoint is complete. The request begins a checkpoint between entries at once,
//! whatever `--checkpoint-interval-s` says; one already in flight is waited for first
//! (it may have begun before the position asked for).

use sql::{ErrorKind, SqlError, SqlResult};

use super::Coordinator;
use crate::executor::Reply;

/// Who asked for a checkpoint, and the log index it must cover.
#[derive(Default)]
pub(super) struct CheckpointRequests {
    waiting: Vec<(u64, Reply<SqlResult<()>>)>,
}

impl CheckpointRequests {
    pub(super) fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

fn failed() -> SqlError {
    SqlError::new(
        ErrorKind::Io,
        "checkpoint request failed: the server's log says why",
    )
}

impl Coordinator {
    /// A session's CHECKPOINT: answered when a checkpoint covering what is applied now is
    /// durable.
    pub(super) fn request_checkpoint(&mut self, reply: Reply<SqlResult<()>>) {
        if self.executor.failed.is_some() {
            reply(Err(failed()));
            return;
        }
        self.checkpoint_requests
            .waiting
            .push((self.applied.index, reply));
    }

    /// Between entries, with no checkpoint in flight: begins one for the requests waiting.
    /// Whether one began (or the requests were answered) — the caller then looks no further.
    pub(super) fn begin_requested_checkpoint(&mut self) -> bool {
        if self.checkpoint_requests.is_empty() {
            return false;
        }
        if self.applied.index == 0 {
            // Nothing was ever applied: the state on disk is the whole state.
            self.answer_checkpoint_requests(Some(0));
            return true;
        }
        self.begin_checkpoint();
        if self.checkpointing.is_none() {
            self.answer_checkpoint_requests(None);
        }
        true
    }

    /// A checkpoint ended: durable up to the log index `durable`, or it failed (None). The
    /// requests it covers are answered; those asked after it began wait for the next.
    pub(super) fn answer_checkpoint_requests(&mut self, durable: Option<u64>) {
        let waiting = std::mem::take(&mut self.checkpoint_requests.waiting);
        for (index, reply) in waiting {
            match durable {
                Some(covered) if index <= covered => reply(Ok(())),
                Some(_) => self.checkpoint_requests.waiting.push((index, reply)),
                None => reply(Err(failed())),
            }
        }
    }
}
