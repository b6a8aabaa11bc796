//! Property tests of the explicit reload lists (`configmap.reloader.stakater.com/reload`): no
//! panic on any list or name, the plain-name fast path never disagrees with the regex `^entry$`
//! it stands for, lists match as "any trimmed entry's regex matches", and the hand-written
//! table's entries keep their answers among invalid entries and blanks.

use proptest::prelude::*;
use regex::Regex;

use super::tests::CASES;
use super::*;

/// Stakater's reading, without the fast path: every trimmed, non-empty entry is compiled as
/// `^entry$`; one that does not compile selects nothing.
fn model(list: &str, name: &str) -> bool {
    list.split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .any(|entry| Regex::new(&format!("^{entry}$")).is_ok_and(|re| re.is_match(name)))
}

/// Entries from names, regex pieces, blanks and characters the classification must get right.
fn entry() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9][a-z0-9.-]{0,12}",
        "[a-z0-9_ #&~\u{e9}-]{1,8}",
        "[a-z.*+?|()\\[\\]{}^$\\\\0-9-]{1,10}",
        any::<String>().prop_map(|s| s.replace(',', "")),
    ]
}

fn list() -> impl Strategy<Value = String> {
    prop::collection::vec((entry(), "[ \t]{0,2}", "[ \t]{0,2}"), 0..5).prop_map(|entries| {
        entries.iter().map(|(e, before, after)| format!("{before}{e}{after}")).collect::<Vec<_>>().join(",")
    })
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z0-9][a-z0-9.-]{0,12}", any::<String>()]
}

proptest! {
    #[test]
    fn never_panics_on_any_list_or_name(list in any::<String>(), name in any::<String>()) {
        let _ = ExplicitList::parse(&list).matches(&name);
        for entry in explicit_entries(&list) {
            prop_assert!(!entry.as_str().is_empty() && !entry.as_str().contains(','));
            prop_assert_eq!(entry.as_str(), entry.as_str().trim());
        }
    }

    /// A list selects a name exactly when Stakater's regex reading says so.
    #[test]
    fn lists_match_as_their_regexes_say(list in list(), name in name()) {
        prop_assert_eq!(ExplicitList::parse(&list).matches(&name), model(&list, &name), "{:?} on {:?}", list, name);
    }

    /// The fast path: an entry classified as a plain name compiles, and its regex matches that
    /// name and nothing else, so the index may file it under the name.
    #[test]
    fn a_plain_name_is_a_regex_matching_only_itself(entry in entry(), other in name()) {
        let entry = entry.trim();
        if entry.is_empty() {
            return Ok(()); // Not an entry (rare; no reject, so a million cases stay within proptest's reject budget).
        }
        if let ExplicitEntry::Name(plain) = ExplicitEntry::parse(entry) {
            let regex = compile(plain);
            prop_assert!(regex.is_ok(), "{:?}: {:?}", plain, regex);
            let regex = regex.unwrap();
            prop_assert!(regex.is_match(plain));
            prop_assert_eq!(regex.is_match(&other), other == plain, "{:?} on {:?}", plain, other);
            // One more or one less character is another name.
            let longer = format!("{plain}x");
            let shorter = &plain[..plain.len() - plain.chars().last().map_or(0, char::len_utf8)];
            prop_assert!(!regex.is_match(&longer) && !regex.is_match(shorter), "{:?}", plain);
        }
    }

    /// A table entry put in a list among entries that select nothing (invalid regexes, blanks)
    /// gives the table's answer for each of its names.
    #[test]
    fn table_entries_keep_their_answers_among_noise(
        case in prop::sample::select(CASES),
        noise in prop::collection::vec(prop::sample::select(&["[", "(", " ", "", "a{2,1}", "\t"][..]), 0..4),
        position in any::<prop::sample::Index>(),
    ) {
        let mut entries: Vec<&str> = noise.clone();
        entries.insert(position.index(noise.len() + 1), case.entry);
        let list = entries.join(",");
        for name in case.matching {
            prop_assert!(ExplicitList::parse(&list).matches(name), "{:?} should select {}", list, name);
        }
        for name in case.not_matching {
            prop_assert!(!ExplicitList::parse(&list).matches(name), "{:?} should not select {}", list, name);
        }
        let plain = explicit_entries(&list).any(|e| matches!(e, ExplicitEntry::Name(n) if n == case.entry));
        prop_assert_eq!(plain, case.plain);
    }
}
