//! `reloader run`, top to bottom: the client, the endpoints, leadership, the index, the watches
//! feeding the reconciler, the executor writing, the pause timers, the catch-up on promotion and
//! the admission webhook, every task owned by the supervisor; then an orderly shutdown.

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use reloader_core::index::Index;
use reloader_core::options::Options;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::admission::AdmissionState;
use crate::client::Clients;
use crate::discovery::{CrdWait, ServedApis, enabled_kinds};
use crate::executor::{Executor, ExecutorConfig, ExecutorIo, KubeWorkloadApi};
use crate::job_origins::JobOrigins;
use crate::leader::{ElectionConfig, Leadership};
use crate::notify::alerts::{AlertQueue, Alerter};
use crate::notify::events::{EventRecorder, EventSink};
use crate::notify::webhook::{WebhookNotifier, WebhookQueue};
use crate::observe::http::{self, Health};
use crate::observe::metrics::Metrics;
#[cfg(unix)]
use crate::observe::pprof;
use crate::rbac::{self, AccessReview, KubeAccessReview, KubeRulesReview, RulesFirst};
use crate::reconcile::catch_up::{CatchUp, CatchUpConfig};
use crate::reconcile::pause::PauseTimers;
use crate::reconcile::standby::{REPLAY_WINDOW, StandbyChanges};
use crate::reconcile::{NoWrites, PodsDue, ReconcileConfig, Reconciler, ResourceNotifier, WorkQueue};
use crate::restarts::{Evictor, KubeRestartApi, Restarts, unix_now};
use crate::scope::ScopeFilter;
use crate::sources::{self, SourcesConfig};
use crate::supervise::Supervisor;

/// How long the tasks get to finish after shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Without HA, how long one workload read or write may take before it fails and is retried.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

pub async fn run(options: Options) -> anyhow::Result<()> {
    for warning in &options.warnings {
        warn!("{warning}");
    }
    #[cfg(unix)]
    if options.pprof_addr.is_some() {
        pprof::start_heap_sampling().await;
    }
    let metrics = Metrics::new(options.metrics_count_by_namespace);
    let clients = Clients::infer(metrics.rest_client()).await?;
    let client = clients.client()?;
    let health = Health::new();
    let shutdown = CancellationToken::new();
    let mut supervisor = Supervisor::new(shutdown.clone(), health.clone());

    // SIGTERM or Ctrl-C starts the shutdown.
    supervisor.spawn_service("signal handler", wait_for_signal(shutdown.clone()));

    // /metrics, /live, /healthz, /readyz.
    supervisor.spawn_service(
        "metrics and health server",
        http::serve(options.metrics_addr, metrics.clone(), health.clone(), shutdown.clone()),
    );

    // --health-addr: the probes on a second address too.
    if let Some(addr) = options.health_addr {
        supervisor.spawn_service("health server", http::serve_probes(addr, health.clone(), shutdown.clone()));
    }

    // --enable-pprof: CPU and heap profiles on their own port, never the metrics one.
    #[cfg(unix)]
    if let Some(addr) = options.pprof_addr {
        supervisor.spawn_service("pprof server", pprof::serve(addr, shutdown.clone()));
    }

    // Leadership: the Lease campaign with --enable-ha, otherwise always the leader.
    let identity = options.pod_name.clone().unwrap_or_else(hostname);
    let leadership = match &options.leader_election {
        Some(le) => {
            // Renewals get their own client (own connection pool) so watches cannot starve them,
            // and no request of it may outlast the renew deadline.
            let election_client = clients
                .client_with_timeout(le.renew_deadline)
                .context("building the leader-election client")?;
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
            let (leadership, campaign) =
                Leadership::elect(election_client, config, metrics.leader(), shutdown.clone());
            // The campaign outlives the shutdown: it releases the Lease once the writes are done.
            supervisor.spawn_service("leader election", async move {
                campaign.await;
                Ok(())
            });
            leadership
        }
        None => Leadership::always(),
    };

    // The meta-info ConfigMap, beside the start-up rather than before it: nothing waits for it.
    if let Some(meta) = options.meta_info.clone() {
        let (client, options_json) = (client.clone(), serde_json::to_string(&options).unwrap_or_default());
        supervisor.spawn("meta-info", async move {
            let deployment_name = meta.deployment_name.as_deref();
            if let Err(e) =
                crate::meta_info::publish(client, &meta.namespace, deployment_name, options_json).await
            {
                // `{:#}`: the API server's reason (e.g. forbidden) is in the cause chain.
                warn!(error = %format_args!("{e:#}"), "could not publish the reloader-meta-info ConfigMap");
            }
            // Published once; a task that ends would stop the process.
            std::future::pending().await
        });
    }

    // Which kinds to watch, and the shared state the stages read.
    let review: Arc<dyn AccessReview> =
        Arc::new(RulesFirst::new(KubeRulesReview(client.clone()), KubeAccessReview(client.clone())));
    let served_apis = ServedApis::new(client.clone());
    let kinds =
        enabled_kinds(&served_apis, &options, review.as_ref()).await.context("discovering workload kinds")?;
    info!(kinds = %kinds, strategy = options.strategy.as_str(), "starting controller");
    // Stakater's handler lists (and so counts) workload kinds only when it reloads, never in
    // webhook mode.
    if options.webhook_url.is_none() {
        metrics.reconcile().workload_kinds(kinds.iter());
    }
    let mut sources_config = SourcesConfig::new(&options);
    let csi = options.enable_csi_integration
        && served_apis.csi().await.context("discovering the CSI driver's API")?;
    if options.enable_csi_integration && !csi {
        // As Stakater: said once, and everything else runs.
        warn!(
            "--enable-csi-integration, but the API server does not serve secrets-store.csi.x-k8s.io/v1 \
             (the Secrets Store CSI driver's CRDs are not installed): SecretProviderClass changes are not watched"
        );
        sources_config = sources_config.without_csi();
    }
    let rbac_needs = rbac::required(&options, &kinds, csi);
    let index = Arc::new(RwLock::new(Index::default()));
    metrics.index_sizes_from({
        let index = index.clone();
        Box::new(move || {
            let stats = index.read().expect("index lock").stats();
            (stats.resources as u64, stats.workloads as u64, stats.loops_stopped as u64)
        })
    });
    let scope = ScopeFilter::new(&options.namespace_scope);
    let (recorder, event_delivery) = EventRecorder::new(client.clone());
    // A service: at shutdown it still writes the Events queued (those of the last writes too),
    // and it ends once every recorder handle is gone with the stages that hold them.
    supervisor.spawn_service("event recorder", async move {
        event_delivery.await;
        Ok(())
    });
    let events: Arc<dyn EventSink> = Arc::new(recorder);
    let alerts: Option<Arc<dyn AlertQueue>> = match &options.alert {
        Some(cfg) => {
            let (alerter, delivery) = Alerter::new(cfg, metrics.notify())?;
            // A service, as the Event recorder: the alerts of the last writes are still sent.
            supervisor.spawn_service("alert delivery", async move {
                delivery.await;
                Ok(())
            });
            Some(Arc::new(alerter))
        }
        None => None,
    };
    // --webhook-url: every change is POSTed there and no workload is ever written, so there is
    // no executor and no pause timer (docs/compatibility.md §9).
    let notifier = match &options.webhook_url {
        Some(url) => {
            // Said once at start-up because nothing else shows it: no rollout ever follows.
            info!(
                "webhook mode (--webhook-url): each change is POSTed to the webhook; no workload is ever reloaded"
            );
            let (queue, delivery) =
                WebhookQueue::new(WebhookNotifier::new(url.expose().to_string(), metrics.notify())?);
            supervisor.spawn("webhook delivery", async move {
                delivery.await;
                Ok(())
            });
            Some(queue)
        }
        None => None,
    };
    let boxed_notifier = || -> Option<Box<dyn ResourceNotifier>> {
        notifier.clone().map(|n| Box::new(n) as Box<dyn ResourceNotifier>)
    };

    // Workload writes time out like renewals do (docs/behaviour.md, HA): a write hung on a cut
    // connection must not hold the executor past the moment this replica stops leading.
    let write_timeout = options.leader_election.as_ref().map_or(WRITE_TIMEOUT, |le| le.renew_deadline);
    let writes_client = clients.writer_client(write_timeout)?;

    // The executor: the single writer, gated by leadership. Once `shutdown` fires it finishes
    // the writes in flight (bounded), and only then may the Lease be released.
    let (queue, executor_finished): (Arc<dyn WorkQueue>, _) = if notifier.is_some() {
        (Arc::new(NoWrites), None)
    } else {
        let (executor, dispatch) = Executor::new(
            ExecutorConfig {
                coalesce_period: options.coalesce_period,
                max_writes_per_second: options.max_writes_per_second,
                dry_run: options.dry_run,
                keys: options.keys.clone(),
                default_windows: options.default_windows.clone(),
                loop_guard: options.loop_guard,
            },
            ExecutorIo {
                api: Arc::new(KubeWorkloadApi::new(writes_client.clone())),
                views: index.clone(),
                events: events.clone(),
                alerts,
                leader: leadership.subscribe(),
                metrics: metrics.writes(),
                clock: Arc::new(jiff::Timestamp::now),
            },
            shutdown.clone(),
        );
        let (executor_done, executor_finished) = tokio::sync::oneshot::channel::<()>();
        supervisor.spawn_service("executor", async move {
            let result = dispatch.await;
            let _ = executor_done.send(());
            result
        });
        (Arc::new(executor), Some(executor_finished))
    };

    // The admission server, when configured: `/mutate` answers from the same index and rules,
    // the Job fence judges the controller's own Job creations by the Jobs and CronJobs the
    // watches keep (kept only when the fence is served).
    let mut job_origins = None;
    if let Some(config) = options.admission_webhook.clone() {
        let origins = config.endpoints.job_fence.then(|| Arc::new(JobOrigins::default()));
        job_origins = origins.clone();
        let state = Arc::new(AdmissionState {
            index: index.clone(),
            keys: options.keys.clone(),
            decide: options.decide_options(),
            // Stamping or keeping markers is a write too: --webhook-url mode makes none.
            dry_run: options.dry_run || notifier.is_some(),
            metrics: metrics.admission(),
            scope: scope.clone(),
            kinds: kinds.clone(),
            hold: options.coalesce_period,
            origins,
        });
        supervisor
            .spawn_service("admission webhook", crate::admission::serve(state, config, shutdown.clone()));
    }

    // Reconcile: every watch event goes through it. With --reload-pods, a pod's reload makes it
    // due for eviction instead of a write (docs/beyond-stakater.md §14).
    let pauses = PauseTimers::default();
    let restarts = Restarts::default();
    let queue: Arc<dyn WorkQueue> = if options.reload_pods {
        Arc::new(PodsDue { workloads: queue, restarts: restarts.clone() })
    } else {
        queue
    };
    let standby = Arc::new(StandbyChanges::new(REPLAY_WINDOW));
    let reconciler = Arc::new(Reconciler {
        config: ReconcileConfig::new(&options),
        index: index.clone(),
        scope: scope.clone(),
        leader: leadership.subscribe(),
        metrics: metrics.reconcile(),
        queue: queue.clone(),
        notifier: boxed_notifier(),
        events: events.clone(),
        pauses: pauses.clone(),
        restarts: restarts.clone(),
        standby: standby.clone(),
    });

    // The watches.
    let mut synced = Vec::new();
    let crd_wait = CrdWait::new(client.clone(), health.clone());
    let sources_config = sources_config.with_job_origins(job_origins);
    for watch in
        sources::watches(&client, &sources_config, &kinds, &reconciler, &scope, &crd_wait, &metrics.watches())
    {
        synced.push(watch.synced);
        supervisor.spawn(watch.name, async move {
            watch.task.await;
            Err(anyhow!("the watch stream ended"))
        });
    }

    // Each missing permission said once, with the rule to add; not ready until checked, nor while
    // a read is missing. Checked beside the watches' first lists: a denied watch fails on its own.
    health.set_reads_granted(false);
    supervisor.spawn("RBAC check", {
        let health = health.clone();
        async move {
            rbac::check(review, rbac_needs, health).await;
            Ok(())
        }
    });

    // Pause periods end on time on whichever replica leads (a resume is a write).
    if notifier.is_none() {
        supervisor.spawn("pause timers", {
            let (leader, queue) = (leadership.subscribe(), queue.clone());
            async move {
                pauses.run(leader, queue).await;
                Ok(())
            }
        });
    }

    // Restarts by eviction (docs/beyond-stakater.md §13) and due pods (§14), on whichever
    // replica leads; never in webhook or dry-run mode, which write nothing.
    if options.restart_by_eviction || options.reload_pods {
        if notifier.is_some() || options.dry_run {
            warn!(
                "--restart-by-eviction, --reload-pods: no pod is evicted with --webhook-url or --dry-run (nothing is written)"
            );
        } else {
            let evictor = Evictor {
                restarts,
                index: index.clone(),
                // The writes' client: no hidden retries (a disruption budget's 429 is the evictor's
                // to count and retry on its tick) and a timeout (a hung request cannot hold the loop).
                api: Arc::new(KubeRestartApi { client: writes_client }),
                events: events.clone(),
                metrics: metrics.evictions(),
                keys: options.keys.clone(),
                clock: unix_now,
                failing: Mutex::default(),
                pod_owners: Mutex::default(),
            };
            let leader = leadership.subscribe();
            supervisor.spawn("evictor", async move {
                evictor.run(leader).await;
                Ok(())
            });
        }
    }

    // Ready once every watch listed; a sweep on each promotion.
    let catch_up = CatchUp {
        config: CatchUpConfig::new(&options),
        index,
        scope,
        standby,
        queue,
        notifier: boxed_notifier(),
        metrics: metrics.reconcile(),
        health: health.clone(),
    };
    supervisor.spawn("catch-up", {
        let leader = leadership.subscribe();
        async move {
            catch_up.run(synced, leader).await;
            Ok(())
        }
    });

    // Until SIGTERM, or until a task fails.
    let result = supervisor.watch().await;

    shutdown.cancel();
    health.set_ready(false);
    drop(reconciler);
    if let Some(finished) = executor_finished
        && tokio::time::timeout(SHUTDOWN_GRACE * 3, finished).await.is_err()
    {
        warn!("the executor did not finish its writes in time");
    }
    leadership.finished().await;
    supervisor.finish(SHUTDOWN_GRACE).await;
    info!("stopped");
    result
}

/// Returns when SIGTERM or Ctrl-C arrives, having started the shutdown.
async fn wait_for_signal(shutdown: CancellationToken) -> anyhow::Result<()> {
    let mut term = match sigterm() {
        Ok(s) => s,
        Err(e) => {
            warn!(error = %e, "cannot listen for SIGTERM");
            // Ctrl-C and the other tasks still work; this task just has nothing to do.
            shutdown.cancelled().await;
            return Ok(());
        }
    };
    tokio::select! {
        _ = term.recv() => info!("SIGTERM: shutting down"),
        _ = tokio::signal::ctrl_c() => info!("interrupt: shutting down"),
        () = shutdown.cancelled() => return Ok(()),
    }
    shutdown.cancel();
    Ok(())
}

#[cfg(unix)]
fn sigterm() -> std::io::Result<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
}

/// Windows has no SIGTERM: its console closing is the nearest (Ctrl-C is handled as everywhere).
#[cfg(windows)]
fn sigterm() -> std::io::Result<tokio::signal::windows::CtrlClose> {
    tokio::signal::windows::ctrl_close()
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| format!("reloader-{}", std::process::id()))
}
