//! U1, what a controller burns: CPU seconds (`utime + stime`) at idle on M1's data set over
//! `Plan::idle` (5 minutes), then per 1,000 reloads under L1's load (the same pairs, pace and
//! count as L1, in a namespace of its own), with kube-apiserver's cost during that load (K1).
//!
//! Each controller's turn begins on a kube-apiserver restarted and quiet, as its start-up windows
//! do: Go keeps the heap a burst grew, so otherwise the first controller measured would pay for
//! the growth of everything before it, and the second would run inside that heap.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use super::apiserver::{ApiServerCost, ApiServerWindow, restart_apiserver};
use super::latency::L1_INTERVAL;
use super::pairs::{Annotated, create_pairs, latencies_ms, paced_updates, resolve};
use crate::observer::WorkloadObserver;
use crate::procfs;
use crate::report::{ScenarioResult, Target};
use crate::rows::{MIB, PerSubject, figure};
use crate::subject::{Controller, Launch, Subject};
use crate::{BenchError, Plan};
use reloader_harness::ControlPlane;

const START_TIMEOUT: Duration = Duration::from_secs(300);
const CHANGE_TIMEOUT: Duration = Duration::from_secs(120);

/// One controller's CPU use.
#[derive(Debug, Clone, Serialize)]
pub struct CpuOutcome {
    /// CPU seconds used while nothing changed, and over how long.
    pub idle_cpu_seconds: f64,
    pub idle_seconds: f64,
    /// CPU seconds from the first L1 update to the quiet time after the last reload.
    pub load_cpu_seconds: f64,
    /// Reloads seen by the benchmark's watch during the load.
    pub reloads: usize,
    /// kube-apiserver during the load.
    pub load_apiserver: ApiServerCost,
}

impl CpuOutcome {
    /// Idle CPU seconds per 5 minutes, whatever the window was.
    pub fn idle_per_five_minutes(&self) -> f64 {
        self.idle_cpu_seconds / self.idle_seconds.max(f64::EPSILON) * 300.0
    }

    pub fn per_thousand_reloads(&self) -> Option<f64> {
        self.per_reload(self.load_cpu_seconds * 1000.0)
    }

    fn per_reload(&self, total: f64) -> Option<f64> {
        (self.reloads > 0).then(|| total / self.reloads as f64)
    }
}

/// Starts `subject` on the data set as it stands, measures idle then L1's load, and stops it.
pub async fn run(
    plane: &ControlPlane,
    subject: &Subject,
    log_dir: &Path,
    plan: &Plan,
) -> Result<CpuOutcome, BenchError> {
    restart_apiserver(plane).await?;
    let client = plane.client();
    let pairs =
        create_pairs(&client, &format!("u1-{}", subject.label()), plan.l1_pairs, false, Annotated::Auto)
            .await?;
    let observer = WorkloadObserver::start(client.clone(), &pairs.namespace).await?;
    let mut controller = subject.start(plane, log_dir, &Launch::named("u1")).await?;
    controller.wait_ready(START_TIMEOUT).await?;
    tokio::time::sleep(plan.settle).await;

    let idle_began = (Instant::now(), cpu(&controller)?);
    tokio::time::sleep(plan.idle).await;
    let idle_ended = (Instant::now(), cpu(&controller)?);

    let window = ApiServerWindow::open(plane).await?;
    let load_began = cpu(&controller)?;
    let (updates, changes) = controller
        .while_alive(async {
            let updates =
                paced_updates(&client, &pairs, &observer, 0..plan.l1_updates, L1_INTERVAL, "u1").await?;
            let changes = resolve(&observer, &updates, CHANGE_TIMEOUT).await;
            Ok::<_, BenchError>((updates, changes))
        })
        .await??;
    tokio::time::sleep(plan.quiet).await;
    let load_ended = cpu(&controller)?;
    let load_apiserver = window.close(plane).await?;
    controller.kill();

    Ok(CpuOutcome {
        idle_cpu_seconds: idle_ended.1 - idle_began.1,
        idle_seconds: idle_ended.0.duration_since(idle_began.0).as_secs_f64(),
        load_cpu_seconds: load_ended - load_began,
        reloads: latencies_ms(&updates, &changes).len(),
        load_apiserver,
    })
}

fn cpu(controller: &Controller) -> Result<f64, BenchError> {
    procfs::cpu_seconds(controller.pid())
        .ok_or_else(|| BenchError::measure(format!("the controller exited:\n{}", controller.log_tail(20))))
}

/// U1's rows, and K1's during the load.
pub fn rows(cpu: &PerSubject<CpuOutcome>) -> Vec<ScenarioResult> {
    let detail = json!({ "ours": cpu.ours.as_ref().ok(), "stakater": cpu.stakater.as_ref().ok() });
    let rows = [
        figure(
            cpu,
            "U1-per-1000-reloads",
            "U1 CPU seconds per 1,000 reloads (L1's load)",
            "CPU s",
            Target::Informational,
            CpuOutcome::per_thousand_reloads,
        ),
        figure(
            cpu,
            "U1-idle",
            "U1 CPU seconds per 5 minutes idle, M1",
            "CPU s",
            Target::Informational,
            |o| Some(o.idle_per_five_minutes()),
        ),
        figure(
            cpu,
            "K1-l1-requests-per-reload",
            "K1 kube-apiserver requests per reload (L1's load)",
            "requests",
            Target::Informational,
            |o| o.per_reload(o.load_apiserver.total_requests() as f64),
        ),
        figure(
            cpu,
            "K1-l1-allocated-per-reload",
            "K1 kube-apiserver heap allocated per reload (L1's load)",
            "KiB",
            Target::Informational,
            |o| o.per_reload(o.load_apiserver.allocated_bytes as f64 / 1024.0),
        ),
        figure(
            cpu,
            "K1-l1-peak-rise",
            "K1 kube-apiserver peak RSS rise (L1's load)",
            "MiB",
            Target::Informational,
            |o| Some(o.load_apiserver.peak_rise_bytes() as f64 / MIB),
        ),
    ];
    rows.into_iter().map(|row| row.detail(detail.clone())).collect()
}
