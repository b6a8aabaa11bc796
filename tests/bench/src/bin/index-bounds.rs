//! `hack/index-bounds`: what two hostile shapes of input cost the controller (docs/benchmark.md,
//! "Index bounds"), on a local control plane with the binary `RELOADER_BIN` names.
//!
//! - `--patterns`: one Deployment whose `configmap.reloader.stakater.com/reload` holds 1,000
//!   patterns, and 1,000 updates of the ConfigMap its last pattern selects. Reports the
//!   controller's CPU seconds from the first update until the Deployment carries the marker of
//!   the last one, and that time; a build that has not got there after 10 minutes reports how
//!   far it got and the CPU seconds per update so far.
//! - `--wide-configmaps`: 50 ConfigMaps of 10,000 small keys each, against 50 of one key. Reports
//!   the controller's steady RSS with each, and the difference per ConfigMap.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use reloader_bench::procfs;
use reloader_bench::stats::percentile;
use reloader_core::hash::configmap_hashes;
use reloader_core::model::ResourceKind;
use reloader_core::naming::env_var_name;
use reloader_harness::{ControlPlane, PlaneOptions, Reloader};
use serde_json::json;

const RELOAD_ANNOTATION: &str = "configmap.reloader.stakater.com/reload";
const CONTAINER: &str = "app";
/// The ConfigMap the last pattern selects.
const TARGET: &str = "target-cm";
/// From the first update: a build that takes longer reports how far it got, and its CPU.
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(600);
/// After sync, before RSS is read: the allocator returns start-up pages within seconds.
const SETTLE: Duration = Duration::from_secs(20);
const RSS_SAMPLES: usize = 10;

#[derive(Debug, Parser)]
#[command(about = "What 1,000 list patterns, or ConfigMaps of 10,000 keys, cost the controller")]
struct Args {
    /// One workload with `--pattern-count` patterns, `--updates` updates of its ConfigMap.
    #[arg(long, required_unless_present = "wide_configmaps")]
    patterns: bool,
    #[arg(long, default_value_t = 1000)]
    pattern_count: usize,
    #[arg(long, default_value_t = 1000)]
    updates: usize,
    /// `--configmaps` ConfigMaps of `--keys` keys each, against as many of one key.
    #[arg(long)]
    wide_configmaps: bool,
    #[arg(long, default_value_t = 50)]
    configmaps: usize,
    #[arg(long, default_value_t = 10_000)]
    keys: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let args = Args::parse();
    let plane = ControlPlane::start(PlaneOptions::api_only()).await.context("starting a control plane")?;
    if args.patterns {
        patterns(&plane, &args).await?;
    }
    if args.wide_configmaps {
        wide_configmaps(&plane, &args).await?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn patterns(plane: &ControlPlane, args: &Args) -> anyhow::Result<()> {
    let client = plane.client();
    let namespace = "bench-patterns";
    create_namespace(&client, namespace).await?;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    configmaps.create(&PostParams::default(), &configmap(TARGET, data(&[("v", "0")]))).await?;
    // Patterns that select nothing, then the one that selects the target: every update is
    // matched against all of them.
    let list: Vec<String> =
        (1..args.pattern_count).map(|i| format!("app-{i}-.*")).chain(["target-.*".to_owned()]).collect();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    deployments.create(&PostParams::default(), &deployment("web", &list.join(","))).await?;

    // The loop guard would stop a workload reloaded this often: off, so every update counts.
    let reloader = Reloader::builder(plane)
        .arg(format!("--namespaces={namespace}"))
        .arg("--loop-guard=off")
        .start()
        .await?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let cpu_before = cpu(&reloader)?;
    let began = Instant::now();
    for update in 1..=args.updates {
        let patch = json!({ "data": { "v": update.to_string() } });
        configmaps.patch(TARGET, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    }
    let sent = began.elapsed();
    // Each update's marker, to tell how far the controller got if it does not finish in time.
    let markers: BTreeMap<String, usize> = (0..=args.updates)
        .map(|update| (configmap_hashes([("v", update.to_string().as_str())], []).0.to_hex(), update))
        .collect();
    let env_var = env_var_name(ResourceKind::ConfigMap, TARGET);
    let mut reached = 0;
    while reached < args.updates && began.elapsed() < CONVERGE_TIMEOUT {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let web = deployments.get("web").await?;
        let marker = web
            .spec
            .and_then(|s| s.template.spec)
            .and_then(|s| s.containers.into_iter().next())
            .and_then(|c| c.env)
            .into_iter()
            .flatten()
            .find(|e| e.name == env_var)
            .and_then(|e| e.value);
        reached = marker.and_then(|m| markers.get(&m).copied()).unwrap_or(reached);
    }
    let elapsed = began.elapsed();
    let cpu_used = cpu(&reloader)? - cpu_before;
    println!(
        "patterns={} updates={} reached_update={reached} sent_in_s={:.1} {}_s={:.1} controller_cpu_s={:.2} \
         cpu_ms_per_update={:.1}",
        args.pattern_count,
        args.updates,
        sent.as_secs_f64(),
        if reached == args.updates { "converged_in" } else { "timed_out_after" },
        elapsed.as_secs_f64(),
        cpu_used,
        cpu_used * 1000.0 / reached.max(1) as f64,
    );
    Ok(())
}

async fn wide_configmaps(plane: &ControlPlane, args: &Args) -> anyhow::Result<()> {
    let client = plane.client();
    let mut steady = Vec::new();
    for keys in [1, args.keys] {
        let namespace = format!("bench-wide-{keys}");
        create_namespace(&client, &namespace).await?;
        let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
        let entries: Vec<(String, String)> = (0..keys).map(|k| (format!("k{k}"), "v".to_owned())).collect();
        for n in 0..args.configmaps {
            let data = entries.iter().cloned().collect();
            configmaps.create(&PostParams::default(), &configmap(&format!("wide-{n}"), data)).await?;
        }
        let reloader = Reloader::builder(plane).arg(format!("--namespaces={namespace}")).start().await?;
        tokio::time::sleep(SETTLE).await;
        let mut samples = Vec::new();
        for _ in 0..RSS_SAMPLES {
            let memory = procfs::memory(reloader.pid()).context("the controller exited")?;
            samples.push(memory.rss_bytes as f64 / 1024.0 / 1024.0);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let rss = percentile(&samples, 0.5).context("no RSS sample")?;
        println!("configmaps={} keys_each={keys} steady_rss_mib={rss:.1}", args.configmaps);
        steady.push(rss);
        drop(reloader);
    }
    if let [narrow, wide] = steady[..] {
        println!(
            "per_configmap_of_{}_keys_kib={:.0}",
            args.keys,
            (wide - narrow) * 1024.0 / args.configmaps as f64
        );
    }
    Ok(())
}

fn cpu(reloader: &Reloader) -> anyhow::Result<f64> {
    procfs::cpu_seconds(reloader.pid()).context("the controller exited")
}

async fn create_namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    let namespace: Namespace = serde_json::from_value(json!({ "metadata": { "name": name } }))?;
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace).await?;
    Ok(())
}

fn data(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
    entries.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn configmap(name: &str, data: BTreeMap<String, String>) -> ConfigMap {
    ConfigMap {
        metadata: kube::api::ObjectMeta { name: Some(name.to_owned()), ..Default::default() },
        data: Some(data),
        ..Default::default()
    }
}

fn deployment(name: &str, reload_list: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": { "name": name, "annotations": { RELOAD_ANNOTATION: reload_list } },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [{ "name": CONTAINER, "image": "bench" }] }
            }
        }
    }))
    .expect("a valid Deployment")
}
