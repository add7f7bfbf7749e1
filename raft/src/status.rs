//! What this node knows of its replication group, for `hotledger.cluster`: each member's
//! role and log positions from openraft's metrics (a leader knows how far each follower's
//! log matches its own; a follower knows only itself), and each member's client address
//! and reachability from asking it (`PeerRequest::Describe`, with a short timeout).

use std::time::Duration;

use openraft::ServerState;

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
        let mut members = Vec::new();
        for (&id, node) in membership.nodes() {
            let is_self = id == self.node_id;
            let voter = voters.contains(&id);
            let (role, pg_addr, reachable) = if is_self {
                (role(metrics.state), Some(self.pg_addr.clone()), true)
            } else {
                let role = if metrics.current_leader == Some(id) {
                    "leader"
                } else if voter {
                    "follower"
                } else {
                    "learner"
                };
                let pg_addr = self.describe(&node.addr).await;
                let reachable = pg_addr.is_some();
                (role, pg_addr, reachable)
            };
            let log = if is_self || leads { matched(id) } else { None };
            members.push(MemberStatus {
                node_id: id,
                role,
                voter,
                pg_addr,
                raft_addr: node.addr.clone(),
                term: is_self.then_some(metrics.current_term),
                last_log_index: log,
                committed_index: committed.filter(|_| is_self),
                applied_index: if is_self {
                    metrics.last_applied.map(|l| l.index)
                } else {
                    None
                },
                lag_entries: if leads {
                    log.map(|l| last.unwrap_or(0).saturating_sub(l))
                } else {
                    None
                },
                reachable,
                is_self,
            });
        }
        members
    }

    /// The member's client address, if it answers in time.
    async fn describe(&self, raft_addr: &str) -> Option<String> {
        match self
            .peers
            .call(raft_addr, &PeerRequest::Describe, DESCRIBE_TIMEOUT)
            .await
        {
            Ok(PeerResponse::Describe(pg_addr)) => Some(pg_addr),
            _ => None,
        }
    }
}
