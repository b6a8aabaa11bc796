//! The pods of one workload as a watch sees them, every event in the API server's order: which
//! pods existed, which began to go, and the most that were unavailable at any one moment. A poll
//! can miss a short window in which two pods are down at once; the watch misses none.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use kube::Client;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use reloader_harness::{NotYet, wait_until};
use reloader_tests::fixtures::{ResourceRef, Strategy, marker_in};
use tokio::task::JoinHandle;

/// What the watch saw, from its start.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// The pods that exist now, by uid.
    pub live: BTreeMap<String, Pod>,
    /// Every pod that existed while the watch ran, in the order first seen: (uid, name).
    pub seen: Vec<(String, String)>,
    /// Every pod whose deletion began (a deletionTimestamp, or gone), in that order: (uid, name).
    pub deleted: Vec<(String, String)>,
    /// The pods of [`Self::deleted`] the Eviction API deleted, in that order: (uid, name).
    pub evicted: Vec<(String, String)>,
    /// The most pods unavailable at once (not Ready, terminating or missing), and the pods then.
    pub most_unavailable: usize,
    pub worst_moment: String,
    /// Why the watch stopped recording, if it did (the test fails on reading it).
    broken: Option<String>,
}

impl History {
    /// The pods that exist now: uid → name.
    pub fn live_names(&self) -> BTreeMap<String, String> {
        self.live.iter().map(|(uid, pod)| (uid.clone(), name_of(pod))).collect()
    }

    /// The names of the evicted pods, in the order they were evicted.
    pub fn evicted_names(&self) -> Vec<String> {
        self.evicted.iter().map(|(_, name)| name.clone()).collect()
    }

    /// Ok when `desired` pods exist, none of `originals` among them, each Ready and carrying
    /// `hash` as its marker for `resource`.
    pub fn all_replaced(
        &self,
        originals: &BTreeMap<String, String>,
        desired: usize,
        resource: &ResourceRef,
        strategy: Strategy,
        hash: &str,
    ) -> Result<(), String> {
        let pods: Vec<String> = self.live.values().map(describe).collect();
        if self.live.len() != desired {
            return Err(format!("{} pods, {desired} wanted: {pods:?}", self.live.len()));
        }
        for (uid, pod) in &self.live {
            let marker = marker_of(pod, resource, strategy);
            if originals.contains_key(uid) || !is_available(pod) || marker.as_deref() != Some(hash) {
                return Err(format!("not every pod is a Ready replacement with marker {hash}: {pods:?}"));
            }
        }
        Ok(())
    }

    /// Records one state of a pod; with `desired`, measures the moment it makes.
    fn apply(&mut self, pod: Pod, gone: bool, desired: Option<usize>) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let name = name_of(&pod);
        if !self.seen.iter().any(|(seen, _)| *seen == uid) {
            self.seen.push((uid.clone(), name.clone()));
        }
        if was_evicted(&pod) && !self.evicted.iter().any(|(evicted, _)| *evicted == uid) {
            self.evicted.push((uid.clone(), name.clone()));
        }
        let going = gone || pod.metadata.deletion_timestamp.is_some();
        if going && !self.deleted.iter().any(|(deleted, _)| *deleted == uid) {
            self.deleted.push((uid.clone(), name));
        }
        if gone {
            self.live.remove(&uid);
        } else {
            self.live.insert(uid, pod);
        }
        if let Some(desired) = desired {
            self.measure(desired);
        }
    }

    fn measure(&mut self, desired: usize) {
        let available = self.live.values().filter(|pod| is_available(pod)).count();
        let unavailable = desired.saturating_sub(available);
        if unavailable > self.most_unavailable {
            self.most_unavailable = unavailable;
            self.worst_moment = format!("{:?}", self.live.values().map(describe).collect::<Vec<_>>());
        }
    }
}

/// A watch on the pods labelled `app=<app>`, recording into a [`History`] until dropped.
pub struct PodWatch {
    history: Arc<Mutex<History>>,
    task: JoinHandle<()>,
}

impl PodWatch {
    /// Lists the pods, then watches from that list's resourceVersion, so no event is missed.
    /// `desired` is how many pods the workload wants (its replicas, or its DaemonSet's nodes).
    pub async fn start(client: &Client, namespace: &str, app: &str, desired: usize) -> Self {
        let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let selector = format!("app={app}");
        let listed = api.list(&ListParams::default().labels(&selector)).await.expect("listing the pods");
        let mut first = History::default();
        for pod in listed.items {
            first.apply(pod, false, None);
        }
        first.measure(desired);
        let history = Arc::new(Mutex::new(first));
        let mut version = listed.metadata.resource_version.unwrap_or_default();
        let recording = history.clone();
        let task = tokio::spawn(async move {
            let broken = loop {
                let params = WatchParams::default().labels(&selector).timeout(290);
                let mut events = match api.watch(&params, &version).await {
                    Ok(events) => events.boxed(),
                    Err(error) => break format!("starting the pod watch: {error}"),
                };
                let mut failure = None;
                while let Some(event) = events.next().await {
                    let (pod, gone) = match event {
                        Ok(WatchEvent::Added(pod) | WatchEvent::Modified(pod)) => (pod, false),
                        Ok(WatchEvent::Deleted(pod)) => (pod, true),
                        Ok(WatchEvent::Bookmark(bookmark)) => {
                            version = bookmark.metadata.resource_version;
                            continue;
                        }
                        Ok(WatchEvent::Error(status)) => {
                            failure = Some(format!("the pod watch failed: {status:?}"));
                            break;
                        }
                        Err(error) => {
                            failure = Some(format!("the pod watch failed: {error}"));
                            break;
                        }
                    };
                    version = pod.metadata.resource_version.clone().unwrap_or_default();
                    recording.lock().expect("history lock").apply(pod, gone, Some(desired));
                }
                // A watch the server ended (its timeout) resumes from the last version seen.
                if let Some(failure) = failure {
                    break failure;
                }
            };
            recording.lock().expect("history lock").broken = Some(broken);
        });
        PodWatch { history, task }
    }

    /// What was seen so far.
    ///
    /// # Panics
    ///
    /// When the watch stopped recording.
    pub fn history(&self) -> History {
        let history = self.history.lock().expect("history lock").clone();
        if let Some(broken) = &history.broken {
            panic!("{broken}: the pods' history is incomplete");
        }
        history
    }

    /// Waits until `check` holds for the history; returns that history.
    pub async fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        check: impl Fn(&History) -> Result<(), String>,
    ) -> History {
        wait_until(what, timeout, || async {
            let history = self.history();
            check(&history).map(|()| history).map_err(NotYet::because)
        })
        .await
        .unwrap_or_else(|error| panic!("{error}"))
    }
}

impl Drop for PodWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The names of `history`'s live pods that are not among `originals` (uid → name).
pub fn replacements(history: &History, originals: &BTreeMap<String, String>) -> BTreeSet<String> {
    history.live_names().into_iter().filter(|(uid, _)| !originals.contains_key(uid)).map(|(_, n)| n).collect()
}

/// The marker for `resource` a pod carries (as a pod template would).
pub fn marker_of(pod: &Pod, resource: &ResourceRef, strategy: Strategy) -> Option<String> {
    let template = PodTemplateSpec { metadata: Some(pod.metadata.clone()), spec: pod.spec.clone() };
    marker_in(&template, resource, strategy).map(|marker| marker.value)
}

/// Ready, and not on its way out.
pub fn is_available(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none() && is_ready(pod)
}

/// The Eviction API marks the pods it deletes (condition `DisruptionTarget`, reason
/// `EvictionByEvictionAPI`); no other deletion does.
fn was_evicted(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|status| status.conditions.as_ref());
    conditions.is_some_and(|conditions| {
        conditions.iter().any(|c| {
            c.type_ == "DisruptionTarget"
                && c.status == "True"
                && c.reason.as_deref() == Some("EvictionByEvictionAPI")
        })
    })
}

fn is_ready(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|status| status.conditions.as_ref());
    conditions.is_some_and(|conditions| conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn name_of(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

fn describe(pod: &Pod) -> String {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let state = match (pod.metadata.deletion_timestamp.is_some(), is_ready(pod)) {
        (true, _) => "terminating",
        (false, true) => "ready",
        (false, false) => "not ready",
    };
    format!("{} ({}…, {state})", name_of(pod), &uid[..uid.len().min(8)])
}
