//! The reloader binary's library: everything that talks to a cluster, wired by `run.rs`.
//!
//! The flow: `sources` (watches) → `reconcile` (index + decide) → `controller` (the executor,
//! the single writer) → API server; `leader` gates the writes, `supervise` owns every task.

pub mod alerts;
mod controller;
pub mod events;
pub mod explain;
pub mod http;
pub mod kinds;
pub mod leader;
pub mod memory;
pub mod meta_info;
pub mod metrics;
mod reconcile;
pub mod run;
pub mod sidecar;
mod sources;
mod supervise;
pub mod telemetry;
mod views;
mod webhook;
pub mod webhook_notify;
