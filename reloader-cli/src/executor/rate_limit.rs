//! The global write rate limit (`--max-writes-per-second`): protects the API server on large
//! fan-outs, where one changed Secret can roll hundreds of workloads.

use std::time::Duration;

use tokio::time::Instant;

/// A token bucket: `rate` writes per second, bursts up to one second's worth.
pub(super) struct RateLimiter {
    rate: f64,
    state: tokio::sync::Mutex<(f64, Instant)>,
}

impl RateLimiter {
    pub(super) fn new(rate: f64) -> Self {
        let rate = if rate.is_finite() && rate > 0.0 { rate } else { f64::INFINITY };
        RateLimiter { rate, state: tokio::sync::Mutex::new((rate.min(1e9), Instant::now())) }
    }

    /// Waits for a token; returns how long it waited.
    pub(super) async fn acquire(&self) -> Duration {
        let started = Instant::now();
        if self.rate.is_infinite() {
            return Duration::ZERO;
        }
        let mut state = self.state.lock().await;
        let (tokens, last) = &mut *state;
        let now = Instant::now();
        *tokens = (*tokens + now.duration_since(*last).as_secs_f64() * self.rate).min(self.rate.max(1.0));
        *last = now;
        if *tokens < 1.0 {
            let wait = Duration::from_secs_f64((1.0 - *tokens) / self.rate);
            tokio::time::sleep(wait).await;
            *tokens = 1.0;
            *last = Instant::now();
        }
        *tokens -= 1.0;
        started.elapsed()
    }
}
