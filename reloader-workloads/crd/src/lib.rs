//! What every workload kind served from a CRD (Argo `Rollout`, OpenShift `DeploymentConfig`)
//! has in common, written once so each backend declares only what differs.
//!
//! k8s-openapi has no types for these kinds, so [`CrdObject`] is a minimal, lossless serde type:
//! `apiVersion`, `kind`, `metadata` and a typed spec, every other top-level field kept as JSON
//! so a read object round-trips unchanged. It is generic over the spec, which implements
//! [`CrdSpec`]: the kind's identity (group, version, plural, ...) and where its pod template is.
//! From that alone `CrdObject<S>` implements `k8s_openapi::Resource`, `ListableResource` and
//! `Metadata` (hence `kube::Resource`, usable with `kube::Api` as it is) and the core
//! [`Workload`] trait. A backend names its kind as `pub type Rollout = CrdObject<RolloutSpec>`.
//!
//! A reload is, by default, an RFC 6902 JSON patch of `spec.template` (core `json_patch`): a CRD
//! answers 415 to a strategic-merge patch, and the JSON patch, guarded by a test of the
//! `resourceVersion` it was computed from, cannot drop containers. A kind with another way to
//! reload (Argo's `restartAt`) overrides [`CrdSpec::template_write`].
//!
//! A kind the user declares (`--custom-workload`) has no type of its own: [`CustomObject`] reads
//! it from JSON by its declaration and writes the same guarded JSON patch at the declared pointer.
//!
//! A generic type rather than one struct per kind: the orphan rule lets this crate implement the
//! foreign traits once for every kind, with no macro.

mod custom;
mod object;
mod workload;

pub use custom::CustomObject;
pub use object::{CrdObject, CrdSpec};
