//! As users run it (docs/control-plane.md, "The real node"; docs/behaviour.md H53–H59): the chart's
//! pods on a real node (kubelet, containerd, runc), real pods rolled, a real Argo Rollouts
//! controller, the admission webhook reached through its Service, the sidecar example as real
//! pods, and an upgrade of reloader itself.
//!
//! One node, one plane, one test: the steps run in order and share the cluster (a node is a
//! machine-wide singleton, and starting one costs tens of seconds). Each step says what it proves;
//! the node is stopped and the machine restored when the test ends, passed or failed.
//!
//! What a container saw is read from the kubelet's pod log files, never through the API server
//! (that would contact the kubelet). Writes are counted from the API server: a Deployment's
//! `metadata.generation` grows by one for each write to its spec.
//!
//! Needs root (cgroups, namespaces, mounts) and `hack/build` (node, argo-controller) and
//! `hack/image`. Under `CI=true` anything missing fails the test; elsewhere it is skipped with a
//! message.

mod argo;
mod chart;
mod restamp;
mod sidecar;
mod support;
mod trace;
mod upgrade;
mod webhook;

use std::time::Instant;

use reloader_harness::{ControlPlane, NodeBinaries, RealNode};
use reloader_tests::chart::Helm;

use support::{Cluster, VERSION, under_ci, workspace_root};

/// Everything the suite needs, or why it cannot run.
fn missing_prerequisites() -> Option<String> {
    // /proc/self belongs to the effective user.
    let root =
        std::fs::metadata("/proc/self").is_ok_and(|meta| std::os::unix::fs::MetadataExt::uid(&meta) == 0);
    if !root {
        return Some("the real node needs root (cgroups, network and mount namespaces)".into());
    }
    if let Err(error) = NodeBinaries::locate() {
        return Some(format!("{error} (hack/build node)"));
    }
    let archive = workspace_root().join(format!("target/image/reloader-{VERSION}.oci.tar"));
    if !archive.exists() {
        return Some(format!("{} is missing: build it with `hack/image`", archive.display()));
    }
    None
}

async fn start() -> Option<Cluster> {
    if let Some(why) = missing_prerequisites() {
        assert!(!under_ci(), "the in-cluster suite cannot run under CI=true: {why}");
        eprintln!("skipped: {why}");
        return None;
    }
    let plane =
        ControlPlane::start(RealNode::plane_options()).await.unwrap_or_else(|error| panic!("{error}"));
    let node =
        RealNode::start(&plane).await.unwrap_or_else(|error| panic!("starting the real node: {error}"));
    let archive = workspace_root().join(format!("target/image/reloader-{VERSION}.oci.tar"));
    node.import_image(&archive, &[])
        .unwrap_or_else(|error| panic!("importing {}: {error}", archive.display()));
    let helm = Helm::locate().unwrap_or_else(|error| panic!("{error}"));
    Some(Cluster { plane, node, helm })
}

/// Runs a step and reports its duration (the suite's times go into the closing note).
async fn step<F: Future<Output = ()>>(name: &str, work: F) {
    let started = Instant::now();
    eprintln!("in-cluster: {name} ...");
    work.await;
    eprintln!("in-cluster: {name} done in {:.1}s", started.elapsed().as_secs_f32());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_users_run_it() {
    let started = Instant::now();
    let Some(cluster) = start().await else { return };
    // The kernel settings before the node started: what every stop must put back.
    let kernel_before = cluster.node.kernel_settings_before();
    {
        let _logs = cluster.plane.dump_logs_on_panic();
        eprintln!("in-cluster: plane and node ready in {:.1}s", started.elapsed().as_secs_f32());
        step("H53 chart with default values reloads a real pod", chart::default_install(&cluster)).await;
        step(
            "H54 enableHA with two replicas fails over losing and doubling nothing",
            chart::high_availability(&cluster),
        )
        .await;
        step("H55 admission webhook through its Service", webhook::through_its_service(&cluster)).await;
        step("H56 upgrade of reloader itself", upgrade::helm_upgrade(&cluster)).await;
        step("H57 Argo Rollouts controller rolls a reloaded Rollout", argo::real_controller(&cluster)).await;
        step("H58 kubectl apply -k deployments/kubernetes", chart::plain_manifests(&cluster)).await;
        step("H59 the sidecar example reloads without a restart", sidecar::example(&cluster)).await;
    }
    drop(cluster);
    trace::assert_no_trace(&kernel_before);
    step("a killed run's node is cleaned by the next start", trace::killed_run_is_cleaned(&kernel_before))
        .await;
    eprintln!("in-cluster: all steps in {:.1}s", started.elapsed().as_secs_f32());
}

/// H60, run by `hack/upgrade-test` (it builds the previous release first, which the test command
/// has no time for): the previous release's chart and image upgraded to this commit's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "hack/upgrade-test runs it, with the previous release built"]
async fn upgrade_from_the_previous_release() {
    let previous = std::env::var_os("RELOADER_PREVIOUS_SOURCE")
        .map(std::path::PathBuf::from)
        .expect("RELOADER_PREVIOUS_SOURCE: the previous release's checkout (hack/upgrade-test)");
    if let Some(why) = missing_prerequisites() {
        panic!("the upgrade test cannot run: {why}");
    }
    let Some(cluster) = start().await else { unreachable!("prerequisites checked") };
    let kernel_before = cluster.node.kernel_settings_before();
    {
        let _logs = cluster.plane.dump_logs_on_panic();
        cluster.namespace(chart::RELEASE_NAMESPACE).await;
        cluster.namespace(chart::APPS).await;
        cluster.run_app(chart::APPS, "web", "hello").await;
        step(
            "H60 upgrade from the previous release",
            upgrade::from_the_previous_release(&cluster, &previous),
        )
        .await;
    }
    drop(cluster);
    trace::assert_no_trace(&kernel_before);
}

/// Not a test of its own: the child process `trace::killed_run_is_cleaned` starts and kills.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by as_users_run_it as a child process"]
async fn node_holder_for_the_killed_run() {
    let Some(ready_file) = std::env::var_os(trace::HOLDER_READY_FILE) else { return };
    trace::hold_a_node(std::path::Path::new(&ready_file)).await;
}
