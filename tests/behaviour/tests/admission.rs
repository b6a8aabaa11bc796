//! The admission webhook (docs/beyond-stakater.md §3) with the real kube-apiserver calling the real binary
//! over HTTPS on 127.0.0.1, and kube-controller-manager turning template changes into
//! ReplicaSets, so "no flicker" is counted in ReplicaSets and Deployment revisions:
//!
//! - a Deployment reloaded once, re-applied from its original manifest (server-side apply with
//!   force, and a PUT replace), starts no rollout with the webhook; without it the PUT does;
//! - a Deployment created while reloader runs gets its marker stamped, so a ConfigMap change
//!   made while the controller is down is caught up after the restart, exactly once (one
//!   created without the webhook is not);
//! - with the webhook down and `failurePolicy: Ignore`, workload writes still succeed;
//! - with `--webhook-client-ca`, only the API server (presenting its admission client
//!   certificate) is served: a direct call without a certificate, or with one another CA signed,
//!   is refused in the handshake, and a review for a namespace outside the watched scope gets no
//!   marker values (docs/security.md);
//! - with the Job fence registered as the chart does, reloads still recreate a Job and spawn one
//!   from a CronJob, while the controller's own token cannot create a Job that differs from its
//!   origin by more than markers, nor one with no origin (docs/security.md, "Jobs").
//!
//! Build the binary first: `cargo build -p reloader-cli`.

#[path = "support/webhook.rs"]
mod webhook;

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use reloader_harness::{ControlPlane, KubeconfigFile, NotYet, PlaneOptions, Reloader, free_port, wait_until};
use reloader_tests::fixtures::{ResourceRef, Resources, TestEnv, expected_env_var, negative_wait};
use reloader_tests::fixtures_extra::{ApiServerClientCertificate, grant_namespaced_reloader_role};
use serde_json::{Value, json};
use webhook::{Registration, certificates, healthz, start_reloader, swap_file, webhook_args};

const CONFIG: &str = "app-config";
const RELOAD_TIMEOUT: Duration = Duration::from_secs(60);
const ROLLOUT_TIMEOUT: Duration = Duration::from_secs(90);
const REVISION: &str = "deployment.kubernetes.io/revision";
/// The field manager of the "GitOps tool" re-applying manifests.
const APPLIER: &str = "gitops";

// ---------------------------------------------------------------------------------------------
// Workloads and what is observed of them

/// The manifest a GitOps tool would hold: no marker anywhere.
fn manifest(name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "annotations": {"reloader.stakater.com/auto": "true"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{
                    "name": "app",
                    "image": "registry.k8s.io/pause:3.10",
                    "envFrom": [{"configMapRef": {"name": CONFIG}}],
                }]},
            },
        },
    })
}

fn deployment(name: &str) -> Deployment {
    serde_json::from_value(manifest(name)).unwrap()
}

fn marker_name() -> String {
    expected_env_var(reloader_tests::fixtures::ResourceKind::ConfigMap, CONFIG)
}

/// The marker's value in the template, if any.
fn marker_of(deployment: &Deployment) -> Option<String> {
    let template = &deployment.spec.as_ref()?.template;
    let container = template.spec.as_ref()?.containers.first()?;
    container.env.iter().flatten().find(|e| e.name == marker_name()).and_then(|e| e.value.clone())
}

fn revision_of(deployment: &Deployment) -> Option<String> {
    deployment.metadata.annotations.as_ref()?.get(REVISION).cloned()
}

/// The revision, ReplicaSet count and marker of a Deployment, once its controller has observed
/// its latest generation. (Not the generation itself: a PUT that drops the controller's
/// `revision` annotation bumps it without touching the template.)
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rollouts {
    revision: String,
    replica_sets: usize,
    marker: Option<String>,
}

async fn rollouts(client: &Client, namespace: &str, name: &str) -> Result<Rollouts, NotYet> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let deployment = deployments.get(name).await?;
    let generation = deployment.metadata.generation.unwrap_or_default();
    let observed = deployment.status.as_ref().and_then(|s| s.observed_generation).unwrap_or_default();
    if observed < generation {
        return Err(NotYet::because(format!("observed generation {observed} < {generation}")));
    }
    let revision = revision_of(&deployment).ok_or_else(|| NotYet::because("no revision yet"))?;
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), namespace);
    let listed = replica_sets.list(&ListParams::default().labels(&format!("app={name}"))).await?.items;
    let uid = deployment.metadata.uid.as_deref();
    let owned = listed
        .iter()
        .filter(|rs| rs.metadata.owner_references.iter().flatten().any(|o| Some(o.uid.as_str()) == uid))
        .count();
    Ok(Rollouts { revision, replica_sets: owned, marker: marker_of(&deployment) })
}

async fn settled(client: &Client, namespace: &str, name: &str) -> Rollouts {
    wait_until(&format!("{name} observed by its controller"), ROLLOUT_TIMEOUT, || {
        rollouts(client, namespace, name)
    })
    .await
    .unwrap()
}

/// Waits until the Deployment records `hash` and its controller has rolled it; returns the
/// state and how long it took.
async fn wait_reloaded(client: &Client, namespace: &str, name: &str, hash: &str) -> (Rollouts, Duration) {
    let started = Instant::now();
    let state = wait_until(&format!("{name} to record {hash}"), RELOAD_TIMEOUT, || async {
        let state = rollouts(client, namespace, name).await?;
        if state.marker.as_deref() == Some(hash) { Ok(state) } else { Err(NotYet(format!("{state:?}"))) }
    })
    .await
    .unwrap();
    (state, started.elapsed())
}

/// Polls for `duration`, failing at the first observation that differs from `expected`.
async fn assert_stays(
    client: &Client,
    namespace: &str,
    name: &str,
    expected: &Rollouts,
    duration: Duration,
    why: &str,
) {
    let deadline = Instant::now() + duration;
    while Instant::now() < deadline {
        if let Ok(now) = rollouts(client, namespace, name).await {
            assert_eq!(&now, expected, "{why}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A server-side dry-run create of a throwaway Deployment: `Some(marker)` once the webhook is
/// called and stamps it, `None` while it is not (dry runs call webhooks without side effects).
async fn dry_run_marker(client: &Client, namespace: &str) -> Result<Option<String>, NotYet> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let params = PostParams { dry_run: true, field_manager: None };
    let created = deployments.create(&params, &deployment("probe")).await?;
    Ok(marker_of(&created))
}

async fn wait_webhook_active(client: &Client, namespace: &str, hash: &str) -> Duration {
    let started = Instant::now();
    wait_until("the API server to call the webhook", RELOAD_TIMEOUT, || async {
        match dry_run_marker(client, namespace).await? {
            Some(marker) if marker == hash => Ok(()),
            other => Err(NotYet(format!("dry-run create stamped {other:?}"))),
        }
    })
    .await
    .unwrap();
    started.elapsed()
}

async fn wait_webhook_gone(client: &Client, namespace: &str) {
    wait_until("the API server to stop calling the webhook", RELOAD_TIMEOUT, || async {
        match dry_run_marker(client, namespace).await? {
            None => Ok(()),
            Some(marker) => Err(NotYet(format!("dry-run create still stamped {marker}"))),
        }
    })
    .await
    .unwrap();
}

/// The re-applies a GitOps tool does, from the original manifest.
async fn server_side_apply(client: &Client, namespace: &str, name: &str) {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let params = PatchParams::apply(APPLIER).force();
    deployments.patch(name, &params, &Patch::Apply(manifest(name))).await.expect("server-side apply");
}

/// A PUT of the original manifest over the current object; returns the successful request's
/// round trip. Retried on conflict: kube-controller-manager puts back the `revision`
/// annotation a replace drops, as it would behind `kubectl replace`.
async fn replace(client: &Client, namespace: &str, name: &str) -> Duration {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    for _ in 0..20 {
        let current = deployments.get(name).await.unwrap();
        let mut object = deployment(name);
        object.metadata.resource_version = current.metadata.resource_version;
        let started = Instant::now();
        match deployments.replace(name, &PostParams::default(), &object).await {
            Ok(_) => return started.elapsed(),
            Err(kube::Error::Api(e)) if e.code == 409 => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(e) => panic!("replace: {e}"),
        }
    }
    panic!("replace: conflicts 20 times in a row");
}

/// The mean of a histogram from its `_sum` and `_count` samples.
async fn mean_seconds(reloader: &Reloader, histogram: &str) -> Option<(f64, f64)> {
    let sum = reloader.metric(&format!("{histogram}_sum")).await.ok()??;
    let count = reloader.metric(&format!("{histogram}_count")).await.ok()??;
    (count > 0.0).then_some((sum / count, count))
}

// ---------------------------------------------------------------------------------------------
// The tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reapplied_manifest_keeps_the_marker_and_rolls_nothing() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let namespace = ns.name();
    let config = ResourceRef::configmap(CONFIG);
    let first = resources.create(&config, &[("mode", "one")]).await.unwrap();

    let certs = certificates();
    let port = free_port();
    let reloader = start_reloader(plane, "reloader", &webhook_args(namespace, port, &certs)).await;
    let registration = Registration::create(plane, namespace, port, &certs.ca_pem).await;
    wait_webhook_active(client, namespace, &first).await;

    // Created by the GitOps tool: the webhook stamps the current hash.
    server_side_apply(client, namespace, "web").await;
    let created = settled(client, namespace, "web").await;
    assert_eq!(created.marker.as_deref(), Some(first.as_str()), "stamped at creation");
    assert_eq!((created.revision.as_str(), created.replica_sets), ("1", 1));

    // Reloaded once.
    let second = resources.update_data(&config, &[("mode", "two")]).await.unwrap();
    let (reloaded, latency) = wait_reloaded(client, namespace, "web", &second).await;
    let reloaded = wait_until("the reload to roll out", ROLLOUT_TIMEOUT, || async {
        let now = rollouts(client, namespace, "web").await?;
        if now.replica_sets == 2 { Ok(now) } else { Err(NotYet(format!("{now:?}"))) }
    })
    .await
    .unwrap_or(reloaded);
    assert_eq!((reloaded.revision.as_str(), reloaded.replica_sets), ("2", 2), "one reload, one rollout");
    let quiet = negative_wait(latency);

    // Re-applied from the original manifest, which has no marker: nothing rolls.
    server_side_apply(client, namespace, "web").await;
    assert_stays(client, namespace, "web", &reloaded, quiet, "server-side apply with the webhook").await;
    let mut with_webhook = Vec::new();
    for _ in 0..5 {
        with_webhook.push(replace(client, namespace, "web").await);
    }
    assert_stays(client, namespace, "web", &reloaded, quiet, "replace with the webhook").await;
    let patched =
        reloader.metric(r#"reloader_admission_requests_total{operation="UPDATE",result="patched"}"#);
    assert!(patched.await.unwrap().unwrap_or_default() >= 5.0, "every replace was patched by the webhook");
    let reviews = mean_seconds(&reloader, "reloader_admission_duration_seconds").await;

    // The same re-applies without the webhook. Server-side apply keeps the marker anyway: it
    // only removes fields its own manager set, and the marker is never the applier's. A PUT
    // carries the whole object, so it drops the marker and rolls the Deployment.
    registration.delete().await;
    wait_webhook_gone(client, namespace).await;
    server_side_apply(client, namespace, "web").await;
    assert_stays(client, namespace, "web", &reloaded, quiet, "server-side apply without the webhook").await;
    let mut without_webhook = vec![replace(client, namespace, "web").await];
    let rolled = wait_until("the replace without the webhook to roll", ROLLOUT_TIMEOUT, || async {
        let now = rollouts(client, namespace, "web").await?;
        if now.replica_sets > reloaded.replica_sets { Ok(now) } else { Err(NotYet(format!("{now:?}"))) }
    })
    .await
    .unwrap();
    assert_eq!(rolled.marker, None, "the replace dropped the marker");
    assert_eq!((rolled.revision.as_str(), rolled.replica_sets), ("3", 3), "and rolled the Deployment");
    for _ in 0..4 {
        without_webhook.push(replace(client, namespace, "web").await);
    }
    eprintln!(
        "ReplicaSets after the re-applies: {} with the webhook, {} without; webhook review mean and \
         count {reviews:?}; replace round trips with the webhook {with_webhook:?}, without {without_webhook:?}",
        reloaded.replica_sets, rolled.replica_sets
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_made_while_down_is_caught_up_once_thanks_to_the_stamp() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let namespace = ns.name();
    let deployments: Api<Deployment> = ns.api(client);
    let config = ResourceRef::configmap(CONFIG);
    let first = resources.create(&config, &[("mode", "one")]).await.unwrap();

    // Created before the webhook exists: no marker, as with any reloader so far.
    deployments.create(&PostParams::default(), &deployment("unstamped")).await.unwrap();

    let certs = certificates();
    let port = free_port();
    let args = webhook_args(namespace, port, &certs);
    let mut reloader = start_reloader(plane, "reloader-1", &args).await;
    let registration = Registration::create(plane, namespace, port, &certs.ca_pem).await;
    wait_webhook_active(client, namespace, &first).await;
    deployments.create(&PostParams::default(), &deployment("stamped")).await.unwrap();
    let stamped = settled(client, namespace, "stamped").await;
    assert_eq!(stamped.marker.as_deref(), Some(first.as_str()), "stamped at creation");
    let unstamped = settled(client, namespace, "unstamped").await;
    assert_eq!(unstamped.marker, None);

    // The controller goes away; the ConfigMap changes meanwhile.
    reloader.kill();
    let second = resources.update_data(&config, &[("mode", "two")]).await.unwrap();

    // The webhook is down too: with failurePolicy Ignore, workload writes still go through.
    let started = Instant::now();
    let label = json!({"metadata": {"labels": {"touched": "while-down"}}});
    deployments
        .patch("stamped", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .expect("update while down");
    let created_while_down =
        deployments.create(&PostParams::default(), &deployment("created-while-down")).await;
    let unavailable = started.elapsed();
    assert!(created_while_down.is_ok(), "create while the webhook is down: {created_while_down:?}");
    eprintln!("two writes with the webhook down took {unavailable:?}");
    assert_eq!(marker_of(&created_while_down.unwrap()), None, "nobody stamped it");

    // Back up: the stamped Deployment reloads for the change it missed, once.
    let reloader = start_reloader(plane, "reloader-2", &args).await;
    let (caught_up, latency) = wait_reloaded(client, namespace, "stamped", &second).await;
    let caught_up = wait_until("the catch-up to roll out", ROLLOUT_TIMEOUT, || async {
        let now = rollouts(client, namespace, "stamped").await?;
        if now.replica_sets == 2 { Ok(now) } else { Err(NotYet(format!("{now:?}"))) }
    })
    .await
    .unwrap_or(caught_up);
    assert_eq!((caught_up.revision.as_str(), caught_up.replica_sets), ("2", 2));
    eprintln!("caught up {latency:?} after the restart");
    let quiet = negative_wait(latency);
    assert_stays(client, namespace, "stamped", &caught_up, quiet, "reloaded exactly once").await;
    let executed = reloader.metric(r#"reloader_reload_executed_total{success="true"}"#).await.unwrap();
    assert_eq!(executed, Some(1.0), "one write after the restart, for the stamped Deployment only");
    // The unstamped twin never recorded what it ran with, so the missed change stays missed.
    let unstamped_after = settled(client, namespace, "unstamped").await;
    assert_eq!(unstamped_after, unstamped, "without a stamp the change made while down goes unseen");

    registration.delete().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewed_certificate_files_are_served_without_a_restart() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, .. } = &env;
    let certs = certificates();
    let port = free_port();
    let mut reloader = start_reloader(plane, "reloader", &webhook_args(ns.name(), port, &certs)).await;
    let serving =
        wait_until("the webhook to serve /healthz", RELOAD_TIMEOUT, || healthz(port, &certs.ca_pem));
    assert_eq!(serving.await.unwrap(), 200);

    // Renewed by another CA, as when cert-manager re-issues: key first, then certificate.
    let renewed = certificates();
    assert!(healthz(port, &renewed.ca_pem).await.is_err(), "not trusted before the renewal");
    swap_file(&certs.key, &renewed.key_pem);
    swap_file(&certs.cert, &renewed.cert_pem);
    let started = Instant::now();
    let served =
        wait_until("the renewed certificate to be served", RELOAD_TIMEOUT, || healthz(port, &renewed.ca_pem));
    assert_eq!(served.await.unwrap(), 200);
    eprintln!("renewed certificate served {:?} after the files changed", started.elapsed());
    assert!(healthz(port, &certs.ca_pem).await.is_err(), "the old certificate is no longer served");
    assert!(reloader.exit_status().is_none(), "same process, no restart");
}

/// `POST /mutate` of a CREATE review for a Deployment in `namespace`, as `identity` (PEM
/// certificate and key, if any): the response's patch, or the error of a refused connection.
async fn direct_review(
    port: u16,
    ca_pem: &str,
    identity: Option<&str>,
    namespace: &str,
) -> Result<Option<Value>, reqwest::Error> {
    let mut client = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes())?);
    if let Some(identity) = identity {
        client = client.identity(reqwest::Identity::from_pem(identity.as_bytes())?);
    }
    let mut object = manifest("direct");
    object["metadata"]["namespace"] = json!(namespace);
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "00000000-0000-0000-0000-000000000001",
            "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
            "name": "direct", "namespace": namespace, "operation": "CREATE",
            "userInfo": {"username": "someone"}, "object": object,
        },
    });
    let response =
        client.build()?.post(format!("https://127.0.0.1:{port}/mutate")).json(&review).send().await?;
    let answer: Value = response.error_for_status()?.json().await?;
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    Ok(answer["response"].get("patch").filter(|patch| !patch.is_null()).cloned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_client_ca_only_the_api_server_is_answered() {
    let client_certificate = ApiServerClientCertificate::generate();
    let options =
        PlaneOptions { apiserver_args: client_certificate.apiserver_args(), ..PlaneOptions::api_only() };
    let plane = ControlPlane::start(options)
        .await
        .unwrap_or_else(|e| panic!("starting a plane with an admission kubeconfig: {e}"));
    let env = TestEnv::on(&plane).await;
    let TestEnv { ns, client, resources, .. } = &env;
    let namespace = ns.name();
    let config = ResourceRef::configmap(CONFIG);
    let hash = resources.create(&config, &[("password", "hunter2")]).await.unwrap();
    // Another namespace with a ConfigMap of the same name, outside the watched scope.
    let other = plane.namespace().await;
    Resources::new(client, other.name()).create(&config, &[("password", "s3cret")]).await.unwrap();

    let certs = certificates();
    let port = free_port();
    let mut args = webhook_args(namespace, port, &certs);
    args.push(format!("--webhook-client-ca={}", client_certificate.ca.display()));
    let _reloader = start_reloader(&plane, "reloader", &args).await;
    let _registration = Registration::create(&plane, namespace, port, &certs.ca_pem).await;

    // The API server presents its certificate: its reviews are answered and stamp the marker.
    let waited = wait_webhook_active(client, namespace, &hash).await;
    eprintln!("the API server's reviews answered after {waited:?}");

    // Anyone else is refused in the TLS handshake, before a request is read.
    assert!(healthz(port, &certs.ca_pem).await.is_err(), "no client certificate: refused");
    let stranger =
        direct_review(port, &certs.ca_pem, Some(&client_certificate.stranger_pem), namespace).await;
    assert!(stranger.is_err(), "a certificate another CA signed: refused, got {stranger:?}");
    let anonymous = direct_review(port, &certs.ca_pem, None, namespace).await;
    assert!(anonymous.is_err(), "no certificate: refused, got {anonymous:?}");

    // Even with the API server's identity, a namespace outside the scope gets no marker values.
    let apiserver = Some(client_certificate.apiserver_pem.as_str());
    let inside = direct_review(port, &certs.ca_pem, apiserver, namespace).await.expect("answered");
    assert!(inside.is_some(), "the watched namespace is stamped");
    let outside = direct_review(port, &certs.ca_pem, apiserver, other.name()).await.expect("answered");
    assert_eq!(outside, None, "a namespace outside the scope: allowed, no patch");
}

/// How long a create refused with 429 is left retrying.
const RETRIES_GIVEN: Duration = Duration::from_secs(5);

/// A Job for the fence test: `image` in its one container, `env` there (markers or not).
fn job_manifest(name: &str, annotations: Value, owner: Option<Value>, image: &str, env: Value) -> Job {
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations, "labels": {"team": "data"},
            "ownerReferences": owner.map(|o| vec![o])},
        "spec": {"suspend": true, "template": {"metadata": {"labels": {"app": name}}, "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "run", "image": image, "env": env}]}}},
    }))
    .unwrap()
}

fn env_marker(job: &Job) -> Option<String> {
    let containers = &job.spec.as_ref()?.template.spec.as_ref()?.containers;
    let env = containers.first()?.env.as_ref()?;
    env.iter().find(|e| e.name == marker_name()).and_then(|e| e.value.clone())
}

/// The denial of `create`, or a failure if it was allowed.
async fn denied(jobs: &Api<Job>, job: &Job, what: &str) -> kube::core::Status {
    match jobs.create(&PostParams::default(), job).await {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("{what}: the fence must deny it, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_fence_lets_the_controller_create_only_what_a_reload_creates() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let namespace = ns.name();
    let account = "reloader";
    let kubeconfig = KubeconfigFile::for_service_account(plane, namespace, account).await.unwrap();
    grant_namespaced_reloader_role(client, namespace, namespace, account).await.unwrap();
    let own_token =
        Client::try_from(plane.service_account_config(namespace, account).await.unwrap()).unwrap();
    let config = ResourceRef::configmap(CONFIG);
    resources.create(&config, &[("mode", "one")]).await.unwrap();

    let certs = certificates();
    let port = free_port();
    // The fence alone, as the chart runs it by default: no `/mutate`.
    let args = webhook_args(namespace, port, &certs)
        .into_iter()
        .map(|arg| if arg == "--admission-webhook" { "--job-fence".to_owned() } else { arg });
    let reloader = Reloader::builder(plane)
        .name("reloader")
        .kubeconfig(kubeconfig.path())
        .args(args)
        .start()
        .await
        .expect("reloader starts");
    let username = format!("system:serviceaccount:{namespace}:{account}");
    let _fence = Registration::job_fence(plane, namespace, port, &certs.ca_pem, &username).await;
    let own_jobs: Api<Job> = Api::namespaced(own_token.clone(), namespace);
    let stranger = job_manifest("stranger", json!({}), None, "busybox:evil", json!(null));
    // A dry run of a Job with no origin: created until the fence is called, then refused with
    // 429 (its origin may not be seen yet), which the client retries until it gives up.
    let mut probe = stranger.clone();
    (probe.metadata.name, probe.metadata.generate_name) = (None, Some("probe-".into()));
    wait_until("the API server to call the Job fence", RELOAD_TIMEOUT, || async {
        let dry_run = PostParams { dry_run: true, field_manager: None };
        match tokio::time::timeout(RETRIES_GIVEN, own_jobs.create(&dry_run, &probe)).await {
            Ok(Err(kube::Error::Api(status))) if status.message.contains("write fence") => Ok(()),
            Err(_) => Ok(()),
            other => Err(NotYet(format!("a Job with no origin: {other:?}"))),
        }
    })
    .await
    .unwrap();

    // Created by someone else (the test, as admin): not the fence's business.
    let admin_jobs: Api<Job> = Api::namespaced(client.clone(), namespace);
    let watched = json!({"configmap.reloader.stakater.com/reload": CONFIG});
    admin_jobs
        .create(&PostParams::default(), &job_manifest("migrate", watched.clone(), None, "m:1", json!(null)))
        .await
        .unwrap();
    let cron_jobs: Api<CronJob> = Api::namespaced(client.clone(), namespace);
    let cron_job: CronJob = serde_json::from_value(json!({
        "metadata": {"name": "nightly", "annotations": watched},
        "spec": {"schedule": "0 1 1 1 *", "jobTemplate": {
            "metadata": {"labels": {"team": "data"}},
            "spec": {"template": {"metadata": {"labels": {"app": "nightly"}}, "spec": {
                "restartPolicy": "Never", "containers": [{"name": "run", "image": "r:1"}]}}}}},
    }))
    .unwrap();
    let cron_job = cron_jobs.create(&PostParams::default(), &cron_job).await.unwrap();
    let cron_uid = cron_job.metadata.uid.clone().unwrap();
    reloader.wait_ready(Duration::from_secs(60)).await.unwrap();

    // A reload recreates the Job and spawns one from the CronJob, both through the fence.
    let hash = resources.update_data(&config, &[("mode", "two")]).await.unwrap();
    let recreated = wait_until("the Job recreated with its marker", RELOAD_TIMEOUT, || async {
        let job = admin_jobs.get_opt("migrate").await?.ok_or_else(|| NotYet("no Job migrate".into()))?;
        if env_marker(&job).as_deref() == Some(hash.as_str()) {
            Ok(job)
        } else {
            Err(NotYet("no marker yet".into()))
        }
    })
    .await
    .unwrap();
    let spawned = wait_until("a Job spawned from the CronJob", RELOAD_TIMEOUT, || async {
        let jobs = admin_jobs.list(&ListParams::default()).await?;
        jobs.items
            .into_iter()
            .find(|j| j.metadata.name.as_deref().is_some_and(|n| n.starts_with("nightly-")))
            .filter(|j| env_marker(j).as_deref() == Some(hash.as_str()))
            .ok_or_else(|| NotYet("no spawned Job with the marker".into()))
    })
    .await
    .unwrap();
    let allowed =
        reloader.metric(r#"reloader_admission_requests_total{operation="CREATE",result="allowed"}"#);
    assert!(allowed.await.unwrap().unwrap_or_default() >= 2.0, "both creations went through the fence");

    // The controller's own token: a Job differing from its origin, or with none, is refused.
    let marker = json!([{"name": marker_name(), "value": hash}]);
    let owner = |uid: &str| json!({"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly", "uid": uid, "controller": true});
    let mut tampered_spawn =
        job_manifest("nightly-evil", json!({}), Some(owner(&cron_uid)), "busybox:evil", marker.clone());
    tampered_spawn.metadata.labels = spawned.metadata.labels.clone();
    let status = denied(&own_jobs, &tampered_spawn, "a spawn with another image").await;
    assert_eq!(status.code, 403, "{status:?}");
    assert!(status.message.contains("differs from the jobTemplate"), "{status:?}");
    let fake_owner = job_manifest("nightly-fake", json!({}), Some(owner("not-a-uid")), "r:1", marker.clone());
    assert_eq!(denied(&own_jobs, &fake_owner, "a spawn from a CronJob that is not there").await.code, 403);
    // No origin under that name: 429 (the origin may not be seen yet), which the client retries
    // until it gives up; never created.
    let attempt =
        tokio::time::timeout(RETRIES_GIVEN, own_jobs.create(&PostParams::default(), &stranger)).await;
    assert!(!matches!(attempt, Ok(Ok(_))), "a Job with no origin must be refused, got {attempt:?}");
    assert!(admin_jobs.get_opt("stranger").await.unwrap().is_none(), "a Job with no origin was created");

    // Deleted (the token may), then recreated with another image or a plain env var: refused.
    own_jobs.delete("migrate", &Default::default()).await.unwrap();
    wait_until("the Job to be gone", RELOAD_TIMEOUT, || async {
        match admin_jobs.get_opt("migrate").await? {
            None => Ok(()),
            Some(_) => Err(NotYet("still there".into())),
        }
    })
    .await
    .unwrap();
    let watched = json!({"configmap.reloader.stakater.com/reload": CONFIG});
    for (what, image, env) in [
        ("another image", "busybox:evil", marker.clone()),
        ("a plain env var", "m:1", json!([{"name": "MODE", "value": "debug"}])),
    ] {
        let status =
            denied(&own_jobs, &job_manifest("migrate", watched.clone(), None, image, env), what).await;
        assert_eq!(status.code, 403, "{what}: {status:?}");
        assert!(status.message.contains("differs from"), "{what}: {status:?}");
    }
    assert!(admin_jobs.get_opt("migrate").await.unwrap().is_none(), "nothing was created");
    // As it was, markers aside: allowed (what a reload does).
    let mut as_it_was = recreated.clone();
    as_it_was.metadata = kube::api::ObjectMeta {
        name: recreated.metadata.name.clone(),
        labels: recreated.metadata.labels.clone(),
        annotations: recreated.metadata.annotations.clone(),
        ..Default::default()
    };
    let spec = as_it_was.spec.as_mut().unwrap();
    spec.selector = None;
    if let Some(labels) = spec.template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.retain(|k, _| !k.contains("controller-uid") && !k.contains("job-name"));
    }
    if let Some(labels) = as_it_was.metadata.labels.as_mut() {
        labels.retain(|k, _| !k.contains("controller-uid") && !k.contains("job-name"));
    }
    as_it_was.status = None;
    own_jobs.create(&PostParams::default(), &as_it_was).await.expect("the same Job again is allowed");
    let denials = reloader.metric(r#"reloader_admission_requests_total{operation="CREATE",result="denied"}"#);
    assert!(denials.await.unwrap().unwrap_or_default() >= 5.0, "each refusal counted");
    // Served for the fence alone, it answers no `/mutate` (the hashes of a namespace's Secrets).
    let mutate = direct_review(port, &certs.ca_pem, None, namespace).await;
    assert_eq!(
        mutate.expect_err("no /mutate with --job-fence alone").status(),
        Some(reqwest::StatusCode::NOT_FOUND)
    );
}
