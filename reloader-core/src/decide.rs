//! docs/compatibility.md §4.3 as a pure function: which workloads reload for a changed resource, and how.
//!
//! [`decide`] answers "does this workload reload for this resource, by which rule, on which
//! container"; [`plan`] turns a yes into the marker change for an event and drops changes the
//! workload already carries, which is what makes replays, resyncs and restarts write nothing.

mod problems;
#[cfg(test)]
mod tests;

pub(crate) use crate::annotations::{ExplicitEntry, explicit_entries};
pub use problems::{AnnotationProblem, AnnotationSource, annotation_problems};

use crate::annotations::{ReloadAnnotations, kind_index, parse_go_bool, split_list};
use crate::hash::DELETE_MARKER_HASH;
use crate::keys::{KeySelection, filtered_hash, resource_selection};
use crate::markers::{MarkerAction, MarkerChange};
use crate::model::{ContentHash, KeyDigests, ReloadStrategy, ResourceKind};
use crate::references::{NoMarkerContainer, marker_container, references_resource};
use crate::views::{ResourceView, WorkloadView};

/// The options that change decisions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecideOptions {
    pub(crate) auto_reload_all: bool,
    pub strategy: ReloadStrategy,
    /// `--allow-suspended-cronjobs`: a suspended CronJob reloads (spawns a Job) as with Stakater.
    pub(crate) allow_suspended_cronjobs: bool,
}

/// Why a workload reloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// An entry of the explicit list matched the name.
    Explicit,
    /// `search: "true"` on the workload and `match: "true"` on the resource.
    SearchMatch,
    /// `auto: "true"`.
    Auto,
    /// The typed auto key for this resource type is true.
    TypedAuto,
    /// `--auto-reload-all` with neither auto key set.
    AutoReloadAll,
}

impl Rule {
    /// The `reloader.decision.rule` value on a decision's trace span.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Explicit => "explicit",
            Rule::SearchMatch => "search_match",
            Rule::Auto => "auto",
            Rule::TypedAuto => "typed_auto",
            Rule::AutoReloadAll => "auto_reload_all",
        }
    }

    /// Every rule but the explicit list: Stakater's `autoReload`, which puts the marker only on
    /// a container that uses the resource (docs/compatibility.md §4.4).
    fn is_auto(self) -> bool {
        !matches!(self, Rule::Explicit)
    }
}

/// Why a workload does not reload. `as_label` is the `reloader_skipped_total{reason}` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SkipReason {
    /// The resource carries `ignore: "true"`.
    ResourceIgnored,
    /// The workload's exclude list for this type names the resource.
    Excluded,
    /// No rule of the workload selects the resource (no annotation, or lists that do not match).
    NotAnnotated,
    /// An auto key is set to something other than true, and no other rule selects the resource.
    AutoDisabled,
    /// An auto or search rule applies, but the pod spec does not use the resource (or only
    /// through a volume no container mounts, docs/compatibility.md §4.4).
    NotReferenced,
    /// The pod template has no regular container to carry the marker.
    NoContainers,
    /// The workload has no inline pod template (a `workloadRef` Rollout).
    NoTemplate,
    /// A suspended CronJob (unless `--allow-suspended-cronjobs`).
    Suspended,
    /// The workload already carries the marker this change would write.
    AlreadyCurrent,
    /// The loop guard stopped the workload's reloads until an operator clears its annotation
    /// (docs/beyond-stakater.md §15).
    LoopStopped,
}

impl SkipReason {
    #[cfg(test)]
    pub(crate) const ALL: [SkipReason; 10] = [
        SkipReason::ResourceIgnored,
        SkipReason::Excluded,
        SkipReason::NotAnnotated,
        SkipReason::AutoDisabled,
        SkipReason::NotReferenced,
        SkipReason::NoContainers,
        SkipReason::NoTemplate,
        SkipReason::Suspended,
        SkipReason::AlreadyCurrent,
        SkipReason::LoopStopped,
    ];

    /// The metric label value.
    pub fn as_label(self) -> &'static str {
        match self {
            SkipReason::ResourceIgnored => "resource_ignored",
            SkipReason::Excluded => "excluded",
            SkipReason::NotAnnotated => "not_annotated",
            SkipReason::AutoDisabled => "auto_disabled",
            SkipReason::NotReferenced => "not_referenced",
            SkipReason::NoContainers => "no_containers",
            SkipReason::NoTemplate => "no_template",
            SkipReason::Suspended => "suspended",
            SkipReason::AlreadyCurrent => "already_current",
            SkipReason::LoopStopped => "loop_stopped",
        }
    }
}

/// The decision for one workload and one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    Reload { rule: Rule, container: u16 },
    Skip(SkipReason),
}

/// What happened to the resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceEventKind {
    Created,
    Updated,
    Deleted,
}

/// docs/compatibility.md §4.3: does `workload` reload for `resource`, by which rule, on which container?
///
/// The caller has already applied the filters of §4.2 that do not depend on the resource's own
/// annotations (ignored types, namespaces, ignored workload kinds); `ignore: "true"` on the
/// resource is checked here.
pub(crate) fn decide(workload: &WorkloadView, resource: &ResourceView, opts: &DecideOptions) -> Decision {
    let rule = match select_rule(workload, resource, opts) {
        Ok(rule) => rule,
        Err(reason) => return Decision::Skip(reason),
    };
    if !workload.has_template {
        return Decision::Skip(SkipReason::NoTemplate);
    }
    if workload.suspended && !opts.allow_suspended_cronjobs {
        return Decision::Skip(SkipReason::Suspended);
    }
    if workload.loop_stopped() {
        return Decision::Skip(SkipReason::LoopStopped);
    }
    let key = &resource.key;
    let containers = workload.containers.len();
    match marker_container(&workload.references, containers, key.kind, &key.name, rule.is_auto()) {
        Ok(container) => Decision::Reload { rule, container },
        // An annotations map has no containers: the marker goes to the map itself.
        Err(NoMarkerContainer::NoContainers) if workload.annotations_only => {
            Decision::Reload { rule, container: 0 }
        }
        Err(NoMarkerContainer::NoContainers) => Decision::Skip(SkipReason::NoContainers),
        Err(NoMarkerContainer::Unused) => Decision::Skip(SkipReason::NotReferenced),
    }
}

/// Whether a workload's view can be trusted to show the markers the workload will carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewMarkers {
    /// No write of ours is on its way to the workload: its view shows its markers.
    Settled,
    /// A write of ours is queued or in flight and may change them. A change the view already
    /// records is planned anyway; the writer decides on the view that write leaves
    /// (docs/behaviour.md §C32e).
    Writing,
}

/// `decide`, then the marker comparison: the change to make, or why none is needed.
pub(crate) fn plan(
    workload: &WorkloadView,
    resource: &ResourceView,
    event: ResourceEventKind,
    opts: &DecideOptions,
) -> Result<MarkerChange, SkipReason> {
    plan_update(workload, resource, None, event, opts, ViewMarkers::Settled).map(|planned| planned.change)
}

/// A planned reload of one workload: the marker change and the rule that selected the workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedChange {
    pub change: MarkerChange,
    pub rule: Rule,
}

/// `plan`, knowing the per-key digests the resource had before this update: a key filter whose
/// keys did not change writes nothing, even when the marker records another resource (the
/// annotations strategy records only one).
pub(crate) fn plan_update(
    workload: &WorkloadView,
    resource: &ResourceView,
    previous_keys: Option<&KeyDigests>,
    event: ResourceEventKind,
    opts: &DecideOptions,
    markers: ViewMarkers,
) -> Result<PlannedChange, SkipReason> {
    let (rule, container) = match decide(workload, resource, opts) {
        Decision::Reload { rule, container } => (rule, container),
        Decision::Skip(reason) => return Err(reason),
    };
    let selection = resource_selection(workload, resource);
    let hash = match &selection {
        KeySelection::Whole => resource.hash,
        keys => filtered_hash(&resource.keys, keys),
    };
    // Digests omitted before (too many keys): the marker then recorded the whole hash, no
    // comparison of keys can say the filtered ones are unchanged.
    if let (ResourceEventKind::Updated, KeySelection::Keys(_), Some(previous)) =
        (event, &selection, previous_keys.filter(|previous| previous.kept()))
        && filtered_hash(previous, &selection) == hash
    {
        return Err(SkipReason::AlreadyCurrent);
    }
    let strategy = workload.strategy(opts.strategy);
    let action = marker_action(event, hash, strategy);
    if markers == ViewMarkers::Settled && workload.markers.records(&resource.key, &action, strategy) {
        return Err(SkipReason::AlreadyCurrent);
    }
    let change = MarkerChange { resource: resource.key.clone(), action, strategy, container };
    Ok(PlannedChange { change, rule })
}

/// The marker action an event calls for (docs/compatibility.md §6): record the new hash; on delete, remove
/// the env var, or record the delete-marker hash under the annotations strategy.
pub(crate) fn marker_action(
    event: ResourceEventKind,
    hash: ContentHash,
    strategy: ReloadStrategy,
) -> MarkerAction {
    match (event, strategy) {
        (ResourceEventKind::Created | ResourceEventKind::Updated, _) => MarkerAction::Set(hash),
        (ResourceEventKind::Deleted, ReloadStrategy::EnvVars) => MarkerAction::Remove,
        (ResourceEventKind::Deleted, ReloadStrategy::Annotations) => MarkerAction::Set(DELETE_MARKER_HASH),
    }
}

/// docs/compatibility.md §4.3 step 1: the workload's own annotations, unless they hold none of the keys
/// that select workloads for `kind`; then the pod template's.
pub(crate) fn effective_rules(workload: &WorkloadView, kind: ResourceKind) -> &ReloadAnnotations {
    if workload.metadata_rules.selects_for(kind) {
        &workload.metadata_rules
    } else {
        &workload.template_rules
    }
}

/// Steps 2 to 6 of docs/compatibility.md §4.3, before the container is chosen.
fn select_rule(
    workload: &WorkloadView,
    resource: &ResourceView,
    opts: &DecideOptions,
) -> Result<Rule, SkipReason> {
    let key = &resource.key;
    if resource.ignored {
        return Err(SkipReason::ResourceIgnored);
    }
    // Pod specs only reference resources of their own namespace; an explicit list must not
    // reach across namespaces either.
    if key.namespace != workload.key.namespace {
        return Err(SkipReason::NotReferenced);
    }
    if is_excluded(workload, key.kind, &key.name) {
        return Err(SkipReason::Excluded);
    }
    let rules = effective_rules(workload, key.kind);
    let slot = kind_index(key.kind);
    if rules.explicit[slot].as_ref().is_some_and(|list| list.matches(&key.name)) {
        return Ok(Rule::Explicit);
    }
    let referenced = references_resource(&workload.references, key.kind, &key.name);
    if rules.search.as_deref() == Some("true") && resource.matched {
        // An annotations map has no pod spec to reference anything: search + match is how it
        // names its resources (docs/beyond-stakater.md §12).
        return if referenced || workload.annotations_only {
            Ok(Rule::SearchMatch)
        } else {
            Err(SkipReason::NotReferenced)
        };
    }
    let rule = auto_rule(rules, key.kind, opts)?;
    if referenced { Ok(rule) } else { Err(SkipReason::NotReferenced) }
}

/// Step 2: the exclude list is read from the workload's metadata and (our fix) from the pod
/// template, whichever map step 1 chose.
fn is_excluded(workload: &WorkloadView, kind: ResourceKind, name: &str) -> bool {
    let slot = kind_index(kind);
    [&workload.metadata_rules, &workload.template_rules]
        .into_iter()
        .filter_map(|rules| rules.exclude[slot].as_deref())
        .any(|list| split_list(list).any(|entry| entry == name))
}

/// Step 5. An empty value counts as unset, as it does for Stakater (Go reads a missing key as "").
fn auto_rule(
    rules: &ReloadAnnotations,
    kind: ResourceKind,
    opts: &DecideOptions,
) -> Result<Rule, SkipReason> {
    let auto = rules.auto.as_deref().unwrap_or_default();
    let typed_auto = rules.typed_auto[kind_index(kind)].as_deref().unwrap_or_default();
    if parse_go_bool(auto) == Some(true) {
        Ok(Rule::Auto)
    } else if parse_go_bool(typed_auto) == Some(true) {
        Ok(Rule::TypedAuto)
    } else if !auto.is_empty() || !typed_auto.is_empty() {
        Err(SkipReason::AutoDisabled)
    } else if opts.auto_reload_all {
        Ok(Rule::AutoReloadAll)
    } else {
        Err(SkipReason::NotAnnotated)
    }
}
