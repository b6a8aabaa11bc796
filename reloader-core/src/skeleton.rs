//! The object a workload view stands for, so a write needs no read (docs/behaviour.md, "What is
//! read before a write").
//!
//! A [`Skeleton`] holds every part of a workload a write reads: identity (name, namespace, uid,
//! resourceVersion), the annotations that steer a write (pause period, paused-at, hold, Argo's
//! restart strategy and record), `spec.paused`, and a pod template with the container names,
//! every marker at its index in its container's `env` (other entries as blank placeholders) and
//! the parents a JSON patch adds or edits. A backend turns it into its own object type and builds
//! the write with the very code it uses on an object read fresh, so both give the same body for
//! the same object (the backends' tests check that on every case of their write tables).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, EnvVar, EnvVarSource, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::annotations::AnnotationKeys;
use crate::markers::{AnnotationMarker, EnvMarker, annotation_marker_value};
use crate::views::{TemplateShape, WorkloadView};

/// Stands in a `last-reloaded-from` annotation that is present but does not parse.
const UNREADABLE_MARKER: &str = "-";

/// The parts of a workload object a write reads, rebuilt from its view.
#[derive(Debug, Clone, PartialEq)]
pub struct Skeleton {
    pub metadata: ObjectMeta,
    /// `None` for a kind instance without an inline template (a `workloadRef` Rollout).
    pub template: Option<PodTemplateSpec>,
    pub paused: bool,
}

/// The skeleton of the object `view` was built from, or `None` when the view cannot stand for it
/// (no resourceVersion or uid to guard and report the write with, too many containers to
/// describe): the write then reads the object.
pub fn skeleton(view: &WorkloadView, keys: &AnnotationKeys) -> Option<Skeleton> {
    let version = view.version?;
    let uid = view.uid?;
    if view.containers.len() > TemplateShape::MAX_CONTAINERS {
        return None;
    }
    let mut annotations = BTreeMap::new();
    let mut annotate = |key: &str, value: Option<&str>| {
        if let Some(value) = value {
            annotations.insert(key.to_owned(), value.to_owned());
        }
    };
    annotate(&keys.pause_period, view.pause_period.as_deref());
    annotate(&keys.paused_at, view.paused_at.as_deref());
    annotate(&keys.hold_period, view.hold_period.as_deref());
    if view.restart_strategy {
        annotate(&keys.rollout_strategy, Some("restart"));
        // A restart Rollout's view markers already include its record; giving it back does not
        // change them (recording is idempotent).
        let record = view.markers.annotation.as_ref().map(marker_value);
        annotate(&keys.last_reloaded_from, record.as_deref());
    }
    let metadata = ObjectMeta {
        name: Some(view.key.name.to_string()),
        namespace: Some(view.key.namespace.to_string()),
        uid: Some(uid.to_string()),
        resource_version: Some(version.to_string()),
        annotations: (!annotations.is_empty()).then_some(annotations),
        ..ObjectMeta::default()
    };
    Some(Skeleton {
        metadata,
        template: view.has_template.then(|| template(view, keys)),
        paused: view.paused,
    })
}

fn template(view: &WorkloadView, keys: &AnnotationKeys) -> PodTemplateSpec {
    let shape = view.shape;
    let containers = view
        .containers
        .iter()
        .enumerate()
        .map(|(i, name)| Container {
            name: name.to_string(),
            env: env(view, i, shape.env & (1 << i) != 0),
            ..Container::default()
        })
        .collect();
    let metadata = shape.metadata.then(|| ObjectMeta {
        annotations: shape.annotations.then(|| {
            let mut annotations = BTreeMap::new();
            if shape.marker_annotation {
                let value = view.markers.annotation.as_ref().map(marker_value);
                annotations.insert(
                    keys.last_reloaded_from.clone(),
                    value.unwrap_or_else(|| UNREADABLE_MARKER.into()),
                );
            }
            annotations
        }),
        ..ObjectMeta::default()
    });
    PodTemplateSpec { metadata, spec: Some(PodSpec { containers, ..PodSpec::default() }) }
}

/// Container `index`'s env: its markers at their indexes, blank placeholders between them.
fn env(view: &WorkloadView, index: usize, non_empty: bool) -> Option<Vec<EnvVar>> {
    let mut markers: Vec<&EnvMarker> =
        view.markers.env.iter().filter(|m| usize::from(m.container) == index).collect();
    if markers.is_empty() {
        return non_empty.then(|| vec![EnvVar::default()]);
    }
    markers.sort_by_key(|m| m.position);
    let mut env = Vec::new();
    for marker in markers {
        if marker.position != EnvMarker::NOT_IN_TEMPLATE {
            env.resize(usize::from(marker.position).max(env.len()), EnvVar::default());
        }
        env.push(EnvVar {
            name: marker.name.to_string(),
            value: (!marker.value.is_empty()).then(|| marker.value.to_string()),
            value_from: marker.value_from.then(EnvVarSource::default),
        });
    }
    Some(env)
}

/// A `last-reloaded-from` value that parses back to `marker` (its container and time are not
/// kept: no write reads them).
fn marker_value(marker: &AnnotationMarker) -> String {
    annotation_marker_value(&marker.resource, &marker.hash, "", 0)
}

#[cfg(test)]
mod tests;
