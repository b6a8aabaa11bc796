//! Applies one workload's queued changes: read the object fresh, let its backend build the
//! write (nothing if it already carries the markers), send it, and retry per workload —
//! immediately after a re-read on 409, with backoff on transient errors. Reports every outcome.

use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, PropagationPolicy};
use reloader_core::model::WorkloadKey;
use reloader_core::workload::{MarkerAction, MarkerChange, PatchKind, WorkloadWrite, WriteContext};
use tracing::{error, info, warn};

use super::Context;
use super::kinds::{api_resource, load};
use crate::alerts::ReloadNotice;

pub const FIELD_MANAGER: &str = "Reloader";
const MAX_CONFLICT_RETRIES: u32 = 10;
const MAX_TRANSIENT_RETRIES: u32 = 5;

#[derive(Debug, thiserror::Error)]
pub enum WriteFailure {
    #[error(transparent)]
    Api(#[from] kube::Error),
    #[error(transparent)]
    Backend(#[from] reloader_core::workload::WriteError),
    #[error("invalid JSON patch built for {0}: {1}")]
    Patch(WorkloadKey, serde_json::Error),
    #[error("Job {0} was not deleted within 30s; not recreating it")]
    JobStillPresent(String),
}

impl WriteFailure {
    /// The `reloader_errors_total{type}` label.
    fn label(&self) -> &'static str {
        match self {
            WriteFailure::Api(kube::Error::Api(e)) if e.code == 403 => "forbidden",
            WriteFailure::Api(kube::Error::Api(e)) if e.code == 409 => "conflict",
            WriteFailure::Api(kube::Error::Api(_)) => "api",
            WriteFailure::Api(_) => "transport",
            WriteFailure::Backend(_) => "workload",
            WriteFailure::Patch(..) => "patch",
            WriteFailure::JobStillPresent(_) => "job_recreate",
        }
    }
}

enum Outcome {
    Written,
    AlreadyCurrent,
    Gone,
    DryRun,
}

fn write_context(ctx: &Context) -> WriteContext<'_> {
    let now = chrono::Utc::now();
    WriteContext {
        keys: &ctx.options.keys,
        now_unix: now.timestamp(),
        now_rfc3339: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    }
}

pub async fn reload(ctx: &Context, key: &WorkloadKey, changes: &[MarkerChange], first_event: Instant) {
    let started = Instant::now();
    let result = with_retries(ctx, key, || attempt_reload(ctx, key, changes)).await;
    let kind = key.kind.as_str();
    match result {
        Ok(Outcome::Written) => {
            ctx.metrics.reload_executed(true, &key.namespace);
            ctx.metrics.action(kind, "success", started.elapsed());
            ctx.metrics.reload_latency(first_event.elapsed());
            for change in changes {
                let message = format!(
                    "Changes detected in {} '{}' in namespace '{}'; reloaded {} '{}'",
                    change.resource.kind, change.resource.name, change.resource.namespace, kind, key.name
                );
                info!(workload = %key, resource = %change.resource, strategy = change.strategy.as_str(), "reloaded");
                ctx.events.reloaded(key, &message).await;
                if let Some(alerter) = &ctx.alerter {
                    alerter.send(notice(key, change));
                }
            }
        }
        Ok(Outcome::DryRun) => {
            ctx.metrics.dry_run_write(kind);
            ctx.metrics.action(kind, "dry_run", started.elapsed());
        }
        Ok(Outcome::AlreadyCurrent) => ctx.metrics.skipped("already_current"),
        Ok(Outcome::Gone) => ctx.metrics.skipped("workload_gone"),
        Err(failure) => {
            ctx.metrics.reload_executed(false, &key.namespace);
            ctx.metrics.action(kind, "error", started.elapsed());
            ctx.metrics.error(failure.label());
            let resources: Vec<String> = changes.iter().map(|c| c.resource.to_string()).collect();
            error!(workload = %key, resources = ?resources, error = %failure, "reload failed");
            let message = format!("Reload for {} failed: {failure}", resources.join(", "));
            ctx.events.reload_failed(key, &message).await;
        }
    }
}

pub async fn resume(ctx: &Context, key: &WorkloadKey) {
    let result = with_retries(ctx, key, || async {
        let Some(loaded) = load(&ctx.client, key).await? else { return Ok(Outcome::Gone) };
        match loaded.with(|w| w.resume_write(&write_context(ctx))) {
            Some(write) => send(ctx, key, write).await,
            None => Ok(Outcome::AlreadyCurrent),
        }
    })
    .await;
    match result {
        Ok(Outcome::Written) => info!(workload = %key, "pause period over; resumed"),
        Ok(_) => {}
        Err(failure) => {
            ctx.metrics.error(failure.label());
            error!(workload = %key, error = %failure, "could not resume after the pause period");
            ctx.events.reload_failed(key, &format!("Resume after pause period failed: {failure}")).await;
        }
    }
}

async fn with_retries<F, Fut>(
    ctx: &Context,
    key: &WorkloadKey,
    mut attempt: F,
) -> Result<Outcome, WriteFailure>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Outcome, WriteFailure>>,
{
    let (mut conflicts, mut transient) = (0, 0);
    let mut backoff = Duration::from_millis(200);
    loop {
        match attempt().await {
            Err(WriteFailure::Api(kube::Error::Api(e)))
                if e.code == 409 && conflicts < MAX_CONFLICT_RETRIES =>
            {
                conflicts += 1;
                ctx.metrics.retry();
                warn!(workload = %key, attempt = conflicts, "conflict; re-reading and retrying");
            }
            Err(WriteFailure::Api(e)) if is_transient(&e) && transient < MAX_TRANSIENT_RETRIES => {
                transient += 1;
                ctx.metrics.retry();
                warn!(workload = %key, error = %e, retry_in = ?backoff, "transient error; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
            other => return other,
        }
    }
}

fn is_transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 429 || s.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

async fn attempt_reload(
    ctx: &Context,
    key: &WorkloadKey,
    changes: &[MarkerChange],
) -> Result<Outcome, WriteFailure> {
    let Some(loaded) = load(&ctx.client, key).await? else { return Ok(Outcome::Gone) };
    match loaded.with(|w| w.reload_write(changes, &write_context(ctx)))? {
        Some(write) => send(ctx, key, write).await,
        None => Ok(Outcome::AlreadyCurrent),
    }
}

async fn send(ctx: &Context, key: &WorkloadKey, write: WorkloadWrite) -> Result<Outcome, WriteFailure> {
    if ctx.options.dry_run {
        info!(workload = %key, write = %describe(&write), "dry run: would write");
        return Ok(Outcome::DryRun);
    }
    match write {
        WorkloadWrite::Patch { kind, body } => {
            let api: Api<DynamicObject> =
                Api::namespaced_with(ctx.client.clone(), &key.namespace, &api_resource(key.kind));
            let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
            let patch = match kind {
                PatchKind::Strategic => Patch::Strategic(body),
                PatchKind::Merge => Patch::Merge(body),
                PatchKind::Json => Patch::Json(
                    serde_json::from_value(body).map_err(|e| WriteFailure::Patch(key.clone(), e))?,
                ),
            };
            match api.patch(&key.name, &params, &patch).await {
                Ok(_) => {}
                // A JSON patch whose resourceVersion `test` op failed: someone wrote the object
                // since we read it. That is a conflict: re-read and retry like a 409.
                Err(kube::Error::Api(mut e))
                    if kind == PatchKind::Json && e.code == 422 && e.message.contains("test") =>
                {
                    e.code = 409;
                    return Err(kube::Error::Api(e).into());
                }
                Err(e) => return Err(e.into()),
            }
        }
        WorkloadWrite::CreateJob(job) => {
            let api: Api<Job> = Api::namespaced(ctx.client.clone(), &key.namespace);
            api.create(&post_params(), &job).await?;
        }
        WorkloadWrite::RecreateJob(job) => recreate_job(ctx, key, *job).await?,
    }
    Ok(Outcome::Written)
}

fn post_params() -> PostParams {
    PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() }
}

async fn recreate_job(ctx: &Context, key: &WorkloadKey, job: Job) -> Result<(), WriteFailure> {
    let api: Api<Job> = Api::namespaced(ctx.client.clone(), &key.namespace);
    let params =
        DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..Default::default() };
    match api.delete(&key.name, &params).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => return Err(e.into()),
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while api.get_opt(&key.name).await?.is_some() {
        if Instant::now() > deadline {
            return Err(WriteFailure::JobStillPresent(key.to_string()));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    api.create(&post_params(), &job).await?;
    Ok(())
}

fn describe(write: &WorkloadWrite) -> String {
    match write {
        WorkloadWrite::Patch { kind, body } => format!("{kind:?} patch {body}"),
        WorkloadWrite::CreateJob(job) => format!("create Job from {:?}", job.metadata.generate_name),
        WorkloadWrite::RecreateJob(job) => format!("recreate Job {:?}", job.metadata.name),
    }
}

fn notice(key: &WorkloadKey, change: &MarkerChange) -> ReloadNotice {
    ReloadNotice {
        workload_kind: key.kind.to_string(),
        workload_namespace: key.namespace.to_string(),
        workload_name: key.name.to_string(),
        resource_kind: change.resource.kind.to_string(),
        resource_name: change.resource.name.to_string(),
        hash: match &change.action {
            MarkerAction::Set(h) => h.to_hex(),
            MarkerAction::Remove => String::new(),
        },
    }
}
