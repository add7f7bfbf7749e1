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

use plan::{EvalEnv, LedgerSchema, OnConflict, TableDef};
use sql::{ErrorKind, SqlError, SqlResult, Value};

use crate::account_set::Account;
use crate::apply::build_row;
use crate::command::CommandResult;
use crate::error::{is_storage_failure, kv_error};
use crate::executor::Executor;
use crate::row::{encode_key, Row};

const MICROS_PER_SECOND: i64 = 1_000_000;

/// The state of a pending transfer, as `pending_transfers.status` shows it.
const PENDING: &str = "pending";
const POSTED: &str = "posted";
const VOIDED: &str = "voided";
const EXPIRED: &str = "expired";

/// A ledger rule broken: the message names the transfer and the account; the detail gives
/// TigerBeetle's name for the result, for people who know it.
fn rule(kind: ErrorKind, id: i64, message: String, result: &str) -> SqlError {
    SqlError::new(kind, format!("transfer {id}: {message}"))
        .with_detail(format!("result: {result}"))
}

fn check(id: i64, message: String, result: &str) -> SqlError {
    rule(ErrorKind::CheckViolation, id, message, result)
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

fn flag(v: &Value) -> bool {
    matches!(v, Value::Bool(true))
}

fn same(a: &Value, b: &Value) -> bool {
    a.compare(b) == Some(std::cmp::Ordering::Equal)
}

fn shown(v: &Value, ty: sql::DataType) -> String {
    v.to_pg_text(ty).unwrap_or_else(|| "NULL".into())
}

fn text(v: &Value) -> &str {
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

    /// `create_transfers`: each transfer applied on its own, a chain of linked ones all or
    /// none; one result row per transfer (index, id, status, SQLSTATE, message). Only an IO
    /// error fails the command as a whole.
    pub(crate) fn apply_transfer_batch(
        &mut self,
        table: &plan::TableRef,
        columns: &[usize],
        rows: Vec<Row>,
        linked: &[bool],
        now_micros: i64,
        version: u64,
    ) -> CommandResult {
        let def = self.resolve(table)?;
        if def.ledger != Some(plan::LedgerRole::Transfers) {
            return Err(SqlError::internal(
                "create_transfers on a table that is not transfers",
            ));
        }
        let env = EvalEnv::without_subqueries(&[], now_micros);
        let id_at = def
            .column_index("id")
            .and_then(|c| columns.iter().position(|&x| x == c));
        let ids: Vec<Value> = rows
            .iter()
            .map(|r| id_at.map_or(Value::Null, |i| r[i].clone()))
            .collect();
        let is_linked = |i: usize| linked.get(i).copied().unwrap_or(false);
        let mut results: Vec<Row> = Vec::with_capacity(rows.len());
        let mut created = 0;
        let mut start = 0;
        while start < rows.len() {
            let mut end = start;
            while end + 1 < rows.len() && is_linked(end) {
                end += 1;
            }
            // A chain still open at the end of the batch fails after its transfers were
            // checked, so a transfer in it that fails on its own is the one reported.
            let open = is_linked(end).then(|| {
                check(
                    int(&ids[end]).unwrap_or(0),
                    "the last transfer of the batch is linked to a next one that does not exist"
                        .into(),
                    "linked_event_chain_open",
                )
            });
            let outcome = self
                .apply_chain(&def, columns, &rows[start..=end], open, &env, version)
                .map_err(|(i, e)| (start + i, e));
            match outcome {
                Ok(stored) => {
                    for (i, stored) in (start..=end).zip(stored) {
                        created += stored as u64;
                        let status = if stored { "created" } else { "exists" };
                        results.push(batch_row(i, &ids[i], status, None, None));
                    }
                }
                Err((_, e)) if is_storage_failure(&e) => return Err(e),
                Err((failed, e)) => {
                    for (i, id) in ids.iter().enumerate().take(end + 1).skip(start) {
                        results.push(if i == failed {
                            batch_row(i, id, "failed", Some(e.sqlstate()), Some(e.message.clone()))
                        } else {
                            let why = format!(
                                "not applied: transfer {} of its linked chain failed",
                                failed + 1
                            );
                            batch_row(i, id, "linked_event_failed", None, Some(why))
                        });
                    }
                }
            }
            start = end + 1;
        }
        Ok(Executor::outcome(created, results))
    }

    /// Applies a chain of transfers all or none: whether each was created (or already
    /// existed), or the position in the chain of the one that failed, with nothing applied.
    /// `open` fails a chain whose transfers all succeeded, at its last one.
    fn apply_chain(
        &mut self,
        def: &TableDef,
        columns: &[usize],
        rows: &[Row],
        open: Option<SqlError>,
        env: &EvalEnv<'_>,
        version: u64,
    ) -> Result<Vec<bool>, (usize, SqlError)> {
        let mark = self.undo_len();
        let last = rows.len() - 1;
        let chain = |ex: &mut Executor| {
            let mut stored = Vec::with_capacity(rows.len());
            for (i, values) in rows.iter().enumerate() {
                let outcome = build_row(def, columns, values.clone(), env)
                    .and_then(|row| ex.insert_row(def, row, None, env, version));
                match outcome {
                    Ok(row) => stored.push(row.is_some()),
                    Err(e) => {
                        if !is_storage_failure(&e) {
                            ex.rollback_to(mark);
                        }
                        return Err((i, e));
                    }
                }
            }
            if let Some(e) = open {
                ex.rollback_to(mark);
                return Err((last, e));
            }
            Ok(stored)
        };
        self.with_account_set(def, rows.len(), version, chain, |e| (last, e))
    }

    /// Moves the ledger clock to a command's `now()` if that is later.
    pub(crate) fn advance_clock(&mut self, now_micros: i64) {
        self.clock.now = self.clock.now.max(now_micros);
    }

    /// A new account: the engine sets its balances to zero and its creation time.
    pub(crate) fn prepare_account(&mut self, mut row: Row) -> SqlResult<Row> {
        let schema = self.ledger_schema()?;
        let a = &schema.account;
        for c in [
            a.debits_pending,
            a.debits_posted,
            a.credits_pending,
            a.credits_posted,
        ] {
            row[c] = Value::Int(0);
        }
        row[a.created_at] = Value::TimestampTz(self.clock.now);
        Ok(row)
    }

    /// Applies one transfer row. Returns the stored transfer, or None when a transfer with
    /// the same id and the same fields already exists (an idempotent retry).
    pub(crate) fn create_transfer(
        &mut self,
        table: &TableDef,
        given: Row,
        on_conflict: Option<&OnConflict>,
        version: u64,
    ) -> SqlResult<Option<Row>> {
        let schema = self.ledger_schema()?;
        let t = &schema.transfer;
        let id = match int(&given[t.id]) {
            None => {
                return Err(SqlError::new(
                    ErrorKind::NotNullViolation,
                    "a transfer needs an id (a positive bigint chosen by the client, so that retries are idempotent)",
                ))
            }
            Some(id) if id <= 0 => {
                return Err(check(id, "id must be positive".into(), "id_must_not_be_zero"))
            }
            Some(id) => id,
        };
        let key = encode_key(&[Value::Int(id)])?;
        let mut row = given;
        let (pending, post, void) = (
            flag(&row[t.pending]),
            flag(&row[t.post_pending]),
            flag(&row[t.void_pending]),
        );
        // A transfer that moves funds is stored as given, so it is written here in the same
        // descent that finds whether its id exists (a failure below rolls it back); post and
        // void fill fields from the pending transfer first.
        let timeout_given = row[t.timeout].clone();
        let written_early = !post && !void && {
            row[t.timeout] = Value::Int(int(&timeout_given).unwrap_or(0));
            row[t.created_at] = Value::TimestampTz(self.clock.now);
            let written = self.insert_new_row(table, &key, &row, version)?;
            if written {
                // Counted as its row is written: a failure below takes both back.
                self.activity.created();
            }
            row[t.timeout] = timeout_given;
            written
        };
        if !written_early {
            let storage = self.storage_of(table)?;
            if let Some((_, _, existing)) = self.get_row(storage, &key)? {
                return match differing_field(table, t.created_at, &row, &existing) {
                    None => Ok(None),
                    Some(_) if matches!(on_conflict.map(OnConflict::action), Some(OnConflict::DoNothing)) => Ok(None),
                    Some((column, mine, theirs)) => Err(rule(
                        ErrorKind::UniqueViolation,
                        id,
                        format!(
                            "a transfer with this id already exists with a different {column} ({theirs}, not {mine})"
                        ),
                        &format!("exists_with_different_{column}"),
                    )),
                };
            }
        }
        if [pending, post, void].iter().filter(|f| **f).count() > 1 {
            return Err(check(
                id,
                "pending, post_pending and void_pending exclude each other".into(),
                "flags_are_mutually_exclusive",
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
        row[t.timeout] = Value::Int(timeout);
        row[t.created_at] = Value::TimestampTz(self.clock.now);
        if post || void {
            self.resolve_pending(&schema, id, &mut row, post, version)?;
            self.put_row(table, &key, None, &row, version)?;
            self.activity.created();
        } else {
            self.move_funds(&schema, id, &row, pending, version)?;
        }
        Ok(Some(row))
    }

    /// A pending or posted transfer: checks its fields, then moves the amount into the
    /// debit account's and the credit account's pending or posted balances.
    fn move_funds(
        &mut self,
        schema: &LedgerSchema,
        id: i64,
        row: &Row,
        pending: bool,
        version: u64,
    ) -> SqlResult<()> {
        let Movement {
            debit: debit_id,
            credit: credit_id,
            amount,
            ledger,
        } = movement(schema, id, row)?;
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
        let (debit_balance, credit_balance) = balances(schema, pending);
        add(id, debit_id, &mut debit.row, debit_balance, amount)?;
        add(id, credit_id, &mut credit.row, credit_balance, amount)?;
        check_limits(schema, id, debit_id, &debit.row, Side::Debits)?;
        check_limits(schema, id, credit_id, &credit.row, Side::Credits)?;
        let now = self.clock.now;
        self.save_account(schema, debit, id, now, version)?;
        self.save_account(schema, credit, id, now, version)?;
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
        let pending = flag(&row[t.pending]);
        if flag(&row[t.post_pending])
            || flag(&row[t.void_pending])
            || int(&row[t.timeout]).unwrap_or(0) != 0
        {
            return Err(whole());
        }
        let m = movement(schema, id, row)?;
        let (row_here, debit_here, credit_here) = (here(id), here(m.debit), here(m.credit));
        if !row_here && !debit_here && !credit_here {
            return Ok(());
        }
        let now = self.clock.now;
        if row_here {
            row[t.timeout] = Value::Int(0);
            row[t.created_at] = Value::TimestampTz(now);
            if !self.insert_new_row(table, &encode_key(&[Value::Int(id)])?, row, version)? {
                return Err(whole());
            }
            self.activity.created();
        }
        let (debit_balance, credit_balance) = balances(schema, pending);
        for (account_id, here, balance, side, name) in [
            (m.debit, debit_here, debit_balance, Side::Debits, "debit"),
            (
                m.credit,
                credit_here,
                credit_balance,
                Side::Credits,
                "credit",
            ),
        ] {
            if !here {
                continue;
            }
            let mut account = self.account(schema, id, account_id, name)?;
            if int(&account.row[schema.account.ledger]) != Some(m.ledger) {
                return Err(whole());
            }
            add(id, account_id, &mut account.row, balance, m.amount)?;
            check_limits(schema, id, account_id, &account.row, side)?;
            self.save_account(schema, account, id, now, version)?;
        }
        if pending && row_here {
            self.record_pending(schema, id, row, version)?;
        }
        Ok(())
    }

    /// The `pending_transfers` row of a new pending transfer, and its expiry if it has a
    /// timeout.
    fn record_pending(
        &mut self,
        schema: &LedgerSchema,
        id: i64,
        row: &Row,
        version: u64,
    ) -> SqlResult<()> {
        let timeout = int(&row[schema.transfer.timeout]).unwrap_or(0);
        let now = self.clock.now;
        let expires_at = (timeout > 0).then(|| now.saturating_add(timeout * MICROS_PER_SECOND));
        let p = &schema.pending_col;
        let mut state = vec![Value::Null; schema.pending.columns.len()];
        state[p.id] = Value::Int(id);
        state[p.status] = Value::Text(PENDING.into());
        state[p.expires_at] = expires_at.map_or(Value::Null, Value::TimestampTz);
        let key = encode_key(&[Value::Int(id)])?;
        self.put_row(&schema.pending, &key, None, &state, version)?;
        if let Some(at) = expires_at {
            self.schedule_expiry(at, id)?;
        }
        Ok(())
    }

    /// Posts or voids the pending transfer `row` names, filling the fields it left out
    /// from the pending transfer.
    fn resolve_pending(
        &mut self,
        schema: &LedgerSchema,
        id: i64,
        row: &mut Row,
        post: bool,
        version: u64,
    ) -> SqlResult<()> {
        let t = &schema.transfer;
        let Some(pending_id) = int(&row[t.pending_id]) else {
            return Err(rule(
                ErrorKind::NotNullViolation,
                id,
                "pending_id is required to post or void a pending transfer".into(),
                "pending_id_must_not_be_zero",
            ));
        };
        if pending_id == id {
            return Err(check(
                id,
                "pending_id must name another transfer".into(),
                "pending_id_must_be_different",
            ));
        }
        let transfers = self.storage_of(&schema.transfers)?;
        let pending_key = encode_key(&[Value::Int(pending_id)])?;
        let Some((_, _, original)) = self.get_row(transfers, &pending_key)? else {
            return Err(rule(
                ErrorKind::ForeignKeyViolation,
                id,
                format!("pending transfer {pending_id} does not exist"),
                "pending_transfer_not_found",
            ));
        };
        if !flag(&original[t.pending]) {
            return Err(check(
                id,
                format!("transfer {pending_id} is not a pending transfer"),
                "pending_transfer_not_pending",
            ));
        }
        let states = self.storage_of(&schema.pending)?;
        let Some((state_old, _, mut state)) = self.get_row(states, &pending_key)? else {
            return Err(SqlError::internal(format!(
                "pending transfer {pending_id} has no state"
            )));
        };
        let p = &schema.pending_col;
        match text(&state[p.status]) {
            PENDING => {}
            status => {
                return Err(check(
                    id,
                    format!("pending transfer {pending_id} is already {status}"),
                    &format!("pending_transfer_already_{status}"),
                ))
            }
        }
        for (column, name) in [
            (t.debit_account_id, "debit_account_id"),
            (t.credit_account_id, "credit_account_id"),
            (t.ledger, "ledger"),
            (t.code, "code"),
        ] {
            if row[column].is_null() {
                row[column] = original[column].clone();
            } else if !same(&row[column], &original[column]) {
                let ty = schema.transfers.columns[column].ty;
                return Err(check(
                    id,
                    format!(
                        "{name} {} differs from the pending transfer's {}",
                        shown(&row[column], ty),
                        shown(&original[column], ty)
                    ),
                    &format!("pending_transfer_has_different_{name}"),
                ));
            }
        }
        let reserved = int(&original[t.amount]).unwrap_or(0);
        let amount = match int(&row[t.amount]) {
            None => reserved,
            Some(a) if a <= 0 => {
                return Err(check(
                    id,
                    format!("amount must be positive, not {a}"),
                    "amount_must_not_be_zero",
                ))
            }
            Some(a) if post && a > reserved => {
                return Err(check(
                    id,
                    format!("amount {a} exceeds the pending amount {reserved}"),
                    "exceeds_pending_transfer_amount",
                ))
            }
            Some(a) if !post && a != reserved => {
                return Err(check(
                    id,
                    format!("a void must be for the whole pending amount {reserved}, not {a}"),
                    "pending_transfer_has_different_amount",
                ))
            }
            Some(a) => a,
        };
        row[t.amount] = Value::Int(amount);
        let posted = if post { amount } else { 0 };
        let now = self.clock.now;
        self.release(schema, id, &original, posted, now, version)?;
        state[p.resolved_by] = Value::Int(id);
        let expires_at = match &state[p.expires_at] {
            Value::TimestampTz(at) => Some(*at),
            _ => None,
        };
        let status = if post { POSTED } else { VOIDED };
        self.close_pending(schema, &pending_key, state_old, state, status, version)?;
        if let Some(at) = expires_at {
            self.cancel_expiry(at, pending_id)?;
        }
        Ok(())
    }

    /// Takes a pending transfer's amount out of both accounts' pending balances and adds
    /// `posted` of it to their posted balances. `cause` is the transfer (or, on expiry, the
    /// pending transfer itself) the history records.
    fn release(
        &mut self,
        schema: &LedgerSchema,
        cause: i64,
        original: &Row,
        posted: i64,
        now: i64,
        version: u64,
    ) -> SqlResult<()> {
        let t = &schema.transfer;
        let a = &schema.account;
        let reserved = int(&original[t.amount]).unwrap_or(0);
        let debit_id = int(&original[t.debit_account_id]).unwrap_or(0);
        let credit_id = int(&original[t.credit_account_id]).unwrap_or(0);
        let mut debit = self.account(schema, cause, debit_id, "debit")?;
        let mut credit = self.account(schema, cause, credit_id, "credit")?;
        add(cause, debit_id, &mut debit.row, a.debits_pending, -reserved)?;
        add(
            cause,
            credit_id,
            &mut credit.row,
            a.credits_pending,
            -reserved,
        )?;
        if posted > 0 {
            add(cause, debit_id, &mut debit.row, a.debits_posted, posted)?;
            add(cause, credit_id, &mut credit.row, a.credits_posted, posted)?;
        }
        self.save_account(schema, debit, cause, now, version)?;
        self.save_account(schema, credit, cause, now, version)
    }

    fn account(
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
    /// it instead) and, for accounts with `history`, records its balances.
    fn save_account(
        &mut self,
        schema: &LedgerSchema,
        mut account: Account,
        transfer: i64,
        now: i64,
        version: u64,
    ) -> SqlResult<()> {
        let a = &schema.account;
        let balance = |column: usize| int(&account.row[column]).unwrap_or(0);
        self.activity.account(
            self.activity_thread,
            account.id,
            crate::transfer_activity::Balances {
                debits_pending: balance(a.debits_pending),
                debits_posted: balance(a.debits_posted),
                credits_pending: balance(a.credits_pending),
                credits_posted: balance(a.credits_posted),
            },
        );
        let history = flag(&account.row[a.history]).then(|| {
            let b = &schema.balance;
            let mut entry = vec![Value::Null; schema.balances.columns.len()];
            entry[b.account_id] = Value::Int(account.id);
            entry[b.created_at] = Value::TimestampTz(now);
            entry[b.transfer_id] = Value::Int(transfer);
            for (to, from) in [
                (b.debits_pending, a.debits_pending),
                (b.debits_posted, a.debits_posted),
                (b.credits_pending, a.credits_pending),
                (b.credits_posted, a.credits_posted),
            ] {
                entry[to] = account.row[from].clone();
            }
            entry
        });
        // Read from storage: written back at once, while its leaf is warm. From the
        // statement's working set: kept there until the statement ends.
        match account.old.take() {
            Some(old) => {
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

    fn schedule_expiry(&mut self, at: i64, id: i64) -> SqlResult<()> {
        let key = encode_key(&[Value::Int(at), Value::Int(id)])?;
        self.put_raw(self.clock.expiry, &key, Some(&[]))?;
        self.clock.next_expiry = Some(self.clock.next_expiry.map_or(at, |n| n.min(at)));
        Ok(())
    }

    fn cancel_expiry(&mut self, at: i64, id: i64) -> SqlResult<()> {
        let key = encode_key(&[Value::Int(at), Value::Int(id)])?;
        self.put_raw(self.clock.expiry, &key, None)
    }

    /// Voids every pending transfer whose timeout has passed by the ledger clock. Runs
    /// before each command, so which transfers have expired is decided in log order.
    pub(crate) fn expire_pending(&mut self, version: u64) -> SqlResult<()> {
        let now = self.clock.now;
        if self.clock.next_expiry.is_none_or(|at| at > now) {
            return Ok(());
        }
        let expiry = self.clock.expiry;
        loop {
            let first = self
                .shard(0)?
                .engine
                .range(
                    expiry,
                    std::ops::Bound::Unbounded,
                    std::ops::Bound::Unbounded,
                    kv::Direction::Forward,
                )
                .map_err(kv_error)?
                .next()
                .transpose()
                .map_err(kv_error)?;
            let Some((key, _)) = first else {
                self.clock.next_expiry = None;
                return Ok(());
            };
            let (at, id) = match kv::keycode::decode_key(&key).as_deref() {
                Some([kv::keycode::KeyValue::Int(at), kv::keycode::KeyValue::Int(id)]) => {
                    (*at, *id)
                }
                _ => {
                    return Err(SqlError::internal(
                        "unreadable pending-transfer expiry entry",
                    ))
                }
            };
            if at > now {
                self.clock.next_expiry = Some(at);
                return Ok(());
            }
            // Looked up only once something is due: before the ledger migration has run
            // there are no tables to find, and nothing can be due either.
            let schema = self.ledger_schema()?;
            self.put_raw(self.clock.expiry, &key, None)?;
            let pending_key = encode_key(&[Value::Int(id)])?;
            let states = self.storage_of(&schema.pending)?;
            let transfers = self.storage_of(&schema.transfers)?;
            let (Some((state_old, _, state)), Some((_, _, original))) = (
                self.get_row(states, &pending_key)?,
                self.get_row(transfers, &pending_key)?,
            ) else {
                continue;
            };
            let p = &schema.pending_col;
            if text(&state[p.status]) != PENDING {
                continue;
            }
            self.release(&schema, id, &original, 0, at, version)?;
            self.close_pending(&schema, &pending_key, state_old, state, EXPIRED, version)?;
        }
    }

    /// Stores a pending transfer's final state: posted, voided or expired.
    fn close_pending(
        &mut self,
        schema: &LedgerSchema,
        key: &[u8],
        old: Vec<u8>,
        mut state: Row,
        status: &str,
        version: u64,
    ) -> SqlResult<()> {
        state[schema.pending_col.status] = Value::Text(status.into());
        self.put_row(&schema.pending, key, Some(old), &state, version)
    }
}

/// What a transfer that moves funds moves: its checked fields.
struct Movement {
    debit: i64,
    credit: i64,
    amount: i64,
    ledger: i64,
}

/// The fields of transfer `id` that moves funds, checked on their own (before any account
/// is read).
fn movement(schema: &LedgerSchema, id: i64, row: &Row) -> SqlResult<Movement> {
    let t = &schema.transfer;
    if !row[t.pending_id].is_null() {
        return Err(check(
            id,
            "pending_id is only for post_pending and void_pending transfers".into(),
            "pending_id_must_be_zero",
        ));
    }
    let required = |column: usize, name: &str| -> SqlResult<i64> {
        int(&row[column]).ok_or_else(|| {
            rule(
                ErrorKind::NotNullViolation,
                id,
                format!("{name} is required"),
                &format!("{name}_must_not_be_zero"),
            )
        })
    };
    let debit = required(t.debit_account_id, "debit_account_id")?;
    let credit = required(t.credit_account_id, "credit_account_id")?;
    let amount = required(t.amount, "amount")?;
    let ledger = required(t.ledger, "ledger")?;
    let code = required(t.code, "code")?;
    if debit == credit {
        return Err(check(
            id,
            format!("debit and credit account are the same ({debit})"),
            "accounts_must_be_different",
        ));
    }
    if amount <= 0 {
        return Err(check(
            id,
            format!("amount must be positive, not {amount}"),
            "amount_must_not_be_zero",
        ));
    }
    if ledger <= 0 {
        return Err(check(
            id,
            "ledger must be positive".into(),
            "ledger_must_not_be_zero",
        ));
    }
    if code <= 0 {
        return Err(check(
            id,
            "code must be positive".into(),
            "code_must_not_be_zero",
        ));
    }
    Ok(Movement {
        debit,
        credit,
        amount,
        ledger,
    })
}

/// The account columns a transfer adds its amount to: debits and credits, pending or
/// posted.
fn balances(schema: &LedgerSchema, pending: bool) -> (usize, usize) {
    let a = &schema.account;
    if pending {
        (a.debits_pending, a.credits_pending)
    } else {
        (a.debits_posted, a.credits_posted)
    }
}

/// Adds `delta` to one balance of an account, refusing to overflow.
fn add(transfer: i64, account: i64, row: &mut Row, column: usize, delta: i64) -> SqlResult<()> {
    let current = int(&row[column]).unwrap_or(0);
    let next = current.checked_add(delta).ok_or_else(|| {
        rule(
            ErrorKind::NumericOutOfRange,
            transfer,
            format!("a balance of account {account} would overflow bigint"),
            "overflows_balance",
        )
    })?;
    row[column] = Value::Int(next);
    Ok(())
}

/// An account's own limit: debits (pending and posted) must not exceed posted credits,
/// or the other way round.
fn check_limits(
    schema: &LedgerSchema,
    transfer: i64,
    account: i64,
    row: &Row,
    side: Side,
) -> SqlResult<()> {
    let a = &schema.account;
    let value = |c: usize| int(&row[c]).unwrap_or(0) as i128;
    match side {
        Side::Debits if flag(&row[a.debits_must_not_exceed_credits]) => {
            let debits = value(a.debits_pending) + value(a.debits_posted);
            let credits = value(a.credits_posted);
            if debits > credits {
                return Err(check(
                    transfer,
                    format!("account {account} would have debits {debits} exceeding its credits {credits} (debits_must_not_exceed_credits)"),
                    "exceeds_credits",
                ));
            }
        }
        Side::Credits if flag(&row[a.credits_must_not_exceed_debits]) => {
            let credits = value(a.credits_pending) + value(a.credits_posted);
            let debits = value(a.debits_posted);
            if credits > debits {
                return Err(check(
                    transfer,
                    format!("account {account} would have credits {credits} exceeding its debits {debits} (credits_must_not_exceed_debits)"),
                    "exceeds_debits",
                ));
            }
        }
        _ => {}
    }
    Ok(())
}

/// The first column (other than the creation time) where a retried transfer differs from
/// the stored one: (column, retried value, stored value). A column the retry left NULL
/// matches whatever was stored (post and void fill them from the pending transfer).
fn differing_field(
    table: &TableDef,
    created_at: usize,
    given: &[Value],
    stored: &[Value],
) -> Option<(String, String, String)> {
    given
        .iter()
        .zip(stored)
        .enumerate()
        .find(|(i, (mine, theirs))| *i != created_at && !mine.is_null() && !same(mine, theirs))
        .map(|(i, (mine, theirs))| {
            let ty = table.columns[i].ty;
            (
                table.columns[i].name.clone(),
                shown(mine, ty),
                shown(theirs, ty),
            )
        })
}

/// One result row of `create_transfers`.
fn batch_row(
    i: usize,
    id: &Value,
    status: &str,
    sqlstate: Option<&str>,
    message: Option<String>,
) -> Row {
    vec![
        Value::Int(i as i64 + 1),
        id.clone(),
        Value::Text(status.into()),
        sqlstate.map_or(Value::Null, |s| Value::Text(s.into())),
        message.map_or(Value::Null, Value::Text),
    ]
}
