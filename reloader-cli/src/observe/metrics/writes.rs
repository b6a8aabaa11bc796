//! The executor's metrics: the work queue, every write and its outcome, retries, coalescing,
//! the rate limit and dry runs.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use reloader_core::model::WorkloadKind;
use reloader_core::timing::HoldReason;

use super::counters::{ErrorCounters, SkipCounters};
use super::labels::{
    ActionLabels, HoldLabels, SuccessLabels, SuccessNamespaceLabels, VerbatimCounter, WorkloadKindLabels,
};
use super::{ActionResult, ErrorType, HistogramFamily, SkipReason, bool_label};

#[derive(Clone)]
pub(crate) struct WriteMetrics {
    pub(super) skips: SkipCounters,
    pub(super) errors: ErrorCounters,
    pub(super) reload_executed: Family<SuccessLabels, Counter>,
    pub(super) reload_executed_by_namespace: Option<Family<SuccessNamespaceLabels, VerbatimCounter>>,
    pub(super) action_total: Family<ActionLabels, Counter>,
    pub(super) action_latency: HistogramFamily<WorkloadKindLabels>,
    pub(super) workqueue_depth: Gauge,
    pub(super) workqueue_adds: Counter,
    pub(super) workqueue_latency: Histogram,
    pub(super) retries: Counter,
    pub(super) reload_latency: Histogram,
    pub(super) coalesced: Counter,
    pub(super) rate_limit_wait: Histogram,
    pub(super) dry_run_writes: Family<WorkloadKindLabels, Counter>,
    pub(super) held: Family<HoldLabels, Gauge>,
    pub(super) held_total: Family<HoldLabels, Counter>,
    pub(super) loop_stops: Counter,
}

impl WriteMetrics {
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

    pub(crate) fn skipped(&self, reason: SkipReason) {
        self.skips.skipped(reason);
    }

    pub(crate) fn error(&self, error_type: ErrorType) {
        self.errors.error(error_type);
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

    pub(crate) fn retry(&self) {
        self.retries.inc();
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

    pub(crate) fn dry_run_write(&self, workload_kind: WorkloadKind) {
        let labels = WorkloadKindLabels { workload_kind: workload_kind.as_str() };
        self.dry_run_writes.get_or_create(&labels).inc();
    }

    /// A reload held by the workload's timing (docs/beyond-stakater.md §15).
    pub(crate) fn hold_started(&self, reason: HoldReason) {
        let labels = HoldLabels { reason: reason.as_str() };
        self.held.get_or_create(&labels).inc();
        self.held_total.get_or_create(&labels).inc();
    }

    /// A held reload, held on for another reason (a delay over, a window still closed).
    pub(crate) fn hold_moved(&self, from: HoldReason, to: HoldReason) {
        self.held.get_or_create(&HoldLabels { reason: from.as_str() }).dec();
        self.held.get_or_create(&HoldLabels { reason: to.as_str() }).inc();
    }

    /// A held reload released (applied, reverted, dropped).
    pub(crate) fn released(&self, reason: HoldReason) {
        self.held.get_or_create(&HoldLabels { reason: reason.as_str() }).dec();
    }

    pub(crate) fn loop_stopped(&self) {
        self.loop_stops.inc();
    }
}
