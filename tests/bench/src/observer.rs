//! A watch of its own on the Deployments of one namespace: when each one's `metadata.generation`
//! moved (every write to the spec moves it by one), timed as the event arrived. Latencies end here,
//! independent of how the writer measures itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::BenchError;

const POLL: Duration = Duration::from_millis(10);

type Changes = HashMap<String, Vec<(i64, Instant)>>;

/// Stops watching on drop.
pub struct WorkloadObserver {
    changes: Arc<Mutex<Changes>>,
    task: JoinHandle<()>,
}

impl WorkloadObserver {
    /// Starts the watch and returns once its initial list is in.
    pub async fn start(client: Client, namespace: &str) -> Result<Self, BenchError> {
        let api: Api<Deployment> = Api::namespaced(client, namespace);
        let changes: Arc<Mutex<Changes>> = Arc::default();
        let (synced_tx, mut synced) = watch::channel(false);
        let recorded = changes.clone();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
            while let Some(event) = stream.next().await {
                let at = Instant::now();
                match event {
                    Ok(watcher::Event::Apply(d) | watcher::Event::InitApply(d)) => {
                        let generation = d.metadata.generation.unwrap_or_default();
                        let mut changes = recorded.lock().unwrap_or_else(PoisonError::into_inner);
                        let history = changes.entry(d.name_any()).or_default();
                        if history.last().is_none_or(|(last, _)| *last != generation) {
                            history.push((generation, at));
                        }
                    }
                    Ok(watcher::Event::InitDone) => {
                        let _ = synced_tx.send(true);
                    }
                    Ok(_) | Err(_) => {}
                }
            }
        });
        let observer = Self { changes, task };
        tokio::time::timeout(Duration::from_secs(60), synced.wait_for(|synced| *synced))
            .await
            .map_err(|_| BenchError::measure(format!("the Deployment watch in {namespace} did not sync")))?
            .map_err(|_| BenchError::measure("the Deployment watch ended"))?;
        Ok(observer)
    }

    /// The last generation seen (0 for a Deployment not seen).
    pub fn generation(&self, name: &str) -> i64 {
        self.lock().get(name).and_then(|h| h.last()).map_or(0, |(generation, _)| *generation)
    }

    /// When a generation above `generation` was first seen.
    pub fn changed_after(&self, name: &str, generation: i64) -> Option<Instant> {
        self.lock().get(name)?.iter().find(|(seen, _)| *seen > generation).map(|(_, at)| *at)
    }

    /// Waits until `name` moved past `generation`, at most until `deadline`.
    pub async fn wait_changed(&self, name: &str, generation: i64, deadline: Instant) -> Option<Instant> {
        loop {
            if let Some(at) = self.changed_after(name, generation) {
                return Some(at);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Changes> {
        self.changes.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for WorkloadObserver {
    fn drop(&mut self) {
        self.task.abort();
    }
}
