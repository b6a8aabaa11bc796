//! The counters more than one stage records into: skips, errors and watch events received, each
//! in Stakater's series and, where they differ, ours. Every handle holding one shares its series.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::labels::{EventLabels, ReasonLabels, TypeLabels};
use super::values::{StakaterError, StakaterSkip};
use super::{ErrorType, EventType, ResourceType, SkipReason};

/// `reloader_skip_reasons_total{reason}` and Stakater's `reloader_skipped_total{reason}`.
#[derive(Clone)]
pub(crate) struct SkipCounters {
    pub(super) skipped: Family<ReasonLabels, Counter>,
    pub(super) skip_reasons: Family<ReasonLabels, Counter>,
}

impl SkipCounters {
    /// A workload not reloaded: `reloader_skip_reasons_total{reason}`, and Stakater's
    /// `reloader_skipped_total` where Stakater counts the same case.
    pub(crate) fn skipped(&self, reason: SkipReason) {
        self.skip_reasons.get_or_create(&ReasonLabels { reason: reason.as_label() }).inc();
        if let Some(stakater) = reason.stakater() {
            self.stakater_skipped(stakater);
        }
    }

    /// Workloads a rule selected but that needed no write and never reached a decision of ours
    /// (an event plan's `selected_but_unused`, or a sync-after-restart sweep): Stakater's
    /// `strategy_not_updated`.
    pub(crate) fn strategy_not_updated(&self, count: u64) {
        if count > 0 {
            let labels = ReasonLabels { reason: StakaterSkip::StrategyNotUpdated.as_label() };
            self.skipped.get_or_create(&labels).inc_by(count);
        }
    }

    pub(super) fn stakater_skipped(&self, reason: StakaterSkip) {
        self.skipped.get_or_create(&ReasonLabels { reason: reason.as_label() }).inc();
    }
}

/// `reloader_error_types_total{type}` and Stakater's `reloader_errors_total{type}`.
#[derive(Clone)]
pub(crate) struct ErrorCounters {
    pub(super) errors: Family<TypeLabels, Counter>,
    pub(super) error_types: Family<TypeLabels, Counter>,
}

impl ErrorCounters {
    /// `reloader_error_types_total{type}`, and Stakater's `reloader_errors_total` where Stakater
    /// counts the same failure.
    pub(crate) fn error(&self, error_type: ErrorType) {
        self.error_types.get_or_create(&TypeLabels { r#type: error_type.as_label() }).inc();
        if let Some(stakater) = error_type.stakater() {
            self.stakater_error(stakater);
        }
    }

    pub(super) fn stakater_error(&self, error: StakaterError) {
        self.errors.get_or_create(&TypeLabels { r#type: error.as_label() }).inc();
    }
}

/// Stakater's `reloader_events_received_total{event_type, resource_type}`.
#[derive(Clone)]
pub(crate) struct EventsReceived(pub(super) Family<EventLabels, Counter>);

impl EventsReceived {
    /// A watch event (the initial list included, as `add`).
    pub(crate) fn event_received(&self, event_type: EventType, resource_type: impl Into<ResourceType>) {
        let labels = EventLabels {
            event_type: event_type.informer().as_label(),
            resource_type: resource_type.into().as_label(),
        };
        self.0.get_or_create(&labels).inc();
    }
}
