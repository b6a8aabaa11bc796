//! Is a replica's memory and descriptor count flat? The least-squares slope of its samples after
//! a warm-up, judged only for lifetimes long enough to tell a trend from noise.

use reloader_bench::stats::{Spread, slope};
use serde::Serialize;

use crate::replicas::Lifetime;

const MIB: f64 = 1024.0 * 1024.0;

/// What counts as flat: over the judged span, the fitted line may rise by at most the larger of
/// an absolute floor and a share of the median (allocator and connection noise).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Flatness {
    /// Samples before this many seconds of a lifetime are warm-up (caches filling, first lists).
    pub warmup_seconds: f64,
    /// Lifetimes with less than this many seconds after the warm-up are reported, not judged.
    pub judge_after_seconds: f64,
    pub rss_floor_mib: f64,
    pub fds_floor: f64,
    /// Share of the median the fitted rise may reach.
    pub share: f64,
}

impl Flatness {
    pub const DEFAULT: Flatness = Flatness {
        warmup_seconds: 120.0,
        judge_after_seconds: 600.0,
        rss_floor_mib: 1.0,
        fds_floor: 2.0,
        share: 0.05,
    };
}

/// One lifetime's trend.
#[derive(Debug, Clone, Serialize)]
pub struct Trend {
    pub identity: String,
    pub minutes_judged: f64,
    pub samples: usize,
    pub rss_mib: Option<Spread>,
    pub rss_slope_mib_per_hour: Option<f64>,
    pub fds: Option<Spread>,
    pub fds_slope_per_hour: Option<f64>,
    /// `None`: too short to judge.
    pub flat: Option<bool>,
}

pub fn trend(lifetime: &Lifetime, rule: &Flatness) -> Trend {
    let start = lifetime.started_at + rule.warmup_seconds;
    let kept: Vec<_> = lifetime.samples.iter().filter(|s| s.at >= start).collect();
    let span = match (kept.first(), kept.last()) {
        (Some(first), Some(last)) => last.at - first.at,
        _ => 0.0,
    };
    let hours = |s: f64| s / 3600.0;
    let rss: Vec<(f64, f64)> = kept.iter().map(|s| (hours(s.at), s.rss_bytes as f64 / MIB)).collect();
    let fds: Vec<(f64, f64)> = kept.iter().map(|s| (hours(s.at), s.open_fds as f64)).collect();
    let rss_spread = Spread::of(&rss.iter().map(|p| p.1).collect::<Vec<_>>());
    let fds_spread = Spread::of(&fds.iter().map(|p| p.1).collect::<Vec<_>>());
    let (rss_slope, fds_slope) = (slope(&rss), slope(&fds));
    let judged = span >= rule.judge_after_seconds;
    let within = |slope: Option<f64>, median: Option<f64>, floor: f64| match (slope, median) {
        (Some(slope), Some(median)) => slope * hours(span) <= floor.max(rule.share * median),
        _ => false,
    };
    let flat = judged.then(|| {
        within(rss_slope, rss_spread.map(|s| s.median), rule.rss_floor_mib)
            && within(fds_slope, fds_spread.map(|s| s.median), rule.fds_floor)
    });
    Trend {
        identity: lifetime.identity.clone(),
        minutes_judged: span / 60.0,
        samples: kept.len(),
        rss_mib: rss_spread,
        rss_slope_mib_per_hour: rss_slope,
        fds: fds_spread,
        fds_slope_per_hour: fds_slope,
        flat,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replicas::Sample;

    fn lifetime(points: &[(f64, f64, u64)]) -> Lifetime {
        Lifetime {
            identity: "r".into(),
            slot: 0,
            started_at: 0.0,
            ended_at: None,
            ending: None,
            exited_cleanly: None,
            reloads_executed: 0.0,
            samples: points
                .iter()
                .map(|&(at, mib, fds)| Sample { at, rss_bytes: (mib * MIB) as u64, open_fds: fds })
                .collect(),
            log_file: Default::default(),
        }
    }

    type Points = Vec<(f64, f64, u64)>;

    /// Samples every 10 s from 0 to `until` seconds, RSS rising by `mib_per_hour`.
    fn series(until: u32, mib_per_hour: f64, fds: u64) -> Points {
        (0..=until / 10)
            .map(|i| f64::from(i * 10))
            .map(|t| (t, 30.0 + mib_per_hour * t / 3600.0, fds))
            .collect()
    }

    #[test]
    fn judged_only_when_long_enough_and_flat_within_the_allowance() {
        let rule = Flatness::DEFAULT;
        let cases: &[(&str, Points, Option<bool>)] = &[
            ("too short", series(600, 0.0, 20), None),
            ("flat", series(1800, 0.0, 20), Some(true)),
            // 30 MiB median: 1.5 MiB allowed over the 28 judged minutes.
            ("slow rise within noise", series(1800, 2.0, 20), Some(true)),
            ("a leak", series(1800, 20.0, 20), Some(false)),
            ("falling", series(1800, -10.0, 20), Some(true)),
        ];
        for (name, points, flat) in cases {
            assert_eq!(trend(&lifetime(points), &rule).flat, *flat, "{name}");
        }
    }

    #[test]
    fn leaking_descriptors_are_not_flat() {
        let mut points = series(1800, 0.0, 20);
        for (i, point) in points.iter_mut().enumerate() {
            point.2 = 20 + i as u64 / 20;
        }
        let trend = trend(&lifetime(&points), &Flatness::DEFAULT);
        assert_eq!(trend.flat, Some(false));
        assert!(trend.fds_slope_per_hour.unwrap() > 10.0, "{trend:?}");
    }
}
