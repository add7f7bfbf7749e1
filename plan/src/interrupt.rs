//! `Interrupt`: how a running statement learns it must stop — a cancel request, its
//! `statement_timeout`, `pg_terminate_backend`, or its client gone.
//!
//! The session makes one per query message and hands clones to wherever the statement runs
//! (its own thread, a blocking worker, the executor's reads and stages); whoever stops it
//! raises a reason, and the loops that may run long (scans, joins, aggregates, sorts, series)
//! call [`Interrupt::check`] once per row, which is one relaxed atomic load. A command
//! applied from the log carries [`Interrupt::never`]: every replica applies it whole.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use sql::{ErrorKind, SqlError, SqlResult};

/// Why a statement stops; a later reason of higher rank replaces an earlier one (a
/// terminated connection's statement reports the termination, not the cancel before it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum StopReason {
    /// A CancelRequest or `pg_cancel_backend`.
    Cancel = 1,
    /// `statement_timeout` passed.
    Timeout = 2,
    /// The client's connection closed.
    ConnectionLost = 3,
    /// `pg_terminate_backend`.
    Terminate = 4,
}

impl StopReason {
    fn from_u8(n: u8) -> Option<StopReason> {
        Some(match n {
            1 => StopReason::Cancel,
            2 => StopReason::Timeout,
            3 => StopReason::ConnectionLost,
            4 => StopReason::Terminate,
            _ => return None,
        })
    }

    /// The error the statement ends with, as PostgreSQL words it.
    pub fn error(self) -> SqlError {
        match self {
            StopReason::Cancel => SqlError::new(
                ErrorKind::QueryCanceled,
                "canceling statement due to user request",
            ),
            StopReason::Timeout => SqlError::new(
                ErrorKind::QueryCanceled,
                "canceling statement due to statement timeout",
            ),
            StopReason::ConnectionLost => {
                SqlError::new(ErrorKind::ConnectionFailure, "connection to client lost")
            }
            StopReason::Terminate => SqlError::new(
                ErrorKind::AdminShutdown,
                "terminating connection due to administrator command",
            ),
        }
    }
}

/// A statement's stop signal, shared by clones. [`Interrupt::never`] is never raised.
#[derive(Clone, Debug, Default)]
pub struct Interrupt(Option<Arc<AtomicU8>>);

impl Interrupt {
    /// A signal that can be raised.
    pub fn new() -> Interrupt {
        Interrupt(Some(Arc::new(AtomicU8::new(0))))
    }

    /// A signal nothing raises: for commands applied from the log, which no one may stop
    /// halfway on one replica and not on another.
    pub fn never() -> Interrupt {
        Interrupt(None)
    }

    /// Asks the statement to stop for `reason` (kept if it outranks the one already given).
    pub fn raise(&self, reason: StopReason) {
        if let Some(flag) = &self.0 {
            flag.fetch_max(reason as u8, Ordering::Relaxed);
        }
    }

    /// Takes back a timeout raised for an earlier statement of the same query, before the
    /// next one starts (a cancel or termination stays).
    pub fn clear_timeout(&self) {
        if let Some(flag) = &self.0 {
            let _ = flag.compare_exchange(
                StopReason::Timeout as u8,
                0,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }

    /// Why the statement must stop, if it must.
    pub fn reason(&self) -> Option<StopReason> {
        self.0
            .as_ref()
            .and_then(|flag| StopReason::from_u8(flag.load(Ordering::Relaxed)))
    }

    /// The error to stop with, when the statement must stop. Cheap enough to call per row.
    #[inline]
    pub fn check(&self) -> SqlResult<()> {
        match &self.0 {
            Some(flag) if flag.load(Ordering::Relaxed) != 0 => match self.reason() {
                Some(reason) => Err(reason.error()),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }
}

/// The one interrupt nothing raises, for evaluations that have none of their own.
pub(crate) static NEVER: Interrupt = Interrupt(None);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_highest_reason_wins_and_a_timeout_can_be_taken_back() {
        let i = Interrupt::new();
        assert!(i.check().is_ok());
        i.raise(StopReason::Timeout);
        assert_eq!(i.check().unwrap_err().kind, ErrorKind::QueryCanceled);
        i.clear_timeout();
        assert!(i.check().is_ok());
        i.raise(StopReason::Terminate);
        i.raise(StopReason::Cancel);
        i.clear_timeout();
        assert_eq!(i.reason(), Some(StopReason::Terminate));
        let never = Interrupt::never();
        never.raise(StopReason::Cancel);
        assert!(never.check().is_ok());
    }
}
