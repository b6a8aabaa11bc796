//! The bounds against real sockets on 127.0.0.1, with short limits.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::routing::get;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::Notify;

use super::*;

const SHORT: Limits = Limits {
    header_read_timeout: Duration::from_millis(300),
    idle_timeout: Duration::from_millis(300),
    max_connections: 4,
};
/// Far longer than any limit above: how long a test waits for what must happen.
const PATIENCE: Duration = Duration::from_secs(10);
const BIG_BODY: usize = 32 * 1024 * 1024;

struct TestServer {
    addr: SocketAddr,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    /// `/wait` answers once this is notified.
    release: Arc<Notify>,
}

async fn start(limits: Limits) -> TestServer {
    start_with(limits, Plain).await
}

async fn start_with(limits: Limits, handshake: impl Handshake) -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let release = Arc::new(Notify::new());
    let router = Router::new()
        .route("/live", get(|| async { "ok" }))
        .route("/big", get(|| async { vec![b'x'; BIG_BODY] }))
        .route(
            "/wait",
            get({
                let release = release.clone();
                move || async move {
                    release.notified().await;
                    "done"
                }
            }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(SHORT.idle_timeout * 4).await;
                "done"
            }),
        );
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(serve("test", listener, handshake, router, limits, shutdown.clone()));
    TestServer { addr, shutdown, task, release }
}

/// A client that sends `bytes` and keeps the connection open.
async fn send(addr: SocketAddr, bytes: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes.as_bytes()).await.unwrap();
    stream
}

fn request(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nhost: test\r\n\r\n")
}

/// Whether the server closed `stream` (EOF or reset) within `within`, reading whatever it sent.
async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buf = vec![0u8; 64 * 1024];
    tokio::time::timeout(within, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

/// The response to `GET path` on a new connection, whole.
async fn get_text(addr: SocketAddr, path: &str) -> String {
    let mut stream =
        send(addr, &format!("GET {path} HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n")).await;
    let mut response = String::new();
    tokio::time::timeout(PATIENCE, stream.read_to_string(&mut response)).await.unwrap().unwrap();
    response
}

/// Reads from a kept-alive connection until what came ends with `end`.
async fn read_response_ending(stream: &mut TcpStream, end: &str) {
    let mut received = Vec::new();
    let mut buf = vec![0u8; 4096];
    while !received.ends_with(end.as_bytes()) {
        let read = tokio::time::timeout(PATIENCE, stream.read(&mut buf)).await.unwrap().unwrap();
        assert!(read > 0, "closed before the response ended: {}", String::from_utf8_lossy(&received));
        received.extend_from_slice(&buf[..read]);
    }
}

#[tokio::test]
async fn a_partial_request_head_is_closed_at_the_header_read_timeout() {
    let server = start(SHORT).await;
    let started = Instant::now();
    let mut slow = send(server.addr, "GET /li").await;
    assert!(closed_within(&mut slow, PATIENCE).await, "still open");
    assert!(started.elapsed() >= SHORT.header_read_timeout, "closed before the timeout");
}

#[tokio::test]
async fn a_kept_alive_connection_serves_several_requests_then_closes_when_idle() {
    let server = start(SHORT).await;
    let mut stream = send(server.addr, &request("/live")).await;
    for _ in 0..3 {
        read_response_ending(&mut stream, "ok").await;
        stream.write_all(request("/live").as_bytes()).await.unwrap();
    }
    read_response_ending(&mut stream, "ok").await;
    assert!(closed_within(&mut stream, PATIENCE).await, "a kept-alive connection stays open forever");
}

#[tokio::test]
async fn a_client_that_stops_reading_a_response_is_closed_at_the_idle_timeout() {
    let limits = Limits { header_read_timeout: PATIENCE, ..SHORT };
    let server = start(limits).await;
    let mut stalled = send(server.addr, &request("/big")).await;
    // Long enough for the socket buffers to fill and the write to stall past the idle timeout.
    tokio::time::sleep(limits.idle_timeout * 5).await;
    let mut received = 0;
    let mut buf = vec![0u8; 1024 * 1024];
    let closed = tokio::time::timeout(PATIENCE, async {
        loop {
            match stalled.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(read) => received += read,
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the stalled connection is still open");
    assert!(received < BIG_BODY, "the whole body arrived: the connection was never stalled");
}

#[tokio::test]
async fn a_handler_working_longer_than_the_idle_timeout_is_answered() {
    let server = start(SHORT).await;
    let response = get_text(server.addr, "/slow").await;
    assert!(response.starts_with("HTTP/1.1 200") && response.ends_with("done"), "{response}");
}

#[tokio::test]
async fn at_the_cap_a_new_connection_takes_the_place_of_the_longest_idle() {
    let limits = Limits { header_read_timeout: PATIENCE, idle_timeout: PATIENCE, ..SHORT };
    let server = start(limits).await;
    let mut slow = Vec::new();
    for _ in 0..limits.max_connections * 3 {
        slow.push(send(server.addr, "GET /li").await);
        // A distinct idle time for each, so that "longest idle" is the order they came in.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let response = get_text(server.addr, "/live").await;
    assert!(response.starts_with("HTTP/1.1 200") && response.ends_with("ok"), "{response}");
    // All but the last `max_connections - 1` (the probe took one place) were closed, oldest first.
    let newest = slow.len() - (limits.max_connections - 1);
    for (i, stream) in slow.iter_mut().enumerate() {
        let closed = closed_within(stream, Duration::from_millis(500)).await;
        assert_eq!(closed, i < newest, "slow connection {i} of {}", limits.max_connections * 3);
    }
}

#[tokio::test]
async fn at_the_cap_with_every_connection_answering_a_new_one_is_closed() {
    let limits = Limits { idle_timeout: PATIENCE, max_connections: 2, ..SHORT };
    let server = start(limits).await;
    let waiting: Vec<_> = (0..2).map(|_| tokio::spawn(get_text(server.addr, "/wait"))).collect();
    // Both handlers are running once their requests are in.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut refused = send(server.addr, &request("/live")).await;
    assert!(closed_within(&mut refused, PATIENCE).await, "a third connection was served");
    server.release.notify_waiters();
    for waiting in waiting {
        let response = waiting.await.unwrap();
        assert!(response.ends_with("done"), "{response}");
    }
    let response = get_text(server.addr, "/live").await;
    assert!(response.ends_with("ok"), "{response}");
}

#[tokio::test]
async fn shutdown_answers_the_request_in_progress_then_returns() {
    let server = start(SHORT).await;
    let waiting = tokio::spawn(get_text(server.addr, "/wait"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.shutdown.cancel();
    tokio::time::sleep(Duration::from_millis(100)).await;
    server.release.notify_waiters();
    let response = waiting.await.unwrap();
    assert!(response.ends_with("done"), "{response}");
    tokio::time::timeout(PATIENCE, server.task).await.unwrap().unwrap();
    assert!(TcpStream::connect(server.addr).await.is_err(), "still listening after shutdown");
}

/// Plain HTTP that counts the server's connection streams open at once, and the most ever open.
#[derive(Clone, Default)]
struct CountingStreams {
    open: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

/// A server-side stream counted by [`CountingStreams`] until it is dropped (its socket closed).
struct Counted {
    inner: TcpStream,
    open: Arc<AtomicUsize>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Handshake for CountingStreams {
    type Stream = Counted;

    fn handshake(&self, tcp: TcpStream) -> impl Future<Output = io::Result<Counted>> + Send {
        let open = self.open.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(open, Ordering::SeqCst);
        std::future::ready(Ok(Counted { inner: tcp, open: self.open.clone() }))
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_connections_never_holds_more_sockets_than_the_cap() {
    let limits = Limits { header_read_timeout: PATIENCE, idle_timeout: PATIENCE, ..SHORT };
    let streams = CountingStreams::default();
    let server = start_with(limits, streams.clone()).await;
    // Connected in parallel and all at once, so that the server accepts faster than the
    // connections it displaces are closed.
    let clients: Vec<_> = (0..256).map(|_| tokio::spawn(send(server.addr, "GET /li"))).collect();
    let mut held = Vec::new();
    for client in clients {
        held.push(client.await.unwrap());
    }
    let response = get_text(server.addr, "/live").await;
    assert!(response.ends_with("ok"), "{response}");
    let most = streams.most.load(Ordering::SeqCst);
    assert!(most <= limits.max_connections, "{most} sockets open at once, cap {}", limits.max_connections);
}
