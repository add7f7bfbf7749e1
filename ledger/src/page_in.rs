//! Reading a log entry's pages ahead of applying it. Once the ledger's tables outgrow the
//! buffer pool, nearly every transfer needs a page that is not in memory — the leaf its id
//! goes into in the transfers table, the leaf its debit account's history entry goes into —
//! and applying the entry's commands one after another waits for those reads one after
//! another (a device latency each, with the executor idle). Before applying an entry of
//! several commands, the coordinator hands them here: the rows of every INSERT INTO
//! transfers among them (a CALL of a transfer procedure, a plain INSERT) are built, and the
//! pages on the way to their keys are read in batches whose reads are all in flight at once
//! (`kv::Engine::page_in`). The commands then apply as before, from memory. On a single
//! node the same happens earlier, as the log writes the entry, with the reads left in
//! flight (`coordinator/read_ahead.rs`).
//!
//! Only a hint: it changes nothing a command sees. A row that cannot be built here (a
//! default that needs a sequence, an expression that fails) is skipped and fails, or not, when
//! its command applies; a page that cannot be read is read, and its error reported, by the
//! command that needs it.

use plan::{EvalEnv, InsertSource, LedgerRole, Step, WritePlan};
use sql::Value;

use crate::apply::{insert_sources, RowBuilder};
use crate::command::Command;
use crate::executor::Executor;
use crate::row::Row;

impl Executor {
    /// Whether some partition held here has pages outside the buffer pool, so that reading
    /// ahead may pay.
    pub(crate) fn pages_outside_pool(&self) -> bool {
        self.shards
            .iter()
            .flatten()
            .any(|shard| !shard.engine.all_resident())
    }

    /// Waits for the reads `page_in_ahead` left in flight, in every partition held here.
    pub(crate) fn complete_page_in(&mut self) {
        for shard in self.shards.iter_mut().flatten() {
            shard.engine.complete_page_in();
        }
    }

    /// Reads ahead the pages the transfers among `commands` (an entry's, about to be
    /// applied in order) will touch at random; with `submit`, the last reads are left in
    /// flight, for an entry that applies after the one about to.
    pub(crate) fn page_in_ahead(&mut self, commands: &[Command], submit: bool) {
        let mut rows = Vec::new();
        let mut table = None;
        for command in commands {
            match command {
                Command::Write {
                    plan,
                    params,
                    now_micros,
                } => self.transfer_rows(plan, params, *now_micros, &mut table, &mut rows),
                Command::Procedure {
                    steps,
                    params,
                    now_micros,
                } => {
                    for step in steps {
                        if let Step::Write(plan) = step {
                            self.transfer_rows(plan, params, *now_micros, &mut table, &mut rows);
                        }
                    }
                }
                _ => {}
            }
        }
        if let Some(table) = table {
            self.page_in_rows(&table, rows.iter(), submit);
        }
    }

    /// Adds to `rows` the rows `plan` inserts into the ledger's transfers table, built as
    /// the insert will build them (`table` is set to that table).
    fn transfer_rows(
        &mut self,
        plan: &WritePlan,
        params: &[Value],
        now_micros: i64,
        table: &mut Option<std::sync::Arc<plan::TableDef>>,
        rows: &mut Vec<Row>,
    ) {
        let WritePlan::Insert(p) = plan else {
            return;
        };
        let Ok(def) = self.resolve(plan.table()) else {
            return;
        };
        if def.ledger != Some(LedgerRole::Transfers) || matches!(p.source, InsertSource::Query(_)) {
            return;
        }
        let sources = {
            let reader = self.command_reader();
            let env = reader.env(params, now_micros);
            insert_sources(&reader, &p.source, &env)
        };
        let Ok(sources) = sources else {
            return;
        };
        let env = EvalEnv::without_subqueries(params, now_micros);
        let mut builder = RowBuilder::new(&def, &p.target_columns);
        rows.extend(
            sources
                .into_iter()
                .filter_map(|values| builder.insert_row(p, values, &env).ok()),
        );
        table.get_or_insert(def);
    }
}
