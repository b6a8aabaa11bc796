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

use prometheus_client::encoding::text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};

use self::labels::{
    ActionLabels, AdmissionLabels, AdmissionRejectionLabels, BuildLabels, ChannelLabels, EventLabels,
    EventOutcomeLabels, EvictionLabels, HoldLabels, KindLabels, ProcessedEventLabels, ReasonLabels,
    RestLatencyLabels, RestRequestLabels, RestartOutcomeLabels, ResultLabels, SuccessLabels,
    SuccessNamespaceLabels, TypeLabels, VerbatimCounter, WorkloadKindLabels,
};

mod admission;
mod counters;
mod evictions;
mod index;
mod labels;
mod leader;
mod notify;
mod process;
mod reconcile;
mod rest_client;
mod values;
mod watches;
mod writes;

pub(crate) use self::admission::AdmissionMetrics;
use self::counters::{ErrorCounters, EventsReceived, SkipCounters};
pub(crate) use self::evictions::EvictionMetrics;
pub(crate) use self::index::IndexSizes;
use self::index::IndexSizesCollector;
pub(crate) use self::leader::LeaderMetrics;
pub(crate) use self::notify::NotifyMetrics;
pub(crate) use self::reconcile::ReconcileMetrics;
pub(crate) use self::rest_client::{RestClientMetricsLayer, RestClientStats};
pub(crate) use self::values::{
    ActionResult, AdmissionOperation, AdmissionOutcome, AdmissionRejection, ErrorType, EventType,
    EvictionResult, NotificationChannel, ProcessResult, ResourceType, RestartOutcome, SkipReason,
    SpanDropReason,
};
pub(crate) use self::watches::WatchMetrics;
pub(crate) use self::writes::WriteMetrics;

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

/// The registry every metric is registered on, and each stage's handle to its own series.
pub(crate) struct Metrics {
    registry: Registry,
    reconcile: ReconcileMetrics,
    writes: WriteMetrics,
    watches: WatchMetrics,
    leader: LeaderMetrics,
    notify: NotifyMetrics,
    admission: AdmissionMetrics,
    evictions: EvictionMetrics,
    rest_client: RestClientStats,
    index_sizes: IndexSizesCollector,
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
        let index_sizes = IndexSizesCollector::default();
        registry.register_collector(Box::new(index_sizes.clone()));
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
        let held = Family::<HoldLabels, Gauge>::default();
        registry.register(
            "reloader_held_reloads",
            "Reloads held now by a workload's timing, by reason (delay, min-interval, maintenance-window)",
            held.clone(),
        );
        let held_total = Family::<HoldLabels, Counter>::default();
        registry.register(
            "reloader_holds",
            "Reloads that a workload's timing held, by reason (delay, min-interval, maintenance-window)",
            held_total.clone(),
        );
        let loop_stops = Counter::default();
        registry.register(
            "reloader_reload_loop_stops",
            "Times the loop guard stopped a workload's reloads",
            loop_stops.clone(),
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
        let evictions = Family::<EvictionLabels, Counter>::default();
        registry.register(
            "reloader_evictions",
            "Pod evictions of restarts by eviction, by result (evicted, blocked by a disruption budget, failed)",
            evictions.clone(),
        );
        let eviction_restarts = Family::<RestartOutcomeLabels, Counter>::default();
        registry.register(
            "reloader_eviction_restarts",
            "Restarts by eviction that ended, by outcome (done, stopped: a replacement not Ready in time)",
            eviction_restarts.clone(),
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

        let skips = SkipCounters { skipped, skip_reasons };
        let errors = ErrorCounters { errors, error_types };
        let received = EventsReceived(events_received);
        Arc::new(Self {
            registry,
            reconcile: ReconcileMetrics {
                received: received.clone(),
                skips: skips.clone(),
                event_outcomes,
                reconcile_total,
                reconcile_duration,
                events_processed,
                workloads_scanned,
                workloads_matched,
            },
            writes: WriteMetrics {
                skips,
                errors: errors.clone(),
                reload_executed,
                reload_executed_by_namespace,
                action_total,
                action_latency,
                workqueue_depth,
                workqueue_adds,
                workqueue_latency,
                retries,
                reload_latency,
                coalesced,
                rate_limit_wait,
                dry_run_writes,
                held,
                held_total,
                loop_stops,
            },
            watches: WatchMetrics { errors: errors.clone(), received },
            leader: LeaderMetrics { leader, leader_transitions },
            notify: NotifyMetrics { notifications, errors },
            admission: AdmissionMetrics {
                requests: admission_requests,
                duration: admission_duration,
                rejected: admission_rejected,
            },
            evictions: EvictionMetrics { evictions, restarts: eviction_restarts },
            rest_client: RestClientStats { requests: rest_requests, latency: rest_latency },
            index_sizes,
        })
    }

    /// The OpenMetrics text exposition of every metric, ending in `# EOF`.
    pub(crate) fn encode(&self) -> String {
        let mut out = String::with_capacity(8 * 1024);
        text::encode(&mut out, &self.registry).expect("encoding metrics into a String cannot fail");
        out
    }

    pub(crate) fn reconcile(&self) -> ReconcileMetrics {
        self.reconcile.clone()
    }

    pub(crate) fn writes(&self) -> WriteMetrics {
        self.writes.clone()
    }

    pub(crate) fn watches(&self) -> WatchMetrics {
        self.watches.clone()
    }

    pub(crate) fn leader(&self) -> LeaderMetrics {
        self.leader.clone()
    }

    pub(crate) fn notify(&self) -> NotifyMetrics {
        self.notify.clone()
    }

    pub(crate) fn admission(&self) -> AdmissionMetrics {
        self.admission.clone()
    }

    pub(crate) fn evictions(&self) -> EvictionMetrics {
        self.evictions.clone()
    }

    pub(crate) fn rest_client(&self) -> RestClientStats {
        self.rest_client.clone()
    }

    /// `reloader_index_objects` reads the index's sizes from `sizes` on every scrape.
    pub(crate) fn index_sizes_from(&self, sizes: IndexSizes) {
        self.index_sizes.read_from(sizes);
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
