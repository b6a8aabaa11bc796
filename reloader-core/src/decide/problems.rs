//! Mistakes in a workload's reloader annotations worth a warning: they never stop a decision
//! (docs/compatibility.md §3: an invalid entry is skipped, the others still apply), but users want to know.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::annotations::{
    AnnotationKeys, ExplicitEntry, PatternLimit, ReloadAnnotations, explicit_entries, kind_index,
};
use crate::duration::{DurationError, parse_pause_period};
use crate::keys::{KeyFilterError, filter_annotation, parse_key_filter};
use crate::model::{ResourceKind, WorkloadKind};
use crate::naming::env_var_name;
use crate::timing::TimingProblem;
use crate::views::WorkloadView;

const KINDS: [ResourceKind; 3] =
    [ResourceKind::ConfigMap, ResourceKind::Secret, ResourceKind::SecretProviderClass];

/// Where an annotation was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnnotationSource {
    WorkloadMetadata,
    PodTemplate,
}

impl AnnotationSource {
    fn describe(self) -> &'static str {
        match self {
            AnnotationSource::WorkloadMetadata => "the workload",
            AnnotationSource::PodTemplate => "the pod template",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnnotationProblem {
    /// An explicit-list entry that is not a valid regular expression; it selects nothing.
    InvalidEntry { key: Box<str>, source: AnnotationSource, entry: Box<str>, reason: String },
    /// An explicit list whose patterns exceed a limit (docs/compatibility.md §3): none of them
    /// selects anything, as if each were invalid; the list's plain names still apply.
    PatternsOverLimit { key: Box<str>, source: AnnotationSource, limit: PatternLimit },
    /// Resources of one kind, used or listed by the workload, whose env-var markers have the
    /// same name: under the env-vars strategy each one's marker overwrites the other's.
    EnvVarCollision { kind: ResourceKind, env_var: Box<str>, names: Vec<Box<str>> },
    /// A Deployment's pause period that is not a Go duration: reloads happen, without a pause.
    InvalidPausePeriod { key: Box<str>, error: DurationError },
    /// A key filter that does not parse: the whole object is hashed (docs/beyond-stakater.md §10).
    InvalidKeyFilter { key: Box<str>, error: KeyFilterError },
    /// A delay, minimum interval or maintenance window that does not parse: the reload is timed
    /// as without that annotation (docs/beyond-stakater.md §15).
    InvalidTiming(TimingProblem),
}

impl fmt::Display for AnnotationProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnnotationProblem::InvalidEntry { key, source, entry, reason } => write!(
                f,
                "annotation {key} on {}: entry {entry:?} is not a valid regular expression ({reason}); \
                 it is ignored, the other entries still apply",
                source.describe()
            ),
            AnnotationProblem::PatternsOverLimit { key, source, limit } => write!(
                f,
                "annotation {key} on {}: {limit}; its patterns are ignored, its plain names still apply",
                source.describe()
            ),
            AnnotationProblem::EnvVarCollision { kind, env_var, names } => {
                write!(f, "{kind}s ")?;
                for (i, name) in names.iter().enumerate() {
                    let separator = match i {
                        0 => "",
                        _ if i + 1 == names.len() => " and ",
                        _ => ", ",
                    };
                    write!(f, "{separator}{name:?}")?;
                }
                write!(
                    f,
                    " share the env-var marker {env_var}: under the env-vars strategy a change to one \
                     overwrites the marker of the other"
                )
            }
            AnnotationProblem::InvalidPausePeriod { key, error } => {
                write!(f, "annotation {key} on the workload: {error}; reloads happen without a pause")
            }
            AnnotationProblem::InvalidKeyFilter { key, error } => write!(
                f,
                "annotation {key} on the workload: {error}; every key is hashed, as without the annotation"
            ),
            AnnotationProblem::InvalidTiming(problem) => {
                write!(f, "{problem}; reloads are timed as without the annotation")
            }
        }
    }
}

/// Every problem in the reloader annotations of `view`, in a stable order: invalid entries and
/// lists over a limit (metadata before template, ConfigMap before Secret before
/// SecretProviderClass, list order),
/// then env-var collisions by kind and env-var name, then an invalid pause period, then invalid
/// key filters (ConfigMap before Secret), then invalid timing annotations.
pub fn annotation_problems(view: &WorkloadView, keys: &AnnotationKeys) -> Vec<AnnotationProblem> {
    let sources = [
        (AnnotationSource::WorkloadMetadata, &view.metadata_rules),
        (AnnotationSource::PodTemplate, &view.template_rules),
    ];
    let mut problems = Vec::new();
    for (source, rules) in sources {
        for kind in KINDS {
            let Some(list) = &rules.explicit[kind_index(kind)] else { continue };
            // Compiled with the view: reporting compiles nothing.
            let Some(patterns) = list.patterns() else { continue };
            let key: Box<str> = keys.explicit(kind).into();
            problems.extend(patterns.invalid.iter().map(|invalid| AnnotationProblem::InvalidEntry {
                key: key.clone(),
                source,
                entry: invalid.entry.clone(),
                reason: invalid.reason.clone(),
            }));
            if let Some(limit) = patterns.over_limit {
                problems.push(AnnotationProblem::PatternsOverLimit { key, source, limit });
            }
        }
    }
    problems.extend(env_var_collisions(view, &sources.map(|(_, rules)| rules)));
    problems.extend(invalid_pause_period(view, keys));
    problems.extend(invalid_key_filters(view, keys));
    problems.extend(view.reload_timing(None).1.into_iter().map(AnnotationProblem::InvalidTiming));
    problems
}

fn invalid_key_filters<'a>(
    view: &'a WorkloadView,
    keys: &'a AnnotationKeys,
) -> impl Iterator<Item = AnnotationProblem> + 'a {
    [(ResourceKind::ConfigMap, &keys.configmap_keys), (ResourceKind::Secret, &keys.secret_keys)]
        .into_iter()
        .filter_map(|(kind, key)| {
            let error = parse_key_filter(filter_annotation(view, kind)?).err()?;
            Some(AnnotationProblem::InvalidKeyFilter { key: key.as_str().into(), error })
        })
}

/// The pause period is read from a Deployment's own metadata, and only there (docs/compatibility.md §3).
fn invalid_pause_period(view: &WorkloadView, keys: &AnnotationKeys) -> Option<AnnotationProblem> {
    if view.key.kind != WorkloadKind::Deployment {
        return None;
    }
    let error = parse_pause_period(view.pause_period.as_deref()?).err()?;
    Some(AnnotationProblem::InvalidPausePeriod { key: keys.pause_period.as_str().into(), error })
}

fn env_var_collisions(view: &WorkloadView, rules: &[&ReloadAnnotations]) -> Vec<AnnotationProblem> {
    let mut names: BTreeSet<(ResourceKind, &str)> =
        view.references.iter().map(|r| (r.kind, &*r.name)).collect();
    for kind in KINDS {
        let lists = rules.iter().filter_map(|r| r.explicit[kind_index(kind)].as_deref());
        for entry in lists.flat_map(explicit_entries) {
            if let ExplicitEntry::Name(name) = entry {
                names.insert((kind, name));
            }
        }
    }
    let mut by_env_var: BTreeMap<(ResourceKind, String), Vec<&str>> = BTreeMap::new();
    for (kind, name) in names {
        by_env_var.entry((kind, env_var_name(kind, name))).or_default().push(name);
    }
    by_env_var
        .into_iter()
        .filter(|(_, names)| names.len() > 1)
        .map(|((kind, env_var), names)| AnnotationProblem::EnvVarCollision {
            kind,
            env_var: env_var.into(),
            names: names.into_iter().map(Into::into).collect(),
        })
        .collect()
}
