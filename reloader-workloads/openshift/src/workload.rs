//! DeploymentConfig as a core `Workload`: reloads are JSON patches of `spec.template`.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use reloader_core::json_patch::template_json_patch;
use reloader_core::markers::MarkerChange;
use reloader_core::model::WorkloadKind;
use reloader_core::workload::{
    PatchKind, Workload, WorkloadWrite, WriteContext, WriteError, checked_template,
};

use crate::DeploymentConfig;

/// Where the pod template sits in the object, as a JSON pointer.
const TEMPLATE_POINTER: &str = "/spec/template";

impl Workload for DeploymentConfig {
    fn kind(&self) -> WorkloadKind {
        WorkloadKind::DeploymentConfig
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

    /// A JSON patch of the touched env entries or the marker annotation, applied only if the
    /// object still has the `resourceVersion` it was read at.
    fn reload_write(
        &self,
        changes: &[MarkerChange],
        ctx: &WriteContext<'_>,
    ) -> Result<Option<WorkloadWrite>, WriteError> {
        if changes.is_empty() {
            return Ok(None);
        }
        let template = checked_template(self, changes)?;
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
