//! The coordinator's side of Raft snapshots: taking one with a checkpoint, and swapping an
//! installed one in under itself (see `state_snapshot` and `install`).

use std::sync::Arc;

use sql::{SqlError, SqlResult};

use super::{Coordinator, SharedWithHandle};
use crate::error::kv_error;
use crate::install::StagedInstall;
use crate::state_snapshot::{PartitionSnapshot, SnapshotHeader, StateSnapshot};

impl Coordinator {
    /// Begins a checkpoint at the position applied now and takes a snapshot of every
    /// partition at the same moment — after the checkpoint's metadata went into the meta
    /// table, so the snapshot holds what the checkpoint makes durable. Called between
    /// entries with no checkpoint in flight; the snapshot is answered when it is durable.
    pub(super) fn begin_snapshot(&mut self) {
        self.begin_checkpoint();
        if self.checkpointing.is_none() {
            self.answer_snapshot_requests(false);
            return;
        }
        match self.take_snapshot() {
            Ok(snapshot) => self.snapshot_taken = Some(Arc::new(snapshot)),
            Err(e) => {
                eprintln!("hotledger: taking a snapshot failed: {}", e.message);
                self.answer_snapshot_requests(false);
            }
        }
    }

    fn take_snapshot(&mut self) -> SqlResult<StateSnapshot> {
        let mut partitions = Vec::with_capacity(self.executor.shards.len());
        let mut page_size = 0;
        for shard in self.shards() {
            page_size = shard.engine.page_size() as u32;
            partitions.push(PartitionSnapshot {
                snapshot: shard.engine.snapshot().map_err(kv_error)?,
                tables: shard
                    .engine
                    .tables()
                    .map(|(name, table)| (name.to_string(), table))
                    .collect(),
            });
        }
        if partitions.len() != self.executor.shards.len() {
            return Err(SqlError::internal(
                "a partition is lent while a snapshot is taken",
            ));
        }
        Ok(StateSnapshot {
            header: SnapshotHeader {
                index: self.applied.index,
                term: self.applied.term,
                applied_log_id: self.replication.applied_log_id.clone(),
                membership: self.replication.membership.clone(),
                partitions: partitions.len() as u32,
                page_size,
            },
            partitions,
        })
    }

    /// Answers every snapshot request: with the snapshot taken, once its checkpoint is
    /// `durable`, or with an error (the checkpoint failed or was given up; ask again).
    pub(super) fn answer_snapshot_requests(&mut self, durable: bool) {
        let taken = self.snapshot_taken.take();
        if taken.is_none() && (durable || self.snapshot_requests.is_empty()) {
            // A checkpoint of the executor's own: requests wait for one with a snapshot.
            return;
        }
        for reply in self.snapshot_requests.drain(..) {
            match (&taken, durable) {
                (Some(snapshot), true) => reply(Ok(snapshot.clone())),
                _ => reply(Err(SqlError::new(
                    sql::ErrorKind::Io,
                    "the checkpoint a snapshot was taken with did not complete",
                ))),
            }
        }
    }

    /// Whether the staged snapshot fits this data directory: a partition count given on the
    /// command line must be the snapshot's.
    pub(super) fn can_install(&self, staged: &StagedInstall) -> SqlResult<()> {
        let theirs = staged.header.partitions as usize;
        match self.options.partitions {
            Some(ours) if ours != theirs => Err(SqlError::feature_not_supported(format!(
                "installing a snapshot of {theirs} partitions on a node started with --partitions {ours}: start every node of a cluster with the same partition count"
            ))),
            _ => Ok(()),
        }
    }

    /// Closes every engine, swaps the staged files in, and opens them: the coordinator that
    /// goes on, at the snapshot's position. On an error the engines stay closed.
    pub(super) fn install(mut self, staged: StagedInstall) -> SqlResult<Coordinator> {
        self.answer_snapshot_requests(false);
        let options = self.options.clone();
        let shared = SharedWithHandle {
            published: self.executor.published.clone(),
            published_view: self.published_view.clone(),
            activity: self.executor.activity.clone(),
            queues: self.queues.clone(),
            reads_wanted: self.read_ahead.wanted(),
        };
        let expected = staged.header.position();
        // Workers end and engines close (a checkpoint in flight is abandoned or finished).
        drop(self);
        staged.swap_in(&options.data_file)?;
        let reopened = Coordinator::open(options, Some(shared))?;
        assert_eq!(
            reopened.applied, expected,
            "an installed snapshot reopens at its own position"
        );
        // The view published before describes the old state.
        reopened.published_view.begin_apply(reopened.applied.index);
        Ok(reopened)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use super::super::tests::{answers, command, open, options, table_versions};
    use super::*;
    use crate::executor::Request;

    const NOW: i64 = 1_790_000_000_000_000;

    /// The ledger's schema, accounts, transfers and a table of notes large enough to span
    /// many pages, applied as entries 1.. of a log; returns the next index.
    fn fill(c: &mut Coordinator, notes: usize) -> u64 {
        let mut index = 0;
        let ledger = include_str!("../../../migrations/0002_ledger.sql");
        for (_, text) in sql::split_statements(ledger) {
            index += 1;
            let ddl = command(c, text, NOW);
            answers(c, index, vec![ddl]);
        }
        let accounts: Vec<String> = (1..=200).map(|id| format!("({id}, 1, 1)")).collect();
        let rows: Vec<String> = (0..notes)
            .map(|n| format!("({n}, '{}')", "x".repeat(n % 300)))
            .collect();
        for text in [
            "CREATE TABLE notes (id int PRIMARY KEY, body text)".to_string(),
            format!("INSERT INTO notes VALUES {}", rows.join(", ")),
            format!(
                "INSERT INTO accounts (id, ledger, code) VALUES {}",
                accounts.join(", ")
            ),
            "INSERT INTO transfers (id, debit_account_id, credit_account_id, amount, ledger, code) VALUES (1, 1, 2, 5, 1, 1), (2, 3, 4, 7, 1, 1)".to_string(),
        ] {
            index += 1;
            let write = command(c, &text, NOW);
            let answer = answers(c, index, vec![write]);
            assert!(!answer[0].contains(':'), "{answer:?}");
        }
        index + 1
    }

    /// Asks for a snapshot as the state machine does and drives the coordinator until it is
    /// answered.
    fn build(c: &mut Coordinator) -> Arc<StateSnapshot> {
        let (tx, rx) = mpsc::channel();
        c.handle(Request::BuildSnapshot {
            reply: Box::new(move |r| tx.send(r).unwrap()),
        });
        let started = Instant::now();
        loop {
            c.maintain();
            if let Ok(answer) = rx.try_recv() {
                return answer.unwrap();
            }
            assert!(started.elapsed() < Duration::from_secs(30), "no snapshot");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn bytes_of(snapshot: &StateSnapshot) -> Vec<u8> {
        let mut out = Vec::new();
        let written = snapshot.write_to(&mut out).unwrap();
        assert_eq!(written as usize, out.len());
        out
    }

    /// A snapshot taken with a checkpoint, written out, staged and installed over another
    /// replica's different state gives that replica the same state — the same stream when
    /// it is snapshotted in turn, the same table versions, the same catalog — and the state
    /// survives a reopen; the snapshot's checkpoint is durable on the source.
    #[test]
    fn a_snapshot_installed_on_another_replica_reproduces_the_state() {
        let source_dir = tempfile::tempdir().unwrap();
        let mut source = open(2, source_dir.path());
        let next = fill(&mut source, 3_000);
        let snapshot = build(&mut source);
        assert_eq!(snapshot.header().index, next - 1);
        let committed = source.commit_record.read().unwrap().unwrap();
        assert_eq!(committed.position, snapshot.header().position());
        let stream = bytes_of(&snapshot);
        // The source goes on: what it applies after the snapshot is not in it.
        let later = command(&source, "INSERT INTO notes VALUES (-1, 'later')", NOW);
        answers(&mut source, next, vec![later]);
        assert_eq!(bytes_of(&snapshot), stream, "a snapshot never changes");

        let target_dir = tempfile::tempdir().unwrap();
        let mut target = open(2, target_dir.path());
        let ddl = command(&target, "CREATE TABLE other (a int PRIMARY KEY)", NOW);
        answers(&mut target, 1, vec![ddl]);
        let data_file = target.options.data_file.clone();
        let staged = crate::install::stage(&stream[..], &data_file, kv::IoMode::Portable).unwrap();
        target.can_install(&staged).unwrap();
        let mut target = target.install(staged).unwrap();
        assert_eq!(target.applied, snapshot.header().position());
        assert!(target.executor.catalog.table("other").is_none());
        assert!(target.executor.catalog.table("notes").is_some());
        let reinstalled = build(&mut target);
        assert_eq!(bytes_of(&reinstalled), stream);
        let versions = table_versions(&target);
        drop(target);
        let reopened = Coordinator::open(options(2, target_dir.path()), None).unwrap();
        assert_eq!(reopened.applied, snapshot.header().position());
        assert_eq!(table_versions(&reopened), versions);
    }

    /// A damaged or cut-short stream is refused before anything is swapped: the staging
    /// directory is gone and the replica's own state is untouched.
    #[test]
    fn a_damaged_snapshot_is_refused_and_changes_nothing() {
        let source_dir = tempfile::tempdir().unwrap();
        let mut source = open(1, source_dir.path());
        fill(&mut source, 500);
        let stream = bytes_of(&build(&mut source));
        let target_dir = tempfile::tempdir().unwrap();
        let data_file = options(1, target_dir.path()).data_file;
        let mut flipped = stream.clone();
        let middle = flipped.len() / 2;
        flipped[middle] ^= 0x40;
        for damaged in [
            flipped,
            stream[..stream.len() - 3].to_vec(),
            b"HLSNAP00".to_vec(),
        ] {
            let error = crate::install::stage(&damaged[..], &data_file, kv::IoMode::Portable)
                .err()
                .expect("a damaged snapshot is refused");
            assert_eq!(error.kind, sql::ErrorKind::DataCorrupted, "{error:?}");
            let staging = target_dir.path().join("data.install");
            assert!(!staging.exists(), "the staging directory is removed");
        }
    }

    /// A stop after the staged files were marked ready but before they were all moved: the
    /// next open finishes the swap, and the replica has the snapshot's state.
    #[test]
    fn an_install_interrupted_after_its_marker_finishes_at_open() {
        let source_dir = tempfile::tempdir().unwrap();
        let mut source = open(2, source_dir.path());
        fill(&mut source, 200);
        let snapshot = build(&mut source);
        let stream = bytes_of(&snapshot);
        let target_dir = tempfile::tempdir().unwrap();
        drop(open(2, target_dir.path()));
        let data_file = options(2, target_dir.path()).data_file;
        crate::install::stage(&stream[..], &data_file, kv::IoMode::Portable).unwrap();
        let staging = target_dir.path().join("data.install");
        std::fs::write(staging.join("READY"), b"").unwrap();
        // One file already moved, the rest not.
        std::fs::rename(staging.join("data.p1"), target_dir.path().join("data.p1")).unwrap();
        let mut reopened = Coordinator::open(options(2, target_dir.path()), None).unwrap();
        assert!(!staging.exists());
        assert_eq!(reopened.applied, snapshot.header().position());
        assert_eq!(bytes_of(&build(&mut reopened)), stream);
    }
}
