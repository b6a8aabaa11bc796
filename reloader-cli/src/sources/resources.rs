//! ConfigMaps, Secrets and (with CSI integration, in `csi`) SecretProviderClassPodStatuses, fed
//! to the state as views.

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

use super::glue::{IndexTarget, index_watch};
use super::initial_list::watcher_stream;
use super::{SourcesConfig, Watch, api_for, watch_config, watch_name};
use crate::observe::metrics::WatchMetrics;
use crate::state::{Phase, ResourceState, WatchedState};
use crate::views::{configmap_view, secret_view};

type ToView<K> = fn(&K, &AnnotationKeys) -> Option<ResourceView>;

/// The resource watches of one namespace (or all).
pub(super) fn watches(
    client: &Client,
    config: &SourcesConfig,
    namespace: Option<&str>,
    state: &Arc<impl WatchedState + 'static>,
    metrics: &WatchMetrics,
) -> Vec<Watch> {
    let label_selector = config.resource_label_selector.as_deref();
    fn target<K>(
        kind: ResourceKind,
        to_view: ToView<K>,
        namespace: Option<&str>,
        config: &SourcesConfig,
        state: Arc<dyn ResourceState>,
    ) -> ResourceTarget<K> {
        let keys = config.keys.clone();
        ResourceTarget { state, kind, namespace: namespace.map(String::from), keys, to_view }
    }
    let mut watches = Vec::new();
    if config.ignored_resources != IgnoredResources::ConfigMaps {
        let api: Api<ConfigMap> = api_for(client, namespace);
        let cfg = watch_config(label_selector, None);
        watches.push(start(
            api,
            cfg,
            target(ResourceKind::ConfigMap, configmap_view, namespace, config, state.clone()),
            metrics,
        ));
    }
    if config.ignored_resources != IgnoredResources::Secrets {
        let api: Api<Secret> = api_for(client, namespace);
        let cfg = watch_config(label_selector, config.secret_field_selector.as_deref());
        watches.push(start(
            api,
            cfg,
            target(ResourceKind::Secret, secret_view, namespace, config, state.clone()),
            metrics,
        ));
    }
    if config.csi {
        watches.extend(super::csi::watches(client, namespace, &config.keys, state, metrics));
    }
    watches
}

fn start<K>(api: Api<K>, cfg: watcher::Config, target: ResourceTarget<K>, metrics: &WatchMetrics) -> Watch
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

/// One resource kind in one namespace (or all), fed to the state as views.
struct ResourceTarget<K> {
    state: Arc<dyn ResourceState>,
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
        self.state.resource_applied(view, phase);
        Some(key)
    }

    fn delete(&mut self, object: K) {
        if let Some(view) = (self.to_view)(&object, &self.keys) {
            self.state.resource_deleted(view);
        }
    }

    fn reset(&mut self, seen: HashSet<ResourceKey>, phase: Phase) {
        self.state.resources_relisted(self.kind, self.namespace.as_deref(), &seen, phase);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::{FutureExt as _, StreamExt as _};
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::observe::http::Health;
    use crate::reconcile::testkit::{Setup, Stage, stage};
    use crate::supervise::Supervisor;

    /// The real ConfigMap watch target and glue, fed a listed ConfigMap while the index lock is
    /// poisoned (another task panicked holding it): the watch task panics, and the supervisor
    /// names it, fails liveness and stops everything, so the process exits and is restarted.
    #[tokio::test]
    async fn a_failing_watch_fails_liveness_and_stops_the_process() {
        let Stage { reconciler: reconcile, .. } = stage(&Setup::default(), &[], &[]);
        let poison = reconcile.index.clone();
        let _ = std::thread::spawn(move || {
            let _guard = poison.write().unwrap();
            panic!("a task panicked while holding the index");
        })
        .join();
        let target = ResourceTarget {
            state: Arc::new(reconcile),
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
        let metrics = crate::observe::metrics::Metrics::new(false).watches();
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
