//! Looking at the controller from outside: the HTTP endpoints (`/metrics`, `/live`, `/readyz`),
//! the metrics themselves, logs and traces, and the allocator settings that keep memory low.

pub(crate) mod http;
pub mod memory;
pub(crate) mod metrics;
pub mod telemetry;
pub(crate) mod trace;
