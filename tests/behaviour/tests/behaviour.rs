//! docs/behaviour.md §E37-E41: pause periods (across a crash too), webhook mode, alerts, the
//! meta-info ConfigMap, `/metrics` and the health endpoints, against the real binary.

use std::time::{Duration, Instant};

use futures::future::join_all;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ListParams};
use reloader_harness::{KubeconfigFile, NotYet, TestNamespace, wait_until};
use reloader_tests::fixtures::*;
use reloader_tests::fixtures_extra::*;
use serde_json::Value;

const RELOAD_TIMEOUT: Duration = Duration::from_secs(60);
const CONFIG: &str = "app-config";
const SECRET: &str = "app-secret";

/// ConfigMap [`CONFIG`] and an `auto` Deployment `web` using it, with extra metadata
/// `annotations`, in the test's namespace.
async fn web_with_config(env: &TestEnv<'_>, annotations: &[(&str, &str)]) -> WorkloadId {
    env.resources.create(&ResourceRef::configmap(CONFIG), &[("k", "v1")]).await.unwrap();
    let mut spec = WorkloadSpec::new(Kind::Deployment, "web")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_configmap(CONFIG);
    for (key, value) in annotations {
        spec = spec.metadata_annotation(*key, *value);
    }
    spec.create(&env.client, env.ns.name()).await.unwrap()
}

/// `spec.paused` and the `paused-at` annotation of a Deployment.
async fn pause_state(deployments: &Api<Deployment>, name: &str) -> Result<(bool, Option<String>), NotYet> {
    let deployment = deployments.get(name).await?;
    let paused = deployment.spec.and_then(|spec| spec.paused).unwrap_or(false);
    let paused_at = deployment.metadata.annotations.and_then(|mut a| a.remove(ANNOTATION_PAUSED_AT));
    Ok((paused, paused_at))
}

/// Waits until `web` is paused with `paused-at` and carries `hash`; returns `paused-at` in seconds.
async fn wait_paused(client: &Client, ns: &TestNamespace, web: &WorkloadId, hash: &str) -> i64 {
    let deployments: Api<Deployment> = ns.api(client);
    let config = ResourceRef::configmap(CONFIG);
    wait_until("web paused by reloader, with the new marker", RELOAD_TIMEOUT, || async {
        let (paused, paused_at) = pause_state(&deployments, &web.name).await?;
        let marker = web.marker(client, &config, Strategy::EnvVars).await?.map(|m| m.value);
        match paused_at.as_deref().and_then(rfc3339_seconds) {
            Some(at) if paused && marker.as_deref() == Some(hash) => Ok(at),
            _ => Err(NotYet::because(format!("paused {paused}, paused-at {paused_at:?}, marker {marker:?}"))),
        }
    })
    .await
    .unwrap()
}

/// Waits until `web` is running again without `paused-at`; returns the wall-clock second it saw that.
async fn wait_resumed(client: &Client, ns: &TestNamespace, period: Duration) -> i64 {
    let deployments: Api<Deployment> = ns.api(client);
    wait_until("web resumed after its pause period", RELOAD_TIMEOUT + period, || async {
        match pause_state(&deployments, "web").await? {
            (false, None) => Ok(Timestamp::now().as_second()),
            state => Err(NotYet::because(format!("paused, paused-at: {state:?}"))),
        }
    })
    .await
    .unwrap()
}

/// ReplicaSets of `web` whose template carries the env-var marker `hash`.
async fn replica_sets_with(client: &Client, ns: &TestNamespace, hash: &str) -> usize {
    let replica_sets =
        ns.api::<ReplicaSet>(client).list(&ListParams::default().labels("app=web")).await.unwrap();
    let config = ResourceRef::configmap(CONFIG);
    replica_sets
        .items
        .iter()
        .filter_map(|rs| rs.spec.as_ref()?.template.as_ref())
        .filter(|template| marker_in(template, &config, Strategy::EnvVars).is_some_and(|m| m.value == hash))
        .count()
}

/// E37: the reload pauses the Deployment in the same write (so nothing rolls meanwhile), and the
/// pause ends no earlier than `paused-at` + period; then the new template rolls out.
#[tokio::test]
async fn pause_period_pauses_the_rollout_and_resumes_after_the_period() {
    let env = TestEnv::new().await;
    let TestEnv { plane: _, ns, client, resources, .. } = &env;
    let period = Duration::from_secs(8);
    let web = web_with_config(&env, &[(ANNOTATION_PAUSE_PERIOD, "8s")]).await;
    let _reloader = env.reloader_builder().start().await.unwrap();

    let hash = resources.update_data(&ResourceRef::configmap(CONFIG), &[("k", "v2")]).await.unwrap();
    let paused_at = wait_paused(client, ns, &web, &hash).await;
    assert_eq!(replica_sets_with(client, ns, &hash).await, 0, "nothing rolls while paused");
    let resumed_at = wait_resumed(client, ns, period).await;
    let period_seconds = i64::try_from(period.as_secs()).unwrap();
    assert!(resumed_at >= paused_at + period_seconds, "resumed at {resumed_at}, paused at {paused_at}");
    wait_until("a ReplicaSet with the new marker", RELOAD_TIMEOUT, || async {
        match replica_sets_with(client, ns, &hash).await {
            0 => Err(NotYet::because("no ReplicaSet carries the marker yet")),
            _ => Ok(()),
        }
    })
    .await
    .unwrap();
}

/// E37: the resume time lives in `paused-at`, so a controller killed during the pause is
/// replaced by one that resumes the Deployment when the period is over.
#[tokio::test]
async fn a_new_process_resumes_a_deployment_paused_by_a_killed_one() {
    let env = TestEnv::new().await;
    let TestEnv { plane: _, ns, client, resources, .. } = &env;
    let period = Duration::from_secs(10);
    let web = web_with_config(&env, &[(ANNOTATION_PAUSE_PERIOD, "10s")]).await;
    let mut first = env.reloader_builder().name("first").start().await.unwrap();

    let hash = resources.update_data(&ResourceRef::configmap(CONFIG), &[("k", "v2")]).await.unwrap();
    let paused_at = wait_paused(client, ns, &web, &hash).await;
    first.kill();
    let second = env.reloader_builder().name("second").start().await.unwrap();
    let resumed_at = wait_resumed(client, ns, period).await;
    assert!(resumed_at >= paused_at + 10, "resumed at {resumed_at}, paused at {paused_at}");
    let log = second.log_text();
    assert!(log.contains("pause period over"), "the new process did the resume:\n{log}");
    let marker = web.marker(client, &ResourceRef::configmap(CONFIG), Strategy::EnvVars).await.unwrap();
    assert_eq!(marker.map(|m| m.value), Some(hash), "the reload itself is kept");
}

/// E38: `--webhook-url` POSTs what changed (kind, namespace, name, hash) instead of reloading;
/// an endpoint that fails twice gets the same notice a third time.
#[tokio::test]
async fn webhook_mode_posts_changes_retries_failures_and_touches_no_workload() {
    let env = TestEnv::new().await;
    let TestEnv { plane: _, ns, client, resources, .. } = &env;
    let web = web_with_config(&env, &[]).await;
    let secret = ResourceRef::secret(SECRET);
    resources.create(&secret, &[("password", "one")]).await.unwrap();
    let hook = HttpRecorder::start().await;
    let _reloader =
        env.reloader_builder().arg(format!("--webhook-url={}", hook.url("/hook"))).start().await.unwrap();
    let before = web.observe(client).await.unwrap();

    let started = Instant::now();
    let hash = resources.update_data(&ResourceRef::configmap(CONFIG), &[("k", "v2")]).await.unwrap();
    let received = hook.wait_for("the ConfigMap notice", RELOAD_TIMEOUT, |r| !r.is_empty()).await.unwrap();
    let latency = started.elapsed();
    let notice = &received[0];
    assert_eq!((notice.method.as_str(), notice.path.as_str()), ("POST", "/hook"));
    let body = notice.json().unwrap_or_else(|| panic!("a JSON body: {notice:?}"));
    assert_eq!(body["webhook"], "update successful", "{body}");
    assert_eq!(body["event"], "update", "{body}");
    assert_eq!(
        [&body["kind"], &body["namespace"], &body["name"], &body["hash"]],
        ["ConfigMap", ns.name(), CONFIG, hash.as_str()],
        "{body}"
    );

    hook.fail_next(2, 500);
    let secret_hash = resources.update_data(&secret, &[("password", "two")]).await.unwrap();
    let received =
        hook.wait_for("the Secret notice, three times", RELOAD_TIMEOUT, |r| r.len() >= 4).await.unwrap();
    let statuses: Vec<u16> = received[1..].iter().map(|r| r.status).collect();
    assert_eq!(statuses, [500, 500, 200], "retried until accepted");
    for attempt in &received[1..] {
        let body = attempt.json().unwrap();
        assert_eq!([&body["kind"], &body["name"], &body["hash"]], ["Secret", SECRET, secret_hash.as_str()]);
    }
    web.assert_no_change_for(client, &before, negative_wait(latency)).await;
}

/// E39: with `ALERT_ON_RELOAD=true` each sink gets its own body shape, naming the workload and
/// the resource, after `ALERT_ADDITIONAL_INFO` (exact bodies: notify_parity.rs).
#[tokio::test]
async fn alerts_reach_each_sink_in_its_shape() {
    join_all(["slack", "teams", "gchat", "raw"].map(alert_case)).await;
}

async fn alert_case(sink: &'static str) {
    let env = TestEnv::new().await;
    let TestEnv { plane: _, ns, client, resources, .. } = &env;
    let web = web_with_config(&env, &[]).await;
    let sink_endpoint = HttpRecorder::start().await;
    let info = unique_token("cluster-");
    let _reloader = env
        .reloader_builder()
        .name(format!("reloader-{sink}"))
        .env("ALERT_ON_RELOAD", "true")
        .env("ALERT_WEBHOOK_URL", sink_endpoint.url("/alert"))
        .env("ALERT_SINK", sink)
        .env("ALERT_ADDITIONAL_INFO", &info)
        .start()
        .await
        .unwrap();

    let config = ResourceRef::configmap(CONFIG);
    let hash = resources.update_data(&config, &[("k", "v2")]).await.unwrap();
    web.wait_for_marker(client, &config, Strategy::EnvVars, &hash, RELOAD_TIMEOUT).await.unwrap();
    let alerts =
        sink_endpoint.wait_for(&format!("a {sink} alert"), RELOAD_TIMEOUT, |r| !r.is_empty()).await.unwrap();
    let alert = &alerts[0];
    assert_eq!(alert.method, "POST", "{sink}");
    let text = match sink {
        "slack" => alert_json(alert)["attachments"][0]["text"].as_str().map(str::to_owned),
        "teams" | "gchat" => alert_json(alert)["text"].as_str().map(str::to_owned),
        _ => {
            let content_type = alert.content_type.as_deref().unwrap_or_default();
            assert!(content_type.starts_with("text/plain"), "raw: {alert:?}");
            Some(alert.text())
        }
    };
    let text = text.unwrap_or_else(|| panic!("{sink}: no text where the sink expects it: {}", alert.text()));
    for needle in [ns.name(), "web", "Deployment", CONFIG, "CONFIGMAP", info.as_str()] {
        assert!(text.contains(needle), "{sink}: {needle:?} missing from {text:?}");
    }
    assert!(text.starts_with(&format!("{info} : ")), "{sink}: the additional info goes first: {text:?}");
}

fn alert_json(alert: &RecordedRequest) -> Value {
    let content_type = alert.content_type.as_deref().unwrap_or_default();
    assert!(content_type.starts_with("application/json"), "{alert:?}");
    alert.json().unwrap_or_else(|| panic!("a JSON alert: {}", alert.text()))
}

/// E39: a sink that accepts connections and never answers holds each alert for its full retry
/// cycle (several 10 s timeouts); reloads go on regardless. Three reloads in a row must all land
/// well within one such cycle, which they could not if alerts were sent in the write path.
#[tokio::test]
async fn an_unresponsive_alert_sink_does_not_hold_up_reloads() {
    let env = TestEnv::new().await;
    let TestEnv { plane: _, ns: _, client, resources, .. } = &env;
    let web = web_with_config(&env, &[]).await;
    let black_hole = BlackHole::start().await;
    let _reloader = env
        .reloader_builder()
        .env("ALERT_ON_RELOAD", "true")
        .env("ALERT_WEBHOOK_URL", black_hole.url("/alert"))
        .env("ALERT_SINK", "slack")
        .start()
        .await
        .unwrap();

    let config = ResourceRef::configmap(CONFIG);
    let deadline = Instant::now() + Duration::from_secs(60);
    for round in ["v2", "v3", "v4"] {
        let hash = resources.update_data(&config, &[("k", round)]).await.unwrap();
        let left = deadline.saturating_duration_since(Instant::now());
        web.wait_for_marker(client, &config, Strategy::EnvVars, &hash, left).await.unwrap();
    }
    wait_until("the alert to be attempted", RELOAD_TIMEOUT, || async {
        match black_hole.accepted() {
            0 => Err(NotYet::because("no connection to the sink yet")),
            _ => Ok(()),
        }
    })
    .await
    .unwrap();
}

/// E40: with `RELOADER_NAMESPACE` the meta-info ConfigMap is published there (labelled, three
/// JSON keys); without it, a warning says it is not.
#[tokio::test]
async fn meta_info_configmap_is_published_where_reloader_namespace_points() {
    let env = TestEnv::new().await;
    let TestEnv { plane: _, ns, client, .. } = &env;
    let publishing = env
        .reloader_builder()
        .name("publishing")
        .arg("--reload-strategy=annotations")
        .env("RELOADER_NAMESPACE", ns.name())
        .env("RELOADER_DEPLOYMENT_NAME", "reloader-reloader")
        .start()
        .await
        .unwrap();
    let configmaps: Api<ConfigMap> = ns.api(client);
    let published = wait_until("reloader-meta-info", RELOAD_TIMEOUT, || async {
        configmaps.get_opt("reloader-meta-info").await?.ok_or_else(|| NotYet::because("not there yet"))
    })
    .await
    .unwrap();
    let labels = published.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("reloader.stakater.com/meta-info").map(String::as_str), Some("reloader"));
    let data = published.data.clone().unwrap_or_default();
    let json = |key: &str| -> Value {
        let text = data.get(key).unwrap_or_else(|| panic!("no {key} in {data:?}"));
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{key} is not JSON ({e}): {text}"))
    };
    assert!(json("buildInfo")["releaseVersion"].is_string(), "{data:?}");
    let options = json("reloaderOptions");
    assert_eq!(options["reloadStrategy"], "annotations", "{options}");
    assert_eq!(options["namespaces"], serde_json::json!([ns.name()]), "{options}");
    let deployment = json("deploymentInfo");
    assert_eq!([&deployment["name"], &deployment["namespace"]], ["reloader-reloader", ns.name()]);
    drop(publishing);

    let silent = env.reloader_builder().name("silent").start().await.unwrap();
    let log = silent.log_text();
    assert!(log.contains("RELOADER_NAMESPACE is not set"), "{log}");
}

/// E41: both `reloader_reload_executed_total` series exist from the start, the success one
/// counts every workload write; `/live`, `/healthz`, `/readyz` answer 200 once synced.
#[tokio::test]
async fn metrics_count_each_reload_and_probes_answer() {
    let env = TestEnv::new().await;
    let TestEnv { plane: _, ns, client, resources, .. } = &env;
    let first = web_with_config(&env, &[]).await;
    let second = WorkloadSpec::new(Kind::StatefulSet, "db")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_configmap(CONFIG)
        .create(client, ns.name())
        .await
        .unwrap();
    let reloader = env.reloader_builder().start().await.unwrap();
    for path in ["/live", "/healthz", "/readyz"] {
        assert_eq!(reloader.get(path).await.unwrap(), (200, "ok".to_owned()), "{path}");
    }
    assert_eq!(reloader.get("/nothing-here").await.unwrap().0, 404);
    const SUCCESS: &str = r#"reloader_reload_executed_total{success="true"}"#;
    const FAILURE: &str = r#"reloader_reload_executed_total{success="false"}"#;
    assert_eq!(reloader.metric(SUCCESS).await.unwrap(), Some(0.0));
    assert_eq!(reloader.metric(FAILURE).await.unwrap(), Some(0.0));

    let config = ResourceRef::configmap(CONFIG);
    for (round, expected) in [("v2", 2.0), ("v3", 4.0)] {
        let hash = resources.update_data(&config, &[("k", round)]).await.unwrap();
        for workload in [&first, &second] {
            workload
                .wait_for_marker(client, &config, Strategy::EnvVars, &hash, RELOAD_TIMEOUT)
                .await
                .unwrap();
        }
        let counted = wait_until(&format!("{SUCCESS} = {expected}"), RELOAD_TIMEOUT, || async {
            match reloader.metric(SUCCESS).await? {
                Some(value) if value >= expected => Ok(value),
                other => Err(NotYet::because(format!("{other:?}"))),
            }
        })
        .await
        .unwrap();
        assert_eq!(counted, expected, "one per workload write, no more");
    }
    assert_eq!(reloader.metric(FAILURE).await.unwrap(), Some(0.0));
}

/// E41: `/readyz` stays 503 while the caches cannot sync (an identity without permissions) and
/// turns 200 once they can; `/live` and `/healthz` are 200 throughout.
#[tokio::test]
async fn readyz_waits_for_the_caches_and_live_does_not() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, .. } = &env;
    let account = "unprivileged";
    let kubeconfig = KubeconfigFile::for_service_account(plane, ns.name(), account).await.unwrap();
    let reloader = env
        .reloader_builder()
        .kubeconfig(kubeconfig.path())
        .arg("--is-openshift=false")
        .no_wait()
        .start()
        .await
        .unwrap();
    wait_until("/live to answer", RELOAD_TIMEOUT, || async {
        match reloader.get("/live").await? {
            (200, _) => Ok(()),
            (status, _) => Err(NotYet::because(format!("{status}"))),
        }
    })
    .await
    .unwrap();
    let watch_failed = |log: &str| log.contains("forbidden") || log.contains("Forbidden");
    wait_for_log(&reloader, "a forbidden list in the log", RELOAD_TIMEOUT, watch_failed).await.unwrap();
    for path in ["/readyz", "/live", "/healthz"] {
        let expected = if path == "/readyz" { 503 } else { 200 };
        assert_eq!(reloader.get(path).await.unwrap().0, expected, "{path} without permissions");
    }

    grant_namespaced_reloader_role(client, ns.name(), ns.name(), account).await.unwrap();
    reloader.wait_ready(Duration::from_secs(120)).await.unwrap();
    assert_eq!(reloader.get("/live").await.unwrap().0, 200);
}
