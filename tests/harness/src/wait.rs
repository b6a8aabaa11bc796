//! Polling until something is true, with the last reason it was not when time runs out.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::PlaneError;

/// Why a condition does not hold yet. Any error converts into it with `?`, so transient failures
/// (a connection refused while a component starts) simply mean "try again".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotYet(pub String);

impl NotYet {
    pub fn because(reason: impl Into<String>) -> Self {
        Self(reason.into())
    }
}

impl<E: std::error::Error> From<E> for NotYet {
    fn from(error: E) -> Self {
        Self(error.to_string())
    }
}

/// Calls `probe` until it returns `Ok`, for at most `timeout`; the error names `what` and the
/// last reason the probe gave.
pub async fn wait_until<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> Result<T, PlaneError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, NotYet>>,
{
    let start = Instant::now();
    let mut pause = Duration::from_millis(50);
    loop {
        let last = match probe().await {
            Ok(value) => return Ok(value),
            Err(NotYet(reason)) => reason,
        };
        if start.elapsed() >= timeout {
            return Err(PlaneError::Timeout { what: what.to_owned(), after: timeout, last });
        }
        tokio::time::sleep(pause.min(timeout.saturating_sub(start.elapsed()))).await;
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn returns_the_first_success() {
        let mut calls = 0;
        let value = wait_until("the third call", Duration::from_secs(5), || {
            calls += 1;
            let now = calls;
            async move { if now >= 3 { Ok(now) } else { Err(NotYet::because(format!("call {now}"))) } }
        })
        .await
        .unwrap();
        assert_eq!(value, 3);
    }

    #[tokio::test]
    async fn a_timeout_reports_the_last_reason() {
        let error = wait_until("never", Duration::from_millis(200), || async {
            Err::<(), _>(NotYet::because("still false"))
        })
        .await
        .unwrap_err();
        let message = error.to_string();
        assert!(message.contains("never") && message.contains("still false"), "{message}");
    }

    #[test]
    fn errors_convert_into_not_yet() {
        let io = std::io::Error::other("refused");
        assert_eq!(NotYet::from(io), NotYet::because("refused"));
    }
}
