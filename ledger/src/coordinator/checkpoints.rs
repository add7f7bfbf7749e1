//! A checkpoint's course through the coordinator: begun at the position applied (the
//! ledger's clock, table versions and replication meta written into the meta table
//! first), committed through the commit record once every partition has prepared,
//! finished once every partition's is durable, or abandoned; and the last one finished
//! at a clean stop. What begins one is `Coordinator::maintain`'s.

use std::time::Instant;

use kv::LogPosition;

use super::{Checkpointing, Coordinator};
use crate::error::kv_error;
use crate::executor::{
    StoredClock, META_APPLIED, META_LEDGER_CLOCK, META_MEMBERSHIP, META_TABLE_VERSIONS,
};
use crate::partition::{combined_stats, encode_table_versions};

impl Coordinator {
    /// Finishes an in-flight checkpoint, so a clean stop leaves nothing to replay.
    pub(super) fn shutdown(&mut self) {
        if self.executor.failed.is_none()
            && self.changed_since_checkpoint
            && !self.checkpoint_in_progress()
        {
            self.begin_checkpoint();
        }
        if self.checkpointing.is_none() {
            return;
        }
        let prepared = self
            .shards()
            .try_for_each(|s| s.engine.wait_prepared().map(|_| ()));
        if let Err(e) = prepared {
            eprintln!("hotledger: checkpoint failed at shutdown: {e}");
            self.abandon_checkpoint();
            return;
        }
        self.commit_checkpoint();
        for shard in self.shards() {
            if let Err(e) = shard.engine.wait_checkpoint() {
                eprintln!("hotledger: checkpoint failed at shutdown: {e}");
            }
        }
        self.finish_checkpoint();
    }

    /// Starts a checkpoint of every partition at the position applied now.
    pub(super) fn begin_checkpoint(&mut self) {
        let snapshot = self.replication.clone();
        let meta = self.executor.meta;
        let clock = StoredClock {
            now: self.executor.clock.now,
            timestamps_reserved_to: self.executor.clock.timestamps.reserved_to,
            latest_timestamps: self.executor.clock.timestamps.latest,
        }
        .encode();
        let applied = self.applied;
        let versions = encode_table_versions(&self.executor.shards);
        let Some(first) = self.executor.shards[0].as_mut().map(|s| &mut s.engine) else {
            return;
        };
        let mut result = first
            .put(meta, META_LEDGER_CLOCK, &clock)
            .and_then(|_| first.put(meta, META_TABLE_VERSIONS, &versions))
            .map(|_| ());
        for (key, value) in [
            (META_APPLIED, &snapshot.applied_log_id),
            (META_MEMBERSHIP, &snapshot.membership),
        ] {
            if let (Ok(()), Some(v)) = (&result, value) {
                result = first.put(meta, key, v).map(|_| ());
            }
        }
        for shard in self.shards() {
            result = result.and_then(|()| shard.engine.begin_checkpoint(applied));
        }
        match result {
            Ok(()) => {
                self.checkpointing = Some(Checkpointing {
                    meta: snapshot,
                    position: self.applied,
                    started: Instant::now(),
                    committed: false,
                });
                self.changed_since_checkpoint = false;
                self.last_checkpoint = Instant::now();
            }
            Err(e) => self.executor.fail(kv_error(e)),
        }
    }

    /// Every partition's checkpoint is prepared (pages and page map record durable): record
    /// the position as committed, then release the partitions.
    pub(super) fn commit_checkpoint(&mut self) {
        let Some(checkpointing) = self.checkpointing.as_mut() else {
            return;
        };
        if let Err(e) = self.commit_record.write(checkpointing.position) {
            // Nothing is lost (the previous commit stands and the log holds everything
            // since), but the engines cannot go on: their checkpoints wait for a commit.
            self.checkpoint_failures += 1;
            self.checkpoint_retry.failed(&e.message);
            self.abandon_checkpoint();
            return;
        }
        checkpointing.committed = true;
        for shard in self.shards() {
            shard.engine.release_checkpoint();
        }
    }

    /// Gives up the checkpoint in flight before its commit: every partition keeps its previous
    /// checkpoint and its pages stay dirty for the next one.
    pub(super) fn abandon_checkpoint(&mut self) {
        for shard in self.shards() {
            if let Err(e) = shard.engine.abandon_checkpoint() {
                // Out of space, it failed as the checkpoint did, which is reported already.
                if !e.is_out_of_space() {
                    eprintln!("hotledger: abandoning a checkpoint: {e}");
                }
            }
        }
        self.checkpointing = None;
        self.last_checkpoint = Instant::now();
        self.answer_snapshot_requests(false);
        self.answer_checkpoint_requests(None);
    }

    /// The checkpoint in flight is durable in every partition.
    pub(super) fn finish_checkpoint(&mut self) {
        if let Some(checkpointing) = self.checkpointing.take() {
            if checkpointing.committed {
                self.durable_replication = checkpointing.meta;
                self.checkpoint_retry.succeeded();
                self.remember_checkpoint(checkpointing.position, checkpointing.started);
            }
            self.answer_snapshot_requests(checkpointing.committed);
            let durable = checkpointing
                .committed
                .then_some(checkpointing.position.index);
            self.answer_checkpoint_requests(durable);
        }
    }

    /// A checkpoint covering `position`, begun at `started`, is durable.
    fn remember_checkpoint(&mut self, position: LogPosition, started: Instant) {
        const KEPT: usize = 32;
        let pages = combined_stats(self.executor.shards.iter().flatten()).last_checkpoint_pages;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64);
        if self.recent_checkpoints.len() == KEPT {
            self.recent_checkpoints.pop_front();
        }
        self.recent_checkpoints.push_back(plan::CheckpointRow {
            finished_at: now,
            log_index: position.index as i64,
            pages: pages as i64,
            milliseconds: started.elapsed().as_millis() as i64,
        });
    }
}
