//! Restart by eviction (docs/behaviour.md §J, J70–J75; pods as reload targets, J76–J78, in
//! `pod_targets.rs`), on the plane with its real controllers
//! (the StatefulSet, DaemonSet and disruption controllers of kube-controller-manager; KWOK's
//! pods) and the real binary with `--restart-by-eviction`.
//!
//! Every workload here has `updateStrategy: OnDelete`: its controller never replaces a pod for a
//! template change, so every pod replaced was evicted by reloader, and a replacement carries the
//! template of its moment. The pods are followed by a watch ([`pods::PodWatch`]), which sees every
//! pod that existed and every deletion in the API server's order, and tells an eviction by the
//! `DisruptionTarget` condition the Eviction API sets: "replaced exactly once" is every original
//! uid evicted once, nothing else deleted and one new uid per original; "one at a time" is the
//! most pods unavailable at any event.

#[path = "../ha_support/mod.rs"]
mod ha_support;
mod pod_targets;
mod pods;
mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, Patch, PatchParams, PostParams};
use reloader_harness::{NotYet, wait_until};
use reloader_tests::fixtures::{Kind, ResourceRef, Strategy, TestEnv};
use serde_json::json;

use ha_support::{Timings, start_replicas, wait_for_holder, wait_for_single_leader};
use pods::{History, PodWatch, replacements};
use support::{
    BLOCKED, EVICTED, EVICTION_STOPPED, EVICTOR_LOOKS, FAILED, NO_SUCH_NODE, OnDelete, POD_EVICTED, Progress,
    REACTION, READY_TIMEOUT, RESTARTS_DONE, RESTARTS_STOPPED, event_messages, events_with, evicted_message,
    evictions_refused, is_digest, metric, progress, start_reloader, wait_for_events, wait_for_progress,
};

const FLAG: &str = "--restart-by-eviction";

/// The `PodEvicted` messages a restart that evicted `evicted` (in that order) records, sorted.
fn messages_for(evicted: &[String]) -> Vec<String> {
    let mut messages: Vec<String> =
        evicted.iter().zip(1..).map(|(pod, evicted)| evicted_message(pod, evicted)).collect();
    messages.sort();
    messages
}

/// What every completed restart shows: each original pod (uid → name) evicted once and nothing
/// else deleted, one replacement for each, never more than one pod unavailable, and the progress
/// `done` counting them all.
fn assert_replaced_once(history: &History, originals: &BTreeMap<String, String>, done: &Progress) {
    let evicted: BTreeMap<String, String> = history.evicted.iter().cloned().collect();
    assert_eq!(&evicted, originals, "the pods evicted are the original ones");
    assert_eq!(history.evicted.len(), originals.len(), "a pod was evicted twice: {:?}", history.evicted);
    // Any other deletion would show here (support.rs refuses KWOK's late ones).
    assert_eq!(history.deleted, history.evicted, "every pod that went was evicted");
    assert_eq!(
        history.seen.len(),
        2 * originals.len(),
        "one replacement per original pod, none of them replaced again: {:?}",
        history.seen
    );
    // At least one: the watch did see each pod go and come back.
    assert_eq!(history.most_unavailable, 1, "pods unavailable at the worst moment: {}", history.worst_moment);
    assert_eq!(done.evicted as usize, originals.len(), "{done:?}");
    assert!(is_digest(&done.target) && done.started_at <= done.last_eviction_at, "{done:?}");
}

/// J70 and J71: a ConfigMap change writes the marker, then every pod is evicted once, one at a
/// time (the highest ordinal first for a StatefulSet), each after the previous replacement is
/// Ready; each replacement carries the marker; Events, metrics and the progress agree.
async fn every_pod_restarted_once(kind: Kind, strategy: Strategy) {
    let env = TestEnv::new().await;
    let TestEnv { ns, client, resources, .. } = &env;
    let settings = ResourceRef::configmap("settings");
    resources.create(&settings, &[("level", "1")]).await.unwrap();
    let spec = match kind {
        Kind::StatefulSet => OnDelete::statefulset("web", 3, "settings"),
        _ => OnDelete::daemonset("web", "settings"),
    };
    let (web, desired) = spec.evict().create(client, ns.name()).await;
    let pods = PodWatch::start(client, ns.name(), "web", desired).await;
    let originals = pods.history().live_names();
    assert_eq!(originals.len(), desired);
    let reloader = start_reloader(&env, strategy, &[FLAG]).await;

    let started = Instant::now();
    let hash = resources.update_data(&settings, &[("level", "2")]).await.unwrap();
    web.wait_for_marker(client, &settings, strategy, &hash, REACTION).await.unwrap();
    let done = wait_for_progress(client, &web, "done").await;
    let history = pods
        .wait_for("every pod replaced", REACTION, |h| {
            h.all_replaced(&originals, desired, &settings, strategy, &hash)
        })
        .await;
    let took = started.elapsed();
    assert_replaced_once(&history, &originals, &done);
    let evicted = history.evicted_names();
    if kind == Kind::StatefulSet {
        assert_eq!(evicted, ["web-2", "web-1", "web-0"], "the highest ordinal first");
    }
    let messages = wait_for_events(client, &web, POD_EVICTED, desired).await;
    assert_eq!(messages, messages_for(&evicted), "one PodEvicted Event per eviction");
    assert_eq!(metric(&reloader, EVICTED).await, desired as f64);
    assert_eq!(metric(&reloader, BLOCKED).await + metric(&reloader, FAILED).await, 0.0);
    assert_eq!(metric(&reloader, RESTARTS_DONE).await, 1.0);
    eprintln!("{kind} under {strategy}: {desired} pods restarted one by one in {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn j70_on_delete_statefulset_restarts_pod_by_pod_env_vars() {
    every_pod_restarted_once(Kind::StatefulSet, Strategy::EnvVars).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn j70_on_delete_statefulset_restarts_pod_by_pod_annotations() {
    every_pod_restarted_once(Kind::StatefulSet, Strategy::Annotations).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn j71_on_delete_daemonset_restarts_each_node_pod_once() {
    every_pod_restarted_once(Kind::DaemonSet, Strategy::EnvVars).await;
}

/// J72: a PodDisruptionBudget that allows no disruption holds the restart: every eviction is
/// refused (429, counted as blocked and retried) and no pod is replaced; once the budget allows
/// one disruption the restart runs to the end, one pod at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn j72_a_disruption_budget_holds_the_restart_until_relaxed() {
    let env = TestEnv::new().await;
    let TestEnv { ns, client, resources, .. } = &env;
    let settings = ResourceRef::configmap("settings");
    resources.create(&settings, &[("level", "1")]).await.unwrap();
    let (web, desired) = OnDelete::statefulset("web", 2, "settings").evict().create(client, ns.name()).await;
    let budgets: Api<PodDisruptionBudget> = ns.api(client);
    let budget = serde_json::from_value(json!({
        "metadata": { "name": "web" },
        "spec": { "minAvailable": desired, "selector": { "matchLabels": { "app": "web" } } },
    }))
    .unwrap();
    budgets.create(&PostParams::default(), &budget).await.unwrap();
    wait_for_budget(&budgets, desired, 0).await;
    let pods = PodWatch::start(client, ns.name(), "web", desired).await;
    let originals = pods.history().live_names();
    let reloader = start_reloader(&env, Strategy::EnvVars, &[FLAG]).await;

    let hash = resources.update_data(&settings, &[("level", "2")]).await.unwrap();
    web.wait_for_marker(client, &settings, Strategy::EnvVars, &hash, REACTION).await.unwrap();
    let first_blocked = wait_until("an eviction refused by the budget", REACTION, || async {
        let blocked = metric(&reloader, BLOCKED).await;
        let refused = evictions_refused(client).await;
        if blocked > 0.0 {
            Ok(blocked)
        } else {
            Err(NotYet::because(format!("none counted blocked; kube-apiserver refused {refused} evictions")))
        }
    })
    .await
    .unwrap();
    let refused_before = evictions_refused(client).await;
    tokio::time::sleep(EVICTOR_LOOKS).await;
    let held = pods.history();
    assert!(held.deleted.is_empty(), "a pod went despite the budget: {:?}", held.deleted);
    assert_eq!(held.live_names(), originals);
    assert_eq!(metric(&reloader, EVICTED).await, 0.0);
    let retried = metric(&reloader, BLOCKED).await - first_blocked;
    let refused = evictions_refused(client).await - refused_before;
    assert!(
        retried >= 2.0 && refused >= 2,
        "while the budget holds, the eviction is tried again every 2 s: {retried} more counted blocked, \
         {refused} more refused by kube-apiserver in {EVICTOR_LOOKS:?}"
    );
    assert_eq!(progress(client, &web).await, None, "no eviction, no progress recorded");
    assert!(event_messages(client, &web, POD_EVICTED).await.is_empty());

    let relax = json!({ "spec": { "minAvailable": desired - 1 } });
    budgets.patch("web", &PatchParams::default(), &Patch::Merge(&relax)).await.unwrap();
    let done = wait_for_progress(client, &web, "done").await;
    let history = pods
        .wait_for("every pod replaced", REACTION, |h| {
            h.all_replaced(&originals, desired, &settings, Strategy::EnvVars, &hash)
        })
        .await;
    assert_replaced_once(&history, &originals, &done);
    assert_eq!(history.evicted_names(), ["web-1", "web-0"]);
    let messages = wait_for_events(client, &web, POD_EVICTED, desired).await;
    assert_eq!(messages, messages_for(&history.evicted_names()));
    assert_eq!(metric(&reloader, EVICTED).await, desired as f64);
    assert_eq!(metric(&reloader, RESTARTS_DONE).await, 1.0);
    let blocked = metric(&reloader, BLOCKED).await;
    eprintln!("J72: {blocked} evictions refused by the budget before it was relaxed");
}

/// Waits until the disruption controller has computed the budget for the current spec: every
/// pod counted healthy and `allowed` disruptions.
async fn wait_for_budget(budgets: &Api<PodDisruptionBudget>, pods: usize, allowed: i32) {
    wait_until("the disruption controller to compute the budget", REACTION, || async {
        let budget = budgets.get("web").await?;
        let status = budget.status.unwrap_or_default();
        let computed = status.observed_generation == budget.metadata.generation
            && status.expected_pods == pods as i32
            && status.current_healthy == pods as i32
            && status.disruptions_allowed == allowed;
        if computed { Ok(()) } else { Err(NotYet::because(format!("{status:?}"))) }
    })
    .await
    .unwrap_or_else(|error| panic!("{error}"));
}

/// J73: a replacement that never becomes Ready (its template asks for a node that does not exist)
/// stops the restart after `reloader.dev/ready-timeout`: one pod evicted, a Warning
/// `EvictionStopped` Event, the progress `stopped`, the outcome counted, and no further eviction
/// afterwards: the other pods keep running as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn j73_a_replacement_never_ready_stops_the_restart_after_the_timeout() {
    let env = TestEnv::new().await;
    let TestEnv { ns, client, resources, .. } = &env;
    let settings = ResourceRef::configmap("settings");
    resources.create(&settings, &[("level", "1")]).await.unwrap();
    let (web, desired) = OnDelete::statefulset("web", 3, "settings")
        .evict()
        .annotation(READY_TIMEOUT, "5s")
        .create(client, ns.name())
        .await;
    let pods = PodWatch::start(client, ns.name(), "web", desired).await;
    let originals = pods.history().live_names();
    // OnDelete: the running pods stay; only a pod created from now on asks for the missing node.
    let stranded =
        json!({ "spec": { "template": { "spec": { "nodeSelector": { NO_SUCH_NODE: "true" } } } } });
    let statefulsets: Api<StatefulSet> = ns.api(client);
    statefulsets.patch("web", &PatchParams::default(), &Patch::Merge(&stranded)).await.unwrap();
    let reloader = start_reloader(&env, Strategy::EnvVars, &[FLAG]).await;

    let hash = resources.update_data(&settings, &[("level", "2")]).await.unwrap();
    web.wait_for_marker(client, &settings, Strategy::EnvVars, &hash, REACTION).await.unwrap();
    let stopped_events = wait_for_events(client, &web, EVICTION_STOPPED, 1).await;
    let stopped = wait_for_progress(client, &web, "stopped").await;
    assert_eq!(stopped.evicted, 1, "{stopped:?}");
    let events = events_with(client, &web, EVICTION_STOPPED).await;
    let [event] = events.as_slice() else { panic!("one EvictionStopped Event: {events:#?}") };
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let stopped_at = event.first_timestamp.as_ref().map(|t| t.0.as_second()).expect("firstTimestamp");
    assert!(
        stopped_at - stopped.last_eviction_at >= 5,
        "stopped {}s after the eviction, before the 5s timeout: {stopped_events:?}",
        stopped_at - stopped.last_eviction_at
    );
    assert_eq!(metric(&reloader, RESTARTS_STOPPED).await, 1.0);
    let log = reloader.log_text();
    let warned =
        log.lines().any(|line| line.contains("WARN") && line.contains("a replacement pod is not Ready"));
    assert!(warned, "no warning logged:\n{log}");

    // Nothing more is evicted for these markers.
    tokio::time::sleep(EVICTOR_LOOKS).await;
    let history = pods.history();
    assert_eq!(history.evicted_names(), ["web-2"], "only the first pod was evicted");
    assert_eq!(history.deleted, history.evicted, "every pod that went was evicted");
    let kept: BTreeMap<String, String> =
        originals.iter().filter(|(_, n)| *n != "web-2").map(clone_pair).collect();
    let still: BTreeMap<String, String> =
        history.live_names().into_iter().filter(|(uid, _)| originals.contains_key(uid)).collect();
    assert_eq!(still, kept, "web-0 and web-1 keep running as they were");
    let pending = replacements(&history, &originals);
    assert_eq!(pending.into_iter().collect::<Vec<_>>(), ["web-2"], "web-2's replacement waits for a node");
    assert_eq!(history.most_unavailable, 1, "{}", history.worst_moment);
    assert_eq!(metric(&reloader, EVICTED).await, 1.0);
    assert_eq!(progress(client, &web).await, Some(stopped.clone()), "the progress stays stopped");
    assert_eq!(event_messages(client, &web, EVICTION_STOPPED).await.len(), 1, "stopped once");
    assert_eq!(event_messages(client, &web, POD_EVICTED).await, [evicted_message("web-2", 1)]);
}

fn clone_pair((uid, name): (&String, &String)) -> (String, String) {
    (uid.clone(), name.clone())
}

/// J74: the leader of two HA replicas is killed (SIGKILL) after the first eviction of a
/// four-pod restart; the other replica takes the Lease and continues the same restart from the
/// progress on the workload: every original pod is replaced exactly once, no replacement is
/// evicted, the progress keeps its start and ends `done` with four evictions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn j74_a_new_leader_continues_the_restart_where_the_old_one_stopped() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let settings = ResourceRef::configmap("settings");
    resources.create(&settings, &[("level", "1")]).await.unwrap();
    let (web, desired) = OnDelete::statefulset("web", 4, "settings").evict().create(client, ns.name()).await;
    let pods = PodWatch::start(client, ns.name(), "web", desired).await;
    let originals = pods.history().live_names();
    let names = ["r1", "r2"];
    let mut replicas = start_replicas(plane, ns.name(), &names, Timings::FAST, &[FLAG]).await;
    let all: Vec<_> = replicas.iter().collect();
    let first = wait_for_single_leader(client, ns.name(), &all, &names, REACTION).await.unwrap();
    let standby = 1 - first;

    let hash = resources.update_data(&settings, &[("level", "2")]).await.unwrap();
    web.wait_for_marker(client, &settings, Strategy::EnvVars, &hash, REACTION).await.unwrap();
    // Killed once the first eviction is recorded (progress and Event), within the 2 s the evictor
    // then waits before it looks again: no eviction of the old leader goes unrecorded.
    let deadline = Instant::now() + REACTION;
    let first_recorded = loop {
        if let Some(recorded) = progress(client, &web).await
            && !event_messages(client, &web, POD_EVICTED).await.is_empty()
        {
            break recorded;
        }
        assert!(Instant::now() < deadline, "no first eviction recorded");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let old_leader_evictions = metric(&replicas[first], EVICTED).await;
    replicas[first].kill();
    assert_eq!(
        (first_recorded.evicted, old_leader_evictions),
        (1, 1.0),
        "the old leader was to be killed after its first eviction: {first_recorded:?}"
    );
    assert_eq!(metric(&replicas[standby], EVICTED).await, 0.0, "the standby evicted");

    wait_for_holder(client, ns.name(), "the standby to lead", REACTION, |h| h == names[standby])
        .await
        .unwrap();
    let done = wait_for_progress(client, &web, "done").await;
    let history = pods
        .wait_for("every pod replaced", REACTION, |h| {
            h.all_replaced(&originals, desired, &settings, Strategy::EnvVars, &hash)
        })
        .await;
    assert_replaced_once(&history, &originals, &done);
    assert_eq!(history.evicted_names(), ["web-3", "web-2", "web-1", "web-0"]);
    assert_eq!(
        (&done.target, done.started_at),
        (&first_recorded.target, first_recorded.started_at),
        "the new leader continued the old leader's restart"
    );
    let messages = wait_for_events(client, &web, POD_EVICTED, desired).await;
    assert_eq!(messages, messages_for(&history.evicted_names()));
    assert_eq!(metric(&replicas[standby], EVICTED).await, 3.0, "the new leader evicted the other three");
    assert_eq!(metric(&replicas[standby], RESTARTS_DONE).await, 1.0);
}

/// J75: the marker is written, and no pod evicted, when the workload has not opted in (with the
/// flag) or the flag is off (with the opt-in). Then reloader restarted with the flag picks up the
/// opted-in workload whose pods lag its template and restarts it, and still not the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn j75_without_the_annotation_or_the_flag_no_pod_is_evicted() {
    let env = TestEnv::new().await;
    let TestEnv { ns, client, resources, .. } = &env;
    let plain_config = ResourceRef::configmap("plain-config");
    let opted_config = ResourceRef::configmap("opted-config");
    resources.create(&plain_config, &[("level", "1")]).await.unwrap();
    resources.create(&opted_config, &[("level", "1")]).await.unwrap();
    let (plain, desired) = OnDelete::statefulset("plain", 2, "plain-config").create(client, ns.name()).await;
    let (opted, _) =
        OnDelete::statefulset("opted", 2, "opted-config").evict().create(client, ns.name()).await;
    let plain_pods = PodWatch::start(client, ns.name(), "plain", desired).await;
    let opted_pods = PodWatch::start(client, ns.name(), "opted", desired).await;
    let plain_originals = plain_pods.history().live_names();
    let opted_originals = opted_pods.history().live_names();

    // The flag, no opt-in.
    let with_flag = start_reloader(&env, Strategy::EnvVars, &[FLAG]).await;
    let hash = resources.update_data(&plain_config, &[("level", "2")]).await.unwrap();
    plain.wait_for_marker(client, &plain_config, Strategy::EnvVars, &hash, REACTION).await.unwrap();
    tokio::time::sleep(EVICTOR_LOOKS).await;
    assert_eq!(metric(&with_flag, EVICTED).await, 0.0);
    drop(with_flag);

    // The opt-in, no flag.
    let without_flag = start_reloader(&env, Strategy::EnvVars, &[]).await;
    let opted_hash = resources.update_data(&opted_config, &[("level", "2")]).await.unwrap();
    opted.wait_for_marker(client, &opted_config, Strategy::EnvVars, &opted_hash, REACTION).await.unwrap();
    tokio::time::sleep(EVICTOR_LOOKS).await;
    assert_eq!(metric(&without_flag, EVICTED).await, 0.0);
    drop(without_flag);
    for (workload, pods, originals) in
        [(&plain, &plain_pods, &plain_originals), (&opted, &opted_pods, &opted_originals)]
    {
        let history = pods.history();
        assert!(history.deleted.is_empty(), "{workload}: pods evicted: {:?}", history.deleted);
        assert_eq!(&history.live_names(), originals, "{workload}: the pods keep their uids");
        assert_eq!(progress(client, workload).await, None, "{workload}");
        assert!(event_messages(client, workload, POD_EVICTED).await.is_empty(), "{workload}");
    }

    // The control: with the flag, the opted-in workload's pods lag its template and are
    // restarted; the other's lag too and are left alone.
    let restarted = start_reloader(&env, Strategy::EnvVars, &[FLAG]).await;
    let done = wait_for_progress(client, &opted, "done").await;
    let history = opted_pods
        .wait_for("the opted-in pods replaced", REACTION, |h| {
            h.all_replaced(&opted_originals, desired, &opted_config, Strategy::EnvVars, &opted_hash)
        })
        .await;
    assert_replaced_once(&history, &opted_originals, &done);
    assert_eq!(metric(&restarted, EVICTED).await, desired as f64);
    let plain_history = plain_pods.history();
    assert!(plain_history.deleted.is_empty(), "not opted in, yet evicted: {:?}", plain_history.deleted);
    assert_eq!(plain_history.live_names(), plain_originals);
}
