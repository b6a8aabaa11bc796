//! The HTTP server on the metrics port: `/metrics`, `/live`, `/healthz`, `/readyz`.
//!
//! Profiling is deliberately not served here (docs/compatibility.md §1): the metrics port is usually reachable
//! by every scraper in the cluster.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use reloader_core::options::ListenAddr;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::observe::metrics::Metrics;

const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Liveness and readiness as the probes see them; cheap to clone and share.
///
/// A new `Health` is live and not ready: readiness is set once the caches have synced.
#[derive(Clone, Debug)]
pub(crate) struct Health {
    ready: Arc<AtomicBool>,
    live: Arc<AtomicBool>,
    /// False while RBAC denies a permission the watches need (`rbac`).
    reads_granted: Arc<AtomicBool>,
    /// What is awaited without holding readiness back (a declared kind's CRD), for `/readyz`'s
    /// body. Bounded by the declared kinds.
    pending: Arc<Mutex<BTreeSet<String>>>,
}

impl Health {
    pub(crate) fn new() -> Self {
        Self {
            ready: Arc::new(AtomicBool::new(false)),
            live: Arc::new(AtomicBool::new(true)),
            reads_granted: Arc::new(AtomicBool::new(true)),
            pending: Arc::default(),
        }
    }

    /// Adds (`true`) or removes a line of `/readyz`'s body.
    pub(crate) fn set_pending(&self, detail: &str, pending: bool) {
        let mut all = self.pending.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if pending {
            all.insert(detail.to_owned());
        } else {
            all.remove(detail);
        }
    }

    pub(crate) fn pending(&self) -> Vec<String> {
        self.pending.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).iter().cloned().collect()
    }

    pub(crate) fn set_reads_granted(&self, granted: bool) {
        self.reads_granted.store(granted, Ordering::Release);
    }

    pub(crate) fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    pub(crate) fn set_live(&self, live: bool) {
        self.live.store(live, Ordering::Release);
    }

    pub(crate) fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire) && self.reads_granted.load(Ordering::Acquire)
    }

    pub(crate) fn is_live(&self) -> bool {
        self.live.load(Ordering::Acquire)
    }
}

impl Default for Health {
    fn default() -> Self {
        Self::new()
    }
}

#[derive(Clone)]
struct AppState {
    metrics: Arc<Metrics>,
    health: Health,
}

impl axum::extract::FromRef<AppState> for Health {
    fn from_ref(state: &AppState) -> Self {
        state.health.clone()
    }
}

/// Binds `addr` (crate::listen: `:port` is dual-stack) and serves until `shutdown` is cancelled.
pub(crate) async fn serve(
    addr: ListenAddr,
    metrics: Arc<Metrics>,
    health: Health,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let listener = crate::listen::bind(addr)
        .with_context(|| format!("binding the metrics and health server to {addr}"))?;
    serve_listener(listener, metrics, health, shutdown).await
}

/// Serves on an already bound listener until `shutdown` is cancelled; in-flight requests finish
/// (for a while: reloader_http).
pub(crate) async fn serve_listener(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    health: Health,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let local_addr = listener.local_addr().context("reading the metrics server's local address")?;
    tracing::info!(address = %local_addr, "serving /metrics, /live, /healthz and /readyz");
    // Bounded (reloader_http's limits): slow clients cannot hold the probes' port.
    let router = router(AppState { metrics, health });
    reloader_http::serve(
        "metrics",
        listener,
        reloader_http::Plain,
        router,
        reloader_http::Limits::DEFAULT,
        shutdown,
    )
    .await;
    Ok(())
}

/// `--health-addr`: the probes alone on a second address, as Stakater v2's separate health
/// server; bounded like the metrics server.
pub(crate) async fn serve_probes(
    addr: ListenAddr,
    health: Health,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let listener = crate::listen::bind(addr)
        .with_context(|| format!("binding the health server to {addr} (--health-addr)"))?;
    tracing::info!(address = %addr, "serving /live, /healthz and /readyz");
    reloader_http::serve(
        "health",
        listener,
        reloader_http::Plain,
        probes().with_state(health),
        reloader_http::Limits::DEFAULT,
        shutdown,
    )
    .await;
    Ok(())
}

fn router(state: AppState) -> Router {
    Router::new().route("/metrics", get(metrics_handler)).merge(probes()).with_state(state)
}

/// The probe routes, on any state that gives the health.
fn probes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Health: axum::extract::FromRef<S>,
{
    Router::new()
        .route("/live", get(live_handler))
        .route("/healthz", get(live_handler))
        .route("/readyz", get(ready_handler))
}

async fn metrics_handler(State(state): State<AppState>) -> Response {
    ([(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)], state.metrics.encode()).into_response()
}

async fn live_handler(State(health): State<Health>) -> Response {
    probe_response(health.is_live(), "not live")
}

async fn ready_handler(State(health): State<Health>) -> Response {
    let pending = health.pending();
    if health.is_ready() && !pending.is_empty() {
        return (StatusCode::OK, format!("ok\n{}\n", pending.join("\n"))).into_response();
    }
    probe_response(health.is_ready(), "not ready")
}

fn probe_response(ok: bool, failure: &'static str) -> Response {
    if ok {
        (StatusCode::OK, "ok").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, failure).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct TestServer {
        base: String,
        shutdown: CancellationToken,
        task: tokio::task::JoinHandle<anyhow::Result<()>>,
    }

    async fn start(metrics: Arc<Metrics>, health: Health) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(serve_listener(listener, metrics, health, shutdown.clone()));
        TestServer { base, shutdown, task }
    }

    async fn get(url: String) -> (StatusCode, Option<String>, String) {
        let response = reqwest::get(url).await.unwrap();
        let status = StatusCode::from_u16(response.status().as_u16()).unwrap();
        let content_type =
            response.headers().get("content-type").map(|value| value.to_str().unwrap().to_owned());
        (status, content_type, response.text().await.unwrap())
    }

    #[tokio::test]
    async fn serves_metrics_and_probes() {
        let metrics = Metrics::new(false);
        metrics.writes().reload_executed(true, "default");
        let health = Health::new();
        let server = start(metrics, health.clone()).await;

        let (status, content_type, body) = get(format!("{}/metrics", server.base)).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(content_type.as_deref(), Some(OPENMETRICS_CONTENT_TYPE));
        assert!(body.contains("reloader_reload_executed_total{success=\"true\"} 1"), "{body}");

        for path in ["/live", "/healthz"] {
            assert_eq!(get(format!("{}{path}", server.base)).await.0, StatusCode::OK, "{path}");
        }
        assert_eq!(get(format!("{}/readyz", server.base)).await.0, StatusCode::SERVICE_UNAVAILABLE);

        health.set_ready(true);
        let (status, _, body) = get(format!("{}/readyz", server.base)).await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok"));
        // What is awaited without holding readiness back is listed after "ok", until it is not.
        health.set_pending("waiting for b", true);
        health.set_pending("waiting for a", true);
        let (status, _, body) = get(format!("{}/readyz", server.base)).await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok\nwaiting for a\nwaiting for b\n"));
        health.set_pending("waiting for a", false);
        health.set_pending("waiting for b", false);
        assert_eq!(get(format!("{}/readyz", server.base)).await.2, "ok");

        health.set_live(false);
        for path in ["/live", "/healthz"] {
            assert_eq!(
                get(format!("{}{path}", server.base)).await.0,
                StatusCode::SERVICE_UNAVAILABLE,
                "{path}"
            );
        }

        assert_eq!(get(format!("{}/debug/pprof/", server.base)).await.0, StatusCode::NOT_FOUND);

        server.shutdown.cancel();
        server.task.await.unwrap().unwrap();
    }

    /// `--health-addr`: the probes, and nothing else, on the second address.
    #[tokio::test]
    async fn the_health_address_serves_the_probes_only() {
        let port = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
        let addr: ListenAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let health = Health::new();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(serve_probes(addr, health.clone(), shutdown.clone()));
        let base = format!("http://127.0.0.1:{port}");
        let mut live = None;
        for _ in 0..50 {
            match reqwest::get(format!("{base}/live")).await {
                Ok(response) => {
                    live = Some(response.status().as_u16());
                    break;
                }
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            }
        }
        assert_eq!(live, Some(200));
        assert_eq!(get(format!("{base}/healthz")).await.0, StatusCode::OK);
        assert_eq!(get(format!("{base}/readyz")).await.0, StatusCode::SERVICE_UNAVAILABLE);
        health.set_ready(true);
        assert_eq!(
            get(format!("{base}/readyz")).await.0,
            StatusCode::OK,
            "the same health as the metrics server's"
        );
        assert_eq!(get(format!("{base}/metrics")).await.0, StatusCode::NOT_FOUND, "no metrics there");
        shutdown.cancel();
        task.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn bind_error_names_the_address() {
        let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: ListenAddr = taken.local_addr().unwrap().to_string().parse().unwrap();
        let error =
            serve(addr, Metrics::new(false), Health::new(), CancellationToken::new()).await.unwrap_err();
        assert!(format!("{error:#}").contains(&addr.to_string()), "{error:#}");
    }
}
