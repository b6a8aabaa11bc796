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
use tracing::{error, info};

use crate::executor::{ExecutorConfig, ExecutorIo, KubeWorkloadApi};
use crate::leader::Leadership;
use crate::notify::alerts::{AlertQueue, Alerter};
use crate::notify::events::{EventPublisher, EventSink};
use crate::observe::http::Health;
use crate::observe::metrics::Metrics;

pub use crate::executor::Executor;
pub use reconciler::Reconciler;

/// What every part of the controller shares.
pub struct Context {
    pub client: Client,
    pub options: Options,
    pub index: Arc<RwLock<Index>>,
    pub metrics: Arc<Metrics>,
    pub(crate) events: Arc<dyn EventSink>,
    /// True while this replica holds the lease (always true without HA).
    pub leader: watch::Receiver<bool>,
    /// Which namespaces are in scope right now (namespace selector and ignore list).
    pub scope: scope::ScopeFilter,
    /// Resolved kinds to watch (OpenShift detection, Argo flag, ignored workload types).
    pub kinds: kinds::EnabledKinds,
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
    let alerts: Option<Arc<dyn AlertQueue>> = match &options.alert {
        Some(cfg) => Some(Arc::new(Alerter::new(cfg, metrics.clone())?)),
        None => None,
    };
    let events: Arc<dyn EventSink> =
        Arc::new(EventPublisher::new(client.clone(), leadership.identity().to_string()));
    let ctx = Arc::new(Context {
        client: client.clone(),
        scope: scope::ScopeFilter::new(&options),
        options,
        index: Arc::new(RwLock::new(Index::default())),
        metrics,
        events,
        leader: leadership.subscribe(),
        kinds,
    });

    let webhook = ctx
        .options
        .admission_webhook
        .clone()
        .map(|cfg| tokio::spawn(crate::admission::serve(ctx.clone(), cfg, shutdown.clone())));
    let (executor, dispatch) = Executor::new(
        ExecutorConfig {
            coalesce_period: ctx.options.coalesce_period,
            max_writes_per_second: ctx.options.max_writes_per_second,
            dry_run: ctx.options.dry_run,
            keys: ctx.options.keys.clone(),
        },
        ExecutorIo {
            api: Arc::new(KubeWorkloadApi::new(client.clone())),
            events: ctx.events.clone(),
            alerts,
            leader: ctx.leader.clone(),
            metrics: ctx.metrics.clone(),
        },
        shutdown.clone(),
    );
    let executor_task = tokio::spawn(dispatch);
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
    // The executor finishes the writes in flight (bounded) once `shutdown` fires.
    if let Err(e) = executor_task.await {
        error!(error = %e, "the executor task failed");
    }
    drop(reconciler);
    failure.map_or(Ok(()), Err)
}
