//! M1's process floor: `reloader-floor` (src/bin/reloader-floor.rs), a watcher on our stack that
//! keeps nothing, measured at each size like a controller; and the live heap beside RSS (ours:
//! the `heap_allocated_bytes` of its "caches synced" log line; Stakater: Go's
//! `go_memstats_heap_alloc_bytes`; the floor: the last figure it printed).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use super::startup::StartupSample;
use crate::identity;
use crate::procfs;
use crate::report::{ScenarioResult, Target};
use crate::rows::{MemoryAtScale, Outcome};
use crate::stats::{Spread, percentile, slope};
use crate::subject::{Controller, Flavour};
use crate::{BenchError, Plan};
use reloader_harness::ControlPlane;
use reloader_harness::process::Process;

/// The floor binary's file name, next to our `reloader` (hack/bench builds both).
pub const BINARY: &str = "reloader-floor";
/// docs/benchmark.md: at ¼ and ½ of M1, our steady RSS within this of the floor's.
const OVER_FLOOR_MIB: f64 = 3.0;
const HEAP_FIELD: &str = "heap_allocated_bytes";
const SYNC_TIMEOUT: Duration = Duration::from_secs(300);
const MIB: f64 = 1024.0 * 1024.0;
const NOTE: &str = "n/a: the floor is a watcher that keeps nothing, on our stack";

/// The floor next to our binary.
pub fn binary_next_to(ours: &Path) -> PathBuf {
    ours.with_file_name(BINARY)
}

/// One start of the floor: RSS once synced and settled, the peak since start, the live heap.
pub async fn measure(
    plane: &ControlPlane,
    binary: &Path,
    log_dir: &Path,
    plan: &Plan,
    run: usize,
) -> Result<StartupSample, BenchError> {
    let account = identity::kubeconfig(plane).await?;
    let name = format!("floor-{run}");
    let log = log_dir.join(format!("{name}.log"));
    let _ = std::fs::remove_file(&log);
    let started = Instant::now();
    let envs = [("KUBECONFIG", account.path())];
    let mut process = Process::start(&name, binary, &[] as &[String], &envs, &log)?;
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    let ready = loop {
        if log_text().lines().any(|line| line == "synced") {
            break Instant::now();
        }
        if let Some(status) = process.exited() {
            return Err(BenchError::measure(format!("{BINARY} exited ({status}):\n{}", log_text())));
        }
        if started.elapsed() > SYNC_TIMEOUT {
            return Err(BenchError::measure(format!("{BINARY} not synced after {SYNC_TIMEOUT:?}")));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    tokio::time::sleep(plan.settle).await;
    let mut rss = Vec::with_capacity(plan.rss_samples);
    for _ in 0..plan.rss_samples {
        let memory = procfs::memory(process.pid())
            .ok_or_else(|| BenchError::measure(format!("{BINARY} exited while settling")))?;
        rss.push(memory.rss_bytes as f64);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let peak = procfs::memory(process.pid()).map(|m| m.peak_bytes as f64).unwrap_or_default();
    process.kill();
    let ready_seconds = ready.duration_since(started).as_secs_f64();
    Ok(StartupSample {
        ready_seconds,
        first_reload_seconds: ready_seconds,
        steady_bytes: percentile(&rss, 0.5).unwrap_or_default(),
        peak_bytes: peak,
        heap_bytes: last_heap_figure(&log_text()),
    })
}

/// The live heap of a controller that has synced (see the module comment for where from).
pub async fn live_heap(controller: &Controller, flavour: Flavour) -> Option<f64> {
    match flavour {
        Flavour::Ours => last_heap_figure(&std::fs::read_to_string(controller.log()).ok()?),
        Flavour::Stakater => {
            let metrics = controller.metrics().await.ok()?;
            metrics
                .lines()
                .find_map(|line| line.strip_prefix("go_memstats_heap_alloc_bytes ")?.trim().parse().ok())
        }
    }
}

/// The last `heap_allocated_bytes=<n>` (text log) or `"heap_allocated_bytes":<n>` (JSON log).
fn last_heap_figure(log: &str) -> Option<f64> {
    log.lines().rev().find_map(|line| {
        let rest = &line[line.find(HEAP_FIELD)? + HEAP_FIELD.len()..];
        let digits = rest.trim_start_matches(['"', '=', ':', ' ']);
        let end = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
        digits[..end].parse().ok()
    })
}

/// The floor's rows, ours over the floor, and the live heap beside RSS.
pub fn rows(memory: &[MemoryAtScale]) -> Vec<ScenarioResult> {
    let median = |samples: &Outcome<Vec<StartupSample>>, pick: fn(&StartupSample) -> Option<f64>| {
        let values: Vec<f64> = samples.as_ref().ok()?.iter().filter_map(pick).collect();
        Spread::of(&values)
    };
    let mut rows = Vec::new();
    for point in memory {
        let (scale, objects) = (point.scale, point.objects);
        let floor_steady = median(&point.floor, |s| Some(s.steady_bytes));
        let floor_peak = median(&point.floor, |s| Some(s.peak_bytes));
        let floor_heap = median(&point.floor, |s| s.heap_bytes);
        let detail =
            json!({ "objects": objects, "steady": floor_steady, "peak": floor_peak, "heap": floor_heap });
        for (id, title, value) in [
            ("steady", "steady VmRSS", floor_steady),
            ("peak", "peak VmHWM during start-up", floor_peak),
            ("heap", "live heap (jemalloc stats.allocated)", floor_heap),
        ] {
            let row = ScenarioResult::new(
                format!("M1-floor-{id}@{scale}"),
                format!("M1 process floor {title}, {objects} objects"),
                "MiB",
                Target::Informational,
            );
            let value = value.map(|s| s.in_units_of(MIB));
            let row = figure(row, &point.floor, value.map(|s| s.median));
            rows.push(row.stakater(Err(NOTE.to_owned())).spreads(value, None).detail(detail.clone()));
        }

        let ours_steady = median(&point.ours, |s| Some(s.steady_bytes));
        let over = ours_steady.zip(floor_steady).map(|(o, f)| (o.median - f.median) / MIB);
        let target = if scale < 1.0 { Target::AtMost(OVER_FLOOR_MIB) } else { Target::Informational };
        let row = ScenarioResult::new(
            format!("M1-over-floor@{scale}"),
            format!("M1 steady VmRSS above the process floor, {objects} objects"),
            "MiB",
            target,
        );
        let detail = json!({ "ours": ours_steady, "floor": floor_steady });
        rows.push(figure(row, &point.ours, over).stakater(Err(NOTE.to_owned())).detail(detail));

        let heap = |samples| median(samples, |s: &StartupSample| s.heap_bytes);
        let (ours_heap, stakater_heap) = (heap(&point.ours), heap(&point.stakater));
        let row = ScenarioResult::new(
            format!("M1-heap@{scale}"),
            format!("M1 live heap after sync, {objects} objects"),
            "MiB",
            Target::Informational,
        );
        let stakater =
            point.stakater.as_ref().map(|_| stakater_heap.map(|s| s.median / MIB)).map_err(Clone::clone);
        rows.push(
            figure(row, &point.ours, ours_heap.map(|s| s.median / MIB))
                .stakater(stakater)
                .spreads(ours_heap.map(|s| s.in_units_of(MIB)), stakater_heap.map(|s| s.in_units_of(MIB)))
                .detail(json!({ "ours": ours_heap, "stakater": stakater_heap })),
        );
    }
    rows.push(heap_slope_row(memory));
    rows
}

/// Live heap per indexed object: the least-squares slope of the median heap against object count.
fn heap_slope_row(memory: &[MemoryAtScale]) -> ScenarioResult {
    let points = |pick: fn(&MemoryAtScale) -> &Outcome<Vec<StartupSample>>| -> Option<Vec<(f64, f64)>> {
        memory
            .iter()
            .map(|point| {
                let heaps: Vec<f64> =
                    pick(point).as_ref().ok()?.iter().filter_map(|s| s.heap_bytes).collect();
                Some((point.objects as f64, Spread::of(&heaps)?.median))
            })
            .collect()
    };
    let (ours, stakater) = (points(|p| &p.ours), points(|p| &p.stakater));
    let row = ScenarioResult::new(
        "M1-heap-slope",
        "M1 live heap per indexed object",
        "bytes/object",
        Target::Informational,
    );
    let stakater_figure = match memory.last().map(|p| &p.stakater) {
        Some(Err(note)) => Err(note.clone()),
        _ => Ok(stakater.as_deref().and_then(slope)),
    };
    let row = match &ours {
        Some(points) => row.ours(slope(points)),
        None => row.failed("no live heap figure at some size"),
    };
    row.stakater(stakater_figure).detail(json!({ "points_ours": ours, "points_stakater": stakater }))
}

/// A row whose figure is ours (or the floor's), or the error that kept it from being measured.
fn figure(row: ScenarioResult, samples: &Outcome<Vec<StartupSample>>, value: Option<f64>) -> ScenarioResult {
    match samples {
        Ok(_) => row.ours(value),
        Err(error) => row.failed(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_last_heap_figure_of_text_and_json_logs() {
        let cases = [
            ("synced\nheap_allocated_bytes=100\nheap_allocated_bytes=250\n", Some(250.0)),
            ("INFO caches synced; ready resources=3 heap_allocated_bytes=4096 elapsed=1s", Some(4096.0)),
            (r#"{"fields":{"heap_allocated_bytes":512,"message":"caches synced; ready"}}"#, Some(512.0)),
            ("synced\n", None),
        ];
        for (log, expected) in cases {
            assert_eq!(last_heap_figure(log), expected, "{log}");
        }
    }
}
