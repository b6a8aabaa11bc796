//! Workloads that ask to be reloaded (`reloader.stakater.com/auto: "true"`) for a ConfigMap and
//! a Secret, one of each kind a test names, and the means to tell whether each was reloaded:
//! its pod template changed (a Job: it was recreated; a CronJob: a Job was created from it).
//! They run no pods (zero replicas, a suspended Job, a DaemonSet on no node), so a test can
//! create many without loading the plane.

use std::collections::BTreeMap;

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};

use reloader_harness::PlaneError;

pub const AUTO_ANNOTATION: &str = "reloader.stakater.com/auto";
pub const CONFIG_MAP: &str = "probe-config";
pub const SECRET: &str = "probe-secret";
/// The pod-template annotation the `annotations` strategy writes.
pub const LAST_RELOADED_FROM: &str = "reloader.stakater.com/last-reloaded-from";

/// A workload kind the probe can create.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProbeKind {
    Deployment,
    DaemonSet,
    StatefulSet,
    CronJob,
    Job,
    Rollout,
    DeploymentConfig,
}

impl ProbeKind {
    /// The kinds every install watches.
    pub const BUILT_IN: [ProbeKind; 5] = [
        ProbeKind::Deployment,
        ProbeKind::DaemonSet,
        ProbeKind::StatefulSet,
        ProbeKind::CronJob,
        ProbeKind::Job,
    ];

    pub fn name(self) -> String {
        format!("probe-{}", format!("{self:?}").to_lowercase())
    }

    pub fn resource(self) -> ApiResource {
        let (group, version, plural) = match self {
            ProbeKind::Deployment => ("apps", "v1", "deployments"),
            ProbeKind::DaemonSet => ("apps", "v1", "daemonsets"),
            ProbeKind::StatefulSet => ("apps", "v1", "statefulsets"),
            ProbeKind::CronJob => ("batch", "v1", "cronjobs"),
            ProbeKind::Job => ("batch", "v1", "jobs"),
            ProbeKind::Rollout => ("argoproj.io", "v1alpha1", "rollouts"),
            ProbeKind::DeploymentConfig => ("apps.openshift.io", "v1", "deploymentconfigs"),
        };
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(group, version, &format!("{self:?}")),
            plural,
        )
    }

    fn object(self) -> Value {
        let name = self.name();
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
        let spec = match self {
            ProbeKind::Deployment | ProbeKind::StatefulSet | ProbeKind::Rollout => {
                json!({ "replicas": 0, "selector": selector, "template": template("Always", None) })
            }
            // No node carries this label: the DaemonSet exists, its pods do not.
            ProbeKind::DaemonSet => json!({
                "selector": selector,
                "template": template("Always", Some(json!({ "reloader-tests/no-node": "true" }))),
            }),
            ProbeKind::CronJob => json!({
                "schedule": "0 0 1 1 *",
                "jobTemplate": { "spec": { "template": template("Never", None) } },
            }),
            ProbeKind::Job => json!({ "suspend": true, "template": template("Never", None) }),
            // OpenShift's selector is a plain label map.
            ProbeKind::DeploymentConfig => {
                json!({ "replicas": 0, "selector": labels, "template": template("Always", None) })
            }
        };
        let resource = self.resource();
        json!({
            "apiVersion": resource.api_version,
            "kind": resource.kind,
            "metadata": { "name": name, "annotations": { AUTO_ANNOTATION: "true" } },
            "spec": spec,
        })
    }
}

/// The probe workloads of one namespace, with the state each had when last marked.
pub struct Probe {
    client: Client,
    namespace: String,
    marked: BTreeMap<ProbeKind, Value>,
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe").field("namespace", &self.namespace).field("kinds", &self.kinds()).finish()
    }
}

impl Probe {
    /// Creates the ConfigMap, the Secret and one workload of each of `kinds` in `namespace`.
    pub async fn create(client: &Client, namespace: &str, kinds: &[ProbeKind]) -> Result<Self, PlaneError> {
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
            let object: DynamicObject = serde_json::from_value(kind.object()).expect("a valid workload");
            probe.api(&kind.resource()).create(&params, &object).await?;
            probe.marked.insert(kind, Value::Null);
        }
        probe.mark().await?;
        Ok(probe)
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub fn kinds(&self) -> Vec<ProbeKind> {
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
    pub async fn changed(&self) -> Result<Vec<ProbeKind>, PlaneError> {
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
    pub async fn template(&self, kind: ProbeKind) -> Result<Option<Value>, PlaneError> {
        let object = self.api(&kind.resource()).get_opt(&kind.name()).await?;
        Ok(object.map(|object| match kind {
            ProbeKind::CronJob => object.data["spec"]["jobTemplate"]["spec"]["template"].clone(),
            _ => object.data["spec"]["template"].clone(),
        }))
    }

    /// The Events of this namespace about `kind`'s workload with `reason`.
    pub async fn events(&self, kind: ProbeKind, reason: &str) -> Result<Vec<Event>, PlaneError> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), &self.namespace);
        let name = kind.name();
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
            match self.api(&kind.resource()).delete(&kind.name(), &params).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Err(error.into()),
            }
        }
        let jobs = self.api(&ProbeKind::Job.resource());
        jobs.delete_collection(&params, &ListParams::default()).await?;
        reloader_harness::wait_until(
            "the probe workloads to be deleted",
            std::time::Duration::from_secs(30),
            || async {
                let mut left = Vec::new();
                for kind in self.kinds() {
                    if self.api(&kind.resource()).get_opt(&kind.name()).await?.is_some() {
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
    async fn state(&self, kind: ProbeKind) -> Result<Value, PlaneError> {
        if kind == ProbeKind::CronJob {
            let jobs = self.api(&ProbeKind::Job.resource()).list(&ListParams::default()).await?;
            let mut owned: Vec<String> = jobs
                .items
                .iter()
                .filter(|job| job.owner_references().iter().any(|owner| owner.name == kind.name()))
                .map(|job| job.name_any())
                .collect();
            owned.sort();
            return Ok(json!(owned));
        }
        let object = self.api(&kind.resource()).get_opt(&kind.name()).await?;
        Ok(object.map_or(
            Value::Null,
            |object| json!({ "uid": object.metadata.uid, "template": object.data["spec"]["template"] }),
        ))
    }

    fn api(&self, resource: &ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.namespace, resource)
    }
}
