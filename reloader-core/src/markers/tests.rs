//! Marker reading, comparison and the exact patches that write them (docs/compatibility.md §3, §6).

use serde_json::json;

use super::*;
use crate::testkit::{LAST_RELOADED_FROM, TestWorkload, cm, deployment, hash, secret};

fn keys() -> AnnotationKeys {
    AnnotationKeys::default()
}

fn change(
    resource: &ResourceKey,
    action: MarkerAction,
    strategy: ReloadStrategy,
    container: u16,
) -> MarkerChange {
    MarkerChange { resource: resource.clone(), action, strategy, container }
}

#[test]
fn annotation_value_has_stakaters_field_order() {
    let key = ResourceKey::new(ResourceKind::ConfigMap, "ns", "my-cm");
    let hash = ContentHash::from_hex("3c9a892aeaedc759abc3df9884a37b8be5680382").unwrap();
    assert_eq!(
        annotation_marker_value(&key, &hash, "app", 1723000000),
        concat!(
            r#"{"type":"CONFIGMAP","name":"my-cm","namespace":"ns","#,
            r#""hash":"3c9a892aeaedc759abc3df9884a37b8be5680382","#,
            r#""containerRefs":["app"],"observedAt":1723000000}"#
        )
    );
    let key = ResourceKey::new(ResourceKind::SecretProviderClass, "ns", "vault");
    assert!(annotation_marker_value(&key, &hash, "app", 0).starts_with(r#"{"type":"SECRETPROVIDERCLASS","#));
}

#[test]
fn annotation_values_parse() {
    let hex = "3c9a892aeaedc759abc3df9884a37b8be5680382";
    let want = AnnotationMarker {
        resource: ResourceKey::new(ResourceKind::Secret, "ns", "s"),
        hash: ContentHash::from_hex(hex).unwrap(),
    };
    let cases = [
        (
            format!(
                r#"{{"type":"SECRET","name":"s","namespace":"ns","hash":"{hex}","containerRefs":["a"]}}"#
            ),
            Some(want.clone()),
        ),
        // Field order and extra fields do not matter when reading.
        (
            format!(r#"{{"hash":"{hex}","namespace":"ns","name":"s","type":"SECRET","extra":true}}"#),
            Some(want),
        ),
        (format!(r#"{{"type":"DEPLOYMENT","name":"s","namespace":"ns","hash":"{hex}"}}"#), None),
        (r#"{"type":"SECRET","name":"s","namespace":"ns","hash":"not-hex"}"#.to_string(), None),
        (r#"{"type":"SECRET","name":"s","hash":"00"}"#.to_string(), None),
        ("not json".to_string(), None),
    ];
    for (value, want) in cases {
        assert_eq!(parse_annotation_marker(&value), want, "{value}");
    }
}

#[test]
fn markers_are_read_from_regular_containers_and_the_annotation() {
    let c = cm("my-cm");
    let workload = deployment("web")
        .containers(&["app", "sidecar"])
        .init_containers(&["init"])
        .env("app", "PLAIN", "1")
        .env("sidecar", "STAKATER_MY_CM_CONFIGMAP", &c.hash.to_hex())
        .env("sidecar", "STAKATER_NOT_A_MARKER", "x")
        .env("init", "STAKATER_INIT_SECRET", "x")
        .annotate_template(LAST_RELOADED_FROM, &annotation_marker_value(&c.key, &c.hash, "app", 3));
    let markers = Markers::read(workload.template(), &keys());
    assert_eq!(
        markers.env,
        [EnvMarker {
            container: 1,
            position: 0,
            name: "STAKATER_MY_CM_CONFIGMAP".into(),
            value: c.hash.to_hex().into(),
            value_from: false,
        }]
    );
    assert_eq!(markers.annotation, Some(AnnotationMarker { resource: c.key.clone(), hash: c.hash }));
    assert_eq!(markers.env_value(ResourceKind::ConfigMap, "my-cm"), Some(&*c.hash.to_hex()));
    assert_eq!(markers.env_value(ResourceKind::Secret, "my-cm"), None);
    assert_eq!(markers.recorded_hash(&c.key, ReloadStrategy::EnvVars), Some(c.hash));
    assert_eq!(markers.recorded_hash(&c.key, ReloadStrategy::Annotations), Some(c.hash));
    assert_eq!(markers.recorded_hash(&cm("other").key, ReloadStrategy::Annotations), None);
}

#[test]
fn records() {
    use MarkerAction::{Remove, Set};
    use ReloadStrategy::{Annotations, EnvVars};
    let c = cm("c");
    let h1 = c.hash;
    let h2 = hash("v2");
    let env = |w: TestWorkload, h: ContentHash| w.env("app", "STAKATER_C_CONFIGMAP", &h.to_hex());
    let annotated = |w: TestWorkload, key: &ResourceKey, h: ContentHash, observed_at| {
        w.annotate_template(LAST_RELOADED_FROM, &annotation_marker_value(key, &h, "app", observed_at))
    };
    let d = || deployment("web");
    let cases = [
        ("env: same hash", env(d(), h1), Set(h1), EnvVars, true),
        ("env: other hash", env(d(), h1), Set(h2), EnvVars, false),
        ("env: absent", d(), Set(h1), EnvVars, false),
        ("env: remove when absent", d(), Remove, EnvVars, true),
        ("env: remove when present", env(d(), h1), Remove, EnvVars, false),
        ("annotation: same, other observedAt", annotated(d(), &c.key, h1, 99), Set(h1), Annotations, true),
        ("annotation: other hash", annotated(d(), &c.key, h1, 1), Set(h2), Annotations, false),
        ("annotation: other resource", annotated(d(), &secret("c").key, h1, 1), Set(h1), Annotations, false),
        ("annotation: absent", d(), Set(h1), Annotations, false),
        (
            "annotation: delete recorded",
            annotated(d(), &c.key, DELETE_MARKER_HASH, 1),
            Remove,
            Annotations,
            true,
        ),
        ("annotation: delete not recorded", annotated(d(), &c.key, h1, 1), Remove, Annotations, false),
        ("env marker does not count for annotations", env(d(), h1), Set(h1), Annotations, false),
    ];
    for (name, workload, action, strategy, want) in cases {
        let markers = Markers::read(workload.template(), &keys());
        assert_eq!(markers.records(&c.key, &action, strategy), want, "{name}");
    }
}

#[test]
fn strategic_patches() {
    use MarkerAction::{Remove, Set};
    use ReloadStrategy::{Annotations, EnvVars};
    let c = cm("c");
    let h1 = c.hash;
    let h2 = hash("v2");
    let two = || deployment("web").containers(&["app", "sidecar"]);
    let cases = [
        (
            "env-vars set on the chosen container",
            two(),
            vec![change(&c.key, Set(h2), EnvVars, 1)],
            Some(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "sidecar", "env": [{"name": "STAKATER_C_CONFIGMAP", "value": h2.to_hex()}]}
            ]}}}})),
        ),
        (
            "env-vars update of an existing marker",
            two().env("app", "OTHER", "1").env("app", "STAKATER_C_CONFIGMAP", &h1.to_hex()),
            vec![change(&c.key, Set(h2), EnvVars, 0)],
            Some(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "app", "env": [{"name": "STAKATER_C_CONFIGMAP", "value": h2.to_hex()}]}
            ]}}}})),
        ),
        (
            "env-vars already current",
            two().env("app", "STAKATER_C_CONFIGMAP", &h2.to_hex()),
            vec![change(&c.key, Set(h2), EnvVars, 0)],
            None,
        ),
        (
            "env-vars delete removes every copy with $patch: delete",
            two().env("app", "STAKATER_C_CONFIGMAP", &h1.to_hex()).env(
                "sidecar",
                "STAKATER_C_CONFIGMAP",
                &h1.to_hex(),
            ),
            vec![change(&c.key, Remove, EnvVars, 0)],
            Some(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "app", "env": [{"name": "STAKATER_C_CONFIGMAP", "$patch": "delete"}]},
                {"name": "sidecar", "env": [{"name": "STAKATER_C_CONFIGMAP", "$patch": "delete"}]}
            ]}}}})),
        ),
        ("env-vars delete without a marker", two(), vec![change(&c.key, Remove, EnvVars, 0)], None),
        (
            "two changes in one patch",
            two(),
            vec![change(&c.key, Set(h2), EnvVars, 0), change(&secret("s").key, Set(h1), EnvVars, 0)],
            Some(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "app", "env": [
                    {"name": "STAKATER_C_CONFIGMAP", "value": h2.to_hex()},
                    {"name": "STAKATER_S_SECRET", "value": h1.to_hex()}
                ]}
            ]}}}})),
        ),
        (
            "annotations set",
            two(),
            vec![change(&c.key, Set(h2), Annotations, 1)],
            Some(json!({"spec": {"template": {"metadata": {"annotations": {
                LAST_RELOADED_FROM: annotation_marker_value(&c.key, &h2, "sidecar", 42)
            }}}}})),
        ),
        (
            "annotations delete writes the delete-marker hash",
            two(),
            vec![change(&c.key, Remove, Annotations, 0)],
            Some(json!({"spec": {"template": {"metadata": {"annotations": {
                LAST_RELOADED_FROM: annotation_marker_value(&c.key, &DELETE_MARKER_HASH, "app", 42)
            }}}}})),
        ),
        (
            "annotations already current, whatever observedAt says",
            two().annotate_template(LAST_RELOADED_FROM, &annotation_marker_value(&c.key, &h2, "app", 1)),
            vec![change(&c.key, Set(h2), Annotations, 0)],
            None,
        ),
    ];
    for (name, workload, changes, want) in cases {
        assert_eq!(template_strategic_patch(workload.template(), &changes, &keys(), 42), want, "{name}");
    }
}

#[test]
fn a_value_from_marker_is_replaced_by_a_plain_value() {
    use k8s_openapi::api::core::v1::{ConfigMapKeySelector, EnvVar, EnvVarSource};
    let c = cm("c");
    let mut workload = deployment("web");
    let spec = workload.deployment.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
    spec.containers[0].env = Some(vec![EnvVar {
        name: "STAKATER_C_CONFIGMAP".into(),
        value: None,
        value_from: Some(EnvVarSource {
            config_map_key_ref: Some(ConfigMapKeySelector {
                name: "c".into(),
                key: "k".into(),
                optional: None,
            }),
            ..Default::default()
        }),
    }]);
    let changes = [change(&c.key, MarkerAction::Set(c.hash), ReloadStrategy::EnvVars, 0)];
    // A merge of `value` alone would leave `valueFrom` in place and the API server would reject
    // the pod template (both set): the patch must clear it.
    assert_eq!(
        template_strategic_patch(workload.template(), &changes, &keys(), 0),
        Some(json!({"spec": {"template": {"spec": {"containers": [
            {"name": "app", "env": [
                {"name": "STAKATER_C_CONFIGMAP", "value": c.hash.to_hex(), "valueFrom": null}
            ]}
        ]}}}}))
    );
}

#[test]
fn stripping_markers_leaves_everything_else() {
    let template = |env: serde_json::Value, init_env: serde_json::Value, annotations: serde_json::Value| {
        serde_json::from_value::<PodTemplateSpec>(json!({
            "metadata": {"annotations": annotations},
            "spec": {
                "initContainers": [{"name": "init", "image": "i", "env": init_env}],
                "containers": [{"name": "app", "image": "a", "env": env}],
            },
        }))
        .unwrap()
    };
    let marker = json!({"name": "STAKATER_CONFIG_CONFIGMAP", "value": "abc"});
    let plain = json!({"name": "MODE", "value": "x"});
    let near_miss = json!({"name": "STAKATER_MODE", "value": "y"});
    let recorded = json!({LAST_RELOADED_FROM: "{}", "team": "a"});
    // (template, the same after stripping)
    let rows = [
        (
            template(json!([marker, plain]), json!([marker]), recorded.clone()),
            template(json!([plain]), json!(null), json!({"team": "a"})),
        ),
        (
            template(json!([marker]), json!([plain]), json!({LAST_RELOADED_FROM: "{}"})),
            template(json!(null), json!([plain]), json!(null)),
        ),
        (
            template(json!([near_miss]), json!(null), json!({"team": "a"})),
            template(json!([near_miss]), json!(null), json!({"team": "a"})),
        ),
    ];
    for (i, (mut given, want)) in rows.into_iter().enumerate() {
        strip_markers(&mut given, &keys());
        assert_eq!(given, want, "row {i}");
    }
}
