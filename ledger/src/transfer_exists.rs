//! Whether an event sent again is the one stored under its id: TigerBeetle's idempotency
//! rules, compared in TigerBeetle's order, so a retry gets `exists` and a different event
//! under a used id gets the `exists_with_different_<field>` TigerBeetle names.
//!
//! A post or void may leave fields out (NULL, or 0 as TigerBeetle's clients send them):
//! they were filled from the pending transfer, so a retry that leaves them out again
//! matches what was filled in. Every other field compares as given.

use plan::LedgerSchema;
use sql::Value;

use crate::row::Row;
use crate::transfer::{flag, int, shown};

/// The first field where a resent event differs from the stored one.
pub(crate) struct Difference {
    /// The column the message names.
    pub column: &'static str,
    /// TigerBeetle's result: `exists_with_different_<field>`.
    pub result: &'static str,
    pub given: String,
    pub stored: String,
}

/// NULL equals NULL here: the stored row is what a resend of the same values stored.
fn same(a: &Value, b: &Value) -> bool {
    match (a.is_null(), b.is_null()) {
        (true, true) => true,
        (false, false) => a.compare(b) == Some(std::cmp::Ordering::Equal),
        _ => false,
    }
}

/// Left out of a post or void: NULL, or TigerBeetle's 0.
pub(crate) fn unset(v: &Value) -> bool {
    v.is_null() || int(v) == Some(0)
}

struct Compare<'a> {
    columns: &'a [plan::ColumnDef],
    given: &'a Row,
    stored: &'a Row,
}

impl Compare<'_> {
    fn differs(&self, column: usize, name: &'static str, result: &'static str) -> Difference {
        let ty = self.columns[column].ty;
        Difference {
            column: name,
            result,
            given: shown(&self.given[column], ty),
            stored: shown(&self.stored[column], ty),
        }
    }

    /// The field compared as given.
    fn exact(&self, column: usize, name: &'static str, result: &'static str) -> Option<Difference> {
        (!same(&self.given[column], &self.stored[column]))
            .then(|| self.differs(column, name, result))
    }

    /// The field compared only when given.
    fn when_given(
        &self,
        column: usize,
        name: &'static str,
        result: &'static str,
    ) -> Option<Difference> {
        if unset(&self.given[column]) {
            return None;
        }
        self.exact(column, name, result)
    }

    /// The field compared as given, or, left out, against what the pending transfer gave.
    fn given_or(
        &self,
        column: usize,
        left_out: bool,
        filled: &Value,
        name: &'static str,
        result: &'static str,
    ) -> Option<Difference> {
        if left_out {
            return (!same(&self.stored[column], filled))
                .then(|| self.differs(column, name, result));
        }
        self.exact(column, name, result)
    }
}

/// `given` (a transfer as the client sent it) against `stored` (the transfer under its id);
/// `pending` is the pending transfer a stored post or void resolved. None: the same transfer.
pub(crate) fn transfer_difference(
    schema: &LedgerSchema,
    given: &Row,
    stored: &Row,
    pending: Option<&Row>,
) -> Option<Difference> {
    let t = &schema.transfer;
    let c = Compare {
        columns: &schema.transfers.columns,
        given,
        stored,
    };
    // The flags change what the other fields mean, so they come first.
    for (column, name) in [
        (t.pending, "pending"),
        (t.post_pending, "post_pending"),
        (t.void_pending, "void_pending"),
    ] {
        if flag(&given[column]) != flag(&stored[column]) {
            return Some(c.differs(column, name, "exists_with_different_flags"));
        }
    }
    let (given_pending, stored_pending) = (&given[t.pending_id], &stored[t.pending_id]);
    let both_unset = unset(given_pending) && unset(stored_pending);
    if !both_unset && !same(given_pending, stored_pending) {
        return Some(c.differs(
            t.pending_id,
            "pending_id",
            "exists_with_different_pending_id",
        ));
    }
    if int(&given[t.timeout]).unwrap_or(0) != int(&stored[t.timeout]).unwrap_or(0) {
        return Some(c.differs(t.timeout, "timeout", "exists_with_different_timeout"));
    }
    let resolves = flag(&stored[t.post_pending]) || flag(&stored[t.void_pending]);
    match pending.filter(|_| resolves) {
        Some(p) => resolution_difference(schema, &c, p),
        None => c
            .exact(
                t.debit_account_id,
                "debit_account_id",
                "exists_with_different_debit_account_id",
            )
            .or_else(|| {
                c.exact(
                    t.credit_account_id,
                    "credit_account_id",
                    "exists_with_different_credit_account_id",
                )
            })
            .or_else(|| c.exact(t.amount, "amount", "exists_with_different_amount"))
            .or_else(|| {
                c.exact(
                    t.user_data,
                    "user_data",
                    "exists_with_different_user_data_128",
                )
            })
            .or_else(|| c.exact(t.ledger, "ledger", "exists_with_different_ledger"))
            .or_else(|| c.exact(t.code, "code", "exists_with_different_code")),
    }
}

/// A post or void sent again, against the stored one and the pending transfer `p` it
/// resolved.
fn resolution_difference(schema: &LedgerSchema, c: &Compare<'_>, p: &Row) -> Option<Difference> {
    let t = &schema.transfer;
    let given = c.given;
    // A void's amount left out is the whole pending amount; a post's is when NULL (0 posts
    // nothing).
    let amount_left_out = if flag(&given[t.void_pending]) {
        unset(&given[t.amount])
    } else {
        given[t.amount].is_null()
    };
    c.when_given(
        t.debit_account_id,
        "debit_account_id",
        "exists_with_different_debit_account_id",
    )
    .or_else(|| {
        c.when_given(
            t.credit_account_id,
            "credit_account_id",
            "exists_with_different_credit_account_id",
        )
    })
    .or_else(|| {
        c.given_or(
            t.amount,
            amount_left_out,
            &p[t.amount],
            "amount",
            "exists_with_different_amount",
        )
    })
    .or_else(|| {
        c.given_or(
            t.user_data,
            unset(&given[t.user_data]),
            &p[t.user_data],
            "user_data",
            "exists_with_different_user_data_128",
        )
    })
    .or_else(|| c.when_given(t.ledger, "ledger", "exists_with_different_ledger"))
    .or_else(|| c.when_given(t.code, "code", "exists_with_different_code"))
}

/// `given` (an account as the client sent it) against `stored`, in TigerBeetle's order:
/// flags, user data, ledger, code. Balances and the creation time are the engine's.
pub(crate) fn account_difference(
    schema: &LedgerSchema,
    given: &Row,
    stored: &Row,
) -> Option<Difference> {
    let a = &schema.account;
    let c = Compare {
        columns: &schema.accounts.columns,
        given,
        stored,
    };
    for (column, name) in [
        (
            a.debits_must_not_exceed_credits,
            "debits_must_not_exceed_credits",
        ),
        (
            a.credits_must_not_exceed_debits,
            "credits_must_not_exceed_debits",
        ),
        (a.history, "history"),
    ] {
        if flag(&given[column]) != flag(&stored[column]) {
            return Some(c.differs(column, name, "exists_with_different_flags"));
        }
    }
    c.exact(
        a.user_data,
        "user_data",
        "exists_with_different_user_data_128",
    )
    .or_else(|| c.exact(a.ledger, "ledger", "exists_with_different_ledger"))
    .or_else(|| c.exact(a.code, "code", "exists_with_different_code"))
}
