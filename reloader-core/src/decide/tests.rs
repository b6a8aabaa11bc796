//! The decision tables: docs/behaviour.md §A (1-19, what needs no cluster) and §B (20-26, markers,
//! idempotence and deletes), plus the edges of docs/compatibility.md §4.3.

mod decisions;
mod plans;
mod problems;

use super::*;
use crate::model::{RefVia, WorkloadKind};
use crate::testkit::*;

use RefVia::{EnvFrom, EnvValueFrom, Projected, Volume};
use ResourceKind::{ConfigMap, Secret};
