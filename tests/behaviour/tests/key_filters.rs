//! Key filters (docs/beyond-stakater.md §10) on the real control plane, under both strategies:
//! one shared ConfigMap read differently by several Deployments, and a Secret.
//!
//! - `plain` (no filter) reloads for any change with Stakater's whole-object hash;
//! - `exact` (`shared=db.url`), `glob` (`shared=feature.*`) and `referenced` (the key of a
//!   `configMapKeyRef` plus the `items` of a volume) reload only when their keys change, with
//!   the hash of just those keys; a change to another key writes nothing;
//! - `bad` (`shared=[x]`, not a valid pattern) gets an `InvalidAnnotation` Event and behaves
//!   as `plain`;
//! - `secret` (`secret-keys: creds=password`) ignores a change to `user`;
//! - `pair` uses `shared` (filtered) and `extra` (not): under the annotations strategy its
//!   marker records `extra`, and a change to an unlisted key of `shared` still writes nothing;
//! - `reloader explain` shows the filter and the keys hashed.
//!
//! Build the binary first: `cargo build -p reloader-cli`.

#[path = "support/explain.rs"]
#[allow(dead_code)]
mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use reloader_tests::fixtures::*;
use support::{explain_json, resource, run_reloader};

const RELOAD_TIMEOUT: Duration = Duration::from_secs(60);
const CM_KEYS: &str = "reloader.stakater.com/configmap-keys";
const SECRET_KEYS: &str = "reloader.stakater.com/secret-keys";
const AUTO: &str = "reloader.stakater.com/auto";

fn workload(name: &str) -> WorkloadSpec {
    WorkloadSpec::new(Kind::Deployment, name).without_pods().metadata_annotation(AUTO, "true")
}

/// `referenced`: a `configMapKeyRef` to key `key` and a volume of `shared` with `items: [db.url]`.
fn referenced_workload() -> WorkloadSpec {
    let spec = workload("referenced").metadata_annotation(CM_KEYS, "referenced").configmap_key_ref("shared");
    let mut pod = spec.configmap_volume("shared").template().spec.unwrap();
    let volume = pod.volumes.as_mut().unwrap()[0].config_map.as_mut().unwrap();
    volume.items = Some(vec![k8s_openapi::api::core::v1::KeyToPath {
        key: "db.url".into(),
        path: "db.url".into(),
        mode: None,
    }]);
    workload("referenced").metadata_annotation(CM_KEYS, "referenced").pod_spec(pod)
}

struct Forms {
    strategy: Strategy,
    ids: BTreeMap<&'static str, WorkloadId>,
}

impl Forms {
    async fn marker(&self, client: &kube::Client, name: &str, resource: &ResourceRef) -> Option<String> {
        self.ids[name].marker(client, resource, self.strategy).await.unwrap().map(|m| m.value)
    }

    async fn wait(&self, client: &kube::Client, name: &str, resource: &ResourceRef, hash: &str) -> Duration {
        self.ids[name].wait_for_marker(client, resource, self.strategy, hash, RELOAD_TIMEOUT).await.unwrap()
    }

    /// After the positive control reloaded (`latency`), the others keep exactly `before`.
    async fn unchanged(
        &self,
        client: &kube::Client,
        latency: Duration,
        before: &BTreeMap<&'static str, Option<String>>,
        resource: &ResourceRef,
        what: &str,
    ) {
        tokio::time::sleep(negative_wait(latency)).await;
        for (name, marker) in before {
            assert_eq!(
                &self.marker(client, name, resource).await,
                marker,
                "{}: {name} after {what}",
                self.strategy
            );
        }
    }

    async fn snapshot(
        &self,
        client: &kube::Client,
        names: &[&'static str],
        resource: &ResourceRef,
    ) -> BTreeMap<&'static str, Option<String>> {
        let mut markers = BTreeMap::new();
        for name in names {
            markers.insert(*name, self.marker(client, name, resource).await);
        }
        markers
    }
}

async fn every_form(strategy: Strategy) {
    let env = TestEnv::new().await;
    let TestEnv { client, ns, resources, plane, .. } = &env;
    let (shared, extra, creds) =
        (ResourceRef::configmap("shared"), ResourceRef::configmap("extra"), ResourceRef::secret("creds"));
    let mut data =
        vec![("db.url", "a"), ("feature.x", "1"), ("feature.y", "1"), ("key", "k"), ("noise", "1")];
    resources.create(&shared, &data).await.unwrap();
    resources.create(&extra, &[("v", "1")]).await.unwrap();
    resources.create(&creds, &[("password", "p"), ("user", "u")]).await.unwrap();
    let _reloader = env.reloader_builder().arg(strategy.flag()).start().await.unwrap();

    let specs = [
        ("plain", workload("plain").env_from_configmap("shared")),
        (
            "exact",
            workload("exact").metadata_annotation(CM_KEYS, "shared=db.url").env_from_configmap("shared"),
        ),
        (
            "glob",
            workload("glob").metadata_annotation(CM_KEYS, "shared=feature.*").env_from_configmap("shared"),
        ),
        ("referenced", referenced_workload()),
        ("bad", workload("bad").metadata_annotation(CM_KEYS, "shared=[x]").env_from_configmap("shared")),
        (
            "secret",
            workload("secret").metadata_annotation(SECRET_KEYS, "creds=password").env_from_secret("creds"),
        ),
        (
            "pair",
            workload("pair")
                .metadata_annotation(CM_KEYS, "shared=db.url")
                .env_from_configmap("shared")
                .env_from_configmap("extra"),
        ),
    ];
    let mut ids = BTreeMap::new();
    for (name, spec) in specs {
        ids.insert(name, spec.create(client, ns.name()).await.unwrap());
    }
    let forms = Forms { strategy, ids };

    // `pair` records `extra` (the annotation marker names it); created last, so every other
    // workload is known once it reloads.
    let extra_hash = resources.update_data(&extra, &[("v", "2")]).await.unwrap();
    forms.wait(client, "pair", &extra, &extra_hash).await;

    // An unlisted key: only the unfiltered and the invalid filter reload, with Stakater's hash.
    let filtered_names = ["exact", "glob", "referenced", "pair"];
    let before = forms.snapshot(client, &filtered_names, &shared).await;
    data[4] = ("noise", "2");
    let whole = resources.update_data(&shared, &data).await.unwrap();
    let started = Instant::now();
    forms.wait(client, "plain", &shared, &whole).await;
    forms.wait(client, "bad", &shared, &whole).await;
    forms.unchanged(client, started.elapsed(), &before, &shared, "a change to `noise`").await;
    if strategy == Strategy::Annotations {
        assert_eq!(
            forms.marker(client, "pair", &extra).await,
            Some(extra_hash.clone()),
            "pair still records extra"
        );
    }

    // A key the glob selects.
    let before = forms.snapshot(client, &["exact", "referenced", "pair"], &shared).await;
    data[1] = ("feature.x", "2");
    resources.update_data(&shared, &data).await.unwrap();
    let started = Instant::now();
    forms.wait(client, "glob", &shared, &filtered_hash(&[("feature.x", "2"), ("feature.y", "1")])).await;
    forms.unchanged(client, started.elapsed(), &before, &shared, "a change to `feature.x`").await;

    // The exact key, also referenced through the volume's items.
    data[0] = ("db.url", "b");
    resources.update_data(&shared, &data).await.unwrap();
    forms.wait(client, "exact", &shared, &filtered_hash(&[("db.url", "b")])).await;
    forms.wait(client, "pair", &shared, &filtered_hash(&[("db.url", "b")])).await;
    forms.wait(client, "referenced", &shared, &filtered_hash(&[("db.url", "b"), ("key", "k")])).await;

    // The Secret: `user` is not listed, `password` is.
    let before = forms.snapshot(client, &["secret"], &creds).await;
    let started = Instant::now();
    resources.update_data(&creds, &[("password", "p"), ("user", "v")]).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    forms.unchanged(client, started.elapsed(), &before, &creds, "a change to `user`").await;
    resources.update_data(&creds, &[("password", "q"), ("user", "v")]).await.unwrap();
    forms.wait(client, "secret", &creds, &filtered_hash(&[("password", "q")])).await;

    // The bad filter is reported once, as other bad annotations are.
    let events = events_for(client, ns.name(), Kind::Deployment, "bad").await.unwrap();
    let invalid: Vec<_> =
        events.iter().filter(|e| e.reason.as_deref() == Some("InvalidAnnotation")).collect();
    assert_eq!(invalid.len(), 1, "{events:#?}");
    let message = invalid[0].message.as_deref().unwrap_or_default();
    assert!(message.contains(CM_KEYS) && message.contains("every key is hashed"), "{message}");

    if strategy == Strategy::EnvVars {
        explained(plane, ns.name(), &data).await;
    }
}

/// `reloader explain` names the filter and the keys it hashes, and compares the filtered hash.
async fn explained(plane: &reloader_harness::ControlPlane, namespace: &str, data: &[(&str, &str)]) {
    let json = explain_json(plane, namespace, "deployment/referenced", &[]).await;
    let shared = resource(&json, "ConfigMap", "shared");
    assert_eq!(shared["key_filter"]["value"], "referenced", "{shared:#}");
    assert_eq!(shared["key_filter"]["hashed_keys"], serde_json::json!(["db.url", "key"]), "{shared:#}");
    let value = |key: &str| data.iter().find(|(k, _)| *k == key).unwrap().1;
    let hash = filtered_hash(&[("db.url", value("db.url")), ("key", value("key"))]);
    assert_eq!(shared["current_hash"], hash.as_str(), "{shared:#}");
    assert_eq!(shared["marker"]["state"], "current", "{shared:#}");

    let json = explain_json(plane, namespace, "deployment/plain", &[]).await;
    assert!(
        resource(&json, "ConfigMap", "shared").get("key_filter").is_none(),
        "no filter, no field: {json:#}"
    );

    let run = run_reloader(plane.kubeconfig_path(), &["explain", "deployment/glob", "-n", namespace]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stdout.contains("Key filter") && run.stdout.contains("hashes only feature.x, feature.y"),
        "{}",
        run.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_filters_under_the_env_vars_strategy() {
    every_form(Strategy::EnvVars).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_filters_under_the_annotations_strategy() {
    every_form(Strategy::Annotations).await;
}
