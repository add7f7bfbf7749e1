//! Snapshots with data, for a cluster: built from the executor's state at a checkpoint and
//! kept as a file (`snapshot_files`), streamed to a follower too far behind the log in
//! openraft's chunks, and installed there by swapping the executor's data files.
//!
//! Building asks the executor for a `ledger::StateSnapshot` (taken as it begins a
//! checkpoint, answered when that checkpoint is durable — so openraft may purge the log up
//! to the snapshot's position on this node too) and writes it out on a blocking thread; the
//! executor goes on applying meanwhile. A failed build (a checkpoint that failed: a full
//! disk) is retried: openraft treats an error from the builder as fatal.
//!
//! Installing reads the received file into staged data files (on a blocking thread), has
//! the executor swap them in, and only then keeps the file as this node's current snapshot,
//! so a follower that later leads can send it on.

use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ledger::{Request, SnapshotHeader, StateSnapshot};
use openraft::storage::Snapshot;
use openraft::{AnyError, SnapshotMeta, StorageError, StorageIOError};
use tokio::fs::File;
use tokio::task::spawn_blocking;

use crate::snapshot_files::{SnapshotFiles, BUILDING};
use crate::state_machine::{ask, decode_meta, sm_error, StateMachine};
use crate::types::{NodeId, TypeConfig};

/// How long a failed build waits before asking the executor again.
const BUILD_RETRY: Duration = Duration::from_secs(1);

pub(crate) fn snapshot_error(message: impl ToString) -> StorageError<NodeId> {
    StorageIOError::read_snapshot(None, AnyError::error(message)).into()
}

/// openraft's description of the snapshot `header` describes.
fn snapshot_meta(
    header: &SnapshotHeader,
) -> Result<SnapshotMeta<NodeId, openraft::BasicNode>, StorageError<NodeId>> {
    let (last_log_id, last_membership) = decode_meta(&header.meta())?;
    if last_log_id.is_none() {
        return Err(snapshot_error("a snapshot of a state that applied nothing"));
    }
    Ok(SnapshotMeta {
        last_log_id,
        last_membership,
        snapshot_id: format!("{}-{}", header.index, header.term),
    })
}

/// The kept snapshot at `path`, open for openraft to stream from.
pub(crate) async fn open_snapshot(
    path: &Path,
    header: &SnapshotHeader,
) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
    let file = File::open(path)
        .await
        .map_err(|e| snapshot_error(format!("{}: {e}", path.display())))?;
    Ok(Snapshot {
        meta: snapshot_meta(header)?,
        snapshot: Box::new(file),
    })
}

/// Writes `state` to a temporary file, fsyncs it and keeps it as the current snapshot.
fn write_snapshot(files: &SnapshotFiles, state: &StateSnapshot) -> std::io::Result<PathBuf> {
    let temporary = files.temporary(BUILDING);
    let file = std::fs::File::create(&temporary)?;
    let written = state
        .write_to(BufWriter::new(&file))
        .map_err(|e| std::io::Error::other(e.message))
        .and_then(|_| file.sync_all());
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(e);
    }
    files.keep(&temporary, state.header())
}

impl StateMachine {
    /// The executor's state as of a durable checkpoint taken now.
    async fn request_state(&self) -> Option<Result<Arc<StateSnapshot>, String>> {
        let answer = ask(&self.executor, |reply| Request::BuildSnapshot { reply }).await?;
        Some(answer.map_err(|e| e.message))
    }

    pub(crate) async fn build_with_data(
        &self,
        files: Arc<SnapshotFiles>,
    ) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        loop {
            let state = match self.request_state().await {
                Some(Ok(state)) => state,
                Some(Err(why)) => {
                    eprintln!("hotledger: building a snapshot failed, retrying: {why}");
                    tokio::time::sleep(BUILD_RETRY).await;
                    continue;
                }
                None => return Err(sm_error("the executor stopped")),
            };
            let header = state.header().clone();
            let writer = files.clone();
            let written = spawn_blocking(move || write_snapshot(&writer, &state))
                .await
                .map_err(|e| sm_error(e.to_string()))?;
            match written {
                Ok(path) => return open_snapshot(&path, &header).await,
                Err(e) => {
                    eprintln!("hotledger: writing a snapshot failed, retrying: {e}");
                    tokio::time::sleep(BUILD_RETRY).await;
                }
            }
        }
    }

    /// Installs the snapshot received into `received`: stages it, has the executor swap it
    /// in, and keeps the file as this node's current snapshot. Any failure is fatal to this
    /// replica (its executor may have closed its engines).
    pub(crate) async fn install_received(
        &self,
        files: &SnapshotFiles,
        received: PathBuf,
        meta: &SnapshotMeta<NodeId, openraft::BasicNode>,
    ) -> Result<(), StorageError<NodeId>> {
        // No election while this follower installs: the leader sends nothing meanwhile, and
        // a large state takes longer than an election timeout to load.
        let raft = self.raft.get().cloned();
        if let Some(raft) = &raft {
            raft.runtime_config().elect(false);
        }
        let installed = self.install_staged(files, received, meta).await;
        if let Some(raft) = &raft {
            raft.runtime_config().elect(true);
        }
        installed
    }

    async fn install_staged(
        &self,
        files: &SnapshotFiles,
        received: PathBuf,
        meta: &SnapshotMeta<NodeId, openraft::BasicNode>,
    ) -> Result<(), StorageError<NodeId>> {
        let executor = self.executor.clone();
        let path = received.clone();
        let staged = spawn_blocking(move || {
            let file =
                std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            executor.stage_snapshot(file).map_err(|e| e.message)
        })
        .await
        .map_err(|e| sm_error(e.to_string()))?
        .map_err(|e| sm_error(format!("the snapshot received cannot be installed: {e}")))?;
        let header = staged.header.clone();
        let ours = snapshot_meta(&header)?;
        if ours.last_log_id != meta.last_log_id {
            return Err(sm_error(format!(
                "the snapshot received covers {:?}, its leader said {:?}",
                ours.last_log_id, meta.last_log_id
            )));
        }
        ask(&self.executor, |reply| Request::InstallSnapshot {
            staged,
            reply,
        })
        .await
        .ok_or_else(|| sm_error("the executor stopped"))?
        .map_err(|e| sm_error(format!("installing the snapshot failed: {}", e.message)))?;
        files
            .keep(&received, &header)
            .map_err(|e| sm_error(format!("keeping the snapshot installed: {e}")))?;
        eprintln!(
            "hotledger: installed a snapshot of log index {} from the leader",
            header.index
        );
        Ok(())
    }
}
