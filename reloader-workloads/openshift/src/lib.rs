//! The OpenShift backend: `apps.openshift.io/v1` DeploymentConfig.
//!
//! k8s-openapi has no type for it, so [`DeploymentConfig`] is the shared lossless CRD object type
//! (`reloader-workload-crd`) around [`DeploymentConfigSpec`]: the metadata, the pod template and
//! `paused` are typed, everything else is kept as JSON so a read object round-trips unchanged.
//! It is a `kube::Resource`, usable with `kube::Api` as it is, and a core `Workload`.
//!
//! A reload is the shared RFC 6902 JSON patch: OpenShift's API server would take a
//! strategic-merge patch, but a cluster serving DeploymentConfig from a CRD answers 415, and the
//! JSON patch, guarded by a `resourceVersion` test, is valid on both and cannot drop containers.

mod types;

pub use types::{API_VERSION, DeploymentConfig, DeploymentConfigSpec, KIND};

#[cfg(test)]
mod tests;
