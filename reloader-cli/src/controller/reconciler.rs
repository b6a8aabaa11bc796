//! Turns resource events into reloads: updates the index, applies the filters of compat.md §4.1
//! and §4.2, asks the core which workloads need which marker, and queues the writes.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use reloader_core::decide::{DecideOptions, ResourceEventKind, SkipReason as DecideSkip};
use reloader_core::index::ResourceChange;
use reloader_core::model::{ResourceKey, ResourceKind};
use reloader_core::views::ResourceView;
use tracing::{debug, info};

use super::Context;
use super::standby::{REPLAY_WINDOW, StandbyChanges};
use crate::executor::{Executor, Work};
use crate::notify::webhook::{ResourceNotice, WebhookNotifier};
use crate::observe::metrics::{EventType, ProcessResult, SkipReason};

/// Where an applied resource came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The first list after start: the state of the world, not a change.
    InitialList,
    /// A list after the watch had to restart (410 Gone, API server restart).
    Relist,
    /// A watch event.
    Live,
}

pub struct Reconciler {
    ctx: Arc<Context>,
    executor: Executor,
    decide: DecideOptions,
    notifier: Option<Arc<WebhookNotifier>>,
    /// Changes seen while not leading, for the promotion catch-up.
    standby: StandbyChanges,
}

impl Reconciler {
    pub async fn new(ctx: Arc<Context>, executor: Executor) -> anyhow::Result<Self> {
        let notifier = match &ctx.options.webhook_url {
            Some(url) => Some(Arc::new(WebhookNotifier::new(url.expose().to_string(), ctx.metrics.clone())?)),
            None => None,
        };
        Ok(Reconciler {
            decide: ctx.options.decide_options(),
            ctx,
            executor,
            notifier,
            standby: StandbyChanges::new(REPLAY_WINDOW),
        })
    }

    /// Changes seen while not leading (taken by the promotion catch-up).
    pub fn standby_changes(&self) -> &StandbyChanges {
        &self.standby
    }

    pub fn resource_applied(&self, view: ResourceView, phase: Phase) {
        let received = Instant::now();
        let resource_type = view.key.kind;
        let change = self.ctx.index.write().expect("index lock").upsert_resource(view.clone());
        let event_type = match change {
            ResourceChange::Created => EventType::Create,
            _ => EventType::Update,
        };
        if phase == Phase::Live {
            self.ctx.metrics.event_received(event_type, resource_type);
        }
        let event = match (phase, &change) {
            // The initial list is the state of the world; with --sync-after-restart the leader's
            // catch-up sweep treats it as creates once the workloads are listed too.
            (Phase::InitialList, _) => None,
            (_, ResourceChange::Created) => {
                self.ctx.options.reload_on_create.then_some(ResourceEventKind::Created)
            }
            (_, ResourceChange::ContentChanged { .. }) => Some(ResourceEventKind::Updated),
            _ => None,
        };
        let Some(event) = event else {
            if phase == Phase::Live {
                self.ctx.metrics.event_processed(
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

    pub fn resource_deleted(&self, view: ResourceView) {
        let received = Instant::now();
        self.ctx.metrics.event_received(EventType::Delete, view.key.kind);
        let removed = self.ctx.index.write().expect("index lock").remove_resource(&view.key);
        if !self.ctx.options.reload_on_delete {
            self.ctx.metrics.event_processed(
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
    pub fn resources_relisted(
        &self,
        kind: ResourceKind,
        namespace: Option<&str>,
        seen: &HashSet<ResourceKey>,
        first_list: bool,
    ) {
        let gone: Vec<ResourceView> = {
            let index = self.ctx.index.read().expect("index lock");
            index
                .resources()
                .filter(|r| r.key.kind == kind && namespace.is_none_or(|ns| *r.key.namespace == *ns))
                .filter(|r| !seen.contains(&r.key))
                .cloned()
                .collect()
        };
        for view in gone {
            if first_list {
                self.ctx.index.write().expect("index lock").remove_resource(&view.key);
            } else {
                info!(resource = %view.key, "resource disappeared while the watch was restarting");
                self.resource_deleted(view);
            }
        }
        let stats = self.ctx.index.read().expect("index lock").stats();
        self.ctx.metrics.set_index_sizes(stats.resources as u64, stats.workloads as u64);
    }

    fn dispatch(&self, view: &ResourceView, event: ResourceEventKind, received: Instant) {
        let (event_type, resource_type) = (EventType::from(event), view.key.kind);
        if !self.ctx.scope.contains(&view.key.namespace) {
            self.ctx.metrics.skipped(SkipReason::NamespaceOutOfScope);
            self.ctx.metrics.event_processed(
                event_type,
                resource_type,
                ProcessResult::NamespaceOutOfScope,
                received.elapsed(),
            );
            return;
        }
        if view.ignored {
            self.ctx.metrics.skipped(SkipReason::Decision(DecideSkip::ResourceIgnored));
            self.ctx.metrics.event_processed(
                event_type,
                resource_type,
                ProcessResult::Ignored,
                received.elapsed(),
            );
            return;
        }
        if let Some(notifier) = &self.notifier {
            self.notify_webhook(notifier.clone(), view, event);
            self.ctx.metrics.event_processed(
                event_type,
                resource_type,
                ProcessResult::Webhook,
                received.elapsed(),
            );
            return;
        }
        self.standby.record_unless_leading(&self.ctx.leader, view, event);
        let plans = self.ctx.index.read().expect("index lock").plan_changes(view, event, &self.decide);
        let mut matched = 0u64;
        for (workload, plan) in &plans {
            self.ctx.metrics.workloads_scanned(workload.kind, 1);
            match plan {
                Ok(change) => {
                    matched += 1;
                    self.ctx.metrics.workloads_matched(workload.kind, 1);
                    debug!(%workload, resource = %view.key, "queueing reload");
                    self.executor.enqueue(workload.clone(), Work::Reload(vec![change.clone()]), received);
                }
                Err(reason) => self.ctx.metrics.skipped(SkipReason::Decision(*reason)),
            }
        }
        let result = if matched > 0 { ProcessResult::Queued } else { ProcessResult::NoMatch };
        self.ctx.metrics.event_processed(event_type, resource_type, result, received.elapsed());
    }

    fn notify_webhook(&self, notifier: Arc<WebhookNotifier>, view: &ResourceView, event: ResourceEventKind) {
        if !*self.ctx.leader.borrow() {
            return;
        }
        let notice = ResourceNotice {
            event: EventType::from(event),
            kind: view.key.kind.to_string(),
            namespace: view.key.namespace.to_string(),
            name: view.key.name.to_string(),
            hash: view.hash.to_hex(),
        };
        tokio::spawn(async move {
            if let Err(e) = notifier.notify(&notice).await {
                tracing::error!(error = %e, resource = %notice.name, "webhook notification failed");
            }
        });
    }
}
