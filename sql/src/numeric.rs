//! `Numeric`: an exact decimal, a sign, a 128-bit magnitude and a scale (digits after the
//! point). It covers PostgreSQL's NUMERIC up to 2^128 − 1 in magnitude (every 38-digit value
//! and 39-digit ones up to 340282366920938463463374607431768211455, TigerBeetle's largest
//! amount), which is what money needs; anything larger is a clear `numeric field overflow`,
//! never a silent rounding.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{SqlError, SqlResult};

/// The most digits after the point a value may carry.
pub const SCALE_MAX: u32 = 30;

/// Packed to 8-byte alignment: a `u128` would give the struct, and so every `Value`,
/// 16-byte alignment, which made a `Value` 48 bytes instead of 32. `negative` is never set
/// on zero.
#[derive(Clone, Copy, Debug)]
#[repr(C, packed(8))]
pub struct Numeric {
    magnitude: u128,
    scale: u32,
    negative: bool,
}

fn pow10(n: u32) -> u128 {
    10u128.pow(n)
}

fn overflow() -> SqlError {
    SqlError::numeric_out_of_range("numeric field overflow")
}

/// In the serialized form's scale: the magnitude does not fit an i128 and is written as
/// its bits, with `WIDE_NEGATIVE` for the sign. Values that fit are written as an i128
/// mantissa and a plain scale, as before 128-bit magnitudes, so what was written then
/// still reads.
const WIDE: u32 = 1 << 31;
const WIDE_NEGATIVE: u32 = 1 << 30;

impl Numeric {
    pub const ZERO: Numeric = Numeric {
        magnitude: 0,
        scale: 0,
        negative: false,
    };

    /// `mantissa / 10^scale`.
    pub fn new(mantissa: i128, scale: u32) -> SqlResult<Numeric> {
        Numeric::from_parts(mantissa < 0, mantissa.unsigned_abs(), scale)
    }

    /// `±magnitude / 10^scale`.
    pub fn from_parts(negative: bool, magnitude: u128, scale: u32) -> SqlResult<Numeric> {
        if scale > SCALE_MAX {
            return Err(overflow());
        }
        Ok(Numeric {
            magnitude,
            scale,
            negative: negative && magnitude != 0,
        })
    }

    pub fn from_i64(v: i64) -> Numeric {
        Numeric {
            magnitude: v.unsigned_abs() as u128,
            scale: 0,
            negative: v < 0,
        }
    }

    /// The integer `v`.
    pub fn from_u128(v: u128) -> Numeric {
        Numeric {
            magnitude: v,
            scale: 0,
            negative: false,
        }
    }

    /// The digits without the point (`123.45` is 12345), without the sign.
    pub fn magnitude(&self) -> u128 {
        self.magnitude
    }

    pub fn is_negative(&self) -> bool {
        self.negative
    }

    pub fn scale(&self) -> u32 {
        self.scale
    }

    pub fn is_zero(&self) -> bool {
        self.magnitude == 0
    }

    /// The value as an unsigned integer: None when it is negative or has a nonzero
    /// fraction.
    pub fn to_u128(&self) -> Option<u128> {
        if self.negative {
            return None;
        }
        if self.scale == 0 {
            return Some(self.magnitude);
        }
        let div = pow10(self.scale);
        self.magnitude
            .is_multiple_of(div)
            .then_some(self.magnitude / div)
    }

    pub fn abs(&self) -> Numeric {
        Numeric {
            negative: false,
            ..*self
        }
    }

    /// The digits with their sign (`-123.45` is -12345), when they fit an i128.
    pub fn mantissa(&self) -> Option<i128> {
        let magnitude = self.magnitude;
        if self.negative {
            0i128.checked_sub_unsigned(magnitude)
        } else {
            i128::try_from(magnitude).ok()
        }
    }

    /// Parses PostgreSQL numeric text: optional sign, digits, optional fraction, optional
    /// exponent.
    pub fn parse(text: &str) -> SqlResult<Numeric> {
        let invalid =
            || SqlError::invalid_text(format!("invalid input syntax for type numeric: \"{text}\""));
        let s = text.trim();
        let (negative, body) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        let (body, exponent) = match body.find(['e', 'E']) {
            Some(at) => {
                let e: i32 = body[at + 1..].parse().map_err(|_| invalid())?;
                (&body[..at], e)
            }
            None => (body, 0),
        };
        let (int_part, frac_part) = match body.find('.') {
            Some(at) => (&body[..at], &body[at + 1..]),
            None => (body, ""),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(invalid());
        }
        let mut magnitude: u128 = 0;
        for c in int_part.bytes().chain(frac_part.bytes()) {
            if !c.is_ascii_digit() {
                return Err(invalid());
            }
            magnitude = magnitude
                .checked_mul(10)
                .and_then(|m| m.checked_add((c - b'0') as u128))
                .ok_or_else(overflow)?;
        }
        let mut scale = frac_part.len() as i64 - exponent as i64;
        if scale < 0 {
            let up = u32::try_from(-scale).map_err(|_| overflow())?;
            magnitude = magnitude
                .checked_mul(10u128.checked_pow(up).ok_or_else(overflow)?)
                .ok_or_else(overflow)?;
            scale = 0;
        }
        while scale > SCALE_MAX as i64 {
            magnitude /= 10;
            scale -= 1;
        }
        Numeric::from_parts(negative, magnitude, scale as u32)
    }

    pub fn from_f64(v: f64) -> SqlResult<Numeric> {
        if !v.is_finite() {
            return Err(SqlError::feature_not_supported(
                "NaN and infinity in NUMERIC",
            ));
        }
        Numeric::parse(&format!("{v}"))
    }

    pub fn to_f64(&self) -> f64 {
        let v = self.magnitude as f64 / 10f64.powi(self.scale as i32);
        if self.negative {
            -v
        } else {
            v
        }
    }

    /// The integer part, truncated toward zero.
    pub fn trunc(&self) -> Numeric {
        self.trunc_to(0)
    }

    /// Truncated toward zero to at most `scale` digits after the point.
    pub fn trunc_to(&self, scale: u32) -> Numeric {
        if scale >= self.scale {
            return *self;
        }
        let magnitude = self.magnitude / pow10(self.scale - scale);
        Numeric {
            magnitude,
            scale,
            negative: self.negative && magnitude != 0,
        }
    }

    /// The integer part, truncated toward zero, if it fits an i64.
    pub fn trunc_i64(&self) -> Option<i64> {
        i64::try_from(self.trunc().mantissa()?).ok()
    }

    /// Rounds half away from zero to an i64, as PostgreSQL's numeric-to-integer casts do.
    pub fn round_i64(&self) -> Option<i64> {
        i64::try_from(self.rescale(0).ok()?.mantissa()?).ok()
    }

    /// Rounds (half away from zero) or extends to exactly `scale` digits after the point.
    pub fn rescale(&self, scale: u32) -> SqlResult<Numeric> {
        match scale.cmp(&self.scale) {
            Ordering::Equal => Ok(*self),
            Ordering::Greater => {
                let m = self
                    .magnitude
                    .checked_mul(
                        10u128
                            .checked_pow(scale - self.scale)
                            .ok_or_else(overflow)?,
                    )
                    .ok_or_else(overflow)?;
                Numeric::from_parts(self.negative, m, scale)
            }
            Ordering::Less => {
                let div = pow10(self.scale - scale);
                let (q, r) = (self.magnitude / div, self.magnitude % div);
                let up = u128::from(r >= div - r);
                Numeric::from_parts(self.negative, q + up, scale)
            }
        }
    }

    /// Checks `NUMERIC(precision, scale)`: rounds to the scale, then rejects values with more
    /// integer digits than the type allows.
    pub fn fit(&self, precision: u32, scale: u32) -> SqlResult<Numeric> {
        let v = self.rescale(scale)?;
        if 10u128
            .checked_pow(precision)
            .is_some_and(|limit| v.magnitude >= limit)
        {
            return Err(SqlError::numeric_out_of_range(format!(
                "numeric field overflow: a field with precision {precision}, scale {scale} must round to an absolute value less than 10^{}",
                precision - scale
            )));
        }
        Ok(v)
    }

    /// Both at the larger scale.
    fn aligned(a: &Numeric, b: &Numeric) -> SqlResult<(Numeric, Numeric)> {
        let scale = a.scale.max(b.scale);
        Ok((a.rescale(scale)?, b.rescale(scale)?))
    }

    pub fn add(&self, other: &Numeric) -> SqlResult<Numeric> {
        let (a, b) = Numeric::aligned(self, other)?;
        if a.negative == b.negative {
            let m = a.magnitude.checked_add(b.magnitude).ok_or_else(overflow)?;
            return Numeric::from_parts(a.negative, m, a.scale);
        }
        // Opposite signs: the larger magnitude's sign, the difference of the two.
        let (a_magnitude, b_magnitude) = (a.magnitude, b.magnitude);
        match a_magnitude.cmp(&b_magnitude) {
            Ordering::Less => Numeric::from_parts(b.negative, b.magnitude - a.magnitude, a.scale),
            _ => Numeric::from_parts(a.negative, a.magnitude - b.magnitude, a.scale),
        }
    }

    pub fn sub(&self, other: &Numeric) -> SqlResult<Numeric> {
        self.add(&other.neg())
    }

    pub fn neg(&self) -> Numeric {
        Numeric {
            negative: !self.negative && self.magnitude != 0,
            ..*self
        }
    }

    /// The product, at PostgreSQL's scale (the sum of the inputs') as far as 128 bits and
    /// `SCALE_MAX` allow: trailing zeros beyond that are left off (the value is exact), and
    /// fraction digits past `SCALE_MAX` are rounded half away from zero. A product past
    /// 2^128 − 1 is an overflow error, never a silent loss.
    pub fn mul(&self, other: &Numeric) -> SqlResult<Numeric> {
        let scale = self.scale + other.scale;
        let negative = self.negative != other.negative;
        if let Some(m) = self.magnitude.checked_mul(other.magnitude) {
            let exact = Numeric {
                magnitude: m,
                scale,
                negative: negative && m != 0,
            };
            if scale <= SCALE_MAX {
                return Ok(exact);
            }
            return exact.rescale_wide(SCALE_MAX);
        }
        // Too wide as it stands: multiply without the trailing zeros, then give back as
        // many of the scale's digits as fit.
        let (a, b) = (self.trim_to(0)?, other.trim_to(0)?);
        let m = a.magnitude.checked_mul(b.magnitude).ok_or_else(overflow)?;
        let trimmed = Numeric {
            magnitude: m,
            scale: a.scale + b.scale,
            negative,
        };
        trimmed.rescale_wide(scale.min(SCALE_MAX))
    }

    /// `rescale` of a product, whose scale may be past `SCALE_MAX` (by at most `SCALE_MAX`
    /// digits), except that extending stops where the magnitude would pass 128 bits.
    fn rescale_wide(&self, scale: u32) -> SqlResult<Numeric> {
        let mut v = if self.scale > scale {
            self.rescale(scale)?
        } else {
            *self
        };
        while v.scale < scale {
            match v.magnitude.checked_mul(10) {
                Some(m) => {
                    v.magnitude = m;
                    v.scale += 1;
                }
                None => break,
            }
        }
        Numeric::from_parts(v.negative, v.magnitude, v.scale)
    }

    /// PostgreSQL's scale for a quotient (`select_div_scale`): enough fraction digits for
    /// at least 16 significant ones, judging the quotient's size from the inputs' leading
    /// base-10000 digits, and never fewer than either input has.
    fn div_scale(&self, other: &Numeric) -> u32 {
        let (w1, d1) = self.leading_group();
        let (w2, d2) = other.leading_group();
        let mut qweight = w1 - w2;
        if d1 <= d2 {
            qweight -= 1;
        }
        let scale = (16 - qweight * 4)
            .max(self.scale as i64)
            .max(other.scale as i64)
            .max(0);
        scale.min(SCALE_MAX as i64) as u32
    }

    /// The weight (power of 10000) of the leading base-10000 digit, and that digit, as
    /// PostgreSQL stores a numeric; zero is (0, 0).
    fn leading_group(&self) -> (i64, u128) {
        let m = self.magnitude;
        if m == 0 {
            return (0, 0);
        }
        let digits = m.ilog10() as i64 + 1;
        let exponent = digits - 1 - self.scale as i64;
        let weight = exponent.div_euclid(4);
        // The leading group: the value divided by 10000^weight, truncated.
        let shift = self.scale as i64 + 4 * weight;
        let group = if shift >= 0 {
            m / 10u128.pow(shift as u32)
        } else {
            m * 10u128.pow((-shift) as u32)
        };
        (weight, group)
    }

    /// Division at PostgreSQL's result scale (`div_scale`), rounded half away from zero.
    pub fn div(&self, other: &Numeric) -> SqlResult<Numeric> {
        if other.magnitude == 0 {
            return Err(SqlError::division_by_zero());
        }
        let scale = self.div_scale(other);
        // self / other = (ma / 10^sa) / (mb / 10^sb); the result magnitude at `scale` is
        // ma * 10^(scale + sb - sa) / mb.
        let shift = scale as i64 + other.scale as i64 - self.scale as i64;
        let mut num = self.magnitude;
        let mut den = other.magnitude;
        if shift >= 0 {
            let mut remaining = shift as u32;
            // Scale up as far as the numerator allows, then shrink the denominator instead.
            while remaining > 0 {
                match num.checked_mul(10) {
                    Some(n) => num = n,
                    None => break,
                }
                remaining -= 1;
            }
            while remaining > 0 {
                den /= 10;
                remaining -= 1;
                if den == 0 {
                    return Err(overflow());
                }
            }
        } else {
            den = den
                .checked_mul(10u128.checked_pow((-shift) as u32).ok_or_else(overflow)?)
                .ok_or_else(overflow)?;
        }
        let (q, r) = (num / den, num % den);
        let q = q + u128::from(r != 0 && r >= den - r);
        Numeric::from_parts(self.negative != other.negative, q, scale)
    }

    /// Drops trailing zero fraction digits, keeping at least `min_scale`.
    pub fn trim_to(&self, min_scale: u32) -> SqlResult<Numeric> {
        let mut v = *self;
        while v.scale > min_scale && v.magnitude.is_multiple_of(10) {
            v.magnitude /= 10;
            v.scale -= 1;
        }
        Ok(v)
    }

    /// The remainder, with the dividend's sign.
    pub fn rem(&self, other: &Numeric) -> SqlResult<Numeric> {
        if other.magnitude == 0 {
            return Err(SqlError::division_by_zero());
        }
        let (a, b) = Numeric::aligned(self, other)?;
        Numeric::from_parts(a.negative, a.magnitude % b.magnitude, a.scale)
    }

    /// PostgreSQL's binary NUMERIC: ndigits, weight, sign, dscale, then base-10000 digits.
    pub fn to_pg_binary(&self, out: &mut Vec<u8>) {
        let div = pow10(self.scale);
        let (mut whole, fraction) = (self.magnitude / div, self.magnitude % div);
        // The fraction padded to a multiple of 4 digits, so base-10000 groups line up.
        let pad = (4 - self.scale % 4) % 4;
        let frac_groups = (self.scale + pad) / 4;
        let mut fraction = fraction * pow10(pad);
        let mut groups = Vec::new();
        for _ in 0..frac_groups {
            groups.push((fraction % 10_000) as i16);
            fraction /= 10_000;
        }
        let mut weight = -1i32;
        while whole > 0 {
            groups.push((whole % 10_000) as i16);
            whole /= 10_000;
            weight += 1;
        }
        groups.reverse();
        // Strip leading and trailing zero groups: PostgreSQL does not send them.
        let mut start = 0;
        while start < groups.len() && groups[start] == 0 {
            start += 1;
            weight -= 1;
        }
        let mut end = groups.len();
        while end > start && groups[end - 1] == 0 {
            end -= 1;
        }
        let digits = &groups[start..end];
        if digits.is_empty() {
            weight = 0;
        }
        out.extend_from_slice(&(digits.len() as i16).to_be_bytes());
        out.extend_from_slice(&(weight as i16).to_be_bytes());
        out.extend_from_slice(&(if self.negative { 0x4000u16 } else { 0 }).to_be_bytes());
        out.extend_from_slice(&(self.scale as u16).to_be_bytes());
        for d in digits {
            out.extend_from_slice(&d.to_be_bytes());
        }
    }

    /// Decodes PostgreSQL's binary NUMERIC.
    pub fn from_pg_binary(raw: &[u8]) -> SqlResult<Numeric> {
        let bad = || SqlError::invalid_binary("invalid binary numeric");
        if raw.len() < 8 {
            return Err(bad());
        }
        let field = |i: usize| i16::from_be_bytes([raw[i], raw[i + 1]]);
        let ndigits = field(0) as usize;
        let weight = field(2) as i32;
        let sign = field(4) as u16;
        let dscale = field(6) as u32;
        if sign == 0xC000 || raw.len() != 8 + ndigits * 2 {
            return Err(bad());
        }
        // The digits represent magnitude * 10000^(weight - ndigits + 1). The last group's
        // digits past `dscale` are the padding to whole groups: left off, so that a value
        // that fits does not overflow on its padding.
        let exp4 = weight - ndigits as i32 + 1;
        let padding = match (-exp4 * 4) as i64 - dscale as i64 {
            pad @ 1..=3 => pad as u32,
            _ => 0,
        };
        let mut magnitude: u128 = 0;
        for i in 0..ndigits {
            let digit = u128::try_from(field(8 + i * 2)).map_err(|_| bad())?;
            let (base, digit) = match i + 1 == ndigits {
                true => (pow10(4 - padding), digit / pow10(padding)),
                false => (10_000, digit),
            };
            magnitude = magnitude
                .checked_mul(base)
                .and_then(|m| m.checked_add(digit))
                .ok_or_else(overflow)?;
        }
        let value = if exp4 >= 0 {
            let up = 10u128.checked_pow(4 * exp4 as u32).ok_or_else(overflow)?;
            Numeric::from_u128(magnitude.checked_mul(up).ok_or_else(overflow)?)
        } else {
            let scale = (-exp4 * 4) as u32 - padding;
            if scale > 38 {
                return Err(overflow());
            }
            Numeric {
                magnitude,
                scale,
                negative: false,
            }
        };
        let value = if sign == 0x4000 { value.neg() } else { value };
        value.rescale(dscale.min(SCALE_MAX))
    }
}

impl Numeric {
    /// Appends bytes that sort as the values do and are equal for equal values (1.5 and
    /// 1.50 alike): what a key of a NUMERIC column holds. A sign byte; then, for a nonzero
    /// value, the position of its leading digit and its significant digits (trailing zeros
    /// left off), both inverted for a negative value, which also ends with a byte above
    /// every inverted digit so that a longer negative (more digits, smaller) sorts first.
    pub fn key_bytes(&self, out: &mut Vec<u8>) {
        if self.magnitude == 0 {
            out.push(1);
            return;
        }
        let trimmed = self.trim_to(0).unwrap_or(*self);
        let (magnitude, scale) = (trimmed.magnitude, trimmed.scale);
        let digits = magnitude.to_string();
        // The leading digit's power of ten plus one: from -29 (scale 30) to 39.
        let position = digits.len() as i32 - scale as i32;
        let exponent = (position + 64) as u8;
        if self.negative {
            out.push(0);
            out.push(!exponent);
            out.extend(digits.bytes().map(|d| 0x39 - d + 1));
            out.push(0xFF);
        } else {
            out.push(2);
            out.push(exponent);
            out.extend(digits.bytes().map(|d| d - b'0' + 1));
        }
    }
}

impl Serialize for Numeric {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (magnitude, scale, negative) = (self.magnitude, self.scale, self.negative);
        match self.mantissa() {
            Some(mantissa) => (mantissa, scale).serialize(serializer),
            None => {
                let sign = if negative { WIDE_NEGATIVE } else { 0 };
                (magnitude as i128, scale | WIDE | sign).serialize(serializer)
            }
        }
    }
}

impl<'de> Deserialize<'de> for Numeric {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Numeric, D::Error> {
        let (mantissa, scale) = <(i128, u32)>::deserialize(deserializer)?;
        let value = if scale & WIDE != 0 {
            let negative = scale & WIDE_NEGATIVE != 0;
            Numeric::from_parts(negative, mantissa as u128, scale & !(WIDE | WIDE_NEGATIVE))
        } else {
            Numeric::new(mantissa, scale)
        };
        value.map_err(|e| serde::de::Error::custom(e.message))
    }
}

impl PartialEq for Numeric {
    fn eq(&self, other: &Numeric) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Numeric {}

impl PartialOrd for Numeric {
    fn partial_cmp(&self, other: &Numeric) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Numeric {
    fn cmp(&self, other: &Numeric) -> Ordering {
        let (a_negative, b_negative) = (self.negative, other.negative);
        if a_negative != b_negative {
            return if a_negative {
                Ordering::Less
            } else {
                Ordering::Greater
            };
        }
        let magnitudes = match Numeric::aligned(self, other) {
            Ok((a, b)) => {
                let (a, b) = (a.magnitude, b.magnitude);
                a.cmp(&b)
            }
            // Alignment overflows only when one side is far larger; compare as floats.
            Err(_) => self.abs().to_f64().total_cmp(&other.abs().to_f64()),
        };
        if a_negative {
            magnitudes.reverse()
        } else {
            magnitudes
        }
    }
}

impl fmt::Display for Numeric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (abs, scale) = (self.magnitude, self.scale);
        let sign = if self.negative { "-" } else { "" };
        if scale == 0 {
            return write!(f, "{sign}{abs}");
        }
        let div = pow10(scale);
        write!(
            f,
            "{sign}{}.{:0width$}",
            abs / div,
            abs % div,
            width = scale as usize
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Numeric {
        Numeric::parse(s).unwrap()
    }

    #[test]
    fn parses_and_prints() {
        for s in [
            "0",
            "1",
            "-1",
            "12.50",
            "-0.001",
            "123456789012345678901234567890.12",
        ] {
            assert_eq!(n(s).to_string(), s);
        }
        assert_eq!(n("1e3").to_string(), "1000");
        assert_eq!(n("1.5e-2").to_string(), "0.015");
        assert!(Numeric::parse("abc").is_err());
        assert!(Numeric::parse("").is_err());
        assert!(Numeric::parse("1".repeat(40).as_str()).is_err());
    }

    #[test]
    fn arithmetic() {
        assert_eq!(n("1.25").add(&n("2.5")).unwrap().to_string(), "3.75");
        assert_eq!(n("1.25").mul(&n("-2")).unwrap().to_string(), "-2.50");
        assert_eq!(
            n("10").div(&n("4")).unwrap().to_string(),
            "2.5000000000000000"
        );
        // Quotients at PostgreSQL 15's scale (each expected text is its answer).
        let quotient = |a: &str, b: &str| n(a).div(&n(b)).unwrap().to_string();
        assert_eq!(quotient("1", "3"), "0.33333333333333333333");
        assert_eq!(quotient("-2", "3"), "-0.66666666666666666667");
        assert_eq!(quotient("0.001", "7"), "0.00014285714285714286");
        assert_eq!(quotient("123456", "7"), "17636.571428571429");
        // Products keep PostgreSQL's scale (the sum of the inputs') as far as SCALE_MAX and
        // 38 digits allow: PostgreSQL gives -9948960 with 32 zeros and 0.01524...90521 with 38
        // fraction digits.
        let product = |a: &str, b: &str| n(a).mul(&n(b)).unwrap().to_string();
        assert_eq!(
            product("84.0000000000000000", "-118440.0000000000000000"),
            "-9948960.000000000000000000000000000000"
        );
        assert_eq!(
            product("0.1234567890123456789", "0.1234567890123456789"),
            "0.015241578753238836750190519988"
        );
        assert_eq!(
            product(
                "-9948960.000000000000000000000000000000",
                "820.0000000000000000"
            ),
            "-8158147200.0000000000000000000000000000"
        );
        // Up to 2^128 - 1 in magnitude; past it, an error.
        assert_eq!(
            product("12345678901234567890", "12345678901234567890"),
            "152415787532388367501905199875019052100"
        );
        assert!(n("123456789012345678901")
            .mul(&n("12345678901234567890"))
            .is_err());
        assert!(n("1").div(&n("0")).is_err());
        assert_eq!(n("2.345").rescale(2).unwrap().to_string(), "2.35");
        assert_eq!(n("-2.345").rescale(2).unwrap().to_string(), "-2.35");
        assert!(n("123.4").fit(4, 2).is_err());
        assert_eq!(n("12.345").fit(4, 2).unwrap().to_string(), "12.35");
        assert_eq!(n("1.10"), n("1.1"));
    }

    #[test]
    fn packing_keeps_the_serialized_form_and_values_small() {
        let n = Numeric::new(-123_456_789_012_345_678_901, 7).unwrap();
        let bytes = bincode::serialize(&n).unwrap();
        let mantissa: i128 = -123_456_789_012_345_678_901;
        assert_eq!(bytes, bincode::serialize(&(mantissa, 7u32)).unwrap());
        assert_eq!(bincode::deserialize::<Numeric>(&bytes).unwrap(), n);
        assert_eq!(std::mem::size_of::<crate::Value>(), 32);
    }

    /// TigerBeetle's largest amount, 2^128 - 1, and the arithmetic at that edge.
    #[test]
    fn magnitudes_reach_two_to_the_128_minus_one() {
        let max = "340282366920938463463374607431768211455";
        assert_eq!(n(max).to_u128(), Some(u128::MAX));
        assert_eq!(n(max).to_string(), max);
        assert_eq!(n(&format!("-{max}")).to_string(), format!("-{max}"));
        assert!(Numeric::parse("340282366920938463463374607431768211456").is_err());
        assert!(n(max).add(&n("1")).is_err());
        assert_eq!(n(max).sub(&n(max)).unwrap(), Numeric::ZERO);
        assert_eq!(n("-5").add(&n("3")).unwrap().to_string(), "-2");
        assert_eq!(n("5").add(&n("-3.5")).unwrap().to_string(), "1.5");
        assert_eq!(n("-5").add(&n("5")).unwrap().to_string(), "0");
        assert!(n("-1") < n("0") && n("-2") < n("-1") && n(max) > n("1e37"));
        assert_eq!(n("-0.5").trunc().to_string(), "0");
        assert_eq!(n("-1.5").trunc().to_string(), "-1");
        assert_eq!(n("-7").rem(&n("3")).unwrap().to_string(), "-1");
        assert_eq!(n(max).fit(39, 0).unwrap().to_string(), max);
        assert!(n(max).fit(38, 0).is_err());
        assert_eq!(n("1.5").to_u128(), None);
        assert_eq!(n("-1").to_u128(), None);
        assert_eq!(n("2.00").to_u128(), Some(2));
        // The serialized form: an i128 where the value fits one, flagged bits where not.
        for s in [max, &format!("-{max}"), "-12.5", "0"] {
            let bytes = bincode::serialize(&n(s)).unwrap();
            assert_eq!(
                bincode::deserialize::<Numeric>(&bytes).unwrap().to_string(),
                s
            );
        }
        let mut out = Vec::new();
        n(max).to_pg_binary(&mut out);
        assert_eq!(Numeric::from_pg_binary(&out).unwrap().to_string(), max);
    }

    #[test]
    fn key_bytes_sort_as_the_values_and_equal_values_match() {
        let values = [
            "-340282366920938463463374607431768211455",
            "-1000",
            "-12.5",
            "-1.23",
            "-1.2",
            "-1",
            "-0.000000000000000000000000000001",
            "0",
            "0.000000000000000000000000000001",
            "0.5",
            "1",
            "1.2",
            "1.23",
            "9.99",
            "10",
            "100.01",
            "340282366920938463463374607431768211455",
        ];
        let key = |s: &str| {
            let mut out = Vec::new();
            n(s).key_bytes(&mut out);
            out
        };
        for pair in values.windows(2) {
            assert!(
                key(pair[0]) < key(pair[1]),
                "{} before {}",
                pair[0],
                pair[1]
            );
        }
        assert_eq!(key("1.50"), key("1.5"));
        assert_eq!(key("-0.0"), key("0"));
        assert_eq!(key("100"), key("100.000"));
    }

    #[test]
    fn binary_round_trip() {
        for s in [
            "0",
            "1",
            "-1",
            "10000",
            "12.5",
            "0.0001",
            "-98765.4321",
            "1234567890123456789",
            "0.00012",
            "99999999999999999999999999999.999999999",
            "-0.000000000000000000000000000001",
        ] {
            let mut out = Vec::new();
            n(s).to_pg_binary(&mut out);
            let back = Numeric::from_pg_binary(&out).unwrap();
            assert_eq!(back.to_string(), s, "{s}");
        }
    }
}
