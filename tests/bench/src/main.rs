//! docs/benchmark.md's benchmark, driven by `hack/bench`: starts a local control plane, creates the data
//! sets, measures our controller (and Stakater Reloader when `STAKATER_BIN` names a binary the
//! user built), prints the table and writes `latest.json` and `latest.svg`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use reloader_bench::{BenchOptions, Scenarios, run, write_report};

#[derive(Debug, Parser)]
#[command(about = "Benchmark reloader (and Stakater Reloader, given STAKATER_BIN) on a local control plane")]
struct Args {
    /// A few hundred objects, short scenarios, one repetition.
    #[arg(long)]
    small: bool,
    /// Fractions of M1's data set to measure memory at, comma-separated (`0.25,0.5,1` or `1/4,1/2,1`).
    #[arg(long, value_delimiter = ',', value_parser = parse_fraction)]
    scale: Vec<f64>,
    /// Repetitions of M1/S1, F1 and H1 [default: 3, 1 with --small].
    #[arg(long)]
    repeat: Option<usize>,
    /// Our reloader binary [default: target/release/reloader].
    #[arg(long)]
    binary: Option<PathBuf>,
    /// A Stakater Reloader binary you built yourself; without it, its column is null.
    #[arg(long, env = "STAKATER_BIN")]
    stakater_bin: Option<PathBuf>,
    /// Keep the control plane and the data set up after measuring, until Ctrl-C (for profiling).
    #[arg(long)]
    hold: bool,
    /// Measure M1/S1 only (memory and start-up), skipping the other scenarios.
    #[arg(long, conflicts_with_all = ["latency_only", "cpu_only"])]
    memory_only: bool,
    /// Measure L1, its floor, F1 and A1 only (latency), on the data set grown to the largest scale.
    #[arg(long, conflicts_with = "cpu_only")]
    latency_only: bool,
    /// Measure U1 only (CPU idle and under L1's load) with kube-apiserver's cost during that load
    /// (K1), on the data set grown to the largest scale.
    #[arg(long)]
    cpu_only: bool,
    /// Also M10 (51,000 objects; ours inside the chart's memory limit) and F10 (3,000 Deployments
    /// on one ConfigMap): adds tens of minutes, most of it Stakater's. With `--memory-only`, M10
    /// alone; the latency and CPU runs measure neither.
    #[arg(long, conflicts_with_all = ["latency_only", "cpu_only"])]
    m10: bool,
    /// Folder for latest.json, latest.svg and the controllers' logs [default: target/bench].
    #[arg(long)]
    out: Option<PathBuf>,
}

fn parse_fraction(text: &str) -> Result<f64, String> {
    let value = match text.split_once('/') {
        Some((a, b)) => {
            let (a, b): (f64, f64) = (
                a.trim().parse().map_err(|_| text.to_owned())?,
                b.trim().parse().map_err(|_| text.to_owned())?,
            );
            a / b
        }
        None => text.trim().parse().map_err(|_| text.to_owned())?,
    };
    if value > 0.0 && value.is_finite() {
        Ok(value)
    } else {
        Err(format!("{text}: a scale is a positive fraction"))
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let args = Args::parse();
    // The workspace's target folder (this crate is `tests/bench`, two levels below the root).
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = workspace.join("target");
    let out = args.out.unwrap_or_else(|| target.join("bench"));
    let mut scales =
        if args.scale.is_empty() { BenchOptions::default_scales(args.small) } else { args.scale };
    scales.sort_by(f64::total_cmp);
    scales.dedup();
    let options = BenchOptions {
        small: args.small,
        scales,
        repeat: args.repeat.unwrap_or(if args.small { 1 } else { 3 }).max(1),
        binary: args.binary.unwrap_or_else(|| target.join("release/reloader")),
        stakater: args.stakater_bin.filter(|path| !path.as_os_str().is_empty()),
        log_dir: out.join("logs"),
        hold: args.hold,
        scenarios: match (args.memory_only, args.latency_only, args.cpu_only) {
            (true, _, _) => Scenarios::Memory,
            (_, true, _) => Scenarios::Latency,
            (_, _, true) => Scenarios::Cpu,
            _ => Scenarios::All,
        },
        m10: args.m10,
    };
    anyhow::ensure!(
        options.binary.exists(),
        "{} is missing: build it with `cargo build --release -p reloader-cli`",
        options.binary.display()
    );
    if let Some(stakater) = &options.stakater {
        anyhow::ensure!(stakater.exists(), "STAKATER_BIN={} does not exist", stakater.display());
    }

    let report = run(&options).await.context("running the benchmark")?;
    print!("{}", report.table());
    let (json, svg) = write_report(&report, &out)?;
    println!(
        "wrote {}, {} and {} (README.md's table; {:.0} s)",
        json.display(),
        svg.display(),
        out.join("latest.md").display(),
        report.runtime_seconds
    );
    if options.stakater.is_none() {
        println!("{}", reloader_bench::STAKATER_UNAVAILABLE);
    }
    let failed = report.scenarios.iter().filter(|s| s.error.is_some()).count();
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
