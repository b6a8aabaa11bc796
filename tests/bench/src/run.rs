//! One benchmark run: a fresh control plane, the data set grown scale by scale, each scenario for
//! each controller in turn (never two controllers at once), then the report.

use std::future::Future;
use std::path::Path;
use std::time::Instant;

use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::dataset::{DataSet, Sizes};
use super::procfs::Machine;
use super::report::Report;
use super::rows::{self, Measurements, MemoryAtScale, Outcome, PerSubject};
use super::scenarios::apiserver::{Start, starts};
use super::scenarios::scale10::{self, M10, ScaleMeasurements};
use super::scenarios::startup::{StartupFixture, StartupSample};
use super::scenarios::{coalesce, cpu, failover, fanout10, floor, latency, sidecar};
use super::subject::{Flavour, STAKATER_UNAVAILABLE, Subject, version_of};
use super::{BenchError, BenchOptions, Plan, Scenarios, identity};
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
    let mut m1_starts = neither(options.scenarios);
    for &scale in &options.scales {
        let took = dataset.grow_to(Sizes::scaled(scale)).await?;
        let objects = dataset.sizes().objects() + 2;
        if matches!(options.scenarios, Scenarios::Latency | Scenarios::Cpu) {
            say(began, &format!("data set at scale {scale}: {objects} objects (created in {took:.1?})"));
            continue;
        }
        say(began, &format!("M1/S1 at scale {scale}: {objects} objects (created in {took:.1?})"));
        m1_starts = starts_of_both(&mut fixture, plane, ours, stakater, log_dir, plan, options.repeat).await;
        let floor = floor::binary_next_to(&ours.binary);
        let floor_samples = floor_starts(plane, &floor, log_dir, plan, options.repeat).await;
        memory.push(MemoryAtScale {
            scale,
            objects,
            ours: samples(&m1_starts.ours),
            stakater: samples(&m1_starts.stakater),
            floor: floor_samples,
        });
    }
    let m1_objects = memory.last().map_or(0, |point| point.objects);

    if options.scenarios == Scenarios::Memory {
        let mut measured = limited(options.scenarios, plan, memory, m1_starts, m1_objects);
        if options.m10 {
            measured.scale.m10 = Some(
                m10(&mut dataset, &mut fixture, plane, plan, ours, stakater, log_dir, options.repeat, began)
                    .await?,
            );
        }
        return Ok(measured);
    }

    if options.scenarios == Scenarios::Cpu {
        let mut measured = limited(options.scenarios, plan, memory, m1_starts, m1_objects);
        measured.scale.cpu = u1(plane, ours, stakater, log_dir, plan, began).await;
        return Ok(measured);
    }

    say(began, "L1 floor: a minimal watch-then-patch client");
    let floor = latency::floor(plane, plan, options.repeat).await.map_err(|e| e.to_string());

    say(began, "L1, F1, A1");
    let latency = PerSubject {
        ours: latency::run(plane, ours, log_dir, plan, options.repeat).await.map_err(|e| e.to_string()),
        stakater: match stakater {
            Ok(subject) => latency::run(plane, subject, log_dir, plan, options.repeat).await.map_err(failed),
            Err(reason) => Err(reason.clone()),
        },
    };

    if options.scenarios == Scenarios::Latency {
        let mut measured = limited(options.scenarios, plan, memory, m1_starts, m1_objects);
        (measured.floor, measured.latency) = (floor, latency);
        return Ok(measured);
    }

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

    let cpu = u1(plane, ours, stakater, log_dir, plan, began).await;

    let m10 = match options.m10 {
        true => Some(
            m10(&mut dataset, &mut fixture, plane, plan, ours, stakater, log_dir, options.repeat, began)
                .await?,
        ),
        false => None,
    };
    let f10 = match options.m10 {
        true => {
            say(began, &format!("F10 fan-out to {} Deployments", plan.f10_workloads));
            let run = |subject: Subject| async move {
                fanout10::run(plane, &subject, log_dir, plan, options.repeat).await
            };
            Some(both(stakater, run, ours).await)
        }
        false => None,
    };

    say(began, "done measuring");
    let scale = ScaleMeasurements { m1_starts, m1_objects, cpu, m10, f10 };
    Ok(Measurements { memory, floor, latency, coalesce, failover, sidecar, lease: plan.lease, scale })
}

/// U1 of both, with K1 during L1's load.
async fn u1(
    plane: &ControlPlane,
    ours: &Subject,
    stakater: Result<&Subject, &String>,
    log_dir: &Path,
    plan: &Plan,
    began: Instant,
) -> PerSubject<cpu::CpuOutcome> {
    say(began, &format!("U1 CPU: idle for {:?} at M1, then L1's load; K1 kube-apiserver's cost", plan.idle));
    both(stakater, |subject| async move { cpu::run(plane, &subject, log_dir, plan).await }, ours).await
}

/// M10: the data set grown to its size, starts of both, and ours inside the chart's memory limit.
#[allow(clippy::too_many_arguments)]
async fn m10(
    dataset: &mut DataSet,
    fixture: &mut StartupFixture,
    plane: &ControlPlane,
    plan: &Plan,
    ours: &Subject,
    stakater: Result<&Subject, &String>,
    log_dir: &Path,
    repeat: usize,
    began: Instant,
) -> Result<M10, BenchError> {
    let took = dataset.grow_to(plan.m10).await?;
    let objects = dataset.sizes().objects() + 2;
    say(began, &format!("M10 at {objects} objects (created in {took:.1?})"));
    let starts = starts_of_both(fixture, plane, ours, stakater, log_dir, plan, repeat).await;
    say(began, "M10 ours inside the chart's memory limit");
    let under_limit =
        scale10::under_limit(fixture, plane, ours, log_dir, plan).await.map_err(|e| e.to_string());
    Ok(M10 { objects, starts, under_limit })
}

/// `run` for ours, then for Stakater when there is one (its failures marked as such).
async fn both<T, F, Fut>(stakater: Result<&Subject, &String>, mut run: F, ours: &Subject) -> PerSubject<T>
where
    F: FnMut(Subject) -> Fut,
    Fut: Future<Output = Result<T, BenchError>>,
{
    let ours = run(ours.clone()).await.map_err(|e| e.to_string());
    let stakater = match stakater {
        Ok(subject) => run(subject.clone()).await.map_err(failed),
        Err(reason) => Err(reason.clone()),
    };
    PerSubject { ours, stakater }
}

/// `repeat` starts of ours, then of Stakater when there is one, at the data set as it stands.
async fn starts_of_both(
    fixture: &mut StartupFixture,
    plane: &ControlPlane,
    ours: &Subject,
    stakater: Result<&Subject, &String>,
    log_dir: &Path,
    plan: &Plan,
    repeat: usize,
) -> PerSubject<Vec<Start>> {
    let ours = starts(fixture, plane, ours, log_dir, plan, repeat).await.map_err(|e| e.to_string());
    let stakater = match stakater {
        Ok(subject) => starts(fixture, plane, subject, log_dir, plan, repeat).await.map_err(failed),
        Err(reason) => Err(reason.clone()),
    };
    PerSubject { ours, stakater }
}

/// The M1/S1 samples of some starts.
fn samples(starts: &Outcome<Vec<Start>>) -> Outcome<Vec<StartupSample>> {
    starts.as_ref().map(|s| s.iter().map(|start| start.sample).collect()).map_err(Clone::clone)
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
/// What a run limited to `scenarios` measured besides `memory`: the rest marked not run.
fn limited(
    scenarios: Scenarios,
    plan: &Plan,
    memory: Vec<MemoryAtScale>,
    m1_starts: PerSubject<Vec<Start>>,
    m1_objects: usize,
) -> Measurements {
    Measurements {
        memory,
        floor: not_run(scenarios),
        latency: neither(scenarios),
        coalesce: neither(scenarios),
        failover: neither(scenarios),
        sidecar: not_run(scenarios),
        lease: plan.lease,
        scale: ScaleMeasurements { m1_starts, m1_objects, cpu: neither(scenarios), m10: None, f10: None },
    }
}

fn neither<T>(scenarios: Scenarios) -> PerSubject<T> {
    PerSubject { ours: not_run(scenarios), stakater: not_run(scenarios) }
}

fn not_run<T>(scenarios: Scenarios) -> Outcome<T> {
    Err(match scenarios {
        Scenarios::All => "not run".into(),
        Scenarios::Memory => "not run (--memory-only)".into(),
        Scenarios::Latency => "not run (--latency-only)".into(),
        Scenarios::Cpu => "not run (--cpu-only)".into(),
    })
}

fn failed(error: BenchError) -> String {
    format!("failed: {error}")
}

fn say(began: Instant, what: &str) {
    eprintln!("[bench {:>6.1}s] {what}", began.elapsed().as_secs_f64());
}
