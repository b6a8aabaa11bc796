//! The scenarios of docs/benchmark.md, each measuring one controller (or the floor) at a time.

pub mod apiserver;
pub mod coalesce;
pub mod cpu;
pub mod failover;
pub mod fanout10;
pub mod floor;
pub mod latency;
pub mod pairs;
pub mod scale10;
pub mod sidecar;
pub mod startup;
