//! Group commit above Raft. openraft 0.9 appends and flushes each `client_write` on its own,
//! so the proposer batches: it drains every command queued while the previous entries were
//! being made durable into one entry. With nothing queued a command goes out at once — no
//! waiting window — and with many clients each flush carries many commands.
//!
//! In a cluster a batch goes where the leader is: this node's log when it leads, else over
//! the network to the leader's proposer (`forward`). A command that certainly reached no
//! log (no leader yet, the leader unreachable, refused or cut off by a new leader) is sent
//! again for up to `ELECTION_WAIT`; one whose answer was lost after it was sent is reported
//! as unknown (40003), never sent twice.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::early_reply::{EarlyReplies, Waiter};
use crate::network::{leader, leader_replaced, CallError, PeerRequest, PeerResponse};
use crate::peer_link::PeerLinks;
use crate::types::{Batch, NodeId, Raft};

/// Why a proposal did not produce a result.
#[derive(Clone, Debug, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum ProposeError {
    /// No leader took the command within `ELECTION_WAIT`: it certainly did not apply.
    #[error("no leader is known (a majority of the cluster's voters must be up); the statement did not apply")]
    NotLeader,
    /// The command was sent toward the leader and no answer came: it may or may not apply.
    #[error("{0}")]
    Unknown(String),
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
    /// A batch in flight holds one; holding them all pauses proposing (`pause`).
    slots: Arc<Semaphore>,
    in_flight: u32,
}

/// Entries in flight at once on a single node: one being flushed while the next fills up.
const IN_FLIGHT_SINGLE: u32 = 2;
/// Entries in flight at once in a cluster: one. Within an entry the leader's fsync, the
/// network and the followers' fsyncs already overlap (openraft sends an entry to the
/// followers while it is being flushed here), and each entry costs every node its raft,
/// network and log work; a second entry in flight halves the batches and doubles that
/// cost without overlapping anything that waited. Measured on 3 replicas sharing two cores
/// (docs/benchmarks.md): 5-20% more hot-account transfers at 64 clients, none fewer at 8 or 16.
const IN_FLIGHT_CLUSTER: u32 = 1;
/// Keep an entry well under the log's record limit.
const BATCH_BYTES_MAX: usize = 8 << 20;
const BATCH_COMMANDS_MAX: usize = 10_000;

impl Proposer {
    pub(crate) fn start(
        raft: Raft,
        early: Arc<EarlyReplies>,
        node_id: NodeId,
        cluster: bool,
        peers: PeerLinks,
    ) -> Proposer {
        let (tx, rx) = mpsc::unbounded_channel();
        let stats = Arc::new(ProposerStats::default());
        let route = Route {
            raft,
            node_id,
            cluster,
            leaders: peers,
        };
        let in_flight = if cluster {
            IN_FLIGHT_CLUSTER
        } else {
            IN_FLIGHT_SINGLE
        };
        let slots = Arc::new(Semaphore::new(in_flight as usize));
        tokio::spawn(run(route, rx, stats.clone(), early, slots.clone()));
        Proposer {
            queue: tx,
            stats,
            slots,
            in_flight,
        }
    }

    /// Waits for the batches in flight to finish and holds new ones back until the guard
    /// is dropped (a leadership transfer: nothing may reach the followers meanwhile).
    pub(crate) async fn pause(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.slots
            .clone()
            .acquire_many_owned(self.in_flight)
            .await
            .ok()
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
    cluster: bool,
    leaders: PeerLinks,
}

impl Route {
    /// The leader's id and peer address, when it is another node.
    fn other_leader(&self) -> Option<(NodeId, String)> {
        match leader(&self.raft, &self.leaders)? {
            (id, Some(addr)) if id != self.node_id => Some((id, addr)),
            _ => None,
        }
    }
}

async fn run(
    route: Route,
    mut rx: mpsc::UnboundedReceiver<Queued>,
    stats: Arc<ProposerStats>,
    early: Arc<EarlyReplies>,
    slots: Arc<Semaphore>,
) {
    let route = Arc::new(route);
    loop {
        // A command first, then a slot: an idle loop holds no slot (`pause` takes them all),
        // and commands queued while it waits for one join the batch.
        let Some(first) = rx.recv().await else { return };
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
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
            route_batch(&route, &early, batch).await;
            drop(permit);
        });
    }
}

/// How long a batch waits for a leader (an election, a leader unreachable) before its
/// commands fail with `NotLeader`, having certainly not applied.
const ELECTION_WAIT: Duration = Duration::from_secs(5);

/// Sends a batch where the leader is, again while it certainly did not reach a log and a
/// leader may yet appear, for at most `ELECTION_WAIT`.
async fn route_batch(route: &Route, early: &EarlyReplies, mut batch: Vec<Queued>) {
    let deadline = Instant::now() + ELECTION_WAIT;
    loop {
        // A single node leads, or is stopping: no need to look.
        let leader = if route.cluster {
            route.other_leader()
        } else {
            None
        };
        let again = match leader {
            Some((leader, addr)) => forward(route, leader, &addr, batch).await,
            None => write_here(route, early, batch).await,
        };
        if again.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            for queued in again {
                let _ = queued.waiter.send(Err(ProposeError::NotLeader));
            }
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        batch = again;
    }
}

/// Answers a command that did not reach a log: a forwarded one goes back to its follower
/// (which tries again), one of this node's sessions is returned to be tried again.
fn not_in_log(queued: Queued, again: &mut Vec<Queued>) {
    if queued.from_peer {
        let _ = queued.waiter.send(Err(ProposeError::NotLeader));
    } else {
        again.push(queued);
    }
}

/// Appends a batch as one entry of this node's log; returns the commands that did not
/// reach it (openraft's "forward to leader": refused, or cut off by a new leader).
async fn write_here(route: &Route, early: &EarlyReplies, batch: Vec<Queued>) -> Vec<Queued> {
    let mut commands = Vec::with_capacity(batch.len());
    let mut waiters = Vec::with_capacity(batch.len());
    let mut from_peer = Vec::with_capacity(batch.len());
    for q in batch {
        commands.push(q.command);
        waiters.push(q.waiter);
        from_peer.push(q.from_peer);
    }
    // A single node is its own leader: only a cluster keeps a copy to send again.
    let kept = route.cluster.then(|| commands.clone());
    let token = early.register(waiters);
    let writing = route.raft.client_write(Batch(commands, token));
    let outcome = if route.cluster {
        tokio::select! {
            outcome = writing => Some(outcome),
            _ = gave_up_leading(&route.raft, route.node_id) => None,
        }
    } else {
        Some(writing.await)
    };
    // Commands already answered as they were applied are `None` here.
    let finished = early.finish(token);
    let waiters = finished.waiters;
    let mut again = Vec::new();
    let Some(outcome) = outcome else {
        abandoned(waiters);
        return again;
    };
    match (outcome, kept) {
        (Ok(response), _) => {
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
        // Refused before it reached the log: certainly applies nowhere, send it again.
        (Err(e), Some(commands)) if e.forward_to_leader().is_some() && !finished.logged => {
            for ((command, waiter), from_peer) in commands.into_iter().zip(waiters).zip(from_peer) {
                if let Some(waiter) = waiter {
                    let queued = Queued {
                        command,
                        waiter,
                        from_peer,
                    };
                    not_in_log(queued, &mut again);
                }
            }
        }
        (Err(e), _) => {
            let error = match e.forward_to_leader() {
                // Logged here, then cut off by a new leader: another node may hold the
                // entry and a later leader commit it.
                Some(_) if finished.logged => ProposeError::Unknown(
                    "this node lost its leadership after logging the statement: it may or may not apply".into(),
                ),
                Some(_) => ProposeError::NotLeader,
                None => ProposeError::Raft(e.to_string()),
            };
            for w in waiters.into_iter().flatten() {
                let _ = w.send(Err(error.clone()));
            }
        }
    }
    again
}

/// How long a node that stopped leading still waits for an entry it logged: a new leader
/// replicates it (then it applies here) or truncates it (openraft answers "forward"), both
/// within an election or two. Past that nothing may ever answer it: a leader removed from
/// the membership hears from nobody again.
const LOST_LEADERSHIP_WAIT: Duration = Duration::from_secs(3);
/// How long a leader may go unconfirmed by a quorum before it stops waiting for its
/// entries to commit: cut off from the majority (which elects another leader after its
/// election timeout), it can commit nothing until the partition heals, if ever.
const CUT_OFF_WAIT: Duration = Duration::from_secs(5);

/// Resolves once waiting longer for this node's logged entries is pointless: it stopped
/// leading `LOST_LEADERSHIP_WAIT` ago (openraft keeps a stepped-down leader's own vote,
/// so `current_leader` alone may still name it), or no quorum confirmed it for
/// `CUT_OFF_WAIT`.
async fn gave_up_leading(raft: &Raft, id: NodeId) {
    let mut lost_at: Option<Instant> = None;
    loop {
        let (leading, unconfirmed_ms) = {
            let metrics = raft.metrics();
            let metrics = metrics.borrow();
            (
                metrics.state == openraft::ServerState::Leader
                    && metrics.current_leader == Some(id),
                metrics.millis_since_quorum_ack,
            )
        };
        if leading {
            lost_at = None;
            if unconfirmed_ms.is_some_and(|ms| u128::from(ms) >= CUT_OFF_WAIT.as_millis()) {
                return;
            }
        } else if lost_at.get_or_insert_with(Instant::now).elapsed() >= LOST_LEADERSHIP_WAIT {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Answers the commands of an entry whose `client_write` was given up on: one that reached
/// the log may still commit through a later leader, and one that did not may yet be in
/// openraft's queue, so neither is sent again (40003).
fn abandoned(waiters: Vec<Option<Waiter>>) {
    for waiter in waiters.into_iter().flatten() {
        let _ = waiter.send(Err(ProposeError::Unknown(
            "this node stopped leading, or was cut off from the majority, while the statement was being committed: it may or may not apply".into(),
        )));
    }
}

/// How long a forwarded batch may take at the leader.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a follower waits to apply what the leader had applied when it answered.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(10);

/// Sends a batch to the leader and answers each command with the leader's result, once
/// this node has applied as far (its sessions then read their own writes here). Returns
/// the commands that certainly did not reach the leader's log, to be tried again.
async fn forward(route: &Route, leader: NodeId, addr: &str, batch: Vec<Queued>) -> Vec<Queued> {
    let mut again = Vec::new();
    let mut commands = Vec::with_capacity(batch.len());
    let mut waiters = Vec::with_capacity(batch.len());
    for queued in batch {
        if queued.from_peer {
            not_in_log(queued, &mut again);
        } else {
            commands.push(queued.command);
            waiters.push(queued.waiter);
        }
    }
    if commands.is_empty() {
        return again;
    }
    let request = PeerRequest::Propose(commands);
    // A leader that stops answering (stopped, cut off) is replaced by an election; its
    // answer is then given up for (the command may still have committed: 40003) rather
    // than waited for until the timeout.
    let outcome = tokio::select! {
        outcome = route.leaders.call(addr, &request, FORWARD_TIMEOUT) => outcome,
        _ = leader_replaced(&route.raft, leader) => Err(CallError::TimedOut),
    };
    let PeerRequest::Propose(commands) = request else {
        unreachable!("built above")
    };
    match outcome {
        Ok(PeerResponse::Propose(proposed)) => {
            let _ = route
                .raft
                .wait(Some(CATCH_UP_TIMEOUT))
                .applied_index_at_least(Some(proposed.apply_through), "read own writes")
                .await;
            let mut results = proposed.results.into_iter();
            for (command, waiter) in commands.into_iter().zip(waiters) {
                match results.next() {
                    Some(Err(ProposeError::NotLeader)) => {
                        again.push(Queued {
                            command,
                            waiter,
                            from_peer: false,
                        });
                    }
                    Some(result) => {
                        let _ = waiter.send(result);
                    }
                    None => {
                        let _ = waiter.send(Err(ProposeError::Raft(
                            "the leader answered no result".into(),
                        )));
                    }
                }
            }
        }
        Ok(_) => {
            for waiter in waiters {
                let _ = waiter.send(Err(ProposeError::Raft(
                    "the leader answered another request".into(),
                )));
            }
        }
        // Never connected: nothing was sent.
        Err(CallError::Unreachable(_)) => {
            for (command, waiter) in commands.into_iter().zip(waiters) {
                again.push(Queued {
                    command,
                    waiter,
                    from_peer: false,
                });
            }
        }
        Err(_) => {
            let error = format!(
                "the connection to the leader at {addr} failed before it answered: the statement may or may not have applied"
            );
            for waiter in waiters {
                let _ = waiter.send(Err(ProposeError::Unknown(error.clone())));
            }
        }
    }
    again
}
