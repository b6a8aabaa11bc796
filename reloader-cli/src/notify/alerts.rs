//! Alerts after each successful reload (`ALERT_*`, compat.md §9): Slack, Microsoft Teams,
//! Google Chat or raw text.
//!
//! Delivery happens on a background task fed by a bounded queue, so a slow or unreachable sink
//! never delays a reload; when the queue is full the alert is dropped, logged and counted.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::sync::mpsc;

use crate::observe::metrics::Metrics;
use crate::notify::webhook::{Backoff, http_client, post_with_retries};

/// Alerts waiting for delivery; beyond this, new ones are dropped.
const QUEUE_CAPACITY: usize = 1024;

/// The first try plus three retries.
const ALERT_BACKOFF: Backoff =
    Backoff { attempts: 4, first_delay: Duration::from_millis(500), max_delay: Duration::from_secs(4) };

/// Where alerts go and in which shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlertSink {
    Slack,
    Teams,
    GoogleChat,
    /// Anything else: the message as `text/plain`.
    Raw,
}

impl AlertSink {
    /// `ALERT_SINK`: `slack`, `teams`, `gchat`; any other value means raw text.
    pub fn parse(value: &str) -> Self {
        match value.trim().to_ascii_lowercase().as_str() {
            "slack" => Self::Slack,
            "teams" => Self::Teams,
            "gchat" => Self::GoogleChat,
            _ => Self::Raw,
        }
    }

    /// The label used in logs and in `reloader_notifications_total{channel="alert-<name>"}`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Slack => "slack",
            Self::Teams => "teams",
            Self::GoogleChat => "gchat",
            Self::Raw => "raw",
        }
    }
}

/// The `ALERT_*` settings, present only when alerting is on and has a destination.
#[derive(Clone)]
pub struct AlertConfig {
    pub url: String,
    pub sink: AlertSink,
    pub proxy: Option<String>,
    pub additional_info: Option<String>,
}

/// The URL and proxy may embed credentials (Slack webhook URLs are bearer tokens): never printed.
impl fmt::Debug for AlertConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlertConfig")
            .field("url", &"<redacted>")
            .field("sink", &self.sink)
            .field("proxy", &self.proxy.as_ref().map(|_| "<redacted>"))
            .field("additional_info", &self.additional_info)
            .finish()
    }
}

impl AlertConfig {
    /// From `ALERT_ON_RELOAD` (already compared to `"true"`), `ALERT_WEBHOOK_URL`, `ALERT_SINK`,
    /// `ALERT_WEBHOOK_PROXY` and `ALERT_ADDITIONAL_INFO`. `None` when alerts are off, or on
    /// without a URL (logged, since the user asked for alerts).
    pub fn from_parts(
        enabled: bool,
        url: Option<String>,
        sink: Option<String>,
        proxy: Option<String>,
        additional_info: Option<String>,
    ) -> Option<Self> {
        if !enabled {
            return None;
        }
        let Some(url) = non_empty(url) else {
            tracing::warn!("ALERT_ON_RELOAD is true but ALERT_WEBHOOK_URL is empty; alerts are disabled");
            return None;
        };
        Some(Self {
            url,
            sink: sink.as_deref().map_or(AlertSink::Raw, AlertSink::parse),
            proxy: non_empty(proxy),
            additional_info: non_empty(additional_info),
        })
    }
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

/// What was reloaded, and why. Names and the content hash only: never data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloadNotice {
    pub workload_kind: String,
    pub workload_namespace: String,
    pub workload_name: String,
    pub resource_kind: String,
    pub resource_name: String,
    pub hash: String,
}

/// Sends alerts in the background; see the module documentation.
pub struct Alerter {
    queue: mpsc::Sender<ReloadNotice>,
    channel: String,
    metrics: Arc<Metrics>,
}

impl Alerter {
    /// Validates the settings and starts the delivery task; must be called within a Tokio runtime.
    pub fn new(cfg: AlertConfig, metrics: Arc<Metrics>) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Handle::try_current().context("alerts need a Tokio runtime")?;
        // Not echoed: the URL may be a bearer token.
        let url = reqwest::Url::parse(&cfg.url).context("ALERT_WEBHOOK_URL is not a valid URL")?;
        let client = http_client(cfg.proxy.as_deref()).context("ALERT_WEBHOOK_PROXY")?;
        let channel = format!("alert-{}", cfg.sink.name());
        let (queue, pending) = mpsc::channel(QUEUE_CAPACITY);
        let delivery = Delivery { client, url, cfg, channel: channel.clone(), metrics: metrics.clone() };
        runtime.spawn(delivery.run(pending));
        tracing::info!(sink = channel, "alerts on reload enabled");
        Ok(Self { queue, channel, metrics })
    }

    /// Queues an alert and returns at once.
    pub fn send(&self, notice: ReloadNotice) {
        match self.queue.try_send(notice) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(notice)) => {
                tracing::warn!(
                    sink = self.channel,
                    kind = notice.workload_kind,
                    namespace = notice.workload_namespace,
                    name = notice.workload_name,
                    "alert queue full; alert dropped"
                );
                self.metrics.notification(&self.channel, false);
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                tracing::warn!(sink = self.channel, "alert delivery has stopped; alert dropped");
                self.metrics.notification(&self.channel, false);
            }
        }
    }
}

struct Delivery {
    client: reqwest::Client,
    url: reqwest::Url,
    cfg: AlertConfig,
    channel: String,
    metrics: Arc<Metrics>,
}

impl Delivery {
    /// Delivers queued alerts one by one until every `Alerter` handle is gone.
    async fn run(self, mut pending: mpsc::Receiver<ReloadNotice>) {
        while let Some(notice) = pending.recv().await {
            let (content_type, body) =
                render(self.cfg.sink, &message(&notice, self.cfg.additional_info.as_deref()));
            let result = post_with_retries(&self.client, &self.url, content_type, body, ALERT_BACKOFF).await;
            self.metrics.notification(&self.channel, result.is_ok());
            if let Err(error) = result {
                tracing::warn!(
                    sink = self.channel,
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
