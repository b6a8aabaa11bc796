//! What a write that fell due does now: the one place where a workload's timing meets the rest
//! of the write's circumstances — a coalesced change, a resume, a hold recorded by an earlier
//! leader, a revert, the loop guard (docs/behaviour.md §K, "How timing combines with the rest").

use jiff::Timestamp;

use super::{HeldReload, HoldReason, LoopStop, Timing, Verdict};
use crate::markers::MarkerChange;

/// A write that fell due, as the executor sees it.
#[derive(Debug, Clone, Copy)]
pub struct DueWrite<'a> {
    /// The marker changes to write: empty for a resume after a pause period (never held), or
    /// for a recorded hold whose changes were all reverted.
    pub changes: &'a [MarkerChange],
    pub timing: &'a Timing,
    /// The hold the workload records, by this or an earlier leader.
    pub recorded: Option<&'a HeldReload>,
    /// When the first of the changes was seen (a coalesced change: the first of the window).
    pub changed_at: Timestamp,
    /// The last reload this process wrote to the workload, if it remembers one.
    pub last_reload: Option<Timestamp>,
    /// The loop guard's count for the workload (`Allow` when the guard is off).
    pub loop_verdict: Verdict,
    /// The workload carries the loop guard's stop.
    pub loop_stopped: bool,
    pub now: Timestamp,
}

/// What the due write does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Write now (and remove a recorded hold).
    Go,
    /// Not before the record's `until`; the record is what the workload keeps of the hold.
    Hold(HeldReload),
    /// The loop guard trips: no write, and the workload's reloads stop.
    Stop(LoopStop),
    /// The workload's reloads are stopped already (queued before the stop reached the index):
    /// no write.
    Stopped,
}

/// The gate of one due write.
pub fn gate(due: &DueWrite<'_>) -> Gate {
    if due.loop_stopped {
        return Gate::Stopped;
    }
    // A resume, or a hold with nothing left to apply: nothing to time.
    let Some(first) = due.changes.first() else { return Gate::Go };
    let recorded = due.recorded;
    if !due.timing.is_immediate() {
        let since = recorded.map_or(due.changed_at, |r| r.since.min(due.changed_at));
        // After a restart the last reload is known only through the hold it caused.
        let last_reload = due.last_reload.or_else(|| {
            let r = recorded.filter(|r| r.reason == HoldReason::MinInterval)?;
            r.until.checked_sub(due.timing.min_interval).ok()
        });
        let release = due.timing.release_at(since, last_reload);
        if let Some(reason) = release.held_by
            && release.at > due.now
        {
            let mut resources: Vec<_> = recorded.map(|r| r.resources.clone()).unwrap_or_default();
            resources.extend(due.changes.iter().map(|c| (c.resource.kind, c.resource.name.to_string())));
            resources.sort_unstable();
            resources.dedup();
            return Gate::Hold(HeldReload { since, until: release.at, reason, resources });
        }
    }
    match due.loop_verdict {
        Verdict::Allow => Gate::Go,
        Verdict::Trip { reloads, within } => Gate::Stop(LoopStop {
            at: due.now,
            reloads,
            within,
            resource: format!("{}/{}", first.resource.kind, first.resource.name),
        }),
    }
}

#[cfg(test)]
mod tests;
