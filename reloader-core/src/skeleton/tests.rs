//! A skeleton stands for its object: every write core builds from a template is the same from
//! the object's template and from its view's skeleton.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use super::*;
use crate::json_patch::template_json_patch;
use crate::markers::{MarkerAction, MarkerChange, template_strategic_patch};
use crate::model::{ReloadStrategy, ResourceKey, ResourceKind, Uid, WorkloadKind};
use crate::testkit::hash;
use crate::views::{WorkloadParts, build_view};

const UID: &str = "0a1b2c3d-4e5f-6789-abcd-ef0123456789";

fn keys() -> AnnotationKeys {
    AnnotationKeys::default()
}

fn metadata() -> ObjectMeta {
    serde_json::from_value(json!({
        "name": "web", "namespace": "ns", "uid": UID, "resourceVersion": "42",
        "annotations": {"deployment.reloader.stakater.com/pause-period": "5m", "reloader.stakater.com/auto": "true"},
    }))
    .expect("metadata")
}

fn view_of(template: &PodTemplateSpec) -> WorkloadView {
    let meta = metadata();
    let parts = WorkloadParts {
        kind: WorkloadKind::Deployment,
        metadata: &meta,
        template: Some(template),
        suspended: false,
        paused: true,
        annotations_only: false,
    };
    build_view(parts, &keys())
}

fn env(name: &str, value: &str) -> Value {
    json!({"name": name, "value": value})
}

fn cm_marker(value: &str) -> Value {
    env("STAKATER_CFG_CONFIGMAP", value)
}

fn annotation(value: &str) -> Value {
    json!({"annotations": {"reloader.stakater.com/last-reloaded-from": value, "team": "a"}, "labels": {"app": "web"}})
}

/// Templates that differ in everything a write looks at.
fn templates() -> Vec<(&'static str, Value)> {
    let old = hash("old").to_hex();
    let recorded = annotation_marker_value(
        &ResourceKey::new(ResourceKind::ConfigMap, "ns", "cfg"),
        &hash("old"),
        "app",
        7,
    );
    vec![
        ("no env, no metadata", json!({"spec": {"containers": [{"name": "app"}, {"name": "side"}]}})),
        (
            "env: [] and labels only",
            json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "app", "env": []}]}}),
        ),
        (
            "plain env before and after the marker",
            json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                {"name": "app", "env": [env("A", "1"), cm_marker(&old), env("B", "2")]},
                {"name": "side", "env": [env("C", "3")]},
            ]}}),
        ),
        (
            "marker on the second container, two markers",
            json!({"metadata": {}, "spec": {"containers": [
                {"name": "app", "env": [env("A", "1")]},
                {"name": "side", "env": [env("STAKATER_KEY_SECRET", "x"), env("B", "2"), cm_marker(&old)]},
            ]}}),
        ),
        (
            "marker with valueFrom",
            json!({"spec": {"containers": [{"name": "app", "env": [
                env("A", "1"),
                {"name": "STAKATER_CFG_CONFIGMAP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            ]}]}}),
        ),
        (
            "the same marker twice in one container",
            json!({"spec": {"containers": [{"name": "app", "env": [cm_marker(&old), env("A", "1"), cm_marker("x")]}]}}),
        ),
        (
            "annotation recorded",
            json!({"metadata": annotation(&recorded), "spec": {"containers": [{"name": "app"}]}}),
        ),
        (
            "annotation unreadable",
            json!({"metadata": annotation("{not json"), "spec": {"containers": [{"name": "app"}]}}),
        ),
        (
            "annotations without the marker",
            json!({"metadata": {"annotations": {"team": "a"}}, "spec": {"containers": [{"name": "app"}]}}),
        ),
        ("no spec", json!({"metadata": {"labels": {"app": "web"}}})),
    ]
}

fn change(strategy: ReloadStrategy, action: MarkerAction, container: u16) -> MarkerChange {
    MarkerChange {
        resource: ResourceKey::new(ResourceKind::ConfigMap, "ns", "cfg"),
        action,
        strategy,
        container,
    }
}

fn change_sets() -> Vec<Vec<MarkerChange>> {
    use MarkerAction::{Remove, Set};
    use ReloadStrategy::{Annotations, EnvVars};
    let secret = MarkerChange {
        resource: ResourceKey::new(ResourceKind::Secret, "ns", "key"),
        action: Set(hash("s")),
        strategy: EnvVars,
        container: 0,
    };
    vec![
        vec![change(EnvVars, Set(hash("new")), 0)],
        vec![change(EnvVars, Set(hash("new")), 1)],
        vec![change(EnvVars, Set(hash("old")), 0)],
        vec![change(EnvVars, Set(hash("old")), 1)],
        vec![change(EnvVars, Remove, 0)],
        vec![change(EnvVars, Set(hash("new")), 0), secret],
        vec![change(Annotations, Set(hash("new")), 0)],
        vec![change(Annotations, Set(hash("old")), 0)],
        vec![change(Annotations, Remove, 0)],
    ]
}

#[test]
fn every_template_write_is_the_same_from_the_skeleton() {
    let keys = keys();
    let mut compared = 0;
    for (name, template) in templates() {
        let template: PodTemplateSpec = serde_json::from_value(template).expect(name);
        let view = view_of(&template);
        let skeleton = skeleton(&view, &keys).expect(name);
        let standing_in = skeleton.template.as_ref().expect("a template");
        assert_eq!(view_of(standing_in).markers, view.markers, "{name}: markers");
        let containers = template.spec.as_ref().map_or(0, |s| s.containers.len());
        for changes in change_sets() {
            if changes.iter().any(|c| usize::from(c.container) >= containers) {
                continue;
            }
            let case = format!("{name}: {changes:?}");
            assert_eq!(
                template_strategic_patch(standing_in, &changes, &keys, 99),
                template_strategic_patch(&template, &changes, &keys, 99),
                "strategic, {case}"
            );
            assert_eq!(
                template_json_patch(standing_in, "/spec/template", "42", &changes, &keys, 99),
                template_json_patch(&template, "/spec/template", "42", &changes, &keys, 99),
                "JSON, {case}"
            );
            compared += 1;
        }
    }
    assert!(compared > 60, "only {compared} cases compared");
}

#[test]
fn the_skeleton_carries_identity_and_the_annotations_writes_read() {
    let template: PodTemplateSpec = serde_json::from_value(templates()[2].1.clone()).expect("template");
    let view = view_of(&template);
    let skeleton = skeleton(&view, &keys()).expect("skeleton");
    let meta = &skeleton.metadata;
    assert_eq!((meta.name.as_deref(), meta.namespace.as_deref()), (Some("web"), Some("ns")));
    assert_eq!((meta.uid.as_deref(), meta.resource_version.as_deref()), (Some(UID), Some("42")));
    let annotations = meta.annotations.as_ref().expect("annotations");
    assert_eq!(
        annotations.iter().collect::<Vec<_>>(),
        [(&"deployment.reloader.stakater.com/pause-period".to_owned(), &"5m".to_owned())],
        "only what a write reads"
    );
    assert!(skeleton.paused);
}

#[test]
fn views_that_cannot_stand_for_their_object_have_no_skeleton() {
    let template: PodTemplateSpec = serde_json::from_value(templates()[0].1.clone()).expect("template");
    let view = view_of(&template);
    type Spoil = Box<dyn Fn(&mut WorkloadView)>;
    let cases: Vec<(&str, Spoil)> = vec![
        ("no resourceVersion", Box::new(|v| v.version = None)),
        ("no uid", Box::new(|v| v.uid = None)),
        ("65 containers", Box::new(|v| v.containers = (0..65).map(|i| i.to_string().into()).collect())),
    ];
    for (name, spoil) in cases {
        let mut spoiled = view.clone();
        spoil(&mut spoiled);
        assert_eq!(skeleton(&spoiled, &keys()), None, "{name}");
    }
    let mut bare = view;
    bare.has_template = false;
    assert_eq!(skeleton(&bare, &keys()).map(|s| s.template), Some(None), "no template");
}

#[test]
fn uids_round_trip_only_in_their_canonical_form() {
    let cases = [
        (UID, true),
        ("0A1B2C3D-4E5F-6789-ABCD-EF0123456789", false),
        ("0a1b2c3d4e5f6789abcdef0123456789", false),
        ("0a1b2c3d-4e5f-6789-abcd-ef012345678", false),
        ("0a1b2c3d-4e5f-6789-abcd-ef012345678g", false),
        ("", false),
    ];
    for (text, parses) in cases {
        let uid = Uid::parse(text);
        assert_eq!(uid.is_some(), parses, "{text}");
        if let Some(uid) = uid {
            assert_eq!(uid.to_string(), text);
        }
    }
}
