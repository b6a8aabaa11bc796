//! M10, a cluster ten times M1 (`Sizes::M10`: ten times the ConfigMaps, Secrets and Helm releases
//! at the same sizes, and 10,000 workloads): start-up, steady and peak memory of each controller,
//! with kube-apiserver's cost of each start-up; and ours once more inside a memory cgroup limited
//! to the chart's `resources.limits.memory` (charts/reloader/values.yaml), where it must not be
//! OOM-killed.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};

use super::apiserver::{Start, spread_of, start_row, startup_cost_rows};
use super::cpu::{self, CpuOutcome};
use super::fanout10::{self, FanOutcome};
use super::startup::{StartupFixture, StartupSample};
use crate::rows::{MIB, Outcome, PerSubject, ours_only};
use crate::subject::{Launch, Subject};
use crate::{BenchError, Plan, report::MemoryPoint, report::ScenarioResult, report::Target};
use reloader_harness::{Cgroup, CgroupUsage, ControlPlane};

/// The chart's values, from which the limit is read (never a copy of it).
const CHART_VALUES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../charts/reloader/values.yaml");
const LIMIT_NOTE: &str = "n/a: ours only (the chart's limit is ours)";

/// Ours at M10 inside a cgroup limited to the chart's memory limit.
#[derive(Debug, Clone)]
pub struct UnderLimit {
    /// The start's figures; an error when it did not get through (an OOM kill among the causes).
    pub sample: Outcome<StartupSample>,
    pub usage: CgroupUsage,
    /// The chart's value as written, e.g. `256Mi`.
    pub limit: String,
}

/// Starts ours in a fresh cgroup with the chart's limit, measures as M1 does, and reads what the
/// cgroup recorded.
pub async fn under_limit(
    fixture: &mut StartupFixture,
    plane: &ControlPlane,
    ours: &Subject,
    log_dir: &Path,
    plan: &Plan,
) -> Result<UnderLimit, BenchError> {
    let limit = chart_memory_limit()?;
    let bytes = quantity_bytes(&limit)
        .ok_or_else(|| BenchError::measure(format!("{limit}: not a memory quantity")))?;
    let cgroup = Arc::new(Cgroup::create("reloader-bench-m10", bytes).map_err(BenchError::measure)?);
    let launch = Launch { cgroup: Some(cgroup.clone()), ..Launch::named("m10-limited") };
    let sample = fixture.measure_as(plane, ours, log_dir, plan, launch).await.map_err(|e| e.to_string());
    let usage = cgroup.usage().map_err(BenchError::measure)?;
    Ok(UnderLimit { sample, usage, limit })
}

/// `reloader.deployment.resources.limits.memory` of the chart's values.
fn chart_memory_limit() -> Result<String, BenchError> {
    let text = std::fs::read_to_string(CHART_VALUES)
        .map_err(|source| BenchError::Io { context: format!("reading {CHART_VALUES}"), source })?;
    let values: Value = serde_saphyr::from_str(&text).map_err(BenchError::measure)?;
    values["reloader"]["deployment"]["resources"]["limits"]["memory"].as_str().map(str::to_owned).ok_or_else(
        || BenchError::measure(format!("{CHART_VALUES} sets no reloader.deployment.resources.limits.memory")),
    )
}

/// Bytes of a Kubernetes memory quantity (`256Mi`, `1G`, `1048576`).
fn quantity_bytes(quantity: &str) -> Option<u64> {
    const SUFFIXES: [(&str, u64); 8] = [
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
    ];
    let quantity = quantity.trim();
    let (number, factor) = SUFFIXES
        .iter()
        .find_map(|(suffix, factor)| Some((quantity.strip_suffix(suffix)?, *factor)))
        .unwrap_or((quantity, 1));
    number.parse::<u64>().ok()?.checked_mul(factor)
}

/// Everything M10 measured.
pub struct M10 {
    pub objects: usize,
    pub starts: PerSubject<Vec<Start>>,
    pub under_limit: Outcome<UnderLimit>,
}

impl M10 {
    /// M10's rows.
    pub fn rows(&self) -> Vec<ScenarioResult> {
        let objects = self.objects;
        let mut rows = vec![
            start_row(
                &self.starts,
                (
                    "M10-steady",
                    &format!("M10 steady VmRSS after ready, {objects} objects"),
                    "MiB",
                    Target::RatioAtMost(0.10),
                ),
                |s| s.sample.steady_bytes / MIB,
                objects,
            ),
            start_row(
                &self.starts,
                (
                    "M10-peak",
                    &format!("M10 peak VmHWM during start-up, {objects} objects"),
                    "MiB",
                    Target::RatioAtMost(0.20),
                ),
                |s| s.sample.peak_bytes / MIB,
                objects,
            ),
            start_row(
                &self.starts,
                (
                    "S10-first-reload",
                    "S1 at M10: process start to first reload applied",
                    "s",
                    Target::RatioAtMost(0.5),
                ),
                |s| s.sample.first_reload_seconds,
                objects,
            ),
        ];
        rows.extend(startup_cost_rows(&self.starts, "M10", objects));
        rows.extend(Self::limit_rows(&self.under_limit, objects));
        rows
    }

    fn limit_rows(limited: &Outcome<UnderLimit>, objects: usize) -> Vec<ScenarioResult> {
        let (limit, cgroup) = match limited {
            Ok(l) => (l.limit.as_str(), l.usage.version.as_label()),
            Err(_) => ("the chart's limit", "no cgroup"),
        };
        let detail = json!(limited.as_ref().ok().map(|l| json!({
        "limit": l.limit, "cgroup": l.usage.to_json(), "objects": objects, "error": l.sample.as_ref().err(),
    })));
        let row = |id: &str, title: String, unit: &str, target: Target| {
            ScenarioResult::new(id, title, unit, target).detail(detail.clone())
        };
        let sample = |pick: fn(&StartupSample) -> f64| move |l: &UnderLimit| l.sample.as_ref().ok().map(pick);
        let steady = ours_only(
            limited,
            LIMIT_NOTE,
            row(
                "M10-limit-steady",
                format!("M10 steady VmRSS inside a {limit} memory cgroup ({cgroup})"),
                "MiB",
                Target::Informational,
            ),
            sample(|s| s.steady_bytes / MIB),
        );
        // A failed start inside the cgroup is this row's failure, with the cause.
        let steady = match limited.as_ref().map(|l| &l.sample) {
            Ok(Err(error)) => steady.failed(error),
            _ => steady,
        };
        vec![
            ours_only(
                limited,
                LIMIT_NOTE,
                row(
                    "M10-limit-oom-kills",
                    format!("M10 OOM kills inside a {limit} memory cgroup ({cgroup})"),
                    "count",
                    Target::Equals(0.0),
                ),
                |l| Some(l.usage.oom_kills as f64),
            ),
            steady,
            ours_only(
                limited,
                LIMIT_NOTE,
                row(
                    "M10-limit-peak",
                    format!("M10 cgroup peak usage against {limit} ({cgroup})"),
                    "MiB",
                    Target::Informational,
                ),
                |l| l.usage.peak_bytes.map(|b| b as f64 / MIB),
            ),
        ]
    }

    /// M10's points for the memory chart.
    pub fn memory_points(&self) -> Vec<MemoryPoint> {
        [("ours", &self.starts.ours), ("stakater", &self.starts.stakater)]
            .into_iter()
            .filter_map(|(subject, starts)| {
                let median =
                    |pick: fn(&Start) -> f64| spread_of(starts, pick).ok().flatten().map(|s| s.median);
                Some(MemoryPoint {
                    subject: subject.to_owned(),
                    scale: 10.0,
                    objects: self.objects,
                    steady_bytes: median(|s| s.sample.steady_bytes)?,
                    peak_bytes: median(|s| s.sample.peak_bytes)?,
                })
            })
            .collect()
    }
}

/// What the scale, cost and CPU scenarios measured (rows with ids K1, U1, M10, F10).
pub struct ScaleMeasurements {
    /// Starts at M1's largest size, with kube-apiserver's cost of each.
    pub m1_starts: PerSubject<Vec<Start>>,
    pub m1_objects: usize,
    pub cpu: PerSubject<CpuOutcome>,
    /// Only with `--m10` (or the small run's tiny version).
    pub m10: Option<M10>,
    pub f10: Option<PerSubject<FanOutcome>>,
}

impl ScaleMeasurements {
    pub fn rows(&self) -> Vec<ScenarioResult> {
        let mut rows = startup_cost_rows(&self.m1_starts, "M1", self.m1_objects);
        rows.extend(cpu::rows(&self.cpu));
        if let Some(m10) = &self.m10 {
            rows.extend(m10.rows());
        }
        if let Some(f10) = &self.f10 {
            rows.extend(fanout10::rows(f10));
        }
        rows
    }

    pub fn memory_points(&self) -> Vec<MemoryPoint> {
        self.m10.as_ref().map(M10::memory_points).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_quantities() {
        for (quantity, bytes) in [
            ("256Mi", Some(256 << 20)),
            ("1Gi", Some(1 << 30)),
            ("512M", Some(512_000_000)),
            ("64Ki", Some(65_536)),
            ("1048576", Some(1_048_576)),
            ("lots", None),
            ("", None),
        ] {
            assert_eq!(quantity_bytes(quantity), bytes, "{quantity}");
        }
    }

    #[test]
    fn reads_the_charts_limit() {
        let limit = chart_memory_limit().expect("the chart sets a memory limit");
        assert!(quantity_bytes(&limit).is_some_and(|b| b >= 64 << 20), "{limit}");
    }
}
