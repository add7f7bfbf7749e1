//! Latency by stage over sliding windows: one HDR histogram per stage and second for the
//! last 60 seconds (microseconds, 3 significant digits), merged on demand into the 1 s,
//! 10 s and 60 s windows `hotledger.latency` and `/metrics` show. Memory is bounded: 60
//! histograms of a few KiB per stage, reused as the seconds go round.

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;

/// The stages measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// A client statement, from its start to its result.
    Statement,
    /// A write's proposal, from the log to its result: fsync and apply.
    Commit,
    /// One write and fdatasync of a batch of log entries.
    Fsync,
    /// A committed log entry, from its hand-over to the executor to its last command
    /// applied (its wait behind earlier entries included).
    Apply,
}

impl Stage {
    pub const ALL: [Stage; 4] = [Stage::Statement, Stage::Commit, Stage::Fsync, Stage::Apply];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Statement => "statement",
            Stage::Commit => "commit",
            Stage::Fsync => "fsync",
            Stage::Apply => "apply",
        }
    }
}

/// The windows summarized, in seconds.
pub const WINDOWS: [u64; 3] = [1, 10, 60];

const SECONDS: usize = 60;
/// The largest latency told apart (longer ones count as this): 10 minutes.
const HIGHEST_MICROS: u64 = 600_000_000;

struct Second {
    /// The Unix second this histogram holds, or 0 while unused.
    at: u64,
    histogram: Histogram<u64>,
}

/// One stage's last 60 seconds, and what it has counted since the server started.
struct StageWindows {
    seconds: Vec<Second>,
    count: u64,
    sum_micros: u64,
}

/// A window's summary of one stage, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    pub count: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

pub struct Latencies {
    stages: Vec<Mutex<StageWindows>>,
}

impl Default for Latencies {
    fn default() -> Latencies {
        let stage = || {
            Mutex::new(StageWindows {
                seconds: (0..SECONDS)
                    .map(|_| Second {
                        at: 0,
                        histogram: Histogram::new_with_bounds(1, HIGHEST_MICROS, 3)
                            .expect("valid bounds"),
                    })
                    .collect(),
                count: 0,
                sum_micros: 0,
            })
        };
        Latencies {
            stages: Stage::ALL.iter().map(|_| stage()).collect(),
        }
    }
}

pub fn unix_second() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Latencies {
    fn windows(&self, stage: Stage) -> std::sync::MutexGuard<'_, StageWindows> {
        let i = Stage::ALL.iter().position(|s| *s == stage).unwrap_or(0);
        self.stages[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn record(&self, stage: Stage, took: Duration) {
        self.record_at(stage, took, unix_second());
    }

    fn record_at(&self, stage: Stage, took: Duration, now: u64) {
        let micros = (took.as_micros() as u64).max(1);
        let mut w = self.windows(stage);
        w.count += 1;
        w.sum_micros = w.sum_micros.saturating_add(micros);
        let second = &mut w.seconds[(now % SECONDS as u64) as usize];
        if second.at != now {
            second.at = now;
            second.histogram.reset();
        }
        second.histogram.saturating_record(micros);
    }

    /// `stage` over the last `window` seconds (this one included).
    pub fn summary(&self, stage: Stage, window: u64) -> Summary {
        self.summary_at(stage, window, unix_second())
    }

    fn summary_at(&self, stage: Stage, window: u64, now: u64) -> Summary {
        let w = self.windows(stage);
        let mut merged =
            Histogram::<u64>::new_with_bounds(1, HIGHEST_MICROS, 3).expect("valid bounds");
        for second in &w.seconds {
            if second.at != 0 && second.at + window > now && second.at <= now {
                let _ = merged.add(&second.histogram);
            }
        }
        if merged.is_empty() {
            return Summary::default();
        }
        Summary {
            count: merged.len(),
            p50: merged.value_at_quantile(0.5),
            p90: merged.value_at_quantile(0.9),
            p99: merged.value_at_quantile(0.99),
            p999: merged.value_at_quantile(0.999),
            max: merged.max(),
        }
    }

    /// What `stage` counted since the server started, and the sum of its latencies.
    pub fn totals(&self, stage: Stage) -> (u64, u64) {
        let w = self.windows(stage);
        (w.count, w.sum_micros)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_hold_their_seconds_and_forget_older_ones() {
        let l = Latencies::default();
        let t = 1_000_000;
        for ms in 1..=100u64 {
            l.record_at(Stage::Commit, Duration::from_millis(ms), t);
        }
        l.record_at(Stage::Commit, Duration::from_secs(2), t - 30);
        let now = l.summary_at(Stage::Commit, 1, t);
        assert_eq!(now.count, 100);
        assert!((49_000..=51_000).contains(&now.p50), "{now:?}");
        assert!(now.p99 >= 98_000 && now.max >= 100_000, "{now:?}");
        assert_eq!(l.summary_at(Stage::Commit, 60, t).count, 101);
        assert_eq!(l.summary_at(Stage::Commit, 60, t).max / 1000, 2000);
        // A minute on, the same slots hold new seconds only.
        l.record_at(Stage::Commit, Duration::from_millis(5), t + 60);
        let later = l.summary_at(Stage::Commit, 60, t + 60);
        assert_eq!(later.count, 1, "{later:?}");
        assert_eq!(l.totals(Stage::Commit).0, 102);
        assert_eq!(l.summary_at(Stage::Statement, 60, t).count, 0);
    }
}
