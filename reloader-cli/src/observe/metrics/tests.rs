use std::time::Duration;

use reloader_core::decide::SkipReason as DecideSkip;
use reloader_core::model::{ResourceKind, WorkloadKind};
use reloader_core::options::AlertSink;

use super::values::{HttpVerb, ProcessedEventType, ProcessedResult, RequestCode, StakaterSkip};
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
    metrics.writes().reload_executed(true, "team-a");
    metrics.writes().action(WorkloadKind::Deployment, ActionResult::Success, Duration::from_millis(20));
    metrics.reconcile().skipped(SkipReason::Decision(DecideSkip::ResourceIgnored));
    metrics.reconcile().skipped(SkipReason::Decision(DecideSkip::AlreadyCurrent));
    metrics.writes().workqueue_depth(4);
    metrics.writes().workqueue_add();
    metrics.writes().workqueue_latency(Duration::from_millis(1));
    metrics.writes().error(ErrorType::Conflict);
    metrics.writes().retry();
    metrics.reconcile().event_received(EventType::Update, ResourceKind::ConfigMap);
    metrics.reconcile().event_processed(
        EventType::Update,
        ResourceKind::ConfigMap,
        ProcessResult::Queued,
        Duration::from_millis(3),
    );
    metrics.reconcile().workloads_scanned(WorkloadKind::Deployment, 5);
    metrics.reconcile().workloads_matched(WorkloadKind::Deployment, 2);
    metrics.leader().set_leader(true);
    metrics.leader().leader_transition();
    metrics.index_sizes_from(Box::new(|| (10, 3, 0)));
    metrics.writes().reload_latency(Duration::from_millis(150));
    metrics.writes().coalesced(2);
    metrics.writes().rate_limit_wait(Duration::from_millis(20));
    metrics.notify().notification(NotificationChannel::Alert(AlertSink::Slack), false);
    metrics.writes().dry_run_write(WorkloadKind::StatefulSet);
}

fn sample_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|line| !line.starts_with('#')).collect()
}

/// Every line of `expected` is a sample of the exposition.
fn assert_samples(metrics: &Metrics, expected: &[&str]) {
    let text = metrics.encode();
    for line in expected {
        assert!(sample_lines(&text).contains(line), "{line} missing in:\n{text}");
    }
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
    assert_samples(
        &metrics,
        &[
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
            "reloader_error_types_total{type=\"conflict\"} 1",
            "reloader_resource_events_total{event_type=\"update\",resource_type=\"configmaps\",outcome=\"queued\"} 1",
            "reloader_skip_reasons_total{reason=\"resource_ignored\"} 1",
        ],
    );
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
    metrics.writes().reload_executed(true, "a");
    metrics.writes().reload_executed(true, "b");
    metrics.writes().reload_executed(false, "a");
    let text = metrics.encode();
    let samples = sample_lines(&text);
    assert!(samples.contains(&"reloader_reload_executed_total{success=\"true\"} 2"), "{text}");
    assert!(samples.contains(&"reloader_reload_executed_total{success=\"false\"} 1"), "{text}");
}

#[test]
fn by_namespace_series_only_when_enabled() {
    let disabled = Metrics::new(false);
    disabled.writes().reload_executed(true, "team-a");
    assert!(!disabled.encode().contains("by_namespace"));

    let enabled = Metrics::new(true);
    enabled.writes().reload_executed(true, "team-a");
    enabled.writes().reload_executed(true, "team-a");
    enabled.writes().reload_executed(false, "team-b");
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
    metrics.writes().action(WorkloadKind::Deployment, ActionResult::Success, Duration::from_millis(30));
    let text = metrics.encode();
    let samples = sample_lines(&text);
    assert!(
        samples
            .contains(&"reloader_action_latency_seconds_bucket{le=\"0.01\",workload_kind=\"Deployment\"} 0"),
        "{text}"
    );
    assert!(
        samples
            .contains(&"reloader_action_latency_seconds_bucket{le=\"0.05\",workload_kind=\"Deployment\"} 1"),
        "{text}"
    );
}

/// Stakater's series for each outcome of one resource event, as v1.4.21's controller and
/// handlers record them (docs/compatibility.md §11).
#[test]
fn resource_event_outcomes_count_as_stakater_counts_them() {
    struct Case {
        result: ProcessResult,
        event: EventType,
        expected: &'static [&'static str],
    }
    const HANDLED: &[&str] = &[
        "reloader_reconcile_total{result=\"success\"} 2",
        "reloader_reconcile_duration_seconds_count{result=\"success\"} 2",
        "reloader_events_processed_total{event_type=\"unknown\",resource_type=\"secrets\",result=\"success\"} 1",
    ];
    let cases = [
        Case { result: ProcessResult::Queued, event: EventType::Update, expected: HANDLED },
        Case { result: ProcessResult::NoMatch, event: EventType::Create, expected: HANDLED },
        Case { result: ProcessResult::Ignored, event: EventType::Update, expected: HANDLED },
        Case { result: ProcessResult::Webhook, event: EventType::Delete, expected: HANDLED },
        Case {
            result: ProcessResult::NoContentChange,
            event: EventType::Update,
            expected: &[
                "reloader_reconcile_total{result=\"skipped\"} 1",
                "reloader_reconcile_total{result=\"success\"} 1",
                "reloader_reconcile_duration_seconds_count{result=\"skipped\"} 1",
                "reloader_reconcile_duration_seconds_count{result=\"success\"} 1",
                "reloader_skipped_total{reason=\"no_data_change\"} 1",
                "reloader_events_processed_total{event_type=\"unknown\",resource_type=\"secrets\",result=\"success\"} 1",
            ],
        },
        Case {
            result: ProcessResult::NamespaceOutOfScope,
            event: EventType::Update,
            expected: &["reloader_skipped_total{reason=\"ignored_or_not_selected\"} 1"],
        },
        Case { result: ProcessResult::InitialList, event: EventType::Create, expected: &[] },
        Case { result: ProcessResult::ListedAsCreated, event: EventType::Create, expected: HANDLED },
        Case {
            result: ProcessResult::ListedBeforeSync,
            event: EventType::Create,
            expected: &["reloader_skipped_total{reason=\"ignored_or_not_selected\"} 1"],
        },
        Case { result: ProcessResult::ReloadOnCreateDisabled, event: EventType::Create, expected: &[] },
        Case { result: ProcessResult::ReloadOnDeleteDisabled, event: EventType::Delete, expected: &[] },
    ];
    for case in cases {
        let metrics = Metrics::new(false);
        metrics.reconcile().event_processed(
            case.event,
            ResourceKind::Secret,
            case.result,
            Duration::from_millis(2),
        );
        let text = metrics.encode();
        let stakater: Vec<&str> = sample_lines(&text)
            .into_iter()
            .filter(|line| {
                ["reloader_reconcile_total", "reloader_skipped_total", "reloader_events_processed_total"]
                    .iter()
                    .any(|name| line.starts_with(name))
                    || line.starts_with("reloader_reconcile_duration_seconds_count")
            })
            .collect();
        let mut expected = case.expected.to_vec();
        expected.sort_unstable();
        let mut actual = stakater.clone();
        actual.sort_unstable();
        assert_eq!(actual, expected, "{:?}", case.result);
        let ours = format!(
            "reloader_resource_events_total{{event_type=\"{}\",resource_type=\"secrets\",outcome=\"{}\"}} 1",
            case.event.as_label(),
            case.result.as_label()
        );
        assert!(sample_lines(&text).contains(&ours.as_str()), "{ours} missing in:\n{text}");
    }
}

#[test]
fn skips_and_errors_also_count_in_stakater_series_where_stakater_counts_them() {
    let skips = [
        (SkipReason::Decision(DecideSkip::AlreadyCurrent), Some("strategy_not_updated")),
        (SkipReason::Decision(DecideSkip::NoContainers), Some("strategy_not_updated")),
        (SkipReason::Decision(DecideSkip::NoTemplate), Some("strategy_not_updated")),
        (SkipReason::Decision(DecideSkip::NotReferenced), Some("strategy_not_updated")),
        (SkipReason::Decision(DecideSkip::NotAnnotated), None),
        (SkipReason::Decision(DecideSkip::AutoDisabled), None),
        (SkipReason::Decision(DecideSkip::Excluded), None),
        (SkipReason::Decision(DecideSkip::ResourceIgnored), None),
        (SkipReason::Decision(DecideSkip::Suspended), None),
        (SkipReason::NotLeader, None),
        (SkipReason::WorkloadGone, None),
        (SkipReason::NamespaceOutOfScope, None),
    ];
    for (reason, stakater) in skips {
        let metrics = Metrics::new(false);
        metrics.reconcile().skipped(reason);
        let text = metrics.encode();
        let samples = sample_lines(&text);
        let ours = format!("reloader_skip_reasons_total{{reason=\"{}\"}} 1", reason.as_label());
        assert!(samples.contains(&ours.as_str()), "{ours} missing in:\n{text}");
        let theirs: Vec<&str> =
            samples.iter().copied().filter(|l| l.starts_with("reloader_skipped_total")).collect();
        let expected: Vec<String> =
            stakater.map(|r| format!("reloader_skipped_total{{reason=\"{r}\"}} 1")).into_iter().collect();
        assert_eq!(theirs, expected, "{reason:?}");
    }

    let errors = [
        (ErrorType::Watch, None),
        (ErrorType::Conflict, Some("handler_error")),
        (ErrorType::Forbidden, Some("handler_error")),
        (ErrorType::Transport, Some("handler_error")),
        (ErrorType::JobRecreate, Some("handler_error")),
    ];
    for (error, stakater) in errors {
        let metrics = Metrics::new(false);
        metrics.writes().error(error);
        let text = metrics.encode();
        let theirs: Vec<&str> =
            sample_lines(&text).into_iter().filter(|l| l.starts_with("reloader_errors_total")).collect();
        let expected: Vec<String> =
            stakater.map(|t| format!("reloader_errors_total{{type=\"{t}\"}} 1")).into_iter().collect();
        assert_eq!(theirs, expected, "{error:?}");
    }

    let metrics = Metrics::new(false);
    metrics.notify().notification(NotificationChannel::Webhook, false);
    metrics.notify().notification(NotificationChannel::Webhook, true);
    metrics.notify().notification(NotificationChannel::Alert(AlertSink::Slack), false);
    assert!(sample_lines(&metrics.encode()).contains(&"reloader_errors_total{type=\"handler_error\"} 1"));
}

#[test]
fn events_received_use_the_informer_values() {
    let metrics = Metrics::new(false);
    metrics.reconcile().event_received(EventType::Create, ResourceKind::ConfigMap);
    metrics.reconcile().event_received(EventType::Update, ResourceKind::SecretProviderClass);
    metrics.reconcile().event_received(EventType::Delete, ResourceType::Namespaces);
    assert_samples(
        &metrics,
        &[
            "reloader_events_received_total{event_type=\"add\",resource_type=\"configmaps\"} 1",
            "reloader_events_received_total{event_type=\"update\",resource_type=\"secretproviderclasspodstatuses\"} 1",
            "reloader_events_received_total{event_type=\"delete\",resource_type=\"namespaces\"} 1",
        ],
    );
}

#[test]
fn dry_run_writes_are_not_actions() {
    let metrics = Metrics::new(false);
    metrics.writes().action(WorkloadKind::Deployment, ActionResult::DryRun, Duration::from_millis(1));
    let text = metrics.encode();
    assert!(!text.contains("reloader_action_total{"), "{text}");
    assert!(!text.contains("reloader_action_latency_seconds_count{"), "{text}");
}

#[test]
fn enabled_kinds_start_at_zero() {
    let metrics = Metrics::new(false);
    metrics.reconcile().workload_kinds([WorkloadKind::Deployment, WorkloadKind::CronJob]);
    assert_samples(
        &metrics,
        &[
            "reloader_workloads_scanned_total{kind=\"Deployment\"} 0",
            "reloader_workloads_matched_total{kind=\"CronJob\"} 0",
        ],
    );
}

/// Stakater's buckets, histogram by histogram: a dashboard's `le` filters keep matching.
#[test]
fn histograms_have_stakaters_buckets() {
    let metrics = Metrics::new(false);
    metrics.writes().action(WorkloadKind::Deployment, ActionResult::Success, Duration::from_millis(30));
    metrics.reconcile().event_processed(
        EventType::Update,
        ResourceKind::ConfigMap,
        ProcessResult::Queued,
        Duration::ZERO,
    );
    metrics.writes().workqueue_latency(Duration::ZERO);
    metrics.rest_client().duration(HttpVerb::Get, "h:1", Duration::ZERO);
    let text = metrics.encode();
    let buckets = |prefix: &str| -> Vec<String> {
        sample_lines(&text)
            .into_iter()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| {
                l.split("le=\"").nth(1).and_then(|rest| rest.split('"').next()).map(str::to_owned)
            })
            .collect()
    };
    let cases: [(&str, &[&str]); 4] = [
        (
            "reloader_action_latency_seconds_bucket",
            &["0.01", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "30.0", "60.0", "+Inf"],
        ),
        (
            "reloader_reconcile_duration_seconds_bucket{",
            &[
                "0.001", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0",
                "+Inf",
            ],
        ),
        (
            "reloader_workqueue_latency_seconds_bucket",
            &["0.001", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "+Inf"],
        ),
        (
            "rest_client_request_duration_seconds_bucket",
            &["0.001", "0.01", "0.05", "0.1", "0.5", "1.0", "5.0", "10.0", "30.0", "+Inf"],
        ),
    ];
    for (prefix, expected) in cases {
        let mut found = buckets(prefix);
        found.dedup();
        assert_eq!(found, *expected, "{prefix}");
    }
}

#[test]
fn rest_client_series_have_client_go_labels() {
    let metrics = Metrics::new(false);
    metrics.rest_client().request(RequestCode::Status(200), HttpVerb::Get, "10.96.0.1:443");
    metrics.rest_client().request(RequestCode::Status(409), HttpVerb::Patch, "10.96.0.1:443");
    metrics.rest_client().request(RequestCode::Error, HttpVerb::Post, "10.96.0.1:443");
    metrics.rest_client().duration(HttpVerb::Delete, "10.96.0.1:443", Duration::from_millis(3));
    assert_samples(
        &metrics,
        &[
            "rest_client_requests_total{code=\"200\",method=\"GET\",host=\"10.96.0.1:443\"} 1",
            "rest_client_requests_total{code=\"409\",method=\"PATCH\",host=\"10.96.0.1:443\"} 1",
            "rest_client_requests_total{code=\"<error>\",method=\"POST\",host=\"10.96.0.1:443\"} 1",
            "rest_client_request_duration_seconds_count{verb=\"DELETE\",host=\"10.96.0.1:443\"} 1",
        ],
    );
}

#[test]
fn process_series_are_exported_with_plausible_values() {
    let text = Metrics::new(false).encode();
    let value = |name: &str| -> f64 {
        let line = sample_lines(&text)
            .into_iter()
            .find(|l| l.starts_with(name) && l.as_bytes().get(name.len()) == Some(&b' '))
            .unwrap_or_else(|| panic!("{name} missing in:\n{text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!(value("process_cpu_seconds_total") >= 0.0);
    assert!(value("process_resident_memory_bytes") > 1024.0 * 1024.0);
    assert!(value("process_virtual_memory_bytes") >= value("process_resident_memory_bytes"));
    assert!(value("process_open_fds") >= 3.0);
    assert!(value("process_max_fds") >= value("process_open_fds"));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let started = value("process_start_time_seconds");
    assert!(started > now - 24.0 * 3600.0 && started <= now + 1.0, "{started} vs {now}");
    assert!(text.contains("# TYPE process_cpu_seconds counter"), "{text}");
}

/// Dashboards and alerts match these values: they must never change.
#[test]
fn label_values_are_the_published_ones() {
    let cases: Vec<(&str, &str)> = vec![
        (StakaterSkip::IgnoredOrNotSelected.as_label(), "ignored_or_not_selected"),
        (StakaterSkip::NoDataChange.as_label(), "no_data_change"),
        (StakaterSkip::StrategyNotUpdated.as_label(), "strategy_not_updated"),
        (values::StakaterError::HandlerError.as_label(), "handler_error"),
        (values::InformerEvent::Add.as_label(), "add"),
        (values::InformerEvent::Update.as_label(), "update"),
        (values::InformerEvent::Delete.as_label(), "delete"),
        (ProcessedEventType::Unknown.as_label(), "unknown"),
        (ProcessedResult::Success.as_label(), "success"),
        (ResourceType::ConfigMaps.as_label(), "configmaps"),
        (ResourceType::Secrets.as_label(), "secrets"),
        (ResourceType::SecretProviderClassPodStatuses.as_label(), "secretproviderclasspodstatuses"),
        (ResourceType::Namespaces.as_label(), "namespaces"),
        (HttpVerb::Get.as_label(), "GET"),
        (HttpVerb::Patch.as_label(), "PATCH"),
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
        (ProcessResult::InitialList.as_label(), "initial_list"),
        (ProcessResult::ListedBeforeSync.as_label(), "listed_before_sync"),
        (ProcessResult::ListedAsCreated.as_label(), "listed_as_created"),
        (ProcessResult::ReloadOnCreateDisabled.as_label(), "reload_on_create_disabled"),
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
        (AdmissionOutcome::Allowed.as_label(), "allowed"),
        (AdmissionOutcome::Denied.as_label(), "denied"),
        (AdmissionRejection::Malformed.as_label(), "malformed"),
        (AdmissionRejection::TooLarge.as_label(), "too_large"),
        (AdmissionRejection::WrongKind.as_label(), "wrong_kind"),
    ];
    for (label, expected) in cases {
        assert_eq!(label, expected);
    }
    let actions = [
        (ActionResult::Success, Some("success")),
        (ActionResult::Error, Some("error")),
        (ActionResult::DryRun, None),
    ];
    for (result, expected) in actions {
        assert_eq!(result.as_label(), expected, "{result:?}");
    }
}

/// `reloader_index_objects` is read from the index at each scrape: a change between two scrapes
/// shows in the second, whatever list or event made it.
#[test]
fn index_sizes_are_read_at_scrape_time() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let metrics = Metrics::new(false);
    assert!(!metrics.encode().contains("reloader_index_objects"), "no index, no series");
    let workloads = Arc::new(AtomicU64::new(3));
    metrics.index_sizes_from(Box::new({
        let workloads = workloads.clone();
        move || (7, workloads.load(Ordering::Relaxed), workloads.load(Ordering::Relaxed) - 3)
    }));
    assert_samples(
        &metrics,
        &[
            "reloader_index_objects{kind=\"resources\"} 7",
            "reloader_index_objects{kind=\"workloads\"} 3",
            "reloader_reload_loops_stopped 0",
        ],
    );
    workloads.store(4, Ordering::Relaxed);
    assert_samples(
        &metrics,
        &["reloader_index_objects{kind=\"workloads\"} 4", "reloader_reload_loops_stopped 1"],
    );
    assert!(metrics.encode().contains("# TYPE reloader_index_objects gauge"));
}
