//! The network between replicas: openraft's RPCs (append entries, vote, install snapshot),
//! the forwarding of proposals and read barriers to the leader, and the membership calls,
//! as `PeerRequest`s answered by `PeerResponse`s over one multiplexed connection per peer
//! (`peer_link`). The server side answers each request of a connection as soon as it is
//! done, in any order.

use std::sync::Arc;
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, Timeout, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, RPCTypes};
use serde::{Deserialize, Serialize};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use crate::byte_strings;
use crate::membership::{change_here, MembershipChange, MembershipError};
use crate::peer_link::{encode_frame, read_frame, write_frames, PeerLinks};
use crate::proposer::{ProposeError, Proposer};
use crate::read_barrier::{answered_through, ReadIndex};
use crate::transfer_leader::pause_elections;
use crate::types::{NodeId, Raft, TypeConfig};

/// Entries per append RPC (openraft's `max_payload_entries`).
pub(crate) const MAX_PAYLOAD_ENTRIES: u64 = 64;

#[derive(Serialize, Deserialize)]
pub(crate) enum PeerRequest {
    Append(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    Snapshot(#[serde(with = "byte_strings::snapshot_chunk")] InstallSnapshotRequest<TypeConfig>),
    /// Commands a follower's sessions proposed, for the leader's proposer.
    Propose(#[serde(with = "byte_strings")] Vec<Vec<u8>>),
    /// A follower's strong read: the leader confirms it still leads and says up to which
    /// index the follower must apply before it reads.
    ReadBarrier,
    /// Where the node takes clients (for `hotledger.cluster`).
    Describe,
    /// A follower's `hotledger.add_node` or `remove_node`, with how long it may take.
    ChangeMembership(MembershipChange, Duration),
    /// How far the node has applied the log, or why it stopped applying (the leader asks
    /// a learner before making it a voter).
    Progress,
    /// A leadership transfer (`transfer_leader`): hold this voter's campaigns back for a
    /// while, let them go again, or campaign now (the target).
    PauseElections(Duration),
    ResumeElections,
    Campaign,
    /// Where the node takes clients and how far its log goes (for `hotledger.cluster` on a
    /// node that does not lead, which knows no other member's positions itself).
    Report,
}

/// What the leader answers a forwarded proposal: each command's result, and an index at or
/// past the entries of every command answered (`answered_through`; the follower applies
/// that far before it answers its sessions, so they read their own writes).
#[derive(Serialize, Deserialize)]
pub(crate) struct Proposed {
    pub results: Vec<Result<Vec<u8>, ProposeError>>,
    pub apply_through: u64,
}

#[derive(Serialize, Deserialize)]
pub(crate) enum PeerResponse {
    Append(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    Snapshot(Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>),
    Propose(Proposed),
    ReadBarrier(Result<u64, ProposeError>),
    Describe(String),
    ChangeMembership(Result<String, MembershipError>),
    Progress(Result<u64, String>),
    Done,
    Report(crate::status::MemberReport),
}

/// Why a call to a peer failed: it could not be reached (no connection), or the exchange
/// broke or took too long.
pub(crate) enum CallError {
    Unreachable(std::io::Error),
    Broken(std::io::Error),
    TimedOut,
}

/// Makes openraft's clients, over the node's links, to the address it reaches each member
/// at (`PeerLinks::addr_of`).
#[derive(Clone)]
pub struct TcpNetwork {
    pub(crate) links: PeerLinks,
}

pub struct PeerClient {
    target: NodeId,
    addr: String,
    links: PeerLinks,
}

impl RaftNetworkFactory<TypeConfig> for TcpNetwork {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerClient {
        PeerClient {
            target,
            addr: self.links.addr_of(target, node),
            links: self.links.clone(),
        }
    }
}

type RpcResult<T, E> = Result<T, RPCError<NodeId, BasicNode, E>>;

fn rpc_error<E: std::error::Error>(
    error: CallError,
    target: NodeId,
    kind: RPCTypes,
    option: &RPCOption,
) -> RPCError<NodeId, BasicNode, E> {
    match error {
        CallError::Unreachable(e) => RPCError::Unreachable(Unreachable::new(&e)),
        CallError::Broken(e) => RPCError::Network(NetworkError::new(&e)),
        CallError::TimedOut => RPCError::Timeout(Timeout {
            action: kind,
            id: 0,
            target,
            timeout: option.hard_ttl(),
        }),
    }
}

impl PeerClient {
    /// One of openraft's RPCs: the request sent, and the answer `pick` takes from the
    /// response (None: the peer answered another request).
    async fn raft_rpc<T, E: std::error::Error>(
        &mut self,
        request: PeerRequest,
        kind: RPCTypes,
        option: &RPCOption,
        pick: impl FnOnce(PeerResponse) -> Option<Result<T, E>>,
    ) -> RpcResult<T, E> {
        match self
            .links
            .call(&self.addr, &request, option.hard_ttl())
            .await
        {
            Ok(response) => match pick(response) {
                Some(answer) => answer.map_err(|e| RPCError::RemoteError(remote(self.target, e))),
                None => Err(RPCError::Network(NetworkError::new(
                    &std::io::Error::other("the peer answered a different request"),
                ))),
            },
            Err(e) => Err(rpc_error(e, self.target, kind, option)),
        }
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>, RaftError<NodeId>> {
        let request = PeerRequest::Append(rpc);
        self.raft_rpc(request, RPCTypes::AppendEntries, &option, |r| match r {
            PeerResponse::Append(answer) => Some(answer),
            _ => None,
        })
        .await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>> {
        let request = PeerRequest::Snapshot(rpc);
        self.raft_rpc(request, RPCTypes::InstallSnapshot, &option, |r| match r {
            PeerResponse::Snapshot(answer) => Some(answer),
            _ => None,
        })
        .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>, RaftError<NodeId>> {
        let request = PeerRequest::Vote(rpc);
        self.raft_rpc(request, RPCTypes::Vote, &option, |r| match r {
            PeerResponse::Vote(answer) => Some(answer),
            _ => None,
        })
        .await
    }
}

fn remote<E: std::error::Error>(
    target: NodeId,
    error: E,
) -> openraft::error::RemoteError<NodeId, BasicNode, E> {
    openraft::error::RemoteError::new(target, error)
}

/// What answering a peer needs.
#[derive(Clone)]
pub(crate) struct PeerContext {
    pub raft: Raft,
    pub proposer: Proposer,
    pub read_index: ReadIndex,
    /// Where this node takes clients (`Describe`).
    pub pg_addr: Arc<String>,
    pub links: PeerLinks,
}

/// Answers peers on `listener`: openraft's RPCs to this node's Raft, proposals and read
/// barriers forwarded by followers when this node leads, and membership calls.
pub(crate) async fn serve_peers(listener: TcpListener, context: PeerContext) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                // Out of file descriptors, say: wait rather than spin.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(serve_peer(stream, context.clone()));
    }
}

/// Reads a connection's requests and answers each as soon as it is done.
async fn serve_peer(stream: TcpStream, context: PeerContext) {
    let (mut reader, writer) = stream.into_split();
    let (frames, queued) = mpsc::unbounded_channel();
    tokio::spawn(write_frames(writer, queued));
    while let Ok((id, request)) = read_frame::<PeerRequest>(&mut reader).await {
        let (context, frames) = (context.clone(), frames.clone());
        tokio::spawn(async move {
            let response = context.answer(request).await;
            if let Ok(frame) = encode_frame(id, &response) {
                let _ = frames.send(frame);
            }
        });
    }
}

impl PeerContext {
    async fn answer(&self, request: PeerRequest) -> PeerResponse {
        let raft = &self.raft;
        match request {
            PeerRequest::Append(rpc) => PeerResponse::Append(raft.append_entries(rpc).await),
            PeerRequest::Vote(rpc) => PeerResponse::Vote(raft.vote(rpc).await),
            PeerRequest::Snapshot(rpc) => PeerResponse::Snapshot(raft.install_snapshot(rpc).await),
            PeerRequest::Propose(commands) => {
                PeerResponse::Propose(propose_here(raft, &self.proposer, commands).await)
            }
            PeerRequest::ReadBarrier => {
                PeerResponse::ReadBarrier(self.read_index.confirm(raft).await)
            }
            PeerRequest::Describe => PeerResponse::Describe(self.pg_addr.to_string()),
            PeerRequest::Report => {
                PeerResponse::Report(crate::status::MemberReport::of(raft, &self.pg_addr))
            }
            PeerRequest::ChangeMembership(change, limit) => PeerResponse::ChangeMembership(
                change_here(raft, &self.proposer, &self.links, change, limit).await,
            ),
            PeerRequest::Progress => PeerResponse::Progress(progress(raft)),
            PeerRequest::PauseElections(pause) => {
                pause_elections(raft, pause);
                PeerResponse::Done
            }
            PeerRequest::ResumeElections => {
                raft.runtime_config().elect(true);
                PeerResponse::Done
            }
            PeerRequest::Campaign => {
                let _ = raft.trigger().elect().await;
                PeerResponse::Done
            }
        }
    }
}

async fn propose_here(raft: &Raft, proposer: &Proposer, commands: Vec<Vec<u8>>) -> Proposed {
    // Queued together, so they share an entry; then awaited in order.
    let queued: Vec<_> = commands
        .into_iter()
        .map(|c| proposer.enqueue_from_peer(c))
        .collect();
    let mut results = Vec::with_capacity(queued.len());
    for q in queued {
        results.push(match q {
            Ok(rx) => rx.await.unwrap_or(Err(ProposeError::Stopped)),
            Err(e) => Err(e),
        });
    }
    let apply_through = answered_through(&raft.metrics().borrow());
    Proposed {
        results,
        apply_through,
    }
}

/// How far this node has applied the log, or why Raft stopped on it.
fn progress(raft: &Raft) -> Result<u64, String> {
    let metrics = raft.metrics();
    let metrics = metrics.borrow();
    match &metrics.running_state {
        Err(fatal) => Err(fatal.to_string()),
        Ok(()) => Ok(metrics.last_applied.map_or(0, |id| id.index)),
    }
}

/// Who leads, as this node knows it, and the address this node reaches it at.
pub(crate) fn leader(raft: &Raft, links: &PeerLinks) -> Option<(NodeId, Option<String>)> {
    let metrics = raft.metrics();
    let metrics = metrics.borrow();
    let leader = metrics.current_leader?;
    let addr = metrics
        .membership_config
        .membership()
        .get_node(&leader)
        .map(|n| links.addr_of(leader, n));
    Some((leader, addr))
}

/// On the leader: the last index of its log that follower `id`'s log matches, if known.
pub(crate) fn matched_index(
    metrics: &openraft::RaftMetrics<NodeId, BasicNode>,
    id: NodeId,
) -> Option<u64> {
    let replication = metrics.replication.as_ref()?;
    replication
        .get(&id)
        .copied()
        .flatten()
        .map(|log_id| log_id.index)
}

/// Resolves once this node no longer takes `leader` for the leader.
pub(crate) async fn leader_replaced(raft: &Raft, leader: NodeId) {
    let _ = raft
        .wait(None)
        .metrics(|m| m.current_leader != Some(leader), "a leader change")
        .await;
}
