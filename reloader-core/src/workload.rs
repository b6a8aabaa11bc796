//! The `Workload` trait: what a backend provides so the core can decide and a write can be built.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::annotations::AnnotationKeys;
use crate::markers::MarkerChange;
use crate::model::{WorkloadKey, WorkloadKind};
use crate::views::{WorkloadParts, WorkloadView, build_view};

/// Which patch format a patch body is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// Kubernetes strategic-merge patch (built-in kinds only; CRDs answer 415).
    Strategic,
    /// RFC 7386 JSON merge patch.
    Merge,
    /// RFC 6902 JSON patch.
    Json,
}

/// What the object must still be for a patch to apply. The backend writes it into the body in
/// the patch format's own terms (`metadata.resourceVersion`, a JSON patch's `test`) and states
/// it here too, so that whoever sends the patch never reads the body to learn it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Precondition {
    /// None: the write is the same whenever it is sent.
    None,
    /// The object's `resourceVersion` is still this one (the write carries the time, or
    /// addresses list entries by position); the API server refuses the patch otherwise.
    ResourceVersion(String),
}

impl Precondition {
    /// The version an object was read at, where it has one (an object never read from a
    /// server has none, and nothing to guard).
    pub fn read_at(metadata: &ObjectMeta) -> Self {
        metadata.resource_version.clone().map_or(Precondition::None, Precondition::ResourceVersion)
    }
}

/// The concrete write a backend wants made. The executor sends it; backends never do I/O.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkloadWrite {
    /// PATCH the workload itself.
    Patch { kind: PatchKind, body: serde_json::Value, precondition: Precondition },
    /// Create this Job (a CronJob reload: the CronJob itself is not modified).
    CreateJob(Box<Job>),
    /// Delete the Job of the same name (background propagation), then create this one.
    RecreateJob(Box<Job>),
}

/// Inputs a write may need besides the object and the changes.
#[derive(Debug, Clone)]
pub struct WriteContext<'a> {
    pub keys: &'a AnnotationKeys,
    /// Unix seconds, for `observedAt`.
    pub now_unix: i64,
    /// RFC 3339, for `paused-at` and Argo's `restartAt`.
    pub now_rfc3339: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WriteError {
    #[error("{0} has no pod template (a workloadRef Rollout?): nothing to reload")]
    NoTemplate(WorkloadKey),
    #[error("{0} has no containers: nothing to put the marker on")]
    NoContainers(WorkloadKey),
    #[error("{workload}: container index {index} does not exist")]
    NoSuchContainer { workload: WorkloadKey, index: u16 },
}

/// A workload kind as the core sees it. Backends implement it on the typed object (or a thin
/// wrapper), the executor calls it on a freshly read object when a write is needed.
pub trait Workload {
    fn kind(&self) -> WorkloadKind;
    fn metadata(&self) -> &ObjectMeta;
    /// The pod template, or `None` for a kind instance without one (a `workloadRef` Rollout).
    fn pod_template(&self) -> Option<&PodTemplateSpec>;
    /// A suspended CronJob does not spawn Jobs on reload.
    fn suspended(&self) -> bool {
        false
    }
    /// `spec.paused` where the kind has it.
    fn paused(&self) -> bool {
        false
    }
    /// The pod template is only a map of annotations the kind's operator copies to its pods
    /// (a declared kind's `annotations=`): no containers, markers as annotations.
    fn annotations_only(&self) -> bool {
        false
    }

    /// What the view is built from (an override of `view` starts from these too).
    fn view_parts(&self) -> WorkloadParts<'_> {
        WorkloadParts {
            kind: self.kind(),
            metadata: self.metadata(),
            template: self.pod_template(),
            suspended: self.suspended(),
            paused: self.paused(),
            annotations_only: self.annotations_only(),
        }
    }

    /// The compact view the index keeps.
    fn view(&self, keys: &AnnotationKeys) -> WorkloadView {
        build_view(self.view_parts(), keys)
    }

    /// The write that applies `changes` (all for this workload), or `None` if the workload
    /// already carries every marker (idempotence: replays and restarts write nothing). The
    /// template is checked first ([`checked_template`]); each kind builds its write in
    /// [`Workload::template_write`].
    fn reload_write(
        &self,
        changes: &[MarkerChange],
        ctx: &WriteContext<'_>,
    ) -> Result<Option<WorkloadWrite>, WriteError> {
        if changes.is_empty() {
            return Ok(None);
        }
        let template = checked_template(self, changes)?;
        Ok(self.template_write(template, changes, ctx))
    }

    /// The write that applies `changes` to `template` (this workload's pod template, known to
    /// exist and to have every container the changes name), or `None` if it is already current.
    fn template_write(
        &self,
        template: &PodTemplateSpec,
        changes: &[MarkerChange],
        ctx: &WriteContext<'_>,
    ) -> Option<WorkloadWrite>;

    /// The write that ends a pause period (Deployments only).
    fn resume_write(&self, _ctx: &WriteContext<'_>) -> Option<WorkloadWrite> {
        None
    }
}

/// The pod template `changes` apply to, after checking that it exists, has containers and that
/// every change names one of them (`apply_to_template` would silently skip a bad index).
pub fn checked_template<'a, W: Workload + ?Sized>(
    workload: &'a W,
    changes: &[MarkerChange],
) -> Result<&'a PodTemplateSpec, WriteError> {
    let key = || {
        let meta = workload.metadata();
        WorkloadKey::new(
            workload.kind(),
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default(),
        )
    };
    let template = workload.pod_template().ok_or_else(|| WriteError::NoTemplate(key()))?;
    let containers = template.spec.as_ref().map_or(0, |s| s.containers.len());
    if workload.annotations_only() {
        // Markers go to the annotations map, on no container.
        return Ok(template);
    }
    if containers == 0 {
        return Err(WriteError::NoContainers(key()));
    }
    match changes.iter().find(|c| usize::from(c.container) >= containers) {
        Some(bad) => Err(WriteError::NoSuchContainer { workload: key(), index: bad.container }),
        None => Ok(template),
    }
}
