//! The reloader binary's library: everything that talks to a cluster, wired by `main.rs`.
//!
//! The flow, stage by stage: the controller's watches fill the index and decide which workloads
//! need a reload, the `executor` writes (the only module that does), `notify` reports what was
//! done, `observe` exposes it. `admission` and `explain` answer from the same index and rules.

pub(crate) mod admission;
pub mod args;
pub mod controller;
pub(crate) mod executor;
pub mod explain;
pub mod leader;
pub mod meta_info;
pub(crate) mod notify;
pub mod observe;
pub mod run;
