//! Alerts after each successful reload (`ALERT_*`, docs/compatibility.md §9): Slack, Microsoft Teams,
//! Google Chat or raw text.
//!
//! Delivery happens on a background task fed by a bounded queue, so a slow or unreachable sink
//! never delays a reload; when the queue is full the alert is dropped, logged and counted.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::sync::mpsc;

use reloader_core::options::{AlertConfig, AlertSink};

use crate::notify::webhook::{Backoff, http_client, post_with_retries};
use crate::observe::metrics::{Metrics, NotificationChannel};

/// Alerts waiting for delivery; beyond this, new ones are dropped.
const QUEUE_CAPACITY: usize = 1024;

/// The first try plus three retries.
const ALERT_BACKOFF: Backoff =
    Backoff { attempts: 4, first_delay: Duration::from_millis(500), max_delay: Duration::from_secs(4) };

/// What was reloaded, and why. Names and the content hash only: never data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReloadNotice {
    pub(crate) workload_kind: String,
    pub(crate) workload_namespace: String,
    pub(crate) workload_name: String,
    pub(crate) resource_kind: String,
    pub(crate) resource_name: String,
    pub(crate) hash: String,
}

/// Where the writer hands its reload notices; [`Alerter`] delivers them.
pub(crate) trait AlertQueue: Send + Sync {
    /// Queues an alert and returns at once.
    fn send(&self, notice: ReloadNotice);
}

/// Sends alerts in the background; see the module documentation.
pub(crate) struct Alerter {
    queue: mpsc::Sender<ReloadNotice>,
    channel: NotificationChannel,
    metrics: Arc<Metrics>,
}

impl Alerter {
    /// Validates the settings. Returns the queue handle and the delivery loop, which the caller
    /// owns and runs; it ends when every handle is gone.
    pub(crate) fn new(
        cfg: &AlertConfig,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<(Self, impl Future<Output = ()> + Send + 'static)> {
        // Not echoed: the URL may be a bearer token.
        let url = reqwest::Url::parse(cfg.url.expose()).context("ALERT_WEBHOOK_URL is not a valid URL")?;
        let proxy = cfg.proxy.as_ref().map(|p| p.expose());
        let client = http_client(proxy).context("ALERT_WEBHOOK_PROXY")?;
        let channel = NotificationChannel::Alert(cfg.sink);
        let (queue, pending) = mpsc::channel(QUEUE_CAPACITY);
        let delivery = Delivery {
            client,
            url,
            sink: cfg.sink,
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
        match self.queue.try_send(notice) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(notice)) => {
                tracing::warn!(
                    sink = self.channel.as_label(),
                    kind = notice.workload_kind,
                    namespace = notice.workload_namespace,
                    name = notice.workload_name,
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
    additional_info: Option<String>,
    channel: NotificationChannel,
    metrics: Arc<Metrics>,
}

impl Delivery {
    /// Delivers queued alerts one by one until every `Alerter` handle is gone.
    async fn run(self, mut pending: mpsc::Receiver<ReloadNotice>) {
        while let Some(notice) = pending.recv().await {
            let (content_type, body) = render(self.sink, &message(&notice, self.additional_info.as_deref()));
            let result = post_with_retries(&self.client, &self.url, content_type, body, ALERT_BACKOFF).await;
            self.metrics.notification(self.channel, result.is_ok());
            if let Err(error) = result {
                tracing::warn!(
                    sink = self.channel.as_label(),
                    kind = notice.workload_kind,
                    namespace = notice.workload_namespace,
                    name = notice.workload_name,
                    %error,
                    "sending the reload alert failed"
                );
            }
        }
    }
}

/// The human-readable alert text.
fn message(notice: &ReloadNotice, additional_info: Option<&str>) -> String {
    let mut text = format!(
        "Reloader detected changes in {} `{}/{}` (hash {}); reloaded {} `{}/{}`",
        notice.resource_kind,
        notice.workload_namespace,
        notice.resource_name,
        notice.hash,
        notice.workload_kind,
        notice.workload_namespace,
        notice.workload_name,
    );
    if let Some(info) = additional_info {
        text.push('\n');
        text.push_str(info);
    }
    text
}

/// The request body for a sink: its content type and bytes.
fn render(sink: AlertSink, text: &str) -> (&'static str, Vec<u8>) {
    let json = match sink {
        AlertSink::Slack => serde_json::json!({
            "attachments": [{ "color": "good", "title": "Reloader", "text": text }],
        }),
        AlertSink::Teams | AlertSink::GoogleChat => serde_json::json!({ "text": text }),
        AlertSink::Raw => return ("text/plain; charset=utf-8", text.as_bytes().to_vec()),
    };
    ("application/json", json.to_string().into_bytes())
}

#[cfg(test)]
mod tests;
