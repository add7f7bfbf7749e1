//! Membership changes while the cluster serves: `CALL hotledger.add_node(id, raft_addr)`
//! and `CALL hotledger.remove_node(id)`, run by the leader through openraft's joint
//! consensus (a follower forwards the call).
//!
//! Adding a node makes it a learner first — it receives the log, or a snapshot when it is
//! further behind than the log kept — and a voter once its log is within
//! `CAUGHT_UP_ENTRIES` of the leader's, so a new voter never holds up commits while it
//! catches up. The node must be running (`hotledger serve --node-id N --raft-listen ADDR
//! --join`) for that; a call that times out leaves it a learner, and calling again finishes
//! the job. Removing a voter commits the configuration without it; a removed leader hands
//! over to a new one once that is committed. Transferring leadership is
//! `transfer_leader.rs`.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, ChangeMembers};
use serde::{Deserialize, Serialize};

use crate::network::{leader, matched_index, PeerRequest, PeerResponse};
use crate::peer_link::PeerLinks;
use crate::proposer::Proposer;
use crate::types::{NodeId, Raft};

/// A learner this close to the leader's last log index is promoted to voter.
const CAUGHT_UP_ENTRIES: u64 = 100;

/// How long the leader waits for a learner to say how far it has applied.
const PROGRESS_WAIT: Duration = Duration::from_secs(1);

/// How long a call waits for a leader to exist or be reached.
const LEADER_WAIT: Duration = Duration::from_secs(5);

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub enum MembershipChange {
    AddNode {
        id: NodeId,
        raft_addr: String,
    },
    RemoveNode {
        id: NodeId,
    },
    /// Hand leadership to this voter (`transfer_leader`).
    TransferLeader {
        id: NodeId,
    },
}

#[derive(Clone, Debug, Serialize, Deserialize, thiserror::Error, PartialEq, Eq)]
pub enum MembershipError {
    /// The call asks for something that cannot be (an unknown node, the last voter).
    #[error("{0}")]
    Invalid(String),
    /// No leader could be reached: nothing changed.
    #[error("{0}")]
    NoLeader(String),
    /// The change did not finish in time; what is done stays done (see the message).
    #[error("{0}")]
    TimedOut(String),
    #[error("the membership change failed: {0}")]
    Failed(String),
}

/// A node's way to change the cluster's membership, from any member.
#[derive(Clone)]
pub struct Membership {
    raft: Raft,
    node_id: NodeId,
    proposer: Proposer,
    links: PeerLinks,
}

impl Membership {
    pub(crate) fn new(
        raft: Raft,
        node_id: NodeId,
        proposer: Proposer,
        links: PeerLinks,
    ) -> Membership {
        Membership {
            raft,
            node_id,
            proposer,
            links,
        }
    }

    /// Makes `change` on the leader, waiting at most `limit` (adding a node waits for it
    /// to catch up). Answers what was done.
    pub async fn change(
        &self,
        change: MembershipChange,
        limit: Duration,
    ) -> Result<String, MembershipError> {
        let deadline = Instant::now() + LEADER_WAIT;
        loop {
            match leader(&self.raft, &self.links) {
                Some((id, _)) if id == self.node_id => {
                    return change_here(&self.raft, &self.proposer, &self.links, change, limit)
                        .await
                }
                Some((id, Some(addr))) => {
                    return forward(&self.links, id, &addr, change, limit).await
                }
                _ if Instant::now() >= deadline => {
                    return Err(MembershipError::NoLeader(
                        "the cluster has no leader: a majority of its voters must be up".into(),
                    ))
                }
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }
}

async fn forward(
    links: &PeerLinks,
    leader: NodeId,
    addr: &str,
    change: MembershipChange,
    limit: Duration,
) -> Result<String, MembershipError> {
    let request = PeerRequest::ChangeMembership(change, limit);
    match links.call(addr, &request, limit + LEADER_WAIT).await {
        Ok(PeerResponse::ChangeMembership(answer)) => answer,
        Ok(_) => Err(MembershipError::Failed(format!(
            "the leader (node {leader}) answered another request"
        ))),
        Err(_) => Err(MembershipError::NoLeader(format!(
            "the leader (node {leader}) could not be reached, or did not answer in time: check hotledger.cluster before calling again"
        ))),
    }
}

/// Makes `change` on this node, which should lead (the peer server calls it for a
/// follower's forwarded call).
pub(crate) async fn change_here(
    raft: &Raft,
    proposer: &Proposer,
    links: &PeerLinks,
    change: MembershipChange,
    limit: Duration,
) -> Result<String, MembershipError> {
    let deadline = Instant::now() + limit;
    let membership = raft
        .metrics()
        .borrow()
        .membership_config
        .membership()
        .clone();
    let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
    let learners: BTreeSet<NodeId> = membership.learner_ids().collect();
    match change {
        MembershipChange::AddNode { id, raft_addr } => {
            if let Some(node) = membership.get_node(&id) {
                if node.addr != raft_addr {
                    return Err(MembershipError::Invalid(format!(
                        "node {id} is already a member, at {}: remove it first to move it",
                        node.addr
                    )));
                }
                if voters.contains(&id) {
                    return Ok(format!("node {id} is already a voter"));
                }
            } else {
                let node = BasicNode {
                    addr: raft_addr.clone(),
                };
                raft.add_learner(id, node, false)
                    .await
                    .map_err(write_error)?;
            }
            wait_caught_up(raft, links, id, &raft_addr, deadline).await?;
            raft.change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([id])), false)
                .await
                .map_err(write_error)?;
            Ok(format!("node {id} is a voter"))
        }
        MembershipChange::RemoveNode { id } => {
            let changes = if voters.contains(&id) {
                if voters.len() == 1 {
                    return Err(MembershipError::Invalid(format!(
                        "node {id} is the cluster's last voter"
                    )));
                }
                ChangeMembers::RemoveVoters(BTreeSet::from([id]))
            } else if learners.contains(&id) {
                ChangeMembers::RemoveNodes(BTreeSet::from([id]))
            } else {
                return Err(MembershipError::Invalid(format!(
                    "node {id} is not a member of the cluster"
                )));
            };
            raft.change_membership(changes, false)
                .await
                .map_err(write_error)?;
            Ok(format!("node {id} is no longer a member; stop its process"))
        }
        MembershipChange::TransferLeader { id } => {
            crate::transfer_leader::transfer_here(raft, proposer, links, id).await
        }
    }
}

/// Waits until learner `id`'s log is within `CAUGHT_UP_ENTRIES` of the leader's and it
/// has applied what the leader had when the wait began — a learner that cannot apply the
/// log (another page size, an IO error) never votes.
async fn wait_caught_up(
    raft: &Raft,
    links: &PeerLinks,
    id: NodeId,
    raft_addr: &str,
    deadline: Instant,
) -> Result<(), MembershipError> {
    let target = raft.metrics().borrow().last_log_index.unwrap_or(0);
    loop {
        let (matched, last) = {
            let metrics = raft.metrics();
            let metrics = metrics.borrow();
            (
                matched_index(&metrics, id),
                metrics.last_log_index.unwrap_or(0),
            )
        };
        if matched.is_some_and(|m| m + CAUGHT_UP_ENTRIES >= last) {
            match links
                .call(raft_addr, &PeerRequest::Progress, PROGRESS_WAIT)
                .await
            {
                Ok(PeerResponse::Progress(Ok(applied))) if applied >= target => return Ok(()),
                Ok(PeerResponse::Progress(Err(why))) => {
                    return Err(MembershipError::Failed(format!(
                        "node {id} stopped applying the log, so it does not become a voter: {why}"
                    )))
                }
                _ => {}
            }
        }
        if Instant::now() >= deadline {
            return Err(MembershipError::TimedOut(format!(
                "node {id} is a learner but has not caught up (its log is at {}, the leader's at {last}): is it running (hotledger serve --node-id {id} --raft-listen {raft_addr} --join)? Call add_node again to make it a voter",
                matched.map_or("nothing".to_string(), |m| m.to_string())
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn write_error(e: RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>) -> MembershipError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(_)) => MembershipError::NoLeader(
            "this node stopped leading during the change: check hotledger.cluster and call again"
                .into(),
        ),
        other => MembershipError::Failed(other.to_string()),
    }
}
