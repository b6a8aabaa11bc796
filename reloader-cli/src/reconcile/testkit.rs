//! The reconcile stage over a real index with fakes of its I/O, for its own tests and for the
//! watches' tests that drive it through the state traits.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use reloader_core::annotations::AnnotationKeys;
use reloader_core::decide::DecideOptions;
use reloader_core::index::Index;
use reloader_core::model::{ReloadStrategy, WorkloadKey};
use reloader_core::options::NamespaceScope;
use reloader_core::views::{ResourceView, WorkloadView};
use tokio::sync::watch;

use super::pause::PauseTimers;
use super::standby::{REPLAY_WINDOW, StandbyChanges};
use super::{ReconcileConfig, Reconciler, WorkQueue};
use crate::executor::Work;
use crate::notify::events::{EventReason, EventSink, WorkloadEvent};
use crate::observe::metrics::Metrics;
use crate::restarts::Restarts;
use crate::scope::ScopeFilter;

/// Records what was queued: (workload name, "reload"/"resume"); `writing` names the workloads
/// it says a write is queued or in flight for.
#[derive(Default)]
pub(crate) struct FakeQueue(pub(crate) Mutex<Vec<(String, &'static str)>>, pub(crate) Mutex<HashSet<String>>);

impl WorkQueue for FakeQueue {
    fn enqueue(&self, workload: WorkloadKey, work: Work, _event_at: Instant) {
        let what = match work {
            Work::Reload(_) => "reload",
            Work::Resume => "resume",
        };
        self.0.lock().unwrap().push((workload.name.to_string(), what));
    }

    fn has_work(&self, workload: &WorkloadKey) -> bool {
        self.1.lock().unwrap().contains(&*workload.name)
    }
}

impl FakeQueue {
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.0.lock().unwrap().iter().map(|(n, _)| n.clone()).collect();
        names.sort();
        names
    }
}

#[derive(Default)]
pub(crate) struct FakeEvents(pub(crate) Mutex<Vec<(String, EventReason)>>);

impl EventSink for FakeEvents {
    fn record(&self, event: WorkloadEvent) {
        self.0.lock().unwrap().push((event.target.key.name.to_string(), event.reason));
    }
}

pub(crate) struct Stage {
    pub(crate) reconciler: Reconciler,
    pub(crate) queue: Arc<FakeQueue>,
    pub(crate) events: Arc<FakeEvents>,
    pub(crate) metrics: Arc<Metrics>,
    _leader: watch::Sender<bool>,
}

#[derive(Clone)]
pub(crate) struct Setup {
    pub(crate) reload_on_create: bool,
    pub(crate) reload_on_delete: bool,
    pub(crate) leader: bool,
    pub(crate) scope: NamespaceScope,
    pub(crate) selected: &'static [&'static str],
    pub(crate) strategy: ReloadStrategy,
    /// Workloads the queue says a write is queued or in flight for.
    pub(crate) writing: &'static [&'static str],
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            reload_on_create: false,
            reload_on_delete: false,
            leader: true,
            scope: NamespaceScope::All { ignore: vec![], selector: None },
            selected: &[],
            strategy: ReloadStrategy::EnvVars,
            writing: &[],
        }
    }
}

pub(crate) fn stage(setup: &Setup, workloads: &[WorkloadView], resources: &[ResourceView]) -> Stage {
    let mut index = Index::default();
    for w in workloads {
        index.upsert_workload(w.clone());
    }
    for r in resources {
        index.upsert_resource(r.clone());
    }
    let (tx, leader) = watch::channel(setup.leader);
    let scope = ScopeFilter::new(&setup.scope);
    for ns in setup.selected {
        scope.set_selected(ns, true);
    }
    let queue = Arc::new(FakeQueue::default());
    queue.1.lock().unwrap().extend(setup.writing.iter().map(|name| name.to_string()));
    let events = Arc::new(FakeEvents::default());
    let metrics = Metrics::new(false);
    let reconciler = Reconciler {
        config: ReconcileConfig {
            decide: {
                let mut decide = DecideOptions::default();
                decide.strategy = setup.strategy;
                decide
            },
            keys: AnnotationKeys::default(),
            reload_on_create: setup.reload_on_create,
            reload_on_delete: setup.reload_on_delete,
            sync_after_restart: false,
        },
        index: Arc::new(RwLock::new(index)),
        scope,
        leader,
        metrics: metrics.reconcile(),
        queue: queue.clone(),
        notifier: None,
        events: events.clone(),
        pauses: PauseTimers::default(),
        restarts: Restarts::default(),
        standby: Arc::new(StandbyChanges::new(REPLAY_WINDOW)),
    };
    Stage { reconciler, queue, events, metrics, _leader: tx }
}
