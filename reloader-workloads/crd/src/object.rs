//! The object type and the identity of its kind.

use std::fmt;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use reloader_core::annotations::AnnotationKeys;
use reloader_core::markers::MarkerChange;
use reloader_core::model::WorkloadKind;
use reloader_core::skeleton::Skeleton;
use reloader_core::views::WorkloadView;
use reloader_core::workload::{WorkloadWrite, WriteContext};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The typed spec of a CRD-served workload kind, and the facts that identify the kind.
pub trait CrdSpec: Default + Clone + fmt::Debug + PartialEq + Serialize + DeserializeOwned {
    const GROUP: &'static str;
    const VERSION: &'static str;
    /// `GROUP/VERSION`.
    const API_VERSION: &'static str;
    const KIND: &'static str;
    const LIST_KIND: &'static str;
    /// The resource name in URLs and RBAC rules.
    const PLURAL: &'static str;
    const WORKLOAD_KIND: WorkloadKind;

    /// `spec.template` (the JSON patches point there), `None` if the object has none.
    fn template(&self) -> Option<&PodTemplateSpec>;

    /// `spec.paused`.
    fn paused(&self) -> bool;

    /// A spec with just `template` and `paused` (what a skeleton knows of it).
    fn from_skeleton(template: Option<PodTemplateSpec>, paused: bool) -> Self;

    /// Adjusts the view core builds from the template; the default keeps it as it is.
    fn refine_view(_object: &CrdObject<Self>, _keys: &AnnotationKeys, _view: &mut WorkloadView) {}

    /// The write for `changes`, already checked against `template` (present, with containers,
    /// every index valid); `None` if the object records them all. The default is
    /// [`CrdObject::json_patch_write`].
    fn template_write(
        object: &CrdObject<Self>,
        template: &PodTemplateSpec,
        changes: &[MarkerChange],
        ctx: &WriteContext<'_>,
    ) -> Option<WorkloadWrite> {
        object.json_patch_write(template, changes, ctx)
    }
}

/// An object of a CRD-served workload kind, as read: `metadata` and the spec typed, every other
/// top-level field (`status`, ...) kept as JSON.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
// `CrdSpec` already requires `Serialize + DeserializeOwned`; serde's own bounds would be ambiguous.
#[serde(rename_all = "camelCase", bound = "")]
pub struct CrdObject<S: CrdSpec> {
    #[serde(default = "api_version::<S>")]
    pub api_version: String,
    #[serde(default = "kind::<S>")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: S,
    /// Every other top-level field (`status`, ...), kept as read.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

fn api_version<S: CrdSpec>() -> String {
    S::API_VERSION.into()
}

fn kind<S: CrdSpec>() -> String {
    S::KIND.into()
}

impl<S: CrdSpec> Default for CrdObject<S> {
    fn default() -> Self {
        CrdObject {
            api_version: api_version::<S>(),
            kind: kind::<S>(),
            metadata: ObjectMeta::default(),
            spec: S::default(),
            other: Map::new(),
        }
    }
}

/// Named after the kind (`Rollout { .. }`), as a struct per kind would print.
impl<S: CrdSpec> fmt::Debug for CrdObject<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(S::KIND)
            .field("api_version", &self.api_version)
            .field("kind", &self.kind)
            .field("metadata", &self.metadata)
            .field("spec", &self.spec)
            .field("other", &self.other)
            .finish()
    }
}

impl<S: CrdSpec> CrdObject<S> {
    /// The object a view's skeleton stands for, to build a write from without reading it.
    pub fn from_skeleton(skeleton: Skeleton) -> Self {
        CrdObject {
            metadata: skeleton.metadata,
            spec: S::from_skeleton(skeleton.template, skeleton.paused),
            ..CrdObject::default()
        }
    }
}

impl<S: CrdSpec> k8s_openapi::Resource for CrdObject<S> {
    const API_VERSION: &'static str = S::API_VERSION;
    const GROUP: &'static str = S::GROUP;
    const KIND: &'static str = S::KIND;
    const VERSION: &'static str = S::VERSION;
    const URL_PATH_SEGMENT: &'static str = S::PLURAL;
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl<S: CrdSpec> k8s_openapi::ListableResource for CrdObject<S> {
    const LIST_KIND: &'static str = S::LIST_KIND;
}

impl<S: CrdSpec> k8s_openapi::Metadata for CrdObject<S> {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}
