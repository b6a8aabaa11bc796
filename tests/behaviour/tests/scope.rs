//! docs/behaviour.md §D: scope flags (`--resources-to-ignore`, `--namespaces-to-ignore`,
//! `--namespace-selector`, `--resource-label-selector`, `--namespaces`, `KUBERNETES_NAMESPACE`,
//! `--auto-reload-all`), each shown both ways against the real binary.
//!
//! Tests in global mode share the plane with the other tests of this file. So that they can
//! neither touch nor be confused by the others' objects, a global reloader is given annotation
//! keys of its own (`--auto-annotation` and friends): it acts only on its test's workloads.

use std::time::{Duration, Instant};

use futures::future::join_all;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, ListParams};
use reloader_harness::{ControlPlane, KubeconfigFile, Reloader, TestNamespace};
use reloader_tests::fixtures::*;
use reloader_tests::fixtures_extra::*;

const RELOAD_TIMEOUT: Duration = Duration::from_secs(60);
const STARTUP_ERROR_TIMEOUT: Duration = Duration::from_secs(30);
const CONFIG: &str = "app-config";
const SECRET: &str = "app-secret";

/// Selection keys no other test uses: `(auto key, flags that install it and disable the defaults)`.
fn private_keys() -> (String, Vec<String>) {
    let prefix = format!("{}.scope.reloader-tests.io", unique_token("k"));
    let auto = format!("{prefix}/auto");
    let flags = vec![
        format!("--auto-annotation={auto}"),
        format!("--configmap-auto-annotation={prefix}/configmap-auto"),
        format!("--secret-auto-annotation={prefix}/secret-auto"),
        format!("--configmap-annotation={prefix}/configmap-reload"),
        format!("--secret-annotation={prefix}/secret-reload"),
        format!("--auto-search-annotation={prefix}/search"),
    ];
    (auto, flags)
}

/// A namespace holding ConfigMap [`CONFIG`] and Deployment `web` that uses it with `auto_key`.
async fn namespace_with_web(
    plane: &ControlPlane,
    client: &Client,
    auto_key: &str,
) -> (TestNamespace, WorkloadId) {
    let ns = plane.namespace().await;
    Resources::new(client, ns.name()).create(&ResourceRef::configmap(CONFIG), &[("k", "v1")]).await.unwrap();
    let web = WorkloadSpec::new(Kind::Deployment, "web")
        .metadata_annotation(auto_key, "true")
        .env_from_configmap(CONFIG)
        .create(client, ns.name())
        .await
        .unwrap();
    (ns, web)
}

/// Sets ConfigMap [`CONFIG`] in `ns` to `value`; returns its hash.
async fn change_config(client: &Client, ns: &TestNamespace, value: &str) -> String {
    Resources::new(client, ns.name())
        .update_data(&ResourceRef::configmap(CONFIG), &[("k", value)])
        .await
        .unwrap()
}

/// Changes every `quiet` namespace and every `loud` one; waits for each loud `web` to reload and
/// then checks that no quiet `web` changed for 5 times the slowest reload.
async fn only_these_reload(
    client: &Client,
    value: &str,
    loud: &[(&TestNamespace, &WorkloadId)],
    quiet: &[(&TestNamespace, &WorkloadId)],
) {
    let config = ResourceRef::configmap(CONFIG);
    let mut before = Vec::new();
    for (ns, web) in quiet {
        before.push(web.observe(client).await.unwrap());
        change_config(client, ns, value).await;
    }
    let started = Instant::now();
    for (ns, web) in loud {
        let hash = change_config(client, ns, value).await;
        web.wait_for_marker(client, &config, Strategy::EnvVars, &hash, RELOAD_TIMEOUT).await.unwrap();
    }
    let wait = negative_wait(started.elapsed());
    join_all(
        quiet.iter().zip(&before).map(|((_, web), initial)| web.assert_no_change_for(client, initial, wait)),
    )
    .await;
}

/// D33: with one resource type ignored, its changes reload nothing while the other type's do.
#[tokio::test]
async fn resources_to_ignore_skips_one_type_and_keeps_the_other() {
    // The flag value is case-insensitive.
    let cases = [("configmaps", ResourceKind::ConfigMap), ("Secrets", ResourceKind::Secret)];
    join_all(cases.map(|(flag, ignored)| resources_to_ignore_case(flag, ignored))).await;
}

async fn resources_to_ignore_case(flag: &str, ignored: ResourceKind) {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let (config, secret) = (ResourceRef::configmap(CONFIG), ResourceRef::secret(SECRET));
    resources.create(&config, &[("k", "v1")]).await.unwrap();
    resources.create(&secret, &[("k", "v1")]).await.unwrap();
    let web = WorkloadSpec::new(Kind::Deployment, "web")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_configmap(CONFIG)
        .env_from_secret(SECRET)
        .create(client, ns.name())
        .await
        .unwrap();
    let argument = format!("--resources-to-ignore={flag}");
    let _reloader = Reloader::builder(plane)
        .args([format!("--namespaces={}", ns.name()), argument])
        .start()
        .await
        .unwrap();

    let (watched, skipped) =
        if ignored == ResourceKind::ConfigMap { (&secret, &config) } else { (&config, &secret) };
    let started = Instant::now();
    let hash = resources.update_data(watched, &[("k", "v2")]).await.unwrap();
    web.wait_for_marker(client, watched, Strategy::EnvVars, &hash, RELOAD_TIMEOUT).await.unwrap();
    let latency = started.elapsed();
    let before = web.observe(client).await.unwrap();
    resources.update_data(skipped, &[("k", "v2")]).await.unwrap();
    web.assert_no_change_for(client, &before, negative_wait(latency)).await;
    assert_eq!(before.marker(skipped, Strategy::EnvVars), None, "{flag}: no marker for the ignored type");
}

/// D33: ignoring both types leaves nothing to do: a startup error on one line, exit non-zero.
#[tokio::test]
async fn ignoring_both_resource_types_is_a_startup_error() {
    let plane = ControlPlane::shared().await;
    let exited = run_reloader_to_exit(
        plane.kubeconfig_path(),
        &["--resources-to-ignore=configmaps,secrets"],
        &[],
        STARTUP_ERROR_TIMEOUT,
    )
    .await;
    assert!(exited.code.is_some_and(|code| code != 0), "{exited:?}");
    let lines = exited.lines();
    assert_eq!(lines.len(), 1, "one line: {exited:?}");
    assert!(lines[0].contains("--resources-to-ignore"), "{exited:?}");
}

/// D34: `--namespaces-to-ignore` in global mode: the ignored namespace does not reload, another does.
#[tokio::test]
async fn namespaces_to_ignore_skips_only_the_listed_namespace() {
    let env = TestEnv::new().await;
    let TestEnv { plane, client, .. } = &env;
    let (auto_key, key_flags) = private_keys();
    let (ignored, ignored_web) = namespace_with_web(plane, client, &auto_key).await;
    let (watched, watched_web) = namespace_with_web(plane, client, &auto_key).await;
    let _reloader = Reloader::builder(plane)
        .args(key_flags)
        .arg(format!("--namespaces-to-ignore={}", ignored.name()))
        .start()
        .await
        .unwrap();
    only_these_reload(client, "v2", &[(&watched, &watched_web)], &[(&ignored, &ignored_web)]).await;
}

/// D34: `--namespace-selector` in global mode, including label changes made at runtime.
#[tokio::test]
async fn namespace_selector_follows_namespace_labels_at_runtime() {
    let env = TestEnv::new().await;
    let TestEnv { plane, client, .. } = &env;
    let (auto_key, key_flags) = private_keys();
    let label = "reloader-tests/scope";
    let value = unique_token("sel-");
    let (first, first_web) = namespace_with_web(plane, client, &auto_key).await;
    let (second, second_web) = namespace_with_web(plane, client, &auto_key).await;
    label_namespace(client, first.name(), label, Some(&value)).await.unwrap();
    let reloader = Reloader::builder(plane)
        .args(key_flags)
        .arg(format!("--namespace-selector={label}={value}"))
        .start()
        .await
        .unwrap();
    only_these_reload(client, "v2", &[(&first, &first_web)], &[(&second, &second_web)]).await;

    // Move the label; the controller learns it from its Namespace watch.
    label_namespace(client, first.name(), label, None).await.unwrap();
    label_namespace(client, second.name(), label, Some(&value)).await.unwrap();
    let selection_changed = |namespace: &str, selected: bool| {
        let (namespace, selected) = (namespace.to_owned(), format!("selected={selected}"));
        move |line: &str| {
            line.contains("namespace selection changed")
                && line.contains(&namespace)
                && line.contains(&selected)
        }
    };
    let (dropped, added) = (selection_changed(first.name(), false), selection_changed(second.name(), true));
    wait_for_log(&reloader, "the controller to see both label changes", RELOAD_TIMEOUT, |log| {
        log.lines().any(&dropped) && log.lines().any(&added)
    })
    .await
    .unwrap();
    only_these_reload(client, "v3", &[(&second, &second_web)], &[(&first, &first_web)]).await;
}

/// D34: `--resource-label-selector`: only matching ConfigMaps count, and a label added or removed
/// at runtime takes effect for the next change.
#[tokio::test]
async fn resource_label_selector_follows_resource_labels() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let label = "reloader-tests/watch";
    let value = unique_token("res-");
    let (labelled, plain) = (ResourceRef::configmap("labelled"), ResourceRef::configmap("plain"));
    resources.create(&labelled, &[("k", "v1")]).await.unwrap();
    resources.create(&plain, &[("k", "v1")]).await.unwrap();
    resources.update_metadata(&labelled, &[(label, &value)], &[]).await.unwrap();
    let web_labelled = auto_deployment(client, ns.name(), "web-labelled", &labelled.name).await;
    let web_plain = auto_deployment(client, ns.name(), "web-plain", &plain.name).await;
    let _reloader = Reloader::builder(plane)
        .args([format!("--namespaces={}", ns.name()), format!("--resource-label-selector={label}={value}")])
        .start()
        .await
        .unwrap();

    // Snapshots both workloads, then changes both ConfigMaps.
    let change = {
        let (client, resources) = (&client, &resources);
        let (web_plain, web_labelled, plain, labelled) = (&web_plain, &web_labelled, &plain, &labelled);
        move |round: &'static str| async move {
            let plain_before = web_plain.observe(client).await.unwrap();
            let labelled_before = web_labelled.observe(client).await.unwrap();
            let plain_hash = resources.update_data(plain, &[("k", round)]).await.unwrap();
            let labelled_hash = resources.update_data(labelled, &[("k", round)]).await.unwrap();
            (plain_before, plain_hash, labelled_before, labelled_hash)
        }
    };

    let (plain_before, _, _, labelled_hash) = change("v2").await;
    let started = Instant::now();
    web_labelled
        .wait_for_marker(client, &labelled, Strategy::EnvVars, &labelled_hash, RELOAD_TIMEOUT)
        .await
        .unwrap();
    web_plain.assert_no_change_for(client, &plain_before, negative_wait(started.elapsed())).await;

    // Swap the label: the watch now shows `plain` and has lost `labelled`.
    resources.update_metadata(&plain, &[(label, &value)], &[]).await.unwrap();
    remove_label(client, ns.name(), &labelled.name, label).await;
    let (_, plain_hash, labelled_before, _) = change("v3").await;
    let started = Instant::now();
    web_plain.wait_for_marker(client, &plain, Strategy::EnvVars, &plain_hash, RELOAD_TIMEOUT).await.unwrap();
    web_labelled.assert_no_change_for(client, &labelled_before, negative_wait(started.elapsed())).await;
}

async fn auto_deployment(client: &Client, namespace: &str, name: &str, config: &str) -> WorkloadId {
    WorkloadSpec::new(Kind::Deployment, name)
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_configmap(config)
        .create(client, namespace)
        .await
        .unwrap()
}

async fn remove_label(client: &Client, namespace: &str, name: &str, label: &str) {
    use kube::api::{Patch, PatchParams};
    let patch = serde_json::json!({ "metadata": { "labels": { label: null } } });
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    configmaps.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

/// D35: `--namespaces=a,b` reloads in exactly a and b, running as a ServiceAccount that has
/// Roles in a, b and c and no cluster-wide permission at all. `KUBERNETES_NAMESPACE=c` is set
/// too: the flag takes precedence.
#[tokio::test]
async fn namespaces_flag_needs_only_namespaced_roles() {
    let env = TestEnv::new().await;
    let TestEnv { plane, client, .. } = &env;
    let (a, a_web) = namespace_with_web(plane, client, ANNOTATION_AUTO).await;
    let (b, b_web) = namespace_with_web(plane, client, ANNOTATION_AUTO).await;
    let (c, c_web) = namespace_with_web(plane, client, ANNOTATION_AUTO).await;
    let kubeconfig = namespaced_identity(plane, client, &a, &[&a, &b, &c]).await;
    let reloader = Reloader::builder(plane)
        .kubeconfig(kubeconfig.path())
        .args([format!("--namespaces={},{}", a.name(), b.name()), "--is-openshift=false".into()])
        .env("KUBERNETES_NAMESPACE", c.name())
        .start()
        .await
        .unwrap();
    only_these_reload(client, "v2", &[(&a, &a_web), (&b, &b_web)], &[(&c, &c_web)]).await;
    assert_no_permission_errors(&reloader);
}

/// D35: `KUBERNETES_NAMESPACE` alone selects that one namespace, with a namespaced Role.
#[tokio::test]
async fn kubernetes_namespace_selects_one_namespace() {
    let env = TestEnv::new().await;
    let TestEnv { plane, client, .. } = &env;
    let (d, d_web) = namespace_with_web(plane, client, ANNOTATION_AUTO).await;
    let (e, e_web) = namespace_with_web(plane, client, ANNOTATION_AUTO).await;
    let kubeconfig = namespaced_identity(plane, client, &d, &[&d, &e]).await;
    let reloader = Reloader::builder(plane)
        .kubeconfig(kubeconfig.path())
        .arg("--is-openshift=false")
        .env("KUBERNETES_NAMESPACE", d.name())
        .start()
        .await
        .unwrap();
    only_these_reload(client, "v2", &[(&d, &d_web)], &[(&e, &e_web)]).await;
    assert_no_permission_errors(&reloader);
}

/// A ServiceAccount in `home` with reloader's Role in each of `granted`, and nothing else; checks
/// that it really cannot read cluster-wide.
async fn namespaced_identity(
    plane: &ControlPlane,
    admin: &Client,
    home: &TestNamespace,
    granted: &[&TestNamespace],
) -> KubeconfigFile {
    let account = "reloader";
    let kubeconfig = KubeconfigFile::for_service_account(plane, home.name(), account).await.unwrap();
    for ns in granted {
        grant_namespaced_reloader_role(admin, ns.name(), home.name(), account).await.unwrap();
    }
    let as_account = plane.service_account_client(home.name(), account).await.unwrap();
    let everywhere: Api<ConfigMap> = Api::all(as_account);
    match everywhere.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) if status.code == 403 => {}
        other => panic!("the ServiceAccount must not list ConfigMaps cluster-wide: {other:?}"),
    }
    kubeconfig
}

fn assert_no_permission_errors(reloader: &Reloader) {
    let log = reloader.log_text();
    let forbidden: Vec<&str> = log.lines().filter(|l| l.to_ascii_lowercase().contains("forbidden")).collect();
    assert!(forbidden.is_empty(), "permission errors in the log: {forbidden:#?}");
}

/// D36: `--auto-reload-all` reloads un-annotated workloads that use the resource, for every
/// rolling kind and both strategies; `auto: "false"` and typed auto `"false"` still opt out, and
/// a workload that does not use the resource is left alone.
#[tokio::test]
async fn auto_reload_all_reloads_unannotated_users_unless_opted_out() {
    join_all(Strategy::ALL.map(auto_reload_all_case)).await;
}

async fn auto_reload_all_case(strategy: Strategy) {
    let env = TestEnv::with_crds().await;
    let TestEnv { ns, client, resources, .. } = &env;
    let config = ResourceRef::configmap(CONFIG);
    resources.create(&config, &[("k", "v1")]).await.unwrap();
    resources.create(&ResourceRef::configmap("unrelated"), &[("k", "v1")]).await.unwrap();
    let mut users = Vec::new();
    let mut bystanders = Vec::new();
    for kind in Kind::ROLLING {
        let base = WorkloadSpec::new(kind, "unused").without_pods();
        let uses = base.clone().env_from_configmap(CONFIG);
        users.push(
            uses.for_kind(kind, format!("plain-{}", kind.short())).create(client, ns.name()).await.unwrap(),
        );
        let opted_out = [
            uses.for_kind(kind, format!("off-{}", kind.short()))
                .metadata_annotation(ANNOTATION_AUTO, "false"),
            uses.for_kind(kind, format!("typed-off-{}", kind.short()))
                .metadata_annotation(ANNOTATION_CONFIGMAP_AUTO, "false"),
            base.for_kind(kind, format!("unref-{}", kind.short())).env_from_configmap("unrelated"),
        ];
        for spec in opted_out {
            bystanders.push(spec.create(client, ns.name()).await.unwrap());
        }
    }
    let _reloader = env.reloader(strategy, &["--auto-reload-all"]).await;
    let mut before = Vec::new();
    for workload in &bystanders {
        before.push(workload.observe(client).await.unwrap());
    }

    let started = Instant::now();
    let hash = resources.update_data(&config, &[("k", "v2")]).await.unwrap();
    for workload in &users {
        workload.wait_for_marker(client, &config, strategy, &hash, RELOAD_TIMEOUT).await.unwrap();
    }
    let wait = negative_wait(started.elapsed());
    join_all(
        bystanders
            .iter()
            .zip(&before)
            .map(|(workload, initial)| workload.assert_no_change_for(client, initial, wait)),
    )
    .await;
}
