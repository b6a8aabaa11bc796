//! Running `reloader explain` and reading its JSON, for tests/explain.rs.

use std::path::Path;

use reloader_harness::{ControlPlane, reloader_binary};
use serde_json::Value;

/// What one run of the binary printed.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs the real binary with `args`, as the identity of `kubeconfig`, to completion.
pub async fn run_reloader(kubeconfig: &Path, args: &[&str]) -> Run {
    let binary = reloader_binary();
    assert!(binary.exists(), "{} is missing: run `cargo build -p reloader-cli` first", binary.display());
    let output = tokio::process::Command::new(&binary)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        // The controller flags explain accepts also read these; keep the caller's out of it.
        .env_remove("KUBERNETES_NAMESPACE")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .kill_on_drop(true)
        .output()
        .await
        .expect("running reloader explain");
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// `reloader explain <target> -n <ns> -o json <extra>`, parsed; panics with the output on failure.
pub async fn explain_json(plane: &ControlPlane, namespace: &str, target: &str, extra: &[&str]) -> Value {
    let mut args = vec!["explain", target, "-n", namespace, "-o", "json"];
    args.extend_from_slice(extra);
    let run = run_reloader(plane.kubeconfig_path(), &args).await;
    assert_eq!(run.code, Some(0), "reloader {args:?} failed: {run:?}");
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", run.stdout))
}

/// The entry of `json["resources"]` for `kind`/`name`.
pub fn resource<'a>(json: &'a Value, kind: &str, name: &str) -> &'a Value {
    json["resources"]
        .as_array()
        .expect("a resources array")
        .iter()
        .find(|r| r["kind"] == kind && r["name"] == name)
        .unwrap_or_else(|| panic!("{kind} {name} is not explained: {json:#}"))
}

pub fn listed(json: &Value) -> Vec<String> {
    let resources = json["resources"].as_array().expect("a resources array");
    resources
        .iter()
        .map(|r| format!("{}/{}", r["kind"].as_str().unwrap(), r["name"].as_str().unwrap()))
        .collect()
}
