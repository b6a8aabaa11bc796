//! The pure heart of reloader: everything that decides, and nothing that talks to a cluster.
//!
//! - [`hash`]: Stakater-compatible content hashes and [`naming`]: the env-var marker names.
//! - [`keys`]: key filters, the opt-in hash of some keys only (docs/beyond-stakater.md §10).
//! - [`annotations`]: the annotation keys and how their values parse.
//! - `references` (internal): which ConfigMaps/Secrets a pod spec uses, which container gets
//!   the marker.
//! - [`custom_kind`]: the kinds a user declares (`--custom-workload`).
//! - [`model`]: the vocabulary: kinds, keys, content hashes and references.
//! - [`views`]: the compact, data-free views of resources and workloads, and how one is built.
//! - [`decide`]: docs/compatibility.md §4 as a function from (workload, resource, options) to a decision.
//! - [`explain`]: why a workload would or would not reload, for `reloader explain`.
//! - [`markers`]: the markers a workload carries and the changes a reload makes to them.
//! - [`workload`]: the trait a backend implements to turn a decision into a write, and
//!   [`json_patch`]: the RFC 6902 form of that write for kinds without strategic merge.
//! - [`index`]: the state kept from watches, with the reverse index resource → workloads, and
//!   [`event_plan`]: what one resource event does, worked out once from it.
//! - [`restart`]: restart by eviction, the next step of a restart from what was read.
//! - [`admission`]: the markers the admission webhook keeps on re-apply and stamps on create.
//! - [`options`]: the settings of `reloader run` and their validation (the binary parses them).
//! - [`timing`]: when a reload may happen (delay, interval, maintenance windows); the loop guard.
//! - [`selector`] and [`duration`]: label selectors and Go-style durations.

pub mod admission;
pub mod annotations;
pub mod custom_kind;
pub mod decide;
pub mod duration;
pub mod event_plan;
pub mod explain;
pub mod hash;
pub mod index;
pub mod json_patch;
pub mod keys;
pub mod markers;
pub mod model;
pub mod naming;
pub mod options;
pub(crate) mod references;
pub mod restart;
pub mod selector;
pub mod skeleton;
#[cfg(test)]
mod testkit;
pub mod timing;
pub mod views;
pub mod workload;
