//! Property tests of the Go duration parser and printer: no panic on any text, print → parse
//! round trips, a model of the grammar built from parts, and the hand-written table's rows
//! combined. `PROPTEST_CASES` sets the number of cases (256 by default; `hack/fuzz-props` runs a
//! million).

use proptest::prelude::*;

use super::tests::PARSED;
use super::*;

/// Every unit spelling and its length in nanoseconds, written out again here rather than read
/// from the parser, so the model does not share the table it checks.
const UNITS: &[(&str, u128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),
    ("\u{3bc}s", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// One `<integer>.<fraction><unit>` part; either number half may be missing.
#[derive(Debug, Clone)]
struct Part {
    integer: Option<u64>,
    fraction: Option<String>,
    unit: (&'static str, u128),
}

impl Part {
    fn text(&self) -> String {
        let integer = self.integer.map(|n| n.to_string()).unwrap_or_default();
        let fraction = self.fraction.as_ref().map(|f| format!(".{f}")).unwrap_or_default();
        format!("{integer}{fraction}{}", self.unit.0)
    }

    /// Go's grammar needs a digit on one side of the dot.
    fn is_valid(&self) -> bool {
        self.integer.is_some() || self.fraction.as_ref().is_some_and(|f| !f.is_empty())
    }

    /// Exact nanoseconds, the fraction truncated (at most 9 digits here, so exact).
    fn nanos(&self) -> u128 {
        let (_, per_unit) = self.unit;
        let whole = u128::from(self.integer.unwrap_or(0)) * per_unit;
        let fraction = match self.fraction.as_deref() {
            None | Some("") => 0,
            Some(digits) => digits.parse::<u128>().unwrap() * per_unit / 10u128.pow(digits.len() as u32),
        };
        whole + fraction
    }
}

fn part() -> impl Strategy<Value = Part> {
    (
        prop::option::weighted(0.9, prop_oneof![0u64..100, 0u64..10_000_000_000]),
        prop::option::weighted(0.3, "[0-9]{0,9}"),
        prop::sample::select(UNITS),
    )
        .prop_map(|(integer, fraction, unit)| Part { integer, fraction, unit })
}

/// One to five parts. Only the first may lack a number: a later one without would glue its unit
/// to the previous one (`5m` + `s` is `5ms`), which is another text than the parts describe.
fn parts() -> impl Strategy<Value = Vec<Part>> {
    // Mapped rather than filtered: a million cases would exceed proptest's budget of rejects.
    let numbered = part().prop_map(|mut p| {
        if p.integer.is_none() && p.fraction.is_none() {
            p.integer = Some(1);
        }
        p
    });
    (part(), prop::collection::vec(numbered, 0..4))
        .prop_map(|(first, rest)| std::iter::once(first).chain(rest).collect())
}

/// What the parser must say about `sign` followed by `parts`, computed from the parts.
fn model(text: &str, sign: &str, parts: &[Part]) -> Result<Duration, DurationError> {
    let mut total: u128 = 0;
    for part in parts {
        if !part.is_valid() {
            return Err(DurationError::Invalid(text.to_owned()));
        }
        total += part.nanos();
        if total > i64::MAX as u128 {
            return Err(DurationError::TooLarge(text.to_owned()));
        }
    }
    if sign == "-" && total > 0 {
        return Err(DurationError::Negative(text.to_owned()));
    }
    Ok(Duration::from_nanos(total as u64))
}

/// The table's rows that can be parts of a longer text: a sign only leads, and a bare `0` is a
/// whole text, not a part.
fn joinable_rows() -> Vec<(&'static str, Duration)> {
    PARSED.iter().copied().filter(|(text, _)| !text.starts_with(['+', '-']) && *text != "0").collect()
}

/// Texts near the grammar: digits, dots, signs, unit letters and a few strangers.
fn near_duration() -> impl Strategy<Value = String> {
    "[-+]?([0-9]{0,22}\\.?[0-9]{0,22}(ns|us|\u{b5}s|\u{3bc}s|ms|s|m|h|d|x|µ| |)){0,6}"
}

proptest! {
    #[test]
    fn never_panics_on_any_text(text in any::<String>()) {
        let _ = parse_go_duration(&text);
        let _ = parse_pause_period(&text);
    }

    #[test]
    fn never_panics_near_the_grammar(text in near_duration()) {
        if let Ok(parsed) = parse_go_duration(&text) {
            // Whatever parses prints back to a text that parses to the same duration.
            prop_assert_eq!(parse_go_duration(&format_go_duration(parsed)), Ok(parsed));
        }
    }

    #[test]
    fn printing_then_parsing_gives_the_same_duration(nanos in 0..=i64::MAX as u64) {
        let duration = Duration::from_nanos(nanos);
        let text = format_go_duration(duration);
        prop_assert_eq!(parse_go_duration(&text), Ok(duration), "{}", text);
        prop_assert_eq!(text.parse::<GoDuration>().map(Duration::from), Ok(duration));
    }

    #[test]
    fn a_text_built_from_parts_means_the_sum_of_its_parts(
        sign in prop::sample::select(&["", "+", "-"][..]),
        parts in parts(),
    ) {
        let text = format!("{sign}{}", parts.iter().map(Part::text).collect::<String>());
        prop_assert_eq!(parse_go_duration(&text), model(&text, sign, &parts), "{}", text);
    }

    /// Two rows of the hand-written table written one after the other mean the sum of the
    /// table's answers (or are too large), as Go adds the parts of `1h30m`.
    #[test]
    fn table_rows_joined_mean_the_sum_of_their_answers(
        first in prop::sample::select(joinable_rows()),
        second in prop::sample::select(joinable_rows()),
    ) {
        let text = format!("{}{}", first.0, second.0);
        let sum = first.1.as_nanos() + second.1.as_nanos();
        let expected = if sum > i64::MAX as u128 {
            Err(DurationError::TooLarge(text.clone()))
        } else {
            Ok(Duration::from_nanos(sum as u64))
        };
        prop_assert_eq!(parse_go_duration(&text), expected, "{}", text);
    }

    #[test]
    fn a_pause_period_is_the_duration_unless_zero(text in near_duration()) {
        let expected = parse_go_duration(&text).map(|d| (!d.is_zero()).then_some(d));
        prop_assert_eq!(parse_pause_period(&text), expected);
    }
}
