use k8s_openapi::api::batch::v1::CronJob;
use reloader_core::annotations::{AnnotationKeys, LAST_RELOADED_FROM};
use reloader_core::hash::DELETE_MARKER_HASH;
use reloader_core::markers::MarkerChange;
use reloader_core::model::{ReloadStrategy, WorkloadKey, WorkloadKind};
use reloader_core::workload::{Workload, WorkloadWrite, WriteError};
use serde_json::{Value, json};

use crate::CronJobWorkload;
use crate::test_support::*;

fn containers(run_env: Value, upload_env: Option<Value>) -> Value {
    let mut upload = json!({"name": "upload", "image": "up:1"});
    if let Some(env) = upload_env {
        upload["env"] = env;
    }
    json!([{"name": "run", "image": "report:1", "env": run_env}, upload])
}

fn pod_template(annotations: Option<Value>, containers: Value) -> Value {
    let mut metadata = json!({"labels": {"app": "report"}});
    if let Some(annotations) = annotations {
        metadata["annotations"] = annotations;
    }
    json!({"metadata": metadata, "spec": {"restartPolicy": "Never", "containers": containers}})
}

fn plain_template() -> Value {
    pod_template(None, containers(json!([{"name": "LOG", "value": "info"}]), None))
}

fn cron_job(suspend: Option<bool>, template: Value) -> CronJob {
    let mut spec = json!({
        "schedule": "*/5 * * * *",
        "jobTemplate": {
            "metadata": {"labels": {"team": "data"}, "annotations": {"owner": "data-team"}},
            "spec": {"backoffLimit": 2, "template": template},
        },
    });
    if let Some(suspend) = suspend {
        spec["suspend"] = json!(suspend);
    }
    serde_json::from_value(json!({
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "report", "namespace": "ns", "uid": "cj-uid-1", "resourceVersion": "7"},
        "spec": spec,
    }))
    .expect("valid CronJob")
}

/// The Job a reload of the fixture CronJob creates, around the expected pod template.
fn expected_job(template: Value) -> Value {
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "generateName": "report-",
            "namespace": "ns",
            "labels": {"team": "data"},
            "annotations": {"owner": "data-team", "cronjob.kubernetes.io/instantiate": "manual"},
            "ownerReferences": [{
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "name": "report",
                "uid": "cj-uid-1",
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": {"backoffLimit": 2, "template": template},
    })
}

fn reload(cron_job: &CronJob, changes: &[MarkerChange]) -> Result<Option<Value>, WriteError> {
    let keys = AnnotationKeys::default();
    let write = CronJobWorkload(cron_job).reload_write(changes, &write_context(&keys))?;
    Ok(write.map(|w| match w {
        WorkloadWrite::CreateJob(job) => serde_json::to_value(&job).unwrap(),
        other => panic!("a CronJob reload creates a Job, got {other:?}"),
    }))
}

#[test]
fn reload_creates_a_job_from_the_job_template() {
    use ReloadStrategy::{Annotations, EnvVars};
    let log = json!({"name": "LOG", "value": "info"});
    let cm_h1 = json!({"name": ENV_CM, "value": H1.to_hex()});
    let with_marker = pod_template(None, containers(json!([log, cm_h1]), None));
    let cases: Vec<(&str, Value, Vec<MarkerChange>, Option<Value>)> = vec![
        (
            "env-vars on the first container",
            plain_template(),
            vec![set(cm(), H1, EnvVars, 0)],
            Some(with_marker.clone()),
        ),
        (
            "env-vars on the second container",
            plain_template(),
            vec![set(cm(), H1, EnvVars, 1)],
            Some(pod_template(None, containers(json!([log]), Some(json!([cm_h1]))))),
        ),
        (
            "two resources, one Job",
            plain_template(),
            vec![set(cm(), H1, EnvVars, 0), set(secret(), H2, EnvVars, 1)],
            Some(pod_template(
                None,
                containers(json!([log, cm_h1]), Some(json!([{"name": ENV_SECRET, "value": H2.to_hex()}]))),
            )),
        ),
        (
            "annotations",
            plain_template(),
            vec![set(secret(), H2, Annotations, 1)],
            Some(pod_template(
                Some(json!({LAST_RELOADED_FROM: marker(&secret(), H2, "upload")})),
                containers(json!([log]), None),
            )),
        ),
        (
            "annotations delete: the delete-marker hash",
            plain_template(),
            vec![remove(cm(), Annotations)],
            Some(pod_template(
                Some(json!({LAST_RELOADED_FROM: marker(&cm(), DELETE_MARKER_HASH, "run")})),
                containers(json!([log]), None),
            )),
        ),
        (
            "the template already carries the hash: a Job all the same",
            with_marker.clone(),
            vec![set(cm(), H1, EnvVars, 0)],
            Some(with_marker.clone()),
        ),
        (
            "env-vars delete removes the marker from the template",
            with_marker.clone(),
            vec![remove(cm(), EnvVars)],
            Some(plain_template()),
        ),
        (
            "env-vars delete with no marker to remove: no Job",
            plain_template(),
            vec![remove(cm(), EnvVars)],
            None,
        ),
        ("no changes", plain_template(), vec![], None),
    ];
    for (name, template, changes, expected_template) in cases {
        let written = reload(&cron_job(None, template), &changes);
        assert_eq!(written, Ok(expected_template.map(expected_job)), "{name}");
    }
}

#[test]
fn the_cron_job_itself_is_not_modified() {
    let before = cron_job(None, plain_template());
    let snapshot = serde_json::to_value(&before).unwrap();
    reload(&before, &[set(cm(), H1, ReloadStrategy::EnvVars, 0)]).unwrap().unwrap();
    assert_eq!(serde_json::to_value(&before).unwrap(), snapshot);
}

#[test]
fn suspension_comes_from_spec_suspend() {
    let keys = AnnotationKeys::default();
    for (suspend, expected) in [(None, false), (Some(false), false), (Some(true), true)] {
        let cj = cron_job(suspend, plain_template());
        assert_eq!(CronJobWorkload(&cj).suspended(), expected, "{suspend:?}");
        assert_eq!(CronJobWorkload(&cj).view(&keys).suspended, expected, "{suspend:?}");
    }
    let view = CronJobWorkload(&cron_job(None, plain_template())).view(&keys);
    assert_eq!(view.key, WorkloadKey::new(WorkloadKind::CronJob, "ns", "report"));
    assert!(view.has_template);
    assert_eq!(view.containers, vec!["run".into(), "upload".into()]);
}

#[test]
fn missing_templates_and_containers_are_errors() {
    let key = WorkloadKey::new(WorkloadKind::CronJob, "ns", "report");
    let change = [set(cm(), H1, ReloadStrategy::EnvVars, 0)];
    let no_containers = cron_job(None, json!({"spec": {"containers": []}}));
    assert_eq!(reload(&no_containers, &change), Err(WriteError::NoContainers(key.clone())));
    let mut no_job_spec = cron_job(None, plain_template());
    no_job_spec.spec.as_mut().unwrap().job_template.spec = None;
    assert_eq!(reload(&no_job_spec, &change), Err(WriteError::NoTemplate(key.clone())));
    let out_of_range = [set(cm(), H1, ReloadStrategy::EnvVars, 5)];
    assert_eq!(
        reload(&cron_job(None, plain_template()), &out_of_range),
        Err(WriteError::NoSuchContainer { workload: key, index: 5 })
    );
}
