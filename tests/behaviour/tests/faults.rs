//! Faults under the controller (docs/behaviour.md F46–F48). Each test starts a control plane of its
//! own: they stop kube-apiserver, serve watches from a compacting etcd, or hammer a workload.

mod ha_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use reloader_harness::{Crd, NotYet, PlaneOptions, Reloader, wait_until};
use reloader_tests::fixtures::{
    ANNOTATION_AUTO, Kind, ResourceRef, Resources, Strategy, TestEnv, WorkloadSpec, negative_wait,
};
use reloader_workload_argo::Rollout;

use ha_support::proxy::CuttableProxy;
use ha_support::{
    Timings, WebAndIdle, auto_deployment, generation, private_plane, reloads_executed, start_replicas,
    wait_for_rollouts, wait_for_single_leader,
};

const REACTION: Duration = Duration::from_secs(90);

/// F46: kube-apiserver killed and restarted under two HA replicas. The leader cannot renew, so
/// it stops leading without exiting; after the restart one replica leads again, later changes
/// reload exactly once, and nothing reloads for the relists the restart forces.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiserver_restart_later_changes_reload_and_nothing_reloads_spuriously() {
    let plane = private_plane(PlaneOptions::default()).await;
    let env = TestEnv::on(&plane).await;
    let TestEnv { ns, client, resources, .. } = &env;
    let WebAndIdle { settings, web, idle, .. } = WebAndIdle::create(&env).await;
    let names = ["r1", "r2"];
    let mut replicas = start_replicas(&plane, ns.name(), &names, Timings::FAST, &[]).await;
    let all: Vec<_> = replicas.iter().collect();
    let first = wait_for_single_leader(client, ns.name(), &all, &names, REACTION).await.unwrap();

    let settings_v2 = resources.update_data(&settings, &[("level", "2")]).await.unwrap();
    let latency =
        web.wait_for_marker(client, &settings, Strategy::EnvVars, &settings_v2, REACTION).await.unwrap();

    plane.stop_apiserver();
    // Longer than the renew deadline: the leader must notice it can no longer renew.
    tokio::time::sleep(Timings::FAST.renew_deadline * 2).await;
    plane.start_apiserver().await.unwrap();
    let client = plane.client();
    for (replica, name) in replicas.iter_mut().zip(names) {
        assert!(replica.exit_status().is_none(), "{name} exited:\n{}", replica.log_text());
    }
    let log = replicas[first].log_text();
    let lost = log.lines().find(|l| l.contains("lost leadership: stopped writing, back to standby"));
    let lost = lost.unwrap_or_else(|| panic!("the leader kept leading blind:\n{log}"));
    assert!(lost.contains("renew deadline exceeded"), "{lost}");
    let all: Vec<_> = replicas.iter().collect();
    wait_for_single_leader(&client, ns.name(), &all, &names, REACTION).await.unwrap();

    let resources = Resources::new(&client, ns.name());
    let settings_v3 = resources.update_data(&settings, &[("level", "3")]).await.unwrap();
    let after_restart =
        web.wait_for_marker(&client, &settings, Strategy::EnvVars, &settings_v3, REACTION).await.unwrap();
    // The trace an operator follows: each replica logged its watches failing while kube-apiserver
    // was down, then resuming (at the first event after it, this change).
    for (replica, name) in replicas.iter().zip(names) {
        wait_until(&format!("{name} logs the watch resuming"), REACTION, || async {
            let log = replica.log_text();
            let failed = log.find("watch failed; retrying with backoff");
            let resumed = log.rfind("watch resumed");
            match (failed, resumed) {
                (Some(failed), Some(resumed)) if failed < resumed => Ok(()),
                _ => Err(NotYet::because(format!("failed at {failed:?}, resumed at {resumed:?}"))),
            }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}:\n{}", replica.log_text()));
    }
    tokio::time::sleep(negative_wait(latency.max(after_restart))).await;
    assert_eq!(generation(&client, &web).await, 3, "web: created, v2, v3 — each once");
    assert_eq!(generation(&client, &idle).await, 1, "idle reloaded although quiet never changed");
    let mut executed = 0.0;
    for replica in &replicas {
        executed += reloads_executed(replica).await;
    }
    assert_eq!(executed, 2.0, "reloads executed across both replicas");
    eprintln!("apiserver restart: reload latency {latency:?} before, {after_restart:?} after");
}

/// F47: watches expire with HTTP 410 Gone. kube-apiserver serves watches straight from etcd
/// (`--watch-cache=false`) and compacts every 2 s; the controller's connections are cut while a
/// ConfigMap changes and another gets a metadata-only edit, and stay cut until those revisions
/// are compacted. On reconnecting, its watches resume from a compacted revision, get 410, and
/// list again: the change reloads exactly once, the metadata edit reloads nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_410_gone_neither_misses_nor_repeats_a_reload() {
    let options = PlaneOptions {
        apiserver_args: vec!["--watch-cache=false".into(), "--etcd-compaction-interval=2s".into()],
        ..PlaneOptions::default()
    };
    let plane = private_plane(options).await;
    let env = TestEnv::on(&plane).await;
    let TestEnv { ns, client, resources, .. } = &env;
    let WebAndIdle { settings, quiet, web, idle } = WebAndIdle::create(&env).await;
    let proxy = CuttableProxy::start(&plane.url(), plane.kubeconfig_path()).await.unwrap();
    let reloader = Reloader::builder(&plane)
        .name("reloader")
        .kubeconfig(proxy.kubeconfig())
        .arg(format!("--namespaces={}", ns.name()))
        .start()
        .await
        .unwrap();

    let settings_v2 = resources.update_data(&settings, &[("level", "2")]).await.unwrap();
    let latency =
        web.wait_for_marker(client, &settings, Strategy::EnvVars, &settings_v2, REACTION).await.unwrap();

    proxy.cut();
    let settings_v3 = resources.update_data(&settings, &[("level", "3")]).await.unwrap();
    resources.update_metadata(&quiet, &[("touched", "yes")], &[]).await.unwrap();
    // Several compaction intervals: the revisions the watches last saw are gone from etcd.
    tokio::time::sleep(Duration::from_secs(8)).await;
    proxy.restore();

    let after_gap =
        web.wait_for_marker(client, &settings, Strategy::EnvVars, &settings_v3, REACTION).await.unwrap();
    wait_until("the controller to report a 410 from a watch", REACTION, || async {
        let log = reloader.log_text();
        let gone =
            log.lines().any(|l| l.contains("watch failed") && (l.contains("410") || l.contains("too old")));
        gone.then_some(()).ok_or(NotYet::because("no 410 in the log yet"))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; the fault was not forced:\n{}", reloader.log_text()));

    // Live again: a later change reloads too.
    let settings_v4 = resources.update_data(&settings, &[("level", "4")]).await.unwrap();
    let live =
        web.wait_for_marker(client, &settings, Strategy::EnvVars, &settings_v4, REACTION).await.unwrap();
    tokio::time::sleep(negative_wait(latency.max(live))).await;
    assert_eq!(generation(client, &web).await, 4, "web: created, v2, v3 after the relist, v4 — each once");
    assert_eq!(generation(client, &idle).await, 1, "a metadata-only edit seen on relist reloaded idle");
    assert_eq!(reloads_executed(&reloader).await, 3.0);
    eprintln!(
        "410 Gone: reload latency {latency:?} live, {after_gap:?} across the cut (8 s), {live:?} after"
    );
}

/// F48: concurrent writers. One updates a Rollout every 50 ms, so the controller's
/// resourceVersion-guarded patch conflicts and must re-read and retry; another rewrites a
/// Deployment (`busy`) in a tight read-modify-write loop and meets 409s itself. ConfigMap changes
/// repeat until both kinds of conflict have happened. Every reload still lands, once,
/// and the uncontested Deployment (`web`) of the same events is neither delayed nor repeated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrent_writer_does_not_stop_the_reload_or_delay_other_workloads() {
    let plane = private_plane(PlaneOptions::default()).await;
    plane.install_crds(&[Crd::ArgoRollouts]).await.unwrap();
    let env = TestEnv::on(&plane).await;
    let TestEnv { ns, client, resources, .. } = &env;
    let settings = ResourceRef::configmap("settings");
    resources.create(&settings, &[("level", "1")]).await.unwrap();
    let contested = WorkloadSpec::new(Kind::Rollout, "contested")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_configmap("settings")
        .without_pods()
        .create(client, ns.name())
        .await
        .unwrap();
    let busy = auto_deployment(client, ns.name(), "busy", "settings").await;
    let web = auto_deployment(client, ns.name(), "web", "settings").await;
    let reloader = Reloader::builder(&plane)
        .name("reloader")
        .args([format!("--namespaces={}", ns.name()), "--is-Argo-Rollouts=true".into()])
        .start()
        .await
        .unwrap();

    let settings_v2 = resources.update_data(&settings, &[("level", "2")]).await.unwrap();
    let baseline =
        web.wait_for_marker(client, &settings, Strategy::EnvVars, &settings_v2, REACTION).await.unwrap();
    for workload in [&contested, &busy] {
        workload.wait_for_marker(client, &settings, Strategy::EnvVars, &settings_v2, REACTION).await.unwrap();
    }
    // One revision per pod template only if kube-controller-manager sees each template before
    // the next: it rolls out the latest template it finds, so each change waits for its own.
    wait_for_rollouts(client, &busy, 2).await;

    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(WriterCounts::default());
    let own_client = || Client::try_from(plane.admin_config().clone()).unwrap();
    let writers = [
        tokio::spawn(patch_every(Api::namespaced(own_client(), ns.name()), stop.clone(), counts.clone())),
        tokio::spawn(rewrite_in_a_loop(
            Api::namespaced(own_client(), ns.name()),
            stop.clone(),
            counts.clone(),
        )),
    ];
    wait_until("the writers to get going", REACTION, || async {
        let (patched, rewritten) =
            (counts.patched.load(Ordering::Relaxed), counts.rewritten.load(Ordering::Relaxed));
        (patched > 10 && rewritten > 10)
            .then_some(())
            .ok_or(NotYet::because(format!("{patched} patches, {rewritten} rewrites")))
    })
    .await
    .unwrap();

    let conflicts_retried =
        || reloader.log_text().lines().filter(|l| l.contains("conflict; re-reading and retrying")).count();
    let mut changes = 0;
    let mut slowest_web = Duration::ZERO;
    let mut slowest_contested = Duration::ZERO;
    let contended = || conflicts_retried() > 0 && counts.conflicts.load(Ordering::Relaxed) > 0;
    while changes < MAX_CONTESTED_CHANGES && !contended() {
        changes += 1;
        let level = (changes + 2).to_string();
        let hash = resources.update_data(&settings, &[("level", level.as_str())]).await.unwrap();
        let changed_at = Instant::now();
        let web_latency =
            web.wait_for_marker(client, &settings, Strategy::EnvVars, &hash, REACTION).await.unwrap();
        for workload in [&contested, &busy] {
            workload.wait_for_marker(client, &settings, Strategy::EnvVars, &hash, REACTION).await.unwrap();
        }
        slowest_web = slowest_web.max(web_latency);
        slowest_contested = slowest_contested.max(changed_at.elapsed());
        wait_for_rollouts(client, &busy, 2 + changes).await;
    }
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.await.unwrap();
    }
    let retried = conflicts_retried();
    assert!(retried > 0, "no conflict in {changes} contested reloads: the fault was not forced");
    let own_conflicts = counts.conflicts.load(Ordering::Relaxed);
    assert!(own_conflicts > 0, "the read-modify-write loop never met a 409");

    tokio::time::sleep(negative_wait(baseline.max(slowest_web))).await;
    let expected = 2 + changes as i64;
    for workload in [&web, &contested] {
        assert_eq!(generation(client, workload).await, expected, "{workload}: created, then once per change");
    }
    // A Deployment's generation also moves with its annotations, which the writer keeps changing:
    // count its rolled-out pod templates instead (its revision).
    wait_for_rollouts(client, &busy, expected as usize).await;
    assert_eq!(reloads_executed(&reloader).await, 3.0 * (1 + changes) as f64, "no failed or repeated reload");
    assert!(
        slowest_web <= (baseline * 10).max(Duration::from_secs(5)),
        "web waited {slowest_web:?} (baseline {baseline:?}) behind the contested workloads"
    );
    eprintln!(
        "concurrent writers: {} Rollout patches, {} Deployment rewrites ({own_conflicts} refused with 409); \
         {changes} contested change(s), {retried} conflict retries by the controller; slowest reload: web \
         {slowest_web:?} (baseline {baseline:?}), contested {slowest_contested:?}",
        counts.patched.load(Ordering::Relaxed),
        counts.rewritten.load(Ordering::Relaxed),
    );
}

/// Changes are made until both kinds of conflict have happened; each is a narrow race, so allow
/// enough attempts that a fast machine still meets one (the loop ends at the first).
const MAX_CONTESTED_CHANGES: usize = 40;

#[derive(Default)]
struct WriterCounts {
    patched: AtomicU64,
    rewritten: AtomicU64,
    conflicts: AtomicU64,
}

/// Merge-patches an annotation of Rollout `contested` every 50 ms (as a busy controller would)
/// until `stop`: each write moves its resourceVersion.
async fn patch_every(rollouts: Api<Rollout>, stop: Arc<AtomicBool>, counts: Arc<WriterCounts>) {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let patch =
            serde_json::json!({ "metadata": { "annotations": { "example.com/churn": n.to_string() } } });
        match rollouts.patch("contested", &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => {
                counts.patched.fetch_add(1, Ordering::Relaxed);
            }
            Err(kube::Error::Api(e)) => panic!("the Rollout writer was refused: {e}"),
            Err(_) => {} // a dropped connection under load: go on
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Reads Deployment `busy` and writes it back with a new annotation, as fast as it can, until
/// `stop`; the controller's writes make some of these fail with 409.
async fn rewrite_in_a_loop(deployments: Api<Deployment>, stop: Arc<AtomicBool>, counts: Arc<WriterCounts>) {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut busy) = deployments.get("busy").await else { continue };
        n += 1;
        busy.metadata.annotations.get_or_insert_default().insert("example.com/churn".into(), n.to_string());
        match deployments.replace("busy", &PostParams::default(), &busy).await {
            Ok(_) => counts.rewritten.fetch_add(1, Ordering::Relaxed),
            Err(kube::Error::Api(e)) if e.code == 409 => counts.conflicts.fetch_add(1, Ordering::Relaxed),
            Err(kube::Error::Api(e)) => panic!("the Deployment writer was refused: {e}"),
            Err(_) => 0,
        };
    }
}
