use std::time::Duration;

use super::Metrics;

/// Every sample name compat.md §11 requires, as Prometheus sees it after a scrape.
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
    metrics.reconcile("success", Duration::from_millis(3));
    metrics.action("Deployment", "success", Duration::from_millis(20));
    metrics.skipped("ignored");
    metrics.workqueue_depth(4);
    metrics.workqueue_add();
    metrics.workqueue_latency(Duration::from_millis(1));
    metrics.error("conflict");
    metrics.retry();
    metrics.event_received("update", "configmap");
    metrics.event_processed("update", "configmap", "success");
    metrics.workloads_scanned("Deployment", 5);
    metrics.workloads_matched("Deployment", 2);
    metrics.set_leader(true);
    metrics.leader_transition();
    metrics.set_index_sizes(10, 3);
    metrics.reload_latency(Duration::from_millis(150));
    metrics.coalesced(2);
    metrics.rate_limit_wait(Duration::from_millis(20));
    metrics.notification("alert-slack", false);
    metrics.dry_run_write("StatefulSet");
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
    metrics.action("Deployment", "success", Duration::from_millis(30));
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
