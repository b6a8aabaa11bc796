//! The behaviour tests' fixtures: one [`TestEnv`](fixtures::TestEnv) per test (the shared plane
//! from `reloader-harness`, a namespace of its own, an admin client and reloader started for that
//! namespace), workloads of every kind built from one description, ConfigMaps/Secrets with the
//! hash Stakater would compute, readers of the markers reloader writes, table-driven cases, local
//! HTTP endpoints and proxies, and the Helm chart installed and exercised on the plane.
//!
//! The tests themselves are in `tests/`, one binary per area (annotations, strategies, scope,
//! admission, HA, the chart's RBAC, ...).

pub mod chart;
pub mod fixtures;
pub mod fixtures_extra;
pub mod otlp;
