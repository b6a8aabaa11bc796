//! The metrics of restarts by eviction (docs/beyond-stakater.md §13).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::labels::{EvictionLabels, RestartOutcomeLabels};
use super::{EvictionResult, RestartOutcome};

#[derive(Clone)]
pub(crate) struct EvictionMetrics {
    pub(super) evictions: Family<EvictionLabels, Counter>,
    pub(super) restarts: Family<RestartOutcomeLabels, Counter>,
}

impl EvictionMetrics {
    pub(crate) fn eviction(&self, result: EvictionResult) {
        self.evictions.get_or_create(&EvictionLabels { result: result.as_label() }).inc();
    }

    pub(crate) fn restart_ended(&self, outcome: RestartOutcome) {
        self.restarts.get_or_create(&RestartOutcomeLabels { outcome: outcome.as_label() }).inc();
    }
}
