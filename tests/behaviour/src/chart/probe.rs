//! Workloads that ask to be reloaded (`reloader.stakater.com/auto: "true"`) for a ConfigMap and
//! a Secret, one of each kind a test names, and the means to tell whether each was reloaded:
//! its pod template changed (a Job: it was recreated; a CronJob: a Job was created from it).
//! They run no pods (zero replicas, a suspended Job, a DaemonSet on no node), so a test can
//! create many without loading the plane.

use std::collections::BTreeMap;

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};

use reloader_cli::kinds::{self, Availability};
use reloader_core::model::WorkloadKind;
use reloader_harness::PlaneError;

pub const AUTO_ANNOTATION: &str = "reloader.stakater.com/auto";
pub const CONFIG_MAP: &str = "probe-config";
pub const SECRET: &str = "probe-secret";
/// The pod-template annotation the `annotations` strategy writes.
pub const LAST_RELOADED_FROM: &str = "reloader.stakater.com/last-reloaded-from";

/// The kinds every install watches (the registry's built-in kinds).
pub fn built_in_kinds() -> Vec<WorkloadKind> {
    kinds::all().filter(|info| info.availability == Availability::BuiltIn).map(|info| info.kind).collect()
}

/// The name of the probe workload of `kind`.
pub fn probe_name(kind: WorkloadKind) -> String {
    format!("probe-{}", kind.as_str().to_lowercase())
}

fn resource(kind: WorkloadKind) -> ApiResource {
    kinds::info(kind).api_resource()
}

/// A workload of `kind` that runs no pods and reloads on any change of the probe's data.
fn probe_object(kind: WorkloadKind) -> Value {
    let name = probe_name(kind);
    let labels = json!({ "app": name });
    let template = |restart: &str, node_selector: Option<Value>| {
        let mut spec = json!({
            "restartPolicy": restart,
            "containers": [{
                "name": "app",
                "image": "registry.k8s.io/pause:3.10",
                "envFrom": [{ "configMapRef": { "name": CONFIG_MAP } }, { "secretRef": { "name": SECRET } }],
            }],
        });
        if let Some(selector) = node_selector {
            spec["nodeSelector"] = selector;
        }
        json!({ "metadata": { "labels": labels }, "spec": spec })
    };
    let selector = json!({ "matchLabels": labels });
    let spec = match kind {
        WorkloadKind::Deployment | WorkloadKind::StatefulSet | WorkloadKind::Rollout => {
            json!({ "replicas": 0, "selector": selector, "template": template("Always", None) })
        }
        // No node carries this label: the DaemonSet exists, its pods do not.
        WorkloadKind::DaemonSet => json!({
            "selector": selector,
            "template": template("Always", Some(json!({ "reloader-tests/no-node": "true" }))),
        }),
        WorkloadKind::CronJob => json!({
            "schedule": "0 0 1 1 *",
            "jobTemplate": { "spec": { "template": template("Never", None) } },
        }),
        WorkloadKind::Job => json!({ "suspend": true, "template": template("Never", None) }),
        // OpenShift's selector is a plain label map.
        WorkloadKind::DeploymentConfig => {
            json!({ "replicas": 0, "selector": labels, "template": template("Always", None) })
        }
        // A declared kind: the template at its pointer, replicas 0 and a selector beside it.
        WorkloadKind::Custom(custom) => {
            let mut spec = json!({ "replicas": 0, "selector": selector });
            put(&mut spec, &custom.target.pointer()["/spec".len()..], template("Always", None));
            spec
        }
    };
    json!({
        "apiVersion": kinds::info(kind).api_version(),
        "kind": kind.as_str(),
        "metadata": { "name": name, "annotations": { AUTO_ANNOTATION: "true" } },
        "spec": spec,
    })
}

/// Sets `value` at the JSON `pointer` under `object`, creating the objects on the way.
fn put(object: &mut Value, pointer: &str, value: Value) {
    let mut at = object;
    for token in pointer.trim_start_matches('/').split('/') {
        at = &mut at[token.replace("~1", "/").replace("~0", "~")];
    }
    *at = value;
}

/// The probe workloads of one namespace, with the state each had when last marked.
pub struct Probe {
    client: Client,
    namespace: String,
    marked: BTreeMap<WorkloadKind, Value>,
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe").field("namespace", &self.namespace).field("kinds", &self.kinds()).finish()
    }
}

impl Probe {
    /// Creates the ConfigMap, the Secret and one workload of each of `kinds` in `namespace`.
    pub async fn create(
        client: &Client,
        namespace: &str,
        kinds: &[WorkloadKind],
    ) -> Result<Self, PlaneError> {
        let mut probe =
            Self { client: client.clone(), namespace: namespace.to_owned(), marked: BTreeMap::new() };
        let params = PostParams::default();
        let config: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": CONFIG_MAP }, "data": { "PROBE_CONFIG": "0" },
        }))
        .expect("a valid ConfigMap");
        probe
            .api(&ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()))
            .create(&params, &config)
            .await?;
        let secret: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": SECRET }, "stringData": { "PROBE_SECRET": "0" },
        }))
        .expect("a valid Secret");
        probe
            .api(&ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&()))
            .create(&params, &secret)
            .await?;
        for &kind in kinds {
            let object: DynamicObject = serde_json::from_value(probe_object(kind)).expect("a valid workload");
            probe.api(&resource(kind)).create(&params, &object).await?;
            probe.marked.insert(kind, Value::Null);
        }
        probe.mark().await?;
        Ok(probe)
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Makes the StatefulSet probe a restart-by-eviction one (docs/beyond-stakater.md §13): one
    /// running pod, `OnDelete`, `reloader.dev/restart: evict`, so each reload evicts its pod.
    /// Waits until the pod runs (Ready), so the first reload has a pod to evict.
    pub async fn opt_in_eviction(&mut self) -> Result<(), PlaneError> {
        let kind = WorkloadKind::StatefulSet;
        let patch = json!({
            "metadata": { "annotations": { "reloader.dev/restart": "evict" } },
            "spec": { "replicas": 1, "updateStrategy": { "type": "OnDelete", "rollingUpdate": null } },
        });
        self.api(&resource(kind))
            .patch(&probe_name(kind), &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        self.wait_for_ready_pod(&probe_name(kind)).await?;
        self.mark().await
    }

    /// Adds a reload-target pod (docs/beyond-stakater.md §14): a ReplicaSet of one whose pod is
    /// labelled `reloader.dev/reload-pod: "true"` and annotated to reload for the probe ConfigMap,
    /// so each change of it evicts that pod. Waits until the pod runs (Ready).
    pub async fn add_reload_pod(&mut self) -> Result<(), PlaneError> {
        let name = "probe-pods";
        let labels = json!({ "app": name, "reloader.dev/reload-pod": "true" });
        let replicaset: k8s_openapi::api::apps::v1::ReplicaSet = serde_json::from_value(json!({
            "metadata": { "name": name },
            "spec": {
                "replicas": 1,
                "selector": { "matchLabels": { "app": name } },
                "template": {
                    "metadata": {
                        "labels": labels,
                        "annotations": { "configmap.reloader.stakater.com/reload": CONFIG_MAP },
                    },
                    "spec": { "containers": [{
                        "name": "app",
                        "image": "registry.k8s.io/pause:3.10",
                        "envFrom": [{ "configMapRef": { "name": CONFIG_MAP } }],
                    }] },
                },
            },
        }))
        .expect("a ReplicaSet manifest");
        Api::namespaced(self.client.clone(), &self.namespace)
            .create(&PostParams::default(), &replicaset)
            .await?;
        self.wait_for_ready_pod(name).await
    }

    /// Waits until a pod labelled `app=<app>` is Ready.
    async fn wait_for_ready_pod(&self, app: &str) -> Result<(), PlaneError> {
        let pods: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(self.client.clone(), &self.namespace);
        let selector = format!("app={app}");
        reloader_harness::wait_until(
            &format!("a Ready pod of {app}"),
            std::time::Duration::from_secs(60),
            || async {
                let listed = pods.list(&ListParams::default().labels(&selector)).await?;
                let ready = listed.items.iter().any(|pod| {
                    pod.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|conditions| {
                        conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                    })
                });
                if ready { Ok(()) } else { Err(reloader_harness::NotYet("no Ready pod yet".into())) }
            },
        )
        .await
    }

    pub fn kinds(&self) -> Vec<WorkloadKind> {
        self.marked.keys().copied().collect()
    }

    /// Records the current state of every workload; [`Self::changed`] compares with it.
    pub async fn mark(&mut self) -> Result<(), PlaneError> {
        for kind in self.kinds() {
            let state = self.state(kind).await?;
            self.marked.insert(kind, state);
        }
        Ok(())
    }

    /// The kinds whose workload was reloaded since the last [`Self::mark`].
    pub async fn changed(&self) -> Result<Vec<WorkloadKind>, PlaneError> {
        let mut changed = Vec::new();
        for (&kind, marked) in &self.marked {
            if self.state(kind).await? != *marked {
                changed.push(kind);
            }
        }
        Ok(changed)
    }

    /// Changes the ConfigMap's data to `value`.
    pub async fn change_config_map(&self, value: &str) -> Result<(), PlaneError> {
        let resource = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        let patch = json!({ "data": { "PROBE_CONFIG": value } });
        self.api(&resource).patch(CONFIG_MAP, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        Ok(())
    }

    /// Changes the Secret's data to `value`.
    pub async fn change_secret(&self, value: &str) -> Result<(), PlaneError> {
        let resource = ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&());
        let patch = json!({ "stringData": { "PROBE_SECRET": value } });
        self.api(&resource).patch(SECRET, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        Ok(())
    }

    /// The pod template of a workload now (`None` when it is gone).
    pub async fn template(&self, kind: WorkloadKind) -> Result<Option<Value>, PlaneError> {
        let object = self.api(&resource(kind)).get_opt(&probe_name(kind)).await?;
        let pointer = kinds::info(kind).template_pointer;
        Ok(object.map(|object| object.data.pointer(pointer).cloned().unwrap_or(Value::Null)))
    }

    /// The Events of this namespace about `kind`'s workload with `reason`.
    pub async fn events(&self, kind: WorkloadKind, reason: &str) -> Result<Vec<Event>, PlaneError> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), &self.namespace);
        let name = probe_name(kind);
        Ok(events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|event| event.reason.as_deref() == Some(reason))
            .filter(|event| event.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name.as_str()))
            .collect())
    }

    /// Every `ReloadFail` Event of this namespace, as `workload: note`.
    pub async fn reload_failures(&self) -> Result<Vec<String>, PlaneError> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), &self.namespace);
        Ok(events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|event| event.reason.as_deref() == Some("ReloadFail"))
            .map(|event| {
                let workload = event.regarding.and_then(|r| r.name).unwrap_or_default();
                format!("{workload}: {}", event.note.unwrap_or_default())
            })
            .collect())
    }

    /// Deletes the workloads (and the Jobs made from the CronJob) and waits until they are gone,
    /// so a controller started later finds nothing of them to catch up on.
    pub async fn delete_workloads(&self) -> Result<(), PlaneError> {
        let params = DeleteParams::background();
        for kind in self.kinds() {
            match self.api(&resource(kind)).delete(&probe_name(kind), &params).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Err(error.into()),
            }
        }
        let jobs = self.api(&resource(WorkloadKind::Job));
        jobs.delete_collection(&params, &ListParams::default()).await?;
        reloader_harness::wait_until(
            "the probe workloads to be deleted",
            std::time::Duration::from_secs(30),
            || async {
                let mut left = Vec::new();
                for kind in self.kinds() {
                    if self.api(&resource(kind)).get_opt(&probe_name(kind)).await?.is_some() {
                        left.push(kind);
                    }
                }
                let jobs = jobs.list(&ListParams::default()).await?.items.len();
                if left.is_empty() && jobs == 0 {
                    Ok(())
                } else {
                    Err(reloader_harness::NotYet(format!("left: {left:?}, {jobs} Jobs")))
                }
            },
        )
        .await
    }

    /// What changes when `kind` is reloaded: the pod template; for a Job also its uid (it is
    /// recreated); for a CronJob the Jobs it owns.
    async fn state(&self, kind: WorkloadKind) -> Result<Value, PlaneError> {
        if kind == WorkloadKind::CronJob {
            let jobs = self.api(&resource(WorkloadKind::Job)).list(&ListParams::default()).await?;
            let mut owned: Vec<String> = jobs
                .items
                .iter()
                .filter(|job| job.owner_references().iter().any(|owner| owner.name == probe_name(kind)))
                .map(|job| job.name_any())
                .collect();
            owned.sort();
            return Ok(json!(owned));
        }
        let object = self.api(&resource(kind)).get_opt(&probe_name(kind)).await?;
        let pointer = kinds::info(kind).template_pointer;
        Ok(object.map_or(
            Value::Null,
            |object| json!({ "uid": object.metadata.uid, "template": object.data.pointer(pointer) }),
        ))
    }

    fn api(&self, resource: &ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.namespace, resource)
    }
}
