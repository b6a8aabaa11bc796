//! The write fence for Jobs (`POST /validate-jobs`, docs/security.md "Jobs"): the chart sends the
//! creation of every Job by the controller's own ServiceAccount here, and only a Job a reload
//! would create is allowed: one recreated from a Job this replica saw (alive or deleted within
//! `job_origins::TOMBSTONE_TTL`), or spawned from a CronJob it sees, with nothing changed but
//! reload markers. A ValidatingAdmissionPolicy cannot do this: it sees neither the CronJob nor
//! the deleted Job.
//!
//! Denials name the Job and its origin, never a value of the object.

use std::time::Instant;

use k8s_openapi::api::batch::v1::Job;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use reloader_core::annotations::AnnotationKeys;
use reloader_core::model::{WorkloadKey, WorkloadKind};
use reloader_workload_batch::origin::{recreated_job_digest, spawned_job_digest};
use tracing::warn;

use crate::job_origins::{JobOrigins, Lookup};
use crate::observe::metrics::AdmissionOutcome as Outcome;

/// Denied for good: the Job is not what a reload creates.
const FORBIDDEN: u16 = 403;
/// Denied for now: this replica has not seen the origin (yet); the controller retries a 429.
const NOT_YET: u16 = 429;

/// The answer to a review of a Job creation.
pub(crate) fn review(
    origins: &JobOrigins,
    keys: &AnnotationKeys,
    request: &AdmissionRequest<DynamicObject>,
    now: Instant,
) -> (AdmissionResponse, Outcome) {
    let response = AdmissionResponse::from(request);
    let is_job = request.kind.group == "batch" && request.kind.kind == "Job";
    if request.operation != Operation::Create || !is_job || request.sub_resource.is_some() {
        return (response, Outcome::Skipped);
    }
    let namespace = request.namespace.as_deref().unwrap_or_default();
    let job = match request
        .object
        .as_ref()
        .map(|o| serde_json::to_value(o).and_then(serde_json::from_value::<Job>))
    {
        Some(Ok(job)) => job,
        Some(Err(e)) => {
            // Only the category: serde's message may quote a value of the object.
            warn!(namespace, name = %request.name, error = ?e.classify(), "Job fence: the object does not read as a Job; denied");
            return (deny(response, FORBIDDEN, "the object does not read as a batch/v1 Job"), Outcome::Error);
        }
        None => return (deny(response, FORBIDDEN, "the review has no object"), Outcome::Error),
    };
    match verdict(origins, keys, namespace, &job, now) {
        Ok(()) => (response, Outcome::Allowed),
        Err((code, message)) => {
            warn!(namespace, name = %request.name, code, reason = %message, "Job fence: creation denied");
            (deny(response, code, &message), Outcome::Denied)
        }
    }
}

/// Allowed, or the code and the reason of the denial.
fn verdict(
    origins: &JobOrigins,
    keys: &AnnotationKeys,
    namespace: &str,
    job: &Job,
    now: Instant,
) -> Result<(), (u16, String)> {
    const WHAT: &str = "the write fence lets reloader create only a Job recreated from its own spec or \
        spawned from its CronJob's jobTemplate, with nothing but reload markers changed";
    // A Job recreated under its own name first: a CronJob's Job is recreated as itself too.
    let name = job.metadata.name.as_deref().filter(|n| !n.is_empty());
    let recreated = name.map(|name| WorkloadKey::new(WorkloadKind::Job, namespace, name));
    let as_it_was = recreated.as_ref().map(|key| origins.job(key, now));
    if let Some(Lookup::Known(origin)) = as_it_was
        && origin == recreated_job_digest(job, keys)
    {
        return Ok(());
    }
    if let Some((claim, digest)) = spawned_job_digest(job, keys) {
        let cron_job = WorkloadKey::new(WorkloadKind::CronJob, namespace, &claim.name);
        return match origins.cron_job(&cron_job, &claim.uid) {
            Lookup::Known(origin) if origin == digest => Ok(()),
            Lookup::Known(_) => {
                Err((FORBIDDEN, format!("{WHAT}: this Job differs from the jobTemplate of {cron_job}")))
            }
            Lookup::Other => {
                Err((FORBIDDEN, format!("{WHAT}: {cron_job} has another uid than the Job's owner reference")))
            }
            Lookup::Unknown => {
                Err((NOT_YET, format!("{WHAT}: {cron_job} is not known to this replica (yet)")))
            }
        };
    }
    match (recreated, as_it_was) {
        (Some(key), Some(Lookup::Known(_) | Lookup::Other)) => {
            Err((FORBIDDEN, format!("{WHAT}: this Job differs from {key} as it was before")))
        }
        (Some(key), _) => Err((NOT_YET, format!("{WHAT}: {key} is not known to this replica (yet)"))),
        (None, _) => {
            Err((FORBIDDEN, format!("{WHAT}: a Job without a name and without a CronJob owner is neither")))
        }
    }
}

fn deny(response: AdmissionResponse, code: u16, message: &str) -> AdmissionResponse {
    let mut denied = response.deny(message);
    denied.result.code = code;
    denied.result.reason = if code == NOT_YET { "TooManyRequests" } else { "Forbidden" }.into();
    denied
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::batch::v1::CronJob;
    use reloader_workload_batch::origin::cron_job_digest;
    use serde_json::{Value, json};

    use super::*;
    use crate::job_origins::JobOrigin;

    fn keys() -> AnnotationKeys {
        AnnotationKeys::default()
    }

    fn job(name: Value, owner: Value, image: &str, env: Value) -> Value {
        json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "generateName": "nightly-", "namespace": "ns",
                "labels": {"team": "data"}, "ownerReferences": owner},
            "spec": {"template": {"metadata": {"labels": {"app": "report"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "run", "image": image, "env": env}]}}},
        })
    }

    fn cron_job(uid: &str) -> CronJob {
        serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "nightly", "namespace": "ns", "uid": uid},
            "spec": {"schedule": "0 1 * * *", "jobTemplate": {"metadata": {"labels": {"team": "data"}},
                "spec": {"template": {"metadata": {"labels": {"app": "report"}},
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "run", "image": "r:1"}]}}}}},
        }))
        .unwrap()
    }

    fn request(object: Value, operation: &str) -> AdmissionRequest<DynamicObject> {
        let review: kube::core::admission::AdmissionReview<DynamicObject> = serde_json::from_value(json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "r-1", "kind": {"group": "batch", "version": "v1", "kind": "Job"},
                "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
                "name": object["metadata"]["name"].as_str().unwrap_or_default(), "namespace": "ns",
                "operation": operation, "userInfo": {"username": "system:serviceaccount:reloader:reloader"},
                "object": object, "dryRun": false,
            },
        }))
        .unwrap();
        review.try_into().unwrap()
    }

    /// Allowed, or the code the denial carries.
    fn answer(origins: &JobOrigins, object: Value, now: Instant) -> Result<(), u16> {
        let (response, outcome) = review(origins, &keys(), &request(object, "CREATE"), now);
        if response.allowed {
            assert_eq!(outcome, Outcome::Allowed);
            Ok(())
        } else {
            assert_eq!(outcome, Outcome::Denied);
            assert!(response.result.message.starts_with("the write fence lets reloader create only"));
            Err(response.result.code)
        }
    }

    fn remember_job(origins: &JobOrigins, object: &Value) {
        let job: Job = serde_json::from_value(object.clone()).unwrap();
        origins.seen(
            WorkloadKey::new(WorkloadKind::Job, "ns", "migrate"),
            JobOrigin::Job(recreated_job_digest(&job, &keys())),
        );
    }

    #[test]
    fn a_job_is_recreated_only_as_it_was() {
        let t0 = Instant::now();
        let marker = json!([{"name": "STAKATER_APP_CONFIG_CONFIGMAP", "value": "abc"}]);
        let origin = job(json!("migrate"), json!(null), "m:1", json!(null));
        let origins = JobOrigins::default();
        assert_eq!(answer(&origins, origin.clone(), t0), Err(NOT_YET), "never seen");
        remember_job(&origins, &origin);
        origins.gone(&WorkloadKey::new(WorkloadKind::Job, "ns", "migrate"), t0);
        let recreated = job(json!("migrate"), json!(null), "m:1", marker.clone());
        assert_eq!(answer(&origins, recreated.clone(), t0), Ok(()), "deleted, recreated with a marker");
        assert_eq!(
            answer(&origins, job(json!("migrate"), json!(null), "evil:1", marker.clone()), t0),
            Err(FORBIDDEN)
        );
        let plain_env = json!([{"name": "MODE", "value": "x"}]);
        assert_eq!(
            answer(&origins, job(json!("migrate"), json!(null), "m:1", plain_env), t0),
            Err(FORBIDDEN)
        );
        assert_eq!(
            answer(&origins, job(json!("other"), json!(null), "m:1", marker.clone()), t0),
            Err(NOT_YET)
        );
        assert_eq!(
            answer(&origins, job(json!(null), json!(null), "m:1", marker), t0),
            Err(FORBIDDEN),
            "no name"
        );
        let late = t0 + crate::job_origins::TOMBSTONE_TTL + Duration::from_secs(1);
        assert_eq!(answer(&origins, recreated, late), Err(NOT_YET), "forgotten");
    }

    #[test]
    fn a_job_is_spawned_only_from_its_cron_job() {
        let t0 = Instant::now();
        let origins = JobOrigins::default();
        let owner = |uid: &str| json!([{"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly", "uid": uid, "controller": true}]);
        let marker = json!([{"name": "STAKATER_APP_CONFIG_CONFIGMAP", "value": "abc"}]);
        let spawned = job(json!(null), owner("cj-1"), "r:1", marker.clone());
        assert_eq!(answer(&origins, spawned.clone(), t0), Err(NOT_YET), "CronJob not seen");
        let (uid, digest) = cron_job_digest(&cron_job("cj-1"), &keys()).unwrap();
        origins.seen(
            WorkloadKey::new(WorkloadKind::CronJob, "ns", "nightly"),
            JobOrigin::CronJob { uid, digest },
        );
        assert_eq!(answer(&origins, spawned, t0), Ok(()));
        assert_eq!(
            answer(&origins, job(json!(null), owner("cj-1"), "evil:1", marker.clone()), t0),
            Err(FORBIDDEN)
        );
        assert_eq!(
            answer(&origins, job(json!(null), owner("cj-2"), "r:1", marker), t0),
            Err(FORBIDDEN),
            "another uid"
        );
    }

    #[test]
    fn only_job_creations_are_judged() {
        let origins = JobOrigins::default();
        let object = job(json!("migrate"), json!(null), "m:1", json!(null));
        let (response, outcome) = review(&origins, &keys(), &request(object, "UPDATE"), Instant::now());
        assert!(response.allowed);
        assert_eq!(outcome, Outcome::Skipped);
    }
}
