//! Kubernetes label selectors with Stakater's legacy rewrites.
//!
//! Accepts apimachinery's syntax (`k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`,
//! `!k`, requirements joined by `,`) plus the forms Stakater's flags took: `k:v` for `k=v`, and
//! `k:*` / `k=*` for "the key exists". Keys and values are validated as the API server does, and
//! [`Display`](fmt::Display) writes the canonical form for a `labelSelector=` query.

mod names;
mod parse;
#[cfg(test)]
mod props;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

pub(crate) use names::{check_dns_label, check_dns_subdomain, check_qualified_name};

/// A conjunction of requirements; the empty selector selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    /// Sorted by key (stable), as apimachinery orders them.
    requirements: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Requirement {
    key: String,
    operator: Operator,
    /// One value for `Equals`/`NotEquals`, at least one for `In`/`NotIn`, none otherwise.
    values: BTreeSet<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Operator {
    Equals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// A selector that does not parse, with the text and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid label selector {selector:?}: {problem}")]
pub struct SelectorError {
    pub(crate) selector: String,
    pub(crate) problem: String,
}

impl LabelSelector {
    pub(crate) fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut requirements = parse::parse_requirements(text)
            .map_err(|problem| SelectorError { selector: text.to_owned(), problem })?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements })
    }

    /// Parses several flag entries as one selector: every requirement must hold. Entries are
    /// joined with `,` before parsing, so `in (a,b)` split across entries by a comma-separated
    /// flag value still reads as one requirement.
    pub(crate) fn from_entries<'a>(
        entries: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, SelectorError> {
        let joined: Vec<&str> = entries.into_iter().map(str::trim).filter(|e| !e.is_empty()).collect();
        Self::parse(&joined.join(","))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|requirement| requirement.matches(labels))
    }
}

impl Requirement {
    fn new(key: String, operator: Operator, values: BTreeSet<String>) -> Self {
        Requirement { key, operator, values }
    }

    pub(crate) fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::Equals | Operator::In => value.is_some_and(|v| self.values.contains(v)),
            Operator::NotEquals | Operator::NotIn => !value.is_some_and(|v| self.values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

impl FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, requirement) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = &self.key;
        let values = || self.values.iter().map(String::as_str).collect::<Vec<_>>().join(",");
        match self.operator {
            Operator::Exists => write!(f, "{key}"),
            Operator::DoesNotExist => write!(f, "!{key}"),
            Operator::Equals => write!(f, "{key}={}", values()),
            Operator::NotEquals => write!(f, "{key}!={}", values()),
            Operator::In => write!(f, "{key} in ({})", values()),
            Operator::NotIn => write!(f, "{key} notin ({})", values()),
        }
    }
}
