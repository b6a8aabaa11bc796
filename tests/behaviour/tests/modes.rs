//! docs/behaviour.md §E43-E46: the modes and edges a switching Stakater user relies on, against
//! the real binary: `--webhook-url` never writes a workload, a pause ends as soon as its period
//! is removed or unreadable, `--allow-suspended-cronjobs`, and a catch-up that runs no batch work.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use reloader_harness::{NotYet, TestNamespace, wait_until};
use reloader_tests::fixtures::*;
use reloader_tests::fixtures_extra::*;
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(60);
const CONFIG: &str = "app-config";
/// A hash no ConfigMap here has: the marker of a change made long ago.
const OLD_HASH: &str = "0123456789abcdef0123456789abcdef01234567";
const LONG_AGO: &str = "2020-01-01T00:00:00Z";
const REVISION: &str = "deployment.kubernetes.io/revision";

fn config() -> ResourceRef {
    ResourceRef::configmap(CONFIG)
}

/// An `auto` workload of `kind` reading [`CONFIG`] through `envFrom`.
fn auto(kind: Kind, name: &str) -> WorkloadSpec {
    WorkloadSpec::new(kind, name).metadata_annotation(ANNOTATION_AUTO, "true").env_from_configmap(CONFIG)
}

/// An [`auto`] Deployment with the pause-period annotation `period`.
fn pausing(name: &str, period: &str) -> WorkloadSpec {
    auto(Kind::Deployment, name).metadata_annotation(ANNOTATION_PAUSE_PERIOD, period)
}

/// [`auto`], carrying the env-var marker of an old change to [`CONFIG`].
fn stale(kind: Kind, name: &str) -> WorkloadSpec {
    auto(kind, name).env(expected_env_var(ResourceKind::ConfigMap, CONFIG), OLD_HASH)
}

/// Merge-patches Deployment `name`.
async fn patch_deployment(client: &Client, ns: &TestNamespace, name: &str, patch: serde_json::Value) {
    let deployments: Api<Deployment> = ns.api(client);
    deployments.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

/// `spec.paused` and the `paused-at` annotation of Deployment `name`.
async fn pause_state(
    client: &Client,
    ns: &TestNamespace,
    name: &str,
) -> Result<(bool, Option<String>), NotYet> {
    let deployment = ns.api::<Deployment>(client).get(name).await?;
    let paused = deployment.spec.and_then(|spec| spec.paused).unwrap_or(false);
    let paused_at = deployment.metadata.annotations.and_then(|mut a| a.remove(ANNOTATION_PAUSED_AT));
    Ok((paused, paused_at))
}

/// Waits until Deployment `name`'s pause state (`spec.paused`, `paused-at`) satisfies `done`.
async fn wait_for_pause_state(
    client: &Client,
    ns: &TestNamespace,
    name: &str,
    what: &str,
    timeout: Duration,
    done: fn(&(bool, Option<String>)) -> bool,
) {
    wait_until(&format!("{name} {what}"), timeout, || async {
        let state = pause_state(client, ns, name).await?;
        if done(&state) { Ok(()) } else { Err(NotYet::because(format!("{state:?}"))) }
    })
    .await
    .unwrap();
}

/// Waits until the reloader's log shows that its catch-up ran.
async fn wait_for_catch_up(reloader: &reloader_harness::Reloader) {
    wait_for_log(reloader, "the leader catch-up", TIMEOUT, |log| log.contains("leader catch-up"))
        .await
        .unwrap();
}

/// The (event, name) of every webhook POST, with how many times each came.
fn posts(hook: &HttpRecorder) -> BTreeMap<(String, String), usize> {
    let mut seen = BTreeMap::new();
    for request in hook.requests() {
        let body = request.json().unwrap_or_else(|| panic!("a JSON body: {request:?}"));
        let key = (
            body["event"].as_str().unwrap_or("?").to_owned(),
            body["name"].as_str().unwrap_or("?").to_owned(),
        );
        *seen.entry(key).or_default() += 1;
    }
    seen
}

fn post(event: &str, name: &str) -> (String, String) {
    (event.to_owned(), name.to_owned())
}

/// E43: `--webhook-url` with `--reload-on-create`, `--reload-on-delete` and
/// `--sync-after-restart`: the listed ConfigMaps and Secrets are announced once each as created
/// (the ignored one too: Stakater posts before reading annotations), then every change once; no
/// workload is written: not the Deployment with an out-of-date marker (the catch-up), not the one
/// reloader paused long ago (the pause timer), not the Job nor the CronJob.
#[tokio::test]
async fn webhook_mode_posts_once_per_change_and_never_writes_a_workload() {
    let env = TestEnv::new().await;
    let TestEnv { plane: _, ns, client, resources, .. } = &env;
    resources.create(&config(), &[("k", "v1")]).await.unwrap();
    let secret = ResourceRef::secret("app-secret");
    resources.create(&secret, &[("password", "one")]).await.unwrap();
    let quiet = ResourceRef::configmap("quiet");
    resources.create_annotated(&quiet, &[("k", "v1")], &[(ANNOTATION_IGNORE, "true")]).await.unwrap();
    let workloads = vec![
        stale(Kind::Deployment, "stale").create(client, ns.name()).await.unwrap(),
        pausing("paused", "1s")
            .metadata_annotation(ANNOTATION_PAUSED_AT, LONG_AGO)
            .create(client, ns.name())
            .await
            .unwrap(),
        stale(Kind::Job, "migrate").create(client, ns.name()).await.unwrap(),
        stale(Kind::CronJob, "nightly").create(client, ns.name()).await.unwrap(),
    ];
    // The Deployment controller annotates a new Deployment with its revision; wait for that, so
    // the snapshot below only moves if reloader writes.
    for name in ["stale", "paused"] {
        wait_until(&format!("{name}'s first revision"), TIMEOUT, || async {
            let deployment = ns.api::<Deployment>(client).get(name).await?;
            let annotations = deployment.metadata.annotations.unwrap_or_default();
            annotations.get(REVISION).map(|_| ()).ok_or(NotYet::because("no revision yet"))
        })
        .await
        .unwrap();
    }
    patch_deployment(client, ns, "paused", json!({"spec": {"paused": true}})).await;
    let mut before = Vec::new();
    for workload in &workloads {
        before.push(workload.observe(client).await.unwrap());
    }
    let hook = HttpRecorder::start().await;
    let reloader = env
        .reloader_builder()
        .arg(format!("--webhook-url={}", hook.url("/hook")))
        .args(["--reload-on-create=true", "--reload-on-delete=true", "--sync-after-restart=true"])
        .start()
        .await
        .unwrap();
    wait_for_catch_up(&reloader).await;
    let listed = [post("create", CONFIG), post("create", "app-secret"), post("create", "quiet")];
    hook.wait_for("the listed resources announced", TIMEOUT, |_| {
        let seen = posts(&hook);
        listed.iter().all(|p| seen.contains_key(p))
    })
    .await
    .unwrap();

    let started = Instant::now();
    resources.update_data(&config(), &[("k", "v2")]).await.unwrap();
    hook.wait_for("the update", TIMEOUT, |_| posts(&hook).contains_key(&post("update", CONFIG)))
        .await
        .unwrap();
    let latency = started.elapsed();
    resources.update_data(&quiet, &[("k", "v2")]).await.unwrap();
    resources.delete(&secret).await.unwrap();
    resources.create(&ResourceRef::configmap("fresh"), &[("k", "v1")]).await.unwrap();
    let changes = [post("update", "quiet"), post("delete", "app-secret"), post("create", "fresh")];
    hook.wait_for("every change", TIMEOUT, |_| {
        let seen = posts(&hook);
        changes.iter().all(|p| seen.contains_key(p))
    })
    .await
    .unwrap();

    // Long enough for the pause timer (period 1 s, paused in 2020) and any catch-up to act.
    let quiet_period = negative_wait(latency);
    for (workload, before) in workloads.iter().zip(&before) {
        workload.assert_no_change_for(client, before, quiet_period / 4).await;
    }
    assert_eq!(pause_state(client, ns, "paused").await.unwrap(), (true, Some(LONG_AGO.to_owned())));
    let cronjob_uid = &before[3].uid;
    assert!(jobs_owned_by(client, ns.name(), cronjob_uid).await.unwrap().is_empty(), "no Job spawned");
    let seen = posts(&hook);
    for expected in listed.iter().chain(&changes).chain([&post("update", CONFIG)]) {
        assert_eq!(seen.get(expected), Some(&1), "{expected:?} posted once: {seen:?}");
    }
    assert!(!reloader.log_text().contains("dropped a queued write"), "nothing tried to write");
}

/// E44: a Deployment reloader paused resumes at once when its pause period is removed, or made
/// unreadable (padded with spaces: Go's `time.ParseDuration`, which Stakater uses, rejects it),
/// long before the hour it was paused for.
#[tokio::test]
async fn a_removed_or_unreadable_pause_period_resumes_at_once() {
    let env = TestEnv::new().await;
    let TestEnv { plane: _, ns, client, resources, .. } = &env;
    resources.create(&config(), &[("k", "v1")]).await.unwrap();
    let edits = [("removed", json!(null)), ("padded", json!(" 1h "))];
    for (name, _) in &edits {
        pausing(name, "1h").create(client, ns.name()).await.unwrap();
    }
    let _reloader = env.reloader_builder().start().await.unwrap();
    let hash = resources.update_data(&config(), &[("k", "v2")]).await.unwrap();
    for (name, _) in &edits {
        wait_for_pause_state(client, ns, name, "paused by the reload", TIMEOUT, |s| s.0 && s.1.is_some())
            .await;
    }
    for (name, period) in &edits {
        let patch = json!({"metadata": {"annotations": {ANNOTATION_PAUSE_PERIOD: period}}});
        patch_deployment(client, ns, name, patch).await;
    }
    for (name, _) in &edits {
        let resumed = |s: &(bool, Option<String>)| !s.0 && s.1.is_none();
        wait_for_pause_state(client, ns, name, "resumed", Duration::from_secs(30), resumed).await;
        let workload =
            WorkloadId { kind: Kind::Deployment, namespace: ns.name().to_owned(), name: (*name).into() };
        let marker = workload.marker(client, &config(), Strategy::EnvVars).await.unwrap().map(|m| m.value);
        assert_eq!(marker.as_deref(), Some(hash.as_str()), "{name}: the reload itself is kept");
    }
}

/// E44: a padded pause period is read the same way when a reload would start the pause: it is
/// not a duration, so the reload happens without pausing, and an `InvalidAnnotation` warning
/// says why.
#[tokio::test]
async fn a_padded_pause_period_pauses_nothing() {
    let env = TestEnv::new().await;
    let TestEnv { plane: _, ns, client, resources, .. } = &env;
    resources.create(&config(), &[("k", "v1")]).await.unwrap();
    let web = pausing("web", " 8s").create(client, ns.name()).await.unwrap();
    let _reloader = env.reloader_builder().start().await.unwrap();
    let hash = resources.update_data(&config(), &[("k", "v2")]).await.unwrap();
    web.wait_for_marker(client, &config(), Strategy::EnvVars, &hash, TIMEOUT).await.unwrap();
    assert_eq!(pause_state(client, ns, "web").await.unwrap(), (false, None), "reloaded without a pause");
    wait_until("an InvalidAnnotation warning", TIMEOUT, || async {
        let events = events_for(client, ns.name(), Kind::Deployment, "web").await?;
        let reasons: Vec<_> = events.iter().filter_map(|e| e.reason.clone()).collect();
        let found = events.iter().any(|e| {
            e.reason.as_deref() == Some("InvalidAnnotation")
                && e.message.as_deref().is_some_and(|m| m.contains(ANNOTATION_PAUSE_PERIOD))
        });
        if found { Ok(()) } else { Err(NotYet::because(format!("reasons {reasons:?}"))) }
    })
    .await
    .unwrap();
}

/// E45: a suspended CronJob spawns nothing by default (Stakater issue 822), and a Job, as with
/// Stakater, with `--allow-suspended-cronjobs=true`.
#[tokio::test]
async fn allow_suspended_cronjobs_spawns_a_job_from_a_suspended_cronjob() {
    let (allowed, default) = futures::join!(suspended_cronjob_case(true), suspended_cronjob_case(false));
    assert_eq!(allowed, 1, "--allow-suspended-cronjobs=true: one Job for the change");
    assert_eq!(default, 0, "a suspended CronJob spawns nothing by default");
}

/// How many Jobs the suspended CronJob owns once a change was handled.
async fn suspended_cronjob_case(allow: bool) -> usize {
    let env = TestEnv::new().await;
    let TestEnv { plane: _, ns, client, resources, .. } = &env;
    resources.create(&config(), &[("k", "v1")]).await.unwrap();
    // A control that always spawns, so "nothing" is measured against a change that was handled.
    let control = auto(Kind::CronJob, "control").create(client, ns.name()).await.unwrap();
    auto(Kind::CronJob, "held").create(client, ns.name()).await.unwrap();
    let cronjobs: Api<CronJob> = ns.api(client);
    let suspend = json!({"spec": {"suspend": true}});
    cronjobs.patch("held", &PatchParams::default(), &Patch::Merge(&suspend)).await.unwrap();
    let held_uid = cronjobs.get("held").await.unwrap().metadata.uid.unwrap();
    let control_uid = control.observe(client).await.unwrap().uid;
    let _reloader =
        env.reloader_builder().arg(format!("--allow-suspended-cronjobs={allow}")).start().await.unwrap();

    let started = Instant::now();
    let hash = resources.update_data(&config(), &[("k", "v2")]).await.unwrap();
    wait_until("the control CronJob's Job", TIMEOUT, || async {
        let jobs = jobs_owned_by(client, ns.name(), &control_uid).await?;
        if jobs.is_empty() { Err(NotYet::because("none yet")) } else { Ok(()) }
    })
    .await
    .unwrap();
    let latency = started.elapsed();
    let held_jobs = if allow {
        let jobs = wait_until("the suspended CronJob's Job", TIMEOUT, || async {
            let jobs = jobs_owned_by(client, ns.name(), &held_uid).await?;
            if jobs.is_empty() { Err(NotYet::because("none yet")) } else { Ok(jobs) }
        })
        .await
        .unwrap();
        let template = &jobs[0].spec.as_ref().unwrap().template;
        let marker = marker_in(template, &config(), Strategy::EnvVars).map(|m| m.value);
        assert_eq!(marker.as_deref(), Some(hash.as_str()), "the Job carries the marker");
        jobs
    } else {
        tokio::time::sleep(negative_wait(latency)).await;
        jobs_owned_by(client, ns.name(), &held_uid).await.unwrap()
    };
    held_jobs.len()
}

/// E46: the start-up catch-up converges long-running kinds only. A Deployment with an
/// out-of-date marker is brought up to date; a Job with one (the marker of the day it ran) is
/// not recreated, and a CronJob with one spawns nothing; nor after a restart. With
/// `--reload-on-create --sync-after-restart` (every listed resource counts as created) a
/// Deployment without a marker reloads, and still no batch work runs.
#[tokio::test]
async fn the_catch_up_runs_no_batch_work() {
    futures::join!(
        catch_up_case(&[]),
        catch_up_case(&["--reload-on-create=true", "--sync-after-restart=true"])
    );
}

async fn catch_up_case(flags: &[&str]) {
    let env = TestEnv::new().await;
    let TestEnv { plane: _, ns, client, resources, .. } = &env;
    let hash = resources.create(&config(), &[("k", "v1")]).await.unwrap();
    let sync = !flags.is_empty();
    let web = stale(Kind::Deployment, "web").create(client, ns.name()).await.unwrap();
    let plain = auto(Kind::Deployment, "plain").create(client, ns.name()).await.unwrap();
    let job = stale(Kind::Job, "migrate").create(client, ns.name()).await.unwrap();
    let cronjob = stale(Kind::CronJob, "nightly").create(client, ns.name()).await.unwrap();
    let spare = auto(Kind::CronJob, "spare").create(client, ns.name()).await.unwrap();
    let job_before = job.observe(client).await.unwrap();
    let cronjob_uids = [cronjob.observe(client).await.unwrap().uid, spare.observe(client).await.unwrap().uid];
    let plain_before = plain.observe(client).await.unwrap();

    for round in ["first start", "restart"] {
        let mut reloader = env
            .reloader_builder()
            .name(format!("catch-up-{round}"))
            .args(flags.iter().copied())
            .start()
            .await
            .unwrap();
        let started = Instant::now();
        web.wait_for_marker(client, &config(), Strategy::EnvVars, &hash, TIMEOUT).await.unwrap();
        if sync {
            plain.wait_for_marker(client, &config(), Strategy::EnvVars, &hash, TIMEOUT).await.unwrap();
        }
        wait_for_catch_up(&reloader).await;
        let latency = started.elapsed();
        job.assert_no_change_for(client, &job_before, negative_wait(latency)).await;
        let jobs: Api<Job> = ns.api(client);
        let job_now = jobs.get("migrate").await.unwrap();
        assert_eq!(
            job_now.metadata.uid.as_deref(),
            Some(job_before.uid.as_str()),
            "{round} {flags:?}: the Job is the same"
        );
        for uid in &cronjob_uids {
            let spawned = jobs_owned_by(client, ns.name(), uid).await.unwrap();
            assert!(spawned.is_empty(), "{round} {flags:?}: a CronJob spawned {spawned:?}");
        }
        if !sync {
            let plain_now = plain.observe(client).await.unwrap();
            assert!(plain_now.same_spec_as(&plain_before), "{round}: no marker, no catch-up");
        }
        reloader.kill();
    }
}
