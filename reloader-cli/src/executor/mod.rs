//! The only place that writes. A per-workload queue: changes for one workload merge (and, with
//! `--coalesce-period`, wait for the window so several changes make one write); different
//! workloads are written concurrently, so one slow or failing workload never delays another.
//! Only the leader dispatches; a global rate limit protects the API server on large fan-outs.
//! A due write first passes the workload's timing and the loop guard ([`timing`]).

mod api;
mod kube_api;
mod rate_limit;
mod timing;
mod writer;

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use reloader_core::annotations::AnnotationKeys;
use reloader_core::markers::MarkerChange;
use reloader_core::model::WorkloadKey;
use reloader_core::timing::{Gate, HELD, HeldReload, HoldReason, LOOP_STOPPED, LoopGuard, Windows};
use tokio::sync::{Notify, Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument as _, debug, error, info, warn};

pub(crate) use api::{WorkloadApi, WorkloadViews};
pub(crate) use kube_api::KubeWorkloadApi;
use rate_limit::RateLimiter;
use timing::Timekeeper;
use writer::Writer;

use crate::notify::alerts::AlertQueue;
use crate::notify::events::{EventSink, EventTarget, WorkloadEvent};
use crate::observe::metrics::{SkipReason, WriteMetrics};
use crate::observe::trace;

/// Concurrent writes in flight (each to a different workload).
const WORKERS: usize = 8;
/// How long a shutdown waits for the writes in flight.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub(crate) enum Work {
    Reload(Vec<MarkerChange>),
    /// End a pause period (Deployments).
    Resume,
}

/// The executor's slice of the configuration.
#[derive(Debug, Clone)]
pub(crate) struct ExecutorConfig {
    /// `--coalesce-period`: how long a workload's first change waits for more.
    pub(crate) coalesce_period: Duration,
    /// `--max-writes-per-second` (0 or less: unlimited).
    pub(crate) max_writes_per_second: f64,
    pub(crate) dry_run: bool,
    pub(crate) keys: AnnotationKeys,
    /// `--maintenance-window`: the windows of workloads that set none.
    pub(crate) default_windows: Option<Arc<Windows>>,
    /// `--loop-guard` (`None`: off).
    pub(crate) loop_guard: Option<LoopGuard>,
}

/// What the executor talks to.
pub(crate) struct ExecutorIo {
    pub(crate) api: Arc<dyn WorkloadApi>,
    /// The index: a first attempt builds its write from the workload's view (no read).
    pub(crate) views: Arc<dyn WorkloadViews>,
    pub(crate) events: Arc<dyn EventSink>,
    /// `ALERT_ON_RELOAD` notifications, when configured.
    pub(crate) alerts: Option<Arc<dyn AlertQueue>>,
    /// True while this replica holds the lease (always true without HA).
    pub(crate) leader: watch::Receiver<bool>,
    pub(crate) metrics: WriteMetrics,
    pub(crate) clock: WallClock,
}

/// The handle that queues work; cheap to clone.
#[derive(Clone)]
pub(crate) struct Executor {
    inner: Arc<Inner>,
}

struct Inner {
    coalesce_period: Duration,
    leader: watch::Receiver<bool>,
    metrics: WriteMetrics,
    writer: Writer,
    state: Mutex<QueueState>,
    wake: Notify,
    limiter: RateLimiter,
    workers: Arc<Semaphore>,
    timekeeper: Timekeeper,
    events: Arc<dyn EventSink>,
    clock: WallClock,
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
    first_event: std::time::Instant,
    queued_at: Instant,
    merged: u64,
    /// The trace of the first change queued: the write is its child.
    trace: opentelemetry::Context,
    /// The traces of the changes merged into it: the write links to each.
    merged_traces: Vec<opentelemetry::Context>,
    /// When the first change was seen, on the wall clock (the timing annotations count from it).
    changed_at: Timestamp,
    /// Why the write is held, while it is (docs/beyond-stakater.md §15).
    held: Option<HoldReason>,
}

impl Pending {
    /// Takes in what was queued for the same workload while this one was being held.
    fn absorb(&mut self, newer: Pending) {
        for change in newer.changes {
            self.changes.retain(|c| c.resource != change.resource);
            self.changes.push(change);
        }
        self.resume |= newer.resume;
        self.merged += newer.merged;
        self.first_event = self.first_event.min(newer.first_event);
        self.changed_at = self.changed_at.min(newer.changed_at);
        self.merged_traces.push(newer.trace);
        self.merged_traces.extend(newer.merged_traces);
    }
}

/// The wall clock the timing annotations are read against: `Timestamp::now` in a run, a clock
/// that follows tokio's paused time in tests, so hours of holds cost nothing.
pub(crate) type WallClock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// `event_at` on the wall clock.
fn wall_clock(clock: &WallClock, event_at: std::time::Instant) -> Timestamp {
    let now = clock();
    let ago = jiff::SignedDuration::try_from(event_at.elapsed()).unwrap_or(jiff::SignedDuration::ZERO);
    now.checked_sub(ago).unwrap_or(now)
}

/// `at` on the monotonic clock the queue waits on.
fn monotonic(clock: &WallClock, at: Timestamp) -> Instant {
    let ahead = at.duration_since(clock());
    Instant::now() + std::time::Duration::try_from(ahead).unwrap_or_default()
}

impl Executor {
    /// The queue handle, and the dispatch loop that the caller owns and runs until `shutdown`;
    /// the loop then waits (bounded) for the writes in flight before it returns.
    pub(crate) fn new(
        config: ExecutorConfig,
        io: ExecutorIo,
        shutdown: CancellationToken,
    ) -> (Self, impl Future<Output = anyhow::Result<()>> + Send + 'static) {
        let writer = Writer {
            api: io.api,
            views: io.views,
            events: io.events.clone(),
            alerts: io.alerts,
            metrics: io.metrics.clone(),
            leader: io.leader.clone(),
            keys: config.keys,
            dry_run: config.dry_run,
        };
        let inner = Arc::new(Inner {
            coalesce_period: config.coalesce_period,
            leader: io.leader,
            metrics: io.metrics,
            writer,
            state: Mutex::default(),
            wake: Notify::new(),
            limiter: RateLimiter::new(config.max_writes_per_second),
            workers: Arc::new(Semaphore::new(WORKERS)),
            timekeeper: Timekeeper::new(config.default_windows, config.loop_guard),
            events: io.events,
            clock: io.clock,
        });
        let executor = Executor { inner };
        let dispatcher = executor.clone();
        (executor, async move { dispatcher.run(shutdown).await })
    }

    /// Queues work for a workload. `event_at` is when the triggering watch event arrived.
    pub(crate) fn enqueue(&self, key: WorkloadKey, work: Work, event_at: std::time::Instant) {
        let inner = &self.inner;
        if !*inner.leader.borrow() {
            // A standby writes nothing; on promotion the catch-up sweep finds what changed.
            inner.metrics.skipped(SkipReason::NotLeader);
            return;
        }
        let now = Instant::now();
        let mut context = Some(trace::current_context());
        let mut state = inner.state.lock().expect("queue lock");
        let entry = state.pending.entry(key).or_insert_with(|| Pending {
            changes: Vec::new(),
            resume: false,
            due: now + inner.coalesce_period,
            first_event: event_at,
            queued_at: now,
            merged: 0,
            trace: context.take().unwrap_or_default(),
            merged_traces: Vec::new(),
            changed_at: wall_clock(&inner.clock, event_at),
            held: None,
        });
        // Not the first: merged into a write another change started.
        entry.merged_traces.extend(context);
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
        inner.metrics.workqueue_add();
        inner.metrics.workqueue_depth(depth);
        inner.wake.notify_one();
    }

    /// Is a write to `key` queued or in flight?
    pub(crate) fn has_work(&self, key: &WorkloadKey) -> bool {
        let state = self.inner.state.lock().expect("queue lock");
        state.pending.contains_key(key) || state.in_flight.contains(key)
    }

    async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let mut writes = JoinSet::new();
        loop {
            for (key, pending) in self.take_due() {
                writes.spawn(self.clone().write(key, pending));
            }
            let next_due = self.next_due();
            let sleep = async {
                match next_due {
                    Some(due) => tokio::time::sleep_until(due).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = self.inner.wake.notified() => {}
                _ = sleep => {}
                Some(done) = writes.join_next() => report_write_end(done),
            }
        }
        // A clean shutdown lets the writes in flight finish; queued ones are left to the next
        // leader's catch-up.
        let drained = tokio::time::timeout(DRAIN_TIMEOUT, async {
            while let Some(done) = writes.join_next().await {
                report_write_end(done);
            }
        })
        .await;
        if drained.is_err() {
            warn!(writes = writes.len(), "shutting down with writes still in flight");
            writes.abort_all();
        }
        Ok(())
    }

    /// Takes every due item whose workload is not already being written, marking it in flight.
    fn take_due(&self) -> Vec<(WorkloadKey, Pending)> {
        let now = Instant::now();
        let mut state = self.inner.state.lock().expect("queue lock");
        if !*self.inner.leader.borrow() && !state.pending.is_empty() {
            self.inner.metrics.skipped(SkipReason::NotLeader);
            // A held reload stays recorded on its workload: the next leader takes it up.
            for reason in state.pending.values().filter_map(|p| p.held) {
                self.inner.metrics.released(reason);
            }
            state.pending.clear();
        }
        let due: Vec<WorkloadKey> = state
            .pending
            .iter()
            .filter(|(k, p)| p.due <= now && !state.in_flight.contains(*k))
            .map(|(k, _)| k.clone())
            .collect();
        let mut taken = Vec::with_capacity(due.len());
        for key in due {
            let Some(pending) = state.pending.remove(&key) else { continue };
            state.in_flight.insert(key.clone());
            taken.push((key, pending));
        }
        self.inner.metrics.workqueue_depth(state.pending.len() as i64);
        taken
    }

    /// When the next waiting item (not blocked by a write in flight) becomes due.
    fn next_due(&self) -> Option<Instant> {
        let state = self.inner.state.lock().expect("queue lock");
        state.pending.iter().filter(|(k, _)| !state.in_flight.contains(*k)).map(|(_, p)| p.due).min()
    }

    async fn write(self, key: WorkloadKey, pending: Pending) {
        let span = tracing::info_span!(
            "reloader.write",
            "reloader.workload.kind" = key.kind.as_str(),
            "k8s.namespace.name" = %key.namespace,
            "reloader.workload.name" = %key.name,
            "reloader.write.coalesced_changes" = pending.merged,
            "reloader.write.verb" = tracing::field::Empty,
            "http.request.method" = tracing::field::Empty,
            "http.response.status_code" = tracing::field::Empty,
            "reloader.write.retries" = tracing::field::Empty,
            "reloader.write.outcome" = tracing::field::Empty,
            "error.type" = tracing::field::Empty,
        );
        trace::set_parent(&span, &pending.trace);
        for merged in &pending.merged_traces {
            trace::add_link(&span, merged);
        }
        self.write_in_span(key, pending).instrument(span).await;
    }

    async fn write_in_span(self, key: WorkloadKey, mut pending: Pending) {
        // Clears the in-flight mark even if the write panics, so the workload is not stuck.
        let _in_flight = InFlight { executor: &self, key: &key };
        let inner = &self.inner;
        let _permit = inner.workers.clone().acquire_owned().await.expect("semaphore never closed");
        let view = inner.writer.views.view(&key);
        let now = (inner.clock)();
        let gate = match pending.changes.is_empty() {
            true => Gate::Go,
            false => inner.timekeeper.gate(view.as_ref(), &pending.changes, pending.changed_at, now),
        };
        let recorded = view.as_ref().and_then(|v| v.held_record()).map(str::to_owned);
        match gate {
            Gate::Hold(record) => return self.hold(&key, pending, record, recorded).await,
            Gate::Stop(stop) => {
                if let Some(reason) = pending.held.take() {
                    inner.metrics.released(reason);
                }
                warn!(workload = %key, resource = %stop.resource, reloads = stop.reloads, within = ?stop.within,
                      "reload loop: the workload was reloaded too often; its reloads stop until its {LOOP_STOPPED} annotation is deleted");
                inner.metrics.loop_stopped();
                inner.timekeeper.forget(&key);
                inner.writer.annotate(&key, LOOP_STOPPED, Some(&stop.to_annotation())).await;
                inner
                    .events
                    .record(WorkloadEvent::reload_loop_stopped(EventTarget::named(key.clone()), &stop));
                pending.changes.clear();
            }
            Gate::Stopped => {
                if let Some(reason) = pending.held.take() {
                    inner.metrics.released(reason);
                }
                inner.metrics.skipped(SkipReason::Decision(reloader_core::decide::SkipReason::LoopStopped));
                pending.changes.clear();
            }
            Gate::Go => {
                if let Some(reason) = pending.held.take() {
                    inner.metrics.released(reason);
                }
            }
        }
        inner.metrics.workqueue_latency(pending.queued_at.elapsed());
        if pending.merged > 1 {
            inner.metrics.coalesced(pending.merged - 1);
        }
        if !pending.changes.is_empty() {
            inner.metrics.rate_limit_wait(inner.limiter.acquire().await);
            if inner.writer.reload(&key, &pending.changes, pending.first_event).await {
                inner.timekeeper.reloaded(view.as_ref(), &key, (inner.clock)());
            }
        }
        // The hold is over (applied, reverted, or stopped): its record goes.
        if recorded.is_some() {
            inner.writer.annotate(&key, HELD, None).await;
        }
        if pending.resume {
            inner.metrics.rate_limit_wait(inner.limiter.acquire().await);
            // A span of its own: a resume joining a reload must not overwrite its outcome.
            // Always a PATCH; the writer records the rest.
            let span = tracing::info_span!(
                "reloader.resume",
                "http.response.status_code" = tracing::field::Empty,
                "reloader.write.outcome" = tracing::field::Empty,
                "error.type" = tracing::field::Empty,
            );
            inner.writer.resume(&key).instrument(span).await;
        }
        debug!(workload = %key, "write finished");
    }
}

impl Executor {
    /// Puts a held write back in the queue, due when its hold ends, and records the hold on the
    /// workload unless it already carries this record.
    async fn hold(
        &self,
        key: &WorkloadKey,
        mut pending: Pending,
        record: HeldReload,
        recorded: Option<String>,
    ) {
        let inner = &self.inner;
        let first = pending.held.is_none();
        match pending.held.replace(record.reason) {
            None => inner.metrics.hold_started(record.reason),
            Some(before) if before != record.reason => inner.metrics.hold_moved(before, record.reason),
            Some(_) => {}
        }
        let annotation = record.to_annotation();
        if first {
            let resources: Vec<String> = pending.changes.iter().map(|c| c.resource.to_string()).collect();
            info!(workload = %key, reason = record.reason.as_str(), until = %record.until, resources = ?resources, "reload held");
            let target = EventTarget::named(key.clone());
            let until = record.until.to_string();
            inner.events.record(WorkloadEvent::reload_held(
                target,
                &resources.join(", "),
                record.reason,
                &until,
            ));
        }
        {
            let mut state = inner.state.lock().expect("queue lock");
            if let Some(newer) = state.pending.remove(key) {
                pending.absorb(newer);
            }
            // A moment past the hold's end, so the wall clock has passed it too.
            pending.due = monotonic(&inner.clock, record.until) + HOLD_MARGIN;
            state.pending.insert(key.clone(), pending);
        }
        if recorded.as_deref() != Some(annotation.as_str()) {
            inner.writer.annotate(key, HELD, Some(&annotation)).await;
        }
    }
}

/// How long after a hold's end its write is due.
const HOLD_MARGIN: Duration = Duration::from_millis(20);

struct InFlight<'a> {
    executor: &'a Executor,
    key: &'a WorkloadKey,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let inner = &self.executor.inner;
        inner.state.lock().unwrap_or_else(|e| e.into_inner()).in_flight.remove(self.key);
        inner.wake.notify_one();
    }
}

fn report_write_end(done: Result<(), tokio::task::JoinError>) {
    if let Err(e) = done
        && e.is_panic()
    {
        error!(error = %e, "a workload write panicked");
    }
}

#[cfg(test)]
mod tests;
