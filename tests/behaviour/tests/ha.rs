//! High availability (docs/behaviour.md F43–F45, docs/beyond-stakater.md §2): three replicas of the real binary
//! with `--enable-ha`, and the Lease lock raced in-process against the real API server.
//!
//! Writes are counted from the API server: a Deployment's `metadata.generation` grows by one
//! for each write to its spec, and kube-controller-manager moves its revision once per pod template.

mod ha_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube_leader_election::{LeaseLockParams, LeaseLockResult};
use reloader_cli::leader::{CasLeaseLock, ElectionLock};
use reloader_harness::{ControlPlane, NotYet, wait_until};
use reloader_tests::fixtures::{
    ANNOTATION_AUTO, Kind, ResourceRef, Strategy, TestEnv, WorkloadSpec, negative_wait,
};
use serde_json::json;
use tokio::sync::Barrier;

use ha_support::{
    LEASE_NAME, Timings, generation, leader_gauge, lease_holder, reloads_executed, seconds_since,
    start_replicas, wait_for_holder, wait_for_rollouts, wait_for_single_leader,
};

const CANDIDATES: usize = 5;
/// Rounds per starting state of the Lease (missing, expired, released).
const ROUNDS_PER_STATE: usize = 70;
const REACTION: Duration = Duration::from_secs(60);
/// The lease duration of [`Start::Expired`]'s Lease.
const EXPIRED_LEASE_SECONDS: i32 = 1;

/// What the Lease looks like when a round starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    Missing,
    /// Held by a replica that stopped renewing an hour ago (by its renewTime), with a 1 s
    /// lease duration: candidates must still watch it unchanged for 1 s of their own clocks.
    Expired,
    /// Released on shutdown: no holder.
    Released,
}

async fn prepare(leases: &Api<Lease>, start: Start, term: i32) {
    let _ = leases.delete(LEASE_NAME, &DeleteParams::default()).await;
    wait_until("the Lease to be gone", REACTION, || async {
        match leases.get_opt(LEASE_NAME).await? {
            None => Ok(()),
            Some(_) => Err(NotYet::because("still there")),
        }
    })
    .await
    .unwrap();
    let renewed = Timestamp::now() - SignedDuration::from_hours(1);
    let spec = match start {
        Start::Missing => return,
        Start::Expired => LeaseSpec {
            holder_identity: Some("crashed-replica".into()),
            lease_duration_seconds: Some(EXPIRED_LEASE_SECONDS),
            acquire_time: Some(MicroTime(renewed)),
            renew_time: Some(MicroTime(renewed)),
            lease_transitions: Some(term),
            ..Default::default()
        },
        Start::Released => LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            renew_time: Some(MicroTime(Timestamp::now())),
            lease_transitions: Some(term),
            ..Default::default()
        },
    };
    let lease = Lease {
        metadata: ObjectMeta { name: Some(LEASE_NAME.into()), ..Default::default() },
        spec: Some(spec),
    };
    leases.create(&PostParams::default(), &lease).await.expect("creating the Lease");
}

fn holder_and_term(lease: &Lease) -> (String, i32) {
    let spec = lease.spec.clone().unwrap_or_default();
    (spec.holder_identity.unwrap_or_default(), spec.lease_transitions.unwrap_or_default())
}

/// Every candidate has its own client (its own connections), as separate replicas would; all
/// start each round together from a barrier.
async fn race<L, F, Fut>(locks: &[Arc<L>], barrier: &Arc<Barrier>, attempt: F) -> Vec<(usize, Lease)>
where
    L: Send + Sync + 'static,
    F: Fn(Arc<L>) -> Fut + Copy + Send + 'static,
    Fut: Future<Output = Option<Lease>> + Send,
{
    let tasks = locks.iter().enumerate().map(|(i, lock)| {
        let (lock, barrier) = (lock.clone(), barrier.clone());
        tokio::spawn(async move {
            barrier.wait().await;
            attempt(lock).await.map(|lease| (i, lease))
        })
    });
    join_all(tasks).await.into_iter().filter_map(|r| r.expect("a racing task")).collect()
}

fn candidate_clients(plane: &ControlPlane) -> Vec<Client> {
    (0..CANDIDATES).map(|_| Client::try_from(plane.admin_config().clone()).expect("a client")).collect()
}

fn params(i: usize) -> LeaseLockParams {
    LeaseLockParams {
        lease_name: LEASE_NAME.into(),
        holder_id: format!("candidate-{i}"),
        lease_ttl: Duration::from_secs(15),
    }
}

/// F45: two standbys racing for an expired lease never both win. Each round, every candidate
/// tries once at the same moment; exactly one gets `Acquired`, the Lease names it, and the term
/// (leaseTransitions) moved by one. Then all try again: the winner renews, nobody else wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_candidates_never_both_acquire_the_lease() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, .. } = &env;
    let leases: Api<Lease> = ns.api(&plane.client());
    let locks: Vec<Arc<CasLeaseLock>> = candidate_clients(plane)
        .into_iter()
        .enumerate()
        .map(|(i, client)| Arc::new(CasLeaseLock::new(client, ns.name(), params(i))))
        .collect();
    let barrier = Arc::new(Barrier::new(CANDIDATES));
    let acquire = |lock: Arc<CasLeaseLock>| async move {
        match lock.try_acquire_or_renew().await.expect("an election round") {
            LeaseLockResult::Acquired(lease) => Some(lease),
            LeaseLockResult::NotAcquired(_) => None,
        }
    };
    let mut rounds = 0;
    let mut winners = [0usize; CANDIDATES];
    for start in [Start::Missing, Start::Expired, Start::Released] {
        for round in 0..ROUNDS_PER_STATE {
            let term = round as i32;
            prepare(&leases, start, term).await;
            if start == Start::Expired {
                // Expiry is judged from when each candidate first saw the record, by its own
                // clock (docs/behaviour.md, HA): however old its renewTime, nobody takes it yet.
                let early = race(&locks, &barrier, acquire).await;
                assert!(early.is_empty(), "round {round}: a Lease seen for the first time was taken");
                tokio::time::sleep(Duration::from_millis(1_100) * EXPIRED_LEASE_SECONDS as u32).await;
            }
            let won = race(&locks, &barrier, acquire).await;
            let [(winner, lease)] = won.as_slice() else {
                let who: Vec<_> = won.iter().map(|(i, l)| (*i, holder_and_term(l))).collect();
                panic!("{start:?} round {round}: {} candidates acquired the Lease: {who:?}", won.len());
            };
            let expected_term = if start == Start::Missing { 0 } else { term + 1 };
            assert_eq!(holder_and_term(lease), (format!("candidate-{winner}"), expected_term));
            let stored = leases.get(LEASE_NAME).await.unwrap();
            assert_eq!(holder_and_term(&stored), holder_and_term(lease), "the API server agrees");

            let renewed = race(&locks, &barrier, acquire).await;
            let renewers: Vec<usize> = renewed.iter().map(|(i, _)| *i).collect();
            assert_eq!(renewers, [*winner], "{start:?} round {round}: only the holder renews");
            assert_eq!(holder_and_term(&renewed[0].1).1, expected_term, "a renewal keeps the term");
            winners[*winner] += 1;
            rounds += 1;
        }
    }
    eprintln!("{rounds} races of {CANDIDATES} candidates, one winner each; wins per candidate: {winners:?}");
    assert!(winners.iter().filter(|&&w| w > 0).count() > 1, "the races were real: several candidates won");
}

/// The control for the test above: kube-leader-election's own lock, raced the same way,
/// lets two candidates acquire one expired Lease. This shows the race is real and that the test
/// above would see a double leader if the lock allowed one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_compare_and_swap_two_candidates_acquire_the_same_lease() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, .. } = &env;
    let leases: Api<Lease> = ns.api(&plane.client());
    let locks: Vec<Arc<kube_leader_election::LeaseLock>> = candidate_clients(plane)
        .into_iter()
        .enumerate()
        .map(|(i, client)| Arc::new(kube_leader_election::LeaseLock::new(client, ns.name(), params(i))))
        .collect();
    let barrier = Arc::new(Barrier::new(CANDIDATES));
    let acquire = |lock: Arc<kube_leader_election::LeaseLock>| async move {
        match lock.try_acquire_or_renew().await {
            Ok(LeaseLockResult::Acquired(lease)) => Some(lease),
            _ => None,
        }
    };
    let mut doubles = 0;
    let mut rounds = 0;
    while rounds < 100 && doubles == 0 {
        prepare(&leases, Start::Expired, rounds).await;
        if race(&locks, &barrier, acquire).await.len() > 1 {
            doubles += 1;
        }
        rounds += 1;
    }
    eprintln!("kube-leader-election's LeaseLock: two or more leaders after {rounds} round(s)");
    assert!(doubles > 0, "no double acquisition in {rounds} rounds: the race test proves nothing");
}

/// F43: three replicas, exactly one writes. The leader is killed with SIGKILL and two
/// ConfigMaps change while its Lease still blocks the others: the new leader applies each
/// change exactly once, including to a workload that had never reloaded (no marker to compare).
/// A second take-over without a change writes nothing, not even to a workload that took up a
/// changed resource after the change its standby saw; the last replica still writes.
#[tokio::test]
async fn killing_the_leader_applies_changes_from_the_gap_exactly_once() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let settings = ResourceRef::configmap("settings");
    let features = ResourceRef::configmap("features");
    resources.create(&settings, &[("level", "1")]).await.unwrap();
    resources.create(&features, &[("beta", "off")]).await.unwrap();
    let web = WorkloadSpec::new(Kind::Deployment, "web")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_configmap("settings")
        .create(client, ns.name())
        .await
        .unwrap();
    let api = WorkloadSpec::new(Kind::Deployment, "api")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_configmap("features")
        .create(client, ns.name())
        .await
        .unwrap();
    // Reads `features` without reloading for it, until it is annotated after the gap.
    let late = WorkloadSpec::new(Kind::Deployment, "late")
        .env_from_configmap("features")
        .create(client, ns.name())
        .await
        .unwrap();
    // Long enough that the changes below certainly land before the Lease expires.
    let timings = Timings { lease_duration: Duration::from_secs(8), ..Timings::FAST };
    let names = ["r1", "r2", "r3"];
    let mut replicas = start_replicas(plane, ns.name(), &names, timings, &[]).await;
    let all: Vec<_> = replicas.iter().collect();
    let first = wait_for_single_leader(client, ns.name(), &all, &names, REACTION).await.unwrap();
    assert!(replicas[first].log_text().contains("became leader"), "{}", replicas[first].log_text());

    // Baseline: a change reloads `web` once, written by the leader alone.
    let settings_v2 = resources.update_data(&settings, &[("level", "2")]).await.unwrap();
    let latency =
        web.wait_for_marker(client, &settings, Strategy::EnvVars, &settings_v2, REACTION).await.unwrap();
    wait_until("the leader to count its reload", REACTION, || async {
        let executed = reloads_executed(&replicas[first]).await;
        if executed == 1.0 { Ok(()) } else { Err(NotYet::because(format!("{executed} reloads"))) }
    })
    .await
    .unwrap();
    for (i, replica) in replicas.iter().enumerate().filter(|(i, _)| *i != first) {
        assert_eq!(reloads_executed(replica).await, 0.0, "standby {} wrote", names[i]);
        assert_eq!(leader_gauge(replica).await, 0.0);
    }

    // SIGKILL the leader, then change both ConfigMaps while its Lease is still valid.
    let killed_at = Instant::now();
    replicas[first].kill();
    let settings_v3 = resources.update_data(&settings, &[("level", "3")]).await.unwrap();
    let features_v2 = resources.update_data(&features, &[("beta", "on")]).await.unwrap();
    assert_eq!(
        lease_holder(client, ns.name()).await.unwrap().as_deref(),
        Some(names[first]),
        "the changes must be made before anyone takes over"
    );
    let second_name =
        wait_for_holder(client, ns.name(), "a new leader", REACTION, |h| h != names[first]).await.unwrap();
    let takeover_after_kill = seconds_since(killed_at);
    let second = names.iter().position(|n| *n == second_name).unwrap();
    web.wait_for_marker(client, &settings, Strategy::EnvVars, &settings_v3, REACTION).await.unwrap();
    api.wait_for_marker(client, &features, Strategy::EnvVars, &features_v2, REACTION).await.unwrap();
    tokio::time::sleep(negative_wait(latency)).await;
    assert_eq!(generation(client, &web).await, 3, "web: created, reloaded for v2, reloaded once for v3");
    assert_eq!(generation(client, &api).await, 2, "api: created, reloaded once for the gap's change");
    wait_for_rollouts(client, &web, 3).await;
    wait_for_rollouts(client, &api, 2).await;
    let standby = 3 - first - second;
    assert_eq!(reloads_executed(&replicas[standby]).await, 0.0, "the remaining standby wrote");
    assert_eq!(reloads_executed(&replicas[second]).await, 2.0, "the new leader wrote web and api once each");
    assert_eq!(
        replicas[second].metric("reloader_leader_transitions_total").await.unwrap(),
        Some(1.0),
        "one transition: standby to leader"
    );

    // A take-over with no change writes nothing, also to a workload that took up a resource
    // after its last change: `late` reads `features` but reloads for it only from now on, so
    // the change the last standby saw was never its to apply.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let auto = json!({ "metadata": { "annotations": { ANNOTATION_AUTO: "true" } } });
    deployments.patch("late", &PatchParams::default(), &Patch::Merge(&auto)).await.unwrap();
    let killed_at = Instant::now();
    replicas[second].kill();
    wait_for_holder(client, ns.name(), "the last replica to lead", REACTION, |h| h == names[standby])
        .await
        .unwrap();
    let takeover_after_second_kill = seconds_since(killed_at);
    wait_until("the last replica's catch-up", REACTION, || async {
        let log = replicas[standby].log_text();
        log.contains("leader catch-up sweep done").then_some(()).ok_or(NotYet::because("no sweep yet"))
    })
    .await
    .unwrap();
    tokio::time::sleep(negative_wait(latency)).await;
    assert_eq!(generation(client, &web).await, 3, "a take-over without a change wrote to web");
    assert_eq!(generation(client, &api).await, 2, "a take-over without a change wrote to api");
    assert_eq!(generation(client, &late).await, 2, "created, annotated: a change from before was replayed");

    // ...and the last replica does write when something changes.
    let settings_v4 = resources.update_data(&settings, &[("level", "4")]).await.unwrap();
    web.wait_for_marker(client, &settings, Strategy::EnvVars, &settings_v4, REACTION).await.unwrap();
    tokio::time::sleep(negative_wait(latency)).await;
    assert_eq!(generation(client, &web).await, 4);
    assert_eq!(generation(client, &api).await, 2);
    eprintln!(
        "take-over after SIGKILL: {takeover_after_kill:.1}s and {takeover_after_second_kill:.1}s \
         (lease {:?}); reload latency {latency:?}",
        timings.lease_duration
    );
}

/// F44: a graceful stop of the leader releases the Lease, so a standby leads within a few
/// seconds instead of waiting out the lease duration (30 s here), and then writes.
#[tokio::test]
async fn sigterm_releases_the_lease_and_a_standby_leads_within_seconds() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let settings = ResourceRef::configmap("settings");
    resources.create(&settings, &[("level", "1")]).await.unwrap();
    let web = WorkloadSpec::new(Kind::Deployment, "web")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_configmap("settings")
        .create(client, ns.name())
        .await
        .unwrap();
    let timings = Timings {
        lease_duration: Duration::from_secs(30),
        renew_deadline: Duration::from_secs(20),
        retry_period: Duration::from_millis(500),
    };
    let names = ["r1", "r2", "r3"];
    let mut replicas = start_replicas(plane, ns.name(), &names, timings, &[]).await;
    let all: Vec<_> = replicas.iter().collect();
    let first = wait_for_single_leader(client, ns.name(), &all, &names, REACTION).await.unwrap();

    let stopped_at = Instant::now();
    replicas[first].terminate(Duration::from_secs(20));
    let exit = replicas[first].exit_status().expect("the leader exited on SIGTERM");
    let exited_after = seconds_since(stopped_at);
    assert!(exit.success(), "exit status {exit}; log:\n{}", replicas[first].log_text());
    assert!(replicas[first].log_text().contains("released the lease"), "{}", replicas[first].log_text());
    let next = wait_for_holder(client, ns.name(), "a standby to lead", REACTION, |h| h != names[first])
        .await
        .unwrap();
    let takeover = stopped_at.elapsed();
    assert!(
        takeover < timings.lease_duration / 2,
        "took {takeover:?}: the Lease was not released, the standby waited for it to expire"
    );
    let next = names.iter().position(|n| *n == next).unwrap();
    let remaining: Vec<_> =
        replicas.iter().enumerate().filter(|(i, _)| *i != first).map(|(_, r)| r).collect();
    let remaining_names: Vec<_> =
        names.iter().enumerate().filter(|(i, _)| *i != first).map(|(_, n)| *n).collect();
    let leading =
        wait_for_single_leader(client, ns.name(), &remaining, &remaining_names, REACTION).await.unwrap();
    assert_eq!(remaining_names[leading], names[next]);

    let settings_v2 = resources.update_data(&settings, &[("level", "2")]).await.unwrap();
    let latency =
        web.wait_for_marker(client, &settings, Strategy::EnvVars, &settings_v2, REACTION).await.unwrap();
    tokio::time::sleep(negative_wait(latency)).await;
    assert_eq!(generation(client, &web).await, 2, "one reload, by the new leader");
    assert_eq!(reloads_executed(&replicas[next]).await, 1.0);
    eprintln!(
        "SIGTERM: leader exited after {exited_after:.1}s, a standby led after {:.1}s (lease {:?})",
        takeover.as_secs_f64(),
        timings.lease_duration
    );
}
