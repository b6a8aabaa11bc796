//! The reloader binary's library: everything that talks to a cluster, wired by `main.rs`.

pub mod alerts;
pub mod args;
pub mod controller;
pub mod events;
pub mod explain;
pub mod http;
pub mod leader;
pub mod memory;
pub mod meta_info;
pub mod metrics;
pub mod run;
pub mod telemetry;
pub mod webhook;
pub mod webhook_notify;
