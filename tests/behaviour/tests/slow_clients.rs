//! F53a (docs/behaviour.md): slow clients against the real binary's plain-HTTP listeners. 500
//! connections that each send part of a request line and never finish are held against the
//! metrics port, then against the pprof port: `/live`, `/metrics` and `/debug/pprof/` still
//! answer within a second, the process's descriptors stay within the connection cap (plus a
//! margin) of where they were, and the connections the cap made room from were closed by the
//! server (docs/architecture.md, "Listeners").

use std::time::{Duration, Instant};

use reloader_harness::free_port;
use reloader_tests::fixtures::*;
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

const SLOW_CLIENTS: usize = 500;
/// Every listener's connection cap (`reloader_http::Limits::DEFAULT`).
const MAX_CONNECTIONS: usize = 128;
/// Descriptors beyond the resting count and the cap: the listener's own, the probe's, and what
/// the controller opens meanwhile (a watch reconnecting).
const FD_MARGIN: usize = 32;
/// Descriptors beyond the resting count once the previous listener's slow clients have left:
/// what the controller opens meanwhile (a watch reconnecting, the probe's socket).
const SETTLED_MARGIN: usize = 4;
/// How long the previous listener's connections may take to be released once their clients left:
/// the header-read timeout (`reloader_http::Limits::DEFAULT`, 10 s) and some.
const SETTLE_WITHIN: Duration = Duration::from_secs(15);
/// How long a probe or a scrape may take while slow clients hold the port.
const ANSWER_WITHIN: Duration = Duration::from_secs(1);
/// What a slow client sends, and then nothing more.
const PARTIAL_REQUEST: &[u8] = b"GET /live HTTP/1.1\r\nHo";

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).expect("reading /proc/<pid>/fd").count()
}

/// This test process holds [`SLOW_CLIENTS`] sockets besides its own: the soft descriptor limit
/// (often 1024) is raised toward the hard one when it is short.
fn ensure_fd_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let needed = (SLOW_CLIENTS * 2) as u64 + 1024;
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current.is_some_and(|current| current < needed) {
        limit.current = Some(limit.maximum.map_or(needed, |maximum| maximum.min(needed)));
        setrlimit(Resource::Nofile, limit).expect("raising the soft RLIMIT_NOFILE");
    }
}

/// Waits until `pid` holds at most `bound` descriptors; panics when it does not within
/// [`SETTLE_WITHIN`] (connections whose clients left were never released).
async fn settle_fds(pid: u32, bound: usize, before: &str) {
    let deadline = Instant::now() + SETTLE_WITHIN;
    loop {
        let fds = open_fds(pid);
        if fds <= bound {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "before {before}: {fds} descriptors still open, more than {bound}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// [`SLOW_CLIENTS`] connections to `port`, each having sent [`PARTIAL_REQUEST`].
async fn hold_slow_clients(port: u16) -> Vec<TcpStream> {
    let mut held = Vec::with_capacity(SLOW_CLIENTS);
    for i in 0..SLOW_CLIENTS {
        let mut stream = TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap_or_else(|e| panic!("slow client {i} to port {port}: {e}"));
        stream.write_all(PARTIAL_REQUEST).await.unwrap();
        held.push(stream);
    }
    held
}

/// How many of `held` the server has closed (EOF or reset, seen without waiting).
fn closed_by_server(held: &[TcpStream]) -> usize {
    held.iter()
        .filter(|stream| {
            let mut byte = [0u8; 1];
            match stream.try_read(&mut byte) {
                Ok(0) => true,
                Ok(_) => false,
                Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
            }
        })
        .count()
}

/// GET `url` on a new connection; its status and how long it took. Panics past [`ANSWER_WITHIN`].
async fn answer(url: &str) -> (u16, Duration) {
    let client = reqwest::Client::builder().timeout(ANSWER_WITHIN).pool_max_idle_per_host(0).build().unwrap();
    let started = Instant::now();
    let response = client
        .get(url)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url} while slow clients hold the port: {e}"));
    let status = response.status().as_u16();
    response.bytes().await.unwrap_or_else(|e| panic!("reading {url}: {e}"));
    (status, started.elapsed())
}

#[tokio::test]
async fn slow_clients_never_hold_a_listener() {
    ensure_fd_limit();
    let env = TestEnv::new().await;
    let pprof_port = free_port();
    let reloader = env
        .reloader_builder()
        .args(["--enable-pprof".to_owned(), format!("--pprof-addr=127.0.0.1:{pprof_port}")])
        .start()
        .await
        .unwrap();
    let pid = reloader.pid();
    let metrics_port = reloader.port();
    let resting_fds = open_fds(pid);
    let fd_bound = resting_fds + MAX_CONNECTIONS + FD_MARGIN;

    let listeners = [
        ("metrics", metrics_port, vec!["/live", "/metrics", "/readyz"]),
        ("pprof", pprof_port, vec!["/debug/pprof/"]),
    ];
    for (listener, port, paths) in listeners {
        // The previous listener's connections are released once their clients left; each
        // listener is measured from rest, not on top of the one before.
        settle_fds(pid, resting_fds + SETTLED_MARGIN, listener).await;
        let held = hold_slow_clients(port).await;
        // Each path twice: once right after the flood, once after the server has caught up.
        for round in 0..2 {
            for path in &paths {
                let (status, took) = answer(&format!("http://127.0.0.1:{port}{path}")).await;
                assert_eq!(status, 200, "{listener} {path}");
                eprintln!("{listener}: {path} answered in {took:?} (round {round})");
            }
            let fds = open_fds(pid);
            eprintln!("{listener}: {fds} descriptors open (resting {resting_fds}, bound {fd_bound})");
            assert!(fds <= fd_bound, "{listener}: {fds} descriptors open, more than {fd_bound}");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let closed = closed_by_server(&held);
        eprintln!("{listener}: {closed} of {SLOW_CLIENTS} slow clients closed by the server");
        assert!(
            closed >= SLOW_CLIENTS - MAX_CONNECTIONS,
            "{listener}: only {closed} of {SLOW_CLIENTS} slow connections were closed by the server"
        );
        drop(held);
    }
    assert!(reloader.get("/live").await.unwrap().0 == 200, "the controller is still live");
}
