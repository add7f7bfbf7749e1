//! A multi-row `INSERT INTO transfers` split across the partitions' threads.
//!
//! Such a statement touches every partition, so it would run on the coordinator alone while
//! the partition threads wait. But a plain transfer (one that neither posts, voids nor
//! expires) writes to at most three places that depend on nothing else: its own row and
//! index entries (the partition of its id), its debit account and its credit account (the
//! partitions of theirs). Each account's balance after a row depends only on that account
//! and the rows before it; each transfer id is checked against its own partition. So every
//! partition can take its share of every row — in row order, the writes it gets when the
//! statement runs whole, in the same order — on its own thread, all at once
//! (`Executor::transfer_share`).
//!
//! The result is the whole statement's only when every share succeeds. When any fails
//! (a rule broken, an id that exists already, a row that posts or voids), the coordinator,
//! which then holds every partition and every share's undo list, rolls all of them back and
//! applies the statement whole: its outcome — the first failing row's error, say — is the
//! answer, as it always was. The decision is deterministic, so every replica makes it alike.
//!
//! A log entry often holds several such statements one after another (group commit gathers
//! the sessions' statements). They go to the partitions as one run (`apply_shares`): each
//! partition takes its shares of all of them in order, in one hand-over each way instead
//! of one per statement. When a share of statement k fails, the statements before k stand;
//! every partition's writes for k and the ones after it are rolled back, k applies whole,
//! and the ones after it apply again from there — the answers and the stored rows are the
//! ones applying the statements one at a time gives.

use std::sync::Arc;

use plan::{InsertPlan, InsertSource, LedgerRole, WritePlan};
use sql::{PackedRows, SqlError, SqlResult};

use crate::apply::{prebuilt_row, undecodable};
use crate::command::Command;
use crate::executor::Executor;
use crate::lookahead::RowsAhead;
use crate::row::discard;

/// Statements with fewer rows than this apply whole: splitting costs a hand-over of every
/// partition each way.
const SPLIT_ROWS: usize = 64;

/// The insert of `plan` and its rows when it is a plain INSERT with its rows built, whose
/// outcome is a row count (no RETURNING, no ON CONFLICT, not a procedure's per-row results).
fn plain_insert(plan: &WritePlan) -> Option<(&InsertPlan, &PackedRows)> {
    let WritePlan::Insert(insert) = plan else {
        return None;
    };
    let InsertSource::Packed(rows) = &insert.source else {
        return None;
    };
    let plain = insert.on_conflict.is_none() && insert.returning.is_none() && !insert.call;
    plain.then_some((insert, rows))
}

/// The plan of `command` when it may be split: a plain insert of many rows.
pub(crate) fn splittable(command: &Command) -> Option<&Arc<WritePlan>> {
    let Command::Write { plan, .. } = command else {
        return None;
    };
    plain_insert(plan)
        .is_some_and(|(_, rows)| rows.len() >= SPLIT_ROWS)
        .then_some(plan)
}

/// One statement of a run split across the partitions: its plan and the ledger clock it
/// applies at.
#[derive(Clone)]
pub(crate) struct SplitShare {
    pub plan: Arc<WritePlan>,
    pub clock: i64,
    /// The statement's event timestamps: each row takes the next, on every partition.
    pub timestamps: crate::event_timestamps::Reservation,
}

/// What a partition's shares of a run came to: the outcome of each statement it applied
/// (up to and including the first that failed) and the undo log's length before each.
#[derive(Default)]
pub(crate) struct AppliedShares {
    pub results: Vec<SqlResult<u64>>,
    pub marks: Vec<usize>,
}

impl AppliedShares {
    /// The first statement whose share failed here, with its error.
    pub fn failure(&self) -> Option<(usize, &SqlError)> {
        self.results
            .iter()
            .enumerate()
            .find_map(|(i, r)| r.as_ref().err().map(|e| (i, e)))
    }
}

impl Executor {
    /// Whether `plan` writes into the ledger's transfers table.
    pub(crate) fn inserts_transfers(&self, plan: &WritePlan) -> bool {
        self.catalog
            .table_by_id(plan.table().id)
            .is_some_and(|t| t.ledger == Some(LedgerRole::Transfers))
    }

    /// Applies partition `part`'s shares of a run of split statements (each a splittable
    /// plan and the ledger clock it applies at), in order, with that partition held, leaving
    /// their writes in the undo log for the coordinator to keep or roll back. Stops at the
    /// first share that fails. Returns each applied statement's outcome and where its writes
    /// begin in the undo log.
    pub(crate) fn apply_shares(
        &mut self,
        shares: &[SplitShare],
        part: usize,
        version: u64,
    ) -> AppliedShares {
        self.clear_undo();
        let mut applied = AppliedShares::default();
        for share in shares {
            applied.marks.push(self.undo_len());
            self.clock.now = share.clock;
            self.clock.timestamps.current = share.timestamps;
            let result = self.apply_share(&share.plan, part, version);
            let failed = result.is_err();
            applied.results.push(result);
            if failed {
                break;
            }
        }
        applied
    }

    /// Applies partition `part`'s share of every row of `plan`, a splittable insert (see
    /// the module's documentation), adding its writes to the undo log. Returns the
    /// statement's row count.
    fn apply_share(&mut self, plan: &WritePlan, part: usize, version: u64) -> SqlResult<u64> {
        self.check_running()?;
        let Some((insert, packed)) = plain_insert(plan) else {
            return Err(SqlError::internal(
                "a split statement is a plain insert with its rows built",
            ));
        };
        let table = self.resolve(&insert.table)?;
        let schema = self.ledger_schema()?;
        let rows = packed.rows().map(|row| {
            row.map_err(undecodable)
                .and_then(|row| prebuilt_row(&table, row))
        });
        self.with_account_set(
            &table,
            packed.len(),
            version,
            |ex| {
                let mut rows = RowsAhead::new(rows, true);
                while let Some(row) = rows.next(ex, &table) {
                    let mut row = row?;
                    let shared = ex.transfer_share(&schema, &table, &mut row, part, version);
                    discard(row);
                    shared?;
                }
                Ok(packed.len() as u64)
            },
            |e| e,
        )
    }
}
