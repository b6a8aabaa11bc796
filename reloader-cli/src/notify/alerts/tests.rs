use std::time::{Duration, Instant};

use reloader_core::model::{ResourceKind, WorkloadKind};

use std::sync::Arc;

use super::*;
use crate::notify::webhook::tests::CaptureServer;
use crate::observe::metrics::Metrics;

/// A value that stands for Secret data: it must never reach a sink.
const PLANTED_SECRET: &str = "planted-s3cret-value-7f3a";

fn notice() -> ReloadNotice {
    ReloadNotice {
        workload: WorkloadKey::new(WorkloadKind::Deployment, "team-a", "web"),
        resource: ResourceKey::new(ResourceKind::Secret, "team-a", "db-credentials"),
    }
}

fn config(url: String, sink: &str, additional_info: Option<&str>) -> AlertConfig {
    AlertConfig {
        url: url.parse().unwrap(),
        sink: match sink.to_ascii_lowercase().as_str() {
            "slack" => AlertSink::Slack,
            "teams" => AlertSink::Teams,
            "gchat" => AlertSink::GoogleChat,
            _ => AlertSink::Raw,
        },
        proxy: None,
        additional_info: additional_info.map(str::to_owned),
        structured: false,
    }
}

async fn deliver_one(sink: &str, additional_info: Option<&str>) -> (Option<String>, String) {
    let server = CaptureServer::start(&[]).await;
    let metrics = Metrics::new(false);
    let alerter = start_alerter(&config(server.url.clone(), sink, additional_info), metrics.clone());
    alerter.send(notice());
    let request = server.wait_for(1).await.remove(0);
    assert!(!request.body.contains(PLANTED_SECRET));
    (request.content_type, request.body)
}

/// Stakater's text (internal/pkg/handler/upgrade.go, v1.4.21).
const TEXT: &str = "Reloader detected changes in *db-credentials* of type *SECRET* in namespace *team-a*. \
    Hence reloaded *web* of type *Deployment* in namespace *team-a*";

#[test]
fn the_text_is_stakaters_with_the_additional_info_first() {
    let cases = [(None, TEXT.to_owned()), (Some("prod-eu"), format!("prod-eu : {TEXT}"))];
    for (info, expected) in cases {
        assert_eq!(message(&notice(), info), expected, "{info:?}");
    }
    let cron = ReloadNotice {
        workload: WorkloadKey::new(WorkloadKind::CronJob, "ops", "nightly"),
        resource: ResourceKey::new(ResourceKind::ConfigMap, "ops", "settings"),
    };
    assert_eq!(
        message(&cron, None),
        "Reloader detected changes in *settings* of type *CONFIGMAP* in namespace *ops*. \
         Hence reloaded *nightly* of type *CronJob* in namespace *ops*"
    );
}

/// The exact bytes Stakater's HTTP client sends for each sink.
#[test]
fn bodies_are_stakaters_byte_for_byte() {
    let cases: [(AlertSink, &str, &str, &str); 6] = [
        (
            AlertSink::Slack,
            "a *b*",
            "application/json",
            r#"{"attachments":[{"author_name":"Reloader","color":"good","text":"a *b*"}]}"#,
        ),
        (AlertSink::Teams, "a *b*", "application/json", r#"{"text":"a *b*"}"#),
        (AlertSink::GoogleChat, "a *b*", "application/json", r#"{"text":"a *b*"}"#),
        (AlertSink::Raw, "prod *eu* : a *b*", "text/plain", "prod eu : a b"),
        // Go escapes HTML characters in JSON strings; a Slack link in the additional info shows it.
        (
            AlertSink::Slack,
            "<https://x/?a=1&b=2|prod> : \"m\"",
            "application/json",
            r#"{"attachments":[{"author_name":"Reloader","color":"good","text":"\u003chttps://x/?a=1\u0026b=2|prod\u003e : \"m\""}]}"#,
        ),
        (AlertSink::Teams, "line\u{2028}sep", "application/json", r#"{"text":"line\u2028sep"}"#),
    ];
    for (sink, text, content_type, body) in cases {
        let (got_type, got_body) = render(sink, text);
        assert_eq!(got_type, content_type, "{sink:?} {text:?}");
        assert_eq!(String::from_utf8(got_body).unwrap(), body, "{sink:?} {text:?}");
    }
}

#[tokio::test]
async fn slack_gets_an_attachment_by_reloader() {
    let (content_type, body) = deliver_one("slack", None).await;
    assert_eq!(content_type.as_deref(), Some("application/json"));
    let expected =
        serde_json::json!({"attachments": [{"author_name": "Reloader", "color": "good", "text": TEXT}]});
    assert_eq!(serde_json::from_str::<serde_json::Value>(&body).unwrap(), expected);
}

#[tokio::test]
async fn teams_and_google_chat_get_a_text_object() {
    for sink in ["teams", "gchat", "GChat"] {
        let (content_type, body) = deliver_one(sink, Some("cluster: prod-eu")).await;
        assert_eq!(content_type.as_deref(), Some("application/json"), "{sink}");
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body, serde_json::json!({"text": format!("cluster: prod-eu : {TEXT}")}), "{sink}");
    }
}

#[tokio::test]
async fn any_other_sink_gets_plain_text_without_markers() {
    for sink in ["raw", "", "webhook"] {
        let (content_type, body) = deliver_one(sink, None).await;
        assert_eq!(content_type.as_deref(), Some("text/plain"), "{sink:?}");
        assert_eq!(body, TEXT.replace('*', ""), "{sink:?}");
    }
}

/// `ALERT_STRUCTURED` (Stakater v2): the raw sink gets one JSON object with v2's field names.
#[tokio::test]
async fn the_structured_raw_body_is_stakater_v2s() {
    let server = CaptureServer::start(&[]).await;
    let cfg = AlertConfig { structured: true, ..config(server.url.clone(), "raw", Some("prod-eu")) };
    let alerter = start_alerter(&cfg, Metrics::new(false));
    let before = jiff::Timestamp::now();
    alerter.send(notice());
    let request = server.wait_for(1).await.remove(0);
    assert_eq!(request.content_type.as_deref(), Some("application/json"));
    let mut body: serde_json::Value = serde_json::from_str(&request.body).unwrap();
    let timestamp: jiff::Timestamp = body["timestamp"].as_str().unwrap().parse().unwrap();
    assert!(timestamp.as_second() >= before.as_second(), "{timestamp} is when it was sent");
    assert!(body["timestamp"].as_str().unwrap().ends_with('Z'), "RFC 3339 in UTC");
    body.as_object_mut().unwrap().remove("timestamp");
    assert_eq!(
        body,
        serde_json::json!({"event": "reload", "workloadKind": "Deployment", "workloadName": "web",
            "workloadNamespace": "team-a", "resourceKind": "Secret", "resourceName": "db-credentials",
            "resourceNamespace": "team-a", "additional": "prod-eu"})
    );
    assert!(!request.body.contains(PLANTED_SECRET));
}

#[tokio::test]
async fn a_redirect_is_a_failure_not_followed() {
    let server = CaptureServer::start(&[axum::http::StatusCode::TEMPORARY_REDIRECT]).await;
    let metrics = Metrics::new(false);
    let alerter = start_alerter(&config(server.url.clone(), "slack", None), metrics.clone());
    alerter.send(notice());
    wait_for_metric(&metrics, "reloader_notifications_total{channel=\"alert-slack\",success=\"false\"} 1")
        .await;
    assert_eq!(server.requests().len(), 1, "sent once, neither retried nor redirected");
}

#[tokio::test]
async fn failed_delivery_is_retried_then_counted() {
    let server = CaptureServer::start(&[axum::http::StatusCode::BAD_GATEWAY]).await;
    let metrics = Metrics::new(false);
    let alerter = start_alerter(&config(server.url.clone(), "teams", None), metrics.clone());
    alerter.send(notice());
    assert_eq!(server.wait_for(2).await.len(), 2);
    wait_for_metric(&metrics, "reloader_notifications_total{channel=\"alert-teams\",success=\"true\"} 1")
        .await;
}

#[tokio::test]
async fn an_unreachable_sink_never_blocks_the_caller() {
    // Accepts connections (the kernel completes the handshake) but never answers: every
    // delivery hangs until its timeout, which is the worst case for a caller that waited.
    let black_hole = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", black_hole.local_addr().unwrap());
    let metrics = Metrics::new(false);
    let alerter = start_alerter(&config(url, "slack", None), metrics.clone());

    let started = Instant::now();
    for _ in 0..(QUEUE_CAPACITY + 10) {
        alerter.send(notice());
    }
    assert!(started.elapsed() < Duration::from_millis(500), "send blocked for {:?}", started.elapsed());
    // The queue overflowed: the excess was dropped and counted as failed alerts.
    let text = metrics.encode();
    let failed = text
        .lines()
        .find_map(|line| {
            line.strip_prefix("reloader_notifications_total{channel=\"alert-slack\",success=\"false\"} ")
        })
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    assert!(failed >= 9, "{text}");
}

#[test]
fn debug_output_hides_the_url_and_proxy() {
    let mut cfg = config("https://hooks.example/services/T000/B000/s3cr3t-token".into(), "slack", None);
    cfg.proxy = Some("http://user:proxy-password@proxy:3128".parse().unwrap());
    let printed = format!("{cfg:?}");
    assert!(!printed.contains("s3cr3t-token") && !printed.contains("proxy-password"), "{printed}");
}

async fn wait_for_metric(metrics: &Metrics, line: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !metrics.encode().lines().any(|l| l == line) {
        assert!(Instant::now() < deadline, "{line} not found in:\n{}", metrics.encode());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The alerter, its delivery loop running on the test runtime.
fn start_alerter(cfg: &AlertConfig, metrics: Arc<Metrics>) -> Alerter {
    let (alerter, delivery) = Alerter::new(cfg, metrics.notify()).unwrap();
    tokio::spawn(delivery);
    alerter
}
