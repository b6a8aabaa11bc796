//! The admission webhook's metrics.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;

use super::labels::{AdmissionLabels, AdmissionRejectionLabels};
use super::{AdmissionOperation, AdmissionOutcome, AdmissionRejection};

#[derive(Clone)]
pub(crate) struct AdmissionMetrics {
    pub(super) requests: Family<AdmissionLabels, Counter>,
    pub(super) duration: Histogram,
    pub(super) rejected: Family<AdmissionRejectionLabels, Counter>,
}

impl AdmissionMetrics {
    /// One admission review answered: `operation` is CREATE/UPDATE/..., `result` what was done.
    pub(crate) fn admission(
        &self,
        operation: AdmissionOperation,
        result: AdmissionOutcome,
        duration: Duration,
    ) {
        let labels = AdmissionLabels { operation: operation.as_label(), result: result.as_label() };
        self.requests.get_or_create(&labels).inc();
        self.duration.observe(duration.as_secs_f64());
    }

    /// A request to the webhook answered with an HTTP error instead of a review.
    pub(crate) fn admission_rejected(&self, reason: AdmissionRejection) {
        let labels = AdmissionRejectionLabels { reason: reason.as_label() };
        self.rejected.get_or_create(&labels).inc();
    }
}
