//! On a single node an entry is committed the moment it is durable: it is the only voter.
//! So its log thread hands each entry to the executor as soon as its flush returns, rather
//! than through openraft's core (which learns of the flush on another thread, marks the
//! entry committed and passes it to its state-machine task, which only then sends it to the
//! executor): one wake-up on a commit's path instead of three. openraft still applies every
//! entry through the state-machine adapter, which then collects the executor's answer to the
//! entry handed over instead of sending it again.
//!
//! The executor must receive every entry once, in log order, whoever sends it. Both senders
//! send under one lock, and `next` is the index the executor receives next: the adapter
//! sends an entry only when it is `next` (entries replayed at start, before the log thread
//! appended anything), the log thread only a run of durable entries that begins at `next`
//! (never one that would leave a gap the adapter has yet to fill). Until the adapter has
//! sent its first entry, `next` is unknown and nothing is handed over: the executor's own
//! position is what it recovered, which openraft learns and applies from.
//!
//! A cluster does not use this: there a durable entry is not yet committed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use ledger::ExecutorHandle;
use openraft::{Entry, StorageError};

use crate::early_reply::EarlyReplies;
use crate::state_machine::{send_entry, sm_error, Sent};
use crate::types::{NodeId, TypeConfig};

pub(crate) struct ApplyAhead {
    executor: ExecutorHandle,
    early: Arc<EarlyReplies>,
    state: Mutex<Order>,
}

#[derive(Default)]
struct Order {
    /// The index the executor receives next; None until the adapter sent its first entry.
    next: Option<u64>,
    /// Entries the log thread handed over that openraft has not applied yet, by index.
    handed: BTreeMap<u64, Sent>,
}

impl ApplyAhead {
    pub fn new(executor: ExecutorHandle, early: Arc<EarlyReplies>) -> ApplyAhead {
        ApplyAhead {
            executor,
            early,
            state: Mutex::default(),
        }
    }

    fn order(&self) -> std::sync::MutexGuard<'_, Order> {
        // Sends happen under the lock and cannot leave it half-changed: keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The log thread: `entries`, in log order, are durable (so committed). Hands over those
    /// that continue what the executor received; the rest are left to the adapter.
    pub fn durable(&self, entries: Vec<Entry<TypeConfig>>) {
        let mut order = self.order();
        for entry in entries {
            let index = entry.log_id.index;
            if order.next != Some(index) {
                return;
            }
            let Ok(sent) = send_entry(&self.executor, &self.early, entry) else {
                return;
            };
            order.handed.insert(index, sent);
            order.next = Some(index + 1);
        }
    }

    /// The adapter: the executor's answer to `entry`, which openraft applies now — taken
    /// from what the log thread handed over, or sent now.
    pub fn send_or_take(&self, entry: Entry<TypeConfig>) -> Result<Sent, StorageError<NodeId>> {
        let index = entry.log_id.index;
        let mut order = self.order();
        let next = *order.next.get_or_insert(index);
        if index < next {
            return order.handed.remove(&index).ok_or_else(|| {
                sm_error(format!(
                    "log entry {index} reached the executor, but not from the log thread"
                ))
            });
        }
        if index > next {
            return Err(sm_error(format!(
                "log entry {index} would reach the executor before entry {next}"
            )));
        }
        let sent = send_entry(&self.executor, &self.early, entry)?;
        order.next = Some(index + 1);
        Ok(sent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, EntryPayload, LogId};

    fn blank(index: u64) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Blank,
        }
    }

    fn executor(dir: &std::path::Path) -> ExecutorHandle {
        let options = ledger::ExecutorOptions::small(dir, 1, |_, _| Vec::new());
        ledger::spawn(options).expect("an executor").0
    }

    async fn applied(sent: Sent) -> bool {
        matches!(sent.answer.await, Ok((Ok(_), _)))
    }

    /// Whoever sends, the executor receives each entry once and in order (it stops on
    /// anything else, and every answer below would then fail): the log thread hands over
    /// only what continues the order, the adapter sends the rest and collects the others.
    #[tokio::test]
    async fn entries_reach_the_executor_once_in_order_from_either_sender() {
        let dir = tempfile::tempdir().unwrap();
        let ahead = ApplyAhead::new(executor(dir.path()), Arc::default());
        // Nothing is handed over before the adapter sent its first entry.
        ahead.durable(vec![blank(1)]);
        assert!(ahead.order().handed.is_empty());
        assert!(applied(ahead.send_or_take(blank(1)).unwrap()).await);
        // Entries 2 and 3 go from the log thread; 5 would leave a gap, so it waits.
        ahead.durable(vec![blank(2), blank(3)]);
        ahead.durable(vec![blank(5)]);
        assert_eq!(
            ahead.order().handed.keys().copied().collect::<Vec<_>>(),
            [2, 3]
        );
        for index in 2..=5 {
            let sent = ahead.send_or_take(blank(index)).unwrap();
            assert!(applied(sent).await, "entry {index}");
        }
        assert!(ahead.order().handed.is_empty());
        // An entry past the next one is refused, as one handed over by nobody.
        assert!(ahead.send_or_take(blank(7)).is_err());
        assert!(ahead.send_or_take(blank(3)).is_err());
        assert!(applied(ahead.send_or_take(blank(6)).unwrap()).await);
    }
}
