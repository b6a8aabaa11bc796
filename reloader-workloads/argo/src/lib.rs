//! The Argo Rollouts backend: `argoproj.io/v1alpha1` Rollout.
//!
//! [`Rollout`] is a minimal serde type (metadata, pod template, `paused`, `restartAt` typed; the
//! rest kept as JSON) implementing `k8s_openapi::Resource` and `Metadata`, hence `kube::Resource`.
//!
//! Two ways to reload, chosen by the `reloader.stakater.com/rollout-strategy` annotation:
//!
//! - `rollout` (default): the pod template is changed by an RFC 6902 JSON patch (core
//!   `json_patch`; a CRD answers 415 to strategic merge), guarded by a `resourceVersion` test;
//! - `restart`: a merge patch setting `spec.restartAt` to now, the template left alone. The same
//!   patch records the marker as the `last-reloaded-from` annotation on the Rollout's own
//!   metadata, and the Rollout's view reads it back, so replays, resyncs and the start-up
//!   catch-up do not restart it again. That annotation holds one resource: when one write
//!   carries changes for several, it records the last, and a replay of the others restarts once
//!   more.
//!
//! A `workloadRef` Rollout has no inline template: it is skipped (`WriteError::NoTemplate`).

mod types;
mod workload;

pub use types::{
    API_VERSION, GROUP, KIND, LIST_KIND, PLURAL, ROLLOUT_STRATEGY_RESTART, Rollout, RolloutSpec, VERSION,
};

#[cfg(test)]
mod tests;
