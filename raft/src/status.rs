//! What this node knows of its replication group, for `hotledger.cluster`: each member's
//! role and log positions from openraft's metrics (a leader knows how far each follower's
//! log matches its own), and each member's client address, term, log and apply positions
//! and reachability from asking it (`PeerRequest::Report`, all at once, with a short
//! timeout) — so a follower's view shows every member's positions too, and each member's
//! lag behind the leader's log as the leader reported it.

use std::time::Duration;

use openraft::ServerState;
use serde::{Deserialize, Serialize};

use crate::network::{PeerRequest, PeerResponse};
use crate::peer_link::PeerLinks;
use crate::types::{NodeId, Raft};

/// How long a member has to say where it takes clients before it counts as unreachable.
const DESCRIBE_TIMEOUT: Duration = Duration::from_millis(500);

/// One member, as this node sees it; None where it cannot know.
#[derive(Clone, Debug, Default)]
pub struct MemberStatus {
    pub node_id: NodeId,
    pub role: &'static str,
    pub voter: bool,
    pub pg_addr: Option<String>,
    pub raft_addr: String,
    pub term: Option<u64>,
    pub last_log_index: Option<u64>,
    pub committed_index: Option<u64>,
    pub applied_index: Option<u64>,
    pub lag_entries: Option<u64>,
    pub reachable: bool,
    pub is_self: bool,
}

/// What a member says of itself when asked (`PeerRequest::Report`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct MemberReport {
    pub pg_addr: String,
    pub term: u64,
    pub last_log_index: Option<u64>,
    pub applied_index: Option<u64>,
}

impl MemberReport {
    pub(crate) fn of(raft: &Raft, pg_addr: &str) -> MemberReport {
        let metrics = raft.metrics();
        let metrics = metrics.borrow();
        MemberReport {
            pg_addr: pg_addr.to_string(),
            term: metrics.current_term,
            last_log_index: metrics.last_log_index,
            applied_index: metrics.last_applied.map(|l| l.index),
        }
    }
}

#[derive(Clone)]
pub struct ClusterStatus {
    raft: Raft,
    node_id: NodeId,
    pg_addr: String,
    peers: PeerLinks,
}

fn role(state: ServerState) -> &'static str {
    match state {
        ServerState::Leader => "leader",
        ServerState::Candidate => "candidate",
        ServerState::Learner => "learner",
        ServerState::Follower | ServerState::Shutdown => "follower",
    }
}

impl ClusterStatus {
    pub(crate) fn new(
        raft: Raft,
        node_id: NodeId,
        pg_addr: String,
        peers: PeerLinks,
    ) -> ClusterStatus {
        ClusterStatus {
            raft,
            node_id,
            pg_addr,
            peers,
        }
    }

    pub fn node_id(&self) -> NodeId {
        self.node_id
    }

    /// This node's role now ('leader', 'follower', 'candidate' or 'learner'), its term, and
    /// whether its Raft still runs.
    pub fn here(&self) -> (&'static str, u64, bool) {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        (
            role(metrics.state),
            metrics.current_term,
            metrics.running_state.is_ok(),
        )
    }

    /// Every member of the membership in force, in node id order.
    pub async fn members(&self) -> Vec<MemberStatus> {
        let metrics = self.raft.metrics().borrow().clone();
        let membership = metrics.membership_config.membership().clone();
        let voters: Vec<NodeId> = membership.voter_ids().collect();
        let last = metrics.last_log_index;
        // On the leader: how far each member's log matches (its own: all of it).
        let matched = |id: NodeId| -> Option<u64> {
            if id == self.node_id {
                return last;
            }
            let replication = metrics.replication.as_ref()?;
            replication.get(&id).map(|m| m.map_or(0, |l| l.index))
        };
        let leads = metrics.state == ServerState::Leader;
        let committed = if leads {
            let mut indexes: Vec<u64> = voters.iter().map(|&v| matched(v).unwrap_or(0)).collect();
            indexes.sort_unstable_by(|a, b| b.cmp(a));
            indexes.get(voters.len() / 2).copied()
        } else {
            None
        };
        let mut reports = self
            .reports(membership.nodes().filter(|(&id, _)| id != self.node_id))
            .await;
        let mut members = Vec::new();
        for (&id, node) in membership.nodes() {
            let is_self = id == self.node_id;
            let report = reports.remove(&id);
            let voter = voters.contains(&id);
            let role = if is_self {
                role(metrics.state)
            } else if metrics.current_leader == Some(id) {
                "leader"
            } else if voter {
                "follower"
            } else {
                "learner"
            };
            // The leader's own view of a member's log is how far it matches; elsewhere, what
            // the member says.
            let log = if is_self || leads {
                matched(id)
            } else {
                report.as_ref().and_then(|r| r.last_log_index)
            };
            members.push(MemberStatus {
                node_id: id,
                role,
                voter,
                pg_addr: if is_self {
                    Some(self.pg_addr.clone())
                } else {
                    report.as_ref().map(|r| r.pg_addr.clone())
                },
                raft_addr: node.addr.clone(),
                term: if is_self {
                    Some(metrics.current_term)
                } else {
                    report.as_ref().map(|r| r.term)
                },
                last_log_index: log,
                committed_index: committed.filter(|_| is_self),
                applied_index: if is_self {
                    metrics.last_applied.map(|l| l.index)
                } else {
                    report.as_ref().and_then(|r| r.applied_index)
                },
                lag_entries: None,
                reachable: is_self || report.is_some(),
                is_self,
            });
        }
        // Lag: behind this node's log on the leader; elsewhere behind the leader's log as the
        // leader reported it (None when the leader did not answer).
        let leader_log = if leads {
            last
        } else {
            members
                .iter()
                .find(|m| m.role == "leader")
                .and_then(|m| m.last_log_index)
        };
        if let Some(leader_log) = leader_log {
            for m in &mut members {
                m.lag_entries = m.last_log_index.map(|l| leader_log.saturating_sub(l));
            }
        }
        members
    }

    /// What each of `members` says of itself, asked all at once; those that did not answer
    /// in time are missing.
    async fn reports<'a>(
        &self,
        members: impl Iterator<Item = (&'a NodeId, &'a openraft::BasicNode)>,
    ) -> std::collections::HashMap<NodeId, MemberReport> {
        let mut asking = tokio::task::JoinSet::new();
        for (&id, node) in members {
            let (peers, addr) = (self.peers.clone(), self.peers.addr_of(id, node));
            asking.spawn(async move {
                let answer = peers
                    .call(&addr, &PeerRequest::Report, DESCRIBE_TIMEOUT)
                    .await;
                (id, answer)
            });
        }
        let mut reports = std::collections::HashMap::new();
        while let Some(joined) = asking.join_next().await {
            if let Ok((id, Ok(PeerResponse::Report(report)))) = joined {
                reports.insert(id, report);
            }
        }
        reports
    }
}
