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

fn evictor(api: Arc<Scripted>, events: Arc<Events>, metrics: &Metrics, now: fn() -> i64) -> Evictor {
    Evictor {
        restarts: Restarts::default(),
        index: Arc::new(RwLock::new(Index::default())),
        api,
        events,
        metrics: metrics.evictions(),
        keys: AnnotationKeys::default(),
        clock: now,
        failing: Mutex::default(),
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
