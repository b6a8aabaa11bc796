//! Small helpers: annotation keys not in [`crate::fixtures`], unique values, waits on the
//! reloader log, Jobs a CronJob owns, namespace labels and RFC 3339 times.

use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use reloader_harness::{NotYet, wait_until};
use reloader_harness::{PlaneError, Reloader, reloader_binary};

/// docs/compatibility.md §3, spelled out here rather than borrowed from the code under test.
pub const ANNOTATION_PAUSE_PERIOD: &str = "deployment.reloader.stakater.com/pause-period";
pub const ANNOTATION_PAUSED_AT: &str = "deployment.reloader.stakater.com/paused-at";
pub const ANNOTATION_ROLLOUT_STRATEGY: &str = "reloader.stakater.com/rollout-strategy";

/// A value no other test or run can produce: `prefix` plus time, process id and a counter, in
/// lowercase hex (valid in label values and DNS names).
pub fn unique_token(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default();
    let counter = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}{:x}{:x}{counter:x}", nanos & 0xffff_ffff_ffff, std::process::id())
}

/// Waits until the reloader's log satisfies `done`; returns the log.
pub async fn wait_for_log(
    reloader: &Reloader,
    what: &str,
    timeout: Duration,
    done: impl Fn(&str) -> bool,
) -> Result<String, PlaneError> {
    wait_until(what, timeout, || {
        let log = reloader.log_text();
        let ready = done(&log);
        async move {
            if ready {
                Ok(log)
            } else {
                let last: Vec<&str> = log.lines().rev().take(5).collect();
                Err(NotYet::because(format!("last log lines (newest first): {last:?}")))
            }
        }
    })
    .await
}

/// The Jobs in `namespace` whose controller owner is the CronJob with `cronjob_uid`.
pub async fn jobs_owned_by(
    client: &Client,
    namespace: &str,
    cronjob_uid: &str,
) -> Result<Vec<Job>, PlaneError> {
    let jobs = Api::<Job>::namespaced(client.clone(), namespace).list(&ListParams::default()).await?;
    Ok(jobs
        .items
        .into_iter()
        .filter(|job| {
            job.metadata.owner_references.iter().flatten().any(|owner| {
                owner.kind == "CronJob" && owner.uid == cronjob_uid && owner.controller == Some(true)
            })
        })
        .collect())
}

/// Sets (`Some`) or removes (`None`) label `key` on namespace `name`.
pub async fn label_namespace(
    client: &Client,
    name: &str,
    key: &str,
    value: Option<&str>,
) -> Result<(), PlaneError> {
    let patch = json!({ "metadata": { "labels": { key: value } } });
    Api::<Namespace>::all(client.clone()).patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

/// How a reloader process that was expected to stop on its own ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exited {
    /// `None` when a signal ended it.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Exited {
    /// The non-empty lines of stdout and stderr together.
    pub fn lines(&self) -> Vec<&str> {
        self.stdout.lines().chain(self.stderr.lines()).filter(|line| !line.trim().is_empty()).collect()
    }
}

/// Runs the real binary with `args` and `envs` (and `KUBECONFIG=kubeconfig`) until it exits.
///
/// # Panics
///
/// When it cannot start, or is still running after `timeout` (it is killed then).
pub async fn run_reloader_to_exit(
    kubeconfig: &Path,
    args: &[&str],
    envs: &[(&str, &str)],
    timeout: Duration,
) -> Exited {
    let child = tokio::process::Command::new(reloader_binary())
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("starting the reloader binary (cargo build -p reloader-cli)");
    let output = tokio::time::timeout(timeout, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("reloader {args:?} still runs after {timeout:?}; it was expected to exit"))
        .expect("waiting for the reloader binary");
    Exited {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Seconds since the epoch of an RFC 3339 time such as `paused-at`; `None` if it does not parse.
pub fn rfc3339_seconds(text: &str) -> Option<i64> {
    text.trim().parse::<Timestamp>().ok().map(|at| at.as_second())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_tokens_differ_and_fit_a_label() {
        let (a, b) = (unique_token("x-"), unique_token("x-"));
        assert_ne!(a, b);
        assert!(a.len() <= 63 && a.starts_with("x-"), "{a}");
        assert!(a.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'), "{a}");
    }

    #[test]
    fn rfc3339_times_parse_to_seconds() {
        assert_eq!(rfc3339_seconds("1970-01-01T00:01:40Z"), Some(100));
        assert_eq!(rfc3339_seconds("2024-08-07T03:06:40+00:00"), Some(1_723_000_000));
        assert_eq!(rfc3339_seconds("yesterday"), None);
    }
}
