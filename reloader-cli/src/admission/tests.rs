//! The `/mutate` handler with hostile bodies: each is answered (a review, 400 or 413), counted
//! by reason, and a body over the limit is refused however it is sent.

use std::sync::{Arc, RwLock};

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use reloader_core::annotations::AnnotationKeys;
use reloader_core::decide::DecideOptions;
use reloader_core::index::Index;
use reloader_core::model::WorkloadKind;
use reloader_core::options::NamespaceScope;
use serde_json::{Value, json};

use super::intake::MAX_REVIEW_BYTES;
use super::intake::tests as intake_tests;
use super::{AdmissionState, mutate};
use crate::kinds::EnabledKinds;
use crate::observe::metrics::Metrics;
use crate::scope::ScopeFilter;

/// The state, and the registry its metrics are registered on.
fn state_with_metrics() -> (Arc<AdmissionState>, Arc<Metrics>) {
    let metrics = Metrics::new(false);
    let state = Arc::new(AdmissionState {
        index: Arc::new(RwLock::new(Index::default())),
        keys: AnnotationKeys::default(),
        decide: DecideOptions::default(),
        dry_run: false,
        scope: ScopeFilter::new(&NamespaceScope::All { ignore: Vec::new(), selector: None }),
        kinds: EnabledKinds::of(&WorkloadKind::ALL),
        metrics: metrics.admission(),
        hold: std::time::Duration::ZERO,
        origins: Default::default(),
    });
    (state, metrics)
}

/// The intake tests' review, about `group`/`kind`.
fn review(group: &str, kind: &str) -> Value {
    let mut review = intake_tests::review(intake_tests::request());
    review["request"]["kind"] = json!({"group": group, "version": "v1", "kind": kind});
    review["request"]["object"]["kind"] = json!(kind);
    review
}

async fn post(ctx: &Arc<AdmissionState>, headers: HeaderMap, body: Body) -> (StatusCode, Value) {
    let response: Response = mutate(axum::extract::State(ctx.clone()), headers, body).await;
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    (
        status,
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into())),
    )
}

/// `reloader_admission_rejected_total{reason}`; a series not exposed fails the test.
fn rejected(metrics: &Metrics, reason: &str) -> u64 {
    let text = metrics.encode();
    let sample = format!("reloader_admission_rejected_total{{reason=\"{reason}\"}} ");
    let value = text.lines().find_map(|line| line.strip_prefix(&sample));
    value.unwrap_or_else(|| panic!("no series {sample}in /metrics:\n{text}")).trim().parse().unwrap()
}

#[tokio::test]
async fn hostile_bodies_are_answered_and_counted_by_reason() {
    let (ctx, metrics) = state_with_metrics();
    let json = |value: &Value| Body::from(serde_json::to_vec(value).unwrap());
    let mut wrong_version = review("apps", "Deployment");
    wrong_version["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let mut no_uid = review("apps", "Deployment");
    no_uid["request"].as_object_mut().unwrap().remove("uid");
    let cases: Vec<(&str, Body, StatusCode)> = vec![
        ("garbage", Body::from("\u{0}{{{ not json"), StatusCode::BAD_REQUEST),
        (
            "truncated",
            Body::from(r#"{"apiVersion":"admission.k8s.io/v1","kind":"Admission"#),
            StatusCode::BAD_REQUEST,
        ),
        ("wrong version", json(&wrong_version), StatusCode::BAD_REQUEST),
        ("no uid", json(&no_uid), StatusCode::BAD_REQUEST),
        ("over the limit", Body::from(vec![b' '; MAX_REVIEW_BYTES + 1]), StatusCode::PAYLOAD_TOO_LARGE),
        // A kind that is no workload: allowed unchanged, as every review is.
        ("a Pod", json(&review("", "Pod")), StatusCode::OK),
        ("a Deployment", json(&review("apps", "Deployment")), StatusCode::OK),
    ];
    for (what, body, expected) in cases {
        let (status, answer) = post(&ctx, HeaderMap::new(), body).await;
        assert_eq!(status, expected, "{what}: {answer}");
        if status == StatusCode::OK {
            assert_eq!(answer["kind"], "AdmissionReview", "{what}");
            assert_eq!(answer["response"]["uid"], intake_tests::request()["uid"], "{what}");
            assert_eq!(answer["response"]["allowed"], true, "{what}");
        }
    }
    assert_eq!(rejected(&metrics, "malformed"), 3);
    assert_eq!(rejected(&metrics, "wrong_kind"), 1);
    assert_eq!(rejected(&metrics, "too_large"), 1);
    let text = metrics.encode();
    assert!(
        text.contains(r#"reloader_admission_requests_total{operation="unknown",result="error"} 5"#),
        "{text}"
    );
}

#[tokio::test]
async fn a_declared_length_over_the_limit_is_refused_before_the_body_is_read() {
    let (ctx, metrics) = state_with_metrics();
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_LENGTH, (1u64 << 40).into());
    // A body that never ends: answering at all proves it was not read.
    let endless = futures::stream::repeat_with(|| Ok::<_, std::io::Error>(vec![b'['; 64 * 1024]));
    let answer = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        post(&ctx, headers, Body::from_stream(endless)),
    );
    let (status, _) = answer.await.expect("answered without reading the body");
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);

    // Without a length, an endless body is cut at the limit.
    let endless = futures::stream::repeat_with(|| Ok::<_, std::io::Error>(vec![b'['; 64 * 1024]));
    let answer = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        post(&ctx, HeaderMap::new(), Body::from_stream(endless)),
    );
    let (status, _) = answer.await.expect("answered once past the limit");
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(rejected(&metrics, "too_large"), 2);
}

/// A review for a namespace outside the watched scope is allowed with no patch, CREATE or
/// UPDATE: no hash of that namespace's objects reaches whoever asked.
#[tokio::test]
async fn a_namespace_outside_the_scope_gets_no_marker_values() {
    use k8s_openapi::api::core::v1::ConfigMap;

    let (ctx, _) = state_with_metrics();
    let ctx = Arc::new(AdmissionState {
        index: Arc::new(RwLock::new(Index::default())),
        scope: ScopeFilter::new(&NamespaceScope::Only(vec!["shop".into()])),
        metrics: Metrics::new(false).admission(),
        keys: ctx.keys.clone(),
        decide: ctx.decide.clone(),
        dry_run: false,
        kinds: EnabledKinds::of(&WorkloadKind::ALL),
        hold: std::time::Duration::ZERO,
        origins: Default::default(),
    });
    for namespace in ["shop", "vault"] {
        let config_map: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": "settings", "namespace": namespace}, "data": {"password": "hunter2"},
        }))
        .unwrap();
        let view = crate::views::configmap_view(&config_map, &ctx.keys).unwrap();
        ctx.index.write().unwrap().upsert_resource(view);
    }
    let review_in = |namespace: &str, operation: &str| {
        let mut review = review("apps", "Deployment");
        let request = &mut review["request"];
        request["namespace"] = json!(namespace);
        request["operation"] = json!(operation);
        let object = &mut request["object"];
        object["metadata"]["namespace"] = json!(namespace);
        object["metadata"]["annotations"] = json!({"reloader.stakater.com/auto": "true"});
        object["spec"]["template"]["spec"]["containers"][0]["envFrom"] =
            json!([{"configMapRef": {"name": "settings"}}]);
        if operation == "UPDATE" {
            // A marker the caller claims the live object had: echoing it back would be harmless,
            // but outside the scope nothing is answered at all.
            let mut old = object.clone();
            old["spec"]["template"]["spec"]["containers"][0]["env"] =
                json!([{"name": "STAKATER_SETTINGS_CONFIGMAP", "value": "0123"}]);
            request["oldObject"] = old;
        }
        Body::from(serde_json::to_vec(&review).unwrap())
    };
    let (status, answer) = post(&ctx, HeaderMap::new(), review_in("shop", "CREATE")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(!answer["response"]["patch"].is_null(), "in scope, a CREATE is stamped: {answer}");
    for operation in ["CREATE", "UPDATE"] {
        let (status, answer) = post(&ctx, HeaderMap::new(), review_in("vault", operation)).await;
        assert_eq!(status, StatusCode::OK, "{operation}");
        assert_eq!(answer["response"]["allowed"], true, "{operation}: {answer}");
        assert!(answer["response"].get("patch").is_none_or(Value::is_null), "{operation}: {answer}");
    }
}
