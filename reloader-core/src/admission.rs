//! The pure half of the mutating admission webhook (docs/beyond-stakater.md §3): the RFC 6902 operations that
//! keep reload markers across re-applies, and stamp them on workloads as they are created.
//!
//! - [`preserve_markers`] (UPDATE): a marker the old object carries and the new one lacks is
//!   copied into the new one, so re-applying a manifest that never mentioned the marker changes
//!   nothing in the pod template, hence starts no rollout. A marker the new object carries is
//!   never touched, so the controller's own writes are never reverted by this.
//! - [`stamp_markers`] (CREATE): a workload that reloads for some resources gets their markers
//!   with the hashes the index holds now, so the first change after creation is recognised
//!   even when it happens while no controller is running (the start-up catch-up compares
//!   markers with current hashes).
//!
//! Both read the objects as JSON, exactly as the API server sends them, and address the pod
//! template by JSON pointer, so one implementation serves built-in kinds and CRDs alike. Every
//! operation is an `add` of something absent: applied to the object it was computed from, it
//! cannot fail and cannot overwrite anything.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodTemplateSpec};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::annotations::AnnotationKeys;
use crate::decide::{DecideOptions, Decision, ExplicitEntry, decide, explicit_entries};
use crate::index::Index;
use crate::json_patch::escape_pointer_token;
use crate::keys::marker_hash;
use crate::markers::{Markers, annotation_marker_value, template_annotation, template_containers};
use crate::model::{ReloadStrategy, ResourceKey, ResourceKind, WorkloadKind};
use crate::naming::env_var_name;
use crate::views::{ResourceView, WorkloadView};

/// Objects carrying this label with the value [`OPT_OUT_VALUE`] are never mutated.
pub(crate) const OPT_OUT_LABEL: &str = "reloader.stakater.com/webhook";
pub(crate) const OPT_OUT_VALUE: &str = "skip";

/// Whether the object opted out with `reloader.stakater.com/webhook: skip`.
pub fn opted_out(object: &Value) -> bool {
    object.pointer("/metadata/labels").and_then(|labels| labels.get(OPT_OUT_LABEL)).and_then(Value::as_str)
        == Some(OPT_OUT_VALUE)
}

/// UPDATE: the operations that copy every marker `old` carries and `new` lacks into `new`;
/// `pointer` is where the kind keeps its pod template (the controller's kind registry says).
///
/// Env-var markers follow their container by name (a container that is gone takes its marker
/// with it); the `last-reloaded-from` template annotation is copied when the new template has
/// none; a `restart` Rollout also keeps the marker on its own metadata. A Job's template is
/// immutable after creation, so nothing is copied into one.
pub fn preserve_markers(
    kind: WorkloadKind,
    pointer: &str,
    old: &Value,
    new: &Value,
    keys: &AnnotationKeys,
) -> Vec<Value> {
    let mut ops = Vec::new();
    if kind == WorkloadKind::Job {
        return ops;
    }
    if let (Some(old_template), Some(new_template)) = (pod_template(old, pointer), pod_template(new, pointer))
    {
        copy_env_markers(&old_template, &new_template, pointer, keys, &mut ops);
        if let Some(value) = template_annotation(&old_template, &keys.last_reloaded_from)
            && template_annotation(&new_template, &keys.last_reloaded_from).is_none()
        {
            let metadata = new_template.metadata.as_ref();
            let target = AnnotationsAt {
                metadata: &format!("{pointer}/metadata"),
                has_metadata: metadata.is_some(),
                has_annotations: metadata.is_some_and(|m| m.annotations.is_some()),
            };
            ops.push(target.add(&keys.last_reloaded_from, value));
        }
    }
    if kind == WorkloadKind::Rollout
        && restarts(new, keys)
        && let Some(value) = object_annotation(old, &keys.last_reloaded_from)
        && object_annotation(new, &keys.last_reloaded_from).is_none()
    {
        ops.push(object_annotations(new).add(&keys.last_reloaded_from, value));
    }
    ops
}

/// CREATE (`pointer` as for [`preserve_markers`]): the operations that record, for every
/// resource `view` reloads for, the hash the
/// index holds now, as the configured strategy records it. Resources the new object already
/// has a marker for are left alone, and so is an object that carries the annotation marker
/// under the annotations strategy (it records one resource, and it is the author's).
///
/// The annotation marker (and a `restart` Rollout's metadata marker) names a single resource:
/// of several, the last in key order is recorded, as a reload of several would record it.
///
/// `view` must be the view of `new` with its namespace filled in (a CREATE may leave it to the
/// request); `now_unix` goes into the annotation marker's `observedAt`.
pub fn stamp_markers(
    new: &Value,
    pointer: &str,
    view: &WorkloadView,
    index: &Index,
    opts: &DecideOptions,
    keys: &AnnotationKeys,
    now_unix: i64,
) -> Vec<Value> {
    let targets = reload_targets(view, index, opts);
    let Some(&(last, last_container)) = targets.last() else { return Vec::new() };
    if view.key.kind == WorkloadKind::Rollout && view.restart_strategy {
        // A `restart` Rollout records reloads on its own metadata, never in its template.
        if object_annotation(new, &keys.last_reloaded_from).is_some() {
            return Vec::new();
        }
        let value = annotation_marker_value(
            &last.key,
            &marker_hash(view, last),
            container_name(view, last_container),
            now_unix,
        );
        return vec![object_annotations(new).add(&keys.last_reloaded_from, &value)];
    }

    let Some(template) = pod_template(new, pointer) else { return Vec::new() };
    let strategy = view.strategy(opts.strategy);
    template_marker_ops(&template, pointer, view, &targets, strategy, keys, now_unix, Existing::Keep)
}

/// UPDATE that changes the pod template anyway (docs/beyond-stakater.md §11): the operations that
/// bring every marker of `new` up to the hash the index holds now, so the rollout the update
/// starts is also the reload, and the controller, finding the markers current, writes nothing.
/// `new` is the object after [`preserve_markers`]' operations; these apply after them.
///
/// A stale env-var marker is replaced in place, a missing one added; the annotation marker is
/// set (with the last resource, as [`stamp_markers`] does) unless it already records a current
/// hash. A `restart` Rollout, which records reloads outside its template, is left alone.
pub fn refresh_markers(
    new: &Value,
    pointer: &str,
    view: &WorkloadView,
    index: &Index,
    opts: &DecideOptions,
    keys: &AnnotationKeys,
    now_unix: i64,
) -> Vec<Value> {
    if view.key.kind == WorkloadKind::Rollout && view.restart_strategy {
        return Vec::new();
    }
    let Some(template) = pod_template(new, pointer) else { return Vec::new() };
    let targets = reload_targets(view, index, opts);
    let strategy = view.strategy(opts.strategy);
    template_marker_ops(&template, pointer, view, &targets, strategy, keys, now_unix, Existing::Refresh)
}

/// What [`template_marker_ops`] does with a marker the template already carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Existing {
    /// CREATE: the author's marker stays as it is.
    Keep,
    /// UPDATE that rolls anyway: a stale marker is brought up to the current hash.
    Refresh,
}

/// The operations that record, in the pod template at `pointer`, the current hash of every
/// resource in `targets` as `strategy` records it: a missing env-var marker is added to its
/// container (a stale one replaced in place when refreshing); the annotation marker, which names
/// the last resource, is set unless the template carries one (when refreshing: a current one).
#[allow(clippy::too_many_arguments)]
fn template_marker_ops(
    template: &PodTemplateSpec,
    pointer: &str,
    view: &WorkloadView,
    targets: &[(&ResourceView, usize)],
    strategy: ReloadStrategy,
    keys: &AnnotationKeys,
    now_unix: i64,
    existing: Existing,
) -> Vec<Value> {
    let Some(&(last, last_container)) = targets.last() else { return Vec::new() };
    let mut ops = Vec::new();
    match strategy {
        ReloadStrategy::EnvVars => {
            let containers = template_containers(template);
            let mut added: BTreeMap<usize, Vec<Value>> = BTreeMap::new();
            for &(resource, container) in targets {
                let (name, hash) = (
                    env_var_name(resource.key.kind, &resource.key.name),
                    marker_hash(view, resource).to_hex(),
                );
                let found = containers.iter().enumerate().find_map(|(c, spec)| {
                    spec.env
                        .iter()
                        .flatten()
                        .enumerate()
                        .find(|(_, e)| e.name == name)
                        .map(|(i, e)| (c, i, e))
                });
                match found {
                    Some((c, i, var))
                        if existing == Existing::Refresh && var.value.as_deref() != Some(&hash) =>
                    {
                        let path = format!("{pointer}/spec/containers/{c}/env/{i}/value");
                        ops.push(json!({"op": "replace", "path": path, "value": hash}));
                    }
                    Some(_) => {}
                    None => added.entry(container).or_default().push(json!({"name": name, "value": hash})),
                }
            }
            append_env_entries(pointer, containers, added, &mut ops);
        }
        ReloadStrategy::Annotations => {
            let kept = match existing {
                Existing::Keep => template_annotation(template, &keys.last_reloaded_from).is_some(),
                Existing::Refresh => Markers::read(template, keys).annotation.is_some_and(|recorded| {
                    targets
                        .iter()
                        .any(|(r, _)| r.key == recorded.resource && marker_hash(view, r) == recorded.hash)
                }),
            };
            if !kept {
                // `add` on an existing member replaces it.
                ops.push(annotation_marker_op(
                    template,
                    pointer,
                    view,
                    (last, last_container),
                    keys,
                    now_unix,
                ));
            }
        }
    }
    ops
}

/// UPDATE of a Deployment whose template changes (docs/beyond-stakater.md §11): pause it for
/// `hold`, recording `paused-at` and the hold period, so a ConfigMap change of the same release
/// arriving just after is written while it is paused, and the resume rolls both at once. The
/// controller resumes it as it resumes a pause period. Nothing for other kinds, a zero hold, a
/// Deployment already paused, or one that reloads for nothing.
pub fn hold_release(
    new: &Value,
    view: &WorkloadView,
    index: &Index,
    opts: &DecideOptions,
    keys: &AnnotationKeys,
    hold: std::time::Duration,
    now_rfc3339: &str,
) -> Vec<Value> {
    let paused = new.pointer("/spec/paused").and_then(Value::as_bool) == Some(true);
    if view.key.kind != WorkloadKind::Deployment || hold.is_zero() || paused || new.get("spec").is_none() {
        return Vec::new();
    }
    if reload_targets(view, index, opts).is_empty() {
        return Vec::new();
    }
    let first = object_annotations(new);
    let then = AnnotationsAt { metadata: "/metadata", has_metadata: true, has_annotations: true };
    vec![
        json!({"op": "add", "path": "/spec/paused", "value": true}),
        first.add(&keys.paused_at, now_rfc3339),
        then.add(&keys.hold_period, &format!("{}ms", hold.as_millis())),
    ]
}

/// The resources `view` reloads for, with the container that gets each env-var marker.
fn reload_targets<'a>(
    view: &WorkloadView,
    index: &'a Index,
    opts: &DecideOptions,
) -> Vec<(&'a ResourceView, usize)> {
    candidate_resources(view, index)
        .into_iter()
        .filter_map(|resource| match decide(view, resource, opts) {
            Decision::Reload { container, .. } => Some((resource, usize::from(container))),
            Decision::Skip(_) => None,
        })
        .collect()
}

/// The operation that records `last` (a resource and its container) in the template's
/// `last-reloaded-from` annotation, with the hash `view` records for it.
fn annotation_marker_op(
    template: &PodTemplateSpec,
    pointer: &str,
    view: &WorkloadView,
    (last, container): (&ResourceView, usize),
    keys: &AnnotationKeys,
    now_unix: i64,
) -> Value {
    let hash = marker_hash(view, last);
    let value = annotation_marker_value(&last.key, &hash, container_name(view, container), now_unix);
    let metadata = template.metadata.as_ref();
    let target = AnnotationsAt {
        metadata: &format!("{pointer}/metadata"),
        has_metadata: metadata.is_some(),
        has_annotations: metadata.is_some_and(|m| m.annotations.is_some()),
    };
    target.add(&keys.last_reloaded_from, &value)
}

fn container_name(view: &WorkloadView, index: usize) -> &str {
    view.containers.get(index).map_or("", |name| &**name)
}

/// Does `new`'s pod template differ from `old`'s (a rollout starts whatever the markers)?
pub fn template_changes(old: &Value, new: &Value, pointer: &str) -> bool {
    old.pointer(pointer) != new.pointer(pointer)
}

/// The resources of the workload's namespace that it might reload for, in key order: those
/// it references or names in an explicit list, and every resource of a kind for which an
/// explicit list holds a pattern. `decide` has the last word.
pub(crate) fn candidate_resources<'a>(view: &WorkloadView, index: &'a Index) -> Vec<&'a ResourceView> {
    const KINDS: [ResourceKind; 3] =
        [ResourceKind::ConfigMap, ResourceKind::Secret, ResourceKind::SecretProviderClass];
    let namespace = &*view.key.namespace;
    let mut named: Vec<ResourceKey> =
        view.references.iter().map(|r| ResourceKey::new(r.kind, namespace, &r.name)).collect();
    let mut pattern_kinds = Vec::new();
    for kind in KINDS {
        let slot = crate::annotations::kind_index(kind);
        let lists = [&view.metadata_rules, &view.template_rules]
            .into_iter()
            .filter_map(|rules| rules.explicit[slot].as_deref());
        for entry in lists.flat_map(explicit_entries) {
            match entry {
                ExplicitEntry::Name(name) => named.push(ResourceKey::new(kind, namespace, name)),
                ExplicitEntry::Pattern(_) => pattern_kinds.push(kind),
            }
        }
    }
    let mut found: Vec<&ResourceView> = named.iter().filter_map(|key| index.resource(key)).collect();
    if !pattern_kinds.is_empty() {
        found.extend(
            index
                .resources()
                .filter(|r| &*r.key.namespace == namespace && pattern_kinds.contains(&r.key.kind)),
        );
    }
    found.sort_unstable_by(|a, b| a.key.cmp(&b.key));
    found.dedup_by(|a, b| a.key == b.key);
    found
}

/// The pod template at `pointer`, typed; `None` if absent or not a pod template.
fn pod_template(object: &Value, pointer: &str) -> Option<PodTemplateSpec> {
    object.pointer(pointer).filter(|t| t.is_object()).and_then(|t| PodTemplateSpec::deserialize(t).ok())
}

fn object_annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object.pointer("/metadata/annotations")?.get(key)?.as_str()
}

fn restarts(object: &Value, keys: &AnnotationKeys) -> bool {
    object_annotation(object, &keys.rollout_strategy).is_some_and(|s| s.trim() == "restart")
}

fn object_annotations(object: &Value) -> AnnotationsAt<'static> {
    let metadata = object.get("metadata").filter(|m| m.is_object());
    AnnotationsAt {
        metadata: "/metadata",
        has_metadata: metadata.is_some(),
        has_annotations: metadata.and_then(|m| m.get("annotations")).is_some_and(Value::is_object),
    }
}

/// Copies the env-var markers of `old` that `new` lacks, container by container name, each to the
/// place it held in `old`'s list: a re-apply that dropped them then gets back exactly the old list
/// (the writer's strategic merge puts a new marker first, an append would reorder the list and
/// roll the pods).
fn copy_env_markers(
    old: &PodTemplateSpec,
    new: &PodTemplateSpec,
    pointer: &str,
    keys: &AnnotationKeys,
    ops: &mut Vec<Value>,
) {
    let (old_containers, new_containers) = (template_containers(old), template_containers(new));
    let carried = Markers::read(new, keys);
    let mut added: BTreeMap<usize, Vec<(usize, Value)>> = BTreeMap::new();
    for marker in Markers::read(old, keys).env {
        // Carried on any container: the new object's word, even if its author moved it.
        if carried.env.iter().any(|m| m.name == marker.name)
            || added.values().flatten().any(|(_, e)| e["name"] == *marker.name)
        {
            continue;
        }
        let Some(old_container) = old_containers.get(usize::from(marker.container)) else { continue };
        let Some(target) = new_containers.iter().position(|c| c.name == old_container.name) else { continue };
        let place =
            old_container.env.iter().flatten().position(|e| e.name == *marker.name).unwrap_or(usize::MAX);
        added.entry(target).or_default().push((place, json!({"name": marker.name, "value": marker.value})));
    }
    for (container, mut entries) in added {
        // In the old list's order, so each insertion lands where it stood.
        entries.sort_by_key(|(place, _)| *place);
        let existing = new_containers[container].env.as_ref().map_or(0, Vec::len);
        if existing == 0 {
            env_add_ops(pointer, container, existing, entries.into_iter().map(|(_, e)| e).collect(), ops);
            continue;
        }
        let path = format!("{pointer}/spec/containers/{container}/env");
        for (length, (place, entry)) in (existing..).zip(entries) {
            let at = if place < length { place.to_string() } else { "-".to_owned() };
            ops.push(json!({"op": "add", "path": format!("{path}/{at}"), "value": entry}));
        }
    }
}

/// [`env_add_ops`] for each container of `added`.
fn append_env_entries(
    pointer: &str,
    containers: &[Container],
    added: BTreeMap<usize, Vec<Value>>,
    ops: &mut Vec<Value>,
) {
    for (container, entries) in added {
        let existing = containers.get(container).map_or(0, |c| c.env.as_ref().map_or(0, Vec::len));
        env_add_ops(pointer, container, existing, entries, ops);
    }
}

/// Appends `entries` to container `container`'s env list, creating the list when it is empty
/// or absent (`add` on an existing member replaces it, which covers `env: []` and `env: null`).
fn env_add_ops(pointer: &str, container: usize, existing: usize, entries: Vec<Value>, ops: &mut Vec<Value>) {
    let path = format!("{pointer}/spec/containers/{container}/env");
    if existing == 0 {
        ops.push(json!({"op": "add", "path": path, "value": entries}));
    } else {
        ops.extend(
            entries
                .into_iter()
                .map(|entry| json!({"op": "add", "path": format!("{path}/-"), "value": entry})),
        );
    }
}

/// An annotation map at `{metadata}/annotations`, and which of its parents exist.
struct AnnotationsAt<'a> {
    metadata: &'a str,
    has_metadata: bool,
    has_annotations: bool,
}

impl AnnotationsAt<'_> {
    /// The operation that adds `key: value`, creating the missing parents.
    fn add(&self, key: &str, value: &str) -> Value {
        let metadata = self.metadata;
        if !self.has_metadata {
            json!({"op": "add", "path": metadata, "value": {"annotations": {key: value}}})
        } else if !self.has_annotations {
            json!({"op": "add", "path": format!("{metadata}/annotations"), "value": {key: value}})
        } else {
            let path = format!("{metadata}/annotations/{}", escape_pointer_token(key));
            json!({"op": "add", "path": path, "value": value})
        }
    }
}

#[cfg(test)]
mod tests;
