//! Failed logins slow down the address they come from. Each failure past the first few pushes
//! that address's next allowed attempt further out (50 ms more per failure, at most 2 s
//! apart); a connection from it waits until then before its startup message is served, so
//! guessing passwords over many parallel connections gains nothing. A successful login
//! clears the address; an address quiet for a minute is forgotten. Memory is bounded: past
//! `MAX_ADDRESSES` tracked, the ones quiet longest go first.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures an address may make before it is slowed down.
const FREE_FAILURES: u32 = 5;
const STEP: Duration = Duration::from_millis(50);
const MAX_PENALTY: Duration = Duration::from_secs(2);
const FORGET_AFTER: Duration = Duration::from_secs(60);
const MAX_ADDRESSES: usize = 10_000;

#[derive(Clone, Copy)]
struct Record {
    failures: u32,
    last_failure: Instant,
    next_allowed: Instant,
}

#[derive(Default)]
pub struct LoginThrottle {
    addresses: Mutex<HashMap<IpAddr, Record>>,
}

impl LoginThrottle {
    /// How long a connection from `ip` must wait before its login is served.
    pub fn wait_for(&self, ip: IpAddr) -> Duration {
        let now = Instant::now();
        let addresses = self.addresses.lock().expect("login throttle lock");
        match addresses.get(&ip) {
            Some(r) if now.duration_since(r.last_failure) < FORGET_AFTER => {
                r.next_allowed.saturating_duration_since(now)
            }
            _ => Duration::ZERO,
        }
    }

    /// A login from `ip` failed; how many failures it has made recently.
    pub fn failed(&self, ip: IpAddr) -> u32 {
        let now = Instant::now();
        let mut addresses = self.addresses.lock().expect("login throttle lock");
        if addresses.len() >= MAX_ADDRESSES && !addresses.contains_key(&ip) {
            addresses.retain(|_, r| now.duration_since(r.last_failure) < FORGET_AFTER);
            if addresses.len() >= MAX_ADDRESSES {
                let oldest = addresses
                    .iter()
                    .min_by_key(|(_, r)| r.last_failure)
                    .map(|(ip, _)| *ip);
                if let Some(oldest) = oldest {
                    addresses.remove(&oldest);
                }
            }
        }
        let r = addresses.entry(ip).or_insert(Record {
            failures: 0,
            last_failure: now,
            next_allowed: now,
        });
        if now.duration_since(r.last_failure) >= FORGET_AFTER {
            r.failures = 0;
        }
        r.failures += 1;
        r.last_failure = now;
        let over = r.failures.saturating_sub(FREE_FAILURES);
        let penalty = (STEP * over).min(MAX_PENALTY);
        r.next_allowed = r.next_allowed.max(now) + penalty;
        r.failures
    }

    /// A login from `ip` succeeded.
    pub fn succeeded(&self, ip: IpAddr) {
        self.addresses
            .lock()
            .expect("login throttle lock")
            .remove(&ip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_past_the_free_ones_push_the_next_attempt_out() {
        let t = LoginThrottle::default();
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        for _ in 0..FREE_FAILURES {
            t.failed(ip);
        }
        assert_eq!(t.wait_for(ip), Duration::ZERO);
        for _ in 0..10 {
            t.failed(ip);
        }
        // 50 + 100 + ... + 500 ms, from failures made at once.
        let wait = t.wait_for(ip);
        assert!(wait > Duration::from_millis(2_500), "{wait:?}");
        assert_eq!(t.wait_for(other), Duration::ZERO);
        t.succeeded(ip);
        assert_eq!(t.wait_for(ip), Duration::ZERO);
    }
}
