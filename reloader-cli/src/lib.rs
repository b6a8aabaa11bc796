//! The reloader binary's library: everything that talks to a cluster, wired by `main.rs`.

pub mod alerts;
pub mod http;
pub mod meta_info;
pub mod metrics;
pub mod sidecar;
pub mod telemetry;
pub mod webhook_notify;
