//! docs/tracing.md: each ConfigMap/Secret change is one trace (watch event → decision → write →
//! Event and alert), exported over OTLP as a collector expects (http/protobuf and gRPC, plain and
//! TLS, configured by the standard `OTEL_*` variables); the notifications carry the trace's
//! `traceparent`; no secret value reaches the collector; an unreachable collector costs traces,
//! counted, never reload time.

use std::time::Duration;

use futures::future::join_all;
use reloader_harness::{NotYet, Reloader, ReloaderBuilder, free_port, wait_until};
use reloader_tests::fixtures::*;
use reloader_tests::fixtures_extra::*;
use reloader_tests::otlp::{OtlpReceiver, OtlpTransport, ReceivedSpan, TestCertificates};

const CONFIG: &str = "app-config";
const SECRET: &str = "app-secret";
const RELOAD_TIMEOUT: Duration = Duration::from_secs(60);
/// Spans leave in batches at most a second old; the rest is the machine's load.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(30);

/// `web`, a Deployment with `auto` that takes its environment from `app-config`.
async fn web_with_config(env: &TestEnv<'_>) -> WorkloadId {
    env.resources.create(&ResourceRef::configmap(CONFIG), &[("k", "v1")]).await.unwrap();
    WorkloadSpec::new(Kind::Deployment, "web")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_configmap(CONFIG)
        .create(&env.client, env.ns.name())
        .await
        .unwrap()
}

/// The `OTEL_*` settings that point reloader at `receiver`.
fn exporting_to(
    builder: ReloaderBuilder,
    receiver: &OtlpReceiver,
    transport: OtlpTransport,
) -> ReloaderBuilder {
    let builder = builder
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", transport.protocol());
    match receiver.ca_file() {
        Some(ca) => builder.env("OTEL_EXPORTER_OTLP_CERTIFICATE", ca.display().to_string()),
        None => builder,
    }
}

fn named<'a>(spans: &'a [ReceivedSpan], name: &str) -> Vec<&'a ReceivedSpan> {
    spans.iter().filter(|span| span.name == name).collect()
}

fn only<'a>(
    spans: &'a [ReceivedSpan],
    name: &str,
    matching: impl Fn(&ReceivedSpan) -> bool,
) -> &'a ReceivedSpan {
    let found: Vec<&ReceivedSpan> = named(spans, name).into_iter().filter(|span| matching(span)).collect();
    assert_eq!(found.len(), 1, "one {name} span expected: {found:#?}\nall spans: {spans:#?}");
    found[0]
}

fn assert_child(child: &ReceivedSpan, parent: &ReceivedSpan) {
    assert_eq!(
        (&child.trace_id, &child.parent_span_id),
        (&parent.trace_id, &parent.span_id),
        "{} must be a child of {}:\n{child:#?}\n{parent:#?}",
        child.name,
        parent.name
    );
}

fn assert_attributes(span: &ReceivedSpan, expected: &[(&str, &str)]) {
    for (key, value) in expected {
        assert_eq!(span.attribute(key), Some(*value), "{} {key}: {span:#?}", span.name);
    }
}

/// A ConfigMap change reloads a Deployment; its spans arrive as one trace with the right
/// structure and attributes, over each protocol, plain and TLS. The alert POST carries the
/// `traceparent` of its span; JSON log lines carry the ids of theirs.
#[tokio::test]
async fn a_reload_is_one_trace_over_each_protocol_plain_and_tls() {
    let cases = [
        (OtlpTransport::HttpProtobuf, false),
        (OtlpTransport::HttpProtobuf, true),
        (OtlpTransport::Grpc, false),
        (OtlpTransport::Grpc, true),
    ];
    join_all(cases.map(|(transport, tls)| reload_trace_case(transport, tls))).await;
}

async fn reload_trace_case(transport: OtlpTransport, tls: bool) {
    let case = format!("{} tls={tls}", transport.protocol());
    let env = TestEnv::new().await;
    let TestEnv { plane: _, ns, client, resources, .. } = &env;
    let web = web_with_config(&env).await;
    let receiver = OtlpReceiver::start(transport, tls).await;
    let alerts = HttpRecorder::start().await;
    let service = unique_token("reloader-traces-");
    let builder = env
        .reloader_builder()
        .name(format!("reloader-{}-{tls}", transport.protocol().replace('/', "-")))
        .arg("--log-format=json")
        .env("OTEL_SERVICE_NAME", &service)
        .env("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=behaviour-test")
        .env("ALERT_ON_RELOAD", "true")
        .env("ALERT_SINK", "raw")
        .env("ALERT_WEBHOOK_URL", alerts.url("/alert"));
    let reloader = exporting_to(builder, &receiver, transport).start().await.unwrap();

    let config = ResourceRef::configmap(CONFIG);
    let hash = resources.update_data(&config, &[("k", "v2")]).await.unwrap();
    web.wait_for_marker(client, &config, Strategy::EnvVars, &hash, RELOAD_TIMEOUT).await.unwrap();
    let alert = alerts.wait_for("the alert", RELOAD_TIMEOUT, |r| !r.is_empty()).await.unwrap().remove(0);
    let spans = receiver
        .wait_for(&format!("{case}: the reload's spans"), EXPORT_TIMEOUT, |spans| {
            [
                "reloader.resource_event",
                "reloader.decision",
                "reloader.write",
                "reloader.k8s_event",
                "reloader.notify",
            ]
            .iter()
            .all(|name| !named(spans, name).is_empty())
        })
        .await
        .unwrap();

    let event =
        only(&spans, "reloader.resource_event", |s| s.attribute("reloader.resource.name") == Some(CONFIG));
    assert!(event.parent_span_id.is_empty(), "{case}: the watch event starts the trace: {event:#?}");
    assert_attributes(
        event,
        &[
            ("reloader.resource.kind", "ConfigMap"),
            ("k8s.namespace.name", ns.name()),
            ("reloader.event.type", "update"),
            ("reloader.event.result", "queued"),
        ],
    );
    let decision = only(&spans, "reloader.decision", |s| s.trace_id == event.trace_id);
    assert_child(decision, event);
    assert_attributes(
        decision,
        &[
            ("reloader.workload.kind", "Deployment"),
            ("reloader.workload.name", "web"),
            ("k8s.namespace.name", ns.name()),
            ("reloader.decision.rule", "auto"),
            ("reloader.reload.strategy", "env-vars"),
        ],
    );
    let write = only(&spans, "reloader.write", |s| s.trace_id == event.trace_id);
    assert_child(write, decision);
    assert_attributes(
        write,
        &[
            ("reloader.workload.kind", "Deployment"),
            ("reloader.workload.name", "web"),
            ("reloader.write.verb", "patch"),
            ("http.request.method", "PATCH"),
            ("http.response.status_code", "200"),
            ("reloader.write.retries", "0"),
            ("reloader.write.coalesced_changes", "1"),
            ("reloader.write.outcome", "written"),
        ],
    );
    let k8s_event = only(&spans, "reloader.k8s_event", |s| s.trace_id == event.trace_id);
    assert_child(k8s_event, write);
    assert_attributes(k8s_event, &[("reloader.k8s_event.reason", "Reloaded")]);
    let notify = only(&spans, "reloader.notify", |s| s.trace_id == event.trace_id);
    assert_child(notify, write);
    assert_attributes(
        notify,
        &[
            ("reloader.notify.channel", "alert-raw"),
            ("http.request.method", "POST"),
            ("http.response.status_code", "200"),
        ],
    );
    assert_eq!(
        alert.traceparent.as_deref(),
        Some(format!("00-{}-{}-01", notify.trace_id, notify.span_id).as_str()),
        "{case}: the alert carries its span's trace context"
    );
    assert_eq!(event.resource.get("service.name"), Some(&service), "{case}: OTEL_SERVICE_NAME");
    assert_eq!(
        event.resource.get("deployment.environment.name").map(String::as_str),
        Some("behaviour-test"),
        "{case}: OTEL_RESOURCE_ATTRIBUTES"
    );

    let log = reloader.log_text();
    let reloaded = log
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|line| line["message"] == "reloaded")
        .unwrap_or_else(|| panic!("{case}: no JSON \"reloaded\" line:\n{log}"));
    assert_eq!(reloaded["trace_id"], write.trace_id.as_str(), "{case}: {reloaded}");
    assert_eq!(reloaded["span_id"], write.span_id.as_str(), "{case}: {reloaded}");
}

/// With `--coalesce-period`, two changes make one write: a child of the first change's decision,
/// linked to the second's.
#[tokio::test]
async fn a_coalesced_write_belongs_to_the_first_change_and_links_the_others() {
    let env = TestEnv::new().await;
    let TestEnv { plane: _, ns: _, client, resources, .. } = &env;
    const OTHER: &str = "other-config";
    resources.create(&ResourceRef::configmap(CONFIG), &[("k", "v1")]).await.unwrap();
    resources.create(&ResourceRef::configmap(OTHER), &[("k", "v1")]).await.unwrap();
    let web = WorkloadSpec::new(Kind::Deployment, "web")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_configmap(CONFIG)
        .env_from_configmap(OTHER)
        .create(client, env.ns.name())
        .await
        .unwrap();
    let receiver = OtlpReceiver::start(OtlpTransport::HttpProtobuf, false).await;
    let builder = env.reloader_builder().arg("--coalesce-period=5s");
    let _reloader = exporting_to(builder, &receiver, OtlpTransport::HttpProtobuf).start().await.unwrap();

    let first = resources.update_data(&ResourceRef::configmap(CONFIG), &[("k", "v2")]).await.unwrap();
    let second = resources.update_data(&ResourceRef::configmap(OTHER), &[("k", "v2")]).await.unwrap();
    for (name, hash) in [(CONFIG, &first), (OTHER, &second)] {
        let resource = ResourceRef::configmap(name);
        web.wait_for_marker(client, &resource, Strategy::EnvVars, hash, RELOAD_TIMEOUT).await.unwrap();
    }
    let spans = receiver
        .wait_for("the coalesced write", EXPORT_TIMEOUT, |spans| !named(spans, "reloader.write").is_empty())
        .await
        .unwrap();
    let write = only(&spans, "reloader.write", |_| true);
    assert_attributes(
        write,
        &[("reloader.write.coalesced_changes", "2"), ("reloader.write.outcome", "written")],
    );
    let decision_for = |name: &str| {
        let event =
            only(&spans, "reloader.resource_event", |s| s.attribute("reloader.resource.name") == Some(name));
        only(&spans, "reloader.decision", |s| s.trace_id == event.trace_id)
    };
    let (first_decision, second_decision) = (decision_for(CONFIG), decision_for(OTHER));
    assert_ne!(first_decision.trace_id, second_decision.trace_id, "two changes, two traces");
    assert_child(write, first_decision);
    assert_eq!(
        write.links,
        [(second_decision.trace_id.clone(), second_decision.span_id.clone())],
        "{write:#?}"
    );
}

/// `OTEL_TRACES_SAMPLER=always_off`: the reload happens, no span leaves.
#[tokio::test]
async fn the_sampler_variable_is_honoured() {
    let env = TestEnv::new().await;
    let web = web_with_config(&env).await;
    let receiver = OtlpReceiver::start(OtlpTransport::HttpProtobuf, false).await;
    let builder = env.reloader_builder().env("OTEL_TRACES_SAMPLER", "always_off");
    let _reloader = exporting_to(builder, &receiver, OtlpTransport::HttpProtobuf).start().await.unwrap();

    let config = ResourceRef::configmap(CONFIG);
    let hash = env.resources.update_data(&config, &[("k", "v2")]).await.unwrap();
    web.wait_for_marker(&env.client, &config, Strategy::EnvVars, &hash, RELOAD_TIMEOUT).await.unwrap();
    // Batches leave within a second; a sampled span would be here after three.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(receiver.spans(), [], "nothing sampled, nothing exported");
}

/// The admission webhook's reviews have traces of their own: names, never the object.
#[tokio::test]
async fn an_admission_review_has_its_own_span() {
    let env = TestEnv::new().await;
    let ns = env.ns.name();
    let certs = TestCertificates::generate();
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, &certs.cert).unwrap();
    std::fs::write(&key, &certs.key).unwrap();
    let port = free_port();
    let receiver = OtlpReceiver::start(OtlpTransport::HttpProtobuf, false).await;
    let builder = env.reloader_builder().args([
        "--admission-webhook".to_owned(),
        format!("--webhook-addr=127.0.0.1:{port}"),
        format!("--webhook-tls-cert={}", cert.display()),
        format!("--webhook-tls-key={}", key.display()),
    ]);
    let _reloader = exporting_to(builder, &receiver, OtlpTransport::HttpProtobuf).start().await.unwrap();

    let hidden = unique_token("hidden-env-");
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "0d4a4f3e-0000-4000-8000-000000000001",
            "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
            "name": "web",
            "namespace": ns,
            "operation": "CREATE",
            "userInfo": {"username": "tester"},
            "object": {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web", "namespace": ns},
                "spec": {
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "app", "image": "app", "env": [{"name": "TOKEN", "value": hidden}]}]},
                    },
                },
            },
        },
    });
    let client = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(certs.ca.as_bytes()).unwrap())
        .build()
        .unwrap();
    let url = format!("https://127.0.0.1:{port}/mutate");
    wait_until("the admission webhook's answer", RELOAD_TIMEOUT, || async {
        let response =
            client.post(&url).json(&review).send().await.map_err(|e| NotYet::because(e.to_string()))?;
        match response.status().as_u16() {
            200 => Ok(()),
            status => Err(NotYet::because(format!("HTTP {status}"))),
        }
    })
    .await
    .unwrap();
    let spans = receiver
        .wait_for("the review's span", EXPORT_TIMEOUT, |spans| {
            !named(spans, "reloader.admission_review").is_empty()
        })
        .await
        .unwrap();
    let review = only(&spans, "reloader.admission_review", |_| true);
    assert!(review.parent_span_id.is_empty(), "{review:#?}");
    assert_attributes(
        review,
        &[
            ("reloader.workload.kind", "Deployment"),
            ("k8s.namespace.name", ns),
            ("reloader.workload.name", "web"),
            ("reloader.admission.operation", "CREATE"),
        ],
    );
    assert!(review.attribute("reloader.admission.outcome").is_some(), "{review:#?}");
    let received = receiver.raw_bytes();
    assert!(
        !received.windows(hidden.len()).any(|w| w == hidden.as_bytes()),
        "the object's env reached the collector"
    );
}

/// A Secret change is traced like any other, and no byte the collector receives holds its value
/// (old or new, plain or base64).
#[tokio::test]
async fn a_secret_change_sends_no_secret_value_to_the_collector() {
    let env = TestEnv::new().await;
    let TestEnv { plane: _, ns: _, client, resources, .. } = &env;
    let (old, new) = (unique_token("old-password-"), unique_token("new-password-"));
    let secret = ResourceRef::secret(SECRET);
    resources.create(&secret, &[("password", &old)]).await.unwrap();
    let web = WorkloadSpec::new(Kind::Deployment, "web")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_secret(SECRET)
        .create(client, env.ns.name())
        .await
        .unwrap();
    let receiver = OtlpReceiver::start(OtlpTransport::HttpProtobuf, false).await;
    let _reloader =
        exporting_to(env.reloader_builder(), &receiver, OtlpTransport::HttpProtobuf).start().await.unwrap();

    let hash = resources.update_data(&secret, &[("password", &new)]).await.unwrap();
    web.wait_for_marker(client, &secret, Strategy::EnvVars, &hash, RELOAD_TIMEOUT).await.unwrap();
    let spans = receiver
        .wait_for("the Secret reload's write span", EXPORT_TIMEOUT, |spans| {
            named(spans, "reloader.write")
                .iter()
                .any(|s| s.attribute("reloader.write.outcome") == Some("written"))
        })
        .await
        .unwrap();
    let event =
        only(&spans, "reloader.resource_event", |s| s.attribute("reloader.resource.name") == Some(SECRET));
    assert_eq!(event.attribute("reloader.resource.kind"), Some("Secret"));
    // The catch-up sweep of the leadership this replica took at start has a trace of its own.
    let sweep = only(&spans, "reloader.catch_up", |_| true);
    assert!(sweep.parent_span_id.is_empty(), "{sweep:#?}");
    assert_attributes(sweep, &[("reloader.catch_up.queued", "0"), ("reloader.catch_up.replayed", "0")]);

    let received = receiver.raw_bytes();
    assert!(!received.is_empty());
    use base64::Engine as _;
    for value in [&old, &new] {
        for form in [value.clone(), base64::engine::general_purpose::STANDARD.encode(value)] {
            let found = received.windows(form.len()).any(|window| window == form.as_bytes());
            assert!(!found, "the collector received a secret value ({form:?})");
        }
    }
}

/// `--webhook-url` mode: the POST carries the `traceparent` of its span, a child of the watch
/// event's, in the trace the collector receives.
#[tokio::test]
async fn webhook_posts_carry_the_trace_of_their_change() {
    let env = TestEnv::new().await;
    let TestEnv { resources, .. } = &env;
    env.resources.create(&ResourceRef::configmap(CONFIG), &[("k", "v1")]).await.unwrap();
    let receiver = OtlpReceiver::start(OtlpTransport::HttpProtobuf, false).await;
    let hook = HttpRecorder::start().await;
    let builder = env.reloader_builder().arg(format!("--webhook-url={}", hook.url("/hook")));
    let _reloader = exporting_to(builder, &receiver, OtlpTransport::HttpProtobuf).start().await.unwrap();

    resources.update_data(&ResourceRef::configmap(CONFIG), &[("k", "v2")]).await.unwrap();
    let post = hook.wait_for("the webhook POST", RELOAD_TIMEOUT, |r| !r.is_empty()).await.unwrap().remove(0);
    let spans = receiver
        .wait_for("the webhook span", EXPORT_TIMEOUT, |spans| !named(spans, "reloader.notify").is_empty())
        .await
        .unwrap();
    let event =
        only(&spans, "reloader.resource_event", |s| s.attribute("reloader.resource.name") == Some(CONFIG));
    assert_eq!(event.attribute("reloader.event.result"), Some("webhook"));
    let notify = only(&spans, "reloader.notify", |_| true);
    assert_child(notify, event);
    assert_attributes(
        notify,
        &[("reloader.notify.channel", "webhook"), ("http.response.status_code", "200")],
    );
    assert_eq!(post.traceparent, Some(format!("00-{}-{}-01", notify.trace_id, notify.span_id)));
}

/// A collector that accepts connections and never answers: reloads take no longer than without
/// any collector (a generous bound: an export stuck in the write path would add its full
/// timeout), and the spans lost are counted in `reloader_trace_spans_dropped_total`.
#[tokio::test]
async fn an_unreachable_collector_neither_delays_reloads_nor_goes_uncounted() {
    let (baseline, with_black_hole) = futures::join!(reload_latencies(None), async {
        let black_hole = BlackHole::start().await;
        reload_latencies(Some(black_hole)).await
    });
    let slowest_baseline = baseline.iter().max().copied().unwrap_or_default();
    for latency in with_black_hole {
        assert!(
            latency <= slowest_baseline * 4 + Duration::from_secs(5),
            "a reload took {latency:?} with an unanswering collector; without one: {baseline:?}"
        );
    }
}

/// Three reloads in a row, with or without an unanswering collector; their latencies. With the
/// collector, also waits for the dropped spans to be counted.
async fn reload_latencies(black_hole: Option<BlackHole>) -> Vec<Duration> {
    let env = TestEnv::new().await;
    let TestEnv { plane: _, ns: _, client, resources, .. } = &env;
    let web = web_with_config(&env).await;
    let mut builder = env.reloader_builder().name(format!("reloader-collector-{}", black_hole.is_some()));
    if let Some(black_hole) = &black_hole {
        builder = builder.env("OTEL_EXPORTER_OTLP_ENDPOINT", black_hole.url(""));
    }
    let reloader = builder.start().await.unwrap();
    let config = ResourceRef::configmap(CONFIG);
    let mut latencies = Vec::new();
    for round in ["v2", "v3", "v4"] {
        let hash = resources.update_data(&config, &[("k", round)]).await.unwrap();
        latencies.push(
            web.wait_for_marker(client, &config, Strategy::EnvVars, &hash, RELOAD_TIMEOUT).await.unwrap(),
        );
    }
    if let Some(black_hole) = &black_hole {
        // Each export waits out its timeout (10 s) before its spans count as dropped.
        wait_until("the dropped spans to be counted", Duration::from_secs(90), || dropped_spans(&reloader))
            .await
            .unwrap();
        assert!(black_hole.accepted() > 0, "the exporter did try the collector");
    }
    latencies
}

async fn dropped_spans(reloader: &Reloader) -> Result<f64, NotYet> {
    let (_, metrics) = reloader.get("/metrics").await.map_err(|e| NotYet::because(e.to_string()))?;
    let dropped: f64 = metrics
        .lines()
        .filter(|line| line.starts_with("reloader_trace_spans_dropped_total{"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    if dropped > 0.0 { Ok(dropped) } else { Err(NotYet::because(format!("no drop counted yet:\n{metrics}"))) }
}
