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

use rustc_hash::FxHashMap;

use crate::amount::Balances;

/// Counters per bucket.
const CAPACITY: usize = 64;
/// Seconds per bucket, and buckets kept: a little over a minute.
const BUCKET_SECONDS: u64 = 2;
const BUCKETS: usize = 31;

#[derive(Clone, Copy, Debug, Default)]
struct Counter {
    account: i64,
    count: u64,
    /// How much of `count` may come from accounts it replaced (Space-Saving's bound).
    error: u64,
    balances: Balances,
}

/// A bucket's counters, a column each, with an index by account and a min-heap by count:
/// an uncounted account's transfer (nearly every transfer, where thousands of accounts
/// share the traffic) finds the least counted counter at the heap's root instead of
/// scanning for it, and a counted one is found by a hash lookup instead of a scan.
#[derive(Default)]
struct Bucket {
    /// The bucket's number (Unix seconds / `BUCKET_SECONDS`); 0 while unused.
    epoch: u64,
    accounts: Vec<i64>,
    counts: Vec<u64>,
    errors: Vec<u64>,
    balances: Vec<Balances>,
    /// Each counted account's counter.
    counter_of: FxHashMap<i64, usize>,
    /// Counters in heap order, the least counted first.
    heap: Vec<usize>,
    /// Each counter's place in `heap`.
    place: Vec<usize>,
}

impl Bucket {
    fn clear(&mut self, epoch: u64) {
        self.epoch = epoch;
        self.accounts.clear();
        self.counts.clear();
        self.errors.clear();
        self.balances.clear();
        self.counter_of.clear();
        self.heap.clear();
        self.place.clear();
    }

    fn record(&mut self, account: i64, balances: Balances) {
        if let Some(&at) = self.counter_of.get(&account) {
            self.counts[at] += 1;
            self.balances[at] = balances;
            self.sift_down(self.place[at]);
            return;
        }
        if self.accounts.len() < CAPACITY {
            let at = self.accounts.len();
            self.accounts.push(account);
            self.counts.push(1);
            self.errors.push(0);
            self.balances.push(balances);
            self.counter_of.insert(account, at);
            self.heap.push(at);
            self.place.push(at);
            self.sift_up(at);
            return;
        }
        // Space-Saving: the least counted gives its place, and its count becomes the
        // newcomer's error.
        let at = self.heap[0];
        self.counter_of.remove(&self.accounts[at]);
        self.counter_of.insert(account, at);
        self.accounts[at] = account;
        self.errors[at] = self.counts[at];
        self.counts[at] += 1;
        self.balances[at] = balances;
        self.sift_down(0);
    }

    fn count_at(&self, place: usize) -> u64 {
        self.counts[self.heap[place]]
    }

    fn swap_places(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.place[self.heap[a]] = a;
        self.place[self.heap[b]] = b;
    }

    fn sift_up(&mut self, mut place: usize) {
        while place > 0 {
            let parent = (place - 1) / 2;
            if self.count_at(parent) <= self.count_at(place) {
                break;
            }
            self.swap_places(parent, place);
            place = parent;
        }
    }

    fn sift_down(&mut self, mut place: usize) {
        loop {
            let (left, right) = (2 * place + 1, 2 * place + 2);
            let mut least = place;
            for child in [left, right] {
                if child < self.heap.len() && self.count_at(child) < self.count_at(least) {
                    least = child;
                }
            }
            if least == place {
                return;
            }
            self.swap_places(place, least);
            place = least;
        }
    }

    fn counters(&self) -> impl Iterator<Item = Counter> + '_ {
        (0..self.accounts.len()).map(|i| Counter {
            account: self.accounts[i],
            count: self.counts[i],
            error: self.errors[i],
            balances: self.balances[i],
        })
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

    /// Executor thread `thread` applied a transfer of `accounts` (one or both of its
    /// accounts, each with the balances the transfer left it).
    pub(crate) fn accounts(&self, thread: usize, accounts: &[(i64, Balances)]) {
        self.accounts_at(thread, accounts, now_epoch());
    }

    fn accounts_at(&self, thread: usize, accounts: &[(i64, Balances)], epoch: u64) {
        let Some(sketch) = self.sketches.get(thread) else {
            return;
        };
        let mut buckets = sketch.lock().unwrap_or_else(|e| e.into_inner());
        let bucket = &mut buckets[(epoch % BUCKETS as u64) as usize];
        if bucket.epoch != epoch {
            bucket.clear(epoch);
        }
        for &(account, balances) in accounts {
            bucket.record(account, balances);
        }
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
                for c in bucket.counters() {
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
            let accounts = [(1, balances(n)), (1_000 + n, balances(0))];
            activity.accounts_at((n % 2) as usize, &accounts, epoch);
        }
        let hot = activity.hot_accounts_at(10, 3, epoch);
        assert_eq!(hot[0].account, 1);
        assert_eq!(hot[0].transfers, 10_000);
        assert!(hot[0].balances.credits_posted >= 9_998, "{:?}", hot[0]);
        assert!(hot[1].transfers <= hot[1].error + 1, "{hot:?}");
        for sketch in &activity.sketches {
            let buckets = sketch.lock().unwrap();
            assert!(buckets.iter().all(|b| b.accounts.len() <= CAPACITY));
        }
        // A minute later the window holds nothing of it.
        assert!(activity.hot_accounts_at(60, 3, epoch + 40).is_empty());
        assert_eq!(activity.hot_accounts_at(60, 3, epoch + 20)[0].account, 1);
    }

    /// Space-Saving's bounds hold for every counter whatever the stream: its count is at
    /// least the account's true count and at most `error` more; the counts add up to the
    /// transfers recorded; the heap and the index agree with the columns.
    #[test]
    fn counters_keep_space_savings_bounds() {
        let mut bucket = Bucket::default();
        let mut truth: FxHashMap<i64, u64> = Default::default();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for n in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Every third transfer is one of 5 warm accounts, the rest spread over 500.
            let account = if n % 3 == 0 { x % 5 } else { 100 + x % 500 } as i64;
            bucket.record(account, balances(n as i64));
            *truth.entry(account).or_default() += 1;
        }
        assert_eq!(bucket.counts.iter().sum::<u64>(), 20_000);
        for c in bucket.counters() {
            let true_count = truth[&c.account];
            assert!(
                c.count >= true_count && c.count - c.error <= true_count,
                "{c:?}"
            );
            assert_eq!(
                bucket.counter_of[&c.account],
                bucket.heap[bucket.place[bucket.counter_of[&c.account]]]
            );
        }
        for place in 1..bucket.heap.len() {
            assert!(bucket.count_at((place - 1) / 2) <= bucket.count_at(place));
        }
        for warm in 0..5 {
            assert!(
                bucket.counter_of.contains_key(&warm),
                "warm account {warm} lost"
            );
        }
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
