//! H55: the chart's admission webhook, called by the API server through its Service (endpoint
//! routing: `--enable-aggregator-routing` makes the API server dial the Service's ready endpoint,
//! the pod's IP on the node's bridge) with the certificate the chart generated.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use reloader_harness::{NotYet, wait_until};
use serde_json::json;

use crate::chart::{APPS, RELEASE, RELEASE_NAMESPACE, RELEASE_SELECTOR};
use crate::support::{Cluster, RELOAD_PATIENCE, webhook_enabled};

/// The env var the env-vars strategy adds for ConfigMap `web` (Stakater's name).
const MARKER: &str = "STAKATER_WEB_CONFIGMAP";

fn has_marker(deployment: &Deployment) -> bool {
    deployment.spec.as_ref().and_then(|spec| spec.template.spec.as_ref()).is_some_and(|pod| {
        pod.containers
            .iter()
            .flat_map(|container| container.env.iter().flatten())
            .any(|env| env.name == MARKER)
    })
}

/// `web` as its manifest says it, without the marker reloader added: what a GitOps tool or
/// `helm upgrade` re-applies (a full replace).
fn as_declared(mut deployment: Deployment) -> Deployment {
    if let Some(pod) = deployment.spec.as_mut().and_then(|spec| spec.template.spec.as_mut()) {
        for container in &mut pod.containers {
            if let Some(env) = container.env.as_mut() {
                env.retain(|env| env.name != MARKER);
            }
        }
    }
    deployment.metadata.managed_fields = None;
    deployment
}

/// A re-apply without the marker keeps it (the webhook put it back), so no real pod is rolled.
pub async fn through_its_service(cluster: &Cluster) {
    let values = json!({
        "reloader": { "enableHA": true, "deployment": { "replicas": 2 } },
        "webhook": webhook_enabled(),
    });
    cluster.helm_install(RELEASE, RELEASE_NAMESPACE, &values);
    cluster.rolled_out(RELEASE_NAMESPACE, RELEASE_SELECTOR).await;
    cluster.ready_pods(RELEASE_NAMESPACE, RELEASE_SELECTOR, 2).await;

    let deployments: Api<Deployment> = Api::namespaced(cluster.client(), APPS);
    let current = deployments.get("web").await.expect("reading web");
    assert!(has_marker(&current), "web was reloaded before, so it carries {MARKER}");

    // Until the webhook answers, a dry-run replace shows the marker gone (failurePolicy Ignore).
    wait_until("the webhook to keep the marker on a dry-run re-apply", RELOAD_PATIENCE, || async {
        let current = deployments.get("web").await?;
        let dry_run = PostParams { dry_run: true, ..PostParams::default() };
        let answer = deployments.replace("web", &dry_run, &as_declared(current)).await?;
        if has_marker(&answer) { Ok(()) } else { Err(NotYet::because("the marker was dropped")) }
    })
    .await
    .unwrap_or_else(|error| panic!("{error}\n{}", cluster.node_log_tail()));

    let pods: Api<Pod> = Api::namespaced(cluster.client(), APPS);
    let uids = |list: Vec<Pod>| list.into_iter().filter_map(|pod| pod.metadata.uid).collect::<Vec<_>>();
    let pods_before =
        uids(pods.list(&ListParams::default().labels("app=web")).await.expect("listing pods").items);
    let current = deployments.get("web").await.expect("reading web");
    let generation = current.metadata.generation;
    let template = serde_json::to_value(&current.spec.as_ref().expect("a spec").template).expect("json");
    let replaced = deployments
        .replace("web", &PostParams::default(), &as_declared(current))
        .await
        .expect("re-applying web");
    assert!(has_marker(&replaced), "the webhook kept {MARKER} on the re-apply");
    let after = serde_json::to_value(&replaced.spec.as_ref().expect("a spec").template).expect("json");
    assert_eq!(
        replaced.metadata.generation, generation,
        "the re-apply changed nothing in the spec:\n{template:#}\n{after:#}"
    );

    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    let pods_after =
        uids(pods.list(&ListParams::default().labels("app=web")).await.expect("listing pods").items);
    assert_eq!(pods_after, pods_before, "no pod of web was replaced");
}
