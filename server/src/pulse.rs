//! The pulse: TigerBeetle's way of expiring pending transfers on time. The executor voids
//! every pending transfer whose deadline the ledger clock has passed before each command it
//! applies; the pulse makes sure there is such a command at the deadline. When the earliest
//! deadline has passed, the node that leads proposes `Command::Pulse` — the clock moving to
//! its `now()`, nothing else — so the transfer expires at that log position on every
//! replica, within milliseconds of its deadline, instead of at whatever command next
//! happens by. Every node runs the loop; only a leader proposes.

use std::sync::{Arc, Weak};
use std::time::Duration;

use ledger::Command;

use crate::session::{now_micros, Shared};

/// The longest the loop sleeps before it looks again (a new, earlier deadline, or this
/// node becoming the leader).
const LONGEST_SLEEP: Duration = Duration::from_millis(250);

/// The least time between two pulses, so a deadline that stays due (a leader whose clock
/// lags the ledger's) cannot make the loop spin.
const LEAST_GAP: Duration = Duration::from_millis(10);

/// After a pulse that was not applied (no quorum, a lost leadership).
const AFTER_FAILURE: Duration = Duration::from_secs(1);

/// Starts the loop on the current runtime; it ends when the server's shared state is gone.
pub fn spawn(shared: Weak<Shared>) {
    tokio::spawn(run(shared));
}

async fn run(shared: Weak<Shared>) {
    loop {
        let Some(node) = shared.upgrade() else {
            return;
        };
        let pause = match due_in(&node) {
            Some(Duration::ZERO) if leads(&node) => pulse(&node).await,
            Some(wait) => wait.min(LONGEST_SLEEP),
            None => LONGEST_SLEEP,
        };
        drop(node);
        tokio::time::sleep(pause).await;
    }
}

/// How long until the earliest pending transfer's deadline (zero once it has passed), or
/// None when no pending transfer has a timeout.
fn due_in(shared: &Shared) -> Option<Duration> {
    let at = shared.executor.transfer_activity().next_expiry()?;
    let wait = at.saturating_sub(now_micros()).max(0);
    Some(Duration::from_micros(wait as u64))
}

fn leads(shared: &Shared) -> bool {
    let (role, _, running) = shared.cluster_status.here();
    running && role == "leader"
}

/// Proposes one pulse and waits for it to apply: how long to pause after it.
async fn pulse(shared: &Arc<Shared>) -> Duration {
    let command = ledger::encode_command(&Command::Pulse {
        now_micros: now_micros(),
    });
    match shared.proposer.propose(command).await {
        Ok(_) => LEAST_GAP,
        Err(_) => AFTER_FAILURE,
    }
}
