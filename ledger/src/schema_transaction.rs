//! Schema changes inside a transaction block. They apply at the transaction's COMMIT, in
//! its command, before its row writes and all or nothing with them; and each one is tried
//! when its statement runs (with the transaction's earlier ones), so its errors come then,
//! as in PostgreSQL, and the session learns the catalog the transaction sees.
//!
//! Both go through `apply_ddl`, one change after another, inside a `SchemaTransaction`: the
//! catalog changes only in the executor's own copy (published when the commit holds), kv
//! tables the changes create are remembered, and the ones they drop are dropped only once
//! everything held. Taking it back drops what was created, restores the catalog, the
//! sequences' states and the tables' versions, and the undo log takes back the rows.

use std::collections::BTreeMap;
use std::sync::Arc;

use plan::{Catalog, DdlPlan, SequenceState};
use serde::{Deserialize, Serialize};
use sql::{SqlError, SqlResult};

use crate::command::{CommandResult, ReadCheck, WriteOp};
use crate::error::kv_error;
use crate::executor::Executor;
use rustc_hash::FxHashMap;

/// A transaction's schema changes so far, planned against catalog version `base_version`,
/// with the writes it staged before each (they apply in the order they were made).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SchemaChanges {
    pub base_version: u64,
    pub steps: Vec<SchemaStep>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum SchemaStep {
    Change(DdlPlan),
    Writes(Vec<WriteOp>),
    /// The states the transaction's statements left the sequences it made in (their values
    /// were drawn by the session: nobody else can call them before COMMIT).
    SequenceStates(Vec<(u32, SequenceState)>),
}

/// What a transaction's schema changes did so far, to keep or take back.
pub(crate) struct SchemaTransaction {
    catalog: Arc<Catalog>,
    sequences: BTreeMap<u32, SequenceState>,
    table_versions: Vec<FxHashMap<u32, u64>>,
    /// kv tables created: (partition, relation id, kv name).
    created: Vec<(usize, u32, String)>,
    /// kv tables to drop once the changes hold: (partition, kv name, the relation id whose
    /// storage it was, when the relation goes with it).
    dropped: Vec<(usize, String, Option<u32>)>,
}

impl Executor {
    /// Validates the reads (a SERIALIZABLE transaction reads nothing after its first schema
    /// change), applies `schema` on the partitions this executor holds (all of them), then
    /// the writes staged after its last change.
    pub(crate) fn apply_commit_with_schema(
        &mut self,
        schema: SchemaChanges,
        reads: &[ReadCheck],
        ops: Vec<WriteOp>,
        now_micros: i64,
        version: u64,
    ) -> CommandResult {
        self.begin_schema_transaction()?;
        let result = self
            .apply_commit(reads, Vec::new(), now_micros, version)
            .and_then(|_| self.apply_schema_changes(schema, now_micros, version))
            .and_then(|()| self.apply_commit(&[], ops, now_micros, version));
        match result {
            Ok(outcome) => {
                self.keep_schema_transaction()?;
                Ok(outcome)
            }
            Err(e) => {
                self.rollback_to(0);
                self.take_back_schema_transaction()?;
                Err(e)
            }
        }
    }

    /// Runs a transaction's read or staged statement (`run`) as the transaction sees the
    /// database: after its schema changes, if any, which are then taken back.
    pub(crate) fn with_schema_changes<T>(
        &mut self,
        schema: Option<&SchemaChanges>,
        now_micros: i64,
        run: impl FnOnce(&mut Executor) -> SqlResult<T>,
    ) -> SqlResult<T> {
        let Some(schema) = schema else {
            return run(self);
        };
        self.check_running()?;
        self.rollback_to(0);
        self.begin_schema_transaction()?;
        // Rows the steps insert into tables without a primary key get negative row ids, the
        // kind a transaction's own rows have until it commits (they cannot be changed by key
        // until then, as their ids are the commit's).
        let rowid_next = std::mem::replace(&mut self.rowid_next, 1 << 63);
        // Outside log order: the events the steps create take timestamps that go with them
        // (from a range of their own), and the command being applied keeps its own.
        let timestamps = self.clock.timestamps;
        self.clock.timestamps.current.end = None;
        let result = self
            .apply_schema_changes(schema.clone(), now_micros, 0)
            .and_then(|()| run(self));
        self.clock.timestamps = timestamps;
        self.rowid_next = rowid_next;
        self.rollback_to(0);
        if let Err(e) = self.take_back_schema_transaction() {
            // The storage may keep what was made: stop, so a restart replays the log.
            self.fail(e.clone());
            return Err(e);
        }
        result
    }

    fn apply_schema_changes(
        &mut self,
        schema: SchemaChanges,
        now_micros: i64,
        version: u64,
    ) -> SqlResult<()> {
        if self.catalog.version != schema.base_version {
            return Err(SqlError::serialization_failure(
                "another session changed the schema while this transaction was changing it; retry the transaction",
            ));
        }
        for step in schema.steps {
            match step {
                SchemaStep::Change(change) => {
                    self.apply_ddl(change, version)?;
                }
                SchemaStep::Writes(ops) => {
                    self.apply_commit(&[], ops, now_micros, version)?;
                }
                SchemaStep::SequenceStates(states) => {
                    for (id, state) in states {
                        // One a later change dropped is gone with it.
                        if self.catalog.sequence_by_id(id).is_some() {
                            self.set_sequence_state(id, state)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn begin_schema_transaction(&mut self) -> SqlResult<()> {
        self.holds_every_shard()?;
        let table_versions = self
            .shards
            .iter()
            .flatten()
            .map(|s| s.table_versions.clone())
            .collect();
        self.schema_transaction = Some(SchemaTransaction {
            catalog: self.catalog.clone(),
            sequences: self.sequences.states(),
            table_versions,
            created: Vec::new(),
            dropped: Vec::new(),
        });
        Ok(())
    }

    /// Whether schema changes are being applied inside a transaction (their catalog is not
    /// published yet and what they drop waits).
    pub(crate) fn in_schema_transaction(&self) -> bool {
        self.schema_transaction.is_some()
    }

    /// A kv table made for relation `id` in `partition`.
    pub(crate) fn note_created_storage(&mut self, partition: usize, id: u32, name: &str) {
        if let Some(t) = &mut self.schema_transaction {
            t.created.push((partition, id, name.to_string()));
        }
    }

    /// Drops kv table `name` in every partition (and forgets relation `id`'s storage, when
    /// given) — at once, or inside a schema transaction once it holds.
    pub(crate) fn drop_kv_table_everywhere(
        &mut self,
        name: &str,
        id: Option<u32>,
    ) -> SqlResult<()> {
        if let Some(t) = &mut self.schema_transaction {
            for partition in 0..self.shards.len() {
                t.dropped.push((partition, name.to_string(), id));
            }
            return Ok(());
        }
        for shard in self.every_shard()? {
            drop_now(shard, name, id)?;
        }
        Ok(())
    }

    /// The changes hold: what they dropped goes, and their catalog is published.
    fn keep_schema_transaction(&mut self) -> SqlResult<()> {
        let Some(t) = self.schema_transaction.take() else {
            return Ok(());
        };
        for (partition, name, id) in t.dropped {
            drop_now(self.shard(partition)?, &name, id)?;
        }
        let catalog = (*self.catalog).clone();
        self.set_catalog(catalog)
    }

    /// The changes are taken back (the undo log first, by the caller).
    fn take_back_schema_transaction(&mut self) -> SqlResult<()> {
        let Some(t) = self.schema_transaction.take() else {
            return Ok(());
        };
        self.catalog = t.catalog;
        self.sequences.restore(t.sequences);
        for (partition, id, name) in t.created.iter().rev() {
            let old_storage = self
                .catalog
                .storages()
                .find(|(relation, _)| relation == id)
                .map(|(_, name)| name.to_string());
            let shard = self.shard(*partition)?;
            shard.engine.drop_table(name).map_err(kv_error)?;
            match old_storage.and_then(|s| shard.engine.table(&s)) {
                Some(handle) => shard.storage.insert(*id, handle),
                None => shard.storage.remove(id),
            };
        }
        for (shard, versions) in self.shards.iter_mut().flatten().zip(t.table_versions) {
            shard.table_versions = versions;
        }
        Ok(())
    }
}

fn drop_now(shard: &mut crate::partition::Shard, name: &str, id: Option<u32>) -> SqlResult<()> {
    shard.engine.drop_table(name).map_err(kv_error)?;
    if let Some(id) = id {
        shard.storage.remove(&id);
        shard.table_versions.remove(&id);
    }
    Ok(())
}
