//! The `restart` strategy: a `restartAt` merge patch, recorded on the Rollout's own metadata.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use reloader_core::annotations::AnnotationKeys;
use reloader_core::hash::DELETE_MARKER_HASH;
use reloader_core::markers::{
    AnnotationMarker, EnvMarker, MarkerAction, MarkerChange, Markers, annotation_marker_value,
    parse_annotation_marker, template_containers,
};
use reloader_core::naming::env_var_name;
use reloader_core::views::WorkloadView;
use reloader_core::workload::{PatchKind, Precondition, WorkloadWrite, WriteContext};
use serde_json::json;

use crate::Rollout;

/// The `rollout-strategy` annotation value that selects `spec.restartAt` restarts.
const ROLLOUT_STRATEGY_RESTART: &str = "restart";

/// `rollout-strategy: restart` (the same rule as the view's `restart_strategy`).
pub(crate) fn restarts(rollout: &Rollout, keys: &AnnotationKeys) -> bool {
    annotation(rollout, &keys.rollout_strategy).is_some_and(|s| s.trim() == ROLLOUT_STRATEGY_RESTART)
}

/// Under the `restart` strategy, makes the view's markers say what the Rollout's metadata records.
pub(crate) fn overlay_restart_record(rollout: &Rollout, keys: &AnnotationKeys, view: &mut WorkloadView) {
    if view.restart_strategy
        && let Some(recorded) = restart_record(rollout, keys)
    {
        overlay(&mut view.markers, recorded);
    }
}

/// The marker a `restart` reload recorded on the Rollout's own metadata.
fn restart_record(rollout: &Rollout, keys: &AnnotationKeys) -> Option<AnnotationMarker> {
    annotation(rollout, &keys.last_reloaded_from).and_then(parse_annotation_marker)
}

fn annotation<'r>(rollout: &'r Rollout, key: &str) -> Option<&'r str> {
    rollout.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}

/// A merge patch setting `spec.restartAt` and recording the last pending change on the
/// Rollout's metadata; `None` if every change is recorded already.
pub(crate) fn restart_write(
    rollout: &Rollout,
    template: &PodTemplateSpec,
    changes: &[MarkerChange],
    ctx: &WriteContext<'_>,
) -> Option<WorkloadWrite> {
    let mut markers = Markers::read(template, ctx.keys);
    if let Some(recorded) = restart_record(rollout, ctx.keys) {
        overlay(&mut markers, recorded);
    }
    let last = changes.iter().rfind(|c| !markers.records(&c.resource, &c.action, c.strategy))?;
    let hash = match last.action {
        MarkerAction::Set(hash) => hash,
        MarkerAction::Remove => DELETE_MARKER_HASH,
    };
    let containers = template_containers(template);
    let container = containers.get(usize::from(last.container)).map_or("", |c| c.name.as_str());
    let record = annotation_marker_value(&last.resource, &hash, container, ctx.now_unix);
    let mut body = json!({
        "metadata": {"annotations": {ctx.keys.last_reloaded_from.clone(): record}},
        "spec": {"restartAt": ctx.now_rfc3339},
    });
    // A restart carries the time: replayed on a Rollout that already records it, it would
    // restart the pods again. It applies only to the version it was built from (409 otherwise).
    let precondition = Precondition::read_at(&rollout.metadata);
    if let Precondition::ResourceVersion(version) = &precondition {
        body["metadata"]["resourceVersion"] = json!(version);
    }
    Some(WorkloadWrite::Patch { kind: PatchKind::Merge, body, precondition })
}

/// Makes `markers` say what `recorded` says, under both strategies: the annotation marker, and
/// the env-var marker of that resource (set to the hash, or absent after a delete).
fn overlay(markers: &mut Markers, recorded: AnnotationMarker) {
    let name = env_var_name(recorded.resource.kind, &recorded.resource.name);
    if recorded.hash == DELETE_MARKER_HASH {
        markers.env.retain(|m| *m.name != *name);
    } else {
        let value: Box<str> = recorded.hash.to_hex().into();
        match markers.env.iter_mut().find(|m| *m.name == *name) {
            Some(marker) => marker.value = value,
            None => markers.env.push(EnvMarker {
                container: 0,
                position: EnvMarker::NOT_IN_TEMPLATE,
                name: name.into(),
                value,
                value_from: false,
            }),
        }
    }
    markers.annotation = Some(recorded);
}
