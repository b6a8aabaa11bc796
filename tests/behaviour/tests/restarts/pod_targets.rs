//! Pods as reload targets (docs/behaviour.md §J, J76–J78): pods labelled
//! `reloader.dev/reload-pod: "true"` carry the reload annotations themselves, as an operator's
//! pods do when there is no workload reloader could write. Here the owner is a ReplicaSet
//! created directly (kube-controller-manager's ReplicaSet controller replaces an evicted pod under
//! a new name; KWOK makes it Ready), and the binary runs with `--reload-pods`.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use reloader_harness::{NotYet, wait_until};
use reloader_tests::fixtures::{Kind, ResourceRef, Strategy, TestEnv, WorkloadSpec, event_occurrences};
use serde_json::json;

use super::ha_support::{Timings, start_replicas, wait_for_holder, wait_for_single_leader};
use super::pods::{History, PodWatch, is_available};
use super::support::{
    BLOCKED, EVICTED, EVICTOR_LOOKS, FAILED, POD_EVICTED, REACTION, RESTARTS_DONE, evicted_message, metric,
    start_reloader, wait_pods_available,
};

const FLAG: &str = "--reload-pods";
/// The label that makes a pod a reload target, as documented.
const POD_LABEL: &str = "reloader.dev/reload-pod";
const RELOAD: &str = "configmap.reloader.stakater.com/reload";
const NO_OWNER: &str = r#"reloader_evictions_total{result="no_owner"}"#;
const POD_NOT_EVICTED: &str = "PodNotEvicted";

/// A pod template of `app` with its env from `configmap`, labelled a reload target or not, and
/// annotated to reload for that ConfigMap.
fn annotated_template(app: &str, configmap: &str, labelled: bool) -> serde_json::Value {
    let mut template = serde_json::to_value(
        WorkloadSpec::new(Kind::Deployment, app).env_from_configmap(configmap).template(),
    )
    .expect("a pod template");
    if labelled {
        template["metadata"]["labels"][POD_LABEL] = json!("true");
    }
    template["metadata"]["annotations"][RELOAD] = json!(configmap);
    template
}

/// A ReplicaSet of `replicas` with [`annotated_template`]; waits until its pods are Ready.
async fn replicaset(
    client: &Client,
    namespace: &str,
    app: &str,
    replicas: usize,
    configmap: &str,
    labelled: bool,
) -> ReplicaSet {
    let object: ReplicaSet = serde_json::from_value(json!({
        "metadata": { "name": app },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": app } },
            "template": annotated_template(app, configmap, labelled),
        },
    }))
    .expect("a ReplicaSet manifest");
    let created =
        Api::namespaced(client.clone(), namespace).create(&PostParams::default(), &object).await.unwrap();
    wait_pods_available(client, namespace, app, replicas).await;
    created
}

/// The pod's core/v1 Events with `reason`: their messages, each as often as it happened.
async fn pod_events(client: &Client, namespace: &str, pod: &str, reason: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let selector = format!("involvedObject.kind=Pod,involvedObject.name={pod},reason={reason}");
    let listed = events.list(&ListParams::default().fields(&selector)).await.unwrap().items;
    let mut messages = Vec::new();
    for event in listed {
        assert_eq!(event.type_.as_deref(), Some(if reason == POD_EVICTED { "Normal" } else { "Warning" }));
        let message = event.message.clone().unwrap_or_default();
        messages.extend(std::iter::repeat_n(message, event_occurrences(&event) as usize));
    }
    messages
}

/// Waits until every original pod (uid → name) is replaced by a Ready one, then checks that each
/// original was evicted exactly once and nothing else went, even a little later (any eviction of
/// a replacement would come within the evictor's next looks); returns the history then.
async fn replaced_once(pods: &PodWatch, originals: &BTreeMap<String, String>) -> History {
    let history = pods
        .wait_for("every labelled pod replaced", REACTION, |h| {
            let live = h.live_names();
            let ready = h.live.values().filter(|pod| is_available(pod)).count();
            let replaced = !live.keys().any(|uid| originals.contains_key(uid));
            if replaced && live.len() == originals.len() && ready == live.len() {
                Ok(())
            } else {
                Err(format!("{live:?}, {ready} Ready"))
            }
        })
        .await;
    tokio::time::sleep(EVICTOR_LOOKS).await;
    assert_eq!(pods.history().evicted, history.evicted, "a replacement was evicted");
    let evicted: BTreeMap<String, String> = history.evicted.iter().cloned().collect();
    assert_eq!(&evicted, originals, "each original pod evicted");
    assert_eq!(history.evicted.len(), originals.len(), "once: {:?}", history.evicted);
    assert_eq!(history.deleted, history.evicted, "every pod that went was evicted");
    history
}

/// J76: a ConfigMap change evicts each labelled pod that reloads for it once, one at a time (a
/// replacement Ready before the next eviction), and never a replacement; the ReplicaSet itself
/// is not written. Pods with the same annotation but without the label are not even watched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn j76_labelled_pods_of_a_replicaset_are_evicted_one_at_a_time() {
    let env = TestEnv::new().await;
    let TestEnv { ns, client, resources, .. } = &env;
    let settings = ResourceRef::configmap("settings");
    resources.create(&settings, &[("level", "1")]).await.unwrap();
    let cache = replicaset(client, ns.name(), "cache", 3, "settings", true).await;
    replicaset(client, ns.name(), "unlabelled", 2, "settings", false).await;
    let pods = PodWatch::start(client, ns.name(), "cache", 3).await;
    let others = PodWatch::start(client, ns.name(), "unlabelled", 2).await;
    let originals = pods.history().live_names();
    let other_originals = others.history().live_names();
    let reloader = start_reloader(&env, Strategy::EnvVars, &[FLAG]).await;

    resources.update_data(&settings, &[("level", "2")]).await.unwrap();
    let history = replaced_once(&pods, &originals).await;
    assert_eq!(history.most_unavailable, 1, "pods unavailable at the worst moment: {}", history.worst_moment);
    for (n, (_, pod)) in history.evicted.iter().enumerate() {
        let messages = wait_until(&format!("the PodEvicted Event of {pod}"), REACTION, || async {
            let messages = pod_events(client, ns.name(), pod, POD_EVICTED).await;
            if messages.is_empty() { Err(NotYet::because("none yet")) } else { Ok(messages) }
        })
        .await
        .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(messages, [evicted_message(pod, n as u32 + 1)]);
    }
    assert_eq!(metric(&reloader, EVICTED).await, 3.0);
    assert_eq!(metric(&reloader, BLOCKED).await + metric(&reloader, FAILED).await, 0.0);
    assert_eq!(metric(&reloader, RESTARTS_DONE).await, 1.0);
    // Nothing was written to the ReplicaSet: its template (and so its generation) is as created.
    let now: ReplicaSet = Api::namespaced(client.clone(), ns.name()).get("cache").await.unwrap();
    assert_eq!(now.metadata.generation, cache.metadata.generation);
    let other_history = others.history();
    assert!(other_history.deleted.is_empty(), "an unlabelled pod was evicted: {:?}", other_history.deleted);
    assert_eq!(other_history.live_names(), other_originals);
}

/// J77: a labelled pod with no owner is never deleted (nothing would recreate it): a change it
/// reloads for gives it a Warning `PodNotEvicted` Event naming the change, counted
/// `reloader_evictions_total{result="no_owner"}`; the next change says so again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn j77_a_labelled_pod_without_an_owner_is_not_deleted() {
    let env = TestEnv::new().await;
    let TestEnv { ns, client, resources, .. } = &env;
    let settings = ResourceRef::configmap("settings");
    resources.create(&settings, &[("level", "1")]).await.unwrap();
    let template = annotated_template("solo", "settings", true);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "solo", "labels": template["metadata"]["labels"], "annotations": template["metadata"]["annotations"] },
        "spec": template["spec"],
    }))
    .expect("a pod manifest");
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns.name());
    let created = pods.create(&PostParams::default(), &pod).await.unwrap();
    wait_pods_available(client, ns.name(), "solo", 1).await;
    let reloader = start_reloader(&env, Strategy::EnvVars, &[FLAG]).await;

    for (change, level) in [(1, "2"), (2, "3")] {
        resources.update_data(&settings, &[("level", level)]).await.unwrap();
        let messages = wait_until(&format!("PodNotEvicted Event number {change}"), REACTION, || async {
            let messages = pod_events(client, ns.name(), "solo", POD_NOT_EVICTED).await;
            if messages.len() >= change {
                Ok(messages)
            } else {
                Err(NotYet::because(format!("{messages:?}")))
            }
        })
        .await
        .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(messages.len(), change, "one Event per change: {messages:?}");
        let message = &messages[0];
        assert!(message.contains("no controller owner"), "{message}");
        assert!(message.contains(&format!("{}/settings", ns.name())), "names the change: {message}");
    }
    tokio::time::sleep(EVICTOR_LOOKS).await;
    let now = pods.get("solo").await.unwrap();
    assert_eq!(now.metadata.uid, created.metadata.uid, "the same pod");
    assert!(now.metadata.deletion_timestamp.is_none(), "not deleted");
    assert_eq!(metric(&reloader, NO_OWNER).await, 2.0);
    assert_eq!(metric(&reloader, EVICTED).await, 0.0);
}

/// J78: the leader of two HA replicas is killed (SIGKILL) right after its first eviction of a
/// four-pod ReplicaSet's labelled pods; the standby, which saw the same change, takes the Lease
/// and evicts the other three: every original pod evicted once, no replacement evicted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn j78_a_new_leader_evicts_the_pods_still_due() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let settings = ResourceRef::configmap("settings");
    resources.create(&settings, &[("level", "1")]).await.unwrap();
    replicaset(client, ns.name(), "cache", 4, "settings", true).await;
    let pods = PodWatch::start(client, ns.name(), "cache", 4).await;
    let originals = pods.history().live_names();
    let names = ["r1", "r2"];
    let mut replicas = start_replicas(plane, ns.name(), &names, Timings::FAST, &[FLAG]).await;
    let all: Vec<_> = replicas.iter().collect();
    let first = wait_for_single_leader(client, ns.name(), &all, &names, REACTION).await.unwrap();
    let standby = 1 - first;

    resources.update_data(&settings, &[("level", "2")]).await.unwrap();
    // Killed once the first eviction shows, within the 2 s the evictor then waits before it
    // looks again (and before that pod's replacement is Ready).
    pods.wait_for("the first eviction", REACTION, |h| {
        if h.evicted.is_empty() { Err("none yet".into()) } else { Ok(()) }
    })
    .await;
    replicas[first].kill();
    assert_eq!(pods.history().evicted.len(), 1, "the old leader was to be killed after its first eviction");
    wait_for_holder(client, ns.name(), "the standby to lead", REACTION, |h| h == names[standby])
        .await
        .unwrap();
    replaced_once(&pods, &originals).await;
    assert_eq!(metric(&replicas[standby], EVICTED).await, 3.0, "the new leader evicted the other three");
    assert_eq!(metric(&replicas[standby], RESTARTS_DONE).await, 1.0);
}
