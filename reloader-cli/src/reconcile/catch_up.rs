//! Readiness and leadership gains. Once every watch has listed, the replica is ready (a warm
//! standby too). Each time it becomes leader it compares every recorded marker with the current
//! hash and reloads exactly the workloads that differ, then replays the changes it saw as a
//! standby to the workloads that record nothing for them: a change made while nobody led is
//! applied once, and a take-over with no change writes nothing (docs/beyond-stakater.md §2).
//!
//! The sweep converges long-running kinds only ([`reloader_core::model::WorkloadKind::is_long_running`]): it never
//! recreates a Job nor spawns one from a CronJob, since nothing changed that the batch work
//! has not seen. With `--webhook-url` it writes nothing at all: with `--sync-after-restart` and
//! `--reload-on-create` it announces every listed ConfigMap and Secret as created, as Stakater's
//! start-up does in that mode.

use std::collections::HashSet;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use reloader_core::decide::{DecideOptions, ResourceEventKind};
use reloader_core::index::Index;
use reloader_core::model::{ReloadStrategy, ResourceKey, ResourceKind, WorkloadKey};
use reloader_core::options::Options;
use reloader_core::views::WorkloadView;
use tokio::sync::watch;
use tracing::info;

use super::standby::{SeenChange, StandbyChanges};
use super::{ResourceNotifier, WorkQueue, notice};
use crate::executor::Work;
use crate::observe::http::Health;
use crate::observe::metrics::{EventType, ReconcileMetrics, SkipReason};
use crate::scope::ScopeFilter;
use crate::state::Synced;

/// How long after the caches synced start-up's memory is released.
const RELEASE_AFTER_SYNC: Duration = Duration::from_secs(1);

/// The options the catch-up sweep uses.
#[derive(Debug, Clone)]
pub(crate) struct CatchUpConfig {
    pub(crate) decide: DecideOptions,
    /// `--reload-on-create` with `--sync-after-restart`: every listed resource counts as created.
    pub(crate) listed_as_created: bool,
}

impl CatchUpConfig {
    pub(crate) fn new(options: &Options) -> Self {
        CatchUpConfig {
            decide: options.decide_options(),
            listed_as_created: options.reload_on_create && options.sync_after_restart,
        }
    }
}

/// What the catch-up task works with.
pub(crate) struct CatchUp {
    pub(crate) config: CatchUpConfig,
    pub(crate) index: Arc<RwLock<Index>>,
    pub(crate) scope: ScopeFilter,
    pub(crate) standby: Arc<StandbyChanges>,
    pub(crate) queue: Arc<dyn WorkQueue>,
    /// `--webhook-url`: announce instead of writing.
    pub(crate) notifier: Option<Box<dyn ResourceNotifier>>,
    pub(crate) metrics: ReconcileMetrics,
    pub(crate) health: Health,
}

impl CatchUp {
    /// Waits for every watch's first list, reports ready, then sweeps on each leadership gain.
    /// Returns when the leadership channel closes.
    pub(crate) async fn run(self, synced: Vec<Synced>, leader: watch::Receiver<bool>) {
        let started = Instant::now();
        for mut rx in synced {
            let _ = rx.wait_for(|done| *done).await;
        }
        let stats = self.index.read().expect("index lock").stats();
        info!(
            resources = stats.resources,
            workloads = stats.workloads,
            elapsed = ?started.elapsed(),
            heap_allocated_bytes = crate::observe::memory::heap_allocated(),
            "caches synced; ready"
        );
        self.health.set_ready(true);
        // The workers drop their allocator caches as they go idle, before the release below
        // pages out the code that does it.
        crate::observe::memory::end_start_up();
        // Start-up's memory goes back once the first sweep's writes are out: releasing it at once
        // would page out the code that sweep and those writes run next.
        let release = async {
            tokio::time::sleep(RELEASE_AFTER_SYNC).await;
            crate::observe::memory::release_after_sync();
            crate::observe::memory::keep_freed_pages_for_a_while();
        };
        tokio::join!(release, self.sweeps(leader));
    }

    /// A catch-up on each leadership gain, until the leadership channel closes.
    async fn sweeps(&self, mut leader: watch::Receiver<bool>) {
        loop {
            if leader.wait_for(|l| *l).await.is_err() {
                return;
            }
            // Taken before the index lock: the reconciler records under the standby lock while
            // holding neither, so this order cannot deadlock.
            let seen_as_standby = self.standby.take_recent();
            self.catch_up(seen_as_standby);
            if leader.wait_for(|l| !*l).await.is_err() {
                return;
            }
        }
    }

    /// One catch-up on a leadership gain: the sweep, or with `--webhook-url` the announcements.
    fn catch_up(&self, seen_as_standby: Vec<SeenChange>) {
        // The sweep's own trace: the writes it queues are its children.
        let span = tracing::info_span!(
            "reloader.catch_up",
            "reloader.catch_up.queued" = tracing::field::Empty,
            "reloader.catch_up.replayed" = tracing::field::Empty,
            "reloader.catch_up.announced" = tracing::field::Empty,
        );
        let _entered = span.enter();
        let index = self.index.read().expect("index lock");
        if let Some(notifier) = &self.notifier {
            let announced = announce_listed(&index, &self.scope, &self.config, notifier.as_ref());
            span.record("reloader.catch_up.announced", announced);
            info!(announced, "leader catch-up done (--webhook-url: nothing written)");
        } else {
            let Swept { queued, replayed, not_updated } = sweep(
                &index,
                &self.scope,
                &self.config,
                seen_as_standby,
                self.queue.as_ref(),
                Instant::now(),
            );
            self.metrics.strategy_not_updated(not_updated);
            span.record("reloader.catch_up.queued", queued).record("reloader.catch_up.replayed", replayed);
            info!(queued, replayed, "leader catch-up sweep done");
        }
    }
}

/// `--webhook-url` mode: with `--sync-after-restart` and `--reload-on-create`, every listed
/// ConfigMap and Secret in scope is announced as created, one POST each, whatever its
/// annotations (Stakater posts before reading them). SecretProviderClassPodStatus creations are
/// never announced. Returns how many were.
pub(crate) fn announce_listed(
    index: &Index,
    scope: &ScopeFilter,
    config: &CatchUpConfig,
    notifier: &dyn ResourceNotifier,
) -> usize {
    if !config.listed_as_created {
        return 0;
    }
    let mut announced = 0;
    for resource in index.resources() {
        if resource.key.kind != ResourceKind::SecretProviderClass && scope.contains(&resource.key.namespace) {
            notifier.notify(notice(resource, EventType::Create));
            announced += 1;
        }
    }
    announced
}

/// What one sweep did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Swept {
    pub(crate) queued: usize,
    pub(crate) replayed: usize,
    /// With `--sync-after-restart`: the workloads a rule selected for a listed resource that
    /// needed no write, which Stakater's handling of its first list counts as
    /// `strategy_not_updated` (docs/compatibility.md §11).
    pub(crate) not_updated: u64,
}

/// One sweep of the long-running workloads.
pub(crate) fn sweep(
    index: &Index,
    scope: &ScopeFilter,
    config: &CatchUpConfig,
    seen_as_standby: Vec<SeenChange>,
    queue: &dyn WorkQueue,
    now: Instant,
) -> Swept {
    let decide = &config.decide;
    let mut queued = 0usize;
    let mut not_updated = 0u64;
    for (workload, change) in index.catch_up(decide) {
        if workload.kind.is_long_running() && scope.contains(&workload.namespace) {
            queue.enqueue(workload, Work::Reload(vec![change]), now);
            queued += 1;
        }
    }
    // The held reloads the workloads record (docs/beyond-stakater.md §15); where the sweep
    // queued a change already, the executor reads the record when that write falls due.
    let held: Vec<WorkloadKey> = index
        .workloads()
        .filter(|w| w.held_record().is_some() && scope.contains(&w.key.namespace))
        .map(|w| w.key.clone())
        .collect();
    for key in held {
        queued += usize::from(super::held::adopt(index, &key, decide, queue));
    }
    let mut replayed = 0usize;
    for SeenChange { view: seen, event, targets } in seen_as_standby {
        // Act on what the resource is now; a deleted one only through its last known view.
        let resource = match event {
            ResourceEventKind::Deleted => Some(seen),
            _ => index.resource(&seen.key).cloned(),
        };
        let Some(resource) = resource.filter(|r| !r.ignored && scope.contains(&r.key.namespace)) else {
            continue;
        };
        let targets: HashSet<WorkloadKey> = targets.into_iter().collect();
        let plan = index.plan_event(&resource, event, decide, |w| queue.has_work(w));
        for (workload, planned) in plan.writes().filter(|(workload, _)| targets.contains(*workload)) {
            if index.workload(workload).is_some_and(|w| replayable(w, &resource.key, decide.strategy)) {
                queue.enqueue(workload.clone(), Work::Reload(vec![planned.change.clone()]), now);
                replayed += 1;
            }
        }
    }
    // The marker comparison keeps this idempotent. SecretProviderClassPodStatus creations are
    // never changes (as for Stakater).
    if config.listed_as_created {
        let listed = index.resources().filter(|r| {
            !r.ignored && r.key.kind != ResourceKind::SecretProviderClass && scope.contains(&r.key.namespace)
        });
        for resource in listed {
            let plan = index.plan_event(resource, ResourceEventKind::Created, decide, |w| queue.has_work(w));
            not_updated += plan.selected_but_unused;
            for (workload, decision) in plan.decisions {
                match decision {
                    Ok(planned) if workload.kind.is_long_running() => {
                        queue.enqueue(workload, Work::Reload(vec![planned.change]), now);
                        queued += 1;
                    }
                    Err(reason) if SkipReason::Decision(reason).stakater().is_some() => not_updated += 1,
                    _ => {}
                }
            }
        }
    }
    Swept { queued, replayed, not_updated }
}

/// Whether a change seen as a standby may be replayed to `workload`: only where its record would
/// show that the previous leader already applied it, so the replay writes nothing then.
/// - env vars record each resource on its own: always;
/// - the single `last-reloaded-from` annotation records one resource: only when it names this
///   one or none (naming another, the workload may have reloaded after this change);
/// - a Job or CronJob: never (a catch-up runs no batch work).
fn replayable(workload: &WorkloadView, resource: &ResourceKey, strategy: ReloadStrategy) -> bool {
    workload.key.kind.is_long_running()
        && (strategy == ReloadStrategy::EnvVars
            || workload.markers.annotation.as_ref().is_none_or(|a| a.resource == *resource))
}
