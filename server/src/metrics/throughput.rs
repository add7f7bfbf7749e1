//! Per-second counts of the last ten minutes — transfers, statements, commits, bytes
//! fsynced — in a ring of 600 slots (bounded memory, no allocation as they are counted):
//! what `hotledger.throughput` shows and the console charts.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::latency::unix_second;

pub const SECONDS: usize = 600;

/// What is counted each second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    Transfers,
    Statements,
    Commits,
    BytesFsynced,
}

const COUNTS: usize = 4;

#[derive(Default)]
struct Slot {
    /// The Unix second the counts are of.
    at: AtomicU64,
    counts: [AtomicU64; COUNTS],
}

/// One second's counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SecondCounts {
    pub at: u64,
    pub transfers: u64,
    pub statements: u64,
    pub commits: u64,
    pub bytes_fsynced: u64,
}

pub struct Throughput {
    slots: Vec<Slot>,
}

impl Default for Throughput {
    fn default() -> Throughput {
        Throughput {
            slots: (0..SECONDS).map(|_| Slot::default()).collect(),
        }
    }
}

impl Throughput {
    pub fn add(&self, what: Count, n: u64) {
        self.add_at(what, n, unix_second());
    }

    fn add_at(&self, what: Count, n: u64, now: u64) {
        let slot = &self.slots[(now % SECONDS as u64) as usize];
        let at = slot.at.load(Relaxed);
        if at != now {
            // The first count of a new second takes the slot over; counts of the old
            // second that race with it may land in the new one (a second's count is a
            // rate, not a ledger).
            if slot.at.compare_exchange(at, now, Relaxed, Relaxed).is_ok() {
                for c in &slot.counts {
                    c.store(0, Relaxed);
                }
            }
        }
        slot.counts[what as usize].fetch_add(n, Relaxed);
    }

    /// Every second of the last ten minutes up to the one before now (complete ones),
    /// oldest first; a second nothing happened in has zeros.
    pub fn seconds(&self) -> Vec<SecondCounts> {
        self.seconds_at(unix_second())
    }

    fn seconds_at(&self, now: u64) -> Vec<SecondCounts> {
        let mut out = Vec::with_capacity(SECONDS - 1);
        for at in now.saturating_sub(SECONDS as u64 - 1)..now {
            let slot = &self.slots[(at % SECONDS as u64) as usize];
            let count = |c: Count| {
                if slot.at.load(Relaxed) == at {
                    slot.counts[c as usize].load(Relaxed)
                } else {
                    0
                }
            };
            out.push(SecondCounts {
                at,
                transfers: count(Count::Transfers),
                statements: count(Count::Statements),
                commits: count(Count::Commits),
                bytes_fsynced: count(Count::BytesFsynced),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_count_apart_and_old_ones_are_forgotten() {
        let t = Throughput::default();
        let now = 10_000;
        t.add_at(Count::Transfers, 3, now - 2);
        t.add_at(Count::Transfers, 4, now - 1);
        t.add_at(Count::Statements, 7, now - 1);
        t.add_at(Count::Transfers, 9, now);
        let seconds = t.seconds_at(now);
        assert_eq!(seconds.len(), SECONDS - 1);
        let last = seconds.last().unwrap();
        assert_eq!((last.at, last.transfers, last.statements), (now - 1, 4, 7));
        assert_eq!(seconds[seconds.len() - 2].transfers, 3);
        // Ten minutes on, the slot of `now - 2` is another second's.
        t.add_at(Count::Commits, 1, now - 2 + SECONDS as u64);
        let later = t.seconds_at(now + SECONDS as u64);
        assert!(later.iter().all(|s| s.transfers == 0), "{later:?}");
    }
}
