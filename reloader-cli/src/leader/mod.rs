//! Lease-based leadership (`--enable-ha`, docs/beyond-stakater.md §2). Every replica watches and keeps its
//! index warm; only the one holding the Lease writes.
//!
//! - Every Lease write is a compare-and-swap ([`CasLeaseLock`]), so at most one candidate wins a
//!   race for an expired Lease.
//! - A standby takes a held Lease only after seeing the same record unchanged for a whole lease
//!   duration of its own monotonic clock (as client-go does), so skewed wall clocks between nodes
//!   cannot shorten a Lease ([`observed`]).
//! - The leader counts its renew deadline on its monotonic clock from the start of its last
//!   successful renewal and stops writing the moment it passes, even if a renewal is still
//!   hanging: the others start counting no earlier than that renewal was written, and wait the
//!   longer lease duration, so it has stopped before anyone else may take over.
//! - Losing the Lease is a return to standby, never an exit; the campaign simply goes on.
//! - On shutdown the replica stops writing at once, and releases the Lease only when
//!   [`Leadership::finished`] says the writes in flight are done.

mod lock;
mod observed;
#[cfg(test)]
mod tests;

use std::time::Duration;

use kube::Client;
use kube_leader_election::{LeaseLockParams, LeaseLockResult};
use std::future::Future;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

pub use lock::{CasLeaseLock, ElectionLock};

use crate::observe::metrics::LeaderMetrics;

/// Consecutive failed rounds between two warnings while the Lease API is unreachable.
const WARN_EVERY_FAILURES: u32 = 10;

/// Leader-election settings (docs/compatibility.md §1, Stakater's v2 flags).
#[derive(Debug, Clone)]
pub(crate) struct ElectionConfig {
    pub lease_name: String,
    pub namespace: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
    pub release_on_cancel: bool,
}

/// Whether this replica may write, as a watch channel.
pub(crate) struct Leadership {
    rx: watch::Receiver<bool>,
    role: Role,
}

enum Role {
    /// Without HA: the sender is kept so the channel never closes.
    Always {
        _sender: watch::Sender<bool>,
    },
    Elected {
        resign: CancellationToken,
    },
}

impl Leadership {
    /// Without HA the single replica always leads.
    pub(crate) fn always() -> Self {
        let (tx, rx) = watch::channel(true);
        Leadership { rx, role: Role::Always { _sender: tx } }
    }

    /// Campaigns for the Lease until `shutdown`; the campaign is the returned future, for the
    /// supervisor to run. `client` should be used for nothing else, so that a busy controller
    /// cannot starve renewals.
    pub(crate) fn elect(
        client: Client,
        config: ElectionConfig,
        metrics: LeaderMetrics,
        shutdown: CancellationToken,
    ) -> (Self, impl Future<Output = ()> + Send + 'static) {
        let params = LeaseLockParams {
            lease_name: config.lease_name.clone(),
            holder_id: config.identity.clone(),
            lease_ttl: config.lease_duration,
        };
        let lock = CasLeaseLock::new(client, &config.namespace, params);
        Self::elect_with(lock, config, metrics, shutdown)
    }

    /// [`Self::elect`] with any lock.
    pub(crate) fn elect_with<L: ElectionLock>(
        lock: L,
        config: ElectionConfig,
        metrics: LeaderMetrics,
        shutdown: CancellationToken,
    ) -> (Self, impl Future<Output = ()> + Send + 'static) {
        let (tx, rx) = watch::channel(false);
        let resign = CancellationToken::new();
        let campaign = Campaign { lock, config, metrics, tx, failures: 0 };
        let leadership = Leadership { rx, role: Role::Elected { resign: resign.clone() } };
        (leadership, campaign.run(shutdown, resign))
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<bool> {
        self.rx.clone()
    }

    /// Call after shutdown, once the writes in flight are done: releases the Lease (when
    /// configured) so a standby takes over without waiting for it to expire.
    pub(crate) async fn finished(self) {
        if let Role::Elected { resign } = self.role {
            resign.cancel();
            // The campaign owns the sender: the channel closes when it has released the Lease.
            let mut rx = self.rx;
            let released = async { while rx.changed().await.is_ok() {} };
            if tokio::time::timeout(Duration::from_secs(5), released).await.is_err() {
                warn!("leader election did not finish within 5s");
            }
        }
    }
}

/// Why a leader stopped leading while it kept running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Demotion {
    /// No renewal succeeded within the renew deadline of this replica's monotonic clock (the
    /// API server is unreachable or slow): it stops before the others may take the Lease.
    RenewDeadlineExceeded,
    /// A renewal found the Lease held by another replica.
    AnotherHolder,
}

impl Demotion {
    fn as_label(self) -> &'static str {
        match self {
            Demotion::RenewDeadlineExceeded => "renew deadline exceeded",
            Demotion::AnotherHolder => "another replica holds the lease",
        }
    }
}

struct Campaign<L> {
    lock: L,
    config: ElectionConfig,
    metrics: LeaderMetrics,
    tx: watch::Sender<bool>,
    failures: u32,
}

impl<L: ElectionLock> Campaign<L> {
    async fn run(mut self, shutdown: CancellationToken, resign: CancellationToken) {
        self.metrics.set_leader(false);
        // While leading: when this replica must stop writing unless a renewal succeeds first.
        let mut deadline: Option<Instant> = None;
        loop {
            let started = Instant::now();
            let round = tokio::time::timeout(self.config.renew_deadline, self.lock.try_acquire_or_renew());
            tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                () = until(deadline) => self.lose(&mut deadline, Demotion::RenewDeadlineExceeded),
                result = round => self.settle(result, started, &mut deadline),
            }
            tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                () = until(deadline) => self.lose(&mut deadline, Demotion::RenewDeadlineExceeded),
                () = tokio::time::sleep(self.config.retry_period) => {}
            }
        }
        if deadline.is_some() {
            self.step_down();
        }
        resign.cancelled().await;
        if self.config.release_on_cancel {
            match tokio::time::timeout(self.config.renew_deadline, self.lock.release()).await {
                Ok(Ok(())) => info!(lease = %self.config.lease_name, "released the lease"),
                Ok(Err(e)) => warn!(error = %e, "could not release the lease"),
                Err(_) => warn!("releasing the lease timed out"),
            }
        }
    }

    fn settle(
        &mut self,
        result: Result<Result<LeaseLockResult, kube::Error>, tokio::time::error::Elapsed>,
        started: Instant,
        deadline: &mut Option<Instant>,
    ) {
        let result = match result {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => return self.failed(&e),
            Err(_) => return self.failed(&"no answer within the renew deadline"),
        };
        if self.failures > 0 {
            info!(failed_rounds = self.failures, "the lease API answers again");
            self.failures = 0;
        }
        match result {
            LeaseLockResult::Acquired(lease) => {
                let valid_until = started + self.config.renew_deadline;
                if Instant::now() >= valid_until {
                    return;
                }
                if deadline.is_none() {
                    let term = lease.spec.and_then(|s| s.lease_transitions).unwrap_or(0);
                    info!(identity = %self.config.identity, lease = %self.config.lease_name, term, "became leader");
                    self.metrics.set_leader(true);
                    self.metrics.leader_transition();
                    let _ = self.tx.send(true);
                }
                *deadline = Some(valid_until);
            }
            LeaseLockResult::NotAcquired(lease) => {
                let holder = lease.spec.and_then(|s| s.holder_identity).unwrap_or_default();
                debug!(%holder, "the lease is held by another replica");
                if deadline.is_some() {
                    self.lose(deadline, Demotion::AnotherHolder);
                }
            }
        }
    }

    fn failed(&mut self, error: &dyn std::fmt::Display) {
        self.failures += 1;
        if self.failures % WARN_EVERY_FAILURES == 1 {
            warn!(error = %error, failed_rounds = self.failures, "leader election round failed");
        } else {
            debug!(error = %error, failed_rounds = self.failures, "leader election round failed");
        }
    }

    fn lose(&self, deadline: &mut Option<Instant>, why: Demotion) {
        *deadline = None;
        let _ = self.tx.send(false);
        self.metrics.set_leader(false);
        self.metrics.leader_transition();
        warn!(identity = %self.config.identity, reason = why.as_label(), "lost leadership: stopped writing, back to standby");
    }

    /// Shutdown: stop writing now; the Lease is released later, by [`Leadership::finished`].
    fn step_down(&self) {
        let _ = self.tx.send(false);
        self.metrics.set_leader(false);
        self.metrics.leader_transition();
        info!(identity = %self.config.identity, "shutting down: stopped leading");
    }
}

/// Fires at `deadline`; never without one.
async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
