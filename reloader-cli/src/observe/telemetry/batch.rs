//! The span pipeline between the controller and the exporter: a bounded queue that never blocks
//! the code that ends a span, drained by one thread that exports batches on its own small Tokio
//! runtime. A full queue or a failed export drops spans, and every dropped span is counted in
//! `reloader_trace_spans_dropped_total{reason}`: an unreachable collector costs traces, never
//! reload time.

use std::sync::Mutex;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use opentelemetry::Context;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};

use crate::observe::metrics::{SpanDropReason, trace_spans_dropped};

/// Ended spans waiting for export; beyond this, new ones are dropped.
pub(crate) const QUEUE_CAPACITY: usize = 2048;
/// Spans per export request.
const MAX_BATCH: usize = 512;
/// How long the first span of a batch waits for more before the batch is sent.
const BATCH_DELAY: Duration = Duration::from_secs(1);
/// An export that takes longer is abandoned and its spans counted as dropped.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(15);

enum Message {
    Span(Box<SpanData>),
    /// Export what is queued, then answer.
    Flush(SyncSender<()>),
    /// Export what is queued, shut the exporter down, answer and stop.
    Shutdown(SyncSender<()>),
}

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct BoundedBatchProcessor {
    queue: SyncSender<Message>,
    worker: Mutex<Option<JoinHandle<()>>>,
}

impl BoundedBatchProcessor {
    /// Starts the export thread; `exporter` was built inside `runtime`, which the thread drives.
    pub(crate) fn start<E: SpanExporter + 'static>(
        exporter: E,
        runtime: tokio::runtime::Runtime,
    ) -> std::io::Result<Self> {
        let (queue, pending) = sync_channel(QUEUE_CAPACITY);
        let worker = std::thread::Builder::new()
            .name("otlp-export".into())
            .spawn(move || ExportLoop { exporter, runtime, batch: Vec::new() }.run(pending))?;
        Ok(Self { queue, worker: Mutex::new(Some(worker)) })
    }

    /// Sends a control message and waits for its answer (blocking: shutdown and flush only).
    fn control(&self, message: impl FnOnce(SyncSender<()>) -> Message, timeout: Duration) -> OTelSdkResult {
        let (done, answer) = sync_channel(1);
        self.queue.send(message(done)).map_err(|_| OTelSdkError::AlreadyShutdown)?;
        answer.recv_timeout(timeout).map_err(|_| OTelSdkError::Timeout(timeout))
    }
}

impl SpanProcessor for BoundedBatchProcessor {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        match self.queue.try_send(Message::Span(Box::new(span))) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => trace_spans_dropped(SpanDropReason::QueueFull, 1),
            Err(TrySendError::Disconnected(_)) => trace_spans_dropped(SpanDropReason::ShutDown, 1),
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.control(Message::Flush, EXPORT_TIMEOUT)
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        let result = self.control(Message::Shutdown, timeout);
        if let Some(worker) = self.worker.lock().unwrap_or_else(|e| e.into_inner()).take()
            && result.is_ok()
        {
            worker.join().map_err(|_| OTelSdkError::InternalFailure("the export thread panicked".into()))?;
        }
        result
    }
}

struct ExportLoop<E> {
    exporter: E,
    runtime: tokio::runtime::Runtime,
    batch: Vec<SpanData>,
}

impl<E: SpanExporter> ExportLoop<E> {
    fn run(mut self, pending: Receiver<Message>) {
        let mut due: Option<Instant> = None;
        loop {
            let wait =
                due.map_or(Duration::from_secs(3600), |due| due.saturating_duration_since(Instant::now()));
            match pending.recv_timeout(wait) {
                Ok(Message::Span(span)) => {
                    due.get_or_insert_with(|| Instant::now() + BATCH_DELAY);
                    self.batch.push(*span);
                    if self.batch.len() >= MAX_BATCH {
                        self.export();
                        due = None;
                    }
                }
                Ok(Message::Flush(done)) => {
                    self.export();
                    due = None;
                    done.send(()).ok();
                }
                Ok(Message::Shutdown(done)) => {
                    self.export();
                    let _entered = self.runtime.enter();
                    self.exporter.shutdown().ok();
                    done.send(()).ok();
                    return;
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.export();
                    due = None;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.export();
                    return;
                }
            }
        }
    }

    fn export(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        let spans = batch.len() as u64;
        let exporter = &self.exporter;
        let exported = self
            .runtime
            .block_on(async { tokio::time::timeout(EXPORT_TIMEOUT, exporter.export(batch)).await });
        match exported {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                trace_spans_dropped(SpanDropReason::ExportFailed, spans);
                tracing::debug!(%error, spans, "OTLP export failed; spans dropped");
            }
            Err(_) => {
                trace_spans_dropped(SpanDropReason::ExportFailed, spans);
                tracing::debug!(spans, "OTLP export timed out; spans dropped");
            }
        }
    }
}
