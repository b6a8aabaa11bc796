//! The churn: one random change at a time to the soak namespace's ConfigMaps, Secrets and
//! Deployments, recorded in the [`Model`]; and the poll that reads the Deployments back.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::model::{Model, Retired, Workload};
use crate::rng::Rng;
use reloader_tests::fixtures::{
    ANNOTATION_AUTO, ANNOTATION_CONFIGMAP_RELOAD, ANNOTATION_SECRET_RELOAD, Kind, ResourceKind, ResourceRef,
    Resources, Strategy, WorkloadSpec, container_name, marker_in,
};

/// The env var the churn's own template edits change.
const EDIT_VARIABLE: &str = "SOAK_EDIT";
/// The one data key every resource has.
const KEY: &str = "value";
/// How long a resource's data must have been left alone before a workload starts using it.
const QUIET: Duration = Duration::from_secs(60);

/// Sizes of the churn.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    pub configmaps: usize,
    pub secrets: usize,
    pub workloads: usize,
}

/// The kinds of change, in the order of [`WEIGHTS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    ChangeData,
    RewriteSameData,
    EditMetadata,
    EditTemplate,
    EditReferences,
    CreateWorkload,
    DeleteWorkload,
}

const ACTIONS: [Action; 7] = [
    Action::ChangeData,
    Action::RewriteSameData,
    Action::EditMetadata,
    Action::EditTemplate,
    Action::EditReferences,
    Action::CreateWorkload,
    Action::DeleteWorkload,
];
const WEIGHTS: [u64; 7] = [40, 8, 10, 10, 12, 5, 5];

pub struct Churn {
    client: Client,
    namespace: String,
    resources: Resources,
    sizes: Sizes,
    serial: u64,
    pub model: Model,
}

impl Churn {
    /// Creates the resources and the first workloads.
    pub async fn set_up(
        client: Client,
        namespace: &str,
        sizes: Sizes,
        rng: &mut Rng,
    ) -> anyhow::Result<Self> {
        let resources = Resources::new(&client, namespace);
        let mut churn = Self {
            client,
            namespace: namespace.to_owned(),
            resources,
            sizes,
            serial: 0,
            model: Model::default(),
        };
        let all = (0..sizes.configmaps)
            .map(|i| ResourceRef::configmap(format!("config-{i}")))
            .chain((0..sizes.secrets).map(|i| ResourceRef::secret(format!("secret-{i}"))));
        for resource in all {
            let hash = churn.resources.create(&resource, &[(KEY, "0")]).await?;
            churn.model.resources.insert(resource, hash);
        }
        for _ in 0..sizes.workloads {
            churn.create_workload(rng).await?;
        }
        Ok(churn)
    }

    fn deployments(&self) -> Api<Deployment> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    fn next_serial(&mut self) -> String {
        self.serial += 1;
        self.serial.to_string()
    }

    /// One random change; a failed request is counted and the model follows what was read back.
    pub async fn step(&mut self, rng: &mut Rng) {
        let action = ACTIONS[rng.weighted(&WEIGHTS)];
        let result = match action {
            Action::ChangeData => self.change_data(rng).await,
            Action::RewriteSameData => self.rewrite_same_data(rng).await,
            Action::EditMetadata => self.edit_metadata(rng).await,
            Action::EditTemplate => self.edit_template(rng).await,
            Action::EditReferences => self.edit_references(rng).await,
            Action::CreateWorkload if self.model.workloads.len() < self.sizes.workloads * 3 / 2 => {
                self.create_workload(rng).await
            }
            Action::DeleteWorkload if self.model.workloads.len() > self.sizes.workloads / 2 => {
                self.delete_workload(rng).await
            }
            Action::CreateWorkload | Action::DeleteWorkload => Ok(()),
        };
        if let Err(error) = result {
            self.model.tally.churn_errors += 1;
            eprintln!("soak: churn {action:?} failed: {error:#}");
        }
    }

    async fn change_data(&mut self, rng: &mut Rng) -> anyhow::Result<()> {
        let free: Vec<ResourceRef> =
            self.model.resources.keys().filter(|r| self.model.may_change(r)).cloned().collect();
        let Some(resource) = rng.pick(&free).cloned() else { return Ok(()) };
        let value = self.next_serial();
        let written = self.resources.update_data(&resource, &[(KEY, &value)]).await;
        let hash = match written {
            Ok(hash) => hash,
            // Whether it landed or not, the model follows the API server.
            Err(error) => {
                self.model.tally.churn_errors += 1;
                eprintln!("soak: changing {resource} failed ({error}); reading it back");
                self.read_back(&resource).await?.1
            }
        };
        self.model.data_changed(&resource, hash, Instant::now());
        Ok(())
    }

    /// Its `value` and the hash of its data, read back from the API server.
    async fn read_back(&self, resource: &ResourceRef) -> anyhow::Result<(String, String)> {
        use reloader_tests::fixtures::{stakater_hash_configmap, stakater_hash_secret};
        Ok(match resource.kind {
            ResourceKind::Secret => {
                let api: Api<k8s_openapi::api::core::v1::Secret> =
                    Api::namespaced(self.client.clone(), &self.namespace);
                let data: BTreeMap<String, Vec<u8>> = api
                    .get(&resource.name)
                    .await?
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect();
                let value =
                    data.get(KEY).map(|v| String::from_utf8_lossy(v).into_owned()).unwrap_or_default();
                (value, stakater_hash_secret(&data))
            }
            _ => {
                let api: Api<k8s_openapi::api::core::v1::ConfigMap> =
                    Api::namespaced(self.client.clone(), &self.namespace);
                let data = api.get(&resource.name).await?.data.unwrap_or_default();
                (data.get(KEY).cloned().unwrap_or_default(), stakater_hash_configmap(&data))
            }
        })
    }

    /// Writes the data it already has: the API server keeps the object as it is.
    async fn rewrite_same_data(&mut self, rng: &mut Rng) -> anyhow::Result<()> {
        let names: Vec<ResourceRef> = self.model.resources.keys().cloned().collect();
        let Some(resource) = rng.pick(&names).cloned() else { return Ok(()) };
        let (current, _) = self.read_back(&resource).await?;
        let hash = self.resources.update_data(&resource, &[(KEY, &current)]).await?;
        self.model.data_changed(&resource, hash, Instant::now());
        Ok(())
    }

    async fn edit_metadata(&mut self, rng: &mut Rng) -> anyhow::Result<()> {
        let names: Vec<ResourceRef> = self.model.resources.keys().cloned().collect();
        let Some(resource) = rng.pick(&names).cloned() else { return Ok(()) };
        let value = self.next_serial();
        let edit = [("soak-edit", value.as_str())];
        // A label or an annotation, never the data.
        let (labels, annotations) = if rng.chance(50) { (&edit[..], &[][..]) } else { (&[][..], &edit[..]) };
        self.resources.update_metadata(&resource, labels, annotations).await?;
        self.model.tally.metadata_only_edits += 1;
        Ok(())
    }

    /// An env var of the churn's own in the pod template: a rollout that is no reload.
    async fn edit_template(&mut self, rng: &mut Rng) -> anyhow::Result<()> {
        let names: Vec<String> = self.model.workloads.keys().cloned().collect();
        let Some(name) = rng.pick(&names).cloned() else { return Ok(()) };
        let value = self.next_serial();
        let patch = json!({ "spec": { "template": { "spec": { "containers": [
            { "name": container_name(0), "env": [ { "name": EDIT_VARIABLE, "value": value } ] }
        ] } } } });
        let written =
            self.deployments().patch(&name, &PatchParams::default(), &Patch::Strategic(&patch)).await;
        let landed = match written {
            Ok(_) => true,
            Err(error) => {
                self.model.tally.churn_errors += 1;
                eprintln!("soak: editing {name}'s template failed ({error}); reading it back");
                let deployment = self.deployments().get(&name).await?;
                edit_value(&deployment).as_deref() == Some(value.as_str())
            }
        };
        if landed && let Some(workload) = self.model.workloads.get_mut(&name) {
            workload.template_edits += 1;
            self.model.tally.template_edits += 1;
        }
        Ok(())
    }

    /// Adds a reference to, or removes one from, a settled workload's reload annotations.
    async fn edit_references(&mut self, rng: &mut Rng) -> anyhow::Result<()> {
        let settled: Vec<String> = self
            .model
            .workloads
            .iter()
            .filter(|(_, w)| w.explicit && w.pending.is_none())
            .map(|(name, _)| name.clone())
            .collect();
        let Some(name) = rng.pick(&settled).cloned() else { return Ok(()) };
        let addable = self.model.addable_refs(&name, Instant::now(), QUIET);
        let mut refs = self.model.workloads[&name].refs.clone();
        let removable: Vec<ResourceRef> = refs.iter().cloned().collect();
        if (rng.chance(50) || refs.len() < 2) && !addable.is_empty() {
            refs.insert(rng.pick(&addable).cloned().expect("not empty"));
        } else if refs.len() >= 2 {
            refs.remove(rng.pick(&removable).expect("not empty"));
        } else {
            return Ok(());
        }
        let patch = json!({ "metadata": { "annotations": reference_annotations(&refs) } });
        self.deployments().patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        let workload = self.model.workloads.get_mut(&name).expect("picked from the model");
        workload.ever.extend(refs.iter().cloned());
        workload.refs = refs;
        workload.reference_edits += 1;
        self.model.tally.reference_edits += 1;
        Ok(())
    }

    async fn create_workload(&mut self, rng: &mut Rng) -> anyhow::Result<()> {
        let name = format!("web-{}", self.next_serial());
        let quiet = self.model.quiet_resources(Instant::now(), QUIET);
        let mut refs = BTreeSet::new();
        for _ in 0..rng.between(1, 3) {
            refs.extend(rng.pick(&quiet).cloned());
        }
        if refs.is_empty() {
            return Ok(());
        }
        let explicit = rng.chance(60);
        // No pods: the ReplicaSets still roll for every template change, without the pod churn
        // a 2-core machine would pay for and reloader never sees.
        let mut spec = WorkloadSpec::new(Kind::Deployment, &name).without_pods();
        if explicit {
            for (key, value) in reference_annotations(&refs) {
                if let Some(value) = value.as_str() {
                    spec = spec.metadata_annotation(key, value);
                }
            }
        } else {
            spec = spec.metadata_annotation(ANNOTATION_AUTO, "true");
            for resource in &refs {
                spec = match resource.kind {
                    ResourceKind::Secret => spec.env_from_secret(&resource.name),
                    _ => spec.env_from_configmap(&resource.name),
                };
            }
        }
        spec.create(&self.client, &self.namespace).await?;
        self.model.workloads.insert(name, Workload::new(explicit, refs));
        self.model.tally.workloads_created += 1;
        Ok(())
    }

    /// Deletes a settled workload, judging its reload count from its last generation.
    async fn delete_workload(&mut self, rng: &mut Rng) -> anyhow::Result<()> {
        let settled: Vec<String> = self
            .model
            .workloads
            .iter()
            .filter(|(_, w)| w.pending.is_none())
            .map(|(n, _)| n.clone())
            .collect();
        let Some(name) = rng.pick(&settled).cloned() else { return Ok(()) };
        let deployment = self.deployments().get(&name).await?;
        let generation = deployment.metadata.generation.unwrap_or_default();
        // Only the version whose generation was read is deleted: a write in between fails it.
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: deployment.resource_version(),
                uid: deployment.uid(),
            }),
            ..DeleteParams::default()
        };
        self.deployments().delete(&name, &params).await?;
        let workload = self.model.workloads.remove(&name).expect("picked from the model");
        self.model.retired.push(Retired {
            reloads_counted: workload.reloads_counted(generation),
            reloads_needed: workload.reloads_needed,
            name,
        });
        self.model.tally.workloads_deleted += 1;
        Ok(())
    }

    /// Reads every Deployment and settles the reloads whose marker arrived.
    pub async fn poll(&mut self) -> anyhow::Result<()> {
        let now = Instant::now();
        let listed = self.deployments().list(&ListParams::default()).await?;
        for deployment in listed {
            let name = deployment.name_any();
            let Some(pending) = self.model.workloads.get(&name).and_then(|w| w.pending.clone()) else {
                continue;
            };
            let template = deployment.spec.map(|spec| spec.template).unwrap_or_default();
            let marker = marker_in(&template, &pending.resource, Strategy::EnvVars).map(|m| m.value);
            self.model.observe_marker(&name, marker.as_deref(), now);
        }
        Ok(())
    }

    /// The end state, from the API server: each live workload's markers and reload count.
    pub async fn verify(&self) -> anyhow::Result<Verdict> {
        let listed = self.deployments().list(&ListParams::default()).await?;
        let by_name: BTreeMap<String, Deployment> = listed.into_iter().map(|d| (d.name_any(), d)).collect();
        let mut verdict = Verdict::default();
        for (name, workload) in &self.model.workloads {
            let Some(deployment) = by_name.get(name) else {
                verdict.problems.push(format!("{name}: missing from the API server"));
                continue;
            };
            let template = deployment.spec.as_ref().map(|spec| spec.template.clone()).unwrap_or_default();
            for resource in &workload.refs {
                let found = marker_in(&template, resource, Strategy::EnvVars).map(|m| m.value);
                let expected = workload.expected.get(resource);
                verdict.markers_checked += 1;
                if found.as_ref() != expected {
                    verdict.wrong_markers += 1;
                    verdict.problems.push(format!(
                        "{name}: marker for {resource} is {found:?}, its data's hash is {expected:?}"
                    ));
                }
            }
            let counted = workload.reloads_counted(deployment.metadata.generation.unwrap_or_default());
            verdict.add_count(name, workload.reloads_needed, counted);
        }
        for retired in &self.model.retired {
            verdict.add_count(&retired.name, retired.reloads_needed, retired.reloads_counted);
        }
        Ok(verdict)
    }
}

/// What [`Churn::verify`] found.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Verdict {
    pub markers_checked: u64,
    pub wrong_markers: u64,
    pub reloads_needed: u64,
    pub reloads_counted: u64,
    /// Reloads a workload needed and never got.
    pub lost: u64,
    /// Generation steps beyond the reloads a workload needed.
    pub doubled: u64,
    pub problems: Vec<String>,
}

impl Verdict {
    fn add_count(&mut self, name: &str, needed: u64, counted: u64) {
        self.reloads_needed += needed;
        self.reloads_counted += counted;
        if counted < needed {
            self.lost += needed - counted;
            self.problems.push(format!("{name}: {counted} reloads counted, {needed} needed"));
        } else if counted > needed {
            self.doubled += counted - needed;
            self.problems.push(format!("{name}: {counted} reloads counted, {needed} needed"));
        }
    }
}

/// The reload annotations for `refs` (`null` removes an empty list).
fn reference_annotations(refs: &BTreeSet<ResourceRef>) -> serde_json::Map<String, serde_json::Value> {
    let list = |kind: ResourceKind| {
        let names: Vec<&str> = refs.iter().filter(|r| r.kind == kind).map(|r| r.name.as_str()).collect();
        if names.is_empty() { serde_json::Value::Null } else { names.join(",").into() }
    };
    let mut annotations = serde_json::Map::new();
    annotations.insert(ANNOTATION_CONFIGMAP_RELOAD.to_owned(), list(ResourceKind::ConfigMap));
    annotations.insert(ANNOTATION_SECRET_RELOAD.to_owned(), list(ResourceKind::Secret));
    annotations
}

fn edit_value(deployment: &Deployment) -> Option<String> {
    let spec = deployment.spec.as_ref()?.template.spec.as_ref()?;
    let env = spec.containers.first()?.env.as_ref()?;
    env.iter().find(|e| e.name == EDIT_VARIABLE)?.value.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_annotations_list_each_kind_and_drop_an_empty_one() {
        let refs: BTreeSet<ResourceRef> =
            [ResourceRef::configmap("b"), ResourceRef::configmap("a")].into_iter().collect();
        let annotations = reference_annotations(&refs);
        assert_eq!(annotations[ANNOTATION_CONFIGMAP_RELOAD], "a,b");
        assert_eq!(annotations[ANNOTATION_SECRET_RELOAD], serde_json::Value::Null);
    }

    #[test]
    fn a_count_off_either_way_is_a_problem() {
        let mut verdict = Verdict::default();
        for (needed, counted) in [(2, 2), (3, 1), (1, 2)] {
            verdict.add_count("w", needed, counted);
        }
        assert_eq!((verdict.lost, verdict.doubled, verdict.problems.len()), (2, 1, 2));
        assert_eq!((verdict.reloads_needed, verdict.reloads_counted), (6, 5));
    }
}
