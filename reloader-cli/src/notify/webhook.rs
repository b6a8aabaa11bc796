//! `--webhook-url` mode: a changed ConfigMap/Secret is announced by an HTTP POST instead of a
//! reload (docs/compatibility.md §9). Also home of the retrying POST shared with the alert sinks.
//!
//! Notices are POSTed one at a time, in the order of the changes, by a delivery loop fed by a
//! bounded queue, so a slow endpoint never holds the watches; when the queue is full the notice
//! is dropped, logged and counted.

use std::future::Future;
use std::time::Duration;

use anyhow::Context as _;
use serde::Serialize;
use tokio::sync::mpsc;
use tracing::Instrument as _;

use crate::observe::metrics::{EventType, NotificationChannel, NotifyMetrics};
use crate::observe::trace;

/// Notices waiting for the webhook; beyond this, new ones are dropped.
const QUEUE_CAPACITY: usize = 1024;

/// Per-attempt limits: a slow endpoint must not hold a notification for long.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

const WEBHOOK_BACKOFF: Backoff =
    Backoff { attempts: 5, first_delay: Duration::from_millis(200), max_delay: Duration::from_secs(5) };

/// One ConfigMap/Secret event, as announced to the webhook. Carries names and the content hash
/// only, never data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourceNotice {
    pub(crate) event: EventType,
    pub(crate) kind: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) hash: String,
}

#[derive(Serialize)]
struct WebhookBody<'a> {
    /// The constant field Stakater sends; receivers written for it check this.
    webhook: &'static str,
    event: &'a str,
    kind: &'a str,
    namespace: &'a str,
    name: &'a str,
    hash: &'a str,
}

/// Why a notification was not delivered. Never contains the URL: webhook URLs often embed a
/// token.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WebhookError {
    #[error("endpoint answered HTTP {status} (after {attempts} attempt(s))")]
    Status { status: u16, attempts: u32 },
    #[error("request failed after {attempts} attempt(s): {message}")]
    Transport { message: String, attempts: u32 },
    #[error("encoding the request body: {0}")]
    Encode(#[from] serde_json::Error),
}

impl WebhookError {
    /// The `error.type` of the notification's span.
    fn as_label(&self) -> &'static str {
        match self {
            WebhookError::Status { .. } => "http_status",
            WebhookError::Transport { .. } => "transport",
            WebhookError::Encode(_) => "encode",
        }
    }
}

/// Posts resource notices to the `--webhook-url` endpoint.
pub(crate) struct WebhookNotifier {
    client: reqwest::Client,
    url: reqwest::Url,
    metrics: NotifyMetrics,
}

impl WebhookNotifier {
    pub(crate) fn new(url: String, metrics: NotifyMetrics) -> anyhow::Result<Self> {
        // The URL is not echoed: it may carry a token.
        let url = reqwest::Url::parse(&url).context("--webhook-url is not a valid URL")?;
        Ok(Self { client: http_client(None)?, url, metrics })
    }

    /// Posts the notice, retrying connection failures, 5xx and 429 with exponential backoff.
    pub(crate) async fn notify(&self, event: &ResourceNotice) -> Result<(), WebhookError> {
        let body = serde_json::to_vec(&WebhookBody {
            webhook: "update successful",
            event: event.event.as_label(),
            kind: &event.kind,
            namespace: &event.namespace,
            name: &event.name,
            hash: &event.hash,
        })?;
        let result =
            post_with_retries(&self.client, &self.url, "application/json", body, WEBHOOK_BACKOFF).await;
        self.metrics.notification(NotificationChannel::Webhook, result.is_ok());
        match &result {
            Ok(()) => tracing::debug!(
                event = event.event.as_label(), kind = %event.kind, namespace = %event.namespace, name = %event.name,
                "webhook notified"
            ),
            Err(error) => tracing::warn!(
                event = event.event.as_label(), kind = %event.kind, namespace = %event.namespace, name = %event.name,
                %error, "webhook notification failed"
            ),
        }
        result
    }
}

/// Where reconcile hands its notices; the delivery loop [`WebhookQueue::new`] returns POSTs them.
#[derive(Clone)]
pub(crate) struct WebhookQueue {
    /// Each notice with the trace context of the change it announces.
    queue: mpsc::Sender<(ResourceNotice, opentelemetry::Context)>,
    metrics: NotifyMetrics,
}

impl WebhookQueue {
    /// The queue handle, and the delivery loop, which the caller owns and runs; it ends when
    /// every handle is gone.
    pub(crate) fn new(notifier: WebhookNotifier) -> (Self, impl Future<Output = ()> + Send + 'static) {
        Self::with_capacity(notifier, QUEUE_CAPACITY)
    }

    fn with_capacity(
        notifier: WebhookNotifier,
        capacity: usize,
    ) -> (Self, impl Future<Output = ()> + Send + 'static) {
        let (queue, mut pending) = mpsc::channel::<(ResourceNotice, opentelemetry::Context)>(capacity);
        let metrics = notifier.metrics.clone();
        let delivery = async move {
            while let Some((notice, change)) = pending.recv().await {
                let span = notify_span(NotificationChannel::Webhook);
                trace::set_parent(&span, &change);
                // Failures are logged and counted by `notify`.
                let _ = notifier.notify(&notice).instrument(span).await;
            }
        };
        (Self { queue, metrics }, delivery)
    }

    /// Queues a notice and returns at once.
    pub(crate) fn send(&self, notice: ResourceNotice) {
        let dropped = match self.queue.try_send((notice, trace::current_context())) {
            Ok(()) => return,
            Err(mpsc::error::TrySendError::Full((notice, _))) => {
                (notice, "webhook queue full; notification dropped")
            }
            Err(mpsc::error::TrySendError::Closed((notice, _))) => {
                (notice, "webhook delivery has stopped; notification dropped")
            }
        };
        let (notice, reason) = dropped;
        tracing::warn!(event = notice.event.as_label(), kind = %notice.kind, namespace = %notice.namespace,
            name = %notice.name, "{reason}");
        self.metrics.notification(NotificationChannel::Webhook, false);
    }
}

/// A client with bounded connect and request times, optionally through an explicit proxy.
pub(crate) fn http_client(proxy: Option<&str>) -> anyhow::Result<reqwest::Client> {
    http_client_builder(proxy)?.build().context("building the HTTP client")
}

/// [`http_client`] before it is built, for a caller with a policy of its own.
pub(crate) fn http_client_builder(proxy: Option<&str>) -> anyhow::Result<reqwest::ClientBuilder> {
    let mut builder = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(REQUEST_TIMEOUT)
        .user_agent(concat!("reloader/", env!("CARGO_PKG_VERSION")));
    if let Some(proxy) = proxy {
        builder = builder.proxy(reqwest::Proxy::all(proxy).context("invalid proxy URL")?);
    }
    Ok(builder)
}

/// The span of one notification (`--webhook-url` POST, alert): the POSTs in it carry its
/// `traceparent`, and record their method, final status and attempts.
pub(crate) fn notify_span(channel: NotificationChannel) -> tracing::Span {
    tracing::info_span!(
        "reloader.notify",
        "reloader.notify.channel" = channel.as_label(),
        "http.request.method" = "POST",
        "http.response.status_code" = tracing::field::Empty,
        "reloader.notify.attempts" = tracing::field::Empty,
        "error.type" = tracing::field::Empty,
    )
}

/// How often and how patiently to retry a POST.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backoff {
    /// Total tries, the first included.
    pub attempts: u32,
    pub first_delay: Duration,
    pub max_delay: Duration,
}

impl Backoff {
    /// The pause before try `attempt + 1`, doubling from `first_delay` up to `max_delay`.
    fn delay_after(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
        self.first_delay.saturating_mul(factor).min(self.max_delay)
    }
}

/// POSTs `body`, retrying transport errors, 5xx and 429; other statuses fail at once.
pub(crate) async fn post_with_retries(
    client: &reqwest::Client,
    url: &reqwest::Url,
    content_type: &'static str,
    body: Vec<u8>,
    backoff: Backoff,
) -> Result<(), WebhookError> {
    let span = tracing::Span::current();
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::CONTENT_TYPE, reqwest::header::HeaderValue::from_static(content_type));
    crate::observe::trace::inject_traceparent(&mut headers);
    let mut attempt = 0;
    loop {
        attempt += 1;
        span.record("reloader.notify.attempts", attempt);
        let response = client.post(url.clone()).headers(headers.clone()).body(body.clone()).send().await;
        if let Ok(response) = &response {
            span.record("http.response.status_code", response.status().as_u16());
        }
        let (error, retryable) = match response {
            Ok(response) if response.status().is_success() => return Ok(()),
            Ok(response) => {
                let status = response.status();
                let retryable = status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS;
                (WebhookError::Status { status: status.as_u16(), attempts: attempt }, retryable)
            }
            Err(error) => {
                let retryable = !error.is_builder();
                let message = error_chain(&error.without_url());
                (WebhookError::Transport { message, attempts: attempt }, retryable)
            }
        };
        if !retryable || attempt >= backoff.attempts {
            span.record("error.type", error.as_label());
            return Err(error);
        }
        let delay = backoff.delay_after(attempt);
        tracing::debug!(%error, attempt, ?delay, "notification failed, retrying");
        tokio::time::sleep(delay).await;
    }
}

/// The error and its sources on one line ("error sending request: connection refused").
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

#[cfg(test)]
pub(crate) mod tests;
