//! C1: one Deployment using 10 ConfigMaps and 10 Secrets, all 20 changed within a second, with
//! `--coalesce-period=2s` (ours; Stakater has no such flag): how many ReplicaSets
//! kube-controller-manager created for it. Counted from a watch, so that ReplicaSets pruned by
//! `revisionHistoryLimit` still count.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde::Serialize;
use serde_json::json;

use super::pairs::create_namespace;
use crate::dataset::create;
use crate::identity::from_json;
use crate::observer::WorkloadObserver;
use crate::subject::{Launch, Subject};
use crate::{BenchError, Plan};
use reloader_harness::ControlPlane;
use reloader_tests::fixtures::{ANNOTATION_AUTO, Kind, WorkloadSpec};

const EACH_KIND: usize = 10;
const WORKLOAD: &str = "app";
/// 20 updates spread over a second.
const UPDATE_GAP: Duration = Duration::from_millis(50);
pub const COALESCE_PERIOD: &str = "2s";
const TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Serialize)]
pub struct CoalesceOutcome {
    /// ReplicaSets created after the updates began.
    pub new_replica_sets: usize,
    /// Writes to the Deployment's spec (generation moves).
    pub writes: i64,
}

pub async fn run(
    plane: &ControlPlane,
    subject: &Subject,
    log_dir: &Path,
    plan: &Plan,
) -> Result<CoalesceOutcome, BenchError> {
    let client = plane.client();
    let namespace = format!("c1-{}", subject.label());
    create_namespace(&client, &namespace).await?;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let mut spec = WorkloadSpec::new(Kind::Deployment, WORKLOAD)
        .without_pods()
        .metadata_annotation(ANNOTATION_AUTO, "true");
    for i in 0..EACH_KIND {
        let name = format!("c1-{i:02}");
        create(&configmaps, from_json(json!({ "metadata": { "name": name }, "data": { "value": "0" } })))
            .await?;
        create(&secrets, from_json(json!({ "metadata": { "name": name }, "stringData": { "value": "0" } })))
            .await?;
        spec = spec.env_from_configmap(&name).env_from_secret(&name);
    }
    spec.create(&client, &namespace).await?;
    let observer = WorkloadObserver::start(client.clone(), &namespace).await?;
    let replica_sets = ReplicaSetNames::watch(client.clone(), &namespace);
    wait_for(|| !replica_sets.names().is_empty(), "the Deployment's first ReplicaSet").await?;

    let launch = Launch::named("c1").ours_only(format!("--coalesce-period={COALESCE_PERIOD}"));
    let mut controller = subject.start(plane, log_dir, &launch).await?;
    controller.wait_ready(TIMEOUT).await?;
    tokio::time::sleep(plan.quiet).await;

    let existing = replica_sets.names();
    let generation = observer.generation(WORKLOAD);
    let patch = Patch::Merge(json!({ "data": { "value": "1" } }));
    let secret_patch = Patch::Merge(json!({ "stringData": { "value": "1" } }));
    for i in 0..EACH_KIND {
        let name = format!("c1-{i:02}");
        configmaps.patch(&name, &PatchParams::default(), &patch).await?;
        tokio::time::sleep(UPDATE_GAP).await;
        secrets.patch(&name, &PatchParams::default(), &secret_patch).await?;
        tokio::time::sleep(UPDATE_GAP).await;
    }
    let deadline = Instant::now() + TIMEOUT;
    controller
        .while_alive(observer.wait_changed(WORKLOAD, generation, deadline))
        .await?
        .ok_or_else(|| BenchError::measure("the Deployment never changed"))?;
    // Settled: no write for a quiet period (after the coalescing window has surely closed).
    let mut last = (observer.generation(WORKLOAD), replica_sets.names().len(), Instant::now());
    while last.2.elapsed() < plan.quiet + Duration::from_secs(2) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = (observer.generation(WORKLOAD), replica_sets.names().len());
        if now != (last.0, last.1) {
            last = (now.0, now.1, Instant::now());
        }
    }
    controller.kill();
    let new_replica_sets = replica_sets.names().difference(&existing).count();
    Ok(CoalesceOutcome { new_replica_sets, writes: observer.generation(WORKLOAD) - generation })
}

async fn wait_for(condition: impl Fn() -> bool, what: &str) -> Result<(), BenchError> {
    let deadline = Instant::now() + TIMEOUT;
    while !condition() {
        if Instant::now() >= deadline {
            return Err(BenchError::measure(format!("timed out waiting for {what}")));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Every ReplicaSet name seen in a namespace, deleted ones included.
struct ReplicaSetNames {
    names: Arc<Mutex<BTreeSet<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl ReplicaSetNames {
    fn watch(client: Client, namespace: &str) -> Self {
        let api: Api<ReplicaSet> = Api::namespaced(client, namespace);
        let names: Arc<Mutex<BTreeSet<String>>> = Arc::default();
        let seen = names.clone();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
            while let Some(event) = stream.next().await {
                if let Ok(watcher::Event::Apply(rs) | watcher::Event::InitApply(rs)) = event {
                    seen.lock().unwrap_or_else(PoisonError::into_inner).insert(rs.name_any());
                }
            }
        });
        Self { names, task }
    }

    fn names(&self) -> BTreeSet<String> {
        self.names.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl Drop for ReplicaSetNames {
    fn drop(&mut self) {
        self.task.abort();
    }
}
