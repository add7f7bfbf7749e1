//! Change events (TigerBeetle's `get_change_events`): a row of `change_events` for every
//! change of balances — a transfer, a pending transfer, a post, a void, an expiry — keyed by
//! the event's timestamp, with both accounts' balances after it, so an application can
//! follow the ledger in order.
//!
//! A change touches two accounts, which may live in two partitions, and a transfer split
//! across the partitions' threads (`share`) applies each account's side on that account's
//! thread, which knows only its own balances. So each side writes its part of the row in
//! its account's partition, under the event's key: the shared fields and its own account's
//! balances, the other side's balances NULL. Where both accounts share a partition the
//! second side completes the first's part, so a partition holds at most one part of a row
//! and every row has one or two parts. The whole path, which has both accounts in hand,
//! writes the same parts a split one does, but at once and without reading first: one row
//! where the two accounts share a partition, a part in each where not. A read puts the
//! parts of each key together (`merge_parts`) before anything looks at the row, so every
//! reader sees whole rows; an index of parts would not be an index of rows, so none may be
//! created (`ddl`).
//!
//! Must not: compute anything about the transfer — the callers pass what the rules decided.

use plan::{ChangeColumns, Expr, LedgerSchema, SideColumns, TableDef};
use sql::{SqlResult, Value};

use crate::amount::{self, Balances};
use crate::executor::Executor;
use crate::query::Candidates;
use crate::row::{decode_row, encode_key, Row};

/// What kind of change an event is, by TigerBeetle's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChangeKind {
    SinglePhase,
    Pending,
    Posted,
    Voided,
    Expired,
}

impl ChangeKind {
    fn name(self) -> &'static str {
        match self {
            ChangeKind::SinglePhase => "single_phase",
            ChangeKind::Pending => "two_phase_pending",
            ChangeKind::Posted => "two_phase_posted",
            ChangeKind::Voided => "two_phase_voided",
            ChangeKind::Expired => "two_phase_expired",
        }
    }
}

/// One change of two accounts' balances, as its event records it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Change {
    pub timestamp: i64,
    pub kind: ChangeKind,
    /// The transfer that made it; for an expiry, the pending transfer.
    pub transfer_id: i64,
    /// What it moved: a post's posted amount, a void's or an expiry's released amount.
    pub amount: u128,
    /// The pending transfer a post or void resolved; 0 otherwise.
    pub pending_id: i64,
    pub ledger: i64,
    pub debit_account_id: i64,
    pub credit_account_id: i64,
}

impl Change {
    /// The change a transfer makes that moves `amount` from `debit` to `credit`, pending or
    /// posted at once.
    pub(crate) fn moved(
        transfer_id: i64,
        timestamp: i64,
        pending: bool,
        amount: u128,
        ledger: i64,
        (debit, credit): (i64, i64),
    ) -> Change {
        Change {
            timestamp,
            kind: if pending {
                ChangeKind::Pending
            } else {
                ChangeKind::SinglePhase
            },
            transfer_id,
            amount,
            pending_id: 0,
            ledger,
            debit_account_id: debit,
            credit_account_id: credit,
        }
    }
}

impl Executor {
    /// Records `change` with both accounts' balances after it (`debit` and `credit`, by
    /// their ids): one whole row where they share a partition, each side's part where not. Either
    /// way the key is new in each partition written (event timestamps are unique), so
    /// nothing is read first.
    pub(crate) fn record_change(
        &mut self,
        schema: &LedgerSchema,
        change: &Change,
        debit: &Balances,
        credit: &Balances,
        version: u64,
    ) -> SqlResult<()> {
        let Some((table, columns)) = &schema.changes else {
            return Ok(());
        };
        let partitions = self.shards.len();
        let debit_at = crate::partition::partition_of_id(change.debit_account_id, partitions);
        let credit_at = crate::partition::partition_of_id(change.credit_account_id, partitions);
        let key = encode_key(&[Value::Int(change.timestamp)])?;
        let mut event = shared_fields(table, columns, change)?;
        take_balances(table, &columns.debit, debit, &mut event)?;
        if debit_at != credit_at {
            self.insert_change(table, debit_at, &key, &event, change, version)?;
            event = shared_fields(table, columns, change)?;
        }
        take_balances(table, &columns.credit, credit, &mut event)?;
        self.insert_change(table, credit_at, &key, &event, change, version)
    }

    /// Inserts a change event's row or part under a key that must be new in `partition`.
    fn insert_change(
        &mut self,
        table: &TableDef,
        partition: usize,
        key: &[u8],
        event: &Row,
        change: &Change,
        version: u64,
    ) -> SqlResult<()> {
        let inserted = self.insert_new_row_in(table, partition, key, event, version)?;
        assert!(
            inserted,
            "change event {} recorded twice (event timestamps are unique)",
            change.timestamp
        );
        Ok(())
    }

    /// Records the side of `change` that account `id` (its balances after the change: `balances`)
    /// takes, in the account's partition, completing the other side's part when that
    /// partition holds it (looked for only where both accounts share the partition). Nothing
    /// before migration 0009 made the table.
    pub(crate) fn record_change_side(
        &mut self,
        schema: &LedgerSchema,
        change: &Change,
        id: i64,
        balances: &Balances,
        version: u64,
    ) -> SqlResult<()> {
        let Some((table, columns)) = &schema.changes else {
            return Ok(());
        };
        let debit = id == change.debit_account_id;
        assert!(
            debit || id == change.credit_account_id,
            "account {id} takes no side of the change it records (transfer {})",
            change.transfer_id
        );
        let key = encode_key(&[Value::Int(change.timestamp)])?;
        let partitions = self.shards.len();
        let partition = crate::partition::partition_of_id(id, partitions);
        let side = if debit {
            &columns.debit
        } else {
            &columns.credit
        };
        let other = match debit {
            true => change.credit_account_id,
            false => change.debit_account_id,
        };
        if crate::partition::partition_of_id(other, partitions) != partition {
            // The other side's part lives in its own partition: this one's is new here,
            // written without looking for one first (and found, it is a side twice).
            let mut part = shared_fields(table, columns, change)?;
            take_balances(table, side, balances, &mut part)?;
            return self.insert_change(table, partition, &key, &part, change, version);
        }
        let stored = self.get_raw_in(table.id, partition, &key)?;
        let mut part = match &stored {
            Some(bytes) => decode_row(bytes)?.1,
            None => shared_fields(table, columns, change)?,
        };
        assert!(
            part[side.debits_posted].is_null(),
            "change event {} records account {id}'s side twice",
            change.timestamp
        );
        take_balances(table, side, balances, &mut part)?;
        self.put_row_in(table, partition, &key, stored, &part, version)
    }
}

/// Writes an account's balances into `side`'s columns of an event of `table`.
fn take_balances(
    table: &TableDef,
    side: &SideColumns,
    balances: &Balances,
    event: &mut Row,
) -> SqlResult<()> {
    let columns = [
        side.debits_pending,
        side.debits_posted,
        side.credits_pending,
        side.credits_posted,
    ];
    balances.write_columns(table, columns, event)
}

/// A part of a change event's row with the fields both sides share, balances NULL.
fn shared_fields(table: &TableDef, c: &ChangeColumns, change: &Change) -> SqlResult<Row> {
    let mut part = vec![Value::Null; table.columns.len()];
    part[c.timestamp] = Value::Int(change.timestamp);
    part[c.kind] = Value::Text(change.kind.name().into());
    part[c.transfer_id] = Value::Int(change.transfer_id);
    part[c.transfer_amount] = amount::cell(change.amount, table.columns[c.transfer_amount].ty)?;
    part[c.transfer_pending_id] = Value::Int(change.pending_id);
    part[c.ledger] = Value::Int(change.ledger);
    part[c.debit.account_id] = Value::Int(change.debit_account_id);
    part[c.credit.account_id] = Value::Int(change.credit_account_id);
    Ok(part)
}

/// Whether `table`'s rows are stored in parts that a read puts together.
pub(crate) fn is_merged(table: &TableDef) -> bool {
    table.ledger.is_some_and(|role| role.is_merged())
}

/// Puts the parts of each row together: `rows` in key order, where the parts of one row
/// are neighbours; each column of a row takes the value of the part that has it.
pub(crate) fn merge_parts(rows: &mut Candidates) {
    let mut merged: Candidates = Vec::with_capacity(rows.len());
    for (key, part) in rows.drain(..) {
        let Some((last_key, Some((version, whole)))) = merged.last_mut() else {
            merged.push((key, part));
            continue;
        };
        if *last_key != key {
            merged.push((key, part));
            continue;
        }
        if let Some((part_version, part)) = part {
            *version = (*version).max(part_version);
            for (value, from) in whole.iter_mut().zip(part) {
                if value.is_null() {
                    *value = from;
                }
            }
        }
    }
    *rows = merged;
}

/// Whether `filter` can be decided on a part of a row of `table` alone: it reads only the
/// fields every part holds (not a side's balances) and runs no subquery, which could read
/// any of them. `outer` is the length of the outer row before the table's columns.
pub(crate) fn decided_on_a_part(table: &TableDef, filter: &Expr, outer: usize) -> bool {
    if filter.has_subquery() {
        return false;
    }
    let mut shared = true;
    filter.visit(&mut |e| {
        if let Expr::Column(i, _) = e {
            if let Some(column) = i.checked_sub(outer).and_then(|c| table.columns.get(c)) {
                shared &= !is_side_balance(&column.name);
            }
        }
    });
    shared
}

/// A column holding one side's balance (`debit_account_debits_posted`, ...).
fn is_side_balance(name: &str) -> bool {
    let side = name
        .strip_prefix("debit_account_")
        .or_else(|| name.strip_prefix("credit_account_"));
    side.is_some_and(|balance| balance != "id")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(key: u8, values: &[Option<i64>]) -> (Vec<u8>, Option<(u64, Row)>) {
        let row = values
            .iter()
            .map(|v| v.map_or(Value::Null, Value::Int))
            .collect();
        (vec![key], Some((u64::from(key), row)))
    }

    #[test]
    fn parts_of_one_key_become_one_row() {
        let mut rows = vec![
            part(1, &[Some(1), Some(10), None]),
            part(1, &[Some(1), None, Some(20)]),
            part(2, &[Some(2), Some(30), Some(40)]),
            part(3, &[Some(3), None, Some(50)]),
        ];
        merge_parts(&mut rows);
        let shown: Vec<String> = rows
            .into_iter()
            .map(|r| format!("{:?}", r.1.unwrap().1))
            .collect();
        let expected = [
            vec![Value::Int(1), Value::Int(10), Value::Int(20)],
            vec![Value::Int(2), Value::Int(30), Value::Int(40)],
            vec![Value::Int(3), Value::Null, Value::Int(50)],
        ];
        let expected: Vec<String> = expected.iter().map(|r| format!("{r:?}")).collect();
        assert_eq!(shown, expected);
    }

    #[test]
    fn only_balances_are_a_sides_own() {
        assert!(is_side_balance("debit_account_debits_posted"));
        assert!(is_side_balance("credit_account_credits_pending"));
        assert!(!is_side_balance("debit_account_id"));
        assert!(!is_side_balance("transfer_pending_id"));
        assert!(!is_side_balance("timestamp"));
    }
}
