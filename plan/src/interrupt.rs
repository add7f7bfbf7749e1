//! `Interrupt`: how a running statement learns it must stop — a cancel request, its
//! `statement_timeout`, `pg_terminate_backend`, or its client gone.
//!
//! The session makes one per query message and hands clones to wherever the statement runs
//! (its own thread, a blocking worker, the executor's reads and stages); whoever stops it
//! raises a reason, and the loops that may run long (scans, joins, aggregates, sorts, series)
//! call [`Interrupt::check`] once per row, which is one relaxed atomic load. A command
//! applied from the log carries [`Interrupt::never`]: every replica applies it whole.
//!
//! The same flag carries one more request that is not a stop: [`Interrupt::ask_to_pause`].
//! A long read on a snapshot is paced by it while the ledger is busy (the server's
//! `read_pacing`): the loop that checks next sleeps for the time asked, then goes on.

use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

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

/// The flag's bit that asks for a pause; the bits below it hold the stop reason.
const PAUSE: u8 = 0x80;

/// What clones of one interrupt share.
#[derive(Debug, Default)]
struct Signal {
    /// A [`StopReason`] (0: none) in the low bits, [`PAUSE`] above them.
    flag: AtomicU8,
    /// How long the asked pause is, µs.
    pause_micros: AtomicU32,
}

/// A statement's stop signal, shared by clones. [`Interrupt::never`] is never raised.
#[derive(Clone, Debug, Default)]
pub struct Interrupt(Option<Arc<Signal>>);

impl Interrupt {
    /// A signal that can be raised.
    pub fn new() -> Interrupt {
        Interrupt(Some(Arc::new(Signal::default())))
    }

    /// A signal nothing raises: for commands applied from the log, which no one may stop
    /// halfway on one replica and not on another.
    pub fn never() -> Interrupt {
        Interrupt(None)
    }

    /// Asks the statement to stop for `reason` (kept if it outranks the one already given).
    pub fn raise(&self, reason: StopReason) {
        if let Some(signal) = &self.0 {
            let _ = signal
                .flag
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |flag| {
                    Some((flag & !PAUSE).max(reason as u8) | (flag & PAUSE))
                });
        }
    }

    /// Asks the statement to sleep for `pause` at its next check, then go on: how a long
    /// read gives the cores back to a busy ledger. A pause asked again before the last one
    /// began replaces it; a pause is skipped when the statement must stop.
    pub fn ask_to_pause(&self, pause: Duration) {
        if let Some(signal) = &self.0 {
            let micros = pause.as_micros().min(u32::MAX as u128) as u32;
            signal.pause_micros.store(micros, Ordering::Relaxed);
            signal.flag.fetch_or(PAUSE, Ordering::Relaxed);
        }
    }

    /// Whether a pause was asked and has not begun yet.
    #[cfg(test)]
    fn pause_pending(&self) -> bool {
        self.0
            .as_ref()
            .is_some_and(|signal| signal.flag.load(Ordering::Relaxed) & PAUSE != 0)
    }

    /// Takes back a timeout raised for an earlier statement of the same query, before the
    /// next one starts (a cancel or termination stays).
    pub fn clear_timeout(&self) {
        if let Some(signal) = &self.0 {
            let _ = signal
                .flag
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |flag| {
                    (flag & !PAUSE == StopReason::Timeout as u8).then_some(flag & PAUSE)
                });
        }
    }

    /// Why the statement must stop, if it must.
    pub fn reason(&self) -> Option<StopReason> {
        self.0
            .as_ref()
            .and_then(|signal| StopReason::from_u8(signal.flag.load(Ordering::Relaxed) & !PAUSE))
    }

    /// The error to stop with, when the statement must stop; a pause asked for is taken
    /// first. Cheap enough to call per row.
    #[inline]
    pub fn check(&self) -> SqlResult<()> {
        match &self.0 {
            Some(signal) if signal.flag.load(Ordering::Relaxed) != 0 => self.check_raised(signal),
            _ => Ok(()),
        }
    }

    #[cold]
    fn check_raised(&self, signal: &Signal) -> SqlResult<()> {
        let flag = signal.flag.fetch_and(!PAUSE, Ordering::Relaxed);
        if let Some(reason) = StopReason::from_u8(flag & !PAUSE) {
            return Err(reason.error());
        }
        if flag & PAUSE != 0 {
            let micros = signal.pause_micros.load(Ordering::Relaxed);
            std::thread::sleep(Duration::from_micros(micros.into()));
            if let Some(reason) = self.reason() {
                return Err(reason.error());
            }
        }
        Ok(())
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

    #[test]
    fn a_pause_is_taken_once_and_keeps_the_reason_apart() {
        let i = Interrupt::new();
        i.ask_to_pause(Duration::from_millis(20));
        assert!(i.pause_pending());
        assert_eq!(i.reason(), None);
        let start = std::time::Instant::now();
        assert!(i.check().is_ok());
        assert!(start.elapsed() >= Duration::from_millis(20));
        assert!(!i.pause_pending());
        let start = std::time::Instant::now();
        assert!(i.check().is_ok());
        assert!(start.elapsed() < Duration::from_millis(20));
        // A stop outranks a pending pause, and the pause bit never reads as a reason.
        i.ask_to_pause(Duration::from_secs(60));
        i.raise(StopReason::Timeout);
        assert_eq!(i.reason(), Some(StopReason::Timeout));
        i.clear_timeout();
        assert_eq!(i.reason(), None);
        assert!(i.pause_pending());
        i.raise(StopReason::Cancel);
        let start = std::time::Instant::now();
        assert_eq!(i.check().unwrap_err().kind, ErrorKind::QueryCanceled);
        assert!(start.elapsed() < Duration::from_secs(1));
    }
}
