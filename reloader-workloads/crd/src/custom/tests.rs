use reloader_core::annotations::AnnotationKeys;
use reloader_core::custom_kind::CustomKind;
use reloader_core::model::ReloadStrategy;
use reloader_core::skeleton::skeleton;
use reloader_core::workload::{PatchKind, Precondition, Workload, WorkloadWrite};
use reloader_workload_testkit::*;
use serde_json::{Value, json};

use super::CustomObject;

/// A declared kind whose pod template sits deep in its spec, with an escaped token.
fn deep_kind() -> &'static CustomKind {
    let declaration = "group=example.dev,version=v1,kind=Deep,resource=deeps,template=/spec/run~1time/workers/0/podTemplate";
    Box::leak(Box::new(CustomKind::parse(declaration).unwrap()))
}

/// An object of [`deep_kind`] as the API server returns it, around `template`.
fn served(template: Value) -> Value {
    json!({
        "apiVersion": "example.dev/v1",
        "kind": "Deep",
        "metadata": {"name": "workers", "namespace": "ns", "resourceVersion": "77", "uid": "00000000-0000-4000-8000-000000000077"},
        "spec": {"replicas": 3, "run/time": {"workers": [{"podTemplate": template, "size": "large"}]}},
        "status": {"ready": 3},
    })
}

/// Built from the object's view alone (no read), the write is `write`.
fn same_from_view(
    case: &str,
    declared: &'static CustomKind,
    object: &CustomObject,
    change: &reloader_core::markers::MarkerChange,
    write: &WorkloadWrite,
) {
    let keys = AnnotationKeys::default();
    let cached = CustomObject::from_skeleton(declared, skeleton(&object.view(&keys), &keys).unwrap());
    let from_view = cached.reload_write(std::slice::from_ref(change), &write_context(&keys)).unwrap();
    assert_eq!(from_view.as_ref(), Some(write), "{case}");
}

/// `object` after the JSON patch `body`, applied as the API server would.
fn applied(case: &str, object: &Value, body: &Value) -> Value {
    let mut patched = object.clone();
    let patch: json_patch::Patch = serde_json::from_value(body.clone()).unwrap();
    json_patch::patch(&mut patched, &patch).unwrap_or_else(|e| panic!("{case}: {e}"));
    patched
}

fn read(object: &Value) -> CustomObject {
    let metadata = serde_json::from_value(object["metadata"].clone()).unwrap();
    CustomObject::read(deep_kind(), metadata, object)
}

#[test]
fn the_template_is_read_at_the_declared_pointer() {
    let object = read(&served(marked_web_proxy("workers")));
    let containers: Vec<&str> = object
        .pod_template()
        .unwrap()
        .spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(containers, ["web", "proxy"]);
    assert_eq!(object.kind().as_str(), "Deep");
    assert_eq!(object.kind().custom(), Some(object.declared()));

    // Nothing there, or something that is not a pod template: no template, nothing referenced.
    for object in [served(json!(null)), served(json!("not a template")), json!({"metadata": {"name": "x"}})] {
        assert_eq!(read(&object).pod_template(), None, "{object}");
    }
}

#[test]
fn a_reload_is_a_json_patch_at_the_pointer_guarded_by_the_version() {
    let keys = AnnotationKeys::default();
    let ctx = write_context(&keys);
    let base = "/spec/run~1time/workers/0/podTemplate";
    let cases = [
        (
            "env-vars, a new marker",
            unmarked_web_proxy("workers"),
            set(cm(), H1, ReloadStrategy::EnvVars, 0),
            json!([{"op": "add", "path": format!("{base}/spec/containers/0/env/-"), "value": env_var(ENV_CM, H1.to_hex())}]),
        ),
        (
            "annotations, a new marker",
            unmarked_web_proxy("workers"),
            set(cm(), H2, ReloadStrategy::Annotations, 0),
            json!([{"op": "add", "path": format!("{base}/metadata/annotations"), "value": marker_annotation(&cm(), H2, "web")}]),
        ),
    ];
    for (case, template, change, expected) in cases {
        let object_json = served(template);
        let object = read(&object_json);
        let write = object.reload_write(std::slice::from_ref(&change), &ctx).unwrap().expect(case);
        let WorkloadWrite::Patch { kind: PatchKind::Json, body, precondition } = &write else {
            panic!("{case}: a JSON patch, got {write:?}");
        };
        assert_eq!(*body, guarded_json_patch("77", expected), "{case}");
        assert_eq!(*precondition, Precondition::ResourceVersion("77".into()), "{case}");

        same_from_view(case, deep_kind(), &object, &change, &write);

        // Applied as the API server would: only the template changed, and it now records the change.
        let patched = applied(case, &object_json, body);
        let after = read(&patched);
        assert_eq!(after.reload_write(std::slice::from_ref(&change), &ctx).unwrap(), None, "{case}: applied");
        let pointer = "/spec/run~1time/workers/0/podTemplate";
        let (mut rest_before, mut rest_after) = (object_json.clone(), patched.clone());
        *rest_before.pointer_mut(pointer).unwrap() = Value::Null;
        *rest_after.pointer_mut(pointer).unwrap() = Value::Null;
        assert_eq!(rest_before, rest_after, "{case}: nothing but the template changed");
    }
}

#[test]
fn the_view_finds_the_references_of_the_template() {
    let keys = AnnotationKeys::default();
    let mut template = unmarked_web_proxy("workers");
    template["spec"]["containers"][0]["envFrom"] = json!([{"configMapRef": {"name": "app-config"}}]);
    let mut object = served(template);
    object["metadata"]["annotations"] = json!({"reloader.stakater.com/auto": "true"});
    let view = read(&object).view(&keys);
    assert_eq!(view.key.kind.as_str(), "Deep");
    assert_eq!(&*view.key.name, "workers");
    assert!(format!("{view:?}").contains("app-config"), "{view:?}");
}

/// A declared kind whose operator copies `spec.podAnnotations` to its pods.
fn map_kind() -> &'static CustomKind {
    let declaration =
        "group=example.dev,version=v1,kind=Cluster,resource=clusters,annotations=/spec/podAnnotations";
    Box::leak(Box::new(CustomKind::parse(declaration).unwrap()))
}

fn cluster(pod_annotations: Option<Value>) -> Value {
    let mut object = json!({
        "apiVersion": "example.dev/v1",
        "kind": "Cluster",
        "metadata": {"name": "db", "namespace": "ns", "resourceVersion": "12", "uid": "00000000-0000-4000-8000-000000000012",
                     "annotations": {"configmap.reloader.stakater.com/reload": "app-config"}},
        "spec": {"replicas": 3, "image": "db:1"},
    });
    if let Some(map) = pod_annotations {
        object["spec"]["podAnnotations"] = map;
    }
    object
}

fn read_cluster(object: &Value) -> CustomObject {
    let metadata = serde_json::from_value(object["metadata"].clone()).unwrap();
    CustomObject::read(map_kind(), metadata, object)
}

#[test]
fn an_annotations_map_gets_the_annotation_marker_whatever_the_strategy() {
    let keys = AnnotationKeys::default();
    let ctx = write_context(&keys);
    let marker = json!(marker(&cm(), H1, ""));
    let key = "reloader.stakater.com~1last-reloaded-from";
    let cases = [
        (
            "no map yet",
            None,
            json!([{"op": "add", "path": "/spec/podAnnotations", "value": {"reloader.stakater.com/last-reloaded-from": marker}}]),
        ),
        (
            "an empty map",
            Some(json!({})),
            json!([{"op": "add", "path": format!("/spec/podAnnotations/{key}"), "value": marker}]),
        ),
        (
            "a map with an older marker",
            Some(json!({"team": "db", "reloader.stakater.com/last-reloaded-from": "{}"})),
            json!([{"op": "replace", "path": format!("/spec/podAnnotations/{key}"), "value": marker}]),
        ),
    ];
    for (case, map, expected) in cases {
        let object_json = cluster(map);
        let object = read_cluster(&object_json);
        assert!(object.annotations_only(), "{case}");
        let view = object.view(&keys);
        assert!(view.containers.is_empty() && view.references.is_empty(), "{case}");
        // The configured strategy is env-vars; the map can only carry the annotation.
        let change = set(cm(), H1, view.strategy(ReloadStrategy::EnvVars), 0);
        assert_eq!(change.strategy, ReloadStrategy::Annotations, "{case}");
        let write = object.reload_write(std::slice::from_ref(&change), &ctx).unwrap().expect(case);
        let WorkloadWrite::Patch { kind: PatchKind::Json, body, .. } = &write else {
            panic!("{case}: {write:?}")
        };
        assert_eq!(*body, guarded_json_patch("12", expected), "{case}");
        same_from_view(case, map_kind(), &object, &change, &write);

        let patched = applied(case, &object_json, body);
        assert_eq!(patched["spec"]["image"], "db:1", "{case}: the rest is untouched");
        assert_eq!(
            read_cluster(&patched).reload_write(std::slice::from_ref(&change), &ctx).unwrap(),
            None,
            "{case}"
        );
    }
    // A map of something else than strings is not the kind's annotations: nothing is written.
    assert_eq!(read_cluster(&cluster(Some(json!({"a": 1})))).pod_template(), None);
}
