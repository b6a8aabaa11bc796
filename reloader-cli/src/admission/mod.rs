//! The admission server (docs/beyond-stakater.md §3, docs/security.md "Jobs"): HTTPS on
//! `--webhook-addr` with the certificate from `--webhook-tls-cert`/`--webhook-tls-key`, serving
//! what its flags ask for:
//!
//! - `POST /mutate` (`--admission-webhook`, opt-in): an AdmissionReview v1 for a workload,
//!   answered with the JSON patch that keeps its markers across a re-apply (UPDATE) or stamps
//!   them with the current hashes (CREATE). Always allowed: this webhook never blocks a write,
//!   and it answers from the index in memory without calling the API server;
//! - `POST /validate-jobs` (`--job-fence`, the chart's default where the write fence is): a Job
//!   the controller's own ServiceAccount creates is allowed only if a reload would create it;
//! - `GET /healthz`: 200 while the server runs.
//!
//! The certificate files are polled and a renewed pair is served without a restart. With
//! `--webhook-client-ca` only clients with a certificate that bundle signed are served (the API
//! server; docs/security.md), so nobody else can ask it for the hashes of a namespace's Secrets.

mod intake;
mod job_fence;
mod review;
mod server;
mod tls;

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use reloader_core::annotations::AnnotationKeys;
use reloader_core::decide::DecideOptions;
use reloader_core::index::Index;
use reloader_core::options::{AdmissionEndpoints, AdmissionWebhook};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::job_origins::JobOrigins;
use crate::kinds::EnabledKinds;
use crate::observe::metrics::{AdmissionMetrics, AdmissionOperation, AdmissionOutcome};
use crate::scope::ScopeFilter;

use tls::{ReloadingCertificate, ReloadingClientCa};

/// What a review reads: the index the watches keep, the rules the controller decides by, and
/// where to count answers. Nothing here calls the API server.
pub(crate) struct AdmissionState {
    pub(crate) index: Arc<RwLock<Index>>,
    pub(crate) keys: AnnotationKeys,
    pub(crate) decide: DecideOptions,
    /// `--dry-run`: answer as if, but never patch.
    pub(crate) dry_run: bool,
    /// Which namespaces are in scope right now (namespace selector and ignore list).
    pub(crate) scope: ScopeFilter,
    /// The workload kinds this controller rolls.
    pub(crate) kinds: EnabledKinds,
    pub(crate) metrics: AdmissionMetrics,
    /// `--coalesce-period`: how long a release's rollout is held (docs/beyond-stakater.md §11).
    pub(crate) hold: Duration,
    /// What a Job the controller creates may come from: the Job fence's store, with `--job-fence`.
    pub(crate) origins: Option<Arc<JobOrigins>>,
}

/// How often the certificate files are checked for a renewal.
const CERTIFICATE_POLL: Duration = Duration::from_secs(5);

/// Runs the webhook until `shutdown`. A webhook that cannot start (the address is taken, the
/// certificate does not load) stops the whole process: the flag asked for it, and a replica
/// that silently lacks it would hide the problem until the next re-apply rolls a workload.
pub(crate) async fn serve(
    ctx: Arc<AdmissionState>,
    config: AdmissionWebhook,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let result = run(ctx, &config, shutdown.clone()).await;
    if let Err(e) = &result {
        error!(error = format!("{e:#}"), "admission webhook cannot serve; shutting down");
    }
    result.context("admission webhook")
}

async fn run(
    ctx: Arc<AdmissionState>,
    config: &AdmissionWebhook,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certificate = Arc::new(
        ReloadingCertificate::load(&config.tls_cert, &config.tls_key, provider.clone())
            .context("loading the webhook certificate")?,
    );
    let client_ca = match &config.client_ca {
        Some(path) => Some(Arc::new(
            ReloadingClientCa::load(path, provider.clone()).context("loading the webhook client CA")?,
        )),
        None => None,
    };
    let acceptor = server::acceptor(certificate.server_config(client_ca.clone())?);
    let listener = crate::listen::bind(config.addr)
        .with_context(|| format!("listening on {} (--webhook-addr)", config.addr))?;
    info!(addr = %config.addr, cert = %config.tls_cert.display(),
        client_ca = config.client_ca.as_ref().map(|p| p.display().to_string()),
        "admission webhook serving");
    // Both end on `shutdown`; the certificate poller is owned here, not left running detached.
    tokio::join!(
        watch_certificate(certificate, client_ca, shutdown.clone()),
        server::serve_tls(listener, acceptor, router(ctx, config.endpoints), shutdown),
    );
    Ok(())
}

fn router(ctx: Arc<AdmissionState>, endpoints: AdmissionEndpoints) -> Router {
    // The body limit is `intake::MAX_REVIEW_BYTES`, applied while reading (no extractor reads it).
    // An endpoint not asked for is not routed (404): `/mutate` answers with hashes, so a server
    // run for the Job fence alone must not answer it.
    let mut router = Router::new().route("/healthz", get(|| async { "ok" }));
    if endpoints.mutate {
        router = router.route("/mutate", post(mutate));
    }
    // The origins store exists exactly when `--job-fence` asked for the fence (run.rs).
    if let Some(origins) = ctx.origins.clone() {
        router = router.route(
            "/validate-jobs",
            post(move |State(ctx): State<Arc<AdmissionState>>, headers: HeaderMap, body: Body| async move {
                answer(ctx, headers, body, |ctx, request| {
                    job_fence::review(&origins, &ctx.keys, request, Instant::now())
                })
                .await
            }),
        );
    }
    router.with_state(ctx)
}

async fn mutate(State(ctx): State<Arc<AdmissionState>>, headers: HeaderMap, body: Body) -> Response {
    answer(ctx, headers, body, review::review).await
}

/// Reads a review, answers it with `review` inside its span, and counts the answer.
async fn answer(
    ctx: Arc<AdmissionState>,
    headers: HeaderMap,
    body: Body,
    review: impl FnOnce(
        &AdmissionState,
        &AdmissionRequest<DynamicObject>,
    ) -> (AdmissionResponse, AdmissionOutcome),
) -> Response {
    let started = Instant::now();
    let request = match intake::read_request(&headers, body).await {
        Ok(request) => request,
        Err(rejection) => return reject(&ctx, rejection, started),
    };
    let operation = operation_label(&request);
    // Names only: the object itself may carry secret values in its env.
    let span = tracing::info_span!(
        "reloader.admission_review",
        "reloader.workload.kind" = %request.kind.kind,
        "k8s.namespace.name" = request.namespace.as_deref().unwrap_or_default(),
        "reloader.workload.name" = %request.name,
        "reloader.admission.operation" = operation.as_label(),
        "reloader.admission.outcome" = tracing::field::Empty,
    );
    let (response, outcome) = span.in_scope(|| review(&ctx, &request));
    span.record("reloader.admission.outcome", outcome.as_label());
    ctx.metrics.admission(operation, outcome, started.elapsed());
    axum::Json(response.into_review()).into_response()
}

/// Not an AdmissionReview this webhook answers: an HTTP error, so the API server applies the
/// webhook's failure policy. Counted by reason and logged without the body.
fn reject(ctx: &AdmissionState, rejection: intake::Rejection, started: Instant) -> Response {
    ctx.metrics.admission(AdmissionOperation::Unknown, AdmissionOutcome::Error, started.elapsed());
    ctx.metrics.admission_rejected(rejection.reason);
    warn!(reason = rejection.reason.as_label(), detail = %rejection.detail,
        "admission webhook: request rejected, not an AdmissionReview it answers");
    (rejection.status(), rejection.detail).into_response()
}

fn operation_label(request: &AdmissionRequest<DynamicObject>) -> AdmissionOperation {
    use kube::core::admission::Operation;
    match request.operation {
        Operation::Create => AdmissionOperation::Create,
        Operation::Update => AdmissionOperation::Update,
        Operation::Delete => AdmissionOperation::Delete,
        Operation::Connect => AdmissionOperation::Connect,
    }
}

async fn watch_certificate(
    certificate: Arc<ReloadingCertificate>,
    client_ca: Option<Arc<ReloadingClientCa>>,
    shutdown: CancellationToken,
) {
    let mut ticks = tokio::time::interval(CERTIFICATE_POLL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticks.tick() => {}
        }
        match certificate.refresh() {
            Ok(true) => info!("admission webhook: certificate files changed; serving the new certificate"),
            Ok(false) => {}
            Err(e) => {
                warn!(error = %e, "admission webhook: the changed certificate files do not load; keeping the previous certificate")
            }
        }
        match client_ca.as_deref().map(ReloadingClientCa::refresh) {
            Some(Ok(true)) => {
                info!("admission webhook: the client CA file changed; verifying clients with the new bundle")
            }
            Some(Err(e)) => {
                warn!(error = %e, "admission webhook: the changed client CA file does not load; keeping the previous bundle")
            }
            Some(Ok(false)) | None => {}
        }
    }
}

#[cfg(test)]
mod tests;
