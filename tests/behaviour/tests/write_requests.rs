//! What a reload costs the API server (docs/behaviour.md, "What is read before a write"), counted
//! by kube-apiserver itself: `apiserver_request_total{verb,resource}` before and after one reload.
//!
//! The start-up lists nothing: kube-apiserver streams the initial lists (watches with
//! `sendInitialEvents`). A Deployment's reload is one PATCH and no GET or LIST of deployments
//! (the write is built from the index's view); a Rollout's, uncontended, is one request in all (a JSON patch guarded by
//! the view's resourceVersion). The counter has no label for the caller, so each test here has a
//! plane to itself (the shared plane is per process; the other test starts its own), measures
//! one kind at a time, and waits for the reload on reloader's own metrics rather than by reading
//! the workload.
//!
//! A kube-apiserver started with the WatchList feature off refuses streamed lists, as older
//! clusters do: the watches then list in pages, and the reloads are the same.
//!
//! Build the binary first: `cargo build -p reloader-cli`.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::Client;
use reloader_harness::{ControlPlane, NotYet, PlaneOptions, Reloader, wait_until};
use reloader_tests::fixtures::*;

const CONFIG: &str = "app-config";
const TIMEOUT: Duration = Duration::from_secs(60);
/// After the reload: long enough for a late request (a retry, a second write) to be counted.
const QUIET: Duration = Duration::from_secs(3);
/// The one line that says the API server does not stream lists (reloader-cli sources).
const STREAMING_REFUSED: &str = "does not stream lists";
const RELOADED: &str = "reloader_reload_executed_total{success=\"true\"}";

/// Requests on one resource (no subresource) since the API server started, by verb.
async fn requests_by_verb(client: &Client, resource: &str) -> BTreeMap<String, u64> {
    let request = axum::http::Request::get("/metrics").body(Vec::new()).expect("a request");
    let metrics = client.request_text(request).await.expect("kube-apiserver's /metrics");
    let mut counts = BTreeMap::new();
    for line in metrics.lines().filter(|l| l.starts_with("apiserver_request_total{")) {
        let Some((labels, value)) = line.rsplit_once(' ') else { continue };
        if !labels.contains(&format!("resource=\"{resource}\"")) || !labels.contains("subresource=\"\"") {
            continue;
        }
        let Some(verb) = labels.split("verb=\"").nth(1).and_then(|rest| rest.split('"').next()) else {
            continue;
        };
        *counts.entry(verb.to_owned()).or_default() += value.trim().parse::<f64>().unwrap_or_default() as u64;
    }
    counts
}

fn since(after: &BTreeMap<String, u64>, before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(verb, n)| (verb.clone(), n - before.get(verb).copied().unwrap_or_default()))
        .filter(|(_, n)| *n > 0)
        .collect()
}

async fn reloads(reloader: &Reloader) -> f64 {
    reloader.metric(RELOADED).await.expect("reloader's /metrics").unwrap_or_default()
}

/// Updates the ConfigMap once and returns the requests on `resource` the reload that follows made.
async fn one_reload(
    env: &TestEnv<'_>,
    reloader: &Reloader,
    resource: &str,
    value: &str,
) -> BTreeMap<String, u64> {
    let before_reloads = reloads(reloader).await;
    let before = requests_by_verb(&env.client, resource).await;
    env.resources.update_data(&ResourceRef::configmap(CONFIG), &[("k", value)]).await.unwrap();
    wait_until("the reload", TIMEOUT, || async {
        let now = reloads(reloader).await;
        if now > before_reloads { Ok(()) } else { Err(NotYet::because(format!("{now} reloads"))) }
    })
    .await
    .unwrap();
    tokio::time::sleep(QUIET).await;
    since(&requests_by_verb(&env.client, resource).await, &before)
}

/// Waits until the workload is indexed and the rollout of its creation has settled: one reload
/// of it, so the next one is measured on a steady index.
async fn warm_up(env: &TestEnv<'_>, reloader: &Reloader, spec: &WorkloadSpec) {
    spec.create(&env.client, env.ns.name()).await.unwrap();
    tokio::time::sleep(QUIET).await;
    one_reload(env, reloader, spec.kind().as_str(), &format!("warm-{}", spec.name())).await;
}

#[tokio::test]
async fn start_up_streams_its_lists_and_a_reload_costs_one_patch_and_no_read() {
    // WatchList turned on explicitly: Kubernetes 1.33 has it off by default (the matrix's
    // versions, docs/kubernetes-versions.md), and this test is about the streams.
    let options = PlaneOptions {
        apiserver_args: vec!["--feature-gates=WatchList=true".into()],
        ..PlaneOptions::default()
    };
    let plane =
        ControlPlane::start(options).await.unwrap_or_else(|e| panic!("starting a plane with WatchList: {e}"));
    install_all_crds(&plane).await.expect("installing the CRDs");
    let env = TestEnv::on(&plane).await;
    env.resources.create(&ResourceRef::configmap(CONFIG), &[("k", "v1")]).await.unwrap();
    // `env.reloader` returns once reloader is ready, its caches synced; its watches are counted
    // only when they end, its LISTs at once.
    let before = requests_by_verb(&env.client, "configmaps").await;
    let reloader = env.reloader(Strategy::EnvVars, &[]).await;
    let start_up = since(&requests_by_verb(&env.client, "configmaps").await, &before);
    assert_eq!(start_up.get("LIST"), None, "the initial list is streamed, not paged: {start_up:?}");
    let auto = |kind, name| {
        WorkloadSpec::new(kind, name).metadata_annotation(ANNOTATION_AUTO, "true").env_from_configmap(CONFIG)
    };

    // One kind at a time: each reload below touches only the workload just created.
    let deployment = auto(Kind::Deployment, "web");
    warm_up(&env, &reloader, &deployment).await;
    let requests = one_reload(&env, &reloader, "deployments", "v2").await;
    assert_eq!(requests.get("PATCH"), Some(&1), "one PATCH of the Deployment: {requests:?}");
    for read in ["GET", "LIST"] {
        assert_eq!(requests.get(read), None, "no {read} of deployments: {requests:?}");
    }

    let rollout = auto(Kind::Rollout, "canary");
    warm_up(&env, &reloader, &rollout).await;
    let requests = one_reload(&env, &reloader, "rollouts", "v3").await;
    // Nothing else writes or reads Rollouts here (no Argo controller runs on the plane).
    let non_watch: BTreeMap<_, _> = requests.iter().filter(|(verb, _)| *verb != "WATCH").collect();
    assert_eq!(non_watch, BTreeMap::from([(&"PATCH".to_owned(), &1)]), "one request per write: {requests:?}");
}

#[tokio::test]
async fn without_watch_list_the_start_up_lists_in_pages_and_reloads_the_same() {
    let options = PlaneOptions {
        apiserver_args: vec!["--feature-gates=WatchList=false".into()],
        ..PlaneOptions::api_only()
    };
    let plane = ControlPlane::start(options)
        .await
        .unwrap_or_else(|e| panic!("starting a plane without WatchList: {e}"));
    let env = TestEnv::on(&plane).await;
    let config = ResourceRef::configmap(CONFIG);
    env.resources.create(&config, &[("k", "v1")]).await.unwrap();
    let web = WorkloadSpec::new(Kind::Deployment, "web")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_configmap(CONFIG)
        .create(&env.client, env.ns.name())
        .await
        .unwrap();

    let before = requests_by_verb(&env.client, "configmaps").await;
    // Ready only once every watch has its initial list: a refusal taken for a transient error
    // would retry the stream for ever and never get there.
    let reloader = env.reloader_builder().arg(Strategy::EnvVars.flag()).start().await.unwrap();
    let start_up = since(&requests_by_verb(&env.client, "configmaps").await, &before);
    assert!(start_up.get("LIST").is_some_and(|n| *n >= 1), "the initial list is paged: {start_up:?}");
    let log = reloader.log_text();
    // Every watch falls back (ConfigMaps, Secrets, each workload kind); the operator is told once.
    let told = log.matches(STREAMING_REFUSED).count();
    assert_eq!(told, 1, "the fallback is logged once, not per watch:\n{log}");

    let requests = one_reload(&env, &reloader, "deployments", "v2").await;
    assert_eq!(requests.get("PATCH"), Some(&1), "one PATCH of the Deployment: {requests:?}");
    for read in ["GET", "LIST"] {
        assert_eq!(requests.get(read), None, "no {read} of deployments: {requests:?}");
    }
    assert_eq!(reloads(&reloader).await, 1.0, "one reload");
    // Read only now: the test's own reads would be counted above.
    let v2 = stakater_hash_configmap(&BTreeMap::from([("k".to_owned(), "v2".to_owned())]));
    web.wait_for_marker(&env.client, &config, Strategy::EnvVars, &v2, TIMEOUT).await.unwrap();
}
