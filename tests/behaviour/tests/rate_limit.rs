//! `--max-writes-per-second` keeps a fan-out polite, and its effect shows in
//! `reloader_write_rate_limit_wait_seconds` (docs/beyond-stakater.md §4). Every write still lands.

use std::time::{Duration, Instant};

use reloader_harness::Reloader;
use reloader_tests::fixtures::{Kind, ResourceRef, Strategy, TestEnv, WorkloadSpec};

const WORKLOADS: usize = 6;
const RATE: f64 = 2.0;
const WAIT_SUM: &str = "reloader_write_rate_limit_wait_seconds_sum";

#[tokio::test]
async fn a_fan_out_waits_for_the_write_rate_limit_and_every_write_lands() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let shared = ResourceRef::configmap("shared");
    resources.create(&shared, &[("k", "v1")]).await.expect("ConfigMap");
    let mut workloads = Vec::new();
    for i in 0..WORKLOADS {
        let spec = WorkloadSpec::new(Kind::Deployment, format!("fan-{i}"))
            .metadata_annotation("reloader.stakater.com/auto", "true")
            .env_from_configmap(&shared.name)
            .without_pods();
        workloads.push(spec.create(client, ns.name()).await.expect("Deployment"));
    }
    let reloader = Reloader::builder(plane)
        .args([format!("--namespaces={}", ns.name()), format!("--max-writes-per-second={RATE}")])
        .start()
        .await
        .expect("reloader ready");
    let waited_before = reloader.metric(WAIT_SUM).await.expect("metrics").unwrap_or(0.0);

    let started = Instant::now();
    let hash = resources.update_data(&shared, &[("k", "v2")]).await.expect("update");
    for workload in &workloads {
        workload
            .wait_for_marker(client, &shared, Strategy::EnvVars, &hash, Duration::from_secs(60))
            .await
            .expect("every workload reloads despite the limit");
    }
    let elapsed = started.elapsed();
    let waited = reloader.metric(WAIT_SUM).await.expect("metrics").unwrap_or(0.0) - waited_before;

    // A bucket of RATE tokens lets the first writes through; the rest are spaced 1/RATE apart.
    let spaced = (WORKLOADS as f64 - RATE) / RATE;
    assert!(elapsed.as_secs_f64() >= spaced * 0.9, "6 writes at 2/s took only {elapsed:?}");
    assert!(waited >= spaced * 0.9, "the metric shows the waits: {waited} s in total");
}
