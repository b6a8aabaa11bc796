use k8s_openapi::api::batch::v1::Job;
use reloader_core::annotations::{AnnotationKeys, LAST_RELOADED_FROM};
use reloader_core::markers::MarkerChange;
use reloader_core::model::{ReloadStrategy, WorkloadKey, WorkloadKind};
use reloader_core::workload::{Workload, WorkloadWrite, WriteError};
use serde_json::{Value, json};

use crate::JobWorkload;
use crate::test_support::*;

fn server_labels() -> Value {
    json!({
        "app": "migrate",
        "controller-uid": "job-uid-1",
        "batch.kubernetes.io/controller-uid": "job-uid-1",
        "job-name": "migrate",
        "batch.kubernetes.io/job-name": "migrate",
    })
}

/// A Job as the API server returns it, with `containers` in its pod template.
fn job(template_annotations: Option<Value>, containers: Value) -> Job {
    let mut template_metadata = json!({"labels": server_labels()});
    if let Some(annotations) = template_annotations {
        template_metadata["annotations"] = annotations;
    }
    serde_json::from_value(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "migrate",
            "namespace": "ns",
            "uid": "job-uid-1",
            "resourceVersion": "99",
            "generation": 1,
            "creationTimestamp": "2024-08-01T00:00:00Z",
            "labels": server_labels(),
            "annotations": {"reloader.stakater.com/auto": "true"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly",
                "uid": "cj-uid-1", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "batch/v1",
                "time": "2024-08-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": {
            "backoffLimit": 3,
            "completions": 1,
            "parallelism": 1,
            "manualSelector": false,
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "job-uid-1"}},
            "template": {
                "metadata": template_metadata,
                "spec": {"restartPolicy": "Never", "containers": containers},
            },
        },
        "status": {"succeeded": 1, "startTime": "2024-08-01T00:00:01Z"},
    }))
    .expect("valid Job")
}

/// The Job to recreate: the fixture with every server-owned field gone.
fn expected_job(template_annotations: Option<Value>, containers: Value) -> Value {
    let mut template_metadata = json!({"labels": {"app": "migrate"}});
    if let Some(annotations) = template_annotations {
        template_metadata["annotations"] = annotations;
    }
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "migrate",
            "namespace": "ns",
            "labels": {"app": "migrate"},
            "annotations": {"reloader.stakater.com/auto": "true"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly",
                "uid": "cj-uid-1", "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {
            "backoffLimit": 3,
            "completions": 1,
            "parallelism": 1,
            "template": {
                "metadata": template_metadata,
                "spec": {"restartPolicy": "Never", "containers": containers},
            },
        },
    })
}

fn reload(job: &Job, changes: &[MarkerChange]) -> Result<Option<Value>, WriteError> {
    let keys = AnnotationKeys::default();
    let write = JobWorkload(job).reload_write(changes, &write_context(&keys))?;
    Ok(write.map(|w| match w {
        WorkloadWrite::RecreateJob(job) => serde_json::to_value(&job).unwrap(),
        other => panic!("a Job reload recreates the Job, got {other:?}"),
    }))
}

#[test]
fn reload_recreates_the_job_with_server_fields_cleared() {
    use ReloadStrategy::{Annotations, EnvVars};
    let plain = json!([{"name": "migrate", "image": "m:1"}, {"name": "proxy", "image": "p:1"}]);
    let cm_h1 = json!({"name": ENV_CM, "value": H1.to_hex()});
    let marked =
        json!([{"name": "migrate", "image": "m:1", "env": [cm_h1]}, {"name": "proxy", "image": "p:1"}]);
    let cm_marker = json!({LAST_RELOADED_FROM: marker(&cm(), H1, "migrate")});
    type Case = (&'static str, (Option<Value>, Value), Vec<MarkerChange>, Option<(Option<Value>, Value)>);
    let cases: Vec<Case> = vec![
        ("env-vars", (None, plain.clone()), vec![set(cm(), H1, EnvVars, 0)], Some((None, marked.clone()))),
        (
            "two resources, one recreate",
            (None, plain.clone()),
            vec![set(cm(), H1, EnvVars, 0), set(secret(), H2, EnvVars, 1)],
            Some((
                None,
                json!([{"name": "migrate", "image": "m:1", "env": [cm_h1]},
                    {"name": "proxy", "image": "p:1", "env": [{"name": ENV_SECRET, "value": H2.to_hex()}]}]),
            )),
        ),
        (
            "annotations",
            (None, plain.clone()),
            vec![set(cm(), H1, Annotations, 0)],
            Some((Some(cm_marker.clone()), plain.clone())),
        ),
        (
            "env-vars delete",
            (None, marked.clone()),
            vec![remove(cm(), EnvVars)],
            Some((
                None,
                json!([{"name": "migrate", "image": "m:1", "env": []}, {"name": "proxy", "image": "p:1"}]),
            )),
        ),
        ("env-vars, already current", (None, marked.clone()), vec![set(cm(), H1, EnvVars, 0)], None),
        (
            "annotations, already current",
            (Some(cm_marker), plain.clone()),
            vec![set(cm(), H1, Annotations, 0)],
            None,
        ),
        ("env-vars delete, nothing to remove", (None, plain.clone()), vec![remove(cm(), EnvVars)], None),
        ("no changes", (None, plain), vec![], None),
    ];
    for (name, (annotations, containers), changes, expected) in cases {
        let written = reload(&job(annotations, containers), &changes);
        assert_eq!(written, Ok(expected.map(|(a, c)| expected_job(a, c))), "{name}");
    }
}

#[test]
fn labels_left_empty_are_dropped() {
    let mut only_server_labels = job(None, json!([{"name": "migrate"}]));
    let labels = only_server_labels.metadata.labels.as_mut().unwrap();
    labels.remove("app");
    let written = reload(&only_server_labels, &[set(cm(), H1, ReloadStrategy::EnvVars, 0)]).unwrap().unwrap();
    assert_eq!(written["metadata"].get("labels"), None);
    assert_eq!(written["spec"]["template"]["metadata"]["labels"], json!({"app": "migrate"}));
}

#[test]
fn missing_containers_are_errors() {
    let key = WorkloadKey::new(WorkloadKind::Job, "ns", "migrate");
    let change = [set(cm(), H1, ReloadStrategy::EnvVars, 0)];
    assert_eq!(reload(&job(None, json!([])), &change), Err(WriteError::NoContainers(key.clone())));
    let mut no_spec = job(None, json!([{"name": "migrate"}]));
    no_spec.spec = None;
    assert_eq!(reload(&no_spec, &change), Err(WriteError::NoTemplate(key)));
}

#[test]
fn view_of_a_job() {
    let keys = AnnotationKeys::default();
    let j = job(None, json!([{"name": "migrate"}]));
    let view = JobWorkload(&j).view(&keys);
    assert_eq!(view.key, WorkloadKey::new(WorkloadKind::Job, "ns", "migrate"));
    assert!(view.has_template && !view.suspended);
    assert_eq!(view.metadata_rules.auto.as_deref(), Some("true"));
}
