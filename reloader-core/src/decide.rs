//! compat.md §4.3 as a pure function: which workloads reload for a changed resource, and how.
//! (API fixed; bodies are being filled in by the decision work.)

use crate::model::{ReloadStrategy, ResourceView};
use crate::workload::{MarkerChange, WorkloadView};

/// The options that change decisions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecideOptions {
    pub auto_reload_all: bool,
    pub strategy: ReloadStrategy,
}

/// Why a workload reloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// An entry of the explicit list matched the name.
    Explicit,
    /// `search: "true"` on the workload and `match: "true"` on the resource.
    SearchMatch,
    /// `auto: "true"`.
    Auto,
    /// The typed auto key for this resource type is true.
    TypedAuto,
    /// `--auto-reload-all` with neither auto key set.
    AutoReloadAll,
}

/// Why a workload does not reload. `as_label` is the `reloader_skipped_total{reason}` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SkipReason {
    ResourceIgnored,
    Excluded,
    NotAnnotated,
    AutoDisabled,
    NotReferenced,
    NoContainers,
    NoTemplate,
    Suspended,
    AlreadyCurrent,
}

/// The decision for one workload and one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Reload { rule: Rule, container: u16 },
    Skip(SkipReason),
}

/// What happened to the resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceEventKind {
    Created,
    Updated,
    Deleted,
}

pub fn decide(_workload: &WorkloadView, _resource: &ResourceView, _opts: &DecideOptions) -> Decision {
    Decision::Skip(SkipReason::NotAnnotated)
}

/// `decide`, then the marker comparison: the change to make, or why none is needed.
pub fn plan(
    _workload: &WorkloadView,
    _resource: &ResourceView,
    _event: ResourceEventKind,
    _opts: &DecideOptions,
) -> Result<MarkerChange, SkipReason> {
    Err(SkipReason::NotAnnotated)
}
