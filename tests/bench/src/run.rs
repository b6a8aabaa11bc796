//! One benchmark run: a fresh control plane, the data set grown scale by scale, each scenario for
//! each controller in turn (never two controllers at once), then the report.

use std::path::Path;
use std::time::Instant;

use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::dataset::{DataSet, Sizes};
use super::procfs::Machine;
use super::report::Report;
use super::rows::{self, Measurements, MemoryAtScale, Outcome, PerSubject};
use super::scenarios::startup::{StartupFixture, StartupSample};
use super::scenarios::{coalesce, failover, floor, latency, sidecar};
use super::subject::{Flavour, STAKATER_UNAVAILABLE, Subject, version_of};
use super::{BenchError, BenchOptions, Plan, identity};
use reloader_harness::{ControlPlane, PlaneOptions};

/// Runs every scenario and returns the report (scenarios that failed carry their error).
pub async fn run(options: &BenchOptions) -> Result<Report, BenchError> {
    let began = Instant::now();
    let date = Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let plan = options.plan();
    let log_dir = options.log_dir.as_path();
    std::fs::create_dir_all(log_dir)
        .map_err(|source| BenchError::Io { context: format!("creating {}", log_dir.display()), source })?;
    let ours = Subject { flavour: Flavour::Ours, binary: options.binary.clone() };
    let stakater = options
        .stakater
        .clone()
        .map(|binary| Subject { flavour: Flavour::Stakater, binary })
        .ok_or_else(|| STAKATER_UNAVAILABLE.to_owned());

    say(began, "starting the control plane");
    let plane = ControlPlane::start(PlaneOptions::default()).await?;
    identity::set_up(&plane).await?;
    let kubernetes = plane.client().apiserver_version().await?.git_version;
    let measurements = measure(&plane, options, &plan, &ours, stakater.as_ref(), began).await?;
    let runtime_seconds = began.elapsed().as_secs_f64();
    if options.hold {
        hold(&plane, began).await?;
    }
    drop(plane);

    let (scenarios, m1_points) = rows::build(&measurements);
    Ok(Report {
        date,
        runtime_seconds,
        machine: Machine::describe(),
        versions: json!({
            "kubernetes": kubernetes,
            "ours": version_of(&options.binary),
            "stakater": options.stakater.as_deref().map(|b| version_of(b).unwrap_or_else(|| b.display().to_string())),
        }),
        options: json!({
            "small": options.small,
            "scales": options.scales,
            "repeat": options.repeat,
            "binary": options.binary,
            "stakater": options.stakater,
            "m1_full_objects": Sizes::FULL.objects(),
        }),
        stakater: json!({ "available": stakater.is_ok(), "reason": stakater.as_ref().err() }),
        scenarios,
        m1_points,
    })
}

async fn measure(
    plane: &ControlPlane,
    options: &BenchOptions,
    plan: &Plan,
    ours: &Subject,
    stakater: Result<&Subject, &String>,
    began: Instant,
) -> Result<Measurements, BenchError> {
    let log_dir = options.log_dir.as_path();
    let client = plane.client();
    let mut dataset = DataSet::new(client.clone()).await?;
    let mut fixture = StartupFixture::create(&client).await?;
    let mut memory = Vec::with_capacity(options.scales.len());
    for &scale in &options.scales {
        let took = dataset.grow_to(Sizes::scaled(scale)).await?;
        let objects = dataset.sizes().objects() + 2;
        say(began, &format!("M1/S1 at scale {scale}: {objects} objects (created in {took:.1?})"));
        let ours_samples = startups(&mut fixture, plane, ours, log_dir, plan, options.repeat).await;
        let stakater_samples = match stakater {
            Ok(subject) => startups(&mut fixture, plane, subject, log_dir, plan, options.repeat).await,
            Err(reason) => Err(reason.clone()),
        };
        let floor = floor::binary_next_to(&ours.binary);
        let floor_samples = floor_starts(plane, &floor, log_dir, plan, options.repeat).await;
        memory.push(MemoryAtScale {
            scale,
            objects,
            ours: ours_samples,
            stakater: stakater_samples,
            floor: floor_samples,
        });
    }

    if options.memory_only {
        return Ok(Measurements {
            memory,
            floor: not_run(),
            latency: PerSubject { ours: not_run(), stakater: not_run() },
            coalesce: PerSubject { ours: not_run(), stakater: not_run() },
            failover: PerSubject { ours: not_run(), stakater: not_run() },
            sidecar: not_run(),
            lease: plan.lease,
        });
    }

    say(began, "L1 floor: a minimal watch-then-patch client");
    let floor = latency::floor(plane, plan).await.map_err(|e| e.to_string());

    say(began, "L1, F1, A1");
    let latency = PerSubject {
        ours: latency::run(plane, ours, log_dir, plan, options.repeat).await.map_err(|e| e.to_string()),
        stakater: match stakater {
            Ok(subject) => latency::run(plane, subject, log_dir, plan, options.repeat).await.map_err(failed),
            Err(reason) => Err(reason.clone()),
        },
    };

    say(began, "C1 coalescing");
    let coalesce = PerSubject {
        ours: coalesce::run(plane, ours, log_dir, plan).await.map_err(|e| e.to_string()),
        stakater: match stakater {
            Ok(subject) => coalesce::run(plane, subject, log_dir, plan).await.map_err(failed),
            Err(reason) => Err(reason.clone()),
        },
    };

    say(began, "H1 fail-over (3 replicas, leader killed)");
    let failover = PerSubject {
        ours: failover::run(plane, ours, log_dir, plan, options.repeat).await.map_err(|e| e.to_string()),
        stakater: match stakater {
            Ok(subject) => failover::run(plane, subject, log_dir, plan, options.repeat).await.map_err(failed),
            Err(reason) => Err(reason.clone()),
        },
    };

    say(began, "P1 sidecar propagation");
    let sidecar = sidecar::run(plane, &ours.binary, log_dir, plan).await.map_err(|e| e.to_string());

    say(began, "done measuring");
    Ok(Measurements { memory, floor, latency, coalesce, failover, sidecar, lease: plan.lease })
}

/// `repeat` starts of `subject` at the current data set size.
async fn startups(
    fixture: &mut StartupFixture,
    plane: &ControlPlane,
    subject: &Subject,
    log_dir: &Path,
    plan: &Plan,
    repeat: usize,
) -> Outcome<Vec<StartupSample>> {
    let mut samples = Vec::with_capacity(repeat);
    for _ in 0..repeat {
        let sample =
            fixture.measure(plane, subject, log_dir, plan).await.map_err(|e| match subject.flavour {
                Flavour::Ours => e.to_string(),
                Flavour::Stakater => failed(e),
            })?;
        samples.push(sample);
    }
    Ok(samples)
}

/// `repeat` starts of the process floor at the current data set size.
async fn floor_starts(
    plane: &ControlPlane,
    binary: &Path,
    log_dir: &Path,
    plan: &Plan,
    repeat: usize,
) -> Outcome<Vec<StartupSample>> {
    let mut samples = Vec::with_capacity(repeat);
    for _ in 0..repeat {
        let run = FLOOR_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        samples.push(floor::measure(plane, binary, log_dir, plan, run).await.map_err(|e| e.to_string())?);
    }
    Ok(samples)
}

/// Numbers the floor's log files across sizes.
static FLOOR_RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);

/// Waits for SIGINT with the plane up, naming the kubeconfigs to profile a controller with.
async fn hold(plane: &ControlPlane, began: Instant) -> Result<(), BenchError> {
    let account = identity::kubeconfig(plane).await?;
    say(began, &format!("holding the plane: export KUBECONFIG={}", plane.kubeconfig_path().display()));
    say(began, &format!("the controllers' identity (token valid 1 h): {}", account.path().display()));
    say(began, "SIGINT (Ctrl-C) ends the hold");
    tokio::signal::ctrl_c()
        .await
        .map_err(|source| BenchError::Io { context: "waiting for SIGINT".into(), source })
}

/// A scenario skipped by `--memory-only`.
fn not_run<T>() -> Outcome<T> {
    Err("not run (--memory-only)".into())
}

fn failed(error: BenchError) -> String {
    format!("failed: {error}")
}

fn say(began: Instant, what: &str) {
    eprintln!("[bench {:>6.1}s] {what}", began.elapsed().as_secs_f64());
}
