//! A kind the user declared (`--custom-workload`): known only by its declaration, read as
//! untyped JSON. Its pod template is taken from the declared pointer, and reloads are JSON patches
//! there; or, for a kind whose operator copies only an annotations map to its pods, that map
//! stands for the template's annotations (no containers), and the marker annotation is patched
//! into it. Pods as reload targets (`--reload-pods`) are read the same way, as their own
//! template, and never written.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use reloader_core::custom_kind::{CustomKind, PodTarget};
use reloader_core::json_patch::template_json_patch;
use reloader_core::markers::MarkerChange;
use reloader_core::model::WorkloadKind;
use reloader_core::skeleton::Skeleton;
use reloader_core::workload::{PatchKind, Precondition, Workload, WorkloadWrite, WriteContext};
use serde::Deserialize as _;
use serde_json::Value;

use crate::workload::guarded_json_patch;

/// An object of a declared kind: its metadata, and the pod template found at the declared
/// pointer (`None` when the object has none there, or something that is not a pod template: it
/// then references nothing and is never written). For an annotations map, the template holds
/// just the map as its annotations.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomObject {
    declared: &'static CustomKind,
    pub metadata: ObjectMeta,
    pub template: Option<PodTemplateSpec>,
}

impl CustomObject {
    /// Reads an object of `declared`'s kind from its JSON `metadata` and the rest of it.
    pub fn read(declared: &'static CustomKind, metadata: ObjectMeta, object: &Value) -> Self {
        let template = match &declared.target {
            PodTarget::Template(pointer) => object
                .pointer(pointer.as_str())
                .and_then(|template| PodTemplateSpec::deserialize(template).ok()),
            // A missing map is an empty one (the patch creates it); one that is not a map of
            // strings is left alone.
            PodTarget::Annotations(pointer) => match object.pointer(pointer.as_str()) {
                None | Some(Value::Null) => Some(annotations_template(None)),
                Some(map) => BTreeMap::deserialize(map).ok().map(|map| annotations_template(Some(map))),
            },
            // A pod is its own template: its metadata (the annotations) and its spec.
            PodTarget::Pod => object
                .get("spec")
                .and_then(|spec| PodSpec::deserialize(spec).ok())
                .map(|spec| PodTemplateSpec { metadata: Some(metadata.clone()), spec: Some(spec) }),
        };
        CustomObject { declared, metadata, template }
    }

    /// The object a view's skeleton stands for, to build a write from without reading it.
    pub fn from_skeleton(declared: &'static CustomKind, skeleton: Skeleton) -> Self {
        CustomObject { declared, metadata: skeleton.metadata, template: skeleton.template }
    }

    pub fn declared(&self) -> &'static CustomKind {
        self.declared
    }
}

/// The template an annotations map stands for: those annotations, no pod spec.
fn annotations_template(annotations: Option<BTreeMap<String, String>>) -> PodTemplateSpec {
    PodTemplateSpec { metadata: Some(ObjectMeta { annotations, ..ObjectMeta::default() }), spec: None }
}

/// Where a JSON patch of a template's annotations applies in the object instead: the map.
const TEMPLATE_ANNOTATIONS: &str = "/metadata/annotations";

impl Workload for CustomObject {
    fn kind(&self) -> WorkloadKind {
        WorkloadKind::Custom(self.declared)
    }

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn pod_template(&self) -> Option<&PodTemplateSpec> {
        self.template.as_ref()
    }

    fn annotations_only(&self) -> bool {
        matches!(self.declared.target, PodTarget::Annotations(_))
    }

    fn template_write(
        &self,
        template: &PodTemplateSpec,
        changes: &[MarkerChange],
        ctx: &WriteContext<'_>,
    ) -> Option<WorkloadWrite> {
        match &self.declared.target {
            PodTarget::Template(pointer) => {
                guarded_json_patch(&self.metadata, template, pointer.as_str(), changes, ctx)
            }
            // A pod is evicted, never written (docs/beyond-stakater.md §14).
            PodTarget::Pod => None,
            PodTarget::Annotations(map) => {
                // The patch of a template at the root, its annotation paths moved to the map; the
                // first operation, the `resourceVersion` test, stays on the object.
                let version = self.metadata.resource_version.as_deref().unwrap_or_default();
                let mut body = template_json_patch(template, "", version, changes, ctx.keys, ctx.now_unix)?;
                for op in body.as_array_mut().into_iter().flatten().skip(1) {
                    if let Some(Value::String(path)) = op.get_mut("path")
                        && let Some(rest) = path.strip_prefix(TEMPLATE_ANNOTATIONS)
                    {
                        *path = format!("{map}{rest}");
                    }
                }
                let precondition = Precondition::ResourceVersion(version.to_owned());
                Some(WorkloadWrite::Patch { kind: PatchKind::Json, body, precondition })
            }
        }
    }
}

#[cfg(test)]
mod tests;
