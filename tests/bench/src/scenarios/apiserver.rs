//! What a controller costs the cluster: kube-apiserver's resident memory, what its Go heap
//! allocated, and the requests the controller made during a window (its start-up, or L1's load).
//! The peak is kube-apiserver's own `VmHWM`, reset to its current RSS when the window opens;
//! requests are counted per class by the benchmark's FlowSchemas (crate::identity), so only the
//! controller's requests count.
//!
//! Go keeps the heap a burst of work grew. A start-up window therefore opens on a kube-apiserver
//! restarted and quiet again: otherwise only the first controller to start at a data set size
//! would pay for the growth, and the others would start inside the heap it left.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use super::startup::{StartupFixture, StartupSample, settle};
use crate::identity::{RequestClass, RequestCounts, apiserver_metrics};
use crate::procfs;
use crate::report::{ScenarioResult, Target};
use crate::rows::{MIB, Outcome, PerSubject, figure};
use crate::stats::Spread;
use crate::subject::{Launch, Subject};
use crate::{BenchError, Plan};
use reloader_harness::ControlPlane;

/// One window's cost.
#[derive(Debug, Clone, Serialize)]
pub struct ApiServerCost {
    /// kube-apiserver's RSS when the window opened.
    pub rss_before_bytes: u64,
    /// Its highest RSS during the window.
    pub peak_bytes: u64,
    /// What its Go heap allocated during the window (`go_memstats_alloc_bytes_total`): the work
    /// of serving the window's requests, whatever heap an earlier window left behind.
    pub allocated_bytes: u64,
    /// kube-apiserver's CPU time (user and system) during the window.
    pub cpu_seconds: f64,
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
    cpu_before: f64,
    before: Counters,
}

impl ApiServerWindow {
    pub async fn open(plane: &ControlPlane) -> Result<Self, BenchError> {
        let pid = apiserver_pid(plane)?;
        let before = Counters::read(plane).await?;
        procfs::reset_peak(pid).map_err(|source| BenchError::Io {
            context: format!("resetting kube-apiserver's peak RSS (/proc/{pid}/clear_refs)"),
            source,
        })?;
        let rss_before_bytes = apiserver_memory(pid)?.rss_bytes;
        let cpu_before = apiserver_cpu(pid)?;
        Ok(Self { pid, rss_before_bytes, cpu_before, before })
    }

    pub async fn close(self, plane: &ControlPlane) -> Result<ApiServerCost, BenchError> {
        let peak_bytes = apiserver_memory(self.pid)?.peak_bytes;
        let cpu_seconds = apiserver_cpu(self.pid)? - self.cpu_before;
        let after = Counters::read(plane).await?;
        Ok(ApiServerCost {
            rss_before_bytes: self.rss_before_bytes,
            peak_bytes,
            cpu_seconds,
            allocated_bytes: after.allocated_bytes.saturating_sub(self.before.allocated_bytes),
            requests: after.requests.since(&self.before.requests),
        })
    }
}

/// kube-apiserver's counters, from one read of its `/metrics`.
struct Counters {
    requests: RequestCounts,
    allocated_bytes: u64,
}

impl Counters {
    async fn read(plane: &ControlPlane) -> Result<Self, BenchError> {
        let metrics = apiserver_metrics(&plane.client()).await?;
        Ok(Self { requests: RequestCounts::parse(&metrics), allocated_bytes: allocated_bytes(&metrics)? })
    }
}

const ALLOCATED: &str = "go_memstats_alloc_bytes_total";

/// Bytes allocated since the process started, from a `/metrics` text.
fn allocated_bytes(metrics: &str) -> Result<u64, BenchError> {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(ALLOCATED)?.strip_prefix(' ')?.trim().parse::<f64>().ok())
        .map(|bytes| bytes as u64)
        .ok_or_else(|| BenchError::measure(format!("kube-apiserver's /metrics has no {ALLOCATED}")))
}

fn apiserver_pid(plane: &ControlPlane) -> Result<u32, BenchError> {
    plane.apiserver_pid().ok_or_else(|| BenchError::measure("kube-apiserver is not running"))
}

fn apiserver_cpu(pid: u32) -> Result<f64, BenchError> {
    procfs::cpu_seconds(pid).ok_or_else(|| BenchError::measure(format!("kube-apiserver (pid {pid}) is gone")))
}

fn apiserver_memory(pid: u32) -> Result<procfs::Memory, BenchError> {
    procfs::memory(pid).ok_or_else(|| BenchError::measure(format!("kube-apiserver (pid {pid}) is gone")))
}

/// kube-apiserver is quiet once, over this long, its RSS moved by at most [`QUIET_RSS_SHARE`] and
/// it used at most [`QUIET_CPU_SHARE`] of a core.
const QUIET_FOR: Duration = Duration::from_secs(5);
const QUIET_RSS_SHARE: f64 = 0.01;
const QUIET_CPU_SHARE: f64 = 0.1;
const QUIET_TIMEOUT: Duration = Duration::from_secs(300);
const SAMPLE_EVERY: Duration = Duration::from_millis(500);
const READ_IN_TIMEOUT: Duration = Duration::from_secs(300);

/// kube-apiserver's RSS and CPU time at one moment after its restart.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Sample {
    at: Duration,
    rss_bytes: u64,
    cpu_seconds: f64,
}

/// The newest samples that span [`QUIET_FOR`], when there are enough of them.
fn last_stretch(samples: &[Sample]) -> Option<&[Sample]> {
    let last = samples.last()?;
    let first = samples.iter().rposition(|s| last.at.saturating_sub(s.at) >= QUIET_FOR)?;
    Some(&samples[first..])
}

fn quiet(stretch: &[Sample]) -> bool {
    let (Some(first), Some(last)) = (stretch.first(), stretch.last()) else { return false };
    let rss = stretch.iter().map(|s| s.rss_bytes);
    let (low, high) = (rss.clone().min().unwrap_or_default(), rss.max().unwrap_or_default());
    let seconds = last.at.saturating_sub(first.at).as_secs_f64();
    (high - low) as f64 <= QUIET_RSS_SHARE * high as f64
        && last.cpu_seconds - first.cpu_seconds <= QUIET_CPU_SHARE * seconds
}

/// Restarts kube-apiserver and waits until it is quiet: its watch caches filled and the other
/// components' relists served.
pub async fn restart_apiserver(plane: &ControlPlane) -> Result<(), BenchError> {
    plane.stop_apiserver();
    plane.start_apiserver().await?;
    wait_quiet(plane, "its restart").await
}

/// Waits until kube-apiserver has been quiet for [`QUIET_FOR`]; `since` names what it waits out.
async fn wait_quiet(plane: &ControlPlane, since: &str) -> Result<(), BenchError> {
    let began = Instant::now();
    let pid = apiserver_pid(plane)?;
    let mut samples = Vec::new();
    loop {
        samples.push(Sample {
            at: began.elapsed(),
            rss_bytes: apiserver_memory(pid)?.rss_bytes,
            cpu_seconds: apiserver_cpu(pid)?,
        });
        let stretch = last_stretch(&samples);
        if stretch.is_some_and(quiet) {
            return Ok(());
        }
        if began.elapsed() > QUIET_TIMEOUT {
            let moved = stretch.map(|s| format!(": over the last {QUIET_FOR:?}, {s:?}")).unwrap_or_default();
            return Err(BenchError::measure(format!(
                "kube-apiserver was not quiet within {QUIET_TIMEOUT:?} of {since}{moved}"
            )));
        }
        tokio::time::sleep(SAMPLE_EVERY).await;
    }
}

/// Starts of one controller with what each start cost kube-apiserver.
#[derive(Debug, Clone)]
pub struct Start {
    pub sample: StartupSample,
    pub apiserver: ApiServerCost,
}

/// `repeat` starts of `subject` at the data set as it stands, each on a kube-apiserver just
/// restarted and quiet: one that S1 times to its first reload, then one that K1 measures
/// ([`read_in`]).
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
        restart_apiserver(plane).await?;
        fixture.watch_again(plane).await?;
        let launch = fixture.next_launch();
        let read_in_launch = Launch::named(format!("k1-{}", launch.name));
        let started = fixture.start(plane, subject, log_dir, launch).await?;
        let sample = settle(started, subject, plan).await?;
        let apiserver = read_in(plane, subject, log_dir, read_in_launch).await?;
        starts.push(Start { sample, apiserver });
    }
    Ok(starts)
}

/// What reading its way in costs kube-apiserver: a start with nothing changing, in a window that
/// closes once the controller is ready and kube-apiserver is quiet again. A window that closed at
/// the first reload missed what was still streaming: Stakater reloads from its ConfigMap informer
/// while its Secret informer still reads. With no update to react to, no reload's reads count.
async fn read_in(
    plane: &ControlPlane,
    subject: &Subject,
    log_dir: &Path,
    launch: Launch,
) -> Result<ApiServerCost, BenchError> {
    restart_apiserver(plane).await?;
    let window = ApiServerWindow::open(plane).await?;
    let mut controller = subject.start(plane, log_dir, &launch).await?;
    controller.wait_ready(READ_IN_TIMEOUT).await?;
    controller.while_alive(wait_quiet(plane, "the controller's start")).await??;
    window.close(plane).await
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
    figure(&spreads, id, title, unit, target, |s| s.map(|s| s.median))
        .spreads(spreads.ours.as_ref().ok().copied().flatten(), spreads.stakater.as_ref().ok().copied().flatten())
        .detail(json!({
        "objects": objects, "ours": spreads.ours.as_ref().ok(), "stakater": spreads.stakater.as_ref().ok(),
    }))
}

/// kube-apiserver's cost of a start-up (K1): the controller's requests, what the heap allocated
/// serving them, the CPU time it spent and the RSS rise. Only the allocation is held to a ratio:
/// it is the work of serving every request; the CPU time holds the same work plus the window's
/// quiet tail (up to a tenth of a core for 5 s, either controller). The request count is
/// reported: requests differ in cost by orders of magnitude (a watch of an empty kind against
/// the stream of every Secret), and ours has one watch per workload kind where Stakater lists
/// the workloads at each reload instead. The rise is
/// reported too: on a restarted kube-apiserver both controllers' starts fit mostly inside the
/// heap its own start-up grew, so it is a few MiB either way and its order is noise.
pub fn startup_cost_rows(starts: &PerSubject<Vec<Start>>, at: &str, objects: usize) -> Vec<ScenarioResult> {
    let requests = format!("K1 kube-apiserver requests during start-up, {at}");
    let rise = format!("K1 kube-apiserver peak RSS rise during start-up, {at}");
    let allocated = format!("K1 kube-apiserver heap allocated during start-up, {at}");
    let cpu = format!("K1 kube-apiserver CPU time during start-up, {at}");
    vec![
        start_row(
            starts,
            (&format!("K1-startup-requests@{at}"), &requests, "requests", Target::Informational),
            |s| s.apiserver.total_requests() as f64,
            objects,
        ),
        start_row(
            starts,
            (&format!("K1-startup-peak-rise@{at}"), &rise, "MiB", Target::Informational),
            |s| s.apiserver.peak_rise_bytes() as f64 / MIB,
            objects,
        ),
        start_row(
            starts,
            (&format!("K1-startup-allocated@{at}"), &allocated, "MiB", Target::RatioAtMost(1.0)),
            |s| s.apiserver.allocated_bytes as f64 / MIB,
            objects,
        ),
        start_row(
            starts,
            (&format!("K1-startup-cpu@{at}"), &cpu, "s", Target::Informational),
            |s| s.apiserver.cpu_seconds,
            objects,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB_BYTES: u64 = 1 << 20;

    /// Cumulative CPU seconds and RSS in MiB, one pair per half second.
    type Points = Vec<(f64, u64)>;

    fn samples(points: &[(f64, u64)]) -> Vec<Sample> {
        points
            .iter()
            .enumerate()
            .map(|(i, &(cpu_seconds, rss))| Sample {
                at: SAMPLE_EVERY * i as u32,
                rss_bytes: rss * MIB_BYTES,
                cpu_seconds,
            })
            .collect()
    }

    #[test]
    fn quiet_needs_the_whole_stretch_still() {
        let still = [(10.0, 400); 11];
        let cases: &[(&str, Points, bool)] = &[
            ("too short to tell", still[..10].to_vec(), false),
            ("still for five seconds", still.to_vec(), true),
            ("RSS grew 2% at the end", [&still[..10], &[(10.0, 408)]].concat(), false),
            ("RSS grew 1%", [&still[..10], &[(10.0, 404)]].concat(), true),
            ("busy: a quarter of a core", (0..11).map(|i| (10.0 + 0.125 * i as f64, 400)).collect(), false),
            ("idle ticks: 5% of a core", (0..11).map(|i| (10.0 + 0.025 * i as f64, 400)).collect(), true),
            (
                "busy before the stretch only",
                [&(0..4).map(|i| (i as f64, 300 + 20 * i)).collect::<Vec<_>>()[..], &[(4.0, 400); 11]]
                    .concat(),
                true,
            ),
        ];
        for (case, points, expected) in cases {
            let samples = samples(points);
            assert_eq!(last_stretch(&samples).is_some_and(quiet), *expected, "{case}");
        }
    }

    #[test]
    fn allocated_bytes_read_from_metrics() {
        let metrics = "# TYPE go_memstats_alloc_bytes_total counter\n\
                       go_memstats_alloc_bytes_total 6.14605912e+08\n\
                       go_memstats_alloc_bytes 1.2e+08\n";
        assert_eq!(allocated_bytes(metrics).unwrap(), 614_605_912);
        let missing = allocated_bytes("go_memstats_alloc_bytes 1.2e+08\n").unwrap_err().to_string();
        assert!(missing.contains(ALLOCATED), "{missing}");
    }
}
