//! One resource event, worked out once: what [`crate::index::Index::plan_event`] returns. The
//! reconcile stage queues its writes and records its metrics and trace span from it alone.

use std::collections::BTreeMap;

use crate::decide::{PlannedChange, SkipReason};
use crate::model::{WorkloadKey, WorkloadKind};

/// The plan for one event on one resource, over the workloads of the resource's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventPlan {
    /// Why the event concerns no workload at all (an ignored resource), if it does not.
    pub event_skip: Option<SkipReason>,
    /// Every candidate, ordered by workload key: the reload to queue, or why there is none.
    pub decisions: Vec<(WorkloadKey, Result<PlannedChange, SkipReason>)>,
    /// The namespace's workloads by kind: Stakater lists them all for every event
    /// (`reloader_workloads_scanned_total`).
    pub scanned: BTreeMap<WorkloadKind, u64>,
    /// Workloads an auto or search rule selects although their pod spec does not use the
    /// resource: Stakater runs its strategy on them and counts
    /// `reloader_skipped_total{reason="strategy_not_updated"}` (docs/compatibility.md §11).
    pub selected_but_unused: u64,
}

impl EventPlan {
    /// The reloads to queue.
    pub fn writes(&self) -> impl Iterator<Item = (&WorkloadKey, &PlannedChange)> {
        self.decisions.iter().filter_map(|(workload, decision)| Some((workload, decision.as_ref().ok()?)))
    }

    /// The candidates that do not reload, and why.
    pub fn skips(&self) -> impl Iterator<Item = (&WorkloadKey, SkipReason)> {
        self.decisions.iter().filter_map(|(workload, decision)| Some((workload, *decision.as_ref().err()?)))
    }

    /// The workloads the event reloads.
    pub fn targets(&self) -> impl Iterator<Item = &WorkloadKey> {
        self.writes().map(|(workload, _)| workload)
    }

    /// Per kind, the workloads scanned and those the event reloads
    /// (`reloader_workloads_{scanned,matched}_total`); every scanned kind is listed.
    pub fn scan_counts(&self) -> BTreeMap<WorkloadKind, (u64, u64)> {
        let mut counts: BTreeMap<WorkloadKind, (u64, u64)> =
            self.scanned.iter().map(|(&kind, &scanned)| (kind, (scanned, 0))).collect();
        for workload in self.targets() {
            counts.entry(workload.kind).or_default().1 += 1;
        }
        counts
    }
}
