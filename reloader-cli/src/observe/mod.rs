//! Looking at the controller from outside: the HTTP endpoints (`/metrics`, `/live`, `/readyz`),
//! the metrics themselves, logs and traces, the allocator settings that keep memory low, and the
//! profiles `--enable-pprof` serves on their own port.

pub(crate) mod http;
pub mod memory;
pub(crate) mod metrics;
// CPU profiles are sampled by a SIGPROF handler: Unix only (`--enable-pprof` is refused elsewhere).
#[cfg(unix)]
pub(crate) mod pprof;
pub mod telemetry;
pub(crate) mod trace;
