//! CSI integration (`--enable-csi-integration`, docs/compatibility.md, CSI) on the real control
//! plane with the real binary: a SecretProviderClassPodStatus whose mounted versions change
//! reloads the workloads using its class; `ignore` and `match` are read from the
//! SecretProviderClass (not the status); a status created or deleted never reloads, even with
//! `--reload-on-create`/`--reload-on-delete`; without the CSI CRDs start-up warns once and the
//! other kinds keep working.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{CSIVolumeSource, Container, PodSpec, Volume, VolumeMount};
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use reloader_harness::{ControlPlane, PlaneOptions};
use reloader_tests::fixtures::*;
use serde_json::json;

const CSI_FLAG: &str = "--enable-csi-integration=true";
const RELOAD_TIMEOUT: Duration = Duration::from_secs(60);
const ANNOTATION_SPC_RELOAD: &str = "secretproviderclass.reloader.stakater.com/reload";

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("secrets-store.csi.x-k8s.io", "v1", kind),
        plural,
    )
}

fn classes(client: &Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &resource("SecretProviderClass", "secretproviderclasses"))
}

fn statuses(client: &Client, namespace: &str) -> Api<DynamicObject> {
    let ar = resource("SecretProviderClassPodStatus", "secretproviderclasspodstatuses");
    Api::namespaced_with(client.clone(), namespace, &ar)
}

/// A SecretProviderClass with `annotations` (reloader reads ignore/match from it).
async fn create_class(client: &Client, namespace: &str, name: &str, annotations: &[(&str, &str)]) {
    let annotations: serde_json::Map<String, serde_json::Value> =
        annotations.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect();
    let class: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "secrets-store.csi.x-k8s.io/v1",
        "kind": "SecretProviderClass",
        "metadata": { "name": name, "annotations": annotations },
        "spec": { "provider": "vault", "parameters": { "objects": "db-password" } },
    }))
    .unwrap();
    classes(client, namespace).create(&PostParams::default(), &class).await.expect("creating the class");
}

async fn annotate_class(client: &Client, namespace: &str, name: &str, annotations: serde_json::Value) {
    let patch = json!({ "metadata": { "annotations": annotations } });
    classes(client, namespace)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("annotating the class");
}

/// The status the driver writes for one pod mounting `class`, with the mounted `version`.
fn status_object(name: &str, class: &str, version: &str) -> serde_json::Value {
    json!({
        "apiVersion": "secrets-store.csi.x-k8s.io/v1",
        "kind": "SecretProviderClassPodStatus",
        "metadata": { "name": name },
        "status": {
            "podName": name,
            "secretProviderClassName": class,
            "mounted": true,
            "objects": [{ "id": "secret/db-password", "version": version }],
        },
    })
}

async fn create_status(client: &Client, namespace: &str, name: &str, class: &str, version: &str) {
    let status: DynamicObject = serde_json::from_value(status_object(name, class, version)).unwrap();
    statuses(client, namespace).create(&PostParams::default(), &status).await.expect("creating the status");
}

/// As the driver does after a rotation: the mounted version changes.
async fn rotate(client: &Client, namespace: &str, name: &str, class: &str, version: &str) {
    let patch = status_object(name, class, version);
    statuses(client, namespace)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("updating the status");
}

/// The marker value for a status of `class` at `version` (the hash Stakater writes).
fn expected_hash(class: &str, version: &str) -> String {
    reloader_core::hash::spc_pod_status_hash(class, [("secret/db-password", version)]).to_hex()
}

/// A Deployment mounting `class` through the CSI driver, annotated with `annotations`.
fn csi_deployment(name: &str, class: &str, annotations: &[(&str, &str)]) -> WorkloadSpec {
    let pod = PodSpec {
        containers: vec![Container {
            name: container_name(0),
            image: Some(CONTAINER_IMAGE.to_owned()),
            volume_mounts: Some(vec![VolumeMount {
                name: "secrets-store".into(),
                mount_path: "/mnt/secrets-store".into(),
                read_only: Some(true),
                ..VolumeMount::default()
            }]),
            ..Container::default()
        }],
        volumes: Some(vec![Volume {
            name: "secrets-store".into(),
            csi: Some(CSIVolumeSource {
                driver: "secrets-store.csi.k8s.io".into(),
                read_only: Some(true),
                volume_attributes: Some([("secretProviderClass".to_owned(), class.to_owned())].into()),
                ..CSIVolumeSource::default()
            }),
            ..Volume::default()
        }]),
        ..PodSpec::default()
    };
    annotations
        .iter()
        .fold(WorkloadSpec::new(Kind::Deployment, name).pod_spec(pod).without_pods(), |spec, (k, v)| {
            spec.metadata_annotation(*k, *v)
        })
}

fn class_ref(name: &str) -> ResourceRef {
    ResourceRef::new(ResourceKind::SecretProviderClass, name)
}

/// Waits until `workload` carries the marker of `class` mounted at `version`.
async fn wait_for_class_marker(
    client: &Client,
    workload: &WorkloadId,
    class: &str,
    version: &str,
) -> Result<Duration, reloader_harness::PlaneError> {
    let hash = expected_hash(class, version);
    workload.wait_for_marker(client, &class_ref(class), Strategy::EnvVars, &hash, RELOAD_TIMEOUT).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_updated_status_reloads_and_a_created_or_deleted_one_never_does() {
    let env = TestEnv::with_crds().await;
    let TestEnv { ns, client, .. } = &env;
    let ns = ns.name();
    create_class(client, ns, "vault-db", &[]).await;
    create_status(client, ns, "web-1-vault-db", "vault-db", "v1").await;
    let web = csi_deployment("web", "vault-db", &[(ANNOTATION_SPC_RELOAD, "vault-db")])
        .create(client, ns)
        .await
        .unwrap();
    let reloader = env
        .reloader(Strategy::EnvVars, &[CSI_FLAG, "--reload-on-create=true", "--reload-on-delete=true"])
        .await;

    // Update: the mounted version changes, the workload reloads with the status's hash.
    let started = Instant::now();
    rotate(client, ns, "web-1-vault-db", "vault-db", "v2").await;
    wait_for_class_marker(client, &web, "vault-db", "v2").await.expect("an updated status reloads");
    let quiet = negative_wait(started.elapsed());

    // A new pod's status, even with other versions, and a status going away: never a reload.
    let before = web.observe(client).await.unwrap();
    create_status(client, ns, "web-2-vault-db", "vault-db", "v3").await;
    statuses(client, ns).delete("web-1-vault-db", &DeleteParams::default()).await.unwrap();
    web.assert_no_change_for(client, &before, quiet).await;

    // The positive twin: the same process still reloads on the next rotation of a known status.
    rotate(client, ns, "web-2-vault-db", "vault-db", "v4").await;
    wait_for_class_marker(client, &web, "vault-db", "v4")
        .await
        .expect("the created status, once updated, reloads");
    assert!(reloader.log_text().lines().all(|l| !l.contains("not watched")), "the CRDs are installed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_and_match_are_read_from_the_secret_provider_class() {
    let env = TestEnv::with_crds().await;
    let TestEnv { ns, client, .. } = &env;
    let ns = ns.name();
    // Statuses carry no annotations; only the classes do.
    create_class(client, ns, "ignored", &[(ANNOTATION_IGNORE, "true")]).await;
    create_class(client, ns, "matched", &[(ANNOTATION_MATCH, "true")]).await;
    create_class(client, ns, "unmatched", &[]).await;
    for class in ["ignored", "matched", "unmatched"] {
        create_status(client, ns, &format!("pod-{class}"), class, "v1").await;
    }
    let explicit = csi_deployment("explicit", "ignored", &[(ANNOTATION_SPC_RELOAD, "ignored")]);
    let explicit = explicit.create(client, ns).await.unwrap();
    let searching = csi_deployment("searching", "matched", &[(ANNOTATION_SEARCH, "true")])
        .create(client, ns)
        .await
        .unwrap();
    let unmatched = csi_deployment("searching-unmatched", "unmatched", &[(ANNOTATION_SEARCH, "true")])
        .create(client, ns)
        .await
        .unwrap();
    let _reloader = env.reloader(Strategy::EnvVars, &[CSI_FLAG]).await;

    // search/match: the class carries match, the workload search: reload.
    let started = Instant::now();
    rotate(client, ns, "pod-matched", "matched", "v2").await;
    wait_for_class_marker(client, &searching, "matched", "v2")
        .await
        .expect("search on the workload, match on the class: reload");
    let quiet = negative_wait(started.elapsed());

    // ignore on the class, and search without match on the class: no reload.
    let (explicit_before, unmatched_before) =
        (explicit.observe(client).await.unwrap(), unmatched.observe(client).await.unwrap());
    rotate(client, ns, "pod-ignored", "ignored", "v2").await;
    rotate(client, ns, "pod-unmatched", "unmatched", "v2").await;
    explicit.assert_no_change_for(client, &explicit_before, quiet).await;
    unmatched.assert_no_change_for(client, &unmatched_before, Duration::ZERO).await;

    // The class watch keeps the flags current: once ignore is removed, the next rotation reloads.
    annotate_class(client, ns, "ignored", json!({ ANNOTATION_IGNORE: null })).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    rotate(client, ns, "pod-ignored", "ignored", "v3").await;
    wait_for_class_marker(client, &explicit, "ignored", "v3").await.expect("the class is no longer ignored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_csi_crds_start_up_warns_once_and_carries_on() {
    // A private plane: the shared one has the CSI CRDs installed by other tests.
    let plane = ControlPlane::start(PlaneOptions::api_only()).await.expect("starting a private plane");
    let env = TestEnv::on(&plane).await;
    let TestEnv { ns, client, resources, .. } = &env;
    resources.create(&ResourceRef::configmap("app-config"), &[("k", "v1")]).await.unwrap();
    let web = WorkloadSpec::new(Kind::Deployment, "web")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .configmap_volume("app-config")
        .create(client, ns.name())
        .await
        .unwrap();
    let reloader = env
        .reloader_builder()
        .args([CSI_FLAG, "--reload-strategy=env-vars"])
        .start()
        .await
        .expect("ready without the CSI CRDs");
    let (status, _) = reloader.get("/readyz").await.unwrap();
    assert_eq!(status, 200, "ready");
    let log = reloader.log_text();
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("--enable-csi-integration, but")).collect();
    assert_eq!(warnings.len(), 1, "warned once: {warnings:?}");
    assert!(warnings[0].contains("WARN") && warnings[0].contains("not watched"), "{}", warnings[0]);

    // The other kinds work.
    let hash = resources.update_data(&ResourceRef::configmap("app-config"), &[("k", "v2")]).await.unwrap();
    web.wait_for_marker(
        client,
        &ResourceRef::configmap("app-config"),
        Strategy::EnvVars,
        &hash,
        RELOAD_TIMEOUT,
    )
    .await
    .expect("ConfigMaps still reload");
    let log = reloader.log_text();
    assert_eq!(log.matches("--enable-csi-integration, but").count(), 1, "still once");
}
