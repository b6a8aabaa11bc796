//! Workloads whose controller never replaces a pod by itself (`updateStrategy: OnDelete`), the
//! progress reloader records on them, its Events and metrics, and reloader started for the test.
//! The annotation keys are spelled out here as the feature documents them, not borrowed from the
//! code under test.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::apps::v1::{DaemonSet, StatefulSet};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use reloader_harness::{NotYet, Reloader, wait_until};
use reloader_tests::fixtures::{
    ANNOTATION_AUTO, Kind, Strategy, TestEnv, WorkloadId, WorkloadSpec, event_occurrences, events_for,
};
use serde::Deserialize;
use serde_json::json;

use super::pods::is_available;

/// Opts a workload in to restart by eviction, with the value [`EVICT`].
pub const RESTART: &str = "reloader.dev/restart";
pub const EVICT: &str = "evict";
/// How long a replacement may take to become Ready (a Go duration).
pub const READY_TIMEOUT: &str = "reloader.dev/ready-timeout";
/// Written by reloader: the restart's progress, JSON.
pub const PROGRESS: &str = "reloader.dev/eviction";

pub const POD_EVICTED: &str = "PodEvicted";
pub const EVICTION_STOPPED: &str = "EvictionStopped";
pub const EVICTED: &str = r#"reloader_evictions_total{result="evicted"}"#;
pub const BLOCKED: &str = r#"reloader_evictions_total{result="blocked"}"#;
pub const FAILED: &str = r#"reloader_evictions_total{result="failed"}"#;
pub const RESTARTS_DONE: &str = r#"reloader_eviction_restarts_total{outcome="done"}"#;
pub const RESTARTS_STOPPED: &str = r#"reloader_eviction_restarts_total{outcome="stopped"}"#;

/// For anything the plane or reloader should do within seconds, on 2 busy cores.
pub const REACTION: Duration = Duration::from_secs(60);
/// Long enough to have seen an eviction that should not happen: the evictor looks at a restart
/// under way every 2 s (docs/behaviour.md §J), so this is three of its looks.
pub const EVICTOR_LOOKS: Duration = Duration::from_secs(6);
/// A node label no fake node carries: a pod asking for it stays Pending.
pub const NO_SUCH_NODE: &str = "reloader-tests/no-such-node";

/// [`PROGRESS`] as the feature documents it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Progress {
    pub target: String,
    pub started_at: i64,
    pub last_eviction_at: i64,
    pub evicted: u32,
    pub state: String,
}

/// A StatefulSet or DaemonSet with `updateStrategy: OnDelete`, `auto` and its env from one
/// ConfigMap: a reload changes its template and no pod, until reloader evicts them.
pub struct OnDelete {
    kind: Kind,
    name: String,
    replicas: i32,
    configmap: String,
    annotations: BTreeMap<String, String>,
}

impl OnDelete {
    pub fn statefulset(name: &str, replicas: i32, configmap: &str) -> Self {
        Self::new(Kind::StatefulSet, name, replicas, configmap)
    }

    /// One pod per fake node.
    pub fn daemonset(name: &str, configmap: &str) -> Self {
        Self::new(Kind::DaemonSet, name, 0, configmap)
    }

    fn new(kind: Kind, name: &str, replicas: i32, configmap: &str) -> Self {
        let annotations = BTreeMap::from([(ANNOTATION_AUTO.to_owned(), "true".to_owned())]);
        Self { kind, name: name.to_owned(), replicas, configmap: configmap.to_owned(), annotations }
    }

    /// `reloader.dev/restart: evict`.
    pub fn evict(self) -> Self {
        self.annotation(RESTART, EVICT)
    }

    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Creates it and waits until its pods run and are Ready; returns it and their number.
    pub async fn create(&self, client: &Client, namespace: &str) -> (WorkloadId, usize) {
        let template =
            WorkloadSpec::new(self.kind, &self.name).env_from_configmap(&self.configmap).template();
        let metadata = json!({ "name": self.name, "annotations": self.annotations });
        let selector = json!({ "matchLabels": { "app": self.name } });
        let post = PostParams::default();
        let desired = match self.kind {
            Kind::StatefulSet => {
                let object: StatefulSet = serde_json::from_value(json!({
                    "metadata": metadata,
                    "spec": {
                        "replicas": self.replicas,
                        "serviceName": self.name,
                        "selector": selector,
                        "template": template,
                        "updateStrategy": { "type": "OnDelete" },
                        // Only the first start is quicker; a lost pod is recreated either way.
                        "podManagementPolicy": "Parallel",
                    },
                }))
                .expect("a StatefulSet manifest");
                Api::namespaced(client.clone(), namespace).create(&post, &object).await.unwrap();
                self.replicas as usize
            }
            _ => {
                let object: DaemonSet = serde_json::from_value(json!({
                    "metadata": metadata,
                    "spec": { "selector": selector, "template": template, "updateStrategy": { "type": "OnDelete" } },
                }))
                .expect("a DaemonSet manifest");
                let api: Api<DaemonSet> = Api::namespaced(client.clone(), namespace);
                api.create(&post, &object).await.unwrap();
                wait_until("the DaemonSet to count its nodes", REACTION, || async {
                    let status = api.get(&self.name).await?.status.unwrap_or_default();
                    match status.desired_number_scheduled {
                        0 => Err(NotYet::because("no node counted yet")),
                        n => Ok(n as usize),
                    }
                })
                .await
                .unwrap()
            }
        };
        wait_pods_available(client, namespace, &self.name, desired).await;
        only_terminating_pods_deleted(client, namespace, &self.name).await;
        let id = WorkloadId { kind: self.kind, namespace: namespace.to_owned(), name: self.name.clone() };
        (id, desired)
    }
}

/// Makes kube-apiserver refuse to delete a pod of `namespace` that is not terminating (unless the
/// namespace is going), and waits until it does (`app`'s pods exist). KWOK deletes a terminating
/// pod by name, with no uid precondition, a moment after it saw it terminating; when the
/// StatefulSet controller had recreated the pod under that name in that moment, KWOK deleted the
/// new one, a deletion no one in the test asked for. Nothing in these tests deletes a running
/// pod: reloader evicts, and an eviction deletes the pod without a DELETE request.
async fn only_terminating_pods_deleted(client: &Client, namespace: &str, app: &str) {
    let name = format!("reloader-tests-terminating-only-{namespace}");
    let policy: ValidatingAdmissionPolicy = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": { "resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"], "resources": ["pods"],
            }] },
            "validations": [{
                "expression":
                    "has(oldObject.metadata.deletionTimestamp) || has(namespaceObject.metadata.deletionTimestamp)",
                "message": "only a terminating pod may be deleted here (reloader's restart tests)",
            }],
        },
    }))
    .expect("a ValidatingAdmissionPolicy");
    let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": { "namespaceSelector": {
                "matchLabels": { "kubernetes.io/metadata.name": namespace },
            } },
        },
    }))
    .expect("a ValidatingAdmissionPolicyBinding");
    // Idempotent: several workloads of one test share the namespace.
    let created = |result: Result<(), kube::Error>| match result {
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        other => other.unwrap_or_else(|error| panic!("creating {name}: {error}")),
    };
    created(Api::all(client.clone()).create(&PostParams::default(), &policy).await.map(drop));
    created(Api::all(client.clone()).create(&PostParams::default(), &binding).await.map(drop));
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector = format!("app={app}");
    wait_until(&format!("{namespace} to refuse deleting a running pod"), REACTION, || async {
        let listed = pods.list(&ListParams::default().labels(&selector)).await?;
        let pod = listed.items.first().and_then(|pod| pod.metadata.name.clone()).unwrap_or_default();
        let dry_run = DeleteParams { dry_run: true, ..DeleteParams::default() };
        match pods.delete(&pod, &dry_run).await {
            Err(kube::Error::Api(refused)) if refused.message.contains("only a terminating pod") => Ok(()),
            other => Err(NotYet::because(format!("a dry-run delete of {pod}: {:?}", other.map(drop)))),
        }
    })
    .await
    .unwrap_or_else(|error| panic!("{error}"));
}

/// Waits until `count` pods labelled `app=<app>` exist, every one Ready and none terminating.
pub async fn wait_pods_available(client: &Client, namespace: &str, app: &str, count: usize) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector = format!("app={app}");
    wait_until(&format!("{count} Ready pods of {app}"), REACTION, || async {
        let listed = pods.list(&ListParams::default().labels(&selector)).await?.items;
        let available = listed.iter().filter(|pod| is_available(pod)).count();
        if available == count && listed.len() == count {
            Ok(())
        } else {
            Err(NotYet::because(format!("{available} Ready of {} pods", listed.len())))
        }
    })
    .await
    .unwrap_or_else(|error| panic!("{error}"));
}

/// reloader for the test's namespace, with `strategy` and `extra_args`.
pub async fn start_reloader(env: &TestEnv<'_>, strategy: Strategy, extra_args: &[&str]) -> Reloader {
    env.reloader_builder()
        .name(format!("reloader-{}", env.ns.name()))
        .arg(strategy.flag())
        .args(extra_args.iter().copied())
        .start()
        .await
        .expect("starting reloader")
}

/// The progress recorded on the workload, if any.
pub async fn progress(client: &Client, workload: &WorkloadId) -> Option<Progress> {
    let observed = workload.observe(client).await.unwrap_or_else(|e| panic!("reading {workload}: {e}"));
    let text = observed.annotations.get(PROGRESS)?;
    Some(serde_json::from_str(text).unwrap_or_else(|e| panic!("{workload}: {PROGRESS}={text:?}: {e}")))
}

/// Waits until the recorded progress is in `state`; returns it.
pub async fn wait_for_progress(client: &Client, workload: &WorkloadId, state: &str) -> Progress {
    wait_until(&format!("{workload}'s restart to be {state}"), REACTION, || async {
        match progress(client, workload).await {
            Some(progress) if progress.state == state => Ok(progress),
            other => Err(NotYet::because(format!("progress {other:?}"))),
        }
    })
    .await
    .unwrap_or_else(|error| panic!("{error}"))
}

/// The workload's core/v1 Events with `reason`.
pub async fn events_with(client: &Client, workload: &WorkloadId, reason: &str) -> Vec<Event> {
    let events = events_for(client, &workload.namespace, workload.kind, &workload.name).await.unwrap();
    events.into_iter().filter(|event| event.reason.as_deref() == Some(reason)).collect()
}

/// The messages of the workload's Events with `reason`, each as often as it happened, sorted.
pub async fn event_messages(client: &Client, workload: &WorkloadId, reason: &str) -> Vec<String> {
    let mut messages = Vec::new();
    for event in events_with(client, workload, reason).await {
        let message = event.message.clone().unwrap_or_default();
        messages.extend(std::iter::repeat_n(message, event_occurrences(&event) as usize));
    }
    messages.sort();
    messages
}

/// Waits until the workload has `count` Events with `reason` (their delivery trails the work by a
/// moment); returns their messages, sorted.
pub async fn wait_for_events(
    client: &Client,
    workload: &WorkloadId,
    reason: &str,
    count: usize,
) -> Vec<String> {
    wait_until(&format!("{count} {reason} Events on {workload}"), REACTION, || async {
        let messages = event_messages(client, workload, reason).await;
        if messages.len() >= count { Ok(messages) } else { Err(NotYet::because(format!("{messages:?}"))) }
    })
    .await
    .unwrap_or_else(|error| panic!("{error}"))
}

/// The `PodEvicted` message for the `evicted`th eviction, of pod `pod`.
pub fn evicted_message(pod: &str, evicted: u32) -> String {
    format!("Evicted pod {pod} to restart it with the reload ({evicted} evicted so far)")
}

/// One sample of reloader's `/metrics`; 0 when absent (a counter never incremented).
pub async fn metric(reloader: &Reloader, sample: &str) -> f64 {
    reloader.metric(sample).await.expect("reading /metrics").unwrap_or(0.0)
}

/// How many evictions kube-apiserver refused with 429 since it started, as it counts them
/// (`apiserver_request_total`): a disruption budget's refusals, whoever asked.
pub async fn evictions_refused(client: &Client) -> u64 {
    let request = axum::http::Request::get("/metrics").body(Vec::new()).expect("a request");
    let metrics = client.request_text(request).await.expect("kube-apiserver's /metrics");
    let refused = metrics.lines().filter(|line| {
        line.starts_with("apiserver_request_total{")
            && line.contains(r#"code="429""#)
            && line.contains(r#"resource="pods""#)
            && line.contains(r#"subresource="eviction""#)
    });
    refused.filter_map(|line| line.rsplit(' ').next()?.trim().parse::<f64>().ok()).map(|n| n as u64).sum()
}

/// 16 lowercase hex digits.
pub fn is_digest(text: &str) -> bool {
    text.len() == 16 && text.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
}
