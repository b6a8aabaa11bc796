//! M1 and S1 from one start: time to ready and to the first reload applied, then the steady
//! resident memory once caches synced and things settled, and the peak since start.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::Api;

use super::pairs::{Annotated, Pairs, create_pairs, update_configmap};
use crate::observer::WorkloadObserver;
use crate::stats::percentile;
use crate::subject::{Controller, Launch, Subject};
use crate::{BenchError, Plan};
use reloader_harness::ControlPlane;

const NAMESPACE: &str = "bench-s1";
/// S1 updates its ConfigMap this often until a reload shows; also the resolution of that figure.
const UPDATE_EVERY: Duration = Duration::from_millis(100);
const START_TIMEOUT: Duration = Duration::from_secs(300);

/// One start of one controller.
#[derive(Debug, Clone, Copy)]
pub struct StartupSample {
    pub ready_seconds: f64,
    pub first_reload_seconds: f64,
    pub steady_bytes: f64,
    pub peak_bytes: f64,
    /// The live heap once synced, where the subject tells it (`floor::live_heap`).
    pub heap_bytes: Option<f64>,
}

/// The Deployment S1 reloads, and a watch on it.
pub struct StartupFixture {
    pairs: Pairs,
    observer: WorkloadObserver,
    runs: usize,
}

impl StartupFixture {
    pub async fn create(client: &Client) -> Result<Self, BenchError> {
        let pairs = create_pairs(client, NAMESPACE, 1, false, Annotated::Auto).await?;
        let observer = WorkloadObserver::start(client.clone(), NAMESPACE).await?;
        Ok(Self { pairs, observer, runs: 0 })
    }

    /// A new watch on the Deployment, after kube-apiserver restarted: the old one may sit in its
    /// reconnect backoff for seconds, and S1 would count them.
    pub async fn watch_again(&mut self, plane: &ControlPlane) -> Result<(), BenchError> {
        self.observer = WorkloadObserver::start(plane.client(), &self.pairs.namespace).await?;
        Ok(())
    }

    /// Starts `subject` as `launch` says (in a cgroup, say), measures, and stops it.
    pub async fn measure_as(
        &mut self,
        plane: &ControlPlane,
        subject: &Subject,
        log_dir: &Path,
        plan: &Plan,
        launch: Launch,
    ) -> Result<StartupSample, BenchError> {
        let started = self.start(plane, subject, log_dir, launch).await?;
        settle(started, subject, plan).await
    }

    /// How the next start is launched by default: named after its run.
    pub fn next_launch(&self) -> Launch {
        Launch::named(format!("m1-{}", self.runs + 1))
    }

    /// The start-up alone: starts `subject` and returns once it is ready and its first reload
    /// applied; [`settle`] measures the rest and stops it.
    pub async fn start(
        &mut self,
        plane: &ControlPlane,
        subject: &Subject,
        log_dir: &Path,
        launch: Launch,
    ) -> Result<Started, BenchError> {
        self.runs += 1;
        let client = plane.client();
        let (configmap, workload) = self.pairs.pairs[0].clone();
        let generation = self.observer.generation(&workload);
        let mut controller = subject.start(plane, log_dir, &launch).await?;
        let started = controller.started();

        let api: Api<ConfigMap> = Api::namespaced(client, &self.pairs.namespace);
        let tag = format!("s1-{}", self.runs);
        let first_reload = async {
            let mut n = 0usize;
            loop {
                if let Some(at) = self.observer.changed_after(&workload, generation) {
                    return Ok(at);
                }
                if started.elapsed() > START_TIMEOUT {
                    return Err(BenchError::measure(format!("no reload within {START_TIMEOUT:?} of start")));
                }
                n += 1;
                update_configmap(&api, &configmap, &format!("{tag}-{n}")).await?;
                tokio::time::sleep(UPDATE_EVERY).await;
            }
        };
        // The first error ends both: a controller that exited is not waited on for its reload.
        let (ready, first_reload) = tokio::try_join!(controller.wait_ready(START_TIMEOUT), first_reload)?;
        Ok(Started {
            controller,
            ready_seconds: ready.duration_since(started).as_secs_f64(),
            first_reload_seconds: first_reload.saturating_duration_since(started).as_secs_f64(),
        })
    }
}

/// A controller past its start-up: ready, its first reload applied.
pub struct Started {
    controller: Controller,
    ready_seconds: f64,
    first_reload_seconds: f64,
}

/// Lets the started controller settle, measures its memory, and stops it.
pub async fn settle(started: Started, subject: &Subject, plan: &Plan) -> Result<StartupSample, BenchError> {
    let Started { mut controller, ready_seconds, first_reload_seconds } = started;
    tokio::time::sleep(plan.settle).await;
    let mut rss = Vec::with_capacity(plan.rss_samples);
    for _ in 0..plan.rss_samples {
        let memory = controller.memory().ok_or_else(|| {
            BenchError::measure(format!(
                "{} exited while settling:\n{}",
                subject.label(),
                controller.log_tail(20)
            ))
        })?;
        rss.push(memory.rss_bytes as f64);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let peak = controller.memory().map(|m| m.peak_bytes as f64).unwrap_or_default();
    let heap_bytes = super::floor::live_heap(&controller, subject.flavour).await;
    controller.kill();
    Ok(StartupSample {
        ready_seconds,
        first_reload_seconds,
        steady_bytes: percentile(&rss, 0.5).unwrap_or_default(),
        peak_bytes: peak,
        heap_bytes,
    })
}
