//! The API calls of the evictor, behind a small trait.

use std::collections::BTreeMap;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use kube::Client;
use kube::api::{Api, DynamicObject, EvictParams, ListParams, Patch, PatchParams};
use reloader_core::custom_kind::PodTarget;
use reloader_core::model::WorkloadKey;
use reloader_core::restart::{POD_SELECTOR, PROGRESS, Progress};
use serde::Deserialize as _;
use serde_json::{Value, json};

use super::pod_labels;
use crate::client::FIELD_MANAGER;
use crate::kinds;

/// A workload and its pods, as one step of its restart needs them.
#[derive(Debug, Clone)]
pub(crate) struct WorkloadPods {
    pub(crate) uid: String,
    pub(crate) annotations: BTreeMap<String, String>,
    /// The pod template (for an annotations map: those annotations).
    pub(crate) template: PodTemplateSpec,
    /// How many pods it wants, where its kind says (`spec.replicas`, a DaemonSet's
    /// `status.desiredNumberScheduled`).
    pub(crate) desired: Option<u32>,
    /// Its pods: those it controls (owner reference with `controller: true`).
    pub(crate) pods: Vec<Pod>,
}

#[async_trait]
pub(crate) trait RestartApi: Send + Sync {
    /// The workload and its pods; `None` when it no longer exists.
    async fn workload(&self, key: &WorkloadKey) -> Result<Option<WorkloadPods>, kube::Error>;
    /// The pods of `namespace` labelled as reload targets (docs/beyond-stakater.md §14).
    async fn labelled_pods(&self, namespace: &str) -> Result<Vec<Pod>, kube::Error>;
    /// Evicts a pod through the Eviction API (a disruption budget answers 429).
    async fn evict(&self, namespace: &str, pod: &str) -> Result<(), kube::Error>;
    /// Records the restart's progress on the workload.
    async fn record(&self, key: &WorkloadKey, progress: &Progress) -> Result<(), kube::Error>;
}

pub(crate) struct KubeRestartApi {
    pub(crate) client: Client,
}

impl KubeRestartApi {
    fn workloads(&self, key: &WorkloadKey) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &key.namespace, &kinds::api_resource(key.kind))
    }
}

#[async_trait]
impl RestartApi for KubeRestartApi {
    async fn workload(&self, key: &WorkloadKey) -> Result<Option<WorkloadPods>, kube::Error> {
        let Some(object) = self.workloads(key).get_opt(&key.name).await? else { return Ok(None) };
        let uid = object.metadata.uid.clone().unwrap_or_default();
        let template = template_of(key, &object.data);
        let labels = pod_labels(&template);
        // The template's labels narrow the list server-side; an annotations map has none, and
        // then the namespace's pods are listed. The owner decides either way.
        let selector: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &key.namespace);
        let listed = pods.list(&ListParams::default().labels(&selector.join(","))).await?;
        let pods = listed
            .items
            .into_iter()
            .filter(|pod| {
                pod.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|owner| owner.controller == Some(true) && owner.uid == uid)
            })
            .collect();
        let desired = ["/spec/replicas", "/status/desiredNumberScheduled"]
            .iter()
            .find_map(|pointer| object.data.pointer(pointer).and_then(Value::as_u64))
            .map(|n| n as u32);
        Ok(Some(WorkloadPods {
            uid,
            annotations: object.metadata.annotations.unwrap_or_default(),
            template,
            desired,
            pods,
        }))
    }

    async fn labelled_pods(&self, namespace: &str) -> Result<Vec<Pod>, kube::Error> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        Ok(pods.list(&ListParams::default().labels(POD_SELECTOR)).await?.items)
    }

    async fn evict(&self, namespace: &str, pod: &str) -> Result<(), kube::Error> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        pods.evict(pod, &EvictParams::default()).await.map(drop)
    }

    async fn record(&self, key: &WorkloadKey, progress: &Progress) -> Result<(), kube::Error> {
        let patch = json!({"metadata": {"annotations": {PROGRESS: progress.to_annotation()}}});
        let params = PatchParams { field_manager: Some(FIELD_MANAGER.to_owned()), ..PatchParams::default() };
        self.workloads(key).patch(&key.name, &params, &Patch::Merge(&patch)).await.map(drop)
    }
}

/// The pod template of a workload object, wherever its kind keeps it.
fn template_of(key: &WorkloadKey, data: &Value) -> PodTemplateSpec {
    if let Some(PodTarget::Annotations(pointer)) = key.kind.custom().map(|c| &c.target) {
        let annotations = data.pointer(pointer.as_str()).and_then(|m| BTreeMap::deserialize(m).ok());
        let metadata =
            k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta { annotations, ..Default::default() };
        return PodTemplateSpec { metadata: Some(metadata), spec: None };
    }
    let pointer = kinds::info(key.kind).template_pointer;
    data.pointer(pointer).and_then(|t| PodTemplateSpec::deserialize(t).ok()).unwrap_or_default()
}
