//! The one HTTP/1.1 server loop behind every listener reloader runs: the metrics and health
//! server, the pprof server, the sidecar's metrics server (plain) and the admission webhook
//! (behind a TLS handshake). Each connection is bounded three ways (docs/architecture.md,
//! "Listeners"):
//!
//! - **header-read timeout**: from the moment a connection waits for a request (a new one, or a
//!   kept-alive one between requests) until that request's head is in; a client that sends part
//!   of a request line and stops is closed then. A handshake (TLS) counts against it too;
//! - **idle timeout**: a connection on which no byte has moved either way for this long, while no
//!   handler is working on one of its requests, is closed: a client that stops reading a response
//!   (or sending a body) cannot hold it;
//! - **connection cap**: at most this many connections at once. At the cap, a new connection
//!   takes the place of the one that has been idle longest (a slow client is idle by the measure
//!   above), so a probe or a scrape still gets in while slow clients hold the rest; when every
//!   connection is answering a request, the new one is closed at once. The cap counts sockets:
//!   the new connection is served only once the one it displaced has closed its socket, so a
//!   burst of connections cannot outrun the closing of the displaced ones.
//!
//! A task per connection: a slow or stuck client never delays another.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tower::Service as _;
use tracing::{debug, warn};

/// The bounds of every connection; see the crate documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
}

impl Limits {
    /// What every reloader listener uses. Ten seconds for a request head is far longer than any
    /// kubelet probe, Prometheus scrape or API server call needs, and short enough that idle
    /// or half-open connections do not pile up; 128 connections are several times what the
    /// callers of one listener (probes, scrapers, API servers) open.
    pub const DEFAULT: Limits = Limits {
        header_read_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(30),
        max_connections: 128,
    };
}

/// How a connection becomes the byte stream HTTP is read from: as it is ([`Plain`]), or after a
/// handshake (TLS).
pub trait Handshake: Clone + Send + Sync + 'static {
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;

    fn handshake(&self, tcp: TcpStream) -> impl Future<Output = io::Result<Self::Stream>> + Send;
}

/// Plain HTTP: the TCP stream itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct Plain;

impl Handshake for Plain {
    type Stream = TcpStream;

    fn handshake(&self, tcp: TcpStream) -> impl Future<Output = io::Result<TcpStream>> + Send {
        std::future::ready(Ok(tcp))
    }
}

/// How long a shutdown waits for connections still answering a request.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long accepting pauses after it failed (out of file descriptors and the like).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `router` on `listener` within `limits` until `shutdown`; connections in progress are
/// then closed gracefully (their current request is answered, for at most [`CLOSE_TIMEOUT`]).
/// `name` names the server in logs.
pub async fn serve<H: Handshake>(
    name: &'static str,
    listener: TcpListener,
    handshake: H,
    router: Router,
    limits: Limits,
    shutdown: CancellationToken,
) {
    let registry = Arc::new(Registry::new(limits.max_connections));
    // Connections are owned here: finished ones are reaped as we go, and a shutdown waits
    // (bounded) for the ones still answering.
    let mut connections = JoinSet::new();
    loop {
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            Some(_) = connections.join_next() => continue,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    warn!(server = name, error = %e, "accepting a connection failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let Some(slot) = Registry::admit(&registry) else {
            debug!(server = name, %peer, "every connection is answering a request: a new one is closed");
            continue;
        };
        // Immediate unless a displaced connection has not closed its socket yet.
        let socket = tokio::select! {
            _ = shutdown.cancelled() => break,
            permit = registry.sockets.clone().acquire_owned() => permit.expect("the socket semaphore is never closed"),
        };
        let connection = Connection {
            name,
            peer,
            handshake: handshake.clone(),
            router: router.clone(),
            limits,
            socket,
            slot,
            shutdown: shutdown.clone(),
        };
        connections.spawn(connection.serve(stream));
    }
    if tokio::time::timeout(CLOSE_TIMEOUT, async { while connections.join_next().await.is_some() {} })
        .await
        .is_err()
    {
        connections.abort_all();
    }
}

/// The connections being served, for the cap: who is idle, and since when.
struct Registry {
    max_connections: usize,
    started: Instant,
    next_id: AtomicU64,
    /// The connections that hold a place: a displaced one leaves at once, so it is never chosen
    /// twice.
    live: Mutex<HashMap<u64, Arc<Activity>>>,
    /// One permit per connection socket, given back once the socket is closed: a displaced
    /// connection keeps its permit until its task has ended.
    sockets: Arc<Semaphore>,
}

impl Registry {
    fn new(max_connections: usize) -> Self {
        let max_connections = max_connections.max(1);
        Self {
            max_connections,
            started: Instant::now(),
            next_id: AtomicU64::new(0),
            live: Mutex::default(),
            sockets: Arc::new(Semaphore::new(max_connections)),
        }
    }

    /// A place for a new connection: free, or taken from the connection idle longest; `None`
    /// when every connection is answering a request.
    fn admit(registry: &Arc<Registry>) -> Option<Slot> {
        let mut live = registry.live.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if live.len() >= registry.max_connections {
            let (&oldest, _) = live
                .iter()
                .filter_map(|(id, activity)| activity.idle_for().map(|idle| (id, idle)))
                .max_by_key(|(_, idle)| *idle)?;
            if let Some(displaced) = live.remove(&oldest) {
                displaced.close.cancel();
            }
        }
        let id = registry.next_id.fetch_add(1, Ordering::Relaxed);
        let activity = Arc::new(Activity::new(registry.started));
        live.insert(id, activity.clone());
        Some(Slot { registry: registry.clone(), id, activity })
    }
}

/// A connection's place in the [`Registry`], given back when the connection ends.
struct Slot {
    registry: Arc<Registry>,
    id: u64,
    activity: Arc<Activity>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut live = self.registry.live.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        live.remove(&self.id);
    }
}

/// What the idle timeout and the cap read of one connection.
struct Activity {
    /// The registry's clock: `last_progress_ms` counts from it.
    started: Instant,
    /// When a byte last moved, or a handler last started or ended.
    last_progress_ms: AtomicU64,
    /// Requests whose handler is working (not idle, however long it takes).
    handlers: AtomicUsize,
    /// Cancelled to close the connection (its place was taken).
    close: CancellationToken,
}

impl Activity {
    fn new(started: Instant) -> Self {
        let activity = Self {
            started,
            last_progress_ms: AtomicU64::new(0),
            handlers: AtomicUsize::new(0),
            close: CancellationToken::new(),
        };
        activity.progress();
        activity
    }

    fn progress(&self) {
        let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_progress_ms.store(now, Ordering::Relaxed);
    }

    /// How long nothing has happened; `None` while a handler works.
    fn idle_for(&self) -> Option<Duration> {
        if self.handlers.load(Ordering::Acquire) > 0 {
            return None;
        }
        let last = Duration::from_millis(self.last_progress_ms.load(Ordering::Relaxed));
        Some(self.started.elapsed().saturating_sub(last))
    }

    /// Ends when the connection has been idle for `timeout`.
    async fn idle_timeout(&self, timeout: Duration) {
        loop {
            let wait = match self.idle_for() {
                None => timeout,
                Some(idle) if idle >= timeout => return,
                Some(idle) => timeout - idle,
            };
            tokio::time::sleep(wait).await;
        }
    }

    fn handler_started(self: &Arc<Self>) -> HandlerRunning {
        self.handlers.fetch_add(1, Ordering::AcqRel);
        self.progress();
        HandlerRunning(self.clone())
    }
}

/// Held while a handler works on a request.
struct HandlerRunning(Arc<Activity>);

impl Drop for HandlerRunning {
    fn drop(&mut self) {
        self.0.progress();
        self.0.handlers.fetch_sub(1, Ordering::AcqRel);
    }
}

struct Connection<H> {
    name: &'static str,
    peer: std::net::SocketAddr,
    handshake: H,
    router: Router,
    limits: Limits,
    /// Given back after the socket is closed: bound before the stream, so dropped after it.
    socket: OwnedSemaphorePermit,
    slot: Slot,
    shutdown: CancellationToken,
}

impl<H: Handshake> Connection<H> {
    async fn serve(self, tcp: TcpStream) {
        let Connection { name, peer, handshake, router, limits, socket: _socket, slot, shutdown } = self;
        let activity = slot.activity.clone();
        let _ = tcp.set_nodelay(true);
        let handshake = tokio::time::timeout(limits.header_read_timeout, handshake.handshake(tcp));
        let stream = tokio::select! {
            _ = activity.close.cancelled() => return,
            done = handshake => match done {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => {
                    debug!(server = name, %peer, error = %e, "handshake failed");
                    return;
                }
                Err(_) => {
                    debug!(server = name, %peer, "handshake timed out");
                    return;
                }
            },
        };
        let io = TokioIo::new(Tracked { inner: stream, activity: activity.clone() });
        let service = {
            let activity = activity.clone();
            hyper::service::service_fn(move |request| {
                let running = activity.handler_started();
                let response = router.clone().call(request);
                async move {
                    let response = response.await;
                    drop(running);
                    response
                }
            })
        };
        let connection = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout)
            .serve_connection(io, service);
        let mut connection = std::pin::pin!(connection);
        let result = tokio::select! {
            result = connection.as_mut() => result,
            _ = activity.close.cancelled() => {
                debug!(server = name, %peer, "connection closed: a new one took its place (connection cap)");
                return;
            }
            _ = activity.idle_timeout(limits.idle_timeout) => {
                debug!(server = name, %peer, "connection closed: idle timeout");
                return;
            }
            _ = shutdown.cancelled() => {
                connection.as_mut().graceful_shutdown();
                connection.await
            }
        };
        if let Err(e) = result {
            debug!(server = name, %peer, error = %e, "connection ended with an error");
        }
    }
}

/// A stream that records on its connection's [`Activity`] every time bytes move.
struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.progress();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(written)) if written > 0) {
            self.activity.progress();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(written)) if written > 0) {
            self.activity.progress();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests;
