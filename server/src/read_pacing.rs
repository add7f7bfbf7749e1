//! Pacing of long reads: while the ledger is busy, a read on a read thread runs in slices
//! with pauses between them, so it takes a bounded share of a core (`--long-read-share`,
//! 25% by default) and the ledger's latency stays near what it is without the read.
//!
//! Why the idle scheduling class (`read_threads`) is not enough: on this kind of virtual
//! machine a CPU-bound thread on the other vCPU, however low its priority, slows the
//! ledger's threads by itself — a busy loop at `SCHED_IDLE` doubled the p99 of transfers
//! and point reads at 16 clients; the same loop running 1 ms in every 4 left it within a
//! few percent (docs/benchmarks.md, "Long reads paced"). So the report is given slices:
//! a pacer thread, running only while paced reads exist, looks every slice whether any
//! statement began since its last look (`note_statement`), and if one did asks each paced
//! read to pause ([`plan::Interrupt::ask_to_pause`]); the read's next per-row check sleeps.
//! A quiet ledger leaves the read running flat out.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;

/// How long a paced read runs between two pauses.
const SLICE: Duration = Duration::from_millis(1);

/// Statements begun on this node's sessions: the pacer's sign that the ledger is busy.
static STATEMENTS: AtomicU64 = AtomicU64::new(0);

/// Pauses asked of paced reads (`SHOW storage_stats`: `long_read_pauses`).
static PAUSES: AtomicU64 = AtomicU64::new(0);

/// The share of a core, in percent, a paced read takes while the ledger is busy.
static SHARE_PERCENT: AtomicU32 = AtomicU32::new(DEFAULT_SHARE_PERCENT);

/// `--long-read-share`'s default.
pub const DEFAULT_SHARE_PERCENT: u32 = 25;

/// Sets the share a long read takes of a core while the ledger is busy (1–100; 100 turns
/// pacing off).
pub fn set_share_percent(percent: u32) {
    assert!((1..=100).contains(&percent), "a share of 1 to 100 percent");
    SHARE_PERCENT.store(percent, Ordering::Relaxed);
}

/// A session's statement begins (a query message).
#[inline]
pub fn note_statement() {
    STATEMENTS.fetch_add(1, Ordering::Relaxed);
}

/// How many pauses paced reads have been asked to take since the server started.
pub fn pauses() -> u64 {
    PAUSES.load(Ordering::Relaxed)
}

/// The pause after each slice for a share of `percent`.
fn pause_for(percent: u32) -> Duration {
    SLICE * (100 - percent) / percent
}

struct Paced {
    next_id: u64,
    reads: Vec<(u64, plan::Interrupt)>,
}

struct Pacer {
    paced: Mutex<Paced>,
    some_paced: Condvar,
}

fn pacer() -> &'static Pacer {
    static PACER: OnceLock<Pacer> = OnceLock::new();
    PACER.get_or_init(|| {
        std::thread::Builder::new()
            .name("read-pacer".into())
            .spawn(|| pace(pacer()))
            .expect("the read pacer's thread starts");
        Pacer {
            paced: Mutex::new(Paced {
                next_id: 0,
                reads: Vec::new(),
            }),
            some_paced: Condvar::new(),
        }
    })
}

/// A read being paced, from [`pace_while`] to its drop.
pub struct PacedRead {
    id: u64,
}

/// Paces the read `interrupt` stops while the returned guard lives; with a share of 100%
/// nothing is paced.
pub fn pace_while(interrupt: &plan::Interrupt) -> Option<PacedRead> {
    if SHARE_PERCENT.load(Ordering::Relaxed) >= 100 {
        return None;
    }
    let pacer = pacer();
    let mut paced = pacer.paced.lock().unwrap_or_else(|e| e.into_inner());
    let id = paced.next_id;
    paced.next_id += 1;
    paced.reads.push((id, interrupt.clone()));
    pacer.some_paced.notify_one();
    Some(PacedRead { id })
}

impl Drop for PacedRead {
    fn drop(&mut self) {
        let mut paced = pacer().paced.lock().unwrap_or_else(|e| e.into_inner());
        paced.reads.retain(|(id, _)| *id != self.id);
    }
}

/// The pacer's loop: idle while nothing is paced; else a look each slice, and a pause for
/// every paced read when a statement began since the last look.
fn pace(pacer: &Pacer) {
    loop {
        {
            let mut paced = pacer.paced.lock().unwrap_or_else(|e| e.into_inner());
            while paced.reads.is_empty() {
                paced = pacer
                    .some_paced
                    .wait(paced)
                    .unwrap_or_else(|e| e.into_inner());
            }
        }
        let mut seen = STATEMENTS.load(Ordering::Relaxed);
        loop {
            std::thread::sleep(SLICE);
            let now = STATEMENTS.load(Ordering::Relaxed);
            let busy = now != seen;
            seen = now;
            let pause = pause_for(SHARE_PERCENT.load(Ordering::Relaxed));
            let paced = pacer.paced.lock().unwrap_or_else(|e| e.into_inner());
            if paced.reads.is_empty() {
                break;
            }
            if !busy || pause.is_zero() {
                continue;
            }
            for (_, interrupt) in &paced.reads {
                interrupt.ask_to_pause(pause);
            }
            PAUSES.fetch_add(paced.reads.len() as u64, Ordering::Relaxed);
            drop(paced);
            std::thread::sleep(pause);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_gives_the_share_asked() {
        assert_eq!(pause_for(25), Duration::from_millis(3));
        assert_eq!(pause_for(50), Duration::from_millis(1));
        assert_eq!(pause_for(100), Duration::ZERO);
    }
}
