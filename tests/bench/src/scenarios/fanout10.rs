//! F10, F1 ten times wider: one ConfigMap referenced by `Plan::f10_workloads` Deployments (3,000),
//! created concurrently; each update of the ConfigMap is timed to the last Deployment changed,
//! and to the median one.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde::Serialize;
use serde_json::json;

use super::pairs::{create_namespace, update_configmap};
use crate::dataset::{bounded, create, create_workload};
use crate::identity::from_json;
use crate::observer::WorkloadObserver;
use crate::rows::{PerSubject, figure};
use crate::stats::{Spread, percentile};
use crate::subject::{Launch, Subject};
use crate::{BenchError, Plan, report::ScenarioResult, report::Target};
use reloader_harness::ControlPlane;
use reloader_tests::fixtures::{ANNOTATION_AUTO, Kind, WorkloadSpec};

const CONFIGMAP: &str = "shared";
const START_TIMEOUT: Duration = Duration::from_secs(600);
/// Stakater writes at client-go's default 5 requests per second: 3,000 writes take ten minutes.
const FAN_OUT_TIMEOUT: Duration = Duration::from_secs(1800);

/// One controller's F10.
#[derive(Debug, Clone, Serialize)]
pub struct FanOutcome {
    pub workloads: usize,
    /// Per update: seconds to the last Deployment changed.
    pub last_seconds: Vec<f64>,
    /// Per update: seconds to the median Deployment changed.
    pub median_seconds: Vec<f64>,
    /// Deployments never seen changing, summed over the updates.
    pub missed: usize,
}

/// Creates F10's objects for `subject` in a namespace of its own, starts it, times `repeat`
/// updates, and stops it.
pub async fn run(
    plane: &ControlPlane,
    subject: &Subject,
    log_dir: &Path,
    plan: &Plan,
    repeat: usize,
) -> Result<FanOutcome, BenchError> {
    let client = plane.client();
    let namespace = format!("f10-{}", subject.label());
    create_namespace(&client, &namespace).await?;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    create(&configmaps, from_json(json!({ "metadata": { "name": CONFIGMAP }, "data": { "value": "0" } })))
        .await?;
    let names: Vec<String> = (0..plan.f10_workloads).map(|i| format!("app-{i:05}")).collect();
    bounded(0..names.len(), |i| {
        let spec = WorkloadSpec::new(Kind::Deployment, &names[i])
            .without_pods()
            .env_from_configmap(CONFIGMAP)
            .metadata_annotation(ANNOTATION_AUTO, "true");
        let (client, namespace) = (client.clone(), namespace.clone());
        async move { create_workload(&client, spec, &namespace).await }
    })
    .await?;
    let observer = WorkloadObserver::start(client.clone(), &namespace).await?;

    let mut controller = subject.start(plane, log_dir, &Launch::named("f10")).await?;
    controller.wait_ready(START_TIMEOUT).await?;
    tokio::time::sleep(plan.quiet).await;
    let mut outcome = FanOutcome {
        workloads: names.len(),
        last_seconds: Vec::new(),
        median_seconds: Vec::new(),
        missed: 0,
    };
    controller
        .while_alive(async {
            for run in 0..repeat {
                let before: Vec<i64> = names.iter().map(|name| observer.generation(name)).collect();
                let updated = update_configmap(&configmaps, CONFIGMAP, &format!("f10-{run}")).await?;
                let deadline = Instant::now() + FAN_OUT_TIMEOUT;
                let mut seconds = Vec::with_capacity(names.len());
                for (name, generation) in names.iter().zip(before) {
                    match observer.wait_changed(name, generation, deadline).await {
                        Some(at) => seconds.push(at.saturating_duration_since(updated).as_secs_f64()),
                        None => outcome.missed += 1,
                    }
                }
                outcome.last_seconds.push(percentile(&seconds, 1.0).unwrap_or(f64::NAN));
                outcome.median_seconds.push(percentile(&seconds, 0.5).unwrap_or(f64::NAN));
                tokio::time::sleep(plan.quiet).await;
            }
            Ok::<_, BenchError>(())
        })
        .await??;
    controller.kill();
    Ok(outcome)
}

/// F10's rows: to the last and to the median Deployment, medians over the updates.
pub fn rows(f10: &PerSubject<FanOutcome>) -> Vec<ScenarioResult> {
    let workloads = f10.ours.as_ref().map_or(0, |o| o.workloads);
    let detail = json!({ "ours": f10.ours.as_ref().ok(), "stakater": f10.stakater.as_ref().ok() });
    let median = |samples: &[f64]| Spread::of(samples).map(|s| s.median);
    vec![
        figure(
            f10,
            "F10",
            &format!("F10 update to last of the fan-out to {workloads} changed"),
            "s",
            Target::RatioAtMost(0.10),
            |o| if o.missed > 0 { None } else { median(&o.last_seconds) },
        )
        .detail(detail.clone()),
        figure(
            f10,
            "F10-median",
            &format!("F10 update to half of the {workloads} changed"),
            "s",
            Target::Informational,
            |o| median(&o.median_seconds),
        )
        .detail(detail),
    ]
}
