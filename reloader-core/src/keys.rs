//! Key filters (docs/beyond-stakater.md §10): a workload that reads only some keys of a
//! ConfigMap/Secret reloads only when those keys change.
//!
//! The opt-in annotations `reloader.stakater.com/configmap-keys` and
//! `reloader.stakater.com/secret-keys` hold either
//!
//! - `referenced`: every resource of that type the pod spec uses only key by key
//!   (`configMapKeyRef`/`secretKeyRef`, volume or projected `items`) is filtered to those keys;
//!   a resource also used whole (`envFrom`, a volume without `items`) is not filtered; or
//! - a list of entries separated by `;`, each `<resource name>=<pattern>,<pattern>,...`. A
//!   pattern is an exact key or a glob (`*`: any run of characters, `?`: one character).
//!   Resources not named keep the whole-object hash.
//!
//! The three separators cannot occur in resource names or keys, so the syntax is unambiguous.
//! Empty entries (`a=x;;b=y`, a trailing `;`) and empty patterns are skipped, like empty entries
//! of Stakater's lists; a value with no entry, an entry without a name or patterns, and a
//! character no key can hold are errors: the whole object is hashed and an `InvalidAnnotation`
//! Event says why.
//!
//! The marker of a filtered reference is [`filtered_hash`]: SHA-1 over the sorted hex digests of
//! the selected keys, joined by `;`, each digest the SHA-1 of the entry Stakater's hash reads for
//! that key (`k=v`, `k=<base64>` for `binaryData`, `k=<decoded bytes>` for Secrets). The index
//! keeps those per-key digests ([`KeyDigests`]), never values, so it can hash any selection
//! without the data; for an object of more than [`MAX_KEY_DIGESTS`](crate::model::MAX_KEY_DIGESTS) keys it keeps none, and a
//! filter hashes that object whole ([`resource_selection`]). The same hash goes into env-var and annotation markers.

use std::collections::BTreeMap;
use std::fmt;

use crate::model::{ContentHash, KeyDigests, KeyUse, ResourceKind};
use crate::views::{ResourceView, WorkloadView};

/// The value that filters every resource to the keys the pod spec references one by one.
pub const REFERENCED: &str = "referenced";

/// One pattern of a filter entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyPattern {
    Exact(Box<str>),
    Glob(Box<str>),
}

impl KeyPattern {
    fn parse(s: &str) -> Result<Self, String> {
        if let Some(c) = s.chars().find(|c| !is_key_char(*c) && *c != '*' && *c != '?') {
            return Err(format!("pattern {s:?}: {c:?} cannot occur in a key"));
        }
        Ok(if s.contains(['*', '?']) { KeyPattern::Glob(s.into()) } else { KeyPattern::Exact(s.into()) })
    }

    pub fn matches(&self, key: &str) -> bool {
        match self {
            KeyPattern::Exact(exact) => **exact == *key,
            KeyPattern::Glob(glob) => glob_matches(glob.as_bytes(), key.as_bytes()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            KeyPattern::Exact(s) | KeyPattern::Glob(s) => s,
        }
    }
}

/// Characters of a ConfigMap/Secret key (`[-._a-zA-Z0-9]+`).
fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// Characters of a resource name (a DNS subdomain).
fn is_name_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.')
}

/// `*` matches any run of bytes, `?` one byte (keys are ASCII); iterative with one backtrack
/// point, so no pattern is exponential.
fn glob_matches(pattern: &[u8], key: &[u8]) -> bool {
    let (mut p, mut k) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while k < key.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, k));
                p += 1;
            }
            Some(&c) if c == b'?' || c == key[k] => {
                p += 1;
                k += 1;
            }
            _ => match star {
                Some((sp, sk)) => {
                    p = sp + 1;
                    k = sk + 1;
                    star = Some((sp, sk + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// A parsed key-filter annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyFilter {
    /// `referenced`.
    Referenced,
    /// Resource name → its patterns.
    Lists(BTreeMap<Box<str>, Vec<KeyPattern>>),
}

/// Why a key-filter annotation is invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyFilterError(pub String);

impl fmt::Display for KeyFilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Parses an annotation value (see the module docs for the syntax).
pub fn parse_key_filter(value: &str) -> Result<KeyFilter, KeyFilterError> {
    let value = value.trim();
    if value == REFERENCED {
        return Ok(KeyFilter::Referenced);
    }
    let mut lists: BTreeMap<Box<str>, Vec<KeyPattern>> = BTreeMap::new();
    for entry in value.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((name, patterns)) = entry.split_once('=') else {
            return Err(KeyFilterError(format!("entry {entry:?} is not <name>=<keys>")));
        };
        let name = name.trim();
        if name.is_empty() || !name.chars().all(is_name_char) {
            return Err(KeyFilterError(format!("entry {entry:?}: {name:?} is not a resource name")));
        }
        let parsed = patterns
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(KeyPattern::parse)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| KeyFilterError(format!("entry {entry:?}: {e}")))?;
        if parsed.is_empty() {
            return Err(KeyFilterError(format!("entry {entry:?} names no key")));
        }
        lists.entry(name.into()).or_default().extend(parsed);
    }
    if lists.is_empty() {
        return Err(KeyFilterError(format!("no entry: expected {REFERENCED:?} or <name>=<keys>;...")));
    }
    Ok(KeyFilter::Lists(lists))
}

/// The keys a workload hashes for one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySelection {
    /// No (valid) filter applies: Stakater's whole-object hash.
    Whole,
    /// Only the keys matching one of these patterns.
    Keys(Vec<KeyPattern>),
}

impl KeySelection {
    fn matches(&self, key: &str) -> bool {
        match self {
            KeySelection::Whole => true,
            KeySelection::Keys(patterns) => patterns.iter().any(|p| p.matches(key)),
        }
    }

    /// The keys of `digests` this selection hashes.
    pub fn hashed_keys<'a>(&'a self, digests: &'a KeyDigests) -> impl Iterator<Item = &'a str> {
        selected(digests, self).map(|(k, _)| &**k)
    }
}

/// The raw filter annotation a workload carries for `kind` (SecretProviderClasses have none).
pub fn filter_annotation(workload: &WorkloadView, kind: ResourceKind) -> Option<&str> {
    match kind {
        ResourceKind::ConfigMap => workload.key_filters[0].as_deref(),
        ResourceKind::Secret => workload.key_filters[1].as_deref(),
        ResourceKind::SecretProviderClass => None,
    }
}

/// What `workload` hashes of the resource `kind`/`name`. An invalid filter selects the whole
/// object (the problem is reported as an `InvalidAnnotation` Event).
pub fn key_selection(workload: &WorkloadView, kind: ResourceKind, name: &str) -> KeySelection {
    let Some(Ok(filter)) = filter_annotation(workload, kind).map(parse_key_filter) else {
        return KeySelection::Whole;
    };
    match filter {
        KeyFilter::Referenced => {
            let uses: Vec<&KeyUse> =
                workload.key_uses.iter().filter(|u| u.kind == kind && *u.name == *name).collect();
            if uses.is_empty() || uses.iter().any(|u| u.key.is_none()) {
                return KeySelection::Whole;
            }
            let mut keys: Vec<&str> = uses.iter().filter_map(|u| u.key.as_deref()).collect();
            keys.sort_unstable();
            keys.dedup();
            KeySelection::Keys(keys.into_iter().map(|k| KeyPattern::Exact(k.into())).collect())
        }
        KeyFilter::Lists(mut lists) => lists.remove(name).map_or(KeySelection::Whole, KeySelection::Keys),
    }
}

/// What `workload` hashes of `resource`: [`key_selection`], but the whole object when the
/// resource kept no per-key digests (more than [`MAX_KEY_DIGESTS`](crate::model::MAX_KEY_DIGESTS) keys): any change of such an
/// object then counts as a change of the filtered keys, so a reload is never missed.
pub fn resource_selection(workload: &WorkloadView, resource: &ResourceView) -> KeySelection {
    if !resource.keys.kept() {
        return KeySelection::Whole;
    }
    key_selection(workload, resource.key.kind, &resource.key.name)
}

/// SHA-1 over the sorted hex digests of the selected keys, joined by `;`.
pub fn filtered_hash(digests: &KeyDigests, selection: &KeySelection) -> ContentHash {
    let mut hexes: Vec<String> = selected(digests, selection).map(|(_, d)| d.to_hex()).collect();
    hexes.sort_unstable();
    crate::hash::sha1(hexes.join(";").as_bytes())
}

/// The hash `workload`'s marker records for `resource`: Stakater's whole-object hash unless a
/// valid key filter selects some keys.
pub fn marker_hash(workload: &WorkloadView, resource: &ResourceView) -> ContentHash {
    match resource_selection(workload, resource) {
        KeySelection::Whole => resource.hash,
        selection => filtered_hash(&resource.keys, &selection),
    }
}

#[cfg(test)]
mod tests;

/// The digests of the keys `selection` takes.
fn selected<'a>(
    digests: &'a KeyDigests,
    selection: &'a KeySelection,
) -> impl Iterator<Item = &'a (Box<str>, ContentHash)> {
    digests.entries().iter().filter(move |(k, _)| selection.matches(k))
}
