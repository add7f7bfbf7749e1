//! `time` (without time zone): a time of day as microseconds since midnight, from 0 to
//! 24:00:00 inclusive as in PostgreSQL. Text input and output, and the arithmetic that
//! keeps a time a time (adding an interval wraps around midnight).

use chrono::{NaiveTime, Timelike};

use crate::error::{ErrorKind, SqlError, SqlResult};
use crate::interval::{Interval, MICROS_PER_DAY, MICROS_PER_SECOND};

/// 24:00:00, the largest time.
pub const END_OF_DAY: i64 = MICROS_PER_DAY;

/// `HH:MM`, `HH:MM:SS[.ffffff]`, with `AM`/`PM`, after an optional date (which is ignored,
/// as PostgreSQL ignores it); `24:00[:00]` is the end of the day.
pub fn parse(text: &str) -> SqlResult<i64> {
    let invalid = || {
        SqlError::new(
            ErrorKind::InvalidDatetimeFormat,
            format!("invalid input syntax for type time: \"{text}\""),
        )
    };
    let mut t = text.trim();
    // A date before the time: `2024-05-07 12:00` or `2024-05-07T12:00`.
    if let Some((date, rest)) = t.split_once([' ', 'T']) {
        if date.len() == 10 && date.as_bytes()[4] == b'-' && date.as_bytes()[7] == b'-' {
            t = rest.trim_start();
        }
    }
    if matches!(t, "24:00" | "24:00:00")
        || t.starts_with("24:00:00.") && t[9..].bytes().all(|b| b == b'0')
    {
        return Ok(MICROS_PER_DAY);
    }
    let time = [
        "%H:%M:%S%.f",
        "%H:%M:%S",
        "%H:%M",
        "%I:%M:%S%.f %p",
        "%I:%M:%S %p",
        "%I:%M %p",
    ]
    .iter()
    .find_map(|format| NaiveTime::parse_from_str(t, format).ok())
    .ok_or_else(|| {
        // Digits in the right places but a field too large: 22008, as PostgreSQL.
        let shaped = t.split(':').count() >= 2
            && t.split(':')
                .all(|f| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit() || b == b'.'));
        if shaped {
            SqlError::new(
                ErrorKind::DatetimeFieldOverflow,
                format!("date/time field value out of range: \"{text}\""),
            )
        } else {
            invalid()
        }
    })?;
    Ok(time.num_seconds_from_midnight() as i64 * MICROS_PER_SECOND
        + (time.nanosecond() / 1_000) as i64)
}

/// `HH:MM:SS`, with a fraction of a second when there is one (trailing zeros dropped).
pub fn format(us: i64) -> String {
    let seconds = us.div_euclid(MICROS_PER_SECOND);
    let fraction = us.rem_euclid(MICROS_PER_SECOND);
    let mut out = format!(
        "{:02}:{:02}:{:02}",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    );
    if fraction != 0 {
        let digits = format!(".{fraction:06}");
        out.push_str(digits.trim_end_matches('0'));
    }
    out
}

/// The time of day of a timestamp's microseconds since the epoch.
pub fn of_timestamp(us: i64) -> i64 {
    us.rem_euclid(MICROS_PER_DAY)
}

/// `time ± interval`: the interval's time part moves the clock, wrapping at midnight (its
/// months and days do not change a time of day).
pub fn add_interval(us: i64, interval: &Interval, sign: i64) -> i64 {
    (us + sign * (interval.micros % MICROS_PER_DAY)).rem_euclid(MICROS_PER_DAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_forms_read_as_postgresql_reads_them() {
        let h = 3_600 * MICROS_PER_SECOND;
        for (text, us) in [
            ("12:34", 12 * h + 34 * 60 * MICROS_PER_SECOND),
            ("00:00:01.5", 1_500_000),
            (
                "1:02:03 PM",
                13 * h + 2 * 60 * MICROS_PER_SECOND + 3 * MICROS_PER_SECOND,
            ),
            ("2024-05-07 23:59:59", 24 * h - MICROS_PER_SECOND),
            ("24:00:00", MICROS_PER_DAY),
        ] {
            assert_eq!(parse(text).unwrap(), us, "{text}");
        }
        for bad in ["25:00", "12:60", "noon", "", "24:00:01"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn output_drops_trailing_zeros_of_the_fraction() {
        assert_eq!(format(0), "00:00:00");
        assert_eq!(format(45_296_500_000), "12:34:56.5");
        assert_eq!(format(MICROS_PER_DAY), "24:00:00");
    }

    #[test]
    fn adding_an_interval_wraps_at_midnight() {
        let hour = Interval {
            months: 0,
            days: 1,
            micros: 3_600 * MICROS_PER_SECOND,
        };
        let late = 23 * 3_600 * MICROS_PER_SECOND;
        assert_eq!(add_interval(late, &hour, 1), 0);
        assert_eq!(add_interval(0, &hour, -1), late);
    }
}
