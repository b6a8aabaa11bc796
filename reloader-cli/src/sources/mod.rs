//! The watches: ConfigMaps, Secrets, SecretProviderClasses and their pod statuses (`csi`),
//! workloads of every enabled kind, and (with `--namespace-selector`) Namespaces. Each is a kube
//! watcher fed through the one [`glue::index_watch`] into its index target, which turns objects
//! into views for the [`crate::state`] traits; each is a task for the supervisor.

mod csi;
pub(crate) mod glue;
mod initial_list;
pub use initial_list::watcher_stream;
mod namespaces;
mod resources;
mod workloads;

use std::sync::Arc;

use futures::future::BoxFuture;
use kube::api::Api;
use kube::runtime::watcher;
use kube::{Client, Resource};
use reloader_core::annotations::AnnotationKeys;
use reloader_core::options::{IgnoredResources, NamespaceScope, Options};
use reloader_core::selector::LabelSelector;

use crate::discovery::CrdWait;
use crate::job_origins::JobOrigins;
use crate::kinds::EnabledKinds;
use crate::observe::metrics::WatchMetrics;
use crate::scope::ScopeFilter;
use crate::state::{Synced, WatchedState};

/// One watch, ready to be spawned: its name (for logs), its task, its readiness.
pub(crate) struct Watch {
    pub(crate) name: String,
    pub(crate) task: BoxFuture<'static, ()>,
    pub(crate) synced: Synced,
}

/// The options the watches use.
#[derive(Debug, Clone)]
pub(crate) struct SourcesConfig {
    /// `None` = all namespaces; otherwise one watch per listed namespace.
    namespaces: Vec<Option<String>>,
    namespace_selector: Option<LabelSelector>,
    resource_label_selector: Option<String>,
    ignored_resources: IgnoredResources,
    /// Server-side `type!=` filters for Secrets.
    secret_field_selector: Option<String>,
    csi: bool,
    keys: AnnotationKeys,
    /// Where the Job and CronJob watches keep origins for the webhook's Job fence, when it runs.
    job_origins: Option<Arc<JobOrigins>>,
}

impl SourcesConfig {
    pub(crate) fn new(options: &Options) -> Self {
        let (namespaces, namespace_selector) = match &options.namespace_scope {
            NamespaceScope::All { selector, .. } => (vec![None], selector.clone()),
            NamespaceScope::Only(list) => (list.iter().cloned().map(Some).collect(), None),
        };
        let secret_field_selector =
            options.ignored_secret_types.iter().map(|t| format!("type!={t}")).collect::<Vec<_>>().join(",");
        SourcesConfig {
            namespaces,
            namespace_selector,
            resource_label_selector: options.resource_label_selector.as_ref().map(|s| s.to_string()),
            ignored_resources: options.ignored_resources,
            secret_field_selector: (!secret_field_selector.is_empty()).then_some(secret_field_selector),
            csi: options.enable_csi_integration,
            keys: options.keys.clone(),
            job_origins: None,
        }
    }

    /// `--enable-csi-integration` on an API server without the CSI driver's CRDs: nothing to
    /// watch (start-up has said so once).
    pub(crate) fn without_csi(self) -> Self {
        SourcesConfig { csi: false, ..self }
    }

    /// The Job and CronJob watches also keep `origins` (the webhook's Job fence runs).
    pub(crate) fn with_job_origins(self, origins: Option<Arc<JobOrigins>>) -> Self {
        SourcesConfig { job_origins: origins, ..self }
    }
}

/// Every watch this run needs, not yet started.
pub(crate) fn watches(
    client: &Client,
    config: &SourcesConfig,
    kinds: &EnabledKinds,
    state: &Arc<impl WatchedState + 'static>,
    scope: &ScopeFilter,
    crd_wait: &CrdWait,
    metrics: &WatchMetrics,
) -> Vec<Watch> {
    let mut watches = Vec::new();
    if let Some(selector) = &config.namespace_selector {
        watches.push(namespaces::watch(client, selector.clone(), scope.clone(), metrics.clone()));
    }
    for namespace in &config.namespaces {
        let namespace = namespace.as_deref();
        watches.extend(resources::watches(client, config, namespace, state, metrics));
        for kind in kinds.iter() {
            let target = workloads::WorkloadTarget::new(
                state.clone(),
                kind,
                namespace,
                &config.keys,
                config.job_origins.as_ref(),
            );
            watches.push(workloads::watch(client, target, crd_wait, metrics));
        }
    }
    watches
}

fn api_for<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    <K as Resource>::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// The server-side selectors; lists in pages of 500 where lists are not streamed
/// ([`initial_list`]).
fn watch_config(label_selector: Option<&str>, field_selector: Option<&str>) -> watcher::Config {
    let mut cfg = watcher::Config::default().page_size(500);
    if let Some(l) = label_selector {
        cfg = cfg.labels(l);
    }
    if let Some(f) = field_selector {
        cfg = cfg.fields(f);
    }
    cfg
}

/// `name in namespace` or `name in all namespaces`, for logs.
fn watch_name(what: &str, namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) => format!("{what} watch in {ns}"),
        None => format!("{what} watch"),
    }
}
