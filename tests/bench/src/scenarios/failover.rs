//! H1: L1 with three `--enable-ha` replicas of ours, the leader SIGKILLed half-way. Each update
//! goes to a Deployment of its own, so a lost update is a Deployment that never changed and a
//! doubled one is a Deployment written twice.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams};
use serde::Serialize;

use super::latency::L1_INTERVAL;
use super::pairs::{Annotated, create_pairs, paced_updates, resolve};
use crate::identity::NAMESPACE;
use crate::observer::WorkloadObserver;
use crate::subject::{Launch, Subject};
use crate::{BenchError, Plan};
use reloader_harness::ControlPlane;

/// `--leader-election-id`'s default.
const LEASE: &str = "stakater-reloader-lock";
const REPLICAS: usize = 3;
const START_TIMEOUT: Duration = Duration::from_secs(300);
/// Beyond the lease duration, for the new leader to catch up on what it missed.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Serialize)]
pub struct FailoverOutcome {
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

pub async fn run(
    plane: &ControlPlane,
    subject: &Subject,
    log_dir: &Path,
    plan: &Plan,
) -> Result<FailoverOutcome, BenchError> {
    let client = plane.client();
    let pairs = create_pairs(&client, "bench-h1", plan.h1_updates, false, Annotated::Auto).await?;
    let observer = WorkloadObserver::start(client.clone(), &pairs.namespace).await?;
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    match leases.delete(LEASE, &DeleteParams::default()).await {
        Ok(_) | Err(kube::Error::Api(_)) => {}
        Err(error) => return Err(error.into()),
    }

    let mut replicas = Vec::with_capacity(REPLICAS);
    for i in 0..REPLICAS {
        let launch = Launch::named(format!("h1-{i}")).arg("--enable-ha").args(plan.lease.args());
        replicas.push(subject.start(plane, log_dir, &launch).await?);
    }
    for replica in &mut replicas {
        replica.wait_ready(START_TIMEOUT).await?;
    }
    let leader = wait_for_leader(&leases, START_TIMEOUT).await?;
    let index = (0..REPLICAS)
        .find(|i| leader == format!("h1-{i}"))
        .ok_or_else(|| BenchError::measure(format!("the Lease names {leader:?}, none of the replicas")))?;
    tokio::time::sleep(plan.quiet).await;

    let half = plan.h1_updates / 2;
    let mut updates = paced_updates(&client, &pairs, &observer, 0..half, L1_INTERVAL, "h1").await?;
    replicas[index].kill();
    let killed_at = Instant::now();
    updates
        .extend(paced_updates(&client, &pairs, &observer, half..plan.h1_updates, L1_INTERVAL, "h1").await?);
    let changes = resolve(&observer, &updates, plan.lease.duration + CATCH_UP_TIMEOUT).await;
    tokio::time::sleep(plan.quiet).await;

    let lost = changes.iter().filter(|change| change.is_none()).count();
    let doubled = updates
        .iter()
        .filter(|update| observer.generation(&update.workload) - update.generation_before > 1)
        .count();
    let takeover_seconds = updates[half..]
        .iter()
        .zip(&changes[half..])
        .filter_map(|(_, change)| *change)
        .min()
        .map(|first| first.saturating_duration_since(killed_at).as_secs_f64());
    Ok(FailoverOutcome { updates: updates.len(), lost, doubled, takeover_seconds, killed: leader })
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
