//! ConfigMaps, Secrets and (with CSI integration, in `csi`) SecretProviderClassPodStatuses, fed
//! to the reconciler as views.

use std::collections::HashSet;
use std::fmt::Debug;
use std::sync::Arc;

use futures::FutureExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use reloader_core::annotations::AnnotationKeys;
use reloader_core::model::{ResourceKey, ResourceKind};
use reloader_core::options::IgnoredResources;
use reloader_core::views::ResourceView;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use super::glue::{IndexTarget, Phase, index_watch};
use super::initial_list::watcher_stream;
use super::{SourcesConfig, Watch, api_for, watch_config, watch_name};
use crate::observe::metrics::Metrics;
use crate::reconcile::Reconciler;
use crate::views::{configmap_view, secret_view};

type ToView<K> = fn(&K, &AnnotationKeys) -> Option<ResourceView>;

/// The resource watches of one namespace (or all).
pub(super) fn watches(
    client: &Client,
    config: &SourcesConfig,
    namespace: Option<&str>,
    reconciler: &Arc<Reconciler>,
    metrics: &Arc<Metrics>,
) -> Vec<Watch> {
    let label_selector = config.resource_label_selector.as_deref();
    fn target<K>(
        kind: ResourceKind,
        to_view: ToView<K>,
        namespace: Option<&str>,
        config: &SourcesConfig,
        reconciler: &Arc<Reconciler>,
    ) -> ResourceTarget<K> {
        let (reconciler, keys) = (reconciler.clone(), config.keys.clone());
        ResourceTarget { reconciler, kind, namespace: namespace.map(String::from), keys, to_view }
    }
    let mut watches = Vec::new();
    if config.ignored_resources != IgnoredResources::ConfigMaps {
        let api: Api<ConfigMap> = api_for(client, namespace);
        let cfg = watch_config(label_selector, None);
        watches.push(start(
            api,
            cfg,
            target(ResourceKind::ConfigMap, configmap_view, namespace, config, reconciler),
            metrics,
        ));
    }
    if config.ignored_resources != IgnoredResources::Secrets {
        let api: Api<Secret> = api_for(client, namespace);
        let cfg = watch_config(label_selector, config.secret_field_selector.as_deref());
        watches.push(start(
            api,
            cfg,
            target(ResourceKind::Secret, secret_view, namespace, config, reconciler),
            metrics,
        ));
    }
    if config.csi {
        watches.extend(super::csi::watches(client, namespace, &config.keys, reconciler, metrics));
    }
    watches
}

fn start<K>(api: Api<K>, cfg: watcher::Config, target: ResourceTarget<K>, metrics: &Arc<Metrics>) -> Watch
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let (tx, synced) = watch::channel(false);
    let name = watch_name(target.kind.plural(), target.namespace.as_deref());
    let metrics = metrics.clone();
    let stream = watcher_stream(name.clone(), api, cfg).default_backoff();
    let task_name = name.clone();
    let task = async move { index_watch(&task_name, stream, target, tx, &metrics).await }.boxed();
    Watch { name, task, synced }
}

/// One resource kind in one namespace (or all), as the reconciler's input.
struct ResourceTarget<K> {
    reconciler: Arc<Reconciler>,
    kind: ResourceKind,
    namespace: Option<String>,
    keys: AnnotationKeys,
    to_view: ToView<K>,
}

impl<K> IndexTarget<K> for ResourceTarget<K> {
    type Key = ResourceKey;

    fn apply(&mut self, object: K, phase: Phase) -> Option<ResourceKey> {
        let view = (self.to_view)(&object, &self.keys)?;
        let key = view.key.clone();
        self.reconciler.resource_applied(view, phase);
        Some(key)
    }

    fn delete(&mut self, object: K) {
        if let Some(view) = (self.to_view)(&object, &self.keys) {
            self.reconciler.resource_deleted(view);
        }
    }

    fn reset(&mut self, seen: HashSet<ResourceKey>, phase: Phase) {
        self.reconciler.resources_relisted(self.kind, self.namespace.as_deref(), &seen, phase);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::RwLock;
    use std::time::Duration;

    use futures::{FutureExt as _, StreamExt as _};
    use reloader_core::index::Index;
    use tokio_util::sync::CancellationToken;

    use super::super::testkit::{RecordedQueue, reconciler};
    use super::*;
    use crate::observe::http::Health;
    use crate::supervise::Supervisor;

    /// The real ConfigMap watch target and glue, fed a listed ConfigMap while the index lock is
    /// poisoned (another task panicked holding it): the watch task panics, and the supervisor
    /// names it, fails liveness and stops everything, so the process exits and is restarted.
    #[tokio::test]
    async fn a_failing_watch_fails_liveness_and_stops_the_process() {
        let index = Arc::new(RwLock::new(Index::default()));
        let poison = index.clone();
        let _ = std::thread::spawn(move || {
            let _guard = poison.write().unwrap();
            panic!("a task panicked while holding the index");
        })
        .join();
        let reconciler = reconciler(index, Arc::new(RecordedQueue::default()), false, false);
        let target = ResourceTarget {
            reconciler,
            kind: ResourceKind::ConfigMap,
            namespace: None,
            keys: AnnotationKeys::default(),
            to_view: configmap_view,
        };
        let configmap: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "app-config", "namespace": "shop"}, "data": {"k": "v"}
        }))
        .unwrap();
        // A listed object, then a stream that stays open like a real watch.
        let listed: [Result<watcher::Event<ConfigMap>, watcher::Error>; 3] = [
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(configmap)),
            Ok(watcher::Event::InitDone),
        ];
        let events = futures::stream::iter(listed).chain(futures::stream::pending());
        let (synced_tx, _synced) = watch::channel(false);
        let metrics = Metrics::new(false);
        let task =
            async move { index_watch("ConfigMap watch", events, target, synced_tx, &metrics).await }.boxed();

        let (shutdown, health) = (CancellationToken::new(), Health::new());
        let mut supervisor = Supervisor::new(shutdown.clone(), health.clone());
        supervisor.spawn("metrics and health server", std::future::pending());
        supervisor.spawn("ConfigMap watch", async move {
            task.await;
            Err(anyhow::anyhow!("the watch stream ended"))
        });
        let failure = tokio::time::timeout(Duration::from_secs(5), supervisor.watch())
            .await
            .expect("the supervisor noticed")
            .expect_err("a failed watch is a failure of the process");
        let failure = format!("{failure:#}");
        assert!(failure.contains("ConfigMap watch") && failure.contains("index lock"), "{failure}");
        assert!(!health.is_live(), "/live fails");
        assert!(shutdown.is_cancelled(), "the other tasks are stopped");
    }
}
