//! Lease-based leadership (`--enable-ha`). Every replica watches and keeps its index warm; only
//! the one holding the Lease writes. kube-leader-election's acquisition patches the Lease with no
//! resourceVersion precondition, so two racers for an expired lease can both "win"; this module
//! keeps its vocabulary (`LeaseLockParams`, `LeaseLockResult`) but makes every write to the Lease
//! a compare-and-swap on resourceVersion, so at most one replica ever believes it leads.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use kube_leader_election::{LeaseLockParams, LeaseLockResult};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::metrics::Metrics;

/// Leader-election settings (compat.md §1, Stakater's v2 flags).
#[derive(Debug, Clone)]
pub struct ElectionConfig {
    pub lease_name: String,
    pub namespace: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
    pub release_on_cancel: bool,
}

/// Whether this replica may write, as a watch channel.
pub struct Leadership {
    identity: String,
    rx: watch::Receiver<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Leadership {
    /// Without HA the single replica always leads.
    pub fn always(identity: String) -> Self {
        let (tx, rx) = watch::channel(true);
        // Keep the sender alive for the life of the process.
        std::mem::forget(tx);
        Leadership { identity, rx, task: None }
    }

    /// Campaigns for the Lease until `shutdown`, with its own client so that a busy controller
    /// cannot starve renewals.
    pub fn elect(
        client: Client,
        config: ElectionConfig,
        metrics: std::sync::Arc<Metrics>,
        shutdown: CancellationToken,
    ) -> Self {
        let (tx, rx) = watch::channel(false);
        let identity = config.identity.clone();
        let task = tokio::spawn(campaign(client, config, metrics, tx, shutdown));
        Leadership { identity, rx, task: Some(task) }
    }

    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.rx.clone()
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Waits for the campaign to end (it releases the Lease on shutdown when configured).
    pub async fn finished(self) {
        if let Some(task) = self.task {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
    }
}

async fn campaign(
    client: Client,
    config: ElectionConfig,
    metrics: std::sync::Arc<Metrics>,
    tx: watch::Sender<bool>,
    shutdown: CancellationToken,
) {
    let lock = CasLeaseLock::new(
        client,
        &config.namespace,
        LeaseLockParams {
            lease_name: config.lease_name.clone(),
            holder_id: config.identity.clone(),
            lease_ttl: config.lease_duration,
        },
    );
    let mut last_renewal: Option<Instant> = None;
    metrics.set_leader(false);
    loop {
        let leading = *tx.borrow();
        match tokio::time::timeout(config.renew_deadline, lock.try_acquire_or_renew()).await {
            Ok(Ok(LeaseLockResult::Acquired(_))) => {
                last_renewal = Some(Instant::now());
                if !leading {
                    info!(identity = %config.identity, lease = %config.lease_name, "became leader");
                    metrics.set_leader(true);
                    metrics.leader_transition();
                    let _ = tx.send(true);
                }
            }
            Ok(Ok(LeaseLockResult::NotAcquired(lease))) => {
                let holder = lease.spec.and_then(|s| s.holder_identity).unwrap_or_default();
                debug!(holder = %holder, "lease held by another replica");
                if leading {
                    demote(&tx, &metrics, &config, "the lease is held by another replica");
                }
            }
            Ok(Err(e)) => warn!(error = %e, "leader election round failed"),
            Err(_) => warn!("leader election round timed out"),
        }
        // Stop writing before the lease can expire for the others.
        if *tx.borrow() && last_renewal.is_none_or(|t| t.elapsed() >= config.renew_deadline) {
            demote(&tx, &metrics, &config, "could not renew the lease within the renew deadline");
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(config.retry_period) => {}
        }
    }
    if *tx.borrow() {
        let _ = tx.send(false);
        metrics.set_leader(false);
        if config.release_on_cancel {
            match lock.release().await {
                Ok(()) => info!("released the lease"),
                Err(e) => warn!(error = %e, "could not release the lease"),
            }
        }
    }
}

fn demote(tx: &watch::Sender<bool>, metrics: &Metrics, config: &ElectionConfig, why: &str) {
    warn!(identity = %config.identity, reason = why, "lost leadership; back to standby");
    metrics.set_leader(false);
    metrics.leader_transition();
    let _ = tx.send(false);
}

/// A Lease lock whose every write carries the resourceVersion it was decided on.
pub struct CasLeaseLock {
    api: Api<Lease>,
    params: LeaseLockParams,
}

impl CasLeaseLock {
    pub fn new(client: Client, namespace: &str, params: LeaseLockParams) -> Self {
        CasLeaseLock { api: Api::namespaced(client, namespace), params }
    }

    /// One election round: renew if we hold it, take it if it expired or was released, create it
    /// if missing. A lost race (409) is `NotAcquired`, never an error and never a double leader.
    pub async fn try_acquire_or_renew(&self) -> Result<LeaseLockResult, kube::Error> {
        let now = chrono::Utc::now();
        let Some(current) = self.api.get_opt(&self.params.lease_name).await? else {
            let lease = Lease {
                metadata: ObjectMeta { name: Some(self.params.lease_name.clone()), ..Default::default() },
                spec: Some(self.spec(now, now, 0)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(l) => Ok(LeaseLockResult::Acquired(l)),
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    Ok(LeaseLockResult::NotAcquired(self.api.get(&self.params.lease_name).await?))
                }
                Err(e) => Err(e),
            };
        };
        let spec = current.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let ours = holder == self.params.holder_id;
        if !ours && !holder.is_empty() && !expired(&spec, now) {
            return Ok(LeaseLockResult::NotAcquired(current));
        }
        let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!ours);
        let acquired = if ours { spec.acquire_time.map(|t| t.0) } else { None };
        let acquired = acquired.map(to_chrono).unwrap_or(now);
        let mut next = current.clone();
        next.spec = Some(self.spec(now, acquired, transitions));
        // `replace` sends metadata.resourceVersion: the API server refuses it with 409 if anyone
        // wrote the Lease since we read it.
        match self.api.replace(&self.params.lease_name, &PostParams::default(), &next).await {
            Ok(l) => Ok(LeaseLockResult::Acquired(l)),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(LeaseLockResult::NotAcquired(current)),
            Err(e) => Err(e),
        }
    }

    /// Gives the Lease up (holder cleared) so a standby can take it at once.
    pub async fn release(&self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.params.lease_name).await? else { return Ok(()) };
        let spec = lease.spec.get_or_insert_with(Default::default);
        if spec.holder_identity.as_deref() != Some(self.params.holder_id.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(micro_time(chrono::Utc::now()));
        self.api.replace(&self.params.lease_name, &PostParams::default(), &lease).await.map(|_| ())
    }

    fn spec(
        &self,
        now: chrono::DateTime<chrono::Utc>,
        acquired: chrono::DateTime<chrono::Utc>,
        transitions: i32,
    ) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.params.holder_id.clone()),
            lease_duration_seconds: Some(self.params.lease_ttl.as_secs().max(1) as i32),
            acquire_time: Some(micro_time(acquired)),
            renew_time: Some(micro_time(now)),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }
}

fn expired(spec: &LeaseSpec, now: chrono::DateTime<chrono::Utc>) -> bool {
    let Some(renewed) = spec.renew_time.as_ref().map(|t| to_chrono(t.0)) else { return true };
    let ttl = chrono::Duration::seconds(i64::from(spec.lease_duration_seconds.unwrap_or(0)));
    renewed + ttl < now
}

fn micro_time(t: chrono::DateTime<chrono::Utc>) -> MicroTime {
    MicroTime(
        k8s_openapi::jiff::Timestamp::from_microsecond(t.timestamp_micros())
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    )
}

fn to_chrono(t: k8s_openapi::jiff::Timestamp) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp_micros(t.as_microsecond()).unwrap_or_default()
}
