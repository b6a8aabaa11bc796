//! `reloader run`: wires telemetry, the HTTP endpoints, leadership and the controller, and
//! shuts them down in order on SIGTERM/Ctrl-C.

use anyhow::Context as _;
use reloader_core::options::Options;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::controller;
use crate::leader::{ElectionConfig, Leadership};
use crate::observe::http::{self, Health};
use crate::observe::metrics::Metrics;

pub async fn run(options: Options) -> anyhow::Result<()> {
    for warning in &options.warnings {
        warn!("{warning}");
    }
    let client = kube::Client::try_default()
        .await
        .context("building the Kubernetes client (KUBECONFIG or in-cluster)")?;
    let metrics = Metrics::new(options.metrics_count_by_namespace);
    let health = Health::new();
    let shutdown = CancellationToken::new();
    spawn_signal_handler(shutdown.clone());

    let server = {
        let (addr, metrics, health, shutdown) =
            (options.metrics_addr, metrics.clone(), health.clone(), shutdown.clone());
        tokio::spawn(async move { http::serve(addr, metrics, health, shutdown).await })
    };

    let identity = options.pod_name.clone().unwrap_or_else(hostname);
    let leadership = match &options.leader_election {
        Some(le) => {
            // Renewals get their own client (own connection pool) so watches cannot starve them.
            let election_client =
                kube::Client::try_default().await.context("building the leader-election client")?;
            let config = ElectionConfig {
                lease_name: le.id.clone(),
                namespace: le.namespace.clone(),
                identity: identity.clone(),
                lease_duration: le.lease_duration,
                renew_deadline: le.renew_deadline,
                retry_period: le.retry_period,
                release_on_cancel: le.release_on_cancel,
            };
            info!(lease = %config.lease_name, namespace = %config.namespace, %identity, "high availability: campaigning for the lease");
            Leadership::elect(election_client, config, metrics.clone(), shutdown.clone())
        }
        None => Leadership::always(identity),
    };

    if let Some(meta) = &options.meta_info {
        let options_json = serde_json::to_string(&options).unwrap_or_default();
        if let Err(e) = crate::meta_info::publish(
            client.clone(),
            &meta.namespace,
            meta.deployment_name.as_deref(),
            options_json,
        )
        .await
        {
            // `{:#}`: the API server's reason (e.g. forbidden) is in the cause chain.
            warn!(error = %format_args!("{e:#}"), "could not publish the reloader-meta-info ConfigMap");
        }
    }

    let controller = controller::run(client, options, metrics, health.clone(), &leadership, shutdown.clone());
    let result = tokio::select! {
        r = controller => r,
        r = server => match r {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(e),
            Err(e) => Err(e.into()),
        },
    };
    shutdown.cancel();
    health.set_ready(false);
    leadership.finished().await;
    info!("stopped");
    result
}

fn spawn_signal_handler(shutdown: CancellationToken) {
    tokio::spawn(async move {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, "cannot listen for SIGTERM");
                return;
            }
        };
        tokio::select! {
            _ = term.recv() => info!("SIGTERM: shutting down"),
            _ = tokio::signal::ctrl_c() => info!("interrupt: shutting down"),
        }
        shutdown.cancel();
    });
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| format!("reloader-{}", std::process::id()))
}
