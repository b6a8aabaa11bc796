//! The evictor against a scripted API: what it evicts, records and reports, step by step.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use reloader_core::annotations::AnnotationKeys;
use reloader_core::index::Index;
use reloader_core::model::{WorkloadKey, WorkloadKind};
use reloader_core::restart::{PROGRESS, Progress, ProgressState};
use serde_json::json;

use super::api::WorkloadPods;
use super::*;
use crate::notify::events::{EventReason, EventSink, WorkloadEvent};
use crate::observe::metrics::Metrics;

const MARKER: &str = "STAKATER_APP_CONFIG_CONFIGMAP";

fn template(hash: &str) -> PodTemplateSpec {
    serde_json::from_value(json!({
        "metadata": {"labels": {"app": "db"}},
        "spec": {"containers": [{"name": "app", "env": [{"name": MARKER, "value": hash}]}]},
    }))
    .unwrap()
}

fn pod(name: &str, hash: &str, ready: bool) -> Pod {
    let template = template(hash);
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "labels": {"app": "db"}},
        "spec": template.spec,
        "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
    }))
    .unwrap()
}

/// A scripted cluster: one StatefulSet and its pods; an eviction replaces the pod with one on
/// the template's markers, Ready or not as `replacements_ready` says; a PDB may refuse.
struct Scripted {
    annotations: Mutex<BTreeMap<String, String>>,
    template_hash: String,
    pods: Mutex<Vec<Pod>>,
    desired: u32,
    replacements_ready: bool,
    refuse: Mutex<u32>,
    evicted: Mutex<Vec<String>>,
}

impl Scripted {
    fn new(annotations: &[(&str, &str)], pods: Vec<Pod>) -> Arc<Self> {
        Arc::new(Scripted {
            annotations: Mutex::new(annotations.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()),
            template_hash: "new".into(),
            desired: pods.len() as u32,
            pods: Mutex::new(pods),
            replacements_ready: true,
            refuse: Mutex::new(0),
            evicted: Mutex::default(),
        })
    }

    fn progress(&self) -> Option<Progress> {
        Progress::read(Some(&self.annotations.lock().unwrap()))
    }
}

#[async_trait]
impl RestartApi for Scripted {
    async fn workload(&self, _: &WorkloadKey) -> Result<Option<WorkloadPods>, kube::Error> {
        Ok(Some(WorkloadPods {
            uid: "uid-db".into(),
            annotations: self.annotations.lock().unwrap().clone(),
            template: template(&self.template_hash),
            desired: Some(self.desired),
            pods: self.pods.lock().unwrap().clone(),
        }))
    }

    async fn labelled_pods(&self, _: &str) -> Result<Vec<Pod>, kube::Error> {
        Ok(Vec::new())
    }

    async fn evict(&self, _: &str, name: &str) -> Result<(), kube::Error> {
        let mut refuse = self.refuse.lock().unwrap();
        if *refuse > 0 {
            *refuse -= 1;
            let status = kube::core::Status::failure(
                "Cannot evict pod as it would violate the pod's disruption budget.",
                "TooManyRequests",
            )
            .with_code(429);
            return Err(kube::Error::Api(Box::new(status)));
        }
        self.evicted.lock().unwrap().push(name.to_owned());
        let mut pods = self.pods.lock().unwrap();
        pods.retain(|p| p.metadata.name.as_deref() != Some(name));
        pods.push(pod(name, &self.template_hash, self.replacements_ready));
        Ok(())
    }

    async fn record(&self, _: &WorkloadKey, progress: &Progress) -> Result<(), kube::Error> {
        self.annotations.lock().unwrap().insert(PROGRESS.into(), progress.to_annotation());
        Ok(())
    }
}

#[derive(Default)]
struct Events(Mutex<Vec<WorkloadEvent>>);

impl EventSink for Events {
    fn record(&self, event: WorkloadEvent) {
        self.0.lock().unwrap().push(event);
    }
}

fn evictor(api: Arc<dyn RestartApi>, events: Arc<Events>, metrics: &Metrics, now: fn() -> i64) -> Evictor {
    Evictor {
        restarts: Restarts::default(),
        index: Arc::new(RwLock::new(Index::default())),
        api,
        events,
        metrics: metrics.evictions(),
        keys: AnnotationKeys::default(),
        clock: now,
        failing: Mutex::default(),
        pod_owners: Mutex::default(),
    }
}

fn key() -> WorkloadKey {
    WorkloadKey::new(WorkloadKind::StatefulSet, "ns", "db")
}

const OPTED_IN: [(&str, &str); 2] =
    [("reloader.dev/restart", "evict"), ("reloader.dev/ready-timeout", "30s")];

fn reasons(events: &Events) -> Vec<EventReason> {
    events.0.lock().unwrap().iter().map(|e| e.reason).collect()
}

#[tokio::test]
async fn each_stale_pod_is_evicted_once_one_at_a_time_then_done() {
    let api = Scripted::new(
        &OPTED_IN,
        vec![pod("db-0", "old", true), pod("db-1", "new", true), pod("db-2", "old", true)],
    );
    let events = Arc::new(Events::default());
    let metrics = Metrics::new(false);
    let evictor = evictor(api.clone(), events.clone(), &metrics, || 100);
    // db-1 already runs the markers: only db-2, then db-0.
    assert!(evictor.step(&key()).await);
    assert_eq!(*api.evicted.lock().unwrap(), ["db-2"]);
    assert!(evictor.step(&key()).await);
    assert_eq!(*api.evicted.lock().unwrap(), ["db-2", "db-0"]);
    assert!(!evictor.step(&key()).await, "done");
    assert!(!evictor.step(&key()).await, "and stays done");
    assert_eq!(*api.evicted.lock().unwrap(), ["db-2", "db-0"]);
    let progress = api.progress().unwrap();
    assert_eq!((progress.evicted, progress.state), (2, ProgressState::Done));
    assert_eq!(reasons(&events), [EventReason::PodEvicted, EventReason::PodEvicted]);
    let text = metrics.encode();
    assert!(text.contains(r#"reloader_evictions_total{result="evicted"} 2"#), "{text}");
    assert!(text.contains(r#"reloader_eviction_restarts_total{outcome="done"} 1"#), "{text}");
}

#[tokio::test]
async fn a_disruption_budget_makes_it_wait_and_try_again() {
    let api = Scripted::new(&OPTED_IN, vec![pod("db-0", "old", true)]);
    *api.refuse.lock().unwrap() = 2;
    let events = Arc::new(Events::default());
    let metrics = Metrics::new(false);
    let evictor = evictor(api.clone(), events.clone(), &metrics, || 100);
    assert!(evictor.step(&key()).await);
    assert!(evictor.step(&key()).await);
    assert!(api.evicted.lock().unwrap().is_empty());
    assert_eq!(api.progress(), None, "nothing evicted, nothing recorded");
    assert!(evictor.step(&key()).await);
    assert_eq!(*api.evicted.lock().unwrap(), ["db-0"]);
    let text = metrics.encode();
    assert!(text.contains(r#"reloader_evictions_total{result="blocked"} 2"#), "{text}");
}

#[tokio::test]
async fn a_replacement_not_ready_in_time_stops_the_restart() {
    let mut api = Scripted::new(&OPTED_IN, vec![pod("db-0", "old", true), pod("db-1", "old", true)]);
    Arc::get_mut(&mut api).unwrap().replacements_ready = false;
    let events = Arc::new(Events::default());
    let metrics = Metrics::new(false);
    assert!(evictor(api.clone(), events.clone(), &metrics, || 100).step(&key()).await);
    assert_eq!(*api.evicted.lock().unwrap(), ["db-1"]);
    // Within the timeout: waiting; past it: stopped, and no more evictions, even by a new leader.
    assert!(evictor(api.clone(), events.clone(), &metrics, || 129).step(&key()).await);
    assert!(!evictor(api.clone(), events.clone(), &metrics, || 131).step(&key()).await);
    assert!(!evictor(api.clone(), events.clone(), &metrics, || 500).step(&key()).await);
    assert_eq!(*api.evicted.lock().unwrap(), ["db-1"]);
    assert_eq!(api.progress().unwrap().state, ProgressState::Stopped);
    assert_eq!(reasons(&events), [EventReason::PodEvicted, EventReason::EvictionStopped]);
    assert!(metrics.encode().contains(r#"reloader_eviction_restarts_total{outcome="stopped"} 1"#));
}

#[tokio::test]
async fn a_workload_not_opted_in_or_with_a_bad_annotation_is_left_alone() {
    for (annotations, reason) in [
        (&[][..], None),
        (&[("reloader.dev/restart", "delete")][..], Some(EventReason::InvalidAnnotation)),
        (
            &[("reloader.dev/restart", "evict"), ("reloader.dev/max-unavailable", "0")][..],
            Some(EventReason::InvalidAnnotation),
        ),
    ] {
        let api = Scripted::new(annotations, vec![pod("db-0", "old", true)]);
        let events = Arc::new(Events::default());
        let metrics = Metrics::new(false);
        assert!(!evictor(api.clone(), events.clone(), &metrics, || 100).step(&key()).await);
        assert!(api.evicted.lock().unwrap().is_empty(), "{annotations:?}");
        assert_eq!(reasons(&events), reason.into_iter().collect::<Vec<_>>(), "{annotations:?}");
    }
}

#[test]
fn a_workload_is_activated_when_its_markers_change() {
    use reloader_core::workload::Workload as _;
    let restarts = Restarts::default();
    let view = |hash: &str, opted_in: bool| {
        let mut statefulset: k8s_openapi::api::apps::v1::StatefulSet = serde_json::from_value(json!({
            "metadata": {"name": "db", "namespace": "ns"},
            "spec": {"selector": {}, "serviceName": "db", "template": template(hash)},
        }))
        .unwrap();
        if opted_in {
            statefulset.metadata.annotations =
                Some(BTreeMap::from([("reloader.dev/restart".into(), "evict".into())]));
        }
        reloader_workload_apps::AppsWorkload(&statefulset).view(&AnnotationKeys::default())
    };
    restarts.observe(&view("a", true));
    assert_eq!(restarts.snapshot(), [key()]);
    restarts.finish(&key());
    restarts.observe(&view("a", true));
    assert!(restarts.snapshot().is_empty(), "same markers: nothing to do");
    restarts.observe(&view("b", true));
    assert_eq!(restarts.snapshot(), [key()]);
    restarts.finish(&key());
    restarts.observe(&view("c", false));
    assert!(restarts.snapshot().is_empty(), "not opted in");
}

/// A reload that lands while its workload's previous step runs (that step read the workload
/// before it, and found nothing to do) keeps the workload active for the next step.
#[test]
fn an_activation_during_a_step_is_not_lost() {
    let restarts = Restarts::default();
    restarts.activate(key());
    assert_eq!(restarts.snapshot(), [key()], "a step begins");
    restarts.activate(key());
    restarts.finish(&key());
    assert_eq!(restarts.snapshot(), [key()], "still active: stepped again");
    restarts.finish(&key());
    assert!(restarts.is_idle(), "a step with no activation during it ends the restart");
}

/// A scripted namespace of labelled pods (docs/beyond-stakater.md §14): an eviction replaces the
/// pod with a new one of the same owner (a ReplicaSet's random name), Ready or not; a pod with
/// no owner is never replaced.
struct ScriptedPods {
    pods: Mutex<Vec<Pod>>,
    replacements_ready: bool,
    created: Mutex<u32>,
    evicted: Mutex<Vec<String>>,
}

fn labelled_pod(name: &str, owner: Option<&str>, ready: bool) -> Pod {
    let owners: Vec<serde_json::Value> = owner
        .map(|uid| json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": uid, "controller": true}))
        .into_iter()
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
            "labels": {"reloader.dev/reload-pod": "true"}, "ownerReferences": owners},
        "spec": {"containers": [{"name": "app"}]},
        "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
    }))
    .unwrap()
}

impl ScriptedPods {
    fn new(pods: Vec<Pod>, replacements_ready: bool) -> Arc<Self> {
        Arc::new(ScriptedPods {
            pods: Mutex::new(pods),
            replacements_ready,
            created: Mutex::new(0),
            evicted: Mutex::default(),
        })
    }

    fn names(&self) -> Vec<String> {
        self.pods.lock().unwrap().iter().filter_map(|p| p.metadata.name.clone()).collect()
    }
}

#[async_trait]
impl RestartApi for ScriptedPods {
    async fn workload(&self, _: &WorkloadKey) -> Result<Option<WorkloadPods>, kube::Error> {
        Ok(None)
    }

    async fn labelled_pods(&self, _: &str) -> Result<Vec<Pod>, kube::Error> {
        Ok(self.pods.lock().unwrap().clone())
    }

    async fn evict(&self, _: &str, name: &str) -> Result<(), kube::Error> {
        self.evicted.lock().unwrap().push(name.to_owned());
        let mut pods = self.pods.lock().unwrap();
        let gone = pods.iter().position(|p| p.metadata.name.as_deref() == Some(name)).unwrap();
        let owner =
            pods.remove(gone).metadata.owner_references.unwrap_or_default().first().map(|o| o.uid.clone());
        if let Some(owner) = owner {
            let mut created = self.created.lock().unwrap();
            *created += 1;
            pods.push(labelled_pod(&format!("new-{created}"), Some(&owner), self.replacements_ready));
        }
        Ok(())
    }

    async fn record(&self, _: &WorkloadKey, _: &Progress) -> Result<(), kube::Error> {
        unreachable!("a pod's restart is not recorded on a workload")
    }
}

fn due(evictor: &Evictor, names: &[&str]) {
    for name in names {
        let resource = reloader_core::model::ResourceKey::new(
            reloader_core::model::ResourceKind::ConfigMap,
            "ns",
            "cfg",
        );
        evictor.restarts.pod_due(WorkloadKey::new(WorkloadKind::pods(), "ns", name), resource);
    }
}

#[tokio::test]
async fn due_pods_are_evicted_one_at_a_time_per_owner_and_replacements_never() {
    let api = ScriptedPods::new(
        vec![
            labelled_pod("a-1", Some("rs-a"), true),
            labelled_pod("a-2", Some("rs-a"), true),
            labelled_pod("a-3", Some("rs-a"), true),
            labelled_pod("b-1", Some("rs-b"), true),
        ],
        true,
    );
    let events = Arc::new(Events::default());
    let metrics = Metrics::new(false);
    let evictor = evictor(api.clone(), events.clone(), &metrics, || 100);
    // a-2 is not due (another change's pod, say): never evicted.
    due(&evictor, &["a-1", "a-3", "b-1"]);
    evictor.step_pods().await;
    assert_eq!(*api.evicted.lock().unwrap(), ["a-3", "b-1"], "the last of each owner first, one per owner");
    evictor.step_pods().await;
    assert_eq!(*api.evicted.lock().unwrap(), ["a-3", "b-1", "a-1"]);
    evictor.step_pods().await;
    evictor.step_pods().await;
    assert_eq!(*api.evicted.lock().unwrap(), ["a-3", "b-1", "a-1"], "replacements are never due");
    assert_eq!(api.names(), ["a-2", "new-1", "new-2", "new-3"]);
    assert!(evictor.pod_restarts_idle() && evictor.restarts.is_idle());
    assert_eq!(reasons(&events), [EventReason::PodEvicted; 3]);
    let text = metrics.encode();
    assert!(text.contains(r#"reloader_evictions_total{result="evicted"} 3"#), "{text}");
    assert!(text.contains(r#"reloader_eviction_restarts_total{outcome="done"} 2"#), "{text}");
}

#[tokio::test]
async fn a_due_pod_without_an_owner_is_never_evicted() {
    let api = ScriptedPods::new(vec![labelled_pod("bare", None, true)], true);
    let events = Arc::new(Events::default());
    let metrics = Metrics::new(false);
    let evictor = evictor(api.clone(), events.clone(), &metrics, || 100);
    due(&evictor, &["bare"]);
    evictor.step_pods().await;
    evictor.step_pods().await;
    assert!(api.evicted.lock().unwrap().is_empty());
    assert_eq!(reasons(&events), [EventReason::PodNotEvicted], "said once per change");
    let message = &events.0.lock().unwrap()[0].message;
    assert!(message.contains("no controller owner") && message.contains("ns/cfg"), "{message}");
    assert!(evictor.restarts.is_idle(), "forgotten");
    assert!(metrics.encode().contains(r#"reloader_evictions_total{result="no_owner"} 1"#));
}

#[tokio::test]
async fn a_replacement_pod_not_ready_in_time_stops_the_owners_restart() {
    let api = ScriptedPods::new(
        vec![labelled_pod("a-1", Some("rs-a"), true), labelled_pod("a-2", Some("rs-a"), true)],
        false,
    );
    let events = Arc::new(Events::default());
    let metrics = Metrics::new(false);
    static NOW: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(100);
    let evictor =
        evictor(api.clone(), events.clone(), &metrics, || NOW.load(std::sync::atomic::Ordering::SeqCst));
    due(&evictor, &["a-1", "a-2"]);
    evictor.step_pods().await;
    assert_eq!(*api.evicted.lock().unwrap(), ["a-2"]);
    NOW.store(100 + 599, std::sync::atomic::Ordering::SeqCst);
    evictor.step_pods().await;
    assert_eq!(*api.evicted.lock().unwrap(), ["a-2"], "waiting within the default 10m");
    NOW.store(100 + 601, std::sync::atomic::Ordering::SeqCst);
    evictor.step_pods().await;
    evictor.step_pods().await;
    assert_eq!(*api.evicted.lock().unwrap(), ["a-2"], "stopped: a-1 stays");
    assert_eq!(reasons(&events), [EventReason::PodEvicted, EventReason::EvictionStopped]);
    assert!(evictor.pod_restarts_idle() && evictor.restarts.is_idle());
    assert!(metrics.encode().contains(r#"reloader_eviction_restarts_total{outcome="stopped"} 1"#));
}

/// An owner is under way only once one of its pods was evicted: one whose due pods all went
/// before that leaves nothing behind to look at.
#[tokio::test]
async fn due_pods_that_go_before_any_eviction_leave_nothing_behind() {
    let api = ScriptedPods::new(
        vec![labelled_pod("a-1", Some("rs-a"), true), labelled_pod("a-2", Some("rs-a"), false)],
        true,
    );
    let events = Arc::new(Events::default());
    let metrics = Metrics::new(false);
    let evictor = evictor(api.clone(), events.clone(), &metrics, || 100);
    due(&evictor, &["a-1"]);
    evictor.step_pods().await;
    assert!(api.evicted.lock().unwrap().is_empty(), "a-2 is not Ready: waiting");
    assert!(evictor.pod_restarts_idle(), "nothing evicted: no restart under way");
    api.pods.lock().unwrap().clear();
    evictor.step_pods().await;
    assert!(evictor.restarts.is_idle() && evictor.pod_restarts_idle());
    assert!(events.0.lock().unwrap().is_empty());
}
