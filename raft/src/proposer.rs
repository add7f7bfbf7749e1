//! Group commit above Raft. openraft 0.9 appends and flushes each `client_write` on its own,
//! so the proposer batches: it drains every command queued while the previous entries were
//! being made durable into one entry. With nothing queued a command goes out at once — no
//! waiting window — and with many clients each flush carries many commands.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use std::time::Duration;

use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::early_reply::{EarlyReplies, Waiter};
use crate::network::{CallError, LeaderConnections, PeerRequest, PeerResponse};
use crate::types::{Batch, NodeId, Raft};

/// Why a proposal did not produce a result.
#[derive(Debug, thiserror::Error, serde::Serialize, serde::Deserialize)]
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

/// A queued command: its bytes, who waits for its result, and whether a follower
/// forwarded it (such a command is never forwarded again: two nodes that each think the
/// other leads must not pass it back and forth).
struct Queued {
    command: Vec<u8>,
    waiter: Waiter,
    from_peer: bool,
}

#[derive(Clone)]
pub struct Proposer {
    queue: mpsc::UnboundedSender<Queued>,
    stats: Arc<ProposerStats>,
}

/// Entries in flight at once: one being flushed while the next fills up.
const IN_FLIGHT: usize = 2;
/// Keep an entry well under the log's record limit.
const BATCH_BYTES_MAX: usize = 8 << 20;
const BATCH_COMMANDS_MAX: usize = 10_000;

impl Proposer {
    pub(crate) fn start(raft: Raft, early: Arc<EarlyReplies>, node_id: NodeId) -> Proposer {
        let (tx, rx) = mpsc::unbounded_channel();
        let stats = Arc::new(ProposerStats::default());
        let route = Route {
            raft,
            node_id,
            leaders: LeaderConnections::default(),
        };
        tokio::spawn(run(route, rx, stats.clone(), early));
        Proposer { queue: tx, stats }
    }

    /// Proposes one encoded command and waits for its encoded result (after it is durable
    /// in the log and applied; as soon as it is applied, not when its whole entry is). On a
    /// follower the command goes to the leader, and the result comes back once this node
    /// has applied as far as the leader had when it answered.
    pub async fn propose(&self, command: Vec<u8>) -> Result<Vec<u8>, ProposeError> {
        self.enqueue(command, false)?
            .await
            .map_err(|_| ProposeError::Stopped)?
    }

    /// Queues a command a follower forwarded; the receiver hears its result. Queued at
    /// once, so the commands of one forwarded batch share an entry.
    pub(crate) fn enqueue_from_peer(
        &self,
        command: Vec<u8>,
    ) -> Result<oneshot::Receiver<Result<Vec<u8>, ProposeError>>, ProposeError> {
        self.enqueue(command, true)
    }

    fn enqueue(
        &self,
        command: Vec<u8>,
        from_peer: bool,
    ) -> Result<oneshot::Receiver<Result<Vec<u8>, ProposeError>>, ProposeError> {
        let (tx, rx) = oneshot::channel();
        self.queue
            .send(Queued {
                command,
                waiter: tx,
                from_peer,
            })
            .map_err(|_| ProposeError::Stopped)?;
        Ok(rx)
    }

    pub fn stats(&self) -> Arc<ProposerStats> {
        self.stats.clone()
    }
}

/// Where a batch goes: this node's Raft when it leads (or no leader is known: openraft
/// then says who does, or that none does), else the leader.
struct Route {
    raft: Raft,
    node_id: NodeId,
    leaders: LeaderConnections,
}

impl Route {
    /// The leader's id and peer address, when it is another node.
    fn other_leader(&self) -> Option<(NodeId, String)> {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        let leader = metrics.current_leader.filter(|id| *id != self.node_id)?;
        let node = metrics.membership_config.membership().get_node(&leader)?;
        Some((leader, node.addr.clone()))
    }
}

async fn run(
    route: Route,
    mut rx: mpsc::UnboundedReceiver<Queued>,
    stats: Arc<ProposerStats>,
    early: Arc<EarlyReplies>,
) {
    let route = Arc::new(route);
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let Some(first) = rx.recv().await else { return };
        let mut bytes = first.command.len();
        let mut batch = vec![first];
        while bytes < BATCH_BYTES_MAX && batch.len() < BATCH_COMMANDS_MAX {
            match rx.try_recv() {
                Ok(queued) => {
                    bytes += queued.command.len();
                    batch.push(queued);
                }
                Err(_) => break,
            }
        }
        stats.entries.fetch_add(1, Ordering::Relaxed);
        stats
            .commands
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        let route = route.clone();
        let early = early.clone();
        tokio::spawn(async move {
            match route.other_leader() {
                Some((_, addr)) => forward(&route, &addr, batch).await,
                None => write_here(&route.raft, &early, batch).await,
            }
            drop(permit);
        });
    }
}

/// Appends a batch as one entry of this node's log (it leads, or openraft says why not).
async fn write_here(raft: &Raft, early: &EarlyReplies, batch: Vec<Queued>) {
    let (commands, waiters): (Vec<_>, Vec<_>) =
        batch.into_iter().map(|q| (q.command, q.waiter)).unzip();
    let token = early.register(waiters);
    let outcome = raft.client_write(Batch(commands, token)).await;
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
}

/// How long a forwarded batch may take at the leader.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a follower waits to apply what the leader had applied when it answered.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(10);

/// Sends a batch to the leader and answers each command with the leader's result, once
/// this node has applied as far (its sessions then read their own writes here).
async fn forward(route: &Route, addr: &str, batch: Vec<Queued>) {
    let mut commands = Vec::with_capacity(batch.len());
    let mut waiters = Vec::with_capacity(batch.len());
    for queued in batch {
        if queued.from_peer {
            let _ = queued.waiter.send(Err(ProposeError::NotLeader));
        } else {
            commands.push(queued.command);
            waiters.push(queued.waiter);
        }
    }
    if commands.is_empty() {
        return;
    }
    let request = PeerRequest::Propose(commands);
    let results = match route.leaders.call(addr, &request, FORWARD_TIMEOUT).await {
        Ok(PeerResponse::Propose(proposed)) => {
            let _ = route
                .raft
                .wait(Some(CATCH_UP_TIMEOUT))
                .applied_index_at_least(Some(proposed.applied_index), "read own writes")
                .await;
            proposed.results
        }
        Ok(_) => vec![],
        Err(CallError::Unreachable(e)) => {
            let error = format!("cannot reach the leader at {addr}: {e}");
            (0..waiters.len())
                .map(|_| Err(ProposeError::Raft(error.clone())))
                .collect()
        }
        Err(_) => {
            let error = format!(
                "the connection to the leader at {addr} failed before it answered: the statement may or may not have committed"
            );
            (0..waiters.len())
                .map(|_| Err(ProposeError::Raft(error.clone())))
                .collect()
        }
    };
    let mut results = results.into_iter();
    for w in waiters {
        let r = results
            .next()
            .unwrap_or_else(|| Err(ProposeError::Raft("the leader answered no result".into())));
        let _ = w.send(r);
    }
}
