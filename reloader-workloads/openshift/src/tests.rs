use reloader_core::annotations::{AnnotationKeys, LAST_RELOADED_FROM};
use reloader_core::hash::DELETE_MARKER_HASH;
use reloader_core::markers::{MarkerAction, MarkerChange, annotation_marker_value};
use reloader_core::model::{
    ContentHash, ReloadStrategy, ResourceKey, ResourceKind, WorkloadKey, WorkloadKind,
};
use reloader_core::workload::{PatchKind, Workload, WorkloadWrite, WriteContext, WriteError};
use serde_json::{Value, json};

use crate::{API_VERSION, DeploymentConfig, GROUP, KIND, PLURAL, VERSION};

const NOW_UNIX: i64 = 1_723_000_000;
const H1: ContentHash = ContentHash([0x11; 20]);
const H2: ContentHash = ContentHash([0x22; 20]);
const ENV_CM: &str = "STAKATER_APP_CONFIG_CONFIGMAP";
const ENV_SECRET: &str = "STAKATER_DB_SECRET";
const ANNOTATION: &str = "/spec/template/metadata/annotations/reloader.stakater.com~1last-reloaded-from";

fn cm() -> ResourceKey {
    ResourceKey::new(ResourceKind::ConfigMap, "ns", "app-config")
}

fn secret() -> ResourceKey {
    ResourceKey::new(ResourceKind::Secret, "ns", "db")
}

fn set(resource: ResourceKey, hash: ContentHash, strategy: ReloadStrategy, container: u16) -> MarkerChange {
    MarkerChange { resource, action: MarkerAction::Set(hash), strategy, container }
}

fn remove(resource: ResourceKey, strategy: ReloadStrategy) -> MarkerChange {
    MarkerChange { resource, action: MarkerAction::Remove, strategy, container: 0 }
}

fn marker(resource: &ResourceKey, hash: ContentHash, container: &str) -> String {
    annotation_marker_value(resource, &hash, container, NOW_UNIX)
}

/// A DeploymentConfig as the API server returns it, around `template`.
fn object(template: Value) -> Value {
    json!({
        "apiVersion": "apps.openshift.io/v1",
        "kind": "DeploymentConfig",
        "metadata": {"name": "frontend", "namespace": "ns", "resourceVersion": "31", "uid": "dc-uid"},
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

fn template(annotations: Option<Value>, app_env: Value) -> Value {
    let mut metadata = json!({"labels": {"app": "frontend"}});
    if let Some(annotations) = annotations {
        metadata["annotations"] = annotations;
    }
    json!({"metadata": metadata, "spec": {"containers": [
        {"name": "web", "image": "web:1", "env": app_env},
        {"name": "proxy", "image": "proxy:1"}
    ]}})
}

fn plain() -> Value {
    template(None, json!([{"name": "LOG", "value": "info"}]))
}

fn marked() -> Value {
    template(
        Some(json!({LAST_RELOADED_FROM: marker(&cm(), H1, "web")})),
        json!([{"name": "LOG", "value": "info"}, {"name": ENV_CM, "value": H1.to_hex()}]),
    )
}

fn dc(template: Value) -> DeploymentConfig {
    serde_json::from_value(object(template)).expect("valid DeploymentConfig")
}

fn reload(object: &DeploymentConfig, changes: &[MarkerChange]) -> Result<Option<Value>, WriteError> {
    let keys = AnnotationKeys::default();
    let ctx = WriteContext { keys: &keys, now_unix: NOW_UNIX, now_rfc3339: "2024-08-07T03:06:40Z".into() };
    Ok(object.reload_write(changes, &ctx)?.map(|write| match write {
        WorkloadWrite::Patch { kind: PatchKind::Json, body } => body,
        other => panic!("a DeploymentConfig reload is a JSON patch, got {other:?}"),
    }))
}

fn ops(ops: Value) -> Value {
    let mut all = vec![json!({"op": "test", "path": "/metadata/resourceVersion", "value": "31"})];
    all.extend(ops.as_array().unwrap().iter().cloned());
    Value::Array(all)
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
            let mut served = object(before);
            let patch: json_patch::Patch = serde_json::from_value(patch).unwrap();
            json_patch::patch(&mut served, &patch).unwrap_or_else(|e| panic!("{name}: {e}"));
            let after = served["spec"]["template"].take();
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
    assert_eq!(
        (GROUP, VERSION, API_VERSION, KIND, PLURAL),
        ("apps.openshift.io", "v1", "apps.openshift.io/v1", "DeploymentConfig", "deploymentconfigs")
    );
    assert_eq!(<DeploymentConfig as k8s_openapi::Resource>::URL_PATH_SEGMENT, PLURAL);
}
