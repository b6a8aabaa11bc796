//! The reconcile stage: every change a watch sees comes here. Resource changes update the index,
//! pass the filters of docs/compatibility.md §4.1 and §4.2, and become queued writes for the workloads the
//! core's `decide` picks; workload changes update the index, the pause timers and the
//! annotation checks. The stage writes nothing itself: work goes to a [`WorkQueue`].

pub(crate) mod catch_up;
pub(crate) mod pause;
pub(crate) mod standby;
#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use reloader_core::annotations::AnnotationKeys;
use reloader_core::decide::{
    DecideOptions, ResourceEventKind, SkipReason as DecideSkip, annotation_problems,
};
use reloader_core::index::{Index, ResourceChange};
use reloader_core::model::{ResourceKey, ResourceKind, WorkloadKey, WorkloadKind};
use reloader_core::options::Options;
use reloader_core::views::{ResourceView, WorkloadView};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use self::pause::PauseTimers;
use self::standby::StandbyChanges;
use crate::executor::{Executor, Work};
use crate::notify::events::{EventSink, EventTarget, WorkloadEvent};
use crate::notify::webhook::{ResourceNotice, WebhookNotifier};
use crate::observe::metrics::{EventType, Metrics, ProcessResult, SkipReason};
use crate::scope::ScopeFilter;
use crate::sources::Phase;

/// Where reconcile, catch-up and the pause timers send writes (the executor).
pub(crate) trait WorkQueue: Send + Sync {
    /// Queues `work` for `workload`; `event_at` is when the triggering watch event arrived.
    fn enqueue(&self, workload: WorkloadKey, work: Work, event_at: Instant);
}

impl WorkQueue for Executor {
    fn enqueue(&self, workload: WorkloadKey, work: Work, event_at: Instant) {
        Executor::enqueue(self, workload, work, event_at);
    }
}

/// `--webhook-url`: resource changes are posted there instead of reloading. Fire and forget.
pub(crate) trait ResourceNotifier: Send + Sync {
    fn notify(&self, notice: ResourceNotice);
}

impl ResourceNotifier for Arc<WebhookNotifier> {
    fn notify(&self, notice: ResourceNotice) {
        let notifier = self.clone();
        tokio::spawn(async move {
            if let Err(e) = WebhookNotifier::notify(&notifier, &notice).await {
                tracing::error!(error = %e, resource = %notice.name, "webhook notification failed");
            }
        });
    }
}

/// The options reconcile uses.
#[derive(Debug, Clone)]
pub(crate) struct ReconcileConfig {
    pub(crate) decide: DecideOptions,
    pub(crate) keys: AnnotationKeys,
    pub(crate) reload_on_create: bool,
    pub(crate) reload_on_delete: bool,
}

impl ReconcileConfig {
    pub(crate) fn new(options: &Options) -> Self {
        ReconcileConfig {
            decide: options.decide_options(),
            keys: options.keys.clone(),
            reload_on_create: options.reload_on_create,
            reload_on_delete: options.reload_on_delete,
        }
    }
}

/// What the reconciler works with; each part is its own narrow handle.
pub(crate) struct Reconciler {
    pub(crate) config: ReconcileConfig,
    pub(crate) index: Arc<RwLock<Index>>,
    pub(crate) scope: ScopeFilter,
    /// True while this replica holds the lease (always true without HA).
    pub(crate) leader: watch::Receiver<bool>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) queue: Arc<dyn WorkQueue>,
    pub(crate) notifier: Option<Box<dyn ResourceNotifier>>,
    /// Where `InvalidAnnotation` Events go.
    pub(crate) events: Arc<dyn EventSink>,
    pub(crate) pauses: PauseTimers,
    /// Changes seen while not leading, for the promotion catch-up.
    pub(crate) standby: Arc<StandbyChanges>,
}

impl Reconciler {
    pub(crate) fn resource_applied(&self, view: ResourceView, phase: Phase) {
        let received = Instant::now();
        let resource_type = view.key.kind;
        let change = self.index.write().expect("index lock").upsert_resource(view.clone());
        let event_type = match change {
            ResourceChange::Created => EventType::Create,
            _ => EventType::Update,
        };
        if phase == Phase::Live {
            self.metrics.event_received(event_type, resource_type);
        }
        let event = match (phase, &change) {
            // The initial list is the state of the world; with --sync-after-restart the leader's
            // catch-up sweep treats it as creates once the workloads are listed too.
            (Phase::InitialList, _) => None,
            (_, ResourceChange::Created) => {
                self.config.reload_on_create.then_some(ResourceEventKind::Created)
            }
            (_, ResourceChange::ContentChanged { .. }) => Some(ResourceEventKind::Updated),
            _ => None,
        };
        let Some(event) = event else {
            if phase == Phase::Live {
                self.metrics.event_processed(
                    event_type,
                    resource_type,
                    ProcessResult::NoContentChange,
                    received.elapsed(),
                );
            }
            return;
        };
        self.dispatch(&view, event, received);
    }

    pub(crate) fn resource_deleted(&self, view: ResourceView) {
        let received = Instant::now();
        self.metrics.event_received(EventType::Delete, view.key.kind);
        let removed = self.index.write().expect("index lock").remove_resource(&view.key);
        if !self.config.reload_on_delete {
            self.metrics.event_processed(
                EventType::Delete,
                view.key.kind,
                ProcessResult::ReloadOnDeleteDisabled,
                received.elapsed(),
            );
            return;
        }
        // The last known flags (ignore/match) decide, as for any other event.
        self.dispatch(&removed.unwrap_or(view), ResourceEventKind::Deleted, received);
    }

    /// After a (re)list: resources the index holds in that scope but the list did not return
    /// were deleted while the watch was down.
    pub(crate) fn resources_relisted(
        &self,
        kind: ResourceKind,
        namespace: Option<&str>,
        seen: &HashSet<ResourceKey>,
        phase: Phase,
    ) {
        let gone: Vec<ResourceView> = {
            let index = self.index.read().expect("index lock");
            index
                .resources()
                .filter(|r| r.key.kind == kind && namespace.is_none_or(|ns| *r.key.namespace == *ns))
                .filter(|r| !seen.contains(&r.key))
                .cloned()
                .collect()
        };
        for view in gone {
            if phase == Phase::InitialList {
                self.index.write().expect("index lock").remove_resource(&view.key);
            } else {
                info!(resource = %view.key, "resource disappeared while the watch was restarting");
                self.resource_deleted(view);
            }
        }
        let stats = self.index.read().expect("index lock").stats();
        self.metrics.set_index_sizes(stats.resources as u64, stats.workloads as u64);
    }

    /// A workload was listed or changed: index it, track its pause, check its annotations.
    pub(crate) fn workload_applied(&self, view: WorkloadView) {
        self.pauses.observe(&view);
        let problems = annotation_problems(&view, &self.config.keys);
        let key = view.key.clone();
        let mut index = self.index.write().expect("index lock");
        let previous = index.upsert_workload(view);
        // Report bad annotations once per change of the annotations, not on every status update.
        let rules_changed = previous.as_ref().is_none_or(|p| {
            index.workload(&key).is_none_or(|v| {
                v.metadata_rules != p.metadata_rules
                    || v.template_rules != p.template_rules
                    || v.references != p.references
            })
        });
        drop(index);
        if rules_changed && !problems.is_empty() {
            for problem in &problems {
                warn!(workload = %key, %problem, "annotation problem");
            }
            let message = problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("; ");
            self.events.record(WorkloadEvent::invalid_annotation(EventTarget::named(key), message));
        }
    }

    pub(crate) fn workload_deleted(&self, key: &WorkloadKey) {
        self.index.write().expect("index lock").remove_workload(key);
        self.pauses.forget(key);
    }

    /// After a (re)list: workloads of `kind` in that scope the list did not return are gone.
    pub(crate) fn workloads_relisted(
        &self,
        kind: WorkloadKind,
        namespace: Option<&str>,
        seen: &HashSet<WorkloadKey>,
    ) {
        let mut index = self.index.write().expect("index lock");
        let gone: Vec<WorkloadKey> = index
            .workloads()
            .filter(|w| w.key.kind == kind && namespace.is_none_or(|ns| *w.key.namespace == *ns))
            .filter(|w| !seen.contains(&w.key))
            .map(|w| w.key.clone())
            .collect();
        for key in gone {
            index.remove_workload(&key);
            self.pauses.forget(&key);
        }
    }

    fn dispatch(&self, view: &ResourceView, event: ResourceEventKind, received: Instant) {
        let (event_type, resource_type) = (EventType::from(event), view.key.kind);
        if !self.scope.contains(&view.key.namespace) {
            self.metrics.skipped(SkipReason::NamespaceOutOfScope);
            let result = ProcessResult::NamespaceOutOfScope;
            self.metrics.event_processed(event_type, resource_type, result, received.elapsed());
            return;
        }
        if view.ignored {
            self.metrics.skipped(SkipReason::Decision(DecideSkip::ResourceIgnored));
            self.metrics.event_processed(
                event_type,
                resource_type,
                ProcessResult::Ignored,
                received.elapsed(),
            );
            return;
        }
        if let Some(notifier) = &self.notifier {
            if *self.leader.borrow() {
                notifier.notify(ResourceNotice {
                    event: event_type,
                    kind: view.key.kind.to_string(),
                    namespace: view.key.namespace.to_string(),
                    name: view.key.name.to_string(),
                    hash: view.hash.to_hex(),
                });
            }
            self.metrics.event_processed(
                event_type,
                resource_type,
                ProcessResult::Webhook,
                received.elapsed(),
            );
            return;
        }
        self.standby.record_unless_leading(&self.leader, view, event);
        let plans = self.index.read().expect("index lock").plan_changes(view, event, &self.config.decide);
        let mut matched = 0u64;
        for (workload, plan) in &plans {
            self.metrics.workloads_scanned(workload.kind, 1);
            match plan {
                Ok(change) => {
                    matched += 1;
                    self.metrics.workloads_matched(workload.kind, 1);
                    debug!(%workload, resource = %view.key, "queueing reload");
                    self.queue.enqueue(workload.clone(), Work::Reload(vec![change.clone()]), received);
                }
                Err(reason) => self.metrics.skipped(SkipReason::Decision(*reason)),
            }
        }
        let result = if matched > 0 { ProcessResult::Queued } else { ProcessResult::NoMatch };
        self.metrics.event_processed(event_type, resource_type, result, received.elapsed());
    }
}
