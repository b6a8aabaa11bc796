use k8s_openapi::Resource;
use reloader_core::annotations::{AnnotationKeys, LAST_RELOADED_FROM};
use reloader_core::hash::DELETE_MARKER_HASH;
use reloader_core::markers::MarkerChange;
use reloader_core::model::{ReloadStrategy, ResourceKind, WorkloadKey, WorkloadKind};
use reloader_core::skeleton::skeleton;
use reloader_core::workload::{PatchKind, Workload, WorkloadWrite, WriteError};
use reloader_workload_testkit::*;
use serde_json::{Value, json};

use crate::DeploymentConfig;

const ANNOTATION: &str = "/spec/template/metadata/annotations/reloader.stakater.com~1last-reloaded-from";

/// A DeploymentConfig as the API server returns it, around `template`.
fn object(template: Value) -> Value {
    json!({
        "apiVersion": "apps.openshift.io/v1",
        "kind": "DeploymentConfig",
        "metadata": {"name": "frontend", "namespace": "ns", "resourceVersion": "31", "uid": "00000000-0000-4000-8000-000000000031"},
        "spec": {
            "replicas": 2,
            "selector": {"app": "frontend"},
            "strategy": {"type": "Rolling", "rollingParams": {"maxSurge": "25%"}},
            "triggers": [{"type": "ConfigChange"}],
            "template": template,
        },
        "status": {"latestVersion": 3, "observedGeneration": 5},
    })
}

fn plain() -> Value {
    unmarked_web_proxy("frontend")
}

fn marked() -> Value {
    marked_web_proxy("frontend")
}

fn dc(template: Value) -> DeploymentConfig {
    serde_json::from_value(object(template)).expect("valid DeploymentConfig")
}

/// The write for `object`, checked to be the same when built from its view (no read).
fn reload(object: &DeploymentConfig, changes: &[MarkerChange]) -> Result<Option<Value>, WriteError> {
    let keys = AnnotationKeys::default();
    let ctx = write_context(&keys);
    let read = object.reload_write(changes, &ctx);
    let view = object.view(&keys);
    let cached = DeploymentConfig::from_skeleton(skeleton(&view, &keys).expect("uid and resourceVersion"));
    assert_eq!(cached.reload_write(changes, &ctx), read, "from the view, {changes:?}");
    Ok(read?.map(|write| match write {
        WorkloadWrite::Patch { kind: PatchKind::Json, body, .. } => body,
        other => panic!("a DeploymentConfig reload is a JSON patch, got {other:?}"),
    }))
}

fn ops(ops: Value) -> Value {
    guarded_json_patch("31", ops)
}

#[test]
fn reload_writes_are_exact_json_patches() {
    use ReloadStrategy::{Annotations, EnvVars};
    let containers = "/spec/template/spec/containers";
    let cases: Vec<(&str, Value, Vec<MarkerChange>, Option<Value>)> = vec![
        (
            "env-vars set",
            plain(),
            vec![set(cm(), H1, EnvVars, 0)],
            Some(ops(json!([{"op": "add", "path": format!("{containers}/0/env/-"),
                "value": {"name": ENV_CM, "value": H1.to_hex()}}]))),
        ),
        (
            "env-vars update",
            marked(),
            vec![set(cm(), H2, EnvVars, 0)],
            Some(ops(json!([{"op": "replace", "path": format!("{containers}/0/env/1"),
                "value": {"name": ENV_CM, "value": H2.to_hex()}}]))),
        ),
        (
            "two resources, one patch",
            plain(),
            vec![set(cm(), H1, EnvVars, 0), set(secret(), H2, EnvVars, 1)],
            Some(ops(json!([
                {"op": "add", "path": format!("{containers}/0/env/-"), "value": {"name": ENV_CM, "value": H1.to_hex()}},
                {"op": "add", "path": format!("{containers}/1/env"), "value": [{"name": ENV_SECRET, "value": H2.to_hex()}]}
            ]))),
        ),
        (
            "env-vars delete",
            marked(),
            vec![remove(cm(), EnvVars)],
            Some(ops(json!([{"op": "remove", "path": format!("{containers}/0/env/1")}]))),
        ),
        (
            "annotations set, creating the annotation map",
            plain(),
            vec![set(secret(), H2, Annotations, 1)],
            Some(ops(json!([{"op": "add", "path": "/spec/template/metadata/annotations",
                "value": {LAST_RELOADED_FROM: marker(&secret(), H2, "proxy")}}]))),
        ),
        (
            "annotations delete: the delete-marker hash",
            marked(),
            vec![remove(cm(), Annotations)],
            Some(ops(json!([{"op": "replace", "path": ANNOTATION,
                "value": marker(&cm(), DELETE_MARKER_HASH, "web")}]))),
        ),
        ("env-vars, already current", marked(), vec![set(cm(), H1, EnvVars, 0)], None),
        ("annotations, already current", marked(), vec![set(cm(), H1, Annotations, 0)], None),
        ("env-vars delete, nothing to remove", plain(), vec![remove(secret(), EnvVars)], None),
        ("no changes", plain(), vec![], None),
    ];
    for (name, before, changes, expected) in cases {
        let written = reload(&dc(before.clone()), &changes);
        assert_eq!(written, Ok(expected.clone()), "{name}");
        if let Some(patch) = expected {
            // Applied to the object as served, only the template's marker changes.
            let (after, served) = apply_json_patch(name, object(before), patch);
            assert_eq!(served, object(Value::Null), "{name}: nothing outside the template changes");
            let containers = after["spec"]["containers"].as_array().unwrap();
            assert_eq!(containers.len(), 2, "{name}");
            assert_eq!(containers[1]["image"], "proxy:1", "{name}");
        }
    }
}

#[test]
fn missing_templates_and_containers_are_errors() {
    let key = WorkloadKey::new(WorkloadKind::DeploymentConfig, "ns", "frontend");
    let change = [set(cm(), H1, ReloadStrategy::EnvVars, 0)];
    let no_containers = dc(json!({"spec": {"containers": []}}));
    assert_eq!(reload(&no_containers, &change), Err(WriteError::NoContainers(key.clone())));
    let mut no_template = dc(plain());
    no_template.spec.template = None;
    assert_eq!(reload(&no_template, &change), Err(WriteError::NoTemplate(key)));
}

#[test]
fn round_trips_without_losing_fields() {
    let served = object(marked());
    let parsed: DeploymentConfig = serde_json::from_value(served.clone()).unwrap();
    assert_eq!(serde_json::to_value(&parsed).unwrap(), served);
    assert_eq!(parsed.other["status"]["latestVersion"], 3);
    assert_eq!(parsed.spec.other["replicas"], 2);
    let built = DeploymentConfig::default();
    assert_eq!(serde_json::to_value(&built).unwrap()["apiVersion"], "apps.openshift.io/v1");
    assert_eq!(serde_json::to_value(&built).unwrap()["kind"], "DeploymentConfig");
}

#[test]
fn view_and_resource_identity() {
    let keys = AnnotationKeys::default();
    let mut paused = dc(marked());
    paused.spec.paused = Some(true);
    let view = paused.view(&keys);
    assert_eq!(view.key, WorkloadKey::new(WorkloadKind::DeploymentConfig, "ns", "frontend"));
    assert!(view.has_template && view.paused);
    assert_eq!(view.markers.env_value(ResourceKind::ConfigMap, "app-config"), Some(H1.to_hex().as_str()));
    type Dc = DeploymentConfig;
    assert_eq!(
        (Dc::GROUP, Dc::VERSION, Dc::API_VERSION, Dc::KIND, Dc::URL_PATH_SEGMENT),
        ("apps.openshift.io", "v1", "apps.openshift.io/v1", "DeploymentConfig", "deploymentconfigs")
    );
    assert_eq!((crate::API_VERSION, crate::KIND), (Dc::API_VERSION, Dc::KIND));
}
