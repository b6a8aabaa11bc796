//! Where a Job reloader creates comes from, as a digest the write fence can compare
//! (docs/security.md, "Jobs"): a reload creates a Job only by recreating one from its own spec
//! or by spawning one from a CronJob's `jobTemplate`, in both cases with reload markers added.
//! An origin's digest is taken from the Job or CronJob as the watch sees it; a created Job's
//! digest from the Job the API server is asked to create. They are equal exactly when the created
//! Job is its origin plus markers, give or take what the API server sets or defaults.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{CronJob, Job, JobSpec};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use reloader_core::annotations::AnnotationKeys;
use reloader_core::markers::strip_markers;
use serde::Serialize;
use serde_json::Value;
use sha1::{Digest as _, Sha1};

use crate::cronjob::INSTANTIATE_ANNOTATION;
use crate::job::strip_job_labels;

/// The digest of a Job's normal form (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OriginDigest([u8; 20]);

impl OriginDigest {
    pub const fn from_bytes(bytes: [u8; 20]) -> Self {
        OriginDigest(bytes)
    }
}

/// The CronJob a created Job claims to be spawned from: its controller owner reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedCronJob {
    pub name: String,
    pub uid: String,
}

/// Everything of a Job that decides what runs and how, without markers or server-set fields.
/// Field order is fixed by the struct and maps are sorted, so equal forms hash equally.
#[derive(Serialize)]
struct NormalForm<'a> {
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
    owner_references: Option<&'a [OwnerReference]>,
    finalizers: Option<Vec<&'a str>>,
    spec: Value,
}

impl NormalForm<'_> {
    fn digest(&self) -> OriginDigest {
        // Serializing plain maps and strings cannot fail.
        let bytes = serde_json::to_vec(self).unwrap_or_default();
        OriginDigest(Sha1::digest(&bytes).into())
    }
}

/// A recreated Job's origin: the Job itself (keyed by its namespace and name by the caller).
/// The same function gives the digest of the Job being created, so a recreate is allowed when
/// the two are equal.
pub fn recreated_job_digest(job: &Job, keys: &AnnotationKeys) -> OriginDigest {
    let meta = &job.metadata;
    let mut labels = meta.labels.clone();
    strip_job_labels(&mut labels);
    NormalForm {
        labels,
        annotations: non_empty(meta.annotations.clone()),
        owner_references: meta.owner_references.as_deref(),
        finalizers: own_finalizers(meta.finalizers.as_deref()),
        spec: normal_spec(job.spec.clone().unwrap_or_default(), keys),
    }
    .digest()
}

/// A CronJob's `jobTemplate` as the Jobs spawned from it read: its labels (or, when it has none,
/// the pod template's, which the API server copies to a Job without labels), its annotations and
/// its spec. With the CronJob's uid, which a spawned Job names as its owner.
pub fn cron_job_digest(cron_job: &CronJob, keys: &AnnotationKeys) -> Option<(String, OriginDigest)> {
    let uid = cron_job.metadata.uid.clone()?;
    let template = &cron_job.spec.as_ref()?.job_template;
    let meta = template.metadata.clone().unwrap_or_default();
    let spec = template.spec.clone().unwrap_or_default();
    let mut labels = non_empty(meta.labels);
    if labels.is_none() {
        labels = spec.template.metadata.as_ref().and_then(|m| non_empty(m.labels.clone()));
    }
    strip_job_labels(&mut labels);
    let form = NormalForm {
        labels,
        annotations: non_empty(meta.annotations),
        owner_references: None,
        finalizers: None,
        spec: normal_spec(spec, keys),
    };
    Some((uid, form.digest()))
}

/// The CronJob a Job being created says it was spawned from, and the digest to compare with
/// that CronJob's: `None` unless its one owner reference is a CronJob's controller reference.
pub fn spawned_job_digest(job: &Job, keys: &AnnotationKeys) -> Option<(ClaimedCronJob, OriginDigest)> {
    let meta = &job.metadata;
    let [owner] = meta.owner_references.as_deref()? else { return None };
    let is_cron_job =
        owner.api_version == "batch/v1" && owner.kind == "CronJob" && owner.controller == Some(true);
    if !is_cron_job {
        return None;
    }
    let mut labels = meta.labels.clone();
    strip_job_labels(&mut labels);
    let mut annotations = meta.annotations.clone();
    if let Some(map) = annotations.as_mut() {
        map.remove(INSTANTIATE_ANNOTATION);
    }
    let form = NormalForm {
        labels,
        annotations: non_empty(annotations),
        owner_references: None,
        finalizers: own_finalizers(meta.finalizers.as_deref()),
        spec: normal_spec(job.spec.clone().unwrap_or_default(), keys),
    };
    Some((ClaimedCronJob { name: owner.name.clone(), uid: owner.uid.clone() }, form.digest()))
}

/// The spec without markers and without what the API server sets or defaults: the selector
/// (generated), its labels on the pod template, and fields left at their default value (a
/// `jobTemplate` may omit what the created Job then carries).
fn normal_spec(mut spec: JobSpec, keys: &AnnotationKeys) -> Value {
    spec.selector = None;
    spec.manual_selector = spec.manual_selector.filter(|manual| *manual);
    normal_template(&mut spec.template, keys);
    if spec.backoff_limit == Some(6) || spec.backoff_limit == Some(i32::MAX) {
        spec.backoff_limit = None;
    }
    if spec.completions == Some(1) {
        spec.completions = None;
    }
    if spec.parallelism == Some(1) {
        spec.parallelism = None;
    }
    if spec.completion_mode.as_deref() == Some("NonIndexed") {
        spec.completion_mode = None;
    }
    if spec.suspend == Some(false) {
        spec.suspend = None;
    }
    // Defaulted by a feature gate, to one of two values depending on podFailurePolicy; either way
    // it only decides when a failed pod is replaced.
    spec.pod_replacement_policy = None;
    serde_json::to_value(spec).unwrap_or_default()
}

fn normal_template(template: &mut PodTemplateSpec, keys: &AnnotationKeys) {
    strip_markers(template, keys);
    if let Some(meta) = template.metadata.as_mut() {
        strip_job_labels(&mut meta.labels);
    }
}

/// The finalizers but those the garbage collector adds while the Job is being deleted (the last
/// state a watch sees of a deleted Job may carry them).
fn own_finalizers(finalizers: Option<&[String]>) -> Option<Vec<&str>> {
    const DELETION: [&str; 2] = ["orphan", "foregroundDeletion"];
    let own: Vec<&str> = finalizers?.iter().map(String::as_str).filter(|f| !DELETION.contains(f)).collect();
    (!own.is_empty()).then_some(own)
}

fn non_empty(map: Option<BTreeMap<String, String>>) -> Option<BTreeMap<String, String>> {
    map.filter(|m| !m.is_empty())
}
