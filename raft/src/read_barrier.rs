//! Strong reads in a cluster: before a strong read, a node makes sure its state machine has
//! applied everything committed before the read began. On the leader that is openraft's
//! `ensure_linearizable` (a quorum confirms it still leads, and it applies up to the commit
//! index); a follower asks the leader for that index and applies up to it. Weak reads skip
//! the barrier and read whatever this node has applied. A single node is its own quorum and
//! applies every entry before answering its writer: its barrier does nothing.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::network::{leader, leader_replaced, CallError, PeerRequest, PeerResponse};
use crate::peer_link::PeerLinks;
use crate::proposer::ProposeError;
use crate::types::{NodeId, Raft};

/// How long a strong read waits for the barrier.
const BARRIER_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone)]
pub struct ReadBarrier {
    raft: Raft,
    node_id: NodeId,
    cluster: bool,
    leaders: PeerLinks,
    read_index: ReadIndex,
}

impl ReadBarrier {
    pub(crate) fn new(
        raft: Raft,
        node_id: NodeId,
        cluster: bool,
        read_index: ReadIndex,
        peers: PeerLinks,
    ) -> ReadBarrier {
        ReadBarrier {
            raft,
            node_id,
            cluster,
            leaders: peers,
            read_index,
        }
    }

    /// Whether this node is one of several (strong reads then need the barrier).
    pub fn in_cluster(&self) -> bool {
        self.cluster
    }

    /// Returns once this node has applied every entry committed before the call. While no
    /// leader is known or it cannot be reached (an election), tries again for up to 5 s.
    pub async fn wait(&self) -> Result<(), ProposeError> {
        if !self.cluster {
            return Ok(());
        }
        let deadline = Instant::now() + ELECTION_WAIT;
        loop {
            match self.once().await {
                Err(Retry::Election) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(Retry::Election) => return Err(ProposeError::NotLeader),
                Err(Retry::Failed(e)) => return Err(e),
                Ok(()) => return Ok(()),
            }
        }
    }

    async fn once(&self) -> Result<(), Retry> {
        let (leader, addr) = leader(&self.raft, &self.leaders).ok_or(Retry::Election)?;
        if leader == self.node_id {
            return match self.read_index.confirm(&self.raft).await {
                Ok(_) => Ok(()),
                Err(ProposeError::NotLeader) => Err(Retry::Election),
                Err(e) => Err(Retry::Failed(e)),
            };
        }
        let addr = addr.ok_or(Retry::Election)?;
        let call = self
            .leaders
            .call(&addr, &PeerRequest::ReadBarrier, BARRIER_TIMEOUT);
        let answer = tokio::select! {
            answer = call => answer,
            // The leader was replaced while it did not answer: ask the new one.
            _ = leader_replaced(&self.raft, leader) => return Err(Retry::Election),
        };
        let index = match answer {
            Ok(PeerResponse::ReadBarrier(Ok(index))) => index,
            // A barrier asks and changes nothing: a connection that broke before its answer
            // came is asked again, like a leader not reached.
            Ok(PeerResponse::ReadBarrier(Err(ProposeError::NotLeader)))
            | Err(CallError::Unreachable(_))
            | Err(CallError::Broken(_)) => return Err(Retry::Election),
            Ok(PeerResponse::ReadBarrier(Err(e))) => return Err(Retry::Failed(e)),
            Ok(_) => {
                return Err(Retry::Failed(ProposeError::Raft(
                    "the leader answered another request".into(),
                )))
            }
            Err(CallError::TimedOut) => {
                return Err(Retry::Failed(ProposeError::Raft(format!(
                    "the leader at {addr} did not confirm the read in time"
                ))))
            }
        };
        self.raft
            .wait(Some(BARRIER_TIMEOUT))
            .applied_index_at_least(Some(index), "strong read")
            .await
            .map(|_| ())
            .map_err(|e| {
                Retry::Failed(ProposeError::Raft(format!(
                    "catching up for a strong read: {e}"
                )))
            })
    }
}

/// Why one attempt at the barrier failed: no leader to ask (yet), or for good.
enum Retry {
    Election,
    Failed(ProposeError),
}

/// How long a strong read waits for a leader to appear.
const ELECTION_WAIT: Duration = Duration::from_secs(5);

/// The leader's side of strong reads: `ensure_linearizable` confirms with a quorum that this
/// node still leads and waits until it has applied everything committed before; a follower
/// then applies up to the same index. One confirmation serves every read that arrived
/// before it started: reads that come while one is under way wait for the next, which
/// starts as soon as it ends (a confirmation begun before a read arrived might miss a
/// write acknowledged before the read began).
///
/// A confirmation also gives the leader a lease: the voters that confirmed it refuse to
/// elect another leader until `election_timeout_max` after they heard from it (openraft's
/// leader lease), and they heard from it after the confirmation began. So for `LEASE`
/// (half that) from the start of a confirmation no other leader can commit anything, and
/// a read needs no round of its own: this leader's executor answers every write only after
/// applying it, so a read here sees every write acknowledged before it; a follower applies
/// up to this leader's `answered_through` index, which holds every such write (openraft's
/// applied index does not: a follower reading up to it missed acknowledged writes, as the
/// linearizability check showed).
#[derive(Clone, Default)]
pub(crate) struct ReadIndex {
    pending: Arc<Mutex<Pending>>,
}

#[derive(Default)]
struct Pending {
    confirming: bool,
    waiting: Vec<oneshot::Sender<Result<u64, ProposeError>>>,
    /// Until when, and in which term, this node's leadership stands confirmed.
    lease: Option<(Instant, u64)>,
}

/// How long a confirmation lets the leader read without another: half the followers'
/// leader lease (`election_timeout_max`, 600 ms), the rest a margin for scheduling delays.
pub(crate) const LEASE: Duration = Duration::from_millis(300);

/// An index at or past every entry whose commands this node's executor has answered: its
/// last log index. Not openraft's applied index — its metrics learn of an entry's apply
/// after the executor has answered the entry's commands, so a node applying only up to it
/// could miss a write already acknowledged. What a follower applies up to before it reads
/// (a leased strong read) or answers a forwarded write (to read its own writes).
pub(crate) fn answered_through(
    metrics: &openraft::RaftMetrics<NodeId, openraft::BasicNode>,
) -> u64 {
    metrics.last_log_index.unwrap_or(0)
}

/// `answered_through` this node, if it leads in `term`.
fn last_index_while_leading(raft: &Raft, term: u64) -> Option<u64> {
    let metrics = raft.metrics();
    let metrics = metrics.borrow();
    (metrics.current_term == term && metrics.current_leader == Some(metrics.id))
        .then(|| answered_through(&metrics))
}

impl ReadIndex {
    /// The index to apply up to before reading: this leader's last log index while its
    /// lease lasts, else the commit index once a quorum has confirmed this leader.
    pub async fn confirm(&self, raft: &Raft) -> Result<u64, ProposeError> {
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((until, term)) = pending.lease {
                if Instant::now() < until {
                    if let Some(index) = last_index_while_leading(raft, term) {
                        return Ok(index);
                    }
                }
            }
            pending.waiting.push(tx);
            !std::mem::replace(&mut pending.confirming, true)
        };
        if start {
            tokio::spawn(confirm_for_the_waiting(self.pending.clone(), raft.clone()));
        }
        rx.await.unwrap_or(Err(ProposeError::Stopped))
    }
}

async fn confirm_for_the_waiting(pending: Arc<Mutex<Pending>>, raft: Raft) {
    loop {
        let waiting = {
            let mut pending = pending.lock().unwrap_or_else(|e| e.into_inner());
            if pending.waiting.is_empty() {
                pending.confirming = false;
                return;
            }
            std::mem::take(&mut pending.waiting)
        };
        let began = Instant::now();
        let term = raft.metrics().borrow().current_term;
        let result = confirm_once(&raft).await;
        if result.is_ok() && last_index_while_leading(&raft, term).is_some() {
            pending.lock().unwrap_or_else(|e| e.into_inner()).lease = Some((began + LEASE, term));
        }
        for w in waiting {
            let _ = w.send(result.clone());
        }
    }
}

async fn confirm_once(raft: &Raft) -> Result<u64, ProposeError> {
    // Without a quorum the confirmation never comes.
    let confirmed = tokio::time::timeout(READ_BARRIER_TIMEOUT, raft.ensure_linearizable()).await;
    match confirmed {
        Ok(Ok(read_log_id)) => Ok(read_log_id.map_or(0, |id| id.index)),
        Ok(Err(e)) if e.forward_to_leader().is_some() => Err(ProposeError::NotLeader),
        Ok(Err(e)) => Err(ProposeError::Raft(e.to_string())),
        Err(_) => Err(ProposeError::Raft(
            "a majority of the voters did not confirm the leader in time".into(),
        )),
    }
}

/// How long a leader waits for a quorum to confirm strong reads.
const READ_BARRIER_TIMEOUT: Duration = Duration::from_secs(5);
