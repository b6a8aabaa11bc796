//! docs/benchmark.md's benchmark: our controller against Stakater Reloader on one local control plane and
//! one data set, in the same run. `hack/bench` drives it through the `reloader-bench` binary;
//! tests/bench/tests/bench_smoke.rs runs a small version through the same [`run`].
//!
//! Stakater is measured only when the user points `STAKATER_BIN` at a binary they built; without
//! it, its column is null with the reason, and only targets that are absolute (no LIST per event,
//! one ReplicaSet, nothing lost or doubled) are judged.

use std::path::PathBuf;
use std::time::Duration;

use dataset::Sizes;

mod chart;
mod dataset;
pub mod diff;
mod identity;
mod markdown;
mod netns;
mod observer;
pub mod procfs;
mod report;
mod rows;
mod run;
mod scenarios;
pub mod stats;
mod subject;

pub use chart::svg;
pub use markdown::readme_table;
pub use report::{Report, ScenarioResult, Target};
pub use run::run;
pub use subject::{STAKATER_UNAVAILABLE, version_of};

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// A few hundred objects and short scenarios, one repetition (the smoke test's size).
    pub small: bool,
    /// Fractions of M1's data set to measure memory at, ascending (RSS against object count).
    pub scales: Vec<f64>,
    /// Repetitions of M1/S1, F1 and H1 (median and spread).
    pub repeat: usize,
    /// Our `reloader` binary.
    pub binary: PathBuf,
    /// A Stakater Reloader binary built by the user, if any.
    pub stakater: Option<PathBuf>,
    /// Where logs go (the report files are written by the caller).
    pub log_dir: PathBuf,
    /// Keep the plane and its data set after measuring, until SIGINT, for profiling by hand.
    pub hold: bool,
    /// Which scenarios run; those left out are reported as not run.
    pub scenarios: Scenarios,
    /// Also M10 (ten times M1, with ours under the chart's memory limit) and F10 (3,000-wide
    /// fan-out); tiny versions of both with `small`.
    pub m10: bool,
}

/// The scenarios one run measures: all of them, or one group when comparing builds or settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenarios {
    All,
    /// M1/S1 (and M10 with `m10`): comparing allocators or builds.
    Memory,
    /// L1, its floor, F1 and A1, on the data set grown to the largest scale: comparing runtime
    /// or allocator settings.
    Latency,
    /// U1 and K1 during L1's load, on the data set grown to the largest scale: comparing what a
    /// reload costs the controller and kube-apiserver.
    Cpu,
}

impl BenchOptions {
    /// docs/benchmark.md's sizes, or the small ones.
    pub fn plan(&self) -> Plan {
        if self.small {
            Plan {
                l1_updates: 20,
                l1_pairs: 10,
                f1_workloads: 30,
                f10_workloads: 60,
                m10: Sizes::M10.times(0.01),
                idle: Duration::from_secs(5),
                h1_updates: 20,
                p1_updates: 20,
                settle: Duration::from_secs(2),
                rss_samples: 3,
                quiet: Duration::from_secs(2),
                lease: LeaseTimings::FAST,
            }
        } else {
            Plan {
                l1_updates: 200,
                l1_pairs: 40,
                f1_workloads: 300,
                f10_workloads: 3000,
                m10: Sizes::M10,
                idle: Duration::from_secs(300),
                h1_updates: 200,
                p1_updates: 100,
                settle: Duration::from_secs(10),
                rss_samples: 5,
                quiet: Duration::from_secs(5),
                lease: LeaseTimings::DEFAULT,
            }
        }
    }

    /// Default scales: ¼, ½ and the whole data set; a twentieth and a fortieth when small.
    pub fn default_scales(small: bool) -> Vec<f64> {
        if small { vec![0.025, 0.05] } else { vec![0.25, 0.5, 1.0] }
    }
}

/// Scenario sizes.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// L1: sequential updates, one every 250 ms.
    pub l1_updates: usize,
    /// L1: ConfigMap/Deployment pairs the updates go round.
    pub l1_pairs: usize,
    /// F1: Deployments using the one ConfigMap.
    pub f1_workloads: usize,
    /// F10: Deployments using the one ConfigMap.
    pub f10_workloads: usize,
    /// M10's data set.
    pub m10: Sizes,
    /// U1: how long idle CPU is measured at M1.
    pub idle: Duration,
    /// H1: updates (one pair each) during which the leader is killed.
    pub h1_updates: usize,
    /// P1: sidecar updates.
    pub p1_updates: usize,
    /// M1: wait after ready before sampling RSS.
    pub settle: Duration,
    /// M1: RSS samples (one a second) whose median is the steady RSS.
    pub rss_samples: usize,
    /// Quiet time after a scenario's last expected change, so late or doubled writes show.
    pub quiet: Duration,
    /// H1's leader-election timings.
    pub lease: LeaseTimings,
}

/// `--leader-election-*` values.
#[derive(Debug, Clone, Copy)]
pub struct LeaseTimings {
    pub duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaseTimings {
    /// The flags' defaults (Stakater's too).
    pub const DEFAULT: LeaseTimings = LeaseTimings {
        duration: Duration::from_secs(15),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(2),
    };
    /// Short, for the smoke run.
    pub const FAST: LeaseTimings = LeaseTimings {
        duration: Duration::from_secs(4),
        renew_deadline: Duration::from_secs(3),
        retry_period: Duration::from_millis(500),
    };

    pub fn args(self) -> [String; 3] {
        [
            format!("--leader-election-lease-duration={}ms", self.duration.as_millis()),
            format!("--leader-election-renew-deadline={}ms", self.renew_deadline.as_millis()),
            format!("--leader-election-retry-period={}ms", self.retry_period.as_millis()),
        ]
    }
}

/// Why a benchmark step could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Plane(#[from] reloader_harness::PlaneError),
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("HTTP: {0}")]
    Http(#[from] reqwest::Error),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Measure(String),
}

impl BenchError {
    pub fn measure(detail: impl std::fmt::Display) -> Self {
        Self::Measure(detail.to_string())
    }
}

/// Writes `latest.json`, `latest.svg` and `latest.md` (README.md's table) into `out_dir`; returns
/// the first two paths.
pub fn write_report(report: &Report, out_dir: &std::path::Path) -> Result<(PathBuf, PathBuf), BenchError> {
    let io = |path: &std::path::Path| {
        let context = format!("writing {}", path.display());
        move |source| BenchError::Io { context, source }
    };
    std::fs::create_dir_all(out_dir).map_err(io(out_dir))?;
    let json_path = out_dir.join("latest.json");
    let text = serde_json::to_string_pretty(&report.to_json()).map_err(BenchError::measure)?;
    std::fs::write(&json_path, text + "\n").map_err(io(&json_path))?;
    let svg_path = out_dir.join("latest.svg");
    std::fs::write(&svg_path, svg(report)).map_err(io(&svg_path))?;
    let markdown_path = out_dir.join("latest.md");
    std::fs::write(&markdown_path, readme_table(report)).map_err(io(&markdown_path))?;
    Ok((json_path, svg_path))
}
