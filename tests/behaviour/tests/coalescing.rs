//! Coalescing (docs/beyond-stakater.md §4, docs/benchmark.md C1) on the real control plane: one Deployment using 10
//! ConfigMaps and 10 Secrets, all 20 changed within a second. With `--coalesce-period=2s` the burst
//! is one write, hence exactly one new ReplicaSet, and every marker is current; with the
//! default `--coalesce-period=0` the same burst rolls the Deployment more than once.
//!
//! Build the binary first: `cargo build -p reloader-cli`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::future::join_all;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use reloader_harness::{ControlPlane, NotYet, Reloader, TestNamespace, wait_until};
use reloader_tests::fixtures::{
    ResourceKind, ResourceRef, Resources, TestEnv, expected_env_var, negative_wait,
};
use serde_json::json;

const PER_KIND: usize = 10;
const RELOAD_TIMEOUT: Duration = Duration::from_secs(60);
const ROLLOUT_TIMEOUT: Duration = Duration::from_secs(90);
const NAME: &str = "burst";
/// Between the starts of two updates of the burst.
const STAGGER: Duration = Duration::from_millis(25);
const WRITES: &str = r#"reloader_action_total{workload_kind="Deployment",result="success"}"#;

fn resources() -> Vec<ResourceRef> {
    let configmaps = (0..PER_KIND).map(|i| ResourceRef::configmap(format!("config-{i}")));
    configmaps.chain((0..PER_KIND).map(|i| ResourceRef::secret(format!("secret-{i}")))).collect()
}

fn deployment(resources: &[ResourceRef]) -> Deployment {
    let env_from: Vec<_> = resources
        .iter()
        .map(|r| match r.kind {
            ResourceKind::Secret => json!({"secretRef": {"name": r.name}}),
            _ => json!({"configMapRef": {"name": r.name}}),
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": NAME, "annotations": {"reloader.stakater.com/auto": "true"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": NAME}},
            "template": {
                "metadata": {"labels": {"app": NAME}},
                "spec": {"containers": [{
                    "name": "app", "image": "registry.k8s.io/pause:3.10", "envFrom": env_from,
                }]},
            },
        },
    }))
    .unwrap()
}

/// What a burst did to the Deployment, once every marker is current and it has settled.
#[derive(Debug)]
struct BurstOutcome {
    burst: Duration,
    replica_sets_before: usize,
    replica_sets_after: usize,
    writes: f64,
    coalesced: f64,
}

/// The markers of the Deployment's template, by env-var name.
fn markers(deployment: &Deployment) -> BTreeMap<String, String> {
    let containers = deployment.spec.as_ref().and_then(|s| s.template.spec.as_ref()).map(|s| &s.containers);
    containers
        .into_iter()
        .flatten()
        .flat_map(|c| c.env.iter().flatten())
        .filter(|e| e.name.starts_with("STAKATER_"))
        .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
        .collect()
}

/// ReplicaSets of the Deployment, once its controller has observed its latest generation.
async fn replica_sets(client: &Client, namespace: &str) -> Result<usize, NotYet> {
    let deployment = Api::<Deployment>::namespaced(client.clone(), namespace).get(NAME).await?;
    let generation = deployment.metadata.generation.unwrap_or_default();
    let observed = deployment.status.as_ref().and_then(|s| s.observed_generation).unwrap_or_default();
    if observed < generation {
        return Err(NotYet::because(format!("observed generation {observed} < {generation}")));
    }
    let listed = Api::<ReplicaSet>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().labels(&format!("app={NAME}")))
        .await?;
    Ok(listed.items.len())
}

/// Sets up the namespace, starts reloader with `--coalesce-period=<period>`, changes all 20
/// resources at once and reports what happened.
async fn burst(plane: &ControlPlane, ns: &TestNamespace, period: &str) -> BurstOutcome {
    let client = plane.client();
    let namespace = ns.name();
    let store = Resources::new(&client, namespace);
    let all = resources();
    for resource in &all {
        store.create(resource, &[("value", "before")]).await.unwrap();
    }
    let deployments: Api<Deployment> = ns.api(&client);
    deployments.create(&PostParams::default(), &deployment(&all)).await.unwrap();
    let reloader = Reloader::builder(plane)
        .name(format!("reloader-coalesce-{period}"))
        .args([format!("--namespaces={namespace}"), format!("--coalesce-period={period}")])
        .start()
        .await
        .unwrap();
    let replica_sets_before =
        wait_until("the Deployment's first ReplicaSet", ROLLOUT_TIMEOUT, || replica_sets(&client, namespace))
            .await
            .unwrap();

    let started = Instant::now();
    // Spread over about half a second, as a Helm upgrade applies its objects one by one.
    let updates = all.iter().enumerate().map(|(i, resource)| {
        let store = store.clone();
        async move {
            tokio::time::sleep(STAGGER * i as u32).await;
            let hash = store.update_data(resource, &[("value", "after")]).await.unwrap();
            (expected_env_var(resource.kind, &resource.name), hash)
        }
    });
    let expected: BTreeMap<String, String> = join_all(updates).await.into_iter().collect();
    let burst = started.elapsed();

    wait_until("every marker to be current", RELOAD_TIMEOUT, || async {
        let found = markers(&deployments.get(NAME).await?);
        if found == expected {
            Ok(())
        } else {
            Err(NotYet(format!("{} of 20 markers current", current(&found, &expected))))
        }
    })
    .await
    .unwrap();
    let latency = started.elapsed();
    // Anything still pending would show within this quiet time.
    tokio::time::sleep(negative_wait(latency)).await;
    let replica_sets_after =
        wait_until("the Deployment to settle", ROLLOUT_TIMEOUT, || replica_sets(&client, namespace))
            .await
            .unwrap();
    assert_eq!(markers(&deployments.get(NAME).await.unwrap()), expected, "markers stay current");
    BurstOutcome {
        burst,
        replica_sets_before,
        replica_sets_after,
        writes: reloader.metric(WRITES).await.unwrap().unwrap_or_default(),
        coalesced: reloader.metric("reloader_coalesced_reloads_total").await.unwrap().unwrap_or_default(),
    }
}

fn current(found: &BTreeMap<String, String>, expected: &BTreeMap<String, String>) -> usize {
    expected.iter().filter(|(name, hash)| found.get(*name) == Some(*hash)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_twenty_changes_is_one_rollout_with_a_coalesce_period() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, .. } = &env;

    let coalesced = burst(plane, ns, "2s").await;
    eprintln!("--coalesce-period=2s: {coalesced:?}");
    assert!(coalesced.burst < Duration::from_secs(1), "the 20 changes were made within 1 s: {coalesced:?}");
    assert_eq!(coalesced.replica_sets_before, 1);
    assert_eq!(coalesced.replica_sets_after, 2, "exactly one new ReplicaSet: {coalesced:?}");
    assert_eq!(coalesced.writes, 1.0, "one write for 20 changes: {coalesced:?}");
    assert_eq!(coalesced.coalesced, 19.0, "19 changes absorbed by that write: {coalesced:?}");

    // The contrast: the same burst, written as the changes arrive.
    let ns = plane.namespace().await;
    let immediate = burst(plane, &ns, "0s").await;
    eprintln!("--coalesce-period=0s: {immediate:?}");
    assert!(immediate.writes > 1.0, "without a window the burst is several writes: {immediate:?}");
    assert!(
        immediate.replica_sets_after - immediate.replica_sets_before > 1,
        "and several rollouts: {immediate:?}"
    );
}
