//! Resource quantities with Kubernetes `resource.Quantity` semantics, computed exactly.
//!
//! A quantity is held as an `i128` count of thousandths, so `100m` CPU and `128Mi` of memory are
//! both exact and sums never drift. No floating point is used: a float arriving from YAML is
//! converted through its shortest decimal text, so `cpu: 0.1` is exactly `100m`.
//!
//! The quantity also remembers which notation it was written in (binary SI, decimal SI or
//! decimal exponent) so that it prints back the way Kubernetes would (`1.5Gi` prints as
//! `1536Mi`, `1e3` as `1e3`, `1000` as `1k`). The notation never takes part in comparisons:
//! `1Gi == 1024Mi` and `1 == 1000m`.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::iter::Sum;
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::str::FromStr;

use serde::de::{self, Visitor};
use serde::{Deserialize, Serialize};

/// An exact resource quantity (`100m`, `0.5`, `2`, `128Mi`, `1G`, `1e3`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Quantity {
    /// Value in thousandths (milli-units), rounded up where the input is finer.
    milli: i128,
    format: Format,
}

/// The notation a quantity prints in; it follows the suffix the quantity was parsed from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Format {
    /// Powers of 1024: `Ki`, `Mi`, `Gi`, `Ti`, `Pi`, `Ei`.
    BinarySI,
    /// Powers of 1000: `m`, (none), `k`, `M`, `G`, `T`, `P`, `E`.
    #[default]
    DecimalSI,
    /// `e` followed by a power of ten that is a multiple of 3: `1e3`, `500e-3`.
    DecimalExponent,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("quantity {input:?} is invalid: {why}")]
pub struct QuantityError {
    pub input: String,
    pub why: String,
}

const BINARY_SUFFIXES: [(&str, u32); 6] = [
    ("Ki", 10),
    ("Mi", 20),
    ("Gi", 30),
    ("Ti", 40),
    ("Pi", 50),
    ("Ei", 60),
];

const DECIMAL_SUFFIXES: [(&str, i64); 9] = [
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
];

const SUPPORTED_SUFFIXES: &str =
    "expected no suffix, one of Ki Mi Gi Ti Pi Ei, n u m k M G T P E, \
                                  or an exponent such as e3";

/// 2^60 (the largest binary multiplier) is below 10^19, so a digit string of length `n` times
/// any binary multiplier stays below 10^(n + 19).
const BINARY_HEADROOM_DIGITS: usize = 19;

impl Quantity {
    pub fn parse(input: &str) -> Result<Quantity, QuantityError> {
        let fail = |why: String| QuantityError {
            input: input.to_string(),
            why,
        };
        if input.is_empty() {
            return Err(fail("must not be empty".into()));
        }
        let bytes = input.as_bytes();
        let mut pos = 0;
        let negative = match bytes[0] {
            b'-' => {
                pos = 1;
                true
            }
            b'+' => {
                pos = 1;
                false
            }
            _ => false,
        };
        let int_start = pos;
        while pos < bytes.len() && bytes[pos].is_ascii_digit() {
            pos += 1;
        }
        let int_digits = &input[int_start..pos];
        let mut frac_digits = "";
        if pos < bytes.len() && bytes[pos] == b'.' {
            pos += 1;
            let frac_start = pos;
            while pos < bytes.len() && bytes[pos].is_ascii_digit() {
                pos += 1;
            }
            frac_digits = &input[frac_start..pos];
        }
        if int_digits.is_empty() && frac_digits.is_empty() {
            return Err(fail("expected a number such as 1, 0.5 or 100m".into()));
        }
        let suffix = &input[pos..];
        let (format, binary_shift, exponent) = parse_suffix(suffix).map_err(fail)?;

        // The value is digits × 10^scale × 2^binary_shift, and we want it in thousandths. An
        // i128 scale cannot overflow for any exponent and digit count an i64 and usize allow.
        let mut scale = i128::from(exponent) - frac_digits.len() as i128 + 3;
        let mut digits = String::with_capacity(int_digits.len() + frac_digits.len());
        digits.push_str(int_digits.trim_start_matches('0'));
        if digits.is_empty() {
            digits.push_str(frac_digits.trim_start_matches('0'));
        } else {
            digits.push_str(frac_digits);
        }
        // Trailing zeros only move the scale; dropping them keeps `1.000…0` from overflowing.
        let significant = digits.trim_end_matches('0').len();
        let dropped = digits.len() - significant;
        digits.truncate(significant);
        if digits.is_empty() {
            return Ok(Quantity { milli: 0, format });
        }
        scale += dropped as i128;

        let magnitude = scaled_ceil(&digits, scale, binary_shift)
            .ok_or_else(|| fail("the value is too large".into()))?;
        // Negative values reach one further than positive ones, so i128::MIN prints and
        // parses back like any other quantity.
        let milli = if negative {
            0i128.checked_sub_unsigned(magnitude)
        } else {
            i128::try_from(magnitude).ok()
        };
        let milli = milli.ok_or_else(|| fail("the value is too large".into()))?;
        Ok(Quantity { milli, format })
    }

    /// A decimal-SI quantity of `milli` thousandths.
    pub fn from_milli(milli: i128) -> Quantity {
        Quantity {
            milli,
            format: Format::DecimalSI,
        }
    }

    /// A decimal-SI quantity of whole units, saturating at the representable range.
    pub fn from_value(units: i128) -> Quantity {
        Quantity::from_milli(units.saturating_mul(1000))
    }

    pub fn zero() -> Quantity {
        Quantity::default()
    }

    pub fn milli_value(&self) -> i128 {
        self.milli
    }

    /// Whole units, rounded up (bytes for memory, cores for cpu).
    ///
    /// As in Kubernetes, rounding is away from zero, so `-1.5` gives `-2`.
    pub fn value(&self) -> i128 {
        let units = self.milli.unsigned_abs().div_ceil(1000);
        // |i128::MIN| / 1000 always fits back into an i128.
        let units = units as i128;
        if self.milli < 0 {
            -units
        } else {
            units
        }
    }

    pub fn is_zero(&self) -> bool {
        self.milli == 0
    }

    pub fn is_negative(&self) -> bool {
        self.milli < 0
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// The same value, printed in `format` where the value allows it.
    pub fn with_format(self, format: Format) -> Quantity {
        Quantity { format, ..self }
    }

    pub fn checked_add(self, other: Quantity) -> Option<Quantity> {
        let milli = self.milli.checked_add(other.milli)?;
        Some(Quantity {
            milli,
            format: self.sum_format(&other),
        })
    }

    pub fn checked_sub(self, other: Quantity) -> Option<Quantity> {
        let milli = self.milli.checked_sub(other.milli)?;
        Some(Quantity {
            milli,
            format: self.sum_format(&other),
        })
    }

    pub fn saturating_add(self, other: Quantity) -> Quantity {
        Quantity {
            milli: self.milli.saturating_add(other.milli),
            format: self.sum_format(&other),
        }
    }

    pub fn saturating_sub(self, other: Quantity) -> Quantity {
        Quantity {
            milli: self.milli.saturating_sub(other.milli),
            format: self.sum_format(&other),
        }
    }

    /// `self × factor` (e.g. a pod's request times its replica count).
    pub fn checked_mul(self, factor: i128) -> Option<Quantity> {
        Some(Quantity {
            milli: self.milli.checked_mul(factor)?,
            format: self.format,
        })
    }

    /// Kubernetes keeps the left operand's notation, unless it is zero: that way a running total
    /// started from `zero()` prints memory in `Mi` rather than in plain bytes.
    fn sum_format(&self, other: &Quantity) -> Format {
        if self.milli == 0 {
            other.format
        } else {
            self.format
        }
    }
}

/// Splits a suffix into (format, power of two, power of ten).
fn parse_suffix(suffix: &str) -> Result<(Format, u32, i64), String> {
    if suffix.is_empty() {
        return Ok((Format::DecimalSI, 0, 0));
    }
    if let Some((_, shift)) = BINARY_SUFFIXES.iter().find(|(s, _)| *s == suffix) {
        return Ok((Format::BinarySI, *shift, 0));
    }
    if let Some((_, exp)) = DECIMAL_SUFFIXES.iter().find(|(s, _)| *s == suffix) {
        return Ok((Format::DecimalSI, 0, *exp));
    }
    // `E` alone is exa (handled above); `E` or `e` followed by digits is an exponent.
    if let Some(rest) = suffix.strip_prefix(['e', 'E']) {
        let digits = rest.strip_prefix(['+', '-']).unwrap_or(rest);
        if digits.is_empty() {
            return Err(format!("exponent {suffix:?} needs digits, as in 1e3"));
        }
        if !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("unknown suffix {suffix:?}: {SUPPORTED_SUFFIXES}"));
        }
        let exp: i64 = rest
            .parse()
            .map_err(|_| format!("exponent {suffix:?} is out of range"))?;
        return Ok((Format::DecimalExponent, 0, exp));
    }
    Err(format!("unknown suffix {suffix:?}: {SUPPORTED_SUFFIXES}"))
}

/// ceil(digits × 10^scale × 2^shift), or None on overflow. `digits` is a non-empty decimal
/// string without leading zeros; rounding is upward in magnitude, as Kubernetes does.
fn scaled_ceil(digits: &str, scale: i128, shift: u32) -> Option<u128> {
    let binary = 1u128 << shift;
    if scale >= 0 {
        let power = 10u128.checked_pow(u32::try_from(scale).ok()?)?;
        return parse_u128(digits)?.checked_mul(power)?.checked_mul(binary);
    }
    let k = usize::try_from(scale.unsigned_abs()).unwrap_or(usize::MAX);
    if k >= digits.len().saturating_add(BINARY_HEADROOM_DIGITS) {
        // A non-zero value strictly between 0 and one thousandth rounds up to one.
        return Some(1);
    }
    let (whole, fraction) = if digits.len() > k {
        digits.split_at(digits.len() - k)
    } else {
        ("", digits)
    };
    let whole = if whole.is_empty() {
        0
    } else {
        parse_u128(whole)?
    };
    // The fraction is 0.[zeros]digits with k places; doubling it `shift` times moves the bits
    // that cross the decimal point into `carried`, leaving an exact remainder.
    let mut places = vec![0u8; k - fraction.len()];
    places.extend(fraction.bytes().map(|b| b - b'0'));
    let mut carried: u128 = 0;
    for _ in 0..shift {
        let mut carry = 0;
        for d in places.iter_mut().rev() {
            let doubled = *d * 2 + carry;
            *d = doubled % 10;
            carry = doubled / 10;
        }
        carried = carried * 2 + u128::from(carry);
    }
    let round_up = u128::from(places.iter().any(|&d| d != 0));
    whole
        .checked_mul(binary)?
        .checked_add(carried)?
        .checked_add(round_up)
}

fn parse_u128(digits: &str) -> Option<u128> {
    digits.bytes().try_fold(0u128, |acc, b| {
        acc.checked_mul(10)?.checked_add(u128::from(b - b'0'))
    })
}

impl FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quantity::parse(s)
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.milli == other.milli
    }
}

impl Eq for Quantity {}

impl Hash for Quantity {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.milli.hash(state);
    }
}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.milli.cmp(&other.milli)
    }
}

/// Saturates rather than panicking: quantities come from user input.
impl Add for Quantity {
    type Output = Quantity;
    fn add(self, other: Quantity) -> Quantity {
        self.saturating_add(other)
    }
}

/// Saturates rather than panicking: quantities come from user input.
impl Sub for Quantity {
    type Output = Quantity;
    fn sub(self, other: Quantity) -> Quantity {
        self.saturating_sub(other)
    }
}

impl AddAssign for Quantity {
    fn add_assign(&mut self, other: Quantity) {
        *self = *self + other;
    }
}

impl SubAssign for Quantity {
    fn sub_assign(&mut self, other: Quantity) {
        *self = *self - other;
    }
}

impl Sum for Quantity {
    fn sum<I: Iterator<Item = Quantity>>(iter: I) -> Quantity {
        iter.fold(Quantity::zero(), Add::add)
    }
}

impl<'a> Sum<&'a Quantity> for Quantity {
    fn sum<I: Iterator<Item = &'a Quantity>>(iter: I) -> Quantity {
        iter.copied().sum()
    }
}

impl fmt::Display for Quantity {
    // `is_multiple_of` needs Rust 1.87; the workspace declares rust-version 1.85.
    #[allow(clippy::manual_is_multiple_of)]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.milli == 0 {
            return f.write_str("0");
        }
        let sign = if self.milli < 0 { "-" } else { "" };
        let magnitude = self.milli.unsigned_abs();

        // Binary notation only for whole amounts of at least 1Ki: anything else would either
        // lose precision or print as a bare number anyway.
        if self.format == Format::BinarySI && magnitude % 1000 == 0 && magnitude / 1000 >= 1024 {
            let mut units = magnitude / 1000;
            let mut power = 0;
            while power < BINARY_SUFFIXES.len() && units % 1024 == 0 {
                units /= 1024;
                power += 1;
            }
            let suffix = if power == 0 {
                ""
            } else {
                BINARY_SUFFIXES[power - 1].0
            };
            return write!(f, "{sign}{units}{suffix}");
        }

        // Strip powers of ten into the exponent, then back off to a multiple of three. The
        // mantissa never grows beyond the original magnitude, so this cannot overflow.
        let mut mantissa = magnitude;
        let mut exponent: i64 = -3;
        while mantissa % 10 == 0 {
            mantissa /= 10;
            exponent += 1;
        }
        while exponent % 3 != 0 {
            mantissa *= 10;
            exponent -= 1;
        }
        if self.format == Format::DecimalExponent {
            return if exponent == 0 {
                write!(f, "{sign}{mantissa}")
            } else {
                write!(f, "{sign}{mantissa}e{exponent}")
            };
        }
        let largest = DECIMAL_SUFFIXES[DECIMAL_SUFFIXES.len() - 1];
        if exponent > largest.1 {
            // Past exa there is no suffix; a longer mantissa keeps decimal-SI notation.
            let mut mantissa = mantissa;
            for _ in largest.1..exponent {
                mantissa *= 10;
            }
            return write!(f, "{sign}{mantissa}{}", largest.0);
        }
        let suffix = DECIMAL_SUFFIXES
            .iter()
            .find(|(_, e)| *e == exponent)
            .map_or("", |(s, _)| s);
        write!(f, "{sign}{mantissa}{suffix}")
    }
}

impl Serialize for Quantity {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// In OpenAPI a quantity is what clients write: a string such as `100m` or `128Mi`.
#[cfg(feature = "openapi")]
impl schemars::JsonSchema for Quantity {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Quantity".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A fixed-point amount with an optional suffix: a decimal SI one (m, k, M, G, T, P, E) or a binary one (Ki, Mi, Gi, Ti, Pi, Ei), e.g. `100m` CPU or `128Mi` memory.",
        })
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(QuantityVisitor)
    }
}

struct QuantityVisitor;

impl QuantityVisitor {
    fn text<E: de::Error>(text: &str) -> Result<Quantity, E> {
        Quantity::parse(text).map_err(E::custom)
    }
}

impl Visitor<'_> for QuantityVisitor {
    type Value = Quantity;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a quantity such as \"100m\", \"128Mi\" or a number")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Quantity, E> {
        Self::text(v)
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Quantity, E> {
        match std::str::from_utf8(v) {
            Ok(text) => Self::text(text),
            Err(_) => Err(E::invalid_value(de::Unexpected::Bytes(v), &self)),
        }
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Quantity, E> {
        Ok(Quantity::from_value(i128::from(v)))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Quantity, E> {
        Ok(Quantity::from_value(i128::from(v)))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Quantity, E> {
        Self::text(&v.to_string())
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Quantity, E> {
        Self::text(&v.to_string())
    }

    // `{}` prints the shortest text that reads back as the same float, which is what the
    // author wrote: 0.1 becomes "0.1", not 0.1000000000000000055….
    fn visit_f32<E: de::Error>(self, v: f32) -> Result<Quantity, E> {
        Self::text(&v.to_string())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Quantity, E> {
        Self::text(&v.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn parses_values() {
        let cases: &[(&str, i128)] = &[
            ("100m", 100),
            ("0.5", 500),
            ("2", 2000),
            ("128Mi", 128 * 1024 * 1024 * 1000),
            ("1G", 1_000_000_000_000),
            ("1e3", 1_000_000),
            ("1E3", 1_000_000),
            ("12E-3", 12),
            ("1e+3", 1_000_000),
            ("1.5Gi", 1536 * 1024 * 1024 * 1000),
            ("500M", 500_000_000_000),
            ("0.1", 100),
            ("-1", -1000),
            ("+1", 1000),
            ("1Ki", 1_024_000),
            ("1k", 1_000_000),
            ("1E", 1_000_000_000_000_000_000_000),
            ("1Ei", (1i128 << 60) * 1000),
            ("1.", 1000),
            (".5", 500),
            ("0", 0),
            ("-0", 0),
            ("000", 0),
            ("0.000", 0),
            ("0e99999", 0),
            ("007", 7000),
            ("1.000000000000000000000000000000000000000000000000", 1000),
            ("1.5m", 2),
            ("1500u", 2),
            ("1000000n", 1),
            ("1n", 1),
            ("1u", 1),
            ("0.0001", 1),
            ("-1n", -1),
            ("1e-999999999", 1),
            ("0.0001Ki", 103),
            ("0.001Ki", 1024),
            ("0.5Ki", 512_000),
            ("1.1Ki", 1_126_400),
            ("1.0000000001Ki", 1_024_001),
        ];
        for (input, milli) in cases {
            assert_eq!(q(input).milli_value(), *milli, "{input}");
        }
    }

    #[test]
    fn rejects_malformed() {
        for input in [
            "",
            "1.2.3",
            "Mi",
            "1 Mi",
            " 1",
            "1 ",
            "1mi",
            "1e",
            "1e+",
            "1E-",
            "abc",
            ".",
            "-",
            "+",
            "-.",
            "1K",
            "1KI",
            "1Kib",
            "1ee3",
            "1e3Mi",
            "1Mi3",
            "1.5e3.1",
            "--1",
            "1e99999999999999999999999",
            "1e1.5",
            "0x10",
            "١",
        ] {
            let err = Quantity::parse(input).expect_err(input);
            assert_eq!(err.input, input);
            assert!(err.to_string().contains(&format!("{input:?}")), "{err}");
        }
    }

    #[test]
    fn error_messages_are_specific() {
        let why = |s: &str| Quantity::parse(s).unwrap_err().why;
        assert_eq!(why(""), "must not be empty");
        assert!(why("Mi").contains("expected a number"));
        assert!(why("1mi").contains("unknown suffix \"mi\""));
        assert!(why("1e").contains("needs digits"));
        assert!(why("1e40").contains("too large"));
    }

    #[test]
    fn overflow_is_an_error_not_a_panic() {
        for input in [
            "1e36",
            "1e40",
            "999999999999999999999999999999999999999999999",
            "170141183460469231731687303715884105728",
            "1e9223372036854775807",
            "200000000000000000000Ei",
            "-1e40",
            "99999999999999999999999999999999999999999999999999.5",
            "170141183460469231731687303715884105728m",
            "-170141183460469231731687303715884105729m",
        ] {
            let err = Quantity::parse(input).expect_err(input);
            assert!(err.why.contains("too large"), "{input}: {err}");
        }
        // The extremes of the representable range still parse.
        assert_eq!(q("1e35").milli_value(), 10i128.pow(38));
        let max_units = i128::MAX / 1000;
        assert_eq!(q(&max_units.to_string()).value(), max_units);
        assert!(Quantity::parse(&format!("{}", max_units + 1)).is_err());
        assert_eq!(
            q("170141183460469231731687303715884105727m").milli_value(),
            i128::MAX
        );
        assert_eq!(
            q("-170141183460469231731687303715884105728m").milli_value(),
            i128::MIN
        );
        assert_eq!(q("1e-9223372036854775808").milli_value(), 1);
        assert_eq!(q("-1e-9223372036854775808").milli_value(), -1);
        assert_eq!(q("1.5e-9223372036854775808").milli_value(), 1);
        assert_eq!(q("0.0e9223372036854775807").milli_value(), 0);
    }

    #[test]
    fn canonical_display() {
        let cases = [
            ("1000m", "1"),
            ("1024Ki", "1Mi"),
            ("1536Mi", "1536Mi"),
            ("0.5", "500m"),
            ("1e3", "1e3"),
            ("1000", "1k"),
            ("100m", "100m"),
            ("1.5Gi", "1536Mi"),
            ("0", "0"),
            ("0Mi", "0"),
            ("0e3", "0"),
            ("1500", "1500"),
            ("1.5k", "1500"),
            ("2", "2"),
            ("128Mi", "128Mi"),
            ("1G", "1G"),
            ("500M", "500M"),
            ("0.1", "100m"),
            ("-1", "-1"),
            ("-0.5", "-500m"),
            ("-1Ki", "-1Ki"),
            ("1Ki", "1Ki"),
            ("1u", "1m"),
            ("1n", "1m"),
            ("0.5Ki", "512"),
            ("1.5Ki", "1536"),
            ("1025Ki", "1025Ki"),
            ("0.0001Ki", "103m"),
            ("1.0001Ki", "1024103m"),
            ("1024Ei", "1024Ei"),
            ("1Ti", "1Ti"),
            ("1048576Gi", "1Pi"),
            ("5e-1", "500e-3"),
            ("1.5e3", "1500"),
            ("12E-3", "12e-3"),
            ("1e6", "1e6"),
            ("100e1", "1e3"),
            ("1E", "1E"),
            ("1000E", "1000E"),
            ("1e21", "1e21"),
            ("1000000000000000000000", "1000E"),
            ("12k", "12k"),
            ("12000m", "12"),
            ("1200m", "1200m"),
            ("1.2", "1200m"),
            ("10M", "10M"),
            ("0.010", "10m"),
        ];
        for (input, shown) in cases {
            assert_eq!(q(input).to_string(), shown, "{input}");
        }
    }

    #[test]
    fn display_round_trips() {
        let mut inputs: Vec<String> = [
            "0",
            "1",
            "-1",
            "100m",
            "0.5",
            "2",
            "128Mi",
            "1G",
            "1e3",
            "1.5Gi",
            "500M",
            "0.1",
            "1Ki",
            "1n",
            "1u",
            "12E-3",
            "1E",
            "1Ei",
            "1023",
            "1025",
            "0.5Ki",
            "1.0001Ki",
            "999m",
            "1e-3",
            "7e21",
            "-12e-3",
            "123456789123456789",
            "3.14159",
            "1024Ei",
            "1e30",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        inputs.push((i128::MAX / 1000).to_string());
        inputs.push(format!("-{}", i128::MAX / 1000));
        for input in &inputs {
            let parsed = q(input);
            let shown = parsed.to_string();
            let again = q(&shown);
            assert_eq!(again, parsed, "{input} -> {shown}");
            assert_eq!(
                again.to_string(),
                shown,
                "display of {input} must be stable"
            );
        }
        for milli in [
            i128::MAX,
            i128::MIN + 1,
            i128::MIN,
            1,
            -1,
            999,
            1001,
            1_000_000_001,
        ] {
            let quantity = Quantity::from_milli(milli);
            assert_eq!(q(&quantity.to_string()), quantity, "{milli}");
            let binary = quantity.with_format(Format::BinarySI);
            assert_eq!(q(&binary.to_string()), quantity, "{milli} binary");
            let exponent = quantity.with_format(Format::DecimalExponent);
            assert_eq!(q(&exponent.to_string()), quantity, "{milli} exponent");
        }
    }

    #[test]
    fn value_rounds_up() {
        assert_eq!(q("100m").value(), 1);
        assert_eq!(q("1").value(), 1);
        assert_eq!(q("1001m").value(), 2);
        assert_eq!(q("0").value(), 0);
        assert_eq!(q("128Mi").value(), 128 * 1024 * 1024);
        assert_eq!(q("-1500m").value(), -2);
        assert_eq!(
            Quantity::from_milli(i128::MIN).value(),
            i128::MIN / 1000 - 1
        );
    }

    #[test]
    fn compares_by_value_not_notation() {
        use std::collections::HashSet;
        assert_eq!(q("1Gi"), q("1024Mi"));
        assert_eq!(q("1"), q("1000m"));
        assert_eq!(q("1e3"), q("1k"));
        assert!(q("1Gi") > q("1G"));
        assert!(q("100m") < q("0.2"));
        let set: HashSet<Quantity> = [q("1Gi"), q("1024Mi"), q("1073741824")].into();
        assert_eq!(set.len(), 1);
        assert_eq!(q("1Gi").format(), Format::BinarySI);
        assert_eq!(q("1e3").format(), Format::DecimalExponent);
        assert_eq!(q("1G").format(), Format::DecimalSI);
        assert_eq!(Quantity::default(), Quantity::zero());
    }

    #[test]
    fn arithmetic() {
        let total: Quantity = [q("128Mi"), q("128Mi")].iter().sum();
        assert_eq!(total.to_string(), "256Mi");
        assert_eq!((q("100m") + q("900m")).to_string(), "1");
        assert_eq!((q("1") - q("1500m")).to_string(), "-500m");
        let mut free = q("4");
        free -= q("250m");
        free += q("50m");
        assert_eq!(free, q("3800m"));
        assert_eq!(Quantity::zero() + q("1Gi"), q("1Gi"));
        assert_eq!((Quantity::zero() + q("1Gi")).to_string(), "1Gi");
        assert_eq!((q("1") + q("1Ki")).to_string(), "1025");
        assert_eq!(q("1").checked_add(q("2")), Some(q("3")));
        assert_eq!(Quantity::from_milli(i128::MAX).checked_add(q("1m")), None);
        assert_eq!(Quantity::from_milli(i128::MIN).checked_sub(q("1m")), None);
        assert_eq!(
            Quantity::from_milli(i128::MAX) + q("1"),
            Quantity::from_milli(i128::MAX)
        );
        assert_eq!(
            Quantity::from_milli(i128::MIN) - q("1"),
            Quantity::from_milli(i128::MIN)
        );
        assert_eq!(q("100m").saturating_sub(q("1")), q("-900m"));
        assert_eq!(q("250m").checked_mul(4), Some(q("1")));
        assert_eq!(Quantity::from_milli(i128::MAX).checked_mul(2), None);
        assert!(Quantity::zero().is_zero());
        assert!(!q("1m").is_zero());
        assert!(q("-1m").is_negative());
        assert_eq!(Quantity::from_value(3), q("3"));
        assert_eq!(
            Quantity::from_value(i128::MAX),
            Quantity::from_milli(i128::MAX)
        );
        assert_eq!(Quantity::from_milli(1500).to_string(), "1500m");
        assert_eq!("2Gi".parse::<Quantity>(), Ok(q("2Gi")));
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Resources {
        cpu: Quantity,
        memory: Quantity,
    }

    #[test]
    fn serde_json() {
        let r: Resources = serde_json::from_str(r#"{"cpu": 0.5, "memory": "128Mi"}"#).unwrap();
        assert_eq!(
            r,
            Resources {
                cpu: q("500m"),
                memory: q("128Mi")
            }
        );
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"cpu":"500m","memory":"128Mi"}"#
        );
        let r: Resources = serde_json::from_str(r#"{"cpu": 2, "memory": 1024}"#).unwrap();
        assert_eq!(
            r,
            Resources {
                cpu: q("2"),
                memory: q("1Ki")
            }
        );
        let r: Resources = serde_json::from_str(r#"{"cpu": 0.1, "memory": -3}"#).unwrap();
        assert_eq!(r.cpu.milli_value(), 100);
        assert_eq!(r.memory, q("-3"));
        let err = serde_json::from_str::<Resources>(r#"{"cpu": "1mi", "memory": "1"}"#)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("quantity \"1mi\" is invalid: unknown suffix"),
            "{err}"
        );
        let err = serde_json::from_str::<Resources>(r#"{"cpu": true, "memory": "1"}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("a quantity"), "{err}");
        let err = serde_json::from_str::<Resources>(r#"{"cpu": 1e300, "memory": "1"}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("too large"), "{err}");
    }

    #[test]
    fn yaml() {
        let r: Resources = serde_norway::from_str("cpu: 0.1\nmemory: 1.5Gi\n").unwrap();
        assert_eq!(
            r,
            Resources {
                cpu: q("100m"),
                memory: q("1536Mi")
            }
        );
        let r: Resources = serde_norway::from_str("cpu: 2\nmemory: \"512M\"\n").unwrap();
        assert_eq!(
            r,
            Resources {
                cpu: q("2"),
                memory: q("512M")
            }
        );
        let r: Resources = serde_norway::from_str("cpu: 100m\nmemory: 1e3\n").unwrap();
        assert_eq!(
            r,
            Resources {
                cpu: q("100m"),
                memory: q("1k")
            }
        );
        assert_eq!(
            serde_norway::to_string(&r).unwrap(),
            "cpu: 100m\nmemory: 1k\n"
        );
        let err = serde_norway::from_str::<Resources>("cpu: 1 Mi\nmemory: 1\n").unwrap_err();
        assert!(
            err.to_string().contains("quantity \"1 Mi\" is invalid"),
            "{err}"
        );
        let err = serde_norway::from_str::<Resources>("cpu: .nan\nmemory: 1\n").unwrap_err();
        assert!(err.to_string().contains("\"NaN\" is invalid"), "{err}");
    }

    #[test]
    fn serde_msgpack() {
        let r = Resources {
            cpu: q("250m"),
            memory: q("1Gi"),
        };
        let bytes = rmp_serde::to_vec_named(&r).unwrap();
        let back: Resources = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.memory.to_string(), "1Gi");

        #[derive(Serialize)]
        struct Numbers {
            cpu: f32,
            memory: u64,
        }
        let bytes = rmp_serde::to_vec_named(&Numbers {
            cpu: 0.1,
            memory: 300,
        })
        .unwrap();
        let back: Resources = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(
            back,
            Resources {
                cpu: q("100m"),
                memory: q("300")
            }
        );
    }
}
