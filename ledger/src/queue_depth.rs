//! How many requests wait for each executor thread: the coordinator's queue (index 0) and
//! each partition thread's (index p), counted as they are sent and as the thread takes them
//! — `hotledger_executor_queue_depth{partition}`, a gauge of how far applying lags.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub struct QueueDepths {
    depths: Vec<AtomicU64>,
}

impl QueueDepths {
    pub fn new(threads: usize) -> QueueDepths {
        QueueDepths {
            depths: (0..threads.max(1)).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    pub(crate) fn queued(&self, thread: usize) {
        if let Some(d) = self.depths.get(thread) {
            d.fetch_add(1, Relaxed);
        }
    }

    pub(crate) fn taken(&self, thread: usize) {
        if let Some(d) = self.depths.get(thread) {
            let _ = d.fetch_update(Relaxed, Relaxed, |n| Some(n.saturating_sub(1)));
        }
    }

    /// Thread `thread`'s depth now.
    pub(crate) fn depth(&self, thread: usize) -> u64 {
        self.depths.get(thread).map_or(0, |d| d.load(Relaxed))
    }

    /// Each thread's depth now, the coordinator's first.
    pub fn depths(&self) -> Vec<u64> {
        self.depths.iter().map(|d| d.load(Relaxed)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_what_waits() {
        let q = QueueDepths::new(2);
        q.queued(0);
        q.queued(0);
        q.queued(1);
        q.taken(0);
        q.taken(1);
        q.taken(1);
        assert_eq!(q.depths(), [1, 0]);
    }
}
