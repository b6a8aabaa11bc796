//! Readiness and leadership gains. Once every watch has listed, the replica is ready (a warm
//! standby too). Each time it becomes leader it compares every recorded marker with the current
//! hash and reloads exactly the workloads that differ: a change made while nobody led is applied
//! once, and a take-over with no change writes nothing (beyond.md §2).

use std::sync::Arc;
use std::time::Instant;

use reloader_core::decide::ResourceEventKind;
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::Context;
use super::executor::{Executor, Work};
use super::pause::PauseTimers;
use super::reconciler::Reconciler;
use super::resources::Synced;
use crate::http::Health;

pub fn spawn(
    ctx: Arc<Context>,
    executor: Executor,
    reconciler: Arc<Reconciler>,
    _pauses: PauseTimers,
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
    _reconciler: Arc<Reconciler>,
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
    health.set_ready(true);

    let mut leader = ctx.leader.clone();
    loop {
        if leader.wait_for(|l| *l).await.is_err() {
            return;
        }
        sweep(&ctx, &executor);
        if leader.wait_for(|l| !*l).await.is_err() {
            return;
        }
    }
}

fn sweep(ctx: &Context, executor: &Executor) {
    let now = Instant::now();
    let decide = ctx.options.decide_options();
    let index = ctx.index.read().expect("index lock");
    let mut queued = 0usize;
    for (workload, change) in index.catch_up(&decide) {
        if ctx.scope.contains(&workload.namespace) {
            executor.enqueue(workload, Work::Reload(vec![change]), now);
            queued += 1;
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
    info!(queued, "leader catch-up sweep done");
}
