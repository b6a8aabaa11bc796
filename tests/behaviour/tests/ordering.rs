//! docs/behaviour.md §G on the real control plane: two watches give no order between a
//! workload's ADDED event and its ConfigMap's or Secret's MODIFIED event, so reloader can meet the
//! change before the workload. For every rolling kind, 50 workloads are each created and their
//! resource changed a few milliseconds later (one request each, several pairs in flight at
//! once, as one `kubectl apply` of many objects does): every one must reload exactly once. And 50
//! the other way round, the resource changed first and the workload created just after: none may
//! reload for that change.
//!
//! Build the binary first: `cargo build -p reloader-cli`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use reloader_harness::{NotYet, wait_until};
use reloader_tests::fixtures::*;
use serde_json::json;

const ROUNDS: usize = 50;
/// Pairs in flight at once.
const IN_FLIGHT: usize = 8;
const RELOAD_TIMEOUT: Duration = Duration::from_secs(180);
const OLD: &str = "v1";
const NEW: &str = "v2";

/// Which of the two requests of a pair goes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    /// Create the workload, then change its resource: it must reload.
    WorkloadFirst,
    /// Change the resource, then create the workload: it must not reload.
    ChangeFirst,
}

#[derive(Debug, Clone)]
struct Pair {
    order: Order,
    workload: WorkloadSpec,
    resource: ResourceRef,
}

fn pairs() -> Vec<Pair> {
    let mut pairs = Vec::new();
    for kind in Kind::ROLLING {
        for i in 0..ROUNDS {
            for (order, tag) in [(Order::WorkloadFirst, "w"), (Order::ChangeFirst, "c")] {
                let name = format!("{}-{tag}{i}", kind.short());
                // Half ConfigMaps, half Secrets, each named in the explicit annotation and used
                // through envFrom, as in the `kubectl apply` that lost changes.
                let (resource, spec) = if i % 2 == 0 {
                    let resource = ResourceRef::configmap(format!("{name}-res"));
                    let spec = WorkloadSpec::new(kind, &name)
                        .metadata_annotation(ANNOTATION_CONFIGMAP_RELOAD, &resource.name)
                        .env_from_configmap(&resource.name);
                    (resource, spec)
                } else {
                    let resource = ResourceRef::secret(format!("{name}-res"));
                    let spec = WorkloadSpec::new(kind, &name)
                        .metadata_annotation(ANNOTATION_SECRET_RELOAD, &resource.name)
                        .env_from_secret(&resource.name);
                    (resource, spec)
                };
                pairs.push(Pair { order, workload: spec.without_pods(), resource });
            }
        }
    }
    pairs
}

/// The data change, as one request (a GET and a PUT would widen the gap between the two).
async fn change(client: &Client, namespace: &str, resource: &ResourceRef) {
    let params = PatchParams::default();
    let result = match resource.kind {
        ResourceKind::Secret => {
            let patch = json!({ "stringData": { "key": NEW } });
            let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
            api.patch(&resource.name, &params, &Patch::Merge(&patch)).await.map(drop)
        }
        _ => {
            let patch = json!({ "data": { "key": NEW } });
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
            api.patch(&resource.name, &params, &Patch::Merge(&patch)).await.map(drop)
        }
    };
    result.unwrap_or_else(|error| panic!("changing {resource}: {error}"));
}

async fn play(client: &Client, namespace: &str, pair: &Pair) {
    let create = || async {
        pair.workload
            .create(client, namespace)
            .await
            .unwrap_or_else(|error| panic!("creating {}: {error}", pair.workload.name()))
    };
    match pair.order {
        Order::WorkloadFirst => {
            create().await;
            change(client, namespace, &pair.resource).await;
        }
        Order::ChangeFirst => {
            change(client, namespace, &pair.resource).await;
            create().await;
        }
    }
}

fn new_hash(resource: &ResourceRef) -> String {
    match resource.kind {
        ResourceKind::Secret => {
            stakater_hash_secret(&BTreeMap::from([("key".to_owned(), NEW.as_bytes().to_vec())]))
        }
        _ => stakater_hash_configmap(&BTreeMap::from([("key".to_owned(), NEW.to_owned())])),
    }
}

/// What is wrong with `pair`'s workload now (`None`: as expected). A reload writes the marker
/// for the new hash once, so the generation goes from 1 to 2 and no further.
fn problem(pair: &Pair, observed: Option<&Observed>) -> Option<String> {
    let name = pair.workload.name();
    let Some(observed) = observed else { return Some(format!("{name}: not found")) };
    let marker = observed.marker(&pair.resource, Strategy::EnvVars);
    match pair.order {
        Order::WorkloadFirst => {
            let wanted = new_hash(&pair.resource);
            match marker {
                Some(marker) if marker.value == wanted && observed.generation == Some(2) => None,
                other => Some(format!(
                    "{name}: wanted one reload for {} ({wanted}), found marker {other:?} at generation {:?}",
                    pair.resource, observed.generation
                )),
            }
        }
        Order::ChangeFirst => match marker {
            None if observed.generation == Some(1) => None,
            other => Some(format!(
                "{name}: created after {} changed, yet marker {other:?} at generation {:?}",
                pair.resource, observed.generation
            )),
        },
    }
}

/// Every pair's problem, reading each kind with one LIST.
async fn problems(client: &Client, namespace: &str, pairs: &[Pair], order: Order) -> Vec<String> {
    let mut by_kind: BTreeMap<Kind, BTreeMap<String, Observed>> = BTreeMap::new();
    for kind in Kind::ROLLING {
        let listed = list_observed(client, namespace, kind).await.expect("listing workloads");
        by_kind.insert(kind, listed);
    }
    pairs
        .iter()
        .filter(|pair| pair.order == order)
        .filter_map(|pair| {
            let observed = by_kind.get(&pair.workload.kind()).and_then(|all| all.get(pair.workload.name()));
            problem(pair, observed)
        })
        .collect()
}

#[tokio::test]
async fn a_change_met_before_the_workload_reloads_it_and_one_made_before_it_does_not() {
    let env = TestEnv::with_crds().await;
    let TestEnv { client, resources, ns, .. } = &env;
    let namespace = ns.name();
    let pairs = pairs();
    futures::stream::iter(&pairs)
        .for_each_concurrent(IN_FLIGHT, |pair| async move {
            resources
                .create(&pair.resource, &[("key", OLD)])
                .await
                .unwrap_or_else(|error| panic!("creating {}: {error}", pair.resource));
        })
        .await;
    let reloader = env.reloader(Strategy::EnvVars, &[]).await;

    let started = Instant::now();
    futures::stream::iter(&pairs).for_each_concurrent(IN_FLIGHT, |pair| play(client, namespace, pair)).await;
    let played = started.elapsed();

    let settled =
        wait_until("every workload created before its change to reload", RELOAD_TIMEOUT, || async {
            let left = problems(client, namespace, &pairs, Order::WorkloadFirst).await;
            if left.is_empty() {
                Ok(())
            } else {
                Err(NotYet::because(format!("{} left, e.g. {}", left.len(), left[0])))
            }
        })
        .await;
    if let Err(error) = settled {
        let left = problems(client, namespace, &pairs, Order::WorkloadFirst).await;
        panic!("{error}\n  {}", left.join("\n  "));
    }
    let latency = started.elapsed().saturating_sub(played);

    tokio::time::sleep(negative_wait(latency)).await;
    let mut wrong = problems(client, namespace, &pairs, Order::ChangeFirst).await;
    // And nothing more happened to the ones that reloaded (a second write would show here).
    wrong.extend(problems(client, namespace, &pairs, Order::WorkloadFirst).await);
    assert!(wrong.is_empty(), "{} workload(s) wrong:\n  {}", wrong.len(), wrong.join("\n  "));

    // How often the race of the two watches went the other way this time (it varies per run).
    let replays =
        reloader.log_text().lines().filter(|l| l.contains("a change met before the workload")).count();
    eprintln!(
        "{} pairs played in {played:?}; reloads settled {latency:?} later; {replays} change(s) met before their workload",
        pairs.len()
    );
}
