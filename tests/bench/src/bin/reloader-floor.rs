//! The process floor of bench M1 (docs/benchmark.md): the least a controller built on our stack
//! can cost. Same kube client and TLS (rustls on ring), same tokio runtime, same allocator and
//! allocator settings as `reloader`; it watches ConfigMaps and Secrets of all namespaces and keeps
//! nothing. It prints its allocator's options, then `synced` once both initial lists are done, then the live heap
//! (`heap_allocated_bytes=<n>`, jemalloc's `stats.allocated`) every second.

use std::time::Duration;

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};

// No `#[global_allocator]` here: the bench links reloader-cli (through the behaviour tests'
// fixtures), whose allocator and `malloc_conf` (reloader-cli/src/observe/memory.rs) are therefore
// this binary's too, which is the point. It prints jemalloc's options at start to show it.

/// What one watch event leaves behind: whether an initial list just completed.
fn list_done<K>(event: Result<watcher::Event<K>, watcher::Error>) -> bool {
    matches!(event, Ok(watcher::Event::InitDone))
}

fn main() -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(watch())
}

async fn watch() -> anyhow::Result<()> {
    let narenas = tikv_jemalloc_ctl::opt::narenas::read()?;
    let background_thread = tikv_jemalloc_ctl::opt::background_thread::read()?;
    eprintln!("jemalloc narenas={narenas} background_thread={background_thread}");
    let client = Client::try_default().await?;
    // kube's default list page (500 objects), as `reloader` lists.
    let config = watcher::Config::default;
    let configmaps =
        watcher(Api::<ConfigMap>::all(client.clone()), config()).default_backoff().map(list_done);
    let secrets = watcher(Api::<Secret>::all(client), config()).default_backoff().map(list_done);
    let mut events = std::pin::pin!(stream::select(configmaps, secrets));
    let mut lists_to_go = 2usize;
    let mut report = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            event = events.next() => match event {
                Some(true) if lists_to_go > 0 => {
                    lists_to_go -= 1;
                    if lists_to_go == 0 {
                        eprintln!("synced");
                    }
                }
                Some(_) => {}
                None => anyhow::bail!("the watches ended"),
            },
            _ = report.tick(), if lists_to_go == 0 => {
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
