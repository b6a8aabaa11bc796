//! `reloader sidecar`, start to stop: core dumps off, the client, the watches, then the write and
//! notify loop until SIGTERM/SIGINT (or, with `--init`, until the files are written).

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::sync::mpsc;

use super::args::SidecarArgs;
use super::engine::{self, Engine, Tracker};
use super::metrics::{self, Metrics};
use super::notify::{self, Notifier};
use super::payload::{SourceId, SourceKind};
use super::watch;
use super::writer::AtomicWriter;

/// The sidecar holds Secret data in memory: no core dump may carry it to disk, nor (on Linux,
/// where `prctl` says so) another process of the same user read it through ptrace or
/// `/proc/<pid>/mem`.
fn forbid_core_dumps() -> std::io::Result<()> {
    use rustix::process::{Resource, Rlimit, setrlimit};
    setrlimit(Resource::Core, Rlimit { current: Some(0), maximum: Some(0) })?;
    #[cfg(target_os = "linux")]
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?;
    Ok(())
}

#[cfg(test)]
#[test]
fn core_dumps_are_off_once_the_sidecar_starts() {
    use rustix::process::{Resource, getrlimit};
    forbid_core_dumps().unwrap();
    let limit = getrlimit(Resource::Core);
    assert_eq!((limit.current, limit.maximum), (Some(0), Some(0)));
    #[cfg(target_os = "linux")]
    assert_eq!(rustix::process::dumpable_behavior().unwrap(), rustix::process::DumpableBehavior::NotDumpable);
}

/// Runs the sidecar until SIGTERM/SIGINT, or in init mode until the files are written.
/// `once_ready` runs once, when the directory first holds every object's content: start-up is
/// over (the caller releases what only start-up needed).
pub async fn run(args: SidecarArgs, once_ready: impl FnOnce()) -> anyhow::Result<()> {
    if let Err(error) = forbid_core_dumps() {
        tracing::warn!(%error, "could not turn core dumps off; a crash may write Secret data to disk");
    }
    let sources = sources(&args)?;
    let client = client(args.kubeconfig.as_deref()).await?;
    let namespace = match args.namespace.as_deref().map(str::trim) {
        Some(ns) if !ns.is_empty() => ns.to_owned(),
        _ => client.default_namespace().to_owned(),
    };
    let objects: Vec<String> = sources.iter().map(ToString::to_string).collect();
    tracing::info!(
        %namespace, dir = %args.path.display(), objects = ?objects, init = args.init,
        "reloader sidecar starting"
    );

    let metrics = Arc::new(Metrics::default());
    let modes = watch::Modes { configmap: args.configmap_mode, secret: args.secret_mode };
    let (events_tx, events) = mpsc::channel(64);
    // Dropping the set at return stops the watches.
    let _watches = watch::spawn(&client, &namespace, &sources, modes, events_tx, metrics.clone());
    let engine = Engine::new(Tracker::new(sources), AtomicWriter::new(&args.path), metrics.clone()).await;

    if args.init {
        engine::init_loop(engine, events, args.init_timeout)
            .await
            .with_context(|| format!("init: nothing written to {}", args.path.display()))?;
        tracing::info!(dir = %args.path.display(), "init: files written");
        return Ok(());
    }

    let _server = match args.metrics_addr.0 {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr} for metrics"))?;
            let metrics = metrics.clone();
            Some(AbortOnDrop(tokio::spawn(async move {
                if let Err(e) = metrics::serve(listener, metrics).await {
                    tracing::error!(error = %e, "the metrics server stopped");
                }
            })))
        }
        None => None,
    };

    let (generations, generation_rx) = tokio::sync::watch::channel(0u64);
    let notifier = Notifier::from_args(&args).context("cannot build the HTTP client")?;
    let _notifier = if notifier.is_empty() {
        tracing::info!("no --endpoint, --pidfile or --touch-file: files are written without notifying");
        None
    } else {
        Some(AbortOnDrop(tokio::spawn(notify::run(notifier, metrics.clone(), generation_rx))))
    };

    let shutdown = shutdown_signal()?;
    engine::sidecar_loop(engine, events, generations, shutdown, once_ready).await?;
    tracing::info!("reloader sidecar stopped");
    Ok(())
}

fn sources(args: &SidecarArgs) -> anyhow::Result<Vec<SourceId>> {
    let configmaps =
        args.configmap_names().into_iter().map(|name| SourceId { kind: SourceKind::ConfigMap, name });
    let secrets = args.secret_names().into_iter().map(|name| SourceId { kind: SourceKind::Secret, name });
    let sources: Vec<SourceId> = configmaps.chain(secrets).collect();
    anyhow::ensure!(
        !sources.is_empty(),
        "nothing to watch: name at least one --configmap or --secret (or RELOADER_CONFIGMAP / RELOADER_SECRET)"
    );
    Ok(sources)
}

async fn client(kubeconfig: Option<&Path>) -> anyhow::Result<Client> {
    let config = match kubeconfig {
        Some(path) => {
            let file =
                Kubeconfig::read_from(path).with_context(|| format!("cannot read {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default()).await?
        }
        None => kube::Config::infer().await.context("no in-cluster config and no kubeconfig")?,
    };
    Client::try_from(config).context("cannot build the Kubernetes client")
}

/// Completes on SIGTERM or SIGINT.
fn shutdown_signal() -> anyhow::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
    })
}

/// Stops the task when the sidecar returns, including when `run` is itself cancelled.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
