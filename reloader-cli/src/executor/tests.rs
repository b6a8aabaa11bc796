//! The executor and its writer against a scripted API (no cluster): queueing, coalescing,
//! the leader gate, retries, and what is reported. Time is paused, so waits cost nothing.

use reloader_core::timing::LoopGuard;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use kube::api::Patch;
use kube::core::Status;
use reloader_core::annotations::AnnotationKeys;
use reloader_core::markers::{MarkerAction, MarkerChange, apply_to_template};
use reloader_core::model::{
    ContentHash, ReloadStrategy, ResourceKey, ResourceKind, WorkloadKey, WorkloadKind,
};
use reloader_core::views::WorkloadView;
use reloader_workload_argo::Rollout;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::kinds::Loaded;
use crate::notify::alerts::ReloadNotice;
use crate::notify::events::{EventReason, EventSource, EventTarget, WorkloadEvent};
use crate::observe::metrics::Metrics;
use crate::views::workload_view;

const NS: &str = "team-a";

// ---- fakes ----------------------------------------------------------------------------------

#[derive(Clone)]
enum Stored {
    Deployment(Deployment),
    Job(Job),
    Rollout(Rollout),
}

#[derive(Debug, Clone, PartialEq)]
enum Call {
    Load(String),
    Patch { name: String, kind: &'static str, body: Value },
    ResourceVersion(String),
    CreateJob(String),
    DeleteJob(String),
    JobExists(String),
}

/// A scripted API server: objects to read, and the statuses the next patches fail with.
#[derive(Default)]
struct FakeApi {
    objects: Mutex<HashMap<WorkloadKey, Stored>>,
    /// Each patch takes the next entry: a status to fail with; none left means success.
    patch_failures: Mutex<VecDeque<u16>>,
    /// Answered by `resource_version` (the object's version "now").
    current_version: Mutex<Option<String>>,
    /// How many `job_exists` polls still see the deleted Job.
    job_lingers: Mutex<u32>,
    delete_status: Mutex<Option<u16>>,
    /// When set, the first patch demotes this replica (and fails with 409).
    demote_on_patch: Mutex<Option<watch::Sender<bool>>>,
    /// What the next successful patches answer; none left: the stored object (or a fixture).
    patch_answers: Mutex<VecDeque<Loaded>>,
    calls: Mutex<Vec<Call>>,
}

fn api_error(code: u16) -> kube::Error {
    kube::Error::Api(Box::new(Status::failure(&format!("scripted {code}"), "Scripted").with_code(code)))
}

impl FakeApi {
    fn put(&self, key: &WorkloadKey, object: Stored) {
        self.objects.lock().unwrap().insert(key.clone(), object);
    }

    fn fail_patches(&self, codes: &[u16]) {
        self.patch_failures.lock().unwrap().extend(codes);
    }

    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    fn patches(&self) -> Vec<(String, &'static str, Value)> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Patch { name, kind, body } => Some((name, kind, body)),
                _ => None,
            })
            .collect()
    }

    fn record(&self, call: Call) {
        self.calls.lock().unwrap().push(call);
    }
}

#[async_trait]
impl WorkloadApi for FakeApi {
    async fn load(&self, key: &WorkloadKey) -> Result<Option<Loaded>, kube::Error> {
        self.record(Call::Load(key.name.to_string()));
        Ok(self.objects.lock().unwrap().get(key).cloned().map(|stored| match stored {
            Stored::Deployment(d) => Loaded::new(d),
            Stored::Job(j) => Loaded::new(j),
            Stored::Rollout(r) => Loaded::new(r),
        }))
    }

    async fn resource_version(&self, key: &WorkloadKey) -> Result<Option<String>, kube::Error> {
        self.record(Call::ResourceVersion(key.name.to_string()));
        Ok(self.current_version.lock().unwrap().clone())
    }

    async fn patch(&self, key: &WorkloadKey, patch: &Patch<Value>) -> Result<Loaded, kube::Error> {
        let (kind, body) = match patch {
            Patch::Strategic(body) => ("strategic", body.clone()),
            Patch::Merge(body) => ("merge", body.clone()),
            Patch::Json(ops) => ("json", serde_json::to_value(ops).unwrap()),
            _ => ("other", Value::Null),
        };
        self.record(Call::Patch { name: key.name.to_string(), kind, body: body.clone() });
        if let Some(leader) = self.demote_on_patch.lock().unwrap().take() {
            leader.send_replace(false);
            return Err(api_error(409));
        }
        if let Some(code) = self.patch_failures.lock().unwrap().pop_front() {
            return Err(api_error(code));
        }
        if let Some(answer) = self.patch_answers.lock().unwrap().pop_front() {
            return Ok(answer);
        }
        // A metadata merge patch lands on the stored Deployment, as on the API server.
        if let (Patch::Merge(_), Some(Stored::Deployment(d))) =
            (patch, self.objects.lock().unwrap().get_mut(key))
        {
            let mut object = serde_json::to_value(&*d).unwrap();
            json_patch::merge(&mut object, &body);
            *d = serde_json::from_value(object).unwrap();
        }
        Ok(match self.objects.lock().unwrap().get(key).cloned() {
            Some(Stored::Deployment(d)) => Loaded::new(d),
            Some(Stored::Job(j)) => Loaded::new(j),
            Some(Stored::Rollout(r)) => Loaded::new(r),
            None if key.kind == WorkloadKind::Rollout => Loaded::new(rollout(&key.name)),
            None => Loaded::new(deployment(&key.name)),
        })
    }

    async fn create_job(&self, _namespace: &str, job: &Job) -> Result<(), kube::Error> {
        self.record(Call::CreateJob(job.metadata.name.clone().unwrap_or_default()));
        Ok(())
    }

    async fn delete_job(&self, _namespace: &str, name: &str) -> Result<(), kube::Error> {
        self.record(Call::DeleteJob(name.to_owned()));
        match *self.delete_status.lock().unwrap() {
            Some(code) => Err(api_error(code)),
            None => Ok(()),
        }
    }

    async fn job_exists(&self, _namespace: &str, name: &str) -> Result<bool, kube::Error> {
        self.record(Call::JobExists(name.to_owned()));
        let mut lingers = self.job_lingers.lock().unwrap();
        if *lingers == 0 {
            return Ok(false);
        }
        *lingers -= 1;
        Ok(true)
    }
}

/// The index's views: empty unless a test puts one (then the first attempt builds from it).
#[derive(Default)]
struct FakeViews {
    views: Mutex<HashMap<WorkloadKey, WorkloadView>>,
    /// Keep each write's answer as the view, as the index does (off: views stay as indexed).
    follow_writes: std::sync::atomic::AtomicBool,
    /// Every write's answer handed to the index, in order, with whether the executor still
    /// counted that workload's write as under way at that moment.
    written: Mutex<Vec<(WorkloadView, bool)>>,
    executor: std::sync::OnceLock<Executor>,
}

impl WorkloadViews for FakeViews {
    fn view(&self, key: &WorkloadKey) -> Option<WorkloadView> {
        self.views.lock().unwrap().get(key).cloned()
    }

    fn written(&self, view: WorkloadView) {
        let under_way = self.executor.get().expect("set by start").has_work(&view.key);
        if self.follow_writes.load(std::sync::atomic::Ordering::Relaxed) {
            self.views.lock().unwrap().insert(view.key.clone(), view.clone());
        }
        self.written.lock().unwrap().push((view, under_way));
    }
}

impl FakeViews {
    /// Indexes `object` as the watch would.
    fn index(&self, object: &Loaded) {
        let view = object.with(|w| w.view(&AnnotationKeys::default()));
        self.views.lock().unwrap().insert(view.key.clone(), view);
    }
}

#[derive(Default)]
struct FakeEvents(Mutex<Vec<WorkloadEvent>>);

impl EventSink for FakeEvents {
    fn record(&self, event: WorkloadEvent) {
        self.0.lock().unwrap().push(event);
    }
}

impl FakeEvents {
    fn recorded(&self) -> Vec<(String, EventReason, String)> {
        let events = self.0.lock().unwrap();
        events.iter().map(|e| (e.target.key.name.to_string(), e.reason, e.message.clone())).collect()
    }

    fn all(&self) -> Vec<WorkloadEvent> {
        self.0.lock().unwrap().clone()
    }
}

#[derive(Default)]
struct FakeAlerts(Mutex<Vec<ReloadNotice>>);

impl AlertQueue for FakeAlerts {
    fn send(&self, notice: ReloadNotice) {
        self.0.lock().unwrap().push(notice);
    }
}

// ---- fixtures -------------------------------------------------------------------------------

fn key(kind: WorkloadKind, name: &str) -> WorkloadKey {
    WorkloadKey::new(kind, NS, name)
}

fn deployment(name: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS, "resourceVersion": "10", "uid": format!("uid-{name}")},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "app:1"}]},
            },
        },
    }))
    .unwrap()
}

fn paused_deployment(name: &str) -> Deployment {
    let mut d = deployment(name);
    let keys = AnnotationKeys::default();
    d.metadata.annotations =
        Some([(keys.paused_at.clone(), "2026-01-01T00:00:00Z".to_owned())].into_iter().collect());
    d.spec.as_mut().unwrap().paused = Some(true);
    d
}

/// A Deployment that already carries the marker `change` would write.
fn current_deployment(name: &str, change: &MarkerChange) -> Deployment {
    let mut d = deployment(name);
    let template = &mut d.spec.as_mut().unwrap().template;
    assert!(apply_to_template(template, std::slice::from_ref(change), &AnnotationKeys::default(), 0));
    d
}

fn job(name: &str) -> Job {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS, "resourceVersion": "5", "uid": "u-1"},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "task", "image": "task:1"}]},
            },
        },
    }))
    .unwrap()
}

fn rollout(name: &str) -> Rollout {
    serde_json::from_value(json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": name, "namespace": NS, "resourceVersion": "77"},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "app:1"}]},
            },
        },
    }))
    .unwrap()
}

fn change(resource: &str, hash_byte: u8, strategy: ReloadStrategy) -> MarkerChange {
    MarkerChange {
        resource: ResourceKey::new(ResourceKind::ConfigMap, NS, resource),
        action: MarkerAction::Set(ContentHash([hash_byte; 20])),
        strategy,
        container: 0,
    }
}

fn env_change(resource: &str, hash_byte: u8) -> MarkerChange {
    change(resource, hash_byte, ReloadStrategy::EnvVars)
}

struct Harness {
    executor: Executor,
    api: Arc<FakeApi>,
    views: Arc<FakeViews>,
    events: Arc<FakeEvents>,
    alerts: Arc<FakeAlerts>,
    metrics: Arc<Metrics>,
    leader: watch::Sender<bool>,
    shutdown: CancellationToken,
    task: JoinHandle<anyhow::Result<()>>,
}

#[derive(Clone, Copy)]
struct Setup {
    coalesce_period: Duration,
    max_writes_per_second: f64,
    dry_run: bool,
    leading: bool,
    loop_guard: Option<LoopGuard>,
}

/// Leading, no window, no rate limit, no loop guard, writing for real.
const PLAIN: Setup = Setup {
    coalesce_period: Duration::ZERO,
    max_writes_per_second: 0.0,
    dry_run: false,
    leading: true,
    loop_guard: None,
};

impl Default for Setup {
    fn default() -> Self {
        PLAIN
    }
}

/// A wall clock that moves with tokio's (paused) time, from 2026-12-01T10:00:00Z.
fn paused_clock() -> WallClock {
    let start = tokio::time::Instant::now();
    let epoch: Timestamp = "2026-12-01T10:00:00Z".parse().unwrap();
    Arc::new(move || epoch + jiff::SignedDuration::try_from(start.elapsed()).unwrap())
}

fn start(setup: Setup) -> Harness {
    let api = Arc::new(FakeApi::default());
    let views = Arc::new(FakeViews::default());
    let events = Arc::new(FakeEvents::default());
    let alerts = Arc::new(FakeAlerts::default());
    let metrics = Metrics::new(false);
    let (leader, leader_rx) = watch::channel(setup.leading);
    let shutdown = CancellationToken::new();
    let (executor, dispatch) = Executor::new(
        ExecutorConfig {
            coalesce_period: setup.coalesce_period,
            max_writes_per_second: setup.max_writes_per_second,
            dry_run: setup.dry_run,
            keys: AnnotationKeys::default(),
            default_windows: None,
            loop_guard: setup.loop_guard,
        },
        ExecutorIo {
            api: api.clone(),
            views: views.clone(),
            events: events.clone(),
            alerts: Some(alerts.clone()),
            leader: leader_rx,
            metrics: metrics.writes(),
            clock: paused_clock(),
        },
        shutdown.clone(),
    );
    let task = tokio::spawn(dispatch);
    assert!(views.executor.set(executor.clone()).is_ok());
    Harness { executor, api, views, events, alerts, metrics, leader, shutdown, task }
}

impl Harness {
    fn reload(&self, key: &WorkloadKey, changes: Vec<MarkerChange>) {
        self.executor.enqueue(key.clone(), Work::Reload(changes), std::time::Instant::now());
    }

    /// Lets every timer that is due within `for_` fire, and the writes run.
    async fn settle(&self, for_: Duration) {
        tokio::time::sleep(for_).await;
    }

    async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.expect("the dispatch loop does not panic").expect("the dispatch loop ends cleanly");
    }

    /// The value of one sample line, e.g. `reloader_retries_total`; 0 when absent.
    /// The value of `series` (name and labels as exposed); `None`, never zero, when it is not
    /// exposed, so a renamed series or label fails every row that expects a value.
    fn sample(&self, series: &str) -> Option<f64> {
        let text = self.metrics.encode();
        let value = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .find_map(|l| l.strip_prefix(series).and_then(|rest| rest.strip_prefix(' ')));
        value.map(|v| v.parse().unwrap())
    }

    fn reasons(&self) -> Vec<EventReason> {
        self.events.recorded().into_iter().map(|(_, reason, _)| reason).collect()
    }
}

/// A harness whose API holds the Deployment `web`.
fn start_with_web(setup: Setup) -> (Harness, WorkloadKey) {
    let h = start(setup);
    let workload = key(WorkloadKind::Deployment, "web");
    deployment_exists(&h.api, &workload);
    (h, workload)
}

const SETTLE: Duration = Duration::from_secs(120);

// ---- the writer: outcomes of one write --------------------------------------------------------

/// One reload of a Deployment, against a scripted API; what came of it.
struct WriteCase {
    name: &'static str,
    setup: Setup,
    object: Object,
    /// The statuses the first patches fail with.
    fail_with: &'static [u16],
    patches: usize,
    events: &'static [EventReason],
    alerts: usize,
    /// Sample lines expected with their values; `None`: not exposed.
    samples: &'static [(&'static str, Option<f64>)],
}

/// The Deployment the API holds when the write starts.
enum Object {
    Plain,
    /// Already carrying the marker the write would add.
    Current,
    /// Deleted.
    Gone,
}

fn deployment_exists(api: &FakeApi, key: &WorkloadKey) {
    api.put(key, Stored::Deployment(deployment(&key.name)));
}

const WRITE_CASES: &[WriteCase] = &[
    WriteCase {
        name: "a plain write succeeds at once",
        setup: PLAIN,
        object: Object::Plain,
        fail_with: &[],
        patches: 1,
        events: &[EventReason::Reloaded],
        alerts: 1,
        samples: &[
            ("reloader_reload_executed_total{success=\"true\"}", Some(1.0)),
            ("reloader_action_total{workload_kind=\"Deployment\",result=\"success\"}", Some(1.0)),
            ("reloader_action_latency_seconds_count{workload_kind=\"Deployment\"}", Some(1.0)),
            ("reloader_reload_latency_seconds_count", Some(1.0)),
            ("reloader_retries_total", Some(0.0)),
            ("reloader_workqueue_adds_total", Some(1.0)),
            ("reloader_workqueue_latency_seconds_count", Some(1.0)),
        ],
    },
    WriteCase {
        name: "a conflict is re-read and retried, then succeeds",
        setup: PLAIN,
        object: Object::Plain,
        fail_with: &[409, 409],
        patches: 3,
        events: &[EventReason::Reloaded],
        alerts: 1,
        samples: &[
            ("reloader_retries_total", Some(2.0)),
            ("reloader_reload_executed_total{success=\"true\"}", Some(1.0)),
            ("reloader_error_types_total{type=\"conflict\"}", None),
        ],
    },
    WriteCase {
        name: "conflicts without end give up after 20 retries",
        setup: PLAIN,
        object: Object::Plain,
        fail_with: &[409; 30],
        patches: 21,
        events: &[EventReason::ReloadFail],
        alerts: 0,
        samples: &[
            ("reloader_retries_total", Some(20.0)),
            ("reloader_error_types_total{type=\"conflict\"}", Some(1.0)),
            ("reloader_errors_total{type=\"handler_error\"}", Some(1.0)),
            ("reloader_reload_executed_total{success=\"false\"}", Some(1.0)),
            ("reloader_action_total{workload_kind=\"Deployment\",result=\"error\"}", Some(1.0)),
        ],
    },
    WriteCase {
        name: "a 503 is retried with backoff, then succeeds",
        setup: PLAIN,
        object: Object::Plain,
        fail_with: &[503, 500],
        patches: 3,
        events: &[EventReason::Reloaded],
        alerts: 1,
        samples: &[
            ("reloader_retries_total", Some(2.0)),
            ("reloader_reload_executed_total{success=\"true\"}", Some(1.0)),
        ],
    },
    WriteCase {
        name: "a 429 is transient too",
        setup: PLAIN,
        object: Object::Plain,
        fail_with: &[429],
        patches: 2,
        events: &[EventReason::Reloaded],
        alerts: 1,
        samples: &[("reloader_retries_total", Some(1.0))],
    },
    WriteCase {
        name: "transient errors give up after 5 retries",
        setup: PLAIN,
        object: Object::Plain,
        fail_with: &[500; 10],
        patches: 6,
        events: &[EventReason::ReloadFail],
        alerts: 0,
        samples: &[
            ("reloader_retries_total", Some(5.0)),
            ("reloader_error_types_total{type=\"api\"}", Some(1.0)),
        ],
    },
    WriteCase {
        name: "forbidden is not retried",
        setup: PLAIN,
        object: Object::Plain,
        fail_with: &[403],
        patches: 1,
        events: &[EventReason::ReloadFail],
        alerts: 0,
        samples: &[
            ("reloader_retries_total", Some(0.0)),
            ("reloader_error_types_total{type=\"forbidden\"}", Some(1.0)),
        ],
    },
    WriteCase {
        name: "an invalid patch (422) is an API error, not retried",
        setup: PLAIN,
        object: Object::Plain,
        fail_with: &[422],
        patches: 1,
        events: &[EventReason::ReloadFail],
        alerts: 0,
        samples: &[("reloader_error_types_total{type=\"api\"}", Some(1.0))],
    },
    WriteCase {
        name: "a workload deleted before its write is skipped",
        setup: PLAIN,
        object: Object::Gone,
        fail_with: &[],
        patches: 0,
        events: &[],
        alerts: 0,
        samples: &[
            ("reloader_skip_reasons_total{reason=\"workload_gone\"}", Some(1.0)),
            ("reloader_reload_executed_total{success=\"true\"}", Some(0.0)),
            ("reloader_reload_executed_total{success=\"false\"}", Some(0.0)),
        ],
    },
    WriteCase {
        name: "a workload that already carries the marker is not written",
        setup: PLAIN,
        object: Object::Current,
        fail_with: &[],
        patches: 0,
        events: &[],
        alerts: 0,
        samples: &[
            ("reloader_skip_reasons_total{reason=\"already_current\"}", Some(1.0)),
            ("reloader_skipped_total{reason=\"strategy_not_updated\"}", Some(1.0)),
        ],
    },
    WriteCase {
        name: "dry run writes nothing and says so",
        setup: Setup { dry_run: true, ..PLAIN },
        object: Object::Plain,
        fail_with: &[],
        patches: 0,
        events: &[],
        alerts: 0,
        samples: &[
            ("reloader_dry_run_writes_total{workload_kind=\"Deployment\"}", Some(1.0)),
            ("reloader_action_total{workload_kind=\"Deployment\",result=\"success\"}", None),
            ("reloader_reload_executed_total{success=\"true\"}", Some(0.0)),
        ],
    },
    WriteCase {
        name: "a standby writes nothing",
        setup: Setup { leading: false, ..PLAIN },
        object: Object::Plain,
        fail_with: &[],
        patches: 0,
        events: &[],
        alerts: 0,
        samples: &[
            ("reloader_skip_reasons_total{reason=\"not_leader\"}", Some(1.0)),
            ("reloader_workqueue_adds_total", Some(0.0)),
        ],
    },
];

#[tokio::test(start_paused = true)]
async fn write_outcomes() {
    for case in WRITE_CASES {
        let h = start(case.setup);
        let workload = key(WorkloadKind::Deployment, "web");
        match case.object {
            Object::Plain => deployment_exists(&h.api, &workload),
            Object::Current => {
                h.api.put(&workload, Stored::Deployment(current_deployment("web", &env_change("cfg", 1))))
            }
            Object::Gone => {}
        }
        h.api.fail_patches(case.fail_with);
        h.reload(&workload, vec![env_change("cfg", 1)]);
        h.settle(SETTLE).await;
        assert_eq!(h.api.patches().len(), case.patches, "{}: patches {:?}", case.name, h.api.patches());
        assert_eq!(h.reasons(), case.events, "{}", case.name);
        assert_eq!(h.alerts.0.lock().unwrap().len(), case.alerts, "{}", case.name);
        for (series, value) in case.samples {
            assert_eq!(h.sample(series), *value, "{}: {series}\n{}", case.name, h.metrics.encode());
        }
        h.stop().await;
    }
    // A series a row expects not exposed is one another row sees with a value: its name and
    // labels are the ones the code exposes.
    let exposed: Vec<&str> =
        WRITE_CASES.iter().flat_map(|c| c.samples).filter(|(_, v)| v.is_some()).map(|(s, _)| *s).collect();
    for case in WRITE_CASES {
        for (series, _) in case.samples.iter().filter(|(_, v)| v.is_none()) {
            assert!(exposed.contains(series), "{}: no row sees {series} exposed", case.name);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn events_and_alerts_name_the_resource_and_the_workload() {
    let (h, workload) = start_with_web(Setup::default());
    h.reload(&workload, vec![env_change("cfg", 0xab)]);
    h.settle(SETTLE).await;
    // The Event references the Deployment as read before the write (its uid and version).
    let read = EventTarget {
        key: workload.clone(),
        uid: Some("uid-web".into()),
        resource_version: Some("10".into()),
    };
    assert_eq!(h.events.all(), vec![WorkloadEvent::reloaded(read, &env_change("cfg", 0xab).resource)]);
    let events = h.events.recorded();
    assert_eq!(
        events,
        vec![(
            "web".to_owned(),
            EventReason::Reloaded,
            "Changes detected in 'cfg' of type 'CONFIGMAP' in namespace 'team-a', Updated 'web' of type 'Deployment' in namespace 'team-a'".to_owned()
        )]
    );
    let alerts = h.alerts.0.lock().unwrap().clone();
    assert_eq!(
        alerts,
        vec![ReloadNotice { workload: workload.clone(), resource: env_change("cfg", 0xab).resource }]
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_failure_event_per_resource_carries_the_api_servers_message() {
    let (h, workload) = start_with_web(Setup::default());
    h.api.fail_patches(&[403]);
    h.reload(&workload, vec![env_change("a", 1), env_change("b", 2)]);
    h.settle(SETTLE).await;
    let events = h.events.all();
    assert_eq!(events.len(), 2, "one per resource, as Stakater handles each change on its own");
    for event in &events {
        assert_eq!(event.reason, EventReason::ReloadFail);
        assert_eq!(event.source, EventSource::Resource(ResourceKind::ConfigMap));
        assert_eq!(event.target.uid.as_deref(), Some("uid-web"));
        assert!(
            event.message.starts_with(
                "Update for 'web' of type 'Deployment' in namespace 'team-a' failed with error "
            ),
            "{}",
            event.message
        );
        assert!(event.message.ends_with("scripted 403"), "the Status message alone: {}", event.message);
    }
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_deployment_patch_is_strategic_and_carries_the_marker() {
    let (h, workload) = start_with_web(Setup::default());
    h.reload(&workload, vec![env_change("cfg", 0x11)]);
    h.settle(SETTLE).await;
    let patches = h.api.patches();
    assert_eq!(patches.len(), 1);
    let (name, kind, body) = &patches[0];
    assert_eq!((name.as_str(), *kind), ("web", "strategic"));
    assert!(body.to_string().contains(&"11".repeat(20)), "{body}");
    h.stop().await;
}

// ---- the leader gate ----------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn demotion_during_retries_stops_the_write() {
    let (h, workload) = start_with_web(Setup::default());
    *h.api.demote_on_patch.lock().unwrap() = Some(h.leader.clone());
    h.reload(&workload, vec![env_change("cfg", 1)]);
    h.settle(SETTLE).await;
    assert_eq!(h.api.patches().len(), 1, "no retry after losing the lease");
    assert_eq!(h.sample("reloader_skip_reasons_total{reason=\"not_leader\"}"), Some(1.0));
    assert!(h.events.recorded().is_empty());
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn demotion_before_the_window_ends_drops_the_queue() {
    let (h, workload) = start_with_web(Setup { coalesce_period: Duration::from_secs(5), ..Setup::default() });
    h.reload(&workload, vec![env_change("cfg", 1)]);
    h.settle(Duration::from_secs(1)).await;
    h.leader.send_replace(false);
    h.settle(SETTLE).await;
    assert!(h.api.patches().is_empty());
    assert_eq!(h.sample("reloader_skip_reasons_total{reason=\"not_leader\"}"), Some(1.0));
    assert_eq!(h.sample("reloader_workqueue_depth"), Some(0.0));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_promoted_replica_writes_what_is_queued_after_promotion() {
    let (h, workload) = start_with_web(Setup { leading: false, ..Setup::default() });
    h.reload(&workload, vec![env_change("cfg", 1)]);
    h.leader.send_replace(true);
    h.reload(&workload, vec![env_change("cfg", 2)]);
    h.settle(SETTLE).await;
    assert_eq!(h.api.patches().len(), 1);
    assert!(h.api.patches()[0].2.to_string().contains(&"02".repeat(20)));
    h.stop().await;
}

// ---- the queue: coalescing, newest wins, per-workload order ----------------------------------

struct CoalesceCase {
    name: &'static str,
    window: Duration,
    /// (seconds after start, resource, hash byte)
    enqueues: &'static [(u64, &'static str, u8)],
    /// The hash bytes the writes carry, write by write.
    writes: &'static [&'static [u8]],
    coalesced: f64,
}

const COALESCE_CASES: &[CoalesceCase] = &[
    CoalesceCase {
        name: "without a window, separate events make separate writes",
        window: Duration::ZERO,
        enqueues: &[(0, "a", 1), (10, "a", 2)],
        writes: &[&[1], &[2]],
        coalesced: 0.0,
    },
    CoalesceCase {
        name: "within the window, two resources make one write",
        window: Duration::from_secs(5),
        enqueues: &[(0, "a", 1), (2, "b", 2)],
        writes: &[&[1, 2]],
        coalesced: 1.0,
    },
    CoalesceCase {
        name: "within the window, the newest change of a resource wins",
        window: Duration::from_secs(5),
        enqueues: &[(0, "a", 1), (1, "a", 2), (2, "a", 3)],
        writes: &[&[3]],
        coalesced: 2.0,
    },
    CoalesceCase {
        name: "newest wins per resource, other resources stay",
        window: Duration::from_secs(5),
        enqueues: &[(0, "a", 1), (1, "b", 7), (2, "a", 3)],
        writes: &[&[7, 3]],
        coalesced: 2.0,
    },
    CoalesceCase {
        name: "after the window a new change makes a new write",
        window: Duration::from_secs(5),
        enqueues: &[(0, "a", 1), (30, "a", 2)],
        writes: &[&[1], &[2]],
        coalesced: 0.0,
    },
    CoalesceCase {
        name: "the window starts at the first change, not the last",
        window: Duration::from_secs(5),
        enqueues: &[(0, "a", 1), (4, "b", 2), (6, "c", 3)],
        writes: &[&[1, 2], &[3]],
        coalesced: 1.0,
    },
];

#[tokio::test(start_paused = true)]
async fn coalescing() {
    for case in COALESCE_CASES {
        let h = start(Setup { coalesce_period: case.window, ..Setup::default() });
        let workload = key(WorkloadKind::Deployment, "web");
        deployment_exists(&h.api, &workload);
        let started = tokio::time::Instant::now();
        for (at, resource, byte) in case.enqueues {
            tokio::time::sleep_until(started + Duration::from_secs(*at)).await;
            h.reload(&workload, vec![env_change(resource, *byte)]);
        }
        h.settle(SETTLE).await;
        let patches = h.api.patches();
        assert_eq!(patches.len(), case.writes.len(), "{}: {patches:?}", case.name);
        for ((_, _, body), bytes) in patches.iter().zip(case.writes) {
            let body = body.to_string();
            for (_, _, byte) in case.enqueues {
                let hex = format!("{byte:02x}").repeat(20);
                let expected = bytes.contains(byte);
                assert_eq!(
                    body.contains(&hex),
                    expected,
                    "{}: {hex} expected {expected} in {body}",
                    case.name
                );
            }
        }
        assert_eq!(h.sample("reloader_coalesced_reloads_total"), Some(case.coalesced), "{}", case.name);
        h.stop().await;
    }
}

#[tokio::test(start_paused = true)]
async fn one_failing_workload_does_not_delay_another() {
    let h = start(Setup::default());
    let slow = key(WorkloadKind::Deployment, "slow");
    let fast = key(WorkloadKind::Deployment, "fast");
    deployment_exists(&h.api, &slow);
    deployment_exists(&h.api, &fast);
    // The first patch (slow) fails transiently and backs off; fast goes meanwhile.
    h.api.fail_patches(&[503]);
    h.reload(&slow, vec![env_change("cfg", 1)]);
    h.settle(Duration::from_millis(10)).await;
    h.reload(&fast, vec![env_change("cfg", 1)]);
    h.settle(Duration::from_millis(50)).await;
    let names: Vec<String> = h.api.patches().into_iter().map(|(n, _, _)| n).collect();
    assert_eq!(names, ["slow", "fast"], "fast was written during slow's backoff");
    h.settle(SETTLE).await;
    assert_eq!(h.api.patches().len(), 3);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn changes_queued_during_a_write_wait_for_it_and_follow() {
    let (h, workload) = start_with_web(Setup::default());
    h.api.fail_patches(&[503]);
    h.reload(&workload, vec![env_change("cfg", 1)]);
    h.settle(Duration::from_millis(10)).await;
    h.reload(&workload, vec![env_change("cfg", 2)]);
    h.settle(SETTLE).await;
    let bodies: Vec<String> = h.api.patches().into_iter().map(|(_, _, b)| b.to_string()).collect();
    assert_eq!(bodies.len(), 3, "{bodies:?}");
    assert!(bodies[1].contains(&"01".repeat(20)) && bodies[2].contains(&"02".repeat(20)), "{bodies:?}");
    h.stop().await;
}

// ---- rate limit -----------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn the_rate_limit_spaces_writes() {
    let h = start(Setup { max_writes_per_second: 2.0, ..Setup::default() });
    for i in 0..6 {
        let workload = key(WorkloadKind::Deployment, &format!("w{i}"));
        deployment_exists(&h.api, &workload);
        h.reload(&workload, vec![env_change("cfg", 1)]);
    }
    // A burst of two at once, then one every half second.
    h.settle(Duration::from_millis(10)).await;
    assert_eq!(h.api.patches().len(), 2);
    h.settle(Duration::from_millis(1000)).await;
    assert_eq!(h.api.patches().len(), 4);
    h.settle(SETTLE).await;
    assert_eq!(h.api.patches().len(), 6);
    assert_eq!(h.sample("reloader_write_rate_limit_wait_seconds_count"), Some(6.0));
    assert!(h.sample("reloader_write_rate_limit_wait_seconds_sum").is_some_and(|sum| sum >= 1.5));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn without_a_rate_limit_nothing_waits() {
    let h = start(Setup::default());
    for i in 0..20 {
        let workload = key(WorkloadKind::Deployment, &format!("w{i}"));
        deployment_exists(&h.api, &workload);
        h.reload(&workload, vec![env_change("cfg", 1)]);
    }
    h.settle(Duration::from_millis(10)).await;
    assert_eq!(h.api.patches().len(), 20);
    assert_eq!(h.sample("reloader_write_rate_limit_wait_seconds_sum"), Some(0.0));
    h.stop().await;
}

// ---- CRDs: JSON patches and their 422 --------------------------------------------------------

struct RolloutCase {
    name: &'static str,
    /// What the first patch answers.
    first: u16,
    /// The version the server reports afterwards.
    now: Option<&'static str>,
    patches: usize,
    succeeded: bool,
}

const ROLLOUT_CASES: &[RolloutCase] = &[
    RolloutCase { name: "accepted", first: 0, now: None, patches: 1, succeeded: true },
    RolloutCase {
        name: "a bare 422 after the object moved is a conflict: re-read and retry",
        first: 422,
        now: Some("78"),
        patches: 2,
        succeeded: true,
    },
    RolloutCase {
        name: "a 422 with the version unchanged is a real rejection",
        first: 422,
        now: Some("77"),
        patches: 1,
        succeeded: false,
    },
    RolloutCase {
        name: "a 422 for an object that vanished is a real rejection",
        first: 422,
        now: None,
        patches: 1,
        succeeded: false,
    },
];

#[tokio::test(start_paused = true)]
async fn rollout_json_patches() {
    for case in ROLLOUT_CASES {
        let h = start(Setup::default());
        let workload = key(WorkloadKind::Rollout, "canary");
        h.api.put(&workload, Stored::Rollout(rollout("canary")));
        if case.first != 0 {
            h.api.fail_patches(&[case.first]);
        }
        *h.api.current_version.lock().unwrap() = case.now.map(str::to_owned);
        h.reload(&workload, vec![env_change("cfg", 1)]);
        h.settle(SETTLE).await;
        let patches = h.api.patches();
        assert_eq!(patches.len(), case.patches, "{}: {patches:?}", case.name);
        assert!(patches.iter().all(|(_, kind, _)| *kind == "json"), "{}", case.name);
        let ops = patches[0].2.to_string();
        assert!(ops.contains("\"test\"") && ops.contains("\"77\""), "{}: {ops}", case.name);
        let expected = if case.succeeded { EventReason::Reloaded } else { EventReason::ReloadFail };
        assert_eq!(h.reasons(), [expected], "{}", case.name);
        h.stop().await;
    }
}

// ---- Jobs: delete and recreate --------------------------------------------------------------

struct JobCase {
    name: &'static str,
    /// How many polls still see the Job after its deletion.
    lingers: u32,
    /// What the deletion answers (`None`: accepted).
    delete_status: Option<u16>,
    recreated: bool,
    event: EventReason,
    error_sample: Option<&'static str>,
}

const JOB_CASES: &[JobCase] = &[
    JobCase {
        name: "deleted, then recreated once gone",
        lingers: 3,
        delete_status: None,
        recreated: true,
        event: EventReason::Reloaded,
        error_sample: None,
    },
    JobCase {
        name: "already deleted (404): recreated",
        lingers: 0,
        delete_status: Some(404),
        recreated: true,
        event: EventReason::Reloaded,
        error_sample: None,
    },
    JobCase {
        name: "never goes away: not recreated",
        lingers: u32::MAX,
        delete_status: None,
        recreated: false,
        event: EventReason::ReloadFail,
        error_sample: Some("reloader_error_types_total{type=\"job_recreate\"}"),
    },
    JobCase {
        name: "deletion refused: not recreated",
        lingers: 0,
        delete_status: Some(403),
        recreated: false,
        event: EventReason::ReloadFail,
        error_sample: Some("reloader_error_types_total{type=\"forbidden\"}"),
    },
];

#[tokio::test(start_paused = true)]
async fn jobs_are_deleted_and_recreated() {
    for case in JOB_CASES {
        let h = start(Setup::default());
        let workload = key(WorkloadKind::Job, "batch");
        h.api.put(&workload, Stored::Job(job("batch")));
        *h.api.job_lingers.lock().unwrap() = case.lingers;
        *h.api.delete_status.lock().unwrap() = case.delete_status;
        h.reload(&workload, vec![env_change("cfg", 1)]);
        h.settle(SETTLE).await;
        let calls = h.api.calls();
        assert_eq!(calls.iter().filter(|c| matches!(c, Call::DeleteJob(_))).count(), 1, "{}", case.name);
        let created = calls.iter().any(|c| *c == Call::CreateJob("batch".into()));
        assert_eq!(created, case.recreated, "{}: {calls:?}", case.name);
        assert_eq!(h.reasons(), [case.event], "{}", case.name);
        if let Some(series) = case.error_sample {
            assert_eq!(h.sample(series), Some(1.0), "{}", case.name);
        }
        h.stop().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_job_is_created_only_after_its_deletion_is_seen() {
    let h = start(Setup::default());
    let workload = key(WorkloadKind::Job, "batch");
    h.api.put(&workload, Stored::Job(job("batch")));
    *h.api.job_lingers.lock().unwrap() = 2;
    h.reload(&workload, vec![env_change("cfg", 1)]);
    h.settle(SETTLE).await;
    let calls: Vec<Call> = h.api.calls().into_iter().filter(|c| !matches!(c, Call::Load(_))).collect();
    let expected = [
        Call::DeleteJob("batch".into()),
        Call::JobExists("batch".into()),
        Call::JobExists("batch".into()),
        Call::JobExists("batch".into()),
        Call::CreateJob("batch".into()),
    ];
    assert_eq!(calls, expected);
    h.stop().await;
}

// ---- resume after a pause period ------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn resume_unpauses_a_paused_deployment() {
    let h = start(Setup::default());
    let workload = key(WorkloadKind::Deployment, "web");
    h.api.put(&workload, Stored::Deployment(paused_deployment("web")));
    h.executor.enqueue(workload.clone(), Work::Resume, std::time::Instant::now());
    h.settle(SETTLE).await;
    let patches = h.api.patches();
    assert_eq!(patches.len(), 1);
    assert_eq!(patches[0].1, "merge");
    assert_eq!(patches[0].2["spec"]["paused"], json!(false));
    assert!(h.events.recorded().is_empty(), "a resume records no Event when it works");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn resume_of_a_running_deployment_writes_nothing() {
    let (h, workload) = start_with_web(Setup::default());
    h.executor.enqueue(workload.clone(), Work::Resume, std::time::Instant::now());
    h.settle(SETTLE).await;
    assert!(h.api.patches().is_empty());
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_resume_records_a_warning() {
    let h = start(Setup::default());
    let workload = key(WorkloadKind::Deployment, "web");
    h.api.put(&workload, Stored::Deployment(paused_deployment("web")));
    h.api.fail_patches(&[403]);
    h.executor.enqueue(workload.clone(), Work::Resume, std::time::Instant::now());
    h.settle(SETTLE).await;
    let events = h.events.recorded();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].1, EventReason::ReloadFail);
    assert!(events[0].2.starts_with("Resume after pause period failed: "), "{}", events[0].2);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_reload_and_a_resume_for_one_workload_share_one_turn() {
    let h = start(Setup { coalesce_period: Duration::from_secs(1), ..Setup::default() });
    let workload = key(WorkloadKind::Deployment, "web");
    h.api.put(&workload, Stored::Deployment(paused_deployment("web")));
    h.reload(&workload, vec![env_change("cfg", 1)]);
    h.executor.enqueue(workload.clone(), Work::Resume, std::time::Instant::now());
    h.settle(SETTLE).await;
    let kinds: Vec<&str> = h.api.patches().into_iter().map(|(_, k, _)| k).collect();
    assert_eq!(kinds, ["strategic", "merge"], "the reload first, then the resume");
    assert_eq!(h.sample("reloader_workqueue_latency_seconds_count"), Some(1.0));
    h.stop().await;
}

// ---- shutdown -------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn shutdown_finishes_the_write_in_flight_and_ends_the_loop() {
    let (h, workload) = start_with_web(Setup::default());
    h.api.fail_patches(&[503]);
    h.reload(&workload, vec![env_change("cfg", 1)]);
    h.settle(Duration::from_millis(10)).await;
    h.shutdown.cancel();
    let result = tokio::time::timeout(Duration::from_secs(60), h.task).await;
    assert!(matches!(result, Ok(Ok(Ok(())))), "the dispatch loop ends after shutdown");
    assert_eq!(h.api.patches().len(), 2, "the retry of the write in flight still happened");
}

#[tokio::test(start_paused = true)]
async fn shutdown_leaves_queued_work_to_the_next_leader() {
    let (h, workload) =
        start_with_web(Setup { coalesce_period: Duration::from_secs(30), ..Setup::default() });
    h.reload(&workload, vec![env_change("cfg", 1)]);
    h.shutdown.cancel();
    let _ = h.task.await;
    tokio::time::sleep(SETTLE).await;
    assert!(h.api.patches().is_empty());
}

// ---- small pieces ---------------------------------------------------------------------------

#[test]
fn write_failures_map_to_their_error_type() {
    use writer::WriteFailure;
    let cases: Vec<(WriteFailure, &str)> = vec![
        (WriteFailure::Api(api_error(403)), "forbidden"),
        (WriteFailure::Api(api_error(409)), "conflict"),
        (WriteFailure::Api(api_error(500)), "api"),
        (WriteFailure::Api(api_error(422)), "api"),
        (WriteFailure::JobStillPresent("x".into()), "job_recreate"),
    ];
    for (failure, label) in cases {
        assert_eq!(failure.error_type().as_label(), label, "{failure}");
    }
}

// ---- writes built from the index's view (no read) -------------------------------------------

const UID: &str = "3f2504e0-4f89-41d3-9a0c-0305e82c3301";

/// `object` with a canonical uid (what an API server gives), as the API and the index hold it.
fn indexed(h: &Harness, key: &WorkloadKey, object: Stored) {
    let object = match object {
        Stored::Deployment(mut d) => {
            d.metadata.uid = Some(UID.into());
            Stored::Deployment(d)
        }
        Stored::Rollout(mut r) => {
            r.metadata.uid = Some(UID.into());
            Stored::Rollout(r)
        }
        Stored::Job(mut j) => {
            j.metadata.uid = Some(UID.into());
            Stored::Job(j)
        }
    };
    h.api.put(key, object.clone());
    h.views.index(&match object {
        Stored::Deployment(d) => Loaded::new(d),
        Stored::Job(j) => Loaded::new(j),
        Stored::Rollout(r) => Loaded::new(r),
    });
}

fn annotation_change(resource: &str, hash_byte: u8) -> MarkerChange {
    change(resource, hash_byte, ReloadStrategy::Annotations)
}

struct ViewCase {
    name: &'static str,
    kind: WorkloadKind,
    changes: fn() -> Vec<MarkerChange>,
    /// The statuses the first patches fail with.
    fail_with: &'static [u16],
    /// Every call the API sees, as (verb, guarded by the view's resourceVersion).
    calls: &'static [(&'static str, bool)],
    events: &'static [EventReason],
}

const VIEW_CASES: &[ViewCase] = &[
    ViewCase {
        name: "env vars: one unguarded strategic patch, no read",
        kind: WorkloadKind::Deployment,
        changes: || vec![env_change("cfg", 1)],
        fail_with: &[],
        calls: &[("strategic", false)],
        events: &[EventReason::Reloaded],
    },
    ViewCase {
        name: "annotations carry the time: the patch is guarded",
        kind: WorkloadKind::Deployment,
        changes: || vec![annotation_change("cfg", 1)],
        fail_with: &[],
        calls: &[("strategic", true)],
        events: &[EventReason::Reloaded],
    },
    ViewCase {
        name: "a view behind the object: 409, then a read and the write from it",
        kind: WorkloadKind::Deployment,
        changes: || vec![annotation_change("cfg", 1)],
        fail_with: &[409],
        calls: &[("strategic", true), ("load", false), ("strategic", true)],
        events: &[EventReason::Reloaded],
    },
    ViewCase {
        name: "a write the object refuses (422): read, and built again from it",
        kind: WorkloadKind::Deployment,
        changes: || vec![env_change("cfg", 1)],
        fail_with: &[422],
        calls: &[("strategic", false), ("load", false), ("strategic", false)],
        events: &[EventReason::Reloaded],
    },
    ViewCase {
        name: "deleted behind the view: gone, not an error",
        kind: WorkloadKind::Deployment,
        changes: || vec![env_change("cfg", 1)],
        fail_with: &[404],
        calls: &[("strategic", false)],
        events: &[],
    },
    ViewCase {
        name: "a transient error: the retry reads",
        kind: WorkloadKind::Deployment,
        changes: || vec![env_change("cfg", 1)],
        fail_with: &[503],
        calls: &[("strategic", false), ("load", false), ("strategic", false)],
        events: &[EventReason::Reloaded],
    },
    ViewCase {
        name: "Rollout: one guarded JSON patch, no read",
        kind: WorkloadKind::Rollout,
        changes: || vec![env_change("cfg", 1)],
        fail_with: &[],
        calls: &[("json", true)],
        events: &[EventReason::Reloaded],
    },
    ViewCase {
        name: "Rollout, its test failed (422): a read, not a version check, then the write",
        kind: WorkloadKind::Rollout,
        changes: || vec![env_change("cfg", 1)],
        fail_with: &[422],
        calls: &[("json", true), ("load", false), ("json", true)],
        events: &[EventReason::Reloaded],
    },
];

/// What the API saw, as (verb, guarded by resourceVersion).
fn verbs(calls: &[Call]) -> Vec<(&'static str, bool)> {
    calls
        .iter()
        .map(|call| match call {
            Call::Load(_) => ("load", false),
            Call::Patch { kind, body, .. } => {
                let text = body.to_string();
                let guarded =
                    text.contains("\"resourceVersion\":") || text.contains("/metadata/resourceVersion");
                (*kind, guarded)
            }
            Call::ResourceVersion(_) => ("resourceVersion", false),
            Call::CreateJob(_) => ("createJob", false),
            Call::DeleteJob(_) => ("deleteJob", false),
            Call::JobExists(_) => ("jobExists", false),
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn writes_built_from_the_view() {
    for case in VIEW_CASES {
        let h = start(Setup::default());
        let workload = key(case.kind, "web");
        let object = match case.kind {
            WorkloadKind::Rollout => Stored::Rollout(rollout("web")),
            _ => Stored::Deployment(deployment("web")),
        };
        indexed(&h, &workload, object);
        h.api.fail_patches(case.fail_with);
        h.reload(&workload, (case.changes)());
        h.settle(SETTLE).await;
        assert_eq!(verbs(&h.api.calls()), case.calls, "{}", case.name);
        assert_eq!(h.reasons(), case.events, "{}", case.name);
        h.stop().await;
    }
}

#[tokio::test(start_paused = true)]
async fn the_event_of_a_write_from_the_view_references_the_indexed_object() {
    let h = start(Setup::default());
    let workload = key(WorkloadKind::Deployment, "web");
    indexed(&h, &workload, Stored::Deployment(deployment("web")));
    h.reload(&workload, vec![env_change("cfg", 1)]);
    h.settle(SETTLE).await;
    let target =
        EventTarget { key: workload.clone(), uid: Some(UID.into()), resource_version: Some("10".into()) };
    assert_eq!(h.events.all(), vec![WorkloadEvent::reloaded(target, &env_change("cfg", 1).resource)]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_view_that_records_every_change_sends_nothing() {
    let h = start(Setup::default());
    let workload = key(WorkloadKind::Deployment, "web");
    let change = env_change("cfg", 1);
    indexed(&h, &workload, Stored::Deployment(current_deployment("web", &change)));
    h.reload(&workload, vec![change]);
    h.settle(SETTLE).await;
    assert_eq!(h.api.calls(), [], "no read, no write");
    assert!(h.events.all().is_empty());
    h.stop().await;
}

/// docs/behaviour.md §C32e: the API server's answer to a write reaches the index while the write
/// still counts as under way, so a change planned meanwhile either sees that answer or is queued.
/// A failed write hands nothing over.
#[tokio::test(start_paused = true)]
async fn a_writes_answer_reaches_the_index_before_the_write_leaves_the_queue() {
    let h = start(Setup::default());
    let workload = key(WorkloadKind::Deployment, "web");
    indexed(&h, &workload, Stored::Deployment(deployment("web")));
    let change = env_change("cfg", 1);
    let mut answer = current_deployment("web", &change);
    answer.metadata.resource_version = Some("11".into());
    h.api.patch_answers.lock().unwrap().push_back(Loaded::new(answer.clone()));
    h.api.fail_patches(&[500, 500, 500, 500, 500, 500]);
    h.reload(&workload, vec![env_change("other", 2)]);
    assert!(h.executor.has_work(&workload));
    h.settle(SETTLE).await;
    assert!(h.views.written.lock().unwrap().is_empty(), "a failed write hands nothing over");

    h.reload(&workload, vec![change]);
    h.settle(SETTLE).await;
    assert!(!h.executor.has_work(&workload));
    let expected = workload_view(&Loaded::new(answer), &AnnotationKeys::default());
    assert_eq!(*h.views.written.lock().unwrap(), [(expected, true)]);
    h.stop().await;
}

/// A view behind the object (the marker already written, the watch not there yet) makes at worst
/// a patch that changes nothing: env-var writes are the same whenever sent, and a write carrying
/// the time is refused (409) and rebuilt from the object, which needs none.
#[tokio::test(start_paused = true)]
async fn a_stale_view_never_rolls_the_workload_twice() {
    for change in [env_change("cfg", 1), annotation_change("cfg", 1)] {
        let h = start(Setup::default());
        let workload = key(WorkloadKind::Deployment, "web");
        indexed(&h, &workload, Stored::Deployment(deployment("web")));
        // The object moved on: it records the change already, at a newer version.
        let mut now = current_deployment("web", &change);
        now.metadata.uid = Some(UID.into());
        now.metadata.resource_version = Some("11".into());
        h.api.put(&workload, Stored::Deployment(now.clone()));
        let guarded = change.strategy == ReloadStrategy::Annotations;
        if guarded {
            h.api.fail_patches(&[409]);
        }
        h.reload(&workload, vec![change.clone()]);
        h.settle(SETTLE).await;
        let patches = h.api.patches();
        match guarded {
            // Refused, then the read finds it current.
            true => assert_eq!(verbs(&h.api.calls()), [("strategic", true), ("load", false)]),
            // The same value again: applying it leaves the template as it is.
            false => {
                assert_eq!(patches.len(), 1);
                let mut template = now.spec.as_ref().unwrap().template.clone();
                let before = template.clone();
                let body = &patches[0].2["spec"]["template"]["spec"]["containers"][0]["env"][0];
                let env = template.spec.as_mut().unwrap().containers[0].env.as_mut().unwrap();
                let entry = env.iter_mut().find(|e| json!(e.name) == body["name"]).expect("the marker");
                entry.value = body["value"].as_str().map(str::to_owned);
                assert_eq!(template, before, "the patch changes nothing");
            }
        }
        h.stop().await;
    }
}

#[tokio::test(start_paused = true)]
async fn jobs_still_read_before_their_write() {
    let h = start(Setup::default());
    let workload = key(WorkloadKind::Job, "batch");
    indexed(&h, &workload, Stored::Job(job("batch")));
    h.reload(&workload, vec![env_change("cfg", 1)]);
    h.settle(SETTLE).await;
    assert_eq!(h.api.calls().first(), Some(&Call::Load("batch".into())));
    h.stop().await;
}

// ---- timing: holds and the loop guard (docs/beyond-stakater.md §15) -------------------------

/// One workload's timing against the executor's other settings: reload patches counted at
/// checkpoints (seconds after the first change, on the paused clock).
struct TimingCase {
    name: &'static str,
    annotations: &'static [(&'static str, &'static str)],
    setup: Setup,
    /// (second, resource, hash byte) of each change; `None`: a resume after a pause period.
    enqueues: &'static [(u64, Option<(&'static str, u8)>)],
    /// (second, reload patches written by then).
    checkpoints: &'static [(u64, usize)],
    /// Merge patches that record a hold.
    holds_recorded: usize,
    events: &'static [EventReason],
}

const TIMING_CASES: &[TimingCase] = &[
    TimingCase {
        name: "a delay joins the changes within it into one write at its end",
        annotations: &[(DELAY_ANNOTATION, "5m")],
        setup: PLAIN,
        enqueues: &[(0, Some(("a", 1))), (60, Some(("b", 2)))],
        checkpoints: &[(299, 0), (301, 1), (900, 1)],
        holds_recorded: 1,
        events: &[EventReason::ReloadHeld, EventReason::Reloaded, EventReason::Reloaded],
    },
    TimingCase {
        name: "coalescing first, then the delay counted from the first change",
        annotations: &[(DELAY_ANNOTATION, "5m")],
        setup: Setup { coalesce_period: Duration::from_secs(10), ..PLAIN },
        enqueues: &[(0, Some(("a", 1))), (5, Some(("b", 2)))],
        checkpoints: &[(299, 0), (301, 1), (900, 1)],
        holds_recorded: 1,
        events: &[EventReason::ReloadHeld, EventReason::Reloaded, EventReason::Reloaded],
    },
    TimingCase {
        name: "outside the window: the write waits for it to open",
        annotations: &[(WINDOW_ANNOTATION, "* 10:30-11:00 UTC")],
        setup: PLAIN,
        enqueues: &[(0, Some(("a", 1)))],
        checkpoints: &[(1799, 0), (1801, 1)],
        holds_recorded: 1,
        events: &[EventReason::ReloadHeld, EventReason::Reloaded],
    },
    TimingCase {
        name: "a minimum interval holds the next write to its end",
        annotations: &[(INTERVAL_ANNOTATION, "10m")],
        setup: PLAIN,
        enqueues: &[(0, Some(("a", 1))), (60, Some(("a", 2))), (120, Some(("a", 3)))],
        checkpoints: &[(1, 1), (599, 1), (601, 2), (1800, 2)],
        holds_recorded: 1,
        events: &[EventReason::Reloaded, EventReason::ReloadHeld, EventReason::Reloaded],
    },
    TimingCase {
        name: "dry run: held, then neither written nor recorded",
        annotations: &[(DELAY_ANNOTATION, "5m")],
        setup: Setup { dry_run: true, ..PLAIN },
        enqueues: &[(0, Some(("a", 1)))],
        checkpoints: &[(900, 0)],
        holds_recorded: 0,
        events: &[EventReason::ReloadHeld],
    },
    TimingCase {
        name: "a resume is never held",
        annotations: &[(DELAY_ANNOTATION, "5m")],
        setup: PLAIN,
        enqueues: &[(0, None)],
        checkpoints: &[(1, 0)],
        holds_recorded: 0,
        events: &[],
    },
    TimingCase {
        name: "the loop guard stops the third write within its window",
        annotations: &[],
        setup: Setup {
            loop_guard: Some(LoopGuard { max_reloads: 2, within: Duration::from_secs(60) }),
            ..PLAIN
        },
        enqueues: &[(0, Some(("a", 1))), (1, Some(("a", 2))), (2, Some(("a", 3))), (3, Some(("a", 4)))],
        checkpoints: &[(10, 2)],
        holds_recorded: 0,
        events: &[EventReason::Reloaded, EventReason::Reloaded, EventReason::ReloadLoopStopped],
    },
];

const DELAY_ANNOTATION: &str = reloader_core::timing::DELAY;
const INTERVAL_ANNOTATION: &str = reloader_core::timing::MIN_INTERVAL;
const WINDOW_ANNOTATION: &str = reloader_core::timing::MAINTENANCE_WINDOW;

#[tokio::test(start_paused = true)]
async fn timing_holds_writes_and_the_loop_guard_stops_them() {
    for case in TIMING_CASES {
        let h = start(case.setup);
        let workload = key(WorkloadKind::Deployment, "web");
        let mut object = deployment("web");
        object.metadata.annotations =
            Some(case.annotations.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect());
        h.api.put(&workload, Stored::Deployment(object.clone()));
        h.views.index(&Loaded::new(object));
        h.views.follow_writes.store(true, std::sync::atomic::Ordering::Relaxed);
        let started = tokio::time::Instant::now();
        let reloads = || h.api.patches().iter().filter(|(_, kind, _)| *kind == "strategic").count();
        let mut checkpoints = case.checkpoints.iter().peekable();
        for (at, change) in case.enqueues {
            while let Some((second, expected)) = checkpoints.next_if(|(second, _)| second < at) {
                tokio::time::sleep_until(started + Duration::from_secs(*second)).await;
                assert_eq!(reloads(), *expected, "{}: at {second}s", case.name);
            }
            tokio::time::sleep_until(started + Duration::from_secs(*at)).await;
            match change {
                Some((resource, byte)) => h.reload(&workload, vec![env_change(resource, *byte)]),
                None => h.executor.enqueue(workload.clone(), Work::Resume, std::time::Instant::now()),
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        for (second, expected) in checkpoints {
            tokio::time::sleep_until(started + Duration::from_secs(*second)).await;
            assert_eq!(reloads(), *expected, "{}: at {second}s", case.name);
        }
        let recorded = h
            .api
            .patches()
            .iter()
            .filter(|(_, kind, body)| {
                *kind == "merge"
                    && body
                        .pointer("/metadata/annotations")
                        .is_some_and(|a| a.get(reloader_core::timing::HELD).is_some_and(|v| !v.is_null()))
            })
            .count();
        assert_eq!(recorded, case.holds_recorded, "{}: {:?}", case.name, h.api.patches());
        assert_eq!(h.reasons(), case.events, "{}", case.name);
        h.stop().await;
    }
}
