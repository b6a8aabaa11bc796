//! [`WorkloadApi`] through the API server: typed GETs via the kind registry, every write
//! attributed to [`FIELD_MANAGER`].

use async_trait::async_trait;
use k8s_openapi::api::batch::v1::Job;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, PropagationPolicy};
use reloader_core::model::WorkloadKey;
use serde_json::Value;

use super::api::WorkloadApi;
use crate::client::FIELD_MANAGER;
use crate::kinds::{self, Loaded, api_resource, load};

pub(crate) struct KubeWorkloadApi {
    client: Client,
}

impl KubeWorkloadApi {
    pub(crate) fn new(client: Client) -> Self {
        KubeWorkloadApi { client }
    }

    fn dynamic(&self, key: &WorkloadKey) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &key.namespace, &api_resource(key.kind))
    }

    fn jobs(&self, namespace: &str) -> Api<Job> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

fn post_params() -> PostParams {
    PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() }
}

#[async_trait]
impl WorkloadApi for KubeWorkloadApi {
    async fn load(&self, key: &WorkloadKey) -> Result<Option<Loaded>, kube::Error> {
        load(&self.client, key).await
    }

    async fn resource_version(&self, key: &WorkloadKey) -> Result<Option<String>, kube::Error> {
        let metadata = self.dynamic(key).get_metadata_opt(&key.name).await?;
        Ok(metadata.and_then(|m| m.metadata.resource_version))
    }

    async fn patch(&self, key: &WorkloadKey, patch: &Patch<Value>) -> Result<Loaded, kube::Error> {
        let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
        kinds::patch(&self.client, key, &params, patch).await
    }

    async fn create_job(&self, namespace: &str, job: &Job) -> Result<(), kube::Error> {
        self.jobs(namespace).create(&post_params(), job).await.map(drop)
    }

    async fn delete_job(&self, namespace: &str, name: &str) -> Result<(), kube::Error> {
        let params =
            DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..Default::default() };
        self.jobs(namespace).delete(name, &params).await.map(drop)
    }

    async fn job_exists(&self, namespace: &str, name: &str) -> Result<bool, kube::Error> {
        Ok(self.jobs(namespace).get_opt(name).await?.is_some())
    }
}
