//! The only place that writes. A per-workload queue: changes for one workload merge (and, with
//! `--coalesce-period`, wait for the window so several changes make one write); different
//! workloads are written concurrently, so one slow or failing workload never delays another.
//! Only the leader dispatches; a global rate limit protects the API server on large fan-outs.

mod api;
mod kube_api;
mod rate_limit;
mod writer;

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reloader_core::annotations::AnnotationKeys;
use reloader_core::markers::MarkerChange;
use reloader_core::model::WorkloadKey;
use tokio::sync::{Notify, Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument as _, debug, error, warn};

pub(crate) use api::{WorkloadApi, WorkloadViews};
pub(crate) use kube_api::KubeWorkloadApi;
use rate_limit::RateLimiter;
use writer::Writer;

use crate::notify::alerts::AlertQueue;
use crate::notify::events::EventSink;
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
            events: io.events,
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

    async fn write_in_span(self, key: WorkloadKey, pending: Pending) {
        // Clears the in-flight mark even if the write panics, so the workload is not stuck.
        let _in_flight = InFlight { executor: &self, key: &key };
        let inner = &self.inner;
        let _permit = inner.workers.clone().acquire_owned().await.expect("semaphore never closed");
        inner.metrics.workqueue_latency(pending.queued_at.elapsed());
        if pending.merged > 1 {
            inner.metrics.coalesced(pending.merged - 1);
        }
        if !pending.changes.is_empty() {
            inner.metrics.rate_limit_wait(inner.limiter.acquire().await);
            inner.writer.reload(&key, &pending.changes, pending.first_event).await;
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
