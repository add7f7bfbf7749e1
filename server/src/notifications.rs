//! `Notifications`: PostgreSQL's LISTEN/NOTIFY among the sessions of this node. A session
//! that listens on a channel registers its connection's `Inbox`; `NOTIFY` (at once, or at
//! its transaction's COMMIT) puts the notification in the inbox of every session listening
//! on the channel, the sender's own included; the connection's loop
//! (`frontend::serve_connection`) sends what its inbox holds whenever it waits for the
//! client outside a transaction block, as PostgreSQL delivers notifications between
//! transactions.
//!
//! Notifications are in memory and per node: a session connected to another node of a
//! cluster does not receive them, and none outlives the process.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// The longest payload PostgreSQL accepts (its default page size minus some).
pub const MAX_PAYLOAD_BYTES: usize = 7999;

/// Notifications an inbox keeps for a client that does not read them; older ones go first.
const MAX_QUEUED: usize = 100_000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notification {
    /// The sending session's process id (its BackendKeyData pid).
    pub pid: i32,
    pub channel: String,
    pub payload: String,
}

/// One connection's notifications not yet sent to its client.
#[derive(Default)]
pub struct Inbox {
    queue: Mutex<VecDeque<Notification>>,
    arrived: Notify,
    /// Its session has listened on a channel: until then nothing can arrive, and the
    /// connection's loop waits for its client alone.
    listened: AtomicBool,
}

impl Inbox {
    /// Whether a notification may arrive (the session has listened on a channel).
    pub fn may_receive(&self) -> bool {
        self.listened.load(Ordering::Relaxed)
    }

    fn push(&self, n: Notification) {
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if queue.len() >= MAX_QUEUED {
            queue.pop_front();
        }
        queue.push_back(n);
        drop(queue);
        // A stored permit: a notification that arrives while the connection is busy is
        // found the next time it waits.
        self.arrived.notify_one();
    }

    /// Waits until a notification may have arrived.
    pub async fn arrived(&self) {
        self.arrived.notified().await
    }

    /// Everything queued, oldest first.
    pub fn take(&self) -> Vec<Notification> {
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        queue.drain(..).collect()
    }
}

/// Who listens on which channel: channel → session → its inbox.
#[derive(Default)]
pub struct Notifications {
    listeners: Mutex<BTreeMap<String, BTreeMap<u64, Arc<Inbox>>>>,
}

impl Notifications {
    fn listeners(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, BTreeMap<u64, Arc<Inbox>>>> {
        self.listeners.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn listen(&self, session: u64, channel: &str, inbox: &Arc<Inbox>) {
        inbox.listened.store(true, Ordering::Relaxed);
        self.listeners()
            .entry(channel.to_string())
            .or_default()
            .insert(session, inbox.clone());
    }

    /// Stops `session` listening on `channel`, or on every channel (None).
    pub fn unlisten(&self, session: u64, channel: Option<&str>) {
        let mut listeners = self.listeners();
        listeners.retain(|name, sessions| {
            if channel.is_none_or(|c| c == name) {
                sessions.remove(&session);
            }
            !sessions.is_empty()
        });
    }

    /// Delivers to every session listening on the notification's channel.
    pub fn notify(&self, n: &Notification) {
        let inboxes: Vec<Arc<Inbox>> = self
            .listeners()
            .get(&n.channel)
            .map(|sessions| sessions.values().cloned().collect())
            .unwrap_or_default();
        for inbox in inboxes {
            inbox.push(n.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The channels `session` listens on.
    fn channels_of(hub: &Notifications, session: u64) -> std::collections::BTreeSet<String> {
        hub.listeners()
            .iter()
            .filter(|(_, sessions)| sessions.contains_key(&session))
            .map(|(name, _)| name.clone())
            .collect()
    }

    fn note(channel: &str, payload: &str) -> Notification {
        Notification {
            pid: 7,
            channel: channel.into(),
            payload: payload.into(),
        }
    }

    #[test]
    fn listeners_get_their_channels_notifications_in_order() {
        let hub = Notifications::default();
        let (a, b) = (Arc::new(Inbox::default()), Arc::new(Inbox::default()));
        hub.listen(1, "jobs", &a);
        hub.listen(2, "jobs", &b);
        hub.listen(2, "other", &b);
        hub.notify(&note("jobs", "1"));
        hub.notify(&note("other", "2"));
        hub.notify(&note("nobody", "3"));
        assert_eq!(a.take(), vec![note("jobs", "1")]);
        assert_eq!(b.take(), vec![note("jobs", "1"), note("other", "2")]);
        hub.unlisten(2, Some("jobs"));
        assert_eq!(channels_of(&hub, 2), ["other".to_string()].into());
        hub.notify(&note("jobs", "4"));
        assert!(b.take().is_empty());
        hub.unlisten(1, None);
        assert!(channels_of(&hub, 1).is_empty());
    }

    #[tokio::test]
    async fn a_notification_sent_while_busy_is_found_later() {
        let inbox = Arc::new(Inbox::default());
        let hub = Notifications::default();
        hub.listen(1, "c", &inbox);
        hub.notify(&note("c", "x"));
        tokio::time::timeout(std::time::Duration::from_secs(5), inbox.arrived())
            .await
            .expect("the stored permit wakes the waiter");
        assert_eq!(inbox.take(), vec![note("c", "x")]);
    }
}
