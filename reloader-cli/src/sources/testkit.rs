//! A real reconciler for the sources' tests, with its queue and Events recorded instead of sent.

use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use reloader_core::annotations::AnnotationKeys;
use reloader_core::index::Index;
use reloader_core::model::WorkloadKey;
use reloader_core::options::NamespaceScope;
use tokio::sync::watch;

use crate::executor::Work;
use crate::notify::events::{EventSink, WorkloadEvent};
use crate::observe::metrics::Metrics;
use crate::reconcile::pause::PauseTimers;
use crate::reconcile::standby::{REPLAY_WINDOW, StandbyChanges};
use crate::reconcile::{ReconcileConfig, Reconciler, WorkQueue};
use crate::scope::ScopeFilter;

/// The workloads queued for work, in order.
#[derive(Default)]
pub(super) struct RecordedQueue(pub(super) Mutex<Vec<WorkloadKey>>);

impl WorkQueue for RecordedQueue {
    fn enqueue(&self, workload: WorkloadKey, _: Work, _: Instant) {
        self.0.lock().unwrap().push(workload);
    }

    fn has_work(&self, _: &WorkloadKey) -> bool {
        false
    }
}

struct NoEvents;

impl EventSink for NoEvents {
    fn record(&self, _: WorkloadEvent) {}
}

/// A leading reconciler over `index`, all namespaces, env-vars strategy.
pub(super) fn reconciler(
    index: Arc<RwLock<Index>>,
    queue: Arc<dyn WorkQueue>,
    reload_on_create: bool,
    reload_on_delete: bool,
) -> Arc<Reconciler> {
    // The sender is dropped: the receiver keeps the last value, leading.
    let (_, leader) = watch::channel(true);
    Arc::new(Reconciler {
        config: ReconcileConfig {
            decide: Default::default(),
            keys: AnnotationKeys::default(),
            reload_on_create,
            reload_on_delete,
            sync_after_restart: false,
        },
        index,
        scope: ScopeFilter::new(&NamespaceScope::All { ignore: vec![], selector: None }),
        leader,
        metrics: Metrics::new(false),
        queue,
        notifier: None,
        events: Arc::new(NoEvents),
        pauses: PauseTimers::default(),
        standby: Arc::new(StandbyChanges::new(REPLAY_WINDOW)),
    })
}
