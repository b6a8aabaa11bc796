//! Pause periods (compat.md §8). The resume time is derived from the `paused-at` annotation the
//! Deployment itself carries, so a restart or a leader change never leaves it paused forever.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reloader_core::duration::parse_go_duration;
use reloader_core::model::{WorkloadKey, WorkloadKind};
use reloader_core::views::WorkloadView;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::Context;
use crate::executor::{Executor, Work};

/// If a resume was queued but the watch still shows the workload paused, try again after this.
const RESUME_RETRY: Duration = Duration::from_secs(10);

#[derive(Clone)]
pub struct PauseTimers {
    deadlines: Arc<Mutex<HashMap<WorkloadKey, Instant>>>,
    wake: Arc<Notify>,
}

impl PauseTimers {
    pub fn start(ctx: Arc<Context>, executor: Executor, shutdown: CancellationToken) -> Self {
        let timers = PauseTimers { deadlines: Arc::default(), wake: Arc::new(Notify::new()) };
        let task = timers.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = task.run(ctx, executor) => {}
            }
        });
        timers
    }

    /// Records (or clears) the resume deadline of a workload from its current view.
    pub fn observe(&self, view: &WorkloadView) {
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

    pub fn forget(&self, key: &WorkloadKey) {
        self.deadlines.lock().expect("pause lock").remove(key);
    }

    async fn run(&self, ctx: Arc<Context>, executor: Executor) {
        let mut leader = ctx.leader.clone();
        loop {
            let now = Instant::now();
            let next = {
                let mut deadlines = self.deadlines.lock().expect("pause lock");
                if *leader.borrow() {
                    for (key, at) in deadlines.iter_mut().filter(|(_, at)| **at <= now) {
                        info!(workload = %key, "pause period over; resuming");
                        executor.enqueue(key.clone(), Work::Resume, now);
                        *at = now + RESUME_RETRY;
                    }
                }
                deadlines.values().min().copied()
            };
            let sleep = next
                .map(|n| n.saturating_duration_since(Instant::now()))
                .unwrap_or(Duration::from_secs(3600));
            tokio::select! {
                _ = tokio::time::sleep(sleep) => {}
                _ = self.wake.notified() => {}
                _ = leader.changed() => {}
            }
        }
    }
}

/// `paused-at` + `pause-period`, as an `Instant`, when reloader paused this workload.
fn resume_deadline(view: &WorkloadView) -> Option<Instant> {
    let paused_at = view.paused_at.as_deref()?;
    let period = view.pause_period.as_deref()?;
    let period = match parse_go_duration(period) {
        Ok(p) => p,
        Err(e) => {
            warn!(workload = %view.key, error = %e, "invalid pause period; resuming now");
            Duration::ZERO
        }
    };
    let paused_at = match chrono::DateTime::parse_from_rfc3339(paused_at) {
        Ok(t) => t.with_timezone(&chrono::Utc),
        Err(e) => {
            warn!(workload = %view.key, error = %e, "invalid paused-at annotation; resuming now");
            chrono::Utc::now()
        }
    };
    let resume_at = paused_at + chrono::Duration::from_std(period).ok()?;
    let remaining = (resume_at - chrono::Utc::now()).to_std().unwrap_or(Duration::ZERO);
    Some(Instant::now() + remaining)
}
