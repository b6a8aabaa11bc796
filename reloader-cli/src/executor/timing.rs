//! When a due write may go (docs/beyond-stakater.md §15): a workload's delay, minimum interval
//! and maintenance windows hold its reload; the loop guard stops a workload reloaded too often.
//! The executor records a hold on the workload itself, so a restart or a new leader applies it
//! once, at the same time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use reloader_core::markers::MarkerChange;
use reloader_core::model::WorkloadKey;
use reloader_core::timing::{
    HeldReload, HoldReason, LoopGuard, LoopStop, ReloadHistory, Timing, Verdict, Windows,
};
use reloader_core::views::WorkloadView;

/// How often the histories of workloads no longer reloading are dropped.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// What a due write does now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Gate {
    Go,
    /// Not before `record.until`; the record is what the workload keeps of the hold.
    Hold(HeldReload),
    /// The loop guard tripped: the write is dropped and the workload's reloads stop.
    Stop(LoopStop),
    /// The workload's reloads are stopped already (queued before the stop reached the index).
    Stopped,
}

/// The timing settings, and the recent reloads of each workload that the loop guard and the
/// minimum intervals count from.
pub(super) struct Timekeeper {
    default_windows: Option<Arc<Windows>>,
    loop_guard: Option<LoopGuard>,
    recent: Mutex<Recent>,
}

#[derive(Default)]
struct Recent {
    /// The loop guard's count, per workload reloaded within its window.
    histories: HashMap<WorkloadKey, ReloadHistory>,
    /// The last reload of each workload with a minimum interval, until that interval is over.
    intervals: HashMap<WorkloadKey, (Timestamp, Timestamp)>,
    pruned_at: Option<Timestamp>,
}

impl Timekeeper {
    pub(super) fn new(default_windows: Option<Arc<Windows>>, loop_guard: Option<LoopGuard>) -> Self {
        Timekeeper { default_windows, loop_guard, recent: Mutex::default() }
    }

    /// Whether the reload of `changes`, first seen at `changed_at`, goes now. A hold the
    /// workload records (from this or an earlier leader) counts from its own start.
    pub(super) fn gate(
        &self,
        view: Option<&WorkloadView>,
        changes: &[MarkerChange],
        changed_at: Timestamp,
        now: Timestamp,
    ) -> Gate {
        let Some(view) = view else { return Gate::Go };
        if view.loop_stopped() {
            return Gate::Stopped;
        }
        let (timing, _) = Timing::of_view(view, self.default_windows.as_ref());
        let recorded = view.held_record().and_then(|text| HeldReload::parse(text).ok());
        let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        if !timing.is_immediate() {
            let since = recorded.as_ref().map_or(changed_at, |r| r.since.min(changed_at));
            let last_reload = recent.intervals.get(&view.key).map(|(at, _)| *at).or_else(|| {
                // After a restart the last reload is known only through the hold it caused.
                let r = recorded.as_ref().filter(|r| r.reason == HoldReason::MinInterval)?;
                r.until.checked_sub(timing.min_interval).ok()
            });
            let release = timing.release_at(since, last_reload);
            if let Some(reason) = release.held_by
                && release.at > now
            {
                let mut resources: Vec<_> = recorded.map(|r| r.resources).unwrap_or_default();
                resources.extend(changes.iter().map(|c| (c.resource.kind, c.resource.name.to_string())));
                resources.sort_unstable();
                resources.dedup();
                return Gate::Hold(HeldReload { since, until: release.at, reason, resources });
            }
        }
        if let Some(guard) = &self.loop_guard
            && let Some(history) = recent.histories.get(&view.key)
            && let Verdict::Trip { reloads, within } = history.allows(guard, now)
        {
            let resource = changes.first().map(|c| format!("{}/{}", c.resource.kind, c.resource.name));
            return Gate::Stop(LoopStop { at: now, reloads, within, resource: resource.unwrap_or_default() });
        }
        Gate::Go
    }

    /// A reload of `view`'s workload was written at `at`.
    pub(super) fn reloaded(&self, view: Option<&WorkloadView>, key: &WorkloadKey, at: Timestamp) {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(guard) = &self.loop_guard {
            recent.histories.entry(key.clone()).or_default().record(guard, at);
        }
        let min_interval = view.map(|v| Timing::of_view(v, None).0.min_interval).unwrap_or_default();
        if let Ok(until) = at.checked_add(min_interval)
            && !min_interval.is_zero()
        {
            recent.intervals.insert(key.clone(), (at, until));
        }
        if recent.pruned_at.is_none_or(|p| at.duration_since(p).unsigned_abs() >= PRUNE_EVERY) {
            recent.pruned_at = Some(at);
            if let Some(guard) = &self.loop_guard {
                recent.histories.retain(|_, history| !history.is_idle(guard, at));
            }
            recent.intervals.retain(|_, (_, until)| *until > at);
        }
    }

    /// The loop guard stopped `key`: once an operator clears the stop, it starts counting anew.
    pub(super) fn forget(&self, key: &WorkloadKey) {
        self.recent.lock().unwrap_or_else(|e| e.into_inner()).histories.remove(key);
    }
}

#[cfg(test)]
mod tests;
