use std::time::{Duration, SystemTime};

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use reloader_core::annotations::{AnnotationKeys, LAST_RELOADED_FROM};
use reloader_core::hash::DELETE_MARKER_HASH;
use reloader_core::markers::MarkerChange;
use reloader_core::model::{ReloadStrategy, ResourceKind, WorkloadKind};
use reloader_core::workload::{PatchKind, Precondition, Workload, WorkloadWrite, WriteError};
use reloader_workload_testkit::*;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use reloader_core::skeleton::skeleton;

use crate::{AppsKind, AppsWorkload, PauseDeadline, pause_deadline};

const PAUSE_PERIOD: &str = "deployment.reloader.stakater.com/pause-period";
const PAUSED_AT: &str = "deployment.reloader.stakater.com/paused-at";
const UID: &str = "00000000-0000-4000-8000-000000000007";
/// The test objects' resourceVersion, which guards every write that carries the time.
const VERSION: &str = "7";

/// An object of any apps/v1 kind around `template`, with `annotations` and `paused` on it.
fn object<K: DeserializeOwned>(kind: &str, annotations: Value, paused: Option<bool>, template: Value) -> K {
    let mut spec = json!({"selector": {"matchLabels": {"app": "web"}}, "template": template});
    if let Some(paused) = paused {
        spec["paused"] = json!(paused);
    }
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {
            "name": "web", "namespace": "ns", "uid": UID, "resourceVersion": VERSION, "annotations": annotations,
        },
        "spec": spec,
    }))
    .expect("valid apps/v1 object")
}

/// Containers `app` (with `app_env`) and `sidecar`, labelled `app: web`.
fn template(annotations: Option<Value>, app_env: Value) -> Value {
    let containers = json!([container("app", "app:1", Some(app_env)), container("sidecar", "proxy:1", None)]);
    pod_template("web", annotations, containers)
}

fn plain_template() -> Value {
    template(None, json!([env_var("LOG", "info")]))
}

fn reloaded_template() -> Value {
    template(
        Some(marker_annotation(&cm(), H1, "app")),
        json!([env_var("LOG", "info"), env_var(ENV_CM, H1.to_hex())]),
    )
}

fn strategic(template_patch: Value) -> Option<WorkloadWrite> {
    Some(WorkloadWrite::Patch {
        kind: PatchKind::Strategic,
        body: json!({"spec": {"template": template_patch}}),
        precondition: Precondition::None,
    })
}

/// The write for `object`, checked to be the same when built from its view (no read).
fn reload<K: AppsKind>(object: &K, changes: &[MarkerChange]) -> Result<Option<WorkloadWrite>, WriteError> {
    let keys = AnnotationKeys::default();
    let ctx = write_context(&keys);
    let read = AppsWorkload(object).reload_write(changes, &ctx);
    let cached = from_view(object);
    assert_eq!(AppsWorkload(&cached).reload_write(changes, &ctx), read, "from the view, {changes:?}");
    read
}

/// The object `object`'s view stands for.
fn from_view<K: AppsKind>(object: &K) -> K {
    let keys = AnnotationKeys::default();
    let view = AppsWorkload(object).view(&keys);
    K::from_skeleton(skeleton(&view, &keys).expect("the test objects have a uid and a resourceVersion"))
}

/// `strategic`, guarded by the object's resourceVersion (a write that carries the time).
fn guarded_strategic(template_patch: Value) -> Option<WorkloadWrite> {
    Some(WorkloadWrite::Patch {
        kind: PatchKind::Strategic,
        body: json!({"metadata": {"resourceVersion": VERSION}, "spec": {"template": template_patch}}),
        precondition: Precondition::ResourceVersion(VERSION.to_owned()),
    })
}

type WriteResult = Result<Option<WorkloadWrite>, WriteError>;

/// The write each apps/v1 kind produces for the same object and changes.
fn write_per_kind(
    annotations: Value,
    template: Value,
    changes: &[MarkerChange],
) -> Vec<(WorkloadKind, WriteResult)> {
    let deployment: Deployment = object("Deployment", annotations.clone(), None, template.clone());
    let daemon_set: DaemonSet = object("DaemonSet", annotations.clone(), None, template.clone());
    let stateful_set: StatefulSet = object("StatefulSet", annotations, None, template);
    vec![
        (WorkloadKind::Deployment, reload(&deployment, changes)),
        (WorkloadKind::DaemonSet, reload(&daemon_set, changes)),
        (WorkloadKind::StatefulSet, reload(&stateful_set, changes)),
    ]
}

#[test]
fn reload_writes_are_exact_strategic_patches() {
    use ReloadStrategy::{Annotations, EnvVars};
    let cases: Vec<(&str, Value, Vec<MarkerChange>, Option<WorkloadWrite>)> = vec![
        (
            "env-vars set: only the touched container and env entry",
            plain_template(),
            vec![set(cm(), H1, EnvVars, 0)],
            strategic(json!({"spec": {"containers": [
                {"name": "app", "env": [{"name": ENV_CM, "value": H1.to_hex()}]}
            ]}})),
        ),
        (
            "env-vars set on the second container",
            plain_template(),
            vec![set(cm(), H1, EnvVars, 1)],
            strategic(json!({"spec": {"containers": [
                {"name": "sidecar", "env": [{"name": ENV_CM, "value": H1.to_hex()}]}
            ]}})),
        ),
        (
            "env-vars update of an existing marker",
            reloaded_template(),
            vec![set(cm(), H2, EnvVars, 0)],
            strategic(json!({"spec": {"containers": [
                {"name": "app", "env": [{"name": ENV_CM, "value": H2.to_hex()}]}
            ]}})),
        ),
        (
            "env-vars delete: $patch delete of the marker",
            reloaded_template(),
            vec![remove(cm(), EnvVars)],
            strategic(json!({"spec": {"containers": [
                {"name": "app", "env": [{"name": ENV_CM, "$patch": "delete"}]}
            ]}})),
        ),
        (
            "two resources, one write",
            plain_template(),
            vec![set(cm(), H1, EnvVars, 0), set(secret(), H2, EnvVars, 1)],
            strategic(json!({"spec": {"containers": [
                {"name": "app", "env": [{"name": ENV_CM, "value": H1.to_hex()}]},
                {"name": "sidecar", "env": [{"name": ENV_SECRET, "value": H2.to_hex()}]}
            ]}})),
        ),
        (
            "two resources, one already current: only the other is written",
            reloaded_template(),
            vec![set(cm(), H1, EnvVars, 0), set(secret(), H2, EnvVars, 0)],
            strategic(json!({"spec": {"containers": [
                {"name": "app", "env": [{"name": ENV_SECRET, "value": H2.to_hex()}]}
            ]}})),
        ),
        (
            "annotations set",
            plain_template(),
            vec![set(secret(), H2, Annotations, 1)],
            guarded_strategic(
                json!({"metadata": {"annotations": {LAST_RELOADED_FROM: marker(&secret(), H2, "sidecar")}}}),
            ),
        ),
        (
            "annotations delete: the delete-marker hash",
            reloaded_template(),
            vec![remove(cm(), Annotations)],
            guarded_strategic(json!({"metadata": {"annotations": {
                LAST_RELOADED_FROM: marker(&cm(), DELETE_MARKER_HASH, "app")
            }}})),
        ),
        ("env-vars set, already current", reloaded_template(), vec![set(cm(), H1, EnvVars, 0)], None),
        ("env-vars delete, marker absent", plain_template(), vec![remove(cm(), EnvVars)], None),
        ("annotations set, already current", reloaded_template(), vec![set(cm(), H1, Annotations, 0)], None),
        ("no changes", plain_template(), vec![], None),
    ];
    for (name, template, changes, expected) in cases {
        for (kind, write) in write_per_kind(json!({}), template.clone(), &changes) {
            assert_eq!(write, Ok(expected.clone()), "{kind}: {name}");
        }
    }
}

#[test]
fn missing_templates_and_containers_are_errors() {
    let change = [set(cm(), H1, ReloadStrategy::EnvVars, 0)];
    for (kind, write) in write_per_kind(json!({}), json!({"spec": {"containers": []}}), &change) {
        let key = reloader_core::model::WorkloadKey::new(kind, "ns", "web");
        assert_eq!(write, Err(WriteError::NoContainers(key)), "{kind}");
    }
    let out_of_range = [set(cm(), H1, ReloadStrategy::EnvVars, 2)];
    for (kind, write) in write_per_kind(json!({}), plain_template(), &out_of_range) {
        let workload = reloader_core::model::WorkloadKey::new(kind, "ns", "web");
        assert_eq!(write, Err(WriteError::NoSuchContainer { workload, index: 2 }), "{kind}");
    }
    let no_spec: Deployment = serde_json::from_value(
        json!({"metadata": {"name": "web", "namespace": "ns", "uid": UID, "resourceVersion": VERSION}}),
    )
    .unwrap();
    let key = reloader_core::model::WorkloadKey::new(WorkloadKind::Deployment, "ns", "web");
    assert_eq!(reload(&no_spec, &change), Err(WriteError::NoTemplate(key)));
}

#[test]
fn views_reflect_each_kind() {
    let keys = AnnotationKeys::default();
    let annotations = json!({"reloader.stakater.com/auto": "true"});
    let deployment: Deployment = object("Deployment", annotations.clone(), Some(true), reloaded_template());
    let view = AppsWorkload(&deployment).view(&keys);
    assert_eq!(view.key.kind, WorkloadKind::Deployment);
    assert!(view.paused && view.has_template);
    assert_eq!(view.containers, vec!["app".into(), "sidecar".into()]);
    assert_eq!(view.markers.env_value(ResourceKind::ConfigMap, "app-config"), Some(H1.to_hex().as_str()));
    assert_eq!(view.metadata_rules.auto.as_deref(), Some("true"));
    let stateful_set: StatefulSet = object("StatefulSet", annotations, None, plain_template());
    let view = AppsWorkload(&stateful_set).view(&keys);
    assert_eq!(view.key.kind, WorkloadKind::StatefulSet);
    assert!(!view.paused);
}

fn deployment(annotations: Value, paused: Option<bool>) -> Deployment {
    object("Deployment", annotations, paused, plain_template())
}

#[test]
fn pause_period_pauses_in_the_reload_patch() {
    let change = [set(cm(), H1, ReloadStrategy::EnvVars, 0)];
    let env_patch = json!({"containers": [{"name": "app", "env": [{"name": ENV_CM, "value": H1.to_hex()}]}]});
    let paused_and_reloaded = Some(WorkloadWrite::Patch {
        kind: PatchKind::Strategic,
        body: json!({
            "metadata": {"annotations": {PAUSED_AT: NOW}, "resourceVersion": VERSION},
            "spec": {"paused": true, "template": {"spec": env_patch}},
        }),
        precondition: Precondition::ResourceVersion(VERSION.to_owned()),
    });
    let reload_only = strategic(json!({"spec": env_patch}));
    let cases = [
        ("pause period, running", json!({PAUSE_PERIOD: "5m"}), None, &paused_and_reloaded),
        ("pause period, paused: false", json!({PAUSE_PERIOD: "1m30s"}), Some(false), &paused_and_reloaded),
        (
            "stale paused-at on a running Deployment is renewed",
            json!({PAUSE_PERIOD: "5m", PAUSED_AT: "2020-01-01T00:00:00Z"}),
            None,
            &paused_and_reloaded,
        ),
        ("paused by a user: left alone", json!({PAUSE_PERIOD: "5m"}), Some(true), &reload_only),
        (
            "paused by reloader: paused-at keeps counting from the first change",
            json!({PAUSE_PERIOD: "5m", PAUSED_AT: "2024-08-07T03:05:00Z"}),
            Some(true),
            &reload_only,
        ),
        ("no pause period", json!({}), None, &reload_only),
        (
            "unparsable pause period: reload without pausing",
            json!({PAUSE_PERIOD: "soon"}),
            None,
            &reload_only,
        ),
        ("zero pause period", json!({PAUSE_PERIOD: "0s"}), None, &reload_only),
    ];
    for (name, annotations, paused, expected) in cases {
        assert_eq!(reload(&deployment(annotations, paused), &change), Ok(expected.clone()), "{name}");
    }
    let current: Deployment = object("Deployment", json!({PAUSE_PERIOD: "5m"}), None, reloaded_template());
    assert_eq!(reload(&current, &change), Ok(None), "nothing to reload: no pause either");
}

#[test]
fn pause_period_is_for_deployments_only() {
    let change = [set(cm(), H1, ReloadStrategy::EnvVars, 0)];
    let expected = strategic(json!({"spec": {"containers": [
        {"name": "app", "env": [{"name": ENV_CM, "value": H1.to_hex()}]}
    ]}}));
    let daemon_set: DaemonSet = object("DaemonSet", json!({PAUSE_PERIOD: "5m"}), None, plain_template());
    assert_eq!(reload(&daemon_set, &change), Ok(expected.clone()));
    let stateful_set: StatefulSet =
        object("StatefulSet", json!({PAUSE_PERIOD: "5m"}), None, plain_template());
    assert_eq!(reload(&stateful_set, &change), Ok(expected));
    let keys = AnnotationKeys::default();
    let ctx = write_context(&keys);
    let daemon_set: DaemonSet = object("DaemonSet", json!({PAUSED_AT: NOW}), None, plain_template());
    assert_eq!(AppsWorkload(&daemon_set).resume_write(&ctx), None);
}

#[test]
fn resume_unpauses_only_what_reloader_paused() {
    let keys = AnnotationKeys::default();
    let ctx = write_context(&keys);
    let resume = Some(WorkloadWrite::Patch {
        kind: PatchKind::Merge,
        body: json!({
            "metadata": {"annotations": {PAUSED_AT: null}, "resourceVersion": VERSION},
            "spec": {"paused": false},
        }),
        precondition: Precondition::ResourceVersion(VERSION.to_owned()),
    });
    let cases = [
        ("ours", json!({PAUSE_PERIOD: "5m", PAUSED_AT: NOW}), true, &resume),
        ("resumed by hand: the stale annotation goes", json!({PAUSED_AT: NOW}), false, &resume),
        ("a user's", json!({PAUSE_PERIOD: "5m"}), true, &None),
    ];
    for (name, annotations, paused, expected) in cases {
        let d = deployment(annotations, Some(paused));
        assert_eq!(AppsWorkload(&d).resume_write(&ctx), *expected, "{name}");
        assert_eq!(AppsWorkload(&from_view(&d)).resume_write(&ctx), *expected, "{name}, from the view");
    }
}

#[test]
fn pause_deadlines_come_from_the_annotations() {
    let keys = AnnotationKeys::default();
    let at = |s: &str| SystemTime::from(chrono::DateTime::parse_from_rfc3339(s).unwrap());
    let cases = [
        (
            "paused by reloader",
            json!({PAUSE_PERIOD: "5m", PAUSED_AT: "2024-08-07T03:06:40Z"}),
            Some(PauseDeadline { paused_at: at(NOW), period: Duration::from_secs(300) }),
        ),
        (
            "offsets are honoured",
            json!({PAUSE_PERIOD: "1h", PAUSED_AT: "2024-08-07T05:06:40+02:00"}),
            Some(PauseDeadline { paused_at: at(NOW), period: Duration::from_secs(3600) }),
        ),
        (
            "pause period removed while paused: resume at once",
            json!({PAUSED_AT: NOW}),
            Some(PauseDeadline { paused_at: at(NOW), period: Duration::ZERO }),
        ),
        (
            "unreadable paused-at: resume at once",
            json!({PAUSE_PERIOD: "5m", PAUSED_AT: "yesterday"}),
            Some(PauseDeadline { paused_at: SystemTime::UNIX_EPOCH, period: Duration::from_secs(300) }),
        ),
        ("never paused", json!({PAUSE_PERIOD: "5m"}), None),
    ];
    for (name, annotations, expected) in cases {
        let d = deployment(annotations, Some(true));
        assert_eq!(pause_deadline(&AppsWorkload(&d).view(&keys)), expected, "{name}");
    }
    let deadline = PauseDeadline { paused_at: at(NOW), period: Duration::from_secs(300) };
    assert_eq!(deadline.resume_at(), at("2024-08-07T03:11:40Z"));
    let daemon_set: DaemonSet = object("DaemonSet", json!({PAUSED_AT: NOW}), None, plain_template());
    assert_eq!(pause_deadline(&AppsWorkload(&daemon_set).view(&keys)), None);
}
