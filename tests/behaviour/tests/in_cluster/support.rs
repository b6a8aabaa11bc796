//! The suite's cluster: a plane in its own namespaces, one real node, helm and kubectl on it, and
//! what the steps ask of real pods (their readiness, what they printed, who leads).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::Client;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use reloader_harness::{ControlPlane, NotYet, RealNode, wait_until};
use reloader_tests::chart::Helm;
use serde_json::{Value, json};

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The chart's image (values.yaml image.repository, tag = appVersion) as `hack/image` names it.
pub const IMAGE_REPOSITORY: &str = "ghcr.io/reloader/reloader";
/// The Lease the controller elects its leader with (Stakater's name).
pub const LEASE_NAME: &str = "stakater-reloader-lock";
/// Pods really start here: image unpacking, probes' initial delays, a busy 2-core machine.
pub const POD_PATIENCE: Duration = Duration::from_secs(240);
pub const RELOAD_PATIENCE: Duration = Duration::from_secs(120);

/// The chart's `webhook:` values here. The plane's API server runs without an endpoint reconciler
/// (no `kubernetes` EndpointSlice to look up), so the address it connects from, the host's, is
/// given; the node's CNI enforces no NetworkPolicy, so the rendered one is not exercised here.
pub fn webhook_enabled() -> Value {
    json!({ "enabled": true, "networkPolicy": { "from": [{ "ipBlock": { "cidr": "127.0.0.1/32" } }] } })
}

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| value == "true")
}

/// The plane, its node, and clients.
pub struct Cluster {
    pub plane: ControlPlane,
    pub node: RealNode,
    pub helm: Helm,
}

impl Cluster {
    pub fn client(&self) -> Client {
        self.plane.client()
    }

    pub async fn namespace(&self, name: &str) {
        create_namespace(&self.client(), name).await;
    }

    /// `helm upgrade --install` of the chart, failing the test on an error. Returns at once (no
    /// `--wait`): [`Self::rolled_out`] waits.
    pub fn helm_install(&self, release: &str, namespace: &str, values: &Value) -> String {
        self.helm
            .upgrade_install(release, namespace, values, self.plane.kubeconfig_path())
            .unwrap_or_else(|error| panic!("helm upgrade --install {release}: {error}"))
    }

    /// The pinned kubectl with the admin kubeconfig.
    pub fn kubectl(&self, args: &[&str]) -> String {
        let output = Command::new(&self.plane.binaries().kubectl)
            .arg(format!("--kubeconfig={}", self.plane.kubeconfig_path().display()))
            .args(args)
            .output()
            .unwrap_or_else(|error| panic!("kubectl {args:?}: {error}"));
        assert!(
            output.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Waits until the Deployment matching `selector` in `namespace` has rolled out its current
    /// spec: observed, every replica updated and available, no old one left.
    pub async fn rolled_out(&self, namespace: &str, selector: &str) {
        let deployments: Api<Deployment> = Api::namespaced(self.client(), namespace);
        let list = ListParams::default().labels(selector);
        wait_until(&format!("the Deployment {selector} in {namespace} rolled out"), POD_PATIENCE, || async {
            let found = deployments.list(&list).await?.items;
            let [deployment] = found.as_slice() else {
                return Err(NotYet::because(format!("{} Deployments", found.len())));
            };
            let wanted = deployment.spec.as_ref().and_then(|spec| spec.replicas).unwrap_or(1);
            let status = deployment.status.clone().unwrap_or_default();
            let observed = status.observed_generation >= deployment.metadata.generation;
            let done = observed
                && status.updated_replicas == Some(wanted)
                && status.replicas == Some(wanted)
                && status.available_replicas == Some(wanted);
            if done { Ok(()) } else { Err(NotYet::because(format!("{status:?}"))) }
        })
        .await
        .unwrap_or_else(|error| panic!("{error}\n{}", self.node_log_tail()));
    }

    /// Waits until `count` pods match `selector` in `namespace`, all Running and Ready and none
    /// terminating; returns them.
    pub async fn ready_pods(&self, namespace: &str, selector: &str, count: usize) -> Vec<Pod> {
        let pods: Api<Pod> = Api::namespaced(self.client(), namespace);
        let list = ListParams::default().labels(selector);
        wait_until(&format!("{count} Ready pods {selector} in {namespace}"), POD_PATIENCE, || async {
            let found = pods.list(&list).await?.items;
            let live: Vec<Pod> =
                found.into_iter().filter(|pod| pod.metadata.deletion_timestamp.is_none()).collect();
            let ready = live.iter().filter(|pod| is_ready(pod)).count();
            if live.len() == count && ready == count {
                Ok(live)
            } else {
                Err(NotYet::because(format!("{} pods, {ready} Ready: {}", live.len(), describe(&live))))
            }
        })
        .await
        .unwrap_or_else(|error| panic!("{error}\n{}", self.node_log_tail()))
    }

    /// Waits until a Ready pod matching `selector` has printed `line` from `container`; returns
    /// its name.
    pub async fn pod_printing(&self, namespace: &str, selector: &str, container: &str, line: &str) -> Pod {
        let pods: Api<Pod> = Api::namespaced(self.client(), namespace);
        let list = ListParams::default().labels(selector);
        wait_until(&format!("a Ready pod {selector} printing {line:?}"), POD_PATIENCE, || async {
            let found = pods.list(&list).await?.items;
            let mut seen = Vec::new();
            for pod in found {
                let name = pod.metadata.name.clone().unwrap_or_default();
                let printed = self.node.container_output(namespace, &name, container);
                if is_ready(&pod)
                    && pod.metadata.deletion_timestamp.is_none()
                    && printed.iter().any(|l| l == line)
                {
                    return Ok(pod);
                }
                seen.push(format!("{name}: {:?}", printed.iter().rev().take(3).collect::<Vec<_>>()));
            }
            Err(NotYet::because(seen.join("; ")))
        })
        .await
        .unwrap_or_else(|error| panic!("{error}\n{}", self.node_log_tail()))
    }

    /// Sets `key` of ConfigMap `namespace/name` to `value`, creating it when missing.
    pub async fn put_config_map(&self, namespace: &str, name: &str, key: &str, value: &str) {
        let config_maps: Api<ConfigMap> = Api::namespaced(self.client(), namespace);
        let body = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": name },
            "data": { key: value },
        });
        config_maps
            .patch(name, &PatchParams::apply("in-cluster-test").force(), &Patch::Apply(&body))
            .await
            .unwrap_or_else(|error| panic!("applying ConfigMap {namespace}/{name}: {error}"));
    }

    /// The Deployment's `metadata.generation`: one more for each write to its spec.
    pub async fn generation(&self, namespace: &str, name: &str) -> i64 {
        let deployments: Api<Deployment> = Api::namespaced(self.client(), namespace);
        let deployment =
            deployments.get(name).await.unwrap_or_else(|error| panic!("reading {name}: {error}"));
        deployment.metadata.generation.unwrap_or_default()
    }

    /// Waits until Deployment `namespace/name`'s generation reaches `at_least` (a write landed).
    pub async fn wait_for_generation(&self, namespace: &str, name: &str, at_least: i64) {
        wait_until(&format!("{name} written (generation {at_least})"), RELOAD_PATIENCE, || async {
            let generation = self.generation(namespace, name).await;
            if generation >= at_least {
                Ok(())
            } else {
                Err(NotYet::because(format!("generation {generation}")))
            }
        })
        .await
        .unwrap_or_else(|error| panic!("{error}\n{}", self.node_log_tail()));
    }

    /// Runs the test app as Deployment `namespace/name` (annotated `auto`), printing `greeting`
    /// from a ConfigMap of the same name, and waits until a pod printed it.
    pub async fn run_app(&self, namespace: &str, name: &str, greeting: &str) {
        self.put_config_map(namespace, name, "greeting", greeting).await;
        let annotations = json!({ "reloader.stakater.com/auto": "true" });
        apply(&self.client(), namespace, &app_deployment(name, &self.node.app_image(), name, annotations))
            .await;
        self.pod_printing(namespace, &format!("app={name}"), "app", &format!("env GREETING={greeting}"))
            .await;
    }

    /// The Lease's holder (a pod name), if any.
    pub async fn leader(&self, namespace: &str) -> Option<String> {
        let leases: Api<Lease> = Api::namespaced(self.client(), namespace);
        leases
            .get_opt(LEASE_NAME)
            .await
            .ok()
            .flatten()?
            .spec?
            .holder_identity
            .filter(|holder| !holder.is_empty())
    }

    /// The end of the node's component logs, for a failure message.
    pub fn node_log_tail(&self) -> String {
        let mut text = String::new();
        for (name, path) in self.node.logs() {
            let tail = reloader_harness::process::tail(&path, 15).unwrap_or_default();
            text.push_str(&format!("--- {name} ({})\n{}\n", path.display(), tail.join("\n")));
        }
        text
    }
}

/// Creates namespace `name` unless it exists.
pub async fn create_namespace(client: &Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = Namespace {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        ..Default::default()
    };
    match namespaces.create(&PostParams::default(), &namespace).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => panic!("creating namespace {name}: {error}"),
    }
}

pub fn is_ready(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    status.and_then(|status| status.phase.as_deref()) == Some("Running")
        && status.and_then(|status| status.conditions.as_ref()).is_some_and(|conditions| {
            conditions.iter().any(|condition| condition.type_ == "Ready" && condition.status == "True")
        })
}

fn describe(pods: &[Pod]) -> String {
    pods.iter()
        .map(|pod| {
            let status = pod.status.as_ref();
            let waiting: Vec<String> = status
                .and_then(|status| status.container_statuses.as_ref())
                .into_iter()
                .flatten()
                .filter_map(|container| {
                    let waiting = container.state.as_ref()?.waiting.as_ref()?;
                    Some(format!(
                        "{} {}",
                        waiting.reason.clone().unwrap_or_default(),
                        waiting.message.clone().unwrap_or_default()
                    ))
                })
                .collect();
            format!(
                "{} {} {}",
                pod.metadata.name.clone().unwrap_or_default(),
                status.and_then(|status| status.phase.clone()).unwrap_or_default(),
                waiting.join(",")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The restart count of every container of `pod`.
pub fn restarts(pod: &Pod) -> BTreeMap<String, i32> {
    pod.status
        .as_ref()
        .and_then(|status| status.container_statuses.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|container| (container.name, container.restart_count))
        .collect()
}

/// A Deployment of the test app (`node-tool app`) printing `GREETING` from ConfigMap `config_map`,
/// annotated with `annotations`.
pub fn app_deployment(name: &str, image: &str, config_map: &str, annotations: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": name, "annotations": annotations },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "securityContext": { "runAsNonRoot": true, "runAsUser": 65534 },
                    "containers": [{
                        "name": "app",
                        "image": image,
                        "imagePullPolicy": "IfNotPresent",
                        "env": [
                            { "name": "APP_PRINT_ENV", "value": "GREETING" },
                            { "name": "GREETING", "valueFrom": { "configMapKeyRef": { "name": config_map, "key": "greeting" } } },
                        ],
                        "readinessProbe": { "httpGet": { "path": "/-/ready", "port": 9090 }, "periodSeconds": 1 },
                    }],
                },
            },
        },
    })
}

/// Applies `object` (server-side, as the test's field manager) into `namespace`.
pub async fn apply(client: &Client, namespace: &str, object: &Value) {
    let kind = object["kind"].as_str().expect("a kind");
    let name = object["metadata"]["name"].as_str().expect("a name");
    let params = PatchParams::apply("in-cluster-test").force();
    let result = match kind {
        "Deployment" => Api::<Deployment>::namespaced(client.clone(), namespace)
            .patch(name, &params, &Patch::Apply(object))
            .await
            .map(drop),
        other => panic!("apply: no API for {other}"),
    };
    result.unwrap_or_else(|error| panic!("applying {kind} {namespace}/{name}: {error}"));
}
