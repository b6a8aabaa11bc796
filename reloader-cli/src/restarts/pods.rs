//! Pods as reload targets (`--reload-pods`, docs/beyond-stakater.md §14): the pods a change
//! reloads are due ([`Restarts::pod_due`], from the reconcile stage on every replica); on the
//! leader, each pass lists the labelled pods of the namespaces with due pods, and evicts them
//! owner by owner, as a restart by eviction does a workload's (core's `next_step`): one at a
//! time by default, each after the previous replacement is Ready, with a timeout. A due pod with
//! no controller owner is never evicted (nothing would recreate it): a Warning Event says so.
//!
//! A pod records no marker and cannot be written, so which pods are due lives in memory: every
//! replica fills it from its own watch, and a new leader continues where the old one stopped.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use reloader_core::model::{ResourceKey, WorkloadKey, WorkloadKind};
use reloader_core::restart::pods::{ListedPod, sort_due};
use reloader_core::restart::{EvictionPolicy, PodState, Progress, Step, next_step};
use tracing::{debug, info, warn};

use super::{Evictor, Failure, pod_is_ready};
use crate::notify::events::{EventTarget, WorkloadEvent};
use crate::observe::metrics::{EvictionResult, RestartOutcome};

/// The restarts of due pods under way, by namespace and owner `uid`.
pub(crate) type PodOwners = BTreeMap<(String, String), OwnerRestart>;

/// One owner's restart once a pod of it was evicted, in memory: how far it got, and how many
/// pods the owner had (a pod evicted and not yet replaced counts as missing).
#[derive(Debug, Clone)]
pub(crate) struct OwnerRestart {
    progress: Progress,
    desired: u32,
}

/// Every restart of due pods is towards the data the pods were found due for; one name will do.
const TARGET: &str = "due";

impl Evictor {
    pub(super) fn pod_restarts_idle(&self) -> bool {
        self.pod_owners.lock().expect("restarts lock").is_empty()
    }

    /// One pass over the namespaces with due pods or a restart under way.
    pub(super) async fn step_pods(&self) {
        let due: BTreeMap<WorkloadKey, ResourceKey> =
            self.restarts.due_pods.lock().expect("restarts lock").clone();
        let mut namespaces: BTreeSet<String> = due.keys().map(|key| key.namespace.to_string()).collect();
        namespaces.extend(self.pod_owners.lock().expect("restarts lock").keys().map(|(ns, _)| ns.clone()));
        for namespace in namespaces {
            let in_namespace: BTreeMap<String, ResourceKey> = due
                .iter()
                .filter(|(key, _)| *key.namespace == *namespace)
                .map(|(key, resource)| (key.name.to_string(), resource.clone()))
                .collect();
            self.step_namespace(&namespace, &in_namespace).await;
        }
    }

    async fn step_namespace(&self, namespace: &str, due: &BTreeMap<String, ResourceKey>) {
        let failure_key = pod_key(namespace, "");
        let pods = match self.api.labelled_pods(namespace).await {
            Ok(pods) => pods,
            Err(error) => {
                if self.first_failure(&failure_key, Failure::Read) {
                    warn!(%namespace, %error, "reloading pods: listing the labelled pods failed; trying again");
                } else {
                    debug!(%namespace, %error, "reloading pods: listing the labelled pods failed again");
                }
                return;
            }
        };
        self.failing.lock().expect("restarts lock").remove(&failure_key);
        let listed: Vec<ListedPod> = pods.iter().map(listed_pod).collect();
        let under_way: BTreeSet<String> = self
            .pod_owners
            .lock()
            .expect("restarts lock")
            .keys()
            .filter(|(ns, _)| ns == namespace)
            .map(|(_, owner)| owner.clone())
            .collect();
        let due_names: BTreeSet<String> = due.keys().cloned().collect();
        let sorted = sort_due(&due_names, &listed, &under_way);
        for name in &sorted.gone {
            self.restarts.forget(&pod_key(namespace, name));
        }
        for name in &sorted.ownerless {
            let key = pod_key(namespace, name);
            let change = due.get(name).map_or_else(String::new, ToString::to_string);
            warn!(pod = %key, %change, "reloading pods: the pod has no controller owner to recreate it; not evicted");
            self.metrics.eviction(EvictionResult::NoOwner);
            self.events.record(WorkloadEvent::pod_not_evicted(self.pod_target(&key, &pods), &change));
            self.restarts.forget(&key);
        }
        for (owner, states) in sorted.owners {
            self.step_owner(namespace, owner, &states, &pods).await;
        }
    }

    /// One step of the restart of `owner`'s due pods (`states`: every labelled pod of it).
    async fn step_owner(&self, namespace: &str, owner: String, states: &[PodState], pods: &[Pod]) {
        let owner_key = (namespace.to_owned(), owner);
        let restart = self.pod_owners.lock().expect("restarts lock").get(&owner_key).cloned();
        // Before its first eviction an owner wants the pods it has; from then on, at least as many.
        let desired = restart.as_ref().map_or(0, |r| r.desired).max(states.len() as u32);
        // The limits of the owner's first due pod (its pods share their owner's template).
        let first_due = states.iter().find(|p| !p.current).map(|p| p.name.as_str());
        let annotations = first_due
            .and_then(|name| pods.iter().find(|p| p.metadata.name.as_deref() == Some(name)))
            .and_then(|pod| pod.metadata.annotations.as_ref());
        let policy = match EvictionPolicy::limits(annotations) {
            Ok(policy) => policy,
            Err(problem) => {
                let key = pod_key(namespace, first_due.unwrap_or_default());
                warn!(pod = %key, %problem, "reloading pods: not evicted");
                let target = self.pod_target(&key, pods);
                self.events.record(WorkloadEvent::invalid_annotation(target, problem.to_string()));
                self.forget_due(namespace, states);
                self.pod_owners.lock().expect("restarts lock").remove(&owner_key);
                return;
            }
        };
        let now = (self.clock)();
        let mut progress = restart.map(|r| r.progress);
        let mut ended = false;
        match next_step(policy, progress.as_ref(), TARGET, states, Some(desired), now) {
            Step::Evict { pods: names } => {
                let mut evicted = 0;
                for name in &names {
                    let key = pod_key(namespace, name);
                    if self.evict(&key).await {
                        evicted += 1;
                        let so_far = progress.as_ref().map_or(0, |p| p.evicted) + evicted;
                        let target = self.pod_target(&key, pods);
                        self.events.record(WorkloadEvent::pod_evicted(target, name, so_far));
                        self.restarts.forget(&key);
                    }
                }
                if evicted > 0 {
                    progress = Some(Progress::after_evictions(progress.as_ref(), TARGET, evicted, now));
                }
            }
            Step::Wait => {}
            Step::Done { .. } => {
                if let Some(progress) = &progress {
                    self.metrics.restart_ended(RestartOutcome::Done);
                    info!(%namespace, owner = %owner_key.1, evicted = progress.evicted, "reloading pods: done");
                }
                ended = true;
            }
            Step::Stop { progress: stopped, waited } => {
                warn!(%namespace, owner = %owner_key.1, evicted = stopped.evicted, waited_s = waited.as_secs(),
                    "reloading pods: a replacement pod is not Ready; stopped, no further evictions until the next change");
                self.metrics.restart_ended(RestartOutcome::Stopped);
                // Said on a pod still due, or else on any pod of the owner.
                if let Some(name) = first_due.or_else(|| states.first().map(|p| p.name.as_str())) {
                    let target = self.pod_target(&pod_key(namespace, name), pods);
                    self.events.record(WorkloadEvent::eviction_stopped(target, waited, stopped.evicted));
                }
                self.forget_due(namespace, states);
                ended = true;
            }
            Step::Stopped => ended = true,
        }
        // Under way once a pod of it was evicted; until then its due pods are all it has.
        let mut owners = self.pod_owners.lock().expect("restarts lock");
        match progress {
            Some(progress) if !ended => {
                owners.insert(owner_key, OwnerRestart { progress, desired });
            }
            _ => {
                owners.remove(&owner_key);
            }
        }
    }

    /// No further evictions for these pods until a change makes them due again.
    fn forget_due(&self, namespace: &str, states: &[PodState]) {
        for pod in states.iter().filter(|p| !p.current) {
            self.restarts.forget(&pod_key(namespace, &pod.name));
        }
    }

    /// Evicts one due pod; whether it was evicted (a disruption budget or a failure leaves it due).
    async fn evict(&self, key: &WorkloadKey) -> bool {
        match self.api.evict(&key.namespace, &key.name).await {
            Ok(()) => {
                self.metrics.eviction(EvictionResult::Evicted);
                info!(pod = %key, "reloading pods: evicted");
                self.failing.lock().expect("restarts lock").remove(key);
                true
            }
            Err(kube::Error::Api(status)) if status.code == 429 => {
                self.metrics.eviction(EvictionResult::Blocked);
                info!(pod = %key, "reloading pods: a disruption budget refuses it now; trying again");
                false
            }
            // Gone already: its owner replaces it, as after an eviction.
            Err(kube::Error::Api(status)) if status.code == 404 => true,
            Err(error) => {
                self.metrics.eviction(EvictionResult::Failed);
                if self.first_failure(key, Failure::Evict) {
                    warn!(pod = %key, %error, "reloading pods: evicting failed; trying again");
                } else {
                    debug!(pod = %key, %error, "reloading pods: evicting failed again");
                }
                false
            }
        }
    }

    /// Where an Event about the pod `key` goes: the pod, by its `uid` when listed.
    fn pod_target(&self, key: &WorkloadKey, pods: &[Pod]) -> EventTarget {
        let uid = pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(&*key.name))
            .and_then(|p| p.metadata.uid.clone());
        EventTarget { key: key.clone(), uid, resource_version: None }
    }
}

fn pod_key(namespace: &str, name: &str) -> WorkloadKey {
    WorkloadKey::new(WorkloadKind::pods(), namespace, name)
}

fn listed_pod(pod: &Pod) -> ListedPod {
    let owner = pod.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true));
    ListedPod {
        name: pod.metadata.name.clone().unwrap_or_default(),
        owner: owner.map(|o| o.uid.clone()),
        ready: pod_is_ready(pod),
        terminating: pod.metadata.deletion_timestamp.is_some(),
    }
}
