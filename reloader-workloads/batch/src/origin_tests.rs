//! The write fence's view of created Jobs: a reload's Job has its origin's digest after the API
//! server has set and defaulted its fields; any other change gives another digest.

use k8s_openapi::api::batch::v1::{CronJob, Job};
use reloader_core::annotations::AnnotationKeys;
use reloader_core::markers::MarkerChange;
use reloader_core::model::ReloadStrategy::{Annotations, EnvVars};
use reloader_core::workload::{Workload, WorkloadWrite};
use serde_json::{Value, json};

use crate::origin::{ClaimedCronJob, cron_job_digest, recreated_job_digest, spawned_job_digest};
use crate::{CronJobWorkload, JobWorkload};
use reloader_workload_testkit::*;

fn keys() -> AnnotationKeys {
    AnnotationKeys::default()
}

fn template(labels: Value, env: Value) -> Value {
    json!({
        "metadata": {"labels": labels},
        "spec": {
            "restartPolicy": "Never",
            "serviceAccountName": "migrator",
            "containers": [{"name": "migrate", "image": "m:1", "command": ["migrate"], "env": env}],
            "volumes": [{"name": "config", "configMap": {"name": "app-config"}}],
        },
    })
}

/// What the API server adds to a Job it creates, whoever created it: the selector, its labels on
/// the pod template (and on the Job's own labels when it copied them), the defaults, a status.
fn as_served(mut job: Value, uid: &str) -> Value {
    let name = job["metadata"]["name"].as_str().unwrap_or("spawned-x7k2p").to_string();
    let server = json!({"controller-uid": uid, "batch.kubernetes.io/controller-uid": uid,
        "job-name": name, "batch.kubernetes.io/job-name": name});
    let spec = &mut job["spec"];
    spec["selector"] = json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
    for (field, value) in [
        ("backoffLimit", json!(6)),
        ("completionMode", json!("NonIndexed")),
        ("suspend", json!(false)),
        ("podReplacementPolicy", json!("TerminatingOrFailed")),
    ] {
        if spec.get(field).is_none() {
            spec[field] = value;
        }
    }
    if spec.get("completions").is_none() && spec.get("parallelism").is_none() {
        spec["completions"] = json!(1);
    }
    if spec.get("parallelism").is_none() {
        spec["parallelism"] = json!(1);
    }
    let template_labels = spec["template"]["metadata"]["labels"].clone();
    let mut labels = template_labels.clone();
    for (k, v) in server.as_object().unwrap() {
        labels[k] = v.clone();
    }
    spec["template"]["metadata"]["labels"] = labels.clone();
    let meta = &mut job["metadata"];
    if meta.get("labels").is_none_or(|l| l.as_object().is_none_or(|m| m.is_empty())) {
        // The labels are copied from the pod template before the selector's are added to it,
        // but share its map, so the Job shows them too.
        meta["labels"] = labels;
    }
    meta["uid"] = json!(uid);
    meta["resourceVersion"] = json!("42");
    meta["creationTimestamp"] = json!(NOW);
    job["status"] = json!({"active": 1});
    job
}

fn served_job(template: Value) -> Job {
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "migrate", "namespace": "ns", "labels": {"app": "migrate"},
            "annotations": {"reloader.stakater.com/auto": "true"}},
        "spec": {"backoffLimit": 3, "template": template},
    });
    serde_json::from_value(as_served(job, "old-uid")).unwrap()
}

fn cron_job(job_template_labels: Value, template: Value) -> CronJob {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": "ns", "uid": "cj-uid"},
        "spec": {"schedule": "0 1 * * *", "jobTemplate": {
            "metadata": {"labels": job_template_labels, "annotations": {"team": "data"}},
            "spec": {"template": template},
        }},
    }))
    .unwrap()
}

/// The Job a reload of `workload` creates, as the API server then shows it.
fn created(workload: &dyn Workload, changes: &[MarkerChange]) -> Job {
    let keys = keys();
    let write = workload.reload_write(changes, &write_context(&keys)).unwrap().expect("a write");
    let job = match write {
        WorkloadWrite::RecreateJob(job) | WorkloadWrite::CreateJob(job) => job,
        other => panic!("a Job write, got {other:?}"),
    };
    serde_json::from_value(as_served(serde_json::to_value(&job).unwrap(), "new-uid")).unwrap()
}

fn changed(job: &Job, edit: impl Fn(&mut Value)) -> Job {
    let mut value = serde_json::to_value(job).unwrap();
    edit(&mut value);
    serde_json::from_value(value).unwrap()
}

/// One change to a Job's JSON, named.
type Tamper = (&'static str, Box<dyn Fn(&mut Value)>);

/// What a stolen token would change in a Job it creates, each of which the fence must see.
fn tampering() -> Vec<Tamper> {
    vec![
        (
            "image",
            Box::new(|v: &mut Value| {
                v["spec"]["template"]["spec"]["containers"][0]["image"] = json!("evil:1")
            }),
        ),
        (
            "command",
            Box::new(|v: &mut Value| {
                v["spec"]["template"]["spec"]["containers"][0]["command"] = json!(["sh"])
            }),
        ),
        (
            "plain env",
            Box::new(|v: &mut Value| {
                v["spec"]["template"]["spec"]["containers"][0]["env"] =
                    json!([{"name": "MODE", "value": "x"}])
            }),
        ),
        (
            "hostPath volume",
            Box::new(|v: &mut Value| {
                v["spec"]["template"]["spec"]["volumes"] =
                    json!([{"name": "root", "hostPath": {"path": "/"}}])
            }),
        ),
        (
            "service account",
            Box::new(|v: &mut Value| v["spec"]["template"]["spec"]["serviceAccountName"] = json!("admin")),
        ),
        (
            "pod label",
            Box::new(|v: &mut Value| v["spec"]["template"]["metadata"]["labels"]["extra"] = json!("1")),
        ),
        (
            "privileged",
            Box::new(|v: &mut Value| {
                v["spec"]["template"]["spec"]["containers"][0]["securityContext"] =
                    json!({"privileged": true})
            }),
        ),
        (
            "second container",
            Box::new(|v: &mut Value| {
                let containers = &mut v["spec"]["template"]["spec"]["containers"];
                let mut extra = containers[0].clone();
                extra["name"] = json!("sidecar");
                containers.as_array_mut().unwrap().push(extra);
            }),
        ),
        ("parallelism", Box::new(|v: &mut Value| v["spec"]["parallelism"] = json!(500))),
        ("job annotation", Box::new(|v: &mut Value| v["metadata"]["annotations"]["extra"] = json!("1"))),
        ("finalizer", Box::new(|v: &mut Value| v["metadata"]["finalizers"] = json!(["example.com/hold"]))),
    ]
}

#[test]
fn a_recreated_job_has_its_origins_digest() {
    let plain = template(json!({"app": "migrate"}), json!([env_var("MODE", "a")]));
    let marked =
        template(json!({"app": "migrate"}), json!([env_var("MODE", "a"), env_var(ENV_CM, H1.to_hex())]));
    let annotated = {
        let mut t = plain.clone();
        t["metadata"]["annotations"] = marker_annotation(&cm(), H1, "migrate");
        t
    };
    // (origin template, the reload's changes)
    let rows = [
        ("first env marker", plain.clone(), vec![set(cm(), H1, EnvVars, 0)]),
        ("env marker replaced", marked.clone(), vec![set(cm(), H2, EnvVars, 0)]),
        ("env marker removed", marked, vec![remove(cm(), EnvVars)]),
        ("annotation", plain, vec![set(cm(), H1, Annotations, 0)]),
        ("annotation replaced", annotated, vec![set(secret(), H2, Annotations, 0)]),
    ];
    for (case, origin_template, changes) in rows {
        let origin = served_job(origin_template);
        let recreated = created(&JobWorkload(&origin), &changes);
        let origin_digest = recreated_job_digest(&origin, &keys());
        assert_eq!(recreated_job_digest(&recreated, &keys()), origin_digest, "{case}");
        for (tamper, edit) in tampering() {
            let tampered = changed(&recreated, edit);
            assert_ne!(recreated_job_digest(&tampered, &keys()), origin_digest, "{case}: {tamper}");
        }
    }
}

#[test]
fn a_spawned_job_has_its_cron_jobs_digest() {
    let pod_labels = json!({"app": "report"});
    // (case, jobTemplate labels): without labels the API server copies the pod template's.
    for (case, job_template_labels) in [("labelled", json!({"team": "data"})), ("unlabelled", json!(null))] {
        let cron_job = cron_job(job_template_labels, template(pod_labels.clone(), json!(null)));
        let (uid, origin) = cron_job_digest(&cron_job, &keys()).unwrap();
        assert_eq!(uid, "cj-uid");
        let spawned = created(&CronJobWorkload(&cron_job), &[set(cm(), H1, EnvVars, 0)]);
        let (claim, digest) = spawned_job_digest(&spawned, &keys()).expect("claims its CronJob");
        assert_eq!(claim, ClaimedCronJob { name: "nightly".into(), uid: "cj-uid".into() }, "{case}");
        assert_eq!(digest, origin, "{case}");
        for (tamper, edit) in tampering() {
            let tampered = changed(&spawned, edit);
            assert_ne!(spawned_job_digest(&tampered, &keys()).unwrap().1, origin, "{case}: {tamper}");
        }
    }
}

#[test]
fn only_a_cron_jobs_controller_reference_claims_a_spawn() {
    let cron_job = cron_job(json!({"team": "data"}), template(json!({"app": "report"}), json!(null)));
    let spawned = created(&CronJobWorkload(&cron_job), &[set(cm(), H1, EnvVars, 0)]);
    let owner = json!({"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly", "uid": "cj-uid", "controller": true});
    let rows = [
        ("no owner", json!(null)),
        ("not the controller", json!([{"controller": false}])),
        ("another kind", json!([{"kind": "Deployment", "apiVersion": "apps/v1"}])),
        ("two owners", json!([owner.clone(), owner.clone()])),
    ];
    for (case, owners) in rows {
        let mut owners = owners;
        if let Some(list) = owners.as_array_mut() {
            for entry in list.iter_mut() {
                let mut merged = owner.clone();
                merged.as_object_mut().unwrap().extend(entry.as_object().unwrap().clone());
                *entry = merged;
            }
        }
        let job = changed(&spawned, |v| v["metadata"]["ownerReferences"] = owners.clone());
        assert_eq!(spawned_job_digest(&job, &keys()), None, "{case}");
    }
}

#[test]
fn the_garbage_collectors_finalizers_are_not_the_jobs() {
    let origin = served_job(template(json!({"app": "migrate"}), json!(null)));
    for finalizer in ["orphan", "foregroundDeletion"] {
        let being_deleted = changed(&origin, |v| {
            v["metadata"]["finalizers"] = json!([finalizer]);
            v["metadata"]["deletionTimestamp"] = json!(NOW);
        });
        assert_eq!(
            recreated_job_digest(&being_deleted, &keys()),
            recreated_job_digest(&origin, &keys()),
            "{finalizer}"
        );
    }
}
