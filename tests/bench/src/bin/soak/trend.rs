//! Is a replica's memory and descriptor count flat? The least-squares slope of its samples after
//! a warm-up, judged only for lifetimes long enough to tell a trend from noise.

use reloader_bench::stats::{Spread, slope};
use serde::Serialize;

use crate::replicas::{Lifetime, Sample};

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
    /// Descriptors, judged per role: a leader holds the writer's pooled connections to the API
    /// server (a handful more than a standby, rising and falling with the write rate), so
    /// taking or losing the lease is a step, not a trend. Over all samples, a leak shows in
    /// each role alike.
    pub fds_leading: RoleTrend,
    pub fds_standby: RoleTrend,
    /// `None`: too short to judge.
    pub flat: Option<bool>,
}

/// The descriptors of the samples taken while a lifetime held one role.
#[derive(Debug, Clone, Serialize)]
pub struct RoleTrend {
    /// Seconds between consecutive samples both in this role.
    pub minutes: f64,
    pub samples: usize,
    pub spread: Option<Spread>,
    pub slope_per_hour: Option<f64>,
    /// `None`: too little time in this role to judge.
    pub flat: Option<bool>,
}

pub fn trend(lifetime: &Lifetime, rule: &Flatness) -> Trend {
    let start = lifetime.started_at + rule.warmup_seconds;
    let kept: Vec<&Sample> = lifetime.samples.iter().filter(|s| s.at >= start).collect();
    let span = covered(&kept, |_| true);
    let rss: Vec<(f64, f64)> = kept.iter().map(|s| (hours(s.at), s.rss_bytes as f64 / MIB)).collect();
    let rss_spread = Spread::of(&rss.iter().map(|p| p.1).collect::<Vec<_>>());
    let rss_slope = slope(&rss);
    let judged = span >= rule.judge_after_seconds;
    let fds_leading = role_trend(&kept, Some(true), rule);
    let fds_standby = role_trend(&kept, Some(false), rule);
    let flat = judged.then(|| {
        within(rss_slope, rss_spread, first_to_last(&rss), rule.rss_floor_mib, rule.share)
            && fds_leading.flat != Some(false)
            && fds_standby.flat != Some(false)
    });
    Trend {
        identity: lifetime.identity.clone(),
        minutes_judged: span / 60.0,
        samples: kept.len(),
        rss_mib: rss_spread,
        rss_slope_mib_per_hour: rss_slope,
        fds_leading,
        fds_standby,
        flat,
    }
}

fn role_trend(kept: &[&Sample], leading: Option<bool>, rule: &Flatness) -> RoleTrend {
    let in_role: Vec<&Sample> = kept.iter().copied().filter(|s| s.leading == leading).collect();
    let fds: Vec<(f64, f64)> = in_role.iter().map(|s| (hours(s.at), s.open_fds as f64)).collect();
    let spread = Spread::of(&fds.iter().map(|p| p.1).collect::<Vec<_>>());
    let slope_per_hour = slope(&fds);
    let time = covered(kept, |s| s.leading == leading);
    let flat = (time >= rule.judge_after_seconds)
        .then(|| within(slope_per_hour, spread, first_to_last(&fds), rule.fds_floor, rule.share));
    RoleTrend { minutes: time / 60.0, samples: in_role.len(), spread, slope_per_hour, flat }
}

/// Seconds between consecutive samples that both satisfy `keep`.
fn covered(samples: &[&Sample], keep: impl Fn(&Sample) -> bool) -> f64 {
    samples.windows(2).filter(|w| keep(w[0]) && keep(w[1])).map(|w| w[1].at - w[0].at).sum()
}

/// Whether the fitted line rises over `hours` by at most the larger of `floor` and `share` of
/// the median.
fn within(slope: Option<f64>, spread: Option<Spread>, hours: f64, floor: f64, share: f64) -> bool {
    match (slope, spread) {
        (Some(slope), Some(spread)) => slope * hours <= floor.max(share * spread.median),
        _ => false,
    }
}

fn first_to_last(points: &[(f64, f64)]) -> f64 {
    match (points.first(), points.last()) {
        (Some(first), Some(last)) => last.0 - first.0,
        _ => 0.0,
    }
}

fn hours(seconds: f64) -> f64 {
    seconds / 3600.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (seconds, RSS MiB, descriptors, leading)
    type Points = Vec<(f64, f64, u64, bool)>;

    fn lifetime(points: &[(f64, f64, u64, bool)]) -> Lifetime {
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
                .map(|&(at, mib, fds, leading)| Sample {
                    at,
                    rss_bytes: (mib * MIB) as u64,
                    open_fds: fds,
                    leading: Some(leading),
                })
                .collect(),
            log_file: Default::default(),
        }
    }

    /// A standby sampled every 10 s from 0 to `until` seconds, RSS rising by `mib_per_hour`.
    fn series(until: u32, mib_per_hour: f64, fds: u64) -> Points {
        (0..=until / 10)
            .map(|i| f64::from(i * 10))
            .map(|t| (t, 30.0 + mib_per_hour * t / 3600.0, fds, false))
            .collect()
    }

    /// From `at` seconds on, the replica leads with `extra` descriptors more, give or take 5
    /// (the pool of write connections following the write rate), plus `leak_per_hour`.
    fn takes_the_lease(points: &mut Points, at: f64, extra: u64, leak_per_hour: f64) {
        for (i, point) in points.iter_mut().enumerate().filter(|(_, p)| p.0 >= at) {
            let leaked = (leak_per_hour * (point.0 - at) / 3600.0) as u64;
            point.2 += extra + [0, 5, 2, 4, 1][i % 5] + leaked;
            point.3 = true;
        }
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
        assert!(trend.fds_standby.slope_per_hour.unwrap() > 10.0, "{trend:?}");
    }

    #[test]
    fn taking_the_lease_is_a_step_in_descriptors_not_a_leak() {
        let mut points = series(3600, 0.0, 20);
        takes_the_lease(&mut points, 1800.0, 8, 0.0);
        let trend = trend(&lifetime(&points), &Flatness::DEFAULT);
        assert_eq!(trend.flat, Some(true), "{trend:?}");
        assert_eq!((trend.fds_standby.flat, trend.fds_leading.flat), (Some(true), Some(true)));
        // Judged over both roles at once, the step would pass for a leak.
        let all: Vec<(f64, f64)> = points.iter().map(|p| (hours(p.0), p.2 as f64)).collect();
        assert!(slope(&all).unwrap() * first_to_last(&all) > Flatness::DEFAULT.fds_floor, "{all:?}");
    }

    #[test]
    fn a_leak_while_leading_is_not_flat() {
        let mut points = series(3600, 0.0, 20);
        takes_the_lease(&mut points, 1200.0, 8, 20.0);
        let trend = trend(&lifetime(&points), &Flatness::DEFAULT);
        assert_eq!(trend.fds_leading.flat, Some(false), "{trend:?}");
        assert_eq!(trend.flat, Some(false));
    }

    #[test]
    fn a_role_held_briefly_is_reported_not_judged() {
        let mut points = series(2100, 0.0, 20);
        takes_the_lease(&mut points, 420.0, 8, 0.0);
        let trend = trend(&lifetime(&points), &Flatness::DEFAULT);
        assert_eq!(trend.fds_standby.flat, None, "{trend:?}");
        assert_eq!(trend.fds_leading.flat, Some(true), "{trend:?}");
        assert_eq!(trend.flat, Some(true));
    }
}
