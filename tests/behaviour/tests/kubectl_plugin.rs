//! The binary as a kubectl plugin on the real control plane: the pinned kubectl finds
//! `kubectl-reloader` (a link to `target/debug/reloader`; build it first with
//! `cargo build -p reloader-cli`) on PATH, and `kubectl reloader explain deployment/<name> -n <ns>`
//! explains the workload, honouring `--kubeconfig` and `--context` as kubectl does.
//!
//! kubectl refuses flags placed before a plugin's name, so they follow `reloader`, and kubectl
//! hands them to the plugin unchanged.

use std::path::Path;
use std::process::{Command, Output};

use reloader_harness::{ControlPlane, reloader_binary};
use reloader_tests::fixtures::*;

const WORKLOAD: &str = "plugin-web";
const CONFIGMAP: &str = "plugin-config";

/// The pinned kubectl with `plugins` first on PATH, and no KUBECONFIG of the caller's.
fn kubectl(plane: &ControlPlane, plugins: &Path, args: &[&str]) -> Output {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![plugins.to_path_buf()];
    dirs.extend(std::env::split_paths(&path));
    Command::new(&plane.binaries().kubectl)
        .args(args)
        .env("PATH", std::env::join_paths(dirs).unwrap())
        .env_remove("KUBECONFIG")
        // The controller flags explain accepts also read these; keep the caller's out of it.
        .env_remove("KUBERNETES_NAMESPACE")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .output()
        .expect("kubectl runs")
}

fn stdout_of(args: &[&str], output: Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "kubectl {args:?} failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// A directory holding only `kubectl-reloader`, linked to the built binary.
fn plugin_dir() -> tempfile::TempDir {
    let binary = reloader_binary();
    assert!(binary.exists(), "{} is missing: run `cargo build -p reloader-cli` first", binary.display());
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&binary, dir.path().join("kubectl-reloader")).unwrap();
    dir
}

#[tokio::test]
async fn kubectl_reloader_explains_a_workload_with_kubeconfig_and_context() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let config = ResourceRef::configmap(CONFIGMAP);
    resources.create(&config, &[("key", "v1")]).await.unwrap();
    WorkloadSpec::new(Kind::Deployment, WORKLOAD)
        .replicas(0)
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_configmap(&config.name)
        .create(client, ns.name())
        .await
        .unwrap();
    let plugins = plugin_dir();
    let kubeconfig = plane.kubeconfig_path().to_str().unwrap().to_owned();

    let listed = ["plugin", "list"];
    let list = stdout_of(&listed, kubectl(plane, plugins.path(), &listed));
    assert!(list.contains("kubectl-reloader"), "kubectl does not see the plugin: {list}");

    let current = ["config", "current-context", "--kubeconfig", &kubeconfig];
    let context = stdout_of(&current, kubectl(plane, plugins.path(), &current)).trim().to_owned();
    assert!(!context.is_empty(), "the plane's kubeconfig has no current context");

    let target = format!("deployment/{WORKLOAD}");
    let explain = ["reloader", "explain", &target, "-n", ns.name(), "--kubeconfig", &kubeconfig];
    let with_context = [&explain[..], &["--context", &context]].concat();
    for args in [&explain[..], &with_context] {
        let text = stdout_of(args, kubectl(plane, plugins.path(), args));
        assert!(text.contains(WORKLOAD), "kubectl {args:?} does not name the workload:\n{text}");
        assert!(text.contains(CONFIGMAP), "kubectl {args:?} does not name the ConfigMap:\n{text}");
    }

    // The context is really used: one the kubeconfig lacks fails, naming it.
    let wrong = [&explain[..], &["--context", "no-such-context"]].concat();
    let output = kubectl(plane, plugins.path(), &wrong);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "kubectl {wrong:?} succeeded");
    assert!(stderr.contains("context \"no-such-context\" does not exist"), "{stderr}");
}
