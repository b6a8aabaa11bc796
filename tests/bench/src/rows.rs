//! From raw measurements to the report's rows: the figure each scenario reports, its unit and
//! docs/benchmark.md's target.

use serde_json::{Value, json};

use super::LeaseTimings;
use super::identity::RequestClass;
use super::report::{MemoryPoint, ScenarioResult, Target};
use super::scenarios::coalesce::CoalesceOutcome;
use super::scenarios::failover::FailoverOutcome;
use super::scenarios::latency::LatencyOutcome;
use super::scenarios::scale10::ScaleMeasurements;
use super::scenarios::sidecar::SidecarOutcome;
use super::scenarios::startup::StartupSample;
use super::stats::{Latencies, Spread, slope};

/// A measurement, or why there is none (for Stakater: unavailable, or how it failed).
pub type Outcome<T> = Result<T, String>;

pub struct PerSubject<T> {
    pub ours: Outcome<T>,
    pub stakater: Outcome<T>,
}

pub struct MemoryAtScale {
    pub scale: f64,
    pub objects: usize,
    pub ours: Outcome<Vec<StartupSample>>,
    pub stakater: Outcome<Vec<StartupSample>>,
    /// The process floor (`scenarios::floor`).
    pub floor: Outcome<Vec<StartupSample>>,
}

pub struct Measurements {
    pub memory: Vec<MemoryAtScale>,
    /// L1's floor, one per repetition.
    pub floor: Outcome<Vec<Latencies>>,
    pub latency: PerSubject<LatencyOutcome>,
    pub coalesce: PerSubject<CoalesceOutcome>,
    pub failover: PerSubject<FailoverOutcome>,
    pub sidecar: Outcome<SidecarOutcome>,
    pub lease: LeaseTimings,
    /// K1, U1, M10 and F10.
    pub scale: ScaleMeasurements,
}

pub(crate) const MIB: f64 = 1024.0 * 1024.0;
const FLOOR_NOTE: &str = "n/a: the floor is a minimal watch-then-patch client";
const P1_NOTE: &str = "n/a: ours only (Stakater has no sidecar mode)";

/// How one figure is named, judged and picked out of an outcome of type `T`.
struct Figure<T, V> {
    id: &'static str,
    title: &'static str,
    unit: &'static str,
    target: Target,
    pick: fn(&T) -> V,
}

impl<T, V> Figure<T, V> {
    fn new(
        id: &'static str,
        title: &'static str,
        unit: &'static str,
        target: Target,
        pick: fn(&T) -> V,
    ) -> Self {
        Self { id, title, unit, target, pick }
    }

    fn row(&self) -> ScenarioResult {
        ScenarioResult::new(self.id, self.title, self.unit, self.target)
    }
}

/// The rows, and M1's points for the chart.
pub fn build(m: &Measurements) -> (Vec<ScenarioResult>, Vec<MemoryPoint>) {
    let mut rows = Vec::new();
    // A --latency-only run has no memory points, so no memory rows.
    if !m.memory.is_empty() {
        rows.extend(memory_rows(&m.memory));
        rows.extend(super::scenarios::floor::rows(&m.memory));
    }
    rows.extend(latency_rows(&m.latency, &m.floor));
    rows.push(figure(
        &m.coalesce,
        "C1-replicasets",
        "C1 new ReplicaSets (coalesce 2s)",
        "count",
        Target::Equals(1.0),
        |c| Some(c.new_replica_sets as f64),
    ));
    rows.extend(failover_rows(&m.failover, m.lease));
    rows.extend(sidecar_rows(&m.sidecar));
    rows.extend(m.scale.rows());
    let mut points = memory_points(&m.memory);
    points.extend(m.scale.memory_points());
    (rows, points)
}

/// One row from a per-subject outcome.
pub(crate) fn figure<T>(
    outcomes: &PerSubject<T>,
    id: &str,
    title: &str,
    unit: &str,
    target: Target,
    value: impl Fn(&T) -> Option<f64>,
) -> ScenarioResult {
    let row = ScenarioResult::new(id, title, unit, target);
    let row = match &outcomes.ours {
        Ok(outcome) => row.ours(value(outcome)),
        Err(error) => row.failed(error),
    };
    row.stakater(outcomes.stakater.as_ref().map(&value).map_err(Clone::clone))
}

/// One row of medians from a per-subject outcome measured repeatedly, with both spreads.
fn spread_figure<T>(
    outcomes: &PerSubject<T>,
    id: &str,
    title: &str,
    unit: &str,
    target: Target,
    spread: impl Fn(&T) -> Option<Spread>,
) -> ScenarioResult {
    let pick = |outcome: &Outcome<T>| outcome.as_ref().ok().and_then(&spread);
    figure(outcomes, id, title, unit, target, |o| spread(o).map(|s| s.median))
        .spreads(pick(&outcomes.ours), pick(&outcomes.stakater))
}

/// A row only ours has.
pub(crate) fn ours_only<T>(
    outcome: &Outcome<T>,
    note: &str,
    row: ScenarioResult,
    value: impl Fn(&T) -> Option<f64>,
) -> ScenarioResult {
    let row = match outcome {
        Ok(outcome) => row.ours(value(outcome)),
        Err(error) => row.failed(error),
    };
    row.stakater(Err(note.to_owned()))
}

fn memory_rows(memory: &[MemoryAtScale]) -> Vec<ScenarioResult> {
    let mut rows = Vec::new();
    let spread = |samples: &Outcome<Vec<StartupSample>>,
                  pick: fn(&StartupSample) -> f64|
     -> Outcome<Option<Spread>> {
        samples.as_ref().map(|s| Spread::of(&s.iter().map(pick).collect::<Vec<_>>())).map_err(Clone::clone)
    };
    for point in memory {
        // The ratios are targets at the full size (and M10's); below it the fixed cost dominates,
        // and the target is the distance to the process floor (`scenarios::floor`).
        let ratio =
            |at_most| if point.scale < 1.0 { Target::Informational } else { Target::RatioAtMost(at_most) };
        let figures = [
            Figure::new("steady", "steady VmRSS after ready", "MiB", ratio(0.10), |s: &StartupSample| {
                s.steady_bytes / MIB
            }),
            Figure::new("peak", "peak VmHWM during start-up", "MiB", ratio(0.20), |s| s.peak_bytes / MIB),
        ];
        for Figure { id, title, target, pick, .. } in figures {
            let ours = spread(&point.ours, pick);
            let stakater = spread(&point.stakater, pick);
            let outcomes = PerSubject { ours: ours.clone(), stakater: stakater.clone() };
            let row = spread_figure(
                &outcomes,
                &format!("M1-{id}@{}", point.scale),
                &format!("M1 {title}, {} objects", point.objects),
                "MiB",
                target,
                |s| *s,
            );
            rows.push(
                row.detail(json!({ "objects": point.objects, "ours": ours.ok(), "stakater": stakater.ok() })),
            );
        }
    }
    rows.push(slope_row(memory));
    // S1 at the largest size.
    if let Some(point) = memory.last() {
        let at = PerSubject { ours: point.ours.clone(), stakater: point.stakater.clone() };
        let spread = |pick: fn(&StartupSample) -> f64| {
            move |samples: &Vec<StartupSample>| Spread::of(&samples.iter().map(pick).collect::<Vec<_>>())
        };
        let detail =
            json!({ "objects": point.objects, "stakater_ready_endpoint": "/live (it has no /readyz)" });
        rows.push(
            spread_figure(
                &at,
                "S1-ready",
                "S1 process start to ready",
                "s",
                // Reported, not compared: Stakater's /live answers before its caches sync.
                Target::Informational,
                spread(|s| s.ready_seconds),
            )
            .detail(detail.clone()),
        );
        rows.push(
            spread_figure(
                &at,
                "S1-first-reload",
                "S1 process start to first reload applied",
                "s",
                Target::RatioAtMost(0.5),
                spread(|s| s.first_reload_seconds),
            )
            .detail(detail),
        );
    }
    rows
}

/// Bytes per object: the least-squares slope of steady RSS against object count.
fn slope_row(memory: &[MemoryAtScale]) -> ScenarioResult {
    let points = |pick: fn(&MemoryAtScale) -> &Outcome<Vec<StartupSample>>| -> Outcome<Vec<(f64, f64)>> {
        memory
            .iter()
            .map(|point| {
                let samples = pick(point).as_ref().map_err(Clone::clone)?;
                let steady: Vec<f64> = samples.iter().map(|s| s.steady_bytes).collect();
                Ok((point.objects as f64, Spread::of(&steady).map_or(0.0, |s| s.median)))
            })
            .collect()
    };
    let outcomes = PerSubject { ours: points(|p| &p.ours), stakater: points(|p| &p.stakater) };
    let row = figure(
        &outcomes,
        "M1-slope",
        "M1 steady RSS per indexed object",
        "bytes/object",
        Target::Informational,
        |p| slope(p),
    );
    row.detail(json!({ "points_ours": outcomes.ours.ok(), "points_stakater": outcomes.stakater.ok() }))
}

fn latency_rows(
    latency: &PerSubject<LatencyOutcome>,
    floor: &Outcome<Vec<Latencies>>,
) -> Vec<ScenarioResult> {
    /// A percentile's median and spread over L1's rounds.
    fn over_rounds(rounds: &[Latencies], pick: fn(&Latencies) -> Option<f64>) -> Option<Spread> {
        Spread::of(&rounds.iter().filter_map(pick).collect::<Vec<_>>())
    }
    let p50 = (|l: &Latencies| l.p50) as fn(&Latencies) -> Option<f64>;
    let p99 = (|l: &Latencies| l.p99) as fn(&Latencies) -> Option<f64>;
    let floor_p50 = floor.as_ref().ok().and_then(|f| over_rounds(f, p50));
    let detail = |o: &LatencyOutcome| json!({ "l1_rounds": o.l1_rounds, "f1_seconds": o.f1_seconds, "f1_missed": o.f1_missed });
    let l1_detail = json!({
        "ours": latency.ours.as_ref().ok().map(detail),
        "stakater": latency.stakater.as_ref().ok().map(detail),
        "ours_p50_over_floor_p50": latency.ours.as_ref().ok().and_then(|o| {
            Some(over_rounds(&o.l1_rounds, p50)?.median / floor_p50?.median)
        }),
    });
    let a1_detail = |o: &LatencyOutcome| json!({ "l1": o.l1_api, "f1": o.f1_api });
    let mut rows = Vec::new();
    for (id, title, pick) in [("p50", "p50", p50), ("p99", "p99", p99)] {
        let row = spread_figure(
            latency,
            &format!("L1-{id}"),
            &format!("L1 update to workload change, {title}"),
            "ms",
            Target::RatioAtMost(0.5),
            |o| over_rounds(&o.l1_rounds, pick),
        );
        rows.push(row.detail(l1_detail.clone()));
        let row = ScenarioResult::new(
            format!("L1-floor-{id}"),
            format!("L1 floor (watch then PATCH), {title}"),
            "ms",
            Target::Informational,
        );
        let spread = floor.as_ref().ok().and_then(|f| over_rounds(f, pick));
        rows.push(
            ours_only(floor, FLOOR_NOTE, row, |_| spread.map(|s| s.median))
                .spreads(spread, None)
                .detail(json!(floor.as_ref().ok())),
        );
    }
    rows.push(
        spread_figure(
            latency,
            "F1",
            "F1 update to last of the fan-out changed",
            "s",
            Target::RatioAtMost(0.10),
            |o| o.f1_spread,
        )
        .detail(json!({
            "ours": latency.ours.as_ref().ok().map(|o| o.f1_spread),
            "stakater": latency.stakater.as_ref().ok().map(|o| o.f1_spread),
        })),
    );
    let api = json!({
        "ours": latency.ours.as_ref().ok().map(a1_detail),
        "stakater": latency.stakater.as_ref().ok().map(a1_detail),
    });
    rows.push(
        figure(
            latency,
            "A1-list-per-event",
            "A1 LIST requests per update (L1+F1)",
            "LIST/update",
            Target::Equals(0.0),
            |o| {
                let lists =
                    o.l1_api.requests.get(RequestClass::List) + o.f1_api.requests.get(RequestClass::List);
                Some(lists as f64 / (o.l1_api.events + o.f1_api.events).max(1) as f64)
            },
        )
        .detail(api.clone()),
    );
    rows.push(
        figure(
            latency,
            "A1-writes-per-needed",
            "A1 workload writes per workload that needed one",
            "ratio",
            Target::Equals(1.0),
            |o| {
                let writes = o.l1_api.requests.get(RequestClass::WorkloadWrite)
                    + o.f1_api.requests.get(RequestClass::WorkloadWrite);
                Some(writes as f64 / (o.l1_api.writes_needed + o.f1_api.writes_needed).max(1) as f64)
            },
        )
        .detail(api),
    );
    // L1's requests per reload by verb (one ConfigMap update, one Deployment to write): the floor
    // is one PATCH and its Event, no read.
    let per_reload = [
        (
            "A1-patch-per-reload",
            "A1 PATCH/UPDATE of workloads per reload (L1)",
            RequestClass::WorkloadWrite,
            Target::Equals(1.0),
        ),
        ("A1-get-per-reload", "A1 GET requests per reload (L1)", RequestClass::Get, Target::Equals(0.0)),
        ("A1-list-per-reload", "A1 LIST requests per reload (L1)", RequestClass::List, Target::Equals(0.0)),
        (
            "A1-other-writes-per-reload",
            "A1 other writes (Events, Lease) per reload (L1)",
            RequestClass::OtherWrite,
            Target::Informational,
        ),
    ];
    for (id, title, class, target) in per_reload {
        rows.push(figure(latency, id, title, "requests/reload", target, |o| {
            Some(o.l1_api.requests.get(class) as f64 / o.l1_api.writes_needed.max(1) as f64)
        }));
    }
    rows
}

fn failover_rows(failover: &PerSubject<FailoverOutcome>, lease: LeaseTimings) -> Vec<ScenarioResult> {
    let limit = lease.duration.as_secs_f64() + 2.0;
    let detail = json!({ "ours": failover.ours.as_ref().ok(), "stakater": failover.stakater.as_ref().ok() });
    let counts = [
        Figure::new(
            "H1-lost",
            "H1 updates lost across the fail-overs (sum over the runs)",
            "count",
            Target::Equals(0.0),
            |f: &FailoverOutcome| Some(f.lost as f64),
        ),
        Figure::new(
            "H1-doubled",
            "H1 updates applied twice (sum over the runs)",
            "count",
            Target::Equals(0.0),
            |f| Some(f.doubled as f64),
        ),
    ];
    let mut rows: Vec<ScenarioResult> = counts
        .into_iter()
        .map(|f| figure(failover, f.id, f.title, f.unit, f.target, f.pick).detail(detail.clone()))
        .collect();
    rows.push(
        spread_figure(
            failover,
            "H1-takeover",
            "H1 SIGKILL to the new leader's first write",
            "s",
            Target::AtMost(limit),
            |f| f.takeover,
        )
        .detail(detail),
    );
    rows
}

fn sidecar_rows(sidecar: &Outcome<SidecarOutcome>) -> Vec<ScenarioResult> {
    let detail: Value = json!(sidecar.as_ref().ok());
    let figures = [
        Figure::new(
            "P1-swap-p50",
            "P1 update to files swapped, p50",
            "ms",
            Target::Informational,
            |s: &SidecarOutcome| s.swapped.p50,
        ),
        Figure::new("P1-swap-p99", "P1 update to files swapped, p99", "ms", Target::AtMost(100.0), |s| {
            s.swapped.p99
        }),
        Figure::new("P1-notify-p50", "P1 update to endpoint called, p50", "ms", Target::Informational, |s| {
            s.notified.p50
        }),
        Figure::new("P1-notify-p99", "P1 update to endpoint called, p99", "ms", Target::AtMost(100.0), |s| {
            s.notified.p99
        }),
    ];
    figures.into_iter().map(|f| ours_only(sidecar, P1_NOTE, f.row(), f.pick).detail(detail.clone())).collect()
}

fn memory_points(memory: &[MemoryAtScale]) -> Vec<MemoryPoint> {
    let mut points = Vec::new();
    for point in memory {
        for (subject, samples) in [("ours", &point.ours), ("stakater", &point.stakater)] {
            let Ok(samples) = samples else { continue };
            let median = |pick: fn(&StartupSample) -> f64| {
                Spread::of(&samples.iter().map(pick).collect::<Vec<_>>()).map_or(0.0, |s| s.median)
            };
            points.push(MemoryPoint {
                subject: subject.to_owned(),
                scale: point.scale,
                objects: point.objects,
                steady_bytes: median(|s| s.steady_bytes),
                peak_bytes: median(|s| s.peak_bytes),
            });
        }
    }
    points
}
