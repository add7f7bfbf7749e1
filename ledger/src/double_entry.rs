//! Double entry, asserted. Every transfer adds its amount to one account's debits and to
//! another's credits (pending or posted alike), and balances change in no other way (the
//! ledger's rules refuse writing them), so over all accounts debits equal credits, pending
//! and posted. Debug builds — every test — check it after each log entry; past
//! `CHECKED_ACCOUNTS` accounts the scan would slow tests down more than it finds, and it
//! stops.

use plan::Access;
use sql::Value;

use crate::executor::Executor;

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
        let a = &schema.account;
        let sum = |column: usize| -> i128 {
            rows.iter()
                .map(|(_, row)| match row[column] {
                    Value::Int(n) => i128::from(n),
                    _ => 0,
                })
                .sum()
        };
        let (debits_posted, credits_posted) = (sum(a.debits_posted), sum(a.credits_posted));
        let (debits_pending, credits_pending) = (sum(a.debits_pending), sum(a.credits_pending));
        assert_eq!(
            debits_posted,
            credits_posted,
            "posted debits and credits differ over {} accounts",
            rows.len()
        );
        assert_eq!(
            debits_pending,
            credits_pending,
            "pending debits and credits differ over {} accounts",
            rows.len()
        );
        self.double_entry_unchecked = rows.len() > CHECKED_ACCOUNTS;
    }
}
