//! Kubernetes Events on workloads: `Reloaded` (Normal) and `ReloadFail` (Warning), compat.md §10.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use reloader_core::model::{WorkloadKey, WorkloadKind};
use tracing::warn;

#[derive(Clone)]
pub struct EventPublisher {
    recorder: Recorder,
}

impl EventPublisher {
    pub fn new(client: Client, instance: String) -> Self {
        let reporter = Reporter { controller: "reloader".into(), instance: Some(instance) };
        EventPublisher { recorder: Recorder::new(client, reporter) }
    }

    pub async fn reloaded(&self, workload: &WorkloadKey, message: &str) {
        self.publish(workload, EventType::Normal, "Reloaded", "Reload", message).await;
    }

    pub async fn reload_failed(&self, workload: &WorkloadKey, message: &str) {
        self.publish(workload, EventType::Warning, "ReloadFail", "Reload", message).await;
    }

    pub async fn annotation_problem(&self, workload: &WorkloadKey, message: &str) {
        self.publish(workload, EventType::Warning, "InvalidAnnotation", "Validate", message).await;
    }

    async fn publish(
        &self,
        workload: &WorkloadKey,
        type_: EventType,
        reason: &str,
        action: &str,
        message: &str,
    ) {
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(truncate(message, 1024)),
            action: action.into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &object_reference(workload)).await {
            // An Event is a report, never a reason to fail or retry a reload.
            warn!(%workload, error = %e, reason, "could not record Kubernetes Event");
        }
    }
}

fn object_reference(key: &WorkloadKey) -> ObjectReference {
    let api_version = match key.kind {
        WorkloadKind::Deployment | WorkloadKind::DaemonSet | WorkloadKind::StatefulSet => "apps/v1",
        WorkloadKind::CronJob | WorkloadKind::Job => "batch/v1",
        WorkloadKind::Rollout => "argoproj.io/v1alpha1",
        WorkloadKind::DeploymentConfig => "apps.openshift.io/v1",
    };
    ObjectReference {
        api_version: Some(api_version.into()),
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
