//! Strong reads in a cluster: before a strong read, a node makes sure its state machine has
//! applied everything committed before the read began. On the leader that is openraft's
//! `ensure_linearizable` (a quorum confirms it still leads, and it applies up to the commit
//! index); a follower asks the leader for that index and applies up to it. Weak reads skip
//! the barrier and read whatever this node has applied. A single node is its own quorum and
//! applies every entry before answering its writer: its barrier does nothing.

use std::time::{Duration, Instant};

use crate::network::{read_barrier_here, CallError, LeaderConnections, PeerRequest, PeerResponse};
use crate::proposer::{leader_replaced, ProposeError};
use crate::types::{NodeId, Raft};

/// How long a strong read waits for the barrier.
const BARRIER_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone)]
pub struct ReadBarrier {
    raft: Raft,
    node_id: NodeId,
    cluster: bool,
    leaders: LeaderConnections,
}

impl ReadBarrier {
    pub(crate) fn new(raft: Raft, node_id: NodeId, cluster: bool) -> ReadBarrier {
        ReadBarrier {
            raft,
            node_id,
            cluster,
            leaders: LeaderConnections::default(),
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
        let (leader, addr) = {
            let metrics = self.raft.metrics();
            let metrics = metrics.borrow();
            let leader = metrics.current_leader.ok_or(Retry::Election)?;
            let addr = metrics
                .membership_config
                .membership()
                .get_node(&leader)
                .map(|n| n.addr.clone());
            (leader, addr)
        };
        if leader == self.node_id {
            return match read_barrier_here(&self.raft).await {
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
            Ok(PeerResponse::ReadBarrier(Err(ProposeError::NotLeader)))
            | Err(CallError::Unreachable(_)) => return Err(Retry::Election),
            Ok(PeerResponse::ReadBarrier(Err(e))) => return Err(Retry::Failed(e)),
            Ok(_) => {
                return Err(Retry::Failed(ProposeError::Raft(
                    "the leader answered another request".into(),
                )))
            }
            Err(_) => {
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
