//! Event timestamps: every account and transfer gets its own `timestamp` (TigerBeetle's:
//! nanoseconds since the epoch, unique, strictly increasing in the order the ledger created
//! them), even many in one statement.
//!
//! Commands apply in log order, but those touching one partition apply on that partition's
//! thread, concurrently with the commands after them. So the timestamps are reserved in log
//! order, before a command is sent anywhere: each command gets a range starting at its
//! `now()` in nanoseconds, or just past the previous command's range if that is later, as
//! long as the most events it can create (`Command::event_bound`). Its events take the
//! range's timestamps in the order they are created; what it leaves unused is a gap, never
//! given out again. A command whose events cannot be counted beforehand (an INSERT ...
//! SELECT, a procedure) applies on the coordinator alone, and its range ends where its last
//! event took. Expiries, which apply on the coordinator before the command that finds them
//! due, are events too (change events): they take a range of their own, without an end,
//! before the command's. Every replica reserves the same ranges at the same log positions, so every
//! replica gives every event the same timestamp; where the last range ended is part of the
//! checkpointed state.

use serde::{Deserialize, Serialize};

use crate::command::{Command, WriteOp};

pub(crate) const NANOS_PER_MICRO: i64 = 1_000;

/// One command's timestamps: the next to give out and where its range ends (exclusive;
/// None: the command applies alone and takes as many as it needs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Reservation {
    pub next: i64,
    pub end: Option<i64>,
}

/// The executor's event timestamps: where the reserved ranges end, the current command's
/// range, and the latest timestamp each kind of event may have.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct EventTimestamps {
    /// Every timestamp below this was reserved by an earlier command.
    pub(crate) reserved_to: i64,
    pub(crate) current: Reservation,
    /// No account (`[0]`) or transfer (`[1]`) the ledger timed has a later timestamp
    /// (imported ones are recorded apart: `imported`). Moved by each event as it takes its
    /// timestamp, and — since a partition's thread takes them out of sight — to the end of
    /// the range of each command lent to one (`lent`): at most the unused end of a range
    /// above the latest event.
    pub(crate) latest: [i64; 2],
}

impl EventTimestamps {
    /// The timestamps as a checkpoint recorded them.
    pub(crate) fn restored(reserved_to: i64, latest: [i64; 2]) -> EventTimestamps {
        EventTimestamps {
            reserved_to,
            current: Reservation {
                next: reserved_to,
                end: Some(reserved_to),
            },
            latest,
        }
    }

    /// Reserves the range of the command about to apply at ledger clock `now_micros`, for
    /// at most `bound` events (None: as many as it creates).
    pub(crate) fn reserve(&mut self, now_micros: i64, bound: Option<u64>) {
        let start = now_micros
            .saturating_mul(NANOS_PER_MICRO)
            .max(self.reserved_to);
        let end = bound.map(|n| start.saturating_add(n.min(i64::MAX as u64) as i64));
        self.current = Reservation { next: start, end };
        self.reserved_to = end.unwrap_or(start);
    }

    /// The current command goes to a partition's thread, which may create events of the
    /// kinds `kinds` says (accounts, transfers) anywhere in its range.
    pub(crate) fn lent(&mut self, kinds: [bool; 2]) {
        let Reservation { next, end } = self.current;
        let Some(last) = end.filter(|&end| end > next).map(|end| end - 1) else {
            return;
        };
        for (latest, _) in self.latest.iter_mut().zip(kinds).filter(|(_, may)| *may) {
            *latest = (*latest).max(last);
        }
    }

    /// The timestamp the next event created gets (taken with `take` once it is created).
    pub(crate) fn peek(&self) -> i64 {
        self.current.next
    }

    /// Takes the next timestamp for an event of `kind` (0 an account, 1 a transfer) just
    /// created.
    pub(crate) fn take(&mut self, kind: usize) -> i64 {
        let taken = self.current.next;
        self.latest[kind] = self.latest[kind].max(taken);
        self.current.next += 1;
        match self.current.end {
            // A command that outgrew its range would give the next command's timestamps
            // away: two events with one timestamp, different on replicas whose partitions
            // differ. Its bound is wrong, which is a bug.
            Some(end) => assert!(
                taken < end,
                "a command created more events than its reserved timestamps ({taken} >= {end})"
            ),
            None => self.reserved_to = self.current.next,
        }
        taken
    }
}

impl Command {
    /// Which kinds of event — accounts, transfers — the command may create: those of the
    /// ledger tables it inserts into (both for a procedure).
    pub(crate) fn event_kinds(&self, catalog: &plan::Catalog) -> [bool; 2] {
        let mut kinds = [false; 2];
        let mut mark = |table: u32| match catalog.table_by_id(table).and_then(|t| t.ledger) {
            Some(plan::LedgerRole::Accounts) => kinds[0] = true,
            Some(plan::LedgerRole::Transfers) => kinds[1] = true,
            _ => {}
        };
        match self {
            Command::Write { plan, .. } | Command::WriteWithSequences { plan, .. } => {
                mark(plan.table().id)
            }
            Command::Commit { ops, .. } | Command::CommitWithSchema { ops, .. } => {
                for op in ops {
                    if let WriteOp::Insert { table, .. } = op {
                        mark(table.id);
                    }
                }
            }
            Command::LedgerBatch { table, .. } | Command::Copy { table, .. } => mark(table.id),
            Command::Procedure { .. } => return [true; 2],
            _ => {}
        }
        kinds
    }

    /// The most accounts and transfers the command can create (an upper bound: the rows it
    /// inserts, whatever table they go to), or None when that is known only by applying it.
    pub(crate) fn event_bound(&self) -> Option<u64> {
        match self {
            Command::Write { plan, .. } | Command::WriteWithSequences { plan, .. } => {
                write_rows(plan)
            }
            Command::Commit { ops, .. } => Some(
                ops.iter()
                    .filter(|op| matches!(op, WriteOp::Insert { .. }))
                    .count() as u64,
            ),
            // Its writes are also staged between its schema changes; it applies on the
            // coordinator holding every partition anyway.
            Command::CommitWithSchema { .. } => None,
            Command::LedgerBatch { rows, .. } | Command::Copy { rows, .. } => {
                Some(rows.len() as u64)
            }
            Command::Procedure { .. } => None,
            Command::Ddl { .. }
            | Command::QueryWithSequences { .. }
            | Command::AllocateSequenceValues { .. }
            | Command::ClusterSettings(_)
            | Command::Pulse { .. } => Some(0),
        }
    }
}

/// The rows a write statement inserts, when its plan holds them.
fn write_rows(plan: &plan::WritePlan) -> Option<u64> {
    use plan::{InsertSource, WritePlan};
    match plan {
        WritePlan::Insert(insert) => match &insert.source {
            InsertSource::Values(rows) => Some(rows.len() as u64),
            InsertSource::Rows(rows) => Some(rows.len() as u64),
            InsertSource::Packed(rows) => Some(rows.len() as u64),
            InsertSource::Query(_) => None,
        },
        WritePlan::Update(_) | WritePlan::Delete(_) => Some(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_follow_the_clock_and_never_overlap() {
        let mut t = EventTimestamps::restored(0, [0; 2]);
        t.reserve(10, Some(3));
        assert_eq!((t.take(1), t.take(1)), (10_000, 10_001));
        assert_eq!(t.latest, [0, 10_001]);
        // The same microsecond again: after the previous range, not inside it. Lent to a
        // partition's thread: the latest an account may have is the range's end.
        t.reserve(10, Some(2));
        t.lent([true, false]);
        assert_eq!(t.latest, [10_004, 10_001]);
        assert_eq!(t.take(0), 10_003);
        // A later clock starts at its own time.
        t.reserve(20, Some(1));
        assert_eq!(t.take(1), 20_000);
        // Unbounded: the range ends where the last event took.
        t.reserve(20, None);
        t.take(0);
        t.take(1);
        assert_eq!(t.reserved_to, 20_003);
        assert_eq!(t.latest, [20_001, 20_002]);
        t.reserve(20, Some(1));
        assert_eq!(t.peek(), 20_003);
    }

    #[test]
    #[should_panic(expected = "more events than its reserved timestamps")]
    fn a_command_cannot_outgrow_its_range() {
        let mut t = EventTimestamps::restored(0, [0; 2]);
        t.reserve(1, Some(1));
        t.take(1);
        t.take(1);
    }
}
