//! From the watched objects' state to the directory: which objects are known, what the merged
//! files are, whether they differ from what is on disk, and the sidecar and init loops.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use reloader_core::model::ContentHash;
use thiserror::Error;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::backoff::ExponentialBackoff;
use super::metrics::Metrics;
use super::payload::{MergeWarning, Payload, SourceFiles, SourceId, fingerprint, merge};
use super::watch::SourceEvent;
use super::writer::AtomicWriter;

const WRITE_RETRY_INITIAL: Duration = Duration::from_millis(500);
const WRITE_RETRY_MAX: Duration = Duration::from_secs(30);

#[derive(Debug, Error)]
pub(crate) enum EngineError {
    #[error("every watch stopped")]
    WatchersStopped,
    #[error("timed out after {after:?} waiting for {}", missing.join(", "))]
    InitTimedOut { after: Duration, missing: Vec<String> },
    #[error("timed out after {after:?}: the objects exist but writing the directory failed: {error}")]
    InitWriteFailed { after: Duration, error: String },
}

/// What is known about one watched object.
#[derive(Debug)]
enum Slot {
    /// Not seen yet: it does not exist, or the API has not answered.
    Waiting {
        last_error: Option<String>,
    },
    Present(SourceFiles),
    /// Deleted after it was seen. Its files stay, as with a kubelet-mounted volume whose
    /// ConfigMap is deleted, so a deletion by mistake does not pull the config from under the app.
    Deleted(SourceFiles),
}

/// The latest known state of every watched object, in merge order.
#[derive(Debug)]
pub(crate) struct Tracker {
    sources: Vec<SourceId>,
    slots: Vec<Slot>,
}

impl Tracker {
    pub(crate) fn new(sources: Vec<SourceId>) -> Self {
        let slots = sources.iter().map(|_| Slot::Waiting { last_error: None }).collect();
        Self { sources, slots }
    }

    pub(crate) fn apply(&mut self, event: SourceEvent) {
        match event {
            SourceEvent::Observed { index, files: Some(files) } => {
                if !matches!(self.slots[index], Slot::Present(_)) {
                    tracing::info!(object = %self.sources[index], keys = files.files.len(), "object found");
                }
                self.slots[index] = Slot::Present(files);
            }
            SourceEvent::Observed { index, files: None } => {
                let slot = std::mem::replace(&mut self.slots[index], Slot::Waiting { last_error: None });
                self.slots[index] = match slot {
                    Slot::Present(files) => {
                        tracing::warn!(object = %self.sources[index], "object deleted; its files stay until it is re-created");
                        Slot::Deleted(files)
                    }
                    deleted @ Slot::Deleted(_) => deleted,
                    Slot::Waiting { .. } => Slot::Waiting { last_error: Some("not found".to_owned()) },
                };
            }
            SourceEvent::Failed { index, error } => {
                if let Slot::Waiting { last_error } = &mut self.slots[index] {
                    *last_error = Some(error);
                }
            }
        }
    }

    /// The merged files, once every object has been seen.
    pub(crate) fn desired(&self) -> Option<(Payload, Vec<MergeWarning>)> {
        let mut known = Vec::with_capacity(self.slots.len());
        for (id, slot) in self.sources.iter().zip(&self.slots) {
            match slot {
                Slot::Present(files) | Slot::Deleted(files) => known.push((id, files)),
                Slot::Waiting { .. } => return None,
            }
        }
        Some(merge(known))
    }

    /// The objects not seen yet, with the last reason, e.g. `secret/db (not found)`.
    pub(crate) fn missing(&self) -> Vec<String> {
        self.sources
            .iter()
            .zip(&self.slots)
            .filter_map(|(id, slot)| match slot {
                Slot::Waiting { last_error: Some(e) } => Some(format!("{id} ({e})")),
                Slot::Waiting { last_error: None } => {
                    Some(format!("{id} (no answer from the API server yet)"))
                }
                _ => None,
            })
            .collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SyncOutcome {
    /// Some object has not been seen yet.
    Waiting,
    /// The directory already holds the merged files.
    Unchanged,
    /// A new generation was swapped in.
    Written,
    Failed,
}

/// The tracker plus the directory, and what was last written there.
pub(crate) struct Engine {
    pub(crate) tracker: Tracker,
    writer: Arc<AtomicWriter>,
    metrics: Arc<Metrics>,
    /// Fingerprint of the directory's current generation; starts from what is on disk, so a
    /// sidecar that follows the init container does not rewrite or notify for the same content.
    written: Option<ContentHash>,
    last_write_error: Option<String>,
}

impl Engine {
    pub(crate) async fn new(tracker: Tracker, writer: AtomicWriter, metrics: Arc<Metrics>) -> Self {
        let writer = Arc::new(writer);
        let reader = writer.clone();
        let written = match tokio::task::spawn_blocking(move || reader.current()).await {
            Ok(Ok(current)) => current.as_ref().map(fingerprint),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cannot read the directory's current files; they will be rewritten");
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading the directory's current files panicked");
                None
            }
        };
        Self { tracker, writer, metrics, written, last_write_error: None }
    }

    /// Writes the merged files if they differ from the directory's.
    pub(crate) async fn sync(&mut self) -> SyncOutcome {
        let Some((payload, warnings)) = self.tracker.desired() else {
            return SyncOutcome::Waiting;
        };
        let new_fingerprint = fingerprint(&payload);
        if self.written == Some(new_fingerprint) {
            return SyncOutcome::Unchanged;
        }
        for warning in &warnings {
            tracing::warn!("{warning}");
        }
        let files = payload.len();
        let writer = self.writer.clone();
        let result = match tokio::task::spawn_blocking(move || writer.write(&payload)).await {
            Ok(result) => result.map_err(|e| e.to_string()),
            Err(e) => Err(format!("the write task failed: {e}")),
        };
        match result {
            Ok(()) => {
                self.written = Some(new_fingerprint);
                self.last_write_error = None;
                self.metrics.record_update();
                tracing::info!(dir = %self.writer.dir().display(), files, "wrote a new generation");
                SyncOutcome::Written
            }
            Err(error) => {
                self.metrics.record_write_error();
                tracing::error!(dir = %self.writer.dir().display(), %error, "cannot write the directory; will retry");
                self.last_write_error = Some(error);
                SyncOutcome::Failed
            }
        }
    }

    /// Waits for the next change and applies it with every change already queued behind it.
    async fn receive(&mut self, events: &mut mpsc::Receiver<SourceEvent>) -> Result<(), EngineError> {
        let first = events.recv().await.ok_or(EngineError::WatchersStopped)?;
        self.tracker.apply(first);
        // Several changes already queued become one generation.
        while let Ok(event) = events.try_recv() {
            self.tracker.apply(event);
        }
        Ok(())
    }
}

/// When a failed write is tried again: after a growing delay, reset by a successful write.
struct WriteRetry {
    backoff: ExponentialBackoff,
    at: Option<Instant>,
}

impl WriteRetry {
    fn new() -> Self {
        Self { backoff: ExponentialBackoff::new(WRITE_RETRY_INITIAL, WRITE_RETRY_MAX), at: None }
    }

    /// Keeps an already scheduled retry, so a stream of changes does not postpone it.
    fn schedule(&mut self) {
        let backoff = &mut self.backoff;
        self.at.get_or_insert_with(|| Instant::now() + backoff.next().unwrap_or(WRITE_RETRY_MAX));
    }

    /// Completes when the scheduled retry is due; never while none is scheduled.
    async fn due(&mut self) {
        match self.at {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
        self.at = None;
    }
}

/// Keeps the directory in step with the objects and publishes a new generation number after
/// every content change, until `shutdown` completes. `once_ready` runs when the directory first
/// holds every object's content.
pub(crate) async fn sidecar_loop(
    mut engine: Engine,
    mut events: mpsc::Receiver<SourceEvent>,
    generations: watch::Sender<u64>,
    shutdown: impl Future<Output = ()>,
    once_ready: impl FnOnce(),
) -> Result<(), EngineError> {
    let mut shutdown = std::pin::pin!(shutdown);
    let mut retry = WriteRetry::new();
    let mut once_ready = Some(once_ready);
    loop {
        tokio::select! {
            received = engine.receive(&mut events) => received?,
            () = retry.due() => {}
            () = &mut shutdown => return Ok(()),
        }
        let ready = match engine.sync().await {
            SyncOutcome::Written => {
                generations.send_modify(|generation| *generation += 1);
                retry = WriteRetry::new();
                true
            }
            SyncOutcome::Unchanged => true,
            SyncOutcome::Failed => {
                retry.schedule();
                false
            }
            SyncOutcome::Waiting => false,
        };
        if ready {
            engine.metrics.set_ready();
            if let Some(once_ready) = once_ready.take() {
                once_ready();
            }
        }
    }
}

/// Waits until every object exists, writes once (unless the directory already holds the same
/// files) and returns; fails after `timeout` naming what is missing.
pub(crate) async fn init_loop(
    mut engine: Engine,
    mut events: mpsc::Receiver<SourceEvent>,
    timeout: Duration,
) -> Result<(), EngineError> {
    let deadline = Instant::now() + timeout;
    let mut retry = WriteRetry::new();
    loop {
        tokio::select! {
            received = engine.receive(&mut events) => received?,
            () = retry.due() => {}
            () = tokio::time::sleep_until(deadline) => {
                return Err(match engine.last_write_error.take() {
                    Some(error) if engine.tracker.desired().is_some() => EngineError::InitWriteFailed { after: timeout, error },
                    _ => EngineError::InitTimedOut { after: timeout, missing: engine.tracker.missing() },
                });
            }
        }
        match engine.sync().await {
            SyncOutcome::Written | SyncOutcome::Unchanged => return Ok(()),
            SyncOutcome::Failed => retry.schedule(),
            SyncOutcome::Waiting => {}
        }
    }
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
