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

use crate::apply_ahead::ApplyAhead;
use crate::log_store::{LogStats, RaftLog};
use crate::membership::Membership;
use crate::network::{serve_peers, PeerContext, TcpNetwork, MAX_PAYLOAD_ENTRIES};
use crate::peer_link::PeerLinks;
use crate::proposer::Proposer;
use crate::read_barrier::{ReadBarrier, ReadIndex};
use crate::snapshot_files::SnapshotFiles;
use crate::state_machine::{ask, StateMachine};
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
    /// Where this node listens for peers (required with `peers` or `join`).
    pub raft_listen: Option<SocketAddr>,
    /// Joins a running cluster instead of forming one: the node waits, uninitialised,
    /// until the leader adds it (`hotledger.add_node`); its membership then comes from
    /// the log, as it does on any restart.
    pub join: bool,
    /// File IO for the log. Its appends run on a dedicated thread, where a blocking
    /// fdatasync costs no extra wake-up; io_uring hands the fsync to a kernel worker.
    pub log_io: kv::IoMode,
    /// Where a cluster keeps its snapshots (files of the whole state, `snapshot_files`).
    pub snapshot_dir: PathBuf,
    /// In a cluster: log entries applied between snapshots. Each snapshot writes the whole
    /// state, and lets the log before it go (keeping `log_keep_entries`).
    pub snapshot_entries: u64,
    /// In a cluster: entries kept behind the last snapshot, for followers a little behind
    /// (one further behind is sent the snapshot).
    pub log_keep_entries: u64,
    /// In a cluster: the most bytes of entries kept behind the last snapshot, whatever
    /// `log_keep_entries` allows.
    pub log_keep_bytes: u64,
    /// Writes to the log's files that fail on purpose (`kv::FaultPlan`; tests only).
    pub log_faults: kv::FaultPlan,
}

impl NodeOptions {
    /// Defaults for a cluster's snapshots: one per 100,000 entries, as many kept behind it.
    pub const SNAPSHOT_ENTRIES: u64 = 100_000;
    pub const LOG_KEEP_ENTRIES: u64 = 100_000;
    /// 512 MiB: a follower up to that far behind replays the log rather than take the
    /// whole state.
    pub const LOG_KEEP_BYTES: u64 = 512 << 20;
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen for peers on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("--peers must name this node ({0}), with --raft-listen (or --join and --raft-listen)")]
    NotAPeer(NodeId),
    #[error("cannot open the log in {dir}: {source}")]
    Log { dir: PathBuf, source: kv::KvError },
    #[error("cannot open the snapshot directory {dir}: {source}")]
    Snapshots {
        dir: PathBuf,
        source: std::io::Error,
    },
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
    pub membership: Membership,
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

/// A single node's log entries between snapshots. Its snapshot is the last durable
/// checkpoint; after one, the log before it is purged (keeping a short tail).
const SINGLE_SNAPSHOT_ENTRIES: u64 = 2_000;

/// How long a leader waits for the answer to a snapshot chunk; the last one's answer comes
/// after the follower has installed the whole snapshot (seconds for a large state).
const SNAPSHOT_INSTALL_TIMEOUT_MS: u64 = 300_000;

/// openraft's configuration: timeouts sized for a loaded 2-core machine, snapshots when
/// `trigger_snapshots` asks, and (in a cluster) purges by `purge`.
fn raft_config(cluster: bool) -> Result<Config, StartError> {
    Config {
        cluster_name: "hotledger".into(),
        heartbeat_interval: 100,
        election_timeout_min: 300,
        election_timeout_max: 600,
        snapshot_policy: SnapshotPolicy::Never,
        // A cluster node purges by its followers' needs itself (`purge`).
        max_in_snapshot_log_to_keep: if cluster { u64::MAX } else { 1_000 },
        max_payload_entries: MAX_PAYLOAD_ENTRIES,
        // A snapshot goes in chunks of 1 MiB; the last one's answer waits for the install.
        snapshot_max_chunk_size: 1 << 20,
        install_snapshot_timeout: SNAPSHOT_INSTALL_TIMEOUT_MS,
        ..Config::default()
    }
    .validate()
    .map_err(|e| StartError::Raft(e.to_string()))
}

pub async fn start(options: NodeOptions, executor: ExecutorHandle) -> Result<Node, StartError> {
    let cluster = !options.peers.is_empty() || options.join;
    let listener = peer_listener(cluster, &options).await?;
    let log = RaftLog::open(&options.log_dir, options.log_io, options.log_faults.clone()).map_err(
        |source| StartError::Log {
            dir: options.log_dir.clone(),
            source,
        },
    )?;
    let config = raft_config(cluster)?;
    let log_stats = log.stats();
    let files = match cluster {
        true => Some(Arc::new(
            SnapshotFiles::open(&options.snapshot_dir).map_err(|source| StartError::Snapshots {
                dir: options.snapshot_dir.clone(),
                source,
            })?,
        )),
        false => None,
    };
    // Every node reads an appended entry's pages while the log writes it.
    log.offer_reads_ahead_to(executor.clone());
    // A single node's durable entries are committed: its log thread hands them to the
    // executor itself (`apply_ahead`).
    let ahead = (!cluster).then(|| {
        let ahead = Arc::new(ApplyAhead::new(executor.clone(), log.early_replies()));
        log.hand_durable_entries_to(ahead.clone());
        ahead
    });
    let state_machine = StateMachine::new(
        executor.clone(),
        log.early_replies(),
        files,
        log.stats(),
        ahead,
    );
    let raft_handle = state_machine.raft_handle();
    // One connection to each other member, for openraft's RPCs and our own requests alike.
    let peers = PeerLinks::naming(options.peers.clone());
    let network = TcpNetwork {
        links: peers.clone(),
    };
    let raft = Raft::new(
        options.node_id,
        Arc::new(config),
        network,
        log.clone(),
        state_machine,
    )
    .await
    .map_err(|e| StartError::Raft(e.to_string()))?;
    let _ = raft_handle.set(raft.clone());
    let proposer = Proposer::start(
        raft.clone(),
        log.early_replies(),
        options.node_id,
        cluster,
        peers.clone(),
    );
    let read_index = ReadIndex::default();
    if let Some(listener) = listener {
        let context = PeerContext {
            raft: raft.clone(),
            proposer: proposer.clone(),
            read_index: read_index.clone(),
            pg_addr: Arc::new(options.address.clone()),
            links: peers.clone(),
        };
        tokio::spawn(serve_peers(listener, context));
    }
    if !options.join {
        initialize(&raft, &options).await?;
    }
    if cluster {
        wait_for_a_leader(&raft, &options).await?;
    }
    replay_if_leading(&raft, cluster).await?;
    let every = match cluster {
        true => options.snapshot_entries.max(1),
        false => SINGLE_SNAPSHOT_ENTRIES,
    };
    let keep = cluster.then_some(crate::purge::KeepBehind {
        entries: options.log_keep_entries,
        bytes: options.log_keep_bytes,
    });
    let snapshots = SnapshotTrigger {
        raft: raft.clone(),
        log: log.clone(),
        executor,
        keep,
        every,
    };
    tokio::spawn(trigger_snapshots(snapshots));
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
            peers.clone(),
        ),
        membership: Membership::new(raft.clone(), options.node_id, proposer.clone(), peers),
        raft,
        proposer,
        log_stats,
        node_id: options.node_id,
    })
}

/// The listener for peers, in a cluster (this node must be one of `--peers`, or join).
async fn peer_listener(
    cluster: bool,
    options: &NodeOptions,
) -> Result<Option<TcpListener>, StartError> {
    match (cluster, options.raft_listen) {
        (false, _) => Ok(None),
        (true, Some(addr)) if options.join || options.peers.contains_key(&options.node_id) => {
            TcpListener::bind(addr)
                .await
                .map(Some)
                .map_err(|source| StartError::Listen { addr, source })
        }
        (true, _) => Err(StartError::NotAPeer(options.node_id)),
    }
}

/// A leader applies every entry in its log before clients may read (a follower serves
/// weak reads as it catches up, and strong reads wait for the leader's index).
async fn replay_if_leading(raft: &Raft, cluster: bool) -> Result<(), StartError> {
    let leads = {
        let metrics = raft.metrics();
        let metrics = metrics.borrow();
        metrics.current_leader == Some(metrics.id)
    };
    if !leads && cluster {
        return Ok(());
    }
    let metrics = raft
        .wait(Some(Duration::from_secs(60)))
        .state(ServerState::Leader, "become leader")
        .await
        .map_err(|e| wait_failed(raft, e))?;
    if let Some(last) = metrics.last_log_index {
        raft.wait(Some(Duration::from_secs(600)))
            .applied_index_at_least(Some(last), "replay the log")
            .await
            .map_err(|e| wait_failed(raft, e))?;
    }
    Ok(())
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

/// Waits until the cluster has a leader: a majority of its voters must be up (and a node
/// that joins must have been added).
async fn wait_for_a_leader(raft: &Raft, options: &NodeOptions) -> Result<(), StartError> {
    loop {
        let waited = raft
            .wait(Some(Duration::from_secs(10)))
            .metrics(
                |m| m.current_leader.is_some() || m.running_state.is_err(),
                "a leader",
            )
            .await;
        // Raft stopped (a joining node that cannot apply the cluster's log): say why.
        if let Err(fatal) = &raft.metrics().borrow().running_state {
            return Err(StartError::Raft(fatal.to_string()));
        }
        let voters = raft
            .metrics()
            .borrow()
            .membership_config
            .membership()
            .voter_ids()
            .count();
        match waited {
            Ok(_) => return Ok(()),
            Err(openraft::metrics::WaitError::Timeout(..)) if voters == 0 => eprintln!(
                "hotledger: waiting to be added to the cluster: CALL hotledger.add_node({}, '{}') on any of its nodes",
                options.node_id,
                options.raft_listen.map(|a| a.to_string()).unwrap_or_default()
            ),
            Err(openraft::metrics::WaitError::Timeout(..)) => eprintln!(
                "hotledger: waiting for a leader: {} of the {voters} voters must be up",
                voters / 2 + 1
            ),
            Err(e) => return Err(wait_failed(raft, e)),
        }
    }
}

/// What `trigger_snapshots` works with.
struct SnapshotTrigger {
    raft: Raft,
    log: RaftLog,
    executor: ExecutorHandle,
    keep: Option<crate::purge::KeepBehind>,
    every: u64,
}

/// Asks openraft for a snapshot whenever `every` more entries have been applied since the
/// last one, which lets it purge the log behind it. A single node's snapshot costs nothing
/// (it names the last durable checkpoint), so it counts durable entries, and openraft
/// purges behind it; a cluster's writes the whole state with a checkpoint of its own, so it
/// counts applied ones, and the node purges what its followers no longer need, keeping at
/// most `keep` (Some in a cluster) behind the snapshot for them (`purge`).
async fn trigger_snapshots(trigger: SnapshotTrigger) {
    let SnapshotTrigger {
        raft,
        log,
        executor,
        keep,
        every,
    } = trigger;
    let cluster = keep.is_some();
    let mut progress = crate::purge::FollowerProgress::default();
    let mut last_triggered = raft.metrics().borrow().snapshot.map_or(0, |id| id.index);
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let Some((applied, durable)) = ask(&executor, |reply| Request::Meta { reply }).await else {
            return;
        };
        if let Some(keep) = keep {
            crate::purge::purge(&raft, &log, keep, &mut progress).await;
        }
        let counted = if cluster { applied } else { durable };
        let Some(bytes) = counted.applied_log_id else {
            continue;
        };
        let Ok(id) = bincode::deserialize::<LogId<NodeId>>(&bytes) else {
            continue;
        };
        if id.index >= last_triggered + every {
            if raft.trigger().snapshot().await.is_err() {
                return;
            }
            last_triggered = id.index;
        }
    }
}
