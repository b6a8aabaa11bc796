//! A minimal, lossless serde type for `argoproj.io/v1alpha1` Rollout.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub const GROUP: &str = "argoproj.io";
pub const VERSION: &str = "v1alpha1";
pub const API_VERSION: &str = "argoproj.io/v1alpha1";
pub const KIND: &str = "Rollout";
pub const LIST_KIND: &str = "RolloutList";
/// The resource name in URLs and RBAC rules.
pub const PLURAL: &str = "rollouts";
/// The `rollout-strategy` annotation value that selects `spec.restartAt` restarts.
pub const ROLLOUT_STRATEGY_RESTART: &str = "restart";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    #[serde(default = "api_version")]
    pub api_version: String,
    #[serde(default = "kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: RolloutSpec,
    /// Every other top-level field (`status`, ...), kept as read.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutSpec {
    /// Absent on a Rollout that uses `workloadRef` to borrow a Deployment's template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<PodTemplateSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// RFC 3339: pods created before it are restarted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_at: Option<String>,
    /// Every other spec field (`replicas`, `selector`, `strategy`, `workloadRef`, ...), kept as read.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

fn api_version() -> String {
    API_VERSION.into()
}

fn kind() -> String {
    KIND.into()
}

impl Default for Rollout {
    fn default() -> Self {
        Rollout {
            api_version: api_version(),
            kind: kind(),
            metadata: ObjectMeta::default(),
            spec: RolloutSpec::default(),
            other: Map::new(),
        }
    }
}

impl k8s_openapi::Resource for Rollout {
    const API_VERSION: &'static str = API_VERSION;
    const GROUP: &'static str = GROUP;
    const KIND: &'static str = KIND;
    const VERSION: &'static str = VERSION;
    const URL_PATH_SEGMENT: &'static str = PLURAL;
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::ListableResource for Rollout {
    const LIST_KIND: &'static str = LIST_KIND;
}

impl k8s_openapi::Metadata for Rollout {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}
