//! The benchmark at a small scale (a few hundred objects, one repetition) through the same code
//! path as `hack/bench`, so that the harness keeps working. No timing is asserted: only that every
//! scenario produced a figure and that the JSON and SVG were written.

use std::path::Path;

use reloader_bench::{BenchOptions, Scenarios, run, write_report};
use reloader_harness::reloader_binary;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_produces_a_figure_at_small_scale() {
    let out = tempfile::tempdir().expect("a results directory");
    let options = small_run(out.path());
    let report = run(&options).await.expect("the small benchmark runs");
    print!("{}", report.table());

    // An unprivileged user (CI runners) cannot create a memory cgroup; root always can.
    let no_cgroup = |id: &str, error: &str| {
        id.starts_with("M10-limit-")
            && error.contains("no memory cgroup can be created here")
            && !running_as_root()
    };
    let failed: Vec<String> = report
        .scenarios
        .iter()
        .filter(|s| s.error.as_deref().is_none_or(|error| !no_cgroup(&s.id, error)))
        .filter_map(|s| Some(format!("{}: {}", s.id, s.error.as_ref()?)))
        .collect();
    assert!(failed.is_empty(), "scenarios failed:\n{}", failed.join("\n"));
    let without_figure: Vec<&str> = report
        .scenarios
        .iter()
        .filter(|s| s.ours.is_none() && s.error.as_deref().is_none_or(|error| !no_cgroup(&s.id, error)))
        .map(|s| s.id.as_str())
        .collect();
    assert!(without_figure.is_empty(), "no figure for {without_figure:?}");
    let ids: Vec<&str> = report.scenarios.iter().map(|s| s.id.as_str()).collect();
    for scenario in [
        "M1-steady",
        "M1-peak",
        "M1-slope",
        "S1-",
        "L1-p50",
        "L1-floor",
        "F1",
        "A1-",
        "C1-",
        "H1-",
        "P1-",
        "K1-startup-requests@M1",
        "K1-startup-peak-rise@M1",
        "K1-startup-cpu@M1",
        "K1-l1-requests-per-reload",
        "K1-l1-allocated-per-reload",
        "K1-l1-peak-rise",
        "U1-per-1000-reloads",
        "U1-idle",
        "M10-steady",
        "M10-peak",
        "K1-startup-requests@M10",
        "M10-limit-oom-kills",
        "M10-limit-steady",
        "F10",
    ] {
        assert!(ids.iter().any(|id| id.starts_with(scenario)), "{scenario} is missing from {ids:?}");
    }
    // Without Stakater, only absolute targets are judged, and every Stakater figure says why not.
    for row in &report.scenarios {
        assert!(row.stakater.is_none() && row.stakater_note.is_some(), "{}: {:?}", row.id, row.stakater_note);
        assert!(row.ratio.is_none(), "{}", row.id);
    }

    let (json_path, svg_path) = write_report(&report, out.path()).expect("writing the report");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let scenarios = json["scenarios"].as_array().expect("a scenarios array");
    assert_eq!(scenarios.len(), report.scenarios.len());
    for scenario in scenarios {
        for key in ["id", "ours", "stakater", "unit", "ratio", "target", "holds"] {
            assert!(scenario.get(key).is_some(), "{key} missing from {scenario}");
        }
        let id = scenario["id"].as_str().unwrap_or_default();
        let error = scenario["error"].as_str().unwrap_or_default();
        assert!(scenario["ours"].is_number() || no_cgroup(id, error), "{scenario}");
    }
    assert!(json["machine"]["cores"].as_u64().unwrap() >= 1);
    assert!(json["versions"]["kubernetes"].as_str().unwrap().starts_with('v'));
    assert!(!json["m1_points"].as_array().unwrap().is_empty());
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("<polyline"), "the chart has M1's memory line");
    // The chart's memory line reaches M10.
    let largest = report.m1_points.iter().map(|p| p.objects).max().unwrap_or_default();
    assert!(largest > 500, "M10's point is missing from the chart: {:?}", report.m1_points);
}

/// `--latency-only`: L1, its floor, F1 and A1 have figures; every other scenario says it was not
/// run, and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_only_measures_latency_and_says_what_it_left_out() {
    measures_only(Scenarios::Latency, "--latency-only", &["L1-", "F1", "A1-"], &["L1-floor"]).await;
}

/// `--cpu-only`: U1 and kube-apiserver's cost during its load have figures, nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_only_measures_u1_and_says_what_it_left_out() {
    let k1_during_load = ["K1-l1-requests-per-reload", "K1-l1-allocated-per-reload", "K1-l1-peak-rise"];
    measures_only(Scenarios::Cpu, "--cpu-only", &["U1-", "K1-l1-"], &k1_during_load).await;
}

/// A run of `scenarios` alone: rows starting with `measured` have figures, every other row says
/// it was left out by `flag`, and each of `expected` is there.
async fn measures_only(scenarios: Scenarios, flag: &str, measured: &[&str], expected: &[&str]) {
    let out = tempfile::tempdir().expect("a results directory");
    let options = BenchOptions { scales: vec![0.025], scenarios, m10: false, ..small_run(out.path()) };
    let report = run(&options).await.expect("the small benchmark runs");
    for row in &report.scenarios {
        if measured.iter().any(|prefix| row.id.starts_with(prefix)) {
            assert!(row.ours.is_some(), "{}: no figure ({:?})", row.id, row.error);
        } else {
            assert!(row.ours.is_none(), "{} was measured", row.id);
            assert!(row.error.as_deref().is_some_and(|e| e.contains(flag)), "{}: {:?}", row.id, row.error);
        }
    }
    let ids: Vec<&str> = report.scenarios.iter().map(|s| s.id.as_str()).collect();
    for scenario in measured.iter().chain(expected) {
        assert!(ids.iter().any(|id| id.starts_with(scenario)), "{scenario} is missing from {ids:?}");
    }
}

/// Every scenario at the small sizes, one repetition, writing under `out`.
fn small_run(out: &Path) -> BenchOptions {
    BenchOptions {
        small: true,
        scales: BenchOptions::default_scales(true),
        repeat: 1,
        // The debug binary `cargo test` built; Stakater is never part of the smoke run.
        binary: reloader_binary(),
        stakater: None,
        log_dir: out.join("logs"),
        hold: false,
        scenarios: Scenarios::All,
        // Tiny M10 and F10 (a few hundred objects, 60 Deployments), ours inside the chart's limit.
        m10: true,
    }
}

fn running_as_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|ids| ids.split_whitespace().nth(1))
        == Some("0")
}
