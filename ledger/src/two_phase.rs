//! Two-phase transfers: a pending transfer reserves its amount in the pending balances
//! until a post moves it (or less of it) to the posted ones, a void releases it, or its
//! timeout passes and the ledger clock expires it. Expiry is decided in log order, before
//! each command, so every replica expires the same transfers at the same position.

use plan::LedgerSchema;
use sql::{ErrorKind, SqlError, SqlResult, Value};

use crate::amount::{self, Balance, Given};
use crate::change_events::{Change, ChangeKind};
use crate::error::kv_error;
use crate::executor::Executor;
use crate::row::{encode_key, Row};
use crate::transfer::{
    add, balancing_or_closing, check, event_timestamp, flag, flag_at, int, negative_amount,
    refuse_closed, rule, same, shown, subtract, text,
};
use crate::transfer_exists::unset;

const MICROS_PER_SECOND: i64 = 1_000_000;

/// The state of a pending transfer, as `pending_transfers.status` shows it.
const PENDING: &str = "pending";
const POSTED: &str = "posted";
const VOIDED: &str = "voided";
const EXPIRED: &str = "expired";

/// The accounts, ledger, code and user data a post or void left out, taken from the
/// pending transfer; those it gave must be the pending transfer's (user data may differ).
fn fill_from_pending(
    schema: &LedgerSchema,
    id: i64,
    row: &mut Row,
    original: &Row,
) -> SqlResult<()> {
    let t = &schema.transfer;
    for (column, name) in [
        (t.debit_account_id, "debit_account_id"),
        (t.credit_account_id, "credit_account_id"),
        (t.ledger, "ledger"),
        (t.code, "code"),
    ] {
        if unset(&row[column]) {
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
    for column in [Some(t.user_data), t.user_data_64, t.user_data_32]
        .into_iter()
        .flatten()
    {
        if unset(&row[column]) {
            row[column] = original[column].clone();
        }
    }
    Ok(())
}

/// A post's or void's own fields, checked in TigerBeetle's order: its flags (post or void,
/// no other), the pending transfer it names (not itself) and no timeout. Whether it posts,
/// and the pending transfer's id.
fn resolution_fields(schema: &LedgerSchema, id: i64, row: &Row) -> SqlResult<(bool, i64)> {
    let t = &schema.transfer;
    let post = flag(&row[t.post_pending]);
    if (post && flag(&row[t.void_pending]))
        || flag(&row[t.pending])
        || balancing_or_closing(schema, row)
    {
        return Err(check(
            id,
            "post_pending and void_pending exclude each other and every other flag".into(),
            "flags_are_mutually_exclusive",
        ));
    }
    let pending_id = match int(&row[t.pending_id]) {
        None | Some(0) => {
            return Err(rule(
                ErrorKind::NotNullViolation,
                id,
                "pending_id is required to post or void a pending transfer".into(),
                "pending_id_must_not_be_zero",
            ))
        }
        Some(p) if p == id => {
            return Err(check(
                id,
                "pending_id must name another transfer".into(),
                "pending_id_must_be_different",
            ))
        }
        Some(p) => p,
    };
    if int(&row[t.timeout]).unwrap_or(0) != 0 {
        return Err(check(
            id,
            "timeout is only for pending transfers".into(),
            "timeout_reserved_for_pending_transfer",
        ));
    }
    Ok((post, pending_id))
}

/// The amount a post or void moves out of the pending balances into the posted ones: a
/// void the whole reserved amount (given as 0, NULL or that amount), a post what it names
/// up to that amount (NULL or TigerBeetle's AMOUNT_MAX, 2^128 − 1: all of it).
fn resolved_amount(
    schema: &LedgerSchema,
    id: i64,
    row: &Row,
    original: &Row,
    post: bool,
) -> SqlResult<u128> {
    let t = &schema.transfer;
    let reserved = amount::stored(&original[t.amount]);
    let amount = match amount::given(&row[t.amount])? {
        Given::Missing => reserved,
        Given::Amount(0) if !post => reserved,
        Given::Amount(u128::MAX) if post => reserved,
        Given::Negative => return Err(negative_amount(id, &row[t.amount])),
        Given::Amount(a) => a,
    };
    if amount > reserved {
        return Err(check(
            id,
            format!("amount {amount} exceeds the pending amount {reserved}"),
            "exceeds_pending_transfer_amount",
        ));
    }
    if !post && amount < reserved {
        return Err(check(
            id,
            format!("a void must be for the whole pending amount {reserved}, not {amount}"),
            "pending_transfer_has_different_amount",
        ));
    }
    Ok(amount)
}

/// How a pending transfer is resolved.
#[derive(Clone, Copy)]
enum Resolution {
    /// Posted, moving this much of it.
    Post(u128),
    Void,
    Expire,
}

/// A closing transfer voided or expired: the accounts it closed are open again (they were
/// closed while it was pending, since nothing else opens a closed account).
fn reopen(schema: &LedgerSchema, pending: &Row, debit: &mut Row, credit: &mut Row) {
    let (t, a) = (&schema.transfer, &schema.account);
    let Some(closed) = a.closed else { return };
    for (closing, account) in [(t.closing_debit, debit), (t.closing_credit, credit)] {
        if flag_at(pending, closing) {
            assert!(
                flag(&account[closed]),
                "a pending closing transfer's account is open"
            );
            account[closed] = Value::Bool(false);
        }
    }
}

impl Executor {
    /// The `pending_transfers` row of a new pending transfer, and its expiry if it has a
    /// timeout.
    pub(crate) fn record_pending(
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

    /// Posts or voids the pending transfer `row` names, in TigerBeetle's order of checks,
    /// filling the fields it left out (NULL or 0) from the pending transfer: the accounts,
    /// ledger and code, user data, and the amount — a void's whole, a post's whole when
    /// NULL (a post of 0 posts nothing and releases the rest).
    pub(crate) fn post_or_void(
        &mut self,
        schema: &LedgerSchema,
        id: i64,
        row: &mut Row,
        imported: Option<i64>,
        version: u64,
    ) -> SqlResult<()> {
        let t = &schema.transfer;
        let (post, pending_id) = resolution_fields(schema, id, row)?;
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
        fill_from_pending(schema, id, row, &original)?;
        let amount = resolved_amount(schema, id, row, &original, post)?;
        row[t.amount] = amount::cell(amount, schema.transfers.columns[t.amount].ty)?;
        row[t.timeout] = Value::Int(0);
        let (state_old, mut state) = self.unresolved_state(schema, id, pending_id, &pending_key)?;
        if let Some(at) = imported {
            self.check_imported_transfer(schema, id, at, None, 0)?;
        }
        let p = &schema.pending_col;
        let resolution = if post {
            Resolution::Post(amount)
        } else {
            Resolution::Void
        };
        let now = self.created_at(imported);
        let event = (event_timestamp(schema, row), amount);
        self.release(schema, id, &original, resolution, event, now, version)?;
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

    /// The `pending_transfers` row of pending transfer `pending_id` (its bytes and values),
    /// if it is still pending: else the result TigerBeetle gives a post or void of it.
    fn unresolved_state(
        &mut self,
        schema: &LedgerSchema,
        id: i64,
        pending_id: i64,
        key: &[u8],
    ) -> SqlResult<(Vec<u8>, Row)> {
        let states = self.storage_of(&schema.pending)?;
        let Some((old, _, state)) = self.get_row(states, key)? else {
            return Err(SqlError::internal(format!(
                "pending transfer {pending_id} has no state"
            )));
        };
        match text(&state[schema.pending_col.status]) {
            PENDING => Ok((old, state)),
            EXPIRED => Err(check(
                id,
                format!("pending transfer {pending_id} has expired"),
                "pending_transfer_expired",
            )),
            status => Err(check(
                id,
                format!("pending transfer {pending_id} is already {status}"),
                &format!("pending_transfer_already_{status}"),
            )),
        }
    }

    /// Takes a pending transfer's amount out of both accounts' pending balances and, for a
    /// post, adds what it posts to their posted balances; a post needs both accounts open,
    /// a void or an expiry reopens the accounts a closing transfer closed. `cause` is the
    /// transfer (or, on expiry, the pending transfer itself) the history records; `event`
    /// the change event's timestamp and the amount it records.
    #[allow(clippy::too_many_arguments)]
    fn release(
        &mut self,
        schema: &LedgerSchema,
        cause: i64,
        original: &Row,
        resolution: Resolution,
        (timestamp, amount): (i64, u128),
        now: i64,
        version: u64,
    ) -> SqlResult<()> {
        let t = &schema.transfer;
        let reserved = amount::stored(&original[t.amount]);
        let debit_id = int(&original[t.debit_account_id]).unwrap_or(0);
        let credit_id = int(&original[t.credit_account_id]).unwrap_or(0);
        let pending_id = int(&original[t.id]).unwrap_or(0);
        let (kind, pending_id) = match resolution {
            Resolution::Post(_) => (ChangeKind::Posted, pending_id),
            Resolution::Void => (ChangeKind::Voided, pending_id),
            Resolution::Expire => (ChangeKind::Expired, 0),
        };
        let change = Change {
            timestamp,
            kind,
            transfer_id: cause,
            amount,
            pending_id,
            ledger: int(&original[t.ledger]).unwrap_or(0),
            debit_account_id: debit_id,
            credit_account_id: credit_id,
        };
        let mut debit = self.account(schema, cause, debit_id, "debit")?;
        let mut credit = self.account(schema, cause, credit_id, "credit")?;
        let posted = match resolution {
            Resolution::Post(amount) => {
                refuse_closed(schema, cause, &debit.row, &credit.row)?;
                amount
            }
            Resolution::Void | Resolution::Expire => {
                reopen(schema, original, &mut debit.row, &mut credit.row);
                0
            }
        };
        subtract(&mut debit, Balance::DebitsPending, reserved);
        subtract(&mut credit, Balance::CreditsPending, reserved);
        if posted > 0 {
            // The pending transfer's overflow checks leave room for it (TigerBeetle's
            // overflows_*_posted).
            add(schema, cause, &mut debit, Balance::DebitsPosted, posted)?;
            add(schema, cause, &mut credit, Balance::CreditsPosted, posted)?;
        }
        self.save_accounts(schema, (debit, credit), &change, now, version)
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

    /// The earliest entry of the expiry schedule: its key, deadline and pending transfer.
    fn first_expiry(&mut self) -> SqlResult<Option<(Vec<u8>, i64, i64)>> {
        let expiry = self.clock.expiry;
        let first = crate::partition::entries(self.shard(0)?, expiry)?
            .next()
            .transpose()
            .map_err(kv_error)?;
        let Some((key, _)) = first else {
            return Ok(None);
        };
        match kv::keycode::decode_key(&key).as_deref() {
            Some([kv::keycode::KeyValue::Int(at), kv::keycode::KeyValue::Int(id)]) => {
                let (at, id) = (*at, *id);
                Ok(Some((key.to_vec(), at, id)))
            }
            _ => Err(SqlError::internal(
                "unreadable pending-transfer expiry entry",
            )),
        }
    }

    /// Finds when the first pending transfer expires, after a start (until then it is
    /// unknown, and the first command looks): only reads.
    pub(crate) fn look_up_next_expiry(&mut self) -> SqlResult<()> {
        if self.clock.next_expiry == Some(i64::MIN) {
            self.clock.next_expiry = self.first_expiry()?.map(|(_, at, _)| at);
        }
        Ok(())
    }

    /// Voids every pending transfer whose timeout has passed by the ledger clock. Runs
    /// before each command, so which transfers have expired is decided in log order.
    pub(crate) fn expire_pending(&mut self, version: u64) -> SqlResult<()> {
        let now = self.clock.now;
        if self.clock.next_expiry.is_none_or(|at| at > now) {
            return Ok(());
        }
        // Each expiry is a change event with a timestamp of its own, taken before the range
        // of the command that found it due: as many as expire (on the coordinator alone).
        self.clock.timestamps.reserve(now, None);
        loop {
            let Some((key, at, id)) = self.first_expiry()? else {
                self.clock.next_expiry = None;
                return Ok(());
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
            // An expiry is an event of its own: a change event with its own timestamp.
            let reserved = amount::stored(&original[schema.transfer.amount]);
            let event = (self.clock.timestamps.take(1), reserved);
            self.release(
                &schema,
                id,
                &original,
                Resolution::Expire,
                event,
                at,
                version,
            )?;
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
