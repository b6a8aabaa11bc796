//! CronJob: a reload spawns a Job from the `jobTemplate`, as `kubectl create job --from` does.

use k8s_openapi::api::batch::v1::{CronJob, Job, JobSpec};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use reloader_core::markers::{MarkerAction, MarkerChange, apply_to_template};
use reloader_core::model::{ReloadStrategy, WorkloadKind};
use reloader_core::workload::{Workload, WorkloadWrite, WriteContext};

/// Marks a Job as started by hand rather than by the schedule (the CronJob controller and
/// `kubectl create job --from=cronjob/...` use the same annotation).
pub(crate) const INSTANTIATE_ANNOTATION: &str = "cronjob.kubernetes.io/instantiate";

/// A CronJob seen as a [`Workload`] (borrowing: the orphan rule forbids implementing the core
/// trait on k8s-openapi types directly).
#[derive(Debug, Clone, Copy)]
pub struct CronJobWorkload<'a>(pub &'a CronJob);

impl Workload for CronJobWorkload<'_> {
    fn kind(&self) -> WorkloadKind {
        WorkloadKind::CronJob
    }

    fn metadata(&self) -> &ObjectMeta {
        &self.0.metadata
    }

    fn pod_template(&self) -> Option<&PodTemplateSpec> {
        self.0.spec.as_ref()?.job_template.spec.as_ref().map(|s| &s.template)
    }

    fn suspended(&self) -> bool {
        self.0.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false)
    }

    /// A Job to create, built from the `jobTemplate` with the markers applied. The CronJob's
    /// template never carries markers, so there is no "already current" here; the one case
    /// without a Job is a delete under env-vars when the template has no marker to remove (as
    /// Stakater: nothing was removed, nothing runs).
    fn template_write(
        &self,
        template: &PodTemplateSpec,
        changes: &[MarkerChange],
        ctx: &WriteContext<'_>,
    ) -> Option<WorkloadWrite> {
        let mut template = template.clone();
        let changed = apply_to_template(&mut template, changes, ctx.keys, ctx.now_unix);
        let records_a_hash = changes
            .iter()
            .any(|c| !(c.strategy == ReloadStrategy::EnvVars && c.action == MarkerAction::Remove));
        if !changed && !records_a_hash {
            return None;
        }
        let cron_job = self.0;
        let job_template = cron_job.spec.as_ref().map(|s| &s.job_template);
        let spec = JobSpec { template, ..job_template.and_then(|t| t.spec.clone()).unwrap_or_default() };
        let template_meta = job_template.and_then(|t| t.metadata.clone()).unwrap_or_default();
        let mut annotations = template_meta.annotations.unwrap_or_default();
        annotations.insert(INSTANTIATE_ANNOTATION.into(), "manual".into());
        let name = cron_job.metadata.name.clone().unwrap_or_default();
        let metadata = ObjectMeta {
            generate_name: Some(format!("{name}-")),
            namespace: cron_job.metadata.namespace.clone(),
            labels: template_meta.labels,
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: "batch/v1".into(),
                kind: "CronJob".into(),
                name,
                uid: cron_job.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        };
        let job = Job { metadata, spec: Some(spec), status: None };
        Some(WorkloadWrite::CreateJob(Box::new(job)))
    }
}
