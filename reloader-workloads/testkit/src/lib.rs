//! Fixtures shared by the workload backends' unit tests: the resources that change, the marker
//! changes a reload applies, a fixed clock, and JSON builders of pod templates, containers and
//! env entries, so each backend's tests spell out only the object around the template.
//!
//! The fixtures are JSON (`serde_json::Value`): each test deserializes its object from what the
//! API server would return, and expected writes are compared as JSON too.

use reloader_core::annotations::{AnnotationKeys, LAST_RELOADED_FROM};
use reloader_core::markers::annotation_marker_value;
use reloader_core::markers::{MarkerAction, MarkerChange};
use reloader_core::model::{ContentHash, ReloadStrategy, ResourceKey, ResourceKind};
use reloader_core::workload::WriteContext;
use serde_json::{Value, json};

/// The fixed "now" of every write, as Unix seconds and as RFC 3339.
pub const NOW_UNIX: i64 = 1_723_000_000;
pub const NOW: &str = "2024-08-07T03:06:40Z";
pub const H1: ContentHash = ContentHash([0x11; 20]);
pub const H2: ContentHash = ContentHash([0x22; 20]);
/// The env-var marker names of [`cm`] and [`secret`].
pub const ENV_CM: &str = "STAKATER_APP_CONFIG_CONFIGMAP";
pub const ENV_SECRET: &str = "STAKATER_DB_SECRET";

/// The ConfigMap `ns/app-config`.
pub fn cm() -> ResourceKey {
    ResourceKey::new(ResourceKind::ConfigMap, "ns", "app-config")
}

/// The Secret `ns/db`.
pub fn secret() -> ResourceKey {
    ResourceKey::new(ResourceKind::Secret, "ns", "db")
}

/// `resource` now hashes to `hash`: record it on container `container`.
pub fn set(
    resource: ResourceKey,
    hash: ContentHash,
    strategy: ReloadStrategy,
    container: u16,
) -> MarkerChange {
    MarkerChange { resource, action: MarkerAction::Set(hash), strategy, container }
}

/// `resource` was deleted.
pub fn remove(resource: ResourceKey, strategy: ReloadStrategy) -> MarkerChange {
    MarkerChange { resource, action: MarkerAction::Remove, strategy, container: 0 }
}

/// The `last-reloaded-from` value recording `resource` at `hash` on `container`, at [`NOW_UNIX`].
pub fn marker(resource: &ResourceKey, hash: ContentHash, container: &str) -> String {
    annotation_marker_value(resource, &hash, container, NOW_UNIX)
}

/// The annotation map holding just [`marker`].
pub fn marker_annotation(resource: &ResourceKey, hash: ContentHash, container: &str) -> Value {
    json!({LAST_RELOADED_FROM: marker(resource, hash, container)})
}

pub fn write_context(keys: &AnnotationKeys) -> WriteContext<'_> {
    WriteContext { keys, now_unix: NOW_UNIX, now_rfc3339: NOW.into() }
}

/// An env entry `{name, value}`.
pub fn env_var(name: &str, value: impl Into<Value>) -> Value {
    json!({"name": name, "value": value.into()})
}

/// A container; `env` is left out when `None`.
pub fn container(name: &str, image: &str, env: Option<Value>) -> Value {
    let mut container = json!({"name": name, "image": image});
    if let Some(env) = env {
        container["env"] = env;
    }
    container
}

/// A pod template labelled `app: <app>`, with `annotations` if any, around `containers`.
pub fn pod_template(app: &str, annotations: Option<Value>, containers: Value) -> Value {
    let mut metadata = json!({"labels": {"app": app}});
    if let Some(annotations) = annotations {
        metadata["annotations"] = annotations;
    }
    json!({"metadata": metadata, "spec": {"containers": containers}})
}

/// The template of the CRD backends' tests: containers `web` (with `web_env`) and `proxy`.
pub fn web_proxy_template(app: &str, annotations: Option<Value>, web_env: Value) -> Value {
    let containers = json!([container("web", "web:1", Some(web_env)), container("proxy", "proxy:1", None)]);
    pod_template(app, annotations, containers)
}

/// [`web_proxy_template`] with no marker.
pub fn unmarked_web_proxy(app: &str) -> Value {
    web_proxy_template(app, None, json!([env_var("LOG", "info")]))
}

/// [`web_proxy_template`] recording [`cm`] at [`H1`] on `web`, under both strategies.
pub fn marked_web_proxy(app: &str) -> Value {
    web_proxy_template(
        app,
        Some(marker_annotation(&cm(), H1, "web")),
        json!([env_var("LOG", "info"), env_var(ENV_CM, H1.to_hex())]),
    )
}

/// `ops` after the `resourceVersion` test that guards every JSON patch reload.
pub fn guarded_json_patch(resource_version: &str, ops: Value) -> Value {
    let mut all = vec![json!({"op": "test", "path": "/metadata/resourceVersion", "value": resource_version})];
    all.extend(ops.as_array().expect("JSON patch operations").iter().cloned());
    Value::Array(all)
}

/// Applies the JSON patch `patch` to `served` as the API server would; returns the patched
/// `spec.template` and the rest of the object (its template `null`). Panics, naming the case,
/// if the patch does not apply.
pub fn apply_json_patch(case: &str, mut served: Value, patch: Value) -> (Value, Value) {
    let patch: json_patch::Patch = serde_json::from_value(patch).expect("a JSON patch");
    json_patch::patch(&mut served, &patch).unwrap_or_else(|e| panic!("{case}: {e}"));
    let template = served["spec"]["template"].take();
    (template, served)
}
