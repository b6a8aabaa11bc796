//! Least privilege: every rule of the rendered roles, one verb or one resource at a time.

use futures::StreamExt as _;
use reloader_cli::kinds;
use reloader_core::model::WorkloadKind;
use reloader_harness::ControlPlane;
use reloader_harness::Crd;
use reloader_tests::chart::exercise::{Completed, Limits, Shortfall, exercise};
use reloader_tests::chart::probe::{Probe, probe_name};
use reloader_tests::chart::{Helm, Installation, RuleRemoval, WRITE_FENCE_API, release_name};
use reloader_tests::fixtures_extra::FlakyProxy;
use serde_json::{Value, json};

use super::{Scope, ValuesSet, isolate};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn least_privilege_default_values() {
    least_privilege(ValuesSet::new("default", Scope::Global, |_| json!({})), |_| true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn least_privilege_namespaced() {
    let set = ValuesSet::new(
        "watchGlobally=false",
        Scope::ReleaseNamespace,
        |_| json!({ "reloader": { "watchGlobally": false } }),
    );
    least_privilege(set, |_| true).await;
}

/// The Lease rule of `enableHA` (its other rules are the default ones).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn least_privilege_leader_election() {
    let mut set = ValuesSet::new(
        "enableHA=true",
        Scope::Global,
        |_| json!({ "reloader": { "enableHA": true, "deployment": { "replicas": 2 } } }),
    );
    set.kinds = vec![WorkloadKind::Deployment];
    least_privilege(set, |removal| removal.in_role_named("leader-election")).await;
}

/// The Rollout and DeploymentConfig rules (the others are the default ones).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn least_privilege_argo_rollouts_and_openshift() {
    let mut set = ValuesSet::new(
        "isArgoRollouts=true,isOpenshift=true",
        Scope::Global,
        |_| json!({ "reloader": { "isArgoRollouts": true, "isOpenshift": true } }),
    );
    set.kinds = vec![WorkloadKind::Rollout, WorkloadKind::DeploymentConfig];
    set.crds = &[Crd::ArgoRollouts, Crd::DeploymentConfig];
    least_privilege(set, |removal| {
        removal.summary.contains("rollouts") || removal.summary.contains("deploymentconfigs")
    })
    .await;
}

/// The rule of a kind declared in `reloader.customWorkloads` (an OpenKruise CloneSet).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn least_privilege_custom_workloads() {
    let mut set = ValuesSet::new("customWorkloads=[CloneSet]", Scope::Global, |_| {
        json!({ "reloader": { "customWorkloads": [{
            "group": "apps.kruise.io", "version": "v1alpha1", "kind": "CloneSet",
            "resource": "clonesets", "template": "/spec/template",
        }] } })
    });
    set.kinds = reloader_core::model::WorkloadKind::declare(&[
        "group=apps.kruise.io,version=v1alpha1,kind=CloneSet,resource=clonesets,template=/spec/template"
            .into(),
    ])
    .expect("a valid declaration");
    set.crds = &[Crd::OpenKruiseCloneSet];
    least_privilege(set, |removal| removal.summary.contains("clonesets")).await;
}

/// The pod rules of `restartByEviction`: each reload of the (OnDelete) StatefulSet probe lists
/// its pods and evicts the one that does not run the reload yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn least_privilege_restart_by_eviction() {
    let mut set = ValuesSet::new(
        "restartByEviction=true",
        Scope::Global,
        |_| json!({ "reloader": { "restartByEviction": true } }),
    );
    set.kinds = vec![WorkloadKind::StatefulSet];
    set.evicting = true;
    least_privilege(set, |removal| removal.summary.contains("pods")).await;
}

/// The pod rules of `reloadPods`: the labelled pods are watched (a denied list or watch is logged
/// as forbidden), and each reload of the reload-target pod evicts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn least_privilege_reload_pods() {
    let mut set =
        ValuesSet::new("reloadPods=true", Scope::Global, |_| json!({ "reloader": { "reloadPods": true } }));
    set.kinds = vec![WorkloadKind::Deployment];
    set.reload_pod = true;
    least_privilege(set, |removal| removal.summary.contains("pods")).await;
}

/// Runs the release once with all its rules (it must complete) and once per cut of the
/// `selected` rules (each must fall short), a few namespaced runs at a time.
async fn least_privilege(set: ValuesSet, selected: fn(&RuleRemoval) -> bool) {
    let plane = ControlPlane::shared().await;
    let _logs = plane.dump_logs_on_panic();
    plane.install_crds(set.crds).await.expect("installing CRDs");
    let values = (set.values)(&[]);
    let helm = Helm::locate().expect("helm");
    helm.lint("lint", &values).unwrap_or_else(|e| panic!("{}: helm lint: {e}", set.name));
    let reference = helm.template("reference", "reference", &values).expect("helm template");
    let cuts: Vec<(usize, RuleRemoval)> =
        reference.rule_removals().into_iter().enumerate().filter(|(_, removal)| selected(removal)).collect();
    assert!(!cuts.is_empty(), "{}: no rule to cut", set.name);

    let baseline = trial(plane, &helm, &set, &values, None).await;
    if let Err(Shortfall(why)) = &baseline {
        panic!("{}: with every rule the controller must complete, but: {why}", set.name);
    }
    let concurrency = if set.scope == Scope::Global { 1 } else { 3 };
    let results: Vec<(RuleRemoval, Result<Completed, Shortfall>)> = futures::stream::iter(cuts)
        .map(|(index, removal)| {
            let (helm, set, values) = (&helm, &set, &values);
            async move {
                let result = trial(plane, helm, set, values, Some((index, &removal))).await;
                (removal, result)
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;

    let mut unneeded = Vec::new();
    for (removal, result) in &results {
        match result {
            Ok(_) => unneeded.push(removal.to_string()),
            Err(Shortfall(why)) => println!("{}: needed: {removal}\n    {}", set.name, first_line(why)),
        }
    }
    assert!(
        unneeded.is_empty(),
        "{}: the controller did everything without:\n  {}",
        set.name,
        unneeded.join("\n  ")
    );
}

/// One release in a fresh namespace with `cut` (an index into `rule_removals`) applied; its
/// probe workloads live in the release namespace.
async fn trial(
    plane: &ControlPlane,
    helm: &Helm,
    set: &ValuesSet,
    values: &Value,
    cut: Option<(usize, &RuleRemoval)>,
) -> Result<Completed, Shortfall> {
    let client = plane.client();
    let namespace = plane.namespace().await;
    // With the write fence, as `helm install` renders it here: every values set's reloads (pod
    // evictions, declared kinds, reload-target pods included) pass through it, cut or not.
    let manifest = helm
        .template_with_apis(&release_name(), namespace.name(), values, &[WRITE_FENCE_API])
        .expect("helm template");
    let removal = cut.map(|(index, reference)| {
        let removal = manifest.rule_removals().swap_remove(index);
        assert_eq!((&removal.summary, &removal.cut), (&reference.summary, &reference.cut), "same rendering");
        removal
    });
    let mut probe =
        Probe::create(&client, namespace.name(), &set.kinds).await.expect("creating probe workloads");
    if set.evicting {
        probe.opt_in_eviction().await.expect("opting the StatefulSet probe in to eviction");
    }
    if set.reload_pod {
        probe.add_reload_pod().await.expect("adding the reload-target pod");
    }

    let _isolation = isolate(set.scope).await;
    let mut installation =
        Installation::install(plane, &manifest, removal.as_ref()).await.expect("installing RBAC");
    // The first write to each probe workload fails once (503), as an overloaded API server's
    // may: the retry reads the workload before writing again (docs/behaviour.md C32c), so the
    // rules a retry needs are judged on a path every run takes, not only on a lucky conflict.
    let proxy = FlakyProxy::start(plane, 1).await;
    for kind in &set.kinds {
        proxy.stumble(&format!(
            "/namespaces/{}/{}/{}",
            namespace.name(),
            kinds::info(*kind).plural,
            probe_name(*kind)
        ));
    }
    // Lists are refused as streams, as by an API server without the WatchList feature: the
    // controller lists in pages, so `list` is judged too (streaming needs only `watch`).
    proxy.refuse_streaming_lists();
    installation.route_through(plane, &proxy.url()).await.expect("routing through the proxy");
    let mut pods = installation.start(plane).await.expect("starting the controller");
    let result = exercise(
        &client,
        namespace.name(),
        &mut pods,
        std::slice::from_mut(&mut probe),
        &mut [],
        set.secrets,
        Limits::TRIAL,
    )
    .await;
    for pod in &mut pods {
        pod.kill();
    }
    probe.delete_workloads().await.expect("deleting the probe workloads");
    installation.uninstall(plane).await;
    result
}

fn first_line(text: &str) -> &str {
    let line = text.lines().next().unwrap_or_default();
    &line[..line.len().min(400)]
}
