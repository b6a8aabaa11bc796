//! The chart and the plain manifests as users install them, on the real node.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use reloader_harness::{NotYet, wait_until};
use serde_json::json;

use crate::support::{Cluster, RELOAD_PATIENCE, is_ready};
use crate::webhook::{assert_refused, jobs_as_controller};

pub const RELEASE: &str = "reloader";
pub const RELEASE_NAMESPACE: &str = "reloader";
pub const RELEASE_SELECTOR: &str = "app.kubernetes.io/instance=reloader";
/// The namespace of the workloads reloader rolls.
pub const APPS: &str = "apps";
/// How long a write that should not come is waited for, after the last one landed.
const SETTLE: Duration = Duration::from_secs(5);

/// H53: `helm install` with default values; the pod becomes Ready through the chart's probes, runs
/// as the image's non-root user on a read-only root filesystem, with in-cluster config and the
/// service-account token mount; a ConfigMap change rolls a real Deployment whose new pod prints
/// the new value.
pub async fn default_install(cluster: &Cluster) {
    cluster.namespace(RELEASE_NAMESPACE).await;
    cluster.namespace(APPS).await;
    cluster.helm_install(RELEASE, RELEASE_NAMESPACE, &json!({}));
    cluster.rolled_out(RELEASE_NAMESPACE, RELEASE_SELECTOR).await;
    let pods = cluster.ready_pods(RELEASE_NAMESPACE, RELEASE_SELECTOR, 1).await;
    assert_runs_locked_down(cluster, &pods[0]);

    cluster.run_app(APPS, "web", "hello").await;
    let before = cluster.generation(APPS, "web").await;

    cluster.put_config_map(APPS, "web", "greeting", "bonjour").await;
    cluster.pod_printing(APPS, "app=web", "app", "env GREETING=bonjour").await;
    tokio::time::sleep(SETTLE).await;
    assert_eq!(cluster.generation(APPS, "web").await, before + 1, "one change, one write");
    job_fence_by_default(cluster).await;
}

/// The API server serves ValidatingAdmissionPolicy, so the default install fences Job creation
/// too (writeFence.jobs "auto": `helm install` looks up what the fence's server needs), without
/// the mutating webhook: a reload recreates a Job through it, and the controller's identity is
/// refused a Job with no origin.
async fn job_fence_by_default(cluster: &Cluster) {
    let client = cluster.client();
    let labelled = ListParams::default().labels(RELEASE_SELECTOR);
    let fences =
        Api::<ValidatingWebhookConfiguration>::all(client.clone()).list(&labelled).await.unwrap().items;
    assert!(
        fences.iter().any(|config| config
            .metadata
            .name
            .as_deref()
            .is_some_and(|name| name.ends_with("-job-fence"))),
        "the default install registers the Job fence"
    );
    let mutating =
        Api::<MutatingWebhookConfiguration>::all(client.clone()).list(&labelled).await.unwrap().items;
    assert!(mutating.is_empty(), "no mutating webhook without webhook.enabled");

    let jobs: Api<Job> = Api::namespaced(client.clone(), APPS);
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "report", "annotations": {"configmap.reloader.stakater.com/reload": "web"}},
        "spec": {"suspend": true, "template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "run", "image": "registry.example/report:1"}]}}},
    }))
    .unwrap();
    let created = jobs.create(&PostParams::default(), &job).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    cluster.put_config_map(APPS, "web", "greeting", "hallo").await;
    wait_until("the Job recreated through the fence", RELOAD_PATIENCE, || async {
        match jobs.get_opt("report").await? {
            Some(job) if job.metadata.uid != created.metadata.uid => Ok(()),
            _ => Err(NotYet::because("not recreated yet")),
        }
    })
    .await
    .unwrap_or_else(|error| panic!("{error}\n{}", cluster.node_log_tail()));
    let stranger: Job = serde_json::from_value(json!({"metadata": {"name": "h53-stranger"},
        "spec": {"suspend": true, "template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "run", "image": "busybox"}]}}}}))
    .unwrap();
    assert_refused(&jobs_as_controller(cluster).await, &stranger).await;
    assert!(jobs.get_opt("h53-stranger").await.unwrap().is_none(), "a Job with no origin was created");
}

/// The container runs as uid 65534 (the image's user) on a read-only root filesystem: read from
/// the real process, not from the spec.
fn assert_runs_locked_down(cluster: &Cluster, pod: &Pod) {
    let status = pod.status.as_ref().expect("a running pod has a status");
    let container = status.container_statuses.as_ref().and_then(|all| all.first()).expect("one container");
    let id = container.container_id.as_deref().expect("a started container has an id");
    let pids = cluster.node.container_processes(id);
    let pid = *pids.first().unwrap_or_else(|| panic!("no process found for container {id}"));
    let proc_status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("its /proc status");
    let uid = proc_status.lines().find(|line| line.starts_with("Uid:")).expect("a Uid line");
    assert_eq!(uid.split_whitespace().skip(1).collect::<Vec<_>>(), ["65534"; 4], "{uid}");
    let mounts = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).expect("its mountinfo");
    let root = mounts
        .lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .find(|fields| fields.get(4) == Some(&"/"))
        .expect("a root mount");
    assert!(root[5].split(',').any(|option| option == "ro"), "root mounted {}", root[5]);
    let token = mounts.lines().any(|line| line.contains("/var/run/secrets/kubernetes.io/serviceaccount"));
    assert!(token, "the service-account token is mounted:\n{mounts}");
}

/// H54: `reloader.enableHA=true` with two replicas: both Ready, one leads; the leader is deleted
/// while ConfigMap changes are made, the other replica takes over, and the changes are written
/// once each (nothing lost, nothing doubled, counted from the API server).
pub async fn high_availability(cluster: &Cluster) {
    let values = json!({ "reloader": { "enableHA": true, "deployment": { "replicas": 2 } } });
    cluster.helm_install(RELEASE, RELEASE_NAMESPACE, &values);
    cluster.rolled_out(RELEASE_NAMESPACE, RELEASE_SELECTOR).await;
    let pods = cluster.ready_pods(RELEASE_NAMESPACE, RELEASE_SELECTOR, 2).await;
    let names: Vec<String> = pods.iter().filter_map(|pod| pod.metadata.name.clone()).collect();
    let leader = wait_for_leader_among(cluster, &names).await;

    let before = cluster.generation(APPS, "web").await;
    const CHANGES: i64 = 6;
    const KILL_AFTER: i64 = 3;
    let pods_api: Api<Pod> = Api::namespaced(cluster.client(), RELEASE_NAMESPACE);
    for change in 1..=CHANGES {
        cluster.put_config_map(APPS, "web", "greeting", &format!("v{change}")).await;
        if change == KILL_AFTER {
            // Right after a change: the leader may or may not have written it when it goes.
            pods_api.delete(&leader, &DeleteParams::default()).await.expect("deleting the leader");
        }
        cluster.wait_for_generation(APPS, "web", before + change).await;
    }
    tokio::time::sleep(SETTLE).await;
    assert_eq!(cluster.generation(APPS, "web").await, before + CHANGES, "each change written exactly once");
    cluster.pod_printing(APPS, "app=web", "app", &format!("env GREETING=v{CHANGES}")).await;

    // The deleted leader released the Lease as it stopped: the survivor or the replacement pod
    // the Deployment started, whichever asked first, holds it now.
    let new_leader = cluster.leader(RELEASE_NAMESPACE).await.expect("a leader after the fail-over");
    assert_ne!(new_leader, leader, "the deleted leader still holds the Lease");
    let now_running: Vec<String> = cluster
        .ready_pods(RELEASE_NAMESPACE, RELEASE_SELECTOR, 2)
        .await
        .iter()
        .filter_map(|pod| pod.metadata.name.clone())
        .collect();
    assert!(
        now_running.contains(&new_leader),
        "{new_leader} leads but is not a running replica: {now_running:?}"
    );
}

/// Waits until the Lease names one of `candidates`.
pub async fn wait_for_leader_among(cluster: &Cluster, candidates: &[String]) -> String {
    wait_until("a replica to lead", RELOAD_PATIENCE, || async {
        match cluster.leader(RELEASE_NAMESPACE).await {
            Some(holder) if candidates.contains(&holder) => Ok(holder),
            other => Err(NotYet::because(format!("holder {other:?}, candidates {candidates:?}"))),
        }
    })
    .await
    .unwrap_or_else(|error| panic!("{error}"))
}

/// H58: `kubectl apply -k deployments/kubernetes` instead of the chart: the same pod, the same
/// reload of a real Deployment.
pub async fn plain_manifests(cluster: &Cluster) {
    cluster
        .helm
        .uninstall(RELEASE, RELEASE_NAMESPACE, cluster.plane.kubeconfig_path())
        .unwrap_or_else(|error| panic!("helm uninstall: {error}"));
    let kustomization = crate::support::workspace_root().join("deployments/kubernetes");
    let path = kustomization.display().to_string();
    cluster.kubectl(&["apply", "-k", &path]);
    cluster.rolled_out(RELEASE_NAMESPACE, "app.kubernetes.io/name=reloader").await;
    let pods = cluster.ready_pods(RELEASE_NAMESPACE, "app.kubernetes.io/name=reloader", 1).await;
    assert!(pods.iter().all(is_ready));

    let before = cluster.generation(APPS, "web").await;
    cluster.put_config_map(APPS, "web", "greeting", "from-kustomize").await;
    cluster.pod_printing(APPS, "app=web", "app", "env GREETING=from-kustomize").await;
    tokio::time::sleep(SETTLE).await;
    assert_eq!(cluster.generation(APPS, "web").await, before + 1, "one change, one write");
    cluster.kubectl(&["delete", "-k", &path, "--wait=true"]);
}
