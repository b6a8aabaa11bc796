//! The apps/v1 backend: Deployment, DaemonSet and StatefulSet share one implementation of the
//! core [`Workload`](reloader_core::workload::Workload) trait, [`AppsWorkload`], generic over the
//! small [`AppsKind`] trait that says where each kind keeps its pod template.
//!
//! A reload is one strategic-merge patch of just the touched env entries or the marker
//! annotation. Deployments with a pause period also get `spec.paused: true` and the `paused-at`
//! annotation in that same patch; [`pause_deadline`] tells when to send
//! [`resume_write`](reloader_core::workload::Workload::resume_write), from the annotations alone,
//! so a pause survives restarts and leader changes.

mod kind;
mod pause;
mod workload;

pub use kind::AppsKind;
pub use pause::{PauseDeadline, pause_deadline};
pub use workload::AppsWorkload;

#[cfg(test)]
mod tests;
