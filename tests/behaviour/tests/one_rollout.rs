//! One rollout per release (docs/beyond-stakater.md §11, Stakater issue 992) on the real
//! control plane: kube-controller-manager turns every template change into a ReplicaSet, so
//! rollouts are counted in new ReplicaSets.
//!
//! A release changes a Deployment's template and the ConfigMap it uses, as
//!
//! - `helm upgrade` of a real chart (tests/behaviour/testdata/one-rollout; Helm always writes
//!   ConfigMaps before Deployments);
//! - one server-side apply of both objects, back to back, in either order;
//! - two server-side applies 500 ms apart, in either order.
//!
//! Each ordering is measured with the admission webhook and `--coalesce-period=2s`, and without
//! the webhook, and the counts are asserted against the table in docs/beyond-stakater.md §11.
//! The server-side applies also carry a key filter (`configmap-keys`), so the webhook's hash
//! and the controller's agree on filtered references too.
//!
//! With the webhook, the controller's spans go to an OTLP receiver: the trace of a
//! ConfigMap-first release shows the held write finding the marker the webhook stamped and
//! writing nothing (docs/beyond-stakater.md §11 shows one).
//!
//! Build the binary first: `cargo build -p reloader-cli`.

#[path = "support/webhook.rs"]
#[allow(dead_code)]
mod webhook;

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use reloader_harness::{ControlPlane, NotYet, Reloader, free_port, wait_until};
use reloader_tests::fixtures::{
    ResourceKind, TestEnv, expected_env_var, filtered_hash, stakater_hash_configmap,
};
use reloader_tests::otlp::{OtlpReceiver, OtlpTransport, ReceivedSpan};
use serde_json::{Value, json};
use webhook::{Registration, certificates, start_reloader, webhook_args};

const COALESCE: &str = "--coalesce-period=2s";
const SETTLE_TIMEOUT: Duration = Duration::from_secs(90);
/// After the marker is current: the coalescing window and a late second write would show within.
const QUIET: Duration = Duration::from_secs(6);
const APPLIER: &str = "gitops";
const CM_KEYS: &str = "reloader.stakater.com/configmap-keys";
/// Spans leave in batches at most a second old; the rest is the machine's load.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    ConfigMapFirst,
    DeploymentFirst,
}

/// How a release reaches the API server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    Helm,
    OneApply(Order),
    TwoApplies(Order),
}

impl Delivery {
    /// The deliveries whose ConfigMap reaches the API server before the Deployment.
    fn configmap_first(self) -> bool {
        matches!(
            self,
            Delivery::Helm
                | Delivery::OneApply(Order::ConfigMapFirst)
                | Delivery::TwoApplies(Order::ConfigMapFirst)
        )
    }

    const ALL: [Delivery; 5] = [
        Delivery::Helm,
        Delivery::OneApply(Order::ConfigMapFirst),
        Delivery::OneApply(Order::DeploymentFirst),
        Delivery::TwoApplies(Order::ConfigMapFirst),
        Delivery::TwoApplies(Order::DeploymentFirst),
    ];

    fn name(self) -> &'static str {
        match self {
            Delivery::Helm => "helm",
            Delivery::OneApply(Order::ConfigMapFirst) => "one-apply-cm-first",
            Delivery::OneApply(Order::DeploymentFirst) => "one-apply-deploy-first",
            Delivery::TwoApplies(Order::ConfigMapFirst) => "two-applies-cm-first",
            Delivery::TwoApplies(Order::DeploymentFirst) => "two-applies-deploy-first",
        }
    }

    /// The marker a release records: the chart's ConfigMap is unfiltered, the applied
    /// Deployments filter their ConfigMap to the key `release`.
    fn marker(self, release: &str) -> String {
        match self {
            Delivery::Helm => stakater_hash_configmap(&[("release".to_owned(), release.to_owned())].into()),
            _ => filtered_hash(&[("release", release)]),
        }
    }
}

fn configmap(name: &str, release: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("{name}-config")},
        // `other` never changes: outside the filter, it must not matter.
        "data": {"release": release, "other": "constant"},
    })
}

fn deployment(name: &str, release: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "annotations": {
            "reloader.stakater.com/auto": "true",
            CM_KEYS: format!("{name}-config=release"),
        }},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{
                        "name": "app", "image": "registry.k8s.io/pause:3.10",
                        "env": [{"name": "RELEASE", "value": release}],
                        "envFrom": [{"configMapRef": {"name": format!("{name}-config")}}],
                    }],
                },
            },
        },
    })
}

async fn apply_configmap(client: &Client, namespace: &str, name: &str, release: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let params = PatchParams::apply(APPLIER).force();
    api.patch(&format!("{name}-config"), &params, &Patch::Apply(configmap(name, release))).await.unwrap();
}

async fn apply_deployment(client: &Client, namespace: &str, name: &str, release: &str) {
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let params = PatchParams::apply(APPLIER).force();
    api.patch(name, &params, &Patch::Apply(deployment(name, release))).await.unwrap();
}

async fn helm_upgrade(plane: &ControlPlane, namespace: &str, name: &str, release: &str) {
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/one-rollout");
    let output = tokio::process::Command::new(&plane.binaries().helm)
        .args(["upgrade", "--install", name])
        .arg(&chart)
        .args(["--namespace", namespace, "--set", &format!("release={release}")])
        .arg("--kubeconfig")
        .arg(plane.kubeconfig_path())
        .env("HELM_CACHE_HOME", std::env::temp_dir().join("one-rollout-helm"))
        .env("HELM_CONFIG_HOME", std::env::temp_dir().join("one-rollout-helm"))
        .env("HELM_DATA_HOME", std::env::temp_dir().join("one-rollout-helm"))
        .output()
        .await
        .expect("running helm");
    assert!(output.status.success(), "helm upgrade: {}", String::from_utf8_lossy(&output.stderr));
}

/// Sends release `release` of `delivery` to the API server.
async fn deliver(plane: &ControlPlane, client: &Client, namespace: &str, delivery: Delivery, release: &str) {
    let name = delivery.name();
    let gap = match delivery {
        Delivery::Helm => return helm_upgrade(plane, namespace, name, release).await,
        Delivery::OneApply(_) => Duration::ZERO,
        Delivery::TwoApplies(_) => Duration::from_millis(500),
    };
    let (Delivery::OneApply(order) | Delivery::TwoApplies(order)) = delivery else { unreachable!() };
    match order {
        Order::ConfigMapFirst => {
            apply_configmap(client, namespace, name, release).await;
            tokio::time::sleep(gap).await;
            apply_deployment(client, namespace, name, release).await;
        }
        Order::DeploymentFirst => {
            apply_deployment(client, namespace, name, release).await;
            tokio::time::sleep(gap).await;
            apply_configmap(client, namespace, name, release).await;
        }
    }
}

/// The Deployment's marker and owned ReplicaSets, once its controller observed its generation.
async fn state(client: &Client, namespace: &str, name: &str) -> Result<(Option<String>, usize), NotYet> {
    let deployment = Api::<Deployment>::namespaced(client.clone(), namespace).get(name).await?;
    let generation = deployment.metadata.generation.unwrap_or_default();
    let observed = deployment.status.as_ref().and_then(|s| s.observed_generation).unwrap_or_default();
    if observed < generation {
        return Err(NotYet::because(format!("observed generation {observed} < {generation}")));
    }
    let marker_name = expected_env_var(ResourceKind::ConfigMap, &format!("{name}-config"));
    let containers = deployment.spec.as_ref().and_then(|s| s.template.spec.as_ref()).map(|s| &s.containers);
    let marker = containers
        .into_iter()
        .flatten()
        .flat_map(|c| c.env.iter().flatten())
        .find(|e| e.name == marker_name)
        .and_then(|e| e.value.clone());
    let uid = deployment.metadata.uid.as_deref();
    let replica_sets = Api::<ReplicaSet>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().labels(&format!("app={name}")))
        .await?
        .items
        .iter()
        .filter(|rs| rs.metadata.owner_references.iter().flatten().any(|o| Some(o.uid.as_str()) == uid))
        .count();
    Ok((marker, replica_sets))
}

/// Waits until the Deployment records `marker` (any marker when `None`) and is observed,
/// stays quiet for [`QUIET`], and returns its ReplicaSet count.
async fn settled(client: &Client, namespace: &str, name: &str, marker: Option<&str>) -> usize {
    let what = format!("{name} to record {marker:?}");
    wait_until(&what, SETTLE_TIMEOUT, || async {
        match state(client, namespace, name).await? {
            (found, count) if count > 0 && (marker.is_none() || found.as_deref() == marker) => Ok(()),
            other => Err(NotYet(format!("{other:?}"))),
        }
    })
    .await
    .unwrap();
    tokio::time::sleep(QUIET).await;
    let (found, count) =
        wait_until("the Deployment to be observed", SETTLE_TIMEOUT, || state(client, namespace, name))
            .await
            .unwrap();
    if let Some(marker) = marker {
        assert_eq!(found.as_deref(), Some(marker), "{name}: the marker stays current");
    }
    count
}

/// Installs release 1, upgrades to release 2, and returns how many ReplicaSets the upgrade made.
async fn rollouts_of_one_release(
    plane: &ControlPlane,
    client: &Client,
    namespace: &str,
    delivery: Delivery,
) -> usize {
    let name = delivery.name();
    deliver(plane, client, namespace, delivery, "1").await;
    let before = settled(client, namespace, name, None).await;
    let started = Instant::now();
    deliver(plane, client, namespace, delivery, "2").await;
    let after = settled(client, namespace, name, Some(&delivery.marker("2"))).await;
    eprintln!("{name}: {before} -> {after} ReplicaSets ({:?})", started.elapsed());
    after - before
}

/// A dry-run create is stamped once the API server calls the webhook.
async fn wait_webhook_active(client: &Client, namespace: &str) {
    apply_configmap(client, namespace, "probe", "1").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let probe: Deployment = serde_json::from_value(deployment("probe", "1")).unwrap();
    wait_until("the API server to call the webhook", SETTLE_TIMEOUT, || async {
        let created = deployments.create(&PostParams { dry_run: true, field_manager: None }, &probe).await?;
        let env = created
            .spec
            .and_then(|s| s.template.spec)
            .map(|s| s.containers[0].env.clone().unwrap_or_default());
        if env.unwrap_or_default().iter().any(|e| e.name.starts_with("STAKATER_")) {
            Ok(())
        } else {
            Err(NotYet::because("not stamped yet"))
        }
    })
    .await
    .unwrap();
}

/// What a run measured: the new ReplicaSets per delivery, and the controller's writes and
/// writes found unnecessary when made (the markers already current).
#[derive(Debug)]
struct Measured {
    counts: Vec<(Delivery, usize)>,
    writes: f64,
    already_current: f64,
}

/// Measures every delivery; with the webhook, the controller exports its spans to `traces`.
async fn measure(env: &TestEnv<'_>, with_webhook: bool, traces: Option<&OtlpReceiver>) -> Measured {
    let TestEnv { plane, ns, client, .. } = env;
    let namespace = ns.name();
    let certs = certificates();
    let port = free_port();
    let mut args = vec![format!("--namespaces={namespace}"), COALESCE.to_owned()];
    let mut registration = None;
    if with_webhook {
        args = webhook_args(namespace, port, &certs);
        args.push(COALESCE.to_owned());
    }
    let name = format!("reloader-one-rollout-{with_webhook}");
    let reloader = match traces {
        Some(receiver) => Reloader::builder(plane)
            .name(name)
            .args(args)
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", OtlpTransport::HttpProtobuf.protocol())
            .start()
            .await
            .expect("reloader starts"),
        None => start_reloader(plane, &name, &args).await,
    };
    if with_webhook {
        registration = Some(Registration::create(plane, namespace, port, &certs.ca_pem).await);
        wait_webhook_active(client, namespace).await;
    }
    let mut counts = Vec::new();
    for delivery in Delivery::ALL {
        counts.push((delivery, rollouts_of_one_release(plane, client, namespace, delivery).await));
    }
    if let Some(registration) = registration {
        registration.delete().await;
    }
    let sample = |s: &'static str| {
        let reloader = &reloader;
        async move { reloader.metric(s).await.unwrap().unwrap_or_default() }
    };
    let measured = Measured {
        counts,
        writes: sample(r#"reloader_action_total{workload_kind="Deployment",result="success"}"#).await,
        already_current: sample(r#"reloader_skip_reasons_total{reason="already_current"}"#).await,
    };
    // What the controller did, for the record (docs/beyond-stakater.md §11).
    for line in reloader.log_text().lines().filter(|l| l.contains("-first") || l.contains("helm")) {
        eprintln!("reloader log: {line}");
    }
    measured
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_webhook_a_release_rolls_once_whatever_the_order() {
    // Each template change is held for the window, so every ordering is one rollout.
    let env = TestEnv::new().await;
    let receiver = OtlpReceiver::start(OtlpTransport::HttpProtobuf, false).await;
    let measured = measure(&env, true, Some(&receiver)).await;
    eprintln!("with the webhook and {COALESCE}: {measured:?}");
    // docs/beyond-stakater.md §11.
    let expected: Vec<(Delivery, usize)> = Delivery::ALL.into_iter().map(|d| (d, 1)).collect();
    assert_eq!(measured.counts, expected);
    // The controller wrote markers only for the two Deployment-first releases (while the
    // webhook held them paused); the three others' held writes found the markers the webhook
    // had refreshed, and wrote nothing.
    assert_eq!(measured.writes, 2.0, "{measured:?}");
    assert!(measured.already_current >= 3.0, "{measured:?}");
    for delivery in Delivery::ALL.into_iter().filter(|d| d.configmap_first()) {
        the_trace_shows_the_stamp_made_the_write_unneeded(&receiver, env.ns.name(), delivery).await;
    }
}

/// The release-2 ConfigMap update of a ConfigMap-first `delivery` is one trace: its event, the
/// decision to reload, and a write that found the marker current (the webhook had stamped it
/// while the write was held) and wrote nothing. The webhook's review of the Deployment update
/// is a trace of its own, whose outcome is `patched`.
async fn the_trace_shows_the_stamp_made_the_write_unneeded(
    receiver: &OtlpReceiver,
    namespace: &str,
    delivery: Delivery,
) {
    let name = delivery.name();
    let config = format!("{name}-config");
    let is_update = |s: &ReceivedSpan| {
        s.name == "reloader.resource_event"
            && s.attribute("reloader.resource.name") == Some(config.as_str())
            && s.attribute("reloader.event.type") == Some("update")
    };
    let spans = receiver
        .wait_for(&format!("{name}: the held write's span"), EXPORT_TIMEOUT, |spans| {
            spans
                .iter()
                .filter(|s| is_update(s))
                .any(|event| spans.iter().any(|s| s.name == "reloader.write" && s.trace_id == event.trace_id))
        })
        .await
        .unwrap();
    let in_trace = |event: &ReceivedSpan, span_name: &str| -> Vec<ReceivedSpan> {
        spans.iter().filter(|s| s.trace_id == event.trace_id && s.name == span_name).cloned().collect()
    };
    // The release-1 update, if any, was not held by a stamp; the release-2 one is the last.
    let event = spans.iter().rfind(|s| is_update(s)).unwrap();
    let decisions = in_trace(event, "reloader.decision");
    let writes = in_trace(event, "reloader.write");
    // The hold's end may join the held write (docs/beyond-stakater.md §11): a span of its own.
    let resumes = in_trace(event, "reloader.resume");
    let trace: Vec<String> = [event.clone()]
        .iter()
        .chain(&decisions)
        .chain(&writes)
        .chain(&resumes)
        .map(|s| format!("{} {:?}", s.name, s.attributes))
        .collect();
    eprintln!("{name}: the ConfigMap update's trace:\n  {}", trace.join("\n  "));
    assert_eq!(event.attribute("reloader.event.result"), Some("queued"), "{name}: {trace:#?}");
    assert!(
        decisions.iter().any(|d| d.attribute("reloader.workload.name") == Some(name)
            && d.parent_span_id == event.span_id),
        "{name}: the decision to reload {name} is a child of the event: {trace:#?}"
    );
    let write = writes
        .iter()
        .find(|w| w.attribute("reloader.workload.name") == Some(name))
        .unwrap_or_else(|| panic!("{name}: no write span for {name}: {trace:#?}"));
    assert_eq!(
        write.attribute("reloader.write.outcome"),
        Some("already_current"),
        "{name}: the held write found the webhook's marker and wrote nothing: {trace:#?}"
    );
    assert_eq!(
        write.attribute("http.response.status_code"),
        None,
        "{name}: no request was answered: {write:#?}"
    );
    let reviews: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|s| {
            s.name == "reloader.admission_review"
                && s.attribute("reloader.workload.name") == Some(name)
                && s.attribute("k8s.namespace.name") == Some(namespace)
                && s.attribute("reloader.admission.operation") == Some("UPDATE")
                && s.attribute("reloader.admission.outcome") == Some("patched")
        })
        .collect();
    assert!(!reviews.is_empty(), "{name}: the webhook's review of the Deployment update stamped it");
    eprintln!("{name}: the webhook's review: {:?}", reviews.last().map(|r| &r.attributes));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_webhook_a_release_rolls_twice() {
    let env = TestEnv::new().await;
    let measured = measure(&env, false, None).await;
    eprintln!("without the webhook, {COALESCE}: {measured:?}");
    let expected: Vec<(Delivery, usize)> = Delivery::ALL.into_iter().map(|d| (d, 2)).collect();
    assert_eq!(measured.counts, expected);
    assert_eq!(measured.writes, 5.0, "one marker write per release: {measured:?}");
}
