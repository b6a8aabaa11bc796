//! The reconcile stage against fakes of its I/O: each row gives the index contents, the options,
//! leadership and scope, one event, and the work that must be queued.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use reloader_core::annotations::AnnotationKeys;
use reloader_core::decide::{DecideOptions, ResourceEventKind};
use reloader_core::model::{
    ContentHash, ReloadStrategy, ResourceKey, ResourceKind, ResourceVersion, WorkloadKey, WorkloadKind,
};
use reloader_core::options::NamespaceScope;
use reloader_core::views::{ResourceView, WorkloadView};
use serde_json::json;

use super::catch_up::{CatchUpConfig, sweep};
use super::pause::PauseTimers;
use super::standby::SeenChange;
use super::testkit::{FakeQueue, Setup, stage};
use crate::kinds::Loaded;
use crate::notify::events::EventReason;
use crate::state::{Phase, ResourceState, WorkloadState};
use crate::views::workload_view;

const H1: &str = "1111111111111111111111111111111111111111";
const H2: &str = "2222222222222222222222222222222222222222";
const CM_RELOAD: &str = "configmap.reloader.stakater.com/reload";
const AUTO: &str = "reloader.stakater.com/auto";

fn configmap(namespace: &str, name: &str, hash: &str) -> ResourceView {
    ResourceView {
        key: ResourceKey::new(ResourceKind::ConfigMap, namespace, name),
        hash: ContentHash::from_hex(hash).unwrap(),
        keys: Default::default(),
        matched: false,
        ignored: false,
        version: None,
    }
}

fn ignored(mut view: ResourceView) -> ResourceView {
    view.ignored = true;
    view
}

/// A Deployment in `namespace` with `annotations`, whose container reads ConfigMap `envfrom`.
fn deployment(
    namespace: &str,
    name: &str,
    annotations: &[(&str, &str)],
    envfrom: Option<&str>,
) -> WorkloadView {
    let annotations: serde_json::Map<String, serde_json::Value> =
        annotations.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    let env_from: Vec<_> = envfrom.into_iter().map(|cm| json!({"configMapRef": {"name": cm}})).collect();
    let object: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {
            "selector": {},
            "template": {"spec": {"containers": [{"name": "app", "envFrom": env_from}]}},
        },
    }))
    .unwrap();
    workload_view(&Loaded::new(object), &AnnotationKeys::default())
}

/// Explicitly reloads on ConfigMap `cfg`.
fn explicit(namespace: &str, name: &str) -> WorkloadView {
    deployment(namespace, name, &[(CM_RELOAD, "cfg")], None)
}

/// `auto: "true"` and reads ConfigMap `cfg`.
fn auto(namespace: &str, name: &str) -> WorkloadView {
    deployment(namespace, name, &[(AUTO, "true")], Some("cfg"))
}

enum Event {
    Applied(ResourceView, Phase),
    Deleted(ResourceView),
}

struct Case {
    name: &'static str,
    setup: Setup,
    workloads: Vec<WorkloadView>,
    resources: Vec<ResourceView>,
    event: Event,
    queued: &'static [&'static str],
    /// A `reloader_resource_events_total` outcome label that must have been counted.
    processed: Option<&'static str>,
}

fn case(name: &'static str, event: Event, queued: &'static [&'static str]) -> Case {
    Case {
        name,
        setup: Setup::default(),
        workloads: vec![
            explicit("ns", "web"),
            auto("ns", "api"),
            deployment("ns", "plain", &[], Some("cfg")),
        ],
        resources: vec![configmap("ns", "cfg", H1)],
        event,
        queued,
        processed: None,
    }
}

impl Case {
    fn with(mut self, f: impl FnOnce(&mut Setup)) -> Self {
        f(&mut self.setup);
        self
    }
    fn processed(mut self, result: &'static str) -> Self {
        self.processed = Some(result);
        self
    }
    fn index(mut self, workloads: Vec<WorkloadView>, resources: Vec<ResourceView>) -> Self {
        self.workloads = workloads;
        self.resources = resources;
        self
    }
}

fn resource_cases() -> Vec<Case> {
    use Event::{Applied, Deleted};
    use Phase::{InitialList, Live, Relist};
    let changed = || configmap("ns", "cfg", H2);
    let same = || configmap("ns", "cfg", H1);
    let new = || configmap("ns", "cfg", H1);
    vec![
        case("live content change reloads explicit and auto", Applied(changed(), Live), &["api", "web"])
            .processed("queued"),
        case("same content: nothing", Applied(same(), Live), &[]).processed("no_content_change"),
        case("the initial list is not a change", Applied(changed(), InitialList), &[]),
        case("a relist that finds new content reloads", Applied(changed(), Relist), &["api", "web"]),
        case("a relist with the same content: nothing", Applied(same(), Relist), &[]),
        case("another ConfigMap: no match", Applied(configmap("ns", "other", H2), Live), &[])
            .processed("reload_on_create_disabled"),
        case("another namespace: no match", Applied(configmap("other", "cfg", H2), Live), &[]),
        case("create without --reload-on-create: nothing", Applied(new(), Live), &[])
            .index(vec![explicit("ns", "web")], vec![])
            .processed("reload_on_create_disabled"),
        case("create with --reload-on-create reloads", Applied(new(), Live), &["web"])
            .index(vec![explicit("ns", "web")], vec![])
            .with(|s| s.reload_on_create = true)
            .processed("queued"),
        case("create seen by the initial list: nothing", Applied(new(), InitialList), &[])
            .index(vec![explicit("ns", "web")], vec![])
            .with(|s| s.reload_on_create = true),
        case("create seen by a relist reloads", Applied(new(), Relist), &["web"])
            .index(vec![explicit("ns", "web")], vec![])
            .with(|s| s.reload_on_create = true),
        case("delete without --reload-on-delete: nothing", Deleted(same()), &[])
            .processed("reload_on_delete_disabled"),
        case("delete with --reload-on-delete reloads", Deleted(same()), &["api", "web"])
            .with(|s| {
                s.reload_on_delete = true;
                s.strategy = ReloadStrategy::Annotations;
            })
            .processed("queued"),
        // env-vars: a delete removes the marker, and neither view carries one.
        case("delete, env-vars, no marker in the views: nothing", Deleted(same()), &[])
            .with(|s| s.reload_on_delete = true)
            .processed("no_match"),
        // docs/behaviour.md §C32e: that write may be adding the marker the delete must remove.
        case("delete, env-vars, a write to web under way: web", Deleted(same()), &["web"]).with(|s| {
            s.reload_on_delete = true;
            s.writing = &["web"];
        }),
        case("delete of an ignored resource: nothing", Deleted(same()), &[])
            .index(vec![explicit("ns", "web")], vec![ignored(same())])
            .with(|s| s.reload_on_delete = true)
            .processed("ignored"),
        case("an ignored resource: nothing", Applied(ignored(changed()), Live), &[]).processed("ignored"),
        case("an ignored namespace: nothing", Applied(changed(), Live), &[])
            .with(|s| s.scope = NamespaceScope::All { ignore: vec!["ns".into()], selector: None })
            .processed("namespace_out_of_scope"),
        case("a namespace the selector does not match: nothing", Applied(changed(), Live), &[])
            .with(|s| {
                s.scope = NamespaceScope::All { ignore: vec![], selector: Some("team=a".parse().unwrap()) }
            })
            .processed("namespace_out_of_scope"),
        case("a namespace the selector matches reloads", Applied(changed(), Live), &["api", "web"]).with(
            |s| {
                s.scope = NamespaceScope::All { ignore: vec![], selector: Some("team=a".parse().unwrap()) };
                s.selected = &["ns"];
            },
        ),
        case("only these namespaces: the watch already filtered", Applied(changed(), Live), &["api", "web"])
            .with(|s| s.scope = NamespaceScope::Only(vec!["ns".into()])),
        case("annotations strategy reloads the same workloads", Applied(changed(), Live), &["api", "web"])
            .with(|s| s.strategy = ReloadStrategy::Annotations),
        case("a standby queues too (the executor drops it)", Applied(changed(), Live), &["api", "web"])
            .with(|s| s.leader = false),
        case("no workloads: no match", Applied(changed(), Live), &[])
            .index(vec![], vec![same()])
            .processed("no_match"),
    ]
}

#[test]
fn resource_events_become_the_expected_work() {
    for case in resource_cases() {
        let stage = stage(&case.setup, &case.workloads, &case.resources);
        match case.event {
            Event::Applied(view, phase) => stage.reconciler.resource_applied(view, phase),
            Event::Deleted(view) => stage.reconciler.resource_deleted(view),
        }
        assert_eq!(stage.queue.names(), case.queued, "{}", case.name);
        if let Some(result) = case.processed {
            let metrics = stage.metrics.encode();
            let counted = metrics.lines().any(|l| {
                l.starts_with("reloader_resource_events_total{") && l.contains(&format!("\"{result}\""))
            });
            assert!(counted, "{}: no {result} in\n{metrics}", case.name);
        }
    }
}

#[test]
fn a_standby_records_changes_for_its_promotion_and_a_leader_does_not() {
    for (leader, recorded) in [(false, 1), (true, 0)] {
        let setup = Setup { leader, ..Setup::default() };
        let stage = stage(&setup, &[explicit("ns", "web")], &[configmap("ns", "cfg", H1)]);
        stage.reconciler.resource_applied(configmap("ns", "cfg", H2), Phase::Live);
        assert_eq!(stage.reconciler.standby.take_recent().len(), recorded, "leader={leader}");
    }
}

#[test]
fn a_relist_deletes_what_vanished_only_after_the_first_list() {
    let cases = [
        // (phase, reload on delete, expected queued, resources left)
        (Phase::InitialList, true, &[][..], 1),
        (Phase::Relist, true, &["web"][..], 1),
        (Phase::Relist, false, &[][..], 1),
    ];
    for (phase, reload_on_delete, queued, left) in cases {
        let setup = Setup { reload_on_delete, strategy: ReloadStrategy::Annotations, ..Setup::default() };
        let kept = configmap("ns", "kept", H1);
        let stage = stage(&setup, &[explicit("ns", "web")], &[configmap("ns", "cfg", H1), kept.clone()]);
        let seen: HashSet<ResourceKey> = [kept.key].into();
        stage.reconciler.resources_relisted(ResourceKind::ConfigMap, Some("ns"), &seen, phase);
        assert_eq!(stage.queue.names(), queued, "{phase:?} {reload_on_delete}");
        assert_eq!(stage.reconciler.index.read().unwrap().stats().resources, left, "{phase:?}");
    }
}

#[test]
fn a_relist_leaves_other_kinds_and_namespaces_alone() {
    let stage = stage(&Setup::default(), &[], &[configmap("ns", "cfg", H1), configmap("other", "cfg", H1)]);
    stage.reconciler.resources_relisted(ResourceKind::Secret, None, &HashSet::new(), Phase::Relist);
    stage.reconciler.resources_relisted(
        ResourceKind::ConfigMap,
        Some("elsewhere"),
        &HashSet::new(),
        Phase::Relist,
    );
    assert_eq!(stage.reconciler.index.read().unwrap().stats().resources, 2);
}

#[test]
fn workload_changes_go_through_reconcile() {
    let stage = stage(&Setup::default(), &[], &[configmap("ns", "cfg", H1)]);
    let web = explicit("ns", "web");
    stage.reconciler.workload_applied(web.clone(), Phase::Live);
    assert!(stage.reconciler.index.read().unwrap().workload(&web.key).is_some(), "indexed");
    // Now a change to its ConfigMap finds it without any list.
    stage.reconciler.resource_applied(configmap("ns", "cfg", H2), Phase::Live);
    assert_eq!(stage.queue.names(), ["web"]);

    stage.reconciler.workload_deleted(&web.key);
    assert!(stage.reconciler.index.read().unwrap().workload(&web.key).is_none(), "removed");

    stage.reconciler.workload_applied(web.clone(), Phase::Live);
    let api = auto("other", "api");
    stage.reconciler.workload_applied(api.clone(), Phase::Live);
    let seen: HashSet<WorkloadKey> = HashSet::new();
    stage.reconciler.workloads_relisted(WorkloadKind::Deployment, Some("ns"), &seen);
    let index = stage.reconciler.index.read().unwrap();
    assert!(index.workload(&web.key).is_none(), "vanished during the relist");
    assert!(index.workload(&api.key).is_some(), "another namespace's watch owns it");
}

#[tokio::test]
async fn annotation_problems_are_reported_once_per_change_of_the_annotations() {
    let stage = stage(&Setup::default(), &[], &[]);
    let broken = deployment("ns", "web", &[(CM_RELOAD, "cfg-[(")], None);
    stage.reconciler.workload_applied(broken.clone(), Phase::Live);
    // A status update: same annotations, no new Event.
    stage.reconciler.workload_applied(broken.clone(), Phase::Live);
    stage.reconciler.workload_applied(explicit("ns", "fine"), Phase::Live);
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    let events = stage.events.0.lock().unwrap().clone();
    assert_eq!(events, [("web".to_string(), EventReason::InvalidAnnotation)]);
}

#[test]
fn pause_timers_resume_only_while_leading() {
    let keys = AnnotationKeys::default();
    let paused_at = (chrono::Utc::now() - chrono::Duration::seconds(120)).to_rfc3339();
    let later = chrono::Utc::now().to_rfc3339();
    let cases = [
        // (paused-at, period (None: annotation removed), leading, resumed now)
        (paused_at.as_str(), Some("1m"), true, true),
        (paused_at.as_str(), Some("1m"), false, false),
        (later.as_str(), Some("1h"), true, false),
        // Whatever is wrong with the annotations errs towards resuming now (a padded period is
        // not a Go duration).
        (later.as_str(), Some(" 1h "), true, true),
        (paused_at.as_str(), Some("not a duration"), true, true),
        (later.as_str(), None, true, true),
        ("not a time", Some("1h"), true, true),
    ];
    for (at, period, leading, resumed) in cases {
        let mut annotations = vec![(keys.paused_at.as_str(), at)];
        annotations.extend(period.map(|period| (keys.pause_period.as_str(), period)));
        let view = deployment("ns", "web", &annotations, None);
        let timers = PauseTimers::default();
        timers.observe(&view);
        let queue = FakeQueue::default();
        let next = timers.resume_due(leading, Instant::now() + Duration::from_millis(50), &queue);
        let queued = !queue.0.lock().unwrap().is_empty();
        assert_eq!(queued, resumed, "{at} {period:?} leading={leading}");
        assert!(next.is_some(), "a deadline is kept until the workload is seen resumed");
        timers.forget(&view.key);
        assert!(timers.resume_due(true, Instant::now() + Duration::from_secs(7200), &queue).is_none());
    }
}

#[test]
fn pause_timers_ignore_other_kinds_and_unpaused_workloads() {
    let timers = PauseTimers::default();
    timers.observe(&explicit("ns", "web"));
    let queue = FakeQueue::default();
    assert!(timers.resume_due(true, Instant::now() + Duration::from_secs(7200), &queue).is_none());
}

fn sweep_with(
    setup: &Setup,
    listed_as_created: bool,
    workloads: &[WorkloadView],
    resources: &[ResourceView],
    seen: Vec<SeenChange>,
) -> (Vec<String>, (usize, usize)) {
    let stage = stage(setup, workloads, resources);
    let config = CatchUpConfig {
        decide: {
            let mut decide = DecideOptions::default();
            decide.strategy = setup.strategy;
            decide
        },
        listed_as_created,
    };
    let index = stage.reconciler.index.read().unwrap();
    let swept = sweep(&index, &stage.reconciler.scope, &config, seen, stage.queue.as_ref(), Instant::now());
    (stage.queue.names(), (swept.queued, swept.replayed))
}

#[test]
fn catch_up_sweeps() {
    let web = explicit("ns", "web");
    let cfg = configmap("ns", "cfg", H1);
    let setup = Setup::default();
    let selector = Setup {
        scope: NamespaceScope::All { ignore: vec![], selector: Some("team=a".parse().unwrap()) },
        ..Setup::default()
    };
    // (name, setup, listed as created, standby changes, queued, (queued, replayed))
    type Seen = Vec<SeenChange>;
    let by_web = |view: ResourceView, event| SeenChange { view, event, targets: vec![web.key.clone()] };
    type Row<'a> = (&'a str, &'a Setup, bool, Seen, &'a [&'a str], (usize, usize));
    let cases: Vec<Row> = vec![
        ("nothing recorded, nothing changed", &setup, false, vec![], &[], (0, 0)),
        ("listed as created: every referenced resource", &setup, true, vec![], &["web"], (1, 0)),
        ("listed as created, out of scope", &selector, true, vec![], &[], (0, 0)),
        (
            "a change seen as a standby is replayed",
            &setup,
            false,
            vec![by_web(cfg.clone(), ResourceEventKind::Updated)],
            &["web"],
            (0, 1),
        ),
        (
            "a change to an ignored resource is not",
            &setup,
            false,
            vec![by_web(ignored(cfg.clone()), ResourceEventKind::Deleted)],
            &[],
            (0, 0),
        ),
        (
            "a change out of scope is not",
            &selector,
            false,
            vec![by_web(cfg.clone(), ResourceEventKind::Updated)],
            &[],
            (0, 0),
        ),
        (
            "a change to a resource gone since is not",
            &setup,
            false,
            vec![by_web(configmap("ns", "gone", H2), ResourceEventKind::Updated)],
            &[],
            (0, 0),
        ),
    ];
    for (name, setup, listed, seen, queued, counts) in cases {
        let (names, got) =
            sweep_with(setup, listed, std::slice::from_ref(&web), std::slice::from_ref(&cfg), seen);
        assert_eq!(names, queued, "{name}");
        assert_eq!(got, counts, "{name}");
    }
}

/// A workload created, or given the reference, after the standby saw the change records nothing
/// for it either, but never needed it: the replay leaves it alone.
#[test]
fn a_replay_goes_only_to_the_workloads_the_change_applied_to_then() {
    let (web, late) = (explicit("ns", "web"), explicit("ns", "late"));
    let cfg = configmap("ns", "cfg", H1);
    let cases: [(&[&WorkloadView], &[&str]); 3] =
        [(&[&web], &["web"]), (&[&web, &late], &["late", "web"]), (&[], &[])];
    for (targets, queued) in cases {
        let seen = SeenChange {
            view: cfg.clone(),
            event: ResourceEventKind::Updated,
            targets: targets.iter().map(|w| w.key.clone()).collect(),
        };
        let (names, _) = sweep_with(
            &Setup::default(),
            false,
            &[web.clone(), late.clone()],
            std::slice::from_ref(&cfg),
            vec![seen],
        );
        assert_eq!(names, queued, "targets {:?}", targets.iter().map(|w| &w.key.name).collect::<Vec<_>>());
    }
}

/// A workload of `kind` in `ns` that explicitly reloads on ConfigMap `cfg`, reads it, and
/// carries the env-var marker `hash` for it.
fn marked(kind: WorkloadKind, name: &str, hash: &str) -> WorkloadView {
    let template = json!({"spec": {"containers": [{
        "name": "app",
        "envFrom": [{"configMapRef": {"name": "cfg"}}],
        "env": [{"name": "STAKATER_CFG_CONFIGMAP", "value": hash}],
    }]}});
    let metadata = json!({"name": name, "namespace": "ns", "annotations": {CM_RELOAD: "cfg"}});
    let spec = match kind {
        WorkloadKind::CronJob => {
            json!({"schedule": "0 0 1 1 *", "jobTemplate": {"spec": {"template": template}}})
        }
        _ => json!({"selector": {}, "template": template}),
    };
    let object = json!({"metadata": metadata, "spec": spec});
    let loaded = Loaded::from_json(kind, &object).unwrap();
    workload_view(&loaded, &AnnotationKeys::default())
}

#[test]
fn catch_up_converges_long_running_kinds_only() {
    // Every workload records H2 for `cfg`, which is H1 now.
    let workloads = [
        marked(WorkloadKind::Deployment, "web", H2),
        marked(WorkloadKind::Job, "migrate", H2),
        marked(WorkloadKind::CronJob, "nightly", H2),
    ];
    let cfg = configmap("ns", "cfg", H1);
    let changed = configmap("ns", "cfg", H2);
    let setup = Setup::default();
    let seen = SeenChange {
        view: changed,
        event: ResourceEventKind::Updated,
        targets: workloads.iter().map(|w| w.key.clone()).collect(),
    };
    type Row<'a> = (&'a str, bool, Vec<SeenChange>, (usize, usize));
    let cases: Vec<Row> = vec![
        ("stale markers", false, vec![], (1, 0)),
        ("stale markers, listed as created", true, vec![], (2, 0)),
        ("a change seen as a standby", false, vec![seen], (1, 1)),
    ];
    for (name, listed, seen, counts) in cases {
        let (names, got) = sweep_with(&setup, listed, &workloads, std::slice::from_ref(&cfg), seen);
        assert!(names.iter().all(|n| n == "web"), "{name}: a batch kind was caught up: {names:?}");
        assert_eq!(got, counts, "{name}");
    }
    for kind in WorkloadKind::ALL {
        let long_running = !matches!(kind, WorkloadKind::Job | WorkloadKind::CronJob);
        assert_eq!(kind.is_long_running(), long_running, "{kind:?}");
    }
}

/// Records what `--webhook-url` would be told: (event, name).
#[derive(Default, Clone)]
struct FakeNotifier(Arc<Mutex<Vec<(&'static str, String)>>>);

impl super::ResourceNotifier for FakeNotifier {
    fn notify(&self, notice: crate::notify::webhook::ResourceNotice) {
        self.0.lock().unwrap().push((notice.event.as_label(), notice.name));
    }
}

impl FakeNotifier {
    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.0.lock().unwrap().iter().map(|(_, name)| name.clone()).collect();
        names.sort();
        names
    }
}

#[test]
fn webhook_mode_posts_every_change_and_queues_nothing() {
    use Event::{Applied, Deleted};
    let changed = || configmap("ns", "cfg", H2);
    // (name, setup, event, notified)
    let cases: Vec<(&str, Setup, Event, &[&str])> = vec![
        ("a change", Setup::default(), Applied(changed(), Phase::Live), &["cfg"]),
        // Stakater posts before reading the resource's annotations.
        (
            "an ignored resource's change",
            Setup::default(),
            Applied(ignored(changed()), Phase::Live),
            &["cfg"],
        ),
        ("the same content", Setup::default(), Applied(configmap("ns", "cfg", H1), Phase::Live), &[]),
        (
            "a standby posts nothing",
            Setup { leader: false, ..Setup::default() },
            Applied(changed(), Phase::Live),
            &[],
        ),
        ("a delete without --reload-on-delete", Setup::default(), Deleted(changed()), &[]),
        (
            "a delete with it",
            Setup { reload_on_delete: true, ..Setup::default() },
            Deleted(changed()),
            &["cfg"],
        ),
        (
            "a create with --reload-on-create",
            Setup { reload_on_create: true, ..Setup::default() },
            Applied(configmap("ns", "new", H1), Phase::Live),
            &["new"],
        ),
        (
            "out of scope",
            Setup {
                scope: NamespaceScope::All { ignore: vec!["ns".into()], selector: None },
                ..Setup::default()
            },
            Applied(changed(), Phase::Live),
            &[],
        ),
    ];
    for (name, setup, event, notified) in cases {
        let mut stage =
            stage(&setup, &[explicit("ns", "web"), auto("ns", "api")], &[configmap("ns", "cfg", H1)]);
        let notifier = FakeNotifier::default();
        stage.reconciler.notifier = Some(Box::new(notifier.clone()));
        match event {
            Applied(view, phase) => stage.reconciler.resource_applied(view, phase),
            Deleted(view) => stage.reconciler.resource_deleted(view),
        }
        assert_eq!(notifier.names(), *notified, "{name}");
        assert!(stage.queue.names().is_empty(), "{name}: webhook mode queued a write");
    }
}

#[test]
fn webhook_mode_catch_up_announces_listed_resources_only_with_sync_after_restart() {
    use super::catch_up::announce_listed;
    let spc = ResourceView {
        key: ResourceKey::new(ResourceKind::SecretProviderClass, "ns", "vault"),
        ..configmap("ns", "x", H1)
    };
    let resources = [
        configmap("ns", "cfg", H1),
        ignored(configmap("ns", "quiet", H1)),
        configmap("other", "far", H1),
        spc,
    ];
    let only_ns = Setup {
        scope: NamespaceScope::All { ignore: vec!["other".into()], selector: None },
        ..Setup::default()
    };
    for (listed_as_created, announced) in [(false, &[][..]), (true, &["cfg", "quiet"][..])] {
        let stage = stage(&only_ns, &[marked(WorkloadKind::Deployment, "web", H2)], &resources);
        let notifier = FakeNotifier::default();
        let config = CatchUpConfig { decide: DecideOptions::default(), listed_as_created };
        let index = stage.reconciler.index.read().unwrap();
        let count = announce_listed(&index, &stage.reconciler.scope, &config, &notifier);
        assert_eq!(notifier.names(), announced, "listed as created: {listed_as_created}");
        assert_eq!(count, announced.len());
        assert!(notifier.0.lock().unwrap().iter().all(|(event, _)| *event == "create"));
    }
}

fn at(version: &str, mut view: ResourceView) -> ResourceView {
    view.version = ResourceVersion::parse(version);
    view
}

fn workload_at(version: &str, mut view: WorkloadView) -> WorkloadView {
    view.version = ResourceVersion::parse(version);
    view
}

/// Posts nothing; only its presence matters (webhook mode).
struct SilentNotifier;

impl super::ResourceNotifier for SilentNotifier {
    fn notify(&self, _notice: crate::notify::webhook::ResourceNotice) {}
}

/// docs/behaviour.md §G through the reconciler: the resource watch runs ahead of the workload
/// watch; the workload's events then queue what the index met first, under the change's filters.
#[test]
fn a_change_met_before_the_workload_is_queued_when_it_arrives() {
    use Phase::{InitialList, Live};
    let listed = || at("5", configmap("ns", "cfg", H1));
    let changed = || at("20", configmap("ns", "cfg", H2));
    let created = || at("20", configmap("ns", "cfg", H1));
    let changed_at_20 = || vec![(listed(), InitialList), (changed(), Live)];
    type Row = (&'static str, Setup, Vec<(ResourceView, Phase)>, Vec<WorkloadView>, &'static [&'static str]);
    let rows: Vec<Row> = vec![
        (
            "ADDED after the change it predates",
            Setup::default(),
            changed_at_20(),
            vec![workload_at("10", auto("ns", "api"))],
            &["api"],
        ),
        (
            "created after the change",
            Setup::default(),
            changed_at_20(),
            vec![workload_at("30", auto("ns", "api"))],
            &[],
        ),
        (
            "queued once: its own status updates replay nothing",
            Setup::default(),
            changed_at_20(),
            vec![workload_at("10", auto("ns", "api")), workload_at("15", auto("ns", "api"))],
            &["api"],
        ),
        (
            "the initial list of resources is no change",
            Setup::default(),
            vec![(at("20", configmap("ns", "cfg", H2)), InitialList)],
            vec![workload_at("10", auto("ns", "api"))],
            &[],
        ),
        (
            "a create without --reload-on-create",
            Setup::default(),
            vec![(created(), Live)],
            vec![workload_at("10", explicit("ns", "web"))],
            &[],
        ),
        (
            "a create with --reload-on-create",
            Setup { reload_on_create: true, ..Setup::default() },
            vec![(created(), Live)],
            vec![workload_at("10", explicit("ns", "web"))],
            &["web"],
        ),
        (
            "an ignored namespace",
            Setup {
                scope: NamespaceScope::All { ignore: vec!["ns".into()], selector: None },
                ..Setup::default()
            },
            changed_at_20(),
            vec![workload_at("10", auto("ns", "api"))],
            &[],
        ),
        (
            "an ignored resource",
            Setup::default(),
            vec![(listed(), InitialList), (ignored(changed()), Live)],
            vec![workload_at("10", auto("ns", "api"))],
            &[],
        ),
        (
            "a standby queues too (the executor drops it)",
            Setup { leader: false, ..Setup::default() },
            changed_at_20(),
            vec![workload_at("10", auto("ns", "api"))],
            &["api"],
        ),
        (
            "no resourceVersion on the workload",
            Setup::default(),
            changed_at_20(),
            vec![auto("ns", "api")],
            &[],
        ),
    ];
    for (name, setup, resource_events, workload_events, queued) in rows {
        let stage = stage(&setup, &[], &[]);
        for (view, phase) in resource_events {
            stage.reconciler.resource_applied(view, phase);
        }
        for view in workload_events {
            stage.reconciler.workload_applied(view, Phase::Live);
        }
        assert_eq!(stage.queue.names(), queued, "{name}");
    }

    // Webhook mode posted the change when it came: the workload adds nothing.
    let mut stage = stage(&Setup::default(), &[], &[]);
    stage.reconciler.notifier = Some(Box::new(SilentNotifier));
    stage.reconciler.resource_applied(listed(), InitialList);
    stage.reconciler.resource_applied(changed(), Live);
    stage.reconciler.workload_applied(workload_at("10", auto("ns", "api")), Phase::Live);
    assert_eq!(stage.queue.names(), Vec::<String>::new(), "webhook mode");
}

/// docs/behaviour.md §G, the other order: the workload watch runs ahead. A workload whose ADDED
/// event carries a version greater than the change's was created after it and does not reload;
/// a listed one (creation unknown) and one created before the change do.
#[test]
fn a_workload_created_after_a_change_does_not_reload_for_it() {
    use Phase::{InitialList, Live, Relist};
    let rows: [(&str, &str, Phase, &[&str]); 4] = [
        ("ADDED after the change", "30", Live, &[]),
        ("ADDED before the change", "10", Live, &["api"]),
        ("listed by a relist: creation unknown", "30", Relist, &["api"]),
        ("listed at start: creation unknown", "30", InitialList, &["api"]),
    ];
    for (name, workload_version, phase, queued) in rows {
        let stage = stage(&Setup::default(), &[], &[]);
        stage.reconciler.resource_applied(at("5", configmap("ns", "cfg", H1)), InitialList);
        stage.reconciler.workload_applied(workload_at(workload_version, auto("ns", "api")), phase);
        stage.reconciler.resource_applied(at("20", configmap("ns", "cfg", H2)), Live);
        assert_eq!(stage.queue.names(), queued, "{name}");
    }
}
