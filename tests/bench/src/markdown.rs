//! The report as the Markdown table README.md's "Benchmark" section carries, so that a new run
//! replaces it wholesale (`target/bench/latest.md`): one line saying when, where and with what,
//! then every row with both columns, medians and spreads.

use std::fmt::Write;

use serde_json::Value;

use super::report::{Report, figure_cell, number};

/// The heading line and the table.
pub fn readme_table(report: &Report) -> String {
    let version = |key: &str| report.versions.get(key).and_then(Value::as_str).unwrap_or("?").to_owned();
    let repeat = report.options.get("repeat").and_then(Value::as_u64).unwrap_or(1);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Run of {date}: {cores} cores ({cpu}), {memory:.1} GiB, kernel {kernel}, load average {load} at \
         the start; Kubernetes {kubernetes}; ours: {ours}; Stakater: {stakater}. Medians, with \
         (min–max) over the repetitions where a figure was measured more than once (`--repeat={repeat}`; \
         the runs column says how many, ours/Stakater).",
        date = report.date,
        cores = report.machine.cores,
        cpu = report.machine.cpu,
        memory = report.machine.memory_bytes as f64 / (1u64 << 30) as f64,
        kernel = report.machine.kernel,
        load = report.machine.load_average,
        kubernetes = version("kubernetes"),
        ours = version("ours"),
        stakater = version("stakater"),
    );
    out += "\n| scenario | ours | Stakater | ratio | target | holds | runs |\n";
    out += "| --- | --- | --- | --- | --- | --- | --- |\n";
    for row in &report.scenarios {
        let ours = figure_cell(row.ours, row.ours_spread)
            .unwrap_or_else(|| if row.error.is_some() { "failed".into() } else { "–".into() });
        let stakater = figure_cell(row.stakater, row.stakater_spread).unwrap_or_else(|| "–".into());
        let _ = writeln!(
            out,
            "| {id} {title} ({unit}) | {ours} | {stakater} | {ratio} | {target} | {holds} | {runs} |",
            id = row.id,
            title = row.title.trim_start_matches(row.id.split(['-', '@']).next().unwrap_or_default()).trim(),
            unit = row.unit,
            ratio = row.ratio.map_or_else(|| "–".into(), |r| format!("{r:.2}")),
            target = row.target.describe().replace("<=", "≤"),
            holds = row.holds.map_or("–", |h| if h { "yes" } else { "**no**" }),
            runs = row.runs(),
        );
    }
    let notes = report.stakater_notes();
    if !notes.is_empty() {
        out += "\nWhere Stakater has no figure: ";
        out += &notes.join("; ");
        out += ".\n";
    }
    for failed in report.scenarios.iter().filter(|s| s.error.is_some()) {
        let _ = writeln!(out, "\n{} failed: {}", failed.id, failed.error.as_deref().unwrap_or_default());
    }
    let _ = writeln!(out, "\nThe whole run took {} s.", number(report.runtime_seconds.round()));
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::procfs::Machine;
    use crate::report::{ScenarioResult, Target};
    use crate::stats::Spread;

    #[test]
    fn rows_carry_both_columns_spreads_and_notes() {
        let repeated = ScenarioResult::new(
            "M1-steady@1",
            "M1 steady VmRSS after ready",
            "MiB",
            Target::RatioAtMost(0.1),
        )
        .ours(Some(20.0))
        .stakater(Ok(Some(200.0)))
        .spreads(Spread::of(&[19.0, 20.0, 21.0]), Spread::of(&[190.0, 200.0, 210.0]));
        let ours_only = ScenarioResult::new(
            "P1-swap-p99",
            "P1 update to files swapped, p99",
            "ms",
            Target::AtMost(100.0),
        )
        .ours(Some(3.5))
        .stakater(Err("n/a: ours only".into()));
        let report = Report {
            date: "2026-01-01T00:00:00Z".into(),
            runtime_seconds: 61.4,
            machine: Machine::example(),
            versions: json!({ "kubernetes": "v1.36.3", "ours": "reloader 0.1.0", "stakater": "v1.4.21" }),
            options: json!({ "repeat": 3 }),
            stakater: Value::Null,
            scenarios: vec![repeated, ours_only],
            m1_points: Vec::new(),
        };
        let table = readme_table(&report);
        assert!(table.contains("kernel k, load average 0.05 at the start; Kubernetes v1.36.3; ours: reloader 0.1.0; Stakater: v1.4.21"), "{table}");
        assert!(
            table.contains(
                "| M1-steady@1 steady VmRSS after ready (MiB) | 20 (19–21) | 200 (190–210) | 0.10 | ≤ 0.10x | yes | 3/3 |"
            ),
            "{table}"
        );
        assert!(
            table.contains(
                "| P1-swap-p99 update to files swapped, p99 (ms) | 3.500 | – | – | ≤ 100 | yes | 1 |"
            ),
            "{table}"
        );
        assert!(table.contains("Where Stakater has no figure: n/a: ours only."), "{table}");
        assert!(table.contains("took 61 s"), "{table}");
    }
}
