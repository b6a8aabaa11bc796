//! The fixture most scenarios share: ConfigMaps and the Deployments that use them, updated at a
//! steady pace, with each update's workload change found on the observer's watch.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::BenchError;
use crate::dataset::create;
use crate::identity::from_json;
use crate::observer::WorkloadObserver;
use crate::stats::millis;
use reloader_tests::fixtures::{ANNOTATION_AUTO, Kind, WorkloadSpec};

/// Deployments and the ConfigMaps they use, in one namespace.
#[derive(Debug, Clone)]
pub struct Pairs {
    pub namespace: String,
    /// (ConfigMap, Deployment) names.
    pub pairs: Vec<(String, String)>,
}

/// Whether the Deployments ask a reloader to act.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Annotated {
    /// `reloader.stakater.com/auto: "true"`.
    Auto,
    /// Nothing: for the floor client, which reloaders must leave alone.
    No,
}

/// Creates `namespace`, `count` ConfigMaps and `count` Deployments, Deployment i using ConfigMap
/// i by envFrom; or, with `shared`, every Deployment using the first ConfigMap.
pub async fn create_pairs(
    client: &Client,
    namespace: &str,
    count: usize,
    shared: bool,
    annotated: Annotated,
) -> Result<Pairs, BenchError> {
    create_namespace(client, namespace).await?;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let configmap_count = if shared { 1 } else { count };
    for i in 0..configmap_count {
        let object =
            from_json(json!({ "metadata": { "name": format!("cm-{i:04}") }, "data": { "value": "0" } }));
        create(&configmaps, object).await?;
    }
    let mut pairs = Vec::with_capacity(count);
    for i in 0..count {
        let configmap = format!("cm-{:04}", if shared { 0 } else { i });
        let deployment = format!("app-{i:04}");
        let mut spec =
            WorkloadSpec::new(Kind::Deployment, &deployment).without_pods().env_from_configmap(&configmap);
        if annotated == Annotated::Auto {
            spec = spec.metadata_annotation(ANNOTATION_AUTO, "true");
        }
        match spec.create(client, namespace).await {
            Ok(_) => {}
            Err(reloader_harness::PlaneError::Kube(kube::Error::Api(status))) if status.code == 409 => {}
            Err(error) => return Err(error.into()),
        }
        pairs.push((configmap, deployment));
    }
    Ok(Pairs { namespace: namespace.to_owned(), pairs })
}

pub async fn create_namespace(client: &Client, name: &str) -> Result<(), BenchError> {
    create(&Api::<Namespace>::all(client.clone()), from_json(json!({ "metadata": { "name": name } }))).await
}

/// Sets the ConfigMap's `value`; returns when the API server's response arrived.
pub async fn update_configmap(api: &Api<ConfigMap>, name: &str, value: &str) -> Result<Instant, BenchError> {
    api.patch(name, &PatchParams::default(), &Patch::Merge(json!({ "data": { "value": value } }))).await?;
    Ok(Instant::now())
}

/// One update made, and what it should cause.
#[derive(Debug, Clone)]
pub struct Update {
    pub workload: String,
    pub generation_before: i64,
    pub responded_at: Instant,
}

/// Updates the ConfigMaps of `indices` (modulo the pair count) one every `interval`, each to a
/// value tagged `tag` so that every update changes the content.
pub async fn paced_updates(
    client: &Client,
    pairs: &Pairs,
    observer: &WorkloadObserver,
    indices: std::ops::Range<usize>,
    interval: Duration,
    tag: &str,
) -> Result<Vec<Update>, BenchError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &pairs.namespace);
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut updates = Vec::with_capacity(indices.len());
    for i in indices {
        ticks.tick().await;
        let (configmap, workload) = &pairs.pairs[i % pairs.pairs.len()];
        let generation_before = observer.generation(workload);
        let responded_at = update_configmap(&api, configmap, &format!("{tag}-{i}")).await?;
        updates.push(Update { workload: workload.clone(), generation_before, responded_at });
    }
    Ok(updates)
}

/// When each update's workload changed, waiting at most `timeout` for the stragglers.
pub async fn resolve(
    observer: &WorkloadObserver,
    updates: &[Update],
    timeout: Duration,
) -> Vec<Option<Instant>> {
    let deadline = Instant::now() + timeout;
    let mut changes = Vec::with_capacity(updates.len());
    for update in updates {
        changes.push(observer.wait_changed(&update.workload, update.generation_before, deadline).await);
    }
    changes
}

/// Milliseconds from each update's response to its workload change (the ones that happened).
pub fn latencies_ms(updates: &[Update], changes: &[Option<Instant>]) -> Vec<f64> {
    updates
        .iter()
        .zip(changes)
        .filter_map(|(update, change)| {
            change.map(|at| millis(at.saturating_duration_since(update.responded_at)))
        })
        .collect()
}
