//! The OpenShift backend: `apps.openshift.io/v1` DeploymentConfig.
//!
//! k8s-openapi has no type for it, so [`DeploymentConfig`] is a minimal serde type: the metadata,
//! the pod template and `paused` are typed, everything else is kept as JSON so a read object
//! round-trips unchanged. It implements `k8s_openapi::Resource` and `Metadata`, which makes it a
//! `kube::Resource` too (kube's blanket impl), usable with `kube::Api` as it is.
//!
//! A reload is an RFC 6902 JSON patch (core `json_patch`): OpenShift's API server would take a
//! strategic-merge patch, but a cluster serving DeploymentConfig from a CRD answers 415, and the
//! JSON patch, guarded by a `resourceVersion` test, is valid on both and cannot drop containers.

mod types;
mod workload;

pub use types::{
    API_VERSION, DeploymentConfig, DeploymentConfigSpec, GROUP, KIND, LIST_KIND, PLURAL, VERSION,
};

#[cfg(test)]
mod tests;
