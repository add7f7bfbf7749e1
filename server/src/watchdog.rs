//! The watchdog: one thread that, every few milliseconds, looks at each connection's
//! running statement and raises its interrupt when its `statement_timeout` has passed or its
//! client has closed the connection. Statements check their interrupt per row, so either
//! stops them within a tick and a row's work. Between, it moves the transfers the executor
//! created into the node's per-second throughput.

use std::sync::Weak;
use std::thread;
use std::time::{Duration, Instant};

use crate::session::Shared;

/// How often the watchdog looks: well inside the 100 ms a stop may take.
const TICK: Duration = Duration::from_millis(10);

/// Starts the watchdog; it ends when the server's shared state is gone.
pub fn spawn(shared: Weak<Shared>) -> std::io::Result<()> {
    thread::Builder::new()
        .name("watchdog".into())
        .spawn(move || {
            let mut transfers_seen = None;
            while let Some(shared) = shared.upgrade() {
                let now = Instant::now();
                crate::activity::watch_connections(&shared.activity.controls(), now);
                let created = shared.executor.transfer_activity().transfers_created();
                let before = transfers_seen.replace(created).unwrap_or(created);
                if created > before {
                    shared
                        .metrics
                        .throughput
                        .add(crate::metrics::Count::Transfers, created - before);
                }
                drop(shared);
                thread::sleep(TICK);
            }
        })
        .map(drop)
}
