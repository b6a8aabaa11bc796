//! Leadership under what nodes and networks do to it (docs/behaviour.md, HA; docs/beyond-stakater.md
//! §2): replicas whose wall clocks are 30 s off, and a leader cut off from the API server by a
//! partition while its process stays up.
//!
//! Everything is counted from the API server: the Lease's holders and `leaseTransitions`, and a
//! Deployment's `metadata.generation` (one per write to its spec) and revision (one per pod
//! template). A referee samples the Lease and every live replica's `reloader_leader` gauge all
//! along, so a second leader for even a moment fails the test.

mod ha_support;

use std::time::{Duration, Instant};

use futures::future::join_all;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::Api;
use reloader_harness::Reloader;
use reloader_tests::fixtures::{
    ANNOTATION_AUTO, Kind, ResourceRef, Strategy, TestEnv, WorkloadId, WorkloadSpec, event_occurrences,
    events_for, negative_wait,
};

use ha_support::proxy::CuttableProxy;
use ha_support::{
    LEASE_NAME, Timings, generation, leader_gauge, reloads_executed, replica, wait_for_rollouts,
};

const REACTION: Duration = Duration::from_secs(60);
/// How far the skewed replicas' wall clocks are off, either way.
const SKEW_SECONDS: i64 = 30;
/// What a take-over may take beyond lease duration + retry period: the API round trips of the
/// last renewal and of the take-over on 2 busy cores, and the referee's sampling.
const TAKEOVER_ALLOWANCE: Duration = Duration::from_secs(1);
const SAMPLE_EVERY: Duration = Duration::from_millis(50);

/// Samples who holds the Lease and who says it leads.
#[derive(Default)]
struct Referee {
    /// Lease holders in the order seen, each once per tenure.
    holders: Vec<String>,
    /// The most replicas that reported `reloader_leader 1` in one sample, and who they were.
    most_leaders: Vec<String>,
}

impl Referee {
    /// One sample; returns the holder.
    async fn sample(&mut self, leases: &Api<Lease>, live: &[(&str, &Reloader)]) -> String {
        let lease = leases.get(LEASE_NAME).await.expect("reading the Lease");
        let holder = lease.spec.and_then(|s| s.holder_identity).unwrap_or_default();
        if !holder.is_empty() && self.holders.last() != Some(&holder) {
            self.holders.push(holder.clone());
        }
        let gauges = join_all(live.iter().map(|(_, replica)| leader_gauge(replica))).await;
        let leading: Vec<String> = live
            .iter()
            .zip(gauges)
            .filter(|(_, g)| *g == 1.0)
            .map(|((name, _), _)| (*name).to_owned())
            .collect();
        if leading.len() > self.most_leaders.len() {
            self.most_leaders = leading;
        }
        holder
    }

    /// Samples for `period`.
    async fn watch_for(&mut self, leases: &Api<Lease>, live: &[(&str, &Reloader)], period: Duration) {
        let until = Instant::now() + period;
        while Instant::now() < until {
            self.sample(leases, live).await;
            tokio::time::sleep(SAMPLE_EVERY).await;
        }
    }

    /// Samples until a holder other than `previous` holds the Lease; returns it and when.
    async fn watch_for_new_holder(
        &mut self,
        leases: &Api<Lease>,
        live: &[(&str, &Reloader)],
        previous: &str,
    ) -> (String, Instant) {
        let until = Instant::now() + REACTION;
        while Instant::now() < until {
            let holder = self.sample(leases, live).await;
            if !holder.is_empty() && holder != previous {
                return (holder, Instant::now());
            }
            tokio::time::sleep(SAMPLE_EVERY).await;
        }
        panic!("nobody took the Lease from {previous} within {REACTION:?}");
    }

    fn assert_never_two_leaders(&self) {
        assert!(self.most_leaders.len() <= 1, "two replicas led at once: {:?}", self.most_leaders);
    }
}

async fn lease_transitions(leases: &Api<Lease>) -> i32 {
    let lease = leases.get(LEASE_NAME).await.expect("reading the Lease");
    lease.spec.and_then(|s| s.lease_transitions).unwrap_or_default()
}

/// How far the current holder's wall clock is from ours, read from the renewTime it wrote.
async fn holder_clock_offset(leases: &Api<Lease>) -> i64 {
    let lease = leases.get(LEASE_NAME).await.expect("reading the Lease");
    let renewed = lease.spec.and_then(|s| s.renew_time).expect("a renewTime").0;
    (renewed.as_second() - Timestamp::now().as_second()).clamp(-3600, 3600)
}

/// The holder's renewTime is off by its skew (give or take a retry period and a round trip):
/// the shifted clocks are real, and so is the skew the other replicas had to ignore.
async fn assert_holder_clock(leases: &Api<Lease>, holder: &str, skew: i64) {
    let offset = holder_clock_offset(leases).await;
    assert!(
        (offset - skew).abs() <= 3,
        "{holder}'s renewTime is {offset:+}s off; its clock is shifted {skew:+}s"
    );
}

/// The test's Lease API, and ConfigMap `settings` (level 1) used by Deployment `web`.
async fn lease_and_workload(env: &TestEnv<'_>) -> (Api<Lease>, ResourceRef, WorkloadId) {
    let settings = ResourceRef::configmap("settings");
    env.resources.create(&settings, &[("level", "1")]).await.unwrap();
    let web = WorkloadSpec::new(Kind::Deployment, "web")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_configmap("settings")
        .create(&env.client, env.ns.name())
        .await
        .unwrap();
    (env.ns.api(&env.client), settings, web)
}

/// The `Reloaded` Events recorded about a Deployment, counting repeats folded into a series.
async fn reloaded_events(client: &Client, namespace: &str, name: &str) -> i32 {
    let events = events_for(client, namespace, Kind::Deployment, name).await.expect("listing Events");
    events.iter().filter(|e| e.reason.as_deref() == Some("Reloaded")).map(event_occurrences).sum()
}

/// docs/behaviour.md F45b: three replicas whose wall clocks are right, 30 s ahead and 30 s behind.
/// With expiry judged from the holder's renewTime, the one ahead would take a Lease the leader
/// still renews, and a leader behind would look expired to everyone at once. Judged by each
/// replica's own monotonic clock from when it saw the record change, there is never a second
/// leader, and a SIGKILLed leader is still replaced within lease duration + retry period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_with_skewed_clocks_never_lead_together_and_fail_over_in_time() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let (leases, settings, web) = lease_and_workload(&env).await;
    let timings = Timings::FAST;
    let mut referee = Referee::default();

    // The right clock leads first, so both skewed replicas start as standbys watching its Lease.
    let mut on_time = replica(plane, ns.name(), "on-time", timings).start().await.unwrap();
    ha_support::wait_for_holder(client, ns.name(), "on-time to lead", REACTION, |h| h == "on-time")
        .await
        .unwrap();
    let skewed = [("ahead", SKEW_SECONDS), ("behind", -SKEW_SECONDS)];
    let mut standbys = join_all(
        skewed
            .iter()
            .map(|(name, skew)| replica(plane, ns.name(), name, timings).wall_clock_offset(*skew).start()),
    )
    .await
    .into_iter()
    .map(|r| r.expect("starting a skewed replica"))
    .collect::<Vec<_>>();
    let skew_of = |name: &str| skewed.iter().find(|(n, _)| *n == name).map_or(0, |(_, s)| *s);

    // Phase 1: several lease durations of standbys 30 s ahead and behind a renewing leader.
    let live = [("on-time", &on_time), ("ahead", &standbys[0]), ("behind", &standbys[1])];
    referee.watch_for(&leases, &live, timings.lease_duration * 3).await;
    referee.assert_never_two_leaders();
    assert_eq!(referee.holders, ["on-time"], "a skewed standby took the Lease its holder renews");
    assert_eq!(lease_transitions(&leases).await, 0, "the Lease changed hands and back");
    assert_holder_clock(&leases, "on-time", 0).await;
    let v2 = resources.update_data(&settings, &[("level", "2")]).await.unwrap();
    let latency = web.wait_for_marker(client, &settings, Strategy::EnvVars, &v2, REACTION).await.unwrap();
    referee.watch_for(&leases, &live, negative_wait(latency)).await;
    assert_eq!(referee.holders, ["on-time"], "the Lease changed hands while its holder renewed it");
    assert_eq!(reloads_executed(&on_time).await, 1.0);

    // Kill -9 the leader: one skewed replica takes over in time, the other watches it.
    let mut takeovers = Vec::new();
    let killed_at = Instant::now();
    on_time.kill();
    let survivors = [("ahead", &standbys[0]), ("behind", &standbys[1])];
    let (second, at) = referee.watch_for_new_holder(&leases, &survivors, "on-time").await;
    takeovers.push(at - killed_at);
    let second_index = skewed.iter().position(|(n, _)| *n == second).expect("a skewed replica took over");
    let third_index = 1 - second_index;
    let third = skewed[third_index].0;

    // Phase 2: a leader whose clock is 30 s off, watched by one 60 s off the other way.
    let live = [(second.as_str(), &standbys[second_index]), (third, &standbys[third_index])];
    referee.watch_for(&leases, &live, timings.lease_duration * 3).await;
    assert_holder_clock(&leases, &second, skew_of(&second)).await;
    let v3 = resources.update_data(&settings, &[("level", "3")]).await.unwrap();
    web.wait_for_marker(client, &settings, Strategy::EnvVars, &v3, REACTION).await.unwrap();
    referee.watch_for(&leases, &live, negative_wait(latency)).await;
    let second_replica = &standbys[second_index];
    assert_eq!(reloads_executed(second_replica).await, 1.0, "{second} wrote v3 once");
    assert_eq!(second_replica.metric("reloader_leader_transitions_total").await.unwrap(), Some(1.0));
    let log = second_replica.log_text();
    assert!(log.contains("taking over the lease"), "{second} did not say why it took over:\n{log}");
    assert!(log.contains("became leader"), "{log}");

    // Kill -9 it too: the last replica takes over in time.
    let killed_at = Instant::now();
    standbys[second_index].kill();
    let live = [(third, &standbys[third_index])];
    let (last, at) = referee.watch_for_new_holder(&leases, &live, &second).await;
    takeovers.push(at - killed_at);
    assert_eq!(last, third);
    referee.watch_for(&leases, &live, timings.retry_period * 4).await;
    assert_holder_clock(&leases, third, skew_of(third)).await;
    let v4 = resources.update_data(&settings, &[("level", "4")]).await.unwrap();
    web.wait_for_marker(client, &settings, Strategy::EnvVars, &v4, REACTION).await.unwrap();
    referee.watch_for(&leases, &live, negative_wait(latency)).await;

    // Counted from the API server: one holder per tenure, one write per change.
    referee.assert_never_two_leaders();
    assert_eq!(referee.holders, ["on-time", second.as_str(), third]);
    assert_eq!(lease_transitions(&leases).await, 2, "leaseTransitions: exactly the two take-overs");
    assert_eq!(generation(client, &web).await, 4, "web: created, then v2, v3 and v4 once each");
    wait_for_rollouts(client, &web, 4).await;
    assert_eq!(reloaded_events(client, ns.name(), "web").await, 3, "one Reloaded Event per change");
    let last_replica = &standbys[third_index];
    assert_eq!(reloads_executed(last_replica).await, 1.0);
    assert_eq!(last_replica.metric("reloader_leader").await.unwrap(), Some(1.0));
    assert_eq!(last_replica.metric("reloader_leader_transitions_total").await.unwrap(), Some(1.0));
    assert!(!last_replica.log_text().contains("lost leadership"), "{}", last_replica.log_text());

    let bound = timings.lease_duration + timings.retry_period;
    for takeover in &takeovers {
        assert!(
            *takeover <= bound + TAKEOVER_ALLOWANCE,
            "take-over after SIGKILL took {takeover:?}; lease duration + retry period is {bound:?}"
        );
    }
    eprintln!(
        "clocks {:+}s/{:+}s: take-overs after SIGKILL {takeovers:?} (lease + retry {bound:?}); holders {:?}",
        SKEW_SECONDS, -SKEW_SECONDS, referee.holders
    );
}

/// docs/behaviour.md F45c: the leader's API traffic goes through a proxy that then hangs every
/// connection (a partition: nothing refused, nothing answered) for longer than the lease. The
/// leader stops writing at its renew deadline, before its Lease can expire for the standby; the
/// standby takes over and applies the change made during the cut exactly once. When the cut heals,
/// what the old leader sent meanwhile is delivered, and it writes nothing: it is a standby.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_leader_stops_writing_before_a_standby_takes_over() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let (leases, settings, web) = lease_and_workload(&env).await;
    let timings = Timings::FAST;
    let cut_for = timings.lease_duration * 3;
    let proxy = CuttableProxy::start(&plane.url(), plane.kubeconfig_path()).await.unwrap();
    let cut_off =
        replica(plane, ns.name(), "cut-off", timings).kubeconfig(proxy.kubeconfig()).start().await.unwrap();
    ha_support::wait_for_holder(client, ns.name(), "cut-off to lead", REACTION, |h| h == "cut-off")
        .await
        .unwrap();
    let standby = replica(plane, ns.name(), "standby", timings).start().await.unwrap();
    let live = [("cut-off", &cut_off), ("standby", &standby)];
    let mut referee = Referee::default();

    let v2 = resources.update_data(&settings, &[("level", "2")]).await.unwrap();
    let latency = web.wait_for_marker(client, &settings, Strategy::EnvVars, &v2, REACTION).await.unwrap();
    referee.watch_for(&leases, &live, negative_wait(latency)).await;
    assert_eq!(reloads_executed(&cut_off).await, 1.0);

    // The partition, and a change the old leader cannot see.
    proxy.hang();
    let cut_at = Instant::now();
    let v3 = resources.update_data(&settings, &[("level", "3")]).await.unwrap();
    // Its metrics endpoint is not behind the proxy: when it stops leading is visible.
    let (mut demoted_at, mut taken_over_at) = (None, None);
    while demoted_at.is_none() || taken_over_at.is_none() {
        assert!(cut_at.elapsed() < REACTION, "demoted: {demoted_at:?}, taken over: {taken_over_at:?}");
        let holder = referee.sample(&leases, &live).await;
        if demoted_at.is_none() && leader_gauge(&cut_off).await == 0.0 {
            demoted_at = Some(Instant::now());
        }
        if taken_over_at.is_none() && holder == "standby" {
            taken_over_at = Some(Instant::now());
        }
        tokio::time::sleep(SAMPLE_EVERY).await;
    }
    let (demoted_at, taken_over_at) = (demoted_at.unwrap(), taken_over_at.unwrap());
    assert!(
        demoted_at < taken_over_at,
        "the standby took over {:?} after the cut, before the old leader stopped writing ({:?})",
        taken_over_at - cut_at,
        demoted_at - cut_at
    );
    assert!(demoted_at - cut_at <= timings.renew_deadline + TAKEOVER_ALLOWANCE, "{:?}", demoted_at - cut_at);
    web.wait_for_marker(client, &settings, Strategy::EnvVars, &v3, REACTION).await.unwrap();
    let remaining = cut_for.saturating_sub(cut_at.elapsed());
    referee.watch_for(&leases, &live, remaining).await;
    assert!(cut_at.elapsed() > timings.lease_duration * 2, "the cut outlasted the lease");

    // Healed: what the old leader sent during the cut arrives; it writes nothing and stays a standby.
    proxy.restore();
    referee.watch_for(&leases, &live, timings.lease_duration * 2).await;
    let v4 = resources.update_data(&settings, &[("level", "4")]).await.unwrap();
    web.wait_for_marker(client, &settings, Strategy::EnvVars, &v4, REACTION).await.unwrap();
    referee.watch_for(&leases, &live, negative_wait(latency)).await;

    referee.assert_never_two_leaders();
    assert_eq!(referee.holders, ["cut-off", "standby"], "the old leader took the Lease back");
    assert_eq!(lease_transitions(&leases).await, 1);
    assert_eq!(generation(client, &web).await, 4, "web: created, then v2, v3 and v4 once each");
    wait_for_rollouts(client, &web, 4).await;
    assert_eq!(reloaded_events(client, ns.name(), "web").await, 3, "one Reloaded Event per change");
    assert_eq!(reloads_executed(&cut_off).await, 1.0, "the old leader wrote after it was cut off");
    assert_eq!(reloads_executed(&standby).await, 2.0, "the new leader wrote v3 and v4 once each");

    // What an operator sees: the old leader says why it stopped, both count the transitions.
    let log = cut_off.log_text();
    let lost = log.lines().find(|l| l.contains("lost leadership")).unwrap_or_else(|| panic!("{log}"));
    assert!(lost.contains("renew deadline exceeded"), "{lost}");
    assert_eq!(log.matches("became leader").count(), 1, "the old leader led again:\n{log}");
    assert_eq!(cut_off.metric("reloader_leader").await.unwrap(), Some(0.0));
    assert_eq!(cut_off.metric("reloader_leader_transitions_total").await.unwrap(), Some(2.0));
    assert_eq!(standby.metric("reloader_leader").await.unwrap(), Some(1.0));
    assert_eq!(standby.metric("reloader_leader_transitions_total").await.unwrap(), Some(1.0));
    assert!(standby.log_text().contains("taking over the lease"), "{}", standby.log_text());
    eprintln!(
        "partition of {cut_for:?}: old leader stopped writing {:?} after the cut, the standby took over \
         {:?} after it ({:?} later)",
        demoted_at - cut_at,
        taken_over_at - cut_at,
        taken_over_at - demoted_at
    );
}
