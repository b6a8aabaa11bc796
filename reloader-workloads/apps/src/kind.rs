//! What differs between the apps/v1 kinds: where the pod template lives, and pausing.

use k8s_openapi::api::apps::v1::{
    DaemonSet, DaemonSetSpec, Deployment, DeploymentSpec, StatefulSet, StatefulSetSpec,
};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use reloader_core::model::WorkloadKind;
use reloader_core::skeleton::Skeleton;

/// An apps/v1 kind whose pod template reloader patches.
pub trait AppsKind: k8s_openapi::Metadata<Ty = ObjectMeta> {
    const WORKLOAD_KIND: WorkloadKind;
    /// The kind has `spec.paused` and honours the pause-period annotation (Deployments only).
    const PAUSABLE: bool = false;

    /// `spec.template` (`None` only for an object without a spec).
    fn template(&self) -> Option<&PodTemplateSpec>;

    /// `spec.paused`.
    fn paused(&self) -> bool {
        false
    }

    /// The object a view's skeleton stands for (a write built from it needs no read).
    fn from_skeleton(skeleton: Skeleton) -> Self;
}

impl AppsKind for Deployment {
    const WORKLOAD_KIND: WorkloadKind = WorkloadKind::Deployment;
    const PAUSABLE: bool = true;

    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().map(|s| &s.template)
    }

    fn paused(&self) -> bool {
        self.spec.as_ref().and_then(|s| s.paused).unwrap_or(false)
    }

    fn from_skeleton(skeleton: Skeleton) -> Self {
        let paused = Some(skeleton.paused);
        Deployment {
            metadata: skeleton.metadata,
            spec: skeleton.template.map(|template| DeploymentSpec { template, paused, ..Default::default() }),
            status: None,
        }
    }
}

impl AppsKind for DaemonSet {
    const WORKLOAD_KIND: WorkloadKind = WorkloadKind::DaemonSet;

    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().map(|s| &s.template)
    }

    fn from_skeleton(skeleton: Skeleton) -> Self {
        DaemonSet {
            metadata: skeleton.metadata,
            spec: skeleton.template.map(|template| DaemonSetSpec { template, ..Default::default() }),
            status: None,
        }
    }
}

impl AppsKind for StatefulSet {
    const WORKLOAD_KIND: WorkloadKind = WorkloadKind::StatefulSet;

    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().map(|s| &s.template)
    }

    fn from_skeleton(skeleton: Skeleton) -> Self {
        StatefulSet {
            metadata: skeleton.metadata,
            spec: skeleton.template.map(|template| StatefulSetSpec { template, ..Default::default() }),
            status: None,
        }
    }
}
