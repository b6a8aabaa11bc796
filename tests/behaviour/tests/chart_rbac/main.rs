//! The Helm chart's RBAC, proven on the real API server (RBAC authorization on) with the real
//! binary (`target/debug/reloader`; build it first with `cargo build -p reloader-cli`):
//! docs/behaviour.md F49, and docs/compatibility.md §13 (Helm chart values and RBAC).
//!
//! For each values set (one per chart mode): `helm lint` passes, the API server accepts every
//! rendered object (server-side dry run, strict field validation), and the binary, started with
//! exactly the args and environment of the rendered Deployment and authenticated as the chart's
//! ServiceAccount with a TokenRequest token, becomes ready, reloads what it should see, leaves
//! alone what it should not, and never logs `forbidden`.
//!
//! Least privilege (`least_privilege`): for the default values, the namespaced values, the HA
//! Lease and the Argo/OpenShift rules, each rule is cut one verb (or one resource) at a time, and
//! each cut must make the binary fall short. F49 (`denied`): a missing permission is reported
//! and does not crash-loop.
//!
//! The write fence (`write_fence`): the chart's ValidatingAdmissionPolicy refuses the
//! ServiceAccount's own token any change but markers; the values sets above install it with the
//! RBAC, so their reloads all pass through it.
//!
//! A binary in global mode acts on every namespace, so while one runs nothing else of this file
//! does (`isolate`); namespaced runs share the plane with one another.

use std::time::Duration;

use reloader_core::model::WorkloadKind;
use reloader_harness::{ControlPlane, Crd, Reloader, TestNamespace};
use reloader_tests::chart::exercise::{Limits, Secrets, Shortfall, exercise, forbidden_line};
use reloader_tests::chart::probe::{LAST_RELOADED_FROM, Probe, built_in_kinds};
use reloader_tests::chart::{ApplyMode, Helm, Installation, Manifest, WRITE_FENCE_API, apply, release_name};
use reloader_tests::fixtures::TestEnv;
use serde_json::{Value, json};
use tokio::sync::RwLock;

mod denied;
mod least_privilege;
mod write_fence;

/// Which namespaces a release watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// `watchGlobally=true`: every namespace.
    Global,
    /// `watchGlobally=false`: the release namespace.
    ReleaseNamespace,
    /// `watchGlobally=false` with `namespaces`: two namespaces other than the release's, and
    /// the release namespace, which the chart always adds.
    Listed,
}

const WAIT: Duration = Duration::from_secs(60);

/// Held while a release runs: exclusive for a global one, shared for namespaced ones.
static RUNNING: RwLock<()> = RwLock::const_new(());

/// Released on drop.
struct Isolation {
    _exclusive: Option<tokio::sync::RwLockWriteGuard<'static, ()>>,
    _shared: Option<tokio::sync::RwLockReadGuard<'static, ()>>,
}

async fn isolate(scope: Scope) -> Isolation {
    match scope {
        Scope::Global => Isolation { _exclusive: Some(RUNNING.write().await), _shared: None },
        _ => Isolation { _exclusive: None, _shared: Some(RUNNING.read().await) },
    }
}

// ---------------------------------------------------------------------------------------------
// The values sets, one per chart mode (docs/behaviour.md F49).

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_values() {
    let verified = verify(ValuesSet::new("default", Scope::Global, |_| json!({}))).await;
    let template = verified.deployment_template.expect("the probe Deployment");
    let env = template["spec"]["containers"][0]["env"].to_string();
    assert!(env.contains("STAKATER_PROBE_CONFIG_CONFIGMAP"), "env-vars strategy marker missing: {env}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_globally_false() {
    verify(ValuesSet::new(
        "watchGlobally=false",
        Scope::ReleaseNamespace,
        |_| json!({ "reloader": { "watchGlobally": false } }),
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_globally_false_with_namespaces() {
    verify(ValuesSet::new(
        "watchGlobally=false,namespaces={a,b}",
        Scope::Listed,
        |listed| json!({ "reloader": { "watchGlobally": false, "namespaces": listed } }),
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enable_ha_with_two_replicas() {
    let verified = verify(ValuesSet::new(
        "enableHA=true,deployment.replicas=2",
        Scope::Global,
        |_| json!({ "reloader": { "enableHA": true, "deployment": { "replicas": 2 } } }),
    ))
    .await;
    assert_eq!(verified.replicas, 2);
    assert_eq!(verified.leaders, 1, "exactly one replica leads");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argo_rollouts() {
    let mut set = ValuesSet::new(
        "isArgoRollouts=true",
        Scope::Global,
        |_| json!({ "reloader": { "isArgoRollouts": true } }),
    );
    set.kinds.push(WorkloadKind::Rollout);
    set.crds = &[Crd::ArgoRollouts];
    verify(set).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openshift() {
    let mut set =
        ValuesSet::new("isOpenshift=true", Scope::Global, |_| json!({ "reloader": { "isOpenshift": true } }));
    set.kinds.push(WorkloadKind::DeploymentConfig);
    set.crds = &[Crd::DeploymentConfig];
    verify(set).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotations_strategy() {
    let verified = verify(ValuesSet::new(
        "reloadStrategy=annotations",
        Scope::Global,
        |_| json!({ "reloader": { "reloadStrategy": "annotations" } }),
    ))
    .await;
    let template = verified.deployment_template.expect("the probe Deployment");
    assert!(
        template["metadata"]["annotations"].get(LAST_RELOADED_FROM).is_some(),
        "the annotations strategy records {LAST_RELOADED_FROM}: {template}"
    );
    assert!(!template["spec"]["containers"][0]["env"].to_string().contains("STAKATER_"), "{template}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_secrets() {
    let mut set = ValuesSet::new(
        "ignoreSecrets=true",
        Scope::Global,
        |_| json!({ "reloader": { "ignoreSecrets": true } }),
    );
    set.secrets = Secrets::Ignored;
    let verified = verify(set).await;
    let rbac = serde_json::to_string(verified.manifest.rbac().objects()).unwrap();
    assert!(!rbac.contains("\"secrets\""), "ignoreSecrets grants nothing on Secrets: {rbac}");
}

struct ValuesSet {
    name: &'static str,
    scope: Scope,
    /// The values, given the generated names of the listed namespaces (`Scope::Listed`).
    values: fn(&[&str]) -> Value,
    kinds: Vec<WorkloadKind>,
    crds: &'static [Crd],
    secrets: Secrets,
    /// The StatefulSet probe restarts by eviction ([`Probe::opt_in_eviction`]).
    evicting: bool,
    /// A reload-target pod beside the probes ([`Probe::add_reload_pod`]).
    reload_pod: bool,
}

impl ValuesSet {
    fn new(name: &'static str, scope: Scope, values: fn(&[&str]) -> Value) -> Self {
        Self {
            name,
            scope,
            values,
            kinds: built_in_kinds(),
            crds: &[],
            secrets: Secrets::Watched,
            evicting: false,
            reload_pod: false,
        }
    }
}

struct Verified {
    manifest: Manifest,
    replicas: usize,
    leaders: usize,
    deployment_template: Option<Value>,
}

async fn verify(set: ValuesSet) -> Verified {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns: release_ns, client, .. } = &env;
    plane.install_crds(set.crds).await.expect("installing CRDs");
    let listed: Vec<TestNamespace> = match set.scope {
        Scope::Listed => vec![plane.namespace().await, plane.namespace().await],
        _ => Vec::new(),
    };
    let elsewhere = plane.namespace().await;
    let listed_names: Vec<&str> = listed.iter().map(TestNamespace::name).collect();
    let values = (set.values)(&listed_names);

    let helm = Helm::locate().expect("helm");
    helm.lint(release_ns.name(), &values).unwrap_or_else(|e| panic!("{}: helm lint: {e}", set.name));
    // As `helm install` renders it against this API server: with the write fence, which every
    // reload below then passes through.
    let manifest = helm
        .template_with_apis(&release_name(), release_ns.name(), &values, &[WRITE_FENCE_API])
        .expect("helm template");
    assert!(
        manifest.objects().iter().any(|object| object["kind"] == "ValidatingAdmissionPolicy"),
        "{}: the chart renders its write fence",
        set.name
    );
    apply(client, &manifest, ApplyMode::DryRun)
        .await
        .unwrap_or_else(|e| panic!("{}: the API server refuses the rendered chart: {e}", set.name));

    // Global: a namespace that is not the release's shows the cluster-wide reach. Namespaced:
    // the watched ones must reload, another must not.
    let (watched_ns, unwatched_ns): (Vec<&str>, Vec<&str>) = match set.scope {
        Scope::Global => (vec![elsewhere.name()], vec![]),
        Scope::ReleaseNamespace => (vec![release_ns.name()], vec![elsewhere.name()]),
        // The release namespace is always watched too, as with Stakater's chart 2.x.
        Scope::Listed => {
            (listed_names.iter().copied().chain([release_ns.name()]).collect(), vec![elsewhere.name()])
        }
    };
    let mut watched = Vec::new();
    for namespace in &watched_ns {
        watched.push(Probe::create(client, namespace, &set.kinds).await.expect("creating probe workloads"));
    }
    let mut unwatched = Vec::new();
    for namespace in &unwatched_ns {
        unwatched.push(Probe::create(client, namespace, &[WorkloadKind::Deployment]).await.expect("probe"));
    }

    let _isolation = isolate(set.scope).await;
    let installation = Installation::install(plane, &manifest, None).await.expect("installing the RBAC");
    let mut pods = installation.start(plane).await.expect("starting the controller");
    let result = exercise(
        client,
        release_ns.name(),
        &mut pods,
        &mut watched,
        &mut unwatched,
        set.secrets,
        Limits::PATIENT,
    )
    .await;
    let mut leaders = 0;
    for pod in &pods {
        leaders += pod.metric("reloader_leader").await.ok().flatten().unwrap_or(0.0) as usize;
    }
    let deployment_template =
        watched[0].template(WorkloadKind::Deployment).await.expect("reading the Deployment");
    let forbidden: Vec<String> =
        pods.iter().filter_map(|pod| forbidden_line(&pod.log_text()).map(str::to_owned)).collect();
    stop(&mut pods, &watched, &unwatched, &installation, plane).await;

    let completed = result.unwrap_or_else(|Shortfall(why)| panic!("{}: {why}", set.name));
    assert!(forbidden.is_empty(), "{}: {forbidden:?}", set.name);
    println!("{}: verified (reload latency {:?})", set.name, completed.reload_latency);
    Verified { replicas: pods.len(), leaders, deployment_template, manifest }
}

/// Stops the replicas, deletes the probe workloads (so no later controller catches up on them)
/// and the cluster-scoped RBAC.
async fn stop(
    pods: &mut [Reloader],
    watched: &[Probe],
    unwatched: &[Probe],
    installation: &Installation,
    plane: &ControlPlane,
) {
    for pod in pods.iter_mut() {
        pod.terminate(Duration::from_secs(5));
    }
    for probe in watched.iter().chain(unwatched) {
        probe.delete_workloads().await.expect("deleting the probe workloads");
    }
    installation.uninstall(plane).await;
}
