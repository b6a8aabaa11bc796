//! `--enable-pprof`: Go's profiling endpoints on `--pprof-addr`, read by `go tool pprof`
//! (docs/monitoring.md):
//!
//! - `/debug/pprof/profile?seconds=N`: a CPU profile over N seconds (default 30, at most
//!   [`MAX_CPU_SECONDS`]), one at a time;
//! - `/debug/pprof/heap`: the live heap, sampled by jemalloc ([`super::memory`]);
//! - `/debug/pprof/`: an index of the two.
//!
//! Never served on the metrics port (docs/compatibility.md §1): that port is usually reachable
//! by every scraper in the cluster, and a profile shows the code's inner workings.

mod cpu;
mod heap;
mod query;

use std::sync::Arc;

use anyhow::Context as _;
use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use reloader_core::options::ListenAddr;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use query::{HeapQuery, ProfileQuery};

/// The endpoints served, for the index and the answer to an unknown profile name.
const PROFILES: [(&str, &str); 2] = [
    ("profile", "CPU profile. Add ?seconds=N (default 30) for the duration; one at a time."),
    ("heap", "A sampling of the memory in use (live objects), by allocation site."),
];

#[derive(Clone)]
struct PprofState {
    /// Held while a CPU profile runs: the sampler is process-wide.
    cpu_profile: Arc<tokio::sync::Mutex<()>>,
    /// A CPU profile ends early (with what it has) when the process shuts down.
    shutdown: CancellationToken,
}

/// Starts sampling allocations for `/debug/pprof/heap`: call it first thing with
/// `--enable-pprof`, so that the profile covers the clients and caches built at start-up.
pub(crate) async fn start_heap_sampling() {
    heap::activate().await;
}

/// Binds `addr` (crate::listen: `:port` is dual-stack) and serves until `shutdown` is cancelled.
pub(crate) async fn serve(addr: ListenAddr, shutdown: CancellationToken) -> anyhow::Result<()> {
    let listener =
        crate::listen::bind(addr).with_context(|| format!("binding the pprof server to {addr}"))?;
    serve_listener(listener, shutdown).await
}

/// Serves on an already bound listener until `shutdown` is cancelled.
pub(crate) async fn serve_listener(listener: TcpListener, shutdown: CancellationToken) -> anyhow::Result<()> {
    let local_addr = listener.local_addr().context("reading the pprof server's local address")?;
    tracing::info!(address = %local_addr, "serving /debug/pprof/ (profile, heap)");
    serve_state(listener, PprofState { cpu_profile: Arc::default(), shutdown }).await;
    Ok(())
}

/// Bounded as every listener (reloader_http): a CPU profile's handler may run up to
/// `MAX_CPU_SECONDS`, which the idle timeout does not count (a handler at work is not idle).
async fn serve_state(listener: TcpListener, state: PprofState) {
    let shutdown = state.shutdown.clone();
    let limits = reloader_http::Limits::DEFAULT;
    reloader_http::serve("pprof", listener, reloader_http::Plain, router(state), limits, shutdown).await;
}

fn router(state: PprofState) -> Router {
    Router::new()
        .route("/debug/pprof", get(|| async { Redirect::permanent("/debug/pprof/") }))
        .route("/debug/pprof/", get(index))
        .route("/debug/pprof/profile", get(cpu_profile))
        .route("/debug/pprof/heap", get(heap_profile))
        .route("/debug/pprof/{name}", get(unknown_profile))
        .with_state(state)
}

async fn index() -> Response {
    let rows: String = PROFILES
        .iter()
        .map(|(name, about)| format!("<tr><td><a href=\"{name}\">{name}</a></td><td>{about}</td></tr>\n"))
        .collect();
    let body = format!(
        "<html><head><title>/debug/pprof/</title></head><body>\n/debug/pprof/<br><br>\n\
         Profiles of reloader (read them with <code>go tool pprof http://HOST:PORT/debug/pprof/heap</code>):\n\
         <table>\n{rows}</table>\n</body></html>\n"
    );
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

async fn cpu_profile(State(state): State<PprofState>, RawQuery(query): RawQuery) -> Response {
    let duration = match ProfileQuery::parse(query.as_deref()) {
        Ok(query) => query.duration,
        Err(error) => return (StatusCode::BAD_REQUEST, error.to_string()).into_response(),
    };
    let Ok(permit) = state.cpu_profile.clone().try_lock_owned() else {
        return (StatusCode::CONFLICT, "a CPU profile is already being taken; try again when it ends\n")
            .into_response();
    };
    // The sampler runs on a blocking thread until `stop` is dropped: `duration` after it started
    // (starting can take seconds: pprof-rs loads the binary's symbols first), at shutdown, or
    // when the client goes away (this future is dropped).
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let (started, sampling) = tokio::sync::oneshot::channel::<()>();
    let mut recording = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let profile = cpu::record(started, &stopped);
        release_profiling_memory();
        profile
    });
    let sample_for = async {
        if sampling.await.is_ok() {
            tokio::time::sleep(duration).await;
        }
    };
    let early = tokio::select! {
        () = sample_for => None,
        () = state.shutdown.cancelled() => None,
        ended = &mut recording => Some(ended),
    };
    drop(stop);
    let ended = match early {
        Some(ended) => ended,
        None => recording.await,
    };
    release_after_answer();
    match ended {
        Ok(Ok(profile)) => profile_response("profile", profile),
        Ok(Err(error)) => error_response(StatusCode::INTERNAL_SERVER_ERROR, &error),
        Err(join) => error_response(StatusCode::INTERNAL_SERVER_ERROR, &join),
    }
}

async fn heap_profile(RawQuery(query): RawQuery) -> Response {
    if let Err(error) = HeapQuery::parse(query.as_deref()) {
        return (StatusCode::BAD_REQUEST, error.to_string()).into_response();
    }
    let dumped = heap::dump().await;
    release_after_answer();
    match dumped {
        Ok(profile) => profile_response("heap", profile),
        Err(error) => error_response(error.status(), &error),
    }
}

/// Gives back what taking a profile cost (docs/monitoring.md, "Profiles"): the symbol tables
/// read to name its frames (the `backtrace` crate keeps them, and the binary they were read from
/// mapped, for the life of the process), the allocator's pages freed since, and the pages of this
/// binary that unwinding and symbolising read (its unwind tables and code: paged out again, as
/// after start-up).
fn release_profiling_memory() {
    backtrace::clear_symbol_cache();
    super::memory::flush_thread_cache();
    super::memory::release_free_memory();
    super::memory::release_cold_code();
}

/// How long after a profile's answer the memory its sending used is given back too.
const RELEASE_AFTER_ANSWER: std::time::Duration = std::time::Duration::from_secs(1);

/// Once the answer has gone out: sending it ran code, and freed the profile's bytes.
fn release_after_answer() {
    tokio::spawn(async {
        tokio::time::sleep(RELEASE_AFTER_ANSWER).await;
        let _ = tokio::task::spawn_blocking(release_profiling_memory).await;
    });
}

/// Go's answer for a profile it does not know, with the names this server has.
async fn unknown_profile(Path(name): Path<String>) -> Response {
    let served: Vec<&str> = PROFILES.iter().map(|(name, _)| *name).collect();
    let body = format!("Unknown profile: {name} (reloader serves {})\n", served.join(", "));
    (StatusCode::NOT_FOUND, body).into_response()
}

/// As Go's net/http/pprof: a download named after the profile.
fn profile_response(name: &str, profile: Vec<u8>) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
            (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{name}\"")),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_owned()),
        ],
        profile,
    )
        .into_response()
}

fn error_response(status: StatusCode, error: &dyn std::fmt::Display) -> Response {
    tracing::warn!(error = %error, "pprof: the profile could not be taken");
    (status, format!("could not take the profile: {error}\n")).into_response()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::query::MAX_CPU_SECONDS;
    use super::*;

    /// How long a CPU profile may take beyond its duration (symbolising, encoding).
    const ENCODING_SLACK: Duration = Duration::from_secs(30);

    struct TestServer {
        base: String,
        state: PprofState,
        task: tokio::task::JoinHandle<()>,
    }

    async fn start() -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let state = PprofState { cpu_profile: Arc::default(), shutdown: CancellationToken::new() };
        let task = tokio::spawn(serve_state(listener, state.clone()));
        TestServer { base, state, task }
    }

    async fn get(url: String) -> (u16, String) {
        let response = reqwest::get(url).await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap_or_default())
    }

    #[tokio::test]
    async fn index_bad_queries_and_unknown_profiles() {
        let server = start().await;
        let (status, body) = get(format!("{}/debug/pprof/", server.base)).await;
        assert_eq!(status, 200);
        for (name, _) in PROFILES {
            assert!(body.contains(&format!("href=\"{name}\"")), "{body}");
        }
        let too_long = MAX_CPU_SECONDS + 1;
        let (status, body) = get(format!("{}/debug/pprof/profile?seconds={too_long}", server.base)).await;
        assert_eq!(status, 400, "{body}");
        let (status, body) = get(format!("{}/debug/pprof/heap?debug=1", server.base)).await;
        assert_eq!(status, 400, "{body}");
        let (status, body) = get(format!("{}/debug/pprof/goroutine", server.base)).await;
        assert_eq!(status, 404);
        assert!(body.contains("Unknown profile: goroutine") && body.contains("profile, heap"), "{body}");
        server.state.shutdown.cancel();
        server.task.await.unwrap();
    }

    #[tokio::test]
    async fn a_second_cpu_profile_is_refused_while_one_runs() {
        let server = start().await;
        let running = server.state.cpu_profile.clone().try_lock_owned().unwrap();
        let (status, body) = get(format!("{}/debug/pprof/profile?seconds=1", server.base)).await;
        assert_eq!(status, 409, "{body}");
        assert!(body.contains("already"), "{body}");
        drop(running);
        server.state.shutdown.cancel();
        server.task.await.unwrap();
    }

    #[tokio::test]
    async fn shutdown_ends_a_cpu_profile_with_what_it_has() {
        let server = start().await;
        let profile = tokio::spawn(get(format!("{}/debug/pprof/profile?seconds=60", server.base)));
        tokio::time::sleep(Duration::from_millis(300)).await;
        server.state.shutdown.cancel();
        let (status, body) = tokio::time::timeout(ENCODING_SLACK, profile).await.unwrap().unwrap();
        assert_eq!(status, 200, "{body}");
        assert!(server.state.cpu_profile.try_lock().is_ok(), "the sampler is free again");
        server.task.await.unwrap();
    }
}
