//! hack/diff-stakater's runner: the differential check against the real Stakater Reloader binary
//! (docs/migration.md). Prints every difference, expected or not, and the switching-day verdict;
//! exits 1 on an unexpected difference or a switching-day problem.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use reloader_bench::diff::{DiffOptions, run};

#[derive(Debug, Parser)]
#[command(
    about = "Run one scenario table against Stakater Reloader and ours on a local control plane, and diff"
)]
struct Args {
    /// The Stakater Reloader binary (built by you; never committed).
    #[arg(long, env = "STAKATER_BIN")]
    stakater_bin: PathBuf,
    /// Stakater's git dir, for its chart in the switching-day play.
    #[arg(long, env = "STAKATER_GIT_DIR")]
    stakater_git_dir: Option<PathBuf>,
    /// The tag of Stakater's chart.
    #[arg(long, default_value = "v1.4.21")]
    stakater_tag: String,
    /// Our reloader binary [default: target/debug/reloader].
    #[arg(long)]
    binary: Option<PathBuf>,
    /// The expected differences [default: hack/diff-stakater.expected].
    #[arg(long)]
    expected: Option<PathBuf>,
    /// Only the scenarios whose name contains this.
    #[arg(long)]
    only: Option<String>,
    /// Do not play the switching day.
    #[arg(long)]
    skip_switching_day: bool,
    /// Seconds to wait after each change before reading.
    #[arg(long, default_value_t = 3)]
    settle: u64,
    /// Folder for the controllers' logs and report.txt [default: target/diff-stakater].
    #[arg(long)]
    out: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let args = Args::parse();
    // This crate is `tests/bench`, two levels below the repository root.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    let out = args.out.unwrap_or_else(|| root.join("target/diff-stakater"));
    let options = DiffOptions {
        ours: args.binary.unwrap_or_else(|| target.join("debug/reloader")),
        stakater: args.stakater_bin,
        stakater_git: args.stakater_git_dir,
        stakater_tag: args.stakater_tag,
        expected: args.expected.unwrap_or_else(|| root.join("hack/diff-stakater.expected")),
        log_dir: out.join("logs"),
        only: args.only,
        skip_switching: args.skip_switching_day,
        settle: Duration::from_secs(args.settle),
    };
    anyhow::ensure!(
        options.ours.exists(),
        "{} is missing: cargo build -p reloader-cli",
        options.ours.display()
    );
    anyhow::ensure!(options.stakater.exists(), "STAKATER_BIN={} does not exist", options.stakater.display());
    let report = run(&options).await.context("the differential run")?;
    let text = report.render();
    print!("{text}");
    let report_path = out.join("report.txt");
    std::fs::write(&report_path, &text).with_context(|| format!("writing {}", report_path.display()))?;
    eprintln!("diff-stakater: report in {}, logs in {}", report_path.display(), options.log_dir.display());
    Ok(if report.passed() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
