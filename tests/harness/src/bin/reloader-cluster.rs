//! Runs the local control plane in the foreground until SIGINT or SIGTERM, for humans and for
//! `hack/cluster` (which starts it detached). Ready means: `<dir>/ready` exists and the last
//! line on stdout is `export KUBECONFIG=<dir>/kubeconfig`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use reloader_harness::{ControlPlane, Crd, PlaneOptions, RealNode, cache_dir};
use tokio::signal::unix::{SignalKind, signal};

#[derive(Debug, Parser)]
#[command(about = "Run etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK on 127.0.0.1")]
struct Args {
    /// Directory for the plane's state, logs and kubeconfig (emptied at start).
    #[arg(long, env = "RELOADER_CLUSTER_DIR")]
    dir: Option<PathBuf>,
    /// Number of fake nodes KWOK keeps Ready.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Do not install the CRDs (`Crd::ALL`: Argo Rollouts, DeploymentConfig, SecretProviderClass,
    /// CloneSet, ScaledJob and the made-up workload kinds).
    #[arg(long)]
    no_crds: bool,
    /// Also run a real node (containerd, runc, kubelet) where pods really run, instead of the
    /// fake nodes; the plane then runs in network and mount namespaces of its own
    /// (docs/control-plane.md, "The real node"). Needs root and `hack/build node`.
    #[arg(long)]
    node: bool,
    /// Image archives (OCI or `docker save`) to import into the real node, e.g. the one
    /// `hack/image` writes.
    #[arg(long = "import", requires = "node")]
    images: Vec<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let dir = args.dir.unwrap_or_else(|| cache_dir().join("cluster").join("plane"));
    let ready_marker = dir.join("ready");
    let mut interrupt = signal(SignalKind::interrupt()).context("listening for SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("listening for SIGTERM")?;

    eprintln!(
        "[cluster] starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok in {}",
        dir.display()
    );
    let started = Instant::now();
    let options = match args.node {
        true => PlaneOptions { dir: Some(dir.clone()), ..RealNode::plane_options() },
        false => PlaneOptions {
            dir: Some(dir.clone()),
            controllers: true,
            fake_nodes: args.nodes,
            ..PlaneOptions::default()
        },
    };
    let plane = tokio::select! {
        plane = ControlPlane::start(options) => plane.context("starting the control plane")?,
        _ = interrupt.recv() => anyhow::bail!("interrupted while starting"),
        _ = terminate.recv() => anyhow::bail!("terminated while starting"),
    };
    // Declared after the plane: dropped first, so the node stops (and restores the machine)
    // while the plane still runs.
    let node = match args.node {
        false => None,
        true => {
            eprintln!("[cluster] starting the real node (containerd, kubelet)");
            let node = tokio::select! {
                node = RealNode::start(&plane) => node.context("starting the real node")?,
                _ = interrupt.recv() => anyhow::bail!("interrupted while starting the node"),
                _ = terminate.recv() => anyhow::bail!("terminated while starting the node"),
            };
            for image in &args.images {
                node.import_image(image, &[]).with_context(|| format!("importing {}", image.display()))?;
            }
            eprintln!("[cluster] node {} Ready; pod logs in {}", node.name(), node.pod_logs().display());
            Some(node)
        }
    };
    if !args.no_crds {
        plane.install_crds(&Crd::ALL).await.context("installing the CRDs")?;
    }
    let version = plane.client().apiserver_version().await.context("reading the server version")?;
    std::fs::write(&ready_marker, format!("{}\n", plane.kubeconfig_path().display()))
        .with_context(|| format!("writing {}", ready_marker.display()))?;
    eprintln!(
        "[cluster] Kubernetes {} ready at {} in {:.1}s ({}); logs in {}",
        version.git_version,
        plane.url(),
        started.elapsed().as_secs_f32(),
        match &node {
            Some(node) => format!("real node {}", node.name()),
            None => format!("{} fake nodes", args.nodes),
        },
        dir.display()
    );
    println!("export KUBECONFIG={}", plane.kubeconfig_path().display());

    let mut health = tokio::time::interval(Duration::from_secs(2));
    let outcome = loop {
        tokio::select! {
            _ = interrupt.recv() => break Ok(()),
            _ = terminate.recv() => break Ok(()),
            _ = health.tick() => {
                let exited = plane.exited_components();
                if !exited.is_empty() {
                    plane.print_log_tails(20);
                    let names: Vec<String> = exited.iter().map(|(name, status)| format!("{name} ({status})")).collect();
                    break Err(anyhow::anyhow!("components exited: {}", names.join(", ")));
                }
            }
        }
    };
    let _ = std::fs::remove_file(&ready_marker);
    eprintln!("[cluster] stopping");
    drop(node);
    drop(plane);
    outcome
}
