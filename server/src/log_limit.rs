//! Log lines about what clients did wrong (malformed frames, failed logins), bounded in rate:
//! a flood of bad connections must not become a flood of log. At most `PER_SECOND` lines
//! go out each second; the rest are counted and the count is reported with the next line
//! that goes out.

use std::sync::Mutex;
use std::time::{Duration, Instant};

const PER_SECOND: u32 = 20;

struct Window {
    started: Instant,
    written: u32,
    suppressed: u64,
}

static WINDOW: Mutex<Option<Window>> = Mutex::new(None);

/// Writes `line` to the server's log unless this second's budget is spent.
pub fn client_fault(line: &str) {
    let now = Instant::now();
    let mut guard = WINDOW.lock().expect("log window lock");
    let window = guard.get_or_insert(Window {
        started: now,
        written: 0,
        suppressed: 0,
    });
    if now.duration_since(window.started) >= Duration::from_secs(1) {
        window.started = now;
        window.written = 0;
    }
    if window.written >= PER_SECOND {
        window.suppressed += 1;
        return;
    }
    window.written += 1;
    let suppressed = std::mem::take(&mut window.suppressed);
    drop(guard);
    if suppressed > 0 {
        eprintln!("hotledger: {line} ({suppressed} similar lines suppressed)");
    } else {
        eprintln!("hotledger: {line}");
    }
}
