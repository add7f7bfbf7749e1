//! The time limits a session sets: `statement_timeout`, `lock_timeout`,
//! `idle_in_transaction_session_timeout` and `idle_session_timeout` — read and shown as
//! PostgreSQL does (milliseconds by default, or a number with a unit), and applied: the
//! statement's deadline goes to the connection's control for the watchdog, the idle ones to
//! the connection loop.

use std::time::Duration;

use super::*;

/// The settings that are durations in milliseconds.
pub(super) const TIMEOUTS: &[&str] = &[
    "statement_timeout",
    "lock_timeout",
    "idle_in_transaction_session_timeout",
    "idle_session_timeout",
];

/// PostgreSQL's limit for these settings (`INT_MAX` milliseconds).
const MAX_MS: f64 = 2_147_483_647.0;

/// Units a duration may be given in, with their length in milliseconds.
const UNITS: &[(&str, f64)] = &[
    ("us", 0.001),
    ("ms", 1.0),
    ("s", 1_000.0),
    ("min", 60_000.0),
    ("h", 3_600_000.0),
    ("d", 86_400_000.0),
];

/// Reads `value` as setting `name` does: a number of milliseconds, or a number and a unit
/// (`3s`, `1.5 min`), rounded to whole milliseconds.
pub(super) fn milliseconds(name: &str, value: &str) -> SqlResult<u64> {
    let text = value.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E')))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let invalid = || {
        SqlError::new(
            ErrorKind::InvalidParameterValue,
            format!("invalid value for parameter \"{name}\": \"{value}\""),
        )
    };
    let number: f64 = number.trim().parse().map_err(|_| invalid())?;
    let unit = unit.trim();
    let scale = if unit.is_empty() {
        1.0
    } else {
        UNITS
            .iter()
            .find(|(u, _)| *u == unit)
            .map(|(_, scale)| *scale)
            .ok_or_else(|| {
                invalid().with_detail(
                    "Valid units for this parameter are \"us\", \"ms\", \"s\", \"min\", \"h\", and \"d\".",
                )
            })?
    };
    let ms = (number * scale).round();
    if !(0.0..=MAX_MS).contains(&ms) {
        return Err(SqlError::new(
            ErrorKind::InvalidParameterValue,
            format!(
                "{value} is outside the valid range for parameter \"{name}\" (0 .. 2147483647)"
            ),
        ));
    }
    Ok(ms as u64)
}

/// A duration as SHOW gives it: in the largest unit that divides it exactly.
pub(super) fn shown(ms: u64) -> String {
    if ms == 0 {
        return "0".into();
    }
    for (unit, scale) in UNITS.iter().rev() {
        let scale = *scale as u64;
        if scale >= 1 && ms.is_multiple_of(scale) {
            return format!("{}{unit}", ms / scale);
        }
    }
    format!("{ms}ms")
}

impl Session {
    /// Setting `name`'s duration, None when it is 0 (no limit).
    pub(super) fn timeout(&self, name: &str) -> Option<Duration> {
        let ms = self
            .settings
            .get(name)
            .and_then(|v| milliseconds(name, v).ok())
            .unwrap_or(0);
        (ms > 0).then(|| Duration::from_millis(ms))
    }

    /// Tells the connection loop the idle timeouts as the settings are now.
    pub(super) fn publish_idle_timeouts(&self) {
        if let Some(control) = &self.control {
            control.set_idle_timeouts(
                self.timeout("idle_in_transaction_session_timeout"),
                self.timeout("idle_session_timeout"),
            );
        }
    }

    /// Waits for `work` (a lock, say) while watching the statement's interrupt and, for a
    /// lock, `lock_timeout`: dropped (taking nothing) when either ends the wait.
    pub(super) async fn wait_interruptibly<T>(
        &self,
        work: impl std::future::Future<Output = T>,
    ) -> SqlResult<T> {
        let deadline = self
            .timeout("lock_timeout")
            .map(|t| tokio::time::Instant::now() + t);
        tokio::pin!(work);
        loop {
            tokio::select! {
                done = &mut work => return Ok(done),
                () = tokio::time::sleep(Duration::from_millis(10)) => {
                    self.interrupt.check()?;
                    if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
                        return Err(SqlError::new(
                            ErrorKind::LockNotAvailable,
                            "canceling statement due to lock timeout",
                        ));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_and_show_as_postgresql_does() {
        let ms = |v| milliseconds("statement_timeout", v);
        assert_eq!(ms("0").unwrap(), 0);
        assert_eq!(ms("3000").unwrap(), 3000);
        assert_eq!(ms("3s").unwrap(), 3000);
        assert_eq!(ms(" 1.5 min ").unwrap(), 90_000);
        assert_eq!(ms("2500us").unwrap(), 3);
        assert_eq!(ms("1d").unwrap(), 86_400_000);
        assert!(ms("abc").is_err());
        assert!(ms("3 weeks").is_err());
        assert!(ms("-1").is_err());
        assert!(ms("30d").is_err());
        assert_eq!(shown(0), "0");
        assert_eq!(shown(3000), "3s");
        assert_eq!(shown(90_000), "90s");
        assert_eq!(shown(120_000), "2min");
        assert_eq!(shown(1500), "1500ms");
        assert_eq!(shown(86_400_000), "1d");
    }
}
