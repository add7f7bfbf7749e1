//! Ledger semantics on the executor: creating accounts and transfers, two-phase transfers
//! and their expiry, balance limits, idempotent transfer ids, and balance history. Every
//! rule is checked when the command applies, in log order, so every replica decides the
//! same; a failing transfer returns an error and the command's undo removes whatever the
//! statement had already written (a multi-row INSERT is one linked chain).
//!
//! Time here is the ledger clock: the largest `now()` of any command applied so far. It
//! only moves forward, is part of the checkpointed state, and decides both `created_at` and
//! when a pending transfer expires, so expiry is the same on every replica.

use std::sync::Arc;

use plan::{LedgerSchema, OnConflict, TableDef};
use sql::{ErrorKind, SqlError, SqlResult, Value};

use crate::account_set::Account;
use crate::amount::{self, Balance, Balances, Given};
use crate::burned_ids::transient_result;
use crate::change_events::Change;
use crate::event_timestamps::NANOS_PER_MICRO;
use crate::executor::Executor;
use crate::imported::EventKind;
use crate::row::{encode_key, Row};
use crate::transfer_exists::{account_difference, transfer_difference};

/// A ledger rule broken: the message names the transfer and the account; the detail gives
/// TigerBeetle's name for the result, for people who know it.
pub(crate) fn rule(kind: ErrorKind, id: i64, message: String, result: &str) -> SqlError {
    broken("transfer", kind, id, message, result)
}

/// A rule of the `noun` (transfer or account) `id` broken, with TigerBeetle's result.
pub(crate) fn broken(
    noun: &str,
    kind: ErrorKind,
    id: i64,
    message: String,
    result: &str,
) -> SqlError {
    SqlError::new(kind, format!("{noun} {id}: {message}")).with_detail(format!("result: {result}"))
}

/// The id of a new account or transfer: NULL is 23502 (`missing` says why one is needed),
/// zero or less 23514, both TigerBeetle's `id_must_not_be_zero`.
fn event_id(noun: &str, value: &Value, missing: &str) -> SqlResult<i64> {
    match int(value) {
        None => Err(broken(
            noun,
            ErrorKind::NotNullViolation,
            0,
            missing.into(),
            "id_must_not_be_zero",
        )),
        Some(id) if id <= 0 => Err(broken(
            noun,
            ErrorKind::CheckViolation,
            id,
            "id must be positive".into(),
            "id_must_not_be_zero",
        )),
        Some(id) => Ok(id),
    }
}

/// An account's own fields, in TigerBeetle's order: the limit flags exclude each other,
/// ledger and code are positive.
fn account_fields(schema: &LedgerSchema, id: i64, row: &Row) -> SqlResult<()> {
    let a = &schema.account;
    if flag(&row[a.debits_must_not_exceed_credits]) && flag(&row[a.credits_must_not_exceed_debits])
    {
        return Err(account_rule(
            ErrorKind::CheckViolation,
            id,
            "debits_must_not_exceed_credits and credits_must_not_exceed_debits exclude each other"
                .into(),
            "flags_are_mutually_exclusive",
        ));
    }
    for (column, name) in [(a.ledger, "ledger"), (a.code, "code")] {
        match int(&row[column]) {
            Some(v) if v > 0 => {}
            given => {
                let kind = if given.is_none() {
                    ErrorKind::NotNullViolation
                } else {
                    ErrorKind::CheckViolation
                };
                return Err(account_rule(
                    kind,
                    id,
                    format!("{name} must be positive"),
                    &format!("{name}_must_not_be_zero"),
                ));
            }
        }
    }
    Ok(())
}

/// A rule of account `id` broken, with TigerBeetle's name for the result.
fn account_rule(kind: ErrorKind, id: i64, message: String, result: &str) -> SqlError {
    broken("account", kind, id, message, result)
}

pub(crate) fn check(id: i64, message: String, result: &str) -> SqlError {
    rule(ErrorKind::CheckViolation, id, message, result)
}

pub(crate) fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

pub(crate) fn flag(v: &Value) -> bool {
    matches!(v, Value::Bool(true))
}

/// A flag in a column a later migration added: false where the table predates it.
pub(crate) fn flag_at(row: &[Value], column: Option<usize>) -> bool {
    column.is_some_and(|c| row.get(c).is_some_and(flag))
}

/// Whether a transfer has one of the flags only a transfer that moves funds may have
/// (balancing or closing): a post or void with one is refused, a split statement's row
/// with one applies whole.
pub(crate) fn balancing_or_closing(schema: &LedgerSchema, row: &Row) -> bool {
    let t = &schema.transfer;
    [
        t.balancing_debit,
        t.balancing_credit,
        t.closing_debit,
        t.closing_credit,
    ]
    .into_iter()
    .any(|c| flag_at(row, c))
}

pub(crate) fn same(a: &Value, b: &Value) -> bool {
    a.compare(b) == Some(std::cmp::Ordering::Equal)
}

pub(crate) fn shown(v: &Value, ty: sql::DataType) -> String {
    v.to_pg_text(ty).unwrap_or_else(|| "NULL".into())
}

pub(crate) fn text(v: &Value) -> &str {
    match v {
        Value::Text(t) => t,
        _ => "",
    }
}

/// Which balance of an account a change moves.
#[derive(Clone, Copy)]
enum Side {
    Debits,
    Credits,
}

impl Executor {
    /// The ledger's columns for the catalog in force, or an error before the ledger
    /// migration has run.
    pub(crate) fn ledger_schema(&mut self) -> SqlResult<Arc<LedgerSchema>> {
        if let Some((version, schema)) = &self.transfers.schema {
            if *version == self.catalog.version {
                return Ok(schema.clone());
            }
        }
        let schema = LedgerSchema::resolve(&self.catalog)?
            .map(Arc::new)
            .ok_or_else(|| SqlError::internal("the ledger tables do not exist yet"))?;
        self.transfers.schema = Some((self.catalog.version, schema.clone()));
        Ok(schema)
    }

    /// An account's or transfer's creation time (microseconds): the ledger clock, or an
    /// imported event's timestamp's microsecond.
    pub(crate) fn created_at(&self, imported: Option<i64>) -> i64 {
        imported.map_or(self.clock.now, |ts| ts.div_euclid(NANOS_PER_MICRO))
    }

    /// A new account's timestamp: the command's next (taken), or an imported account's
    /// own (recorded as the latest imported one).
    fn account_timestamp(&mut self, imported: Option<i64>) -> SqlResult<i64> {
        match imported {
            Some(ts) => self.record_imported(EventKind::Account, ts).map(|()| ts),
            None => Ok(self.clock.timestamps.take(0)),
        }
    }

    /// Moves the ledger clock to a command's `now()` if that is later.
    pub(crate) fn advance_clock(&mut self, now_micros: i64) {
        self.clock.now = self.clock.now.max(now_micros);
    }

    /// A new account, checked in TigerBeetle's order: its id, whether it exists, its flags,
    /// ledger and code. Returns the row to store (balances zero, the creation time set), or
    /// None when an account with the same id and fields exists (TigerBeetle's `exists`: an
    /// idempotent retry) or ON CONFLICT DO NOTHING skips it. ON CONFLICT DO UPDATE is left
    /// to the table's own conflict handling.
    pub(crate) fn create_account(
        &mut self,
        table: &TableDef,
        mut row: Row,
        on_conflict: Option<&OnConflict>,
    ) -> SqlResult<Option<Row>> {
        let schema = self.ledger_schema()?;
        let a = &schema.account;
        let imported = self.imported_timestamp(&schema, EventKind::Account, &row)?;
        let id = event_id("account", &row[a.id], "an account needs an id")?;
        let updates = on_conflict.and_then(OnConflict::update).is_some();
        if !updates {
            let storage = self.storage_of(table)?;
            let key = encode_key(&[Value::Int(id)])?;
            if let Some((_, _, existing)) = self.get_row(storage, &key)? {
                let Some(d) = account_difference(&schema, &row, &existing) else {
                    return Ok(None);
                };
                if on_conflict.is_some() {
                    return Ok(None);
                }
                return Err(account_rule(
                    ErrorKind::UniqueViolation,
                    id,
                    format!(
                        "an account with this id already exists with a different {} ({}, not {})",
                        d.column, d.stored, d.given
                    ),
                    d.result,
                ));
            }
        }
        account_fields(&schema, id, &row)?;
        if let Some(at) = imported {
            self.check_imported_account(&schema, id, at)?;
        }
        for c in [
            a.debits_pending,
            a.debits_posted,
            a.credits_pending,
            a.credits_posted,
        ] {
            row[c] = amount::cell(0, table.columns[c].ty)?;
        }
        row[a.created_at] = Value::TimestampTz(self.created_at(imported));
        let timestamp = self.account_timestamp(imported)?;
        if let Some(c) = a.timestamp {
            row[c] = Value::Int(timestamp);
        }
        Ok(Some(row))
    }

    /// Applies one transfer row. Returns the stored transfer, or None when a transfer with
    /// the same id and the same fields already exists (an idempotent retry). The checks run
    /// in TigerBeetle's order, so the same bad transfer names the same result: the id, then
    /// whether it exists, then the transfer's own fields, then its accounts.
    pub(crate) fn create_transfer(
        &mut self,
        table: &TableDef,
        given: Row,
        on_conflict: Option<&OnConflict>,
        version: u64,
    ) -> SqlResult<Option<Row>> {
        let schema = self.ledger_schema()?;
        let t = &schema.transfer;
        let imported = self.imported_timestamp(&schema, EventKind::Transfer, &given)?;
        let id = event_id(
            "transfer",
            &given[t.id],
            "a transfer needs an id (a positive bigint chosen by the client, so that retries are idempotent)",
        )?;
        let key = encode_key(&[Value::Int(id)])?;
        let mut row = given;
        // Its own timestamp (taken from the command's once it is created) or the one an
        // imported transfer gives, and its creation time.
        let at = self.created_at(imported);
        if let Some(c) = t.timestamp {
            row[c] = Value::Int(imported.unwrap_or(self.clock.timestamps.peek()));
        }
        let (post, void) = (flag(&row[t.post_pending]), flag(&row[t.void_pending]));
        let balancing = flag_at(&row, t.balancing_debit) || flag_at(&row, t.balancing_credit);
        // A transfer that moves funds is stored as given, so it is written here in the same
        // descent that finds whether its id exists (a failure below rolls it back); post and
        // void fill fields from the pending transfer first, and a balancing transfer's
        // amount is known only once its accounts are read, and an imported one's timestamp
        // is checked against the stored transfers' first.
        let written_early = !post
            && !void
            && !balancing
            && imported.is_none()
            && self.write_transfer_early(&schema, table, &key, &mut row, at, version)?;
        if !written_early && self.transfer_resent(&schema, table, &key, &row, on_conflict)? {
            return Ok(None);
        }
        if let Some(result) = self.burned_result(&schema, &key)? {
            return Err(Executor::id_already_failed(id, &result));
        }
        row[t.created_at] = Value::TimestampTz(at);
        let pending = flag(&row[t.pending]);
        let applied = if post || void {
            self.post_or_void(&schema, id, &mut row, imported, version)
        } else {
            self.move_funds(&schema, id, &mut row, pending, imported, version)
        };
        let applied = match applied {
            Ok(()) if !written_early => self
                .put_row(table, &key, None, &row, version)
                .map(|()| self.activity.created()),
            other => other,
        };
        if let Err(e) = &applied {
            if let Some(result) = transient_result(e) {
                self.transfers.burned.push((id, result));
            }
        }
        applied?;
        match imported {
            None => {
                self.clock.timestamps.take(1);
            }
            Some(at) => self.record_imported(EventKind::Transfer, at)?,
        }
        Ok(Some(row))
    }

    /// Writes a transfer that moves funds as given (its timeout 0 where left out, its
    /// creation time `at`) if its id is new, in the descent that finds out: false when the
    /// id exists.
    fn write_transfer_early(
        &mut self,
        schema: &LedgerSchema,
        table: &TableDef,
        key: &[u8],
        row: &mut Row,
        at: i64,
        version: u64,
    ) -> SqlResult<bool> {
        let t = &schema.transfer;
        let timeout_given = row[t.timeout].clone();
        row[t.timeout] = Value::Int(int(&timeout_given).unwrap_or(0));
        row[t.created_at] = Value::TimestampTz(at);
        let written = self.insert_new_row(table, key, row, version)?;
        if written {
            // Counted as its row is written: a failure below takes both back.
            self.activity.created();
        }
        row[t.timeout] = timeout_given;
        Ok(written)
    }

    /// Whether transfer `row` was sent before: true when one with its id is stored with
    /// the same fields (or ON CONFLICT DO NOTHING skips it), false when none is stored, an
    /// error naming the first field that differs otherwise.
    fn transfer_resent(
        &mut self,
        schema: &LedgerSchema,
        table: &TableDef,
        key: &[u8],
        row: &Row,
        on_conflict: Option<&OnConflict>,
    ) -> SqlResult<bool> {
        let storage = self.storage_of(table)?;
        let Some((_, _, existing)) = self.get_row(storage, key)? else {
            return Ok(false);
        };
        let resolved = self.resolved_pending(schema, &existing)?;
        let Some(d) = transfer_difference(schema, row, &existing, resolved.as_ref()) else {
            return Ok(true);
        };
        if matches!(
            on_conflict.map(OnConflict::action),
            Some(OnConflict::DoNothing)
        ) {
            return Ok(true);
        }
        Err(rule(
            ErrorKind::UniqueViolation,
            int(&row[schema.transfer.id]).unwrap_or(0),
            format!(
                "a transfer with this id already exists with a different {} ({}, not {})",
                d.column, d.stored, d.given
            ),
            d.result,
        ))
    }

    /// The pending transfer a stored post or void resolved, for comparing a resend of it.
    fn resolved_pending(&mut self, schema: &LedgerSchema, stored: &Row) -> SqlResult<Option<Row>> {
        let t = &schema.transfer;
        if !flag(&stored[t.post_pending]) && !flag(&stored[t.void_pending]) {
            return Ok(None);
        }
        let Some(pending_id) = int(&stored[t.pending_id]) else {
            return Ok(None);
        };
        let storage = self.storage_of(&schema.transfers)?;
        let key = encode_key(&[Value::Int(pending_id)])?;
        Ok(self.get_row(storage, &key)?.map(|(_, _, row)| row))
    }

    /// A pending or posted transfer: checks its fields, then moves the amount into the
    /// debit account's and the credit account's pending or posted balances.
    fn move_funds(
        &mut self,
        schema: &LedgerSchema,
        id: i64,
        row: &mut Row,
        pending: bool,
        imported: Option<i64>,
        version: u64,
    ) -> SqlResult<()> {
        let Movement {
            debit: debit_id,
            credit: credit_id,
            amount,
            ledger,
            timeout,
        } = movement(schema, id, row, pending)?;
        let given_amount = amount;
        row[schema.transfer.timeout] = Value::Int(timeout);
        let mut debit = self.account(schema, id, debit_id, "debit")?;
        let mut credit = self.account(schema, id, credit_id, "credit")?;
        let a = &schema.account;
        let (debit_ledger, credit_ledger) = (
            int(&debit.row[a.ledger]).unwrap_or(0),
            int(&credit.row[a.ledger]).unwrap_or(0),
        );
        if debit_ledger != credit_ledger {
            return Err(check(
                id,
                format!("account {debit_id} is on ledger {debit_ledger} and account {credit_id} on ledger {credit_ledger}"),
                "accounts_must_have_the_same_ledger",
            ));
        }
        if ledger != debit_ledger {
            return Err(check(
                id,
                format!("the transfer is on ledger {ledger} but its accounts are on ledger {debit_ledger}"),
                "transfer_must_have_the_same_ledger_as_accounts",
            ));
        }
        if let Some(at) = imported {
            let accounts = Some((&debit.row, &credit.row));
            self.check_imported_transfer(schema, id, at, accounts, timeout)?;
        }
        refuse_closed(schema, id, &debit.row, &credit.row)?;
        let amount = balanced_amount(schema, row, amount, &debit.balances, &credit.balances);
        if amount != given_amount {
            let ty = schema.transfers.columns[schema.transfer.amount].ty;
            amount::set_cell(&mut row[schema.transfer.amount], amount, ty)?;
        }
        check_overflow(
            schema,
            id,
            pending,
            amount,
            [
                (debit_id, Some(&debit.balances)),
                (credit_id, Some(&credit.balances)),
            ],
        )?;
        let (debit_balance, credit_balance) = balances(pending);
        add(schema, id, &mut debit, debit_balance, amount)?;
        add(schema, id, &mut credit, credit_balance, amount)?;
        check_limits(schema, id, &debit, Side::Debits)?;
        check_limits(schema, id, &credit, Side::Credits)?;
        close_accounts(schema, row, &mut debit.row, &mut credit.row);
        let now = self.created_at(imported);
        let timestamp = event_timestamp(schema, row);
        let accounts = (debit_id, credit_id);
        let change = Change::moved(id, timestamp, pending, amount, ledger, accounts);
        self.save_accounts(schema, (debit, credit), &change, now, version)?;
        if pending {
            self.record_pending(schema, id, row, version)?;
        }
        Ok(())
    }

    /// Partition `part`'s share of a transfer of a statement split across the partitions
    /// (`crate::share`): the transfer's row if its id is placed here, then its debit and
    /// its credit account's side where those are. Each partition's writes are the ones, in
    /// the order, it gets when the transfer applies whole. The two sides check the
    /// accounts' ledger each against the transfer's, which holds exactly when the whole
    /// transfer's two ledger checks do. An error — any rule broken, an id that exists
    /// already, a transfer that posts, voids or expires (those reach across partitions) —
    /// means only that the statement has to apply whole.
    pub(crate) fn transfer_share(
        &mut self,
        schema: &LedgerSchema,
        table: &TableDef,
        row: &mut Row,
        part: usize,
        version: u64,
    ) -> SqlResult<()> {
        let partitions = self.shards.len();
        let here = |id: i64| crate::partition::partition_of_id(id, partitions) == part;
        let t = &schema.transfer;
        let whole = || SqlError::internal("this transfer applies only whole");
        let id = int(&row[t.id]).filter(|id| *id > 0).ok_or_else(whole)?;
        // Every partition takes a timestamp for every row, so each row's is the one it gets
        // when the statement applies whole (where every row creates a transfer, or it would
        // not have split).
        if t.timestamp.is_some_and(|c| int(&row[c]).unwrap_or(0) != 0) {
            // A timestamp given without `imported`: its error comes from the whole path.
            return Err(whole());
        }
        let timestamp = self.clock.timestamps.take(1);
        if let Some(c) = t.timestamp {
            row[c] = Value::Int(timestamp);
        }
        let pending = flag(&row[t.pending]);
        if flag(&row[t.post_pending])
            || flag(&row[t.void_pending])
            || int(&row[t.timeout]).unwrap_or(0) != 0
            || balancing_or_closing(schema, row)
            || flag_at(row, t.imported)
        {
            return Err(whole());
        }
        let m = movement(schema, id, row, pending)?;
        let (row_here, debit_here, credit_here) = (here(id), here(m.debit), here(m.credit));
        if !row_here && !debit_here && !credit_here {
            return Ok(());
        }
        let now = self.clock.now;
        if row_here {
            let key = encode_key(&[Value::Int(id)])?;
            if self.burned_result(schema, &key)?.is_some() {
                return Err(whole());
            }
            row[t.timeout] = Value::Int(0);
            row[t.created_at] = Value::TimestampTz(now);
            if !self.insert_new_row(table, &key, row, version)? {
                return Err(whole());
            }
            self.activity.created();
        }
        let (debit_balance, credit_balance) = balances(pending);
        let accounts = (m.debit, m.credit);
        let change = Change::moved(id, timestamp, pending, m.amount, m.ledger, accounts);
        let mut moved = [None, None];
        for (slot, (account_id, here, balance, side, name)) in [
            (m.debit, debit_here, debit_balance, Side::Debits, "debit"),
            (
                m.credit,
                credit_here,
                credit_balance,
                Side::Credits,
                "credit",
            ),
        ]
        .into_iter()
        .enumerate()
        {
            if !here {
                continue;
            }
            let mut account = self.account(schema, id, account_id, name)?;
            if int(&account.row[schema.account.ledger]) != Some(m.ledger)
                || flag_at(&account.row, schema.account.closed)
            {
                return Err(whole());
            }
            let mut sides = [(m.debit, None), (m.credit, None)];
            sides[matches!(side, Side::Credits) as usize].1 = Some(&account.balances);
            check_overflow(schema, id, pending, m.amount, sides)?;
            add(schema, id, &mut account, balance, m.amount)?;
            check_limits(schema, id, &account, side)?;
            moved[slot] = Some(account);
        }
        // Both accounts here: saved together, their change event written whole at once, as
        // the whole path writes it. One of them: its side alone, as its part of the event.
        match moved {
            [Some(debit), Some(credit)] => {
                self.save_accounts(schema, (debit, credit), &change, now, version)?
            }
            [Some(account), None] | [None, Some(account)] => {
                self.save_account(schema, account, &change, now, version)?
            }
            [None, None] => {}
        }
        if pending && row_here {
            self.record_pending(schema, id, row, version)?;
        }
        Ok(())
    }

    pub(crate) fn account(
        &mut self,
        schema: &LedgerSchema,
        transfer: i64,
        id: i64,
        side: &str,
    ) -> SqlResult<Account> {
        if let Some(set) = &mut self.transfers.account_set {
            if let Some(account) = set.take(id)? {
                return Ok(account);
            }
        }
        let storage = self.storage_of(&schema.accounts)?;
        let key = encode_key(&[Value::Int(id)])?;
        match self.get_row(storage, &key)? {
            Some((old, _, row)) => Ok(Account {
                id,
                key,
                old: Some(old),
                balances: Balances::of(&schema.account, &row),
                row,
            }),
            None => Err(rule(
                ErrorKind::ForeignKeyViolation,
                transfer,
                format!("{side} account {id} does not exist"),
                &format!("{side}_account_not_found"),
            )),
        }
    }

    /// Writes an account back (see `account_set` for when a statement's working set keeps
    /// it instead), records its side of the change event `change`, and, for accounts with
    /// `history`, records its balances.
    pub(crate) fn save_account(
        &mut self,
        schema: &LedgerSchema,
        account: Account,
        change: &Change,
        now: i64,
        version: u64,
    ) -> SqlResult<()> {
        self.record_change_side(schema, change, account.id, &account.balances, version)?;
        self.activity
            .accounts(self.activity_thread, &[(account.id, account.balances)]);
        self.write_account(schema, account, change.transfer_id, now, version)
    }

    /// Saves both accounts of `change` (`debit`, then `credit`) and records the change
    /// once, with both in hand.
    pub(crate) fn save_accounts(
        &mut self,
        schema: &LedgerSchema,
        (debit, credit): (Account, Account),
        change: &Change,
        now: i64,
        version: u64,
    ) -> SqlResult<()> {
        self.record_change(schema, change, &debit.balances, &credit.balances, version)?;
        let accounts = [(debit.id, debit.balances), (credit.id, credit.balances)];
        self.activity.accounts(self.activity_thread, &accounts);
        self.write_account(schema, debit, change.transfer_id, now, version)?;
        self.write_account(schema, credit, change.transfer_id, now, version)
    }

    /// Writes an account's row back (or to its working set) and its balance history entry,
    /// for `transfer`.
    fn write_account(
        &mut self,
        schema: &LedgerSchema,
        mut account: Account,
        transfer: i64,
        now: i64,
        version: u64,
    ) -> SqlResult<()> {
        let a = &schema.account;
        let history = flag(&account.row[a.history]).then(|| -> SqlResult<Row> {
            let b = &schema.balance;
            let mut entry = vec![Value::Null; schema.balances.columns.len()];
            entry[b.account_id] = Value::Int(account.id);
            entry[b.created_at] = Value::TimestampTz(now);
            entry[b.transfer_id] = Value::Int(transfer);
            let columns = [
                b.debits_pending,
                b.debits_posted,
                b.credits_pending,
                b.credits_posted,
            ];
            account
                .balances
                .write_columns(&schema.balances, columns, &mut entry)?;
            Ok(entry)
        });
        let history = history.transpose()?;
        // Read from storage: written back at once, while its leaf is warm. From the
        // statement's working set: kept there until the statement ends.
        match account.old.take() {
            Some(old) => {
                account.write_balances_to_row(schema)?;
                self.put_row(
                    &schema.accounts,
                    &account.key,
                    Some(old),
                    &account.row,
                    version,
                )?;
                if let Some(set) = &mut self.transfers.account_set {
                    set.give_back(account, false);
                }
            }
            None => match &mut self.transfers.account_set {
                Some(set) => set.give_back(account, true),
                None => {
                    return Err(SqlError::internal(
                        "an account from a working set was saved after the set closed",
                    ))
                }
            },
        }
        let Some(entry) = history else {
            return Ok(());
        };
        let b = &schema.balance;
        let key = encode_key(&[
            entry[b.account_id].clone(),
            entry[b.created_at].clone(),
            entry[b.transfer_id].clone(),
        ])?;
        self.put_row(&schema.balances, &key, None, &entry, version)
    }
}

/// A transfer's own timestamp, which its change event is keyed by (0 in a catalog from
/// before migration 0006, which has no change events either).
pub(crate) fn event_timestamp(schema: &LedgerSchema, row: &Row) -> i64 {
    schema
        .transfer
        .timestamp
        .and_then(|c| int(&row[c]))
        .unwrap_or(0)
}

/// What a transfer that moves funds moves: its checked fields.
pub(crate) struct Movement {
    pub debit: i64,
    pub credit: i64,
    pub amount: u128,
    pub ledger: i64,
    pub timeout: i64,
}

/// An amount below zero, which TigerBeetle's unsigned amounts cannot express.
pub(crate) fn negative_amount(id: i64, amount: &Value) -> SqlError {
    check(
        id,
        format!(
            "amount must not be negative, not {}",
            amount.to_pg_text(amount.natural_type()).unwrap_or_default()
        ),
        "amount_must_not_be_negative",
    )
}

/// A field a transfer must have: NULL is 23502, zero or less 23514, both under
/// TigerBeetle's `<name>_must_not_be_zero`.
fn required(id: i64, row: &Row, column: usize, name: &str) -> SqlResult<i64> {
    match int(&row[column]) {
        None => Err(rule(
            ErrorKind::NotNullViolation,
            id,
            format!("{name} is required"),
            &format!("{name}_must_not_be_zero"),
        )),
        Some(v) if v <= 0 => Err(check(
            id,
            format!("{name} must be positive, not {v}"),
            &format!("{name}_must_not_be_zero"),
        )),
        Some(v) => Ok(v),
    }
}

/// The fields of transfer `id` that moves funds, checked on their own (before any account
/// is read), in TigerBeetle's order. An amount of 0 is a transfer (it records, moves
/// nothing); a negative one, which TigerBeetle's unsigned amounts cannot express, is
/// refused. A `pending_id` or `timeout` of 0 is the same as none.
pub(crate) fn movement(
    schema: &LedgerSchema,
    id: i64,
    row: &Row,
    pending: bool,
) -> SqlResult<Movement> {
    let t = &schema.transfer;
    let debit = required(id, row, t.debit_account_id, "debit_account_id")?;
    let credit = required(id, row, t.credit_account_id, "credit_account_id")?;
    if debit == credit {
        return Err(check(
            id,
            format!("debit and credit account are the same ({debit})"),
            "accounts_must_be_different",
        ));
    }
    if int(&row[t.pending_id]).is_some_and(|p| p != 0) {
        return Err(check(
            id,
            "pending_id is only for post_pending and void_pending transfers".into(),
            "pending_id_must_be_zero",
        ));
    }
    let timeout = int(&row[t.timeout]).unwrap_or(0);
    if timeout < 0 {
        return Err(check(
            id,
            "timeout must not be negative".into(),
            "timeout_must_not_be_negative",
        ));
    }
    if timeout > 0 && !pending {
        return Err(check(
            id,
            "timeout is only for pending transfers".into(),
            "timeout_reserved_for_pending_transfer",
        ));
    }
    if !pending && (flag_at(row, t.closing_debit) || flag_at(row, t.closing_credit)) {
        return Err(check(
            id,
            "closing_debit and closing_credit are only for pending transfers (voiding it reopens the account)".into(),
            "closing_transfer_must_be_pending",
        ));
    }
    let amount = match amount::given(&row[t.amount])? {
        Given::Missing => {
            return Err(rule(
                ErrorKind::NotNullViolation,
                id,
                "amount is required (0 records a transfer that moves nothing)".into(),
                "amount_must_not_be_null",
            ))
        }
        Given::Negative => return Err(negative_amount(id, &row[t.amount])),
        Given::Amount(a) => a,
    };
    let ledger = required(id, row, t.ledger, "ledger")?;
    required(id, row, t.code, "code")?;
    Ok(Movement {
        debit,
        credit,
        amount,
        ledger,
        timeout,
    })
}

/// A transfer to or from a closed account fails (the one movement a closed account takes
/// is the release of a pending transfer: its void or expiry).
pub(crate) fn refuse_closed(
    schema: &LedgerSchema,
    id: i64,
    debit: &Row,
    credit: &Row,
) -> SqlResult<()> {
    let a = &schema.account;
    for (row, side) in [(debit, "debit"), (credit, "credit")] {
        if flag_at(row, a.closed) {
            let account = int(&row[a.id]).unwrap_or(0);
            return Err(check(
                id,
                format!("{side} account {account} is closed"),
                &format!("{side}_account_already_closed"),
            ));
        }
    }
    Ok(())
}

/// What a transfer moves: its amount, or with `balancing_debit` at most what leaves the
/// debit account's debits (pending and posted) within its posted credits, with
/// `balancing_credit` at most what leaves the credit account's credits within its posted
/// debits — possibly 0. TigerBeetle's rule, whatever the accounts' limit flags.
fn balanced_amount(
    schema: &LedgerSchema,
    row: &Row,
    amount: u128,
    debit: &Balances,
    credit: &Balances,
) -> u128 {
    let t = &schema.transfer;
    let mut amount = amount;
    // Pending plus posted fits (TigerBeetle's overflows_debits / overflows_credits); where
    // it would not, nothing is left under the limit either.
    if flag_at(row, t.balancing_debit) {
        let held = debit.debits_pending.saturating_add(debit.debits_posted);
        amount = amount.min(debit.credits_posted.saturating_sub(held));
    }
    if flag_at(row, t.balancing_credit) {
        let held = credit.credits_pending.saturating_add(credit.credits_posted);
        amount = amount.min(credit.debits_posted.saturating_sub(held));
    }
    amount
}

/// A closing transfer (always pending) closes its debit account, its credit account or
/// both, until it is voided or expires.
fn close_accounts(schema: &LedgerSchema, transfer: &Row, debit: &mut Row, credit: &mut Row) {
    let (t, a) = (&schema.transfer, &schema.account);
    let Some(closed) = a.closed else { return };
    for (flag_column, account) in [(t.closing_debit, debit), (t.closing_credit, credit)] {
        if flag_at(transfer, flag_column) {
            assert!(!flag(&account[closed]), "a closed account was closed again");
            account[closed] = Value::Bool(true);
        }
    }
}

/// TigerBeetle's overflow rules, in its order: a pending amount must fit the pending
/// balances, and — as a later post moves it to the posted ones — the posted balances and
/// each side's pending plus posted too, so a post can never overflow. `accounts` are the
/// debit and the credit account, each None where this partition does not hold it.
pub(crate) fn check_overflow(
    schema: &LedgerSchema,
    id: i64,
    pending: bool,
    amount: u128,
    accounts: [(i64, Option<&Balances>); 2],
) -> SqlResult<()> {
    use Balance::*;
    let [(debit_id, debit), (credit_id, credit)] = accounts;
    let fits = |balances: Option<&Balances>, account: i64, held: &[Balance], result: &str| {
        let Some(balances) = balances else {
            return Ok(());
        };
        let after = held
            .iter()
            .try_fold(amount, |sum, &b| sum.checked_add(balances.get(b)));
        if after.is_some_and(|after| after <= schema.amount_max) {
            return Ok(());
        }
        Err(overflow(id, account, schema.amount_max, result))
    };
    if pending {
        fits(
            debit,
            debit_id,
            &[DebitsPending],
            "overflows_debits_pending",
        )?;
        fits(
            credit,
            credit_id,
            &[CreditsPending],
            "overflows_credits_pending",
        )?;
    }
    fits(debit, debit_id, &[DebitsPosted], "overflows_debits_posted")?;
    fits(
        credit,
        credit_id,
        &[CreditsPosted],
        "overflows_credits_posted",
    )?;
    let debits = [DebitsPending, DebitsPosted];
    fits(debit, debit_id, &debits, "overflows_debits")?;
    let credits = [CreditsPending, CreditsPosted];
    fits(credit, credit_id, &credits, "overflows_credits")?;
    Ok(())
}

/// The balances a transfer adds its amount to: debits and credits, pending or posted.
fn balances(pending: bool) -> (Balance, Balance) {
    if pending {
        (Balance::DebitsPending, Balance::CreditsPending)
    } else {
        (Balance::DebitsPosted, Balance::CreditsPosted)
    }
}

/// A balance of `account` that would pass `max`, TigerBeetle's `result`.
fn overflow(transfer: i64, account: i64, max: u128, result: &str) -> SqlError {
    rule(
        ErrorKind::NumericOutOfRange,
        transfer,
        format!("a balance of account {account} would overflow (at most {max})"),
        result,
    )
}

/// Adds `delta` to one balance of an account, refusing to pass the ledger's maximum.
pub(crate) fn add(
    schema: &LedgerSchema,
    transfer: i64,
    account: &mut Account,
    balance: Balance,
    delta: u128,
) -> SqlResult<()> {
    let id = account.id;
    let current = account.balances.get_mut(balance);
    *current = current
        .checked_add(delta)
        .filter(|next| *next <= schema.amount_max)
        .ok_or_else(|| overflow(transfer, id, schema.amount_max, "overflows_balance"))?;
    Ok(())
}

/// Takes `delta` from one balance of an account: a pending amount released. The engine
/// put it there, so it is there; a balance that would go below zero is an impossible
/// state.
pub(crate) fn subtract(account: &mut Account, balance: Balance, delta: u128) {
    let current = account.balances.get_mut(balance);
    *current = current.checked_sub(delta).unwrap_or_else(|| {
        panic!("releasing {delta} from a balance of {current} would go below zero")
    });
}

/// An account's own limit: debits (pending and posted) must not exceed posted credits,
/// or the other way round.
fn check_limits(
    schema: &LedgerSchema,
    transfer: i64,
    account: &Account,
    side: Side,
) -> SqlResult<()> {
    let a = &schema.account;
    let (row, b, id) = (&account.row, &account.balances, account.id);
    match side {
        Side::Debits if flag(&row[a.debits_must_not_exceed_credits]) => {
            let debits = b.debits_pending.saturating_add(b.debits_posted);
            let credits = b.credits_posted;
            if debits > credits {
                return Err(check(
                    transfer,
                    format!("account {id} would have debits {debits} exceeding its credits {credits} (debits_must_not_exceed_credits)"),
                    "exceeds_credits",
                ));
            }
        }
        Side::Credits if flag(&row[a.credits_must_not_exceed_debits]) => {
            let credits = b.credits_pending.saturating_add(b.credits_posted);
            let debits = b.debits_posted;
            if credits > debits {
                return Err(check(
                    transfer,
                    format!("account {id} would have credits {credits} exceeding its debits {debits} (credits_must_not_exceed_debits)"),
                    "exceeds_debits",
                ));
            }
        }
        _ => {}
    }
    Ok(())
}
