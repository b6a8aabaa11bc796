//! When a workload reloads (docs/beyond-stakater.md §15, docs/behaviour.md §K) on the real
//! control plane: a delay, a minimum interval and a maintenance window hold a reload, which
//! the workload records and a restarted reloader applies once; a change reverted while held
//! reloads nothing; a malformed value warns and reloads at once; the loop guard stops a
//! workload whose ConfigMap is rewritten every 200 ms.
//!
//! Build the binary first: `cargo build -p reloader-cli`.

#[path = "ha_support/mod.rs"]
mod ha_support;
#[path = "support/explain.rs"]
#[allow(dead_code)]
mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::jiff::{Timestamp, ToSpan, tz::TimeZone};
use kube::api::{Api, Patch, PatchParams};
use reloader_core::timing::{
    DELAY, HELD, HeldReload, HoldReason, LOOP_STOPPED, MAINTENANCE_WINDOW, MIN_INTERVAL,
};
use reloader_harness::{NotYet, wait_until};
use reloader_tests::fixtures::*;

const RELOAD_TIMEOUT: Duration = Duration::from_secs(60);
const AUTO: &str = "reloader.stakater.com/auto";
const STRATEGY: Strategy = Strategy::EnvVars;
const REVISION: &str = "deployment.kubernetes.io/revision";

fn deployment(name: &str) -> WorkloadSpec {
    WorkloadSpec::new(Kind::Deployment, name).without_pods().metadata_annotation(AUTO, "true")
}

/// The ConfigMap `settings` (`v: 1`) and a Deployment `name` that uses it, with `annotations`.
async fn settings_and(
    env: &TestEnv<'_>,
    name: &str,
    annotations: &[(&str, &str)],
) -> (ResourceRef, WorkloadId) {
    let settings = ResourceRef::configmap("settings");
    env.resources.create(&settings, &[("v", "1")]).await.unwrap();
    let spec = annotations.iter().fold(deployment(name), |spec, (k, v)| spec.metadata_annotation(*k, *v));
    let id = spec.env_from_configmap("settings").create(&env.client, env.ns.name()).await.unwrap();
    (settings, id)
}

/// The Deployment's rollouts so far (its `deployment.kubernetes.io/revision`), once its
/// controller has seen its latest generation. Not the generation: reloader's own metadata
/// annotations (a held reload's record, the loop guard's stop) move that too.
async fn rollouts(client: &kube::Client, id: &WorkloadId) -> i64 {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &id.namespace);
    wait_until(&format!("{id}'s controller to catch up"), RELOAD_TIMEOUT, || async {
        let deployment = deployments.get(&id.name).await?;
        let generation = deployment.metadata.generation.unwrap_or_default();
        let observed = deployment.status.as_ref().and_then(|s| s.observed_generation).unwrap_or_default();
        let revision = deployment.metadata.annotations.as_ref().and_then(|a| a.get(REVISION));
        match revision.and_then(|r| r.parse().ok()) {
            Some(revision) if observed >= generation => Ok(revision),
            _ => Err(NotYet::because(format!(
                "observed generation {observed} < {generation}, revision {revision:?}"
            ))),
        }
    })
    .await
    .unwrap()
}

/// The Deployment's ReplicaSets (one per rollout, up to its revision history limit of 10),
/// once its controller has seen its latest generation.
async fn replica_sets(client: &kube::Client, id: &WorkloadId) -> usize {
    rollouts(client, id).await;
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), &id.namespace);
    let selector = format!("app={}", id.name);
    replica_sets.list(&kube::api::ListParams::default().labels(&selector)).await.unwrap().items.len()
}

/// The held-reload record the workload carries, once it carries one.
async fn held_record(client: &kube::Client, id: &WorkloadId) -> HeldReload {
    wait_until(&format!("{id} to record a held reload"), RELOAD_TIMEOUT, || async {
        let observed = id.observe(client).await?;
        match observed.annotations.get(HELD) {
            Some(text) => HeldReload::parse(text).map_err(|e| NotYet::because(e.to_string())),
            None => Err(NotYet::because("no record")),
        }
    })
    .await
    .unwrap()
}

async fn record_gone(client: &kube::Client, id: &WorkloadId) {
    wait_until(&format!("{id} to drop its held-reload record"), RELOAD_TIMEOUT, || async {
        match id.observe(client).await?.annotations.contains_key(HELD) {
            true => Err(NotYet::because("still recorded")),
            false => Ok(()),
        }
    })
    .await
    .unwrap();
}

async fn reasons(client: &kube::Client, id: &WorkloadId) -> Vec<String> {
    let events = events_for(client, &id.namespace, id.kind, &id.name).await.unwrap();
    events.into_iter().filter_map(|e| e.reason).collect()
}

/// K1: changes within the delay join one reload, made when the delay is over; a workload
/// without the annotation reloads at once.
#[tokio::test(flavor = "multi_thread")]
async fn k1_a_delay_joins_the_changes_within_it_into_one_reload() {
    let env = TestEnv::with_crds().await;
    let TestEnv { client, ns, resources, .. } = &env;
    let (settings, delayed) = settings_and(&env, "delayed", &[(DELAY, "8s")]).await;
    let at_once =
        deployment("at-once").env_from_configmap("settings").create(client, ns.name()).await.unwrap();
    let _reloader = env.reloader(STRATEGY, &[]).await;
    let before = rollouts(client, &delayed).await;

    let changed = Instant::now();
    let second = resources.update_data(&settings, &[("v", "2")]).await.unwrap();
    at_once.wait_for_marker(client, &settings, STRATEGY, &second, RELOAD_TIMEOUT).await.unwrap();
    let record = held_record(client, &delayed).await;
    assert_eq!(record.reason, HoldReason::Delay, "{record:?}");
    assert_eq!(record.resources, vec![(ResourceKind::ConfigMap, "settings".to_owned())]);
    // `reloader explain` shows the hold: why, and when it will be applied.
    let json = support::explain_json(env.plane, ns.name(), "deployment/delayed", &[]).await;
    let held = &json["workload"]["timing"]["held"];
    assert_eq!(held["reason"], "delay", "{json}");
    assert_eq!(held["until"], record.until.to_string(), "{json}");
    assert_eq!(held["resources"], serde_json::json!(["ConfigMap/settings"]), "{json}");
    assert!(
        delayed.marker(client, &settings, STRATEGY).await.unwrap().is_none(),
        "reloaded within the delay"
    );

    tokio::time::sleep(Duration::from_secs(2)).await;
    let third = resources.update_data(&settings, &[("v", "3")]).await.unwrap();
    delayed.wait_for_marker(client, &settings, STRATEGY, &third, RELOAD_TIMEOUT).await.unwrap();
    assert!(
        changed.elapsed() >= Duration::from_millis(7500),
        "reloaded {:?} after the change",
        changed.elapsed()
    );
    assert_eq!(rollouts(client, &delayed).await, before + 1, "one rollout for both changes");
    record_gone(client, &delayed).await;
    assert!(reasons(client, &delayed).await.iter().any(|r| r == "ReloadHeld"));
}

/// K2: a change sooner than the minimum interval after the last reload is held to its end,
/// joined by the later ones: one more rollout, with the latest data.
#[tokio::test(flavor = "multi_thread")]
async fn k2_a_minimum_interval_holds_the_next_reload_to_its_end() {
    let env = TestEnv::with_crds().await;
    let TestEnv { client, resources, .. } = &env;
    let (settings, spaced) = settings_and(&env, "spaced", &[(MIN_INTERVAL, "10s")]).await;
    let _reloader = env.reloader(STRATEGY, &[]).await;
    let before = rollouts(client, &spaced).await;

    let second = resources.update_data(&settings, &[("v", "2")]).await.unwrap();
    let took = spaced.wait_for_marker(client, &settings, STRATEGY, &second, RELOAD_TIMEOUT).await.unwrap();
    assert!(took < Duration::from_secs(8), "the first reload waited {took:?}");
    let first_reload = Instant::now();
    resources.update_data(&settings, &[("v", "3")]).await.unwrap();
    let record = held_record(client, &spaced).await;
    assert_eq!(record.reason, HoldReason::MinInterval, "{record:?}");
    let fourth = resources.update_data(&settings, &[("v", "4")]).await.unwrap();
    spaced.wait_for_marker(client, &settings, STRATEGY, &fourth, RELOAD_TIMEOUT).await.unwrap();
    assert!(
        first_reload.elapsed() >= Duration::from_secs(9),
        "{:?} after the first reload",
        first_reload.elapsed()
    );
    assert_eq!(rollouts(client, &spaced).await, before + 2);
    record_gone(client, &spaced).await;
}

/// K3: a change outside the maintenance window waits for it to open (a window of one minute,
/// in Europe/Berlin's wall time, starting at least 20 s from now).
#[tokio::test(flavor = "multi_thread")]
async fn k3_a_change_outside_the_window_waits_for_it_to_open() {
    let env = TestEnv::with_crds().await;
    let TestEnv { client, resources, .. } = &env;
    let berlin = TimeZone::get("Europe/Berlin").unwrap();
    let now = Timestamp::now().to_zoned(berlin.clone());
    let mut opens = now.round(k8s_openapi::jiff::Unit::Minute).unwrap();
    while opens.timestamp() < now.timestamp() + 20.seconds() {
        opens = opens.checked_add(1.minute()).unwrap();
    }
    let closes = opens.checked_add(1.minute()).unwrap();
    let window = format!("* {}-{} Europe/Berlin", opens.strftime("%H:%M"), closes.strftime("%H:%M"));
    let (settings, nightly) = settings_and(&env, "nightly", &[(MAINTENANCE_WINDOW, window.as_str())]).await;
    let _reloader = env.reloader(STRATEGY, &[]).await;

    let second = resources.update_data(&settings, &[("v", "2")]).await.unwrap();
    let record = held_record(client, &nightly).await;
    assert_eq!(record.reason, HoldReason::MaintenanceWindow, "{record:?} for {window}");
    assert_eq!(record.until, opens.timestamp(), "{record:?} for {window}");
    let wait = Duration::try_from(opens.timestamp().duration_since(Timestamp::now())).unwrap_or_default();
    nightly.wait_for_marker(client, &settings, STRATEGY, &second, wait + RELOAD_TIMEOUT).await.unwrap();
    assert!(Timestamp::now() >= opens.timestamp(), "reloaded before the window opened ({window})");
    record_gone(client, &nightly).await;
}

/// K4: a held reload survives a restart of the controller: the new process applies it once,
/// when the recorded delay is over.
#[tokio::test(flavor = "multi_thread")]
async fn k4_a_held_reload_survives_a_restart() {
    let env = TestEnv::with_crds().await;
    let TestEnv { client, resources, .. } = &env;
    let (settings, kept) = settings_and(&env, "kept", &[(DELAY, "15s")]).await;
    let mut first = env.reloader(STRATEGY, &[]).await;
    let before = rollouts(client, &kept).await;
    let changed = Instant::now();
    let second = resources.update_data(&settings, &[("v", "2")]).await.unwrap();
    held_record(client, &kept).await;
    first.kill();

    let _second = env.reloader(STRATEGY, &[]).await;
    applied_once_after_the_delay(client, &kept, &settings, &second, changed, before).await;
}

/// K8: a fail-over while a change is held: the leader that held it is killed, the standby takes
/// the Lease, reads the record and applies it once, when the delay is over.
#[tokio::test(flavor = "multi_thread")]
async fn k8_a_held_reload_survives_a_fail_over() {
    let env = TestEnv::new().await;
    let TestEnv { plane, client, ns, resources, .. } = &env;
    let (settings, kept) = settings_and(&env, "kept", &[(DELAY, "15s")]).await;
    let names = ["r1", "r2"];
    let mut replicas =
        ha_support::start_replicas(plane, ns.name(), &names, ha_support::Timings::FAST, &[]).await;
    let all: Vec<_> = replicas.iter().collect();
    let first =
        ha_support::wait_for_single_leader(client, ns.name(), &all, &names, RELOAD_TIMEOUT).await.unwrap();
    let standby = 1 - first;
    let before = rollouts(client, &kept).await;
    let changed = Instant::now();
    let second = resources.update_data(&settings, &[("v", "2")]).await.unwrap();
    held_record(client, &kept).await;
    replicas[first].kill();
    ha_support::wait_for_holder(client, ns.name(), "the standby to lead", RELOAD_TIMEOUT, |h| {
        h == names[standby]
    })
    .await
    .unwrap();
    applied_once_after_the_delay(client, &kept, &settings, &second, changed, before).await;
    assert!(replicas[standby].log_text().contains("taking up a held reload"), "the new leader took it up");
}

/// `kept`'s 15 s hold applied once, with `hash`, no sooner than 15 s after `changed`, and its
/// record gone.
async fn applied_once_after_the_delay(
    client: &kube::Client,
    kept: &WorkloadId,
    settings: &ResourceRef,
    hash: &str,
    changed: Instant,
    rollouts_before: i64,
) {
    kept.wait_for_marker(client, settings, STRATEGY, hash, RELOAD_TIMEOUT).await.unwrap();
    let after = changed.elapsed();
    assert!(after >= Duration::from_millis(14_500), "applied {after:?} after the change");
    record_gone(client, kept).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(rollouts(client, kept).await, rollouts_before + 1, "applied exactly once");
}

/// K5: a change reverted while held reloads nothing, and the record goes.
#[tokio::test(flavor = "multi_thread")]
async fn k5_a_change_reverted_while_held_reloads_nothing() {
    let env = TestEnv::with_crds().await;
    let TestEnv { client, ns, resources, .. } = &env;
    let settings = ResourceRef::configmap("settings");
    resources.create(&settings, &[("v", "1")]).await.unwrap();
    let reverted =
        deployment("reverted").env_from_configmap("settings").create(client, ns.name()).await.unwrap();
    let _reloader = env.reloader(STRATEGY, &[]).await;
    // A first reload without a delay, so the workload records the resource's hash.
    let second = resources.update_data(&settings, &[("v", "2")]).await.unwrap();
    reverted.wait_for_marker(client, &settings, STRATEGY, &second, RELOAD_TIMEOUT).await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let annotate = json_merge(DELAY, Some("6s"));
    deployments.patch("reverted", &PatchParams::default(), &annotate).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = rollouts(client, &reverted).await;

    resources.update_data(&settings, &[("v", "3")]).await.unwrap();
    held_record(client, &reverted).await;
    resources.update_data(&settings, &[("v", "2")]).await.unwrap();
    record_gone(client, &reverted).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(reverted.marker(client, &settings, STRATEGY).await.unwrap().map(|m| m.value), Some(second));
    assert_eq!(rollouts(client, &reverted).await, before, "a reverted change rolled the workload");
}

/// K6: malformed timing annotations: an `InvalidAnnotation` Event naming them, and the reload
/// happens as if they were absent.
#[tokio::test(flavor = "multi_thread")]
async fn k6_malformed_values_warn_and_reload_at_once() {
    let env = TestEnv::with_crds().await;
    let TestEnv { client, ns, resources, .. } = &env;
    let (settings, malformed) = settings_and(
        &env,
        "malformed",
        &[(DELAY, "soon"), (MAINTENANCE_WINDOW, "Mon-Fry 02:00-04:00 Europe/Berlin")],
    )
    .await;
    let _reloader = env.reloader(STRATEGY, &[]).await;
    let message = wait_until("an InvalidAnnotation Event", RELOAD_TIMEOUT, || async {
        let events = events_for(client, ns.name(), Kind::Deployment, "malformed").await?;
        events
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("InvalidAnnotation"))
            .and_then(|e| e.message)
            .ok_or_else(|| NotYet::because("no Event"))
    })
    .await
    .unwrap();
    for part in [DELAY, "\"soon\"", MAINTENANCE_WINDOW, "Fry"] {
        assert!(message.contains(part), "{part} missing from {message:?}");
    }
    let second = resources.update_data(&settings, &[("v", "2")]).await.unwrap();
    let took = malformed.wait_for_marker(client, &settings, STRATEGY, &second, RELOAD_TIMEOUT).await.unwrap();
    assert!(took < Duration::from_secs(10), "held {took:?} by malformed annotations");
    let observed = malformed.observe(client).await.unwrap();
    assert!(!observed.annotations.contains_key(HELD), "{:?}", observed.annotations);
}

/// K7: a ConfigMap rewritten every 200 ms: the workload's rollouts stop at the loop guard's
/// threshold, with a Warning Event, an annotation and the metric; deleting the annotation
/// resumes, with one reload for what changed meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn k7_the_loop_guard_stops_a_reload_loop() {
    let env = TestEnv::with_crds().await;
    let TestEnv { client, ns, resources, .. } = &env;
    let churn = ResourceRef::configmap("churn");
    resources.create(&churn, &[("at", "0")]).await.unwrap();
    let looping = deployment("looping").env_from_configmap("churn").create(client, ns.name()).await.unwrap();
    let reloader = env.reloader(STRATEGY, &["--loop-guard=5/1m"]).await;
    let before = rollouts(client, &looping).await;
    let replica_sets_before = replica_sets(client, &looping).await;

    let writer = {
        let resources = resources.clone();
        let churn = churn.clone();
        tokio::spawn(async move {
            for i in 1.. {
                resources.update_data(&churn, &[("at", &i.to_string())]).await.unwrap();
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    let stop = wait_until("the loop guard's stop", RELOAD_TIMEOUT, || async {
        let observed = looping.observe(client).await?;
        observed.annotations.get(LOOP_STOPPED).cloned().ok_or_else(|| NotYet::because("not stopped"))
    })
    .await
    .unwrap();
    let replica_sets_at_stop = replica_sets(client, &looping).await;
    // Still rewritten for a while: nothing rolls any more.
    tokio::time::sleep(Duration::from_secs(4)).await;
    writer.abort();
    let stopped_at = rollouts(client, &looping).await;
    assert_eq!(stopped_at, before + 5, "rollouts past the threshold (stop record {stop})");
    assert_eq!(
        replica_sets_at_stop,
        replica_sets_before + 5,
        "one ReplicaSet per reload up to the threshold"
    );
    assert_eq!(replica_sets(client, &looping).await, replica_sets_at_stop, "ReplicaSets grew after the stop");
    let events = events_for(client, ns.name(), Kind::Deployment, "looping").await.unwrap();
    let warning =
        events.iter().find(|e| e.reason.as_deref() == Some("ReloadLoopStopped")).expect("the Warning Event");
    let message = warning.message.clone().unwrap_or_default();
    assert!(message.contains("5 reloads within 1m") && message.contains("churn"), "{message}");
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    assert_eq!(reloader.metric("reloader_reload_loops_stopped").await.unwrap(), Some(1.0));
    assert!(reloader.log_text().contains("reload loop"), "no log line");

    let latest = resources.update_data(&churn, &[("at", "last")]).await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    deployments.patch("looping", &PatchParams::default(), &json_merge(LOOP_STOPPED, None)).await.unwrap();
    looping.wait_for_marker(client, &churn, STRATEGY, &latest, RELOAD_TIMEOUT).await.unwrap();
    assert_eq!(rollouts(client, &looping).await, stopped_at + 1, "one reload after the stop was cleared");
    assert_eq!(reloader.metric("reloader_reload_loops_stopped").await.unwrap(), Some(0.0));
}

/// A merge patch setting (`None`: removing) one metadata annotation.
fn json_merge(annotation: &str, value: Option<&str>) -> Patch<serde_json::Value> {
    Patch::Merge(serde_json::json!({ "metadata": { "annotations": { annotation: value } } }))
}
