//! The process floor of bench M1 (docs/benchmark.md): the least a controller built on our stack
//! can cost. Same kube client and TLS (rustls on ring), same tokio runtime, same allocator and
//! allocator settings as `reloader`, and its initial lists taken as `reloader` takes them; it
//! watches ConfigMaps and Secrets of all namespaces and keeps nothing. It prints its allocator's
//! options, then `synced` once both initial lists are done (the freed pages and the code
//! start-up used are returned at the next second, as `reloader` returns them), then the live heap
//! (`heap_allocated_bytes=<n>`, jemalloc's `stats.allocated`) every second.

use std::time::Duration;

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use reloader_cli::watcher_stream;

// No `#[global_allocator]` here: calling into reloader-cli's `observe::memory` links it, so its
// allocator and `malloc_conf` are this binary's too, which is the point (a dependency nothing calls
// is not linked, and the floor then ran on glibc's malloc). It prints jemalloc's options at start
// to show it.
use reloader_cli::observe::memory;

/// What one watch event leaves behind: whether an initial list just completed.
fn list_done<K>(event: Result<watcher::Event<K>, watcher::Error>) -> bool {
    matches!(event, Ok(watcher::Event::InitDone))
}

fn main() -> anyhow::Result<()> {
    memory::limit_arenas();
    memory::runtime()?.block_on(watch())
}

async fn watch() -> anyhow::Result<()> {
    let narenas = tikv_jemalloc_ctl::opt::narenas::read()?;
    let tcache = tikv_jemalloc_ctl::opt::tcache::read()?;
    eprintln!("jemalloc narenas={narenas} tcache={tcache}");
    let client = Client::try_default().await?;
    // Initial lists as `reloader` gets them: streamed, or paged where the API server refuses to
    // stream (WatchList off, as by default on Kubernetes 1.33).
    let config = watcher::Config::default();
    let configmaps =
        watcher_stream("ConfigMap".into(), Api::<ConfigMap>::all(client.clone()), config.clone())
            .default_backoff()
            .map(list_done);
    let secrets =
        watcher_stream("Secret".into(), Api::<Secret>::all(client), config).default_backoff().map(list_done);
    let mut events = std::pin::pin!(stream::select(configmaps, secrets));
    let mut lists_to_go = 2usize;
    let mut released = false;
    let mut report = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            event = events.next() => match event {
                Some(true) if lists_to_go > 0 => {
                    lists_to_go -= 1;
                    if lists_to_go == 0 {
                        // As `reloader`: the allocator caches end at sync, the memory goes back
                        // a moment later (the next tick).
                        memory::end_start_up();
                        report.reset();
                        eprintln!("synced");
                    }
                }
                Some(_) => {}
                None => anyhow::bail!("the watches ended"),
            },
            _ = report.tick(), if lists_to_go == 0 => {
                if !released {
                    memory::release_after_sync();
                    memory::keep_freed_pages_for_a_while();
                    released = true;
                }
                if let Some(heap) = heap_allocated() {
                    eprintln!("heap_allocated_bytes={heap}");
                }
            }
        }
    }
}

/// jemalloc's `stats.allocated`, refreshed.
fn heap_allocated() -> Option<usize> {
    tikv_jemalloc_ctl::epoch::advance().ok()?;
    tikv_jemalloc_ctl::stats::allocated::read().ok()
}
