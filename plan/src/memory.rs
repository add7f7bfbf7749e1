//! Memory accounting: what each thread and the whole server hold on the heap, and the
//! server's budget for it — so a statement that would take the machine's memory fails with
//! 53200 first.
//!
//! The server's global allocator reports every allocation and free here
//! ([`record_alloc`], [`record_free`]): each thread keeps its own net count (a thread-local
//! add, no atomic), and adds what changed to the server's total once it has moved by
//! [`FLUSH_BYTES`]. A statement notes its thread's count when it starts
//! ([`StatementMemory::start`]) and checks, once per row it handles, how much more its
//! thread holds and whether the server is past its budget. Without a counting allocator
//! (a library's tests) every count stays 0 and nothing is refused.

use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

use sql::{ErrorKind, SqlError, SqlResult};

/// How far a thread's count moves before it is added to the server's total: the total is
/// exact to within this much per thread.
pub const FLUSH_BYTES: isize = 1 << 20;

/// A statement that holds less than this is never refused, whatever the server holds: the
/// statement to fail is the one taking memory, not a small one beside it.
const STATEMENT_FLOOR_BYTES: isize = 64 << 20;

/// One thread's counts.
struct ThreadCounts {
    /// Bytes allocated minus bytes freed on this thread, since it started.
    net: Cell<isize>,
    /// The part of `net` not yet added to `SERVER_NET`.
    unflushed: Cell<isize>,
}

thread_local! {
    static COUNTS: ThreadCounts = const {
        ThreadCounts {
            net: Cell::new(0),
            unflushed: Cell::new(0),
        }
    };
}

/// Bytes the server's threads hold, added up (to within `FLUSH_BYTES` a thread).
static SERVER_NET: AtomicIsize = AtomicIsize::new(0);

/// The server's heap budget in bytes (0: none).
static BUDGET: AtomicUsize = AtomicUsize::new(0);

/// Counts `bytes` allocated on this thread. Called by the global allocator: it must not
/// allocate (const thread-locals without destructors do not).
#[inline]
pub fn record_alloc(bytes: usize) {
    change(bytes as isize);
}

/// Counts `bytes` freed on this thread.
#[inline]
pub fn record_free(bytes: usize) {
    change(-(bytes as isize));
}

#[inline]
fn change(delta: isize) {
    // try_with: a thread being torn down has no counts left; its frees go uncounted.
    let _ = COUNTS.try_with(|counts| {
        counts.net.set(counts.net.get() + delta);
        let pending = counts.unflushed.get() + delta;
        if pending.abs() >= FLUSH_BYTES {
            SERVER_NET.fetch_add(pending, Ordering::Relaxed);
            counts.unflushed.set(0);
        } else {
            counts.unflushed.set(pending);
        }
    });
}

/// What this thread holds, net, since it started (may be negative: memory allocated on one
/// thread is often freed on another).
#[inline]
pub fn thread_bytes() -> isize {
    COUNTS.try_with(|counts| counts.net.get()).unwrap_or(0)
}

/// What the server holds on the heap (outside the buffer pool, which has its own size).
pub fn server_bytes() -> usize {
    SERVER_NET.load(Ordering::Relaxed).max(0) as usize
}

/// Sets the server's heap budget (0: none).
pub fn set_budget(bytes: usize) {
    BUDGET.store(bytes, Ordering::Relaxed);
}

pub fn budget() -> usize {
    BUDGET.load(Ordering::Relaxed)
}

/// A statement's memory check: what its thread held when it started.
#[derive(Clone, Copy, Debug)]
pub struct StatementMemory {
    /// None: never refused (a command applied from the log must apply the same on every
    /// replica, whatever each one's memory).
    base: Option<isize>,
}

impl StatementMemory {
    /// Starts counting on this thread.
    pub fn start() -> StatementMemory {
        StatementMemory {
            base: Some(thread_bytes()),
        }
    }

    /// A check that never refuses.
    pub fn unlimited() -> StatementMemory {
        StatementMemory { base: None }
    }

    /// 53200 when the statement holds more than its floor and either the server is past
    /// its budget or the statement alone holds more than the budget. Cheap enough per row:
    /// a thread-local read and a compare, unless the statement holds a lot.
    #[inline]
    pub fn check(&self) -> SqlResult<()> {
        let Some(base) = self.base else {
            return Ok(());
        };
        let held = thread_bytes() - base;
        if held < STATEMENT_FLOOR_BYTES {
            return Ok(());
        }
        let budget = budget();
        if budget == 0 || (server_bytes() <= budget && held as usize <= budget) {
            return Ok(());
        }
        Err(SqlError::new(ErrorKind::OutOfMemory, "out of memory").with_detail(format!(
            "The statement holds {} MiB and the server {} MiB, past its budget of {} MiB (--memory-budget-mb).",
            held >> 20,
            server_bytes() >> 20,
            budget >> 20
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_past_the_budget_is_refused_and_an_unlimited_one_never() {
        let statement = StatementMemory::start();
        let unlimited = StatementMemory::unlimited();
        // Simulate what the allocator would report: 100 MiB held by this thread.
        record_alloc(100 << 20);
        set_budget(0);
        assert!(statement.check().is_ok(), "no budget: nothing refused");
        set_budget(80 << 20);
        let e = statement.check().unwrap_err();
        assert_eq!(e.kind, ErrorKind::OutOfMemory);
        assert!(unlimited.check().is_ok());
        record_free(100 << 20);
        assert!(statement.check().is_ok());
        set_budget(0);
    }
}
