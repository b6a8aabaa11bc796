//! Rollout as a core `Workload`: a JSON patch of the pod template, or a `restartAt` restart.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use reloader_core::annotations::AnnotationKeys;
use reloader_core::hash::DELETE_MARKER_HASH;
use reloader_core::json_patch::template_json_patch;
use reloader_core::markers::{
    AnnotationMarker, EnvMarker, MarkerAction, MarkerChange, Markers, annotation_marker_value,
    parse_annotation_marker,
};
use reloader_core::model::WorkloadKind;
use reloader_core::naming::env_var_name;
use reloader_core::views::{WorkloadView, build_view};
use reloader_core::workload::{
    PatchKind, Workload, WorkloadWrite, WriteContext, WriteError, checked_template,
};
use serde_json::json;

use crate::{ROLLOUT_STRATEGY_RESTART, Rollout};

/// Where the pod template sits in the object, as a JSON pointer.
const TEMPLATE_POINTER: &str = "/spec/template";

impl Workload for Rollout {
    fn kind(&self) -> WorkloadKind {
        WorkloadKind::Rollout
    }

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn pod_template(&self) -> Option<&PodTemplateSpec> {
        self.spec.template.as_ref()
    }

    fn paused(&self) -> bool {
        self.spec.paused.unwrap_or(false)
    }

    /// The provided view, except that a `restart` Rollout's markers include what its own
    /// metadata records (its template never changes, so that is where restarts are recorded).
    fn view(&self, keys: &AnnotationKeys) -> WorkloadView {
        let mut view = build_view(self.view_parts(), keys);
        if view.restart_strategy
            && let Some(recorded) = self.restart_record(keys)
        {
            overlay(&mut view.markers, recorded);
        }
        view
    }

    fn reload_write(
        &self,
        changes: &[MarkerChange],
        ctx: &WriteContext<'_>,
    ) -> Result<Option<WorkloadWrite>, WriteError> {
        if changes.is_empty() {
            return Ok(None);
        }
        let template = checked_template(self, changes)?;
        if self.restarts(ctx.keys) {
            return Ok(self.restart_write(template, changes, ctx));
        }
        let resource_version = self.metadata.resource_version.as_deref().unwrap_or_default();
        let body = template_json_patch(
            template,
            TEMPLATE_POINTER,
            resource_version,
            changes,
            ctx.keys,
            ctx.now_unix,
        );
        Ok(body.map(|body| WorkloadWrite::Patch { kind: PatchKind::Json, body }))
    }
}

impl Rollout {
    /// `rollout-strategy: restart` (the same rule as the view's `restart_strategy`).
    fn restarts(&self, keys: &AnnotationKeys) -> bool {
        self.annotation(&keys.rollout_strategy).is_some_and(|s| s.trim() == ROLLOUT_STRATEGY_RESTART)
    }

    /// The marker a `restart` reload recorded on the Rollout's own metadata.
    fn restart_record(&self, keys: &AnnotationKeys) -> Option<AnnotationMarker> {
        self.annotation(&keys.last_reloaded_from).and_then(parse_annotation_marker)
    }

    fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata.annotations.as_ref()?.get(key).map(String::as_str)
    }

    /// A merge patch setting `spec.restartAt` and recording the last pending change on the
    /// Rollout's metadata; `None` if every change is recorded already.
    fn restart_write(
        &self,
        template: &PodTemplateSpec,
        changes: &[MarkerChange],
        ctx: &WriteContext<'_>,
    ) -> Option<WorkloadWrite> {
        let mut markers = Markers::read(template, ctx.keys);
        if let Some(recorded) = self.restart_record(ctx.keys) {
            overlay(&mut markers, recorded);
        }
        let last = changes.iter().rfind(|c| !markers.records(&c.resource, &c.action, c.strategy))?;
        let hash = match last.action {
            MarkerAction::Set(hash) => hash,
            MarkerAction::Remove => DELETE_MARKER_HASH,
        };
        let containers = template.spec.as_ref().map(|s| s.containers.as_slice()).unwrap_or_default();
        let container = containers.get(usize::from(last.container)).map_or("", |c| c.name.as_str());
        let record = annotation_marker_value(&last.resource, &hash, container, ctx.now_unix);
        let body = json!({
            "metadata": {"annotations": {ctx.keys.last_reloaded_from.clone(): record}},
            "spec": {"restartAt": ctx.now_rfc3339},
        });
        Some(WorkloadWrite::Patch { kind: PatchKind::Merge, body })
    }
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
            None => markers.env.push(EnvMarker { container: 0, name: name.into(), value }),
        }
    }
    markers.annotation = Some(recorded);
}
