//! Group commit above Raft. openraft 0.9 appends and flushes each `client_write` on its own,
//! so the proposer batches: it drains every command queued while the previous entries were
//! being made durable into one entry. With nothing queued a command goes out at once — no
//! waiting window — and with many clients each flush carries many commands.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::early_reply::{EarlyReplies, Waiter};
use crate::types::{Batch, Raft};

/// Why a proposal did not produce a result.
#[derive(Debug, thiserror::Error)]
pub enum ProposeError {
    #[error("this node is not the leader")]
    NotLeader,
    #[error("the replicated log failed: {0}")]
    Raft(String),
    #[error("the server is shutting down")]
    Stopped,
}

/// Counters: entries proposed and commands in them.
#[derive(Debug, Default)]
pub struct ProposerStats {
    pub entries: AtomicU64,
    pub commands: AtomicU64,
}

#[derive(Clone)]
pub struct Proposer {
    queue: mpsc::UnboundedSender<(Vec<u8>, Waiter)>,
    stats: Arc<ProposerStats>,
}

/// Entries in flight at once: one being flushed while the next fills up.
const IN_FLIGHT: usize = 2;
/// Keep an entry well under the log's record limit.
const BATCH_BYTES_MAX: usize = 8 << 20;
const BATCH_COMMANDS_MAX: usize = 10_000;

impl Proposer {
    pub(crate) fn start(raft: Raft, early: Arc<EarlyReplies>) -> Proposer {
        let (tx, rx) = mpsc::unbounded_channel();
        let stats = Arc::new(ProposerStats::default());
        tokio::spawn(run(raft, rx, stats.clone(), early));
        Proposer { queue: tx, stats }
    }

    /// Proposes one encoded command and waits for its encoded result (after it is durable
    /// in the log and applied; as soon as it is applied, not when its whole entry is).
    pub async fn propose(&self, command: Vec<u8>) -> Result<Vec<u8>, ProposeError> {
        let (tx, rx) = oneshot::channel();
        self.queue
            .send((command, tx))
            .map_err(|_| ProposeError::Stopped)?;
        rx.await.map_err(|_| ProposeError::Stopped)?
    }

    pub fn stats(&self) -> Arc<ProposerStats> {
        self.stats.clone()
    }
}

async fn run(
    raft: Raft,
    mut rx: mpsc::UnboundedReceiver<(Vec<u8>, Waiter)>,
    stats: Arc<ProposerStats>,
    early: Arc<EarlyReplies>,
) {
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let Some(first) = rx.recv().await else { return };
        let mut bytes = first.0.len();
        let mut commands = vec![first.0];
        let mut waiters = vec![first.1];
        while bytes < BATCH_BYTES_MAX && commands.len() < BATCH_COMMANDS_MAX {
            match rx.try_recv() {
                Ok((command, waiter)) => {
                    bytes += command.len();
                    commands.push(command);
                    waiters.push(waiter);
                }
                Err(_) => break,
            }
        }
        stats.entries.fetch_add(1, Ordering::Relaxed);
        stats
            .commands
            .fetch_add(commands.len() as u64, Ordering::Relaxed);
        let raft = raft.clone();
        let early = early.clone();
        tokio::spawn(async move {
            let token = early.register(waiters);
            let outcome = raft.client_write(Batch(commands, token)).await;
            drop(permit);
            // Commands already answered as they were applied are `None` here.
            let waiters = early.finish(token);
            match outcome {
                Ok(response) => {
                    let mut results = response.data.0.into_iter();
                    for w in waiters {
                        let r = results
                            .next()
                            .ok_or_else(|| ProposeError::Raft("missing result".into()));
                        if let Some(w) = w {
                            let _ = w.send(r);
                        }
                    }
                }
                Err(e) => {
                    let not_leader = e.forward_to_leader().is_some();
                    let text = e.to_string();
                    for w in waiters.into_iter().flatten() {
                        let _ = w.send(Err(if not_leader {
                            ProposeError::NotLeader
                        } else {
                            ProposeError::Raft(text.clone())
                        }));
                    }
                }
            }
        });
    }
}
