//! The scenarios of docs/benchmark.md, each measuring one controller (or the floor) at a time.

pub mod coalesce;
pub mod failover;
pub mod floor;
pub mod latency;
pub mod pairs;
pub mod sidecar;
pub mod startup;
