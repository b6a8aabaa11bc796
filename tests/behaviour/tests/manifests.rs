//! The plain manifests in `deployments/kubernetes/` (rendered from the chart by `hack/manifests`,
//! whose `--check` in `hack/test` keeps them equal to it) on the real API server: `kubectl apply
//! --server-side -k` installs the kustomize base, `-f reloader.yaml` is accepted by a server-side
//! dry run, and the real binary, started with the Deployment's own args and environment and
//! authenticated as the manifests' ServiceAccount (a TokenRequest token), becomes ready, performs
//! a reload and is never forbidden anything.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, PostParams};
use reloader_harness::{ControlPlane, NotYet, Reloader, wait_until};
use reloader_tests::fixtures::TestEnv;
use serde_json::{Value, json};

const NAMESPACE: &str = "reloader";

fn manifests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deployments/kubernetes")
}

fn kubectl(plane: &ControlPlane, args: &[&str]) -> String {
    let output = Command::new(&plane.binaries().kubectl)
        .arg(format!("--kubeconfig={}", plane.kubeconfig_path().display()))
        .args(args)
        .output()
        .expect("kubectl runs");
    assert!(
        output.status.success(),
        "kubectl {args:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifests_install_and_their_service_account_can_reload() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, .. } = &env;
    let dir = manifests_dir();

    let file = dir.join("reloader.yaml");
    let applied = kubectl(plane, &["apply", "--server-side", "-k", dir.to_str().unwrap()]);
    // The same objects through `-f` (dry run: the Namespace must exist for it).
    kubectl(plane, &["apply", "--server-side", "--dry-run=server", "-f", file.to_str().unwrap()]);
    for object in ["namespace/reloader", "serviceaccount/", "clusterrole.", "deployment.apps/"] {
        assert!(applied.contains(object), "{object} applied: {applied}");
    }

    let deployments: kube::Api<Deployment> = kube::Api::namespaced(client.clone(), NAMESPACE);
    let installed = deployments.list(&Default::default()).await.unwrap();
    assert_eq!(installed.items.len(), 1, "one Deployment in the manifests");
    let pod_spec = serde_json::to_value(&installed.items[0].spec.as_ref().unwrap().template.spec).unwrap();
    let account = pod_spec["serviceAccountName"].as_str().expect("a ServiceAccount").to_owned();
    let container = &pod_spec["containers"][0];

    // The pod the Deployment would run: its args, its environment (field references resolved as
    // kubelet would), its ServiceAccount's token.
    let args: Vec<String> =
        container["args"].as_array().unwrap().iter().map(|arg| arg.as_str().unwrap().to_owned()).collect();
    let mut reloader = Reloader::builder(plane).args(args.clone()).name("manifests");
    for variable in container["env"].as_array().into_iter().flatten() {
        let value = match (&variable["value"], &variable["valueFrom"]["fieldRef"]["fieldPath"]) {
            (Value::String(value), _) => value.clone(),
            (_, Value::String(path)) if path == "metadata.namespace" => NAMESPACE.to_owned(),
            (_, Value::String(path)) if path == "metadata.name" => "reloader-manifests-test".to_owned(),
            _ => panic!("an env var this test cannot resolve: {variable}"),
        };
        reloader = reloader.env(variable["name"].as_str().unwrap(), value);
    }
    let token = service_account_token(client, &account).await;
    let kubeconfig = service_account_kubeconfig(plane, &token);
    let reloader = reloader.kubeconfig(kubeconfig.path()).start().await.expect("ready as the ServiceAccount");

    let configmaps: kube::Api<ConfigMap> = ns.api(client);
    let workloads: kube::Api<Deployment> = ns.api(client);
    let configmap: ConfigMap =
        serde_json::from_value(json!({ "metadata": { "name": "app-config" }, "data": { "a": "1" } }))
            .unwrap();
    configmaps.create(&PostParams::default(), &configmap).await.unwrap();
    let workload: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "web", "annotations": { "reloader.stakater.com/auto": "true" } },
        "spec": {
            "selector": { "matchLabels": { "app": "web" } },
            "template": {
                "metadata": { "labels": { "app": "web" } },
                "spec": { "containers": [{
                    "name": "web", "image": "web:1",
                    "envFrom": [{ "configMapRef": { "name": "app-config" } }]
                }] }
            }
        }
    }))
    .unwrap();
    workloads.create(&PostParams::default(), &workload).await.unwrap();
    // Let the watches see the workload before the change, as a running controller would.
    tokio::time::sleep(Duration::from_secs(1)).await;
    configmaps
        .patch("app-config", &PatchParams::default(), &Patch::Merge(json!({ "data": { "a": "2" } })))
        .await
        .unwrap();
    let reloaded = wait_until("the Deployment to be reloaded", Duration::from_secs(60), || async {
        let spec = serde_json::to_value(workloads.get("web").await?.spec).map_err(NotYet::from)?;
        let env = spec["template"]["spec"]["containers"][0]["env"].to_string();
        if env.contains("STAKATER_APP_CONFIG_CONFIGMAP") { Ok(()) } else { Err(NotYet::because(env)) }
    })
    .await;
    let log = reloader.log_text();
    reloaded.unwrap_or_else(|error| panic!("{error}\nreloader log:\n{log}"));
    assert!(!log.to_lowercase().contains("forbidden"), "the manifests' RBAC falls short:\n{log}");
}

/// A token of the manifests' ServiceAccount from the TokenRequest API, as kubelet would mount.
async fn service_account_token(client: &kube::Client, account: &str) -> String {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::ServiceAccount;
    let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(client.clone(), NAMESPACE);
    let request = TokenRequest {
        spec: TokenRequestSpec { expiration_seconds: Some(3600), ..Default::default() },
        ..Default::default()
    };
    let issued = accounts.create_token_request(account, &PostParams::default(), &request).await.unwrap();
    issued.status.expect("a token").token
}

/// The admin kubeconfig with the ServiceAccount's token in place of the admin's.
fn service_account_kubeconfig(plane: &ControlPlane, token: &str) -> tempfile::NamedTempFile {
    let admin = std::fs::read_to_string(plane.kubeconfig_path()).unwrap();
    let lines: Vec<String> = admin
        .lines()
        .map(|line| match line.trim_start().strip_prefix("token: ") {
            Some(_) => format!("{}token: {token}", &line[..line.len() - line.trim_start().len()]),
            None => line.to_owned(),
        })
        .collect();
    assert!(lines.iter().any(|line| line.ends_with(token)), "the admin kubeconfig uses a token: {admin}");
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), lines.join("\n") + "\n").unwrap();
    file
}
