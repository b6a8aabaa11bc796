//! H1: L1 with three `--enable-ha` replicas of one controller, the leader SIGKILLed half-way,
//! repeated. Each update goes to a Deployment of its own, so a lost update is a Deployment that
//! never changed and a doubled one is a Deployment written twice. Stakater's replicas each run in a
//! network namespace of their own (they all bind `:9090`; see netns.rs) and use its fixed lease
//! timings, which equal our flags' defaults (docs/benchmark.md).

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams};
use serde::Serialize;

use super::latency::L1_INTERVAL;
use super::pairs::{Annotated, create_pairs, paced_updates, resolve};
use crate::identity::NAMESPACE;
use crate::observer::WorkloadObserver;
use crate::stats::Spread;
use crate::subject::{Launch, Subject};
use crate::{BenchError, Plan};
use reloader_harness::ControlPlane;

/// `--leader-election-id`'s default (Stakater's fixed lock name).
const LEASE: &str = "stakater-reloader-lock";
const REPLICAS: usize = 3;
const START_TIMEOUT: Duration = Duration::from_secs(300);
/// Beyond the lease duration, for the new leader to catch up on what it missed.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(60);

/// One fail-over.
#[derive(Debug, Clone, Serialize)]
pub struct FailoverRun {
    pub updates: usize,
    /// Deployments whose update was never applied.
    pub lost: usize,
    /// Deployments written more than once for their one update.
    pub doubled: usize,
    /// From the SIGKILL to the first change made for an update issued after it (hence by the new
    /// leader); `None` when there was none.
    pub takeover_seconds: Option<f64>,
    pub killed: String,
}

/// `repeat` fail-overs of one controller.
#[derive(Debug, Clone, Serialize)]
pub struct FailoverOutcome {
    pub runs: Vec<FailoverRun>,
    /// Lost and doubled updates, summed over the runs.
    pub lost: usize,
    pub doubled: usize,
    /// Take-over times of the runs that had one.
    pub takeover: Option<Spread>,
}

impl FailoverOutcome {
    fn of(runs: Vec<FailoverRun>) -> Self {
        let takeovers: Vec<f64> = runs.iter().filter_map(|run| run.takeover_seconds).collect();
        Self {
            lost: runs.iter().map(|run| run.lost).sum(),
            doubled: runs.iter().map(|run| run.doubled).sum(),
            takeover: Spread::of(&takeovers),
            runs,
        }
    }
}

pub async fn run(
    plane: &ControlPlane,
    subject: &Subject,
    log_dir: &Path,
    plan: &Plan,
    repeat: usize,
) -> Result<FailoverOutcome, BenchError> {
    let client = plane.client();
    let namespace = format!("h1-{}", subject.label());
    let pairs = create_pairs(&client, &namespace, plan.h1_updates, false, Annotated::Auto).await?;
    let observer = WorkloadObserver::start(client.clone(), &pairs.namespace).await?;
    let mut runs = Vec::with_capacity(repeat);
    for repetition in 0..repeat {
        runs.push(fail_over(plane, subject, log_dir, plan, &pairs, &observer, repetition).await?);
    }
    Ok(FailoverOutcome::of(runs))
}

async fn fail_over(
    plane: &ControlPlane,
    subject: &Subject,
    log_dir: &Path,
    plan: &Plan,
    pairs: &super::pairs::Pairs,
    observer: &WorkloadObserver,
    repetition: usize,
) -> Result<FailoverRun, BenchError> {
    let client = plane.client();
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    match leases.delete(LEASE, &DeleteParams::default()).await {
        Ok(_) | Err(kube::Error::Api(_)) => {}
        Err(error) => return Err(error.into()),
    }

    let name = |i: usize| format!("h1-{repetition}-{i}");
    let mut replicas = Vec::with_capacity(REPLICAS);
    for i in 0..REPLICAS {
        let launch =
            Launch::named(name(i)).arg("--enable-ha").ours_only_args(plan.lease.args()).own_network();
        replicas.push(subject.start(plane, log_dir, &launch).await?);
    }
    for replica in &mut replicas {
        replica.wait_ready(START_TIMEOUT).await?;
    }
    let leader = wait_for_leader(&leases, START_TIMEOUT).await?;
    let index = (0..REPLICAS)
        .find(|&i| leader == name(i))
        .ok_or_else(|| BenchError::measure(format!("the Lease names {leader:?}, none of the replicas")))?;
    tokio::time::sleep(plan.quiet).await;

    let tag = format!("h1-{repetition}");
    let half = plan.h1_updates / 2;
    let mut updates = paced_updates(&client, pairs, observer, 0..half, L1_INTERVAL, &tag).await?;
    replicas[index].kill();
    let killed_at = Instant::now();
    updates.extend(paced_updates(&client, pairs, observer, half..plan.h1_updates, L1_INTERVAL, &tag).await?);
    let changes = resolve(observer, &updates, plan.lease.duration + CATCH_UP_TIMEOUT).await;
    tokio::time::sleep(plan.quiet).await;

    let lost = changes.iter().filter(|change| change.is_none()).count();
    let doubled = updates
        .iter()
        .filter(|update| observer.generation(&update.workload) - update.generation_before > 1)
        .count();
    let takeover_seconds = changes[half..]
        .iter()
        .flatten()
        .min()
        .map(|first| first.saturating_duration_since(killed_at).as_secs_f64());
    Ok(FailoverRun { updates: updates.len(), lost, doubled, takeover_seconds, killed: leader })
}

async fn wait_for_leader(leases: &Api<Lease>, timeout: Duration) -> Result<String, BenchError> {
    let deadline = Instant::now() + timeout;
    loop {
        let holder = leases.get_opt(LEASE).await?.and_then(|l| l.spec?.holder_identity).unwrap_or_default();
        if !holder.is_empty() {
            return Ok(holder);
        }
        if Instant::now() >= deadline {
            return Err(BenchError::measure("no replica took the Lease"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
