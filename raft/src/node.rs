//! Starting a replica: open the log, start openraft over it and the executor, listen for
//! peers, initialise the membership on first start (one member, or the voters given), wait
//! for a leader, and, on the leader, until every logged entry is applied again.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ledger::{ExecutorHandle, Request};
use openraft::{BasicNode, Config, LogId, ServerState, SnapshotPolicy};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::log_store::{LogStats, RaftLog};
use crate::network::{serve_peers, PeerPool, TcpNetwork, MAX_PAYLOAD_ENTRIES};
use crate::proposer::Proposer;
use crate::read_barrier::{ReadBarrier, ReadIndex};
use crate::state_machine::StateMachine;
use crate::status::ClusterStatus;
use crate::types::{NodeId, Raft};

#[derive(Clone, Debug)]
pub struct NodeOptions {
    pub node_id: NodeId,
    pub log_dir: PathBuf,
    /// Where this node takes clients: recorded in a single node's one-member membership,
    /// and told to peers that ask (`hotledger.cluster`).
    pub address: String,
    /// The cluster's voters and the addresses they listen for peers on, this node's
    /// included; empty for a single node (no peer listener, no network).
    pub peers: BTreeMap<NodeId, String>,
    /// Where this node listens for peers (required with `peers`).
    pub raft_listen: Option<SocketAddr>,
    /// File IO for the log. Its appends run on a dedicated thread, where a blocking
    /// fdatasync costs no extra wake-up; io_uring hands the fsync to a kernel worker.
    pub log_io: kv::IoMode,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen for peers on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("--peers must name this node ({0}), with --raft-listen")]
    NotAPeer(NodeId),
    #[error("cannot open the log in {dir}: {source}")]
    Log { dir: PathBuf, source: kv::KvError },
    #[error("cannot start Raft: {0}")]
    Raft(String),
}

pub struct Node {
    pub raft: Raft,
    pub proposer: Proposer,
    pub log_stats: Arc<LogStats>,
    pub node_id: NodeId,
    pub read_barrier: ReadBarrier,
    pub status: ClusterStatus,
}

/// Why a wait during start ended: the fatal error that stopped Raft, when one did (the
/// wait itself only says Raft is shutting down).
fn wait_failed(raft: &Raft, e: openraft::metrics::WaitError) -> StartError {
    match &raft.metrics().borrow().running_state {
        Err(fatal) => StartError::Raft(fatal.to_string()),
        Ok(()) => StartError::Raft(e.to_string()),
    }
}

impl Node {
    /// Resolves when Raft on this node has stopped for good (a fatal storage error: the
    /// executor stopped applying, the log could not be written), with why. A node in that
    /// state neither votes nor takes entries, and must not serve clients either.
    pub async fn stopped(&self) -> String {
        let mut metrics = self.raft.metrics();
        loop {
            if let Err(fatal) = &metrics.borrow().running_state {
                return fatal.to_string();
            }
            if metrics.changed().await.is_err() {
                return "Raft stopped".into();
            }
        }
    }
}

/// Entries a cluster's log keeps behind its last snapshot (each entry a group of commands).
const CLUSTER_LOG_TAIL: u64 = 1_000_000;

/// Log entries applied between snapshots. A snapshot is the last durable checkpoint; after
/// one, the log before it is purged (keeping a tail for lagging followers).
const SNAPSHOT_EVERY_ENTRIES: u64 = 2_000;

pub async fn start(options: NodeOptions, executor: ExecutorHandle) -> Result<Node, StartError> {
    let cluster = !options.peers.is_empty();
    let listener = match (cluster, options.raft_listen) {
        (false, _) => None,
        (true, Some(addr)) if options.peers.contains_key(&options.node_id) => Some(
            TcpListener::bind(addr)
                .await
                .map_err(|source| StartError::Listen { addr, source })?,
        ),
        (true, _) => return Err(StartError::NotAPeer(options.node_id)),
    };
    let log =
        RaftLog::open(&options.log_dir, options.log_io).map_err(|source| StartError::Log {
            dir: options.log_dir.clone(),
            source,
        })?;
    let config = Config {
        cluster_name: "hotledger".into(),
        heartbeat_interval: 100,
        election_timeout_min: 300,
        election_timeout_max: 600,
        snapshot_policy: SnapshotPolicy::Never,
        // A follower catches up from the log only (snapshots carry no data yet): in a
        // cluster keep a long tail behind each snapshot, so one that was down a while
        // (minutes under load) still finds the entries it missed.
        max_in_snapshot_log_to_keep: if cluster { CLUSTER_LOG_TAIL } else { 1_000 },
        max_payload_entries: MAX_PAYLOAD_ENTRIES,
        ..Config::default()
    }
    .validate()
    .map_err(|e| StartError::Raft(e.to_string()))?;
    let log_stats = log.stats();
    let raft = Raft::new(
        options.node_id,
        Arc::new(config),
        TcpNetwork,
        log.clone(),
        StateMachine::new(executor.clone(), log.early_replies()),
    )
    .await
    .map_err(|e| StartError::Raft(e.to_string()))?;
    // One pool of connections to the other members for all our own requests.
    let peers = PeerPool::default();
    let proposer = Proposer::start(
        raft.clone(),
        log.early_replies(),
        options.node_id,
        cluster,
        peers.clone(),
    );
    let read_index = ReadIndex::default();
    if let Some(listener) = listener {
        tokio::spawn(serve_peers(
            listener,
            raft.clone(),
            proposer.clone(),
            read_index.clone(),
            options.address.clone(),
        ));
    }
    initialize(&raft, &options).await?;
    if cluster {
        wait_for_a_leader(&raft, options.peers.len()).await?;
    }
    let leads = raft.metrics().borrow().current_leader == Some(options.node_id);
    // A leader applies every entry in its log before clients may read (a follower serves
    // weak reads as it catches up, and strong reads wait for the leader's index).
    if leads || !cluster {
        let metrics = raft
            .wait(Some(Duration::from_secs(60)))
            .state(ServerState::Leader, "become leader")
            .await
            .map_err(|e| wait_failed(&raft, e))?;
        if let Some(last) = metrics.last_log_index {
            raft.wait(Some(Duration::from_secs(600)))
                .applied_index_at_least(Some(last), "replay the log")
                .await
                .map_err(|e| wait_failed(&raft, e))?;
        }
    }
    tokio::spawn(trigger_snapshots(raft.clone(), executor));
    Ok(Node {
        read_barrier: ReadBarrier::new(
            raft.clone(),
            options.node_id,
            cluster,
            read_index,
            peers.clone(),
        ),
        status: ClusterStatus::new(
            raft.clone(),
            options.node_id,
            options.address.clone(),
            peers,
        ),
        raft,
        proposer,
        log_stats,
        node_id: options.node_id,
    })
}

/// Makes a pristine node a member: of a one-member cluster, or of the voters in `peers`
/// (every node is given the same list, and openraft allows each to initialize with it).
async fn initialize(raft: &Raft, options: &NodeOptions) -> Result<(), StartError> {
    let initialized = raft
        .is_initialized()
        .await
        .map_err(|e| StartError::Raft(e.to_string()))?;
    if initialized {
        return Ok(());
    }
    let members: BTreeMap<NodeId, BasicNode> = if options.peers.is_empty() {
        BTreeMap::from([(
            options.node_id,
            BasicNode {
                addr: options.address.clone(),
            },
        )])
    } else {
        options
            .peers
            .iter()
            .map(|(id, addr)| (*id, BasicNode { addr: addr.clone() }))
            .collect()
    };
    match raft.initialize(members).await {
        Ok(()) => Ok(()),
        // Another voter's log reached this one first: already a member.
        Err(openraft::error::RaftError::APIError(
            openraft::error::InitializeError::NotAllowed(_),
        )) => Ok(()),
        Err(e) => Err(StartError::Raft(e.to_string())),
    }
}

/// Waits until the cluster has a leader: a majority of its voters must be up.
async fn wait_for_a_leader(raft: &Raft, voters: usize) -> Result<(), StartError> {
    loop {
        let waited = raft
            .wait(Some(Duration::from_secs(10)))
            .metrics(|m| m.current_leader.is_some(), "a leader")
            .await;
        match waited {
            Ok(_) => return Ok(()),
            Err(openraft::metrics::WaitError::Timeout(..)) => eprintln!(
                "hotledger: waiting for a leader: {} of the {voters} voters must be up",
                voters / 2 + 1
            ),
            Err(e) => return Err(wait_failed(raft, e)),
        }
    }
}

/// Asks openraft for a snapshot whenever enough entries have become durable in a
/// checkpoint, which lets it purge the log behind it.
async fn trigger_snapshots(raft: Raft, executor: ExecutorHandle) {
    let mut last_triggered = 0;
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (tx, rx) = oneshot::channel();
        if !executor.send(Request::Meta {
            reply: Box::new(move |m| drop(tx.send(m))),
        }) {
            return;
        }
        let Ok((_, durable)) = rx.await else { return };
        let Some(bytes) = durable.applied_log_id else {
            continue;
        };
        let Ok(id) = bincode::deserialize::<LogId<NodeId>>(&bytes) else {
            continue;
        };
        if id.index >= last_triggered + SNAPSHOT_EVERY_ENTRIES {
            if raft.trigger().snapshot().await.is_err() {
                return;
            }
            last_triggered = id.index;
        }
    }
}
