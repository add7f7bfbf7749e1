//! TigerBeetle's batch calls, `create_transfers(...)` and `create_accounts(...)`: each event
//! applied on its own with its own result, except that an event with `linked` chains the
//! next one to it and a chain applies whole or not at all. The results follow TigerBeetle's
//! rules: the first event of a chain that does not create — `exists` included, so a resend
//! of half a chain applies nothing — breaks the chain, and every other event of it is
//! `linked_event_failed`; the last event of a batch that is still linked is
//! `linked_event_chain_open` whatever came before it. Only an IO error fails the command
//! as a whole.

use plan::{EvalEnv, LedgerRole, TableDef};
use sql::{SqlError, SqlResult, Value};

use crate::apply::build_row;
use crate::command::CommandResult;
use crate::error::is_storage_failure;
use crate::executor::Executor;
use crate::row::Row;

/// What became of one event of a batch.
enum EventResult {
    Created,
    Exists,
    Failed(SqlError),
    /// Not applied (or rolled back) because event `.0` (0-based, in the batch) broke its
    /// chain.
    LinkedEventFailed(usize),
    ChainOpen,
}

/// Why a chain did not apply: an event broke it (the results so far, everything rolled
/// back), or storage failed.
enum ChainEnd {
    Broken(Vec<EventResult>),
    Storage(SqlError),
}

impl Executor {
    /// `create_transfers` or `create_accounts` (which, `table`'s ledger role says): rows
    /// for `columns`, `linked[i]` chaining row i+1 to row i. One result row per event.
    pub(crate) fn apply_ledger_batch(
        &mut self,
        table: &plan::TableRef,
        columns: &[usize],
        rows: Vec<Row>,
        linked: &[bool],
        now_micros: i64,
        version: u64,
    ) -> CommandResult {
        let def = self.resolve(table)?;
        let noun = match def.ledger {
            Some(LedgerRole::Transfers) => "transfer",
            Some(LedgerRole::Accounts) => "account",
            _ => {
                return Err(SqlError::internal(
                    "a ledger batch on a table that is neither accounts nor transfers",
                ))
            }
        };
        let env = EvalEnv::without_subqueries(&[], now_micros);
        let id_at = def
            .column_index("id")
            .and_then(|c| columns.iter().position(|&x| x == c));
        let id = |r: &Row| id_at.map_or(Value::Null, |i| r[i].clone());
        let is_linked = |i: usize| linked.get(i).copied().unwrap_or(false);
        let mut results: Vec<Row> = Vec::with_capacity(rows.len());
        let mut created = 0;
        let mut start = 0;
        while start < rows.len() {
            let mut end = start;
            while end + 1 < rows.len() && is_linked(end) {
                end += 1;
            }
            let chain = &rows[start..=end];
            let outcome =
                self.apply_chain(&def, columns, chain, start, is_linked(end), &env, version)?;
            for (i, (row, result)) in chain.iter().zip(outcome).enumerate() {
                created += matches!(result, EventResult::Created) as u64;
                results.push(result_row(start + i, id(row), noun, result));
            }
            start = end + 1;
        }
        Ok(Executor::outcome(created, results))
    }

    /// Applies the events of one chain (or one event on its own) starting at batch
    /// position `first`; `open`: the chain's last event is linked to one the batch lacks.
    #[allow(clippy::too_many_arguments)]
    fn apply_chain(
        &mut self,
        def: &TableDef,
        columns: &[usize],
        rows: &[Row],
        first: usize,
        open: bool,
        env: &EvalEnv<'_>,
        version: u64,
    ) -> SqlResult<Vec<EventResult>> {
        let chained = rows.len() > 1 || open;
        let mark = self.undo_len();
        let last = rows.len() - 1;
        let run = |ex: &mut Executor| -> Result<Vec<EventResult>, ChainEnd> {
            let mut results = Vec::with_capacity(rows.len());
            let mut broken_by = None;
            for (i, values) in rows.iter().enumerate() {
                let result = if open && i == last {
                    EventResult::ChainOpen
                } else if let Some(by) = broken_by {
                    EventResult::LinkedEventFailed(by)
                } else {
                    let applied = build_row(def, columns, values.clone(), env)
                        .and_then(|row| ex.insert_row(def, row, None, env, version));
                    match applied {
                        Ok(Some(_)) => EventResult::Created,
                        Ok(None) => EventResult::Exists,
                        Err(e) if is_storage_failure(&e) => return Err(ChainEnd::Storage(e)),
                        Err(e) => EventResult::Failed(e),
                    }
                };
                let creates = matches!(result, EventResult::Created);
                if !creates && chained && broken_by.is_none() {
                    broken_by = Some(first + i);
                    ex.rollback_to(mark);
                    for earlier in results.iter_mut() {
                        *earlier = EventResult::LinkedEventFailed(first + i);
                    }
                } else if matches!(result, EventResult::Failed(_)) {
                    // An event on its own: what it wrote before it failed goes.
                    ex.rollback_to(mark);
                }
                // What a failure burned stays, rolled back or not.
                ex.burn_failed_ids(version).map_err(ChainEnd::Storage)?;
                results.push(result);
            }
            match broken_by {
                Some(_) => Err(ChainEnd::Broken(results)),
                None => Ok(results),
            }
        };
        match self.with_account_set(def, rows.len(), version, run, ChainEnd::Storage) {
            Ok(results) | Err(ChainEnd::Broken(results)) => Ok(results),
            Err(ChainEnd::Storage(e)) => Err(e),
        }
    }
}

/// TigerBeetle's name for the result an error stands for (the detail's `result: ...`).
fn result_name(e: &SqlError) -> String {
    e.detail
        .as_deref()
        .and_then(|d| d.strip_prefix("result: "))
        .map_or_else(|| "failed".into(), str::to_string)
}

/// One result row: index (1-based), id, status (`created`, `exists`, `failed`),
/// TigerBeetle's result, SQLSTATE, message.
fn result_row(i: usize, id: Value, noun: &str, result: EventResult) -> Row {
    let text = |s: &str| Value::Text(s.into());
    let (status, result, sqlstate, message) = match result {
        EventResult::Created => ("created", text("created"), Value::Null, Value::Null),
        EventResult::Exists => ("exists", text("exists"), Value::Null, Value::Null),
        EventResult::Failed(e) => (
            "failed",
            Value::Text(result_name(&e)),
            text(e.sqlstate()),
            Value::Text(e.message),
        ),
        EventResult::LinkedEventFailed(by) => (
            "failed",
            text("linked_event_failed"),
            Value::Null,
            Value::Text(format!(
                "not applied: {noun} {} of its linked chain failed",
                by + 1
            )),
        ),
        EventResult::ChainOpen => (
            "failed",
            text("linked_event_chain_open"),
            text("23514"),
            Value::Text(format!(
                "the last {noun} of the batch is linked to a next one that does not exist"
            )),
        ),
    };
    vec![
        Value::Int(i as i64 + 1),
        id,
        Value::Text(status.into()),
        result,
        sqlstate,
        message,
    ]
}
