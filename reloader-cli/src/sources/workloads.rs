//! Every enabled workload kind, kept in the index as compact views so no event ever needs a
//! LIST. Workload changes go to the state like resource changes.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use futures::FutureExt as _;
use kube::Client;
use kube::runtime::WatchStreamExt;
use reloader_core::annotations::AnnotationKeys;
use reloader_core::model::{WorkloadKey, WorkloadKind};
use reloader_core::restart::POD_SELECTOR;
use tokio::sync::watch;

use super::glue::{IndexTarget, index_watch};
use super::initial_list::watcher_stream;
use super::{Watch, watch_config, watch_name};
use crate::discovery::CrdWait;
use crate::job_origins::JobOrigins;
use crate::kinds::{self, Availability, KindObject, KindVisitor, Registered};
use crate::observe::metrics::WatchMetrics;
use crate::state::{Phase, WorkloadState};
use crate::views::watched_workload_view;

/// The watch of one workload kind in one namespace (or all). A declared kind's watch first
/// waits for its CRD, if missing.
pub(super) fn watch(
    client: &Client,
    target: WorkloadTarget,
    crd_wait: &CrdWait,
    metrics: &WatchMetrics,
) -> Watch {
    let kind = target.kind;
    kinds::visit(kind, Start { client, target, crd_wait, metrics })
}

/// Starts the watch of the kind's backend type.
struct Start<'a> {
    client: &'a Client,
    target: WorkloadTarget,
    crd_wait: &'a CrdWait,
    metrics: &'a WatchMetrics,
}

impl KindVisitor for Start<'_> {
    type Output = Watch;

    fn visit<K: KindObject>(self, registered: &Registered<K>) -> Watch {
        let Start { client, target, crd_wait, metrics } = self;
        let api = K::api(client, target.namespace.as_deref(), &registered.info);
        let (tx, synced) = watch::channel(false);
        let name = watch_name(target.kind.as_str(), target.namespace.as_deref());
        let metrics = metrics.clone();
        // Workloads keep no label selector: any of them may carry the annotations. Pods are
        // watched by their label only: the API server sends no other pod (docs/beyond-stakater.md §14).
        let labels = target.kind.is_pods().then_some(POD_SELECTOR);
        let stream = watcher_stream(name.clone(), api, watch_config(labels, None)).default_backoff();
        let task_name = name.clone();
        let awaited = (registered.info.availability == Availability::Declared)
            .then(|| (crd_wait.clone(), registered.info));
        let task = async move {
            if let Some((crd_wait, info)) = awaited {
                crd_wait.until_served(&info, &tx).await;
            }
            index_watch(&task_name, stream, target, tx, &metrics).await
        }
        .boxed();
        Watch { name, task, synced }
    }
}

pub(super) struct WorkloadTarget {
    state: Arc<dyn WorkloadState>,
    kind: WorkloadKind,
    namespace: Option<String>,
    keys: AnnotationKeys,
    /// Where Jobs and CronJobs are kept as origins for the webhook's Job fence, when it runs.
    origins: Option<Arc<JobOrigins>>,
}

impl WorkloadTarget {
    pub(super) fn new(
        state: Arc<dyn WorkloadState>,
        kind: WorkloadKind,
        namespace: Option<&str>,
        keys: &AnnotationKeys,
        origins: Option<&Arc<JobOrigins>>,
    ) -> Self {
        let origins = origins.filter(|_| matches!(kind, WorkloadKind::Job | WorkloadKind::CronJob)).cloned();
        WorkloadTarget { state, kind, namespace: namespace.map(String::from), keys: keys.clone(), origins }
    }
}

impl<K: KindObject> IndexTarget<K> for WorkloadTarget {
    type Key = WorkloadKey;

    fn apply(&mut self, object: K, phase: Phase) -> Option<WorkloadKey> {
        if let Some(origins) = &self.origins
            && let Some(origin) = object.job_origin(&self.keys)
            && let (Some(namespace), Some(name)) =
                (object.meta().namespace.as_deref(), object.meta().name.as_deref())
        {
            origins.seen(WorkloadKey::new(self.kind, namespace, name), origin);
        }
        let view = watched_workload_view(object, self.kind, &self.keys)?;
        let key = view.key.clone();
        self.state.workload_applied(view, phase);
        Some(key)
    }

    fn delete(&mut self, object: K) {
        if let Some(view) = watched_workload_view(object, self.kind, &self.keys) {
            if let Some(origins) = &self.origins {
                origins.gone(&view.key, Instant::now());
            }
            self.state.workload_deleted(&view.key);
        }
    }

    fn reset(&mut self, seen: HashSet<WorkloadKey>, _phase: Phase) {
        if let Some(origins) = &self.origins {
            origins.relisted(self.kind, self.namespace.as_deref(), &seen, Instant::now());
        }
        self.state.workloads_relisted(self.kind, self.namespace.as_deref(), &seen);
    }
}
