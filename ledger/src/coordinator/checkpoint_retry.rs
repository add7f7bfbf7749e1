//! Checkpoints that fail — a full disk, most often — are retried with a growing pause (1 s,
//! doubling, at most 5 s) instead of at once: a retry cannot succeed before space returns,
//! and each attempt costs a burst of writes. A failure changes nothing that matters (every
//! partition keeps its previous checkpoint and the log keeps everything since), so the
//! executor goes on applying meanwhile, as far as its buffer pool allows. The log says so
//! once when the failures begin, at most once a minute while they last, and once when a
//! checkpoint succeeds again.

use std::time::{Duration, Instant};

const FIRST_PAUSE: Duration = Duration::from_secs(1);
const LONGEST_PAUSE: Duration = Duration::from_secs(5);
const LOG_EVERY: Duration = Duration::from_secs(60);

#[derive(Default)]
pub(super) struct CheckpointRetry {
    /// Failures since the last checkpoint that succeeded.
    in_a_row: u64,
    pause: Duration,
    next_try: Option<Instant>,
    logged_at: Option<Instant>,
}

impl CheckpointRetry {
    /// Whether a checkpoint may begin now.
    pub(super) fn may_begin(&self) -> bool {
        self.next_try.is_none_or(|at| Instant::now() >= at)
    }

    /// A checkpoint failed with `why`.
    pub(super) fn failed(&mut self, why: &str) {
        let now = Instant::now();
        self.in_a_row += 1;
        self.pause = (self.pause * 2).clamp(FIRST_PAUSE, LONGEST_PAUSE);
        self.next_try = Some(now + self.pause);
        if self
            .logged_at
            .is_none_or(|at| now.duration_since(at) >= LOG_EVERY)
        {
            self.logged_at = Some(now);
            eprintln!(
                "hotledger: checkpoint failed ({} in a row; retrying in {} s; nothing is lost, the log keeps every change since the last checkpoint): {why}",
                self.in_a_row,
                self.pause.as_secs()
            );
        }
    }

    /// A checkpoint succeeded.
    pub(super) fn succeeded(&mut self) {
        if self.in_a_row > 0 {
            eprintln!(
                "hotledger: checkpoint succeeded after {} failed attempts",
                self.in_a_row
            );
        }
        *self = CheckpointRetry::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_up_to_the_longest_and_reset_on_success() {
        let mut retry = CheckpointRetry::default();
        assert!(retry.may_begin());
        retry.failed("no space");
        assert!(!retry.may_begin());
        assert_eq!(retry.pause, FIRST_PAUSE);
        for _ in 0..10 {
            retry.failed("no space");
        }
        assert_eq!(retry.pause, LONGEST_PAUSE);
        assert_eq!(retry.in_a_row, 11);
        retry.succeeded();
        assert!(retry.may_begin());
        assert_eq!(retry.in_a_row, 0);
    }
}
