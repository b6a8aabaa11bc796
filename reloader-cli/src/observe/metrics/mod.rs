//! Prometheus metrics, exposed on `/metrics`.
//!
//! The names and labels of Stakater Reloader's metrics (docs/compatibility.md §11) are kept exactly, so
//! dashboards and alerts written for it keep working; our own metrics are added beside them.
//! The exposition format is OpenMetrics text: counters are registered without their `_total`
//! suffix because the encoder appends it to the sample names.

use std::sync::Arc;
use std::time::Duration;

use reloader_core::model::{ResourceKind, WorkloadKind};

use prometheus_client::encoding::text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};

use self::labels::{
    ActionLabels, AdmissionLabels, BuildLabels, ChannelLabels, EventLabels, KindLabels, ProcessedEventLabels,
    ReasonLabels, ResultLabels, SuccessLabels, SuccessNamespaceLabels, TypeLabels, VerbatimCounter,
    WorkloadKindLabels,
};

mod labels;
mod values;

pub(crate) use self::values::{
    ActionResult, AdmissionOperation, AdmissionOutcome, ErrorType, EventType, NotificationChannel,
    ProcessResult, SkipReason,
};

/// Bucket bounds in seconds for every latency histogram: from a millisecond (a cached decision)
/// to a minute (a write stuck behind API-server throttling or retries).
const LATENCY_BUCKETS: [f64; 15] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Every metric the controller exports, and the registry that encodes them.
pub(crate) struct Metrics {
    registry: Registry,
    reload_executed: Family<SuccessLabels, Counter>,
    reload_executed_by_namespace: Option<Family<SuccessNamespaceLabels, VerbatimCounter>>,
    reconcile_total: Family<ResultLabels, Counter>,
    reconcile_duration: HistogramFamily<ResultLabels>,
    action_total: Family<ActionLabels, Counter>,
    action_latency: HistogramFamily<WorkloadKindLabels>,
    skipped: Family<ReasonLabels, Counter>,
    workqueue_depth: Gauge,
    workqueue_adds: Counter,
    workqueue_latency: Histogram,
    errors: Family<TypeLabels, Counter>,
    retries: Counter,
    events_received: Family<EventLabels, Counter>,
    events_processed: Family<ProcessedEventLabels, Counter>,
    workloads_scanned: Family<KindLabels, Counter>,
    workloads_matched: Family<KindLabels, Counter>,
    leader: Gauge,
    leader_transitions: Counter,
    index_objects: Family<KindLabels, Gauge>,
    reload_latency: Histogram,
    coalesced: Counter,
    rate_limit_wait: Histogram,
    notifications: Family<ChannelLabels, Counter>,
    dry_run_writes: Family<WorkloadKindLabels, Counter>,
    admission_requests: Family<AdmissionLabels, Counter>,
    admission_duration: Histogram,
}

impl Metrics {
    /// Builds and registers every metric. `count_by_namespace` adds
    /// `reloader_reload_executed_total_by_namespace` (`METRICS_COUNT_BY_NAMESPACE=enabled`).
    pub(crate) fn new(count_by_namespace: bool) -> Arc<Self> {
        let mut registry = Registry::default();

        let reload_executed = Family::<SuccessLabels, Counter>::default();
        registry.register(
            "reloader_reload_executed",
            "Reloads executed, by whether the write succeeded",
            reload_executed.clone(),
        );
        // Both series exist from the start so that rate() and absent() queries work before the
        // first reload, as with Stakater.
        for success in ["true", "false"] {
            let _ = reload_executed.get_or_create(&SuccessLabels { success });
        }

        let reload_executed_by_namespace = count_by_namespace.then(|| {
            let family = Family::<SuccessNamespaceLabels, VerbatimCounter>::default();
            registry.register(
                "reloader_reload_executed_total_by_namespace",
                "Reloads executed, by whether the write succeeded and by namespace",
                family.clone(),
            );
            family
        });

        let reconcile_total = Family::<ResultLabels, Counter>::default();
        registry.register(
            "reloader_reconcile",
            "Reconciles of a changed resource, by result",
            reconcile_total.clone(),
        );
        let reconcile_duration = HistogramFamily::<ResultLabels>::new_with_constructor(latency_histogram);
        registry.register_with_unit(
            "reloader_reconcile_duration",
            "Time to reconcile a changed resource against its workloads, by result",
            Unit::Seconds,
            reconcile_duration.clone(),
        );

        let action_total = Family::<ActionLabels, Counter>::default();
        registry.register(
            "reloader_action",
            "Workload writes, by workload kind and result",
            action_total.clone(),
        );
        let action_latency = HistogramFamily::<WorkloadKindLabels>::new_with_constructor(latency_histogram);
        registry.register_with_unit(
            "reloader_action_latency",
            "Time taken by one workload write, by workload kind",
            Unit::Seconds,
            action_latency.clone(),
        );

        let skipped = Family::<ReasonLabels, Counter>::default();
        registry.register("reloader_skipped", "Reloads not performed, by reason", skipped.clone());

        let workqueue_depth = Gauge::default();
        registry.register(
            "reloader_workqueue_depth",
            "Items waiting in the work queue",
            workqueue_depth.clone(),
        );
        let workqueue_adds = Counter::default();
        registry.register("reloader_workqueue_adds", "Items added to the work queue", workqueue_adds.clone());
        let workqueue_latency = latency_histogram();
        registry.register_with_unit(
            "reloader_workqueue_latency",
            "Time an item waits in the work queue before it is processed",
            Unit::Seconds,
            workqueue_latency.clone(),
        );

        let errors = Family::<TypeLabels, Counter>::default();
        registry.register("reloader_errors", "Errors, by type", errors.clone());
        let retries = Counter::default();
        registry.register("reloader_retries", "Retried workload writes", retries.clone());

        let events_received = Family::<EventLabels, Counter>::default();
        registry.register(
            "reloader_events_received",
            "Watch events received, by event type and resource type",
            events_received.clone(),
        );
        let events_processed = Family::<ProcessedEventLabels, Counter>::default();
        registry.register(
            "reloader_events_processed",
            "Watch events processed, by event type, resource type and result",
            events_processed.clone(),
        );

        let workloads_scanned = Family::<KindLabels, Counter>::default();
        registry.register(
            "reloader_workloads_scanned",
            "Workloads considered for a changed resource, by kind",
            workloads_scanned.clone(),
        );
        let workloads_matched = Family::<KindLabels, Counter>::default();
        registry.register(
            "reloader_workloads_matched",
            "Workloads found to need a reload, by kind",
            workloads_matched.clone(),
        );

        let leader = Gauge::default();
        registry.register("reloader_leader", "1 while this replica holds the leader lease", leader.clone());
        let leader_transitions = Counter::default();
        registry.register(
            "reloader_leader_transitions",
            "Times this replica gained or lost leadership",
            leader_transitions.clone(),
        );
        let index_objects = Family::<KindLabels, Gauge>::default();
        registry.register(
            "reloader_index_objects",
            "Entries in the in-memory index, by kind (resources, workloads)",
            index_objects.clone(),
        );
        let reload_latency = latency_histogram();
        registry.register_with_unit(
            "reloader_reload_latency",
            "Time from the watch event of a changed resource to the accepted workload write",
            Unit::Seconds,
            reload_latency.clone(),
        );
        let coalesced = Counter::default();
        registry.register(
            "reloader_coalesced_reloads",
            "Reloads absorbed by a pending write to the same workload",
            coalesced.clone(),
        );
        let rate_limit_wait = latency_histogram();
        registry.register(
            "reloader_write_rate_limit_wait_seconds",
            "Time writes waited for --max-writes-per-second before being sent",
            rate_limit_wait.clone(),
        );
        let notifications = Family::<ChannelLabels, Counter>::default();
        registry.register(
            "reloader_notifications",
            "Alerts and webhook notifications sent, by channel and success",
            notifications.clone(),
        );
        let dry_run_writes = Family::<WorkloadKindLabels, Counter>::default();
        registry.register(
            "reloader_dry_run_writes",
            "Workload writes that dry-run mode did not perform, by workload kind",
            dry_run_writes.clone(),
        );
        let admission_requests = Family::<AdmissionLabels, Counter>::default();
        registry.register(
            "reloader_admission_requests",
            "Admission webhook reviews, by operation and result (patched, unchanged, skipped, dry_run, error)",
            admission_requests.clone(),
        );
        let admission_duration = latency_histogram();
        registry.register_with_unit(
            "reloader_admission_duration",
            "Time to answer one admission review, from its body read to its response built",
            Unit::Seconds,
            admission_duration.clone(),
        );
        registry.register(
            "reloader_build",
            "Build information",
            Info::new(BuildLabels { version: env!("CARGO_PKG_VERSION") }),
        );

        Arc::new(Self {
            registry,
            reload_executed,
            reload_executed_by_namespace,
            reconcile_total,
            reconcile_duration,
            action_total,
            action_latency,
            skipped,
            workqueue_depth,
            workqueue_adds,
            workqueue_latency,
            errors,
            retries,
            events_received,
            events_processed,
            workloads_scanned,
            workloads_matched,
            leader,
            leader_transitions,
            index_objects,
            reload_latency,
            coalesced,
            rate_limit_wait,
            notifications,
            dry_run_writes,
            admission_requests,
            admission_duration,
        })
    }

    /// The OpenMetrics text exposition of every metric, ending in `# EOF`.
    pub(crate) fn encode(&self) -> String {
        let mut out = String::with_capacity(8 * 1024);
        text::encode(&mut out, &self.registry).expect("encoding metrics into a String cannot fail");
        out
    }

    pub(crate) fn reload_executed(&self, success: bool, namespace: &str) {
        let success = bool_label(success);
        self.reload_executed.get_or_create(&SuccessLabels { success }).inc();
        if let Some(by_namespace) = &self.reload_executed_by_namespace {
            let labels = SuccessNamespaceLabels { success, namespace: namespace.to_owned() };
            by_namespace.get_or_create(&labels).0.inc();
        }
    }

    /// One workload write: `reloader_action_total` and `reloader_action_latency_seconds`.
    pub(crate) fn action(&self, workload_kind: WorkloadKind, result: ActionResult, latency: Duration) {
        let labels = ActionLabels { workload_kind: workload_kind.as_str(), result: result.as_label() };
        self.action_total.get_or_create(&labels).inc();
        let kind = WorkloadKindLabels { workload_kind: workload_kind.as_str() };
        self.action_latency.get_or_create(&kind).observe(latency.as_secs_f64());
    }

    pub(crate) fn skipped(&self, reason: SkipReason) {
        self.skipped.get_or_create(&ReasonLabels { reason: reason.as_label() }).inc();
    }

    pub(crate) fn workqueue_depth(&self, depth: i64) {
        self.workqueue_depth.set(depth);
    }

    pub(crate) fn workqueue_add(&self) {
        self.workqueue_adds.inc();
    }

    pub(crate) fn workqueue_latency(&self, latency: Duration) {
        self.workqueue_latency.observe(latency.as_secs_f64());
    }

    /// `reloader_errors_total{type}`.
    pub(crate) fn error(&self, error_type: ErrorType) {
        self.errors.get_or_create(&TypeLabels { r#type: error_type.as_label() }).inc();
    }

    pub(crate) fn retry(&self) {
        self.retries.inc();
    }

    pub(crate) fn event_received(&self, event_type: EventType, resource_type: ResourceKind) {
        let labels = EventLabels { event_type: event_type.as_label(), resource_type: resource_type.plural() };
        self.events_received.get_or_create(&labels).inc();
    }

    /// One watch event processed against its workloads: `reloader_events_processed_total`, and
    /// `reloader_reconcile_total` / `reloader_reconcile_duration_seconds` with the result that
    /// `result` amounts to. `duration` runs from the event's arrival.
    pub(crate) fn event_processed(
        &self,
        event_type: EventType,
        resource_type: ResourceKind,
        result: ProcessResult,
        duration: Duration,
    ) {
        let labels = ProcessedEventLabels {
            event_type: event_type.as_label(),
            resource_type: resource_type.plural(),
            result: result.as_label(),
        };
        self.events_processed.get_or_create(&labels).inc();
        let reconciled = ResultLabels { result: result.reconcile_result().as_label() };
        self.reconcile_total.get_or_create(&reconciled).inc();
        self.reconcile_duration.get_or_create(&reconciled).observe(duration.as_secs_f64());
    }

    pub(crate) fn workloads_scanned(&self, kind: WorkloadKind, n: u64) {
        self.workloads_scanned.get_or_create(&KindLabels { kind: kind.as_str() }).inc_by(n);
    }

    pub(crate) fn workloads_matched(&self, kind: WorkloadKind, n: u64) {
        self.workloads_matched.get_or_create(&KindLabels { kind: kind.as_str() }).inc_by(n);
    }

    pub(crate) fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    pub(crate) fn leader_transition(&self) {
        self.leader_transitions.inc();
    }

    /// `reloader_index_objects{kind="resources"|"workloads"}`.
    pub(crate) fn set_index_sizes(&self, resources: u64, workloads: u64) {
        for (kind, n) in [("resources", resources), ("workloads", workloads)] {
            let value = i64::try_from(n).unwrap_or(i64::MAX);
            self.index_objects.get_or_create(&KindLabels { kind }).set(value);
        }
    }

    /// End-to-end latency: from the watch event of a changed resource to the accepted write.
    pub(crate) fn reload_latency(&self, latency: Duration) {
        self.reload_latency.observe(latency.as_secs_f64());
    }

    pub(crate) fn coalesced(&self, n: u64) {
        self.coalesced.inc_by(n);
    }

    /// `reloader_write_rate_limit_wait_seconds`: how long a write waited for the global rate limit.
    pub(crate) fn rate_limit_wait(&self, wait: Duration) {
        self.rate_limit_wait.observe(wait.as_secs_f64());
    }

    /// `reloader_notifications_total{channel, success}`; channel is e.g. `alert-slack`, `webhook`.
    pub(crate) fn notification(&self, channel: NotificationChannel, success: bool) {
        let labels = ChannelLabels { channel: channel.as_label(), success: bool_label(success) };
        self.notifications.get_or_create(&labels).inc();
    }

    pub(crate) fn dry_run_write(&self, workload_kind: WorkloadKind) {
        let labels = WorkloadKindLabels { workload_kind: workload_kind.as_str() };
        self.dry_run_writes.get_or_create(&labels).inc();
    }

    /// One admission review answered: `operation` is CREATE/UPDATE/..., `result` what was done.
    pub(crate) fn admission(
        &self,
        operation: AdmissionOperation,
        result: AdmissionOutcome,
        duration: Duration,
    ) {
        let labels = AdmissionLabels { operation: operation.as_label(), result: result.as_label() };
        self.admission_requests.get_or_create(&labels).inc();
        self.admission_duration.observe(duration.as_secs_f64());
    }
}

fn bool_label(value: bool) -> &'static str {
    if value { "true" } else { "false" }
}

#[cfg(test)]
mod tests;
