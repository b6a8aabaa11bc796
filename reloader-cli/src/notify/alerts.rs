//! Alerts after each successful reload (`ALERT_*`, docs/compatibility.md §9): Slack, Microsoft Teams,
//! Google Chat or raw text, with Stakater's bodies and wording byte for byte, so receivers and
//! parsers written for Stakater keep working.
//!
//! Delivery happens on a background task fed by a bounded queue, so a slow or unreachable sink
//! never delays a reload; when the queue is full the alert is dropped, logged and counted.

use std::future::Future;
use std::time::Duration;

use anyhow::Context as _;
use tokio::sync::mpsc;

use reloader_core::model::{ResourceKey, WorkloadKey};
use reloader_core::options::{AlertConfig, AlertSink};
use serde::Serialize;

use tracing::Instrument as _;

use crate::notify::webhook::{Backoff, http_client_builder, notify_span, post_with_retries};
use crate::observe::metrics::{NotificationChannel, NotifyMetrics};
use crate::observe::trace;

/// Alerts waiting for delivery; beyond this, new ones are dropped.
const QUEUE_CAPACITY: usize = 1024;

/// The first try plus three retries.
const ALERT_BACKOFF: Backoff =
    Backoff { attempts: 4, first_delay: Duration::from_millis(500), max_delay: Duration::from_secs(4) };

/// What was reloaded, and why. Names only: never data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReloadNotice {
    pub(crate) workload: WorkloadKey,
    pub(crate) resource: ResourceKey,
}

/// Where the writer hands its reload notices; [`Alerter`] delivers them.
pub(crate) trait AlertQueue: Send + Sync {
    /// Queues an alert and returns at once.
    fn send(&self, notice: ReloadNotice);
}

/// Sends alerts in the background; see the module documentation.
pub(crate) struct Alerter {
    /// Each notice with the trace context of the reload it reports and when it was queued.
    queue: mpsc::Sender<(ReloadNotice, opentelemetry::Context, jiff::Timestamp)>,
    channel: NotificationChannel,
    metrics: NotifyMetrics,
}

impl Alerter {
    /// Validates the settings. Returns the queue handle and the delivery loop, which the caller
    /// owns and runs; it ends when every handle is gone.
    pub(crate) fn new(
        cfg: &AlertConfig,
        metrics: NotifyMetrics,
    ) -> anyhow::Result<(Self, impl Future<Output = ()> + Send + 'static)> {
        // Not echoed: the URL may be a bearer token.
        let url = reqwest::Url::parse(cfg.url.expose()).context("ALERT_WEBHOOK_URL is not a valid URL")?;
        let proxy = cfg.proxy.as_ref().map(|p| p.expose());
        // Stakater refuses redirects (a redirect usually means a wrong token): so do we.
        let client = http_client_builder(proxy)
            .context("ALERT_WEBHOOK_PROXY")?
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .context("building the HTTP client")?;
        let channel = NotificationChannel::Alert(cfg.sink);
        let (queue, pending) = mpsc::channel(QUEUE_CAPACITY);
        let delivery = Delivery {
            client,
            url,
            sink: cfg.sink,
            structured: cfg.structured,
            additional_info: cfg.additional_info.clone(),
            channel,
            metrics: metrics.clone(),
        };
        tracing::info!(sink = channel.as_label(), "alerts on reload enabled");
        Ok((Self { queue, channel, metrics }, delivery.run(pending)))
    }
}

impl AlertQueue for Alerter {
    fn send(&self, notice: ReloadNotice) {
        match self.queue.try_send((notice, trace::current_context(), jiff::Timestamp::now())) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full((notice, _, _))) => {
                tracing::warn!(
                    sink = self.channel.as_label(),
                    workload = %notice.workload,
                    "alert queue full; alert dropped"
                );
                self.metrics.notification(self.channel, false);
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                tracing::warn!(sink = self.channel.as_label(), "alert delivery has stopped; alert dropped");
                self.metrics.notification(self.channel, false);
            }
        }
    }
}

struct Delivery {
    client: reqwest::Client,
    url: reqwest::Url,
    sink: AlertSink,
    /// `ALERT_STRUCTURED` (raw sink only): Stakater v2's JSON object instead of the text.
    structured: bool,
    additional_info: Option<String>,
    channel: NotificationChannel,
    metrics: NotifyMetrics,
}

impl Delivery {
    /// Delivers queued alerts one by one until every `Alerter` handle is gone.
    async fn run(self, mut pending: mpsc::Receiver<(ReloadNotice, opentelemetry::Context, jiff::Timestamp)>) {
        while let Some((notice, reload, at)) = pending.recv().await {
            let (content_type, body) = if self.structured {
                structured(&notice, at, self.additional_info.as_deref())
            } else {
                render(self.sink, &message(&notice, self.additional_info.as_deref()))
            };
            let span = notify_span(self.channel);
            trace::set_parent(&span, &reload);
            let result = post_with_retries(&self.client, &self.url, content_type, body, ALERT_BACKOFF)
                .instrument(span)
                .await;
            self.metrics.notification(self.channel, result.is_ok());
            if let Err(error) = result {
                tracing::warn!(
                    sink = self.channel.as_label(),
                    workload = %notice.workload,
                    %error,
                    "sending the reload alert failed"
                );
            }
        }
    }
}

/// Stakater's alert text; `ALERT_ADDITIONAL_INFO` goes first, followed by ` : `.
fn message(notice: &ReloadNotice, additional_info: Option<&str>) -> String {
    let (resource, workload) = (&notice.resource, &notice.workload);
    let text = format!(
        "Reloader detected changes in *{}* of type *{}* in namespace *{}*. Hence reloaded *{}* of type *{}* in namespace *{}*",
        resource.name,
        resource.kind.marker_type(),
        resource.namespace,
        workload.name,
        workload.kind.as_str(),
        workload.namespace,
    );
    match additional_info {
        Some(info) => format!("{info} : {text}"),
        None => text,
    }
}

/// Slack's incoming-webhook body. Stakater's HTTP client re-encodes it through a map, so the
/// keys come out sorted: the field order here is that order.
#[derive(Serialize)]
struct SlackBody<'a> {
    attachments: [SlackAttachment<'a>; 1],
}

#[derive(Serialize)]
struct SlackAttachment<'a> {
    author_name: &'static str,
    color: &'static str,
    text: &'a str,
}

/// The Teams and Google Chat body.
#[derive(Serialize)]
struct TextBody<'a> {
    text: &'a str,
}

/// The request body for a sink: its content type and bytes.
fn render(sink: AlertSink, text: &str) -> (&'static str, Vec<u8>) {
    let json = match sink {
        AlertSink::Slack => serde_json::to_string(&SlackBody {
            attachments: [SlackAttachment { author_name: "Reloader", color: "good", text }],
        }),
        AlertSink::Teams | AlertSink::GoogleChat => serde_json::to_string(&TextBody { text }),
        // The raw sink gets the text without Slack's bold markers.
        AlertSink::Raw => return ("text/plain", text.replace('*', "").into_bytes()),
    };
    let json = json.expect("string fields always encode");
    ("application/json", go_html_escaped(&json).into_bytes())
}

/// Stakater v2's structured raw body (`ALERT_STRUCTURED`): names and kinds, never data.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StructuredBody<'a> {
    event: &'static str,
    workload_kind: &'a str,
    workload_name: &'a str,
    workload_namespace: &'a str,
    resource_kind: String,
    resource_name: &'a str,
    resource_namespace: &'a str,
    timestamp: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    additional: Option<&'a str>,
}

fn structured(
    notice: &ReloadNotice,
    at: jiff::Timestamp,
    additional_info: Option<&str>,
) -> (&'static str, Vec<u8>) {
    let (resource, workload) = (&notice.resource, &notice.workload);
    let body = StructuredBody {
        event: "reload",
        workload_kind: workload.kind.as_str(),
        workload_name: &workload.name,
        workload_namespace: &workload.namespace,
        resource_kind: resource.kind.to_string(),
        resource_name: &resource.name,
        resource_namespace: &resource.namespace,
        // Go's time.RFC3339 at second precision, as Stakater v2 formats it.
        timestamp: at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        additional: additional_info,
    };
    let json = serde_json::to_string(&body).expect("string fields always encode");
    ("application/json", go_html_escaped(&json).into_bytes())
}

/// Go's JSON encoder escapes `<`, `>`, `&`, U+2028 and U+2029 (in strings, the only place
/// where they can appear); Stakater's bodies have them escaped, so ours do too.
fn go_html_escaped(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests;
