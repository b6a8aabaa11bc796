use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::{Value, json};

use super::*;
use crate::annotations::LAST_RELOADED_FROM;
use crate::hash::DELETE_MARKER_HASH;
use crate::markers::{MarkerAction, MarkerChange, apply_to_template};
use crate::model::{ContentHash, ReloadStrategy, ResourceKey, ResourceKind};

const NOW: i64 = 1_723_000_000;
const H1: ContentHash = ContentHash([0x11; 20]);
const H2: ContentHash = ContentHash([0x22; 20]);
const ENV_CM: &str = "STAKATER_APP_CONFIG_CONFIGMAP";
const ENV_SECRET: &str = "STAKATER_DB_SECRET";
const ANNOTATION_PATH: &str = "/spec/template/metadata/annotations/reloader.stakater.com~1last-reloaded-from";

fn cm() -> ResourceKey {
    ResourceKey::new(ResourceKind::ConfigMap, "ns", "app-config")
}

fn secret() -> ResourceKey {
    ResourceKey::new(ResourceKind::Secret, "ns", "db")
}

fn change(
    resource: ResourceKey,
    action: MarkerAction,
    strategy: ReloadStrategy,
    container: u16,
) -> MarkerChange {
    MarkerChange { resource, action, strategy, container }
}

fn set_env(resource: ResourceKey, hash: ContentHash, container: u16) -> MarkerChange {
    change(resource, MarkerAction::Set(hash), ReloadStrategy::EnvVars, container)
}

fn remove_env(resource: ResourceKey) -> MarkerChange {
    change(resource, MarkerAction::Remove, ReloadStrategy::EnvVars, 0)
}

fn annotation_value(resource: &ResourceKey, hash: ContentHash, container: &str) -> String {
    crate::markers::annotation_marker_value(resource, &hash, container, NOW)
}

fn template(value: Value) -> PodTemplateSpec {
    serde_json::from_value(value).expect("valid pod template")
}

fn two_containers() -> Value {
    json!({
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [
            {"name": "app", "image": "app:1", "env": [{"name": "LOG", "value": "info"}]},
            {"name": "sidecar", "image": "proxy:1"}
        ]}
    })
}

fn test_op() -> Value {
    json!({"op": "test", "path": "/metadata/resourceVersion", "value": "42"})
}

/// The patch applied (by the json-patch crate kube uses) to an object holding `before` gives
/// exactly the template `apply_to_template` computes: the operations are valid and complete.
fn assert_patch_reproduces(before: &PodTemplateSpec, changes: &[MarkerChange], patch: &Value) {
    let mut expected = before.clone();
    apply_to_template(&mut expected, changes, &AnnotationKeys::default(), NOW);
    let mut object = json!({
        "metadata": {"name": "x", "resourceVersion": "42"},
        "spec": {"replicas": 2, "template": before},
    });
    let ops: json_patch::Patch = serde_json::from_value(patch.clone()).expect("well-formed JSON patch");
    json_patch::patch(&mut object, &ops).expect("patch applies");
    assert_eq!(object["spec"]["template"], serde_json::to_value(&expected).unwrap());
    assert_eq!(object["spec"]["replicas"], 2, "fields outside the template are untouched");
}

#[test]
fn json_patches_are_exact() {
    let keys = AnnotationKeys::default();
    let with_marker = json!({
        "metadata": {"annotations": {"keep": "me"}},
        "spec": {"containers": [
            {"name": "app", "env": [
                {"name": "LOG", "value": "info"},
                {"name": ENV_CM, "value": H1.to_hex()},
                {"name": ENV_SECRET, "value": H1.to_hex()}
            ]},
            {"name": "sidecar", "env": [{"name": ENV_CM, "value": H1.to_hex()}]}
        ]}
    });
    let cases: Vec<(&str, Value, Vec<MarkerChange>, Value)> = vec![
        (
            "env set appends to an existing env list",
            two_containers(),
            vec![set_env(cm(), H1, 0)],
            json!([test_op(), {"op": "add", "path": "/spec/template/spec/containers/0/env/-",
                "value": {"name": ENV_CM, "value": H1.to_hex()}}]),
        ),
        (
            "env set creates a missing env list",
            two_containers(),
            vec![set_env(cm(), H1, 1)],
            json!([test_op(), {"op": "add", "path": "/spec/template/spec/containers/1/env",
                "value": [{"name": ENV_CM, "value": H1.to_hex()}]}]),
        ),
        (
            "env update replaces the entry in place",
            with_marker.clone(),
            vec![set_env(cm(), H2, 0)],
            json!([test_op(), {"op": "replace", "path": "/spec/template/spec/containers/0/env/1",
                "value": {"name": ENV_CM, "value": H2.to_hex()}}]),
        ),
        (
            "env remove deletes from every container, highest index first",
            with_marker.clone(),
            vec![remove_env(cm())],
            json!([test_op(),
                {"op": "remove", "path": "/spec/template/spec/containers/0/env/1"},
                {"op": "remove", "path": "/spec/template/spec/containers/1/env/0"}]),
        ),
        (
            "two resources, two removals in one container",
            with_marker.clone(),
            vec![remove_env(secret()), remove_env(cm())],
            json!([test_op(),
                {"op": "remove", "path": "/spec/template/spec/containers/0/env/2"},
                {"op": "remove", "path": "/spec/template/spec/containers/0/env/1"},
                {"op": "remove", "path": "/spec/template/spec/containers/1/env/0"}]),
        ),
        (
            "two resources in one patch",
            two_containers(),
            vec![set_env(cm(), H1, 0), set_env(secret(), H2, 1)],
            json!([test_op(),
                {"op": "add", "path": "/spec/template/spec/containers/0/env/-",
                    "value": {"name": ENV_CM, "value": H1.to_hex()}},
                {"op": "add", "path": "/spec/template/spec/containers/1/env",
                    "value": [{"name": ENV_SECRET, "value": H2.to_hex()}]}]),
        ),
        (
            "annotation creates missing template metadata",
            json!({"spec": {"containers": [{"name": "app"}]}}),
            vec![change(cm(), MarkerAction::Set(H1), ReloadStrategy::Annotations, 0)],
            json!([test_op(), {"op": "add", "path": "/spec/template/metadata",
                "value": {"annotations": {LAST_RELOADED_FROM: annotation_value(&cm(), H1, "app")}}}]),
        ),
        (
            "annotation creates a missing annotation map",
            two_containers(),
            vec![change(cm(), MarkerAction::Set(H1), ReloadStrategy::Annotations, 1)],
            json!([test_op(), {"op": "add", "path": "/spec/template/metadata/annotations",
                "value": {LAST_RELOADED_FROM: annotation_value(&cm(), H1, "sidecar")}}]),
        ),
        (
            "annotation added next to other annotations",
            with_marker.clone(),
            vec![change(cm(), MarkerAction::Set(H1), ReloadStrategy::Annotations, 0)],
            json!([test_op(), {"op": "add", "path": ANNOTATION_PATH,
                "value": annotation_value(&cm(), H1, "app")}]),
        ),
        (
            "delete under annotations replaces the marker with the delete hash",
            json!({
                "metadata": {"annotations": {LAST_RELOADED_FROM: annotation_value(&cm(), H1, "app")}},
                "spec": {"containers": [{"name": "app"}]}
            }),
            vec![change(cm(), MarkerAction::Remove, ReloadStrategy::Annotations, 0)],
            json!([test_op(), {"op": "replace", "path": ANNOTATION_PATH,
                "value": annotation_value(&cm(), DELETE_MARKER_HASH, "app")}]),
        ),
    ];
    for (name, before, changes, expected) in cases {
        let before = template(before);
        let patch = template_json_patch(&before, "/spec/template", "42", &changes, &keys, NOW)
            .unwrap_or_else(|| panic!("{name}: expected a patch"));
        assert_eq!(patch, expected, "{name}");
        assert_patch_reproduces(&before, &changes, &patch);
    }
}

#[test]
fn env_value_from_is_replaced_by_a_plain_value() {
    let before = template(json!({"spec": {"containers": [{"name": "app", "env": [
        {"name": ENV_CM, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    ]}]}}));
    let changes = [set_env(cm(), H1, 0)];
    let patch =
        template_json_patch(&before, "/spec/template", "42", &changes, &AnnotationKeys::default(), NOW)
            .unwrap();
    assert_eq!(
        patch,
        json!([test_op(), {"op": "replace", "path": "/spec/template/spec/containers/0/env/0",
            "value": {"name": ENV_CM, "value": H1.to_hex()}}])
    );
    assert_patch_reproduces(&before, &changes, &patch);
}

#[test]
fn nothing_to_write_when_current() {
    let keys = AnnotationKeys::default();
    let current = template(json!({
        "metadata": {"annotations": {LAST_RELOADED_FROM: annotation_value(&cm(), H1, "app")}},
        "spec": {"containers": [{"name": "app", "env": [{"name": ENV_CM, "value": H1.to_hex()}]}]}
    }));
    for changes in [
        vec![set_env(cm(), H1, 0)],
        vec![remove_env(secret())],
        vec![change(cm(), MarkerAction::Set(H1), ReloadStrategy::Annotations, 0)],
    ] {
        assert_eq!(template_json_patch(&current, "/spec/template", "42", &changes, &keys, NOW), None);
    }
}

#[test]
fn stale_resource_version_is_rejected_by_the_test_operation() {
    let before = template(two_containers());
    let patch = template_json_patch(
        &before,
        "/spec/template",
        "41",
        &[set_env(cm(), H1, 0)],
        &AnnotationKeys::default(),
        NOW,
    )
    .unwrap();
    let mut object = json!({"metadata": {"resourceVersion": "42"}, "spec": {"template": before}});
    let ops: json_patch::Patch = serde_json::from_value(patch).unwrap();
    assert!(json_patch::patch(&mut object, &ops).is_err());
}

#[test]
fn pointer_tokens_are_escaped() {
    assert_eq!(escape_pointer_token("plain"), "plain");
    assert_eq!(escape_pointer_token("a/b~c"), "a~1b~0c");
    assert_eq!(escape_pointer_token("~1"), "~01");
}
