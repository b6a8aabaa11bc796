//! Applies one workload's queued changes: let its backend build the write (nothing if it already
//! carries the markers) from the object the index's view stands for — no read — or, for Jobs and
//! CronJobs and on every retry, from the object read fresh; send it, and retry per workload —
//! immediately after a re-read on 409, with backoff on transient errors (429, 5xx, no answer),
//! never sooner than the API server's `Retry-After`. Reports every outcome.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use kube::api::Patch;
use reloader_core::annotations::AnnotationKeys;
use reloader_core::markers::MarkerChange;
use reloader_core::model::WorkloadKey;
use reloader_core::skeleton::skeleton;
use reloader_core::workload::{PatchKind, Workload, WorkloadWrite, WriteContext, WriteError};
use tokio::sync::watch;
use tracing::{error, info, warn};

use super::api::{WorkloadApi, WorkloadViews};
use crate::kinds::{Loaded, precondition_failed};
use crate::notify::alerts::{AlertQueue, ReloadNotice};
use crate::notify::events::{EventSink, EventTarget, WorkloadEvent};
use crate::observe::metrics::{ActionResult, ErrorType, SkipReason, WriteMetrics};
use crate::views::workload_view;

/// Enough, with [`conflict_pause`], to outlast a writer updating the object in a tight loop.
const MAX_CONFLICT_RETRIES: u32 = 20;
const MAX_TRANSIENT_RETRIES: u32 = 5;
/// A write attempt (read and write) taking longer than this is logged.
const SLOW_ATTEMPT: Duration = Duration::from_secs(10);
/// The pause after the first transient failure; each further one doubles, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// The longest `Retry-After` obeyed: a write waiting holds one of the executor's workers.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
/// How long a Job to recreate may take to disappear after its deletion.
const JOB_DELETION_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub(crate) enum WriteFailure {
    #[error(transparent)]
    Api(#[from] kube::Error),
    #[error(transparent)]
    Backend(#[from] reloader_core::workload::WriteError),
    #[error("invalid JSON patch built for {0}: {1}")]
    Patch(WorkloadKey, serde_json::Error),
    #[error("Job {0} was not deleted within 30s; not recreating it")]
    JobStillPresent(String),
}

impl WriteFailure {
    /// The error as an Event reports it: for the API server's refusals its message alone, as
    /// Stakater's Events show it.
    fn event_text(&self) -> String {
        match self {
            WriteFailure::Api(kube::Error::Api(status)) => status.message.clone(),
            other => other.to_string(),
        }
    }

    /// The `reloader_errors_total{type}` label.
    pub(super) fn error_type(&self) -> ErrorType {
        match self {
            WriteFailure::Api(kube::Error::Api(e)) if e.code == 403 => ErrorType::Forbidden,
            WriteFailure::Api(kube::Error::Api(e)) if e.code == 409 => ErrorType::Conflict,
            WriteFailure::Api(kube::Error::Api(_)) => ErrorType::Api,
            WriteFailure::Api(_) => ErrorType::Transport,
            WriteFailure::Backend(_) => ErrorType::Workload,
            WriteFailure::Patch(..) => ErrorType::Patch,
            WriteFailure::JobStillPresent(_) => ErrorType::JobRecreate,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Outcome {
    Written,
    AlreadyCurrent,
    Gone,
    DryRun,
    /// Leadership was lost before the write: the next leader's catch-up applies it.
    NotLeader,
}

impl Outcome {
    /// The `reloader.write.outcome` of the write's span.
    fn as_label(self) -> &'static str {
        match self {
            Outcome::Written => "written",
            Outcome::AlreadyCurrent => "already_current",
            Outcome::Gone => "gone",
            Outcome::DryRun => "dry_run",
            Outcome::NotLeader => "not_leader",
        }
    }
}

/// Records the end of a write on its span (`reloader.write`, entered by the executor).
fn record_outcome(result: &Result<Outcome, WriteFailure>) {
    let span = tracing::Span::current();
    match result {
        Ok(outcome) => {
            span.record("reloader.write.outcome", outcome.as_label());
        }
        Err(failure) => {
            span.record("reloader.write.outcome", "error")
                .record("error.type", failure.error_type().as_label());
            if let WriteFailure::Api(kube::Error::Api(status)) = failure {
                span.record("http.response.status_code", status.code);
            }
        }
    }
}

/// The verb of a write and its HTTP method, for the write's span.
fn record_verb(write: &WorkloadWrite) {
    let (verb, method) = match write {
        WorkloadWrite::Patch { .. } => ("patch", "PATCH"),
        WorkloadWrite::CreateJob(_) => ("create", "POST"),
        // A DELETE, then the POST that counts.
        WorkloadWrite::RecreateJob(_) => ("recreate", "POST"),
    };
    tracing::Span::current().record("reloader.write.verb", verb).record("http.request.method", method);
}

/// What a write attempt builds from the workload (a reload's or a resume's write).
type BuildWrite<'a> = dyn Fn(&dyn Workload) -> Result<Option<WorkloadWrite>, WriteError> + Sync + 'a;

/// Where a write was built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// The index's view (no read): it may be behind the object.
    View,
    /// The object, read just before.
    Read,
}

/// What the writer needs: the API, where to report, and its slice of the configuration.
pub(crate) struct Writer {
    pub(crate) api: Arc<dyn WorkloadApi>,
    pub(crate) views: Arc<dyn WorkloadViews>,
    pub(crate) events: Arc<dyn EventSink>,
    pub(crate) alerts: Option<Arc<dyn AlertQueue>>,
    pub(crate) metrics: WriteMetrics,
    /// True while this replica holds the lease.
    pub(crate) leader: watch::Receiver<bool>,
    pub(crate) keys: AnnotationKeys,
    pub(crate) dry_run: bool,
}

impl Writer {
    fn write_context(&self) -> WriteContext<'_> {
        let now = chrono::Utc::now();
        WriteContext {
            keys: &self.keys,
            now_unix: now.timestamp(),
            now_rfc3339: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        }
    }

    /// Reloads `key` for `changes`; true when a write was made (not a dry run, not already current).
    pub(crate) async fn reload(
        &self,
        key: &WorkloadKey,
        changes: &[MarkerChange],
        first_event: Instant,
    ) -> bool {
        let started = Instant::now();
        let attempts = Attempts::new(key);
        let build = |w: &dyn Workload| w.reload_write(changes, &self.write_context());
        let (result, retries) = self.with_retries(key, || self.attempt(key, &attempts, &build)).await;
        record_outcome(&result);
        let target = attempts.into_target();
        let kind = key.kind;
        let written = matches!(result, Ok(Outcome::Written));
        match result {
            Ok(Outcome::Written) => {
                self.metrics.reload_executed(true, &key.namespace);
                self.metrics.action(kind, ActionResult::Success, started.elapsed());
                self.metrics.reload_latency(first_event.elapsed());
                for change in changes {
                    info!(workload = %key, resource = %change.resource, strategy = change.strategy.as_str(), retries, "reloaded");
                    self.events.record(WorkloadEvent::reloaded(target.clone(), &change.resource));
                    if let Some(alerts) = &self.alerts {
                        alerts
                            .send(ReloadNotice { workload: key.clone(), resource: change.resource.clone() });
                    }
                }
            }
            Ok(Outcome::DryRun) => {
                self.metrics.dry_run_write(kind);
                self.metrics.action(kind, ActionResult::DryRun, started.elapsed());
            }
            Ok(Outcome::AlreadyCurrent) => {
                self.metrics.skipped(SkipReason::Decision(reloader_core::decide::SkipReason::AlreadyCurrent))
            }
            Ok(Outcome::Gone) => self.metrics.skipped(SkipReason::WorkloadGone),
            Ok(Outcome::NotLeader) => self.metrics.skipped(SkipReason::NotLeader),
            Err(failure) => {
                self.metrics.reload_executed(false, &key.namespace);
                self.metrics.action(kind, ActionResult::Error, started.elapsed());
                self.metrics.error(failure.error_type());
                let resources: Vec<String> = changes.iter().map(|c| c.resource.to_string()).collect();
                error!(workload = %key, resources = ?resources, retries, error = %failure, "reload failed");
                // One per resource, as Stakater handles (and reports) each change on its own.
                let text = failure.event_text();
                for change in changes {
                    self.events.record(WorkloadEvent::reload_failed(target.clone(), &change.resource, &text));
                }
            }
        }
        written
    }

    /// Sets (`None`: removes) one of reloader's own annotations on the workload's metadata: a
    /// held reload's record, the loop guard's stop (docs/beyond-stakater.md §15). A merge patch
    /// touches nothing else and needs no read. True when written.
    pub(crate) async fn annotate(&self, key: &WorkloadKey, name: &'static str, value: Option<&str>) -> bool {
        if self.dry_run {
            info!(workload = %key, annotation = name, value, "dry run: would annotate");
            return false;
        }
        let patch = Patch::Merge(serde_json::json!({ "metadata": { "annotations": { name: value } } }));
        let attempt = || async {
            match self.api.patch(key, &patch).await {
                Ok(written) => {
                    self.views.written(workload_view(&written, &self.keys));
                    Ok(Outcome::Written)
                }
                Err(kube::Error::Api(e)) if e.code == 404 => Ok(Outcome::Gone),
                Err(e) => Err(WriteFailure::from(e)),
            }
        };
        match self.with_retries(key, attempt).await.0 {
            Ok(outcome) => matches!(outcome, Outcome::Written),
            Err(failure) => {
                self.metrics.error(failure.error_type());
                warn!(workload = %key, annotation = name, error = %failure, "could not write the annotation");
                false
            }
        }
    }

    pub(crate) async fn resume(&self, key: &WorkloadKey) {
        let attempts = Attempts::new(key);
        let build = |w: &dyn Workload| Ok(w.resume_write(&self.write_context()));
        let (result, _) = self.with_retries(key, || self.attempt(key, &attempts, &build)).await;
        record_outcome(&result);
        match result {
            Ok(Outcome::Written) => info!(workload = %key, "pause period over; resumed"),
            Ok(_) => {}
            Err(failure) => {
                self.metrics.error(failure.error_type());
                error!(workload = %key, error = %failure, "could not resume after the pause period");
                let target = attempts.into_target();
                self.events.record(WorkloadEvent::resume_failed(target, &failure.event_text()));
            }
        }
    }

    /// The write's result, and how many times it was retried.
    async fn with_retries<F, Fut>(
        &self,
        key: &WorkloadKey,
        mut attempt: F,
    ) -> (Result<Outcome, WriteFailure>, u32)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<Outcome, WriteFailure>>,
    {
        let (mut conflicts, mut transient) = (0, 0);
        let finish = |result, retries: u32| {
            tracing::Span::current().record("reloader.write.retries", retries);
            (result, retries)
        };
        loop {
            // Each attempt, not just the first: a replica demoted during retries must stop writing.
            if !*self.leader.borrow() {
                return finish(Ok(Outcome::NotLeader), conflicts + transient);
            }
            let started = tokio::time::Instant::now();
            let outcome = attempt().await;
            let took = started.elapsed();
            if took >= SLOW_ATTEMPT {
                // An API server that hangs instead of failing (e.g. while etcd is down) shows
                // nowhere else until the request times out.
                warn!(workload = %key, took = ?took, "the API server was slow to answer a write");
            }
            match outcome {
                Err(WriteFailure::Api(kube::Error::Api(e)))
                    if e.code == 409 && conflicts < MAX_CONFLICT_RETRIES =>
                {
                    conflicts += 1;
                    self.metrics.retry();
                    let pause = conflict_pause(conflicts);
                    warn!(workload = %key, attempt = conflicts, retry_in = ?pause, "conflict; re-reading and retrying");
                    tokio::time::sleep(pause).await;
                }
                Err(WriteFailure::Api(e)) if is_transient(&e) && transient < MAX_TRANSIENT_RETRIES => {
                    transient += 1;
                    self.metrics.retry();
                    let retry_after = retry_after(&e);
                    let pause = transient_pause(transient, retry_after, jitter());
                    if is_throttled(&e) {
                        warn!(workload = %key, error = %e, attempt = transient, retry_after = ?retry_after, retry_in = ?pause, "throttled by the API server (429); retrying");
                    } else {
                        warn!(workload = %key, error = %e, attempt = transient, retry_after = ?retry_after, retry_in = ?pause, "transient error; retrying");
                    }
                    tokio::time::sleep(pause).await;
                }
                other => return finish(other, conflicts + transient),
            }
        }
    }

    /// One attempt: the write `build` makes, sent. The first attempt builds it from the index's
    /// view when the kind allows (no read); a retry, or a view that cannot stand for the object,
    /// reads it first.
    async fn attempt(
        &self,
        key: &WorkloadKey,
        attempts: &Attempts,
        build: &BuildWrite<'_>,
    ) -> Result<Outcome, WriteFailure> {
        if attempts.first.swap(false, Ordering::Relaxed)
            && let Some(loaded) = self.stood_for_by_view(key)
            // A backend error from a view may only mean the view is behind: the read decides.
            && let Ok(write) = loaded.with(build)
        {
            attempts.remember_read(&loaded);
            return match write {
                Some(write) => self.send(key, write, Source::View, attempts).await,
                None => Ok(Outcome::AlreadyCurrent),
            };
        }
        let Some(loaded) = self.api.load(key).await? else { return Ok(Outcome::Gone) };
        attempts.remember_read(&loaded);
        match loaded.with(build)? {
            Some(write) => self.send(key, write, Source::Read, attempts).await,
            None => Ok(Outcome::AlreadyCurrent),
        }
    }

    /// The object the index's view of `key` stands for, where a write can be built from it.
    fn stood_for_by_view(&self, key: &WorkloadKey) -> Option<Loaded> {
        let view = self.views.view(key)?;
        Loaded::from_skeleton(key.kind, skeleton(&view, &self.keys)?)
    }

    async fn send(
        &self,
        key: &WorkloadKey,
        write: WorkloadWrite,
        source: Source,
        attempts: &Attempts,
    ) -> Result<Outcome, WriteFailure> {
        if !attempts.verb_recorded.swap(true, Ordering::Relaxed) {
            record_verb(&write);
        }
        if self.dry_run {
            info!(workload = %key, write = %describe(&write), "dry run: would write");
            return Ok(Outcome::DryRun);
        }
        // The API server's answer to a successful write: 200 for a patch, 201 for a creation.
        let success = match &write {
            WorkloadWrite::Patch { .. } => 200u16,
            WorkloadWrite::CreateJob(_) | WorkloadWrite::RecreateJob(_) => 201,
        };
        match write {
            WorkloadWrite::Patch { kind, body, precondition } => {
                let patch = match kind {
                    PatchKind::Strategic => Patch::Strategic(body),
                    PatchKind::Merge => Patch::Merge(body),
                    PatchKind::Json => Patch::Json(
                        serde_json::from_value(body).map_err(|e| WriteFailure::Patch(key.clone(), e))?,
                    ),
                };
                match self.api.patch(key, &patch).await {
                    // In the index before this write leaves the queue (docs/behaviour.md §C32e).
                    Ok(written) => self.views.written(workload_view(&written, &self.keys)),
                    // The view was behind: the workload is gone.
                    Err(kube::Error::Api(e)) if source == Source::View && e.code == 404 => {
                        return Ok(Outcome::Gone);
                    }
                    // A write built from the view that the object refuses (its resourceVersion
                    // moved, or the view missed a change the write depends on): re-read and retry,
                    // as after a conflict.
                    Err(kube::Error::Api(mut e)) if source == Source::View && e.code == 422 => {
                        e.code = 409;
                        return Err(kube::Error::Api(e).into());
                    }
                    // A precondition that failed: someone wrote the object since we read it, a
                    // conflict to re-read and retry like a 409.
                    Err(kube::Error::Api(mut e)) if e.code == 422 => {
                        let current_version = || self.api.resource_version(key);
                        if precondition_failed(kind, &precondition, &e, current_version).await? {
                            e.code = 409;
                        }
                        return Err(kube::Error::Api(e).into());
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            WorkloadWrite::CreateJob(job) => self.api.create_job(&key.namespace, &job).await?,
            WorkloadWrite::RecreateJob(job) => self.recreate_job(key, *job).await?,
        }
        tracing::Span::current().record("http.response.status_code", success);
        Ok(Outcome::Written)
    }

    async fn recreate_job(&self, key: &WorkloadKey, job: Job) -> Result<(), WriteFailure> {
        match self.api.delete_job(&key.namespace, &key.name).await {
            Ok(()) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
        let deadline = tokio::time::Instant::now() + JOB_DELETION_TIMEOUT;
        while self.api.job_exists(&key.namespace, &key.name).await? {
            if tokio::time::Instant::now() > deadline {
                return Err(WriteFailure::JobStillPresent(key.to_string()));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.api.create_job(&key.namespace, &job).await?;
        Ok(())
    }
}

/// The first conflict is retried at once; later ones after a growing, jittered pause (up to 1 s),
/// so that a writer in a tight loop cannot win every race between our read and our write.
fn conflict_pause(attempt: u32) -> Duration {
    if attempt <= 1 {
        return Duration::ZERO;
    }
    let ceiling = Duration::from_millis(10 << (attempt - 2).min(7)).min(Duration::from_secs(1));
    ceiling / 2 + ceiling.mul_f64(jitter() / 2.0)
}

/// The pause before retry `attempt` (from 1) of a transient failure: exponential backoff from
/// [`FIRST_BACKOFF`] to [`MAX_BACKOFF`], never shorter than the server's `Retry-After` (up to
/// [`MAX_RETRY_AFTER`]), plus up to half the backoff again (`jitter` in [0, 1)) so that the
/// workloads one throttled burst refused do not all come back at the same instant.
fn transient_pause(attempt: u32, retry_after: Option<Duration>, jitter: f64) -> Duration {
    let doublings = attempt.saturating_sub(1).min(16);
    let backoff = FIRST_BACKOFF.saturating_mul(1 << doublings).min(MAX_BACKOFF);
    let floor = retry_after.map_or(backoff, |server| backoff.max(server.min(MAX_RETRY_AFTER)));
    floor + backoff.mul_f64(jitter.clamp(0.0, 1.0) / 2.0)
}

/// A number in [0, 1) that differs between calls; enough to spread retries apart.
fn jitter() -> f64 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    f64::from(nanos.subsec_nanos() % 1_000_000) / 1_000_000.0
}

fn is_transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 429 || s.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

fn is_throttled(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 429)
}

/// The wait the API server asked for: `details.retryAfterSeconds` of its Status, where the
/// client's Retry-After layer (crate::client) also puts the `Retry-After` header.
fn retry_after(e: &kube::Error) -> Option<Duration> {
    let kube::Error::Api(status) = e else { return None };
    let seconds = status.details.as_ref()?.retry_after_seconds;
    (seconds > 0).then(|| Duration::from_secs(u64::from(seconds)))
}

fn describe(write: &WorkloadWrite) -> String {
    match write {
        WorkloadWrite::Patch { kind, body, .. } => format!("{kind:?} patch {body}"),
        WorkloadWrite::CreateJob(job) => format!("create Job from {:?}", job.metadata.generate_name),
        WorkloadWrite::RecreateJob(job) => format!("recreate Job {:?}", job.metadata.name),
    }
}

/// What the attempts of one write share.
struct Attempts {
    /// The object as last read: the Event about this write references it.
    read: Mutex<EventTarget>,
    /// No attempt made yet: the first may build its write from the index's view.
    first: AtomicBool,
    /// The write's verb is on its span (recorded once: a span field recorded again is logged
    /// twice).
    verb_recorded: AtomicBool,
}

impl Attempts {
    fn new(key: &WorkloadKey) -> Self {
        Self {
            read: Mutex::new(EventTarget::named(key.clone())),
            first: AtomicBool::new(true),
            verb_recorded: AtomicBool::new(false),
        }
    }

    /// Keeps the identity of the object just read.
    fn remember_read(&self, loaded: &Loaded) {
        let (uid, resource_version) =
            loaded.with(|w| (w.metadata().uid.clone(), w.metadata().resource_version.clone()));
        let mut target = self.read.lock().unwrap_or_else(|e| e.into_inner());
        target.uid = uid;
        target.resource_version = resource_version;
    }

    fn into_target(self) -> EventTarget {
        self.read.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{conflict_pause, retry_after, transient_pause};

    #[test]
    fn conflict_pauses_start_at_zero_and_stay_within_a_second() {
        assert_eq!(conflict_pause(1), Duration::ZERO);
        for attempt in 2..=20 {
            let pause = conflict_pause(attempt);
            assert!(
                pause >= Duration::from_millis(5) && pause <= Duration::from_secs(1),
                "{attempt}: {pause:?}"
            );
        }
    }

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn transient_pauses_double_honour_retry_after_and_stay_bounded() {
        // (attempt, Retry-After, jitter, pause)
        let cases: &[(u32, Option<u64>, f64, Duration)] = &[
            (1, None, 0.0, MS(200)),
            (2, None, 0.0, MS(400)),
            (3, None, 0.0, MS(800)),
            (5, None, 0.0, MS(3200)),
            (6, None, 0.0, MS(5000)),
            (40, None, 0.0, MS(5000)),
            (1, None, 0.5, MS(250)),
            (1, None, 0.999_999, MS(300) - Duration::from_nanos(100)),
            (3, None, 1.0, MS(1200)),
            // Retry-After sets the floor; the jitter is added on top.
            (1, Some(1), 0.0, MS(1000)),
            (1, Some(2), 0.5, MS(2050)),
            (4, Some(1), 0.0, MS(1600)),
            // An absurd Retry-After is capped.
            (1, Some(3600), 0.0, MS(30_000)),
            // Out-of-range jitter is clamped.
            (1, None, -3.0, MS(200)),
            (1, None, 7.0, MS(300)),
        ];
        for &(attempt, retry_after, jitter, expected) in cases {
            let pause = transient_pause(attempt, retry_after.map(Duration::from_secs), jitter);
            let off = pause.abs_diff(expected);
            assert!(
                off < Duration::from_micros(1),
                "{attempt} {retry_after:?} {jitter}: {pause:?} != {expected:?}"
            );
        }
    }

    #[test]
    fn without_retry_after_each_pause_is_longer_than_the_last_whatever_the_jitter() {
        for attempt in 1..5 {
            let longest = transient_pause(attempt, None, 0.999_999);
            let next_shortest = transient_pause(attempt + 1, None, 0.0);
            assert!(next_shortest > longest, "{attempt}: {longest:?} then {next_shortest:?}");
        }
    }

    #[test]
    fn retry_after_is_read_from_the_status_details() {
        let status = |details: Option<u32>| {
            let mut status = kube::core::Status::failure("slow down", "TooManyRequests").with_code(429);
            status.details = details.map(|seconds| kube::core::response::StatusDetails {
                name: String::new(),
                group: String::new(),
                kind: String::new(),
                uid: String::new(),
                causes: Vec::new(),
                retry_after_seconds: seconds,
            });
            kube::Error::Api(status.boxed())
        };
        let cases = [(Some(3), Some(Duration::from_secs(3))), (Some(0), None), (None, None)];
        for (details, expected) in cases {
            assert_eq!(retry_after(&status(details)), expected, "{details:?}");
        }
        assert_eq!(retry_after(&kube::Error::LinesCodecMaxLineLengthExceeded), None);
    }
}
