use std::time::Duration;

use reloader_core::decide::SkipReason as DecideSkip;
use reloader_core::model::{ResourceKind, WorkloadKind};
use reloader_core::options::AlertSink;

use super::*;

/// Every sample name docs/compatibility.md §11 requires, as Prometheus sees it after a scrape.
const COMPAT_SAMPLES: &[&str] = &[
    "reloader_reload_executed_total{",
    "reloader_reconcile_total{",
    "reloader_reconcile_duration_seconds_bucket{",
    "reloader_action_total{",
    "reloader_action_latency_seconds_bucket{",
    "reloader_skipped_total{",
    "reloader_workqueue_depth ",
    "reloader_workqueue_adds_total ",
    "reloader_workqueue_latency_seconds_bucket{",
    "reloader_errors_total{",
    "reloader_retries_total ",
    "reloader_events_received_total{",
    "reloader_events_processed_total{",
    "reloader_workloads_scanned_total{",
    "reloader_workloads_matched_total{",
];

fn touch_every_metric(metrics: &Metrics) {
    metrics.reload_executed(true, "team-a");
    metrics.action(WorkloadKind::Deployment, ActionResult::Success, Duration::from_millis(20));
    metrics.skipped(SkipReason::Decision(DecideSkip::ResourceIgnored));
    metrics.workqueue_depth(4);
    metrics.workqueue_add();
    metrics.workqueue_latency(Duration::from_millis(1));
    metrics.error(ErrorType::Conflict);
    metrics.retry();
    metrics.event_received(EventType::Update, ResourceKind::ConfigMap);
    metrics.event_processed(
        EventType::Update,
        ResourceKind::ConfigMap,
        ProcessResult::Queued,
        Duration::from_millis(3),
    );
    metrics.workloads_scanned(WorkloadKind::Deployment, 5);
    metrics.workloads_matched(WorkloadKind::Deployment, 2);
    metrics.set_leader(true);
    metrics.leader_transition();
    metrics.set_index_sizes(10, 3);
    metrics.reload_latency(Duration::from_millis(150));
    metrics.coalesced(2);
    metrics.rate_limit_wait(Duration::from_millis(20));
    metrics.notification(NotificationChannel::Alert(AlertSink::Slack), false);
    metrics.dry_run_write(WorkloadKind::StatefulSet);
}

fn sample_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|line| !line.starts_with('#')).collect()
}

#[test]
fn every_compat_metric_name_is_exported_once_recorded() {
    let metrics = Metrics::new(false);
    touch_every_metric(&metrics);
    let text = metrics.encode();
    for name in COMPAT_SAMPLES {
        assert!(sample_lines(&text).iter().any(|line| line.starts_with(name)), "{name} missing in:\n{text}");
    }
    assert!(text.ends_with("# EOF\n"));
}

#[test]
fn our_own_metrics_are_exported() {
    let metrics = Metrics::new(false);
    touch_every_metric(&metrics);
    let text = metrics.encode();
    for line in [
        "reloader_leader 1",
        "reloader_leader_transitions_total 1",
        "reloader_index_objects{kind=\"resources\"} 10",
        "reloader_index_objects{kind=\"workloads\"} 3",
        "reloader_reload_latency_seconds_count 1",
        "reloader_coalesced_reloads_total 2",
        "reloader_write_rate_limit_wait_seconds_count 1",
        "reloader_notifications_total{channel=\"alert-slack\",success=\"false\"} 1",
        "reloader_dry_run_writes_total{workload_kind=\"StatefulSet\"} 1",
        "reloader_workloads_scanned_total{kind=\"Deployment\"} 5",
        "reloader_errors_total{type=\"conflict\"} 1",
        "reloader_reconcile_total{result=\"success\"} 1",
        "reloader_reconcile_duration_seconds_count{result=\"success\"} 1",
        "reloader_events_processed_total{event_type=\"update\",resource_type=\"configmaps\",result=\"queued\"} 1",
        "reloader_skipped_total{reason=\"resource_ignored\"} 1",
    ] {
        assert!(sample_lines(&text).contains(&line), "{line:?} missing in:\n{text}");
    }
}

#[test]
fn both_success_series_exist_before_any_reload() {
    let text = Metrics::new(false).encode();
    let samples = sample_lines(&text);
    assert!(samples.contains(&"reloader_reload_executed_total{success=\"true\"} 0"), "{text}");
    assert!(samples.contains(&"reloader_reload_executed_total{success=\"false\"} 0"), "{text}");
}

#[test]
fn reload_executed_counts_by_outcome() {
    let metrics = Metrics::new(false);
    metrics.reload_executed(true, "a");
    metrics.reload_executed(true, "b");
    metrics.reload_executed(false, "a");
    let text = metrics.encode();
    let samples = sample_lines(&text);
    assert!(samples.contains(&"reloader_reload_executed_total{success=\"true\"} 2"), "{text}");
    assert!(samples.contains(&"reloader_reload_executed_total{success=\"false\"} 1"), "{text}");
}

#[test]
fn by_namespace_series_only_when_enabled() {
    let disabled = Metrics::new(false);
    disabled.reload_executed(true, "team-a");
    assert!(!disabled.encode().contains("by_namespace"));

    let enabled = Metrics::new(true);
    enabled.reload_executed(true, "team-a");
    enabled.reload_executed(true, "team-a");
    enabled.reload_executed(false, "team-b");
    let text = enabled.encode();
    let samples = sample_lines(&text);
    // The sample name is Stakater's, verbatim: no `_total` appended after `_by_namespace`.
    assert!(
        samples.contains(
            &"reloader_reload_executed_total_by_namespace{success=\"true\",namespace=\"team-a\"} 2"
        ),
        "{text}"
    );
    assert!(
        samples.contains(
            &"reloader_reload_executed_total_by_namespace{success=\"false\",namespace=\"team-b\"} 1"
        ),
        "{text}"
    );
}

#[test]
fn latency_histograms_put_observations_in_second_buckets() {
    let metrics = Metrics::new(false);
    metrics.action(WorkloadKind::Deployment, ActionResult::Success, Duration::from_millis(30));
    let text = metrics.encode();
    let samples = sample_lines(&text);
    assert!(
        samples
            .contains(&"reloader_action_latency_seconds_bucket{le=\"0.025\",workload_kind=\"Deployment\"} 0"),
        "{text}"
    );
    assert!(
        samples
            .contains(&"reloader_action_latency_seconds_bucket{le=\"0.05\",workload_kind=\"Deployment\"} 1"),
        "{text}"
    );
}

/// Dashboards and alerts match these values: they must never change.
#[test]
fn label_values_are_the_published_ones() {
    let cases: Vec<(&str, &str)> = vec![
        (SkipReason::NotLeader.as_label(), "not_leader"),
        (SkipReason::WorkloadGone.as_label(), "workload_gone"),
        (SkipReason::NamespaceOutOfScope.as_label(), "namespace_out_of_scope"),
        (SkipReason::Decision(DecideSkip::AlreadyCurrent).as_label(), "already_current"),
        (SkipReason::Decision(DecideSkip::ResourceIgnored).as_label(), "resource_ignored"),
        (EventType::Create.as_label(), "create"),
        (EventType::Update.as_label(), "update"),
        (EventType::Delete.as_label(), "delete"),
        (ProcessResult::Queued.as_label(), "queued"),
        (ProcessResult::NoMatch.as_label(), "no_match"),
        (ProcessResult::NoContentChange.as_label(), "no_content_change"),
        (ProcessResult::ReloadOnDeleteDisabled.as_label(), "reload_on_delete_disabled"),
        (ProcessResult::NamespaceOutOfScope.as_label(), "namespace_out_of_scope"),
        (ProcessResult::Ignored.as_label(), "ignored"),
        (ProcessResult::Webhook.as_label(), "webhook"),
        (values::ReconcileResult::Success.as_label(), "success"),
        (values::ReconcileResult::Skipped.as_label(), "skipped"),
        (ErrorType::Watch.as_label(), "watch"),
        (ErrorType::Forbidden.as_label(), "forbidden"),
        (ErrorType::Conflict.as_label(), "conflict"),
        (ErrorType::Api.as_label(), "api"),
        (ErrorType::Transport.as_label(), "transport"),
        (ErrorType::Workload.as_label(), "workload"),
        (ErrorType::Patch.as_label(), "patch"),
        (ErrorType::JobRecreate.as_label(), "job_recreate"),
        (ActionResult::Success.as_label(), "success"),
        (ActionResult::Error.as_label(), "error"),
        (ActionResult::DryRun.as_label(), "dry_run"),
        (NotificationChannel::Webhook.as_label(), "webhook"),
        (NotificationChannel::Alert(AlertSink::Slack).as_label(), "alert-slack"),
        (NotificationChannel::Alert(AlertSink::Teams).as_label(), "alert-teams"),
        (NotificationChannel::Alert(AlertSink::GoogleChat).as_label(), "alert-gchat"),
        (NotificationChannel::Alert(AlertSink::Raw).as_label(), "alert-raw"),
        (AdmissionOperation::Create.as_label(), "CREATE"),
        (AdmissionOperation::Update.as_label(), "UPDATE"),
        (AdmissionOperation::Delete.as_label(), "DELETE"),
        (AdmissionOperation::Connect.as_label(), "CONNECT"),
        (AdmissionOperation::Unknown.as_label(), "unknown"),
        (AdmissionOutcome::Patched.as_label(), "patched"),
        (AdmissionOutcome::Unchanged.as_label(), "unchanged"),
        (AdmissionOutcome::Skipped.as_label(), "skipped"),
        (AdmissionOutcome::DryRun.as_label(), "dry_run"),
        (AdmissionOutcome::Error.as_label(), "error"),
    ];
    for (label, expected) in cases {
        assert_eq!(label, expected);
    }
}
