//! Switching day, played on the plane: Stakater's own chart (read from its git dir at run time,
//! never committed) is `helm install`ed, the Stakater binary runs as that chart's Deployment would
//! (its args, env and ServiceAccount) and reloads a workload of every kind; then the release is
//! `helm upgrade`d to our chart with the same values, and our binary takes over as our chart's
//! Deployment would. Nothing may roll again: no new ReplicaSet or ControllerRevision, no Job,
//! no generation or marker change; and every metric family Stakater exported (name, type, label
//! names) must be exported by ours once it has reloaded something.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, ReplicaSet};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use reloader_harness::{ControlPlane, KubeconfigFile, NotYet, wait_until};
use reloader_tests::chart::{Helm, Manifest};
use reloader_tests::fixtures::{
    ANNOTATION_AUTO, Kind, Observed, ResourceRef, Resources, Strategy, WorkloadSpec, observe,
};

use super::{DiffOptions, create_namespace, say};
use crate::BenchError;
use crate::subject::{Launch, Subject};

const RELEASE: &str = "reloader";
const RELEASE_NAMESPACE: &str = "switch-release";
const APPS: &str = "switch-apps";
const WAIT: Duration = Duration::from_secs(90);

/// The values both charts get: every kind the plane hosts.
fn values() -> Value {
    json!({ "reloader": { "isArgoRollouts": true, "isOpenshift": true } })
}

/// The same values for our chart, without the Job fence: our binary runs here as a local process,
/// which the API server cannot call through the chart's Service (the fence is proven on the real
/// node, `in_cluster` H53/H55).
fn our_values() -> Value {
    let mut values = values();
    values["writeFence"] = json!({ "jobs": false });
    values
}

fn fleet() -> Vec<WorkloadSpec> {
    Kind::ALL
        .into_iter()
        .map(|kind| {
            WorkloadSpec::new(kind, format!("app-{}", kind.short()))
                .replicas(1)
                .metadata_annotation(ANNOTATION_AUTO, "true")
                .env_from_configmap("app-config")
        })
        .collect()
}

/// Plays it; returns the problems found (empty: a clean switch).
pub async fn play(
    plane: &ControlPlane,
    stakater: &Subject,
    ours: &Subject,
    git_dir: &Path,
    tag: &str,
    options: &DiffOptions,
) -> Result<Vec<String>, BenchError> {
    let client = plane.client();
    let mut problems = Vec::new();
    let checkout = tempfile::Builder::new().prefix("stakater-chart-").tempdir().map_err(|source| {
        BenchError::Io { context: "creating a folder for Stakater's chart".into(), source }
    })?;
    let stakater_chart = extract_chart(git_dir, tag, checkout.path())?;
    let helm = Helm::locate()?;
    let their_helm = helm.with_chart(&stakater_chart);
    let kubeconfig = plane.kubeconfig_path();

    create_namespace(&client, APPS).await?;
    let resources = Resources::new(&client, APPS);
    let config = ResourceRef::configmap("app-config");
    resources.create(&config, &[("key", "v1")]).await?;
    for workload in fleet() {
        workload.create(&client, APPS).await?;
    }

    say("helm install of Stakater's chart");
    their_helm.upgrade_install(RELEASE, RELEASE_NAMESPACE, &values(), kubeconfig)?;
    let their_manifest = their_helm.template(RELEASE, RELEASE_NAMESPACE, &values())?;
    let (mut controller, _their_account) = start_as_chart(plane, stakater, &their_manifest, options).await?;
    tokio::time::sleep(options.settle).await;
    let hash = resources.update_data(&config, &[("key", "v2")]).await?;
    wait_reloaded(&client, &config, &hash, &mut problems, "Stakater").await;
    tokio::time::sleep(options.settle).await;
    let stakater_metrics = controller.metrics().await?;
    controller.terminate(Duration::from_secs(5));
    let before = State::read(&client).await?;

    say("helm upgrade to our chart, our binary takes over");
    if let Err(error) = helm.upgrade_install(RELEASE, RELEASE_NAMESPACE, &our_values(), kubeconfig) {
        problems.push(format!("helm upgrade from Stakater's chart to ours failed: {error}"));
        return Ok(problems);
    }
    let our_manifest = helm.template(RELEASE, RELEASE_NAMESPACE, &our_values())?;
    let (mut controller, _our_account) = start_as_chart(plane, ours, &our_manifest, options).await?;
    // The start-up sweep has run once ready; give the writes it might make time to land.
    tokio::time::sleep(options.settle * 3).await;
    let after = State::read(&client).await?;
    problems.extend(before.changes_to(&after));

    let hash = resources.update_data(&config, &[("key", "v3")]).await?;
    wait_reloaded(&client, &config, &hash, &mut problems, "ours after the switch").await;
    tokio::time::sleep(options.settle).await;
    let our_metrics = controller.metrics().await?;
    controller.terminate(Duration::from_secs(5));
    problems.extend(missing_families(&stakater_metrics, &our_metrics));
    Ok(problems)
}

/// `git archive <tag> deployments/kubernetes/chart/reloader` unpacked into `into`.
fn extract_chart(git_dir: &Path, tag: &str, into: &Path) -> Result<PathBuf, BenchError> {
    const CHART: &str = "deployments/kubernetes/chart/reloader";
    let archive = Command::new("git")
        .arg("-C")
        .arg(git_dir)
        .args(["archive", "--format=tar", tag, CHART])
        .output()
        .map_err(|source| BenchError::Io { context: "running git archive".into(), source })?;
    if !archive.status.success() {
        return Err(BenchError::measure(format!(
            "git -C {} archive {tag} {CHART}: {}",
            git_dir.display(),
            String::from_utf8_lossy(&archive.stderr)
        )));
    }
    let tar_path = into.join("chart.tar");
    std::fs::write(&tar_path, &archive.stdout)
        .map_err(|source| BenchError::Io { context: "writing the chart archive".into(), source })?;
    let status = Command::new("tar")
        .arg("-xf")
        .arg(&tar_path)
        .arg("-C")
        .arg(into)
        .status()
        .map_err(|source| BenchError::Io { context: "running tar".into(), source })?;
    if !status.success() {
        return Err(BenchError::measure("tar could not unpack Stakater's chart"));
    }
    Ok(into.join(CHART))
}

/// Starts `subject` with the args and env of the chart's Deployment, as its ServiceAccount.
async fn start_as_chart(
    plane: &ControlPlane,
    subject: &Subject,
    manifest: &Manifest,
    options: &DiffOptions,
) -> Result<(crate::subject::Controller, KubeconfigFile), BenchError> {
    let deployment = manifest
        .objects()
        .iter()
        .find(|object| object["kind"] == "Deployment")
        .ok_or_else(|| BenchError::measure("the chart renders no Deployment"))?;
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let namespace = deployment["metadata"]["namespace"].as_str().unwrap_or(RELEASE_NAMESPACE);
    let account = pod["serviceAccountName"].as_str().unwrap_or("default");
    let kubeconfig = KubeconfigFile::for_service_account(plane, namespace, account).await?;
    let mut launch = Launch::named(format!("switch-{}", subject.label()));
    launch.args = container["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|arg| !arg.starts_with("--metrics-addr"))
        .map(str::to_owned)
        .collect();
    launch.env = chart_env(container, namespace, &launch.name);
    launch.kubeconfig = Some(kubeconfig.path().to_owned());
    let controller = super::start_ready(plane, subject, &launch, options).await?;
    // The kubeconfig file must outlive the process: the caller keeps it.
    Ok((controller, kubeconfig))
}

/// The container's env as the kubelet would give it: literal values and the downward API's
/// name/namespace; resource fields (Stakater's GOMAXPROCS/GOMEMLIMIT) are left out.
fn chart_env(container: &Value, namespace: &str, pod: &str) -> Vec<(String, String)> {
    container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            let name = entry["name"].as_str()?.to_owned();
            if let Some(value) = entry["value"].as_str() {
                return Some((name, value.to_owned()));
            }
            match entry["valueFrom"]["fieldRef"]["fieldPath"].as_str()? {
                "metadata.name" => Some((name, pod.to_owned())),
                "metadata.namespace" => Some((name, namespace.to_owned())),
                _ => None,
            }
        })
        .collect()
}

/// Waits until every long-running workload carries the marker for `hash`; a missing one is a
/// problem. (Jobs and CronJobs are checked by the Job count, not by a marker.)
async fn wait_reloaded(
    client: &kube::Client,
    config: &ResourceRef,
    hash: &str,
    problems: &mut Vec<String>,
    who: &str,
) {
    for spec in fleet().into_iter().filter(|spec| !matches!(spec.kind(), Kind::Job | Kind::CronJob)) {
        let (kind, name) = (spec.kind(), spec.name().to_owned());
        let reached = wait_until(&format!("{kind}/{name} reloaded by {who}"), WAIT, || {
            let name = name.clone();
            async move {
                let observed = observe(client, APPS, kind, &name).await?;
                match observed.marker(config, Strategy::EnvVars) {
                    Some(marker) if marker.value == hash => Ok(()),
                    other => Err(NotYet::because(format!("marker {other:?}"))),
                }
            }
        })
        .await;
        if let Err(error) = reached {
            problems.push(format!("{who} did not reload {kind}/{name}: {error}"));
        }
    }
}

/// Everything a second rollout would change.
struct State {
    workloads: BTreeMap<String, Observed>,
    replica_sets: usize,
    revisions: usize,
    jobs: usize,
}

impl State {
    async fn read(client: &kube::Client) -> Result<Self, BenchError> {
        let mut workloads = BTreeMap::new();
        for spec in fleet() {
            workloads.insert(
                format!("{}/{}", spec.kind(), spec.name()),
                observe(client, APPS, spec.kind(), spec.name()).await?,
            );
        }
        Ok(Self {
            workloads,
            replica_sets: Api::<ReplicaSet>::namespaced(client.clone(), APPS)
                .list(&ListParams::default())
                .await?
                .items
                .len(),
            revisions: Api::<ControllerRevision>::namespaced(client.clone(), APPS)
                .list(&ListParams::default())
                .await?
                .items
                .len(),
            jobs: Api::<Job>::namespaced(client.clone(), APPS)
                .list(&ListParams::default())
                .await?
                .items
                .len(),
        })
    }

    fn changes_to(&self, after: &State) -> Vec<String> {
        let mut problems = Vec::new();
        for (name, before) in &self.workloads {
            let Some(now) = after.workloads.get(name) else {
                problems.push(format!("{name} disappeared at the switch"));
                continue;
            };
            if before.uid != now.uid {
                problems.push(format!("{name} was recreated at the switch"));
            } else if before.generation != now.generation || before.template != now.template {
                problems.push(format!(
                    "{name} was written at the switch (generation {:?} -> {:?}; pod template changed: {})",
                    before.generation,
                    now.generation,
                    before.template != now.template
                ));
            }
        }
        for (what, before, now) in [
            ("ReplicaSets", self.replica_sets, after.replica_sets),
            ("ControllerRevisions", self.revisions, after.revisions),
            ("Jobs", self.jobs, after.jobs),
        ] {
            if before != now {
                problems.push(format!("{what}: {before} before the switch, {now} after"));
            }
        }
        problems
    }
}

/// Metric families (`# TYPE name type`) and their label names, per family.
fn families(metrics: &str) -> BTreeMap<String, (String, BTreeSet<String>)> {
    let mut out: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
    for line in metrics.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ")
            && let Some((name, kind)) = rest.split_once(' ')
        {
            // OpenMetrics names a counter family without `_total`; its samples carry it.
            let name = if kind == "counter" && !name.ends_with("_total") {
                format!("{name}_total")
            } else {
                name.to_owned()
            };
            out.entry(name).or_default().0 = kind.to_owned();
        }
    }
    for line in metrics.lines().filter(|line| !line.starts_with('#')) {
        let Some((series, _)) = line.rsplit_once(' ') else { continue };
        let (name, labels) = series.split_once('{').unwrap_or((series, ""));
        let family = ["_bucket", "_sum", "_count", "_created"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix).filter(|base| out.contains_key(*base)))
            .unwrap_or(name);
        let names = labels
            .trim_end_matches('}')
            .split(',')
            .filter_map(|pair| pair.split_once('=').map(|(key, _)| key.trim().to_owned()))
            .filter(|key| key != "le" && key != "quantile");
        if let Some(entry) = out.get_mut(family) {
            entry.1.extend(names);
        }
    }
    out
}

/// Each Stakater family that ours lacks, or exports with another type or fewer label names.
fn missing_families(stakater: &str, ours: &str) -> Vec<String> {
    let ours = families(ours);
    families(stakater)
        .into_iter()
        .filter(|(name, _)| !name.starts_with("go_") && !name.starts_with("promhttp_"))
        .filter_map(|(name, (kind, labels))| match ours.get(&name) {
            None => Some(format!("metric {name} ({kind}) exported by Stakater is missing")),
            Some((our_kind, _)) if *our_kind != kind => {
                Some(format!("metric {name}: Stakater's type {kind}, ours {our_kind}"))
            }
            Some((_, our_labels)) if !labels.is_subset(our_labels) => Some(format!(
                "metric {name}: labels {:?} missing",
                labels.difference(our_labels).collect::<Vec<_>>()
            )),
            Some(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_collect_types_and_label_names() {
        let text = "# TYPE reloader_reload_executed_total counter\nreloader_reload_executed_total{success=\"true\"} 1\n# TYPE x_seconds histogram\nx_seconds_bucket{le=\"1\",verb=\"GET\"} 1\nx_seconds_sum{verb=\"GET\"} 1\n";
        let found = families(text);
        assert_eq!(found["reloader_reload_executed_total"].0, "counter");
        assert_eq!(found["reloader_reload_executed_total"].1, BTreeSet::from(["success".to_owned()]));
        assert_eq!(found["x_seconds"].1, BTreeSet::from(["verb".to_owned()]));
        let open_metrics =
            families("# TYPE reloader_action counter\nreloader_action_total{result=\"success\"} 1\n");
        assert_eq!(open_metrics["reloader_action_total"].1, BTreeSet::from(["result".to_owned()]));
    }

    #[test]
    fn a_missing_family_type_or_label_is_named() {
        let stakater = "# TYPE a_total counter\na_total{x=\"1\"} 1\n# TYPE b gauge\nb 1\n# TYPE c_total counter\nc_total{y=\"1\"} 1\n# TYPE go_goroutines gauge\ngo_goroutines 9\n";
        let ours =
            "# TYPE a counter\na_total{x=\"2\"} 1\n# TYPE b summary\nb_sum 1\n# TYPE c counter\nc_total 1\n";
        let problems = missing_families(stakater, ours);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("b: Stakater's type gauge, ours summary"));
        assert!(problems[1].contains("c_total: labels"), "{problems:?}");
    }
}
