//! H55: the chart's admission webhook, called by the API server through its Service (endpoint
//! routing: `--enable-aggregator-routing` makes the API server dial the Service's ready endpoint,
//! the pod's IP on the node's bridge) with the certificate the chart generated. With it, the
//! chart's Job fence (docs/security.md, "Jobs"): reloads spawn and recreate Jobs through it, with
//! either replica answering, and the controller's own identity cannot create any other Job.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use reloader_harness::{NotYet, wait_until};
use serde_json::{Value, json};

use crate::chart::{APPS, RELEASE, RELEASE_NAMESPACE, RELEASE_SELECTOR};
use crate::support::{Cluster, RELOAD_PATIENCE, webhook_enabled};

/// The env var the env-vars strategy adds for ConfigMap `web` (Stakater's name).
const MARKER: &str = "STAKATER_WEB_CONFIGMAP";

fn has_marker(deployment: &Deployment) -> bool {
    deployment.spec.as_ref().and_then(|spec| spec.template.spec.as_ref()).is_some_and(|pod| {
        pod.containers
            .iter()
            .flat_map(|container| container.env.iter().flatten())
            .any(|env| env.name == MARKER)
    })
}

/// `web` as its manifest says it, without the marker reloader added: what a GitOps tool or
/// `helm upgrade` re-applies (a full replace).
fn as_declared(mut deployment: Deployment) -> Deployment {
    if let Some(pod) = deployment.spec.as_mut().and_then(|spec| spec.template.spec.as_mut()) {
        for container in &mut pod.containers {
            if let Some(env) = container.env.as_mut() {
                env.retain(|env| env.name != MARKER);
            }
        }
    }
    deployment.metadata.managed_fields = None;
    deployment
}

/// A re-apply without the marker keeps it (the webhook put it back), so no real pod is rolled.
pub async fn through_its_service(cluster: &Cluster) {
    let values = json!({
        "reloader": { "enableHA": true, "deployment": { "replicas": 2 } },
        "webhook": webhook_enabled(),
    });
    cluster.helm_install(RELEASE, RELEASE_NAMESPACE, &values);
    cluster.rolled_out(RELEASE_NAMESPACE, RELEASE_SELECTOR).await;
    cluster.ready_pods(RELEASE_NAMESPACE, RELEASE_SELECTOR, 2).await;

    let deployments: Api<Deployment> = Api::namespaced(cluster.client(), APPS);
    let current = deployments.get("web").await.expect("reading web");
    assert!(has_marker(&current), "web was reloaded before, so it carries {MARKER}");

    // Until the webhook answers, a dry-run replace shows the marker gone (failurePolicy Ignore).
    wait_until("the webhook to keep the marker on a dry-run re-apply", RELOAD_PATIENCE, || async {
        let current = deployments.get("web").await?;
        let dry_run = PostParams { dry_run: true, ..PostParams::default() };
        let answer = deployments.replace("web", &dry_run, &as_declared(current)).await?;
        if has_marker(&answer) { Ok(()) } else { Err(NotYet::because("the marker was dropped")) }
    })
    .await
    .unwrap_or_else(|error| panic!("{error}\n{}", cluster.node_log_tail()));

    let pods: Api<Pod> = Api::namespaced(cluster.client(), APPS);
    let uids = |list: Vec<Pod>| list.into_iter().filter_map(|pod| pod.metadata.uid).collect::<Vec<_>>();
    let pods_before =
        uids(pods.list(&ListParams::default().labels("app=web")).await.expect("listing pods").items);
    let current = deployments.get("web").await.expect("reading web");
    let generation = current.metadata.generation;
    let template = serde_json::to_value(&current.spec.as_ref().expect("a spec").template).expect("json");
    let replaced = deployments
        .replace("web", &PostParams::default(), &as_declared(current))
        .await
        .expect("re-applying web");
    assert!(has_marker(&replaced), "the webhook kept {MARKER} on the re-apply");
    let after = serde_json::to_value(&replaced.spec.as_ref().expect("a spec").template).expect("json");
    assert_eq!(
        replaced.metadata.generation, generation,
        "the re-apply changed nothing in the spec:\n{template:#}\n{after:#}"
    );

    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    let pods_after =
        uids(pods.list(&ListParams::default().labels("app=web")).await.expect("listing pods").items);
    assert_eq!(pods_after, pods_before, "no pod of web was replaced");

    jobs_through_the_fence(cluster).await;
}

/// The env var the env-vars strategy adds for ConfigMap `batch-config`.
const BATCH_MARKER: &str = "STAKATER_BATCH_CONFIG_CONFIGMAP";

fn batch_marker(job: &Job) -> Option<String> {
    let pod = job.spec.as_ref()?.template.spec.as_ref()?;
    let env = pod.containers.first()?.env.as_ref()?;
    env.iter().find(|env| env.name == BATCH_MARKER).and_then(|env| env.value.clone())
}

/// Suspended Jobs (no pod runs), reloaded on `batch-config`.
fn job_spec(image: &str) -> Value {
    json!({"suspend": true, "template": {"spec": {"restartPolicy": "Never",
        "containers": [{"name": "run", "image": image}]}}})
}

async fn jobs_through_the_fence(cluster: &Cluster) {
    let client = cluster.client();
    let watched = json!({"configmap.reloader.stakater.com/reload": "batch-config"});
    cluster.put_config_map(APPS, "batch-config", "mode", "one").await;
    let cron_job: CronJob = serde_json::from_value(json!({
        "metadata": {"name": "nightly", "annotations": watched},
        "spec": {"schedule": "0 1 1 1 *", "jobTemplate": {"spec": job_spec("registry.example/report:1")}},
    }))
    .unwrap();
    Api::<CronJob>::namespaced(client.clone(), APPS).create(&PostParams::default(), &cron_job).await.unwrap();
    let jobs: Api<Job> = Api::namespaced(client.clone(), APPS);
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "migrate", "annotations": watched}, "spec": job_spec("registry.example/migrate:1"),
    }))
    .unwrap();
    jobs.create(&PostParams::default(), &job).await.unwrap();
    // Both replicas watch them before the change (either may answer the fence's reviews).
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    cluster.put_config_map(APPS, "batch-config", "mode", "two").await;
    wait_until("a Job spawned from nightly and migrate recreated, with markers", RELOAD_PATIENCE, || async {
        let listed = jobs.list(&ListParams::default()).await?.items;
        let marked = |prefix: &str| {
            listed.iter().any(|job| {
                job.metadata.name.as_deref().is_some_and(|name| name.starts_with(prefix))
                    && batch_marker(job).is_some()
            })
        };
        if marked("nightly-") && marked("migrate") { Ok(()) } else { Err(NotYet::because("not both yet")) }
    })
    .await
    .unwrap_or_else(|error| panic!("{error}\n{}", cluster.node_log_tail()));

    // As the controller (impersonated): a spawn from nightly with another image, a Job with no
    // origin (429, which the client retries until it gives up): neither is created.
    let as_controller = jobs_as_controller(cluster).await;
    let uid = Api::<CronJob>::namespaced(client.clone(), APPS).get("nightly").await.unwrap().metadata.uid;
    let evil_spawn: Job = serde_json::from_value(json!({
        "metadata": {"name": "nightly-evil", "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob",
            "name": "nightly", "uid": uid, "controller": true}]},
        "spec": job_spec("registry.example/evil:1"),
    }))
    .unwrap();
    match as_controller.create(&PostParams::default(), &evil_spawn).await {
        Err(kube::Error::Api(status)) => {
            assert!(status.code == 403 && status.message.contains("write fence"), "{status:?}")
        }
        other => panic!("a spawn with another image must be refused, got {other:?}"),
    }
    let stranger: Job =
        serde_json::from_value(json!({"metadata": {"name": "stranger"}, "spec": job_spec("busybox")}))
            .unwrap();
    assert_refused(&as_controller, &stranger).await;
    for name in ["nightly-evil", "stranger"] {
        assert!(jobs.get_opt(name).await.unwrap().is_none(), "{name} was created");
    }
}

/// The Jobs of `APPS` as the chart's controller ServiceAccount (impersonated by the admin).
pub async fn jobs_as_controller(cluster: &Cluster) -> Api<Job> {
    let deployments: Api<Deployment> = Api::namespaced(cluster.client(), RELEASE_NAMESPACE);
    let controller = deployments.list(&ListParams::default().labels(RELEASE_SELECTOR)).await.unwrap().items;
    let account =
        controller[0].spec.as_ref().and_then(|s| s.template.spec.as_ref()?.service_account_name.clone());
    let mut config = cluster.plane.admin_config().clone();
    config.auth_info.impersonate =
        Some(format!("system:serviceaccount:{RELEASE_NAMESPACE}:{}", account.expect("a ServiceAccount")));
    Api::namespaced(kube::Client::try_from(config).unwrap(), APPS)
}

/// `job` has no origin: the fence answers 429, which the client retries until it gives up; it
/// is never created.
pub async fn assert_refused(as_controller: &Api<Job>, job: &Job) {
    let attempt = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        as_controller.create(&PostParams::default(), job),
    )
    .await;
    assert!(!matches!(attempt, Ok(Ok(_))), "a Job with no origin must be refused, got {attempt:?}");
}
