//! Every enabled workload kind, kept in the index as compact views so no event ever needs a
//! LIST. Workload changes go to the state like resource changes.

use std::collections::HashSet;
use std::fmt::Debug;
use std::sync::Arc;

use futures::FutureExt as _;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::{Client, Resource};
use reloader_core::annotations::AnnotationKeys;
use reloader_core::model::{WorkloadKey, WorkloadKind};
use reloader_workload_argo::Rollout;
use reloader_workload_openshift::DeploymentConfig;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use super::glue::{IndexTarget, index_watch};
use super::initial_list::watcher_stream;
use super::{Watch, api_for, watch_config, watch_name};
use crate::kinds::ToLoaded;
use crate::observe::metrics::WatchMetrics;
use crate::state::{Phase, WorkloadState};
use crate::views::watched_workload_view;

/// The watch of one workload kind in one namespace (or all).
pub(super) fn watch(
    client: &Client,
    kind: WorkloadKind,
    namespace: Option<&str>,
    keys: &AnnotationKeys,
    state: Arc<dyn WorkloadState>,
    metrics: &WatchMetrics,
) -> Watch {
    let target = WorkloadTarget { state, kind, namespace: namespace.map(String::from), keys: keys.clone() };
    match kind {
        WorkloadKind::Deployment => start::<Deployment>(client, target, metrics),
        WorkloadKind::DaemonSet => start::<DaemonSet>(client, target, metrics),
        WorkloadKind::StatefulSet => start::<StatefulSet>(client, target, metrics),
        WorkloadKind::CronJob => start::<CronJob>(client, target, metrics),
        WorkloadKind::Job => start::<Job>(client, target, metrics),
        WorkloadKind::Rollout => start::<Rollout>(client, target, metrics),
        WorkloadKind::DeploymentConfig => start::<DeploymentConfig>(client, target, metrics),
    }
}

fn start<K>(client: &Client, target: WorkloadTarget, metrics: &WatchMetrics) -> Watch
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope> + ToLoaded,
    K: Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
{
    let api: Api<K> = api_for(client, target.namespace.as_deref());
    let (tx, synced) = watch::channel(false);
    let name = watch_name(target.kind.as_str(), target.namespace.as_deref());
    let metrics = metrics.clone();
    // Workloads keep no label selector: any of them may carry the annotations.
    let stream = watcher_stream(name.clone(), api, watch_config(None, None)).default_backoff();
    let task_name = name.clone();
    let task = async move { index_watch(&task_name, stream, target, tx, &metrics).await }.boxed();
    Watch { name, task, synced }
}

struct WorkloadTarget {
    state: Arc<dyn WorkloadState>,
    kind: WorkloadKind,
    namespace: Option<String>,
    keys: AnnotationKeys,
}

impl<K: ToLoaded> IndexTarget<K> for WorkloadTarget {
    type Key = WorkloadKey;

    fn apply(&mut self, object: K, phase: Phase) -> Option<WorkloadKey> {
        let view = watched_workload_view(object, &self.keys)?;
        let key = view.key.clone();
        self.state.workload_applied(view, phase);
        Some(key)
    }

    fn delete(&mut self, object: K) {
        if let Some(view) = watched_workload_view(object, &self.keys) {
            self.state.workload_deleted(&view.key);
        }
    }

    fn reset(&mut self, seen: HashSet<WorkloadKey>, _phase: Phase) {
        self.state.workloads_relisted(self.kind, self.namespace.as_deref(), &seen);
    }
}
