//! The state machine adapter: committed entries go to the executor in log order. A single
//! node's snapshot is the executor's last durable checkpoint (its log position and
//! membership, no data), so purging the log behind it never loses state; a cluster's carries
//! the whole state, for followers too far behind the log (`snapshot`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use kv::LogPosition;
use ledger::{CommandApplied, EntryPayload, ExecutorHandle, ReplicationMeta, Request};
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    AnyError, Entry, EntryPayload as RaftPayload, LogId, OptionalSend, RaftSnapshotBuilder,
    SnapshotMeta, StorageError, StorageIOError, StoredMembership,
};
use tokio::fs::File;
use tokio::sync::oneshot;
use tokio::task::spawn_blocking;

use crate::apply_ahead::ApplyAhead;
use crate::early_reply::EarlyReplies;
use crate::snapshot::{open_snapshot, snapshot_error};
use crate::snapshot_files::{SnapshotFiles, RECEIVING};
use crate::types::{BatchResults, NodeId, Raft, TypeConfig};

type Membership = StoredMembership<NodeId, openraft::BasicNode>;

#[derive(Clone)]
pub struct StateMachine {
    pub(crate) executor: ExecutorHandle,
    early: Arc<EarlyReplies>,
    /// Where snapshots with data are kept, in a cluster (`snapshots`); None for a single
    /// node, whose snapshot is its last durable checkpoint and carries no data.
    files: Option<Arc<SnapshotFiles>>,
    /// The file a leader's snapshot is being streamed into.
    receiving: Arc<Mutex<Option<PathBuf>>>,
    /// The Raft this state machine serves, once started (an install pauses its elections).
    pub(crate) raft: Arc<OnceLock<Raft>>,
    /// Where each entry's apply time is told (`LogStats::on_apply`).
    stats: Arc<crate::log_store::LogStats>,
    /// On a single node: the entries its log thread handed to the executor already.
    ahead: Option<Arc<ApplyAhead>>,
}

/// Sends the executor the request `make` builds around its reply, and waits for the reply;
/// None when the executor has stopped.
pub(crate) async fn ask<T: Send + 'static>(
    executor: &ExecutorHandle,
    make: impl FnOnce(ledger::Reply<T>) -> Request,
) -> Option<T> {
    let (tx, rx) = oneshot::channel();
    if !executor.send(make(Box::new(move |r| drop(tx.send(r))))) {
        return None;
    }
    rx.await.ok()
}

/// The executor's answer to an entry: each command's encoded result, or why it could not
/// be applied; and when it was applied.
pub(crate) type Applied = (Result<Vec<Vec<u8>>, String>, std::time::Instant);

/// An entry sent to the executor: where its answer comes, and when it was sent.
pub(crate) struct Sent {
    pub answer: oneshot::Receiver<Applied>,
    pub at: std::time::Instant,
}

/// Sends the executor `entry` to apply. Commands a proposer of this node waits on are
/// answered as each is applied (`EarlyReplies`).
pub(crate) fn send_entry(
    executor: &ExecutorHandle,
    early: &Arc<EarlyReplies>,
    entry: Entry<TypeConfig>,
) -> Result<Sent, StorageError<NodeId>> {
    let log_id = bincode::serialize(&entry.log_id).map_err(|e| sm_error(e.to_string()))?;
    let position = LogPosition {
        term: entry.log_id.leader_id.term,
        index: entry.log_id.index,
    };
    let payload = match entry.payload {
        RaftPayload::Blank => EntryPayload::Blank,
        RaftPayload::Normal(batch) => EntryPayload::Commands(batch.0),
        RaftPayload::Membership(m) => {
            let stored = Membership::new(Some(entry.log_id), m);
            EntryPayload::Membership(
                bincode::serialize(&stored).map_err(|e| sm_error(e.to_string()))?,
            )
        }
    };
    let applied = early.take_index(position.index).map(|token| {
        let early = early.clone();
        Box::new(move |slot: usize, result: &[u8]| early.answer(token, slot, result.to_vec()))
            as CommandApplied
    });
    let (tx, rx) = oneshot::channel();
    let request = Request::Apply {
        position,
        log_id,
        payload,
        applied,
        reply: Box::new(move |r: ledger::EntryResults| {
            drop(tx.send((r.map_err(|e| e.message), std::time::Instant::now())))
        }),
    };
    if !executor.send(request) {
        return Err(sm_error("the executor stopped"));
    }
    Ok(Sent {
        answer: rx,
        at: std::time::Instant::now(),
    })
}

pub(crate) fn sm_error(message: impl ToString) -> StorageError<NodeId> {
    StorageIOError::write_state_machine(AnyError::error(message)).into()
}

pub(crate) fn decode_meta(
    meta: &ReplicationMeta,
) -> Result<(Option<LogId<NodeId>>, Membership), StorageError<NodeId>> {
    let log_id = match &meta.applied_log_id {
        Some(b) => {
            Some(bincode::deserialize(b).map_err(|e| sm_error(format!("stored log id: {e}")))?)
        }
        None => None,
    };
    let membership = match &meta.membership {
        Some(b) => {
            bincode::deserialize(b).map_err(|e| sm_error(format!("stored membership: {e}")))?
        }
        None => Membership::default(),
    };
    Ok((log_id, membership))
}

impl StateMachine {
    pub(crate) fn new(
        executor: ExecutorHandle,
        early: Arc<EarlyReplies>,
        files: Option<Arc<SnapshotFiles>>,
        stats: Arc<crate::log_store::LogStats>,
        ahead: Option<Arc<ApplyAhead>>,
    ) -> StateMachine {
        StateMachine {
            executor,
            early,
            files,
            receiving: Arc::default(),
            raft: Arc::default(),
            stats,
            ahead,
        }
    }

    /// Where the node puts its `Raft` once started.
    pub(crate) fn raft_handle(&self) -> Arc<OnceLock<Raft>> {
        self.raft.clone()
    }

    pub(crate) async fn meta(
        &self,
    ) -> Result<(ReplicationMeta, ReplicationMeta), StorageError<NodeId>> {
        ask(&self.executor, |reply| Request::Meta { reply })
            .await
            .ok_or_else(|| sm_error("the executor stopped"))
    }

    /// A single node's snapshot: its last durable checkpoint's position and membership,
    /// with no data — the checkpoint is on this node's disk, and no peer ever asks for it.
    async fn durable_snapshot(&self) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        let (_, durable) = self.meta().await?;
        let (log_id, membership) = decode_meta(&durable)?;
        let no_data = File::open("/dev/null")
            .await
            .map_err(|e| snapshot_error(format!("/dev/null: {e}")))?;
        Ok(log_id.map(|id| Snapshot {
            meta: SnapshotMeta {
                last_log_id: Some(id),
                last_membership: membership,
                snapshot_id: format!("checkpoint-{}", id.index),
            },
            snapshot: Box::new(no_data),
        }))
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = StateMachine;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, Membership), StorageError<NodeId>> {
        let (applied, _) = self.meta().await?;
        decode_meta(&applied)
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<BatchResults>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        // Send every entry first, then collect: the executor applies them in channel order.
        // On a single node the log thread may have sent an entry already (`apply_ahead`).
        let mut pending = Vec::new();
        for entry in entries {
            let index = entry.log_id.index;
            let sent = match &self.ahead {
                Some(ahead) => ahead.send_or_take(entry)?,
                None => send_entry(&self.executor, &self.early, entry)?,
            };
            pending.push((index, sent));
        }
        // An executor that stopped applying is a fatal storage error: openraft stops this
        // node (it no longer votes or takes entries), and the server exits with it.
        let mut results = Vec::with_capacity(pending.len());
        for (index, sent) in pending {
            let (applied, done) = sent
                .answer
                .await
                .map_err(|_| sm_error("the executor stopped"))?;
            if let Some(observe) = self.stats.on_apply.get() {
                observe(done.saturating_duration_since(sent.at), 0);
            }
            let applied = applied.map_err(|message| {
                sm_error(format!(
                    "log entry {index} was not applied, this replica stops: {message}"
                ))
            })?;
            results.push(BatchResults(applied));
        }
        Ok(results)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<File>, StorageError<NodeId>> {
        let Some(files) = &self.files else {
            return Err(sm_error("a single node receives no snapshots"));
        };
        files
            .remove_temporary(RECEIVING)
            .map_err(|e| snapshot_error(e.to_string()))?;
        let path = files.temporary(RECEIVING);
        let file = File::create(&path)
            .await
            .map_err(|e| snapshot_error(format!("{}: {e}", path.display())))?;
        *self.receiving.lock().unwrap_or_else(|e| e.into_inner()) = Some(path);
        Ok(Box::new(file))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, openraft::BasicNode>,
        snapshot: Box<File>,
    ) -> Result<(), StorageError<NodeId>> {
        let files = self
            .files
            .clone()
            .ok_or_else(|| sm_error("a single node installs no snapshots"))?;
        let received = self
            .receiving
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .ok_or_else(|| sm_error("a snapshot was installed without being received"))?;
        snapshot
            .sync_all()
            .await
            .map_err(|e| snapshot_error(e.to_string()))?;
        drop(snapshot);
        self.install_received(&files, received, meta).await
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        match self.files.clone() {
            None => self.durable_snapshot().await,
            Some(files) => {
                let current = spawn_blocking(move || files.current())
                    .await
                    .map_err(|e| snapshot_error(e.to_string()))?
                    .map_err(|e| snapshot_error(e.to_string()))?;
                match current {
                    Some((path, header)) => Ok(Some(open_snapshot(&path, &header).await?)),
                    None => Ok(None),
                }
            }
        }
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        if let Some(files) = self.files.clone() {
            return self.build_with_data(files).await;
        }
        match self.durable_snapshot().await? {
            Some(s) => Ok(s),
            None => Err(StorageIOError::read_snapshot(
                None,
                AnyError::error("no checkpoint has completed yet"),
            )
            .into()),
        }
    }
}
