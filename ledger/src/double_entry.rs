//! Double entry, asserted. Every transfer adds its amount to one account's debits and to
//! another's credits (pending or posted alike), and balances change in no other way (the
//! ledger's rules refuse writing them), so over all accounts debits equal credits, pending
//! and posted. Debug builds — every test — check it after each log entry; past
//! `CHECKED_ACCOUNTS` accounts the scan would slow tests down more than it finds, and it
//! stops.

use plan::{Access, AccountColumns};
use sql::Value;

use crate::executor::Executor;

/// A sum of balances, each up to 2^128 − 1, over any number of accounts: the low 128 bits
/// and how often they carried over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AmountTotal {
    low: u128,
    carries: u64,
}

impl AmountTotal {
    fn add(&mut self, n: u128) {
        let (low, carried) = self.low.overflowing_add(n);
        self.low = low;
        self.carries += u64::from(carried);
    }
}

impl std::fmt::Display for AmountTotal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.carries {
            0 => write!(f, "{}", self.low),
            carries => write!(f, "{carries} * 2^128 + {}", self.low),
        }
    }
}

/// Debits and credits, pending and posted, added up over accounts.
#[derive(Default)]
pub(crate) struct Totals {
    pub debits_posted: AmountTotal,
    pub credits_posted: AmountTotal,
    pub debits_pending: AmountTotal,
    pub credits_pending: AmountTotal,
    pub accounts: u64,
}

impl Totals {
    /// Adds one account's row.
    pub(crate) fn add(&mut self, row: &[Value], a: &AccountColumns) {
        let balances = crate::amount::Balances::of(a, row);
        self.debits_posted.add(balances.debits_posted);
        self.credits_posted.add(balances.credits_posted);
        self.debits_pending.add(balances.debits_pending);
        self.credits_pending.add(balances.credits_pending);
        self.accounts += 1;
    }

    /// How debits and credits differ, if they do.
    pub(crate) fn imbalance(&self) -> Option<String> {
        for (kind, debits, credits) in [
            ("posted", self.debits_posted, self.credits_posted),
            ("pending", self.debits_pending, self.credits_pending),
        ] {
            if debits != credits {
                return Some(format!(
                    "{kind} debits {debits} and credits {credits} differ over {} accounts",
                    self.accounts
                ));
            }
        }
        None
    }
}

/// The most accounts the check scans after every entry.
const CHECKED_ACCOUNTS: usize = 20_000;

impl Executor {
    /// Panics when the accounts' debits and credits differ (see the module's header).
    pub(crate) fn assert_double_entry(&mut self) {
        if self.double_entry_unchecked || self.failed.is_some() {
            return;
        }
        let Ok(schema) = self.ledger_schema() else {
            return; // No ledger tables yet.
        };
        let reader = self.reader(None, false);
        let env = reader.env(&[], 0);
        let Ok(rows) = reader.scan(&schema.accounts, &Access::Full, None, &[], &env) else {
            return; // A read failure is the executor's to report, not this check's.
        };
        drop(reader);
        let mut totals = Totals::default();
        for (_, row) in &rows {
            totals.add(row, &schema.account);
        }
        if let Some(imbalance) = totals.imbalance() {
            panic!("{imbalance}");
        }
        self.double_entry_unchecked = rows.len() > CHECKED_ACCOUNTS;
    }
}
