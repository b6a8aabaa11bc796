//! Putting a running release through its paces and reading what happened: ready, two reloads
//! for two ConfigMap changes and one for a Secret change on every probe workload, the `Reloaded`
//! Events (the second ConfigMap one is a PATCH of the first), the meta-info ConfigMap, and no
//! `forbidden` anywhere in the log. The first sign of a missing permission ends the run early,
//! with that sign as the evidence.

use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::Api;

use super::probe::Probe;
use reloader_harness::Reloader;

/// The meta-info ConfigMap the controller publishes in its own namespace.
pub const META_INFO: &str = "reloader-meta-info";

/// How long each step may take.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub ready: Duration,
    pub reload: Duration,
}

impl Limits {
    /// For runs expected to succeed (a busy machine gets the benefit of the doubt).
    pub const PATIENT: Limits = Limits { ready: Duration::from_secs(60), reload: Duration::from_secs(60) };
    /// For runs that may be missing a permission, where a healthy run takes a few seconds.
    pub const TRIAL: Limits = Limits { ready: Duration::from_secs(20), reload: Duration::from_secs(30) };
}

/// What a run is expected to see of Secrets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Secrets {
    Watched,
    /// `ignoreSecrets`: a Secret change must reload nothing.
    Ignored,
}

/// What happened in a run that did everything it should.
#[derive(Debug, Clone, Copy)]
pub struct Completed {
    /// From the ConfigMap change to the last probe workload reloaded.
    pub reload_latency: Duration,
}

/// Why a run fell short: the first sign seen (a log line, an Event, a missing reload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shortfall(pub String);

/// Runs the sequence on `pods` (the replicas of one release, already started) with the probe
/// workloads of `watched` (which they must reload) and `unwatched` (which they must not touch).
pub async fn exercise(
    client: &Client,
    release_namespace: &str,
    pods: &mut [Reloader],
    watched: &mut [Probe],
    unwatched: &mut [Probe],
    secrets: Secrets,
    limits: Limits,
) -> Result<Completed, Shortfall> {
    let pods = &*pods;
    let started = Instant::now();
    until(pods, watched, "every replica to be ready", limits.ready, || async {
        for pod in pods {
            if !matches!(pod.get("/readyz").await, Ok((200, _))) {
                return false;
            }
        }
        true
    })
    .await?;
    tracing::info!(after = ?started.elapsed(), "release ready");

    for probe in watched.iter_mut().chain(unwatched.iter_mut()) {
        probe.mark().await.expect("reading the probe workloads");
    }
    let changed_at = Instant::now();
    for probe in watched.iter().chain(unwatched.iter()) {
        probe.change_config_map("1").await.expect("changing the probe ConfigMap");
    }
    until(
        pods,
        watched,
        "a reload of every watched workload after the ConfigMap change",
        limits.reload,
        || all_changed(watched),
    )
    .await?;
    let reload_latency = changed_at.elapsed();

    // The same change again: its Event is a repeat, counted on the first one (a patch).
    for probe in watched.iter_mut() {
        probe.mark().await.expect("reading the probe workloads");
    }
    for probe in watched.iter() {
        probe.change_config_map("2").await.expect("changing the probe ConfigMap");
    }
    until(
        pods,
        watched,
        "a reload of every watched workload after the second ConfigMap change",
        limits.reload,
        || all_changed(watched),
    )
    .await?;

    for probe in watched.iter_mut() {
        probe.mark().await.expect("reading the probe workloads");
    }
    for probe in watched.iter() {
        probe.change_secret("1").await.expect("changing the probe Secret");
    }
    match secrets {
        Secrets::Watched => {
            until(
                pods,
                watched,
                "a reload of every watched workload after the Secret change",
                limits.reload,
                || all_changed(watched),
            )
            .await?;
        }
        Secrets::Ignored => {
            // Nothing to wait for: wait long enough for a reload to have shown, then look.
            tokio::time::sleep(negative_wait(reload_latency)).await;
            for probe in watched.iter() {
                let changed = probe.changed().await.expect("reading the probe workloads");
                if !changed.is_empty() {
                    return Err(Shortfall(format!(
                        "a Secret change reloaded {changed:?} in {}",
                        probe.namespace()
                    )));
                }
            }
        }
    }

    let reloads = if secrets == Secrets::Watched { 3 } else { 2 };
    until(pods, watched, &format!("{reloads} Reloaded Events per workload"), limits.reload, || {
        reloaded_events_counted(watched, reloads)
    })
    .await?;

    let meta_info: Api<ConfigMap> = Api::namespaced(client.clone(), release_namespace);
    until(pods, watched, "the meta-info ConfigMap", limits.reload, || async {
        meta_info.get_opt(META_INFO).await.ok().flatten().is_some()
    })
    .await?;

    // Whatever the unwatched ones would have done, they had at least this long (the ConfigMap
    // changes were made at the same moment as the watched ones').
    let quiet_until = changed_at + negative_wait(reload_latency);
    tokio::time::sleep_until(quiet_until.into()).await;
    for probe in unwatched.iter() {
        let changed = probe.changed().await.expect("reading the probe workloads");
        if !changed.is_empty() {
            return Err(Shortfall(format!(
                "{changed:?} in unwatched namespace {} were reloaded",
                probe.namespace()
            )));
        }
    }
    if let Some(sign) = trouble(pods, watched).await {
        return Err(sign);
    }
    Ok(Completed { reload_latency })
}

/// At least 5 times the measured latency, and never less than 3 s.
pub fn negative_wait(latency: Duration) -> Duration {
    (latency * 5).max(Duration::from_secs(3))
}

/// The first line of `log` that reports an authorization failure: the API server's message
/// (`<resource> is forbidden: User ... cannot <verb> ...`) or its status code.
pub fn forbidden_line(log: &str) -> Option<&str> {
    log.lines().find(|line| line.contains(" is forbidden") || line.contains("code: 403"))
}

/// Polls `done` until it holds; stops early at the first sign of trouble.
async fn until<F, Fut>(
    pods: &[Reloader],
    probes: &[Probe],
    what: &str,
    within: Duration,
    mut done: F,
) -> Result<(), Shortfall>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if let Some(sign) = trouble(pods, probes).await {
            return Err(sign);
        }
        if done().await {
            return Ok(());
        }
        if start.elapsed() > within {
            return Err(Shortfall(format!("no {what} within {within:?}")));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A forbidden line in a log, an exited replica, or a `ReloadFail` Event.
async fn trouble(pods: &[Reloader], probes: &[Probe]) -> Option<Shortfall> {
    for pod in pods {
        let log = pod.log_text();
        if let Some(line) = forbidden_line(&log) {
            return Some(Shortfall(format!("logged: {}", line.trim())));
        }
        if !pid_alive(pod.pid()) {
            return Some(Shortfall(format!("exited; log:\n{log}")));
        }
    }
    for probe in probes {
        let failures = probe.reload_failures().await.expect("listing Events");
        if let Some(failure) = failures.first() {
            return Some(Shortfall(format!("ReloadFail Event: {failure}")));
        }
    }
    None
}

/// Whether the process is still running (`/proc/<pid>` exists and is not a zombie).
fn pid_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
}

async fn all_changed(probes: &[Probe]) -> bool {
    for probe in probes {
        let changed = probe.changed().await.expect("reading the probe workloads");
        if changed != probe.kinds() {
            return false;
        }
    }
    true
}

/// Every workload has `Reloaded` Events that count `reloads` occurrences in all (one Event per
/// resource and message; a repeat patches that Event's count, read here through events.k8s.io
/// as `deprecatedCount`).
async fn reloaded_events_counted(probes: &[Probe], reloads: i32) -> bool {
    for probe in probes {
        for kind in probe.kinds() {
            let events = probe.events(kind, "Reloaded").await.expect("listing Events");
            let count: i32 = events
                .iter()
                .map(|event| {
                    event.series.as_ref().map(|series| series.count).or(event.deprecated_count).unwrap_or(1)
                })
                .sum();
            if count < reloads {
                return false;
            }
        }
    }
    true
}
