//! Proof that the local control plane behaves as a real cluster does: controllers reconcile,
//! KWOK makes pods Ready, optimistic concurrency and RBAC are enforced, CRDs install, and
//! kube-apiserver can be restarted under a running client.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use reloader_harness::{ControlPlane, Crd, NotYet, PlaneOptions, Versions, wait_until};
use serde_json::json;

const ROLLOUT_TIMEOUT: Duration = Duration::from_secs(90);

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [{ "name": "app", "image": "registry.k8s.io/pause:3.10" }] },
            },
        },
    }))
    .unwrap()
}

/// Ok once the Deployment's current template is fully rolled out and Ready.
async fn rolled_out(deployments: &Api<Deployment>, name: &str) -> Result<Deployment, NotYet> {
    let deployment = deployments.get(name).await?;
    let wanted = deployment.spec.as_ref().and_then(|spec| spec.replicas).unwrap_or(1);
    let generation = deployment.metadata.generation;
    let status = deployment.status.clone().unwrap_or_default();
    let done = status.observed_generation == generation
        && status.updated_replicas == Some(wanted)
        && status.ready_replicas == Some(wanted)
        && status.replicas == Some(wanted);
    if done { Ok(deployment) } else { Err(NotYet::because(format!("{status:?}"))) }
}

fn owned_by(replica_set: &ReplicaSet, deployment: &Deployment) -> bool {
    let uid = deployment.metadata.uid.as_deref();
    replica_set.metadata.owner_references.iter().flatten().any(|owner| Some(owner.uid.as_str()) == uid)
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[tokio::test]
async fn the_server_reports_the_pinned_kubernetes_version() {
    let plane = ControlPlane::shared().await;
    let _logs = plane.dump_logs_on_panic();
    let version = plane.client().apiserver_version().await.unwrap();
    assert_eq!(version.git_version, Versions::selected().kubernetes);
}

#[tokio::test]
async fn a_deployment_gets_a_replicaset_whose_pods_become_ready_on_kwok_nodes() {
    let plane = ControlPlane::shared().await;
    let _logs = plane.dump_logs_on_panic();
    let ns = plane.namespace().await;
    let client = plane.client();
    let deployments: Api<Deployment> = ns.api(&client);

    let created = deployments.create(&PostParams::default(), &deployment("web", 2)).await.unwrap();
    wait_until("web to roll out", ROLLOUT_TIMEOUT, || rolled_out(&deployments, "web")).await.unwrap();

    let replica_sets: Vec<ReplicaSet> =
        ns.api::<ReplicaSet>(&client).list(&ListParams::default()).await.unwrap().items;
    assert_eq!(replica_sets.len(), 1, "one ReplicaSet for one template");
    assert!(owned_by(&replica_sets[0], &created));
    let pods = ns.api::<Pod>(&client).list(&ListParams::default().labels("app=web")).await.unwrap().items;
    assert_eq!(pods.len(), 2);
    for pod in &pods {
        assert!(is_ready(pod), "pod {:?} is not Ready", pod.metadata.name);
        let node = pod.spec.as_ref().and_then(|spec| spec.node_name.as_deref()).unwrap_or_default();
        assert!(node.starts_with("kwok-node-"), "pod bound to {node:?}");
    }
}

#[tokio::test]
async fn a_template_patch_creates_a_second_replicaset() {
    let plane = ControlPlane::shared().await;
    let _logs = plane.dump_logs_on_panic();
    let ns = plane.namespace().await;
    let client = plane.client();
    let deployments: Api<Deployment> = ns.api(&client);
    let replica_sets: Api<ReplicaSet> = ns.api(&client);

    deployments.create(&PostParams::default(), &deployment("api", 1)).await.unwrap();
    wait_until("api to roll out", ROLLOUT_TIMEOUT, || rolled_out(&deployments, "api")).await.unwrap();

    let patch = json!({ "spec": { "template": { "metadata": { "annotations": { "example.com/restarted": "1" } } } } });
    deployments.patch("api", &PatchParams::default(), &Patch::Strategic(&patch)).await.unwrap();
    let patched = wait_until("api to roll out again", ROLLOUT_TIMEOUT, || rolled_out(&deployments, "api"))
        .await
        .unwrap();

    let all = replica_sets.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(all.len(), 2, "a new ReplicaSet for the new template");
    assert!(all.iter().all(|replica_set| owned_by(replica_set, &patched)));
    let annotated = all.iter().find(|replica_set| {
        let template = replica_set.spec.as_ref().and_then(|spec| spec.template.as_ref());
        let annotations = template.and_then(|template| template.metadata.as_ref()?.annotations.as_ref());
        annotations.is_some_and(|annotations| annotations.contains_key("example.com/restarted"))
    });
    let annotated = annotated.expect("the new ReplicaSet carries the patched template");
    assert_eq!(annotated.spec.as_ref().and_then(|spec| spec.replicas), Some(1));
}

#[tokio::test]
async fn a_lease_update_with_a_stale_resource_version_conflicts() {
    let plane = ControlPlane::shared().await;
    let _logs = plane.dump_logs_on_panic();
    let ns = plane.namespace().await;
    let leases: Api<Lease> = ns.api(&plane.client());

    let mut lease: Lease = serde_json::from_value(json!({
        "metadata": { "name": "leader" },
        "spec": { "holderIdentity": "first", "leaseDurationSeconds": 15 },
    }))
    .unwrap();
    let created = leases.create(&PostParams::default(), &lease).await.unwrap();
    let stale_version = created.metadata.resource_version.clone();

    lease.metadata.resource_version = stale_version.clone();
    lease.spec.as_mut().unwrap().holder_identity = Some("second".into());
    let updated = leases.replace("leader", &PostParams::default(), &lease).await.unwrap();
    assert_ne!(updated.metadata.resource_version, stale_version);

    lease.spec.as_mut().unwrap().holder_identity = Some("third".into());
    match leases.replace("leader", &PostParams::default(), &lease).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 409, "{status:?}"),
        other => panic!("a stale resourceVersion must conflict, got {other:?}"),
    }
    let current = leases.get("leader").await.unwrap();
    assert_eq!(current.spec.unwrap().holder_identity.as_deref(), Some("second"));
}

#[tokio::test]
async fn a_service_account_has_only_the_permissions_rbac_grants() {
    let plane = ControlPlane::shared().await;
    let _logs = plane.dump_logs_on_panic();
    let ns = plane.namespace().await;
    let as_account = plane.service_account_client(ns.name(), "nobody").await.unwrap();
    let configmaps: Api<ConfigMap> = ns.api(&as_account);

    match configmaps.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403, "{status:?}");
            let expected = format!("system:serviceaccount:{}:nobody", ns.name());
            assert!(status.message.contains(&expected), "{}", status.message);
        }
        other => panic!("an account without permissions must be refused, got {other:?}"),
    }

    // The same token works once a Role allows it: the refusal was RBAC, not a broken token.
    let admin = plane.client();
    let role: Role = serde_json::from_value(json!({
        "metadata": { "name": "read-configmaps" },
        "rules": [{ "apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"] }],
    }))
    .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": { "name": "nobody-reads-configmaps" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-configmaps" },
        "subjects": [{ "kind": "ServiceAccount", "name": "nobody", "namespace": ns.name() }],
    }))
    .unwrap();
    ns.api::<Role>(&admin).create(&PostParams::default(), &role).await.unwrap();
    ns.api::<RoleBinding>(&admin).create(&PostParams::default(), &binding).await.unwrap();
    wait_until("the RoleBinding to take effect", Duration::from_secs(30), || async {
        configmaps.list(&ListParams::default()).await.map(drop).map_err(NotYet::from)
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn the_crds_install_and_their_objects_can_be_created() {
    let plane = ControlPlane::shared().await;
    let _logs = plane.dump_logs_on_panic();
    plane.install_crds(&Crd::ALL).await.unwrap();
    let ns = plane.namespace().await;
    let client = plane.client();

    let [deployment_configs] = Crd::DeploymentConfig.api_resources().try_into().unwrap();
    let deployment_configs: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns.name(), &deployment_configs);
    let deployment_config: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps.openshift.io/v1",
        "kind": "DeploymentConfig",
        "metadata": { "name": "legacy" },
        "spec": {
            "replicas": 2,
            "selector": { "app": "legacy" },
            "template": {
                "metadata": { "labels": { "app": "legacy" } },
                "spec": { "containers": [{ "name": "app", "image": "registry.k8s.io/pause:3.10" }] },
            },
        },
    }))
    .unwrap();
    let created = deployment_configs.create(&PostParams::default(), &deployment_config).await.unwrap();
    assert_eq!(created.data["spec"]["selector"]["app"], "legacy", "unknown fields are kept");
    let scale = deployment_configs.get_scale("legacy").await.unwrap();
    assert_eq!(scale.spec.and_then(|spec| spec.replicas), Some(2));

    let [rollouts] = Crd::ArgoRollouts.api_resources().try_into().unwrap();
    let rollouts: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns.name(), &rollouts);
    let rollout: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": { "name": "canary" },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": "canary" } },
            "template": {
                "metadata": { "labels": { "app": "canary" } },
                "spec": { "containers": [{ "name": "app", "image": "registry.k8s.io/pause:3.10" }] },
            },
            "strategy": { "canary": { "steps": [{ "setWeight": 50 }] } },
        },
    }))
    .unwrap();
    rollouts.create(&PostParams::default(), &rollout).await.unwrap();
    let invalid: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": { "name": "invalid" },
        "spec": { "replicas": "two" },
    }))
    .unwrap();
    match rollouts.create(&PostParams::default(), &invalid).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 422, "the upstream schema validates"),
        other => panic!("an invalid Rollout must be refused, got {other:?}"),
    }

    let [classes, pod_statuses] = Crd::SecretProviderClass.api_resources().try_into().unwrap();
    let classes: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns.name(), &classes);
    let class: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "secrets-store.csi.x-k8s.io/v1",
        "kind": "SecretProviderClass",
        "metadata": { "name": "vault" },
        "spec": { "provider": "vault", "parameters": { "objects": "- objectName: password" } },
    }))
    .unwrap();
    classes.create(&PostParams::default(), &class).await.unwrap();
    let pod_statuses: Api<DynamicObject> = Api::namespaced_with(client, ns.name(), &pod_statuses);
    let pod_status: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "secrets-store.csi.x-k8s.io/v1",
        "kind": "SecretProviderClassPodStatus",
        "metadata": { "name": "app-pod-vault" },
        "status": {
            "podName": "app-pod",
            "secretProviderClassName": "vault",
            "mounted": true,
            "objects": [{ "id": "secret/password", "version": "3" }],
        },
    }))
    .unwrap();
    let created = pod_statuses.create(&PostParams::default(), &pod_status).await.unwrap();
    assert_eq!(created.data["status"]["objects"][0]["version"], "3");
}

/// The custom-kinds tests' CRDs keep a whole pod template at the pointer each one is declared
/// with (a pruning schema would drop what reloader writes there), and `AnnotatedWorkload` keeps its
/// map of pod annotations.
#[tokio::test]
async fn the_custom_kinds_keep_their_pod_templates() {
    let plane = ControlPlane::shared().await;
    let _logs = plane.dump_logs_on_panic();
    let crds = [
        Crd::OpenKruiseCloneSet,
        Crd::KedaScaledJob,
        Crd::DeepWorkload,
        Crd::AnnotatedWorkload,
        Crd::ClusterWorkload,
    ];
    plane.install_crds(&crds).await.unwrap();
    let ns = plane.namespace().await;
    let template = json!({
        "metadata": { "labels": { "app": "custom" }, "annotations": { "written": "by reloader" } },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "app",
                "image": "registry.k8s.io/pause:3.10",
                "envFrom": [{ "configMapRef": { "name": "settings" } }],
            }],
        },
    });
    let cases = [
        (
            Crd::OpenKruiseCloneSet,
            json!({ "selector": { "matchLabels": { "app": "custom" } }, "template": template }),
            "/spec/template",
        ),
        (
            Crd::KedaScaledJob,
            json!({
                "jobTargetRef": { "template": template },
                "triggers": [{
                    "type": "cron",
                    "metadata": { "timezone": "UTC", "start": "0 * * * *", "end": "5 * * * *", "desiredReplicas": "1" },
                }],
            }),
            "/spec/jobTargetRef/template",
        ),
        (
            Crd::DeepWorkload,
            json!({ "runtime": { "workers": { "replicas": 2, "podTemplate": template } } }),
            "/spec/runtime/workers/podTemplate",
        ),
        (Crd::ClusterWorkload, json!({ "template": template }), "/spec/template"),
    ];
    for (crd, spec, pointer) in cases {
        let [resource] = crd.api_resources().try_into().unwrap();
        let api: Api<DynamicObject> = match crd {
            Crd::ClusterWorkload => Api::all_with(plane.client(), &resource),
            _ => Api::namespaced_with(plane.client(), ns.name(), &resource),
        };
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": resource.api_version,
            "kind": resource.kind,
            "metadata": { "name": format!("custom-{}", ns.name()) },
            "spec": spec,
        }))
        .unwrap();
        let created = api.create(&PostParams::default(), &object).await.unwrap();
        let kept = serde_json::to_value(&created).unwrap();
        assert_eq!(kept.pointer(pointer), Some(&template), "{crd:?} keeps the pod template at {pointer}");
    }

    let [annotated] = Crd::AnnotatedWorkload.api_resources().try_into().unwrap();
    let annotated: Api<DynamicObject> = Api::namespaced_with(plane.client(), ns.name(), &annotated);
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.reloader.dev/v1",
        "kind": "AnnotatedWorkload",
        "metadata": { "name": "annotated" },
        "spec": { "image": "registry.k8s.io/pause:3.10", "podAnnotations": { "written": "by reloader" } },
    }))
    .unwrap();
    let created = annotated.create(&PostParams::default(), &object).await.unwrap();
    assert_eq!(created.data["spec"]["podAnnotations"]["written"], "by reloader");
}

#[tokio::test]
async fn kube_apiserver_restarts_on_the_same_port_and_data() {
    // A plane of its own: stopping the shared one would break the tests running beside this one.
    let plane = ControlPlane::start(PlaneOptions::api_only()).await.unwrap();
    let _logs = plane.dump_logs_on_panic();
    let client = plane.client();
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let configmap: ConfigMap =
        serde_json::from_value(json!({ "metadata": { "name": "survivor" }, "data": { "key": "value" } }))
            .unwrap();
    configmaps.create(&PostParams::default(), &configmap).await.unwrap();

    plane.stop_apiserver();
    let refused = configmaps.get("survivor").await;
    assert!(refused.is_err(), "no API server, no answer: {refused:?}");

    plane.start_apiserver().await.unwrap();
    // The client made before the restart reconnects to the same URL and finds the same data.
    let survivor = configmaps.get("survivor").await.unwrap();
    assert_eq!(survivor.data.unwrap()["key"], "value");
    let started_twice = std::fs::read_to_string(plane.dir().join("kube-apiserver.log")).unwrap();
    assert!(started_twice.matches("Serving securely on").count() >= 2, "the log shows both starts");
}
