//! Property tests of the label-selector parser: no panic on any text, selectors generated from
//! requirements (in every spelling the parser accepts) parse and match as a model of those
//! requirements says, the canonical form round-trips, and the hand-written table's rows
//! combine as conjunctions.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::tests::CANONICAL;
use super::*;

/// A few keys and values so that generated labels and requirements meet often.
const KEYS: &[&str] = &["app", "env", "tier", "example.com/team", "a.b-c/d_e.f"];
const VALUES: &[&str] = &["", "web", "prod", "in", "notin", "x1", "A.b_c-9"];

fn key() -> impl Strategy<Value = String> {
    let generated = "([a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?(\\.[a-z0-9]{1,4}){0,2}/)?[A-Za-z0-9]([A-Za-z0-9_.-]{0,12}[A-Za-z0-9])?"
        // The keywords are operators, not keys, in apimachinery's grammar too.
        .prop_filter("not a keyword", |k| k != "in" && k != "notin");
    prop_oneof![prop::sample::select(KEYS).prop_map(str::to_owned), generated]
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(VALUES).prop_map(str::to_owned),
        "[A-Za-z0-9]([A-Za-z0-9_.-]{0,12}[A-Za-z0-9])?",
    ]
}

/// One requirement with the spelling it is written in.
#[derive(Debug, Clone)]
enum Generated {
    /// `=`, `==` or the legacy `:`.
    Equals(String, String, &'static str),
    NotEquals(String, String),
    /// No values stands for `()`, the set holding the empty value.
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    /// `k`, `k:*`, `k=*` or `k==*`.
    Exists(String, &'static str),
    DoesNotExist(String),
}

fn values() -> impl Strategy<Value = Vec<String>> {
    prop_oneof![1 => Just(Vec::new()), 4 => prop::collection::vec(value().prop_map(|v| if v.is_empty() { "x".into() } else { v }), 1..4)]
}

fn requirement() -> impl Strategy<Value = Generated> {
    prop_oneof![
        (key(), value(), prop::sample::select(&["=", "==", ":"][..]))
            .prop_map(|(k, v, op)| Generated::Equals(k, v, op)),
        (key(), value()).prop_map(|(k, v)| Generated::NotEquals(k, v)),
        (key(), values()).prop_map(|(k, v)| Generated::In(k, v)),
        (key(), values()).prop_map(|(k, v)| Generated::NotIn(k, v)),
        (key(), prop::sample::select(&["", ":*", "=*", "==*"][..]))
            .prop_map(|(k, s)| Generated::Exists(k, s)),
        key().prop_map(Generated::DoesNotExist),
    ]
}

impl Generated {
    /// The text, with `space` (zero to two blanks) wherever the grammar allows it.
    fn text(&self, space: &str) -> String {
        let list = |values: &[String]| values.join(&format!("{space},{space}"));
        match self {
            Generated::Equals(k, v, op) => format!("{k}{space}{op}{space}{v}"),
            Generated::NotEquals(k, v) => format!("{k}{space}!={space}{v}"),
            Generated::In(k, v) => format!("{k} in {space}({space}{}{space})", list(v)),
            Generated::NotIn(k, v) => format!("{k} notin {space}({space}{}{space})", list(v)),
            Generated::Exists(k, suffix) => format!("{k}{suffix}"),
            Generated::DoesNotExist(k) => format!("!{space}{k}"),
        }
    }

    /// What the requirement means, worked out from its parts.
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let in_set = |k: &String, values: &[String]| match labels.get(k) {
            Some(value) if values.is_empty() => value.is_empty(),
            Some(value) => values.contains(value),
            None => false,
        };
        match self {
            Generated::Equals(k, v, _) => labels.get(k) == Some(v),
            Generated::NotEquals(k, v) => labels.get(k) != Some(v),
            Generated::In(k, values) => in_set(k, values),
            Generated::NotIn(k, values) => !in_set(k, values),
            Generated::Exists(k, _) => labels.contains_key(k),
            Generated::DoesNotExist(k) => !labels.contains_key(k),
        }
    }
}

fn labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(prop::sample::select(KEYS).prop_map(str::to_owned), value(), 0..5)
}

/// The table's rows that select something (an empty one joined with `,` leaves a dangling comma).
fn non_empty_rows() -> Vec<(&'static str, &'static str)> {
    CANONICAL.iter().copied().filter(|(_, canonical)| !canonical.is_empty()).collect()
}

/// Pieces of the grammar and of what is not in it, in any order.
fn token_soup() -> impl Strategy<Value = String> {
    let tokens = &[
        "app",
        "example.com/x",
        "in",
        "notin",
        "=",
        "==",
        "!=",
        "!",
        ":",
        "*",
        "(",
        ")",
        ",",
        " ",
        "<",
        ">",
        "-x",
        "x-",
        "\u{e9}",
        "a/b/c",
        "\t",
        "()",
        ",,",
    ][..];
    prop::collection::vec(prop::sample::select(tokens), 0..12).prop_map(|t| t.concat())
}

proptest! {
    #[test]
    fn never_panics_on_any_text(text in any::<String>()) {
        let _ = LabelSelector::parse(&text);
        let _ = LabelSelector::from_entries(text.split(','));
    }

    #[test]
    fn never_panics_on_token_soup(text in token_soup()) {
        if let Ok(selector) = LabelSelector::parse(&text) {
            // Whatever parses has a canonical form that parses back to it.
            prop_assert_eq!(LabelSelector::parse(&selector.to_string()), Ok(selector));
        }
    }

    #[test]
    fn generated_selectors_parse_and_match_as_their_requirements_say(
        requirements in prop::collection::vec(requirement(), 0..5),
        space in prop::sample::select(&["", " ", "  "][..]),
        label_sets in prop::collection::vec(labels(), 1..6),
    ) {
        let text = requirements.iter().map(|r| r.text(space)).collect::<Vec<_>>().join(&format!("{space},{space}"));
        let selector = LabelSelector::parse(&text);
        prop_assert!(selector.is_ok(), "{:?}: {:?}", text, selector);
        let selector = selector.unwrap();
        for labels in &label_sets {
            let expected = requirements.iter().all(|r| r.matches(labels));
            prop_assert_eq!(selector.matches(labels), expected, "{} on {:?}", text, labels);
        }
        // The canonical form parses to the same selector and is its own canonical form.
        let canonical = selector.to_string();
        let reparsed = LabelSelector::parse(&canonical);
        prop_assert_eq!(reparsed.as_ref(), Ok(&selector), "{}", canonical);
        prop_assert_eq!(reparsed.unwrap().to_string(), canonical);
        // A comma-separated flag value split into entries reads as the whole.
        prop_assert_eq!(LabelSelector::from_entries(text.split(',')), Ok(selector));
    }

    /// Two rows of the hand-written table joined with `,` are the conjunction of the table's
    /// answers: the requirements of both, ordered by key (stable), the first row's first.
    #[test]
    fn table_rows_joined_are_the_conjunction_of_their_answers(
        first in prop::sample::select(non_empty_rows()),
        second in prop::sample::select(non_empty_rows()),
    ) {
        let joined = LabelSelector::parse(&format!("{},{}", first.0, second.0));
        let canonical = |text: &str| LabelSelector::parse(text).unwrap().requirements;
        let mut requirements = canonical(first.1);
        requirements.extend(canonical(second.1));
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        prop_assert_eq!(joined, Ok(LabelSelector { requirements }));
    }
}
