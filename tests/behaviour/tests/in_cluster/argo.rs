//! H57: the real Argo Rollouts controller (built by `hack/build argo-controller`, run beside the
//! node) rolls what reloader writes: a canary Rollout reloaded with the env-vars strategy gets a
//! new ReplicaSet, walks its steps and is Healthy; with `rollout-strategy: restart` the
//! controller restarts the pods through `spec.restartAt`, the template left alone.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use reloader_harness::{NotYet, wait_until};
use serde_json::{Value, json};

use crate::chart::{APPS, RELEASE, RELEASE_NAMESPACE, RELEASE_SELECTOR};
use crate::support::{Cluster, POD_PATIENCE, app_deployment, webhook_enabled};

const CRDS: [&str; 5] =
    ["rollout", "analysis-run", "analysis-template", "cluster-analysis-template", "experiment"];

fn rollouts(cluster: &Cluster) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("argoproj.io", "v1alpha1", "Rollout"),
        "rollouts",
    );
    Api::namespaced_with(cluster.client(), APPS, &resource)
}

/// A canary Rollout of the test app printing GREETING from ConfigMap `config_map`.
fn rollout(name: &str, image: &str, config_map: &str, annotations: Value) -> Value {
    let deployment = app_deployment(name, image, config_map, annotations);
    json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
        "metadata": deployment["metadata"],
        "spec": {
            "replicas": 2,
            "selector": deployment["spec"]["selector"],
            "template": deployment["spec"]["template"],
            "strategy": { "canary": { "steps": [ { "setWeight": 50 }, { "pause": { "duration": 1 } } ] } },
        },
    })
}

async fn wait_healthy(cluster: &Cluster, name: &str, generation_at_least: i64) {
    let api = rollouts(cluster);
    wait_until(&format!("Rollout {name} Healthy"), POD_PATIENCE, || async {
        let object = api.get(name).await?;
        let status = &object.data["status"];
        let phase = status["phase"].as_str().unwrap_or_default();
        let observed: i64 = status["observedGeneration"]
            .as_str()
            .and_then(|g| g.parse().ok())
            .or(status["observedGeneration"].as_i64())
            .unwrap_or_default();
        if phase == "Healthy" && observed >= generation_at_least {
            Ok(())
        } else {
            Err(NotYet::because(format!(
                "phase {phase:?}, observed generation {observed}: {}",
                status["message"]
            )))
        }
    })
    .await
    .unwrap_or_else(|error| panic!("{error}\n{}", cluster.node_log_tail()));
}

async fn generation(cluster: &Cluster, name: &str) -> i64 {
    rollouts(cluster).get(name).await.expect("reading the Rollout").metadata.generation.unwrap_or_default()
}

/// The ReplicaSets the controller made for Rollout `name`.
async fn replica_sets(cluster: &Cluster, name: &str) -> BTreeSet<String> {
    let api: Api<ReplicaSet> = Api::namespaced(cluster.client(), APPS);
    let list =
        api.list(&ListParams::default().labels(&format!("app={name}"))).await.expect("listing ReplicaSets");
    list.items.into_iter().filter_map(|set| set.metadata.name).collect()
}

/// Waits until `count` Ready pods of `name` all printed `line`; returns their uids.
async fn all_pods_print(cluster: &Cluster, name: &str, count: usize, line: &str) -> BTreeSet<String> {
    let pods: Api<Pod> = Api::namespaced(cluster.client(), APPS);
    let list = ListParams::default().labels(&format!("app={name}"));
    wait_until(&format!("{count} pods of {name} printing {line:?}"), POD_PATIENCE, || async {
        let live: Vec<Pod> = pods
            .list(&list)
            .await?
            .items
            .into_iter()
            .filter(|pod| pod.metadata.deletion_timestamp.is_none())
            .collect();
        let printing = live
            .iter()
            .filter(|pod| crate::support::is_ready(pod))
            .filter(|pod| {
                let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
                cluster.node.container_output(APPS, pod_name, "app").iter().any(|printed| printed == line)
            })
            .count();
        if live.len() == count && printing == count {
            Ok(live.into_iter().filter_map(|pod| pod.metadata.uid).collect())
        } else {
            Err(NotYet::because(format!("{} pods, {printing} printing it", live.len())))
        }
    })
    .await
    .unwrap_or_else(|error| panic!("{error}\n{}", cluster.node_log_tail()))
}

pub async fn real_controller(cluster: &Cluster) {
    let dir = cluster.plane.binaries().rollout_crd.parent().expect("the CRDs' folder").to_owned();
    for crd in CRDS {
        let path = dir.join(format!("{crd}-crd.yaml")).display().to_string();
        cluster.kubectl(&["apply", "--server-side", "-f", &path]);
    }
    cluster.node.start_rollouts_controller(&cluster.plane).unwrap_or_else(|error| panic!("{error}"));
    let values = json!({
        "reloader": { "enableHA": true, "deployment": { "replicas": 2 }, "isArgoRollouts": true },
        "webhook": webhook_enabled(),
    });
    cluster.helm_install(RELEASE, RELEASE_NAMESPACE, &values);
    cluster.rolled_out(RELEASE_NAMESPACE, RELEASE_SELECTOR).await;
    cluster.ready_pods(RELEASE_NAMESPACE, RELEASE_SELECTOR, 2).await;
    let image = cluster.node.app_image();
    let params = PatchParams::apply("in-cluster-test").force();

    // The env-vars strategy: a new ReplicaSet, the canary steps, Healthy, every pod printing it.
    cluster.put_config_map(APPS, "canary-greeting", "greeting", "one").await;
    let canary =
        rollout("canary", &image, "canary-greeting", json!({ "reloader.stakater.com/auto": "true" }));
    rollouts(cluster)
        .patch("canary", &params, &Patch::Apply(&canary))
        .await
        .expect("applying the canary Rollout");
    wait_healthy(cluster, "canary", 1).await;
    all_pods_print(cluster, "canary", 2, "env GREETING=one").await;
    let before = generation(cluster, "canary").await;
    let sets_before = replica_sets(cluster, "canary").await;
    cluster.put_config_map(APPS, "canary-greeting", "greeting", "two").await;
    wait_until("reloader to write the canary Rollout", POD_PATIENCE, || async {
        let now = generation(cluster, "canary").await;
        if now > before { Ok(()) } else { Err(NotYet::because(format!("generation {now}"))) }
    })
    .await
    .unwrap_or_else(|error| panic!("{error}"));
    wait_healthy(cluster, "canary", before + 1).await;
    all_pods_print(cluster, "canary", 2, "env GREETING=two").await;
    assert_eq!(generation(cluster, "canary").await, before + 1, "one change, one write");
    let sets_after = replica_sets(cluster, "canary").await;
    assert_eq!(
        sets_after.difference(&sets_before).count(),
        1,
        "one new ReplicaSet: {sets_before:?} -> {sets_after:?}"
    );

    // rollout-strategy: restart: restartAt set, the pods replaced, no new ReplicaSet.
    cluster.put_config_map(APPS, "restart-greeting", "greeting", "one").await;
    let restarted = rollout(
        "restarted",
        &image,
        "restart-greeting",
        json!({ "reloader.stakater.com/auto": "true", "reloader.stakater.com/rollout-strategy": "restart" }),
    );
    rollouts(cluster)
        .patch("restarted", &params, &Patch::Apply(&restarted))
        .await
        .expect("applying the Rollout");
    wait_healthy(cluster, "restarted", 1).await;
    let pods_before = all_pods_print(cluster, "restarted", 2, "env GREETING=one").await;
    let sets_before = replica_sets(cluster, "restarted").await;
    cluster.put_config_map(APPS, "restart-greeting", "greeting", "two").await;
    let pods_after = all_pods_print(cluster, "restarted", 2, "env GREETING=two").await;
    assert!(
        pods_after.is_disjoint(&pods_before),
        "every pod was restarted: {pods_before:?} -> {pods_after:?}"
    );
    let object = rollouts(cluster).get("restarted").await.expect("reading the Rollout");
    assert!(object.data["spec"]["restartAt"].is_string(), "restartAt set: {}", object.data["spec"]);
    assert_eq!(replica_sets(cluster, "restarted").await, sets_before, "the template was left alone");
}
