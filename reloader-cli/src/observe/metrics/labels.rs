//! Label sets of the metric families, and the one custom metric type.

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::{MetricType, TypedMetric};

use super::values::{HttpVerb, RequestCode};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct SuccessLabels {
    pub(super) success: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct SuccessNamespaceLabels {
    pub(super) success: &'static str,
    pub(super) namespace: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ResultLabels {
    pub(super) result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ActionLabels {
    pub(super) workload_kind: &'static str,
    pub(super) result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct WorkloadKindLabels {
    pub(super) workload_kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ReasonLabels {
    pub(super) reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct TypeLabels {
    pub(super) r#type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct EventLabels {
    pub(super) event_type: &'static str,
    pub(super) resource_type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ProcessedEventLabels {
    pub(super) event_type: &'static str,
    pub(super) resource_type: &'static str,
    pub(super) result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct KindLabels {
    pub(super) kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ChannelLabels {
    pub(super) channel: &'static str,
    pub(super) success: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct AdmissionLabels {
    pub(super) operation: &'static str,
    pub(super) result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct AdmissionRejectionLabels {
    pub(super) reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct HoldLabels {
    pub(super) reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct EvictionLabels {
    pub(super) result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RestartOutcomeLabels {
    pub(super) outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct BuildLabels {
    pub(super) version: &'static str,
}

/// A monotonic counter whose sample carries its family name unchanged.
///
/// Stakater's `reloader_reload_executed_total_by_namespace` has a name that does not end in
/// `_total`, which an OpenMetrics counter cannot have (its samples are always `<name>_total`).
/// Exposing it as type `unknown` keeps the sample name byte-for-byte, so existing queries match.
#[derive(Clone, Debug, Default)]
pub(super) struct VerbatimCounter(pub(super) Counter);

impl TypedMetric for VerbatimCounter {
    const TYPE: MetricType = MetricType::Unknown;
}

impl EncodeMetric for VerbatimCounter {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_gauge(&self.0.get())
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct EventOutcomeLabels {
    pub(super) event_type: &'static str,
    pub(super) resource_type: &'static str,
    pub(super) outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RestRequestLabels {
    pub(super) code: RequestCode,
    pub(super) method: HttpVerb,
    pub(super) host: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RestLatencyLabels {
    pub(super) verb: HttpVerb,
    pub(super) host: String,
}
