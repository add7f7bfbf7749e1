//! `ReadView`: every partition as of one log position, read off the executor.
//!
//! The coordinator takes one between entries (`Executor::read_view`: a `kv::Snapshot` of
//! each partition, with its storage map and table versions, the catalog and the sequence
//! states) and hands it to the session, which runs the query on a read thread while the
//! executor goes on applying commands (`query_on_view`). A long report no longer holds the
//! executor; its result is the state at one log position, like a read between entries.
//! Pages that were not in memory come from the data file (`kv::Snapshot`). Reads a view
//! cannot answer — relation sizes — come back as `None`, and the session asks the executor
//! instead.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use plan::{Catalog, SelectPlan, SessionSequences};
use rustc_hash::FxHashMap;
use sql::{SqlError, SqlResult};

use crate::command::QueryResult;
use crate::error::kv_error;
use crate::executor::{Executor, StatementContext};
use crate::partitions_read::Partitions;
use crate::query::Reader;
use crate::sequences::{SequenceStore, StatementSequences};

/// One partition as of the view's position.
pub(crate) struct ShardSnapshot {
    pub snapshot: kv::Snapshot,
    pub storage: FxHashMap<u32, kv::Table>,
    pub table_versions: FxHashMap<u32, u64>,
}

/// Every partition, the catalog and the sequences as of one log position. `Send`: the
/// session reads it on any thread.
pub struct ReadView {
    catalog: Arc<Catalog>,
    sequences: Arc<SequenceStore>,
    shards: Vec<ShardSnapshot>,
}

/// A read view the executor publishes when it is idle, for point reads the sessions serve on
/// their own threads without the hop to the executor. Valid only while no entry has begun
/// applying since it was taken: the coordinator moves `applying` on *before* it applies an
/// entry, so no reply of that entry reaches a session before the view stops being current,
/// and a session reads its own acknowledged writes.
#[derive(Default)]
pub struct PublishedView {
    /// The index of the last entry the executor began applying.
    applying: AtomicU64,
    /// The view and the `applying` index it was taken at.
    view: Mutex<Option<(u64, Arc<ReadView>)>>,
    /// Point reads that found the view current, and those that did not (and went to the
    /// executor): `SHOW storage_stats`.
    served: AtomicU64,
    missed: AtomicU64,
}

impl PublishedView {
    fn slot(&self) -> std::sync::MutexGuard<'_, Option<(u64, Arc<ReadView>)>> {
        self.view.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An entry begins applying: the view is no longer current (and is let go, so the
    /// entry's writes need not copy the pages it held).
    pub(crate) fn begin_apply(&self, index: u64) {
        self.applying.store(index, Ordering::SeqCst);
        let stale = self.slot().take();
        drop(stale);
    }

    /// Whether a view taken now would be newer than the one published.
    pub(crate) fn stale(&self) -> bool {
        let applying = self.applying.load(Ordering::SeqCst);
        self.slot().as_ref().is_none_or(|(at, _)| *at != applying)
    }

    /// Publishes `view`, taken with no entry applying since the last `begin_apply`.
    pub(crate) fn publish(&self, view: ReadView) {
        let at = self.applying.load(Ordering::SeqCst);
        *self.slot() = Some((at, Arc::new(view)));
    }

    /// The published view, while it is current.
    pub fn current(&self) -> Option<Arc<ReadView>> {
        let view = {
            let slot = self.slot();
            slot.as_ref()
                .filter(|(at, _)| *at == self.applying.load(Ordering::SeqCst))
                .map(|(_, view)| view.clone())
        };
        let counter = if view.is_some() {
            &self.served
        } else {
            &self.missed
        };
        counter.fetch_add(1, Ordering::Relaxed);
        view
    }

    /// How many point reads `current` served a view and how many it sent on.
    pub fn point_reads(&self) -> (u64, u64) {
        (
            self.served.load(Ordering::Relaxed),
            self.missed.load(Ordering::Relaxed),
        )
    }
}

impl Executor {
    /// The partitions as they are now, for reading off the executor: a handle per 512 pages
    /// of each partition (`kv::Engine::snapshot`).
    pub(crate) fn read_view(&mut self) -> SqlResult<ReadView> {
        self.check_running()?;
        let mut shards = Vec::with_capacity(self.shards.len());
        for (index, shard) in self.shards.iter_mut().enumerate() {
            let shard = shard.as_mut().ok_or_else(|| {
                SqlError::internal(format!(
                    "partition {index} is lent while a read view is taken"
                ))
            })?;
            shards.push(ShardSnapshot {
                snapshot: shard.engine.snapshot().map_err(kv_error)?,
                storage: shard.storage.clone(),
                table_versions: shard.table_versions.clone(),
            });
        }
        Ok(ReadView {
            catalog: self.catalog.clone(),
            sequences: self.sequences.clone(),
            shards,
        })
    }
}

impl ReadView {
    pub(crate) fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// A reader of the view for a statement of `context` (its overlay, its interrupt),
    /// whose sequence calls go nowhere: `query_on_view` gives its own.
    pub(crate) fn reader<'a>(&'a self, context: &'a StatementContext) -> Reader<'a> {
        Reader {
            partitions: Some(Partitions::Snapshot {
                shards: &self.shards,
                incomplete: Cell::new(false),
            }),
            catalog: &self.catalog,
            overlay: context.overlay.as_deref(),
            record_reads: context.record_reads,
            reads: RefCell::new(Vec::new()),
            // Relation sizes are the executor's to count.
            sizes: false,
            sequences: None,
            working: RefCell::default(),
            random: true,
            backends: None,
            shared_subqueries: RefCell::default(),
            interrupt: context.interrupt.clone(),
            memory: plan::memory::StatementMemory::start(),
        }
    }
}

/// Runs a query on `view`, as `Executor::query` would have at the view's position; None
/// when the view cannot answer it (the caller asks the executor).
pub fn query_on_view(
    view: &ReadView,
    plan: &SelectPlan,
    context: &StatementContext,
    session: SessionSequences,
) -> SqlResult<Option<QueryResult>> {
    let sequences = StatementSequences {
        catalog: view.catalog.clone(),
        store: view.sequences.clone(),
        session,
        allocated: RefCell::new(BTreeMap::new()),
        own: RefCell::default(),
    };
    let mut reader = view.reader(context);
    reader.sequences = Some(Box::new(sequences));
    let env = reader.env(&context.params, context.now_micros);
    let rows = reader.rows(&plan.rel, &[], &env);
    if reader.incomplete() {
        return Ok(None);
    }
    Ok(Some(QueryResult {
        rows: rows?,
        reads: reader.reads.take(),
    }))
}
