//! `argoproj.io/v1alpha1` Rollout: its spec, typed where reloader reads or writes it.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use reloader_core::annotations::AnnotationKeys;
use reloader_core::markers::MarkerChange;
use reloader_core::model::WorkloadKind;
use reloader_core::views::WorkloadView;
use reloader_core::workload::{WorkloadWrite, WriteContext};
use reloader_workload_crd::{CrdObject, CrdSpec};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub const API_VERSION: &str = "argoproj.io/v1alpha1";
pub const KIND: &str = "Rollout";

/// An Argo Rollout as read, lossless.
pub type Rollout = CrdObject<RolloutSpec>;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutSpec {
    /// Absent on a Rollout that uses `workloadRef` to borrow a Deployment's template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<PodTemplateSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// RFC 3339: pods created before it are restarted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_at: Option<String>,
    /// Every other spec field (`replicas`, `selector`, `strategy`, `workloadRef`, ...), kept as read.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl CrdSpec for RolloutSpec {
    const GROUP: &'static str = "argoproj.io";
    const VERSION: &'static str = "v1alpha1";
    const API_VERSION: &'static str = API_VERSION;
    const KIND: &'static str = KIND;
    const LIST_KIND: &'static str = "RolloutList";
    const PLURAL: &'static str = "rollouts";
    const WORKLOAD_KIND: WorkloadKind = WorkloadKind::Rollout;

    fn template(&self) -> Option<&PodTemplateSpec> {
        self.template.as_ref()
    }

    fn paused(&self) -> bool {
        self.paused.unwrap_or(false)
    }

    fn from_skeleton(template: Option<PodTemplateSpec>, paused: bool) -> Self {
        Self { template, paused: Some(paused), restart_at: None, other: Map::new() }
    }

    /// A `restart` Rollout's markers include what its own metadata records (its template never
    /// changes, so that is where restarts are recorded).
    fn refine_view(rollout: &Rollout, keys: &AnnotationKeys, view: &mut WorkloadView) {
        crate::restart::overlay_restart_record(rollout, keys, view);
    }

    /// A `restartAt` restart under `rollout-strategy: restart`, else the template JSON patch.
    fn template_write(
        rollout: &Rollout,
        template: &PodTemplateSpec,
        changes: &[MarkerChange],
        ctx: &WriteContext<'_>,
    ) -> Option<WorkloadWrite> {
        if crate::restart::restarts(rollout, ctx.keys) {
            return crate::restart::restart_write(rollout, template, changes, ctx);
        }
        rollout.json_patch_write(template, changes, ctx)
    }
}
