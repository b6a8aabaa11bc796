//! Entries of the explicit reload lists (`configmap.reloader.stakater.com/reload: "a,b,app-.*"`).
//!
//! Every entry is matched as the regular expression `^entry$` (docs/compatibility.md §3). Most entries are
//! plain names, for which that is plain equality: those never touch the regex engine and the
//! index can file them under the name itself. The rest are patterns, compiled on demand.

use regex::Regex;

use crate::annotations::split_list;

/// One trimmed, non-empty entry of an explicit list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExplicitEntry<'a> {
    /// No regex metacharacter: `^entry$` matches exactly this name and nothing else.
    Name(&'a str),
    /// Anything else, matched as `^entry$` (which may fail to compile).
    Pattern(&'a str),
}

/// Characters that are special outside a character class in the `regex` crate's default
/// syntax. `#`, whitespace, `&`, `-` and `~` only matter in verbose mode or inside a class,
/// both of which need one of these to be switched on, so an entry without any is literal.
const METACHARACTERS: &[char] = &['\\', '.', '+', '*', '?', '(', ')', '|', '[', ']', '{', '}', '^', '$'];

impl<'a> ExplicitEntry<'a> {
    pub(crate) fn parse(entry: &'a str) -> Self {
        if entry.contains(METACHARACTERS) {
            ExplicitEntry::Pattern(entry)
        } else {
            ExplicitEntry::Name(entry)
        }
    }

    pub(crate) fn as_str(&self) -> &'a str {
        match *self {
            ExplicitEntry::Name(s) | ExplicitEntry::Pattern(s) => s,
        }
    }

    /// Does the entry select `name`? An entry that is not a valid regex selects nothing.
    pub(crate) fn matches(&self, name: &str) -> bool {
        match *self {
            ExplicitEntry::Name(entry) => entry == name,
            ExplicitEntry::Pattern(entry) => compile(entry).is_ok_and(|re| re.is_match(name)),
        }
    }
}

/// The entries of a comma-separated explicit list, trimmed, empty ones dropped.
pub(crate) fn explicit_entries(list: &str) -> impl Iterator<Item = ExplicitEntry<'_>> {
    split_list(list).map(ExplicitEntry::parse)
}

/// Does any entry of `list` select `name`? Invalid entries are skipped, the others still apply.
pub(crate) fn list_matches(list: &str, name: &str) -> bool {
    explicit_entries(list).any(|entry| entry.matches(name))
}

/// Compiles an entry exactly as Stakater does: `^` + entry + `$`, without a group around the
/// entry, so `a|b` means "starts with a, or ends with b" there and here alike.
pub(crate) fn compile(entry: &str) -> Result<Regex, regex::Error> {
    Regex::new(&format!("^{entry}$"))
}

/// The one-line reason a regex failed to compile (the crate's message spans several lines,
/// drawing a caret under the offending character).
pub(crate) fn short_regex_error(error: &regex::Error) -> String {
    let message = error.to_string();
    match message.lines().find_map(|line| line.trim().strip_prefix("error:")) {
        Some(reason) => reason.trim().to_owned(),
        None => message.split_whitespace().collect::<Vec<_>>().join(" "),
    }
}

#[cfg(test)]
mod props;
#[cfg(test)]
mod tests {
    use super::*;

    /// An entry, whether it is a plain name, and names it selects or not (also the seeds of the
    /// property tests).
    #[derive(Debug, Clone)]
    pub(super) struct Case {
        pub(super) entry: &'static str,
        pub(super) plain: bool,
        pub(super) matching: &'static [&'static str],
        pub(super) not_matching: &'static [&'static str],
    }

    pub(super) const CASES: &[Case] = &[
        Case { entry: "my-cm", plain: true, matching: &["my-cm"], not_matching: &["my-cm-2", "xmy-cm"] },
        Case { entry: "under_score", plain: true, matching: &["under_score"], not_matching: &["under"] },
        Case {
            entry: "app-config-.*",
            plain: false,
            matching: &["app-config-1", "app-config-"],
            not_matching: &["other-config", "xapp-config-1"],
        },
        // A dot is a wildcard: `app.conf` is a pattern, exactly as in Stakater.
        Case { entry: "app.conf", plain: false, matching: &["app.conf", "app-conf"], not_matching: &["app"] },
        // No group around the entry: the alternation binds looser than the anchors.
        Case { entry: "a|b", plain: false, matching: &["a", "b", "a-x", "x-b"], not_matching: &["x-a"] },
        Case { entry: "[", plain: false, matching: &[], not_matching: &["[", ""] },
    ];

    #[test]
    fn entries_are_classified_and_matched() {
        for case in CASES {
            let entry = ExplicitEntry::parse(case.entry);
            assert_eq!(matches!(entry, ExplicitEntry::Name(_)), case.plain, "{}", case.entry);
            assert_eq!(entry.as_str(), case.entry);
            for name in case.matching {
                assert!(entry.matches(name), "{} should match {name}", case.entry);
            }
            for name in case.not_matching {
                assert!(!entry.matches(name), "{} should not match {name}", case.entry);
            }
        }
    }

    #[test]
    fn lists_are_trimmed_and_invalid_entries_skipped() {
        let entries: Vec<_> = explicit_entries(" a , ,b.*,, [ ").collect();
        assert_eq!(
            entries,
            [ExplicitEntry::Name("a"), ExplicitEntry::Pattern("b.*"), ExplicitEntry::Pattern("[")]
        );
        assert!(list_matches("[, my-cm", "my-cm"));
        assert!(list_matches("(, app-.*", "app-1"));
        assert!(!list_matches("[", "["));
        assert!(!list_matches("", ""));
    }

    #[test]
    fn regex_errors_fit_on_one_line() {
        let error = compile("a[").unwrap_err();
        let short = short_regex_error(&error);
        assert_eq!(short, "unclosed character class");
    }
}
