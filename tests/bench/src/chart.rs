//! The report as an SVG picture, written with plain string formatting: the ours/Stakater ratio of
//! every ratio-judged figure against its target, and M1's resident memory against object count.

use std::fmt::Write;

use super::report::{MemoryPoint, Report, Target};

const WIDTH: f64 = 900.0;
const LABEL_WIDTH: f64 = 230.0;
const BAR_HEIGHT: f64 = 18.0;
const ROW_GAP: f64 = 8.0;
const PLOT_HEIGHT: f64 = 300.0;
const OURS: &str = "#1f77b4";
const STAKATER: &str = "#d62728";

/// The whole picture.
pub fn svg(report: &Report) -> String {
    let (ratios, ratios_height) = ratio_panel(report, 66.0);
    let memory_top = 66.0 + ratios_height + 70.0;
    let memory = memory_panel(&report.m1_points, memory_top);
    let height = memory_top + PLOT_HEIGHT + 90.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let title = format!(
        "reloader benchmark, {} ({} cores, {:.1} GiB)",
        report.date,
        report.machine.cores,
        report.machine.memory_bytes as f64 / (1u64 << 30) as f64
    );
    let _ =
        writeln!(out, r#"<text x="10" y="22" font-size="15" font-weight="bold">{}</text>"#, escape(&title));
    let version = |key: &str| report.versions.get(key).and_then(|v| v.as_str()).unwrap_or("-").to_owned();
    let versions = format!(
        "Kubernetes {}; ours: {}; Stakater: {}; medians over the repetitions",
        version("kubernetes"),
        version("ours"),
        version("stakater")
    );
    let _ = writeln!(out, r##"<text x="10" y="38" fill="#555">{}</text>"##, escape(&versions));
    out += &ratios;
    out += &memory;
    out += "</svg>\n";
    out
}

/// Horizontal bars of ours/Stakater, with each target as a mark and parity (1.0) as a line.
fn ratio_panel(report: &Report, top: f64) -> (String, f64) {
    // Every ratio-judged figure (with or without a ratio, so a missing one says why), and any
    // other figure both controllers measured, so new rows appear without touching the chart.
    let rows: Vec<_> = report
        .scenarios
        .iter()
        .filter(|s| matches!(s.target, Target::RatioAtMost(_)) || s.ratio.is_some())
        .collect();
    let plot_width = WIDTH - LABEL_WIDTH - 40.0;
    let max = rows.iter().filter_map(|s| s.ratio).fold(1.2_f64, f64::max);
    let x = |ratio: f64| LABEL_WIDTH + ratio / max * plot_width;
    let height = rows.len() as f64 * (BAR_HEIGHT + ROW_GAP) + 10.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<text x="10" y="{}" font-size="14">ours / Stakater (lower is better; | marks the target)</text>"#,
        top - 10.0
    );
    let parity = x(1.0);
    let _ = writeln!(
        out,
        r##"<line x1="{parity:.1}" y1="{top}" x2="{parity:.1}" y2="{:.1}" stroke="#888" stroke-dasharray="4 3"/><text x="{parity:.1}" y="{:.1}" text-anchor="middle" fill="#888">1.0</text>"##,
        top + height,
        top + height + 14.0
    );
    for (i, row) in rows.iter().enumerate() {
        let y = top + i as f64 * (BAR_HEIGHT + ROW_GAP);
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LABEL_WIDTH - 8.0,
            y + BAR_HEIGHT - 5.0,
            escape(&row.id)
        );
        match row.ratio {
            Some(ratio) => {
                let colour = if row.holds == Some(true) { "#2ca02c" } else { STAKATER };
                let _ = writeln!(
                    out,
                    r#"<rect x="{LABEL_WIDTH}" y="{y:.1}" width="{:.1}" height="{BAR_HEIGHT}" fill="{colour}"/><text x="{:.1}" y="{:.1}">{ratio:.3}</text>"#,
                    (x(ratio) - LABEL_WIDTH).max(1.0),
                    x(ratio) + 4.0,
                    y + BAR_HEIGHT - 5.0
                );
            }
            None => {
                let why = row.stakater_note.as_deref().or(row.error.as_deref()).unwrap_or("no figure");
                let _ = writeln!(
                    out,
                    r##"<text x="{:.1}" y="{:.1}" fill="#888">no ratio: {}</text>"##,
                    LABEL_WIDTH + 4.0,
                    y + BAR_HEIGHT - 5.0,
                    escape(why)
                );
            }
        }
        if let Target::RatioAtMost(target) = row.target {
            let _ = writeln!(
                out,
                r#"<line x1="{0:.1}" y1="{1:.1}" x2="{0:.1}" y2="{2:.1}" stroke="black" stroke-width="2"/>"#,
                x(target),
                y - 2.0,
                y + BAR_HEIGHT + 2.0
            );
        }
    }
    (out, height)
}

/// Steady and peak RSS against object count, one colour per controller.
fn memory_panel(points: &[MemoryPoint], top: f64) -> String {
    let left = 80.0;
    let plot_width = WIDTH - left - 200.0;
    let max_objects = points.iter().map(|p| p.objects as f64).fold(1.0, f64::max);
    let max_mib =
        points.iter().map(|p| p.peak_bytes.max(p.steady_bytes) / 1048576.0).fold(1.0, f64::max) * 1.1;
    let x = |objects: f64| left + objects / max_objects * plot_width;
    let y = |mib: f64| top + PLOT_HEIGHT - mib / max_mib * PLOT_HEIGHT;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<text x="10" y="{}" font-size="14">M1 resident memory (MiB) against objects in the cluster</text>"#,
        top - 15.0
    );
    let _ = writeln!(
        out,
        r#"<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="black"/><line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="black"/>"#,
        bottom = top + PLOT_HEIGHT,
        right = left + plot_width
    );
    for tick in 0..=4 {
        let mib = max_mib * f64::from(tick) / 4.0;
        let objects = max_objects * f64::from(tick) / 4.0;
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{mib:.0}</text><text x="{:.1}" y="{:.1}" text-anchor="middle">{objects:.0}</text>"#,
            left - 6.0,
            y(mib) + 4.0,
            x(objects),
            top + PLOT_HEIGHT + 16.0
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">objects</text>"#,
        left + plot_width / 2.0,
        top + PLOT_HEIGHT + 34.0
    );
    let series = [
        Series { subject: "ours", what: "steady", colour: OURS, pick: |p| p.steady_bytes },
        Series { subject: "ours", what: "peak", colour: OURS, pick: |p| p.peak_bytes },
        Series { subject: "stakater", what: "steady", colour: STAKATER, pick: |p| p.steady_bytes },
        Series { subject: "stakater", what: "peak", colour: STAKATER, pick: |p| p.peak_bytes },
    ];
    let mut legend_y = top + 10.0;
    for Series { subject, what, colour, pick } in series {
        let line: Vec<(f64, f64)> = points
            .iter()
            .filter(|p| p.subject == subject)
            .map(|p| (x(p.objects as f64), y(pick(p) / 1048576.0)))
            .collect();
        if line.is_empty() {
            continue;
        }
        let dash = if what == "peak" { r#" stroke-dasharray="6 4""# } else { "" };
        let coordinates: Vec<String> = line.iter().map(|(px, py)| format!("{px:.1},{py:.1}")).collect();
        let _ = writeln!(
            out,
            r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>"#,
            coordinates.join(" ")
        );
        for (px, py) in &line {
            let _ = writeln!(out, r#"<circle cx="{px:.1}" cy="{py:.1}" r="3" fill="{colour}"/>"#);
        }
        let legend_x = left + plot_width + 20.0;
        let _ = writeln!(
            out,
            r#"<line x1="{legend_x}" y1="{legend_y}" x2="{:.1}" y2="{legend_y}" stroke="{colour}" stroke-width="2"{dash}/><text x="{:.1}" y="{:.1}">{subject} {what}</text>"#,
            legend_x + 24.0,
            legend_x + 30.0,
            legend_y + 4.0
        );
        legend_y += 18.0;
    }
    out
}

/// One line of the memory plot.
struct Series {
    subject: &'static str,
    what: &'static str,
    colour: &'static str,
    pick: fn(&MemoryPoint) -> f64,
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procfs::Machine;
    use crate::report::ScenarioResult;
    use serde_json::Value;

    fn report(scenarios: Vec<ScenarioResult>, m1_points: Vec<MemoryPoint>) -> Report {
        Report {
            date: "2026-01-01T00:00:00Z".into(),
            runtime_seconds: 1.0,
            machine: Machine::example(),
            versions: Value::Null,
            options: Value::Null,
            stakater: Value::Null,
            scenarios,
            m1_points,
        }
    }

    #[test]
    fn draws_bars_notes_and_memory_lines() {
        let measured = ScenarioResult::new("M1-steady@1", "m", "MiB", Target::RatioAtMost(0.1))
            .ours(Some(10.0))
            .stakater(Ok(Some(200.0)));
        let missing = ScenarioResult::new("F1", "f", "s", Target::RatioAtMost(0.1))
            .ours(Some(1.0))
            .stakater(Err("unavailable: <reason>".into()));
        let point = |objects, mib: f64| MemoryPoint {
            subject: "ours".into(),
            scale: 1.0,
            objects,
            steady_bytes: mib * 1048576.0,
            peak_bytes: mib * 2.0 * 1048576.0,
        };
        let svg = svg(&report(vec![measured, missing], vec![point(100, 10.0), point(200, 12.0)]));
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("0.050"), "the bar's ratio is written");
        assert!(svg.contains("no ratio: unavailable: &lt;reason&gt;"), "the reason is escaped");
        assert_eq!(svg.matches("<polyline").count(), 2, "ours steady and peak");
        assert_eq!(svg.matches('<').count(), svg.matches('>').count());
    }
}
