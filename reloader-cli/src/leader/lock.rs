//! The Lease lock. kube-leader-election's `LeaseLock` takes an expired Lease with a merge patch
//! that carries no resourceVersion, so two candidates that read the same expired Lease can both
//! get HTTP 200 and both believe they lead. [`CasLeaseLock`] keeps that crate's vocabulary
//! (`LeaseLockParams`, `LeaseLockResult`) but makes every write a compare-and-swap: a `create`
//! (409 if anyone created it first) or a `replace` carrying the resourceVersion the decision was
//! made on (409 if anyone wrote since). Losing a race is `NotAcquired`, never an error.
//! Whether another holder's Lease has expired is judged by this replica's own clock, from when it
//! first saw the record unchanged ([`LeaseObserver`]), never from the holder's `renewTime`.

use std::future::Future;
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use kube_leader_election::{LeaseLockParams, LeaseLockResult};
use tokio::time::Instant;
use tracing::{debug, info};

use super::observed::{LeaseObserver, LeaseRecord, Verdict};

/// What the campaign needs from a lock; the Lease-backed one is [`CasLeaseLock`].
pub trait ElectionLock: Send + Sync + 'static {
    /// One election round: renew if held, take it if expired or released, create it if missing.
    fn try_acquire_or_renew(&self) -> impl Future<Output = Result<LeaseLockResult, kube::Error>> + Send;

    /// Gives the lock up, if this candidate holds it, so a standby can take it at once.
    fn release(&self) -> impl Future<Output = Result<(), kube::Error>> + Send;
}

/// A Lease lock whose every write carries the resourceVersion it was decided on.
pub struct CasLeaseLock {
    api: Api<Lease>,
    params: LeaseLockParams,
    observer: Mutex<LeaseObserver>,
}

impl CasLeaseLock {
    pub fn new(client: Client, namespace: &str, params: LeaseLockParams) -> Self {
        let observer = Mutex::new(LeaseObserver::new(params.holder_id.clone(), params.lease_ttl));
        CasLeaseLock { api: Api::namespaced(client, namespace), params, observer }
    }

    /// Notes `lease` as seen now, by this replica's monotonic clock.
    fn observe(&self, lease: &Lease) -> Verdict {
        let mut observer = self.observer.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        observer.observe(LeaseRecord::of(lease), Instant::now())
    }

    async fn round(&self) -> Result<LeaseLockResult, kube::Error> {
        // Taken before reading: the renewTime written is never later than the moment the
        // decision was made, so the Lease never claims more time than this round can vouch for.
        let now = Utc::now();
        let Some(current) = self.api.get_opt(&self.params.lease_name).await? else {
            let lease = Lease {
                metadata: ObjectMeta { name: Some(self.params.lease_name.clone()), ..Default::default() },
                spec: Some(self.spec(now, now, 0)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(&created);
                    Ok(LeaseLockResult::Acquired(created))
                }
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    let current = self.api.get(&self.params.lease_name).await?;
                    self.observe(&current);
                    Ok(LeaseLockResult::NotAcquired(current))
                }
                Err(e) => Err(e),
            };
        };
        let ours = match self.observe(&current) {
            Verdict::Held { holder, until } => {
                let wait = until.saturating_duration_since(Instant::now());
                debug!(%holder, can_take_in = ?wait, "the lease is held by another replica");
                return Ok(LeaseLockResult::NotAcquired(current));
            }
            Verdict::Expired { holder, unchanged_for } => {
                info!(%holder, ?unchanged_for, "taking over the lease: its holder did not renew it for a whole lease duration of this replica's clock");
                false
            }
            Verdict::Free => false,
            Verdict::Ours => true,
        };
        let spec = current.spec.clone().unwrap_or_default();
        let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!ours);
        let acquired = spec.acquire_time.as_ref().filter(|_| ours).map(|t| to_chrono(t.0)).unwrap_or(now);
        let mut next = current.clone();
        next.spec = Some(self.spec(now, acquired, transitions));
        // `replace` sends metadata.resourceVersion as read: the API server answers 409 if anyone
        // wrote the Lease since, so of several candidates that read one expired Lease, one wins.
        match self.api.replace(&self.params.lease_name, &PostParams::default(), &next).await {
            Ok(written) => {
                self.observe(&written);
                Ok(LeaseLockResult::Acquired(written))
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(LeaseLockResult::NotAcquired(current)),
            Err(e) => Err(e),
        }
    }

    async fn give_up(&self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.params.lease_name).await? else { return Ok(()) };
        let spec = lease.spec.get_or_insert_with(Default::default);
        if spec.holder_identity.as_deref() != Some(self.params.holder_id.as_str()) {
            return Ok(());
        }
        let now = micro_time(Utc::now());
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(now.clone());
        spec.acquire_time = Some(now);
        match self.api.replace(&self.params.lease_name, &PostParams::default(), &lease).await {
            Ok(_) => Ok(()),
            // Someone wrote it since we read it: it is no longer ours to release.
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn spec(&self, now: DateTime<Utc>, acquired: DateTime<Utc>, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.params.holder_id.clone()),
            lease_duration_seconds: Some(lease_seconds(self.params.lease_ttl)),
            acquire_time: Some(micro_time(acquired)),
            renew_time: Some(micro_time(now)),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }
}

impl ElectionLock for CasLeaseLock {
    fn try_acquire_or_renew(&self) -> impl Future<Output = Result<LeaseLockResult, kube::Error>> + Send {
        self.round()
    }

    fn release(&self) -> impl Future<Output = Result<(), kube::Error>> + Send {
        self.give_up()
    }
}

/// The Lease stores whole seconds. Rounded up: rounding down would let the others take the
/// Lease before this replica's renew deadline, while it may still be writing.
fn lease_seconds(ttl: std::time::Duration) -> i32 {
    let seconds = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    i32::try_from(seconds.max(1)).unwrap_or(i32::MAX)
}

fn micro_time(t: DateTime<Utc>) -> MicroTime {
    MicroTime(Timestamp::from_microsecond(t.timestamp_micros()).unwrap_or(Timestamp::UNIX_EPOCH))
}

fn to_chrono(t: Timestamp) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(t.as_microsecond()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn lease_seconds_round_up_so_others_never_take_it_early() {
        assert_eq!(lease_seconds(Duration::from_secs(15)), 15);
        assert_eq!(lease_seconds(Duration::from_millis(1_500)), 2);
        assert_eq!(lease_seconds(Duration::from_millis(200)), 1);
    }

    #[test]
    fn micro_time_keeps_microseconds() {
        let t = DateTime::from_timestamp_micros(1_700_000_000_123_456).unwrap();
        assert_eq!(to_chrono(micro_time(t).0), t);
    }
}
