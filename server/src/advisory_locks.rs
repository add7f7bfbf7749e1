//! `AdvisoryLocks`: PostgreSQL's advisory locks for the sessions of this node. A lock is a
//! key (one bigint, or two integers) held exclusively by one session or shared by several;
//! a session may hold a lock several times (each hold is given back by one unlock) and at
//! two levels, its own and its transaction's, which never conflict with each other. Locks
//! are in memory only: they go with the session (`Session`'s drop gives them back) and with
//! the process. In a cluster they exclude only sessions connected to the same node.
//!
//! It must not be touched by an executor: waiting for a lock is a session's await.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::Notify;

/// A lock's key: `pg_advisory_lock(bigint)` and `pg_advisory_lock(int, int)` are two key
/// spaces, as in PostgreSQL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LockKey {
    Big(i64),
    Pair(i32, i32),
}

/// Who holds a lock: a session, at its own level or its transaction's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Holder {
    pub session: u64,
    pub transaction: bool,
}

/// The holds on one key: counts per holder, exclusive and shared.
#[derive(Default)]
struct Holds {
    exclusive: HashMap<Holder, u32>,
    shared: HashMap<Holder, u32>,
}

impl Holds {
    fn is_empty(&self) -> bool {
        self.exclusive.is_empty() && self.shared.is_empty()
    }

    /// Whether `session` may take the lock: another session's exclusive hold conflicts with
    /// anything, another session's shared hold with an exclusive one.
    fn allows(&self, session: u64, shared: bool) -> bool {
        let other = |h: &Holder| h.session != session;
        !self.exclusive.keys().any(other) && (shared || !self.shared.keys().any(other))
    }
}

#[derive(Default)]
pub struct AdvisoryLocks {
    held: Mutex<HashMap<LockKey, Holds>>,
    /// Woken whenever a hold is given back, so waiters try again.
    released: Notify,
}

impl AdvisoryLocks {
    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<LockKey, Holds>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the lock if nothing conflicts.
    pub fn try_lock(&self, holder: Holder, key: LockKey, shared: bool) -> bool {
        let mut held = self.held();
        let holds = held.entry(key).or_default();
        if !holds.allows(holder.session, shared) {
            if holds.is_empty() {
                held.remove(&key);
            }
            return false;
        }
        let counts = if shared {
            &mut holds.shared
        } else {
            &mut holds.exclusive
        };
        *counts.entry(holder).or_default() += 1;
        true
    }

    /// Waits until the lock can be taken, then takes it. Dropping the future (a cancelled
    /// statement) leaves nothing taken.
    pub async fn lock(&self, holder: Holder, key: LockKey, shared: bool) {
        loop {
            let released = self.released.notified();
            tokio::pin!(released);
            // Registered before trying, so a release between the try and the wait wakes it.
            released.as_mut().enable();
            if self.try_lock(holder, key, shared) {
                return;
            }
            released.await;
        }
    }

    /// Gives back one hold: false when the holder had none.
    pub fn unlock(&self, holder: Holder, key: LockKey, shared: bool) -> bool {
        let mut held = self.held();
        let Some(holds) = held.get_mut(&key) else {
            return false;
        };
        let counts = if shared {
            &mut holds.shared
        } else {
            &mut holds.exclusive
        };
        let Some(count) = counts.get_mut(&holder) else {
            return false;
        };
        *count -= 1;
        if *count == 0 {
            counts.remove(&holder);
        }
        if holds.is_empty() {
            held.remove(&key);
        }
        drop(held);
        self.released.notify_waiters();
        true
    }

    /// Gives back every hold of `session` at the given level (None: both).
    pub fn unlock_all(&self, session: u64, transaction: Option<bool>) {
        let mine =
            |h: &Holder| h.session == session && transaction.is_none_or(|t| h.transaction == t);
        let mut held = self.held();
        let mut changed = false;
        held.retain(|_, holds| {
            let count = holds.exclusive.len() + holds.shared.len();
            holds.exclusive.retain(|h, _| !mine(h));
            holds.shared.retain(|h, _| !mine(h));
            changed |= holds.exclusive.len() + holds.shared.len() != count;
            !holds.is_empty()
        });
        drop(held);
        if changed {
            self.released.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Holder = Holder {
        session: 1,
        transaction: false,
    };
    const A_TXN: Holder = Holder {
        session: 1,
        transaction: true,
    };
    const B: Holder = Holder {
        session: 2,
        transaction: false,
    };

    #[test]
    fn exclusive_and_shared_holds_conflict_as_postgresql_s() {
        let locks = AdvisoryLocks::default();
        let key = LockKey::Big(7);
        assert!(locks.try_lock(A, key, false));
        assert!(
            locks.try_lock(A, key, false),
            "a session takes its own lock again"
        );
        assert!(
            locks.try_lock(A_TXN, key, true),
            "its transaction's level does not conflict"
        );
        assert!(!locks.try_lock(B, key, false));
        assert!(!locks.try_lock(B, key, true));
        assert!(
            locks.try_lock(B, LockKey::Pair(0, 7), false),
            "the two-key space is another"
        );
        assert!(locks.unlock(A, key, false));
        assert!(locks.unlock(A, key, false));
        assert!(!locks.unlock(A, key, false), "no hold left");
        assert!(
            locks.try_lock(B, key, true),
            "shared beside A's shared hold"
        );
        assert!(
            !locks.try_lock(B, key, false),
            "exclusive against A's shared hold"
        );
        locks.unlock_all(1, Some(true));
        assert!(locks.try_lock(B, key, false));
        locks.unlock_all(2, None);
        assert!(locks.held().is_empty());
    }

    #[tokio::test]
    async fn a_waiter_takes_the_lock_when_it_is_given_back() {
        let locks = std::sync::Arc::new(AdvisoryLocks::default());
        let key = LockKey::Big(1);
        assert!(locks.try_lock(A, key, false));
        let waiter = {
            let locks = locks.clone();
            tokio::spawn(async move { locks.lock(B, key, false).await })
        };
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        locks.unlock_all(1, None);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("the waiter took the lock")
            .unwrap();
        assert!(!locks.try_lock(A, key, false));
    }
}
