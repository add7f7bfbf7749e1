//! `max_connections`: how many client connections the server holds at once, counted from the
//! startup message to the end of the connection, with the last `superuser_reserved_connections`
//! slots kept for superusers (so an administrator can still get in to see why the server is
//! full). A connection over the limit is refused with FATAL 53300, as PostgreSQL refuses it.

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

    /// Takes a slot for a connection of a superuser or not; the message to refuse it with.
    pub fn take(self: &Arc<Self>, superuser: bool) -> Result<Slot, &'static str> {
        let open = self.open.fetch_add(1, Ordering::AcqRel) + 1;
        let slot = Slot {
            slots: self.clone(),
        };
        if open > self.max {
            return Err("sorry, too many clients already");
        }
        if !superuser && open > self.max - self.reserved {
            return Err(
                "remaining connection slots are reserved for roles with the SUPERUSER attribute",
            );
        }
        Ok(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_slots_are_for_superusers() {
        let slots = ConnectionSlots::new(5, 2);
        let held: Vec<Slot> = (0..3).map(|_| slots.take(false).unwrap()).collect();
        assert!(slots.take(false).unwrap_err().contains("reserved"));
        let admin = slots.take(true).unwrap();
        let admin2 = slots.take(true).unwrap();
        assert!(slots.take(true).unwrap_err().contains("too many"));
        drop(admin);
        drop(admin2);
        drop(held);
        // Every refused attempt gave its slot back.
        let again: Vec<Slot> = (0..3).map(|_| slots.take(false).unwrap()).collect();
        assert_eq!(again.len(), 3);
    }
}
