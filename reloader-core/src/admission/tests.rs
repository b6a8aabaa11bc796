use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use serde_json::{Value, json};

use super::*;
use crate::model::ContentHash;
use crate::testkit::TestWorkload;

const NS: &str = "shop";
const NOW: i64 = 1_723_000_000;
const H1: ContentHash = ContentHash([0x11; 20]);
const H2: ContentHash = ContentHash([0x22; 20]);
const H3: ContentHash = ContentHash([0x33; 20]);
const ENV_CM: &str = "STAKATER_APP_CONFIG_CONFIGMAP";
const ENV_SECRET: &str = "STAKATER_DB_SECRET";
const LAST: &str = "reloader.stakater.com/last-reloaded-from";
const AUTO: &str = "reloader.stakater.com/auto";
const STRATEGY: &str = "reloader.stakater.com/rollout-strategy";

fn cm() -> ResourceKey {
    ResourceKey::new(ResourceKind::ConfigMap, NS, "app-config")
}

fn secret() -> ResourceKey {
    ResourceKey::new(ResourceKind::Secret, NS, "db")
}

fn marker(resource: &ResourceKey, hash: ContentHash, container: &str) -> String {
    annotation_marker_value(resource, &hash, container, NOW)
}

fn env(name: &str, value: &str) -> Value {
    json!({"name": name, "value": value})
}

/// A container `name` with `env` (`Value::Null`: no env list at all) that uses the ConfigMap
/// and the Secret through `envFrom`.
fn container(name: &str, env: Value) -> Value {
    let mut c = json!({"name": name, "image": format!("{name}:1"), "envFrom": [
        {"configMapRef": {"name": "app-config"}}, {"secretRef": {"name": "db"}}
    ]});
    if !env.is_null() {
        c["env"] = env;
    }
    c
}

/// A pod template with `containers` and, unless null, template `annotations`.
fn template(annotations: Value, containers: Vec<Value>) -> Value {
    let mut metadata = json!({"labels": {"app": "shop"}});
    if !annotations.is_null() {
        metadata["annotations"] = annotations;
    }
    json!({"metadata": metadata, "spec": {"containers": containers}})
}

/// An object of `kind` with metadata `annotations` and its pod template where the kind keeps it.
fn object(kind: WorkloadKind, annotations: Value, template: Value) -> Value {
    let mut object = json!({
        "apiVersion": "apps/v1",
        "kind": kind.as_str(),
        "metadata": {"name": "shop", "namespace": NS, "labels": {"app": "shop"}, "annotations": annotations},
        "spec": {},
    });
    let mut spec = json!({});
    match kind {
        WorkloadKind::CronJob => {
            spec = json!({"schedule": "@hourly", "jobTemplate": {"spec": {"template": template}}})
        }
        _ => spec["template"] = template,
    }
    object["spec"] = spec;
    object
}

fn apply(object: &Value, ops: &[Value]) -> Value {
    let patch: ::json_patch::Patch = serde_json::from_value(Value::Array(ops.to_vec())).expect("valid patch");
    let mut patched = object.clone();
    ::json_patch::patch(&mut patched, &patch)
        .expect("the operations apply to the object they were built for");
    patched
}

fn keys() -> AnnotationKeys {
    AnnotationKeys::default()
}

// ---------------------------------------------------------------------------------------------
// UPDATE

/// Re-applies of a manifest without markers: the patched object's template equals the old one.
#[test]
fn a_reapply_without_markers_gets_the_old_markers_back() {
    use WorkloadKind::{CronJob, DaemonSet, Deployment, DeploymentConfig, Rollout, StatefulSet};
    let plain = || vec![container("app", json!([env("LOG", "info")])), container("proxy", Value::Null)];
    let cases: Vec<(&str, WorkloadKind, Value, Value)> = vec![
        (
            "env marker appended to an existing env list",
            Deployment,
            template(
                Value::Null,
                vec![
                    container("app", json!([env("LOG", "info"), env(ENV_CM, &H1.to_hex())])),
                    container("proxy", Value::Null),
                ],
            ),
            template(Value::Null, plain()),
        ),
        (
            "env marker first, where the writer's strategic merge puts it",
            Deployment,
            template(
                Value::Null,
                vec![
                    container("app", json!([env(ENV_CM, &H1.to_hex()), env("LOG", "info")])),
                    container("proxy", Value::Null),
                ],
            ),
            template(Value::Null, plain()),
        ),
        (
            "two markers around a plain entry, each back in its place",
            Deployment,
            template(
                Value::Null,
                vec![
                    container(
                        "app",
                        json!([env(ENV_SECRET, &H2.to_hex()), env("LOG", "info"), env(ENV_CM, &H1.to_hex())]),
                    ),
                    container("proxy", Value::Null),
                ],
            ),
            template(Value::Null, plain()),
        ),
        (
            "env list created on a container without one",
            StatefulSet,
            template(
                Value::Null,
                vec![
                    container("app", json!([env("LOG", "info")])),
                    container("proxy", json!([env(ENV_CM, &H1.to_hex()), env(ENV_SECRET, &H2.to_hex())])),
                ],
            ),
            template(Value::Null, plain()),
        ),
        (
            "env list replaced when it is empty",
            DaemonSet,
            template(Value::Null, vec![container("app", json!([env(ENV_CM, &H1.to_hex())]))]),
            template(Value::Null, vec![container("app", json!([]))]),
        ),
        (
            "annotation marker into existing template annotations",
            Deployment,
            template(json!({"team": "a", LAST: marker(&cm(), H1, "app")}), plain()),
            template(json!({"team": "a"}), plain()),
        ),
        (
            "annotation marker into a template without annotations",
            DeploymentConfig,
            template(json!({LAST: marker(&cm(), H1, "app")}), plain()),
            template(Value::Null, plain()),
        ),
        (
            "both markers, CronJob template",
            CronJob,
            template(
                json!({LAST: marker(&secret(), H2, "app")}),
                vec![
                    container("app", json!([env("LOG", "info"), env(ENV_CM, &H1.to_hex())])),
                    container("proxy", Value::Null),
                ],
            ),
            template(Value::Null, plain()),
        ),
        (
            "Rollout template (rollout strategy)",
            Rollout,
            template(
                Value::Null,
                vec![
                    container("app", json!([env("LOG", "info"), env(ENV_CM, &H1.to_hex())])),
                    container("proxy", Value::Null),
                ],
            ),
            template(Value::Null, plain()),
        ),
    ];
    for (name, kind, old_template, new_template) in cases {
        let old = object(kind, json!({}), old_template.clone());
        let new = object(kind, json!({}), new_template);
        let ops = preserve_markers(kind, template_pointer(kind), &old, &new, &keys());
        assert!(!ops.is_empty(), "{name}: something to copy");
        let patched = apply(&new, &ops);
        assert_eq!(
            patched.pointer(template_pointer(kind)),
            Some(&old_template),
            "{name}: the template is as before the re-apply, so nothing rolls; ops: {ops:#?}"
        );
    }
}

#[test]
fn exact_operations() {
    let path = "/spec/template/spec/containers";
    let annotation_path = "/spec/template/metadata/annotations/reloader.stakater.com~1last-reloaded-from";
    let with_marker = template(
        json!({"team": "a", LAST: marker(&cm(), H1, "app")}),
        vec![
            container("app", json!([env("LOG", "info"), env(ENV_CM, &H1.to_hex())])),
            container("proxy", json!([env(ENV_SECRET, &H2.to_hex())])),
        ],
    );
    let cases: Vec<(&str, Value, Vec<Value>)> = vec![
        (
            "append, create, annotate",
            template(
                json!({"team": "a"}),
                vec![container("app", json!([env("LOG", "info")])), container("proxy", Value::Null)],
            ),
            vec![
                json!({"op": "add", "path": format!("{path}/0/env/-"), "value": env(ENV_CM, &H1.to_hex())}),
                json!({"op": "add", "path": format!("{path}/1/env"), "value": [env(ENV_SECRET, &H2.to_hex())]}),
                json!({"op": "add", "path": annotation_path, "value": marker(&cm(), H1, "app")}),
            ],
        ),
        (
            "containers reordered: markers follow the names",
            template(
                json!({"team": "a", LAST: "kept"}),
                vec![container("proxy", json!([env("X", "1")])), container("app", Value::Null)],
            ),
            vec![
                json!({"op": "add", "path": format!("{path}/0/env/0"), "value": env(ENV_SECRET, &H2.to_hex())}),
                json!({"op": "add", "path": format!("{path}/1/env"), "value": [env(ENV_CM, &H1.to_hex())]}),
            ],
        ),
        (
            "a renamed container loses its marker",
            template(
                json!({"team": "a", LAST: "kept"}),
                vec![
                    container("app", json!([env("LOG", "info"), env(ENV_CM, &H1.to_hex())])),
                    container("sidecar", Value::Null),
                ],
            ),
            vec![],
        ),
        (
            "markers the new object carries are never changed",
            template(
                json!({"team": "a", LAST: marker(&cm(), H3, "app")}),
                vec![
                    container("app", json!([env(ENV_CM, &H3.to_hex()), env("LOG", "info")])),
                    container("proxy", json!([env(ENV_SECRET, &H3.to_hex())])),
                ],
            ),
            vec![],
        ),
        (
            "no template metadata at all",
            json!({"spec": {"containers": [
                container("app", json!([env("LOG", "info"), env(ENV_CM, &H1.to_hex())])),
                container("proxy", json!([env(ENV_SECRET, &H2.to_hex())])),
            ]}}),
            vec![json!({"op": "add", "path": "/spec/template/metadata",
                "value": {"annotations": {LAST: marker(&cm(), H1, "app")}}})],
        ),
        (
            "a marker its author moved to another container stays there, alone",
            template(
                json!({"team": "a", LAST: "kept"}),
                vec![
                    container("app", json!([env("LOG", "info")])),
                    container("proxy", json!([env(ENV_CM, &H3.to_hex()), env(ENV_SECRET, &H2.to_hex())])),
                ],
            ),
            vec![],
        ),
    ];
    for (name, new_template, expected) in cases {
        let old = object(WorkloadKind::Deployment, json!({}), with_marker.clone());
        let new = object(WorkloadKind::Deployment, json!({}), new_template);
        let ops = preserve_markers(WorkloadKind::Deployment, "/spec/template", &old, &new, &keys());
        assert_eq!(ops, expected, "{name}");
        apply(&new, &ops);
    }
}

#[test]
fn nothing_to_copy() {
    let marked = template(
        json!({LAST: marker(&cm(), H1, "app")}),
        vec![container("app", json!([env(ENV_CM, &H1.to_hex())]))],
    );
    let plain = template(Value::Null, vec![container("app", Value::Null)]);
    let cases: Vec<(&str, WorkloadKind, Value, Value)> = vec![
        (
            "Job templates are immutable",
            WorkloadKind::Job,
            object(WorkloadKind::Job, json!({}), marked.clone()),
            object(WorkloadKind::Job, json!({}), plain.clone()),
        ),
        (
            "no markers before",
            WorkloadKind::Deployment,
            object(WorkloadKind::Deployment, json!({}), plain.clone()),
            object(WorkloadKind::Deployment, json!({}), plain.clone()),
        ),
        (
            "identical objects",
            WorkloadKind::Deployment,
            object(WorkloadKind::Deployment, json!({}), marked.clone()),
            object(WorkloadKind::Deployment, json!({}), marked.clone()),
        ),
        (
            "the new object has no template (a workloadRef Rollout)",
            WorkloadKind::Rollout,
            object(WorkloadKind::Rollout, json!({}), marked.clone()),
            json!({"metadata": {"name": "shop"}, "spec": {"workloadRef": {"kind": "Deployment", "name": "x"}}}),
        ),
        (
            "a template that is not a pod template",
            WorkloadKind::Deployment,
            object(WorkloadKind::Deployment, json!({}), marked.clone()),
            object(WorkloadKind::Deployment, json!({}), json!({"spec": {"containers": "nonsense"}})),
        ),
        (
            "a rollout-strategy Rollout keeps no metadata marker",
            WorkloadKind::Rollout,
            object(WorkloadKind::Rollout, json!({LAST: marker(&cm(), H1, "app")}), plain.clone()),
            object(WorkloadKind::Rollout, json!({}), plain.clone()),
        ),
    ];
    for (name, kind, old, new) in cases {
        assert_eq!(
            preserve_markers(kind, template_pointer(kind), &old, &new, &keys()),
            Vec::<Value>::new(),
            "{name}"
        );
    }
}

#[test]
fn a_restart_rollout_keeps_its_metadata_marker() {
    let plain = template(Value::Null, vec![container("app", Value::Null)]);
    let recorded = marker(&cm(), H1, "app");
    let old = object(WorkloadKind::Rollout, json!({STRATEGY: "restart", LAST: recorded}), plain.clone());
    let cases: Vec<(&str, Value, Vec<Value>)> = vec![
        (
            "re-applied with the strategy annotation only",
            json!({STRATEGY: "restart"}),
            vec![
                json!({"op": "add", "path": "/metadata/annotations/reloader.stakater.com~1last-reloaded-from",
                "value": recorded}),
            ],
        ),
        ("its own newer record stays", json!({STRATEGY: "restart", LAST: marker(&cm(), H2, "app")}), vec![]),
        ("no longer a restart Rollout", json!({STRATEGY: "rollout"}), vec![]),
    ];
    for (name, annotations, expected) in cases {
        let new = object(WorkloadKind::Rollout, annotations, plain.clone());
        let ops = preserve_markers(WorkloadKind::Rollout, "/spec/template", &old, &new, &keys());
        assert_eq!(ops, expected, "{name}");
        let patched = apply(&new, &ops);
        if !expected.is_empty() {
            assert_eq!(patched["metadata"]["annotations"], old["metadata"]["annotations"], "{name}");
        }
    }
}

#[test]
fn opting_out_by_label() {
    let mut object = object(WorkloadKind::Deployment, json!({}), template(Value::Null, vec![]));
    assert!(!opted_out(&object));
    object["metadata"]["labels"][OPT_OUT_LABEL] = json!("skip");
    assert!(opted_out(&object));
    object["metadata"]["labels"][OPT_OUT_LABEL] = json!("no");
    assert!(!opted_out(&object));
}

// ---------------------------------------------------------------------------------------------
// CREATE

/// The view a backend would build for `object` (its template read at the kind's pointer).
fn view_of(kind: WorkloadKind, object: &Value) -> WorkloadView {
    let template = object.pointer(template_pointer(kind)).cloned();
    let deployment = Deployment {
        metadata: serde_json::from_value(object["metadata"].clone()).unwrap(),
        spec: Some(DeploymentSpec {
            template: template.clone().map(|t| serde_json::from_value(t).unwrap()).unwrap_or_default(),
            ..Default::default()
        }),
        status: None,
    };
    TestWorkload {
        kind,
        deployment,
        suspended: false,
        has_template: template.is_some(),
        annotations_only: false,
    }
    .view()
}

fn index(resources: &[(ResourceKey, ContentHash)]) -> Index {
    let mut index = Index::default();
    for (key, hash) in resources {
        index.upsert_resource(ResourceView {
            key: key.clone(),
            hash: *hash,
            keys: Default::default(),
            matched: false,
            ignored: false,
            version: None,
        });
    }
    index
}

fn stamp(kind: WorkloadKind, new: &Value, index: &Index, strategy: ReloadStrategy) -> Vec<Value> {
    let opts = DecideOptions { strategy, ..DecideOptions::default() };
    stamp_markers(new, template_pointer(kind), &view_of(kind, new), index, &opts, &keys(), NOW)
}

#[test]
fn creation_stamps_current_hashes() {
    use ReloadStrategy::{Annotations, EnvVars};
    let both = || index(&[(cm(), H1), (secret(), H2)]);
    let path = "/spec/template/spec/containers";
    let annotation_path = "/spec/template/metadata/annotations/reloader.stakater.com~1last-reloaded-from";
    let app =
        |env| template(json!({"team": "a"}), vec![container("app", env), container("proxy", Value::Null)]);
    let cases: Vec<(&str, Value, Index, ReloadStrategy, Vec<Value>)> = vec![
        (
            "env vars, container without env",
            object(WorkloadKind::Deployment, json!({AUTO: "true"}), app(Value::Null)),
            both(),
            EnvVars,
            vec![json!({"op": "add", "path": format!("{path}/0/env"),
                "value": [env(ENV_CM, &H1.to_hex()), env(ENV_SECRET, &H2.to_hex())]})],
        ),
        (
            "env vars, appended, the carried marker left alone",
            object(WorkloadKind::Deployment, json!({AUTO: "true"}), app(json!([env(ENV_CM, &H3.to_hex())]))),
            both(),
            EnvVars,
            vec![
                json!({"op": "add", "path": format!("{path}/0/env/-"), "value": env(ENV_SECRET, &H2.to_hex())}),
            ],
        ),
        (
            "only resources the index knows",
            object(WorkloadKind::Deployment, json!({AUTO: "true"}), app(Value::Null)),
            index(&[(secret(), H2)]),
            EnvVars,
            vec![
                json!({"op": "add", "path": format!("{path}/0/env"), "value": [env(ENV_SECRET, &H2.to_hex())]}),
            ],
        ),
        (
            "not annotated: nothing",
            object(WorkloadKind::Deployment, json!({}), app(Value::Null)),
            both(),
            EnvVars,
            vec![],
        ),
        (
            "annotations: the last resource is recorded",
            object(WorkloadKind::Deployment, json!({AUTO: "true"}), app(Value::Null)),
            both(),
            Annotations,
            vec![json!({"op": "add", "path": annotation_path, "value": marker(&secret(), H2, "app")})],
        ),
        (
            "annotations: the author's marker stays",
            object(
                WorkloadKind::Deployment,
                json!({AUTO: "true"}),
                template(json!({LAST: "theirs"}), vec![container("app", Value::Null)]),
            ),
            both(),
            Annotations,
            vec![],
        ),
        (
            "CronJob template",
            object(WorkloadKind::CronJob, json!({AUTO: "true"}), app(Value::Null)),
            index(&[(cm(), H1)]),
            EnvVars,
            vec![json!({"op": "add", "path": "/spec/jobTemplate/spec/template/spec/containers/0/env",
                "value": [env(ENV_CM, &H1.to_hex())]})],
        ),
        (
            "Job template (mutable at creation)",
            object(WorkloadKind::Job, json!({AUTO: "true"}), app(Value::Null)),
            index(&[(cm(), H1)]),
            EnvVars,
            vec![json!({"op": "add", "path": format!("{path}/0/env"), "value": [env(ENV_CM, &H1.to_hex())]})],
        ),
        (
            "restart Rollout: recorded on its metadata",
            object(WorkloadKind::Rollout, json!({AUTO: "true", STRATEGY: "restart"}), app(Value::Null)),
            both(),
            EnvVars,
            vec![
                json!({"op": "add", "path": "/metadata/annotations/reloader.stakater.com~1last-reloaded-from",
                "value": marker(&secret(), H2, "app")}),
            ],
        ),
        (
            "restart Rollout with a record already",
            object(
                WorkloadKind::Rollout,
                json!({AUTO: "true", STRATEGY: "restart", LAST: "theirs"}),
                app(Value::Null),
            ),
            both(),
            EnvVars,
            vec![],
        ),
    ];
    for (name, new, index, strategy, expected) in cases {
        let kind = match new["kind"].as_str().unwrap() {
            "CronJob" => WorkloadKind::CronJob,
            "Job" => WorkloadKind::Job,
            "Rollout" => WorkloadKind::Rollout,
            _ => WorkloadKind::Deployment,
        };
        let ops = stamp(kind, &new, &index, strategy);
        assert_eq!(ops, expected, "{name}");
        apply(&new, &ops);
    }
}

#[test]
fn explicit_lists_and_namespaces() {
    let other_namespace = ResourceKey::new(ResourceKind::ConfigMap, "elsewhere", "app-config");
    let extra = ResourceKey::new(ResourceKind::ConfigMap, NS, "app-extra");
    let unrelated = ResourceKey::new(ResourceKind::ConfigMap, NS, "other");
    let index = index(&[(other_namespace, H3), (cm(), H1), (extra.clone(), H2), (unrelated, H3)]);
    // Explicit lists reload for resources the pod spec does not use; the marker goes on the
    // first container.
    let new = object(
        WorkloadKind::Deployment,
        json!({"configmap.reloader.stakater.com/reload": "app-.*"}),
        template(Value::Null, vec![json!({"name": "app", "image": "app:1"})]),
    );
    let ops = stamp(WorkloadKind::Deployment, &new, &index, ReloadStrategy::EnvVars);
    assert_eq!(
        ops,
        vec![json!({"op": "add", "path": "/spec/template/spec/containers/0/env", "value": [
            env(ENV_CM, &H1.to_hex()), env("STAKATER_APP_EXTRA_CONFIGMAP", &H2.to_hex())
        ]})]
    );

    let ignored = {
        let mut index = Index::default();
        index.upsert_resource(ResourceView {
            key: cm(),
            hash: H1,
            keys: Default::default(),
            matched: false,
            ignored: true,
            version: None,
        });
        index
    };
    let named = object(
        WorkloadKind::Deployment,
        json!({"configmap.reloader.stakater.com/reload": "app-config"}),
        template(Value::Null, vec![json!({"name": "app", "image": "app:1"})]),
    );
    assert_eq!(
        stamp(WorkloadKind::Deployment, &named, &ignored, ReloadStrategy::EnvVars),
        Vec::<Value>::new()
    );
    assert_eq!(candidate_resources(&view_of(WorkloadKind::Deployment, &named), &ignored).len(), 1);
}

/// Stamping and preserving together: what CREATE stamps, a re-apply of the same manifest keeps.
#[test]
fn a_stamped_marker_survives_a_reapply() {
    let manifest = object(
        WorkloadKind::Deployment,
        json!({AUTO: "true"}),
        template(Value::Null, vec![container("app", Value::Null)]),
    );
    let created = apply(
        &manifest,
        &stamp(WorkloadKind::Deployment, &manifest, &index(&[(cm(), H1)]), ReloadStrategy::EnvVars),
    );
    assert_eq!(created.pointer("/spec/template/spec/containers/0/env/0"), Some(&env(ENV_CM, &H1.to_hex())));
    let reapplied = apply(
        &manifest,
        &preserve_markers(WorkloadKind::Deployment, "/spec/template", &created, &manifest, &keys()),
    );
    assert_eq!(reapplied, created);
}

/// Where the test objects keep their pod template (the controller reads it from its registry).
fn template_pointer(kind: WorkloadKind) -> &'static str {
    match kind {
        WorkloadKind::CronJob => "/spec/jobTemplate/spec/template",
        _ => "/spec/template",
    }
}

// ---------------------------------------------------------------------------------------------
// UPDATE that changes the template: refresh (docs/beyond-stakater.md §11)

#[test]
fn a_release_update_carries_the_current_hashes() {
    use ReloadStrategy::{Annotations, EnvVars};
    let current = index(&[(cm(), H2), (secret(), H3)]);
    let release = |env, annotations| {
        object(
            WorkloadKind::Deployment,
            json!({AUTO: "true"}),
            template(annotations, vec![container("app", env)]),
        )
    };
    let (env_cm, env_secret) = (ENV_CM, ENV_SECRET);
    let cases: Vec<(&str, ReloadStrategy, Value, Value)> = vec![
        (
            "stale env markers are replaced in place",
            EnvVars,
            release(
                json!([env("RELEASE", "2"), env(env_cm, &H1.to_hex()), env(env_secret, &H3.to_hex())]),
                Value::Null,
            ),
            json!({"RELEASE": "2", env_cm: H2.to_hex(), env_secret: H3.to_hex()}),
        ),
        (
            "missing env markers are added",
            EnvVars,
            release(json!([env("RELEASE", "2")]), Value::Null),
            json!({"RELEASE": "2", env_cm: H2.to_hex(), env_secret: H3.to_hex()}),
        ),
        (
            "a stale annotation marker is replaced",
            Annotations,
            release(json!([env("RELEASE", "2")]), json!({LAST: marker(&cm(), H1, "app")})),
            json!({"RELEASE": "2"}),
        ),
    ];
    for (what, strategy, new, want_env) in cases {
        let opts = DecideOptions { strategy, ..DecideOptions::default() };
        let view = view_of(WorkloadKind::Deployment, &new);
        let ops = refresh_markers(&new, "/spec/template", &view, &current, &opts, &keys(), NOW);
        let patched = apply(&new, &ops);
        let env: serde_json::Map<String, Value> = patched["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["name"].as_str().unwrap().to_owned(), e["value"].clone()))
            .collect();
        assert_eq!(Value::Object(env), want_env, "{what}");
        if strategy == Annotations {
            let recorded =
                patched.pointer("/spec/template/metadata/annotations").unwrap()[LAST].as_str().unwrap();
            assert_eq!(recorded, marker(&secret(), H3, "app"), "{what}: the last resource, current");
        }
        // Refreshed once, nothing more to do.
        assert_eq!(
            refresh_markers(
                &patched,
                "/spec/template",
                &view_of(WorkloadKind::Deployment, &patched),
                &current,
                &opts,
                &keys(),
                NOW
            ),
            Vec::<Value>::new(),
            "{what}"
        );
    }
    let old = release(json!([env("RELEASE", "1")]), Value::Null);
    assert!(template_changes(&old, &release(json!([env("RELEASE", "2")]), Value::Null), "/spec/template"));
    assert!(!template_changes(&old, &old.clone(), "/spec/template"));
}

#[test]
fn a_release_update_of_a_deployment_is_held_for_the_window() {
    let current = index(&[(cm(), H2)]);
    let opts = DecideOptions::default();
    let hold = std::time::Duration::from_secs(2);
    let now = "2024-08-07T03:06:40Z";
    let deployment = |annotations: Value, paused: Option<bool>| {
        let mut object = object(
            WorkloadKind::Deployment,
            annotations,
            template(Value::Null, vec![container("app", Value::Null)]),
        );
        if let Some(paused) = paused {
            object["spec"]["paused"] = json!(paused);
        }
        object
    };
    let held = |object: &Value, kind: WorkloadKind, hold| {
        hold_release(object, &view_of(kind, object), &current, &opts, &keys(), hold, now)
    };
    let reloading = deployment(json!({AUTO: "true"}), None);
    let patched = apply(&reloading, &held(&reloading, WorkloadKind::Deployment, hold));
    assert_eq!(patched["spec"]["paused"], json!(true));
    assert_eq!(patched["metadata"]["annotations"]["deployment.reloader.stakater.com/paused-at"], json!(now));
    assert_eq!(patched["metadata"]["annotations"]["reloader.stakater.com/hold-period"], json!("2000ms"));
    assert_eq!(patched["metadata"]["annotations"][AUTO], json!("true"), "other annotations stay");
    let none: Vec<(&str, Value, WorkloadKind, std::time::Duration)> = vec![
        ("no window", reloading.clone(), WorkloadKind::Deployment, std::time::Duration::ZERO),
        ("already paused", deployment(json!({AUTO: "true"}), Some(true)), WorkloadKind::Deployment, hold),
        ("reloads for nothing", deployment(Value::Null, None), WorkloadKind::Deployment, hold),
        ("not a Deployment", reloading.clone(), WorkloadKind::StatefulSet, hold),
    ];
    for (what, object, kind, hold) in none {
        assert_eq!(held(&object, kind, hold), Vec::<Value>::new(), "{what}");
    }
}
