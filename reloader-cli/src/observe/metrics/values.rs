//! The values of the metric labels, as enums: a call site names a reason, never spells it.
//!
//! Two layers: our own fine-grained values (skip reasons, event outcomes, error types), which
//! label series of our own, and Stakater's values, which label Stakater's series exactly as
//! v1.4.21 does. Each of ours says which Stakater value (if any) it also counts as
//! (docs/compatibility.md §11).

use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};
use reloader_core::decide::{ResourceEventKind, SkipReason as DecideSkip};
use reloader_core::model::ResourceKind;
use reloader_core::options::AlertSink;

/// `reloader_skip_reasons_total{reason}`: why a reload was not performed (ours).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SkipReason {
    /// The core decided this workload needs nothing for this change.
    Decision(DecideSkip),
    /// This replica does not hold the lease; the leader's catch-up applies the change.
    NotLeader,
    /// The workload was deleted before its write.
    WorkloadGone,
    /// The resource's namespace is outside the namespace selector or in the ignore list.
    NamespaceOutOfScope,
}

impl SkipReason {
    pub(crate) fn as_label(self) -> &'static str {
        match self {
            SkipReason::Decision(reason) => reason.as_label(),
            SkipReason::NotLeader => "not_leader",
            SkipReason::WorkloadGone => "workload_gone",
            SkipReason::NamespaceOutOfScope => "namespace_out_of_scope",
        }
    }
}

impl SkipReason {
    /// What Stakater counts in `reloader_skipped_total` for the same workload: a rule selected
    /// the resource but its reload strategy found nothing to change (`strategy_not_updated`: the
    /// marker is already there, no container can carry it, or an auto/search rule on a workload
    /// that does not use the resource). Other decisions are not counted by Stakater.
    pub(crate) fn stakater(self) -> Option<StakaterSkip> {
        match self {
            SkipReason::Decision(
                DecideSkip::AlreadyCurrent
                | DecideSkip::NoContainers
                | DecideSkip::NoTemplate
                | DecideSkip::NotReferenced,
            ) => Some(StakaterSkip::StrategyNotUpdated),
            SkipReason::Decision(_)
            | SkipReason::NotLeader
            | SkipReason::WorkloadGone
            | SkipReason::NamespaceOutOfScope => None,
        }
    }
}

impl From<DecideSkip> for SkipReason {
    fn from(reason: DecideSkip) -> Self {
        SkipReason::Decision(reason)
    }
}

/// What happened to a resource: `event_type` of `reloader_resource_events_total` (ours) and of
/// the `--webhook-url` body; Stakater's `event_type` is [`EventType::informer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    Create,
    Update,
    Delete,
}

impl EventType {
    pub(crate) fn as_label(self) -> &'static str {
        match self {
            EventType::Create => "create",
            EventType::Update => "update",
            EventType::Delete => "delete",
        }
    }

    /// Stakater's `reloader_events_received_total{event_type}`: the informer callback.
    pub(crate) fn informer(self) -> InformerEvent {
        match self {
            EventType::Create => InformerEvent::Add,
            EventType::Update => InformerEvent::Update,
            EventType::Delete => InformerEvent::Delete,
        }
    }
}

impl From<ResourceEventKind> for EventType {
    fn from(event: ResourceEventKind) -> Self {
        match event {
            ResourceEventKind::Created => EventType::Create,
            ResourceEventKind::Updated => EventType::Update,
            ResourceEventKind::Deleted => EventType::Delete,
        }
    }
}

/// `reloader_resource_events_total{outcome}` (ours): what became of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProcessResult {
    /// Reloads were queued for at least one workload.
    Queued,
    /// No workload needs a reload for it.
    NoMatch,
    /// An update that left the content (and so the hash) as it was.
    NoContentChange,
    /// Listed at start-up: the state of the world, not a change.
    InitialList,
    /// Listed at start-up with `--reload-on-create` but without `--sync-after-restart`: Stakater
    /// drops it at its "controllers initialised" check, counted as `ignored_or_not_selected`.
    ListedBeforeSync,
    /// Listed at start-up with `--reload-on-create --sync-after-restart`: Stakater handles it as
    /// a create (our catch-up sweep does the same once every watch has listed).
    ListedAsCreated,
    ReloadOnCreateDisabled,
    ReloadOnDeleteDisabled,
    NamespaceOutOfScope,
    /// The resource carries the ignore annotation.
    Ignored,
    /// Announced to `--webhook-url` instead of reloading.
    Webhook,
}

impl ProcessResult {
    pub(crate) fn as_label(self) -> &'static str {
        match self {
            ProcessResult::Queued => "queued",
            ProcessResult::NoMatch => "no_match",
            ProcessResult::NoContentChange => "no_content_change",
            ProcessResult::InitialList => "initial_list",
            ProcessResult::ListedBeforeSync => "listed_before_sync",
            ProcessResult::ListedAsCreated => "listed_as_created",
            ProcessResult::ReloadOnCreateDisabled => "reload_on_create_disabled",
            ProcessResult::ReloadOnDeleteDisabled => "reload_on_delete_disabled",
            ProcessResult::NamespaceOutOfScope => "namespace_out_of_scope",
            ProcessResult::Ignored => "ignored",
            ProcessResult::Webhook => "webhook",
        }
    }

    /// What Stakater's controller would have done with the same event: queue it for its handler
    /// (and with which handler result), drop it at its namespace filter, or not queue it at all.
    pub(crate) fn stakater(self) -> StakaterHandling {
        match self {
            ProcessResult::Queued
            | ProcessResult::NoMatch
            | ProcessResult::Ignored
            | ProcessResult::Webhook
            | ProcessResult::ListedAsCreated => {
                StakaterHandling::Handled { result: ReconcileResult::Success, skip: None }
            }
            ProcessResult::NoContentChange => StakaterHandling::Handled {
                result: ReconcileResult::Skipped,
                skip: Some(StakaterSkip::NoDataChange),
            },
            ProcessResult::NamespaceOutOfScope | ProcessResult::ListedBeforeSync => {
                StakaterHandling::Filtered
            }
            ProcessResult::InitialList
            | ProcessResult::ReloadOnCreateDisabled
            | ProcessResult::ReloadOnDeleteDisabled => StakaterHandling::NotQueued,
        }
    }
}

/// How Stakater's controller treats one informer event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StakaterHandling {
    /// Queued and handled: `reloader_events_processed_total{event_type="unknown",result="success"}`,
    /// and `reloader_reconcile_total` twice (the handler's `result`, then the queue worker's
    /// `success`), plus `reloader_skipped_total{reason=skip}` when the handler skipped.
    Handled { result: ReconcileResult, skip: Option<StakaterSkip> },
    /// In an ignored or unselected namespace: `reloader_skipped_total{reason="ignored_or_not_selected"}`.
    Filtered,
    /// Not queued (a create without `--reload-on-create`, ...): only received.
    NotQueued,
}

/// `reloader_reconcile_total{result}` / `reloader_reconcile_duration_seconds{result}`, Stakater's
/// values. Our handling of an event has no failure of its own (a failed write counts in
/// `reloader_action_total{result="error"}`), so `error` is never recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReconcileResult {
    Success,
    /// An update that left the data as it was.
    Skipped,
}

impl ReconcileResult {
    pub(crate) fn as_label(self) -> &'static str {
        match self {
            ReconcileResult::Success => "success",
            ReconcileResult::Skipped => "skipped",
        }
    }
}

/// `reloader_skipped_total{reason}`, Stakater's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StakaterSkip {
    /// A change in a namespace that is ignored or not selected.
    IgnoredOrNotSelected,
    /// An update whose data hash did not change.
    NoDataChange,
    /// A workload that needed no write.
    StrategyNotUpdated,
}

impl StakaterSkip {
    pub(crate) fn as_label(self) -> &'static str {
        match self {
            StakaterSkip::IgnoredOrNotSelected => "ignored_or_not_selected",
            StakaterSkip::NoDataChange => "no_data_change",
            StakaterSkip::StrategyNotUpdated => "strategy_not_updated",
        }
    }
}

/// `reloader_events_received_total{event_type}`, Stakater's values: the informer callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InformerEvent {
    /// Also every object of the initial list.
    Add,
    Update,
    Delete,
}

impl InformerEvent {
    pub(crate) fn as_label(self) -> &'static str {
        match self {
            InformerEvent::Add => "add",
            InformerEvent::Update => "update",
            InformerEvent::Delete => "delete",
        }
    }
}

/// `reloader_events_processed_total{event_type}`: Stakater's queue no longer knows the event's
/// type when it records the outcome, so the value is always `unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProcessedEventType {
    Unknown,
}

impl ProcessedEventType {
    pub(crate) fn as_label(self) -> &'static str {
        match self {
            ProcessedEventType::Unknown => "unknown",
        }
    }
}

/// `reloader_events_processed_total{result}`, Stakater's values. Stakater's `dropped` (a handler
/// that failed six times) has no counterpart: our writes retry per workload in the executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProcessedResult {
    Success,
}

impl ProcessedResult {
    pub(crate) fn as_label(self) -> &'static str {
        match self {
            ProcessedResult::Success => "success",
        }
    }
}

/// `resource_type` of the event series: the resource Stakater's informer watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResourceType {
    ConfigMaps,
    Secrets,
    /// The CSI driver's per-pod status objects, which carry the secret versions.
    SecretProviderClassPodStatuses,
    /// The Namespace watch of `--namespace-selector`.
    Namespaces,
}

impl ResourceType {
    pub(crate) fn as_label(self) -> &'static str {
        match self {
            ResourceType::ConfigMaps => "configmaps",
            ResourceType::Secrets => "secrets",
            ResourceType::SecretProviderClassPodStatuses => "secretproviderclasspodstatuses",
            ResourceType::Namespaces => "namespaces",
        }
    }
}

impl From<ResourceKind> for ResourceType {
    fn from(kind: ResourceKind) -> Self {
        match kind {
            ResourceKind::ConfigMap => ResourceType::ConfigMaps,
            ResourceKind::Secret => ResourceType::Secrets,
            ResourceKind::SecretProviderClass => ResourceType::SecretProviderClassPodStatuses,
        }
    }
}

/// `reloader_error_types_total{type}` (ours).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorType {
    /// A watch stream error (it restarts by itself).
    Watch,
    Forbidden,
    Conflict,
    /// Any other API status.
    Api,
    /// No answer from the API server.
    Transport,
    /// The workload's backend could not build its write.
    Workload,
    /// The JSON patch could not be encoded.
    Patch,
    /// A Job to recreate was still there after its deletion.
    JobRecreate,
}

impl ErrorType {
    pub(crate) fn as_label(self) -> &'static str {
        match self {
            ErrorType::Watch => "watch",
            ErrorType::Forbidden => "forbidden",
            ErrorType::Conflict => "conflict",
            ErrorType::Api => "api",
            ErrorType::Transport => "transport",
            ErrorType::Workload => "workload",
            ErrorType::Patch => "patch",
            ErrorType::JobRecreate => "job_recreate",
        }
    }

    /// What Stakater counts in `reloader_errors_total`: a failed write fails its handler
    /// (`handler_error`); watch errors are not counted by Stakater.
    pub(crate) fn stakater(self) -> Option<StakaterError> {
        match self {
            ErrorType::Watch => None,
            ErrorType::Forbidden
            | ErrorType::Conflict
            | ErrorType::Api
            | ErrorType::Transport
            | ErrorType::Workload
            | ErrorType::Patch
            | ErrorType::JobRecreate => Some(StakaterError::HandlerError),
        }
    }
}

/// `reloader_errors_total{type}`, Stakater's values (its other one, `invalid_handler_type`, is a
/// programming error that has no counterpart here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StakaterError {
    /// A change could not be applied (a write, or the `--webhook-url` POST, failed).
    HandlerError,
}

impl StakaterError {
    pub(crate) fn as_label(self) -> &'static str {
        match self {
            StakaterError::HandlerError => "handler_error",
        }
    }
}

/// `reloader_action_total{result}`: what one workload write did. A dry-run write is not an
/// action (Stakater has no dry run); it counts in `reloader_dry_run_writes_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ActionResult {
    Success,
    Error,
    DryRun,
}

impl ActionResult {
    /// The label value, `None` for a write that was not sent.
    pub(crate) fn as_label(self) -> Option<&'static str> {
        match self {
            ActionResult::Success => Some("success"),
            ActionResult::Error => Some("error"),
            ActionResult::DryRun => None,
        }
    }
}

/// `reloader_notifications_total{channel}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotificationChannel {
    /// `--webhook-url`.
    Webhook,
    /// `ALERT_*`, by sink.
    Alert(AlertSink),
}

impl NotificationChannel {
    pub(crate) fn as_label(self) -> &'static str {
        match self {
            NotificationChannel::Webhook => "webhook",
            NotificationChannel::Alert(AlertSink::Slack) => "alert-slack",
            NotificationChannel::Alert(AlertSink::Teams) => "alert-teams",
            NotificationChannel::Alert(AlertSink::GoogleChat) => "alert-gchat",
            NotificationChannel::Alert(AlertSink::Raw) => "alert-raw",
        }
    }
}

/// `reloader_admission_requests_total{operation}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AdmissionOperation {
    Create,
    Update,
    Delete,
    Connect,
    /// The body was not an AdmissionReview with a request.
    Unknown,
}

impl AdmissionOperation {
    pub(crate) fn as_label(self) -> &'static str {
        match self {
            AdmissionOperation::Create => "CREATE",
            AdmissionOperation::Update => "UPDATE",
            AdmissionOperation::Delete => "DELETE",
            AdmissionOperation::Connect => "CONNECT",
            AdmissionOperation::Unknown => "unknown",
        }
    }
}

/// `reloader_admission_requests_total{result}`: what a review did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AdmissionOutcome {
    /// Allowed with a patch.
    Patched,
    /// Looked at; nothing to add.
    Unchanged,
    /// Not ours to look at: another kind, a subresource, an opted-out object, our own write,
    /// a namespace out of scope, or an operation other than CREATE and UPDATE.
    Skipped,
    /// Markers would have been added, but `--dry-run` writes nothing; allowed unchanged.
    DryRun,
    /// The object could not be read or the patch not built; allowed unchanged (the Job fence:
    /// denied).
    Error,
    /// The Job fence let a Job through (docs/security.md, "Jobs").
    Allowed,
    /// The Job fence refused a Job.
    Denied,
}

impl AdmissionOutcome {
    pub(crate) fn as_label(self) -> &'static str {
        match self {
            AdmissionOutcome::Patched => "patched",
            AdmissionOutcome::Unchanged => "unchanged",
            AdmissionOutcome::Skipped => "skipped",
            AdmissionOutcome::DryRun => "dry_run",
            AdmissionOutcome::Error => "error",
            AdmissionOutcome::Allowed => "allowed",
            AdmissionOutcome::Denied => "denied",
        }
    }
}

/// `reloader_admission_rejected_total{reason}`: why a request to the webhook was answered with
/// an HTTP error instead of a review (docs/beyond-stakater.md §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AdmissionRejection {
    /// Not JSON, truncated, not an AdmissionReview's shape, or a request without a uid.
    Malformed,
    /// The body is over the webhook's limit; refused without reading it whole.
    TooLarge,
    /// JSON of another kind or version than `admission.k8s.io/v1` `AdmissionReview`, or a
    /// review without a request.
    WrongKind,
}

impl AdmissionRejection {
    pub(crate) fn as_label(self) -> &'static str {
        match self {
            AdmissionRejection::Malformed => "malformed",
            AdmissionRejection::TooLarge => "too_large",
            AdmissionRejection::WrongKind => "wrong_kind",
        }
    }
}

/// `rest_client_requests_total{code}`: the HTTP status of one API request, or client-go's
/// `<error>` when no response came back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum RequestCode {
    Status(u16),
    Error,
}

impl EncodeLabelValue for RequestCode {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        match self {
            RequestCode::Status(code) => EncodeLabelValue::encode(code, encoder),
            RequestCode::Error => EncodeLabelValue::encode(&"<error>", encoder),
        }
    }
}

/// `method` of `rest_client_requests_total` and `verb` of `rest_client_request_duration_seconds`:
/// the HTTP method, upper case, as client-go reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum HttpVerb {
    Get,
    Post,
    Put,
    Patch,
    Delete,
    /// Never sent by reloader; kept apart rather than spelled out.
    Other,
}

impl HttpVerb {
    pub(crate) fn as_label(self) -> &'static str {
        match self {
            HttpVerb::Get => "GET",
            HttpVerb::Post => "POST",
            HttpVerb::Put => "PUT",
            HttpVerb::Patch => "PATCH",
            HttpVerb::Delete => "DELETE",
            HttpVerb::Other => "OTHER",
        }
    }
}

impl From<&http::Method> for HttpVerb {
    fn from(method: &http::Method) -> Self {
        match *method {
            http::Method::GET => HttpVerb::Get,
            http::Method::POST => HttpVerb::Post,
            http::Method::PUT => HttpVerb::Put,
            http::Method::PATCH => HttpVerb::Patch,
            http::Method::DELETE => HttpVerb::Delete,
            _ => HttpVerb::Other,
        }
    }
}

impl EncodeLabelValue for HttpVerb {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.as_label(), encoder)
    }
}

/// Why finished spans were not exported: `reloader_trace_spans_dropped_total{reason}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SpanDropReason {
    /// The export queue was full (the collector is slow or unreachable).
    QueueFull,
    /// The collector refused the batch, could not be reached, or did not answer in time.
    ExportFailed,
    /// Ended after the pipeline shut down.
    ShutDown,
}

impl SpanDropReason {
    pub(crate) fn as_label(self) -> &'static str {
        match self {
            SpanDropReason::QueueFull => "queue_full",
            SpanDropReason::ExportFailed => "export_failed",
            SpanDropReason::ShutDown => "shut_down",
        }
    }
}

/// `reloader_evictions_total{result}`: one eviction of a restart by eviction
/// (docs/beyond-stakater.md §13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum EvictionResult {
    /// The pod was evicted.
    Evicted,
    /// A PodDisruptionBudget refused it (429); tried again later.
    Blocked,
    /// Any other failure; tried again later.
    Failed,
    /// A pod a change reloads has no controller owner: not evicted (docs/beyond-stakater.md §14).
    NoOwner,
}

impl EvictionResult {
    pub(crate) fn as_label(self) -> &'static str {
        match self {
            EvictionResult::Evicted => "evicted",
            EvictionResult::Blocked => "blocked",
            EvictionResult::Failed => "failed",
            EvictionResult::NoOwner => "no_owner",
        }
    }
}

/// `reloader_eviction_restarts_total{outcome}`: how a restart by eviction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum RestartOutcome {
    /// Every pod runs the reload and is Ready.
    Done,
    /// A replacement was not Ready in time.
    Stopped,
}

impl RestartOutcome {
    pub(crate) fn as_label(self) -> &'static str {
        match self {
            RestartOutcome::Done => "done",
            RestartOutcome::Stopped => "stopped",
        }
    }
}
