//! The campaign's timing rules, on virtual time with a scripted lock. The race between real
//! candidates on a real API server is in tests/behaviour/tests/ha.rs.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube_leader_election::LeaseLockResult;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{ElectionConfig, ElectionLock, Leadership};
use crate::observe::metrics::Metrics;

const LEASE: Duration = Duration::from_secs(4);
const RENEW: Duration = Duration::from_secs(3);
const RETRY: Duration = Duration::from_millis(500);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Grant,
    HeldByOther,
    Fail,
    Hang,
}

struct Script {
    answer: Answer,
    last_grant_started: Option<Instant>,
    releases: u32,
}

#[derive(Clone)]
struct FakeLock(Arc<Mutex<Script>>);

impl FakeLock {
    fn new(answer: Answer) -> Self {
        FakeLock(Arc::new(Mutex::new(Script { answer, last_grant_started: None, releases: 0 })))
    }

    fn answer(&self, answer: Answer) {
        self.0.lock().unwrap().answer = answer;
    }

    fn last_grant_started(&self) -> Instant {
        self.0.lock().unwrap().last_grant_started.expect("a granted round")
    }

    fn releases(&self) -> u32 {
        self.0.lock().unwrap().releases
    }
}

fn lease(holder: &str) -> Lease {
    Lease {
        spec: Some(LeaseSpec { holder_identity: Some(holder.into()), ..Default::default() }),
        ..Default::default()
    }
}

impl ElectionLock for FakeLock {
    fn try_acquire_or_renew(&self) -> impl Future<Output = Result<LeaseLockResult, kube::Error>> + Send {
        let script = self.0.clone();
        async move {
            let answer = {
                let mut script = script.lock().unwrap();
                if script.answer == Answer::Grant {
                    script.last_grant_started = Some(Instant::now());
                }
                script.answer
            };
            // Every real round takes a little time.
            tokio::time::sleep(Duration::from_millis(20)).await;
            match answer {
                Answer::Grant => Ok(LeaseLockResult::Acquired(lease("me"))),
                Answer::HeldByOther => Ok(LeaseLockResult::NotAcquired(lease("other"))),
                Answer::Fail => {
                    let mut status = kube::core::Status::failure("etcd is down", "InternalError");
                    status.code = 500;
                    Err(kube::Error::Api(status.boxed()))
                }
                Answer::Hang => std::future::pending().await,
            }
        }
    }

    fn release(&self) -> impl Future<Output = Result<(), kube::Error>> + Send {
        self.0.lock().unwrap().releases += 1;
        async { Ok(()) }
    }
}

struct Candidate {
    lock: FakeLock,
    leadership: Leadership,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
}

fn candidate(answer: Answer, release_on_cancel: bool) -> Candidate {
    let lock = FakeLock::new(answer);
    let metrics = Metrics::new(false);
    let shutdown = CancellationToken::new();
    let config = ElectionConfig {
        lease_name: "stakater-reloader-lock".into(),
        namespace: "reloader".into(),
        identity: "me".into(),
        lease_duration: LEASE,
        renew_deadline: RENEW,
        retry_period: RETRY,
        release_on_cancel,
    };
    let (leadership, campaign) =
        Leadership::elect_with(lock.clone(), config, metrics.leader(), shutdown.clone());
    tokio::spawn(campaign);
    Candidate { lock, leadership, metrics, shutdown }
}

impl Candidate {
    /// Waits (virtual time) until leadership is `leading`; returns when it changed.
    async fn until_leading(&self, leading: bool) -> Instant {
        let mut rx = self.leadership.subscribe();
        tokio::time::timeout(Duration::from_secs(60), rx.wait_for(|l| *l == leading))
            .await
            .expect("leadership changes within a minute")
            .expect("the campaign is alive");
        Instant::now()
    }

    fn sample(&self, name: &str) -> String {
        let text = self.metrics.encode();
        text.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_default().to_owned()
    }
}

#[tokio::test(start_paused = true)]
async fn leads_and_keeps_leading_while_renewals_succeed() {
    let c = candidate(Answer::Grant, true);
    c.until_leading(true).await;
    let mut rx = c.leadership.subscribe();
    rx.mark_unchanged();
    tokio::time::sleep(LEASE * 5).await;
    assert!(!rx.has_changed().unwrap(), "leadership flickered");
    assert!(*c.leadership.subscribe().borrow());
    assert_eq!(c.sample("reloader_leader"), "reloader_leader 1");
    assert_eq!(c.sample("reloader_leader_transitions_total"), "reloader_leader_transitions_total 1");
}

#[tokio::test(start_paused = true)]
async fn a_hanging_renewal_stops_writes_at_the_renew_deadline_and_the_campaign_goes_on() {
    let c = candidate(Answer::Grant, true);
    c.until_leading(true).await;
    tokio::time::sleep(RETRY * 3).await;
    c.lock.answer(Answer::Hang);
    let demoted_at = c.until_leading(false).await;
    let since_renewal = demoted_at - c.lock.last_grant_started();
    // The Lease written by that renewal is valid for LEASE: stopping at RENEW leaves others safe.
    assert_eq!(since_renewal, RENEW, "demoted {since_renewal:?} after the last successful renewal began");
    assert!(since_renewal < LEASE);
    assert_eq!(c.sample("reloader_leader"), "reloader_leader 0");

    // Not an exit: once the API answers again it campaigns and leads again.
    c.lock.answer(Answer::Grant);
    c.until_leading(true).await;
    assert_eq!(c.sample("reloader_leader_transitions_total"), "reloader_leader_transitions_total 3");
}

#[tokio::test(start_paused = true)]
async fn failing_renewals_demote_at_the_renew_deadline() {
    let c = candidate(Answer::Grant, true);
    c.until_leading(true).await;
    c.lock.answer(Answer::Fail);
    let demoted_at = c.until_leading(false).await;
    assert_eq!(demoted_at - c.lock.last_grant_started(), RENEW);
    c.lock.answer(Answer::Grant);
    c.until_leading(true).await;
}

#[tokio::test(start_paused = true)]
async fn seeing_another_holder_demotes_at_once() {
    let c = candidate(Answer::Grant, true);
    c.until_leading(true).await;
    let granted = c.lock.last_grant_started();
    c.lock.answer(Answer::HeldByOther);
    let demoted_at = c.until_leading(false).await;
    assert!(demoted_at - granted <= RETRY + Duration::from_millis(100), "{:?}", demoted_at - granted);
}

#[tokio::test(start_paused = true)]
async fn a_standby_never_leads_while_another_holds_the_lease() {
    let c = candidate(Answer::HeldByOther, true);
    tokio::time::sleep(LEASE * 5).await;
    assert!(!*c.leadership.subscribe().borrow());
    assert_eq!(c.sample("reloader_leader_transitions_total"), "reloader_leader_transitions_total 0");
    c.lock.answer(Answer::Grant);
    c.until_leading(true).await;
}

#[tokio::test(start_paused = true)]
async fn shutdown_stops_writes_at_once_and_releases_the_lease_only_when_finished() {
    let c = candidate(Answer::Grant, true);
    c.until_leading(true).await;
    c.shutdown.cancel();
    c.until_leading(false).await;
    // Writes in flight are still draining: the Lease stays ours so nobody else writes yet.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(c.lock.releases(), 0);
    c.leadership.finished().await;
    assert_eq!(c.lock.releases(), 1);
}

#[tokio::test(start_paused = true)]
async fn without_release_on_cancel_the_lease_is_left_to_expire() {
    let c = candidate(Answer::Grant, false);
    c.until_leading(true).await;
    c.shutdown.cancel();
    c.until_leading(false).await;
    let lock = c.lock.clone();
    c.leadership.finished().await;
    assert_eq!(lock.releases(), 0);
}
