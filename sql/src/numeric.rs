//! `Numeric`: an exact decimal, a 128-bit mantissa and a scale (digits after the point).
//! It covers PostgreSQL's NUMERIC up to 38 significant digits, which is what money needs;
//! anything larger is a clear `numeric field overflow`, never a silent rounding.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{SqlError, SqlResult};

/// The most digits after the point a value may carry.
pub const SCALE_MAX: u32 = 30;
const MANTISSA_MAX: i128 = 10i128.pow(38) - 1;

/// Packed to 8-byte alignment: an `i128` would give the struct, and so every `Value`,
/// 16-byte alignment, which made a `Value` 48 bytes instead of 32.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[repr(C, packed(8))]
pub struct Numeric {
    mantissa: i128,
    scale: u32,
}

fn pow10(n: u32) -> i128 {
    10i128.pow(n)
}

fn overflow() -> SqlError {
    SqlError::numeric_out_of_range("numeric field overflow")
}

impl Numeric {
    pub const ZERO: Numeric = Numeric {
        mantissa: 0,
        scale: 0,
    };

    pub fn new(mantissa: i128, scale: u32) -> SqlResult<Numeric> {
        if scale > SCALE_MAX || mantissa.abs() > MANTISSA_MAX {
            return Err(overflow());
        }
        Ok(Numeric { mantissa, scale })
    }

    pub fn from_i64(v: i64) -> Numeric {
        Numeric {
            mantissa: v as i128,
            scale: 0,
        }
    }

    pub fn mantissa(&self) -> i128 {
        self.mantissa
    }

    pub fn scale(&self) -> u32 {
        self.scale
    }

    pub fn is_zero(&self) -> bool {
        self.mantissa == 0
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
        let mut mantissa: i128 = 0;
        let mut significant = 0u32;
        for c in int_part.bytes().chain(frac_part.bytes()) {
            if !c.is_ascii_digit() {
                return Err(invalid());
            }
            if mantissa != 0 || c != b'0' {
                significant += 1;
            }
            if significant > 38 {
                return Err(overflow());
            }
            mantissa = mantissa * 10 + (c - b'0') as i128;
        }
        let mut scale = frac_part.len() as i64 - exponent as i64;
        if scale < 0 {
            let up = u32::try_from(-scale).map_err(|_| overflow())?;
            mantissa = mantissa
                .checked_mul(10i128.checked_pow(up).ok_or_else(overflow)?)
                .ok_or_else(overflow)?;
            scale = 0;
        }
        while scale > SCALE_MAX as i64 {
            mantissa /= 10;
            scale -= 1;
        }
        Numeric::new(if negative { -mantissa } else { mantissa }, scale as u32)
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
        self.mantissa as f64 / 10f64.powi(self.scale as i32)
    }

    /// The integer part, truncated toward zero.
    pub fn trunc(&self) -> Numeric {
        Numeric {
            mantissa: self.mantissa / pow10(self.scale),
            scale: 0,
        }
    }

    /// The integer part, truncated toward zero, if it fits an i64.
    pub fn trunc_i64(&self) -> Option<i64> {
        i64::try_from(self.mantissa / pow10(self.scale)).ok()
    }

    /// Rounds half away from zero to an i64, as PostgreSQL's numeric-to-integer casts do.
    pub fn round_i64(&self) -> Option<i64> {
        i64::try_from(self.rescale(0).ok()?.mantissa).ok()
    }

    /// Rounds (half away from zero) or extends to exactly `scale` digits after the point.
    pub fn rescale(&self, scale: u32) -> SqlResult<Numeric> {
        match scale.cmp(&self.scale) {
            Ordering::Equal => Ok(*self),
            Ordering::Greater => {
                let m = self
                    .mantissa
                    .checked_mul(pow10(scale - self.scale))
                    .ok_or_else(overflow)?;
                Numeric::new(m, scale)
            }
            Ordering::Less => {
                let div = pow10(self.scale - scale);
                let q = self.mantissa / div;
                let r = self.mantissa % div;
                let adjust = if r.abs() * 2 >= div {
                    self.mantissa.signum()
                } else {
                    0
                };
                Numeric::new(q + adjust, scale)
            }
        }
    }

    /// Checks `NUMERIC(precision, scale)`: rounds to the scale, then rejects values with more
    /// integer digits than the type allows.
    pub fn fit(&self, precision: u32, scale: u32) -> SqlResult<Numeric> {
        let v = self.rescale(scale)?;
        let limit = 10i128.checked_pow(precision).unwrap_or(i128::MAX);
        if v.mantissa.abs() >= limit {
            return Err(SqlError::numeric_out_of_range(format!(
                "numeric field overflow: a field with precision {precision}, scale {scale} must round to an absolute value less than 10^{}",
                precision - scale
            )));
        }
        Ok(v)
    }

    fn aligned(a: &Numeric, b: &Numeric) -> SqlResult<(i128, i128, u32)> {
        let scale = a.scale.max(b.scale);
        Ok((
            a.rescale(scale)?.mantissa,
            b.rescale(scale)?.mantissa,
            scale,
        ))
    }

    pub fn add(&self, other: &Numeric) -> SqlResult<Numeric> {
        let (a, b, scale) = Numeric::aligned(self, other)?;
        Numeric::new(a.checked_add(b).ok_or_else(overflow)?, scale)
    }

    pub fn sub(&self, other: &Numeric) -> SqlResult<Numeric> {
        self.add(&other.neg())
    }

    pub fn neg(&self) -> Numeric {
        Numeric {
            mantissa: -self.mantissa,
            scale: self.scale,
        }
    }

    /// The product, at PostgreSQL's scale (the sum of the inputs') as far as 38 digits and
    /// `SCALE_MAX` allow: trailing zeros beyond that are left off (the value is exact), and
    /// fraction digits past `SCALE_MAX` are rounded half away from zero. More than 38
    /// significant digits is an overflow error, never a silent loss.
    pub fn mul(&self, other: &Numeric) -> SqlResult<Numeric> {
        let scale = self.scale + other.scale;
        if let Some(m) = self.mantissa.checked_mul(other.mantissa) {
            let exact = Numeric { mantissa: m, scale };
            if scale <= SCALE_MAX && m.abs() <= MANTISSA_MAX {
                return Ok(exact);
            }
            if m.abs() <= MANTISSA_MAX {
                return exact.rescale_wide(SCALE_MAX);
            }
        }
        // Too wide as it stands: multiply without the trailing zeros, then give back as
        // many of the scale's digits as fit.
        let (a, b) = (self.trim_to(0)?, other.trim_to(0)?);
        let m = a.mantissa.checked_mul(b.mantissa).ok_or_else(overflow)?;
        let trimmed = Numeric {
            mantissa: m,
            scale: a.scale + b.scale,
        };
        if trimmed.mantissa.abs() > MANTISSA_MAX {
            return Err(overflow());
        }
        trimmed.rescale_wide(scale.min(SCALE_MAX))
    }

    /// `rescale` of a product, whose scale may be past `SCALE_MAX` (by at most `SCALE_MAX`
    /// digits), except that extending stops where the mantissa would pass 38 digits.
    fn rescale_wide(&self, scale: u32) -> SqlResult<Numeric> {
        let mut v = if self.scale > scale {
            self.rescale(scale)?
        } else {
            *self
        };
        while v.scale < scale {
            match v.mantissa.checked_mul(10) {
                Some(m) if m.abs() <= MANTISSA_MAX => {
                    v.mantissa = m;
                    v.scale += 1;
                }
                _ => break,
            }
        }
        Numeric::new(v.mantissa, v.scale)
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
    fn leading_group(&self) -> (i64, i128) {
        let m = self.mantissa.unsigned_abs();
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
        (weight, group as i128)
    }

    /// Division at PostgreSQL's result scale (`div_scale`), rounded half away from zero.
    pub fn div(&self, other: &Numeric) -> SqlResult<Numeric> {
        if other.mantissa == 0 {
            return Err(SqlError::division_by_zero());
        }
        let scale = self.div_scale(other);
        // self / other = (ma / 10^sa) / (mb / 10^sb); the result mantissa at `scale` is
        // ma * 10^(scale + sb - sa) / mb.
        let shift = scale as i64 + other.scale as i64 - self.scale as i64;
        let mut num = self.mantissa;
        let mut den = other.mantissa;
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
                .checked_mul(pow10((-shift) as u32))
                .ok_or_else(overflow)?;
        }
        let q = num / den;
        let r = num % den;
        let round_away = r.abs() >= den.abs() - r.abs();
        let q = if r != 0 && round_away {
            q + num.signum() * den.signum()
        } else {
            q
        };
        Numeric::new(q, scale)
    }

    /// Drops trailing zero fraction digits, keeping at least `min_scale`.
    pub fn trim_to(&self, min_scale: u32) -> SqlResult<Numeric> {
        let mut v = *self;
        while v.scale > min_scale && v.mantissa % 10 == 0 {
            v.mantissa /= 10;
            v.scale -= 1;
        }
        Ok(v)
    }

    pub fn rem(&self, other: &Numeric) -> SqlResult<Numeric> {
        if other.mantissa == 0 {
            return Err(SqlError::division_by_zero());
        }
        let (a, b, scale) = Numeric::aligned(self, other)?;
        Numeric::new(a % b, scale)
    }

    /// PostgreSQL's binary NUMERIC: ndigits, weight, sign, dscale, then base-10000 digits.
    pub fn to_pg_binary(&self, out: &mut Vec<u8>) {
        let negative = self.mantissa < 0;
        let mut abs = self.mantissa.unsigned_abs();
        // Pad the fraction to a multiple of 4 digits so base-10000 groups line up.
        let pad = (4 - self.scale % 4) % 4;
        abs *= 10u128.pow(pad);
        let frac_groups = (self.scale + pad) / 4;
        let mut groups = Vec::new();
        while abs > 0 {
            groups.push((abs % 10_000) as i16);
            abs /= 10_000;
        }
        groups.reverse();
        let total = groups.len() as i32;
        let mut weight = total - frac_groups as i32 - 1;
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
        out.extend_from_slice(&(if negative { 0x4000u16 } else { 0 }).to_be_bytes());
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
        let mut mantissa: i128 = 0;
        for i in 0..ndigits {
            mantissa =
                mantissa.checked_mul(10_000).ok_or_else(overflow)? + field(8 + i * 2) as i128;
        }
        // The digits represent mantissa * 10000^(weight - ndigits + 1).
        let exp4 = weight - ndigits as i32 + 1;
        let value = if exp4 >= 0 {
            Numeric::new(
                mantissa
                    .checked_mul(10i128.checked_pow(4 * exp4 as u32).ok_or_else(overflow)?)
                    .ok_or_else(overflow)?,
                0,
            )?
        } else {
            let scale = (-exp4 * 4) as u32;
            if scale > 38 {
                return Err(overflow());
            }
            Numeric { mantissa, scale }
        };
        let value = if sign == 0x4000 { value.neg() } else { value };
        value.rescale(dscale.min(SCALE_MAX))
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
        match Numeric::aligned(self, other) {
            Ok((a, b, _)) => a.cmp(&b),
            // Alignment overflows only when one side is far larger; compare as floats.
            Err(_) => self.to_f64().total_cmp(&other.to_f64()),
        }
    }
}

impl fmt::Display for Numeric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let abs = self.mantissa.unsigned_abs();
        let sign = if self.mantissa < 0 { "-" } else { "" };
        if self.scale == 0 {
            return write!(f, "{sign}{abs}");
        }
        let div = 10u128.pow(self.scale);
        write!(
            f,
            "{sign}{}.{:0width$}",
            abs / div,
            abs % div,
            width = self.scale as usize
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
        assert!(n("12345678901234567890")
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
        assert_eq!(bytes, bincode::serialize(&(n.mantissa(), 7u32)).unwrap());
        assert_eq!(bincode::deserialize::<Numeric>(&bytes).unwrap(), n);
        assert_eq!(std::mem::size_of::<crate::Value>(), 32);
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
        ] {
            let mut out = Vec::new();
            n(s).to_pg_binary(&mut out);
            let back = Numeric::from_pg_binary(&out).unwrap();
            assert_eq!(back.to_string(), s, "{s}");
        }
    }
}
