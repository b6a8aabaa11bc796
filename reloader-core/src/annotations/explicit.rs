//! Entries of the explicit reload lists (`configmap.reloader.stakater.com/reload: "a,b,app-.*"`).
//!
//! Every entry is matched as the regular expression `^entry$` (docs/compatibility.md §3). Most entries are
//! plain names, for which that is plain equality: those never touch the regex engine and the
//! index can file them under the name itself. The rest are patterns, compiled once into one
//! bounded [`RegexSet`] when the workload's view is built ([`ExplicitList::parse`], called by
//! [`ReloadAnnotations::from_map`](super::ReloadAnnotations)), never while a decision is made,
//! so never under the index lock.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use regex::{RegexBuilder, RegexSet, RegexSetBuilder};

use super::split_list;

/// At most this many pattern entries in one list; a list with more is over the limit.
pub const MAX_LIST_PATTERNS: usize = 1024;
/// The compiled size of one list's patterns together (and of any one entry), in bytes.
pub const PATTERNS_SIZE_LIMIT: usize = 8 << 20;
/// The lazy DFA cache of one list's patterns, in bytes (the `regex` crate's default).
pub const PATTERNS_DFA_SIZE_LIMIT: usize = 2 << 20;

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
}

/// The entries of a comma-separated explicit list, trimmed, empty ones dropped.
pub(crate) fn explicit_entries(list: &str) -> impl Iterator<Item = ExplicitEntry<'_>> {
    split_list(list).map(ExplicitEntry::parse)
}

/// An explicit list as the annotation holds it, with its patterns compiled. One pointer in the
/// view; the patterns are shared by the view's clones. Lists compare by their text alone (the
/// compiled form is a function of it).
#[derive(Clone)]
pub struct ExplicitList(Box<ListParts>);

#[derive(Clone)]
struct ListParts {
    raw: Box<str>,
    /// `None` when the list holds plain names only.
    patterns: Option<Arc<CompiledPatterns>>,
}

/// A list's pattern entries, compiled.
#[derive(Debug)]
pub(crate) struct CompiledPatterns {
    /// The valid patterns; `None` when there are none, or the list is over a limit.
    set: Option<RegexSet>,
    /// Pattern entries that do not compile (each selects nothing), in list order.
    pub(crate) invalid: Vec<InvalidPattern>,
    /// Over a limit: none of the list's patterns selects anything; its plain names still do.
    pub(crate) over_limit: Option<PatternLimit>,
}

/// A pattern entry that is not a valid regular expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InvalidPattern {
    /// Its position among the list's pattern entries.
    ordinal: usize,
    pub(crate) entry: Box<str>,
    pub(crate) reason: String,
}

/// Which bound a list's patterns exceed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatternLimit {
    /// More than [`MAX_LIST_PATTERNS`] pattern entries.
    TooMany { patterns: usize },
    /// Compiled together, bigger than [`PATTERNS_SIZE_LIMIT`].
    TooBig { patterns: usize },
}

impl fmt::Display for PatternLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatternLimit::TooMany { patterns } => {
                write!(f, "{patterns} pattern entries, more than the limit of {MAX_LIST_PATTERNS}")
            }
            PatternLimit::TooBig { patterns } => write!(
                f,
                "{patterns} pattern entries that compile to more than the limit of {} MiB",
                PATTERNS_SIZE_LIMIT >> 20
            ),
        }
    }
}

impl ExplicitList {
    /// Reads a list and compiles its pattern entries, within the limits above.
    pub fn parse(raw: &str) -> Self {
        let patterns: Vec<&str> = explicit_entries(raw)
            .filter_map(|entry| match entry {
                ExplicitEntry::Pattern(pattern) => Some(pattern),
                ExplicitEntry::Name(_) => None,
            })
            .collect();
        let patterns = (!patterns.is_empty()).then(|| Arc::new(CompiledPatterns::compile(&patterns)));
        ExplicitList(Box::new(ListParts { raw: raw.into(), patterns }))
    }

    /// The annotation's value.
    pub fn as_str(&self) -> &str {
        &self.0.raw
    }

    pub(crate) fn patterns(&self) -> Option<&CompiledPatterns> {
        self.0.patterns.as_deref()
    }

    /// Does any entry select `name`? Invalid entries are skipped, the others still apply.
    pub(crate) fn matches(&self, name: &str) -> bool {
        explicit_entries(&self.0.raw).any(|entry| entry == ExplicitEntry::Name(name))
            || self.patterns().and_then(|p| p.set.as_ref()).is_some_and(|set| set.is_match(name))
    }

    /// The first entry, in list order, that selects `name`.
    pub(crate) fn matching_entry(&self, name: &str) -> Option<&str> {
        let selected = self.matching_patterns(name);
        let mut ordinal = 0;
        explicit_entries(&self.0.raw)
            .find(|entry| match entry {
                ExplicitEntry::Name(entry) => *entry == name,
                ExplicitEntry::Pattern(_) => {
                    ordinal += 1;
                    selected.contains(&(ordinal - 1))
                }
            })
            .map(|entry| entry.as_str())
    }

    /// The positions, among the list's pattern entries, of those that select `name`.
    pub(crate) fn matching_patterns(&self, name: &str) -> Vec<usize> {
        let Some(patterns) = self.patterns() else { return Vec::new() };
        let Some(set) = &patterns.set else { return Vec::new() };
        // Set indices skip the invalid entries: map them back to positions in the list.
        let mut invalid = patterns.invalid.iter().map(|i| i.ordinal).peekable();
        let mut positions = Vec::new();
        let mut ordinal = 0;
        let matched = set.matches(name);
        for index in 0..set.len() {
            while invalid.next_if(|&skipped| skipped == ordinal).is_some() {
                ordinal += 1;
            }
            if matched.matched(index) {
                positions.push(ordinal);
            }
            ordinal += 1;
        }
        positions
    }
}

impl CompiledPatterns {
    fn compile(patterns: &[&str]) -> Self {
        let count = patterns.len();
        if count > MAX_LIST_PATTERNS {
            let over_limit = Some(PatternLimit::TooMany { patterns: count });
            return CompiledPatterns { set: None, invalid: Vec::new(), over_limit };
        }
        let anchored: Vec<String> = patterns.iter().map(|p| anchored(p)).collect();
        let (valid, invalid) = match set_builder(&anchored).build() {
            Ok(set) => return CompiledPatterns { set: Some(set), invalid: Vec::new(), over_limit: None },
            // One entry or more is invalid, or the whole is too big: which, each entry says.
            Err(_) => partition(patterns, &anchored),
        };
        let set = match valid.is_empty() {
            true => Ok(None),
            false => set_builder(&valid).build().map(Some),
        };
        match set {
            Ok(set) => CompiledPatterns { set, invalid, over_limit: None },
            Err(_) => {
                let over_limit = Some(PatternLimit::TooBig { patterns: count });
                CompiledPatterns { set: None, invalid, over_limit }
            }
        }
    }
}

/// The entries that compile alone (anchored), and those that do not, with why.
fn partition<'a>(patterns: &[&str], anchored: &'a [String]) -> (Vec<&'a str>, Vec<InvalidPattern>) {
    let mut valid = Vec::new();
    let mut invalid = Vec::new();
    for (ordinal, (pattern, regex)) in patterns.iter().zip(anchored).enumerate() {
        match RegexBuilder::new(regex).size_limit(PATTERNS_SIZE_LIMIT).build() {
            Ok(_) => valid.push(regex.as_str()),
            Err(error) => invalid.push(InvalidPattern {
                ordinal,
                entry: (*pattern).into(),
                reason: short_regex_error(&error),
            }),
        }
    }
    (valid, invalid)
}

fn set_builder<S: AsRef<str>>(patterns: &[S]) -> RegexSetBuilder {
    let mut builder = RegexSetBuilder::new(patterns);
    builder.size_limit(PATTERNS_SIZE_LIMIT).dfa_size_limit(PATTERNS_DFA_SIZE_LIMIT);
    builder
}

/// An entry as Stakater compiles it: `^` + entry + `$`, without a group around the entry, so
/// `a|b` means "starts with a, or ends with b" there and here alike.
fn anchored(entry: &str) -> String {
    format!("^{entry}$")
}

/// Compiles one entry exactly as Stakater does (see [`anchored`]).
#[cfg(test)]
pub(crate) fn compile(entry: &str) -> Result<regex::Regex, regex::Error> {
    regex::Regex::new(&anchored(entry))
}

impl Deref for ExplicitList {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for ExplicitList {
    fn eq(&self, other: &Self) -> bool {
        self.0.raw == other.0.raw
    }
}

impl Eq for ExplicitList {}

impl fmt::Debug for ExplicitList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0.raw, f)
    }
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
            let list = ExplicitList::parse(case.entry);
            for name in case.matching {
                assert!(list.matches(name), "{} should match {name}", case.entry);
                assert_eq!(list.matching_entry(name), Some(case.entry));
            }
            for name in case.not_matching {
                assert!(!list.matches(name), "{} should not match {name}", case.entry);
                assert_eq!(list.matching_entry(name), None);
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
        let matches = |list: &str, name: &str| ExplicitList::parse(list).matches(name);
        assert!(matches("[, my-cm", "my-cm"));
        assert!(matches("(, app-.*", "app-1"));
        assert!(!matches("[", "["));
        assert!(!matches("", ""));
    }

    /// How a list is compiled: which entries are invalid, whether it is over a limit, and which
    /// pattern positions select a name.
    #[test]
    fn lists_are_compiled_once_within_limits() {
        struct ListCase {
            name: &'static str,
            list: String,
            invalid: &'static [&'static str],
            over_limit: Option<PatternLimit>,
            /// A name, the pattern positions selecting it, and the entry `matching_entry` names.
            selects: &'static [(&'static str, &'static [usize], Option<&'static str>)],
        }
        let many = |n: usize| (0..n).map(|i| format!("app-{i}-.*")).collect::<Vec<_>>().join(",");
        let cases = [
            ListCase {
                name: "plain names compile nothing",
                list: "a, b".into(),
                invalid: &[],
                over_limit: None,
                selects: &[("a", &[], Some("a")), ("c", &[], None)],
            },
            ListCase {
                name: "invalid entries keep their positions, the others apply",
                list: "x, [, app-.*, (, .*-db".into(),
                invalid: &["[", "("],
                over_limit: None,
                selects: &[
                    ("app-db", &[1, 3], Some("app-.*")),
                    ("x", &[], Some("x")),
                    ("web-db", &[3], Some(".*-db")),
                    ("[", &[], None),
                ],
            },
            ListCase {
                name: "only invalid patterns",
                list: "[, a".into(),
                invalid: &["["],
                over_limit: None,
                selects: &[("a", &[], Some("a"))],
            },
            ListCase {
                name: "the limit itself is fine",
                list: many(MAX_LIST_PATTERNS),
                invalid: &[],
                over_limit: None,
                selects: &[("app-1023-x", &[1023], Some("app-1023-.*")), ("app-1024-x", &[], None)],
            },
            ListCase {
                name: "one pattern too many: no pattern selects, plain names still do",
                list: format!("{},plain", many(MAX_LIST_PATTERNS + 1)),
                invalid: &[],
                over_limit: Some(PatternLimit::TooMany { patterns: MAX_LIST_PATTERNS + 1 }),
                selects: &[("app-1-x", &[], None), ("plain", &[], Some("plain"))],
            },
            ListCase {
                name: "patterns compiling too big together: no pattern selects",
                list: format!("{},plain", ["\\w{50}\\d{50}[a-z]{100}"; 40].join(",")),
                invalid: &[],
                over_limit: Some(PatternLimit::TooBig { patterns: 40 }),
                selects: &[("plain", &[], Some("plain"))],
            },
            ListCase {
                name: "one entry too big alone is invalid, the others apply",
                list: "a{1000}{1000}, app-.*".into(),
                invalid: &["a{1000}{1000}"],
                over_limit: None,
                selects: &[("app-1", &[1], Some("app-.*"))],
            },
        ];
        for case in cases {
            let list = ExplicitList::parse(&case.list);
            assert_eq!(list.as_str(), case.list, "{}", case.name);
            let compiled = list.patterns();
            let invalid: Vec<&str> = compiled.iter().flat_map(|p| &p.invalid).map(|i| &*i.entry).collect();
            assert_eq!(invalid, case.invalid, "{}", case.name);
            assert_eq!(compiled.and_then(|p| p.over_limit), case.over_limit, "{}", case.name);
            for (name, positions, entry) in case.selects {
                assert_eq!(list.matching_patterns(name), *positions, "{}: {name}", case.name);
                assert_eq!(list.matching_entry(name), *entry, "{}: {name}", case.name);
                assert_eq!(list.matches(name), entry.is_some(), "{}: {name}", case.name);
            }
        }
    }

    /// A list costs a view one pointer, as the raw string did not (it took two): views with no
    /// patterns do not grow (docs/benchmark.md, M1).
    #[test]
    fn a_list_is_one_pointer() {
        assert_eq!(size_of::<Option<ExplicitList>>(), size_of::<usize>());
    }

    #[test]
    fn regex_errors_fit_on_one_line() {
        let error = compile("a[").unwrap_err();
        let short = short_regex_error(&error);
        assert_eq!(short, "unclosed character class");
    }
}
