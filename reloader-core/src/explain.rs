//! `reloader explain`: why a workload would or would not reload, as data (docs/beyond-stakater.md §6).
//!
//! [`explain`] takes what the controller itself would see (the workload's view, the views of the
//! ConfigMaps/Secrets of its namespace, the settings) and runs the same [`decide`] the controller
//! runs, for every resource the workload uses, names, or matches by pattern or search. The result
//! is an [`Explanation`]: serializable (its JSON is the stable `-o json` output) and renderable as
//! text for people ([`render_text`]). Nothing here reads data: only hashes reach it.

mod describe;
mod markers;
mod render;
mod report;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::duration::format_go_duration;
pub use render::render_text;
pub use report::Explanation;
pub(crate) use report::{
    AnnotationSummary, DecisionSummary, DeclaredSummary, DeclaredTarget, HeldSummary, KeyFilterSummary,
    MarkerState, MarkerSummary, OtherMarker, PatternSummary, ReferenceSummary, ResourceExplanation,
    SettingsSummary, TimingSummary, WorkloadSummary,
};

use crate::annotations::{AnnotationKeys, ReloadAnnotations, kind_index};
use crate::custom_kind::PodTarget;
use crate::decide::{
    AnnotationProblem, AnnotationSource, DecideOptions, Decision, ExplicitEntry, annotation_problems, decide,
    effective_rules, explicit_entries,
};
use crate::keys::{KeySelection, filter_annotation, marker_hash, parse_key_filter, resource_selection};
use crate::model::{ContainerRef, ContentHash, RefVia, ResourceKey, ResourceKind};
use crate::restart::{EvictionPolicy, PolicyError};
use crate::timing::{HeldReload, LoopStop, Windows};
use crate::views::{ResourceView, WorkloadView};
use crate::workload::Workload;

const KINDS: [ResourceKind; 3] =
    [ResourceKind::ConfigMap, ResourceKind::Secret, ResourceKind::SecretProviderClass];

/// The controller settings an explanation depends on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExplainSettings {
    pub keys: AnnotationKeys,
    pub decide: DecideOptions,
    pub reload_on_create: bool,
    /// `--dry-run`: writes are logged and counted, never made.
    pub dry_run: bool,
    /// `--webhook-url`: changes are POSTed there instead of reloading workloads.
    pub webhook_only: bool,
    /// The admission webhook with a coalescing window: a release that changes the template and
    /// a resource together rolls once (docs/beyond-stakater.md §11).
    pub one_rollout_per_release: bool,
    /// `--restart-by-eviction` (docs/beyond-stakater.md §13).
    pub restart_by_eviction: bool,
    /// `--maintenance-window` (docs/beyond-stakater.md §15).
    pub default_windows: Option<Arc<Windows>>,
    pub scope: Scope,
}

/// What a controller with these settings does not watch at all, each with the reason (a phrase
/// naming the flag, e.g. `ConfigMaps are ignored (--resources-to-ignore=configmaps)`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// The workload itself: its kind or namespace is out of scope.
    pub workload: Option<String>,
    /// Whole resource types.
    pub kinds: BTreeMap<ResourceKind, String>,
    /// Single resources (a label selector that does not select them, an ignored Secret type).
    pub resources: BTreeMap<ResourceKey, String>,
}

/// The inputs of [`explain`].
#[derive(Debug, Clone, Copy)]
pub struct ExplainInput<'a> {
    pub workload: &'a WorkloadView,
    /// Names of the init containers, in order (the view keeps only the regular ones); see
    /// [`init_container_names`].
    pub init_containers: &'a [Box<str>],
    /// The resources of the workload's namespace, hashed. Patterns and search are matched against
    /// these; a resource the workload names but that is missing here is reported as missing.
    pub resources: &'a [ResourceView],
    pub settings: &'a ExplainSettings,
    /// The workload's restart-by-eviction annotations, read ([`EvictionPolicy::of`]).
    pub eviction: &'a Result<Option<EvictionPolicy>, PolicyError>,
}

/// The init container names of a workload's pod template, for [`ExplainInput::init_containers`].
pub fn init_container_names(workload: &dyn Workload) -> Vec<Box<str>> {
    let spec = workload.pod_template().and_then(|t| t.spec.as_ref());
    spec.and_then(|s| s.init_containers.as_ref())
        .map(|inits| inits.iter().map(|c| c.name.as_str().into()).collect())
        .unwrap_or_default()
}

/// How the workload restarts after a reload, when it asked for more than the marker.
fn restart_summary(eviction: &Result<Option<EvictionPolicy>, PolicyError>, enabled: bool) -> Option<String> {
    match eviction {
        Ok(None) => None,
        Err(problem) => Some(format!("not understood, only the marker is written: {problem}")),
        Ok(Some(_)) if !enabled => Some(format!(
            "{}: {} asks for eviction, but this controller runs without --restart-by-eviction: only the marker is written",
            crate::restart::RESTART,
            crate::restart::EVICT
        )),
        Ok(Some(policy)) => Some(format!(
            "by eviction after the marker is written: the pods not running it yet, {} at a time, each replacement Ready within {}s ({}: {})",
            policy.max_unavailable,
            policy.ready_timeout.as_secs(),
            crate::restart::RESTART,
            crate::restart::EVICT
        )),
    }
}

/// Explains every resource `input.workload` uses, names, or matches.
pub fn explain(input: &ExplainInput<'_>) -> Explanation {
    let view = input.workload;
    let settings = input.settings;
    let keys = &settings.keys;
    let in_namespace: HashMap<&ResourceKey, &ResourceView> = input
        .resources
        .iter()
        .filter(|r| r.key.namespace == view.key.namespace)
        .map(|r| (&r.key, r))
        .collect();
    let problems = annotation_problems(view, keys);
    let (wanted, patterns) = related_resources(view, input.resources, keys, &problems);
    let resources: Vec<ResourceExplanation> =
        wanted.iter().map(|key| explain_resource(input, key, in_namespace.get(key).copied())).collect();
    Explanation {
        workload: WorkloadSummary {
            kind: view.key.kind.to_string(),
            namespace: view.key.namespace.to_string(),
            name: view.key.name.to_string(),
            containers: view.containers.iter().map(ToString::to_string).collect(),
            init_containers: input.init_containers.iter().map(ToString::to_string).collect(),
            not_watched: settings.scope.workload.clone(),
            pause_period: view.pause_period.as_deref().map(str::to_owned),
            restart: restart_summary(input.eviction, settings.restart_by_eviction),
            timing: timing_summary(view, settings.default_windows.as_ref()),
            declared: view.key.kind.custom().and_then(|custom| {
                let target = match custom.target {
                    PodTarget::Template(_) => DeclaredTarget::Template,
                    PodTarget::Annotations(_) => DeclaredTarget::Annotations,
                    // Pods are not explained: they are no kind a person names to `explain`.
                    PodTarget::Pod => return None,
                };
                Some(DeclaredSummary {
                    api_version: custom.api_version(),
                    resource: custom.resource.to_string(),
                    target,
                    pointer: custom.target.pointer().to_string(),
                })
            }),
        },
        settings: SettingsSummary {
            strategy: settings.decide.strategy.as_str().to_owned(),
            auto_reload_all: settings.decide.auto_reload_all,
            reload_on_create: settings.reload_on_create,
            dry_run: settings.dry_run,
            webhook_only: settings.webhook_only,
            one_rollout_per_release: settings.one_rollout_per_release,
        },
        annotations: AnnotationSummary {
            workload: workload_annotations(view, keys),
            pod_template: raw_annotations(&view.template_rules, keys),
            in_effect: KINDS
                .iter()
                .map(|&kind| (kind.plural().to_owned(), rules_in_effect(view, kind).label().to_owned()))
                .collect(),
            patterns,
        },
        problems: problems.iter().map(ToString::to_string).collect(),
        other_markers: markers::other_markers(view, &wanted, settings),
        resources,
    }
}

/// Which annotation map docs/compatibility.md §4.3 step 1 reads for a resource type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RulesInEffect {
    Workload,
    PodTemplate,
    None,
}

impl RulesInEffect {
    fn label(self) -> &'static str {
        match self {
            RulesInEffect::Workload => "workload",
            RulesInEffect::PodTemplate => "pod_template",
            RulesInEffect::None => "none",
        }
    }
}

pub(crate) fn rules_in_effect(view: &WorkloadView, kind: ResourceKind) -> RulesInEffect {
    if view.metadata_rules.selects_for(kind) {
        RulesInEffect::Workload
    } else if view.template_rules.selects_for(kind) {
        RulesInEffect::PodTemplate
    } else {
        RulesInEffect::None
    }
}

fn source_of(view: &WorkloadView, kind: ResourceKind) -> AnnotationSource {
    match rules_in_effect(view, kind) {
        RulesInEffect::Workload => AnnotationSource::WorkloadMetadata,
        RulesInEffect::PodTemplate | RulesInEffect::None => AnnotationSource::PodTemplate,
    }
}

fn source_label(source: AnnotationSource) -> &'static str {
    match source {
        AnnotationSource::WorkloadMetadata => "workload",
        AnnotationSource::PodTemplate => "pod_template",
    }
}

/// Every resource the workload uses, names in an explicit list in effect, matches with a
/// pattern entry, or selects by search/match; and the pattern entries with what they match.
fn related_resources(
    view: &WorkloadView,
    resources: &[ResourceView],
    keys: &AnnotationKeys,
    problems: &[AnnotationProblem],
) -> (BTreeSet<ResourceKey>, Vec<PatternSummary>) {
    let namespace = &*view.key.namespace;
    let mut wanted: BTreeSet<ResourceKey> =
        view.references.iter().map(|r| ResourceKey::new(r.kind, namespace, &r.name)).collect();
    let mut patterns = Vec::new();
    for kind in KINDS {
        let of_kind =
            || resources.iter().filter(move |r| r.key.kind == kind && &*r.key.namespace == namespace);
        let rules = effective_rules(view, kind);
        if let Some(list) = &rules.explicit[kind_index(kind)] {
            // Per pattern position, the names it selects: one pass of the compiled list per resource.
            let mut selected: BTreeMap<usize, Vec<String>> = BTreeMap::new();
            for resource in of_kind() {
                for position in list.matching_patterns(&resource.key.name) {
                    selected.entry(position).or_default().push(resource.key.name.to_string());
                }
            }
            let patterns_in_list = explicit_entries(list).filter(|e| matches!(e, ExplicitEntry::Pattern(_)));
            for entry in explicit_entries(list) {
                if let ExplicitEntry::Name(name) = entry {
                    wanted.insert(ResourceKey::new(kind, namespace, name));
                }
            }
            for (position, entry) in patterns_in_list.enumerate() {
                let pattern = entry.as_str();
                let mut matches = selected.remove(&position).unwrap_or_default();
                matches.sort();
                wanted.extend(matches.iter().map(|name| ResourceKey::new(kind, namespace, name)));
                let source = source_of(view, kind);
                patterns.push(PatternSummary {
                    kind: kind.to_string(),
                    annotation: keys.explicit(kind).to_owned(),
                    source: source_label(source).to_owned(),
                    pattern: pattern.to_owned(),
                    valid: !problems.iter().any(|p| match p {
                        AnnotationProblem::InvalidEntry { source: s, entry, .. } => {
                            *s == source && &**entry == pattern
                        }
                        AnnotationProblem::PatternsOverLimit { source: s, key, .. } => {
                            *s == source && **key == *keys.explicit(kind)
                        }
                        _ => false,
                    }),
                    matches,
                });
            }
        }
        if rules.search.as_deref() == Some("true") {
            wanted.extend(of_kind().filter(|r| r.matched).map(|r| r.key.clone()));
        }
    }
    (wanted, patterns)
}

fn explain_resource(
    input: &ExplainInput<'_>,
    key: &ResourceKey,
    found: Option<&ResourceView>,
) -> ResourceExplanation {
    let view = input.workload;
    let settings = input.settings;
    // A missing resource is decided as it would be once created without annotations.
    let resource = found.cloned().unwrap_or_else(|| ResourceView {
        key: key.clone(),
        hash: ContentHash([0; 20]),
        keys: Default::default(),
        matched: false,
        ignored: false,
        version: None,
    });
    let decision = decide(view, &resource, &settings.decide);
    let container_name = |index: u16| view.containers.get(usize::from(index)).map(ToString::to_string);
    let marker = markers::marker_summary(view, key, found.map(|r| marker_hash(view, r)), settings);
    let not_watched =
        settings.scope.kinds.get(&key.kind).or_else(|| settings.scope.resources.get(key)).cloned();
    let reloads_on_controller_start = found.is_some()
        && marker.state == MarkerState::Different
        && matches!(decision, Decision::Reload { .. })
        && not_watched.is_none()
        && settings.scope.workload.is_none();
    let summary = match decision {
        Decision::Reload { rule, container } => DecisionSummary {
            reload: true,
            rule: Some(rule.as_str().to_owned()),
            skip_reason: None,
            container: container_name(container),
            because: describe::rule(view, &resource, rule, settings),
        },
        Decision::Skip(reason) => DecisionSummary {
            reload: false,
            rule: None,
            skip_reason: Some(reason.as_label().to_owned()),
            container: None,
            because: describe::skip(view, &resource, reason, &settings.keys),
        },
    };
    let outcome = match summary.reload {
        true => Ok(summary.container.as_deref().unwrap_or_default()),
        false => Err(summary.because.as_str()),
    };
    let next_change = describe::next_change(view, key, found.is_some(), outcome, settings);
    ResourceExplanation {
        kind: key.kind.to_string(),
        name: key.name.to_string(),
        exists: found.is_some(),
        ignored: resource.ignored,
        matched: resource.matched,
        references: view
            .references
            .iter()
            .filter(|r| r.kind == key.kind && r.name == key.name)
            .map(|r| reference_summary(view, input.init_containers, r.via, r.container))
            .collect(),
        not_watched,
        decision: summary,
        current_hash: found.map(|r| marker_hash(view, r).to_hex()),
        key_filter: key_filter_summary(view, &resource, &settings.keys),
        marker,
        reloads_on_controller_start,
        next_change,
    }
}

/// docs/beyond-stakater.md §10: the filter of the resource's type and the keys it hashes.
fn key_filter_summary(
    view: &WorkloadView,
    resource: &ResourceView,
    keys: &AnnotationKeys,
) -> Option<KeyFilterSummary> {
    let kind = resource.key.kind;
    let value = filter_annotation(view, kind)?;
    let annotation = match kind {
        ResourceKind::ConfigMap => &keys.configmap_keys,
        _ => &keys.secret_keys,
    };
    let selection = resource_selection(view, resource);
    let patterns = match &selection {
        KeySelection::Whole => None,
        KeySelection::Keys(patterns) => Some(patterns.iter().map(|p| p.as_str().to_owned()).collect()),
    };
    Some(KeyFilterSummary {
        annotation: annotation.clone(),
        value: value.to_owned(),
        valid: parse_key_filter(value).is_ok(),
        patterns,
        hashed_keys: selection.hashed_keys(&resource.keys).map(str::to_owned).collect(),
    })
}

fn reference_summary(
    view: &WorkloadView,
    init_containers: &[Box<str>],
    via: RefVia,
    container: Option<ContainerRef>,
) -> ReferenceSummary {
    let (container, init) = match container {
        Some(ContainerRef::Regular(i)) => (view.containers.get(usize::from(i)), false),
        Some(ContainerRef::Init(i)) => (init_containers.get(usize::from(i)), true),
        None => (None, false),
    };
    ReferenceSummary { via: via_label(via).to_owned(), container: container.map(ToString::to_string), init }
}

pub(crate) fn via_label(via: RefVia) -> &'static str {
    match via {
        RefVia::Volume => "volume",
        RefVia::Projected => "projected",
        RefVia::Csi => "csi",
        RefVia::EnvValueFrom => "env_value_from",
        RefVia::EnvFrom => "env_from",
    }
}

/// The reloader annotations of the workload's own metadata, with their raw values.
fn workload_annotations(view: &WorkloadView, keys: &AnnotationKeys) -> BTreeMap<String, String> {
    let mut map = raw_annotations(&view.metadata_rules, keys);
    if let Some(period) = &view.pause_period {
        map.insert(keys.pause_period.clone(), period.to_string());
    }
    if view.restart_strategy {
        map.insert(keys.rollout_strategy.clone(), "restart".to_owned());
    }
    map
}

fn raw_annotations(rules: &ReloadAnnotations, keys: &AnnotationKeys) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let mut put = |key: &str, value: Option<&str>| {
        if let Some(value) = value {
            map.insert(key.to_owned(), value.to_string());
        }
    };
    put(&keys.auto, rules.auto.as_deref());
    put(&keys.search, rules.search.as_deref());
    for kind in KINDS {
        let slot = kind_index(kind);
        put(keys.explicit(kind), rules.explicit[slot].as_deref());
        put(keys.typed_auto(kind), rules.typed_auto[slot].as_deref());
        put(keys.exclude(kind), rules.exclude[slot].as_deref());
    }
    map
}

/// The workload's timing, its held reload and its loop guard's stop, if any of them is there.
fn timing_summary(view: &WorkloadView, default_windows: Option<&Arc<Windows>>) -> Option<TimingSummary> {
    if view.timing.is_none() && default_windows.is_none() {
        return None;
    }
    let (timing, _) = view.reload_timing(default_windows);
    let duration = |d: std::time::Duration| (!d.is_zero()).then(|| format_go_duration(d));
    let held = view.held_record().and_then(|text| HeldReload::parse(text).ok()).map(|held| HeldSummary {
        since: held.since.to_string(),
        until: held.until.to_string(),
        reason: held.reason.as_str(),
        resources: held.resources.iter().map(|(kind, name)| format!("{kind}/{name}")).collect(),
    });
    let loop_stopped = view.timing.as_ref().and_then(|t| t.loop_stopped.as_deref()).map(|text| {
        LoopStop::parse(text).map_or_else(|_| format!("(unreadable record {text:?})"), |stop| stop.describe())
    });
    Some(TimingSummary {
        delay: duration(timing.delay),
        min_interval: duration(timing.min_interval),
        maintenance_window: timing.windows.map(|w| w.to_string()),
        held,
        loop_stopped,
    })
    .filter(|t| {
        t.delay.is_some()
            || t.min_interval.is_some()
            || t.maintenance_window.is_some()
            || t.held.is_some()
            || t.loop_stopped.is_some()
    })
}
