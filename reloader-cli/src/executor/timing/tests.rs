//! The gate a due write passes, from a workload's annotations and its recent reloads.

use k8s_openapi::api::apps::v1::Deployment;
use reloader_core::annotations::AnnotationKeys;
use reloader_core::markers::{MarkerAction, MarkerChange};
use reloader_core::model::{ContentHash, ReloadStrategy, ResourceKey, ResourceKind};
use reloader_core::timing::{DELAY, HELD, MAINTENANCE_WINDOW, MIN_INTERVAL};
use serde_json::json;

use reloader_core::timing::{HoldReason, LoopStop};

use super::*;
use crate::kinds::Loaded;
use crate::views::workload_view;

const T0: &str = "2026-12-01T10:00:00Z";

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn view(annotations: &[(&str, &str)]) -> WorkloadView {
    let annotations: serde_json::Map<_, _> =
        annotations.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect();
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "team-a", "annotations": annotations},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"spec": {"containers": [{"name": "app", "image": "app:1"}]}},
        },
    }))
    .unwrap();
    workload_view(&Loaded::new(deployment), &AnnotationKeys::default())
}

fn change(name: &str) -> MarkerChange {
    MarkerChange {
        resource: ResourceKey::new(ResourceKind::ConfigMap, "team-a", name),
        action: MarkerAction::Set(ContentHash([1; 20])),
        strategy: ReloadStrategy::EnvVars,
        container: 0,
    }
}

fn held(since: &str, until: &str, reason: HoldReason, names: &[&str]) -> Gate {
    let resources = names.iter().map(|n| (ResourceKind::ConfigMap, (*n).to_owned())).collect();
    Gate::Hold(HeldReload { since: at(since), until: at(until), reason, resources })
}

#[test]
fn holds_follow_the_annotations_and_the_record() {
    let record = HeldReload {
        since: at("2026-12-01T09:58:00Z"),
        until: at("2026-12-01T10:03:00Z"),
        reason: HoldReason::Delay,
        resources: vec![(ResourceKind::ConfigMap, "old".to_owned())],
    }
    .to_annotation();
    let interval_record = HeldReload {
        since: at("2026-12-01T09:59:00Z"),
        until: at("2026-12-01T10:30:00Z"),
        reason: HoldReason::MinInterval,
        resources: vec![(ResourceKind::ConfigMap, "settings".to_owned())],
    }
    .to_annotation();
    // (case, annotations, now, gate)
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a str, Gate);
    let cases: Vec<Case> = vec![
        ("no annotation: at once", vec![], T0, Gate::Go),
        (
            "a delay holds",
            vec![(DELAY, "5m")],
            T0,
            held(T0, "2026-12-01T10:05:00Z", HoldReason::Delay, &["settings"]),
        ),
        ("a delay over: go", vec![(DELAY, "5m")], "2026-12-01T10:05:00Z", Gate::Go),
        ("a malformed delay is no delay", vec![(DELAY, "soon")], T0, Gate::Go),
        ("no last reload: the interval holds nothing", vec![(MIN_INTERVAL, "1h")], T0, Gate::Go),
        (
            "outside the window",
            vec![(MAINTENANCE_WINDOW, "* 02:00-04:00 UTC")],
            T0,
            held(T0, "2026-12-02T02:00:00Z", HoldReason::MaintenanceWindow, &["settings"]),
        ),
        ("inside the window", vec![(MAINTENANCE_WINDOW, "* 09:00-11:00 UTC")], T0, Gate::Go),
        (
            "a recorded hold counts from its start and keeps its resources",
            vec![(DELAY, "5m"), (HELD, &record)],
            T0,
            held("2026-12-01T09:58:00Z", "2026-12-01T10:03:00Z", HoldReason::Delay, &["old", "settings"]),
        ),
        (
            "after a restart the interval counts from the reload the record implies",
            vec![(MIN_INTERVAL, "1h"), (HELD, &interval_record)],
            T0,
            held("2026-12-01T09:59:00Z", "2026-12-01T10:30:00Z", HoldReason::MinInterval, &["settings"]),
        ),
    ];
    for (case, annotations, now, expected) in cases {
        let keeper = Timekeeper::new(None, None);
        let view = view(&annotations);
        let gate = keeper.gate(Some(&view), &[change("settings")], at(T0), at(now));
        assert_eq!(gate, expected, "{case}");
    }
}

#[test]
fn default_windows_apply_unless_the_workload_says_always() {
    let windows = Arc::new("* 02:00-04:00 UTC".parse::<Windows>().unwrap());
    let keeper = Timekeeper::new(Some(windows), None);
    let changes = [change("settings")];
    let gate = keeper.gate(Some(&view(&[])), &changes, at(T0), at(T0));
    assert!(matches!(gate, Gate::Hold(ref r) if r.reason == HoldReason::MaintenanceWindow), "{gate:?}");
    let always = view(&[(MAINTENANCE_WINDOW, "always")]);
    assert_eq!(keeper.gate(Some(&always), &changes, at(T0), at(T0)), Gate::Go);
}

#[test]
fn the_interval_counts_from_the_last_reload_this_process_made() {
    let keeper = Timekeeper::new(None, None);
    let view = view(&[(MIN_INTERVAL, "10m")]);
    keeper.reloaded(Some(&view), &view.key, at(T0));
    let later = at("2026-12-01T10:04:00Z");
    let gate = keeper.gate(Some(&view), &[change("settings")], later, later);
    assert_eq!(
        gate,
        held("2026-12-01T10:04:00Z", "2026-12-01T10:10:00Z", HoldReason::MinInterval, &["settings"])
    );
    let after = at("2026-12-01T10:10:00Z");
    assert_eq!(keeper.gate(Some(&view), &[change("settings")], later, after), Gate::Go);
}

#[test]
fn the_loop_guard_trips_past_its_threshold_and_forgets_on_a_stop() {
    let guard = LoopGuard { max_reloads: 3, within: Duration::from_secs(60) };
    let keeper = Timekeeper::new(None, Some(guard));
    let view = view(&[]);
    let changes = [change("churn")];
    let second = |s: i64| at(T0).checked_add(jiff::SignedDuration::from_secs(s)).unwrap();
    for s in 0..3 {
        assert_eq!(keeper.gate(Some(&view), &changes, second(s), second(s)), Gate::Go, "reload {s}");
        keeper.reloaded(Some(&view), &view.key, second(s));
    }
    let stop = LoopStop {
        at: second(3),
        reloads: 3,
        within: Duration::from_secs(60),
        resource: "ConfigMap/churn".to_owned(),
    };
    assert_eq!(keeper.gate(Some(&view), &changes, second(3), second(3)), Gate::Stop(stop));
    // Spaced out, the same count never trips.
    assert_eq!(keeper.gate(Some(&view), &changes, second(61), second(61)), Gate::Go);
    keeper.forget(&view.key);
    assert_eq!(
        keeper.gate(Some(&view), &changes, second(3), second(3)),
        Gate::Go,
        "a cleared stop counts anew"
    );
}
