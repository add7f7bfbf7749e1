//! Replies to each proposed command as soon as the executor has applied it.
//!
//! openraft answers a `client_write` only after its entry, and every entry handed to the state
//! machine with it, has been applied. With group commit that makes each client wait for the
//! slowest command of its batch, and the clients of a batch then all come back at once: with
//! big commands (a 1,000-row INSERT takes milliseconds to apply) the sessions re-parse together
//! while the executor idles, then the executor works while they wait.
//!
//! So the proposer registers an entry's waiters under a token that travels with the entry in
//! memory (`Batch::token`, never written to the log); the log adapter binds the token to the
//! log index the entry is appended at; the state machine adapter looks the index up and has the
//! executor answer each command as it is applied. The entry is committed (durable) before it
//! is applied, so answering then promises nothing more than the full reply would. Entries
//! without a bound token (replay, another node's) are answered the usual way only.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use tokio::sync::oneshot;

use crate::proposer::ProposeError;

pub(crate) type Waiter = oneshot::Sender<Result<Vec<u8>, ProposeError>>;

/// What is left of an entry when its `client_write` returns: the waiters not yet answered,
/// and whether the entry ever reached this node's log. One that did may still commit
/// through a later leader even after a truncation here (Raft's figure 8), so it must not be
/// proposed again; one that did not applies nowhere.
pub(crate) struct Finished {
    pub waiters: Vec<Option<Waiter>>,
    pub logged: bool,
}

#[derive(Default)]
pub(crate) struct EarlyReplies {
    inner: Mutex<Registry>,
}

#[derive(Default)]
struct Registry {
    next_token: u64,
    /// An entry's waiters by token, `None` once answered.
    waiting: HashMap<u64, Vec<Option<Waiter>>>,
    /// Token of the entry appended at a log index.
    at_index: HashMap<u64, u64>,
    /// Tokens whose entry reached this node's log, even if it was truncated since.
    logged: HashSet<u64>,
}

impl EarlyReplies {
    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        // A panic while holding the lock cannot leave the maps inconsistent: keep going.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers an entry's waiters, in command order; returns its token (never 0).
    pub fn register(&self, waiters: Vec<Waiter>) -> u64 {
        let mut registry = self.registry();
        registry.next_token += 1;
        let token = registry.next_token;
        registry
            .waiting
            .insert(token, waiters.into_iter().map(Some).collect());
        token
    }

    /// The entry carrying `token` was appended at `index`.
    pub fn bind(&self, index: u64, token: u64) {
        let mut registry = self.registry();
        if registry.waiting.contains_key(&token) {
            registry.at_index.insert(index, token);
            registry.logged.insert(token);
        }
    }

    /// Entries from `index` on were removed from the log (a new leader's entries replace
    /// them): they will not be applied as appended.
    pub fn unbind_from(&self, index: u64) {
        self.registry().at_index.retain(|&i, _| i < index);
    }

    /// The token of the entry at `index`, if a waiting proposer appended it; once only.
    pub fn take_index(&self, index: u64) -> Option<u64> {
        self.registry().at_index.remove(&index)
    }

    /// Answers command `slot` of the entry with `token`, if it is still waiting.
    pub fn answer(&self, token: u64, slot: usize, result: Vec<u8>) {
        let waiter = self
            .registry()
            .waiting
            .get_mut(&token)
            .and_then(|waiters| waiters.get_mut(slot)?.take());
        if let Some(waiter) = waiter {
            let _ = waiter.send(Ok(result));
        }
    }

    /// Ends the entry's registration: its waiters (`None` where already answered), and
    /// whether it reached this node's log.
    pub fn finish(&self, token: u64) -> Finished {
        let mut registry = self.registry();
        registry.at_index.retain(|_, t| *t != token);
        Finished {
            logged: registry.logged.remove(&token),
            waiters: registry.waiting.remove(&token).unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_entry_answers_each_command_once_and_returns_the_rest() {
        let replies = EarlyReplies::default();
        let (tx0, mut rx0) = oneshot::channel();
        let (tx1, mut rx1) = oneshot::channel();
        let token = replies.register(vec![tx0, tx1]);
        assert_ne!(token, 0);
        replies.bind(7, token);
        assert_eq!(replies.take_index(6), None);
        assert_eq!(replies.take_index(7), Some(token));
        assert_eq!(replies.take_index(7), None, "an index is taken once");
        replies.answer(token, 0, b"first".to_vec());
        replies.answer(token, 0, b"again".to_vec());
        assert_eq!(rx0.try_recv().unwrap().unwrap(), b"first");
        assert!(rx1.try_recv().is_err());
        let finished = replies.finish(token);
        assert!(finished.logged);
        let rest = finished.waiters;
        assert!(rest[0].is_none() && rest[1].is_some());
        replies.answer(token, 1, b"late".to_vec());
        assert!(
            rx1.try_recv().is_err(),
            "a finished entry is answered by its proposer"
        );
    }

    #[test]
    fn truncated_and_unknown_entries_are_not_bound() {
        let replies = EarlyReplies::default();
        let (tx, _rx) = oneshot::channel();
        let token = replies.register(vec![tx]);
        replies.bind(3, token);
        replies.bind(4, token + 1);
        replies.unbind_from(3);
        assert_eq!(replies.take_index(3), None);
        assert_eq!(replies.take_index(4), None);
        // Truncated, it was logged all the same: it may commit elsewhere.
        assert!(replies.finish(token).logged);
        let (tx, _rx) = oneshot::channel();
        let never = replies.register(vec![tx]);
        assert!(!replies.finish(never).logged);
    }
}
