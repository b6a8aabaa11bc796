use std::collections::BTreeMap;

use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Selector texts and their canonical form (also the seeds of the property tests).
pub(super) const CANONICAL: &[(&str, &str)] = &[
    ("", ""),
    ("   ", ""),
    ("env=prod", "env=prod"),
    ("env==prod", "env=prod"),
    ("env = prod", "env=prod"),
    ("env!=prod", "env!=prod"),
    ("env", "env"),
    ("!env", "!env"),
    ("! env", "!env"),
    ("env in (b,a)", "env in (a,b)"),
    ("env in ( a , b )", "env in (a,b)"),
    ("env notin (a)", "env notin (a)"),
    ("env in ()", "env in ()"),
    ("env=", "env="),
    ("env!=", "env!="),
    ("tier=in", "tier=in"),
    ("tier in (in,notin)", "tier in (in,notin)"),
    ("b=1,a=2", "a=2,b=1"),
    ("app.kubernetes.io/name=web", "app.kubernetes.io/name=web"),
    // Stakater's legacy forms.
    ("env:prod", "env=prod"),
    ("example.com/team:ops", "example.com/team=ops"),
    ("env:*", "env"),
    ("env=*", "env"),
    ("env==*", "env"),
    ("team:*,env:prod,!legacy", "env=prod,!legacy,team"),
];

#[test]
fn canonical_forms() {
    for &(input, canonical) in CANONICAL {
        let selector = LabelSelector::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!(selector.to_string(), canonical, "{input}");
        // The canonical form parses to the same selector.
        assert_eq!(LabelSelector::parse(canonical).as_ref(), Ok(&selector), "{canonical}");
    }
}

#[test]
fn invalid_selectors_name_the_problem() {
    let cases = [
        ("env=prod,", "expected a label key"),
        (",env", "expected a label key"),
        ("env prod", "expected an operator after \"env\""),
        ("env=prod team=ops", "expected \",\" or the end, found \"team\""),
        ("env in (a", "expected \",\" or \")\", found the end"),
        ("env in a", "expected \"(\", found \"a\""),
        ("env in (a,)", "expected a label value, found \")\""),
        ("env>1", "operator \">\" is not supported"),
        ("Bad_Key-=x", "\"Bad_Key-\" is not a valid label key"),
        ("-env", "\"-env\" is not a valid label key"),
        ("a/b/c=x", "\"a/b/c\" is not a valid label key"),
        ("env=bad value", "expected \",\" or the end, found \"value\""),
        ("env=-prod", "\"-prod\" is not a valid label value"),
        ("env in (ok,no*)", "\"no*\" is not a valid label value"),
        ("env!=*", "\"*\" is only accepted as env=* or env:*"),
        ("!", "expected a label key, found the end"),
        ("=x", "expected a label key or \"!\", found \"=\""),
    ];
    for (input, problem) in cases {
        let error = LabelSelector::parse(input).expect_err(input);
        assert_eq!(error.selector, input);
        assert!(error.problem.contains(problem), "{input}: {}", error.problem);
        assert!(error.to_string().contains(&format!("{input:?}")), "{error}");
    }
    let long_value = format!("env={}", "v".repeat(64));
    assert!(LabelSelector::parse(&long_value).is_err());
}

#[test]
fn matching() {
    let web = labels(&[("app", "web"), ("env", "prod")]);
    let bare = labels(&[]);
    let cases = [
        ("", true, true),
        ("app=web", true, false),
        ("app!=web", false, true),
        ("app!=db", true, true),
        ("app in (db,web)", true, false),
        ("app notin (db,web)", false, true),
        ("app notin (db)", true, true),
        ("app", true, false),
        ("!app", false, true),
        ("app:*", true, false),
        ("app=web,env=prod", true, false),
        ("app=web,env=dev", false, false),
        ("app=web,!missing", true, false),
    ];
    for (input, on_web, on_bare) in cases {
        let selector = LabelSelector::parse(input).unwrap();
        assert_eq!(selector.matches(&web), on_web, "{input} on web");
        assert_eq!(selector.matches(&bare), on_bare, "{input} on no labels");
    }
}

#[test]
fn entries_combine_with_and() {
    // A comma-separated flag value is split before it reaches us: `in (a,b)` arrives in pieces.
    let selector = LabelSelector::from_entries(["env in (a", "b)", " team:ops ", ""]).unwrap();
    assert_eq!(selector.to_string(), "env in (a,b),team=ops");
    assert!(selector.matches(&labels(&[("env", "b"), ("team", "ops")])));
    assert!(!selector.matches(&labels(&[("env", "b")])));
    assert!(LabelSelector::from_entries([]).unwrap().is_empty());

    let error = LabelSelector::from_entries(["a=1", "b c"]).unwrap_err();
    assert_eq!(error.selector, "a=1,b c");
}
