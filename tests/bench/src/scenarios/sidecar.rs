//! P1 (ours only): `reloader sidecar` keeping a directory in sync with one ConfigMap; from each
//! update's API response to the files swapped (the `..data` link moved) and to the app's endpoint
//! called.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde::Serialize;
use serde_json::json;

use super::pairs::{create_namespace, update_configmap};
use crate::dataset::create;
use crate::identity::from_json;
use crate::stats::{Latencies, millis};
use crate::{BenchError, Plan};
use reloader_harness::ControlPlane;
use reloader_harness::free_port;
use reloader_harness::process::Process;

const NAMESPACE: &str = "bench-p1";
const CONFIGMAP: &str = "app";
const TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Serialize)]
pub struct SidecarOutcome {
    pub swapped: Latencies,
    pub notified: Latencies,
}

pub async fn run(
    plane: &ControlPlane,
    binary: &Path,
    log_dir: &Path,
    plan: &Plan,
) -> Result<SidecarOutcome, BenchError> {
    let client = plane.client();
    create_namespace(&client, NAMESPACE).await?;
    let configmaps: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
    create(&configmaps, from_json(json!({ "metadata": { "name": CONFIGMAP }, "data": { "value": "0" } })))
        .await?;
    let endpoint = Endpoint::start().await?;
    let work = tempfile::tempdir()
        .map_err(|source| BenchError::Io { context: "a sidecar directory".into(), source })?;
    let files = work.path().join("files");
    let args = vec![
        "sidecar".to_owned(),
        format!("--kubeconfig={}", plane.kubeconfig_path().display()),
        format!("--namespace={NAMESPACE}"),
        format!("--path={}", files.display()),
        format!("--metrics-addr=127.0.0.1:{}", free_port()),
        format!("--configmap={CONFIGMAP}"),
        format!("--endpoint={}", endpoint.url),
    ];
    let mut sidecar = Process::start("sidecar", binary, &args, &[], &log_dir.join("ours-sidecar.log"))?;
    endpoint.wait_for(1).await?;

    let done = Arc::new(AtomicBool::new(false));
    let swaps = spawn_swap_watcher(files, done.clone());
    let mut updated_at = Vec::with_capacity(plan.p1_updates);
    let result = async {
        for i in 1..=plan.p1_updates {
            updated_at.push(update_configmap(&configmaps, CONFIGMAP, &i.to_string()).await?);
            endpoint.wait_for(1 + i).await?;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok::<_, BenchError>(())
    }
    .await;
    done.store(true, Ordering::Release);
    let swaps = swaps.join().unwrap_or_default();
    sidecar.kill();
    result?;

    let called = endpoint.times();
    let mut to_swap = Vec::new();
    let mut to_call = Vec::new();
    for (i, updated) in updated_at.iter().enumerate() {
        if let Some(swapped) = swaps.get(&(i + 1)) {
            to_swap.push(millis(swapped.saturating_duration_since(*updated)));
        }
        if let Some(call) = called.get(i + 1) {
            to_call.push(millis(call.saturating_duration_since(*updated)));
        }
    }
    Ok(SidecarOutcome {
        swapped: Latencies::of(&to_swap, updated_at.len()),
        notified: Latencies::of(&to_call, updated_at.len()),
    })
}

/// Polls the `..data` link (kubelet's layout) and records when each value first appeared.
fn spawn_swap_watcher(
    dir: PathBuf,
    done: Arc<AtomicBool>,
) -> std::thread::JoinHandle<BTreeMap<usize, Instant>> {
    std::thread::spawn(move || {
        let mut swaps = BTreeMap::new();
        let mut last = PathBuf::new();
        while !done.load(Ordering::Acquire) {
            if let Ok(target) = std::fs::read_link(dir.join("..data"))
                && target != last
                && let Ok(value) = std::fs::read_to_string(dir.join(&target).join("value"))
            {
                let at = Instant::now();
                if let Ok(generation) = value.trim().parse() {
                    swaps.entry(generation).or_insert(at);
                }
                last = target;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        swaps
    })
}

/// The app's reload endpoint: answers 204 and records when each call arrived.
struct Endpoint {
    url: String,
    calls: Arc<Mutex<Vec<Instant>>>,
    server: tokio::task::JoinHandle<()>,
}

impl Endpoint {
    async fn start() -> Result<Self, BenchError> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|source| BenchError::Io { context: "binding the P1 endpoint".into(), source })?;
        let address = listener
            .local_addr()
            .map_err(|source| BenchError::Io { context: "the P1 endpoint's address".into(), source })?;
        let calls: Arc<Mutex<Vec<Instant>>> = Arc::default();
        let recorded = calls.clone();
        let app = axum::Router::new().route(
            "/-/reload",
            axum::routing::any(move || {
                recorded.lock().unwrap_or_else(PoisonError::into_inner).push(Instant::now());
                async { axum::http::StatusCode::NO_CONTENT }
            }),
        );
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { url: format!("http://{address}/-/reload"), calls, server })
    }

    fn times(&self) -> Vec<Instant> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    async fn wait_for(&self, count: usize) -> Result<(), BenchError> {
        let deadline = Instant::now() + TIMEOUT;
        while self.times().len() < count {
            if Instant::now() >= deadline {
                return Err(BenchError::measure(format!(
                    "the sidecar made {} of {count} calls",
                    self.times().len()
                )));
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        Ok(())
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.server.abort();
    }
}
