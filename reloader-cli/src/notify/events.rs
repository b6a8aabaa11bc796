//! Kubernetes Events on workloads: `Reloaded` (Normal), `ReloadFail` and `InvalidAnnotation`
//! (Warning), docs/compatibility.md §10.

use async_trait::async_trait;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use reloader_core::model::WorkloadKey;
use tracing::warn;

/// Why an Event is recorded: its `reason`, its type and its `action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventReason {
    /// A workload was reloaded (Normal).
    Reloaded,
    /// A reload or a resume after a pause period failed (Warning).
    ReloadFail,
    /// A workload's reloader annotation cannot be understood (Warning).
    InvalidAnnotation,
}

impl EventReason {
    pub(crate) fn as_label(self) -> &'static str {
        match self {
            EventReason::Reloaded => "Reloaded",
            EventReason::ReloadFail => "ReloadFail",
            EventReason::InvalidAnnotation => "InvalidAnnotation",
        }
    }

    fn event_type(self) -> EventType {
        match self {
            EventReason::Reloaded => EventType::Normal,
            EventReason::ReloadFail | EventReason::InvalidAnnotation => EventType::Warning,
        }
    }

    fn action(self) -> &'static str {
        match self {
            EventReason::Reloaded | EventReason::ReloadFail => "Reload",
            EventReason::InvalidAnnotation => "Validate",
        }
    }
}

/// Where Events on workloads go. Recording is best effort: an Event is a report, never a
/// reason to fail or retry a reload, so there is no error to return.
#[async_trait]
pub(crate) trait EventSink: Send + Sync {
    async fn publish(&self, workload: &WorkloadKey, reason: EventReason, message: &str);
}

/// Events recorded through the API server (events.k8s.io), reported by this replica.
pub(crate) struct EventPublisher {
    recorder: Recorder,
}

impl EventPublisher {
    pub(crate) fn new(client: Client, instance: String) -> Self {
        let reporter = Reporter { controller: "reloader".into(), instance: Some(instance) };
        EventPublisher { recorder: Recorder::new(client, reporter) }
    }
}

#[async_trait]
impl EventSink for EventPublisher {
    async fn publish(&self, workload: &WorkloadKey, reason: EventReason, message: &str) {
        let event = Event {
            type_: reason.event_type(),
            reason: reason.as_label().into(),
            note: Some(truncate(message, 1024)),
            action: reason.action().into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &object_reference(workload)).await {
            warn!(%workload, error = %e, reason = reason.as_label(), "could not record Kubernetes Event");
        }
    }
}

fn object_reference(key: &WorkloadKey) -> ObjectReference {
    ObjectReference {
        api_version: Some(crate::kinds::info(key.kind).api_version()),
        kind: Some(key.kind.as_str().into()),
        namespace: Some(key.namespace.to_string()),
        name: Some(key.name.to_string()),
        ..Default::default()
    }
}

/// Cuts `s` to at most `max` bytes (the API server counts bytes), the ellipsis included.
fn truncate(s: &str, max: usize) -> String {
    const ELLIPSIS: char = '…';
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub(ELLIPSIS.len_utf8());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{ELLIPSIS}", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::truncate;

    #[test]
    fn truncated_notes_fit_the_api_limit_with_their_ellipsis() {
        let short = "fits";
        assert_eq!(truncate(short, 1024), short);
        for text in ["x".repeat(2000), "é".repeat(1500)] {
            let cut = truncate(&text, 1024);
            assert!(cut.len() <= 1024, "{} bytes", cut.len());
            assert!(cut.ends_with('…'));
        }
    }
}
