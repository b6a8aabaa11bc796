//! The controller: watches feed the index, the reconciler decides, the executor writes.
//!
//! ```text
//! watches ──ResourceView / WorkloadView──▶ reconciler (index + decide) ──MarkerChange──▶ executor ──▶ API
//!                                                    ▲                                   ▲
//!                                      leadership + readiness ── catch-up sweep          └ leader gate
//! ```

mod catch_up;

pub(crate) mod kinds;
mod namespaces;
mod pause;
mod reconciler;
pub(crate) mod resources;
mod scope;
mod standby;
mod workloads;


use std::sync::{Arc, RwLock};

use anyhow::Context as _;
use kube::Client;
use reloader_core::index::Index;
use reloader_core::options::Options;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::notify::events::EventPublisher;
use crate::observe::http::Health;
use crate::leader::Leadership;
use crate::observe::metrics::Metrics;

pub use crate::executor::Executor;
pub use reconciler::Reconciler;

/// What every part of the controller shares.
pub struct Context {
    pub client: Client,
    pub options: Options,
    pub index: Arc<RwLock<Index>>,
    pub metrics: Arc<Metrics>,
    pub events: EventPublisher,
    /// True while this replica holds the lease (always true without HA).
    pub leader: watch::Receiver<bool>,
    /// Which namespaces are in scope right now (namespace selector and ignore list).
    pub scope: scope::ScopeFilter,
    /// Resolved kinds to watch (OpenShift detection, Argo flag, ignored workload types).
    pub kinds: kinds::EnabledKinds,
    /// `ALERT_ON_RELOAD` notifications, when configured.
    pub alerter: Option<crate::notify::alerts::Alerter>,
}

/// Runs the controller until `shutdown` fires.
pub async fn run(
    client: Client,
    options: Options,
    metrics: Arc<Metrics>,
    health: Health,
    leadership: &Leadership,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let kinds =
        kinds::EnabledKinds::resolve(&client, &options).await.context("discovering workload kinds")?;
    info!(kinds = %kinds, strategy = options.strategy.as_str(), "starting controller");
    let alerter = match &options.alert {
        Some(cfg) => {
            let cfg = crate::notify::alerts::AlertConfig::from_parts(
                true,
                Some(cfg.url.expose().to_string()),
                Some(
                    match cfg.sink {
                        reloader_core::options::AlertSink::Slack => "slack",
                        reloader_core::options::AlertSink::Teams => "teams",
                        reloader_core::options::AlertSink::GoogleChat => "gchat",
                        reloader_core::options::AlertSink::Raw => "raw",
                    }
                    .to_string(),
                ),
                cfg.proxy.as_ref().map(|p| p.expose().to_string()),
                cfg.additional_info.clone(),
            );
            cfg.map(|cfg| crate::notify::alerts::Alerter::new(cfg, metrics.clone())).transpose()?
        }
        None => None,
    };
    let events = EventPublisher::new(client.clone(), leadership.identity().to_string());
    let ctx = Arc::new(Context {
        client: client.clone(),
        scope: scope::ScopeFilter::new(&options),
        options,
        index: Arc::new(RwLock::new(Index::default())),
        metrics,
        events,
        leader: leadership.subscribe(),
        kinds,
        alerter,
    });

    let webhook = ctx
        .options
        .admission_webhook
        .clone()
        .map(|cfg| tokio::spawn(crate::admission::serve(ctx.clone(), cfg, shutdown.clone())));
    let executor = Executor::start(ctx.clone(), shutdown.clone());
    let reconciler = Arc::new(Reconciler::new(ctx.clone(), executor.clone()).await?);
    // Every replica keeps the resume deadlines from the `paused-at` annotations; only the
    // leader acts on them, so a new leader resumes on time.
    let pauses = pause::PauseTimers::start(ctx.clone(), executor.clone(), shutdown.clone());

    let mut synced = Vec::new();
    synced.extend(namespaces::spawn(ctx.clone(), reconciler.clone(), shutdown.clone()));
    synced.extend(resources::spawn(ctx.clone(), reconciler.clone(), shutdown.clone()));
    synced.extend(workloads::spawn(ctx.clone(), pauses, shutdown.clone()));

    catch_up::spawn(ctx.clone(), executor.clone(), reconciler.clone(), synced, health, shutdown.clone());
    // A webhook that cannot serve (port taken, bad certificate) ends the process with an error,
    // so the kubelet restarts it and the exit status says what happened.
    let failure = match webhook {
        Some(handle) => tokio::select! {
            _ = shutdown.cancelled() => None,
            result = handle => match result {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(e) => Some(anyhow::Error::from(e).context("the admission webhook task failed")),
            },
        },
        None => {
            shutdown.cancelled().await;
            None
        }
    };
    shutdown.cancel();
    executor.drain().await;
    drop(reconciler);
    failure.map_or(Ok(()), Err)
}
