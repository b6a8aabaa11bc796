//! Turns resource events into reloads: updates the index, applies the filters of compat.md §4.1
//! and §4.2, asks the core which workloads need which marker, and queues the writes.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use reloader_core::decide::{DecideOptions, ResourceEventKind};
use reloader_core::index::ResourceChange;
use reloader_core::model::{ResourceKey, ResourceKind, ResourceView};
use tracing::{debug, info};

use super::Context;
use crate::executor::{Executor, Work};
use super::standby::{REPLAY_WINDOW, StandbyChanges};
use crate::notify::webhook::{ResourceNotice, WebhookNotifier};

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
        let resource_type = view.key.kind.plural();
        let change = self.ctx.index.write().expect("index lock").upsert_resource(view.clone());
        let event_type = match change {
            ResourceChange::Created => "create",
            _ => "update",
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
                self.ctx.metrics.event_processed(event_type, resource_type, "no_content_change");
            }
            return;
        };
        self.dispatch(&view, event, received);
    }

    pub fn resource_deleted(&self, view: ResourceView) {
        let received = Instant::now();
        self.ctx.metrics.event_received("delete", view.key.kind.plural());
        let removed = self.ctx.index.write().expect("index lock").remove_resource(&view.key);
        if !self.ctx.options.reload_on_delete {
            self.ctx.metrics.event_processed("delete", view.key.kind.plural(), "reload_on_delete_disabled");
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
        let (event_type, resource_type) = (event_label(event), view.key.kind.plural());
        if !self.ctx.scope.contains(&view.key.namespace) {
            self.ctx.metrics.skipped("namespace_out_of_scope");
            self.ctx.metrics.event_processed(event_type, resource_type, "namespace_out_of_scope");
            return;
        }
        if view.ignored {
            self.ctx.metrics.skipped("resource_ignored");
            self.ctx.metrics.event_processed(event_type, resource_type, "ignored");
            return;
        }
        if let Some(notifier) = &self.notifier {
            self.notify_webhook(notifier.clone(), view, event);
            self.ctx.metrics.event_processed(event_type, resource_type, "webhook");
            return;
        }
        self.standby.record_unless_leading(&self.ctx.leader, view, event);
        let plans = self.ctx.index.read().expect("index lock").plan_changes(view, event, &self.decide);
        let mut matched = 0u64;
        for (workload, plan) in &plans {
            self.ctx.metrics.workloads_scanned(workload.kind.as_str(), 1);
            match plan {
                Ok(change) => {
                    matched += 1;
                    self.ctx.metrics.workloads_matched(workload.kind.as_str(), 1);
                    debug!(%workload, resource = %view.key, "queueing reload");
                    self.executor.enqueue(workload.clone(), Work::Reload(vec![change.clone()]), received);
                }
                Err(reason) => self.ctx.metrics.skipped(reason.as_label()),
            }
        }
        let result = if matched > 0 { "queued" } else { "no_match" };
        self.ctx.metrics.event_processed(event_type, resource_type, result);
    }

    fn notify_webhook(&self, notifier: Arc<WebhookNotifier>, view: &ResourceView, event: ResourceEventKind) {
        if !*self.ctx.leader.borrow() {
            return;
        }
        let notice = ResourceNotice {
            event: event_label(event),
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

fn event_label(event: ResourceEventKind) -> &'static str {
    match event {
        ResourceEventKind::Created => "create",
        ResourceEventKind::Updated => "update",
        ResourceEventKind::Deleted => "delete",
    }
}
