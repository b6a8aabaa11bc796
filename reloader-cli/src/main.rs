//! The `reloader` binary. `reloader [FLAGS]` and `reloader run [FLAGS]` both run the controller.
//!
//! Every flag is checked before anything talks to a cluster: a bad value prints one line,
//! `reloader: <what is wrong>`, and exits with code 2.
//!
//! Installed (or linked) as `kubectl-reloader`, the same binary is a kubectl plugin:
//! `kubectl reloader explain deployment/web -n shop` runs it with the words after `reloader`.

use std::process::ExitCode;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use clap_complete::Shell;
use reloader_cli::args::RunArgs;
use reloader_cli::explain::ExplainArgs;
use reloader_cli::observe::telemetry;
#[cfg(unix)]
use reloader_core::options::LogLevel;
use reloader_core::options::{LogFormat, Options};
#[cfg(unix)]
use reloader_sidecar::SidecarArgs;

#[derive(Parser, Debug)]
#[command(
    name = "reloader",
    version = env!("RELOADER_LONG_VERSION"),
    about = "Rolls Kubernetes workloads when the ConfigMaps and Secrets they use change",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the controller (what `reloader` does without a subcommand)
    Run(Box<RunArgs>),
    /// Keep a directory in sync with ConfigMaps/Secrets and notify the app, without restarts
    #[cfg(unix)]
    Sidecar(Box<SidecarArgs>),
    // The sidecar writes a pod's files (symlinks, modes) and signals its processes: Unix only.
    // Elsewhere the word is still known, so that it says so rather than "unexpected argument".
    #[cfg(not(unix))]
    #[command(hide = true, disable_help_flag = true)]
    Sidecar {
        #[arg(num_args = 0.., allow_hyphen_values = true, trailing_var_arg = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Explain why a workload would or would not reload when its ConfigMaps/Secrets change
    Explain(Box<ExplainArgs>),
    /// Print a shell completion script (e.g. `reloader completion bash > /etc/bash_completion.d/reloader`)
    Completion {
        #[arg(value_enum)]
        shell: Shell,
    },
}

/// The file name kubectl looks for on PATH to run `kubectl reloader`.
const KUBECTL_PLUGIN_FILE: &str = "kubectl-reloader";

/// How the binary was invoked: `reloader`, or `kubectl-reloader` as a kubectl plugin.
struct Invocation {
    /// The command people type, shown in help and usage.
    display_name: &'static str,
    /// The executable's name, which shell completion scripts hook onto.
    file_name: &'static str,
}

impl Invocation {
    fn detect() -> Self {
        let argv0 = std::env::args_os().next().unwrap_or_default();
        let file_name = std::path::Path::new(&argv0).file_stem().unwrap_or_default();
        if file_name == KUBECTL_PLUGIN_FILE {
            Invocation { display_name: "kubectl reloader", file_name: KUBECTL_PLUGIN_FILE }
        } else {
            Invocation { display_name: "reloader", file_name: "reloader" }
        }
    }

    fn command(&self) -> clap::Command {
        Cli::command().bin_name(self.display_name)
    }

    fn parse(&self) -> Result<Cli, clap::Error> {
        let matches = self.command().try_get_matches()?;
        Cli::from_arg_matches(&matches)
    }
}

/// Exit code of a command line that cannot run: clap's code for usage errors.
const EXIT_USAGE: u8 = 2;

fn main() -> ExitCode {
    reloader_cli::observe::memory::limit_arenas();
    let invocation = Invocation::detect();
    let cli = match invocation.parse() {
        Ok(cli) => cli,
        // --help and --version: printed to stdout, exit 0.
        Err(error) if !error.use_stderr() => error.exit(),
        Err(error) => return usage_error(&one_line(&error)),
    };
    let args = match cli.command {
        Some(Command::Run(args)) => *args,
        #[cfg(unix)]
        Some(Command::Sidecar(args)) => return run_sidecar(*args),
        #[cfg(not(unix))]
        Some(Command::Sidecar { .. }) => {
            return usage_error(
                "the sidecar subcommand is not available on Windows: it runs beside the application, in a Linux pod",
            );
        }
        Some(Command::Explain(args)) => return run_explain(*args),
        Some(Command::Completion { shell }) => return print_completion(&invocation, shell),
        None => cli.run,
    };
    let options = match args.validate() {
        Ok(options) => options,
        Err(error) => return usage_error(&error.to_string()),
    };

    let json = options.log_format == LogFormat::Json;
    let _telemetry = match telemetry::init(
        json,
        options.log_level,
        telemetry::Traces::Exported { otlp_endpoint: options.otlp_endpoint.as_deref() },
    ) {
        Ok(guard) => guard,
        Err(error) => return usage_error(&format!("{error:#}")),
    };
    exit_code(runtime().and_then(|rt| rt.block_on(run_controller(options))))
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(reloader_cli::observe::memory::runtime()?)
}

fn exit_code(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(unix)]
fn run_sidecar(args: SidecarArgs) -> ExitCode {
    // The sidecar runs in every pod it serves: no start-up worth its threads' allocator caches.
    reloader_cli::observe::memory::end_start_up();
    let level = std::env::var("RELOADER_LOG_LEVEL").unwrap_or_default();
    let parsed = if level.trim().is_empty() { Some(LogLevel::Info) } else { LogLevel::parse(level.trim()) };
    let Some(level) = parsed else {
        return usage_error(&format!(
            "RELOADER_LOG_LEVEL: {level:?} is not a log level (expected trace, debug, info, warn, warning, error, fatal or panic)"
        ));
    };
    let _telemetry = match telemetry::init(false, level, telemetry::Traces::Off) {
        Ok(guard) => guard,
        Err(error) => return usage_error(&format!("{error:#}")),
    };
    let release = reloader_cli::observe::memory::release_after_sync;
    exit_code(runtime().and_then(|rt| rt.block_on(reloader_sidecar::run(args, release))))
}

/// Prints the explanation on stdout; exit 2 for a bad command line, 1 when it cannot explain.
fn run_explain(args: ExplainArgs) -> ExitCode {
    use std::io::Write as _;
    let explained = match runtime() {
        Ok(rt) => rt.block_on(reloader_cli::explain::run(args)),
        Err(error) => {
            eprintln!("reloader: {error:#}");
            return ExitCode::FAILURE;
        }
    };
    match explained {
        Ok(output) => match std::io::stdout().write_all(output.as_bytes()) {
            Ok(()) => ExitCode::SUCCESS,
            // `reloader explain ... | head` closing the pipe early is not a failure.
            Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("reloader: cannot write the output: {error}");
                ExitCode::FAILURE
            }
        },
        Err(error) if error.is_usage() => usage_error(&error.to_string()),
        Err(error) => {
            eprintln!("reloader: {error}");
            ExitCode::FAILURE
        }
    }
}

fn print_completion(invocation: &Invocation, shell: Shell) -> ExitCode {
    let mut command = invocation.command();
    clap_complete::generate(shell, &mut command, invocation.file_name, &mut std::io::stdout());
    ExitCode::SUCCESS
}

fn usage_error(message: &str) -> ExitCode {
    eprintln!("reloader: {message}");
    ExitCode::from(EXIT_USAGE)
}

/// A clap error as one line; a bad value reads like our own validation errors.
fn one_line(error: &clap::Error) -> String {
    let context = |kind| match error.get(kind) {
        Some(ContextValue::String(text)) => Some(text.as_str()),
        _ => None,
    };
    // clap names an argument with its value placeholder: `--enable-ha[=<BOOL>]`.
    let flag_name = |arg: &str| arg.split(['=', ' ', '[']).next().unwrap_or_default().to_owned();
    if error.kind() == ErrorKind::ValueValidation
        && let (Some(arg), Some(value)) =
            (context(ContextKind::InvalidArg), context(ContextKind::InvalidValue))
    {
        let reason = std::error::Error::source(error).map(ToString::to_string).unwrap_or_default();
        return format!("invalid value {value:?} for {}: {reason}", flag_name(arg));
    }
    // After a flag, clap takes any stray word for a subcommand; say what really happened.
    if error.kind() == ErrorKind::ArgumentConflict
        && let Some(word) = context(ContextKind::InvalidSubcommand)
        && Cli::command().find_subcommand(word).is_none()
    {
        let hint = match context(ContextKind::PriorArg) {
            Some(prior) if prior.contains("=<BOOL>") => {
                format!(" (boolean flags take {}={word})", flag_name(prior))
            }
            _ => String::new(),
        };
        return format!("unexpected argument '{word}' found{hint}");
    }
    let rendered = error.render().to_string();
    let first = rendered.lines().next().unwrap_or_default();
    first.strip_prefix("error: ").unwrap_or(first).to_owned()
}

async fn run_controller(options: Options) -> anyhow::Result<()> {
    reloader_cli::run::run(options).await
}
