//! The benchmark at a small scale (a few hundred objects, one repetition) through the same code
//! path as `hack/bench`, so that the harness keeps working. No timing is asserted: only that every
//! scenario produced a figure and that the JSON and SVG were written.

use reloader_bench::{BenchOptions, run, write_report};
use reloader_harness::reloader_binary;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_produces_a_figure_at_small_scale() {
    let out = tempfile::tempdir().expect("a results directory");
    let options = BenchOptions {
        small: true,
        scales: BenchOptions::default_scales(true),
        repeat: 1,
        // The debug binary `cargo test` built; Stakater is never part of the smoke run.
        binary: reloader_binary(),
        stakater: None,
        log_dir: out.path().join("logs"),
        hold: false,
        memory_only: false,
    };
    let report = run(&options).await.expect("the small benchmark runs");
    print!("{}", report.table());

    let failed: Vec<String> =
        report.scenarios.iter().filter_map(|s| Some(format!("{}: {}", s.id, s.error.as_ref()?))).collect();
    assert!(failed.is_empty(), "scenarios failed:\n{}", failed.join("\n"));
    let without_figure: Vec<&str> =
        report.scenarios.iter().filter(|s| s.ours.is_none()).map(|s| s.id.as_str()).collect();
    assert!(without_figure.is_empty(), "no figure for {without_figure:?}");
    let ids: Vec<&str> = report.scenarios.iter().map(|s| s.id.as_str()).collect();
    for scenario in
        ["M1-steady", "M1-peak", "M1-slope", "S1-", "L1-p50", "L1-floor", "F1", "A1-", "C1-", "H1-", "P1-"]
    {
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
        assert!(scenario["ours"].is_number(), "{scenario}");
    }
    assert!(json["machine"]["cores"].as_u64().unwrap() >= 1);
    assert!(json["versions"]["kubernetes"].as_str().unwrap().starts_with('v'));
    assert!(!json["m1_points"].as_array().unwrap().is_empty());
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("<polyline"), "the chart has M1's memory line");
}
