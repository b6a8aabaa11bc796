use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;

use super::*;
use crate::observe::metrics::Metrics;

/// One request as the capture server saw it.
#[derive(Debug, Clone)]
pub(crate) struct CapturedRequest {
    pub content_type: Option<String>,
    pub body: String,
}

#[derive(Default)]
struct CaptureState {
    /// Statuses to answer, in order; once used up, 200.
    script: VecDeque<StatusCode>,
    requests: Vec<CapturedRequest>,
}

/// A local HTTP endpoint on 127.0.0.1 that records every POST and answers scripted statuses.
pub(crate) struct CaptureServer {
    pub url: String,
    state: Arc<Mutex<CaptureState>>,
}

impl CaptureServer {
    pub(crate) async fn start(script: &[StatusCode]) -> Self {
        let state = Arc::new(Mutex::new(CaptureState {
            script: script.iter().copied().collect(),
            ..Default::default()
        }));
        let app = Router::new().route("/hook", post(capture)).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, state }
    }

    pub(crate) fn requests(&self) -> Vec<CapturedRequest> {
        self.state.lock().unwrap().requests.clone()
    }

    /// Waits until at least `n` requests arrived (or fails the test after 10 s).
    pub(crate) async fn wait_for(&self, n: usize) -> Vec<CapturedRequest> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let requests = self.requests();
            if requests.len() >= n {
                return requests;
            }
            assert!(Instant::now() < deadline, "expected {n} requests, got {}", requests.len());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

async fn capture(
    State(state): State<Arc<Mutex<CaptureState>>>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, [(axum::http::header::HeaderName, &'static str); 1]) {
    let mut state = state.lock().unwrap();
    state.requests.push(CapturedRequest {
        content_type: headers.get("content-type").and_then(|value| value.to_str().ok()).map(str::to_owned),
        body: String::from_utf8_lossy(&body).into_owned(),
    });
    // A scripted redirect points back here, so a client that follows it is seen posting again.
    (state.script.pop_front().unwrap_or(StatusCode::OK), [(axum::http::header::LOCATION, "/hook")])
}

fn notice() -> ResourceNotice {
    ResourceNotice {
        event: EventType::Update,
        kind: "ConfigMap".to_owned(),
        namespace: "team-a".to_owned(),
        name: "app-config".to_owned(),
        hash: "3f1c0e5e7a1b2c3d4e5f60718293a4b5c6d7e8f9".to_owned(),
    }
}

fn notification_count(metrics: &Metrics, success: bool) -> Option<String> {
    let prefix = format!("reloader_notifications_total{{channel=\"webhook\",success=\"{success}\"}} ");
    metrics.encode().lines().find_map(|line| line.strip_prefix(&prefix).map(str::to_owned))
}

#[tokio::test]
async fn posts_the_resource_details_as_json() {
    let server = CaptureServer::start(&[]).await;
    let metrics = Metrics::new(false);
    let notifier = WebhookNotifier::new(server.url.clone(), metrics.notify()).unwrap();
    notifier.notify(&notice()).await.unwrap();

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].content_type.as_deref(), Some("application/json"));
    let body: serde_json::Value = serde_json::from_str(&requests[0].body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({
            "webhook": "update successful",
            "event": "update",
            "kind": "ConfigMap",
            "namespace": "team-a",
            "name": "app-config",
            "hash": "3f1c0e5e7a1b2c3d4e5f60718293a4b5c6d7e8f9",
        })
    );
    assert_eq!(notification_count(&metrics, true).as_deref(), Some("1"));
}

#[tokio::test]
async fn retries_server_errors_with_backoff_until_success() {
    let server =
        CaptureServer::start(&[StatusCode::INTERNAL_SERVER_ERROR, StatusCode::TOO_MANY_REQUESTS]).await;
    let metrics = Metrics::new(false);
    let notifier = WebhookNotifier::new(server.url.clone(), metrics.notify()).unwrap();
    let started = Instant::now();
    notifier.notify(&notice()).await.unwrap();

    assert_eq!(server.requests().len(), 3);
    // 200 ms after the first failure, 400 ms after the second.
    assert!(started.elapsed() >= Duration::from_millis(600), "{:?}", started.elapsed());
    assert_eq!(notification_count(&metrics, true).as_deref(), Some("1"));
    assert_eq!(notification_count(&metrics, false), None);
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let server = CaptureServer::start(&[StatusCode::BAD_REQUEST]).await;
    let metrics = Metrics::new(false);
    let notifier = WebhookNotifier::new(server.url.clone(), metrics.notify()).unwrap();
    let error = notifier.notify(&notice()).await.unwrap_err();

    assert!(matches!(error, WebhookError::Status { status: 400, attempts: 1 }), "{error:?}");
    assert_eq!(server.requests().len(), 1);
    assert_eq!(notification_count(&metrics, false).as_deref(), Some("1"));
}

#[tokio::test]
async fn gives_up_after_five_tries_without_leaking_the_url() {
    // Bound and dropped: nothing listens there, so every connection is refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/hook?token=s3cr3t-token");
    let metrics = Metrics::new(false);
    let notifier = WebhookNotifier::new(url, metrics.notify()).unwrap();
    let error = notifier.notify(&notice()).await.unwrap_err();

    assert!(matches!(error, WebhookError::Transport { attempts: 5, .. }), "{error:?}");
    assert!(!error.to_string().contains("s3cr3t-token"), "{error}");
    assert_eq!(notification_count(&metrics, false).as_deref(), Some("1"));
}

#[test]
fn backoff_doubles_up_to_the_cap() {
    let backoff =
        Backoff { attempts: 8, first_delay: Duration::from_millis(200), max_delay: Duration::from_secs(5) };
    let delays: Vec<u128> = (1..=6).map(|attempt| backoff.delay_after(attempt).as_millis()).collect();
    assert_eq!(delays, [200, 400, 800, 1600, 3200, 5000]);
}

#[test]
fn invalid_url_is_rejected_without_echoing_it() {
    let error =
        WebhookNotifier::new("not a url s3cr3t".to_owned(), Metrics::new(false).notify()).err().unwrap();
    assert!(!format!("{error:#}").contains("s3cr3t"), "{error:#}");
}

fn named(name: &str) -> ResourceNotice {
    ResourceNotice { name: name.to_owned(), ..notice() }
}

#[tokio::test]
async fn the_queue_delivers_notices_one_at_a_time_in_order() {
    // The first POST fails once, so a notice sent concurrently would overtake it.
    let server = CaptureServer::start(&[StatusCode::SERVICE_UNAVAILABLE]).await;
    let metrics = Metrics::new(false);
    let (queue, delivery) =
        WebhookQueue::new(WebhookNotifier::new(server.url.clone(), metrics.notify()).unwrap());
    let delivery = tokio::spawn(delivery);
    for name in ["first", "second", "third"] {
        queue.send(named(name));
    }
    let names: Vec<String> = server
        .wait_for(4)
        .await
        .iter()
        .map(|r| {
            serde_json::from_str::<serde_json::Value>(&r.body).unwrap()["name"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(names, ["first", "first", "second", "third"]);
    drop(queue);
    delivery.await.unwrap();
    assert_eq!(notification_count(&metrics, true).as_deref(), Some("3"));
}

#[tokio::test]
async fn a_full_queue_drops_the_notice_and_counts_it() {
    let metrics = Metrics::new(false);
    let notifier = WebhookNotifier::new("http://127.0.0.1:9/hook".to_owned(), metrics.notify()).unwrap();
    // The delivery loop is not run: the one place fills up.
    let (queue, _delivery) = WebhookQueue::with_capacity(notifier, 1);
    queue.send(named("kept"));
    assert_eq!(notification_count(&metrics, false), None);
    queue.send(named("dropped"));
    assert_eq!(notification_count(&metrics, false).as_deref(), Some("1"));
}
