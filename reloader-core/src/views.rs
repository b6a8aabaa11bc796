//! Compact views: what the index keeps about resources and workloads (no data, no
//! managedFields), and how a workload object becomes one.
//!
//! Views sit above the vocabulary (`model`), the annotation rules and the markers, and below
//! everything that reads them (`decide`, `index`, `explain`, `admission`) and the `Workload`
//! trait, whose provided `view` calls [`build_view`]. `build_view` takes the object's parts
//! rather than a `Workload`, so this module does not depend on the trait that depends on it.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::annotations::{AnnotationKeys, ReloadAnnotations};
use crate::markers::{Markers, template_containers};
use crate::model::{
    ContentHash, KeyDigests, KeyUse, Reference, ReloadStrategy, ResourceKey, ResourceVersion, Uid,
    WorkloadKey, WorkloadKind,
};
use crate::references::{discover_key_uses, discover_references};
use crate::timing::{Timing, TimingProblem, Windows};

/// What the index keeps of a ConfigMap/Secret/SecretProviderClass: no data at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceView {
    pub key: ResourceKey,
    pub hash: ContentHash,
    /// Per-key digests, for key filters (empty for a SecretProviderClass).
    pub keys: KeyDigests,
    /// The resource carries the match annotation with the exact value `"true"`.
    pub matched: bool,
    /// The resource carries the ignore annotation with the exact value `"true"`.
    pub ignored: bool,
    /// The `resourceVersion` of the object this view was built from, if it parses.
    pub version: Option<ResourceVersion>,
}

/// Everything the index keeps about one workload: enough to decide, nothing more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadView {
    pub key: WorkloadKey,
    /// Reloader annotations on the workload's own metadata.
    pub metadata_rules: ReloadAnnotations,
    /// Reloader annotations on the pod template (the fallback of docs/compatibility.md §4.3 step 1).
    pub template_rules: ReloadAnnotations,
    /// Every ConfigMap/Secret/SecretProviderClass the pod spec uses.
    pub references: Vec<Reference>,
    /// Names of the regular containers, in order (the marker goes on one of them).
    pub containers: Vec<Box<str>>,
    /// The markers the pod template carries now.
    pub markers: Markers,
    /// False for kinds without an inline pod template (a `workloadRef` Rollout).
    pub has_template: bool,
    /// A suspended CronJob.
    pub suspended: bool,
    /// `spec.paused` (Deployments, Rollouts).
    pub paused: bool,
    /// The raw pause-period annotation (Deployments only), parsed when used.
    pub pause_period: Option<Box<str>>,
    /// The raw paused-at annotation (RFC 3339), written by reloader when it paused the workload.
    pub paused_at: Option<Box<str>>,
    /// The hold period the admission webhook set with `paused-at` (docs/beyond-stakater.md §11).
    pub hold_period: Option<Box<str>>,
    /// Argo Rollouts `rollout-strategy: restart`.
    pub restart_strategy: bool,
    /// The raw key-filter annotations (ConfigMap, Secret), from the workload's metadata or else
    /// its pod template (docs/beyond-stakater.md §10).
    pub key_filters: [Option<Box<str>>; 2],
    /// The keys the pod spec reads one by one; kept only when a key filter is set.
    pub key_uses: Vec<KeyUse>,
    /// The `resourceVersion` of the object this view was built from, if it parses: on a watch's
    /// ADDED event, the version that created it (docs/behaviour.md §G).
    pub version: Option<ResourceVersion>,
    /// `metadata.uid`, for the Event about a write made from this view (no read before it).
    pub uid: Option<Uid>,
    /// What a write built from this view must know of the template besides its markers.
    pub shape: TemplateShape,
    /// The "template" is a map of annotations the kind's operator copies to its pods (a
    /// declared kind's `annotations=`): it has no containers, its markers are annotations.
    pub annotations_only: bool,
    /// The workload opted in to restart by eviction (`reloader.dev/restart`, any value: the
    /// evictor reads and checks it, docs/beyond-stakater.md §13).
    pub restart_by_eviction: bool,
    /// The raw timing annotations (docs/beyond-stakater.md §15), parsed when used; `None` for the
    /// many workloads that carry none, so they cost one pointer.
    pub timing: Option<Box<TimingAnnotations>>,
}

/// The raw values of the timing annotations on a workload's own metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimingAnnotations {
    pub delay: Option<Box<str>>,
    pub min_interval: Option<Box<str>>,
    pub maintenance_window: Option<Box<str>>,
    /// A held reload's durable record, written by reloader.
    pub held: Option<Box<str>>,
    /// Set by the loop guard; reloads of the workload stay stopped while it is there.
    pub loop_stopped: Option<Box<str>>,
}

impl TimingAnnotations {
    fn of(get: impl Fn(&str) -> Option<Box<str>>) -> Option<Box<Self>> {
        use crate::timing::{DELAY, HELD, LOOP_STOPPED, MAINTENANCE_WINDOW, MIN_INTERVAL};
        let raw = TimingAnnotations {
            delay: get(DELAY),
            min_interval: get(MIN_INTERVAL),
            maintenance_window: get(MAINTENANCE_WINDOW),
            held: get(HELD),
            loop_stopped: get(LOOP_STOPPED),
        };
        (raw != TimingAnnotations::default()).then(|| Box::new(raw))
    }
}

/// The little a JSON patch of the template needs beyond container names and markers: which
/// parents exist (an `add` of a missing parent versus an edit inside an existing one). Kept so
/// that a write needs no read (docs/behaviour.md, "What is read before a write").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TemplateShape {
    /// Bit `i`: container `i` has a non-empty `env` (first [`TemplateShape::MAX_CONTAINERS`]).
    pub env: u64,
    /// The template has `metadata`.
    pub metadata: bool,
    /// The template's metadata has `annotations`.
    pub annotations: bool,
    /// The `last-reloaded-from` annotation is present (whether or not it parses).
    pub marker_annotation: bool,
}

impl TemplateShape {
    /// Templates with more containers are not described (their writes read the object).
    pub const MAX_CONTAINERS: usize = 64;

    fn of(template: &PodTemplateSpec, keys: &AnnotationKeys) -> Self {
        let containers = template_containers(template);
        let env = containers
            .iter()
            .take(Self::MAX_CONTAINERS)
            .enumerate()
            .filter(|(_, c)| c.env.as_ref().is_some_and(|e| !e.is_empty()))
            .fold(0u64, |bits, (i, _)| bits | 1 << i);
        let annotations = template.metadata.as_ref().and_then(|m| m.annotations.as_ref());
        TemplateShape {
            env,
            metadata: template.metadata.is_some(),
            annotations: annotations.is_some(),
            marker_annotation: annotations.is_some_and(|a| a.contains_key(&keys.last_reloaded_from)),
        }
    }
}

impl WorkloadView {
    /// The strategy this workload's markers follow: the configured one, but annotations where
    /// there is no pod spec to carry env vars (an annotations map).
    /// The loop guard stopped this workload's reloads (docs/beyond-stakater.md §15).
    pub fn loop_stopped(&self) -> bool {
        self.timing.as_ref().is_some_and(|t| t.loop_stopped.is_some())
    }

    /// The reload timing the workload's annotations ask for (docs/beyond-stakater.md §15), with
    /// `default_windows` where it sets none, and the problems of those annotations.
    pub fn reload_timing(&self, default_windows: Option<&Arc<Windows>>) -> (Timing, Vec<TimingProblem>) {
        use crate::timing::{DELAY, MAINTENANCE_WINDOW, MIN_INTERVAL};
        let raw = self.timing.as_deref();
        let get = |annotation| {
            let raw = raw?;
            match annotation {
                DELAY => raw.delay.as_deref(),
                MIN_INTERVAL => raw.min_interval.as_deref(),
                MAINTENANCE_WINDOW => raw.maintenance_window.as_deref(),
                _ => None,
            }
        };
        Timing::read(get, default_windows)
    }

    /// The raw held-reload record, if the workload carries one.
    pub fn held_record(&self) -> Option<&str> {
        self.timing.as_ref().and_then(|t| t.held.as_deref())
    }

    pub fn strategy(&self, configured: ReloadStrategy) -> ReloadStrategy {
        if self.annotations_only { ReloadStrategy::Annotations } else { configured }
    }

    /// Do both views decide every resource the same way (all `decide` reads but the markers)?
    pub fn same_decision_inputs(&self, other: &WorkloadView) -> bool {
        self.key == other.key
            && self.metadata_rules == other.metadata_rules
            && self.template_rules == other.template_rules
            && self.references == other.references
            && self.containers == other.containers
            && self.has_template == other.has_template
            && self.suspended == other.suspended
            && self.key_filters == other.key_filters
            && self.key_uses == other.key_uses
            && self.annotations_only == other.annotations_only
    }
}

/// The parts of a workload object a view is built from; `Workload::view_parts` gathers them.
#[derive(Debug, Clone, Copy)]
pub struct WorkloadParts<'a> {
    pub(crate) kind: WorkloadKind,
    pub(crate) metadata: &'a ObjectMeta,
    /// `None` for a kind instance without an inline pod template (a `workloadRef` Rollout).
    pub(crate) template: Option<&'a PodTemplateSpec>,
    pub(crate) suspended: bool,
    pub(crate) paused: bool,
    pub(crate) annotations_only: bool,
}

/// Builds the compact view of any workload (what the provided `Workload::view` returns).
pub fn build_view(parts: WorkloadParts<'_>, keys: &AnnotationKeys) -> WorkloadView {
    let WorkloadParts { kind, metadata: meta, template, suspended, paused, annotations_only } = parts;
    let annotations = meta.annotations.as_ref();
    let get = |k: &str| annotations.and_then(|a| a.get(k)).map(|v| Box::<str>::from(v.as_str()));
    let template_annotations =
        template.and_then(|t| t.metadata.as_ref()).and_then(|m| m.annotations.as_ref());
    let spec = template.and_then(|t| t.spec.as_ref());
    let filter = |k: &str| {
        get(k).or_else(|| template_annotations.and_then(|a| a.get(k)).map(|v| Box::<str>::from(v.as_str())))
    };
    let key_filters = [filter(&keys.configmap_keys), filter(&keys.secret_keys)];
    let key_uses = match (&key_filters, spec) {
        ([None, None], _) | (_, None) => Vec::new(),
        (_, Some(spec)) => discover_key_uses(spec),
    };
    WorkloadView {
        key: WorkloadKey::new(
            kind,
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default(),
        ),
        metadata_rules: ReloadAnnotations::from_map(annotations, keys),
        template_rules: ReloadAnnotations::from_map(template_annotations, keys),
        references: spec.map(discover_references).unwrap_or_default(),
        containers: spec
            .map(|s| s.containers.iter().map(|c| c.name.as_str().into()).collect())
            .unwrap_or_default(),
        markers: template.map(|t| Markers::read(t, keys)).unwrap_or_default(),
        has_template: template.is_some(),
        suspended,
        paused,
        pause_period: get(&keys.pause_period),
        paused_at: get(&keys.paused_at),
        hold_period: get(&keys.hold_period),
        restart_strategy: get(&keys.rollout_strategy).is_some_and(|s| s.trim() == "restart"),
        key_filters,
        key_uses,
        version: meta.resource_version.as_deref().and_then(ResourceVersion::parse),
        uid: meta.uid.as_deref().and_then(Uid::parse),
        shape: template.map(|t| TemplateShape::of(t, keys)).unwrap_or_default(),
        annotations_only,
        restart_by_eviction: get(crate::restart::RESTART).is_some(),
        timing: TimingAnnotations::of(get),
    }
}

#[cfg(test)]
mod tests;
