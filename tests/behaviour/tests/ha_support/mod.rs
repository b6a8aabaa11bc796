//! Shared by ha.rs and faults.rs: replicas of the real binary with `--enable-ha`, who holds the
//! Lease, and the writes each workload received, read from the API server.

#![allow(dead_code)] // Each test binary uses its own subset.

pub mod proxy;

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use reloader_harness::{
    ControlPlane, NotYet, PlaneError, PlaneOptions, Reloader, ReloaderBuilder, wait_until,
};
use reloader_tests::fixtures::{ANNOTATION_AUTO, Kind, ResourceRef, TestEnv, WorkloadId, WorkloadSpec};

/// `--leader-election-id`'s default, for drop-in compatibility with Stakater.
pub const LEASE_NAME: &str = "stakater-reloader-lock";

/// Leader-election timings, as flag values.
#[derive(Debug, Clone, Copy)]
pub struct Timings {
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl Timings {
    /// Short enough for tests, long enough for 2 busy cores.
    pub const FAST: Timings = Timings {
        lease_duration: Duration::from_secs(4),
        renew_deadline: Duration::from_secs(3),
        retry_period: Duration::from_millis(500),
    };

    fn args(self) -> [String; 3] {
        [
            format!("--leader-election-lease-duration={}ms", self.lease_duration.as_millis()),
            format!("--leader-election-renew-deadline={}ms", self.renew_deadline.as_millis()),
            format!("--leader-election-retry-period={}ms", self.retry_period.as_millis()),
        ]
    }
}

/// Starts one HA replica named `name` (its POD_NAME, hence its Lease identity), watching only
/// `namespace` and keeping its Lease there; waits until it is ready (a warm standby is ready).
pub async fn start_replica(
    plane: &ControlPlane,
    namespace: &str,
    name: &str,
    timings: Timings,
    extra_args: &[&str],
) -> Result<Reloader, PlaneError> {
    replica(plane, namespace, name, timings).args(extra_args.iter().copied()).start().await
}

/// How [`start_replica`] starts one, for a test to add to (a kubeconfig, a shifted clock).
pub fn replica(plane: &ControlPlane, namespace: &str, name: &str, timings: Timings) -> ReloaderBuilder {
    Reloader::builder(plane)
        .name(name)
        .env("POD_NAME", name)
        .env("POD_NAMESPACE", namespace)
        .args(["--enable-ha".to_owned(), format!("--leader-election-namespace={namespace}")])
        .args(timings.args())
        .arg(format!("--namespaces={namespace}"))
}

/// Starts `names` concurrently.
pub async fn start_replicas(
    plane: &ControlPlane,
    namespace: &str,
    names: &[&str],
    timings: Timings,
    extra_args: &[&str],
) -> Vec<Reloader> {
    let started = futures::future::join_all(
        names.iter().map(|name| start_replica(plane, namespace, name, timings, extra_args)),
    )
    .await;
    started.into_iter().map(|r| r.expect("starting an HA replica")).collect()
}

/// The Lease's holderIdentity (empty when released), or `None` before anyone created it.
pub async fn lease_holder(client: &Client, namespace: &str) -> Result<Option<String>, PlaneError> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let lease = leases.get_opt(LEASE_NAME).await?;
    Ok(lease.map(|l| l.spec.and_then(|s| s.holder_identity).unwrap_or_default()))
}

/// Waits until the Lease names a holder for which `accept` is true; returns it.
pub async fn wait_for_holder(
    client: &Client,
    namespace: &str,
    what: &str,
    timeout: Duration,
    accept: impl Fn(&str) -> bool,
) -> Result<String, PlaneError> {
    wait_until(what, timeout, || async {
        match lease_holder(client, namespace).await? {
            Some(holder) if !holder.is_empty() && accept(&holder) => Ok(holder),
            other => Err(NotYet::because(format!("the Lease holder is {other:?}"))),
        }
    })
    .await
}

/// The `reloader_leader` gauge of a replica (0 when it cannot be read).
pub async fn leader_gauge(replica: &Reloader) -> f64 {
    replica.metric("reloader_leader").await.ok().flatten().unwrap_or(0.0)
}

/// Waits until exactly one of `replicas` reports `reloader_leader 1`, and it is the Lease holder;
/// returns its index. `names[i]` is the POD_NAME of `replicas[i]`.
pub async fn wait_for_single_leader(
    client: &Client,
    namespace: &str,
    replicas: &[&Reloader],
    names: &[&str],
    timeout: Duration,
) -> Result<usize, PlaneError> {
    wait_until("exactly one replica to lead, the Lease holder", timeout, || async {
        let holder = lease_holder(client, namespace).await?.unwrap_or_default();
        let mut leading = Vec::new();
        for (i, replica) in replicas.iter().enumerate() {
            if leader_gauge(replica).await == 1.0 {
                leading.push(i);
            }
        }
        match leading.as_slice() {
            [one] if names[*one] == holder => Ok(*one),
            _ => Err(NotYet::because(format!(
                "Lease holder {holder:?}, replicas reporting reloader_leader 1: {:?}",
                leading.iter().map(|&i| names[i]).collect::<Vec<_>>()
            ))),
        }
    })
    .await
}

/// `reloader_reload_executed_total{success="true"}` of a replica.
pub async fn reloads_executed(replica: &Reloader) -> f64 {
    replica.metric("reloader_reload_executed_total{success=\"true\"}").await.ok().flatten().unwrap_or(0.0)
}

/// `metadata.generation`: 1 at creation, +1 for every write to the spec (each reload).
pub async fn generation(client: &Client, workload: &WorkloadId) -> i64 {
    let observed = workload.observe(client).await.unwrap_or_else(|e| panic!("reading {workload}: {e}"));
    observed.generation.unwrap_or_default()
}

/// Pod templates kube-controller-manager has rolled out for a Deployment: its
/// `deployment.kubernetes.io/revision`, which counts them even after `revisionHistoryLimit` has
/// pruned their ReplicaSets (0 before the first sync).
pub async fn rollouts_of(client: &Client, workload: &WorkloadId) -> usize {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &workload.namespace);
    let deployment =
        deployments.get(&workload.name).await.unwrap_or_else(|e| panic!("reading {workload}: {e}"));
    let revision = deployment.metadata.annotations.as_ref().and_then(|a| a.get(DEPLOYMENT_REVISION));
    revision
        .map_or(0, |r| r.parse().unwrap_or_else(|e| panic!("{workload}: {DEPLOYMENT_REVISION}={r:?}: {e}")))
}

const DEPLOYMENT_REVISION: &str = "deployment.kubernetes.io/revision";

/// Waits until `workload` has rolled out `expected` pod templates (kube-controller-manager is
/// async).
pub async fn wait_for_rollouts(client: &Client, workload: &WorkloadId, expected: usize) {
    wait_until(&format!("{workload} to reach revision {expected}"), Duration::from_secs(60), || async {
        match rollouts_of(client, workload).await {
            n if n == expected => Ok(()),
            n => Err(NotYet::because(format!("revision {n}"))),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

/// Seconds since `start`, for reports.
pub fn seconds_since(start: Instant) -> f64 {
    (start.elapsed().as_millis() as f64) / 1000.0
}

/// A plane of the test's own, for faults that would disturb other tests.
pub async fn private_plane(options: PlaneOptions) -> ControlPlane {
    ControlPlane::start(options).await.unwrap_or_else(|e| panic!("starting a private control plane: {e}"))
}

/// A Deployment `name` with `reloader.stakater.com/auto: "true"` taking its env from `configmap`.
pub fn auto_spec(name: &str, configmap: &str) -> WorkloadSpec {
    WorkloadSpec::new(Kind::Deployment, name)
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_configmap(configmap)
}

/// Creates [`auto_spec`] in `namespace`.
pub async fn auto_deployment(client: &Client, namespace: &str, name: &str, configmap: &str) -> WorkloadId {
    auto_spec(name, configmap).create(client, namespace).await.unwrap()
}

/// Two auto Deployments in the test's namespace: `web` uses ConfigMap `settings` (which the test
/// changes), `idle` uses `quiet` (which it never changes: any write to `idle` is spurious).
pub struct WebAndIdle {
    pub settings: ResourceRef,
    pub quiet: ResourceRef,
    pub web: WorkloadId,
    pub idle: WorkloadId,
}

impl WebAndIdle {
    pub async fn create(env: &TestEnv<'_>) -> Self {
        let TestEnv { ns, client, resources, .. } = env;
        let settings = ResourceRef::configmap("settings");
        let quiet = ResourceRef::configmap("quiet");
        resources.create(&settings, &[("level", "1")]).await.unwrap();
        resources.create(&quiet, &[("k", "v")]).await.unwrap();
        let web = auto_deployment(client, ns.name(), "web", "settings").await;
        let idle = auto_deployment(client, ns.name(), "idle", "quiet").await;
        WebAndIdle { settings, quiet, web, idle }
    }
}
