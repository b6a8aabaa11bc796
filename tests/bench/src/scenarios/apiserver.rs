//! What a controller costs the cluster: kube-apiserver's resident memory and the requests the
//! controller made during a window (its start-up, or L1's load). The peak is kube-apiserver's own
//! `VmHWM`, reset to its current RSS when the window opens; requests are counted per class by the
//! benchmark's FlowSchemas (crate::identity), so only the controller's requests count.

use std::path::Path;

use serde::Serialize;
use serde_json::json;

use super::startup::{StartupFixture, StartupSample};
use crate::identity::{RequestClass, RequestCounts};
use crate::procfs;
use crate::report::{ScenarioResult, Target};
use crate::rows::{MIB, Outcome, PerSubject, figure};
use crate::stats::Spread;
use crate::subject::Subject;
use crate::{BenchError, Plan};
use reloader_harness::ControlPlane;

/// One window's cost.
#[derive(Debug, Clone, Serialize)]
pub struct ApiServerCost {
    /// kube-apiserver's RSS when the window opened.
    pub rss_before_bytes: u64,
    /// Its highest RSS during the window.
    pub peak_bytes: u64,
    /// The controller's requests, by class.
    pub requests: RequestCounts,
}

impl ApiServerCost {
    /// How far kube-apiserver's RSS rose above where it was.
    pub fn peak_rise_bytes(&self) -> u64 {
        self.peak_bytes.saturating_sub(self.rss_before_bytes)
    }

    pub fn total_requests(&self) -> u64 {
        RequestClass::ALL.into_iter().map(|class| self.requests.get(class)).sum()
    }
}

/// An open window.
pub struct ApiServerWindow {
    pid: u32,
    rss_before_bytes: u64,
    counts_before: RequestCounts,
}

impl ApiServerWindow {
    pub async fn open(plane: &ControlPlane) -> Result<Self, BenchError> {
        let pid =
            plane.apiserver_pid().ok_or_else(|| BenchError::measure("kube-apiserver is not running"))?;
        let counts_before = RequestCounts::read(&plane.client()).await?;
        procfs::reset_peak(pid).map_err(|source| BenchError::Io {
            context: format!("resetting kube-apiserver's peak RSS (/proc/{pid}/clear_refs)"),
            source,
        })?;
        let rss_before_bytes = apiserver_memory(pid)?.rss_bytes;
        Ok(Self { pid, rss_before_bytes, counts_before })
    }

    pub async fn close(self, plane: &ControlPlane) -> Result<ApiServerCost, BenchError> {
        let peak_bytes = apiserver_memory(self.pid)?.peak_bytes;
        let requests = RequestCounts::read(&plane.client()).await?.since(&self.counts_before);
        Ok(ApiServerCost { rss_before_bytes: self.rss_before_bytes, peak_bytes, requests })
    }
}

fn apiserver_memory(pid: u32) -> Result<procfs::Memory, BenchError> {
    procfs::memory(pid).ok_or_else(|| BenchError::measure(format!("kube-apiserver (pid {pid}) is gone")))
}

/// Starts of one controller with what each start cost kube-apiserver.
#[derive(Debug, Clone)]
pub struct Start {
    pub sample: StartupSample,
    pub apiserver: ApiServerCost,
}

/// `repeat` starts of `subject` at the data set as it stands, each inside an API-server window.
pub async fn starts(
    fixture: &mut StartupFixture,
    plane: &ControlPlane,
    subject: &Subject,
    log_dir: &Path,
    plan: &Plan,
    repeat: usize,
) -> Result<Vec<Start>, BenchError> {
    let mut starts = Vec::with_capacity(repeat);
    for _ in 0..repeat {
        let window = ApiServerWindow::open(plane).await?;
        let sample = fixture.measure(plane, subject, log_dir, plan).await?;
        starts.push(Start { sample, apiserver: window.close(plane).await? });
    }
    Ok(starts)
}

pub fn spread_of(starts: &Outcome<Vec<Start>>, pick: fn(&Start) -> f64) -> Outcome<Option<Spread>> {
    starts.as_ref().map(|s| Spread::of(&s.iter().map(pick).collect::<Vec<_>>())).map_err(Clone::clone)
}

/// Median-and-spread rows of a per-start figure, ours against Stakater's.
pub fn start_row(
    starts: &PerSubject<Vec<Start>>,
    (id, title, unit, target): (&str, &str, &str, Target),
    pick: fn(&Start) -> f64,
    objects: usize,
) -> ScenarioResult {
    let spreads =
        PerSubject { ours: spread_of(&starts.ours, pick), stakater: spread_of(&starts.stakater, pick) };
    figure(&spreads, id, title, unit, target, |s| s.map(|s| s.median)).detail(json!({
        "objects": objects, "ours": spreads.ours.as_ref().ok(), "stakater": spreads.stakater.as_ref().ok(),
    }))
}

/// kube-apiserver's cost of a start-up (K1): the controller's requests and the RSS rise.
pub fn startup_cost_rows(starts: &PerSubject<Vec<Start>>, at: &str, objects: usize) -> Vec<ScenarioResult> {
    let requests = format!("K1 kube-apiserver requests during start-up, {at}");
    let rise = format!("K1 kube-apiserver peak RSS rise during start-up, {at}");
    vec![
        start_row(
            starts,
            (&format!("K1-startup-requests@{at}"), &requests, "requests", Target::RatioAtMost(1.0)),
            |s| s.apiserver.total_requests() as f64,
            objects,
        ),
        start_row(
            starts,
            (&format!("K1-startup-peak-rise@{at}"), &rise, "MiB", Target::RatioAtMost(1.0)),
            |s| s.apiserver.peak_rise_bytes() as f64 / MIB,
            objects,
        ),
    ]
}
