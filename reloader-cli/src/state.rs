//! What the watches feed: the controller's state, as the reconcile stage keeps it. `sources/`
//! drives it through these calls alone and knows nothing else of it; the reconciler implements
//! them (docs/architecture.md).

use std::collections::HashSet;

use reloader_core::model::{ResourceKey, ResourceKind, WorkloadKey, WorkloadKind};
use reloader_core::views::{ResourceView, WorkloadView};

use crate::views::ClassFlags;

/// Readiness of one watch: true once its first list completed.
pub(crate) type Synced = tokio::sync::watch::Receiver<bool>;

/// Where an applied object came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// The first list after start: the state of the world, not a change.
    InitialList,
    /// A list after the watch had to restart (410 Gone, API server restart).
    Relist,
    /// A watch event.
    Live,
}

/// ConfigMaps, Secrets and SecretProviderClassPodStatuses, as views.
pub(crate) trait ResourceState: Send + Sync {
    /// A resource was listed or changed.
    fn resource_applied(&self, view: ResourceView, phase: Phase);

    /// A resource was deleted.
    fn resource_deleted(&self, view: ResourceView);

    /// A (re)list of `kind` in `namespace` (all when `None`) returned exactly `seen`: the rest
    /// was deleted while the watch was down. `phase` is [`Phase::InitialList`] or [`Phase::Relist`].
    fn resources_relisted(
        &self,
        kind: ResourceKind,
        namespace: Option<&str>,
        seen: &HashSet<ResourceKey>,
        phase: Phase,
    );
}

/// What the CSI watches feed besides changes. A SecretProviderClassPodStatus comes and goes with
/// its pod, which is never a change (docs/compatibility.md, CSI); its class's flags apply to the
/// resource the statuses make.
pub(crate) trait CsiState: ResourceState {
    /// Whether the state holds `key` (a class some status already speaks for).
    fn holds(&self, key: &ResourceKey) -> bool;

    /// A status appeared (a new pod): counted as a create; its class is stored, with no change
    /// recorded, when the state does not hold it yet.
    fn status_appeared(&self, view: ResourceView);

    /// A status went away with its pod: counted as a delete, nothing else.
    fn status_departed(&self);

    /// A class's flags changed: the resource its statuses made carries them from now on.
    fn class_flags_changed(&self, key: &ResourceKey, flags: ClassFlags);

    /// A (re)list of statuses in `namespace` (all when `None`) spoke for exactly the classes in
    /// `seen`: the others leave quietly, never a reload.
    fn statuses_relisted(&self, namespace: Option<&str>, seen: &HashSet<ResourceKey>);
}

/// Workloads of every enabled kind, as views.
pub(crate) trait WorkloadState: Send + Sync {
    /// A workload was listed or changed.
    fn workload_applied(&self, view: WorkloadView, phase: Phase);

    /// A workload was deleted.
    fn workload_deleted(&self, key: &WorkloadKey);

    /// A (re)list of `kind` in `namespace` (all when `None`) returned exactly `seen`.
    fn workloads_relisted(&self, kind: WorkloadKind, namespace: Option<&str>, seen: &HashSet<WorkloadKey>);
}

/// Everything the watches feed, as one handle.
pub(crate) trait WatchedState: CsiState + WorkloadState {}

impl<T: CsiState + WorkloadState> WatchedState for T {}
