//! Summaries of repeated measurements: percentiles, median and spread, and the slope of a line.

use std::time::Duration;

use serde::Serialize;

/// Nearest-rank percentile of `samples` (`p` in 0..=1); `None` when there are none.
pub fn percentile(samples: &[f64], p: f64) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (p.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.saturating_sub(1).min(sorted.len() - 1)])
}

/// Median, minimum and maximum of repeated measurements.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub runs: usize,
}

impl Spread {
    pub fn of(samples: &[f64]) -> Option<Self> {
        let median = percentile(samples, 0.5)?;
        let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
        let max = samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(Self { median, min, max, runs: samples.len() })
    }

    /// The same spread in another unit (`divisor` of the current one each).
    pub fn in_units_of(self, divisor: f64) -> Self {
        Self { median: self.median / divisor, min: self.min / divisor, max: self.max / divisor, ..self }
    }
}

/// Least-squares slope of `y` against `x`; `None` with fewer than two distinct `x`.
pub fn slope(points: &[(f64, f64)]) -> Option<f64> {
    let n = points.len() as f64;
    let mean_x = points.iter().map(|(x, _)| x).sum::<f64>() / n;
    let mean_y = points.iter().map(|(_, y)| y).sum::<f64>() / n;
    let covariance: f64 = points.iter().map(|(x, y)| (x - mean_x) * (y - mean_y)).sum();
    let variance: f64 = points.iter().map(|(x, _)| (x - mean_x).powi(2)).sum();
    (points.len() >= 2 && variance > 0.0).then(|| covariance / variance)
}

/// Milliseconds, as the unit every latency is reported in.
pub fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// Latency samples in milliseconds, summarised as p50/p99 with how many were expected.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Latencies {
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
    /// Updates made.
    pub expected: usize,
    /// Updates whose workload change was never seen before the deadline.
    pub missed: usize,
}

impl Latencies {
    pub fn of(samples: &[f64], expected: usize) -> Self {
        Self {
            p50: percentile(samples, 0.5),
            p99: percentile(samples, 0.99),
            max: percentile(samples, 1.0),
            expected,
            missed: expected.saturating_sub(samples.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&samples, 0.5), Some(50.0));
        assert_eq!(percentile(&samples, 0.99), Some(99.0));
        assert_eq!(percentile(&samples, 1.0), Some(100.0));
        assert_eq!(percentile(&[7.0], 0.99), Some(7.0));
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn spread_of_unsorted_samples() {
        let spread = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((spread.median, spread.min, spread.max, spread.runs), (2.0, 1.0, 3.0, 3));
    }

    #[test]
    fn slope_of_a_line_and_of_too_few_points() {
        assert_eq!(slope(&[(0.0, 10.0), (2.0, 14.0), (4.0, 18.0)]), Some(2.0));
        assert_eq!(slope(&[(1.0, 5.0)]), None);
        assert_eq!(slope(&[(1.0, 5.0), (1.0, 6.0)]), None);
    }

    #[test]
    fn latencies_count_what_was_missed() {
        let summary = Latencies::of(&[10.0, 20.0], 3);
        assert_eq!((summary.p50, summary.missed), (Some(10.0), 1));
    }
}
