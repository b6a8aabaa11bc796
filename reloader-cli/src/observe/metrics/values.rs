//! The values of the metric labels, as enums: a call site names a reason, never spells it.

use reloader_core::decide::{ResourceEventKind, SkipReason as DecideSkip};
use reloader_core::options::AlertSink;

/// `reloader_skipped_total{reason}`: why a reload was not performed.
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

impl From<DecideSkip> for SkipReason {
    fn from(reason: DecideSkip) -> Self {
        SkipReason::Decision(reason)
    }
}

/// `event_type` of `reloader_events_{received,processed}_total`.
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

/// `reloader_events_processed_total{result}`: what became of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProcessResult {
    /// Reloads were queued for at least one workload.
    Queued,
    /// No workload needs a reload for it.
    NoMatch,
    /// An update that left the content (and so the hash) as it was.
    NoContentChange,
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
            ProcessResult::ReloadOnDeleteDisabled => "reload_on_delete_disabled",
            ProcessResult::NamespaceOutOfScope => "namespace_out_of_scope",
            ProcessResult::Ignored => "ignored",
            ProcessResult::Webhook => "webhook",
        }
    }

    /// What this outcome counts as in `reloader_reconcile_total{result}`.
    pub(crate) fn reconcile_result(self) -> ReconcileResult {
        match self {
            ProcessResult::Queued | ProcessResult::Webhook => ReconcileResult::Success,
            ProcessResult::NoMatch
            | ProcessResult::NoContentChange
            | ProcessResult::ReloadOnDeleteDisabled
            | ProcessResult::NamespaceOutOfScope
            | ProcessResult::Ignored => ReconcileResult::Skipped,
        }
    }
}

/// `reloader_reconcile_total{result}` / `reloader_reconcile_duration_seconds{result}`: one
/// resource event processed against its workloads. Processing has no failure of its own (write
/// failures count in `reloader_action_total{result="error"}`), so there is no error value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReconcileResult {
    /// Work was queued (reloads) or announced (`--webhook-url`).
    Success,
    /// Nothing to do: out of scope, ignored, unchanged, or no workload needs it.
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

/// `reloader_errors_total{type}`.
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
}

/// `reloader_action_total{result}`: what one workload write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ActionResult {
    Success,
    Error,
    DryRun,
}

impl ActionResult {
    pub(crate) fn as_label(self) -> &'static str {
        match self {
            ActionResult::Success => "success",
            ActionResult::Error => "error",
            ActionResult::DryRun => "dry_run",
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
    /// The object could not be read or the patch not built; allowed unchanged.
    Error,
}

impl AdmissionOutcome {
    pub(crate) fn as_label(self) -> &'static str {
        match self {
            AdmissionOutcome::Patched => "patched",
            AdmissionOutcome::Unchanged => "unchanged",
            AdmissionOutcome::Skipped => "skipped",
            AdmissionOutcome::DryRun => "dry_run",
            AdmissionOutcome::Error => "error",
        }
    }
}
