//! The reconcile stage: every change a watch sees comes here. Resource changes update the index,
//! pass the filters of docs/compatibility.md §4.1 and §4.2, and become queued writes for the workloads the
//! core's `decide` picks; workload changes update the index, the pause timers and the
//! annotation checks. The stage writes nothing itself: work goes to a [`WorkQueue`].

pub(crate) mod catch_up;
mod csi;
mod held;
pub(crate) mod pause;
pub(crate) mod standby;
#[cfg(test)]
pub(crate) mod testkit;
#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use reloader_core::annotations::AnnotationKeys;
use reloader_core::decide::{DecideOptions, PlannedChange, ResourceEventKind, annotation_problems};
use reloader_core::event_plan::EventPlan;
use reloader_core::index::{Index, MissedChange, ResourceChange};
use reloader_core::model::{ResourceKey, ResourceKind, WorkloadKey, WorkloadKind};
use reloader_core::options::Options;
use reloader_core::views::{ResourceView, WorkloadView};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use self::pause::PauseTimers;
use self::standby::StandbyChanges;
use crate::executor::{Executor, Work};
use crate::notify::events::{EventSink, EventTarget, WorkloadEvent};
use crate::notify::webhook::{ResourceNotice, WebhookQueue};
use crate::observe::metrics::{EventType, ProcessResult, ReconcileMetrics, SkipReason};
use crate::restarts::Restarts;
use crate::scope::ScopeFilter;
use crate::state::{Phase, ResourceState, WorkloadState};

/// Where reconcile, catch-up and the pause timers send writes (the executor).
pub(crate) trait WorkQueue: Send + Sync {
    /// Queues `work` for `workload`; `event_at` is when the triggering watch event arrived.
    fn enqueue(&self, workload: WorkloadKey, work: Work, event_at: Instant);
    /// Is a write to `workload` queued or in flight? Its view may not show its markers yet.
    fn has_work(&self, workload: &WorkloadKey) -> bool;
}

impl WorkQueue for Executor {
    fn enqueue(&self, workload: WorkloadKey, work: Work, event_at: Instant) {
        Executor::enqueue(self, workload, work, event_at);
    }

    fn has_work(&self, workload: &WorkloadKey) -> bool {
        Executor::has_work(self, workload)
    }
}

/// The queue of a run with `--reload-pods`: a pod is never written, a reload of one makes it
/// due for eviction (docs/beyond-stakater.md §14); every other workload's work goes on.
pub(crate) struct PodsDue {
    pub(crate) workloads: Arc<dyn WorkQueue>,
    pub(crate) restarts: Restarts,
}

impl WorkQueue for PodsDue {
    fn enqueue(&self, workload: WorkloadKey, work: Work, event_at: Instant) {
        if !workload.kind.is_pods() {
            return self.workloads.enqueue(workload, work, event_at);
        }
        match work {
            Work::Reload(changes) => {
                if let Some(change) = changes.into_iter().next() {
                    self.restarts.pod_due(workload, change.resource);
                }
            }
            // A pod has no pause period to end.
            Work::Resume => {}
        }
    }

    fn has_work(&self, workload: &WorkloadKey) -> bool {
        !workload.kind.is_pods() && self.workloads.has_work(workload)
    }
}

/// The queue of a run that never writes (`--webhook-url`): there is no executor then, and
/// changes become POSTs before any write is planned, so nothing should reach this. Anything
/// that does is dropped, loudly: that mode must never write a workload.
pub(crate) struct NoWrites;

impl WorkQueue for NoWrites {
    fn enqueue(&self, workload: WorkloadKey, work: Work, _event_at: Instant) {
        tracing::error!(%workload, ?work, "--webhook-url mode writes no workload; dropped a queued write");
    }

    fn has_work(&self, _: &WorkloadKey) -> bool {
        false
    }
}

/// `--webhook-url`: resource changes are posted there instead of reloading. Fire and forget.
pub(crate) trait ResourceNotifier: Send + Sync {
    fn notify(&self, notice: ResourceNotice);
}

/// What `--webhook-url` is told about `view`: names and the hash, never data.
pub(crate) fn notice(view: &ResourceView, event: EventType) -> ResourceNotice {
    ResourceNotice {
        event,
        kind: view.key.kind.to_string(),
        namespace: view.key.namespace.to_string(),
        name: view.key.name.to_string(),
        hash: view.hash.to_hex(),
    }
}

impl ResourceNotifier for WebhookQueue {
    fn notify(&self, notice: ResourceNotice) {
        self.send(notice);
    }
}

/// The options reconcile uses.
#[derive(Debug, Clone)]
pub(crate) struct ReconcileConfig {
    pub(crate) decide: DecideOptions,
    pub(crate) keys: AnnotationKeys,
    pub(crate) reload_on_create: bool,
    pub(crate) reload_on_delete: bool,
    /// `--sync-after-restart`: only for how the first list is counted (the sweep acts on it).
    pub(crate) sync_after_restart: bool,
}

impl ReconcileConfig {
    pub(crate) fn new(options: &Options) -> Self {
        ReconcileConfig {
            decide: options.decide_options(),
            keys: options.keys.clone(),
            reload_on_create: options.reload_on_create,
            reload_on_delete: options.reload_on_delete,
            sync_after_restart: options.sync_after_restart,
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
    pub(crate) metrics: ReconcileMetrics,
    pub(crate) queue: Arc<dyn WorkQueue>,
    pub(crate) notifier: Option<Box<dyn ResourceNotifier>>,
    /// Where `InvalidAnnotation` Events go.
    pub(crate) events: Arc<dyn EventSink>,
    pub(crate) pauses: PauseTimers,
    /// Marks the workloads whose restart by eviction may have work.
    pub(crate) restarts: Restarts,
    /// Changes seen while not leading, for the promotion catch-up.
    pub(crate) standby: Arc<StandbyChanges>,
}

impl ResourceState for Reconciler {
    fn resource_applied(&self, view: ResourceView, phase: Phase) {
        let received = Instant::now();
        let resource_type = view.key.kind;
        let change = {
            let mut index = self.index.write().expect("index lock");
            match phase {
                Phase::InitialList => index.upsert_listed_resource(view.clone()),
                Phase::Relist | Phase::Live => index.upsert_resource(view.clone()),
            }
        };
        let event_type = match change {
            ResourceChange::Created => EventType::Create,
            _ => EventType::Update,
        };
        // Every phase: Stakater's informer counts its initial list as `add` events.
        self.metrics.event_received(event_type, resource_type);
        let handling = self.classify(phase, change, &view.key);
        // A trace per watch event, and per change a re-list finds; none for the initial list
        // (the state of the world) nor for the unchanged objects a re-list returns.
        let span = match (phase, &handling) {
            (Phase::Live, _) | (Phase::Relist, Ok(_)) => resource_event_span(&view.key),
            (Phase::InitialList, _) | (Phase::Relist, Err(_)) => tracing::Span::none(),
        };
        let _entered = span.enter();
        match handling {
            Ok(event) => self.dispatch(&view, event, received),
            Err(result) => self.processed(event_type, resource_type, result, received.elapsed()),
        }
    }

    fn resource_deleted(&self, view: ResourceView) {
        let received = Instant::now();
        let span = resource_event_span(&view.key);
        let _entered = span.enter();
        self.metrics.event_received(EventType::Delete, view.key.kind);
        let removed = self.index.write().expect("index lock").remove_resource(&view.key);
        if !self.config.reload_on_delete {
            self.processed(
                EventType::Delete,
                view.key.kind,
                ProcessResult::ReloadOnDeleteDisabled,
                received.elapsed(),
            );
            return;
        }
        // The last known flags (ignore/match) decide, as for any other event; the version is the
        // deletion's (docs/behaviour.md §G).
        let version = view.version;
        let decided = ResourceView { version, ..removed.unwrap_or(view) };
        self.dispatch(&decided, ResourceEventKind::Deleted, received);
    }

    /// After a (re)list: resources the index holds in that scope but the list did not return
    /// were deleted while the watch was down.
    fn resources_relisted(
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
                // When it went is unknown: no workload is left out as created after it.
                self.resource_deleted(ResourceView { version: None, ..view });
            }
        }
    }
}

impl WorkloadState for Reconciler {
    /// A workload was listed or changed: index it, track its pause, check its annotations, and
    /// queue the changes the index met before it (docs/behaviour.md §G).
    fn workload_applied(&self, view: WorkloadView, phase: Phase) {
        let received = Instant::now();
        self.pauses.observe(&view);
        let problems = annotation_problems(&view, &self.config.keys);
        let key = view.key.clone();
        let mut index = self.index.write().expect("index lock");
        let previous = match phase {
            Phase::Live => index.upsert_watched_workload(view),
            Phase::InitialList | Phase::Relist => index.upsert_workload(view),
        };
        let missed = index.missed_changes(&key, previous.as_ref(), &self.config.decide);
        if let Some(now) = index.workload(&key) {
            self.restarts.observe(now);
        }
        // An operator cleared the loop guard's stop: what changed meanwhile is applied once.
        // (Held reloads are taken up by the catch-up sweep, once every watch has listed.)
        let leading = *self.leader.borrow() && self.scope.contains(&key.namespace) && self.notifier.is_none();
        let stop_cleared = previous.as_ref().is_some_and(|p| p.loop_stopped())
            && index.workload(&key).is_some_and(|v| !v.loop_stopped());
        let after_stop = match stop_cleared && leading {
            true => index.catch_up_workload(&key, &self.config.decide),
            false => Vec::new(),
        };
        // Report bad annotations once per change of the annotations, not on every status update.
        let rules_changed = previous.as_ref().is_none_or(|p| {
            index.workload(&key).is_none_or(|v| {
                v.metadata_rules != p.metadata_rules
                    || v.template_rules != p.template_rules
                    || v.references != p.references
                    || v.key_filters != p.key_filters
            })
        });
        drop(index);
        self.queue_missed(&key, missed, received);
        if !after_stop.is_empty() {
            info!(workload = %key, changes = after_stop.len(), "loop guard's stop cleared; reloading for what changed meanwhile");
            self.queue.enqueue(key.clone(), Work::Reload(after_stop), received);
        }
        if rules_changed && !problems.is_empty() {
            for problem in &problems {
                warn!(workload = %key, %problem, "annotation problem");
            }
            let message = problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("; ");
            self.events.record(WorkloadEvent::invalid_annotation(EventTarget::named(key), message));
        }
    }

    fn workload_deleted(&self, key: &WorkloadKey) {
        self.index.write().expect("index lock").remove_workload(key);
        self.pauses.forget(key);
        self.restarts.forget(key);
    }

    /// After a (re)list: workloads of `kind` in that scope the list did not return are gone.
    fn workloads_relisted(&self, kind: WorkloadKind, namespace: Option<&str>, seen: &HashSet<WorkloadKey>) {
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
            self.restarts.forget(&key);
        }
    }
}

impl Reconciler {
    /// What a stored resource event calls for: a decision on the event, or only its result.
    fn classify(
        &self,
        phase: Phase,
        change: ResourceChange,
        resource: &ResourceKey,
    ) -> Result<ResourceEventKind, ProcessResult> {
        match (phase, change) {
            // The initial list is the state of the world; with --sync-after-restart the leader's
            // catch-up sweep treats it as creates once the workloads are listed too.
            (Phase::InitialList, _) => Err(self.listed_result(resource)),
            (_, ResourceChange::Created) if self.config.reload_on_create => Ok(ResourceEventKind::Created),
            (_, ResourceChange::Created) => Err(ProcessResult::ReloadOnCreateDisabled),
            (_, ResourceChange::ContentChanged { .. }) => Ok(ResourceEventKind::Updated),
            _ if !self.scope.contains(&resource.namespace) => Err(ProcessResult::NamespaceOutOfScope),
            _ => Err(ProcessResult::NoContentChange),
        }
    }

    /// docs/behaviour.md §G: a change decided before this workload (or this form of it) reached
    /// the index is queued for it now, under the filters the change itself went through.
    /// Webhook mode posted the change when it came, whatever the workloads.
    fn queue_missed(&self, key: &WorkloadKey, missed: Vec<MissedChange>, received: Instant) {
        if missed.is_empty() || self.notifier.is_some() || !self.scope.contains(&key.namespace) {
            return;
        }
        for MissedChange { resource, event, plan } in missed {
            if event == ResourceEventKind::Created && !self.config.reload_on_create {
                continue;
            }
            match plan {
                Ok(change) => {
                    info!(workload = %key, %resource, "a change met before the workload: queueing its reload");
                    self.queue.enqueue(key.clone(), Work::Reload(vec![change]), received);
                }
                Err(reason) => {
                    debug!(workload = %key, %resource, ?reason, "a change met before the workload: no reload")
                }
            }
        }
    }

    fn dispatch(&self, view: &ResourceView, event: ResourceEventKind, received: Instant) {
        let (event_type, resource_type) = (EventType::from(event), view.key.kind);
        if !self.scope.contains(&view.key.namespace) {
            self.metrics.skipped(SkipReason::NamespaceOutOfScope);
            let result = ProcessResult::NamespaceOutOfScope;
            self.processed(event_type, resource_type, result, received.elapsed());
            return;
        }
        // Before `ignore`: Stakater posts every change in this mode without reading annotations.
        if let Some(notifier) = &self.notifier {
            if *self.leader.borrow() {
                notifier.notify(notice(view, event_type));
            }
            self.processed(event_type, resource_type, ProcessResult::Webhook, received.elapsed());
            return;
        }
        // Planned under the index's lock: a write ends by storing its answer in the index, then
        // leaves the queue, so a view from before that write always finds it still there.
        let writing = |workload: &WorkloadKey| self.queue.has_work(workload);
        let plan =
            self.index.read().expect("index lock").plan_event(view, event, &self.config.decide, writing);
        if plan.event_skip.is_none() {
            self.standby.record_unless_leading(&self.leader, view, event, plan.targets().cloned());
        }
        for (workload, decision) in &plan.decisions {
            let span = decision_span(workload);
            let _entered = span.enter();
            match decision {
                Ok(PlannedChange { change, rule }) => {
                    span.record("reloader.decision.rule", rule.as_str())
                        .record("reloader.reload.strategy", change.strategy.as_str());
                    debug!(%workload, resource = %view.key, "queueing reload");
                    // The executor takes this span's context along: the write joins this trace.
                    self.queue.enqueue(workload.clone(), Work::Reload(vec![change.clone()]), received);
                }
                Err(reason) => {
                    span.record("reloader.decision.skip_reason", reason.as_label());
                }
            }
        }
        self.record_plan(event_type, resource_type, &plan, received);
    }

    /// The event's metrics and result, all from its plan.
    fn record_plan(
        &self,
        event_type: EventType,
        resource_type: ResourceKind,
        plan: &EventPlan,
        received: Instant,
    ) {
        for reason in plan.event_skip.into_iter().chain(plan.skips().map(|(_, reason)| reason)) {
            self.metrics.skipped(SkipReason::Decision(reason));
        }
        let result = match plan.event_skip {
            Some(_) => ProcessResult::Ignored,
            None if plan.targets().next().is_some() => ProcessResult::Queued,
            None => ProcessResult::NoMatch,
        };
        self.processed(event_type, resource_type, result, received.elapsed());
        // `reloader_workloads_{scanned,matched}_total` and `strategy_not_updated`: Stakater lists
        // every workload of each kind in the namespace, counts those it writes, and runs its
        // strategy on the workloads a rule selects without using the resource.
        self.metrics.strategy_not_updated(plan.selected_but_unused);
        for (kind, (scanned, matched)) in plan.scan_counts() {
            self.metrics.workloads_scanned(kind, scanned);
            self.metrics.workloads_matched(kind, matched);
        }
    }

    /// Counts the event's handling, and records it on the event's span.
    fn processed(
        &self,
        event_type: EventType,
        resource_type: ResourceKind,
        result: ProcessResult,
        took: std::time::Duration,
    ) {
        tracing::Span::current()
            .record("reloader.event.type", event_type.as_label())
            .record("reloader.event.result", result.as_label());
        self.metrics.event_processed(event_type, resource_type, result, took);
    }

    /// How Stakater's controller takes a resource of its first list (SecretProviderClassPodStatus
    /// creations it never takes): only with `--reload-on-create`, and then as a create only with
    /// `--sync-after-restart` and in scope; otherwise its namespace/initialised check drops it.
    fn listed_result(&self, resource: &ResourceKey) -> ProcessResult {
        if !self.config.reload_on_create || resource.kind == ResourceKind::SecretProviderClass {
            ProcessResult::InitialList
        } else if !self.scope.contains(&resource.namespace) {
            ProcessResult::NamespaceOutOfScope
        } else if !self.config.sync_after_restart {
            ProcessResult::ListedBeforeSync
        } else {
            ProcessResult::ListedAsCreated
        }
    }
}

/// The span of one watch event on a ConfigMap or Secret: its kind and name, never its data.
fn resource_event_span(key: &ResourceKey) -> tracing::Span {
    tracing::info_span!(
        "reloader.resource_event",
        "reloader.resource.kind" = %key.kind,
        "k8s.namespace.name" = %key.namespace,
        "reloader.resource.name" = %key.name,
        "reloader.event.type" = tracing::field::Empty,
        "reloader.event.result" = tracing::field::Empty,
    )
}

/// The span of the decision for one candidate workload: the rule that applied, or why not.
fn decision_span(workload: &WorkloadKey) -> tracing::Span {
    tracing::info_span!(
        "reloader.decision",
        "reloader.workload.kind" = workload.kind.as_str(),
        "k8s.namespace.name" = %workload.namespace,
        "reloader.workload.name" = %workload.name,
        "reloader.decision.rule" = tracing::field::Empty,
        "reloader.reload.strategy" = tracing::field::Empty,
        "reloader.decision.skip_reason" = tracing::field::Empty,
    )
}
