//! ConfigMaps, Secrets and (with CSI integration) SecretProviderClassPodStatuses, fed to the
//! reconciler as views.

use std::collections::HashSet;
use std::fmt::Debug;
use std::sync::Arc;

use futures::FutureExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use reloader_core::annotations::AnnotationKeys;
use reloader_core::model::{ResourceKey, ResourceKind};
use reloader_core::options::IgnoredResources;
use reloader_core::views::ResourceView;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use super::glue::{IndexTarget, Phase, index_watch};
use super::{SourcesConfig, Watch, api_for, watch_config, watch_name};
use crate::kinds::spc_pod_status_resource;
use crate::observe::metrics::Metrics;
use crate::reconcile::Reconciler;
use crate::views::{configmap_view, secret_view, spc_view};

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
        let ar = spc_pod_status_resource();
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        let cfg = watch_config(None, None);
        watches.push(start(
            api,
            cfg,
            target(ResourceKind::SecretProviderClass, spc_view, namespace, config, reconciler),
            metrics,
        ));
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
    let stream = watcher(api, cfg).default_backoff();
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
        // A SecretProviderClassPodStatus goes away with its pod, not with the class.
        if self.kind == ResourceKind::SecretProviderClass {
            return;
        }
        if let Some(view) = (self.to_view)(&object, &self.keys) {
            self.reconciler.resource_deleted(view);
        }
    }

    fn reset(&mut self, seen: HashSet<ResourceKey>, phase: Phase) {
        self.reconciler.resources_relisted(self.kind, self.namespace.as_deref(), &seen, phase);
    }
}
