//! The reloader binary's library: everything that talks to a cluster, wired by `run.rs`.
//!
//! The flow, stage by stage: `sources` (the watches) feed the `state` traits, which `reconcile`
//! implements: it keeps the index and asks the core which workloads need a reload; the
//! `executor` writes (the only module that does), gated by `leader`; `notify` reports what was done, `observe` exposes it;
//! `supervise` owns every task. `admission` and `explain` answer from the same index, `kinds`
//! registry and `views`.

pub(crate) mod admission;
pub mod args;
pub(crate) mod client;
mod discovery;
pub(crate) mod executor;
pub mod explain;
mod job_origins;
pub mod kinds;
pub mod leader;
mod listen;
pub mod meta_info;
pub(crate) mod notify;
pub mod observe;
mod rbac;
mod reconcile;
mod restarts;
pub mod run;
mod scope;
mod sources;
/// How every watch starts (streamed initial lists, paged where the API server refuses them); the
/// benchmark's floor process starts its watches the same way.
pub use sources::watcher_stream;
mod state;
mod supervise;
mod views;
