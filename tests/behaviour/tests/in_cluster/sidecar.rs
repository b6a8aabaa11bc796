//! H59: `docs/sidecar-example.yaml` applied as it is (only the images named for this machine: the
//! reloader image's tag, and the test app imported under the Prometheus image's name, which
//! serves `POST /-/reload` and prints its config file). The init container fills the shared volume
//! before the app starts; the sidecar swaps the files and calls the reload endpoint after a
//! ConfigMap change and after a Secret change; the pod is never restarted.

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams};
use reloader_harness::{NotYet, wait_until};
use serde_json::json;

use crate::support::{Cluster, IMAGE_REPOSITORY, POD_PATIENCE, VERSION, restarts, workspace_root};

const NAMESPACE: &str = "monitoring";
const APP_IMAGE_AS: &str = "quay.io/prometheus/prometheus:v3.5.0";
const CONFIG_FILE: &str = "/etc/prometheus/prometheus.yml";

fn printed_config(content: &str) -> String {
    format!("file {CONFIG_FILE}={}", content.replace('\n', "\\n"))
}

async fn put_secret(cluster: &Cluster, value: &str) {
    let secrets: Api<Secret> = Api::namespaced(cluster.client(), NAMESPACE);
    let body = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": { "name": "prometheus-remote-write" },
        "stringData": { "remote-write.yml": value },
    });
    secrets
        .patch(
            "prometheus-remote-write",
            &PatchParams::apply("in-cluster-test").force(),
            &Patch::Apply(&body),
        )
        .await
        .expect("applying the Secret");
}

/// Waits until the pod printed every line of `lines`, in order of first appearance.
async fn wait_printed(cluster: &Cluster, pod: &str, lines: &[String]) -> Vec<String> {
    wait_until(&format!("the app to print {lines:?}"), POD_PATIENCE, || async {
        let printed = cluster.node.container_output(NAMESPACE, pod, "prometheus");
        if lines.iter().all(|line| printed.contains(line)) {
            Ok(printed)
        } else {
            Err(NotYet::because(format!("{printed:?}")))
        }
    })
    .await
    .unwrap_or_else(|error| panic!("{error}\n{}", cluster.node_log_tail()))
}

pub async fn example(cluster: &Cluster) {
    let app_archive = reloader_harness::NodeBinaries::locate().expect("the node's images").app_image;
    cluster.node.import_image(&app_archive, &[APP_IMAGE_AS]).unwrap_or_else(|error| panic!("{error}"));
    cluster.namespace(NAMESPACE).await;
    cluster.put_config_map(NAMESPACE, "prometheus-config", "prometheus.yml", "global: {}\n").await;
    cluster.put_config_map(NAMESPACE, "prometheus-rules", "rules.yml", "groups: []\n").await;
    put_secret(cluster, "url: a\n").await;

    let manifest =
        std::fs::read_to_string(workspace_root().join("docs/sidecar-example.yaml")).expect("the example");
    let manifest =
        manifest.replace(&format!("{IMAGE_REPOSITORY}:latest"), &format!("{IMAGE_REPOSITORY}:{VERSION}"));
    let file = tempfile::Builder::new().suffix(".yaml").tempfile().expect("a temp file");
    std::fs::write(file.path(), manifest).expect("writing the manifest");
    cluster.kubectl(&["apply", "-f", &file.path().display().to_string()]);

    let pods = cluster.ready_pods(NAMESPACE, "app=prometheus", 1).await;
    let pod = &pods[0];
    let name = pod.metadata.name.clone().expect("a name");
    let uid = pod.metadata.uid.clone();
    // The init container wrote the files before the app started: its first read found them.
    let printed = wait_printed(cluster, &name, &[printed_config("global: {}\n")]).await;
    let first_file_line = printed.iter().find(|line| line.starts_with("file ")).expect("a file line");
    assert_eq!(*first_file_line, printed_config("global: {}\n"), "the app started with its files in place");

    cluster
        .put_config_map(NAMESPACE, "prometheus-config", "prometheus.yml", "global: {scrape_interval: 5s}\n")
        .await;
    wait_printed(cluster, &name, &["reload 1".into(), printed_config("global: {scrape_interval: 5s}\n")])
        .await;
    put_secret(cluster, "url: b\n").await;
    wait_printed(cluster, &name, &["reload 2".into()]).await;

    let pods: Api<Pod> = Api::namespaced(cluster.client(), NAMESPACE);
    let now = pods.list(&ListParams::default().labels("app=prometheus")).await.expect("listing").items;
    assert_eq!(now.len(), 1);
    assert_eq!(now[0].metadata.uid, uid, "the same pod");
    assert!(
        restarts(&now[0]).values().all(|count| *count == 0),
        "no container restarted: {:?}",
        restarts(&now[0])
    );
    let init =
        now[0].status.as_ref().and_then(|status| status.init_container_statuses.clone()).unwrap_or_default();
    assert!(
        init.iter().all(|container| container.restart_count == 0),
        "no init container or sidecar restarted"
    );
}
