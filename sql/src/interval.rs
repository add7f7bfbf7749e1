//! `interval`: a span of months, days and microseconds kept apart as PostgreSQL keeps them
//! (a month is not a fixed number of days, a day not always 24 hours in a time zone), its
//! text forms (PostgreSQL's default `postgres` output style; input with units, `HH:MM:SS`
//! and `ago`) and its arithmetic.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{ErrorKind, SqlError, SqlResult};

pub(crate) const MICROS_PER_SECOND: i64 = 1_000_000;
pub(crate) const MICROS_PER_MINUTE: i64 = 60 * MICROS_PER_SECOND;
pub(crate) const MICROS_PER_HOUR: i64 = 60 * MICROS_PER_MINUTE;
pub(crate) const MICROS_PER_DAY: i64 = 24 * MICROS_PER_HOUR;
/// What a month counts as when a fraction of one spills into days, or spans are compared.
const DAYS_PER_MONTH: i64 = 30;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Interval {
    pub months: i32,
    pub days: i32,
    pub micros: i64,
}

fn out_of_range() -> SqlError {
    SqlError::numeric_out_of_range("interval out of range")
}

impl Interval {
    /// The span in microseconds with 30-day months and 24-hour days: how PostgreSQL orders
    /// and compares intervals (`'1 month' = '30 days'`).
    pub fn span(&self) -> i128 {
        (self.months as i128 * DAYS_PER_MONTH as i128 + self.days as i128) * MICROS_PER_DAY as i128
            + self.micros as i128
    }

    pub fn cmp_span(&self, other: &Interval) -> Ordering {
        self.span().cmp(&other.span())
    }

    pub fn checked_add(&self, other: &Interval) -> SqlResult<Interval> {
        Ok(Interval {
            months: self
                .months
                .checked_add(other.months)
                .ok_or_else(out_of_range)?,
            days: self.days.checked_add(other.days).ok_or_else(out_of_range)?,
            micros: self
                .micros
                .checked_add(other.micros)
                .ok_or_else(out_of_range)?,
        })
    }

    pub fn checked_neg(&self) -> SqlResult<Interval> {
        Ok(Interval {
            months: self.months.checked_neg().ok_or_else(out_of_range)?,
            days: self.days.checked_neg().ok_or_else(out_of_range)?,
            micros: self.micros.checked_neg().ok_or_else(out_of_range)?,
        })
    }

    pub fn checked_sub(&self, other: &Interval) -> SqlResult<Interval> {
        self.checked_add(&other.checked_neg()?)
    }

    /// Multiplied by `factor`; fractions of months spill into days and fractions of days
    /// into time, as in PostgreSQL (`'1 month' * 1.5` is `1 mon 15 days`).
    pub fn scaled(&self, factor: f64) -> SqlResult<Interval> {
        if !factor.is_finite() {
            return Err(out_of_range());
        }
        let months = self.months as f64 * factor;
        let whole_months = months.trunc();
        let days = self.days as f64 * factor + (months - whole_months) * DAYS_PER_MONTH as f64;
        let whole_days = days.trunc();
        let micros = self.micros as f64 * factor + (days - whole_days) * MICROS_PER_DAY as f64;
        let fits = |v: f64, max: f64| v.abs() <= max;
        if !fits(whole_months, i32::MAX as f64)
            || !fits(whole_days, i32::MAX as f64)
            || !fits(micros.round(), i64::MAX as f64)
        {
            return Err(out_of_range());
        }
        Ok(Interval {
            months: whole_months as i32,
            days: whole_days as i32,
            micros: micros.round() as i64,
        })
    }

    /// The difference of two timestamps (microseconds): whole days and the rest, both with
    /// the sign of the difference (PostgreSQL's `timestamp - timestamp`).
    pub fn between(later: i64, earlier: i64) -> SqlResult<Interval> {
        let diff = later.checked_sub(earlier).ok_or_else(out_of_range)?;
        Ok(Interval {
            months: 0,
            days: (diff / MICROS_PER_DAY) as i32,
            micros: diff % MICROS_PER_DAY,
        })
    }

    /// PostgreSQL's interval input: a sequence of `number unit` (years, months, weeks, days,
    /// hours, minutes, seconds, milliseconds, microseconds, with their abbreviations and
    /// plurals) and `[+-]HH:MM[:SS[.frac]]`, optionally prefixed by `@` and followed by
    /// `ago`; a bare number is seconds.
    pub fn parse(text: &str) -> SqlResult<Interval> {
        let invalid = || {
            SqlError::new(
                ErrorKind::InvalidDatetimeFormat,
                format!("invalid input syntax for type interval: \"{text}\""),
            )
        };
        let lower = text.trim().to_ascii_lowercase();
        let mut tokens: Vec<&str> = lower.split_whitespace().filter(|t| *t != "@").collect();
        let ago = tokens.last() == Some(&"ago");
        if ago {
            tokens.pop();
        }
        if tokens.is_empty() {
            return Err(invalid());
        }
        let mut acc = Parts::default();
        let mut i = 0;
        while i < tokens.len() {
            let token = tokens[i];
            if token.contains(':') {
                acc.add_micros(parse_clock(token).ok_or_else(invalid)? as f64);
                i += 1;
                continue;
            }
            // "1day" as well as "1 day".
            let split = token
                .find(|c: char| c.is_ascii_alphabetic())
                .unwrap_or(token.len());
            let (number, glued_unit) = token.split_at(split);
            let value: f64 = number.parse().map_err(|_| invalid())?;
            let unit = if !glued_unit.is_empty() {
                glued_unit
            } else if let Some(next) = tokens.get(i + 1).filter(|t| unit_of(t).is_some()) {
                i += 1;
                next
            } else if i + 1 == tokens.len() {
                "second"
            } else {
                return Err(invalid());
            };
            if !value.is_finite() {
                return Err(invalid());
            }
            acc.add(value, unit_of(unit).ok_or_else(invalid)?);
            i += 1;
        }
        let interval = acc.finish().ok_or_else(out_of_range)?;
        if ago {
            interval.checked_neg()
        } else {
            Ok(interval)
        }
    }
}

#[derive(Clone, Copy)]
enum Unit {
    Year,
    Month,
    Week,
    Day,
    Hour,
    Minute,
    Second,
    Millisecond,
    Microsecond,
}

fn unit_of(word: &str) -> Option<Unit> {
    Some(match word {
        "y" | "yr" | "yrs" | "year" | "years" => Unit::Year,
        "mon" | "mons" | "month" | "months" => Unit::Month,
        "w" | "week" | "weeks" => Unit::Week,
        "d" | "day" | "days" => Unit::Day,
        "h" | "hr" | "hrs" | "hour" | "hours" => Unit::Hour,
        "m" | "min" | "mins" | "minute" | "minutes" => Unit::Minute,
        "s" | "sec" | "secs" | "second" | "seconds" => Unit::Second,
        "ms" | "msec" | "msecs" | "millisecond" | "milliseconds" => Unit::Millisecond,
        "us" | "usec" | "usecs" | "microsecond" | "microseconds" => Unit::Microsecond,
        _ => return None,
    })
}

/// `[+-]HH:MM[:SS[.frac]]` in microseconds.
fn parse_clock(token: &str) -> Option<i64> {
    let (negative, body) = match token.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, token.strip_prefix('+').unwrap_or(token)),
    };
    let mut parts = body.split(':');
    let hours: i64 = parts.next()?.parse().ok()?;
    let minutes: i64 = parts.next()?.parse().ok()?;
    let seconds: f64 = match parts.next() {
        Some(s) => s.parse().ok()?,
        None => 0.0,
    };
    if parts.next().is_some() || !(0..60).contains(&minutes) || !(0.0..60.0).contains(&seconds) {
        return None;
    }
    let micros = hours
        .checked_mul(MICROS_PER_HOUR)?
        .checked_add(minutes * MICROS_PER_MINUTE)?
        .checked_add((seconds * MICROS_PER_SECOND as f64).round() as i64)?;
    Some(if negative { -micros } else { micros })
}

/// An interval being read: fractions of larger units spill into smaller ones.
#[derive(Default)]
struct Parts {
    months: f64,
    days: f64,
    micros: f64,
}

impl Parts {
    fn add(&mut self, value: f64, unit: Unit) {
        match unit {
            Unit::Year => self.add_months(value * 12.0),
            Unit::Month => self.add_months(value),
            Unit::Week => self.add_days(value * 7.0),
            Unit::Day => self.add_days(value),
            Unit::Hour => self.add_micros(value * MICROS_PER_HOUR as f64),
            Unit::Minute => self.add_micros(value * MICROS_PER_MINUTE as f64),
            Unit::Second => self.add_micros(value * MICROS_PER_SECOND as f64),
            Unit::Millisecond => self.add_micros(value * 1000.0),
            Unit::Microsecond => self.add_micros(value),
        }
    }

    fn add_months(&mut self, months: f64) {
        let whole = months.trunc();
        self.months += whole;
        self.add_days((months - whole) * DAYS_PER_MONTH as f64)
    }

    fn add_days(&mut self, days: f64) {
        let whole = days.trunc();
        self.days += whole;
        self.add_micros((days - whole) * MICROS_PER_DAY as f64)
    }

    fn add_micros(&mut self, micros: f64) {
        self.micros += micros;
    }

    fn finish(self) -> Option<Interval> {
        let within = |v: f64, max: f64| v.abs() <= max;
        let micros = self.micros.round();
        if !within(self.months, i32::MAX as f64)
            || !within(self.days, i32::MAX as f64)
            || !within(micros, i64::MAX as f64)
        {
            return None;
        }
        Some(Interval {
            months: self.months as i32,
            days: self.days as i32,
            micros: micros as i64,
        })
    }
}

/// PostgreSQL's `postgres` interval style: `1 year 2 mons 3 days 04:05:06.5`, a sign on
/// each part that has one (`+` where a part follows a negative one), `00:00:00` when zero.
impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        let mut negative_before = false;
        let years = self.months / 12;
        let months = self.months % 12;
        for (value, unit) in [(years, "year"), (months, "mon"), (self.days, "day")] {
            if value == 0 {
                continue;
            }
            if !out.is_empty() {
                out.push(' ');
            }
            let plus = if negative_before && value > 0 {
                "+"
            } else {
                ""
            };
            let plural = if value == 1 { "" } else { "s" };
            out.push_str(&format!("{plus}{value} {unit}{plural}"));
            negative_before = value < 0;
        }
        if out.is_empty() || self.micros != 0 {
            if !out.is_empty() {
                out.push(' ');
            }
            let sign = if self.micros < 0 {
                "-"
            } else if negative_before {
                "+"
            } else {
                ""
            };
            let total = self.micros.unsigned_abs();
            let hours = total / MICROS_PER_HOUR as u64;
            let minutes = total % MICROS_PER_HOUR as u64 / MICROS_PER_MINUTE as u64;
            let seconds = total % MICROS_PER_MINUTE as u64 / MICROS_PER_SECOND as u64;
            let fraction = total % MICROS_PER_SECOND as u64;
            out.push_str(&format!("{sign}{hours:02}:{minutes:02}:{seconds:02}"));
            if fraction != 0 {
                let digits = format!("{fraction:06}");
                out.push('.');
                out.push_str(digits.trim_end_matches('0'));
            }
        }
        f.write_str(&out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(text: &str) -> String {
        Interval::parse(text).unwrap().to_string()
    }

    #[test]
    fn reads_and_shows_as_postgresql_does() {
        // Each pair: PostgreSQL 15's output for the input.
        for (input, output) in [
            ("1 day", "1 day"),
            ("-1 day 2 hours", "-1 days +02:00:00"),
            (
                "1 year 14 months -3 days -00:00:01.5",
                "2 years 2 mons -3 days -00:00:01.5",
            ),
            ("0", "00:00:00"),
            ("36 hours", "36:00:00"),
            ("1.5 days", "1 day 12:00:00"),
            ("2 weeks ago", "-14 days"),
            ("1 mon", "1 mon"),
            ("@ 3 days 4 hours", "3 days 04:00:00"),
            ("1.5 months", "1 mon 15 days"),
            ("90 minutes", "01:30:00"),
            ("10:30", "10:30:00"),
            ("1d 2h", "1 day 02:00:00"),
            ("-1 year", "-1 years"),
            ("250 ms", "00:00:00.25"),
            ("1 day 2", "1 day 00:00:02"),
            ("-1:30", "-01:30:00"),
            ("1 day -1:30", "1 day -01:30:00"),
            ("3 mons -1 day", "3 mons -1 days"),
            ("-3 mons 1 day", "-3 mons +1 day"),
            ("1.5", "00:00:01.5"),
            ("100000 hours", "100000:00:00"),
        ] {
            assert_eq!(shown(input), output, "{input}");
        }
        for bad in ["", "day", "1 fortnight", "1:99", "ago"] {
            assert!(Interval::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn compares_and_scales_by_span() {
        let p = |s| Interval::parse(s).unwrap();
        assert_eq!(p("1 day").cmp_span(&p("24 hours")), Ordering::Equal);
        assert_eq!(p("1 month").cmp_span(&p("29 days")), Ordering::Greater);
        assert_eq!(
            p("1 day").scaled(1.5).unwrap().to_string(),
            "1 day 12:00:00"
        );
        assert_eq!(
            p("1 month").scaled(1.0 / 3.0).unwrap().to_string(),
            "10 days"
        );
        assert_eq!(
            Interval::between(0, 36 * MICROS_PER_HOUR)
                .unwrap()
                .to_string(),
            "-1 days -12:00:00"
        );
    }
}
