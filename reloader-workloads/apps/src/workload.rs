//! The one `Workload` implementation for every apps/v1 kind.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use reloader_core::markers::{MarkerChange, template_strategic_patch};
use reloader_core::model::WorkloadKind;
use reloader_core::workload::{PatchKind, Precondition, Workload, WorkloadWrite, WriteContext};
use serde_json::{Value, json};

use crate::kind::AppsKind;
use crate::pause;

/// An apps/v1 object seen as a [`Workload`]. A borrowing wrapper: the orphan rule forbids
/// implementing the core trait on k8s-openapi types directly, and nothing needs to be copied.
#[derive(Debug)]
pub struct AppsWorkload<'a, K>(pub &'a K);

// Derived Clone/Copy would require `K: Copy`; a shared reference is always copyable.
impl<K> Clone for AppsWorkload<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for AppsWorkload<'_, K> {}

impl<K: AppsKind> Workload for AppsWorkload<'_, K> {
    fn kind(&self) -> WorkloadKind {
        K::WORKLOAD_KIND
    }

    fn metadata(&self) -> &ObjectMeta {
        self.0.metadata()
    }

    fn pod_template(&self) -> Option<&PodTemplateSpec> {
        self.0.template()
    }

    fn paused(&self) -> bool {
        self.0.paused()
    }

    /// A strategic-merge patch of the touched containers' env entries or of the marker
    /// annotation. A Deployment with a pause period that is not paused yet is paused by the same
    /// patch, so pausing and reloading is one write.
    fn template_write(
        &self,
        template: &PodTemplateSpec,
        changes: &[MarkerChange],
        ctx: &WriteContext<'_>,
    ) -> Option<WorkloadWrite> {
        let mut body = template_strategic_patch(template, changes, ctx.keys, ctx.now_unix)?;
        // A paused Deployment stays as it is: paused by a user (left alone, docs/compatibility.md §8), or by
        // an earlier reload whose `paused-at` must keep counting from the first change.
        let pauses = K::PAUSABLE && !self.0.paused() && pause::period(self.metadata(), ctx.keys).is_some();
        if pauses {
            body["spec"]["paused"] = Value::Bool(true);
            body["metadata"] = json!({"annotations": {ctx.keys.paused_at.clone(): ctx.now_rfc3339}});
        }
        // A write carrying the time (the annotation marker's `observedAt`, `paused-at`) would
        // change the object again if the marker or pause were already there: it applies only to
        // the version it was built from (a 409 otherwise, then a fresh read). An env-var write
        // is the same whenever it is sent, so it goes unguarded (docs/behaviour.md).
        let precondition = if pauses || body["spec"]["template"].get("metadata").is_some() {
            guard(&mut body, self.metadata())
        } else {
            Precondition::None
        };
        Some(WorkloadWrite::Patch { kind: PatchKind::Strategic, body, precondition })
    }

    /// Unpauses a Deployment that reloader paused (it carries `paused-at`); `None` for every
    /// other object, so a Deployment a user paused is never resumed.
    fn resume_write(&self, ctx: &WriteContext<'_>) -> Option<WorkloadWrite> {
        if !K::PAUSABLE || pause::paused_at(self.metadata(), ctx.keys).is_none() {
            return None;
        }
        let mut body = json!({
            "metadata": {"annotations": {ctx.keys.paused_at.clone(): null}},
            "spec": {"paused": false},
        });
        if self.metadata().annotations.as_ref().is_some_and(|a| a.contains_key(&ctx.keys.hold_period)) {
            body["metadata"]["annotations"][ctx.keys.hold_period.as_str()] = Value::Null;
        }
        // Never resume a Deployment a user paused since: only the version that carried `paused-at`.
        let precondition = guard(&mut body, self.metadata());
        Some(WorkloadWrite::Patch { kind: PatchKind::Merge, body, precondition })
    }
}

/// Makes a patch apply only to the object's current `resourceVersion` (the API server answers
/// 409 otherwise); nothing for an object that has none (never read from a server).
fn guard(body: &mut Value, metadata: &ObjectMeta) -> Precondition {
    let precondition = Precondition::read_at(metadata);
    if let Precondition::ResourceVersion(version) = &precondition {
        body["metadata"]["resourceVersion"] = Value::String(version.clone());
    }
    precondition
}
