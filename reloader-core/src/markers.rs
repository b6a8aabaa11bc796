//! Markers: the env var or pod-template annotation that records what a workload last reloaded
//! for. Reading them from a template, the changes a reload makes to them, and applying those
//! changes to a template.

use k8s_openapi::api::core::v1::{Container, EnvVar, PodTemplateSpec};
use serde_json::{Value, json};

use crate::annotations::AnnotationKeys;
use crate::hash::DELETE_MARKER_HASH;
use crate::model::{ContentHash, ReloadStrategy, ResourceKey, ResourceKind};
use crate::naming::env_var_name;

const ENV_PREFIX: &str = "STAKATER_";

/// An env var whose name looks like a reloader marker (`STAKATER_*_CONFIGMAP|SECRET|...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvMarker {
    pub container: u16,
    /// Index of the entry in its container's `env` (a JSON patch addresses it by index);
    /// [`EnvMarker::NOT_IN_TEMPLATE`] for a marker recorded elsewhere (an Argo `restart`).
    pub position: u16,
    pub name: Box<str>,
    pub value: Box<str>,
    /// The entry has a `valueFrom` (a write of `value` must clear it).
    pub value_from: bool,
}

impl EnvMarker {
    pub const NOT_IN_TEMPLATE: u16 = u16::MAX;
}

/// The parsed `last-reloaded-from` annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnotationMarker {
    pub resource: ResourceKey,
    pub hash: ContentHash,
}

/// The markers a pod template carries now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Markers {
    pub env: Vec<EnvMarker>,
    pub annotation: Option<AnnotationMarker>,
}

/// What to do to a workload's markers for one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkerAction {
    /// Record `hash` (update, create, and delete under the annotations strategy).
    Set(ContentHash),
    /// Remove the env-var marker (delete under the env-vars strategy).
    Remove,
}

/// One marker change a reload applies. Several changes to one workload make one write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerChange {
    pub resource: ResourceKey,
    pub action: MarkerAction,
    pub strategy: ReloadStrategy,
    /// Index of the regular container that gets the env-var marker.
    pub container: u16,
}

impl Markers {
    pub fn read(template: &PodTemplateSpec, keys: &AnnotationKeys) -> Self {
        let mut env = Vec::new();
        if let Some(spec) = &template.spec {
            for (i, c) in spec.containers.iter().enumerate() {
                for (position, e) in c.env.iter().flatten().enumerate() {
                    if is_marker_name(&e.name) {
                        env.push(EnvMarker {
                            container: i as u16,
                            position: position as u16,
                            name: e.name.as_str().into(),
                            value: e.value.as_deref().unwrap_or_default().into(),
                            value_from: e.value_from.is_some(),
                        });
                    }
                }
            }
        }
        let annotation =
            template_annotation(template, &keys.last_reloaded_from).and_then(parse_annotation_marker);
        Markers { env, annotation }
    }

    /// The env-var marker value for a resource, on any container.
    pub fn env_value(&self, kind: ResourceKind, name: &str) -> Option<&str> {
        let wanted = env_var_name(kind, name);
        self.env.iter().find(|m| *m.name == *wanted).map(|m| &*m.value)
    }

    /// Does the workload already record `action` for `resource` under `strategy`?
    pub fn records(&self, resource: &ResourceKey, action: &MarkerAction, strategy: ReloadStrategy) -> bool {
        match (strategy, action) {
            (ReloadStrategy::EnvVars, MarkerAction::Set(hash)) => {
                self.env_value(resource.kind, &resource.name) == Some(hash.to_hex().as_str())
            }
            (ReloadStrategy::EnvVars, MarkerAction::Remove) => {
                self.env_value(resource.kind, &resource.name).is_none()
            }
            (ReloadStrategy::Annotations, MarkerAction::Set(hash)) => {
                self.annotation.as_ref().is_some_and(|a| a.resource == *resource && a.hash == *hash)
            }
            // Deletes under the annotations strategy are written as Set(delete-marker).
            (ReloadStrategy::Annotations, MarkerAction::Remove) => self
                .annotation
                .as_ref()
                .is_some_and(|a| a.resource == *resource && a.hash == DELETE_MARKER_HASH),
        }
    }

    /// The hash recorded for `resource` under `strategy`, if any (for the start-up catch-up).
    pub fn recorded_hash(&self, resource: &ResourceKey, strategy: ReloadStrategy) -> Option<ContentHash> {
        match strategy {
            ReloadStrategy::EnvVars => {
                self.env_value(resource.kind, &resource.name).and_then(ContentHash::from_hex)
            }
            ReloadStrategy::Annotations => {
                self.annotation.as_ref().filter(|a| a.resource == *resource).map(|a| a.hash)
            }
        }
    }
}

fn is_marker_name(name: &str) -> bool {
    name.starts_with(ENV_PREFIX)
        && ["_CONFIGMAP", "_SECRET", "_SECRETPROVIDERCLASS"].iter().any(|s| name.ends_with(s))
}

/// The `last-reloaded-from` value, with Stakater's field order; `containerRefs` is empty when
/// `container` is (an annotations map has no container).
pub fn annotation_marker_value(
    resource: &ResourceKey,
    hash: &ContentHash,
    container: &str,
    observed_at: i64,
) -> String {
    let container_refs = if container.is_empty() { String::new() } else { json!(container).to_string() };
    // serde_json's `preserve_order` is not enabled, so the order is written by hand.
    format!(
        "{{\"type\":{},\"name\":{},\"namespace\":{},\"hash\":{},\"containerRefs\":[{container_refs}],\"observedAt\":{}}}",
        json!(resource.kind.marker_type()),
        json!(&*resource.name),
        json!(&*resource.namespace),
        json!(hash.to_hex()),
        observed_at
    )
}

pub fn parse_annotation_marker(value: &str) -> Option<AnnotationMarker> {
    let v: Value = serde_json::from_str(value).ok()?;
    let kind = ResourceKind::from_marker_type(v.get("type")?.as_str()?)?;
    Some(AnnotationMarker {
        resource: ResourceKey::new(kind, v.get("namespace")?.as_str()?, v.get("name")?.as_str()?),
        hash: ContentHash::from_hex(v.get("hash")?.as_str()?)?,
    })
}

/// Applies marker changes to a pod template in place. Returns whether anything changed.
/// Used where the write carries a whole template (Jobs) or a CRD patch is derived from it.
pub fn apply_to_template(
    template: &mut PodTemplateSpec,
    changes: &[MarkerChange],
    keys: &AnnotationKeys,
    now_unix: i64,
) -> bool {
    let mut changed = false;
    for change in changes {
        let index = usize::from(change.container);
        // An annotations map (a declared kind's `annotations=`) has no container: its
        // annotation marker names none.
        let container_name = template
            .spec
            .as_ref()
            .and_then(|spec| spec.containers.get(index))
            .map(|c| c.name.clone())
            .unwrap_or_default();
        let env_name = env_var_name(change.resource.kind, &change.resource.name);
        match (change.strategy, &change.action) {
            (ReloadStrategy::EnvVars, MarkerAction::Set(hash)) => {
                let Some(container) = template.spec.as_mut().and_then(|spec| spec.containers.get_mut(index))
                else {
                    continue;
                };
                let env = container.env.get_or_insert_with(Vec::new);
                let value = hash.to_hex();
                match env.iter_mut().find(|e| e.name == env_name) {
                    Some(e) if e.value.as_deref() == Some(value.as_str()) && e.value_from.is_none() => {}
                    Some(e) => {
                        e.value = Some(value);
                        e.value_from = None;
                        changed = true;
                    }
                    None => {
                        env.push(EnvVar { name: env_name, value: Some(value), value_from: None });
                        changed = true;
                    }
                }
            }
            (ReloadStrategy::EnvVars, MarkerAction::Remove) => {
                // Remove it from every container: a stale copy elsewhere would still roll pods later.
                for c in template.spec.iter_mut().flat_map(|spec| spec.containers.iter_mut()) {
                    if let Some(env) = c.env.as_mut() {
                        let before = env.len();
                        env.retain(|e| e.name != env_name);
                        changed |= env.len() != before;
                    }
                }
            }
            (ReloadStrategy::Annotations, action) => {
                let hash = match action {
                    MarkerAction::Set(h) => *h,
                    MarkerAction::Remove => DELETE_MARKER_HASH,
                };
                let current =
                    template_annotation(template, &keys.last_reloaded_from).and_then(parse_annotation_marker);
                if current.is_some_and(|c| c.resource == change.resource && c.hash == hash) {
                    continue;
                }
                let value = annotation_marker_value(&change.resource, &hash, &container_name, now_unix);
                template
                    .metadata
                    .get_or_insert_with(Default::default)
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert(keys.last_reloaded_from.clone(), value);
                changed = true;
            }
        }
    }
    changed
}

/// The strategic-merge patch body for the pod template that applies `changes`, or `None` if
/// the template already records them all. Only the touched containers and keys are sent.
pub fn template_strategic_patch(
    template: &PodTemplateSpec,
    changes: &[MarkerChange],
    keys: &AnnotationKeys,
    now_unix: i64,
) -> Option<Value> {
    let after = with_changes(template, changes, keys, now_unix)?;
    let mut containers = Vec::new();
    for (before, after) in template_containers(template).iter().zip(template_containers(&after)) {
        let before_env = before.env.as_deref().unwrap_or_default();
        let after_env = after.env.as_deref().unwrap_or_default();
        let mut env = Vec::new();
        for e in after_env {
            if !before_env.contains(e) {
                let mut entry = json!({"name": e.name, "value": e.value});
                // A merge keeps fields the patch does not mention: a `valueFrom` left beside the
                // new `value` would make the API server reject the template.
                if before_env.iter().any(|b| b.name == e.name && b.value_from.is_some()) {
                    entry["valueFrom"] = Value::Null;
                }
                env.push(entry);
            }
        }
        for e in before_env {
            if !after_env.iter().any(|a| a.name == e.name) {
                env.push(json!({"name": e.name, "$patch": "delete"}));
            }
        }
        if !env.is_empty() {
            containers.push(json!({"name": after.name, "env": env}));
        }
    }
    let mut template_patch = serde_json::Map::new();
    if !containers.is_empty() {
        template_patch.insert("spec".into(), json!({ "containers": containers }));
    }
    let after_annotation = template_annotation(&after, &keys.last_reloaded_from);
    if template_annotation(template, &keys.last_reloaded_from) != after_annotation {
        template_patch.insert(
            "metadata".into(),
            json!({"annotations": {keys.last_reloaded_from.clone(): after_annotation}}),
        );
    }
    Some(json!({ "spec": { "template": Value::Object(template_patch) } }))
}

/// `template` with `changes` applied, or `None` when it already records them all.
pub(crate) fn with_changes(
    template: &PodTemplateSpec,
    changes: &[MarkerChange],
    keys: &AnnotationKeys,
    now_unix: i64,
) -> Option<PodTemplateSpec> {
    let mut after = template.clone();
    apply_to_template(&mut after, changes, keys, now_unix).then_some(after)
}

/// The regular containers of a pod template (none without a spec).
pub fn template_containers(template: &PodTemplateSpec) -> &[Container] {
    template.spec.as_ref().map(|s| s.containers.as_slice()).unwrap_or_default()
}

/// The value of the pod template's annotation `key`.
pub fn template_annotation<'a>(template: &'a PodTemplateSpec, key: &str) -> Option<&'a str> {
    template.metadata.as_ref()?.annotations.as_ref()?.get(key).map(String::as_str)
}

/// The template with every marker taken out: marker env vars of every container and init
/// container, and the `last-reloaded-from` annotation (an `env` or annotation map left empty
/// becomes absent). Two templates that differ only in their markers are equal after this; the
/// write fence compares a Job reloader creates with its origin this way (docs/security.md).
pub fn strip_markers(template: &mut PodTemplateSpec, keys: &AnnotationKeys) {
    if let Some(spec) = template.spec.as_mut() {
        for container in spec.containers.iter_mut().chain(spec.init_containers.iter_mut().flatten()) {
            if let Some(env) = container.env.as_mut() {
                env.retain(|e| !is_marker_name(&e.name));
                if env.is_empty() {
                    container.env = None;
                }
            }
        }
    }
    if let Some(meta) = template.metadata.as_mut()
        && let Some(annotations) = meta.annotations.as_mut()
    {
        annotations.remove(&keys.last_reloaded_from);
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
}

#[cfg(test)]
mod tests;
