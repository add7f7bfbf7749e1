//! Whether an event sent again is the one stored under its id: TigerBeetle's idempotency
//! rules, compared in TigerBeetle's order, so a retry gets `exists` and a different event
//! under a used id gets the `exists_with_different_<field>` TigerBeetle names.
//!
//! A post or void may leave fields out (NULL, or 0 as TigerBeetle's clients send them):
//! they were filled from the pending transfer, so a retry that leaves them out again
//! matches what was filled in. Every other field compares as given.

use plan::LedgerSchema;
use sql::Value;

use crate::amount::{self, Given};
use crate::row::Row;
use crate::transfer::{flag, flag_at, int, shown};

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
    match v {
        Value::Null => true,
        Value::Int(i) => *i == 0,
        Value::Numeric(n) => n.is_zero(),
        _ => false,
    }
}

struct Compare<'a> {
    columns: &'a [plan::ColumnDef],
    /// The `user_data` column (TigerBeetle's `user_data_128`).
    user_data: usize,
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

    /// The first flag of `flags` (each None where the table predates it) that differs.
    fn flags(&self, flags: &[(Option<usize>, &'static str)]) -> Option<Difference> {
        flags.iter().find_map(|&(column, name)| {
            let column = column?;
            (flag(&self.given[column]) != flag(&self.stored[column]))
                .then(|| self.differs(column, name, "exists_with_different_flags"))
        })
    }

    /// `user_data` (TigerBeetle's `user_data_128`), then `wider` — the 64- and 32-bit user
    /// data, each None where the table predates it — in TigerBeetle's order. A post or
    /// void (`pending` its pending transfer) that left one out took the pending
    /// transfer's.
    fn user_data(&self, wider: &[Option<usize>; 2], pending: Option<&Row>) -> Option<Difference> {
        let columns = [
            (
                Some(self.user_data),
                "user_data",
                "exists_with_different_user_data_128",
            ),
            (
                wider[0],
                "user_data_64",
                "exists_with_different_user_data_64",
            ),
            (
                wider[1],
                "user_data_32",
                "exists_with_different_user_data_32",
            ),
        ];
        columns.into_iter().find_map(|(column, name, result)| {
            let column = column?;
            match pending {
                Some(p) => {
                    self.given_or(column, unset(&self.given[column]), &p[column], name, result)
                }
                None => self.exact(column, name, result),
            }
        })
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
        user_data: t.user_data,
        given,
        stored,
    };
    // The flags change what the other fields mean, so they come first.
    let flags = [
        (Some(t.pending), "pending"),
        (Some(t.post_pending), "post_pending"),
        (Some(t.void_pending), "void_pending"),
        (t.balancing_debit, "balancing_debit"),
        (t.balancing_credit, "balancing_credit"),
        (t.closing_debit, "closing_debit"),
        (t.closing_credit, "closing_credit"),
        (t.imported, "imported"),
    ];
    if let Some(d) = c.flags(&flags) {
        return Some(d);
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
            .or_else(|| moved_difference(schema, &c))
            .or_else(|| c.user_data(&[t.user_data_64, t.user_data_32], None))
            .or_else(|| c.exact(t.ledger, "ledger", "exists_with_different_ledger"))
            .or_else(|| c.exact(t.code, "code", "exists_with_different_code")),
    }
}

/// The amount of a transfer that moves funds: as given, but a balancing transfer's amount
/// is the most it may move, so a resend matches when it names at least what was moved.
fn moved_difference(schema: &LedgerSchema, c: &Compare<'_>) -> Option<Difference> {
    let t = &schema.transfer;
    let balancing = flag_at(c.given, t.balancing_debit) || flag_at(c.given, t.balancing_credit);
    if !balancing {
        return c.exact(t.amount, "amount", "exists_with_different_amount");
    }
    let stored = amount::stored(&c.stored[t.amount]);
    match amount::given(&c.given[t.amount]) {
        Ok(Given::Amount(given)) if given >= stored => None,
        _ => Some(c.differs(t.amount, "amount", "exists_with_different_amount")),
    }
}

/// A post or void sent again, against the stored one and the pending transfer `p` it
/// resolved.
fn resolution_difference(schema: &LedgerSchema, c: &Compare<'_>, p: &Row) -> Option<Difference> {
    let t = &schema.transfer;
    let given = c.given;
    // A void's amount left out is the whole pending amount; a post's is when NULL or
    // TigerBeetle's AMOUNT_MAX (0 posts nothing).
    let amount_left_out = if flag(&given[t.void_pending]) {
        unset(&given[t.amount])
    } else {
        matches!(
            amount::given(&given[t.amount]),
            Ok(Given::Missing | Given::Amount(u128::MAX))
        )
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
    .or_else(|| c.user_data(&[t.user_data_64, t.user_data_32], Some(p)))
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
        user_data: a.user_data,
        given,
        stored,
    };
    let flags = [
        (
            Some(a.debits_must_not_exceed_credits),
            "debits_must_not_exceed_credits",
        ),
        (
            Some(a.credits_must_not_exceed_debits),
            "credits_must_not_exceed_debits",
        ),
        (Some(a.history), "history"),
        (a.closed, "closed"),
        (a.imported, "imported"),
    ];
    c.flags(&flags)
        .or_else(|| c.user_data(&[a.user_data_64, a.user_data_32], None))
        .or_else(|| c.exact(a.ledger, "ledger", "exists_with_different_ledger"))
        .or_else(|| c.exact(a.code, "code", "exists_with_different_code"))
}
