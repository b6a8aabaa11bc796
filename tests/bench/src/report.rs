//! Results: one row per scenario figure, the table printed for humans, and the JSON for tools.

use serde::Serialize;
use serde_json::{Value, json};

use super::procfs::Machine;
use super::stats::Spread;

/// What a figure must satisfy (docs/benchmark.md's target column).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "kebab-case")]
pub enum Target {
    /// ours / stakater at most this; unknown without Stakater.
    RatioAtMost(f64),
    /// ours exactly this, whatever Stakater does.
    Equals(f64),
    /// ours at most this, whatever Stakater does.
    AtMost(f64),
    /// Reported for context; nothing to hold.
    Informational,
}

impl Target {
    pub fn describe(self) -> String {
        match self {
            Target::RatioAtMost(ratio) => format!("<= {ratio:.2}x"),
            Target::Equals(value) => format!("= {}", number(value)),
            Target::AtMost(value) => format!("<= {}", number(value)),
            Target::Informational => "-".to_owned(),
        }
    }

    fn judge(self, ours: Option<f64>, ratio: Option<f64>) -> Option<bool> {
        match self {
            Target::RatioAtMost(limit) => ratio.map(|r| r <= limit),
            Target::Equals(value) => ours.map(|o| (o - value).abs() < 1e-9),
            Target::AtMost(value) => ours.map(|o| o <= value),
            Target::Informational => None,
        }
    }
}

/// One figure of one scenario, for both controllers.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResult {
    pub id: String,
    pub title: String,
    pub unit: String,
    pub ours: Option<f64>,
    pub stakater: Option<f64>,
    /// Why `stakater` is null.
    pub stakater_note: Option<String>,
    pub ratio: Option<f64>,
    pub target: Target,
    pub holds: Option<bool>,
    /// Why `ours` is null: the scenario failed.
    pub error: Option<String>,
    /// Samples, spreads and counts behind the figures.
    pub detail: Value,
    /// Median, min and max over the repetitions, for figures measured more than once (`ours` and
    /// `stakater` are then the medians).
    pub ours_spread: Option<Spread>,
    pub stakater_spread: Option<Spread>,
}

impl ScenarioResult {
    pub fn new(
        id: impl Into<String>,
        title: impl Into<String>,
        unit: impl Into<String>,
        target: Target,
    ) -> Self {
        Self {
            id: id.into(),
            title: title.into(),
            unit: unit.into(),
            ours: None,
            stakater: None,
            stakater_note: None,
            ratio: None,
            target,
            holds: None,
            error: None,
            detail: Value::Null,
            ours_spread: None,
            stakater_spread: None,
        }
    }

    /// The repetitions behind the medians.
    pub fn spreads(mut self, ours: Option<Spread>, stakater: Option<Spread>) -> Self {
        self.ours_spread = ours;
        self.stakater_spread = stakater;
        self
    }

    pub fn ours(mut self, value: Option<f64>) -> Self {
        self.ours = value;
        self.judge()
    }

    /// Stakater's figure, or why there is none.
    pub fn stakater(mut self, value: Result<Option<f64>, String>) -> Self {
        match value {
            Ok(value) => self.stakater = value,
            Err(note) => self.stakater_note = Some(note),
        }
        self.judge()
    }

    pub fn detail(mut self, detail: Value) -> Self {
        self.detail = detail;
        self
    }

    pub fn failed(mut self, error: impl std::fmt::Display) -> Self {
        self.error = Some(error.to_string());
        self.judge()
    }

    fn judge(mut self) -> Self {
        self.ratio = match (self.ours, self.stakater) {
            (Some(ours), Some(stakater)) if stakater > 0.0 => Some(ours / stakater),
            _ => None,
        };
        self.holds = self.target.judge(self.ours, self.ratio);
        self
    }
}

/// A whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub date: String,
    pub runtime_seconds: f64,
    pub machine: Machine,
    pub versions: Value,
    pub options: Value,
    pub stakater: Value,
    pub scenarios: Vec<ScenarioResult>,
    /// M1's RSS against object count, for the chart.
    pub m1_points: Vec<MemoryPoint>,
}

/// One M1 measurement: median over the repetitions at one size.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryPoint {
    pub subject: String,
    pub scale: f64,
    pub objects: usize,
    pub steady_bytes: f64,
    pub peak_bytes: f64,
}

impl Report {
    /// The JSON written to `latest.json`.
    pub fn to_json(&self) -> Value {
        let scenarios: Vec<Value> = self
            .scenarios
            .iter()
            .map(|s| {
                json!({
                    "id": s.id, "title": s.title, "unit": s.unit,
                    "ours": s.ours, "stakater": s.stakater, "stakater_note": s.stakater_note,
                    "ratio": s.ratio, "target": s.target.describe(), "target_rule": s.target,
                    "holds": s.holds, "error": s.error, "detail": s.detail,
                    "ours_spread": s.ours_spread, "stakater_spread": s.stakater_spread,
                })
            })
            .collect();
        json!({
            "date": self.date,
            "runtime_seconds": self.runtime_seconds,
            "machine": self.machine,
            "versions": self.versions,
            "options": self.options,
            "stakater": self.stakater,
            "scenarios": scenarios,
            "m1_points": self.m1_points,
        })
    }

    /// Why Stakater has no figure, each reason once, in row order.
    pub fn stakater_notes(&self) -> Vec<&str> {
        let mut notes: Vec<&str> = Vec::new();
        for note in self.scenarios.iter().filter_map(|s| s.stakater_note.as_deref()) {
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
        notes
    }

    /// The table printed to stdout: medians, with (min–max) where the figure was repeated.
    pub fn table(&self) -> String {
        let header = ["id", "unit", "ours", "stakater", "ratio", "target", "holds", "runs"];
        let rows: Vec<[String; 8]> = self
            .scenarios
            .iter()
            .map(|s| {
                [
                    s.id.clone(),
                    s.unit.clone(),
                    figure_cell(s.ours, s.ours_spread)
                        .unwrap_or_else(|| if s.error.is_some() { "FAILED".into() } else { "-".into() }),
                    figure_cell(s.stakater, s.stakater_spread).unwrap_or_else(|| "null".into()),
                    s.ratio.map_or_else(|| "-".into(), |r| format!("{r:.3}")),
                    s.target.describe(),
                    s.holds.map_or_else(|| "-".into(), |h| if h { "yes".into() } else { "NO".into() }),
                    s.runs(),
                ]
            })
            .collect();
        let widths: Vec<usize> = (0..header.len())
            .map(|c| rows.iter().map(|r| r[c].chars().count()).chain([header[c].len()]).max().unwrap_or(0))
            .collect();
        let line = |cells: &[String]| {
            let padded: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
            format!("| {} |\n", padded.join(" | "))
        };
        let mut out = line(&header.map(String::from));
        out += &line(&widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>());
        for row in &rows {
            out += &line(row);
        }
        for note in self.stakater_notes() {
            out += &format!("stakater: {note}\n");
        }
        for failed in self.scenarios.iter().filter(|s| s.error.is_some()) {
            out += &format!("{} failed: {}\n", failed.id, failed.error.as_deref().unwrap_or_default());
        }
        out
    }
}

/// `median (min–max)` for a repeated figure, the figure alone otherwise.
pub fn figure_cell(value: Option<f64>, spread: Option<Spread>) -> Option<String> {
    let value = value?;
    Some(match spread {
        Some(spread) if spread.runs > 1 => {
            format!("{} ({}–{})", number(value), number(spread.min), number(spread.max))
        }
        _ => number(value),
    })
}

impl ScenarioResult {
    /// How many repetitions the figures summarise: `ours/stakater`, or `1` for a single run.
    pub fn runs(&self) -> String {
        match (self.ours_spread, self.stakater_spread) {
            (None, None) => "1".to_owned(),
            (ours, stakater) => {
                let runs = |s: Option<Spread>| s.map_or_else(|| "-".to_owned(), |s| s.runs.to_string());
                format!("{}/{}", runs(ours), runs(stakater))
            }
        }
    }
}

/// A figure with as many decimals as its size deserves.
pub fn number(value: f64) -> String {
    if value == value.trunc() && value.abs() < 1e12 {
        format!("{value:.0}")
    } else if value.abs() >= 100.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_targets_need_stakater() {
        let row = ScenarioResult::new("M1", "m", "MiB", Target::RatioAtMost(0.1))
            .ours(Some(20.0))
            .stakater(Err("unavailable".into()));
        assert_eq!((row.ratio, row.holds), (None, None));
        let row = row.stakater(Ok(Some(400.0)));
        assert_eq!((row.ratio, row.holds), (Some(0.05), Some(true)));
        let row = row.stakater(Ok(Some(100.0)));
        assert_eq!(row.holds, Some(false));
    }

    #[test]
    fn absolute_targets_are_judged_on_ours_alone() {
        let row = ScenarioResult::new("A1", "a", "LIST", Target::Equals(0.0)).ours(Some(0.0));
        assert_eq!(row.holds, Some(true));
        let row = ScenarioResult::new("H1", "h", "s", Target::AtMost(17.0)).ours(Some(18.5));
        assert_eq!(row.holds, Some(false));
        let failed = ScenarioResult::new("C1", "c", "n", Target::Equals(1.0)).failed("boom");
        assert_eq!((failed.ours, failed.holds), (None, None));
    }

    #[test]
    fn numbers_keep_sensible_precision() {
        assert_eq!(number(3.0), "3");
        assert_eq!(number(0.12345), "0.123");
        assert_eq!(number(1234.56), "1234.6");
    }
}
