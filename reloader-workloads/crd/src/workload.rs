//! Every CRD-served kind as a core `Workload`; reloads are JSON patches of `spec.template`
//! (of the declared pointer for a declared kind).

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use reloader_core::annotations::AnnotationKeys;
use reloader_core::json_patch::template_json_patch;
use reloader_core::markers::MarkerChange;
use reloader_core::model::WorkloadKind;
use reloader_core::views::{WorkloadView, build_view};
use reloader_core::workload::{PatchKind, Precondition, Workload, WorkloadWrite, WriteContext};

use crate::{CrdObject, CrdSpec};

/// Where the pod template sits in the object, as a JSON pointer.
const TEMPLATE_POINTER: &str = "/spec/template";

impl<S: CrdSpec> Workload for CrdObject<S> {
    fn kind(&self) -> WorkloadKind {
        S::WORKLOAD_KIND
    }

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn pod_template(&self) -> Option<&PodTemplateSpec> {
        self.spec.template()
    }

    fn paused(&self) -> bool {
        self.spec.paused()
    }

    fn view(&self, keys: &AnnotationKeys) -> WorkloadView {
        let mut view = build_view(self.view_parts(), keys);
        S::refine_view(self, keys, &mut view);
        view
    }

    fn template_write(
        &self,
        template: &PodTemplateSpec,
        changes: &[MarkerChange],
        ctx: &WriteContext<'_>,
    ) -> Option<WorkloadWrite> {
        S::template_write(self, template, changes, ctx)
    }
}

impl<S: CrdSpec> CrdObject<S> {
    /// A JSON patch of the touched env entries or the marker annotation in `template`, applied
    /// only if the object still has the `resourceVersion` it was read at; `None` if current.
    pub fn json_patch_write(
        &self,
        template: &PodTemplateSpec,
        changes: &[MarkerChange],
        ctx: &WriteContext<'_>,
    ) -> Option<WorkloadWrite> {
        guarded_json_patch(&self.metadata, template, TEMPLATE_POINTER, changes, ctx)
    }
}

/// The JSON patch of `changes` to the template at `pointer`, guarded by the object's
/// `resourceVersion`; `None` if the template already records them all.
pub(crate) fn guarded_json_patch(
    metadata: &ObjectMeta,
    template: &PodTemplateSpec,
    pointer: &str,
    changes: &[MarkerChange],
    ctx: &WriteContext<'_>,
) -> Option<WorkloadWrite> {
    let resource_version = metadata.resource_version.as_deref().unwrap_or_default();
    let body = template_json_patch(template, pointer, resource_version, changes, ctx.keys, ctx.now_unix)?;
    // An object never read from a server has no version: the `test` of the empty one fails.
    let precondition = Precondition::ResourceVersion(resource_version.to_owned());
    Some(WorkloadWrite::Patch { kind: PatchKind::Json, body, precondition })
}
