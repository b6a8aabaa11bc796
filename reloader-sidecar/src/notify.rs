//! Telling the application that its files changed: an HTTP request, a signal, or a touched file.
//! Failures are logged and counted; they never stop the sidecar.

use std::fs::OpenOptions;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use reqwest::{Method, StatusCode, Url};
use rustix::process::{Pid, Signal};
use thiserror::Error;
use tokio::sync::watch;

use super::args::{ExpectedStatus, SidecarArgs};
use super::backoff::ExponentialBackoff;
use super::metrics::{Metrics, NotifyKind};

const RETRY_INITIAL: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(10);

#[derive(Debug, Error)]
pub(crate) enum NotifyError {
    #[error("request failed: {0}")]
    Request(#[source] reqwest::Error),
    #[error("unexpected status {0}")]
    Status(StatusCode),
    #[error("cannot read PID file {path}: {source}")]
    PidFile {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("PID file {path} does not hold a positive process id")]
    BadPid { path: PathBuf },
    #[error("cannot signal process {pid}: {source}")]
    Signal {
        pid: i32,
        #[source]
        source: io::Error,
    },
    #[error("cannot touch {path}: {source}")]
    Touch {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// An HTTP call with retries.
#[derive(Debug, Clone)]
pub(crate) struct HttpTarget {
    client: reqwest::Client,
    method: Method,
    url: Url,
    expected: ExpectedStatus,
    retries: u32,
    retry_initial: Duration,
}

impl HttpTarget {
    pub(crate) fn new(
        method: Method,
        url: Url,
        expected: ExpectedStatus,
        retries: u32,
        timeout: Duration,
    ) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder().timeout(timeout).build()?;
        Ok(Self { client, method, url, expected, retries, retry_initial: RETRY_INITIAL })
    }

    #[cfg(test)]
    fn with_retry_initial(mut self, initial: Duration) -> Self {
        self.retry_initial = initial;
        self
    }

    /// The URL without credentials or query, which may carry a token.
    pub(crate) fn display_url(&self) -> String {
        let mut shown = self.url.clone();
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
        shown.set_query(None);
        shown.set_fragment(None);
        shown.to_string()
    }

    /// Calls until a response has an expected status or the retries are spent; the last error
    /// is returned.
    async fn call(&self) -> Result<u32, NotifyError> {
        let mut backoff = ExponentialBackoff::new(self.retry_initial, RETRY_MAX);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let error = match self.client.request(self.method.clone(), self.url.clone()).send().await {
                Ok(response) if self.expected.matches(response.status()) => return Ok(attempt),
                Ok(response) => NotifyError::Status(response.status()),
                Err(e) => NotifyError::Request(e.without_url()),
            };
            if attempt > self.retries {
                return Err(error);
            }
            tracing::debug!(url = %self.display_url(), attempt, error = %error, "notification failed; retrying");
            tokio::time::sleep(backoff.next().unwrap_or(RETRY_MAX)).await;
        }
    }
}

/// A signal to the process whose PID the file holds when the notification is sent.
#[derive(Debug, Clone)]
pub(crate) struct SignalTarget {
    pub(crate) pidfile: PathBuf,
    pub(crate) signal: Signal,
}

impl SignalTarget {
    fn send(&self) -> Result<i32, NotifyError> {
        let text = std::fs::read_to_string(&self.pidfile)
            .map_err(|source| NotifyError::PidFile { path: self.pidfile.clone(), source })?;
        let bad_pid = || NotifyError::BadPid { path: self.pidfile.clone() };
        let raw: i32 = text.trim().parse().map_err(|_| bad_pid())?;
        // 0 and negative values would signal a whole process group (and panic in `from_raw`).
        if raw <= 0 {
            return Err(bad_pid());
        }
        let pid = Pid::from_raw(raw).ok_or_else(bad_pid)?;
        rustix::process::kill_process(pid, self.signal)
            .map_err(|errno| NotifyError::Signal { pid: raw, source: errno.into() })?;
        Ok(raw)
    }
}

/// Creates the file, or updates its modification time; its content is left as is.
fn touch(path: &PathBuf) -> Result<(), NotifyError> {
    let to_error = |source| NotifyError::Touch { path: path.clone(), source };
    let file = OpenOptions::new().create(true).append(true).open(path).map_err(to_error)?;
    file.set_modified(SystemTime::now()).map_err(to_error)
}

/// Every configured way of notifying the application.
#[derive(Debug, Clone, Default)]
pub(crate) struct Notifier {
    pub(crate) http: Option<HttpTarget>,
    pub(crate) signal: Option<SignalTarget>,
    pub(crate) touch: Option<PathBuf>,
}

impl Notifier {
    pub(crate) fn from_args(args: &SidecarArgs) -> Result<Self, reqwest::Error> {
        let http = match &args.endpoint {
            Some(url) => Some(HttpTarget::new(
                args.endpoint_method.clone(),
                url.clone(),
                args.endpoint_expected_status.clone(),
                args.endpoint_retries,
                args.endpoint_timeout,
            )?),
            None => None,
        };
        let signal = args.pidfile.clone().map(|pidfile| SignalTarget { pidfile, signal: args.signal });
        Ok(Self { http, signal, touch: args.touch_file.clone() })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.http.is_none() && self.signal.is_none() && self.touch.is_none()
    }

    /// Runs every configured notification once; returns whether all succeeded.
    pub(crate) async fn notify(&self, metrics: &Metrics) -> bool {
        let mut all_ok = true;
        if let Some(path) = &self.touch {
            let result = touch(path);
            all_ok &= report(metrics, NotifyKind::Touch, &result, || format!("touched {}", path.display()));
        }
        if let Some(target) = &self.signal {
            let result = target.send();
            all_ok &= report(metrics, NotifyKind::Signal, &result, || {
                format!(
                    "sent {:?} to process {}",
                    target.signal,
                    result.as_ref().copied().unwrap_or_default()
                )
            });
        }
        if let Some(target) = &self.http {
            let result = target.call().await;
            all_ok &= report(metrics, NotifyKind::Http, &result, || {
                let attempts = result.as_ref().copied().unwrap_or_default();
                format!("{} {} (attempts: {attempts})", target.method, target.display_url())
            });
        }
        all_ok
    }
}

fn report<T>(
    metrics: &Metrics,
    kind: NotifyKind,
    result: &Result<T, NotifyError>,
    describe: impl FnOnce() -> String,
) -> bool {
    metrics.record_notification(kind, result.is_ok());
    match result {
        Ok(_) => {
            tracing::info!(kind = kind.as_str(), "notified the application: {}", describe());
            true
        }
        Err(e) => {
            tracing::warn!(kind = kind.as_str(), error = %e, "could not notify the application");
            false
        }
    }
}

/// Notifies once per generation the writer loop publishes. Changes that arrive while a
/// notification (with its retries) is running are folded into one more notification afterwards,
/// since the application reads the whole directory anyway.
pub(crate) async fn run(notifier: Notifier, metrics: Arc<Metrics>, mut generations: watch::Receiver<u64>) {
    while generations.changed().await.is_ok() {
        let generation = *generations.borrow_and_update();
        tracing::debug!(generation, "notifying the application");
        notifier.notify(&metrics).await;
    }
}

#[cfg(test)]
#[path = "notify_tests.rs"]
mod tests;
