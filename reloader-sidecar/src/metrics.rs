//! The sidecar's Prometheus metrics and its /metrics, /live and /readyz server.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum NotifyKind {
    Http,
    Signal,
    Touch,
}

impl NotifyKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            NotifyKind::Http => "http",
            NotifyKind::Signal => "signal",
            NotifyKind::Touch => "touch",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct NotificationLabels {
    kind: &'static str,
    result: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ObjectLabels {
    object: String,
}

/// Counters shared by the watchers, the writer loop and the notifier.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    updates: Counter,
    write_errors: Counter,
    notifications: Family<NotificationLabels, Counter>,
    watch_errors: Family<ObjectLabels, Counter>,
    last_update: Gauge<f64, AtomicU64>,
    ready: AtomicBool,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("reloader_sidecar");
        let updates = Counter::default();
        registry.register("updates", "Content changes written to the target directory", updates.clone());
        let write_errors = Counter::default();
        registry.register(
            "write_errors",
            "Failed attempts to write the target directory",
            write_errors.clone(),
        );
        let notifications = Family::<NotificationLabels, Counter>::default();
        registry.register(
            "notifications",
            "Notifications sent to the application, by kind and result",
            notifications.clone(),
        );
        let watch_errors = Family::<ObjectLabels, Counter>::default();
        registry.register("watch_errors", "Errors while listing or watching an object", watch_errors.clone());
        let last_update = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "last_update_timestamp_seconds",
            "Unix time of the last content change written",
            last_update.clone(),
        );
        Self {
            registry,
            updates,
            write_errors,
            notifications,
            watch_errors,
            last_update,
            ready: AtomicBool::new(false),
        }
    }
}

impl Metrics {
    pub(crate) fn record_update(&self) {
        self.updates.inc();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        self.last_update.set(now.as_secs_f64());
    }

    pub(crate) fn record_write_error(&self) {
        self.write_errors.inc();
    }

    pub(crate) fn record_notification(&self, kind: NotifyKind, success: bool) {
        let kind = kind.as_str();
        let result = if success { "success" } else { "failure" };
        self.notifications.get_or_create(&NotificationLabels { kind, result }).inc();
    }

    pub(crate) fn record_watch_error(&self, object: &str) {
        self.watch_errors.get_or_create(&ObjectLabels { object: object.to_owned() }).inc();
    }

    /// Ready once the directory holds the objects' current content.
    pub(crate) fn set_ready(&self) {
        self.ready.store(true, Ordering::Release);
    }

    pub(crate) fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    pub(crate) fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

/// Serves /metrics, /live and /readyz on an already bound listener, so a port conflict is
/// reported at start-up; bounded as every reloader listener (reloader_http). Runs until its task
/// is aborted.
pub(crate) async fn serve(listener: tokio::net::TcpListener, metrics: Arc<Metrics>) -> std::io::Result<()> {
    tracing::info!(addr = %listener.local_addr()?, "sidecar metrics and health endpoints listening");
    let app = Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/live", get(|| async { "ok" }))
        .route("/readyz", get(ready_handler))
        .with_state(metrics);
    let limits = reloader_http::Limits::DEFAULT;
    let never = tokio_util::sync::CancellationToken::new();
    reloader_http::serve("sidecar metrics", listener, reloader_http::Plain, app, limits, never).await;
    Ok(())
}

async fn metrics_handler(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], metrics.encode())
}

async fn ready_handler(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    if metrics.is_ready() {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "waiting for the first write")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_names_carry_the_sidecar_prefix() {
        let m = Metrics::default();
        m.record_update();
        m.record_notification(NotifyKind::Http, false);
        m.record_watch_error("configmap/app");
        let text = m.encode();
        for needle in [
            "reloader_sidecar_updates_total 1",
            "reloader_sidecar_notifications_total{kind=\"http\",result=\"failure\"} 1",
            "reloader_sidecar_last_update_timestamp_seconds ",
            "reloader_sidecar_watch_errors_total{object=\"configmap/app\"} 1",
            "reloader_sidecar_write_errors_total 0",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
    }
}
