//! The reconcile stage's metrics: what became of each resource event, Stakater's scan counts.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use reloader_core::model::WorkloadKind;

use super::counters::{EventsReceived, SkipCounters};
use super::labels::{EventOutcomeLabels, KindLabels, ProcessedEventLabels, ResultLabels};
use super::values::{ProcessedEventType, ProcessedResult, ReconcileResult, StakaterHandling, StakaterSkip};
use super::{EventType, HistogramFamily, ProcessResult, ResourceType, SkipReason};

#[derive(Clone)]
pub(crate) struct ReconcileMetrics {
    pub(super) received: EventsReceived,
    pub(super) skips: SkipCounters,
    pub(super) event_outcomes: Family<EventOutcomeLabels, Counter>,
    pub(super) reconcile_total: Family<ResultLabels, Counter>,
    pub(super) reconcile_duration: HistogramFamily<ResultLabels>,
    pub(super) events_processed: Family<ProcessedEventLabels, Counter>,
    pub(super) workloads_scanned: Family<KindLabels, Counter>,
    pub(super) workloads_matched: Family<KindLabels, Counter>,
}

impl ReconcileMetrics {
    /// A watch event (the initial list included, as `add`), Stakater's
    /// `reloader_events_received_total`.
    pub(crate) fn event_received(&self, event_type: EventType, resource_type: impl Into<ResourceType>) {
        self.received.event_received(event_type, resource_type);
    }

    pub(crate) fn skipped(&self, reason: SkipReason) {
        self.skips.skipped(reason);
    }

    pub(crate) fn strategy_not_updated(&self, count: u64) {
        self.skips.strategy_not_updated(count);
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
                    self.skips.stakater_skipped(reason);
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
            StakaterHandling::Filtered => self.skips.stakater_skipped(StakaterSkip::IgnoredOrNotSelected),
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
}
