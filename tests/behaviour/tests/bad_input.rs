//! docs/behaviour.md §F50: bad input. Resources at the size limit or with only `binaryData` /
//! `stringData`, names that share an env-var marker, an unparsable pause period, workloads
//! without containers, and command lines that must be refused before any API call.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Secret};
use kube::Client;
use kube::api::{Api, DynamicObject, ObjectMeta, PostParams};
use reloader_harness::{KubeconfigFile, NotYet, TestNamespace, wait_until};
use reloader_tests::fixtures::*;
use reloader_tests::fixtures_extra::*;
use reloader_workload_argo::Rollout;
use reloader_workload_openshift::DeploymentConfig;
use serde_json::json;

const RELOAD_TIMEOUT: Duration = Duration::from_secs(60);
const STARTUP_ERROR_TIMEOUT: Duration = Duration::from_secs(30);
/// The API server's limit for the data of one ConfigMap or Secret.
const MAX_DATA_BYTES: usize = 1024 * 1024;

async fn auto_deployment(
    client: &Client,
    ns: &TestNamespace,
    name: &str,
    via: &[(ResourceKind, &str)],
) -> WorkloadId {
    let mut spec = WorkloadSpec::new(Kind::Deployment, name).metadata_annotation(ANNOTATION_AUTO, "true");
    for (kind, resource) in via {
        spec = spec.reference(*kind, resource, Via::Volume);
    }
    spec.create(client, ns.name()).await.unwrap()
}

/// F50: a ConfigMap as large as the API server allows reloads, with the hash of all its data.
#[tokio::test]
async fn a_configmap_at_the_size_limit_reloads_with_its_hash() {
    let env = TestEnv::new().await;
    let TestEnv { plane: _, ns, client, resources, .. } = &env;
    let big = ResourceRef::configmap("big");
    let key = "blob";
    let size = MAX_DATA_BYTES - key.len();
    resources.create(&big, &[(key, &"a".repeat(size))]).await.unwrap();
    let web = auto_deployment(client, ns, "web", &[(ResourceKind::ConfigMap, "big")]).await;
    let _reloader = env.reloader_builder().start().await.unwrap();

    let mut value = "b".repeat(size - 1);
    value.push('!');
    let hash = resources.update_data(&big, &[(key, &value)]).await.unwrap();
    web.wait_for_marker(client, &big, Strategy::EnvVars, &hash, RELOAD_TIMEOUT).await.unwrap();
}

/// F50: a ConfigMap with only `binaryData`, and a Secret written only through `stringData`,
/// reload with the Stakater hash of what the API server stores.
#[tokio::test]
async fn binary_data_and_string_data_reload_with_the_stored_data_hash() {
    let env = TestEnv::new().await;
    let TestEnv { plane: _, ns, client, .. } = &env;
    let configmaps: Api<ConfigMap> = ns.api(client);
    let secrets: Api<Secret> = ns.api(client);
    let binary = |bytes: &[u8]| ConfigMap {
        metadata: ObjectMeta { name: Some("binary".into()), ..ObjectMeta::default() },
        binary_data: Some(BTreeMap::from([("logo.png".to_owned(), ByteString(bytes.to_vec()))])),
        ..ConfigMap::default()
    };
    let string_only = |password: &str| Secret {
        metadata: ObjectMeta { name: Some("string-only".into()), ..ObjectMeta::default() },
        string_data: Some(BTreeMap::from([("password".to_owned(), password.to_owned())])),
        ..Secret::default()
    };
    let post = PostParams::default();
    configmaps.create(&post, &binary(&[0x89, b'P', b'N', b'G', 0x00, 0xff])).await.unwrap();
    secrets.create(&post, &string_only("one")).await.unwrap();
    let web = auto_deployment(
        client,
        ns,
        "web",
        &[(ResourceKind::ConfigMap, "binary"), (ResourceKind::Secret, "string-only")],
    )
    .await;
    let _reloader = env.reloader_builder().start().await.unwrap();

    let new_bytes = [0x89, b'P', b'N', b'G', 0x01, 0xfe, 0x00];
    let mut changed = binary(&new_bytes);
    changed.metadata.resource_version = configmaps.get("binary").await.unwrap().metadata.resource_version;
    configmaps.replace("binary", &post, &changed).await.unwrap();
    let binary_hash = reloader_core::hash::configmap_hash([], [("logo.png", &new_bytes[..])]).to_hex();
    let binary_ref = ResourceRef::configmap("binary");
    web.wait_for_marker(client, &binary_ref, Strategy::EnvVars, &binary_hash, RELOAD_TIMEOUT).await.unwrap();

    let mut changed = string_only("two");
    let stored = secrets.get("string-only").await.unwrap();
    changed.metadata.resource_version = stored.metadata.resource_version;
    changed.data = stored.data;
    secrets.replace("string-only", &post, &changed).await.unwrap();
    let stored = secrets.get("string-only").await.unwrap();
    assert_eq!(stored.string_data, None, "stringData is write-only");
    let password = &stored.data.as_ref().unwrap()["password"].0;
    assert_eq!(password, b"two");
    let secret_hash = stakater_hash_secret(&BTreeMap::from([("password".to_owned(), password.clone())]));
    let secret_ref = ResourceRef::secret("string-only");
    web.wait_for_marker(client, &secret_ref, Strategy::EnvVars, &secret_hash, RELOAD_TIMEOUT).await.unwrap();
}

/// Waits for a Warning Event on Deployment `name` whose message contains every needle.
async fn wait_for_warning(client: &Client, ns: &TestNamespace, name: &str, needles: &[&str]) -> Event {
    wait_until(&format!("a Warning Event on {name} mentioning {needles:?}"), RELOAD_TIMEOUT, || async {
        let events = events_for(client, ns.name(), Kind::Deployment, name).await?;
        let warning = events.into_iter().find(|event| {
            let message = event.message.as_deref().unwrap_or_default();
            event.type_.as_deref() == Some("Warning") && needles.iter().all(|needle| message.contains(needle))
        });
        warning.ok_or_else(|| NotYet::because("no such Event yet"))
    })
    .await
    .unwrap()
}

/// F50: `my-cm` and `my.cm` both map to `STAKATER_MY_CM_CONFIGMAP`: a Warning Event says so on
/// the workload, and reloads still happen.
#[tokio::test]
async fn names_sharing_an_env_var_get_a_warning_event() {
    let env = TestEnv::new().await;
    let TestEnv { plane: _, ns, client, resources, .. } = &env;
    let dashed = ResourceRef::configmap("my-cm");
    resources.create(&dashed, &[("k", "v1")]).await.unwrap();
    resources.create(&ResourceRef::configmap("my.cm"), &[("k", "v1")]).await.unwrap();
    let both = [(ResourceKind::ConfigMap, "my-cm"), (ResourceKind::ConfigMap, "my.cm")];
    let web = auto_deployment(client, ns, "web", &both).await;
    let _reloader = env.reloader_builder().start().await.unwrap();

    let warning = wait_for_warning(client, ns, "web", &["my-cm", "my.cm", "STAKATER_MY_CM_CONFIGMAP"]).await;
    assert!(warning.reason.as_deref().is_some_and(|reason| !reason.is_empty()), "{warning:?}");
    let hash = resources.update_data(&dashed, &[("k", "v2")]).await.unwrap();
    web.wait_for_marker(client, &dashed, Strategy::EnvVars, &hash, RELOAD_TIMEOUT).await.unwrap();
}

/// F50: a pause period that does not parse does not stop the reload; nothing is paused, and a
/// warning names the annotation.
#[tokio::test]
async fn an_invalid_pause_period_still_reloads_with_a_warning() {
    let env = TestEnv::new().await;
    let TestEnv { plane: _, ns, client, resources, .. } = &env;
    let config = ResourceRef::configmap("app-config");
    resources.create(&config, &[("k", "v1")]).await.unwrap();
    let web = WorkloadSpec::new(Kind::Deployment, "web")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .metadata_annotation(ANNOTATION_PAUSE_PERIOD, "soon")
        .env_from_configmap("app-config")
        .create(client, ns.name())
        .await
        .unwrap();
    let _reloader = env.reloader_builder().start().await.unwrap();

    let warning = wait_for_warning(client, ns, "web", &[ANNOTATION_PAUSE_PERIOD, "soon"]).await;
    assert!(warning.reason.as_deref().is_some_and(|reason| !reason.is_empty()), "{warning:?}");
    let hash = resources.update_data(&config, &[("k", "v2")]).await.unwrap();
    web.wait_for_marker(client, &config, Strategy::EnvVars, &hash, RELOAD_TIMEOUT).await.unwrap();
    let deployment = ns.api::<Deployment>(client).get("web").await.unwrap();
    assert_ne!(deployment.spec.unwrap().paused, Some(true), "not paused");
    let annotations = deployment.metadata.annotations.unwrap_or_default();
    assert!(!annotations.contains_key(ANNOTATION_PAUSED_AT), "{annotations:?}");
}

/// F50: workloads with nothing to carry a marker (a `workloadRef` Rollout, DeploymentConfigs
/// with an empty or missing container list) are skipped; the process keeps running, and the
/// other workloads, of the same kinds too, still reload.
#[tokio::test]
async fn workloads_without_containers_are_skipped_without_a_crash() {
    let env = TestEnv::with_crds().await;
    let TestEnv { ns, client, resources, .. } = &env;
    let config = ResourceRef::configmap("app-config");
    resources.create(&config, &[("k", "v1")]).await.unwrap();
    let healthy: Vec<WorkloadId> = {
        let mut created = Vec::new();
        for kind in [Kind::Deployment, Kind::Rollout, Kind::DeploymentConfig] {
            let spec = WorkloadSpec::new(kind, format!("ok-{}", kind.short()))
                .metadata_annotation(ANNOTATION_AUTO, "true")
                .env_from_configmap("app-config")
                .without_pods();
            created.push(spec.create(client, ns.name()).await.unwrap());
        }
        created
    };
    // Explicit annotations select the ConfigMap whatever the pod spec holds.
    let explicit = json!({ ANNOTATION_CONFIGMAP_RELOAD: "app-config" });
    let rollout: Rollout = serde_json::from_value(json!({
        "metadata": { "name": "ro-ref", "annotations": explicit },
        "spec": {
            "selector": { "matchLabels": { "app": "ok-deploy" } },
            "workloadRef": { "apiVersion": "apps/v1", "kind": "Deployment", "name": "ok-deploy" },
        },
    }))
    .unwrap();
    ns.api::<Rollout>(client).create(&PostParams::default(), &rollout).await.unwrap();
    // Dynamic: the typed PodSpec cannot even express a missing container list.
    let resource = kube::core::ApiResource::erase::<DeploymentConfig>(&());
    let deployment_configs: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns.name(), &resource);
    for (name, pod_spec) in [("dc-empty", json!({ "containers": [] })), ("dc-missing", json!({}))] {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": reloader_workload_openshift::API_VERSION,
            "kind": reloader_workload_openshift::KIND,
            "metadata": { "name": name, "annotations": explicit },
            "spec": { "replicas": 0, "selector": { "app": name }, "template": { "spec": pod_spec } },
        }))
        .unwrap();
        deployment_configs.create(&PostParams::default(), &object).await.unwrap();
    }
    let mut reloader = env.reloader(Strategy::EnvVars, &[]).await;

    for round in ["v2", "v3"] {
        let hash = resources.update_data(&config, &[("k", round)]).await.unwrap();
        for workload in &healthy {
            workload
                .wait_for_marker(client, &config, Strategy::EnvVars, &hash, RELOAD_TIMEOUT)
                .await
                .unwrap();
        }
    }
    let metric = |reason: &'static str| format!("reloader_skip_reasons_total{{reason=\"{reason}\"}}");
    let no_template = reloader.metric(&metric("no_template")).await.unwrap();
    assert!(no_template >= Some(2.0), "the workloadRef Rollout was skipped each time: {no_template:?}");
    let no_containers = reloader.metric(&metric("no_containers")).await.unwrap();
    assert!(
        no_containers >= Some(4.0),
        "both container-less DeploymentConfigs were skipped each time: {no_containers:?}"
    );
    assert_eq!(reloader.exit_status(), None, "the controller is still running");
    let log = reloader.log_text();
    assert!(!log.contains("panicked"), "{log}");
    assert!(!log.contains("reload failed"), "{log}");
}

/// A command line that must be refused: the flag or variable its one line must name, and the value.
struct Refused {
    args: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
    names: &'static str,
    value: &'static str,
}

const REFUSED: &[Refused] = &[
    Refused { args: &["--reload-strategy=rolling"], env: &[], names: "--reload-strategy", value: "rolling" },
    Refused {
        args: &["--resources-to-ignore=configmaps,secrets"],
        env: &[],
        names: "--resources-to-ignore",
        value: "configmaps,secrets",
    },
    Refused {
        args: &["--namespace-selector=team in (a"],
        env: &[],
        names: "--namespace-selector",
        value: "team in (a",
    },
    Refused {
        args: &["--namespaces=ok,Not_A_Namespace"],
        env: &[],
        names: "--namespaces",
        value: "Not_A_Namespace",
    },
    Refused {
        args: &[],
        env: &[("KUBERNETES_NAMESPACE", "Prod")],
        names: "KUBERNETES_NAMESPACE",
        value: "Prod",
    },
    Refused {
        args: &["--ignored-workload-types=pods"],
        env: &[],
        names: "--ignored-workload-types",
        value: "pods",
    },
];

/// F50: with a cluster that answers (a proxy in front of the plane that counts connections),
/// each bad command line exits non-zero with one line naming what is wrong, and never connects;
/// the same proxy does see a good command line connect.
#[tokio::test]
async fn bad_command_lines_exit_with_one_line_before_any_api_call() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns: _, .. } = &env;
    let proxy = ApiProxy::start(plane).await.unwrap();
    let kubeconfig = KubeconfigFile::with_server(plane, &proxy.url()).unwrap();
    for refused in REFUSED {
        let exited =
            run_reloader_to_exit(kubeconfig.path(), refused.args, refused.env, STARTUP_ERROR_TIMEOUT).await;
        let context = format!("{:?} {:?}: {exited:?}", refused.args, refused.env);
        assert!(exited.code.is_some_and(|code| code != 0), "non-zero exit: {context}");
        let lines = exited.lines();
        assert_eq!(lines.len(), 1, "one line: {context}");
        assert!(lines[0].contains(refused.names) && lines[0].contains(refused.value), "{context}");
        assert_eq!(proxy.connections(), 0, "no API call: {context}");
    }

    let reloader = env.reloader_builder().kubeconfig(kubeconfig.path()).start().await.unwrap();
    assert!(proxy.connections() > 0, "a good command line talks to the API server through the proxy");
    drop(reloader);
}
