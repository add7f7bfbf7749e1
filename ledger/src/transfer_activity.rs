//! What the executor tells of the transfers it applies, for the node's views
//! (`hotledger.metrics`, `hotledger.hot_accounts`) and for the server's pulse (when the
//! next pending transfer expires, so a `Command::Pulse` expires it then): how many transfers exist that it
//! created since it started (a created transfer a failing statement takes back is taken off
//! again), and which accounts take the most transfers — a heavy-hitters sketch per executor
//! thread (Space-Saving: `CAPACITY` counters a bucket, 2-second buckets for the last minute),
//! so its memory is bounded however many accounts there are.
//!
//! The sketch counts an account's transfers as they apply; one a failing statement takes
//! back may stay counted there (the sketch is an estimate by design: each count is at most
//! its `error` too high). Each entry keeps the account's balances as that transfer left
//! them, so the hottest accounts' balances are the latest without a read.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// Counters per bucket.
const CAPACITY: usize = 64;
/// Seconds per bucket, and buckets kept: a little over a minute.
const BUCKET_SECONDS: u64 = 2;
const BUCKETS: usize = 31;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Balances {
    pub debits_pending: u128,
    pub debits_posted: u128,
    pub credits_pending: u128,
    pub credits_posted: u128,
}

#[derive(Clone, Copy, Debug, Default)]
struct Counter {
    account: i64,
    count: u64,
    /// How much of `count` may come from accounts it replaced (Space-Saving's bound).
    error: u64,
    balances: Balances,
}

#[derive(Default)]
struct Bucket {
    /// The bucket's number (Unix seconds / `BUCKET_SECONDS`); 0 while unused.
    epoch: u64,
    counters: Vec<Counter>,
}

impl Bucket {
    fn record(&mut self, account: i64, balances: Balances) {
        if let Some(c) = self.counters.iter_mut().find(|c| c.account == account) {
            c.count += 1;
            c.balances = balances;
            return;
        }
        if self.counters.len() < CAPACITY {
            self.counters.push(Counter {
                account,
                count: 1,
                error: 0,
                balances,
            });
            return;
        }
        // Space-Saving: the least counted gives its place, and its count becomes the
        // newcomer's error.
        if let Some(least) = self.counters.iter_mut().min_by_key(|c| c.count) {
            *least = Counter {
                account,
                count: least.count + 1,
                error: least.count,
                balances,
            };
        }
    }
}

/// One row of `hotledger.hot_accounts`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HotAccount {
    pub account: i64,
    /// Transfers counted in the window (an estimate: at most `error` too high).
    pub transfers: u64,
    pub error: u64,
    pub balances: Balances,
}

/// What every executor thread of the node reports into.
pub struct TransferActivity {
    created: AtomicU64,
    /// The ledger clock time (µs) before which no pending transfer expires; `i64::MAX`
    /// when none has a timeout.
    next_expiry: AtomicI64,
    /// One sketch per executor thread (the coordinator's, then each partition's).
    sketches: Vec<Mutex<Vec<Bucket>>>,
}

fn now_epoch() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        / BUCKET_SECONDS
}

impl TransferActivity {
    pub fn new(threads: usize) -> TransferActivity {
        TransferActivity {
            created: AtomicU64::new(0),
            next_expiry: AtomicI64::new(i64::MAX),
            sketches: (0..threads.max(1))
                .map(|_| Mutex::new((0..BUCKETS).map(|_| Bucket::default()).collect()))
                .collect(),
        }
    }

    /// When the next pending transfer expires (the ledger clock's µs since the Unix
    /// epoch), or None when none has a timeout. Published after each log entry applies; it
    /// may be early (a post or void cancelled that expiry), never late.
    pub fn next_expiry(&self) -> Option<i64> {
        Some(self.next_expiry.load(Relaxed)).filter(|&at| at != i64::MAX)
    }

    pub(crate) fn publish_next_expiry(&self, at: Option<i64>) {
        self.next_expiry.store(at.unwrap_or(i64::MAX), Relaxed);
    }

    /// Transfers created (and not taken back) since the executor started.
    pub fn transfers_created(&self) -> u64 {
        self.created.load(Relaxed)
    }

    pub(crate) fn created(&self) {
        self.created.fetch_add(1, Relaxed);
    }

    pub(crate) fn taken_back(&self) {
        let _ = self
            .created
            .fetch_update(Relaxed, Relaxed, |n| Some(n.saturating_sub(1)));
    }

    /// Executor thread `thread` applied a transfer of `account`, leaving it `balances`.
    pub(crate) fn account(&self, thread: usize, account: i64, balances: Balances) {
        self.account_at(thread, account, balances, now_epoch());
    }

    fn account_at(&self, thread: usize, account: i64, balances: Balances, epoch: u64) {
        let Some(sketch) = self.sketches.get(thread) else {
            return;
        };
        let mut buckets = sketch.lock().unwrap_or_else(|e| e.into_inner());
        let bucket = &mut buckets[(epoch % BUCKETS as u64) as usize];
        if bucket.epoch != epoch {
            bucket.epoch = epoch;
            bucket.counters.clear();
        }
        bucket.record(account, balances);
    }

    /// The `limit` accounts with the most transfers over about the last `seconds`
    /// (whole buckets, the current one included), most first.
    pub fn hot_accounts(&self, seconds: u64, limit: usize) -> Vec<HotAccount> {
        self.hot_accounts_at(seconds, limit, now_epoch())
    }

    fn hot_accounts_at(&self, seconds: u64, limit: usize, epoch: u64) -> Vec<HotAccount> {
        let span = seconds.div_ceil(BUCKET_SECONDS).clamp(1, BUCKETS as u64);
        let mut merged: std::collections::HashMap<i64, (HotAccount, u64)> = Default::default();
        for sketch in &self.sketches {
            let buckets = sketch.lock().unwrap_or_else(|e| e.into_inner());
            for bucket in buckets.iter() {
                if bucket.epoch == 0 || bucket.epoch + span <= epoch || bucket.epoch > epoch {
                    continue;
                }
                for c in &bucket.counters {
                    let (entry, newest) = merged.entry(c.account).or_insert((
                        HotAccount {
                            account: c.account,
                            transfers: 0,
                            error: 0,
                            balances: c.balances,
                        },
                        0,
                    ));
                    entry.transfers += c.count;
                    entry.error += c.error;
                    if bucket.epoch >= *newest {
                        *newest = bucket.epoch;
                        entry.balances = c.balances;
                    }
                }
            }
        }
        let mut accounts: Vec<HotAccount> = merged.into_values().map(|(a, _)| a).collect();
        accounts.sort_by(|a, b| {
            b.transfers
                .cmp(&a.transfers)
                .then(a.account.cmp(&b.account))
        });
        accounts.truncate(limit);
        accounts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn balances(n: i64) -> Balances {
        Balances {
            credits_posted: n as u128,
            ..Balances::default()
        }
    }

    #[test]
    fn the_hottest_accounts_stand_out_in_bounded_memory() {
        let activity = TransferActivity::new(2);
        let epoch = 1_000_000;
        // Account 1 takes every other transfer; 10,000 others one each.
        for n in 0..10_000i64 {
            activity.account_at((n % 2) as usize, 1, balances(n), epoch);
            activity.account_at((n % 2) as usize, 1_000 + n, balances(0), epoch);
        }
        let hot = activity.hot_accounts_at(10, 3, epoch);
        assert_eq!(hot[0].account, 1);
        assert_eq!(hot[0].transfers, 10_000);
        assert!(hot[0].balances.credits_posted >= 9_998, "{:?}", hot[0]);
        assert!(hot[1].transfers <= hot[1].error + 1, "{hot:?}");
        for sketch in &activity.sketches {
            let buckets = sketch.lock().unwrap();
            assert!(buckets.iter().all(|b| b.counters.len() <= CAPACITY));
        }
        // A minute later the window holds nothing of it.
        assert!(activity.hot_accounts_at(60, 3, epoch + 40).is_empty());
        assert_eq!(activity.hot_accounts_at(60, 3, epoch + 20)[0].account, 1);
    }

    #[test]
    fn a_transfer_taken_back_is_not_counted() {
        let activity = TransferActivity::new(1);
        activity.created();
        activity.created();
        activity.taken_back();
        assert_eq!(activity.transfers_created(), 1);
    }
}
