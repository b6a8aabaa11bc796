//! The node leaves no trace (docs/control-plane.md, "Leaving no trace"): after a clean stop,
//! nothing of it is on the machine and the kernel settings are back; after its owner is killed
//! with SIGKILL (its shims and containers still running), the next node's start cleans it up.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use reloader_harness::{ControlPlane, NotYet, RealNode, wait_until};
use serde_json::json;

use crate::support::{POD_PATIENCE, app_deployment, apply};

/// The environment variable that makes [`node_holder`] hold a node instead of returning.
pub const HOLDER_READY_FILE: &str = "RELOADER_TEST_NODE_HOLDER_READY";
/// The name of the test that holds a node for [`killed_run_is_cleaned`].
pub const HOLDER_TEST: &str = "node_holder_for_the_killed_run";

/// Nothing of a node is left, and the kernel settings are `expected`.
pub fn assert_no_trace(expected: &[(String, String)]) {
    let leftovers = RealNode::leftovers();
    assert!(leftovers.is_empty(), "the stopped node left {leftovers:?}");
    assert_eq!(RealNode::kernel_settings(), expected, "the kernel settings were put back");
}

/// Runs in a child process: a plane, a node and a running pod, then waits to be killed.
pub async fn hold_a_node(ready_file: &Path) {
    let plane =
        ControlPlane::start(RealNode::plane_options()).await.unwrap_or_else(|error| panic!("{error}"));
    let node = RealNode::start(&plane).await.unwrap_or_else(|error| panic!("{error}"));
    let client = plane.client();
    let namespace = "held";
    crate::support::create_namespace(&client, namespace).await;
    let config_maps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client.clone(), namespace);
    let body = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "held" }, "data": { "greeting": "held" } });
    config_maps
        .patch("held", &kube::api::PatchParams::apply("in-cluster-test"), &kube::api::Patch::Apply(&body))
        .await
        .expect("a ConfigMap");
    apply(&client, namespace, &app_deployment("held", &node.app_image(), "held", json!({}))).await;
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(client, namespace);
    wait_until("the held pod to run", POD_PATIENCE, || async {
        let list = pods.list(&kube::api::ListParams::default()).await?;
        if list.items.iter().any(crate::support::is_ready) {
            Ok(())
        } else {
            Err(NotYet::because("not Ready"))
        }
    })
    .await
    .unwrap_or_else(|error| panic!("{error}"));
    std::fs::write(ready_file, "ready").expect("writing the ready file");
    std::future::pending::<()>().await;
    drop(node);
}

/// Whether `pid` runs: a killed process may stay a zombie until its new parent reaps it.
fn alive(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the command name, which is in parentheses and may hold spaces.
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next());
    matches!(state, Some(state) if state != "Z" && state != "X")
}

fn spawn_holder(ready_file: &Path) -> Child {
    Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--exact", HOLDER_TEST, "--ignored", "--nocapture"])
        .env(HOLDER_READY_FILE, ready_file)
        .stdin(Stdio::null())
        .spawn()
        .expect("starting the node holder")
}

/// A node whose owner was SIGKILLed (shims and containers left running) is cleaned by the next
/// node's start, which then runs and stops cleanly.
pub async fn killed_run_is_cleaned(expected: &[(String, String)]) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let ready_file = dir.path().join("ready");
    let mut holder = spawn_holder(&ready_file);
    let exited = wait_until("the holder's node and pod", POD_PATIENCE, || {
        let exists = ready_file.exists();
        let exited = holder.try_wait().ok().flatten();
        async move {
            match (exists, exited) {
                (true, _) => Ok(None),
                (false, Some(status)) => Ok(Some(status)),
                (false, None) => Err(NotYet::because("starting")),
            }
        }
    })
    .await
    .unwrap_or_else(|error| panic!("{error}"));
    assert!(exited.is_none(), "the node holder exited: {exited:?}");
    holder.kill().expect("SIGKILL to the holder");
    holder.wait().expect("reaping the holder");
    tokio::time::sleep(Duration::from_secs(1)).await;

    let left = RealNode::leftovers();
    assert!(
        left.directory.is_some() && !left.processes.is_empty() && !left.cgroups.is_empty(),
        "a killed run leaves a node: {left:?}"
    );

    let plane =
        ControlPlane::start(RealNode::plane_options()).await.unwrap_or_else(|error| panic!("{error}"));
    let node = RealNode::start(&plane)
        .await
        .unwrap_or_else(|error| panic!("starting a node after a killed one: {error}"));
    for pid in &left.processes {
        assert!(!alive(*pid), "process {pid} of the killed run still runs");
    }
    drop(node);
    drop(plane);
    assert_no_trace(expected);
}
