//! L1 (sequential reload latency), F1 (fan-out to many Deployments) and A1 (the API requests the
//! controller made meanwhile), from one start of one controller; and L1's physical floor, a
//! minimal watch-then-patch client timed the same way.

use std::path::Path;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde::Serialize;
use serde_json::json;

use super::pairs::{Annotated, Pairs, create_pairs, latencies_ms, paced_updates, resolve, update_configmap};
use crate::identity::RequestCounts;
use crate::observer::WorkloadObserver;
use crate::stats::{Latencies, Spread};
use crate::subject::{Launch, Subject};
use crate::{BenchError, Plan};
use reloader_harness::ControlPlane;

/// docs/benchmark.md L1: one update every 250 ms.
pub const L1_INTERVAL: Duration = Duration::from_millis(250);
const CHANGE_TIMEOUT: Duration = Duration::from_secs(120);
const START_TIMEOUT: Duration = Duration::from_secs(300);

/// API requests during a window, and the workload writes the window needed.
#[derive(Debug, Clone, Serialize)]
pub struct ApiWindow {
    pub requests: RequestCounts,
    /// Workloads whose ConfigMap changed (each needed exactly one write).
    pub writes_needed: usize,
    /// ConfigMap updates made (the events the controller had to handle).
    pub events: usize,
}

/// What one controller did in L1 and F1.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyOutcome {
    /// One per repetition of L1's updates.
    pub l1_rounds: Vec<Latencies>,
    /// Seconds from each F1 update to the last of its Deployments changed.
    pub f1_seconds: Vec<f64>,
    pub f1_spread: Option<Spread>,
    /// Deployments F1 never saw change, summed over the repetitions.
    pub f1_missed: usize,
    pub l1_api: ApiWindow,
    pub f1_api: ApiWindow,
}

/// Creates L1's and F1's objects for `subject`, starts it, runs both, and stops it.
pub async fn run(
    plane: &ControlPlane,
    subject: &Subject,
    log_dir: &Path,
    plan: &Plan,
    repeat: usize,
) -> Result<LatencyOutcome, BenchError> {
    let client = plane.client();
    let l1 = create_pairs(&client, &format!("l1-{}", subject.label()), plan.l1_pairs, false, Annotated::Auto)
        .await?;
    let f1 =
        create_pairs(&client, &format!("f1-{}", subject.label()), plan.f1_workloads, true, Annotated::Auto)
            .await?;
    let l1_observer = WorkloadObserver::start(client.clone(), &l1.namespace).await?;
    let f1_observer = WorkloadObserver::start(client.clone(), &f1.namespace).await?;

    let mut controller = subject.start(plane, log_dir, &Launch::named("l1-f1")).await?;
    controller.wait_ready(START_TIMEOUT).await?;
    tokio::time::sleep(plan.quiet).await;

    let (before, l1_rounds, after_l1, (f1_seconds, f1_missed), after_f1) = controller
        .while_alive(async {
            let before = RequestCounts::read(&client).await?;
            let l1_rounds = l1_rounds(&client, &l1, &l1_observer, plan, repeat, "l1").await?;
            let after_l1 = RequestCounts::read(&client).await?;
            let f1 = fan_out(&client, &f1, &f1_observer, repeat, plan).await?;
            let after_f1 = RequestCounts::read(&client).await?;
            Ok::<_, BenchError>((before, l1_rounds, after_l1, f1, after_f1))
        })
        .await??;
    controller.kill();
    let l1_updates: usize = l1_rounds.iter().map(|round| round.expected).sum();

    Ok(LatencyOutcome {
        l1_rounds,
        f1_spread: Spread::of(&f1_seconds),
        f1_seconds,
        f1_missed,
        l1_api: ApiWindow {
            requests: after_l1.since(&before),
            writes_needed: l1_updates,
            events: l1_updates,
        },
        f1_api: ApiWindow {
            requests: after_f1.since(&after_l1),
            writes_needed: plan.f1_workloads * repeat,
            events: repeat,
        },
    })
}

/// L1's updates in `repeat` rounds of `plan.l1_updates` (at least one), each followed by a quiet
/// pause: the latencies of each round, so its percentiles get a median and a spread.
async fn l1_rounds(
    client: &Client,
    pairs: &Pairs,
    observer: &WorkloadObserver,
    plan: &Plan,
    repeat: usize,
    tag: &str,
) -> Result<Vec<Latencies>, BenchError> {
    let mut rounds = Vec::with_capacity(repeat.max(1));
    for round in 0..repeat.max(1) {
        let first = round * plan.l1_updates;
        let indices = first..first + plan.l1_updates;
        let updates = paced_updates(client, pairs, observer, indices, L1_INTERVAL, tag).await?;
        let changes = resolve(observer, &updates, CHANGE_TIMEOUT).await;
        rounds.push(Latencies::of(&latencies_ms(&updates, &changes), updates.len()));
        tokio::time::sleep(plan.quiet).await;
    }
    Ok(rounds)
}

/// F1: `repeat` updates of the shared ConfigMap, each timed to the last Deployment changed.
async fn fan_out(
    client: &Client,
    pairs: &Pairs,
    observer: &WorkloadObserver,
    repeat: usize,
    plan: &Plan,
) -> Result<(Vec<f64>, usize), BenchError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &pairs.namespace);
    let mut seconds = Vec::with_capacity(repeat);
    let mut missed = 0;
    for run in 0..repeat {
        let before: Vec<i64> =
            pairs.pairs.iter().map(|(_, workload)| observer.generation(workload)).collect();
        let updated = update_configmap(&api, &pairs.pairs[0].0, &format!("f1-{run}")).await?;
        let deadline = Instant::now() + CHANGE_TIMEOUT;
        let mut last = updated;
        for ((_, workload), generation) in pairs.pairs.iter().zip(before) {
            match observer.wait_changed(workload, generation, deadline).await {
                Some(at) => last = last.max(at),
                None => missed += 1,
            }
        }
        seconds.push(last.duration_since(updated).as_secs_f64());
        tokio::time::sleep(plan.quiet).await;
    }
    Ok((seconds, missed))
}

/// The floor: watch ConfigMaps, and on each change PATCH the Deployment that uses it, nothing
/// else. Timed like L1, with no reloader running.
pub async fn floor(plane: &ControlPlane, plan: &Plan, repeat: usize) -> Result<Vec<Latencies>, BenchError> {
    let client = plane.client();
    let pairs = create_pairs(&client, "bench-floor", plan.l1_pairs, false, Annotated::No).await?;
    let observer = WorkloadObserver::start(client.clone(), &pairs.namespace).await?;
    // Its own client, as a separate controller would have.
    let patcher =
        tokio::spawn(watch_then_patch(Client::try_from(plane.admin_config().clone())?, pairs.clone()));
    // The watch must be established before the first update, or that event would be missed.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rounds = l1_rounds(&client, &pairs, &observer, plan, repeat, "floor").await;
    patcher.abort();
    rounds
}

async fn watch_then_patch(client: Client, pairs: Pairs) {
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &pairs.namespace);
    let deployments: Api<Deployment> = Api::namespaced(client, &pairs.namespace);
    let mut events = std::pin::pin!(watcher(configmaps, watcher::Config::default()).default_backoff());
    while let Some(event) = events.next().await {
        let Ok(watcher::Event::Apply(configmap)) = event else { continue };
        let name = configmap.name_any();
        let Some((_, deployment)) = pairs.pairs.iter().find(|(c, _)| *c == name) else { continue };
        let version = configmap.resource_version().unwrap_or_default();
        let patch = json!({ "spec": { "template": { "metadata": { "annotations": { "bench/config-version": version } } } } });
        let _ = deployments.patch(deployment, &PatchParams::default(), &Patch::Merge(patch)).await;
    }
}
