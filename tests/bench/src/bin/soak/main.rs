//! `hack/soak`: a churn soak of `--enable-ha` replicas on a local control plane (docs/soak.md).
//! For a set time it changes ConfigMaps, Secrets and Deployments at random (changes that need a
//! reload and changes that need none), restarts kube-apiserver and stops replicas with SIGKILL
//! or SIGTERM (restarting them after). Then it checks from the API server that every workload
//! carries exactly the marker of its resources' current data and that the reloads counted equal
//! the reloads needed, that each fault left its trace in the replicas' logs and metrics, and
//! that RSS and open descriptors stayed flat. Prints a summary, writes `latest.json`, and exits
//! 1 when a check fails.

mod churn;
mod faults;
mod model;
mod replicas;
mod rng;
mod trend;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use reloader_bench::procfs::Machine;
use reloader_bench::stats::percentile;
use reloader_bench::version_of;
use reloader_harness::{ControlPlane, PlaneOptions, reloader_binary};
use serde_json::json;

use churn::{Churn, Sizes};
use faults::{Rounds, TraceCheck};
use replicas::{LEADER, Pool};
use rng::Rng;
use trend::{Flatness, RoleTrend, trend};

const NAMESPACE: &str = "soak";
/// The replica not stopped during the first half of the soak (and at least its first
/// [`PROTECTED_AT_LEAST`]), so one lifetime is long enough to judge; started last: a standby.
const PROTECTED_SLOT: usize = 0;
/// Warm-up plus the span a trend needs to be judged ([`Flatness::DEFAULT`]).
const PROTECTED_AT_LEAST: Duration = Duration::from_secs(720);
/// After the churn: how long the last reloads may take to land.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(240);
/// Then quiet, so a late or doubled write shows in the count.
const QUIET: Duration = Duration::from_secs(30);
const POLL_EVERY: Duration = Duration::from_secs(2);

#[derive(Debug, Parser)]
#[command(about = "Churn soak of reloader's HA replicas on a local control plane (docs/soak.md)")]
struct Args {
    /// How long to churn (a Go duration: 2h, 20m, 1h30m).
    #[arg(long, default_value = "2h", value_parser = go_duration)]
    duration: Duration,
    /// Seed of the random choices [default: the clock].
    #[arg(long)]
    seed: Option<u64>,
    /// `--enable-ha` replicas (2-5).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(2..=5))]
    replicas: u8,
    /// Pause between two changes.
    #[arg(long, default_value = "1s", value_parser = go_duration)]
    interval: Duration,
    /// Mean time between two faults (each within ±30 % of it).
    #[arg(long, default_value = "150s", value_parser = go_duration)]
    fault_every: Duration,
    /// RSS and open-descriptor sampling period.
    #[arg(long, default_value = "10s", value_parser = go_duration)]
    sample_every: Duration,
    #[arg(long, default_value_t = 10)]
    configmaps: usize,
    #[arg(long, default_value_t = 10)]
    secrets: usize,
    /// Deployments at the start (the churn keeps between half and one and a half times as many).
    #[arg(long, default_value_t = 30)]
    workloads: usize,
    /// Folder for latest.json and the replicas' logs [default: target/soak].
    #[arg(long)]
    out: Option<PathBuf>,
}

fn go_duration(text: &str) -> Result<Duration, String> {
    reloader_core::duration::parse_go_duration(text).map_err(|e| e.to_string())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<ExitCode> {
    let args = Args::parse();
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_secs())
    });
    let binary = reloader_binary();
    anyhow::ensure!(binary.exists(), "{} is missing (RELOADER_BIN names the binary)", binary.display());
    let out =
        args.out.clone().unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/soak"));
    let log_dir = out.join("logs");
    let _ = std::fs::remove_dir_all(&log_dir);
    std::fs::create_dir_all(&log_dir).with_context(|| format!("creating {}", log_dir.display()))?;
    eprintln!(
        "soak: {} of churn, seed {seed}, {} replicas of {}",
        humanize(args.duration),
        args.replicas,
        binary.display()
    );

    let plane = ControlPlane::start(PlaneOptions { fake_nodes: 1, ..PlaneOptions::default() })
        .await
        .context("starting the control plane")?;
    let client = plane.client();
    let mut namespace = Namespace::default();
    namespace.metadata.name = Some(NAMESPACE.to_owned());
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace).await?;

    let mut rng = Rng::new(seed);
    let sizes = Sizes { configmaps: args.configmaps, secrets: args.secrets, workloads: args.workloads };
    let mut churn =
        Churn::set_up(client.clone(), NAMESPACE, sizes, &mut rng).await.context("creating the data set")?;
    let started = Instant::now();
    let started_utc = utc_now();
    let mut pool = Pool::new(&plane, NAMESPACE, usize::from(args.replicas), &log_dir, started);
    for slot in (0..usize::from(args.replicas)).rev() {
        pool.start(slot).await.with_context(|| format!("starting replica {slot}"))?;
    }

    let mut checks: Vec<TraceCheck> = Vec::new();
    let mut skipped_faults: Vec<&'static str> = Vec::new();
    let mut rounds = Rounds::default();
    let mut next_fault = started + jittered(args.fault_every, &mut rng);
    let protection = PROTECTED_AT_LEAST.max(args.duration / 2);
    let (mut next_poll, mut next_sample) = (started, started);
    let churn_until = started + args.duration;
    let mut last_report = started;
    while Instant::now() < churn_until {
        churn.step(&mut rng).await;
        let now = Instant::now();
        if now >= next_poll {
            if let Err(error) = churn.poll().await {
                eprintln!("soak: reading the Deployments failed: {error:#}");
            }
            for check in &mut checks {
                check.evaluate(&pool, &client).await;
            }
            next_poll = now + POLL_EVERY;
        }
        if now >= next_sample {
            pool.sample().await;
            next_sample = now + args.sample_every;
        }
        pool.restart_due().await;
        if now >= next_fault {
            let kind = rounds.next(&mut rng);
            let protected = (started.elapsed() < protection).then_some(PROTECTED_SLOT);
            match faults::inject(kind, &plane, &mut pool, &client, &mut rng, protected, started).await? {
                Some(check) => {
                    eprintln!("soak: {:>6.0} s  fault {} ({})", check.at, kind.as_label(), check.detail);
                    checks.push(check);
                }
                // Nothing fits now (the protected replica leads).
                None => {
                    skipped_faults.push(kind.as_label());
                    rounds.defer(kind, &mut rng);
                }
            }
            next_fault = Instant::now() + jittered(args.fault_every, &mut rng);
        }
        if now.duration_since(last_report) >= Duration::from_secs(60) {
            last_report = now;
            let t = &churn.model.tally;
            eprintln!(
                "soak: {:>6.0} s  {} changes needing a reload, {} reloads needed, {} pending, {} workloads",
                started.elapsed().as_secs_f64(),
                t.data_changes_needing_reload,
                t.reloads_needed,
                churn.model.pending_count(),
                churn.model.workloads.len()
            );
        }
        tokio::time::sleep(args.interval).await;
    }
    let churned = started.elapsed();

    eprintln!("soak: churn over; restarting stopped replicas, waiting for the last reloads");
    pool.restart_all().await.context("restarting replicas")?;
    let settle_until = Instant::now() + SETTLE_TIMEOUT;
    while churn.model.pending_count() > 0 && Instant::now() < settle_until {
        let _ = churn.poll().await;
        pool.sample().await;
        tokio::time::sleep(POLL_EVERY).await;
    }
    tokio::time::sleep(QUIET).await;
    pool.sample().await;
    for check in &mut checks {
        check.finish(&pool, &client).await;
    }
    let verdict = churn.verify().await.context("reading the end state")?;
    let leaders = leaders(&pool, &client).await;
    let metric_reloads: f64 = pool.lifetimes.iter().map(|l| l.reloads_executed).sum();
    pool.stop_all().await;

    let rule = Flatness::DEFAULT;
    let trends: Vec<_> = pool.lifetimes.iter().map(|l| trend(l, &rule)).collect();
    let traces_missing: Vec<&TraceCheck> = checks.iter().filter(|c| c.passed != Some(true)).collect();
    let flat_failed = trends.iter().filter(|t| t.flat == Some(false)).count();
    let judged = trends.iter().filter(|t| t.flat.is_some()).count();
    let outcomes = [
        ("markers", verdict.wrong_markers == 0),
        ("reload counts", verdict.lost == 0 && verdict.doubled == 0),
        ("fault traces", traces_missing.is_empty()),
        ("one leader at the end", leaders.len() == 1),
        ("RSS and descriptors flat", flat_failed == 0 && judged > 0),
    ];
    let passed = outcomes.iter().all(|(_, ok)| *ok);
    let latencies = &churn.model.reload_seconds;
    let report = json!({
        "started_utc": started_utc,
        "duration_seconds": args.duration.as_secs_f64(),
        "churned_seconds": churned.as_secs_f64(),
        "seed": seed,
        "replicas": args.replicas,
        "binary_version": version_of(&binary),
        "machine": Machine::describe(),
        "sizes": { "configmaps": args.configmaps, "secrets": args.secrets, "workloads": args.workloads,
                   "interval_seconds": args.interval.as_secs_f64(), "fault_every_seconds": args.fault_every.as_secs_f64() },
        "changes": churn.model.tally,
        "verdict": verdict,
        "reloads_executed_metric_sum": metric_reloads,
        "reload_seconds_polled": { "p50": percentile(latencies, 0.5), "p99": percentile(latencies, 0.99),
                                   "max": percentile(latencies, 1.0), "count": latencies.len() },
        "faults": checks,
        "faults_deferred": skipped_faults,
        "leaders_at_end": leaders,
        "flatness_rule": rule,
        "lifetimes": pool.lifetimes.iter().zip(&trends).map(|(l, t)| json!({
            "identity": l.identity, "slot": l.slot, "started_at": l.started_at, "ended_at": l.ended_at,
            "ending": l.ending, "exited_cleanly": l.exited_cleanly, "reloads_executed": l.reloads_executed,
            "trend": t,
        })).collect::<Vec<_>>(),
        "samples": pool.lifetimes.iter().map(|l| json!({ "identity": l.identity, "samples": l.samples })).collect::<Vec<_>>(),
        "checks": outcomes.iter().map(|(name, ok)| json!({ "check": name, "passed": ok })).collect::<Vec<_>>(),
        "passed": passed,
    });
    let json_path = out.join("latest.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&report)? + "\n")
        .with_context(|| format!("writing {}", json_path.display()))?;

    let t = &churn.model.tally;
    println!(
        "soak: churned {} (planned {}), seed {seed}, {} replicas",
        humanize(churned),
        humanize(args.duration),
        args.replicas
    );
    println!(
        "changes: {} data changes needing a reload ({} reloads needed), {} to unused resources, {} identical rewrites, \
         {} metadata-only edits, {} template edits, {} reference edits, {} workloads created, {} deleted, {} churn errors",
        t.data_changes_needing_reload,
        t.reloads_needed,
        t.data_changes_unused,
        t.identical_writes,
        t.metadata_only_edits,
        t.template_edits,
        t.reference_edits,
        t.workloads_created,
        t.workloads_deleted,
        t.churn_errors
    );
    println!(
        "reloads: {} needed, {} counted from generations ({} lost, {} doubled); metric sum across replicas {}; \
         markers {} checked, {} wrong",
        verdict.reloads_needed,
        verdict.reloads_counted,
        verdict.lost,
        verdict.doubled,
        metric_reloads,
        verdict.markers_checked,
        verdict.wrong_markers
    );
    for problem in verdict.problems.iter().take(20) {
        println!("  {problem}");
    }
    println!(
        "reload time as polled (2 s polls): p50 {:.1} s, p99 {:.1} s",
        percentile(latencies, 0.5).unwrap_or(f64::NAN),
        percentile(latencies, 0.99).unwrap_or(f64::NAN)
    );
    println!(
        "faults: {} injected, {} without their trace; deferred (nothing fitting then): {:?}",
        checks.len(),
        traces_missing.len(),
        skipped_faults
    );
    for check in &checks {
        let state = match check.passed {
            Some(true) => format!("trace seen after {:.1} s", check.seen_after.unwrap_or_default()),
            _ => format!("MISSING {:?}", check.missing),
        };
        println!("  {:>6.0} s  {:<18} {:<40} {state}", check.at, check.fault.as_label(), check.detail);
    }
    println!("leaders at the end: {leaders:?}");
    println!(
        "replica lifetimes (slope over the samples after {} s of warm-up; judged from {} min):",
        rule.warmup_seconds,
        rule.judge_after_seconds / 60.0
    );
    let role = |r: &RoleTrend| {
        format!(
            "{:>5.1} min, median {:>4.0}, slope {:>+7.2}/h",
            r.minutes,
            r.spread.map_or(f64::NAN, |s| s.median),
            r.slope_per_hour.unwrap_or(f64::NAN)
        )
    };
    for t in &trends {
        println!(
            "  {:<10} {:>5.1} min  RSS median {:>5.1} MiB, slope {:>+7.2} MiB/h   fds leading {}; standby {}   {}",
            t.identity,
            t.minutes_judged,
            t.rss_mib.map_or(f64::NAN, |s| s.median),
            t.rss_slope_mib_per_hour.unwrap_or(f64::NAN),
            role(&t.fds_leading),
            role(&t.fds_standby),
            match t.flat {
                Some(true) => "flat",
                Some(false) => "NOT FLAT",
                None => "too short to judge",
            }
        );
    }
    for (name, ok) in outcomes {
        println!("check {name}: {}", if ok { "ok" } else { "FAILED" });
    }
    println!("wrote {} (logs in {})", json_path.display(), log_dir.display());
    Ok(if passed { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Replicas whose `reloader_leader` is 1.
async fn leaders(pool: &Pool<'_>, _client: &kube::Client) -> Vec<String> {
    let mut leaders = Vec::new();
    for (slot, identity) in pool.running() {
        let Some(reloader) = pool.reloader(slot) else { continue };
        if reloader.metric(LEADER).await.ok().flatten() == Some(1.0) {
            leaders.push(identity);
        }
    }
    leaders
}

/// `mean` ± 30 %.
fn jittered(mean: Duration, rng: &mut Rng) -> Duration {
    let millis = mean.as_millis() as u64;
    Duration::from_millis(rng.between(millis * 7 / 10, millis * 13 / 10))
}

fn humanize(duration: Duration) -> String {
    let seconds = duration.as_secs();
    format!("{}h{:02}m{:02}s", seconds / 3600, seconds / 60 % 60, seconds % 60)
}

fn utc_now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}
