use k8s_openapi::Resource;
use reloader_core::annotations::{AnnotationKeys, LAST_RELOADED_FROM};
use reloader_core::hash::DELETE_MARKER_HASH;
use reloader_core::markers::{MarkerAction, MarkerChange};
use reloader_core::model::{ReloadStrategy, ResourceKey, WorkloadKey, WorkloadKind};
use reloader_core::skeleton::skeleton;
use reloader_core::workload::{PatchKind, Precondition, Workload, WorkloadWrite, WriteError};
use reloader_workload_testkit::*;
use serde_json::{Map, Value, json};

use crate::Rollout;

const STRATEGY: &str = "reloader.stakater.com/rollout-strategy";

/// A Rollout as the API server returns it, with `annotations` and `template`.
fn object(annotations: Value, template: Value) -> Value {
    let mut spec = json!({
        "replicas": 3,
        "selector": {"matchLabels": {"app": "shop"}},
        "strategy": {"canary": {"steps": [{"setWeight": 20}, {"pause": {}}]}},
    });
    if !template.is_null() {
        spec["template"] = template;
    }
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {
            "name": "shop", "namespace": "ns", "resourceVersion": "77",
            "uid": "00000000-0000-4000-8000-000000000077", "annotations": annotations,
        },
        "spec": spec,
        "status": {"phase": "Healthy", "currentPodHash": "abc"},
    })
}

fn plain() -> Value {
    unmarked_web_proxy("shop")
}

fn marked() -> Value {
    marked_web_proxy("shop")
}

fn rollout(annotations: Value, template: Value) -> Rollout {
    serde_json::from_value(object(annotations, template)).expect("valid Rollout")
}

/// The write for `object`, checked to be the same when built from its view (no read).
fn reload(object: &Rollout, changes: &[MarkerChange]) -> Result<Option<WorkloadWrite>, WriteError> {
    let keys = AnnotationKeys::default();
    let ctx = write_context(&keys);
    let read = object.reload_write(changes, &ctx);
    let view = object.view(&keys);
    let cached = Rollout::from_skeleton(skeleton(&view, &keys).expect("uid and resourceVersion"));
    assert_eq!(cached.reload_write(changes, &ctx), read, "from the view, {changes:?}");
    read
}

fn json_patch(ops: Value) -> Option<WorkloadWrite> {
    Some(WorkloadWrite::Patch {
        kind: PatchKind::Json,
        body: guarded_json_patch("77", ops),
        precondition: Precondition::ResourceVersion("77".to_owned()),
    })
}

fn restart(recorded: String) -> Option<WorkloadWrite> {
    Some(WorkloadWrite::Patch {
        kind: PatchKind::Merge,
        body: json!({
            "metadata": {"annotations": {LAST_RELOADED_FROM: recorded}, "resourceVersion": "77"},
            "spec": {"restartAt": NOW},
        }),
        precondition: Precondition::ResourceVersion("77".to_owned()),
    })
}

fn restart_annotations(recorded: Option<String>) -> Value {
    let mut annotations = Map::new();
    annotations.insert(STRATEGY.into(), json!("restart"));
    if let Some(recorded) = recorded {
        annotations.insert(LAST_RELOADED_FROM.into(), json!(recorded));
    }
    Value::Object(annotations)
}

type Changes = Vec<MarkerChange>;
type Expected = Option<WorkloadWrite>;

#[test]
fn rollout_strategy_patches_the_template() {
    use ReloadStrategy::{Annotations, EnvVars};
    let containers = "/spec/template/spec/containers";
    let cases: Vec<(&str, Value, Value, Changes, Expected)> = vec![
        (
            "env-vars set",
            json!({}),
            plain(),
            vec![set(cm(), H1, EnvVars, 0)],
            json_patch(json!([{"op": "add", "path": format!("{containers}/0/env/-"),
                "value": {"name": ENV_CM, "value": H1.to_hex()}}])),
        ),
        (
            "explicit rollout strategy, two resources",
            json!({STRATEGY: "rollout"}),
            plain(),
            vec![set(cm(), H1, EnvVars, 0), set(secret(), H2, EnvVars, 1)],
            json_patch(json!([
                {"op": "add", "path": format!("{containers}/0/env/-"), "value": {"name": ENV_CM, "value": H1.to_hex()}},
                {"op": "add", "path": format!("{containers}/1/env"), "value": [{"name": ENV_SECRET, "value": H2.to_hex()}]}
            ])),
        ),
        (
            "env-vars delete",
            json!({}),
            marked(),
            vec![remove(cm(), EnvVars)],
            json_patch(json!([{"op": "remove", "path": format!("{containers}/0/env/1")}])),
        ),
        (
            "annotations set",
            json!({}),
            plain(),
            vec![set(cm(), H2, Annotations, 0)],
            json_patch(json!([{"op": "add", "path": "/spec/template/metadata/annotations",
                "value": {LAST_RELOADED_FROM: marker(&cm(), H2, "web")}}])),
        ),
        ("env-vars, already current", json!({}), marked(), vec![set(cm(), H1, EnvVars, 0)], None),
        ("annotations, already current", json!({}), marked(), vec![set(cm(), H1, Annotations, 0)], None),
    ];
    for (name, annotations, before, changes, expected) in cases {
        let written = reload(&rollout(annotations.clone(), before.clone()), &changes);
        assert_eq!(written, Ok(expected.clone()), "{name}");
        if let Some(WorkloadWrite::Patch { body, .. }) = expected {
            let (after, served) = apply_json_patch(name, object(annotations.clone(), before), body);
            let mut untouched = object(annotations, Value::Null);
            untouched["spec"]["template"] = Value::Null;
            assert_eq!(served, untouched, "{name}: nothing outside the template changes");
            assert_eq!(after["spec"]["containers"][1]["image"], "proxy:1", "{name}");
        }
    }
}

#[test]
fn restart_strategy_sets_restart_at_and_records_the_marker() {
    use ReloadStrategy::{Annotations, EnvVars};
    let recorded = |resource: ResourceKey, hash| Some(marker(&resource, hash, "web"));
    let cases: Vec<(&str, Option<String>, Changes, Expected)> = vec![
        (
            "env-vars, nothing recorded",
            None,
            vec![set(cm(), H1, EnvVars, 0)],
            restart(marker(&cm(), H1, "web")),
        ),
        (
            "annotations, on the second container",
            None,
            vec![set(cm(), H1, Annotations, 1)],
            restart(marker(&cm(), H1, "proxy")),
        ),
        (
            "env-vars, new hash",
            recorded(cm(), H1),
            vec![set(cm(), H2, EnvVars, 0)],
            restart(marker(&cm(), H2, "web")),
        ),
        ("env-vars, already recorded", recorded(cm(), H1), vec![set(cm(), H1, EnvVars, 0)], None),
        ("annotations, already recorded", recorded(cm(), H1), vec![set(cm(), H1, Annotations, 0)], None),
        (
            "another resource recorded",
            recorded(secret(), H1),
            vec![set(cm(), H1, EnvVars, 0)],
            restart(marker(&cm(), H1, "web")),
        ),
        (
            "env-vars delete of a recorded resource",
            recorded(cm(), H1),
            vec![remove(cm(), EnvVars)],
            restart(marker(&cm(), DELETE_MARKER_HASH, "web")),
        ),
        ("env-vars delete, nothing recorded", None, vec![remove(cm(), EnvVars)], None),
        (
            "env-vars delete, delete recorded",
            recorded(cm(), DELETE_MARKER_HASH),
            vec![remove(cm(), EnvVars)],
            None,
        ),
        (
            "annotations delete",
            recorded(cm(), H1),
            vec![remove(cm(), Annotations)],
            restart(marker(&cm(), DELETE_MARKER_HASH, "web")),
        ),
        (
            "annotations delete, delete recorded",
            recorded(cm(), DELETE_MARKER_HASH),
            vec![remove(cm(), Annotations)],
            None,
        ),
        (
            "two resources: one restart, the last recorded",
            None,
            vec![set(cm(), H1, EnvVars, 0), set(secret(), H2, EnvVars, 0)],
            restart(marker(&secret(), H2, "web")),
        ),
        (
            "two resources, the last already recorded: the other is",
            Some(marker(&secret(), H2, "web")),
            vec![set(cm(), H1, EnvVars, 0), set(secret(), H2, EnvVars, 0)],
            restart(marker(&cm(), H1, "web")),
        ),
    ];
    for (name, record, changes, expected) in cases {
        let written = reload(&rollout(restart_annotations(record), plain()), &changes);
        assert_eq!(written, Ok(expected), "{name}");
    }
    let spaced = rollout(json!({STRATEGY: " restart "}), plain());
    assert_eq!(reload(&spaced, &[set(cm(), H1, EnvVars, 0)]), Ok(restart(marker(&cm(), H1, "web"))));
}

#[test]
fn restart_records_make_the_view_current() {
    let keys = AnnotationKeys::default();
    let restarted = rollout(restart_annotations(Some(marker(&cm(), H2, "web"))), marked());
    let view = restarted.view(&keys);
    assert!(view.restart_strategy);
    for strategy in [ReloadStrategy::EnvVars, ReloadStrategy::Annotations] {
        assert_eq!(view.markers.recorded_hash(&cm(), strategy), Some(H2), "{strategy:?}");
        let current = MarkerAction::Set(H2);
        assert!(view.markers.records(&cm(), &current, strategy), "{strategy:?}");
    }
    let deleted = rollout(restart_annotations(Some(marker(&cm(), DELETE_MARKER_HASH, "web"))), marked());
    let view = deleted.view(&keys);
    assert!(view.markers.records(&cm(), &MarkerAction::Remove, ReloadStrategy::EnvVars));
    assert!(view.markers.records(&cm(), &MarkerAction::Remove, ReloadStrategy::Annotations));
    // Under the default strategy the metadata annotation means nothing: the template is the record.
    let default_strategy = rollout(json!({LAST_RELOADED_FROM: marker(&cm(), H2, "web")}), marked());
    let view = default_strategy.view(&keys);
    assert_eq!(view.markers.recorded_hash(&cm(), ReloadStrategy::EnvVars), Some(H1));
    assert_eq!(view.markers.recorded_hash(&cm(), ReloadStrategy::Annotations), Some(H1));
}

#[test]
fn workload_ref_rollouts_and_missing_containers_are_skipped() {
    let keys = AnnotationKeys::default();
    let key = WorkloadKey::new(WorkloadKind::Rollout, "ns", "shop");
    let change = [set(cm(), H1, ReloadStrategy::EnvVars, 0)];
    let mut workload_ref = object(json!({}), Value::Null);
    workload_ref["spec"]["workloadRef"] =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "shop"});
    let workload_ref: Rollout = serde_json::from_value(workload_ref).unwrap();
    assert_eq!(workload_ref.pod_template(), None);
    let view = workload_ref.view(&keys);
    assert!(!view.has_template && view.containers.is_empty());
    assert_eq!(reload(&workload_ref, &change), Err(WriteError::NoTemplate(key.clone())));
    let mut restart_ref = workload_ref.clone();
    restart_ref.metadata.annotations = Some([(STRATEGY.to_string(), "restart".to_string())].into());
    assert_eq!(reload(&restart_ref, &change), Err(WriteError::NoTemplate(key.clone())));
    let no_containers = rollout(json!({}), json!({"spec": {"containers": []}}));
    assert_eq!(reload(&no_containers, &change), Err(WriteError::NoContainers(key)));
}

#[test]
fn round_trips_without_losing_fields() {
    let mut served = object(json!({}), marked());
    served["spec"]["restartAt"] = json!(NOW);
    served["spec"]["paused"] = json!(true);
    let parsed: Rollout = serde_json::from_value(served.clone()).unwrap();
    assert_eq!(serde_json::to_value(&parsed).unwrap(), served);
    assert_eq!(parsed.spec.restart_at.as_deref(), Some(NOW));
    assert!(parsed.paused());
    assert!(parsed.view(&AnnotationKeys::default()).paused);
    assert_eq!(parsed.other["status"]["phase"], "Healthy");
    assert!(format!("{parsed:?}").starts_with("Rollout { api_version: "), "named after the kind");
    assert_eq!(serde_json::to_value(Rollout::default()).unwrap()["apiVersion"], "argoproj.io/v1alpha1");
    assert_eq!(
        (Rollout::GROUP, Rollout::VERSION, Rollout::API_VERSION, Rollout::KIND, Rollout::URL_PATH_SEGMENT),
        ("argoproj.io", "v1alpha1", "argoproj.io/v1alpha1", "Rollout", "rollouts")
    );
    assert_eq!((crate::API_VERSION, crate::KIND), (Rollout::API_VERSION, Rollout::KIND));
}
