//! Go-style durations (`300ms`, `1m30s`, `2h`), as Go's `time.ParseDuration` reads them and
//! `time.Duration.String` writes them, so flags copied from a Stakater deployment mean the same.
//!
//! Only non-negative durations are representable: a negative one is an error.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Go's limit: a `time.Duration` is an `int64` count of nanoseconds.
const MAX_NANOS: u128 = i64::MAX as u128;

const NANOS_PER_SECOND: u128 = 1_000_000_000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("invalid duration {0:?}")]
    Invalid(String),
    #[error("missing unit in duration {0:?}")]
    MissingUnit(String),
    #[error("unknown unit {unit:?} in duration {text:?} (expected ns, us, µs, ms, s, m or h)")]
    UnknownUnit { unit: String, text: String },
    #[error("negative duration {0:?}")]
    Negative(String),
    #[error("duration {0:?} is too large")]
    TooLarge(String),
}

/// Nanoseconds per unit, for every unit Go accepts (both spellings of the micro sign included).
fn unit_nanos(unit: &str) -> Option<u128> {
    Some(match unit {
        "ns" => 1,
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => NANOS_PER_SECOND,
        "m" => 60 * NANOS_PER_SECOND,
        "h" => 3_600 * NANOS_PER_SECOND,
        _ => return None,
    })
}

/// Parses `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+` (or a bare `0`) like Go's `time.ParseDuration`.
pub fn parse_go_duration(text: &str) -> Result<Duration, DurationError> {
    let invalid = || DurationError::Invalid(text.to_owned());
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid());
    }

    let mut total: u128 = 0;
    while !rest.is_empty() {
        let integer_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (integer, after_integer) = rest.split_at(integer_len);
        let (fraction, after_number) = match after_integer.strip_prefix('.') {
            Some(after_dot) => after_dot.split_at(after_dot.bytes().take_while(u8::is_ascii_digit).count()),
            None => ("", after_integer),
        };
        if integer.is_empty() && fraction.is_empty() {
            return Err(invalid());
        }
        let unit_len =
            after_number.find(|c: char| c == '.' || c.is_ascii_digit()).unwrap_or(after_number.len());
        if unit_len == 0 {
            return Err(DurationError::MissingUnit(text.to_owned()));
        }
        let (unit, after_unit) = after_number.split_at(unit_len);
        let per_unit = unit_nanos(unit)
            .ok_or_else(|| DurationError::UnknownUnit { unit: unit.to_owned(), text: text.to_owned() })?;

        let too_large = || DurationError::TooLarge(text.to_owned());
        // Integer digits beyond u128 are far past Go's limit anyway.
        let whole: u128 = if integer.is_empty() { 0 } else { integer.parse().map_err(|_| too_large())? };
        total = whole
            .checked_mul(per_unit)
            .and_then(|n| n.checked_add(fraction_nanos(fraction, per_unit)))
            .and_then(|n| n.checked_add(total))
            .filter(|&n| n <= MAX_NANOS)
            .ok_or_else(too_large)?;
        rest = after_unit;
    }

    if negative && total > 0 {
        return Err(DurationError::Negative(text.to_owned()));
    }
    Ok(nanos_to_duration(total))
}

/// The pause-period annotation read as Stakater reads it: Go's `time.ParseDuration` on the text
/// as it is, so surrounding spaces make it invalid. `Ok(None)` for a zero period, which pauses
/// nothing. The one parser for every reader: the reload write, the resume timer, the annotation
/// check and explain (docs/compatibility.md §8).
pub fn parse_pause_period(value: &str) -> Result<Option<Duration>, DurationError> {
    parse_go_duration(value).map(|period| Some(period).filter(|p| !p.is_zero()))
}

/// `0.<fraction>` of `per_unit` nanoseconds, truncated like Go (digits past nanosecond
/// precision of the largest unit cannot matter, so at most 18 are read).
fn fraction_nanos(fraction: &str, per_unit: u128) -> u128 {
    let digits = &fraction[..fraction.len().min(18)];
    if digits.is_empty() {
        return 0;
    }
    let numerator: u128 = digits.parse().unwrap_or(0);
    numerator * per_unit / 10u128.pow(digits.len() as u32)
}

fn nanos_to_duration(nanos: u128) -> Duration {
    // Always fits: nanos <= i64::MAX.
    Duration::new((nanos / NANOS_PER_SECOND) as u64, (nanos % NANOS_PER_SECOND) as u32)
}

/// Writes `duration` the way Go's `time.Duration.String` does: `0s`, `1.5µs`, `300ms`,
/// `1m30s`, `2h0m0s`.
pub(crate) fn format_go_duration(duration: Duration) -> String {
    GoDuration(duration).to_string()
}

/// A [`Duration`] that parses and prints in Go's syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub(crate) struct GoDuration(pub Duration);

impl FromStr for GoDuration {
    type Err = DurationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_go_duration(s).map(GoDuration)
    }
}

impl From<GoDuration> for Duration {
    fn from(value: GoDuration) -> Self {
        value.0
    }
}

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos();
        if nanos == 0 {
            return f.write_str("0s");
        }
        if nanos < NANOS_PER_SECOND {
            let (scale, unit) = match nanos {
                0..1_000 => (1, "ns"),
                1_000..1_000_000 => (1_000, "\u{b5}s"),
                _ => (1_000_000, "ms"),
            };
            write_decimal(f, nanos, scale)?;
            return f.write_str(unit);
        }
        let total_seconds = nanos / NANOS_PER_SECOND;
        let (hours, minutes) = (total_seconds / 3_600, total_seconds / 60 % 60);
        if hours > 0 {
            write!(f, "{hours}h{minutes}m")?;
        } else if minutes > 0 {
            write!(f, "{minutes}m")?;
        }
        write_decimal(f, nanos % (60 * NANOS_PER_SECOND), NANOS_PER_SECOND)?;
        f.write_str("s")
    }
}

/// Writes `value / scale` with the fraction's trailing zeros (and a bare `.`) left out.
fn write_decimal(f: &mut fmt::Formatter<'_>, value: u128, scale: u128) -> fmt::Result {
    write!(f, "{}", value / scale)?;
    let fraction = value % scale;
    if fraction == 0 {
        return Ok(());
    }
    let width = scale.ilog10() as usize;
    let digits = format!("{fraction:0width$}");
    write!(f, ".{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod props;
#[cfg(test)]
mod tests {
    use super::*;

    const fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Texts Go's `time.ParseDuration` accepts and what they mean (also the seeds of the
    /// property tests in `props`).
    pub(super) const PARSED: &[(&str, Duration)] = &[
        ("0", Duration::ZERO),
        ("+0", Duration::ZERO),
        ("-0", Duration::ZERO),
        ("0s", Duration::ZERO),
        ("-0s", Duration::ZERO),
        ("300ms", ms(300)),
        ("1.5h", Duration::from_secs(5_400)),
        ("1m30s", Duration::from_secs(90)),
        ("2h", Duration::from_secs(7_200)),
        ("+5s", Duration::from_secs(5)),
        ("15s", Duration::from_secs(15)),
        ("1h2m3s4ms5us6ns", Duration::new(3_723, 4_005_006)),
        ("10ns", Duration::from_nanos(10)),
        ("7us", Duration::from_micros(7)),
        ("7\u{b5}s", Duration::from_micros(7)),
        ("7\u{3bc}s", Duration::from_micros(7)),
        (".5s", ms(500)),
        ("5.s", Duration::from_secs(5)),
        ("1.0000000001s", Duration::new(1, 0)),
        ("0.333333333333333333333h", Duration::new(1_199, 999_999_999)),
        ("2562047h47m16.854775807s", Duration::new(9_223_372_036, 854_775_807)),
    ];

    #[test]
    fn parses_what_go_parses() {
        for (text, expected) in PARSED {
            assert_eq!(parse_go_duration(text).as_ref(), Ok(expected), "{text}");
        }
    }

    #[test]
    fn rejects_what_go_rejects_and_negatives() {
        let cases: &[(&str, DurationError)] = &[
            ("", DurationError::Invalid("".into())),
            ("-", DurationError::Invalid("-".into())),
            ("s", DurationError::Invalid("s".into())),
            (".s", DurationError::Invalid(".s".into())),
            ("1", DurationError::MissingUnit("1".into())),
            ("1s2", DurationError::MissingUnit("1s2".into())),
            ("5x", DurationError::UnknownUnit { unit: "x".into(), text: "5x".into() }),
            ("1d", DurationError::UnknownUnit { unit: "d".into(), text: "1d".into() }),
            (" 1s", DurationError::Invalid(" 1s".into())),
            ("1 s", DurationError::UnknownUnit { unit: " s".into(), text: "1 s".into() }),
            ("-1s", DurationError::Negative("-1s".into())),
            ("2562047h47m16.854775808s", DurationError::TooLarge("2562047h47m16.854775808s".into())),
            ("9999999999999999999999h", DurationError::TooLarge("9999999999999999999999h".into())),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_go_duration(text).as_ref(), Err(expected), "{text}");
        }
    }

    #[test]
    fn formats_like_go() {
        let cases: &[(Duration, &str)] = &[
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(1), "1ns"),
            (Duration::from_nanos(1_100), "1.1\u{b5}s"),
            (ms(300), "300ms"),
            (Duration::from_micros(2_200), "2.2ms"),
            (ms(1_500), "1.5s"),
            (Duration::from_secs(15), "15s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(7_200), "2h0m0s"),
            (Duration::new(3_723, 4_005_006), "1h2m3.004005006s"),
            (Duration::from_secs(100 * 3_600), "100h0m0s"),
        ];
        for (duration, expected) in cases {
            assert_eq!(format_go_duration(*duration), *expected, "{duration:?}");
            assert_eq!(parse_go_duration(expected), Ok(*duration), "round trip of {expected}");
        }
    }

    #[test]
    fn pause_periods_are_read_as_stakater_reads_them() {
        let cases: &[(&str, Result<Option<Duration>, ()>)] = &[
            ("5m", Ok(Some(Duration::from_secs(300)))),
            ("1m30s", Ok(Some(Duration::from_secs(90)))),
            ("0s", Ok(None)),
            ("0", Ok(None)),
            // Go's time.ParseDuration trims nothing: Stakater fails to pause on these.
            (" 5m", Err(())),
            ("5m ", Err(())),
            ("soon", Err(())),
            ("", Err(())),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_pause_period(text).map_err(|_| ()), *expected, "{text:?}");
        }
    }

    #[test]
    fn error_names_the_text() {
        let message = parse_go_duration("5x").unwrap_err().to_string();
        assert!(message.contains("\"5x\"") && message.contains("\"x\""), "{message}");
    }
}
