//! Restart by eviction (docs/beyond-stakater.md §13): after a reload changes the markers of a
//! workload annotated `reloader.dev/restart: evict`, the pods that do not run them yet are
//! evicted through the Eviction API (PodDisruptionBudgets hold), `max-unavailable` at a time, each
//! after the previous replacement is Ready, with a timeout that stops the restart.
//!
//! The reconcile stage marks a workload active when its markers change ([`Restarts::observe`]);
//! the evictor, on the leader only, steps each active workload every [`TICK`] until its restart
//! is done or stopped. Each step reads the workload and its pods fresh and asks core
//! (`reloader_core::restart::next_step`) what to do; progress is recorded on the workload, so a
//! new leader continues where the old one stopped, and no pod is evicted twice (a pod that runs
//! the markers, or is terminating, is never a candidate). Its API calls sit behind [`RestartApi`].

mod api;
mod pods;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use reloader_core::annotations::AnnotationKeys;
use reloader_core::index::Index;
use reloader_core::model::{ResourceKey, WorkloadKey};
use reloader_core::restart::{
    EvictionPolicy, MarkerRecord, PodState, Progress, ProgressState, Step, next_step,
};
use reloader_core::views::WorkloadView;
use tokio::sync::{Notify, watch};
use tracing::{debug, info, warn};

pub(crate) use self::api::{KubeRestartApi, RestartApi};
pub(crate) use self::pods::PodOwners;
use crate::notify::events::{EventSink, EventTarget, WorkloadEvent};
use crate::observe::metrics::{EvictionMetrics, EvictionResult, RestartOutcome};

/// How often an active restart is looked at.
const TICK: Duration = Duration::from_secs(2);

/// The workloads with a restart to look at, shared by the reconcile stage (which marks them) and
/// the evictor. Bounded by the workloads that opted in.
#[derive(Clone, Default)]
pub(crate) struct Restarts {
    /// Each active workload, and whether it was activated again since its last step began (a
    /// step that read the workload before a new reload must not end its restart).
    active: Arc<Mutex<BTreeMap<WorkloadKey, bool>>>,
    /// The markers each opted-in workload was last seen with: the writer stores its own write's
    /// answer in the index, so the watch event that follows shows no change there.
    seen: Arc<Mutex<HashMap<WorkloadKey, MarkerRecord>>>,
    /// Pods a change reloads (`--reload-pods`), each with the resource that changed, until it is
    /// evicted or gone. Kept by every replica from its own watch events: a new leader has them.
    due_pods: Arc<Mutex<BTreeMap<WorkloadKey, ResourceKey>>>,
    wake: Arc<Notify>,
}

impl Restarts {
    /// Marks `view`'s workload active when it opted in and its markers changed since last seen
    /// (a reload was written, or it was seen for the first time).
    pub(crate) fn observe(&self, view: &WorkloadView) {
        let mut seen = self.seen.lock().expect("restarts lock");
        // A pod is a reload target (it is evicted when due), never a workload to restart.
        if !view.restart_by_eviction || view.key.kind.is_pods() {
            seen.remove(&view.key);
            return;
        }
        let record = MarkerRecord::of_markers(&view.markers);
        if seen.get(&view.key) != Some(&record) {
            seen.insert(view.key.clone(), record);
            drop(seen);
            self.activate(view.key.clone());
        }
    }

    pub(crate) fn forget(&self, key: &WorkloadKey) {
        self.seen.lock().expect("restarts lock").remove(key);
        self.due_pods.lock().expect("restarts lock").remove(key);
    }

    /// A change to `resource` reloads the pod `key`: it is due for eviction.
    pub(crate) fn pod_due(&self, key: WorkloadKey, resource: ResourceKey) {
        self.due_pods.lock().expect("restarts lock").insert(key, resource);
        self.wake.notify_one();
    }

    fn activate(&self, key: WorkloadKey) {
        self.active.lock().expect("restarts lock").insert(key, true);
        self.wake.notify_one();
    }

    /// The active workloads, each about to be stepped.
    fn snapshot(&self) -> Vec<WorkloadKey> {
        let mut active = self.active.lock().expect("restarts lock");
        active.values_mut().for_each(|again| *again = false);
        active.keys().cloned().collect()
    }

    /// Its restart is over, unless it was activated again meanwhile.
    fn finish(&self, key: &WorkloadKey) {
        let mut active = self.active.lock().expect("restarts lock");
        if active.get(key) == Some(&false) {
            active.remove(key);
        }
    }

    fn is_idle(&self) -> bool {
        self.active.lock().expect("restarts lock").is_empty()
            && self.due_pods.lock().expect("restarts lock").is_empty()
    }
}

/// The evictor: steps every active restart while this replica leads.
pub(crate) struct Evictor {
    pub(crate) restarts: Restarts,
    pub(crate) index: Arc<RwLock<Index>>,
    pub(crate) api: Arc<dyn RestartApi>,
    pub(crate) events: Arc<dyn EventSink>,
    pub(crate) metrics: EvictionMetrics,
    pub(crate) keys: AnnotationKeys,
    pub(crate) clock: fn() -> i64,
    /// The workloads whose last step failed, and how: said once, until a step succeeds.
    pub(crate) failing: Mutex<BTreeMap<WorkloadKey, Failure>>,
    /// The restarts of due pods under way, by owner (docs/beyond-stakater.md §14).
    pub(crate) pod_owners: Mutex<PodOwners>,
}

/// What failed in a step, so that a failure that repeats every tick is said once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    Read,
    Evict,
}

impl Evictor {
    pub(crate) async fn run(self, mut leader: watch::Receiver<bool>) {
        loop {
            // Wait to lead; then look at every workload that opted in once (a restart the
            // previous leader left half done, or one that began while nobody led).
            if leader.wait_for(|leading| *leading).await.is_err() {
                return;
            }
            let opted_in: Vec<WorkloadKey> = {
                let index = self.index.read().expect("index lock");
                index.workloads().filter(|w| w.restart_by_eviction).map(|w| w.key.clone()).collect()
            };
            opted_in.into_iter().for_each(|key| self.restarts.activate(key));
            while *leader.borrow() {
                for key in self.restarts.snapshot() {
                    if !*leader.borrow() {
                        break;
                    }
                    if !self.step(&key).await {
                        self.restarts.finish(&key);
                    }
                }
                if *leader.borrow() {
                    self.step_pods().await;
                }
                let idle = self.restarts.is_idle() && self.pod_restarts_idle();
                tokio::select! {
                    _ = leader.changed() => {}
                    _ = self.restarts.wake.notified(), if idle => {}
                    _ = tokio::time::sleep(TICK), if !idle => {}
                }
            }
        }
    }

    /// One step of `key`'s restart; whether it is still under way.
    pub(crate) async fn step(&self, key: &WorkloadKey) -> bool {
        let read = match self.api.workload(key).await {
            Ok(Some(read)) => read,
            Ok(None) => return false,
            Err(error) => {
                if self.first_failure(key, Failure::Read) {
                    warn!(workload = %key, %error, "restart by eviction: reading the workload failed; trying again");
                } else {
                    debug!(workload = %key, %error, "restart by eviction: reading the workload failed again");
                }
                return true;
            }
        };
        let policy = match EvictionPolicy::of(Some(&read.annotations)) {
            Ok(Some(policy)) => policy,
            Ok(None) => return false,
            Err(problem) => {
                warn!(workload = %key, %problem, "restart by eviction: not restarted");
                let target =
                    EventTarget { key: key.clone(), uid: Some(read.uid.clone()), resource_version: None };
                self.events.record(WorkloadEvent::invalid_annotation(target, problem.to_string()));
                return false;
            }
        };
        let target = MarkerRecord::of(&read.template, &self.keys);
        let digest = target.digest();
        let pods: Vec<PodState> = read.pods.iter().map(|pod| pod_state(pod, &target, &self.keys)).collect();
        let recorded = Progress::read(Some(&read.annotations));
        let now = (self.clock)();
        let event_target =
            || EventTarget { key: key.clone(), uid: Some(read.uid.clone()), resource_version: None };
        match next_step(policy, recorded.as_ref(), &digest, &pods, read.desired, now) {
            Step::Evict { pods } => {
                let (mut evicted, mut failed) = (0, false);
                for pod in &pods {
                    match self.api.evict(&key.namespace, pod).await {
                        Ok(()) => {
                            evicted += 1;
                            self.metrics.eviction(EvictionResult::Evicted);
                            let so_far =
                                recorded.as_ref().filter(|p| p.target == digest).map_or(0, |p| p.evicted);
                            info!(workload = %key, pod = %pod, "restart by eviction: evicted");
                            self.events.record(WorkloadEvent::pod_evicted(
                                event_target(),
                                pod,
                                so_far + evicted,
                            ));
                        }
                        Err(kube::Error::Api(status)) if status.code == 429 => {
                            self.metrics.eviction(EvictionResult::Blocked);
                            info!(workload = %key, pod = %pod, "restart by eviction: a disruption budget refuses it now; trying again");
                        }
                        // Gone already: its owner replaces it, as after an eviction.
                        Err(kube::Error::Api(status)) if status.code == 404 => {}
                        Err(error) => {
                            self.metrics.eviction(EvictionResult::Failed);
                            failed = true;
                            if self.first_failure(key, Failure::Evict) {
                                warn!(workload = %key, pod = %pod, %error, "restart by eviction: evicting failed; trying again");
                            } else {
                                debug!(workload = %key, pod = %pod, %error, "restart by eviction: evicting failed again");
                            }
                        }
                    }
                }
                if !failed {
                    self.failing.lock().expect("restarts lock").remove(key);
                }
                if evicted > 0 {
                    let progress = Progress::after_evictions(recorded.as_ref(), &digest, evicted, now);
                    self.record(key, &progress).await;
                }
                true
            }
            Step::Wait => true,
            Step::Done { progress } => {
                if let Some(progress) = progress {
                    if recorded.as_ref().is_some_and(|p| p.state == ProgressState::Evicting) {
                        self.metrics.restart_ended(RestartOutcome::Done);
                        info!(workload = %key, evicted = progress.evicted, "restart by eviction: done");
                    }
                    self.record(key, &progress).await;
                }
                false
            }
            Step::Stop { progress, waited } => {
                warn!(workload = %key, evicted = progress.evicted, waited_s = waited.as_secs(),
                    "restart by eviction: a replacement pod is not Ready; stopped, no further evictions until the next change");
                self.metrics.restart_ended(RestartOutcome::Stopped);
                self.events.record(WorkloadEvent::eviction_stopped(event_target(), waited, progress.evicted));
                self.record(key, &progress).await;
                false
            }
            Step::Stopped => false,
        }
    }

    /// Whether `failure` is new for `key` (to be said), rather than a repeat.
    fn first_failure(&self, key: &WorkloadKey, failure: Failure) -> bool {
        self.failing.lock().expect("restarts lock").insert(key.clone(), failure) != Some(failure)
    }

    async fn record(&self, key: &WorkloadKey, progress: &Progress) {
        if let Err(error) = self.api.record(key, progress).await {
            warn!(workload = %key, %error, "restart by eviction: recording the progress failed");
        }
    }
}

/// A pod as the restart sees it.
fn pod_state(pod: &Pod, target: &MarkerRecord, keys: &AnnotationKeys) -> PodState {
    let template = PodTemplateSpec { metadata: Some(pod.metadata.clone()), spec: pod.spec.clone() };
    PodState {
        name: pod.metadata.name.clone().unwrap_or_default(),
        current: MarkerRecord::of(&template, keys) == *target,
        ready: pod_is_ready(pod),
        terminating: pod.metadata.deletion_timestamp.is_some(),
    }
}

/// Its `Ready` condition is `True`.
fn pod_is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The labels a workload's pods carry: its pod template's.
pub(crate) fn pod_labels(template: &PodTemplateSpec) -> BTreeMap<String, String> {
    template.metadata.as_ref().and_then(|m| m.labels.clone()).unwrap_or_default()
}

/// The clock of a live run: Unix seconds.
pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}
