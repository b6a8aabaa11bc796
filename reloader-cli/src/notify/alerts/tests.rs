use std::time::{Duration, Instant};

use super::*;
use crate::notify::webhook::tests::CaptureServer;

/// A value that stands for Secret data: it must never reach a sink.
const PLANTED_SECRET: &str = "planted-s3cret-value-7f3a";

fn notice() -> ReloadNotice {
    ReloadNotice {
        workload_kind: "Deployment".to_owned(),
        workload_namespace: "team-a".to_owned(),
        workload_name: "web".to_owned(),
        resource_kind: "Secret".to_owned(),
        resource_name: "db-credentials".to_owned(),
        hash: "0a4d55a8d778e5022fab701977c5d840bbc486d0".to_owned(),
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

const EXPECTED_TEXT: &str = "Reloader detected changes in Secret `team-a/db-credentials` \
    (hash 0a4d55a8d778e5022fab701977c5d840bbc486d0); reloaded Deployment `team-a/web`";

#[tokio::test]
async fn slack_gets_an_attachment() {
    let (content_type, body) = deliver_one("slack", None).await;
    assert_eq!(content_type.as_deref(), Some("application/json"));
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"attachments": [{"color": "good", "title": "Reloader", "text": EXPECTED_TEXT}]})
    );
}

#[tokio::test]
async fn teams_and_google_chat_get_a_text_object() {
    for sink in ["teams", "gchat", "GChat"] {
        let (content_type, body) = deliver_one(sink, Some("cluster: prod-eu")).await;
        assert_eq!(content_type.as_deref(), Some("application/json"), "{sink}");
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body, serde_json::json!({"text": format!("{EXPECTED_TEXT}\ncluster: prod-eu")}), "{sink}");
    }
}

#[tokio::test]
async fn any_other_sink_gets_plain_text() {
    for sink in ["raw", "", "webhook"] {
        let (content_type, body) = deliver_one(sink, None).await;
        assert_eq!(content_type.as_deref(), Some("text/plain; charset=utf-8"), "{sink:?}");
        assert_eq!(body, EXPECTED_TEXT, "{sink:?}");
    }
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
    let (alerter, delivery) = Alerter::new(cfg, metrics).unwrap();
    tokio::spawn(delivery);
    alerter
}
