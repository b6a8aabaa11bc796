//! Exponential backoff with jitter, for watch restarts and notification retries.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher as _, Hasher as _};
use std::time::Duration;

/// Doubles from `initial` up to `max`; each delay is drawn from [75 %, 100 %] of the step so that
/// many sidecars restarted together by one API outage do not retry in lockstep.
#[derive(Debug, Clone)]
pub(crate) struct ExponentialBackoff {
    initial: Duration,
    max: Duration,
    next: Duration,
}

impl ExponentialBackoff {
    pub(crate) fn new(initial: Duration, max: Duration) -> Self {
        Self { initial, max, next: initial }
    }
}

impl Iterator for ExponentialBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let step = self.next;
        self.next = (step * 2).min(self.max);
        Some(step.mul_f64(0.75 + 0.25 * unit_random()))
    }
}

impl kube::runtime::utils::Backoff for ExponentialBackoff {
    fn reset(&mut self) {
        self.next = self.initial;
    }
}

/// A number in [0, 1) that differs between calls; good enough for jitter, not for anything else.
fn unit_random() -> f64 {
    let bits = RandomState::new().build_hasher().finish();
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use kube::runtime::utils::Backoff as _;

    use super::*;

    #[test]
    fn doubles_up_to_the_cap_with_bounded_jitter_and_resets() {
        let mut backoff = ExponentialBackoff::new(Duration::from_millis(100), Duration::from_millis(1000));
        let steps = [100u64, 200, 400, 800, 1000, 1000];
        for step in steps {
            let got = backoff.next().unwrap();
            let step = Duration::from_millis(step);
            assert!(got <= step && got >= step.mul_f64(0.75), "{got:?} for step {step:?}");
        }
        backoff.reset();
        assert!(backoff.next().unwrap() <= Duration::from_millis(100));
    }
}
