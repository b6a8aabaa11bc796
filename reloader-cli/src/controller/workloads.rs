//! Watches every enabled workload kind and keeps its compact view in the index, so no event
//! ever needs a LIST. Also tells the pause timers about paused Deployments.

use std::collections::HashSet;
use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::Resource;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use reloader_core::annotations::AnnotationKeys;
use reloader_core::decide::annotation_problems;
use reloader_core::model::{WorkloadKey, WorkloadKind};
use reloader_core::views::WorkloadView;
use reloader_workload_argo::Rollout;
use reloader_workload_openshift::DeploymentConfig;
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::Context;
use super::kinds::{Loaded, ToLoaded};
use super::pause::PauseTimers;
use super::resources::{Synced, api_for, watch_config, watched_namespaces};
use crate::notify::events::EventReason;

pub fn spawn(ctx: Arc<Context>, pauses: PauseTimers, shutdown: CancellationToken) -> Vec<Synced> {
    let mut synced = Vec::new();
    for ns in watched_namespaces(&ctx) {
        for kind in ctx.kinds.iter() {
            let ns = ns.as_deref();
            let watch = Watch { ctx: &ctx, pauses: &pauses, shutdown: &shutdown, namespace: ns, kind };
            let rx = match kind {
                WorkloadKind::Deployment => watch.start::<Deployment>(),
                WorkloadKind::DaemonSet => watch.start::<DaemonSet>(),
                WorkloadKind::StatefulSet => watch.start::<StatefulSet>(),
                WorkloadKind::CronJob => watch.start::<CronJob>(),
                WorkloadKind::Job => watch.start::<Job>(),
                WorkloadKind::Rollout => watch.start::<Rollout>(),
                WorkloadKind::DeploymentConfig => watch.start::<DeploymentConfig>(),
            };
            synced.push(rx);
        }
    }
    synced
}

/// One workload watch to start: where, for which kind, with what shared state.
struct Watch<'a> {
    ctx: &'a Arc<Context>,
    pauses: &'a PauseTimers,
    shutdown: &'a CancellationToken,
    namespace: Option<&'a str>,
    kind: WorkloadKind,
}

/// The compact view of a watched object; the object itself is dropped here.
fn view_of<K: ToLoaded>(obj: K, keys: &AnnotationKeys) -> Option<WorkloadView> {
    let loaded: Loaded = obj.into_loaded();
    let view = loaded.with(|w| w.view(keys));
    (!view.key.name.is_empty()).then_some(view)
}

impl Watch<'_> {
    fn start<K>(&self) -> Synced
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope> + ToLoaded,
        K: Clone + DeserializeOwned + Debug + Send + 'static,
        K::DynamicType: Default,
    {
        let api: Api<K> = api_for(&self.ctx.client, self.namespace);
        spawn_watch(self.ctx, self.pauses, api, self.kind, self.shutdown, self.namespace.map(String::from))
    }
}

fn spawn_watch<K>(
    ctx: &Arc<Context>,
    pauses: &PauseTimers,
    api: Api<K>,
    kind: WorkloadKind,
    shutdown: &CancellationToken,
    namespace: Option<String>,
) -> Synced
where
    K: Resource + ToLoaded + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let (tx, rx) = watch::channel(false);
    let (ctx, pauses, shutdown) = (ctx.clone(), pauses.clone(), shutdown.clone());
    // Workloads keep no label selector: any of them may carry the annotations.
    let stream = watcher(api, watch_config(None, None)).default_backoff();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        let mut seen: HashSet<WorkloadKey> = HashSet::new();
        let keys = ctx.options.keys.clone();
        loop {
            let event = tokio::select! {
                _ = shutdown.cancelled() => return,
                e = stream.next() => match e { Some(e) => e, None => return },
            };
            match event {
                Ok(watcher::Event::Init) => seen.clear(),
                Ok(watcher::Event::InitApply(obj)) => {
                    if let Some(view) = view_of(obj, &keys) {
                        seen.insert(view.key.clone());
                        upsert(&ctx, &pauses, view);
                    }
                }
                Ok(watcher::Event::InitDone) => {
                    remove_unseen(&ctx, &pauses, kind, namespace.as_deref(), &seen);
                    seen = HashSet::new();
                    let _ = tx.send(true);
                }
                Ok(watcher::Event::Apply(obj)) => {
                    if let Some(view) = view_of(obj, &keys) {
                        upsert(&ctx, &pauses, view);
                    }
                }
                Ok(watcher::Event::Delete(obj)) => {
                    if let Some(view) = view_of(obj, &keys) {
                        ctx.index.write().expect("index lock").remove_workload(&view.key);
                        pauses.forget(&view.key);
                    }
                }
                Err(e) => {
                    warn!(kind = kind.as_str(), error = %e, "workload watch failed; retrying with backoff");
                    ctx.metrics.error(crate::observe::metrics::ErrorType::Watch);
                }
            }
        }
    });
    rx
}

fn upsert(ctx: &Context, pauses: &PauseTimers, view: WorkloadView) {
    pauses.observe(&view);
    let problems = annotation_problems(&view, &ctx.options.keys);
    let key = view.key.clone();
    let previous = ctx.index.write().expect("index lock").upsert_workload(view);
    // Report bad annotations once per change of the annotations, not on every status update.
    let rules_changed = previous.as_ref().is_none_or(|p| {
        let now = ctx.index.read().expect("index lock");
        now.workload(&key).is_none_or(|v| {
            v.metadata_rules != p.metadata_rules
                || v.template_rules != p.template_rules
                || v.references != p.references
        })
    });
    if rules_changed && !problems.is_empty() {
        for problem in &problems {
            warn!(workload = %key, %problem, "annotation problem");
        }
        let message = problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("; ");
        let events = ctx.events.clone();
        tokio::spawn(async move { events.publish(&key, EventReason::InvalidAnnotation, &message).await });
    }
}

fn remove_unseen(
    ctx: &Context,
    pauses: &PauseTimers,
    kind: WorkloadKind,
    namespace: Option<&str>,
    seen: &HashSet<WorkloadKey>,
) {
    let mut index = ctx.index.write().expect("index lock");
    let gone: Vec<WorkloadKey> = index
        .workloads()
        .filter(|w| w.key.kind == kind && namespace.is_none_or(|ns| *w.key.namespace == *ns))
        .filter(|w| !seen.contains(&w.key))
        .map(|w| w.key.clone())
        .collect();
    for key in gone {
        index.remove_workload(&key);
        pauses.forget(&key);
    }
}
