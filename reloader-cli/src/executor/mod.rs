//! The only place that writes. A per-workload queue: changes for one workload merge (and, with
//! `--coalesce-period`, wait for the window so several changes make one write); different
//! workloads are written concurrently, so one slow or failing workload never delays another.
//! Only the leader dispatches; a global rate limit protects the API server on large fan-outs.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reloader_core::model::WorkloadKey;
use reloader_core::workload::MarkerChange;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::controller::Context;
mod writer;

pub(crate) use writer::FIELD_MANAGER;

/// Concurrent writes in flight (each to a different workload).
const WORKERS: usize = 8;

#[derive(Debug, Clone)]
pub enum Work {
    Reload(Vec<MarkerChange>),
    /// End a pause period (Deployments).
    Resume,
}

#[derive(Clone)]
pub struct Executor {
    inner: Arc<Inner>,
}

struct Inner {
    ctx: Arc<Context>,
    state: Mutex<QueueState>,
    wake: Notify,
    idle: Notify,
    limiter: RateLimiter,
    workers: Arc<Semaphore>,
}

#[derive(Default)]
struct QueueState {
    pending: HashMap<WorkloadKey, Pending>,
    in_flight: HashSet<WorkloadKey>,
}

struct Pending {
    changes: Vec<MarkerChange>,
    resume: bool,
    due: Instant,
    first_event: Instant,
    queued_at: Instant,
    merged: u64,
}

impl Executor {
    pub fn start(ctx: Arc<Context>, shutdown: CancellationToken) -> Self {
        let limiter = RateLimiter::new(ctx.options.max_writes_per_second);
        let inner = Arc::new(Inner {
            ctx,
            state: Mutex::default(),
            wake: Notify::new(),
            idle: Notify::new(),
            limiter,
            workers: Arc::new(Semaphore::new(WORKERS)),
        });
        let executor = Executor { inner };
        let dispatcher = executor.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = dispatcher.dispatch_loop() => {}
            }
        });
        executor
    }

    /// Queues work for a workload. `event_at` is when the triggering watch event arrived.
    pub fn enqueue(&self, key: WorkloadKey, work: Work, event_at: Instant) {
        let ctx = &self.inner.ctx;
        if !*ctx.leader.borrow() {
            // A standby writes nothing; on promotion the catch-up sweep finds what changed.
            ctx.metrics.skipped("not_leader");
            return;
        }
        let now = Instant::now();
        let mut state = self.inner.state.lock().expect("queue lock");
        let entry = state.pending.entry(key).or_insert_with(|| Pending {
            changes: Vec::new(),
            resume: false,
            due: now + ctx.options.coalesce_period,
            first_event: event_at,
            queued_at: now,
            merged: 0,
        });
        match work {
            Work::Reload(changes) => {
                for change in changes {
                    // The newest change for a resource wins; others for that workload stay.
                    entry.changes.retain(|c| c.resource != change.resource);
                    entry.changes.push(change);
                    entry.merged += 1;
                }
            }
            Work::Resume => entry.resume = true,
        }
        let depth = state.pending.len() as i64;
        drop(state);
        ctx.metrics.workqueue_add();
        ctx.metrics.workqueue_depth(depth);
        self.inner.wake.notify_one();
    }

    /// Waits (bounded) for writes in flight to finish, for a clean shutdown.
    pub async fn drain(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.inner.state.lock().expect("queue lock").in_flight.is_empty() {
                return;
            }
            let _ = tokio::time::timeout(Duration::from_millis(200), self.inner.idle.notified()).await;
        }
    }

    async fn dispatch_loop(&self) {
        loop {
            let next_due = self.dispatch_due();
            let sleep = next_due.map(|d| d.saturating_duration_since(Instant::now()));
            match sleep {
                Some(d) => {
                    let _ = tokio::time::timeout(d, self.inner.wake.notified()).await;
                }
                None => self.inner.wake.notified().await,
            }
        }
    }

    /// Starts every due item whose workload is not already being written; returns the next due time.
    fn dispatch_due(&self) -> Option<Instant> {
        let now = Instant::now();
        let mut state = self.inner.state.lock().expect("queue lock");
        if !*self.inner.ctx.leader.borrow() && !state.pending.is_empty() {
            self.inner.ctx.metrics.skipped("not_leader");
            state.pending.clear();
        }
        let due: Vec<WorkloadKey> = state
            .pending
            .iter()
            .filter(|(k, p)| p.due <= now && !state.in_flight.contains(*k))
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            let Some(pending) = state.pending.remove(&key) else { continue };
            state.in_flight.insert(key.clone());
            self.spawn_write(key, pending);
        }
        self.inner.ctx.metrics.workqueue_depth(state.pending.len() as i64);
        state.pending.iter().filter(|(k, _)| !state.in_flight.contains(*k)).map(|(_, p)| p.due).min()
    }

    fn spawn_write(&self, key: WorkloadKey, pending: Pending) {
        let executor = self.clone();
        tokio::spawn(async move {
            let inner = &executor.inner;
            let _permit = inner.workers.clone().acquire_owned().await.expect("semaphore never closed");
            inner.ctx.metrics.workqueue_latency(pending.queued_at.elapsed());
            if pending.merged > 1 {
                inner.ctx.metrics.coalesced(pending.merged - 1);
            }
            if !pending.changes.is_empty() {
                inner.ctx.metrics.rate_limit_wait(inner.limiter.acquire().await);
                writer::reload(&inner.ctx, &key, &pending.changes, pending.first_event).await;
            }
            if pending.resume {
                inner.ctx.metrics.rate_limit_wait(inner.limiter.acquire().await);
                writer::resume(&inner.ctx, &key).await;
            }
            debug!(workload = %key, "write finished");
            inner.state.lock().expect("queue lock").in_flight.remove(&key);
            inner.wake.notify_one();
            inner.idle.notify_waiters();
        });
    }
}

/// A token bucket: `rate` writes per second, bursts up to one second's worth.
struct RateLimiter {
    rate: f64,
    state: tokio::sync::Mutex<(f64, Instant)>,
}

impl RateLimiter {
    fn new(rate: f64) -> Self {
        let rate = if rate.is_finite() && rate > 0.0 { rate } else { f64::INFINITY };
        RateLimiter { rate, state: tokio::sync::Mutex::new((rate.min(1e9), Instant::now())) }
    }

    /// Waits for a token; returns how long it waited.
    async fn acquire(&self) -> Duration {
        let started = Instant::now();
        if self.rate.is_infinite() {
            return Duration::ZERO;
        }
        let mut state = self.state.lock().await;
        let (tokens, last) = &mut *state;
        let now = Instant::now();
        *tokens = (*tokens + now.duration_since(*last).as_secs_f64() * self.rate).min(self.rate.max(1.0));
        *last = now;
        if *tokens < 1.0 {
            let wait = Duration::from_secs_f64((1.0 - *tokens) / self.rate);
            tokio::time::sleep(wait).await;
            *tokens = 1.0;
            *last = Instant::now();
        }
        *tokens -= 1.0;
        started.elapsed()
    }
}
