//! Readiness and leadership gains. Once every watch has listed, the replica is ready (a warm
//! standby too). Each time it becomes leader it compares every recorded marker with the current
//! hash and reloads exactly the workloads that differ, then replays the changes it saw as a
//! standby to the workloads that record nothing for them: a change made while nobody led is
//! applied once, and a take-over with no change writes nothing (beyond.md §2).

use std::sync::Arc;
use std::time::Instant;

use reloader_core::decide::ResourceEventKind;
use reloader_core::model::{ReloadStrategy, ResourceKey, WorkloadKind};
use reloader_core::views::WorkloadView;
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::Context;
use super::reconciler::Reconciler;
use super::resources::Synced;
use crate::executor::{Executor, Work};
use crate::observe::http::Health;

pub fn spawn(
    ctx: Arc<Context>,
    executor: Executor,
    reconciler: Arc<Reconciler>,
    synced: Vec<Synced>,
    health: Health,
    shutdown: CancellationToken,
) {
    tokio::spawn(async move {
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = run(ctx, executor, reconciler, synced, health) => {}
        }
    });
}

async fn run(
    ctx: Arc<Context>,
    executor: Executor,
    reconciler: Arc<Reconciler>,
    synced: Vec<Synced>,
    health: Health,
) {
    let started = Instant::now();
    for mut rx in synced {
        let _ = rx.wait_for(|done| *done).await;
    }
    let stats = ctx.index.read().expect("index lock").stats();
    ctx.metrics.set_index_sizes(stats.resources as u64, stats.workloads as u64);
    info!(
        resources = stats.resources,
        workloads = stats.workloads,
        elapsed = ?started.elapsed(),
        "caches synced; ready"
    );
    crate::observe::memory::release_free_memory();
    health.set_ready(true);

    let mut leader = ctx.leader.clone();
    loop {
        if leader.wait_for(|l| *l).await.is_err() {
            return;
        }
        sweep(&ctx, &executor, &reconciler);
        if leader.wait_for(|l| !*l).await.is_err() {
            return;
        }
    }
}

fn sweep(ctx: &Context, executor: &Executor, reconciler: &Reconciler) {
    let now = Instant::now();
    let decide = ctx.options.decide_options();
    // Taken before the index lock: the reconciler records under the standby lock while holding
    // neither, so this order cannot deadlock.
    let seen_as_standby = reconciler.standby_changes().take_recent();
    let index = ctx.index.read().expect("index lock");
    let mut queued = 0usize;
    for (workload, change) in index.catch_up(&decide) {
        if ctx.scope.contains(&workload.namespace) {
            executor.enqueue(workload, Work::Reload(vec![change]), now);
            queued += 1;
        }
    }
    let mut replayed = 0usize;
    for (seen, event) in seen_as_standby {
        // Act on what the resource is now; a deleted one only through its last known view.
        let resource = match event {
            ResourceEventKind::Deleted => Some(seen),
            _ => index.resource(&seen.key).cloned(),
        };
        let Some(resource) = resource.filter(|r| !r.ignored && ctx.scope.contains(&r.key.namespace)) else {
            continue;
        };
        for (workload, plan) in index.plan_changes(&resource, event, &decide) {
            let Ok(change) = plan else { continue };
            if index.workload(&workload).is_some_and(|w| replayable(w, &resource.key, decide.strategy)) {
                executor.enqueue(workload, Work::Reload(vec![change]), now);
                replayed += 1;
            }
        }
    }
    // --sync-after-restart with --reload-on-create: every listed resource counts as created;
    // the marker comparison keeps it idempotent.
    if ctx.options.reload_on_create && ctx.options.sync_after_restart {
        for resource in index.resources().filter(|r| !r.ignored && ctx.scope.contains(&r.key.namespace)) {
            for (workload, plan) in index.plan_changes(resource, ResourceEventKind::Created, &decide) {
                if let Ok(change) = plan {
                    executor.enqueue(workload, Work::Reload(vec![change]), now);
                    queued += 1;
                }
            }
        }
    }
    info!(queued, replayed, "leader catch-up sweep done");
}

/// Whether a change seen as a standby may be replayed to `workload`: only where its record would
/// show that the previous leader already applied it, so the replay writes nothing then.
/// - env vars record each resource on its own: always;
/// - the single `last-reloaded-from` annotation records one resource: only when it names this
///   one or none (naming another, the workload may have reloaded after this change);
/// - a CronJob records nothing (each reload starts a Job): never.
fn replayable(workload: &WorkloadView, resource: &ResourceKey, strategy: ReloadStrategy) -> bool {
    workload.key.kind != WorkloadKind::CronJob
        && (strategy == ReloadStrategy::EnvVars
            || workload.markers.annotation.as_ref().is_none_or(|a| a.resource == *resource))
}
