//! hack/diff-stakater.expected: the differences from Stakater that are deliberate (each explained
//! in docs/migration.md). One per line: `<pattern> | <why>`, where the pattern is matched against
//! `<scenario> <key>` of a difference and `*` stands for any text. `#` starts a comment line.

use regex::Regex;

/// One expected difference.
#[derive(Debug)]
pub struct Expected {
    pub pattern: String,
    pub why: String,
    matcher: Regex,
}

impl Expected {
    pub fn matches(&self, subject: &str) -> bool {
        self.matcher.is_match(subject)
    }
}

/// Parses the file; a line without ` | <why>` is an error (every expected difference says why).
pub fn parse(text: &str) -> Result<Vec<Expected>, String> {
    text.lines()
        .enumerate()
        .map(|(number, line)| (number + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
        .map(|(number, line)| {
            let (pattern, why) = line
                .split_once(" | ")
                .ok_or_else(|| format!("line {number}: `<pattern> | <why>` expected, got {line:?}"))?;
            let anchored =
                format!("^{}$", pattern.trim().split('*').map(regex::escape).collect::<Vec<_>>().join(".*"));
            let matcher = Regex::new(&anchored).map_err(|error| format!("line {number}: {error}"))?;
            Ok(Expected { pattern: pattern.trim().to_owned(), why: why.trim().to_owned(), matcher })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_whole_subjects_with_wildcards() {
        let expected = parse("# comment\n\nalert-* metric go_* | Go runtime series\n").unwrap();
        assert_eq!(expected.len(), 1);
        assert!(expected[0].matches("alert-raw metric go_goroutines"));
        assert!(!expected[0].matches("webhook-mode metric go_goroutines"));
        assert!(!expected[0].matches("alert-raw metric process_open_fds"));
        assert_eq!(expected[0].why, "Go runtime series");
    }

    #[test]
    fn a_line_without_a_reason_is_refused() {
        assert!(parse("* metric go_*\n").unwrap_err().contains("line 1"));
    }
}
