//! The network between replicas: openraft's RPCs (append entries, vote, install snapshot)
//! and the forwarding of proposals and read barriers to the leader, over TCP. Each message
//! is a frame — a 4-byte little-endian length, then the bincode of a `PeerRequest` or
//! `PeerResponse` — and a connection carries one request at a time: openraft uses each
//! client for one RPC at a time, and forwarding keeps a small pool of connections.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
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
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::membership::{change_here, MembershipChange, MembershipError};
use crate::proposer::{ProposeError, Proposer};
use crate::read_barrier::ReadIndex;
use crate::transfer_leader::pause_elections;
use crate::types::{NodeId, Raft, TypeConfig};

/// The largest frame read: a log entry is at most 8 MiB (`proposer::BATCH_BYTES_MAX`) and
/// an append carries at most `MAX_PAYLOAD_ENTRIES`.
const FRAME_MAX: usize = 1 << 30;
/// Entries per append RPC (openraft's `max_payload_entries`).
pub(crate) const MAX_PAYLOAD_ENTRIES: u64 = 64;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

#[derive(Serialize, Deserialize)]
pub(crate) enum PeerRequest {
    Append(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    Snapshot(InstallSnapshotRequest<TypeConfig>),
    /// Commands a follower's sessions proposed, for the leader's proposer.
    Propose(Vec<Vec<u8>>),
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
}

/// What the leader answers a forwarded proposal: each command's result, and the index its
/// state machine had applied when the last was answered (the follower applies that far
/// before it answers its sessions, so they read their own writes).
#[derive(Serialize, Deserialize)]
pub(crate) struct Proposed {
    pub results: Vec<Result<Vec<u8>, ProposeError>>,
    pub applied_index: u64,
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
}

async fn write_frame<T: Serialize>(stream: &mut TcpStream, message: &T) -> std::io::Result<()> {
    let body = bincode::serialize(message).map_err(std::io::Error::other)?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
    frame.extend_from_slice(&body);
    stream.write_all(&frame).await
}

async fn read_frame<T: for<'de> Deserialize<'de>>(stream: &mut TcpStream) -> std::io::Result<T> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await?;
    let len = u32::from_le_bytes(len) as usize;
    if len > FRAME_MAX {
        return Err(std::io::Error::other(format!(
            "a peer frame of {len} bytes is over the {FRAME_MAX}-byte limit"
        )));
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await?;
    bincode::deserialize(&body).map_err(std::io::Error::other)
}

/// Why a call to a peer failed: it could not be reached (no connection), or the exchange
/// broke or took too long.
pub(crate) enum CallError {
    Unreachable(std::io::Error),
    Broken(std::io::Error),
    TimedOut,
}

/// One connection to a peer, opened on first use and again after a failure.
pub(crate) struct PeerConnection {
    addr: String,
    stream: Option<TcpStream>,
}

impl PeerConnection {
    pub fn new(addr: String) -> PeerConnection {
        PeerConnection { addr, stream: None }
    }

    pub async fn call(
        &mut self,
        request: &PeerRequest,
        limit: Duration,
    ) -> Result<PeerResponse, CallError> {
        if self.stream.as_ref().is_some_and(|s| !still_open(s)) {
            self.stream = None;
        }
        if self.stream.is_none() {
            let connect = TcpStream::connect(&self.addr);
            let stream = match tokio::time::timeout(CONNECT_TIMEOUT.min(limit), connect).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => return Err(CallError::Unreachable(e)),
                Err(_) => return Err(CallError::Unreachable(std::io::ErrorKind::TimedOut.into())),
            };
            let _ = stream.set_nodelay(true);
            self.stream = Some(stream);
        }
        let stream = self.stream.as_mut().expect("connected above");
        let exchange = async {
            write_frame(stream, request).await?;
            read_frame::<PeerResponse>(stream).await
        };
        let outcome = tokio::time::timeout(limit, exchange).await;
        match outcome {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(e)) => {
                self.stream = None;
                Err(CallError::Broken(e))
            }
            Err(_) => {
                // A late answer would be read as the next call's: start afresh.
                self.stream = None;
                Err(CallError::TimedOut)
            }
        }
    }
}

/// Whether a kept connection is still usable: between calls the peer sends nothing, so
/// anything readable is its close (a restarted peer) or a reset. Checked before sending, so
/// a request is not lost into a dead connection (which for a forwarded proposal would leave
/// its outcome unknown).
fn still_open(stream: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(stream.try_read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// Makes openraft's clients: one connection per client, to the address in the membership.
#[derive(Clone, Default)]
pub struct TcpNetwork;

pub struct PeerClient {
    target: NodeId,
    connection: PeerConnection,
}

impl RaftNetworkFactory<TypeConfig> for TcpNetwork {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerClient {
        PeerClient {
            target,
            connection: PeerConnection::new(node.addr.clone()),
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
        match self.connection.call(&request, option.hard_ttl()).await {
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

/// Connections to peers for our own requests (forwarded proposals and read barriers to the
/// leader, `Describe` to any member), by address, kept between calls.
#[derive(Clone, Default)]
pub(crate) struct PeerPool {
    idle: Arc<Mutex<HashMap<String, Vec<PeerConnection>>>>,
}

impl PeerPool {
    pub async fn call(
        &self,
        addr: &str,
        request: &PeerRequest,
        limit: Duration,
    ) -> Result<PeerResponse, CallError> {
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(addr)
            .and_then(Vec::pop);
        let mut connection = idle.unwrap_or_else(|| PeerConnection::new(addr.to_string()));
        let response = connection.call(request, limit).await?;
        self.idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(addr.to_string())
            .or_default()
            .push(connection);
        Ok(response)
    }
}

/// Answers peers on `listener`: openraft's RPCs to this node's Raft, and proposals and
/// read barriers forwarded by followers when this node leads.
pub async fn serve_peers(
    listener: TcpListener,
    raft: Raft,
    proposer: Proposer,
    read_index: ReadIndex,
    pg_addr: String,
) {
    let pg_addr = Arc::new(pg_addr);
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
        tokio::spawn(serve_peer(
            stream,
            raft.clone(),
            proposer.clone(),
            read_index.clone(),
            pg_addr.clone(),
        ));
    }
}

async fn serve_peer(
    mut stream: TcpStream,
    raft: Raft,
    proposer: Proposer,
    read_index: ReadIndex,
    pg_addr: Arc<String>,
) {
    while let Ok(request) = read_frame::<PeerRequest>(&mut stream).await {
        let response = match request {
            PeerRequest::Append(rpc) => PeerResponse::Append(raft.append_entries(rpc).await),
            PeerRequest::Vote(rpc) => PeerResponse::Vote(raft.vote(rpc).await),
            PeerRequest::Snapshot(rpc) => PeerResponse::Snapshot(raft.install_snapshot(rpc).await),
            PeerRequest::Propose(commands) => {
                PeerResponse::Propose(propose_here(&raft, &proposer, commands).await)
            }
            PeerRequest::ReadBarrier => PeerResponse::ReadBarrier(read_index.confirm(&raft).await),
            PeerRequest::Describe => PeerResponse::Describe(pg_addr.to_string()),
            PeerRequest::ChangeMembership(change, limit) => {
                PeerResponse::ChangeMembership(change_here(&raft, &proposer, change, limit).await)
            }
            PeerRequest::Progress => PeerResponse::Progress(progress(&raft)),
            PeerRequest::PauseElections(pause) => {
                pause_elections(&raft, pause);
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
        };
        if write_frame(&mut stream, &response).await.is_err() {
            return;
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
    let applied_index = raft
        .metrics()
        .borrow()
        .last_applied
        .map_or(0, |id| id.index);
    Proposed {
        results,
        applied_index,
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

/// Who leads, as this node knows it, and the address its peers reach it at.
pub(crate) fn leader(raft: &Raft) -> Option<(NodeId, Option<String>)> {
    let metrics = raft.metrics();
    let metrics = metrics.borrow();
    let leader = metrics.current_leader?;
    let addr = metrics
        .membership_config
        .membership()
        .get_node(&leader)
        .map(|n| n.addr.clone());
    Some((leader, addr))
}

/// Resolves once this node no longer takes `leader` for the leader.
pub(crate) async fn leader_replaced(raft: &Raft, leader: NodeId) {
    let _ = raft
        .wait(None)
        .metrics(|m| m.current_leader != Some(leader), "a leader change")
        .await;
}
