//! Prometheus metrics, exposed on `/metrics`.
//!
//! Every series Stakater Reloader v1.4.21 exports (docs/compatibility.md §11) is here with its
//! name, type, labels, label values and buckets, counted for the same things, so dashboards and
//! alerts written for it keep working: its own `reloader_*` series, client-go's
//! `rest_client_*` (recorded by a layer on every kube client) and the `process_*` series. Our
//! finer-grained values live in series of our own beside them; [`values`] maps one to the other.
//! The exposition format is OpenMetrics text: counters are registered without their `_total`
//! suffix because the encoder appends it to the sample names.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use reloader_core::model::WorkloadKind;

use prometheus_client::encoding::text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};

use self::labels::{
    ActionLabels, AdmissionLabels, AdmissionRejectionLabels, BuildLabels, ChannelLabels, EventLabels,
    EventOutcomeLabels, KindLabels, ProcessedEventLabels, ReasonLabels, RestLatencyLabels, RestRequestLabels,
    ResultLabels, SuccessLabels, SuccessNamespaceLabels, TypeLabels, VerbatimCounter, WorkloadKindLabels,
};
use self::values::{
    HttpVerb, ProcessedEventType, ProcessedResult, ReconcileResult, RequestCode, StakaterHandling,
    StakaterSkip,
};

mod labels;
mod process;
mod rest_client;
mod values;

pub(crate) use self::rest_client::RestClientMetricsLayer;
pub(crate) use self::values::{
    ActionResult, AdmissionOperation, AdmissionOutcome, AdmissionRejection, ErrorType, EventType,
    NotificationChannel, ProcessResult, ResourceType, SkipReason, SpanDropReason,
};

/// Bucket bounds in seconds for our own latency histograms: from a millisecond (a cached
/// decision) to a minute (a write stuck behind API-server throttling or retries).
const LATENCY_BUCKETS: [f64; 15] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// Stakater's buckets, histogram by histogram.
fn reconcile_histogram() -> Histogram {
    Histogram::new([0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0])
}

fn action_histogram() -> Histogram {
    Histogram::new([0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0])
}

fn workqueue_histogram() -> Histogram {
    Histogram::new([0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0])
}

/// client-go's request duration buckets, as Stakater registers them.
fn rest_client_histogram() -> Histogram {
    Histogram::new([0.001, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0])
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
    skip_reasons: Family<ReasonLabels, Counter>,
    workqueue_depth: Gauge,
    workqueue_adds: Counter,
    workqueue_latency: Histogram,
    errors: Family<TypeLabels, Counter>,
    error_types: Family<TypeLabels, Counter>,
    retries: Counter,
    events_received: Family<EventLabels, Counter>,
    events_processed: Family<ProcessedEventLabels, Counter>,
    event_outcomes: Family<EventOutcomeLabels, Counter>,
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
    admission_rejected: Family<AdmissionRejectionLabels, Counter>,
    rest_requests: Family<RestRequestLabels, Counter>,
    rest_latency: HistogramFamily<RestLatencyLabels>,
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
            "Handlings of a changed resource, by result (each counted twice, as Stakater does: the handler's result, then the queue's)",
            reconcile_total.clone(),
        );
        let reconcile_duration = HistogramFamily::<ResultLabels>::new_with_constructor(reconcile_histogram);
        registry.register_with_unit(
            "reloader_reconcile_duration",
            "Time to handle a changed resource against its workloads, by result",
            Unit::Seconds,
            reconcile_duration.clone(),
        );

        let action_total = Family::<ActionLabels, Counter>::default();
        registry.register(
            "reloader_action",
            "Workload writes, by workload kind and result",
            action_total.clone(),
        );
        let action_latency = HistogramFamily::<WorkloadKindLabels>::new_with_constructor(action_histogram);
        registry.register_with_unit(
            "reloader_action_latency",
            "Time taken by one workload write, by workload kind",
            Unit::Seconds,
            action_latency.clone(),
        );

        let skipped = Family::<ReasonLabels, Counter>::default();
        registry.register("reloader_skipped", "Skipped operations, by Stakater's reason", skipped.clone());
        let skip_reasons = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "reloader_skip_reasons",
            "Reloads not performed, by our detailed reason",
            skip_reasons.clone(),
        );

        let workqueue_depth = Gauge::default();
        registry.register(
            "reloader_workqueue_depth",
            "Items waiting in the work queue",
            workqueue_depth.clone(),
        );
        let workqueue_adds = Counter::default();
        registry.register("reloader_workqueue_adds", "Items added to the work queue", workqueue_adds.clone());
        let workqueue_latency = workqueue_histogram();
        registry.register_with_unit(
            "reloader_workqueue_latency",
            "Time an item waits in the work queue before it is processed",
            Unit::Seconds,
            workqueue_latency.clone(),
        );

        let errors = Family::<TypeLabels, Counter>::default();
        registry.register("reloader_errors", "Errors, by Stakater's type", errors.clone());
        let error_types = Family::<TypeLabels, Counter>::default();
        registry.register("reloader_error_types", "Errors, by our detailed type", error_types.clone());
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
            "Watch events handled, by resource type and result (event_type is always unknown, as in Stakater)",
            events_processed.clone(),
        );
        let event_outcomes = Family::<EventOutcomeLabels, Counter>::default();
        registry.register(
            "reloader_resource_events",
            "Watch events of ConfigMaps, Secrets and SecretProviderClassPodStatuses, by event type, resource type and outcome",
            event_outcomes.clone(),
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
        let admission_rejected = Family::<AdmissionRejectionLabels, Counter>::default();
        registry.register(
            "reloader_admission_rejected",
            "Requests to the admission webhook answered with an HTTP error, by reason (malformed, too_large, wrong_kind)",
            admission_rejected.clone(),
        );
        let rest_requests = Family::<RestRequestLabels, Counter>::default();
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            rest_requests.clone(),
        );
        let rest_latency = HistogramFamily::<RestLatencyLabels>::new_with_constructor(rest_client_histogram);
        registry.register_with_unit(
            "rest_client_request_duration",
            "Request latency in seconds. Broken down by verb and host.",
            Unit::Seconds,
            rest_latency.clone(),
        );
        registry.register(
            "reloader_trace_spans_dropped",
            "Finished trace spans not exported (queue full, export failed), by reason",
            TRACE_SPANS_DROPPED.clone(),
        );
        registry.register_collector(Box::new(process::ProcessCollector));
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
            skip_reasons,
            workqueue_depth,
            workqueue_adds,
            workqueue_latency,
            errors,
            error_types,
            retries,
            events_received,
            events_processed,
            event_outcomes,
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
            admission_rejected,
            rest_requests,
            rest_latency,
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

    /// One workload write: `reloader_action_total` and `reloader_action_latency_seconds`
    /// (nothing for a dry-run write, which is not sent).
    pub(crate) fn action(&self, workload_kind: WorkloadKind, result: ActionResult, latency: Duration) {
        let Some(result) = result.as_label() else { return };
        let labels = ActionLabels { workload_kind: workload_kind.as_str(), result };
        self.action_total.get_or_create(&labels).inc();
        let kind = WorkloadKindLabels { workload_kind: workload_kind.as_str() };
        self.action_latency.get_or_create(&kind).observe(latency.as_secs_f64());
    }

    /// A workload not reloaded: `reloader_skip_reasons_total{reason}`, and Stakater's
    /// `reloader_skipped_total` where Stakater counts the same case.
    pub(crate) fn skipped(&self, reason: SkipReason) {
        self.skip_reasons.get_or_create(&ReasonLabels { reason: reason.as_label() }).inc();
        if let Some(stakater) = reason.stakater() {
            self.stakater_skipped(stakater);
        }
    }

    /// Workloads a rule selected but that needed no write and never reached a decision of ours
    /// (`Index::selected_but_unused`, or a sync-after-restart sweep): Stakater's
    /// `strategy_not_updated`.
    pub(crate) fn strategy_not_updated(&self, count: u64) {
        if count > 0 {
            let labels = ReasonLabels { reason: StakaterSkip::StrategyNotUpdated.as_label() };
            self.skipped.get_or_create(&labels).inc_by(count);
        }
    }

    fn stakater_skipped(&self, reason: StakaterSkip) {
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

    /// `reloader_error_types_total{type}`, and Stakater's `reloader_errors_total` where Stakater
    /// counts the same failure.
    pub(crate) fn error(&self, error_type: ErrorType) {
        self.error_types.get_or_create(&TypeLabels { r#type: error_type.as_label() }).inc();
        if let Some(stakater) = error_type.stakater() {
            self.errors.get_or_create(&TypeLabels { r#type: stakater.as_label() }).inc();
        }
    }

    pub(crate) fn retry(&self) {
        self.retries.inc();
    }

    /// A watch event (the initial list included, as `add`), Stakater's
    /// `reloader_events_received_total`.
    pub(crate) fn event_received(&self, event_type: EventType, resource_type: impl Into<ResourceType>) {
        let labels = EventLabels {
            event_type: event_type.informer().as_label(),
            resource_type: resource_type.into().as_label(),
        };
        self.events_received.get_or_create(&labels).inc();
    }

    /// What became of one ConfigMap/Secret/SecretProviderClassPodStatus event:
    /// `reloader_resource_events_total{outcome}` (ours), and what Stakater's controller records
    /// for the same event (see [`StakaterHandling`]). `duration` runs from the event's arrival.
    pub(crate) fn event_processed(
        &self,
        event_type: EventType,
        resource_type: impl Into<ResourceType>,
        result: ProcessResult,
        duration: Duration,
    ) {
        let resource_type = resource_type.into().as_label();
        let labels = EventOutcomeLabels {
            event_type: event_type.as_label(),
            resource_type,
            outcome: result.as_label(),
        };
        self.event_outcomes.get_or_create(&labels).inc();
        match result.stakater() {
            StakaterHandling::Handled { result, skip } => {
                if let Some(reason) = skip {
                    self.stakater_skipped(reason);
                }
                // Stakater's handler records its result, then its queue worker records success.
                for reconciled in [result, ReconcileResult::Success] {
                    let labels = ResultLabels { result: reconciled.as_label() };
                    self.reconcile_total.get_or_create(&labels).inc();
                    self.reconcile_duration.get_or_create(&labels).observe(duration.as_secs_f64());
                }
                let labels = ProcessedEventLabels {
                    event_type: ProcessedEventType::Unknown.as_label(),
                    resource_type,
                    result: ProcessedResult::Success.as_label(),
                };
                self.events_processed.get_or_create(&labels).inc();
            }
            StakaterHandling::Filtered => self.stakater_skipped(StakaterSkip::IgnoredOrNotSelected),
            StakaterHandling::NotQueued => {}
        }
    }

    /// Creates the scanned/matched series of each enabled kind at zero, as Stakater's first
    /// handled event does for every kind it lists.
    pub(crate) fn workload_kinds(&self, kinds: impl IntoIterator<Item = WorkloadKind>) {
        for kind in kinds {
            let _ = self.workloads_scanned.get_or_create(&KindLabels { kind: kind.as_str() });
            let _ = self.workloads_matched.get_or_create(&KindLabels { kind: kind.as_str() });
        }
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
        if channel == NotificationChannel::Webhook && !success {
            // Stakater's handler fails when its webhook POST fails.
            self.errors
                .get_or_create(&TypeLabels { r#type: values::StakaterError::HandlerError.as_label() })
                .inc();
        }
    }

    pub(crate) fn dry_run_write(&self, workload_kind: WorkloadKind) {
        let labels = WorkloadKindLabels { workload_kind: workload_kind.as_str() };
        self.dry_run_writes.get_or_create(&labels).inc();
    }

    /// One API request answered (or failed): `rest_client_requests_total`.
    fn rest_client_request(&self, code: RequestCode, method: HttpVerb, host: &str) {
        let labels = RestRequestLabels { code, method, host: host.to_owned() };
        self.rest_requests.get_or_create(&labels).inc();
    }

    /// One API request's duration, its body read: `rest_client_request_duration_seconds`.
    fn rest_client_latency(&self, verb: HttpVerb, host: &str, duration: Duration) {
        let labels = RestLatencyLabels { verb, host: host.to_owned() };
        self.rest_latency.get_or_create(&labels).observe(duration.as_secs_f64());
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

    /// A request to the webhook answered with an HTTP error instead of a review.
    pub(crate) fn admission_rejected(&self, reason: AdmissionRejection) {
        let labels = AdmissionRejectionLabels { reason: reason.as_label() };
        self.admission_rejected.get_or_create(&labels).inc();
    }
}

fn bool_label(value: bool) -> &'static str {
    if value { "true" } else { "false" }
}

/// Spans the trace pipeline dropped. Process-wide, like the pipeline itself (installed before
/// any [`Metrics`] exists); every registry exposes it.
static TRACE_SPANS_DROPPED: LazyLock<Family<ReasonLabels, Counter>> = LazyLock::new(Family::default);

/// Counts `spans` dropped by the trace pipeline for `reason`.
pub(crate) fn trace_spans_dropped(reason: SpanDropReason, spans: u64) {
    TRACE_SPANS_DROPPED.get_or_create(&ReasonLabels { reason: reason.as_label() }).inc_by(spans);
}

#[cfg(test)]
mod tests;
