//! The API calls the writer makes, behind a small trait so the writer can be tested against a
//! scripted API; `kube_api::KubeWorkloadApi` is the real one.

use async_trait::async_trait;
use k8s_openapi::api::batch::v1::Job;
use kube::api::Patch;
use reloader_core::index::Index;
use reloader_core::model::WorkloadKey;
use reloader_core::views::WorkloadView;
use serde_json::Value;

use crate::kinds::Loaded;

#[async_trait]
pub(crate) trait WorkloadApi: Send + Sync {
    /// GETs a workload as its backend type; `None` when it no longer exists.
    async fn load(&self, key: &WorkloadKey) -> Result<Option<Loaded>, kube::Error>;
    /// The workload's current resourceVersion; `None` when it no longer exists.
    async fn resource_version(&self, key: &WorkloadKey) -> Result<Option<String>, kube::Error>;
    /// PATCHes a workload; the object as the API server left it.
    async fn patch(&self, key: &WorkloadKey, patch: &Patch<Value>) -> Result<Loaded, kube::Error>;
    async fn create_job(&self, namespace: &str, job: &Job) -> Result<(), kube::Error>;
    /// Deletes a Job and (in the background) its pods. A 404 is an error like any other.
    async fn delete_job(&self, namespace: &str, name: &str) -> Result<(), kube::Error>;
    async fn job_exists(&self, namespace: &str, name: &str) -> Result<bool, kube::Error>;
}

/// The index's view of a workload: the writer builds a write from it without reading the object
/// (docs/behaviour.md, "What is read before a write").
pub(crate) trait WorkloadViews: Send + Sync {
    fn view(&self, key: &WorkloadKey) -> Option<WorkloadView>;
    /// The workload as one of our writes left it, ahead of its watch (docs/behaviour.md §C32e).
    fn written(&self, view: WorkloadView);
}

impl WorkloadViews for std::sync::RwLock<Index> {
    fn view(&self, key: &WorkloadKey) -> Option<WorkloadView> {
        self.read().unwrap_or_else(|e| e.into_inner()).workload(key).cloned()
    }

    fn written(&self, view: WorkloadView) {
        self.write().unwrap_or_else(|e| e.into_inner()).upsert_written_workload(view);
    }
}
