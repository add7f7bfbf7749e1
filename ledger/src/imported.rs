//! Imported events (TigerBeetle's `imported` flag): accounts and transfers whose
//! `timestamp` their creator gives, for moving a ledger's history in. TigerBeetle's rules,
//! in its order:
//!
//! - A command's events are all imported or none: the first decides, and one that differs
//!   is `imported_event_expected` or `imported_event_not_expected`. An imported event's
//!   timestamp must be positive (`imported_event_timestamp_out_of_range`) and before the
//!   command's own time (`imported_event_timestamp_must_not_advance`); an event that is not
//!   imported must leave `timestamp` 0 (`timestamp_must_be_zero`). These come first,
//!   before even the id.
//! - After its own checks, an imported account's timestamp must be later than every
//!   account's and be no transfer's (`imported_event_timestamp_must_not_regress`); an
//!   imported transfer's later than every transfer's and no account's, and later than its
//!   debit and credit accounts' (`imported_event_timestamp_must_postdate_debit_account`,
//!   `_credit_account`); an imported pending transfer has no timeout
//!   (`imported_event_timeout_must_be_zero`).
//!
//! The latest timestamp of each kind is the larger of the latest the ledger gave one
//! (`EventTimestamps::latest`: exact but for the unused end of a command's range) and the
//! latest imported one (kept in the meta table, so that a failed chain takes it back). An
//! equal timestamp of the other kind can exist only at or before that kind's latest, and
//! only then are its rows read, every partition's — so a command with an imported event
//! applies holding them all (the router sends it to the coordinator). An imported event
//! takes no timestamp from its command's range; its `created_at` is its timestamp's
//! microsecond.

use plan::{LedgerSchema, TableDef};
use sql::{ErrorKind, SqlError, SqlResult};

use crate::error::kv_error;
use crate::executor::Executor;
use crate::row::Row;
use crate::transfer::{broken, flag_at, int};

/// Which kind of event: accounts and transfers each decide their command's import mode.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventKind {
    Account = 0,
    Transfer = 1,
}

impl EventKind {
    /// Where the latest imported timestamp of this kind is kept (the meta table).
    fn latest_key(self) -> &'static [u8] {
        match self {
            EventKind::Account => b"latest_imported_account",
            EventKind::Transfer => b"latest_imported_transfer",
        }
    }

    fn article(self) -> &'static str {
        match self {
            EventKind::Account => "an",
            EventKind::Transfer => "a",
        }
    }

    fn noun(self) -> &'static str {
        match self {
            EventKind::Account => "account",
            EventKind::Transfer => "transfer",
        }
    }
}

/// An imported event's rule broken, with TigerBeetle's result.
fn imported_rule(kind: EventKind, id: i64, message: String, result: &str) -> SqlError {
    broken(kind.noun(), ErrorKind::CheckViolation, id, message, result)
}

fn regressed(kind: EventKind, id: i64, timestamp: i64, what: &str) -> SqlError {
    imported_rule(
        kind,
        id,
        format!("imported timestamp {timestamp} is not later than {what}"),
        "imported_event_timestamp_must_not_regress",
    )
}

impl Executor {
    /// The batch rules of an event about to be created: None when it is not imported,
    /// else the timestamp it gives.
    pub(crate) fn imported_timestamp(
        &mut self,
        schema: &LedgerSchema,
        kind: EventKind,
        row: &Row,
    ) -> SqlResult<Option<i64>> {
        let (id, imported, timestamp) = match kind {
            EventKind::Account => {
                let a = &schema.account;
                (a.id, a.imported, a.timestamp)
            }
            EventKind::Transfer => {
                let t = &schema.transfer;
                (t.id, t.imported, t.timestamp)
            }
        };
        let Some(timestamp_column) = timestamp else {
            return Ok(None);
        };
        let id = int(&row[id]).unwrap_or(0);
        let is_imported = flag_at(row, imported);
        let first = &mut self.transfers.first_imported[kind as usize];
        let batch_imported = *first.get_or_insert(is_imported);
        if batch_imported != is_imported {
            let (message, result) = if is_imported {
                (
                    "the command's first event is not imported, so none may be",
                    "imported_event_not_expected",
                )
            } else {
                (
                    "the command's first event is imported, so every one must be",
                    "imported_event_expected",
                )
            };
            return Err(imported_rule(kind, id, message.into(), result));
        }
        let given = int(&row[timestamp_column]).unwrap_or(0);
        if !is_imported {
            if given != 0 {
                return Err(imported_rule(
                    kind,
                    id,
                    "timestamp is set by the ledger unless the event is imported".into(),
                    "timestamp_must_be_zero",
                ));
            }
            return Ok(None);
        }
        if given <= 0 {
            return Err(imported_rule(
                kind,
                id,
                format!("an imported event needs a positive timestamp (nanoseconds), not {given}"),
                "imported_event_timestamp_out_of_range",
            ));
        }
        let now = self.clock.timestamps.peek();
        if given >= now {
            return Err(imported_rule(
                kind,
                id,
                format!("imported timestamp {given} is not before the ledger's time {now}"),
                "imported_event_timestamp_must_not_advance",
            ));
        }
        Ok(Some(given))
    }

    /// An imported account's timestamp against the stored events'.
    pub(crate) fn check_imported_account(
        &mut self,
        schema: &LedgerSchema,
        id: i64,
        timestamp: i64,
    ) -> SqlResult<()> {
        self.check_not_regressed(schema, EventKind::Account, id, timestamp)
    }

    /// TigerBeetle's `imported_event_timestamp_must_not_regress`: an imported event of
    /// `kind` later than every event of its kind, and equal to none of the other kind.
    fn check_not_regressed(
        &mut self,
        schema: &LedgerSchema,
        kind: EventKind,
        id: i64,
        timestamp: i64,
    ) -> SqlResult<()> {
        let (own, other, other_table, other_column) = match kind {
            EventKind::Account => (
                "the latest account's",
                EventKind::Transfer,
                schema.transfers.clone(),
                schema.transfer.timestamp,
            ),
            EventKind::Transfer => (
                "the latest transfer's",
                EventKind::Account,
                schema.accounts.clone(),
                schema.account.timestamp,
            ),
        };
        if timestamp <= self.latest_timestamp(kind)? {
            return Err(regressed(kind, id, timestamp, own));
        }
        if self.timestamp_taken(other, &other_table, other_column, timestamp)? {
            let equal = format!("{} {}'s, which it equals", other.article(), other.noun());
            return Err(regressed(kind, id, timestamp, &equal));
        }
        Ok(())
    }

    /// An imported transfer's timestamp against the stored events' and, for one that moves
    /// funds (`accounts`: its debit and credit account), against its accounts'.
    pub(crate) fn check_imported_transfer(
        &mut self,
        schema: &LedgerSchema,
        id: i64,
        timestamp: i64,
        accounts: Option<(&Row, &Row)>,
        timeout: i64,
    ) -> SqlResult<()> {
        let kind = EventKind::Transfer;
        self.check_not_regressed(schema, kind, id, timestamp)?;
        let Some((debit, credit)) = accounts else {
            return Ok(());
        };
        let a = &schema.account;
        for (account, side) in [(debit, "debit"), (credit, "credit")] {
            let created = a.timestamp.and_then(|c| int(&account[c])).unwrap_or(0);
            if timestamp <= created {
                return Err(imported_rule(
                    kind,
                    id,
                    format!(
                        "imported timestamp {timestamp} is not later than its {side} account's {created}"
                    ),
                    &format!("imported_event_timestamp_must_postdate_{side}_account"),
                ));
            }
        }
        if timeout != 0 {
            return Err(imported_rule(
                kind,
                id,
                "an imported pending transfer cannot have a timeout".into(),
                "imported_event_timeout_must_be_zero",
            ));
        }
        Ok(())
    }

    /// Records an imported event's timestamp as its kind's latest imported one (rolled
    /// back with the event, as every write is).
    pub(crate) fn record_imported(&mut self, kind: EventKind, timestamp: i64) -> SqlResult<()> {
        let meta = self.meta;
        self.put_raw(meta, kind.latest_key(), Some(&timestamp.to_le_bytes()))
    }

    /// No event of `kind` has a later timestamp than this: the latest the ledger gave one
    /// (`EventTimestamps::latest`) or the latest imported one.
    fn latest_timestamp(&mut self, kind: EventKind) -> SqlResult<i64> {
        let meta = self.meta;
        let stored = self
            .shard(0)?
            .engine
            .get(meta, kind.latest_key())
            .map_err(kv_error)?;
        let imported = match stored {
            Some(bytes) => i64::from_le_bytes(
                bytes
                    .as_slice()
                    .try_into()
                    .map_err(|_| SqlError::internal("unreadable latest imported timestamp"))?,
            ),
            None => 0,
        };
        Ok(imported.max(self.clock.timestamps.latest[kind as usize]))
    }

    /// Whether an event of `kind` (stored in `table`, its timestamp in `column`) has
    /// timestamp `timestamp`. Only one at or before the kind's latest can, and only then
    /// are its rows read (every partition's): an import that goes forward in time, as
    /// imports do, reads none.
    fn timestamp_taken(
        &mut self,
        kind: EventKind,
        table: &TableDef,
        column: Option<usize>,
        timestamp: i64,
    ) -> SqlResult<bool> {
        let Some(column) = column else {
            return Ok(false);
        };
        if timestamp > self.latest_timestamp(kind)? {
            return Ok(false);
        }
        for p in 0..self.partitions() {
            let shard = self.shard(p)?;
            let handle = shard.handle(table.id)?;
            for entry in crate::partition::entries(shard, handle)? {
                let (_, bytes) = entry.map_err(kv_error)?;
                let row = crate::row::decode_row(&bytes)?.1;
                if int(&row[column]) == Some(timestamp) {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }
}
