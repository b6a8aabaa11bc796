//! `apps.openshift.io/v1` DeploymentConfig: its spec, typed where reloader reads it.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use reloader_core::model::WorkloadKind;
use reloader_workload_crd::{CrdObject, CrdSpec};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub const API_VERSION: &str = "apps.openshift.io/v1";
pub const KIND: &str = "DeploymentConfig";

/// An OpenShift DeploymentConfig as read, lossless.
pub type DeploymentConfig = CrdObject<DeploymentConfigSpec>;

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

/// Reloads are the shared CRD JSON patch of `spec.template` (the default `template_write`).
impl CrdSpec for DeploymentConfigSpec {
    const GROUP: &'static str = "apps.openshift.io";
    const VERSION: &'static str = "v1";
    const API_VERSION: &'static str = API_VERSION;
    const KIND: &'static str = KIND;
    const LIST_KIND: &'static str = "DeploymentConfigList";
    const PLURAL: &'static str = "deploymentconfigs";
    const WORKLOAD_KIND: WorkloadKind = WorkloadKind::DeploymentConfig;

    fn template(&self) -> Option<&PodTemplateSpec> {
        self.template.as_ref()
    }

    fn paused(&self) -> bool {
        self.paused.unwrap_or(false)
    }

    fn from_skeleton(template: Option<PodTemplateSpec>, paused: bool) -> Self {
        Self { template, paused: Some(paused), other: Map::new() }
    }
}
