//! One watch per named object. kube's watcher resumes from the last resourceVersion when a watch
//! expires or breaks, and re-lists after `410 Gone`; a re-list ends with the object's state as of
//! that list, which is all the writer needs, since it writes the latest state rather than deltas.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::utils::ResetTimerBackoff;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::backoff::ExponentialBackoff;
use super::metrics::Metrics;
use super::payload::{SourceFiles, SourceId, SourceKind};

const BACKOFF_INITIAL: Duration = Duration::from_millis(200);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// The backoff starts over only after this long without an error, so an API server that accepts
/// the list but fails every watch is not hammered at the initial rate.
const BACKOFF_RESET_AFTER: Duration = Duration::from_secs(30);

/// What a watcher learned about its object.
#[derive(Debug)]
pub(crate) enum SourceEvent {
    /// The object's current files, or `None` if it does not exist.
    Observed { index: usize, files: Option<SourceFiles> },
    /// Listing or watching failed; the watcher retries on its own.
    Failed { index: usize, error: String },
}

/// File modes by the kind of object the files come from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Modes {
    pub(crate) configmap: u32,
    pub(crate) secret: u32,
}

/// Starts one watcher per source; `index` in the events is the position in `sources`.
pub(crate) fn spawn(
    client: &Client,
    namespace: &str,
    sources: &[SourceId],
    modes: Modes,
    events: mpsc::Sender<SourceEvent>,
    metrics: Arc<Metrics>,
) -> JoinSet<()> {
    let mut tasks = JoinSet::new();
    for (index, id) in sources.iter().enumerate() {
        let watch = Watch { index, id: id.clone(), events: events.clone(), metrics: metrics.clone() };
        match id.kind {
            SourceKind::ConfigMap => {
                let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
                tasks.spawn(watch.run(api, move |cm| SourceFiles::from_configmap(cm, modes.configmap)));
            }
            SourceKind::Secret => {
                let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
                tasks.spawn(watch.run(api, move |secret| SourceFiles::from_secret(secret, modes.secret)));
            }
        }
    }
    tasks
}

struct Watch {
    index: usize,
    id: SourceId,
    events: mpsc::Sender<SourceEvent>,
    metrics: Arc<Metrics>,
}

impl Watch {
    async fn run<K>(self, api: Api<K>, to_files: impl Fn(&K) -> SourceFiles + Send)
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    {
        let config = watcher::Config::default().fields(&format!("metadata.name={}", self.id.name));
        let backoff = ResetTimerBackoff::new(
            ExponentialBackoff::new(BACKOFF_INITIAL, BACKOFF_MAX),
            BACKOFF_RESET_AFTER,
        );
        let mut stream = std::pin::pin!(watcher(api, config).backoff(backoff));
        // A (re-)list arrives as Init, InitApply*, InitDone; only the end says "absent".
        let mut listed: Option<SourceFiles> = None;
        while let Some(item) = stream.next().await {
            let event = match item {
                Ok(Event::Init) => {
                    listed = None;
                    continue;
                }
                Ok(Event::InitApply(object)) => {
                    listed = Some(to_files(&object));
                    continue;
                }
                Ok(Event::InitDone) => SourceEvent::Observed { index: self.index, files: listed.take() },
                Ok(Event::Apply(object)) => {
                    SourceEvent::Observed { index: self.index, files: Some(to_files(&object)) }
                }
                Ok(Event::Delete(_)) => SourceEvent::Observed { index: self.index, files: None },
                Err(e) => {
                    let error = crate::watch_error::describe(&e);
                    self.metrics.record_watch_error(&self.id.to_string());
                    tracing::warn!(object = %self.id, %error, "watch failed; retrying with backoff");
                    SourceEvent::Failed { index: self.index, error }
                }
            };
            if self.events.send(event).await.is_err() {
                return;
            }
        }
    }
}
