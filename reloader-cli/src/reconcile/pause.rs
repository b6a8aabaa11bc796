//! Pause periods (docs/compatibility.md §8). The resume time is derived from the `paused-at` annotation the
//! Deployment itself carries, so a restart or a leader change never leaves it paused forever.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use reloader_core::model::{WorkloadKey, WorkloadKind};
use reloader_core::views::WorkloadView;
use reloader_workload_apps::pause_deadline;
use tokio::sync::{Notify, watch};
use tracing::info;

use super::WorkQueue;
use crate::executor::Work;

/// If a resume was queued but the watch still shows the workload paused, try again after this.
const RESUME_RETRY: Duration = Duration::from_secs(10);

/// The resume deadlines, shared by the reconciler (which records them from the workload views)
/// and the timer task (which queues the resumes).
#[derive(Clone, Default)]
pub(crate) struct PauseTimers {
    deadlines: Arc<Mutex<HashMap<WorkloadKey, Instant>>>,
    wake: Arc<Notify>,
}

impl PauseTimers {
    /// Records (or clears) the resume deadline of a workload from its current view.
    pub(crate) fn observe(&self, view: &WorkloadView) {
        let deadline = if view.key.kind == WorkloadKind::Deployment { resume_deadline(view) } else { None };
        let mut deadlines = self.deadlines.lock().expect("pause lock");
        match deadline {
            Some(at) => {
                if deadlines.insert(view.key.clone(), at).is_none_or(|old| old != at) {
                    self.wake.notify_one();
                }
            }
            None => {
                deadlines.remove(&view.key);
            }
        }
    }

    pub(crate) fn forget(&self, key: &WorkloadKey) {
        self.deadlines.lock().expect("pause lock").remove(key);
    }

    /// Queues the resumes that are due (only while leading); returns the next deadline.
    pub(super) fn resume_due(&self, leading: bool, now: Instant, queue: &dyn WorkQueue) -> Option<Instant> {
        let mut deadlines = self.deadlines.lock().expect("pause lock");
        if leading {
            for (key, at) in deadlines.iter_mut().filter(|(_, at)| **at <= now) {
                info!(workload = %key, "pause period over; resuming");
                queue.enqueue(key.clone(), Work::Resume, now);
                *at = now + RESUME_RETRY;
            }
        }
        deadlines.values().min().copied()
    }

    /// The timer task: every replica keeps the deadlines, only the leader acts on them, so a
    /// new leader resumes on time. Runs until dropped.
    pub(crate) async fn run(self, mut leader: watch::Receiver<bool>, queue: Arc<dyn WorkQueue>) {
        loop {
            let leading = *leader.borrow_and_update();
            let next = self.resume_due(leading, Instant::now(), queue.as_ref());
            let sleep = next
                .map(|n| n.saturating_duration_since(Instant::now()))
                .unwrap_or(Duration::from_secs(3600));
            tokio::select! {
                _ = tokio::time::sleep(sleep) => {}
                _ = self.wake.notified() => {}
                changed = leader.changed() => if changed.is_err() { return },
            }
        }
    }
}

/// When a Deployment reloader paused resumes, as an `Instant`. The backend reads the deadline from
/// the annotations, erring towards now (a removed or unreadable period, an unreadable `paused-at`)
/// so a Deployment never stays paused forever.
fn resume_deadline(view: &WorkloadView) -> Option<Instant> {
    let deadline = pause_deadline(view)?;
    let remaining = deadline.resume_at().duration_since(SystemTime::now()).unwrap_or(Duration::ZERO);
    Some(Instant::now() + remaining)
}
