//! When a due write may go (docs/beyond-stakater.md §15): core's [`gate`] decides from the
//! workload's annotations, the hold it records and what this process remembers of its recent
//! reloads (the loop guard's count, the last reload a minimum interval counts from), kept here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use reloader_core::markers::MarkerChange;
use reloader_core::model::WorkloadKey;
use reloader_core::timing::{DueWrite, Gate, HeldReload, LoopGuard, ReloadHistory, Verdict, Windows, gate};
use reloader_core::views::WorkloadView;

/// How often the histories of workloads no longer reloading are dropped.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

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

    /// Whether the reload of `changes`, first seen at `changed_at`, goes now (core's
    /// [`gate`], with what this process remembers of the workload's reloads).
    pub(super) fn gate(
        &self,
        view: Option<&WorkloadView>,
        changes: &[MarkerChange],
        changed_at: Timestamp,
        now: Timestamp,
    ) -> Gate {
        let Some(view) = view else { return Gate::Go };
        let (timing, _) = view.reload_timing(self.default_windows.as_ref());
        let recorded = view.held_record().and_then(|text| HeldReload::parse(text).ok());
        let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        let history = recent.histories.get(&view.key);
        let loop_verdict = match (&self.loop_guard, history) {
            (Some(guard), Some(history)) => history.allows(guard, now),
            _ => Verdict::Allow,
        };
        gate(&DueWrite {
            changes,
            timing: &timing,
            recorded: recorded.as_ref(),
            changed_at,
            last_reload: recent.intervals.get(&view.key).map(|(at, _)| *at),
            loop_verdict,
            loop_stopped: view.loop_stopped(),
            now,
        })
    }

    /// A reload of `view`'s workload was written at `at`.
    pub(super) fn reloaded(&self, view: Option<&WorkloadView>, key: &WorkloadKey, at: Timestamp) {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(guard) = &self.loop_guard {
            recent.histories.entry(key.clone()).or_default().record(guard, at);
        }
        let min_interval = view.map(|v| v.reload_timing(None).0.min_interval).unwrap_or_default();
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
