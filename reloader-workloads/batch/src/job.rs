//! Job: a Job's pod template is immutable, so a reload deletes it and creates it again.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use reloader_core::markers::{MarkerChange, apply_to_template};
use reloader_core::model::WorkloadKind;
use reloader_core::workload::{Workload, WorkloadWrite, WriteContext};

/// Labels the Job controller sets from the old Job's uid and name; the new Job gets its own.
const SERVER_SET_JOB_LABELS: [&str; 4] =
    ["controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name"];

/// A Job seen as a [`Workload`] (borrowing: the orphan rule forbids implementing the core trait
/// on k8s-openapi types directly).
#[derive(Debug, Clone, Copy)]
pub struct JobWorkload<'a>(pub &'a Job);

impl Workload for JobWorkload<'_> {
    fn kind(&self) -> WorkloadKind {
        WorkloadKind::Job
    }

    fn metadata(&self) -> &ObjectMeta {
        &self.0.metadata
    }

    fn pod_template(&self) -> Option<&PodTemplateSpec> {
        self.0.spec.as_ref().map(|s| &s.template)
    }

    /// The Job to create after deleting this one: same name and namespace, markers applied,
    /// and every field the server or the Job controller owns cleared so the create is accepted
    /// and the controller selects the new pods, not the old ones. `None` if already current.
    fn template_write(
        &self,
        _template: &PodTemplateSpec,
        changes: &[MarkerChange],
        ctx: &WriteContext<'_>,
    ) -> Option<WorkloadWrite> {
        // The template is changed in a copy of the whole Job, which is created again.
        let mut job = self.0.clone();
        let spec = job.spec.as_mut()?;
        if !apply_to_template(&mut spec.template, changes, ctx.keys, ctx.now_unix) {
            return None;
        }
        spec.selector = None;
        spec.manual_selector = None;
        if let Some(template_meta) = spec.template.metadata.as_mut() {
            strip_job_labels(&mut template_meta.labels);
        }
        let meta = &mut job.metadata;
        meta.resource_version = None;
        meta.uid = None;
        meta.creation_timestamp = None;
        meta.managed_fields = None;
        meta.generation = None;
        meta.self_link = None;
        meta.deletion_timestamp = None;
        meta.deletion_grace_period_seconds = None;
        strip_job_labels(&mut meta.labels);
        job.status = None;
        Some(WorkloadWrite::RecreateJob(Box::new(job)))
    }
}

pub(crate) fn strip_job_labels(labels: &mut Option<BTreeMap<String, String>>) {
    if let Some(map) = labels {
        map.retain(|k, _| !SERVER_SET_JOB_LABELS.contains(&k.as_str()));
        if map.is_empty() {
            *labels = None;
        }
    }
}
