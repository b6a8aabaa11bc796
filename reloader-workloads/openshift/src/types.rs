//! A minimal, lossless serde type for `apps.openshift.io/v1` DeploymentConfig.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub const GROUP: &str = "apps.openshift.io";
pub const VERSION: &str = "v1";
pub const API_VERSION: &str = "apps.openshift.io/v1";
pub const KIND: &str = "DeploymentConfig";
pub const LIST_KIND: &str = "DeploymentConfigList";
/// The resource name in URLs and RBAC rules.
pub const PLURAL: &str = "deploymentconfigs";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentConfig {
    #[serde(default = "api_version")]
    pub api_version: String,
    #[serde(default = "kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: DeploymentConfigSpec,
    /// Every other top-level field (`status`, ...), kept as read.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentConfigSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<PodTemplateSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// Every other spec field (`replicas`, `selector`, `strategy`, `triggers`, ...), kept as read.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

fn api_version() -> String {
    API_VERSION.into()
}

fn kind() -> String {
    KIND.into()
}

impl Default for DeploymentConfig {
    fn default() -> Self {
        DeploymentConfig {
            api_version: api_version(),
            kind: kind(),
            metadata: ObjectMeta::default(),
            spec: DeploymentConfigSpec::default(),
            other: Map::new(),
        }
    }
}

impl k8s_openapi::Resource for DeploymentConfig {
    const API_VERSION: &'static str = API_VERSION;
    const GROUP: &'static str = GROUP;
    const KIND: &'static str = KIND;
    const VERSION: &'static str = VERSION;
    const URL_PATH_SEGMENT: &'static str = PLURAL;
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::ListableResource for DeploymentConfig {
    const LIST_KIND: &'static str = LIST_KIND;
}

impl k8s_openapi::Metadata for DeploymentConfig {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}
