//! Calendar arithmetic on the time types, as PostgreSQL does it: timestamps (microseconds
//! since 1970, shown in UTC) and dates (days since 1970) plus or minus intervals, their
//! differences, `date_trunc` and `extract`/`date_part` fields.

use chrono::{Datelike, Months, NaiveDate, NaiveDateTime, Timelike};

use crate::error::{ErrorKind, SqlError, SqlResult};
use crate::interval::{
    Interval, MICROS_PER_DAY, MICROS_PER_HOUR, MICROS_PER_MINUTE, MICROS_PER_SECOND,
};
use crate::numeric::Numeric;
use crate::value::Value;

fn out_of_range() -> SqlError {
    SqlError::numeric_out_of_range("timestamp out of range")
}

/// A timestamp (microseconds since 1970) as a calendar date and time (22003 "timestamp out
/// of range" beyond the calendar's years).
pub fn to_datetime(us: i64) -> SqlResult<NaiveDateTime> {
    chrono::DateTime::from_timestamp_micros(us)
        .map(|t| t.naive_utc())
        .ok_or_else(out_of_range)
}

fn from_datetime(t: NaiveDateTime) -> i64 {
    t.and_utc().timestamp_micros()
}

/// `timestamp + interval`: months first (the day clamped to the month's end, so
/// `'2024-01-31' + '1 month'` is `2024-02-29`), then days, then time.
pub fn add_interval(us: i64, interval: &Interval) -> SqlResult<i64> {
    let mut t = to_datetime(us)?;
    if interval.months != 0 {
        let months = Months::new(interval.months.unsigned_abs());
        t = if interval.months > 0 {
            t.checked_add_months(months)
        } else {
            t.checked_sub_months(months)
        }
        .ok_or_else(out_of_range)?;
    }
    let days = (interval.days as i64)
        .checked_mul(MICROS_PER_DAY)
        .ok_or_else(out_of_range)?;
    from_datetime(t)
        .checked_add(days)
        .and_then(|v| v.checked_add(interval.micros))
        .filter(|v| to_datetime(*v).is_ok())
        .ok_or_else(out_of_range)
}

/// `age(a, b)`: the difference in calendar fields (years and months, days, time), as
/// PostgreSQL's `timestamp_age` forms it: each field of `a` minus `b`'s, borrowing from the
/// next larger field where one is negative (a month lends the days of the month it comes
/// from), the sign applied to the whole when `a` is earlier.
pub fn age(a: i64, b: i64) -> SqlResult<Interval> {
    let (t1, t2) = (to_datetime(a)?, to_datetime(b)?);
    let sign: i64 = if a < b { -1 } else { 1 };
    let field = |x: i64, y: i64| sign * (x - y);
    let mut usec = field(
        a.rem_euclid(MICROS_PER_SECOND),
        b.rem_euclid(MICROS_PER_SECOND),
    );
    let mut sec = field(t1.second() as i64, t2.second() as i64);
    let mut min = field(t1.minute() as i64, t2.minute() as i64);
    let mut hour = field(t1.hour() as i64, t2.hour() as i64);
    let mut day = field(t1.day() as i64, t2.day() as i64);
    let mut month = field(t1.month() as i64, t2.month() as i64);
    let mut year = field(t1.year() as i64, t2.year() as i64);
    let borrow = |low: &mut i64, high: &mut i64, size: i64| {
        while *low < 0 {
            *low += size;
            *high -= 1;
        }
    };
    borrow(&mut usec, &mut sec, MICROS_PER_SECOND);
    borrow(&mut sec, &mut min, 60);
    borrow(&mut min, &mut hour, 60);
    borrow(&mut hour, &mut day, 24);
    // The days of the earlier timestamp's month.
    let lender = if a < b { t1 } else { t2 };
    borrow(
        &mut day,
        &mut month,
        days_in_month(lender.year(), lender.month()),
    );
    borrow(&mut month, &mut year, 12);
    let overflow = || SqlError::numeric_out_of_range("interval out of range");
    Ok(Interval {
        months: i32::try_from(sign * (year * 12 + month)).map_err(|_| overflow())?,
        days: i32::try_from(sign * day).map_err(|_| overflow())?,
        micros: sign * (((hour * 60 + min) * 60 + sec) * MICROS_PER_SECOND + usec),
    })
}

fn days_in_month(year: i32, month: u32) -> i64 {
    let first = NaiveDate::from_ymd_opt(year, month, 1);
    let next = if month == 12 {
        NaiveDate::from_ymd_opt(year + 1, 1, 1)
    } else {
        NaiveDate::from_ymd_opt(year, month + 1, 1)
    };
    match (first, next) {
        (Some(first), Some(next)) => (next - first).num_days(),
        _ => 31,
    }
}

/// The microseconds at the start of a date.
pub fn date_micros(days: i32) -> i64 {
    days as i64 * MICROS_PER_DAY
}

/// Day 0 of the date type.
pub(crate) fn epoch() -> NaiveDate {
    NaiveDate::from_ymd_opt(1970, 1, 1).expect("a valid date")
}

/// A calendar date as days since 1970-01-01.
pub fn epoch_days(date: NaiveDate) -> i32 {
    (date - epoch()).num_days() as i32
}

/// Arithmetic with a date, timestamp or interval operand; None when neither operand is
/// one (the caller's numeric arithmetic applies). `op` is `+`, `-`, `*` or `/`.
pub fn temporal_arithmetic(op: char, l: &Value, r: &Value) -> SqlResult<Option<Value>> {
    use Value::*;
    let negated = |i: &crate::Interval| i.checked_neg();
    let factor = |v: &Value| -> Option<f64> {
        match v {
            Int(i) => Some(*i as f64),
            Float(f) => Some(*f),
            Numeric(n) => Some(n.to_f64()),
            _ => None,
        }
    };
    let date = |d: i64| -> SqlResult<Value> {
        i32::try_from(d)
            .ok()
            .filter(|d| to_datetime(date_micros(*d)).is_ok())
            .map(Date)
            .ok_or_else(|| SqlError::numeric_out_of_range("date out of range"))
    };
    Ok(Some(match (op, l, r) {
        ('+', Timestamp(t), Interval(i)) | ('+', Interval(i), Timestamp(t)) => {
            Timestamp(add_interval(*t, i)?)
        }
        ('-', Timestamp(t), Interval(i)) => Timestamp(add_interval(*t, &negated(i)?)?),
        ('+', TimestampTz(t), Interval(i)) | ('+', Interval(i), TimestampTz(t)) => {
            TimestampTz(add_interval(*t, i)?)
        }
        ('-', TimestampTz(t), Interval(i)) => TimestampTz(add_interval(*t, &negated(i)?)?),
        ('+', Date(d), Interval(i)) | ('+', Interval(i), Date(d)) => {
            Timestamp(add_interval(date_micros(*d), i)?)
        }
        ('-', Date(d), Interval(i)) => Timestamp(add_interval(date_micros(*d), &negated(i)?)?),
        ('+', Date(d), Int(n)) | ('+', Int(n), Date(d)) => date(*d as i64 + n)?,
        ('-', Date(d), Int(n)) => date(*d as i64 - n)?,
        ('-', Date(a), Date(b)) => Int(*a as i64 - *b as i64),
        ('-', Timestamp(a) | TimestampTz(a), Timestamp(b) | TimestampTz(b)) => {
            Interval(crate::Interval::between(*a, *b)?)
        }
        ('-', Date(a), Timestamp(b) | TimestampTz(b)) => {
            Interval(crate::Interval::between(date_micros(*a), *b)?)
        }
        ('-', Timestamp(a) | TimestampTz(a), Date(b)) => {
            Interval(crate::Interval::between(*a, date_micros(*b))?)
        }
        ('+', Time(t), Interval(i)) | ('+', Interval(i), Time(t)) => {
            Time(crate::time_of_day::add_interval(*t, i, 1))
        }
        ('-', Time(t), Interval(i)) => Time(crate::time_of_day::add_interval(*t, i, -1)),
        ('-', Time(a), Time(b)) => Interval(crate::Interval {
            months: 0,
            days: 0,
            micros: a - b,
        }),
        ('+', Date(d), Time(t)) | ('+', Time(t), Date(d)) => Timestamp(date_micros(*d) + t),
        ('+', Interval(a), Interval(b)) => Interval(a.checked_add(b)?),
        ('-', Interval(a), Interval(b)) => Interval(a.checked_sub(b)?),
        ('*', Interval(i), n) | ('*', n, Interval(i)) if factor(n).is_some() => {
            Interval(i.scaled(factor(n).unwrap_or(1.0))?)
        }
        ('/', Interval(i), n) if factor(n).is_some() => {
            let divisor = factor(n).unwrap_or(1.0);
            if divisor == 0.0 {
                return Err(SqlError::division_by_zero());
            }
            Interval(i.scaled(1.0 / divisor)?)
        }
        (_, Timestamp(_) | TimestampTz(_) | Date(_) | Interval(_) | Time(_), _)
        | (_, _, Timestamp(_) | TimestampTz(_) | Date(_) | Interval(_) | Time(_)) => {
            return Err(SqlError::new(
                ErrorKind::UndefinedFunction,
                format!(
                    "operator does not exist: {} {op} {}",
                    l.natural_type().pg_name(),
                    r.natural_type().pg_name()
                ),
            ))
        }
        _ => return Ok(None),
    }))
}

fn unknown_unit(field: &str, ty: &str) -> SqlError {
    SqlError::new(
        ErrorKind::InvalidParameterValue,
        format!("unit \"{field}\" not recognized for type {ty}"),
    )
}

/// `date_trunc(field, timestamp)`: the timestamp with every smaller field at its start
/// (weeks start on Monday, as ISO and PostgreSQL have it).
pub fn trunc(field: &str, us: i64, ty: &str) -> SqlResult<i64> {
    let t = to_datetime(us)?;
    let date = t.date();
    let start_of = |d: NaiveDate| from_datetime(d.and_hms_opt(0, 0, 0).expect("midnight"));
    let year_start = |year: i32| -> SqlResult<i64> {
        NaiveDate::from_ymd_opt(year, 1, 1)
            .map(start_of)
            .ok_or_else(out_of_range)
    };
    let floor = |unit: i64| us.div_euclid(unit) * unit;
    Ok(match field.to_ascii_lowercase().as_str() {
        "microseconds" | "microsecond" => us,
        "milliseconds" | "millisecond" => floor(1000),
        "second" | "seconds" => floor(MICROS_PER_SECOND),
        "minute" | "minutes" => floor(MICROS_PER_MINUTE),
        "hour" | "hours" => floor(MICROS_PER_HOUR),
        "day" | "days" => floor(MICROS_PER_DAY),
        "week" | "weeks" => {
            start_of(date) - date.weekday().num_days_from_monday() as i64 * MICROS_PER_DAY
        }
        "month" | "months" => start_of(date.with_day(1).ok_or_else(out_of_range)?),
        "quarter" => start_of(
            NaiveDate::from_ymd_opt(date.year(), (date.month0() / 3) * 3 + 1, 1)
                .ok_or_else(out_of_range)?,
        ),
        "year" | "years" => year_start(date.year())?,
        "decade" | "decades" => year_start(date.year().div_euclid(10) * 10)?,
        "century" | "centuries" => {
            let y = date.year();
            year_start(if y > 0 { (y - 1) / 100 * 100 + 1 } else { y })?
        }
        "millennium" | "millennia" => {
            let y = date.year();
            year_start(if y > 0 { (y - 1) / 1000 * 1000 + 1 } else { y })?
        }
        other => return Err(unknown_unit(other, ty)),
    })
}

/// `extract(field FROM value)`: PostgreSQL's numeric result (seconds with six decimals,
/// milliseconds with three, the rest whole). `date_part` is the same as a double.
pub fn extract(field: &str, value: &Value) -> SqlResult<Numeric> {
    let field = field.to_ascii_lowercase();
    let whole = |v: i64| Numeric::from_i64(v);
    // Microseconds read with six decimals are seconds, with three milliseconds.
    let scaled = Numeric::new;
    match value {
        Value::Interval(i) => {
            let time = i.micros;
            Ok(match field.as_str() {
                "epoch" => {
                    // PostgreSQL: a year is 365.25 days, a month 30.
                    let years = (i.months / 12) as i128;
                    let months = (i.months % 12) as i128;
                    let seconds_of_days =
                        (years * 36525 * 864 + months * 30 * 86_400 + i.days as i128 * 86_400)
                            * MICROS_PER_SECOND as i128;
                    scaled(seconds_of_days + time as i128, 6)?
                }
                "year" | "years" => whole((i.months / 12) as i64),
                "month" | "months" => whole((i.months % 12) as i64),
                "day" | "days" => whole(i.days as i64),
                "hour" | "hours" => whole(time / MICROS_PER_HOUR),
                "minute" | "minutes" => whole(time % MICROS_PER_HOUR / MICROS_PER_MINUTE),
                "second" | "seconds" => scaled((time % MICROS_PER_MINUTE) as i128, 6)?,
                "milliseconds" | "millisecond" => scaled((time % MICROS_PER_MINUTE) as i128, 3)?,
                "microseconds" | "microsecond" => whole(time % MICROS_PER_MINUTE),
                "quarter" => whole((i.months % 12 / 3 + 1) as i64),
                "decade" | "decades" => whole((i.months / 120) as i64),
                "century" | "centuries" => whole((i.months / 1200) as i64),
                "millennium" | "millennia" => whole((i.months / 12000) as i64),
                other => return Err(unknown_unit(other, "interval")),
            })
        }
        Value::Date(d) => {
            let time_field = matches!(
                field.as_str(),
                "hour"
                    | "hours"
                    | "minute"
                    | "minutes"
                    | "second"
                    | "seconds"
                    | "milliseconds"
                    | "millisecond"
                    | "microseconds"
                    | "microsecond"
            );
            if time_field {
                return Err(SqlError::new(
                    ErrorKind::FeatureNotSupported,
                    format!("unit \"{field}\" not supported for type date"),
                ));
            }
            if field == "epoch" {
                return Ok(whole(*d as i64 * 86_400));
            }
            timestamp_field(&field, date_micros(*d), "date")
        }
        Value::Time(us) => {
            let within_minute = (us % MICROS_PER_MINUTE) as i128;
            Ok(match field.as_str() {
                "epoch" => scaled(*us as i128, 6)?,
                "hour" | "hours" => whole(us / MICROS_PER_HOUR),
                "minute" | "minutes" => whole(us % MICROS_PER_HOUR / MICROS_PER_MINUTE),
                "second" | "seconds" => scaled(within_minute, 6)?,
                "milliseconds" | "millisecond" => scaled(within_minute, 3)?,
                "microseconds" | "microsecond" => whole(within_minute as i64),
                other => return Err(unknown_unit(other, "time without time zone")),
            })
        }
        Value::Timestamp(us) => timestamp_field(&field, *us, "timestamp without time zone"),
        Value::TimestampTz(us) => timestamp_field(&field, *us, "timestamp with time zone"),
        other => Err(SqlError::new(
            ErrorKind::UndefinedFunction,
            format!(
                "function extract(unknown, {}) does not exist",
                other.natural_type().pg_name()
            ),
        )),
    }
}

fn timestamp_field(field: &str, us: i64, ty: &str) -> SqlResult<Numeric> {
    let t = to_datetime(us)?;
    let whole = |v: i64| Numeric::from_i64(v);
    let within_minute = us.rem_euclid(MICROS_PER_MINUTE) as i128;
    let year = t.year() as i64;
    Ok(match field {
        "epoch" => Numeric::new(us as i128, 6)?,
        "year" | "years" => whole(year),
        "month" | "months" => whole(t.month() as i64),
        "day" | "days" => whole(t.day() as i64),
        "hour" | "hours" => whole(t.hour() as i64),
        "minute" | "minutes" => whole(t.minute() as i64),
        "second" | "seconds" => Numeric::new(within_minute, 6)?,
        "milliseconds" | "millisecond" => Numeric::new(within_minute, 3)?,
        "microseconds" | "microsecond" => whole(within_minute as i64),
        "dow" => whole(t.weekday().num_days_from_sunday() as i64),
        "isodow" => whole(t.weekday().number_from_monday() as i64),
        "doy" => whole(t.ordinal() as i64),
        "week" => whole(t.iso_week().week() as i64),
        "isoyear" => whole(t.iso_week().year() as i64),
        "quarter" => whole((t.month0() / 3 + 1) as i64),
        "decade" => whole(year.div_euclid(10)),
        "century" => whole(if year > 0 {
            (year + 99) / 100
        } else {
            -((99 - year) / 100)
        }),
        "millennium" => whole(if year > 0 {
            (year + 999) / 1000
        } else {
            -((999 - year) / 1000)
        }),
        "timezone" | "timezone_hour" | "timezone_minute" => whole(0),
        other => return Err(unknown_unit(other, ty)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(text: &str) -> i64 {
        match Value::parse_text(text, crate::DataType::Timestamp).unwrap() {
            Value::Timestamp(us) => us,
            _ => unreachable!(),
        }
    }

    fn interval(text: &str) -> Interval {
        Interval::parse(text).unwrap()
    }

    fn shown(us: i64) -> String {
        Value::Timestamp(us)
            .to_pg_text(crate::DataType::Timestamp)
            .unwrap()
    }

    #[test]
    fn months_clamp_to_the_end_of_the_month() {
        let jan31 = ts("2024-01-31 10:00:00");
        assert_eq!(
            shown(add_interval(jan31, &interval("1 month")).unwrap()),
            "2024-02-29 10:00:00"
        );
        assert_eq!(
            shown(add_interval(jan31, &interval("-1 month 1 day 2 hours")).unwrap()),
            "2024-01-01 12:00:00"
        );
        assert!(add_interval(jan31, &interval("300000 years")).is_err());
    }

    #[test]
    fn truncates_and_extracts_as_postgresql() {
        let t = ts("2024-05-17 10:11:12.5");
        for (field, expected) in [
            ("week", "2024-05-13 00:00:00"),
            ("quarter", "2024-04-01 00:00:00"),
            ("hour", "2024-05-17 10:00:00"),
            ("century", "2001-01-01 00:00:00"),
        ] {
            assert_eq!(
                shown(trunc(field, t, "timestamp").unwrap()),
                expected,
                "{field}"
            );
        }
        for (field, expected) in [
            ("second", "12.500000"),
            ("milliseconds", "12500.000"),
            ("dow", "5"),
            ("doy", "138"),
            ("epoch", "1715940672.500000"),
            ("century", "21"),
        ] {
            let v = extract(field, &Value::Timestamp(t)).unwrap();
            assert_eq!(v.to_string(), expected, "{field}");
        }
        let i = Value::Interval(interval("1 year 2 months 3 days 04:05:06.5"));
        assert_eq!(extract("epoch", &i).unwrap().to_string(), "37015506.500000");
        assert!(trunc("fortnight", t, "timestamp").is_err());
        assert!(extract("hour", &Value::Date(0)).is_err());
    }
}
