//! Local HTTP endpoints for `--webhook-url` and `ALERT_WEBHOOK_URL`: one that records every
//! request (and can be told to fail the next few), and one that accepts connections and never
//! answers.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use reloader_harness::PlaneError;
use reloader_harness::{NotYet, wait_until};

/// One request an [`HttpRecorder`] received, and the status it answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    pub content_type: Option<String>,
    /// The W3C trace context header, when the request carried one (tracing is on).
    pub traceparent: Option<String>,
    pub body: Vec<u8>,
    pub status: u16,
}

impl RecordedRequest {
    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON, if it is JSON.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

#[derive(Default)]
struct Recording {
    requests: Vec<RecordedRequest>,
    /// Requests still to be refused, and with which status.
    failures_left: usize,
    failure_status: u16,
}

/// An HTTP server on 127.0.0.1 that answers 200 to anything and records it; stopped on drop.
pub struct HttpRecorder {
    addr: SocketAddr,
    recording: Arc<Mutex<Recording>>,
    server: JoinHandle<()>,
}

impl HttpRecorder {
    /// Binds a free port and serves on the current tokio runtime.
    ///
    /// # Panics
    ///
    /// When no port can be bound on 127.0.0.1.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binding 127.0.0.1:0");
        let addr = listener.local_addr().expect("the recorder's address");
        let recording = Arc::new(Mutex::new(Recording::default()));
        let router = Router::new().fallback(record).with_state(recording.clone());
        let server = tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, router).await {
                eprintln!("the HTTP recorder stopped: {error}");
            }
        });
        Self { addr, recording, server }
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Answers the next `count` requests with `status` (they are recorded all the same).
    pub fn fail_next(&self, count: usize, status: u16) {
        let mut recording = lock(&self.recording);
        recording.failures_left = count;
        recording.failure_status = status;
    }

    /// Everything received so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.recording).requests.clone()
    }

    /// Waits until the requests received satisfy `done`; returns them.
    pub async fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&[RecordedRequest]) -> bool,
    ) -> Result<Vec<RecordedRequest>, PlaneError> {
        wait_until(what, timeout, || {
            let requests = self.requests();
            let ready = done(&requests);
            async move {
                if ready {
                    Ok(requests)
                } else {
                    Err(NotYet::because(format!("{} request(s) so far: {requests:?}", requests.len())))
                }
            }
        })
        .await
    }
}

impl Drop for HttpRecorder {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn record(
    State(recording): State<Arc<Mutex<Recording>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let mut recording = lock(&recording);
    let status = if recording.failures_left > 0 {
        recording.failures_left -= 1;
        StatusCode::from_u16(recording.failure_status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    } else {
        StatusCode::OK
    };
    recording.requests.push(RecordedRequest {
        method: method.to_string(),
        path: uri.path().to_owned(),
        content_type: headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_owned),
        traceparent: headers.get("traceparent").and_then(|v| v.to_str().ok()).map(str::to_owned),
        body: body.to_vec(),
        status: status.as_u16(),
    });
    status
}

fn lock(recording: &Mutex<Recording>) -> MutexGuard<'_, Recording> {
    recording.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A TCP endpoint that accepts every connection and never says a word: a sink that hangs each
/// request until the client gives up. Stopped on drop.
pub struct BlackHole {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    server: JoinHandle<()>,
}

impl BlackHole {
    /// # Panics
    ///
    /// When no port can be bound on 127.0.0.1.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binding 127.0.0.1:0");
        let addr = listener.local_addr().expect("the black hole's address");
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        let server = tokio::spawn(async move {
            // Held, never read or answered, until the task is aborted.
            let mut open = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::Relaxed);
                open.push(socket);
            }
        });
        Self { addr, accepted, server }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Relaxed)
    }
}

impl Drop for BlackHole {
    fn drop(&mut self) {
        self.server.abort();
    }
}
