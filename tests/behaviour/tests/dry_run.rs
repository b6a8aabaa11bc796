//! `reloader --dry-run` (docs/beyond-stakater.md §6) on the real control plane with the real binary: every
//! write it would make is logged and counted (`reloader_dry_run_writes_total`), none is made;
//! the same setup without `--dry-run` reloads (the positive twin).

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use reloader_harness::{NotYet, Reloader, wait_until};
use reloader_tests::fixtures::*;

const WAIT: Duration = Duration::from_secs(60);
const DRY_RUN_WRITES: &str = "reloader_dry_run_writes_total{workload_kind=\"Deployment\"}";

/// The Deployment's resourceVersion once the deployment controller is done with it: observed
/// generation caught up, and no write for two seconds.
async fn settled_resource_version(deployments: &Api<Deployment>, name: &str) -> String {
    let last = std::cell::RefCell::new((String::new(), Instant::now()));
    let last = &last;
    wait_until(&format!("Deployment {name} to settle"), WAIT, || async move {
        let deployment = deployments.get(name).await?;
        let version = deployment.metadata.resource_version.clone().unwrap_or_default();
        let observed = deployment.status.as_ref().and_then(|s| s.observed_generation);
        if observed != deployment.metadata.generation {
            return Err(NotYet::because(format!("observed generation {observed:?}")));
        }
        let mut last = last.borrow_mut();
        if version != last.0 {
            *last = (version, Instant::now());
            return Err(NotYet::because("resourceVersion moved"));
        }
        if last.1.elapsed() < Duration::from_secs(2) {
            return Err(NotYet::because("watching the resourceVersion"));
        }
        Ok(version)
    })
    .await
    .unwrap()
}

async fn dry_run_writes(reloader: &Reloader) -> f64 {
    reloader.metric(DRY_RUN_WRITES).await.unwrap().unwrap_or(0.0)
}

#[tokio::test]
async fn a_dry_run_logs_and_counts_every_write_and_makes_none() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let deployments: Api<Deployment> = ns.api(client);
    let config = ResourceRef::configmap("app-config");
    let token = ResourceRef::secret("api-token");
    let planted = format!("planted-{}-value", ns.name());
    resources.create(&config, &[("key", "v1")]).await.unwrap();
    resources.create(&token, &[("token", "initial")]).await.unwrap();
    let web = WorkloadSpec::new(Kind::Deployment, "web")
        .replicas(0)
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_configmap(&config.name)
        .env_from_secret(&token.name)
        .create(client, ns.name())
        .await
        .unwrap();
    let before = settled_resource_version(&deployments, "web").await;
    let initial = web.observe(client).await.unwrap();

    let mut dry = Reloader::builder(plane)
        .name("dry-run")
        .args([format!("--namespaces={}", ns.name()), "--dry-run".to_owned()])
        .start()
        .await
        .unwrap();
    assert_eq!(dry_run_writes(&dry).await, 0.0, "nothing to do at start-up");

    // A ConfigMap change: the write is logged and counted.
    let started = Instant::now();
    resources.update_data(&config, &[("key", "v2")]).await.unwrap();
    wait_until("the dry-run write for the ConfigMap to be counted", WAIT, || async {
        match dry_run_writes(&dry).await {
            n if n >= 1.0 => Ok(()),
            n => Err(NotYet::because(format!("{DRY_RUN_WRITES} = {n}"))),
        }
    })
    .await
    .unwrap();
    let latency = started.elapsed();
    let log = dry.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("dry run") && l.contains("web"))
        .unwrap_or_else(|| panic!("no dry-run line about web in:\n{log}"));
    assert!(line.contains("STAKATER_APP_CONFIG_CONFIGMAP"), "the line says what it would write: {line}");

    // A Secret change: counted again; its value is in no log line.
    resources.update_data(&token, &[("token", &planted)]).await.unwrap();
    wait_until("the dry-run write for the Secret to be counted", WAIT, || async {
        match dry_run_writes(&dry).await {
            n if n >= 2.0 => Ok(()),
            n => Err(NotYet::because(format!("{DRY_RUN_WRITES} = {n}"))),
        }
    })
    .await
    .unwrap();
    let log = dry.log_text();
    assert!(log.contains("STAKATER_API_TOKEN_SECRET"), "{log}");
    assert!(!log.contains(&planted), "the Secret's value is in the log:\n{log}");

    // Nothing was written: not now, and not after five times the observed latency.
    web.assert_no_change_for(client, &initial, negative_wait(latency)).await;
    let after = deployments.get("web").await.unwrap();
    assert_eq!(
        after.metadata.resource_version.as_deref(),
        Some(before.as_str()),
        "a dry run wrote the workload"
    );
    assert_eq!(web.marker(client, &config, Strategy::EnvVars).await.unwrap(), None);
    dry.terminate(Duration::from_secs(5));

    // The positive twin: the same controller without --dry-run reloads for the next change.
    let real = env.reloader_builder().name("real").start().await.unwrap();
    let v3 = resources.update_data(&config, &[("key", "v3")]).await.unwrap();
    web.wait_for_marker(client, &config, Strategy::EnvVars, &v3, WAIT).await.unwrap();
    let reloaded = deployments.get("web").await.unwrap();
    assert_ne!(reloaded.metadata.resource_version.as_deref(), Some(before.as_str()));
    assert_eq!(dry_run_writes(&real).await, 0.0, "a real run counts no dry-run write");
    assert!(!real.log_text().contains("dry run"), "{}", real.log_text());
}
