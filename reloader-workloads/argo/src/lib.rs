//! The Argo Rollouts backend: `argoproj.io/v1alpha1` Rollout.
//!
//! [`Rollout`] is the shared lossless CRD object type (`reloader-workload-crd`) around
//! [`RolloutSpec`] (pod template, `paused`, `restartAt` typed; the rest kept as JSON), hence a
//! `kube::Resource` and a core `Workload`.
//!
//! Two ways to reload, chosen by the `reloader.stakater.com/rollout-strategy` annotation:
//!
//! - `rollout` (default): the pod template is changed by the shared CRD JSON patch, guarded by a
//!   `resourceVersion` test (a CRD answers 415 to strategic merge);
//! - `restart`: a merge patch setting `spec.restartAt` to now, the template left alone. The same
//!   patch records the marker as the `last-reloaded-from` annotation on the Rollout's own
//!   metadata, and the Rollout's view reads it back, so replays, resyncs and the start-up
//!   catch-up do not restart it again. That annotation holds one resource: when one write
//!   carries changes for several, it records the last, and a replay of the others restarts once
//!   more.
//!
//! A `workloadRef` Rollout has no inline template: it is skipped (`WriteError::NoTemplate`).

mod restart;
mod types;

pub use types::{API_VERSION, KIND, Rollout, RolloutSpec};

#[cfg(test)]
mod tests;
