//! Starting a replica: open the log, start openraft over it and the executor, initialise a
//! one-member cluster on first start, and wait until every logged entry is applied again.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ledger::{ExecutorHandle, Request};
use openraft::{BasicNode, Config, LogId, ServerState, SnapshotPolicy};
use tokio::sync::oneshot;

use crate::log_store::{LogStats, RaftLog};
use crate::network::NoPeers;
use crate::proposer::Proposer;
use crate::state_machine::StateMachine;
use crate::types::{NodeId, Raft};

#[derive(Clone, Debug)]
pub struct NodeOptions {
    pub node_id: NodeId,
    pub log_dir: PathBuf,
    /// The address peers would use to reach this node (recorded in the membership).
    pub address: String,
    /// File IO for the log. Its appends run on a dedicated thread, where a blocking
    /// fdatasync costs no extra wake-up; io_uring hands the fsync to a kernel worker.
    pub log_io: kv::IoMode,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot open the log in {dir}: {source}")]
    Log { dir: PathBuf, source: kv::KvError },
    #[error("cannot start Raft: {0}")]
    Raft(String),
}

pub struct Node {
    pub raft: Raft,
    pub proposer: Proposer,
    pub log_stats: Arc<LogStats>,
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

/// Log entries applied between snapshots. A snapshot is the last durable checkpoint; after
/// one, the log before it is purged (keeping a tail for lagging followers).
const SNAPSHOT_EVERY_ENTRIES: u64 = 2_000;

pub async fn start(options: NodeOptions, executor: ExecutorHandle) -> Result<Node, StartError> {
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
        max_in_snapshot_log_to_keep: 1_000,
        ..Config::default()
    }
    .validate()
    .map_err(|e| StartError::Raft(e.to_string()))?;
    let log_stats = log.stats();
    let raft = Raft::new(
        options.node_id,
        Arc::new(config),
        NoPeers,
        log.clone(),
        StateMachine::new(executor.clone(), log.early_replies()),
    )
    .await
    .map_err(|e| StartError::Raft(e.to_string()))?;
    let initialized = raft
        .is_initialized()
        .await
        .map_err(|e| StartError::Raft(e.to_string()))?;
    if !initialized {
        let members = BTreeMap::from([(
            options.node_id,
            BasicNode {
                addr: options.address.clone(),
            },
        )]);
        raft.initialize(members)
            .await
            .map_err(|e| StartError::Raft(e.to_string()))?;
    }
    let metrics = raft
        .wait(Some(Duration::from_secs(60)))
        .state(ServerState::Leader, "become leader")
        .await
        .map_err(|e| wait_failed(&raft, e))?;
    // Every entry in the log before this start must be applied before clients may read.
    if let Some(last) = metrics.last_log_index {
        raft.wait(Some(Duration::from_secs(600)))
            .applied_index_at_least(Some(last), "replay the log")
            .await
            .map_err(|e| wait_failed(&raft, e))?;
    }
    tokio::spawn(trigger_snapshots(raft.clone(), executor));
    let proposer = Proposer::start(raft.clone(), log.early_replies());
    Ok(Node {
        raft,
        proposer,
        log_stats,
    })
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
