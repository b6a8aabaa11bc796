//! docs/behaviour.md §C: how each workload kind is reloaded (CronJob, Job, Argo Rollout, OpenShift
//! DeploymentConfig) and `--ignored-workload-types`, against the real binary; and §I, the kinds a
//! user declares ([`declared`]).

#[path = "../support/explain.rs"]
#[allow(dead_code)]
mod explain_support;
#[path = "../support/webhook.rs"]
#[allow(dead_code)]
mod webhook;

/// Declared kinds (`--custom-workload`), docs/behaviour.md §I.
mod declared;

use std::future::Future;
use std::time::{Duration, Instant};

use futures::future::join_all;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use reloader_harness::{NotYet, wait_until};
use reloader_tests::fixtures::*;
use reloader_tests::fixtures_extra::*;
use reloader_workload_argo::Rollout;
use serde_json::json;

const RELOAD_TIMEOUT: Duration = Duration::from_secs(60);
const CONFIG: &str = "app-config";

/// Runs `case` once per strategy, concurrently (each case makes its own namespace and reloader).
async fn each_strategy<F, Fut>(case: F)
where
    F: Fn(Strategy) -> Fut,
    Fut: Future<Output = ()>,
{
    join_all(Strategy::ALL.map(case)).await;
}

/// An `auto` workload of `kind` using [`CONFIG`] through `envFrom`.
fn auto_workload(kind: Kind, name: &str) -> WorkloadSpec {
    WorkloadSpec::new(kind, name).metadata_annotation(ANNOTATION_AUTO, "true").env_from_configmap(CONFIG)
}

/// Waits until the CronJob with `uid` owns at least `count` Jobs; returns them.
async fn wait_for_owned_jobs(client: &Client, namespace: &str, uid: &str, count: usize) -> Vec<Job> {
    wait_until(&format!("{count} Job(s) owned by CronJob {uid}"), RELOAD_TIMEOUT, || async {
        let jobs = jobs_owned_by(client, namespace, uid).await?;
        if jobs.len() >= count { Ok(jobs) } else { Err(NotYet::because(format!("{} so far", jobs.len()))) }
    })
    .await
    .unwrap()
}

fn warnings(events: &[Event]) -> Vec<&Event> {
    events.iter().filter(|event| event.type_.as_deref() == Some("Warning")).collect()
}

/// C28: a change creates a Job from the CronJob's template, owned by it and carrying the marker;
/// the CronJob itself is never modified; a suspended CronJob creates nothing.
#[tokio::test]
async fn cronjob_change_creates_an_owned_job_and_leaves_the_cronjob_alone() {
    each_strategy(cronjob_case).await;
}

async fn cronjob_case(strategy: Strategy) {
    let env = TestEnv::with_crds().await;
    let TestEnv { ns, client, resources, .. } = &env;
    let config = ResourceRef::configmap(CONFIG);
    resources.create(&config, &[("k", "v1")]).await.unwrap();
    let nightly = auto_workload(Kind::CronJob, "nightly").create(client, ns.name()).await.unwrap();
    let paused = auto_workload(Kind::CronJob, "paused").create(client, ns.name()).await.unwrap();
    let cronjobs: Api<CronJob> = ns.api(client);
    let suspend = json!({ "spec": { "suspend": true } });
    cronjobs.patch("paused", &PatchParams::default(), &Patch::Merge(&suspend)).await.unwrap();
    let nightly_before = nightly.observe(client).await.unwrap();
    let paused_before = paused.observe(client).await.unwrap();
    let reloader = env.reloader(strategy, &[]).await;

    let started = Instant::now();
    let first_hash = resources.update_data(&config, &[("k", "v2")]).await.unwrap();
    let jobs = wait_for_owned_jobs(client, ns.name(), &nightly_before.uid, 1).await;
    let latency = started.elapsed();
    let job = &jobs[0];
    let name = job.metadata.name.as_deref().unwrap_or_default();
    assert!(name.starts_with("nightly-") && name.len() > "nightly-".len(), "{strategy}: Job name {name}");
    assert_eq!(job.metadata.generate_name.as_deref(), Some("nightly-"), "{strategy}");
    let instantiate =
        job.metadata.annotations.as_ref().and_then(|a| a.get("cronjob.kubernetes.io/instantiate"));
    assert_eq!(instantiate.map(String::as_str), Some("manual"), "{strategy}: {:?}", job.metadata);
    let owner = job.metadata.owner_references.as_ref().unwrap().iter().find(|o| o.kind == "CronJob").unwrap();
    assert_eq!((owner.name.as_str(), owner.controller), ("nightly", Some(true)), "{strategy}");
    let template = &job.spec.as_ref().unwrap().template;
    let marker = marker_in(template, &config, strategy).map(|m| m.value);
    assert_eq!(marker.as_deref(), Some(first_hash.as_str()), "{strategy}: marker in the Job's template");

    // Every change makes a Job of its own.
    let second_hash = resources.update_data(&config, &[("k", "v3")]).await.unwrap();
    let jobs = wait_for_owned_jobs(client, ns.name(), &nightly_before.uid, 2).await;
    // Creation timestamps have one-second resolution: compare the set, not the order.
    let mut markers: Vec<Option<String>> = jobs
        .iter()
        .map(|job| marker_in(&job.spec.as_ref().unwrap().template, &config, strategy).map(|m| m.value))
        .collect();
    markers.sort();
    let mut expected = vec![Some(first_hash), Some(second_hash)];
    expected.sort();
    assert_eq!(markers, expected, "{strategy}: one Job per change, each with its change's marker");

    paused.assert_no_change_for(client, &paused_before, negative_wait(latency)).await;
    let from_suspended = jobs_owned_by(client, ns.name(), &paused_before.uid).await.unwrap();
    assert!(from_suspended.is_empty(), "{strategy}: the suspended CronJob got Jobs: {from_suspended:?}");
    let skipped = reloader.metric(r#"reloader_skip_reasons_total{reason="suspended"}"#).await.unwrap();
    assert!(skipped >= Some(2.0), "{strategy}: the suspended CronJob was considered twice: {skipped:?}");
    let nightly_now = nightly.observe(client).await.unwrap();
    assert!(
        nightly_now.same_spec_as(&nightly_before),
        "{strategy}: the CronJob was modified:\nbefore {nightly_before:#?}\nafter {nightly_now:#?}"
    );
}

/// C29: a change deletes the Job and creates it again, same name, new UID, with the marker.
#[tokio::test]
async fn job_is_recreated_with_the_same_name_and_the_marker() {
    each_strategy(job_case).await;
}

async fn job_case(strategy: Strategy) {
    let env = TestEnv::with_crds().await;
    let TestEnv { ns, client, resources, .. } = &env;
    let config = ResourceRef::configmap(CONFIG);
    resources.create(&config, &[("k", "v1")]).await.unwrap();
    let job = auto_workload(Kind::Job, "migrate").create(client, ns.name()).await.unwrap();
    let before = job.observe(client).await.unwrap();
    let _reloader = env.reloader(strategy, &[]).await;

    let hash = resources.update_data(&config, &[("k", "v2")]).await.unwrap();
    let jobs: Api<Job> = ns.api(client);
    let recreated = wait_until(&format!("{strategy}: Job migrate recreated"), RELOAD_TIMEOUT, || async {
        let now = jobs.get("migrate").await?;
        let uid = now.metadata.uid.clone().unwrap_or_default();
        let marker = marker_in(&now.spec.clone().unwrap_or_default().template, &config, strategy);
        match marker {
            Some(marker) if uid != before.uid && marker.value == hash => Ok(now),
            other => Err(NotYet::because(format!("uid {uid}, marker {other:?}"))),
        }
    })
    .await
    .unwrap();
    let new_uid = recreated.metadata.uid.clone().unwrap();
    // The API server gave the new Job its own selector labels: none of the old UID survived.
    let template_labels = recreated.spec.as_ref().unwrap().template.metadata.clone().unwrap().labels.unwrap();
    for key in ["controller-uid", "batch.kubernetes.io/controller-uid"] {
        if let Some(value) = template_labels.get(key) {
            assert_eq!(value, &new_uid, "{strategy}: {key}");
        }
    }
    let listed = jobs.list(&ListParams::default()).await.unwrap().items;
    let named: Vec<_> = listed.iter().filter(|j| j.metadata.name.as_deref() == Some("migrate")).collect();
    assert_eq!(named.len(), 1, "{strategy}: exactly one Job named migrate");
}

/// C30 (default and `restart`) and C31: Rollouts and DeploymentConfigs change their own pod
/// template; a `restart` Rollout gets `spec.restartAt` and keeps its template.
#[tokio::test]
async fn rollouts_and_deployment_configs_change_their_template_or_restart() {
    each_strategy(crd_kinds_case).await;
}

async fn crd_kinds_case(strategy: Strategy) {
    let env = TestEnv::with_crds().await;
    let TestEnv { ns, client, resources, .. } = &env;
    let config = ResourceRef::configmap(CONFIG);
    resources.create(&config, &[("k", "v1")]).await.unwrap();
    let rollout = auto_workload(Kind::Rollout, "ro").create(client, ns.name()).await.unwrap();
    let deployment_config =
        auto_workload(Kind::DeploymentConfig, "dc").create(client, ns.name()).await.unwrap();
    let restarting = auto_workload(Kind::Rollout, "ro-restart")
        .metadata_annotation(ANNOTATION_ROLLOUT_STRATEGY, "restart")
        .create(client, ns.name())
        .await
        .unwrap();
    let restarting_before = restarting.observe(client).await.unwrap();
    let _reloader = env.reloader(strategy, &[]).await;

    let changed_at = Timestamp::now().as_second();
    let hash = resources.update_data(&config, &[("k", "v2")]).await.unwrap();
    for workload in [&rollout, &deployment_config] {
        workload.wait_for_marker(client, &config, strategy, &hash, RELOAD_TIMEOUT).await.unwrap();
    }
    let rollouts: Api<Rollout> = ns.api(client);
    let plain = rollouts.get("ro").await.unwrap();
    assert_eq!(plain.spec.restart_at, None, "{strategy}: a default Rollout is not restarted");

    let restarted = wait_until(&format!("{strategy}: ro-restart restartAt"), RELOAD_TIMEOUT, || async {
        let object = rollouts.get("ro-restart").await?;
        object.spec.restart_at.clone().ok_or_else(|| NotYet::because("no restartAt yet"))
    })
    .await
    .unwrap();
    let at = rfc3339_seconds(&restarted).unwrap_or_else(|| panic!("{strategy}: restartAt {restarted:?}"));
    assert!(at >= changed_at - 1, "{strategy}: restartAt {restarted} is older than the change");
    let restarting_now = restarting.observe(client).await.unwrap();
    assert_eq!(restarting_now.template, restarting_before.template, "{strategy}: restart keeps the template");
}

/// C30: a Rollout that borrows its template through `workloadRef` has nothing to mark; it is
/// skipped without an error, and the controller keeps reloading everything else.
#[tokio::test]
async fn a_workload_ref_rollout_is_skipped_without_error() {
    let env = TestEnv::with_crds().await;
    let TestEnv { ns, client, resources, .. } = &env;
    let config = ResourceRef::configmap(CONFIG);
    resources.create(&config, &[("k", "v1")]).await.unwrap();
    let web = auto_workload(Kind::Deployment, "web").create(client, ns.name()).await.unwrap();
    let borrowed: Rollout = serde_json::from_value(json!({
        "apiVersion": reloader_workload_argo::API_VERSION,
        "kind": reloader_workload_argo::KIND,
        "metadata": {
            "name": "ro-ref",
            // Explicit: selects the ConfigMap whatever the (absent) template references.
            "annotations": { ANNOTATION_CONFIGMAP_RELOAD: CONFIG, ANNOTATION_AUTO: "true" },
        },
        "spec": {
            "replicas": 0,
            "selector": { "matchLabels": { "app": "web" } },
            "workloadRef": { "apiVersion": "apps/v1", "kind": "Deployment", "name": "web" },
            "strategy": { "canary": {} },
        },
    }))
    .unwrap();
    let rollouts: Api<Rollout> = ns.api(client);
    rollouts.create(&PostParams::default(), &borrowed).await.unwrap();
    let borrowed_id = WorkloadId { kind: Kind::Rollout, namespace: ns.name().into(), name: "ro-ref".into() };
    let borrowed_before = borrowed_id.observe(client).await.unwrap();
    let mut reloader = env.reloader(Strategy::EnvVars, &[]).await;

    for round in 2..4 {
        let hash = resources.update_data(&config, &[("k", &format!("v{round}"))]).await.unwrap();
        web.wait_for_marker(client, &config, Strategy::EnvVars, &hash, RELOAD_TIMEOUT).await.unwrap();
    }
    let skipped = reloader.metric(r#"reloader_skip_reasons_total{reason="no_template"}"#).await.unwrap();
    assert!(skipped >= Some(2.0), "the workloadRef Rollout was considered and skipped: {skipped:?}");
    let borrowed_now = borrowed_id.observe(client).await.unwrap();
    assert!(borrowed_now.same_spec_as(&borrowed_before), "the workloadRef Rollout was written");
    assert_eq!(reloader.exit_status(), None, "the controller is still running");
    let log = reloader.log_text();
    assert!(!log.contains("panicked"), "{log}");
    assert!(!log.contains("reload failed"), "{log}");
    let events = events_for(client, ns.name(), Kind::Rollout, "ro-ref").await.unwrap();
    assert!(warnings(&events).is_empty(), "no warning for a skip: {events:#?}");
}

/// C32: `--ignored-workload-types` leaves the named batch kinds alone; the rest still reload.
#[tokio::test]
async fn ignored_workload_types_leave_jobs_and_cronjobs_alone() {
    let cases: [(&str, &[Kind]); 3] = [
        ("jobs,cronjobs", &[Kind::Job, Kind::CronJob]),
        ("jobs", &[Kind::Job]),
        ("cronjobs", &[Kind::CronJob]),
    ];
    join_all(cases.map(|(flag, ignored)| ignored_types_case(flag, ignored))).await;
}

async fn ignored_types_case(flag: &str, ignored: &[Kind]) {
    let env = TestEnv::with_crds().await;
    let TestEnv { ns, client, resources, .. } = &env;
    let config = ResourceRef::configmap(CONFIG);
    resources.create(&config, &[("k", "v1")]).await.unwrap();
    let web = auto_workload(Kind::Deployment, "web").create(client, ns.name()).await.unwrap();
    let job = auto_workload(Kind::Job, "batch").create(client, ns.name()).await.unwrap();
    let cronjob = auto_workload(Kind::CronJob, "cron").create(client, ns.name()).await.unwrap();
    let job_before = job.observe(client).await.unwrap();
    let cronjob_before = cronjob.observe(client).await.unwrap();
    let argument = format!("--ignored-workload-types={flag}");
    let _reloader = env.reloader(Strategy::EnvVars, &[&argument]).await;

    let started = Instant::now();
    let hash = resources.update_data(&config, &[("k", "v2")]).await.unwrap();
    web.wait_for_marker(client, &config, Strategy::EnvVars, &hash, RELOAD_TIMEOUT).await.unwrap();
    let mut latency = started.elapsed();
    if !ignored.contains(&Kind::Job) {
        let waited = job.wait_for_marker(client, &config, Strategy::EnvVars, &hash, RELOAD_TIMEOUT).await;
        latency = latency.max(waited.unwrap_or_else(|e| panic!("{flag}: the Job should reload: {e}")));
    }
    if !ignored.contains(&Kind::CronJob) {
        let jobs = wait_for_owned_jobs(client, ns.name(), &cronjob_before.uid, 1).await;
        latency = latency.max(started.elapsed());
        let marker = marker_in(&jobs[0].spec.clone().unwrap().template, &config, Strategy::EnvVars);
        assert_eq!(marker.map(|m| m.value), Some(hash.clone()), "{flag}");
    }

    let quiet = negative_wait(latency);
    if ignored.contains(&Kind::Job) {
        job.assert_no_change_for(client, &job_before, quiet).await;
    }
    if ignored.contains(&Kind::CronJob) {
        cronjob.assert_no_change_for(client, &cronjob_before, quiet).await;
        let created = jobs_owned_by(client, ns.name(), &cronjob_before.uid).await.unwrap();
        assert!(created.is_empty(), "{flag}: the ignored CronJob made Jobs: {created:?}");
    }
}
