//! The state machine adapter: committed entries go to the executor in log order; a snapshot
//! is the executor's last durable checkpoint (its log position and membership), so purging
//! the log behind a snapshot never loses state.

use std::io::Cursor;
use std::sync::Arc;

use kv::LogPosition;
use ledger::{CommandApplied, EntryPayload, ExecutorHandle, ReplicationMeta, Request};
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    AnyError, Entry, EntryPayload as RaftPayload, LogId, OptionalSend, RaftSnapshotBuilder,
    SnapshotMeta, StorageError, StorageIOError, StoredMembership,
};
use tokio::sync::oneshot;

use crate::early_reply::EarlyReplies;
use crate::types::{BatchResults, NodeId, TypeConfig};

type Membership = StoredMembership<NodeId, openraft::BasicNode>;

#[derive(Clone)]
pub struct StateMachine {
    executor: ExecutorHandle,
    early: Arc<EarlyReplies>,
}

fn sm_error(message: impl ToString) -> StorageError<NodeId> {
    StorageIOError::write_state_machine(AnyError::error(message)).into()
}

fn decode_meta(
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
    pub(crate) fn new(executor: ExecutorHandle, early: Arc<EarlyReplies>) -> StateMachine {
        StateMachine { executor, early }
    }

    async fn meta(&self) -> Result<(ReplicationMeta, ReplicationMeta), StorageError<NodeId>> {
        let (tx, rx) = oneshot::channel();
        let sent = self.executor.send(Request::Meta {
            reply: Box::new(move |m| drop(tx.send(m))),
        });
        if !sent {
            return Err(sm_error("the executor stopped"));
        }
        rx.await.map_err(|_| sm_error("the executor stopped"))
    }

    async fn durable_snapshot(&self) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        let (_, durable) = self.meta().await?;
        let (log_id, membership) = decode_meta(&durable)?;
        Ok(log_id.map(|id| Snapshot {
            meta: SnapshotMeta {
                last_log_id: Some(id),
                last_membership: membership,
                snapshot_id: format!("checkpoint-{}", id.index),
            },
            snapshot: Box::new(Cursor::new(Vec::new())),
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
        let mut pending = Vec::new();
        for entry in entries {
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
            // This node's proposer is waiting on the entry: answer each command when applied.
            let applied = self.early.take_index(position.index).map(|token| {
                let early = self.early.clone();
                Box::new(move |slot: usize, result: &[u8]| {
                    early.answer(token, slot, result.to_vec())
                }) as CommandApplied
            });
            let (tx, rx) = oneshot::channel();
            let sent = self.executor.send(Request::Apply {
                position,
                log_id,
                payload,
                applied,
                reply: Box::new(move |r| drop(tx.send(r))),
            });
            if !sent {
                return Err(sm_error("the executor stopped"));
            }
            pending.push((position.index, rx));
        }
        // An executor that stopped applying is a fatal storage error: openraft stops this
        // node (it no longer votes or takes entries), and the server exits with it.
        let mut results = Vec::with_capacity(pending.len());
        for (index, rx) in pending {
            let applied = rx.await.map_err(|_| sm_error("the executor stopped"))?;
            let applied = applied.map_err(|e| {
                sm_error(format!(
                    "log entry {index} was not applied, this replica stops: {}",
                    e.message
                ))
            })?;
            results.push(BatchResults(applied));
        }
        Ok(results)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Err(sm_error(
            "not supported yet: receiving snapshots (multi-node clusters)",
        ))
    }

    async fn install_snapshot(
        &mut self,
        _meta: &SnapshotMeta<NodeId, openraft::BasicNode>,
        _snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        Err(sm_error(
            "not supported yet: installing snapshots (multi-node clusters)",
        ))
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        self.durable_snapshot().await
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
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
