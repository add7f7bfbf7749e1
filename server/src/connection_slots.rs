//! `max_connections`: how many client connections the server holds at once, counted from
//! the moment one is accepted (one that never logs in holds its slot until the startup
//! timeout drops it) to its end, with the last `superuser_reserved_connections` slots kept
//! for superusers (so an administrator can still get in to see why the server is full). A
//! connection over the limit is refused once its startup message says who it is, with FATAL
//! 53300, as PostgreSQL refuses it; a cancel request, which never logs in, is served even
//! then.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// PostgreSQL's default.
pub const SUPERUSER_RESERVED: usize = 3;

#[derive(Debug)]
pub struct ConnectionSlots {
    open: AtomicUsize,
    max: usize,
    reserved: usize,
}

/// One connection's slot, given back when dropped.
#[derive(Debug)]
pub struct Slot {
    slots: Arc<ConnectionSlots>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.open.fetch_sub(1, Ordering::AcqRel);
    }
}

impl ConnectionSlots {
    /// `max` connections, of which the last `reserved` (fewer when `max` is small) are for
    /// superusers.
    pub fn new(max: usize, reserved: usize) -> Arc<ConnectionSlots> {
        Arc::new(ConnectionSlots {
            open: AtomicUsize::new(0),
            max,
            reserved: reserved.min(max.saturating_sub(1)),
        })
    }

    /// Counts an accepted connection.
    pub fn accept(self: &Arc<Self>) -> Slot {
        self.open.fetch_add(1, Ordering::AcqRel);
        Slot {
            slots: self.clone(),
        }
    }
}

impl Slot {
    /// Whether the connection holding this slot may log in, as a superuser or not; the
    /// message to refuse it with.
    pub fn admit(&self, superuser: bool) -> Result<(), &'static str> {
        let slots = &self.slots;
        let open = slots.open.load(Ordering::Acquire);
        if open > slots.max {
            return Err("sorry, too many clients already");
        }
        if !superuser && open > slots.max - slots.reserved {
            return Err(
                "remaining connection slots are reserved for roles with the SUPERUSER attribute",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection refused keeps its slot until it goes, as the others do.
    fn take(slots: &Arc<ConnectionSlots>, superuser: bool) -> Result<Slot, &'static str> {
        let slot = slots.accept();
        slot.admit(superuser).map(|()| slot)
    }

    #[test]
    fn the_last_slots_are_for_superusers() {
        let slots = ConnectionSlots::new(5, 2);
        let held: Vec<Slot> = (0..3).map(|_| take(&slots, false).unwrap()).collect();
        assert!(take(&slots, false).unwrap_err().contains("reserved"));
        let admin = take(&slots, true).unwrap();
        let admin2 = take(&slots, true).unwrap();
        assert!(take(&slots, true).unwrap_err().contains("too many"));
        drop(admin);
        drop(admin2);
        drop(held);
        // Every refused attempt gave its slot back.
        let again: Vec<Slot> = (0..3).map(|_| take(&slots, false).unwrap()).collect();
        assert_eq!(again.len(), 3);
    }
}
