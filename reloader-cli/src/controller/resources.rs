//! Watches ConfigMaps, Secrets and (with CSI integration) SecretProviderClassPodStatuses.
//! Each object is hashed the moment it arrives and dropped: only a `ResourceView` goes on.

use std::collections::HashSet;
use std::fmt::Debug;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use reloader_core::annotations::AnnotationKeys;
use reloader_core::hash;
use reloader_core::model::{ContentHash, ResourceKey, ResourceKind};
use reloader_core::options::{IgnoredResources, NamespaceScope};
use reloader_core::views::ResourceView;
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::Context;
use super::kinds::spc_pod_status_resource;
use super::reconciler::{Phase, Reconciler};

/// Readiness of one watch: true once its first list completed.
pub type Synced = watch::Receiver<bool>;

pub fn spawn(ctx: Arc<Context>, reconciler: Arc<Reconciler>, shutdown: CancellationToken) -> Vec<Synced> {
    let mut synced = Vec::new();
    let options = &ctx.options;
    let label_selector = options.resource_label_selector.as_ref().map(|s| s.to_string());
    let namespaces = watched_namespaces(&ctx);
    for ns in namespaces {
        if options.ignored_resources != IgnoredResources::ConfigMaps {
            let cfg = watch_config(label_selector.clone(), None);
            let api: Api<ConfigMap> = api_for(&ctx.client, ns.as_deref());
            synced.push(start(
                ctx.clone(),
                reconciler.clone(),
                api,
                cfg,
                ns.clone(),
                (ResourceKind::ConfigMap, configmap_view),
                &shutdown,
            ));
        }
        if options.ignored_resources != IgnoredResources::Secrets {
            let field_selector = options
                .ignored_secret_types
                .iter()
                .map(|t| format!("type!={t}"))
                .collect::<Vec<_>>()
                .join(",");
            let field_selector = (!field_selector.is_empty()).then_some(field_selector);
            let cfg = watch_config(label_selector.clone(), field_selector);
            let api: Api<Secret> = api_for(&ctx.client, ns.as_deref());
            synced.push(start(
                ctx.clone(),
                reconciler.clone(),
                api,
                cfg,
                ns.clone(),
                (ResourceKind::Secret, secret_view),
                &shutdown,
            ));
        }
        if options.enable_csi_integration {
            let ar = spc_pod_status_resource();
            let api: Api<DynamicObject> = match ns.as_deref() {
                Some(ns) => Api::namespaced_with(ctx.client.clone(), ns, &ar),
                None => Api::all_with(ctx.client.clone(), &ar),
            };
            let cfg = watch_config(None, None);
            synced.push(start(
                ctx.clone(),
                reconciler.clone(),
                api,
                cfg,
                ns.clone(),
                (ResourceKind::SecretProviderClass, spc_view),
                &shutdown,
            ));
        }
    }
    synced
}

/// `None` = all namespaces; otherwise one watch per listed namespace.
pub fn watched_namespaces(ctx: &Context) -> Vec<Option<String>> {
    match &ctx.options.namespace_scope {
        NamespaceScope::All { .. } => vec![None],
        NamespaceScope::Only(list) => list.iter().cloned().map(Some).collect(),
    }
}

pub fn api_for<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    <K as Resource>::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

pub fn watch_config(label_selector: Option<String>, field_selector: Option<String>) -> watcher::Config {
    let mut cfg = watcher::Config::default().page_size(500);
    if let Some(l) = label_selector {
        cfg = cfg.labels(&l);
    }
    if let Some(f) = field_selector {
        cfg = cfg.fields(&f);
    }
    cfg
}

type ToView<K> = fn(&K, &AnnotationKeys) -> Option<ResourceView>;

fn start<K>(
    ctx: Arc<Context>,
    reconciler: Arc<Reconciler>,
    api: Api<K>,
    cfg: watcher::Config,
    namespace: Option<String>,
    (kind, to_view): (ResourceKind, ToView<K>),
    shutdown: &CancellationToken,
) -> Synced
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let (tx, rx) = watch::channel(false);
    let shutdown = shutdown.clone();
    let stream = watcher(api, cfg).default_backoff();
    tokio::spawn(async move {
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = consume(ctx, reconciler, stream, namespace, kind, to_view, tx) => {}
        }
    });
    rx
}

async fn consume<K>(
    ctx: Arc<Context>,
    reconciler: Arc<Reconciler>,
    stream: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
    namespace: Option<String>,
    kind: ResourceKind,
    to_view: ToView<K>,
    synced: watch::Sender<bool>,
) {
    let keys = ctx.options.keys.clone();
    let mut stream = std::pin::pin!(stream);
    let mut first_list = true;
    let mut seen: HashSet<ResourceKey> = HashSet::new();
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => seen.clear(),
            Ok(watcher::Event::InitApply(obj)) => {
                if let Some(view) = to_view(&obj, &keys) {
                    seen.insert(view.key.clone());
                    let phase = if first_list { Phase::InitialList } else { Phase::Relist };
                    reconciler.resource_applied(view, phase);
                }
            }
            Ok(watcher::Event::InitDone) => {
                reconciler.resources_relisted(kind, namespace.as_deref(), &seen, first_list);
                seen = HashSet::new();
                if first_list {
                    first_list = false;
                    let _ = synced.send(true);
                }
            }
            Ok(watcher::Event::Apply(obj)) => {
                if let Some(view) = to_view(&obj, &keys) {
                    reconciler.resource_applied(view, Phase::Live);
                }
            }
            Ok(watcher::Event::Delete(obj)) => {
                // A SecretProviderClassPodStatus goes away with its pod, not with the class.
                if kind == ResourceKind::SecretProviderClass {
                    continue;
                }
                if let Some(view) = to_view(&obj, &keys) {
                    reconciler.resource_deleted(view);
                }
            }
            Err(e) => {
                warn!(error = %e, "resource watch failed; retrying with backoff");
                ctx.metrics.error(crate::observe::metrics::ErrorType::Watch);
            }
        }
    }
    debug!("resource watch ended");
}

fn flag(annotations: Option<&std::collections::BTreeMap<String, String>>, key: &str) -> bool {
    annotations.and_then(|a| a.get(key)).is_some_and(|v| v == "true")
}

fn view_of(
    kind: ResourceKind,
    meta: &kube::api::ObjectMeta,
    hash: ContentHash,
    keys: &AnnotationKeys,
) -> Option<ResourceView> {
    let annotations = meta.annotations.as_ref();
    Some(ResourceView {
        key: ResourceKey::new(kind, meta.namespace.as_deref()?, meta.name.as_deref()?),
        hash,
        matched: flag(annotations, &keys.search_match),
        ignored: flag(annotations, &keys.ignore),
    })
}

pub fn configmap_view(cm: &ConfigMap, keys: &AnnotationKeys) -> Option<ResourceView> {
    let data = cm.data.iter().flatten().map(|(k, v)| (k.as_str(), v.as_str()));
    let binary = cm.binary_data.iter().flatten().map(|(k, v)| (k.as_str(), v.0.as_slice()));
    view_of(ResourceKind::ConfigMap, &cm.metadata, hash::configmap_hash(data, binary), keys)
}

pub fn secret_view(secret: &Secret, keys: &AnnotationKeys) -> Option<ResourceView> {
    let data = secret.data.iter().flatten().map(|(k, v)| (k.as_str(), v.0.as_slice()));
    view_of(ResourceKind::Secret, &secret.metadata, hash::secret_hash(data), keys)
}

/// A SecretProviderClassPodStatus speaks for its SecretProviderClass: the view is keyed by the
/// class name, hashed from the mounted objects' versions.
pub fn spc_view(status: &DynamicObject, keys: &AnnotationKeys) -> Option<ResourceView> {
    let st = status.data.get("status")?;
    let class = st.get("secretProviderClassName")?.as_str()?;
    let objects: Vec<(&str, &str)> = st
        .get("objects")
        .and_then(|o| o.as_array())
        .into_iter()
        .flatten()
        .filter_map(|o| Some((o.get("id")?.as_str()?, o.get("version")?.as_str()?)))
        .collect();
    let hash = hash::spc_pod_status_hash(class, objects);
    let namespace = status.metadata.namespace.as_deref()?;
    Some(ResourceView {
        key: ResourceKey::new(ResourceKind::SecretProviderClass, namespace, class),
        hash,
        matched: flag(status.metadata.annotations.as_ref(), &keys.search_match),
        ignored: flag(status.metadata.annotations.as_ref(), &keys.ignore),
    })
}
