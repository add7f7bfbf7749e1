//! Slots kept from reuse while snapshots that may read them live.
//!
//! A snapshot reads a page that was not resident when it was taken from the page's slot in
//! the data file, as the last durable checkpoint left it. Such a page is clean, so its slot
//! changes only when a later checkpoint writes the page elsewhere; that checkpoint frees the
//! old slot when it is durable, and the one after may write another page there. So the
//! checkpoint writer hands each durable checkpoint's old slots to `SlotHolds`: released at
//! once when no snapshot taken before then lives, otherwise deferred until every such
//! snapshot is gone (`reclaim`, at the start of each checkpoint).
//!
//! A long-lived snapshot therefore makes the data file grow by the pages written while it
//! lives — as a long transaction does in PostgreSQL — and nothing more: the deferred slots
//! are free in the durable page map record, so a crash loses nothing and leaks nothing.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::slots::SlotMap;

/// Shared by an engine (which registers snapshots) and its checkpoint writer (which frees
/// slots).
#[derive(Default)]
pub struct SlotHolds {
    state: Mutex<HoldState>,
    /// The engine is closed: another one may reuse any slot, so snapshots may no longer
    /// read the data file.
    closed: AtomicBool,
}

#[derive(Default)]
struct HoldState {
    /// Release batches begun so far; a snapshot registered when this was `b` may read slots
    /// that batches `b..` free.
    releases: u64,
    /// Live snapshots by the `releases` count they were registered at.
    live: BTreeMap<u64, usize>,
    /// Batches of freed slots some live snapshot may still read, oldest first.
    deferred: VecDeque<(u64, Vec<u32>)>,
}

impl HoldState {
    /// The oldest registration still live (`u64::MAX`: none).
    fn oldest_live(&self) -> u64 {
        self.live.keys().next().copied().unwrap_or(u64::MAX)
    }
}

/// A registered snapshot's hold; dropping it lets the writer reuse what it kept.
pub struct SlotHold {
    holds: Arc<SlotHolds>,
    registered: u64,
}

impl SlotHold {
    /// Whether the slots are still kept: false once the engine closed.
    pub fn holds(&self) -> bool {
        !self.holds.is_closed()
    }
}

impl SlotHolds {
    fn lock(&self) -> MutexGuard<'_, HoldState> {
        // Nothing a panic could interrupt leaves the state inconsistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a snapshot about to be taken: slots freed from now on stay unused while the
    /// returned hold lives.
    pub fn hold(self: &Arc<Self>) -> SlotHold {
        let mut state = self.lock();
        let registered = state.releases;
        *state.live.entry(registered).or_insert(0) += 1;
        SlotHold {
            holds: Arc::clone(self),
            registered,
        }
    }

    /// A durable checkpoint no longer uses `slots`: frees them in `map` now, or once no
    /// snapshot registered before this call lives.
    pub fn release(&self, slots: Vec<u32>, map: &mut SlotMap) {
        let mut state = self.lock();
        let batch = state.releases;
        state.releases += 1;
        // Freed at once by `reclaim_locked` unless a snapshot registered at or before
        // `batch` lives.
        state.deferred.push_back((batch, slots));
        Self::reclaim_locked(&mut state, map);
    }

    /// Frees the deferred slots no live snapshot may read any more.
    pub fn reclaim(&self, map: &mut SlotMap) {
        Self::reclaim_locked(&mut self.lock(), map);
    }

    fn reclaim_locked(state: &mut HoldState, map: &mut SlotMap) {
        let oldest = state.oldest_live();
        while state
            .deferred
            .front()
            .is_some_and(|(batch, _)| *batch < oldest)
        {
            let (_, slots) = state.deferred.pop_front().expect("checked");
            slots.into_iter().for_each(|slot| map.release(slot));
        }
    }

    /// The engine is closing: snapshots taken from it stop reading the data file.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Slots waiting for snapshots to end (for stats and tests).
    pub fn deferred_slots(&self) -> usize {
        self.lock()
            .deferred
            .iter()
            .map(|(_, slots)| slots.len())
            .sum()
    }
}

impl Drop for SlotHold {
    fn drop(&mut self) {
        let mut state = self.holds.lock();
        let count = state
            .live
            .get_mut(&self.registered)
            .expect("a live hold is registered");
        *count -= 1;
        if *count == 0 {
            state.live.remove(&self.registered);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn map_with_slots(taken: u32) -> SlotMap {
        // Pages 1..taken in slots 1..taken; nothing free.
        SlotMap::identity(u64::from(taken), u64::from(taken), Path::new("data")).unwrap()
    }

    #[test]
    fn slots_freed_after_a_snapshot_wait_for_it_and_earlier_ones_do_not() {
        let holds = Arc::new(SlotHolds::default());
        let mut map = map_with_slots(10);
        holds.release(vec![1], &mut map);
        let hold = holds.hold();
        holds.release(vec![2, 3], &mut map);
        let later = holds.hold();
        holds.release(vec![4], &mut map);
        assert_eq!(map.free_slots(), 1, "slot 1 was freed before any snapshot");
        assert_eq!(holds.deferred_slots(), 3);
        drop(hold);
        holds.reclaim(&mut map);
        assert_eq!(
            map.free_slots(),
            3,
            "slots 2 and 3 predate the later snapshot"
        );
        assert_eq!(holds.deferred_slots(), 1);
        drop(later);
        holds.reclaim(&mut map);
        assert_eq!(map.free_slots(), 4);
        assert_eq!(holds.deferred_slots(), 0);
        holds.release(vec![5], &mut map);
        assert_eq!(map.free_slots(), 5);
    }
}
