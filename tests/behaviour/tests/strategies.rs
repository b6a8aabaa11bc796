//! docs/behaviour.md §B (strategies and events, B20–B27), on the real control plane with the real
//! reloader binary, for every rolling kind (Deployment, DaemonSet, StatefulSet, Argo Rollout,
//! DeploymentConfig) under both strategies. Test names start with the scenario number.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::apps::v1::{ControllerRevision, ReplicaSet};
use k8s_openapi::api::core::v1::{EnvVar, Event};
use kube::Client;
use kube::api::{Api, ListParams};
use reloader_harness::{ControlPlane, NotYet, Reloader, wait_until};
use reloader_tests::fixtures::*;

/// docs/compatibility.md §5: the ConfigMap `{test.url: www.stakater.com}` (and a Secret with the same data).
const VECTOR_KEY: &str = "test.url";
const VECTOR_VALUE: &str = "www.stakater.com";
const VECTOR_HASH: &str = "3c9a892aeaedc759abc3df9884a37b8be5680382";
/// docs/compatibility.md §5: the hash of empty content, standing for "what the data was before".
const EMPTY_HASH: &str = "da39a3ee5e6b4b0d3255bfef95601890afd80709";
const RELOAD_TIMEOUT: Duration = Duration::from_secs(90);
const ROLLOUT_TIMEOUT: Duration = Duration::from_secs(120);
const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);
const ON_CREATE: &str = "--reload-on-create=true";
const ON_DELETE: &str = "--reload-on-delete=true";
const SYNC_AFTER_RESTART: &str = "--sync-after-restart=true";

fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("the clock is after 1970").as_secs() as i64
}

/// The `last-reloaded-from` value as Stakater Reloader writes it (docs/compatibility.md §3), spelled out here.
fn stakater_annotation(resource: &ResourceRef, namespace: &str, hash: &str, observed_at: i64) -> String {
    format!(
        r#"{{"type":"{}","name":"{}","namespace":"{namespace}","hash":"{hash}","containerRefs":["app"],"observedAt":{observed_at}}}"#,
        resource.kind.marker_type(),
        resource.name
    )
}

/// Marks `spec` as reloaded by Stakater for `resource` at content `hash`, under `strategy`.
fn prestamped(
    spec: WorkloadSpec,
    strategy: Strategy,
    resource: &ResourceRef,
    namespace: &str,
    hash: &str,
) -> WorkloadSpec {
    match strategy {
        Strategy::EnvVars => spec.env(expected_env_var(resource.kind, &resource.name), hash),
        Strategy::Annotations => spec.template_annotation(
            ANNOTATION_LAST_RELOADED_FROM,
            stakater_annotation(resource, namespace, hash, 1_723_000_000),
        ),
    }
}

async fn create_for_every_kind(
    client: &Client,
    namespace: &str,
    prefix: &str,
    spec: impl Fn(Kind) -> WorkloadSpec,
) -> Vec<WorkloadId> {
    let mut created = Vec::new();
    for kind in Kind::ROLLING {
        let name = format!("{prefix}-{}", kind.short());
        created.push(
            spec(kind).for_kind(kind, name).create(client, namespace).await.expect("creating a workload"),
        );
    }
    created
}

/// Each workload as it is once nothing moves any more (two reads 2 s apart agree on every
/// resourceVersion), so a later difference is a write.
async fn settled(client: &Client, workloads: &[WorkloadId]) -> BTreeMap<WorkloadId, Observed> {
    async fn read(
        client: &Client,
        workloads: &[WorkloadId],
    ) -> Result<BTreeMap<WorkloadId, Observed>, NotYet> {
        let mut states = BTreeMap::new();
        for workload in workloads {
            states
                .insert(workload.clone(), workload.observe(client).await.map_err(|e| NotYet(e.to_string()))?);
        }
        Ok(states)
    }
    wait_until("the workloads to settle", SETTLE_TIMEOUT, || async {
        let first = read(client, workloads).await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let second = read(client, workloads).await?;
        let moving: Vec<_> = first
            .iter()
            .filter(|(id, state)| second[*id].resource_version != state.resource_version)
            .map(|(id, _)| id.to_string())
            .collect();
        if moving.is_empty() { Ok(second) } else { Err(NotYet(format!("still changing: {moving:?}"))) }
    })
    .await
    .expect("workloads settle")
}

/// Updates `canary` and waits until every canary workload carries its new marker: proof that
/// the reloader is watching and writing. Returns the longest latency.
async fn reload_canaries(
    client: &Client,
    namespace: &str,
    strategy: Strategy,
    canary: &ResourceRef,
    canaries: &[WorkloadId],
) -> Duration {
    let value = format!("canary-{}", unix_now());
    let hash = Resources::new(client, namespace).update_data(canary, &[("key", &value)]).await.unwrap();
    let mut latency = Duration::ZERO;
    for workload in canaries {
        let waited = workload.wait_for_marker(client, canary, strategy, &hash, RELOAD_TIMEOUT).await.unwrap();
        latency = latency.max(waited);
    }
    latency
}

/// §B22/§B26: starts a new reloader and proves it writes nothing to `watched` (resourceVersion
/// unchanged) for 5 times the latency of a canary reload it performs meanwhile.
async fn assert_restart_writes_nothing(
    plane: &ControlPlane,
    namespace: &str,
    strategy: Strategy,
    args: &[&str],
    watched: &[WorkloadId],
    (canary, canaries): (&ResourceRef, &[WorkloadId]),
) -> Reloader {
    let client = plane.client();
    let before = settled(&client, watched).await;
    let reloader = reloader_for(plane, namespace, strategy, args).await.unwrap();
    let latency = reload_canaries(&client, namespace, strategy, canary, canaries).await;
    tokio::time::sleep(negative_wait(latency)).await;
    for (workload, then) in &before {
        let now = workload.observe(&client).await.unwrap();
        assert_eq!(
            now.resource_version, then.resource_version,
            "{workload} was written after a restart with no change:\nbefore: {then:#?}\nafter: {now:#?}"
        );
    }
    reloader
}

/// New ReplicaSets (Deployment) / ControllerRevisions (DaemonSet, StatefulSet) of a workload.
async fn revisions(client: &Client, workload: &WorkloadId) -> usize {
    let selector = ListParams::default().labels(&format!("app={}", workload.name));
    let ns = workload.namespace.as_str();
    match workload.kind {
        Kind::Deployment => {
            Api::<ReplicaSet>::namespaced(client.clone(), ns).list(&selector).await.unwrap().items.len()
        }
        Kind::DaemonSet | Kind::StatefulSet => Api::<ControllerRevision>::namespaced(client.clone(), ns)
            .list(&selector)
            .await
            .unwrap()
            .items
            .len(),
        _ => 0,
    }
}

/// §B20 / §B21: the marker is the Stakater hash of the new data, checked against the literal
/// vector of docs/compatibility.md §5, in the exact shape Stakater writes; each reload rolls a new
/// ReplicaSet / ControllerRevision whose pods become Ready on the fake nodes.
async fn marker_is_the_stakater_hash(strategy: Strategy) {
    let env = TestEnv::with_crds().await;
    let TestEnv { ns, client, resources, .. } = &env;
    let config = ResourceRef::configmap(VECTOR_VALUE);
    let secret = ResourceRef::secret(VECTOR_VALUE);
    resources.create(&config, &[(VECTOR_KEY, "before")]).await.unwrap();
    resources.create(&secret, &[(VECTOR_KEY, "before")]).await.unwrap();
    let workloads = create_for_every_kind(client, ns.name(), "vector", |_| {
        WorkloadSpec::base()
            .metadata_annotation(ANNOTATION_AUTO, "true")
            .env_from_configmap(&config.name)
            .secret_volume(&secret.name)
    })
    .await;
    let _reloader = env.reloader(strategy, &[]).await;

    for (round, resource) in [&config, &secret].into_iter().enumerate() {
        let changed_at = unix_now();
        let hash = resources.update_data(resource, &[(VECTOR_KEY, VECTOR_VALUE)]).await.unwrap();
        assert_eq!(hash, VECTOR_HASH, "the shared hashing disagrees with docs/compatibility.md §5");
        for workload in &workloads {
            workload.wait_for_marker(client, resource, strategy, VECTOR_HASH, RELOAD_TIMEOUT).await.unwrap();
            let template = workload.template(client).await.unwrap();
            match strategy {
                Strategy::EnvVars => {
                    let name = match resource.kind {
                        ResourceKind::Secret => "STAKATER_WWW_STAKATER_COM_SECRET",
                        _ => "STAKATER_WWW_STAKATER_COM_CONFIGMAP",
                    };
                    let app = &template.spec.as_ref().unwrap().containers[0];
                    let expected =
                        EnvVar { name: name.into(), value: Some(VECTOR_HASH.into()), value_from: None };
                    assert!(
                        app.env.iter().flatten().any(|env| *env == expected),
                        "{workload}: {:?}",
                        app.env
                    );
                }
                Strategy::Annotations => {
                    let annotations = template.metadata.and_then(|m| m.annotations).unwrap_or_default();
                    let value = &annotations[ANNOTATION_LAST_RELOADED_FROM];
                    let prefix = format!(
                        r#"{{"type":"{}","name":"www.stakater.com","namespace":"{}","hash":"{VECTOR_HASH}","containerRefs":["app"],"observedAt":"#,
                        resource.kind.marker_type(),
                        ns.name()
                    );
                    let observed_at = value
                        .strip_prefix(&prefix)
                        .and_then(|rest| rest.strip_suffix('}'))
                        .and_then(|seconds| seconds.parse::<i64>().ok())
                        .unwrap_or_else(|| panic!("{workload}: {value} does not start with {prefix}"));
                    assert!(
                        (changed_at - 1..=unix_now() + 1).contains(&observed_at),
                        "{workload}: observedAt {observed_at} is not the time of the reload ({changed_at})"
                    );
                }
            }
        }
        for workload in &workloads {
            wait_rolled_out(client, workload, ROLLOUT_TIMEOUT).await.unwrap();
            if matches!(workload.kind, Kind::Deployment | Kind::DaemonSet | Kind::StatefulSet) {
                assert_eq!(
                    revisions(client, workload).await,
                    round + 2,
                    "{workload}: one revision per template"
                );
            }
        }
    }
}

#[tokio::test]
async fn b20_env_var_is_the_stakater_hash_of_the_new_data() {
    marker_is_the_stakater_hash(Strategy::EnvVars).await;
}

#[tokio::test]
async fn b21_last_reloaded_from_holds_the_new_hash() {
    marker_is_the_stakater_hash(Strategy::Annotations).await;
}

/// §B22: after reloads, a restarted controller with no config change writes nothing, neither to
/// the workloads it reloaded (under annotations, the one holding two resources records only the
/// last) nor to those it never touched.
async fn restart_writes_nothing(strategy: Strategy) {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, .. } = &env;
    let config = ResourceRef::configmap("b22-cm");
    let secret = ResourceRef::secret("b22-secret");
    let quiet = ResourceRef::configmap("b22-quiet-cm");
    let canary = ResourceRef::configmap("b22-canary-cm");
    let auto = || WorkloadSpec::base().metadata_annotation(ANNOTATION_AUTO, "true");
    let run = Table::new(strategy)
        .case(
            Case::new("b22-reloaded")
                .seed(&config)
                .seed(&secret)
                .workload(auto().env_from_configmap(&config.name).secret_volume(&secret.name))
                .phase(Phase::new().update(&config).reloads(&config, 0))
                .phase(Phase::new().update(&secret).reloads(&secret, 0)),
        )
        .case(
            Case::new("b22-explicit")
                .seed(&quiet)
                .workload(auto().metadata_annotation(ANNOTATION_SECRET_RELOAD, &secret.name))
                .phase(Phase::new().unchanged())
                .phase(Phase::new().reloads(&secret, 0)),
        )
        .case(
            Case::new("b22-never")
                .workload(auto().env_from_configmap(&quiet.name))
                .phase(Phase::new().unchanged())
                .phase(Phase::new().unchanged()),
        )
        .case(Case::new("b22-canary").seed(&canary).workload(auto().env_from_configmap(&canary.name)))
        .run(&env)
        .await;
    let TableRun { mut reloader, workloads, .. } = run;
    reloader.terminate(Duration::from_secs(10));
    let (canaries, watched): (Vec<_>, Vec<_>) =
        workloads.into_iter().partition(|workload| workload.name.starts_with("b22-canary"));
    let mut restarted =
        assert_restart_writes_nothing(plane, ns.name(), strategy, &[], &watched, (&canary, &canaries)).await;
    // And once more after a crash (SIGKILL) instead of a graceful stop.
    restarted.kill();
    assert_restart_writes_nothing(plane, ns.name(), strategy, &[], &watched, (&canary, &canaries)).await;
}

#[tokio::test]
async fn b22_restart_without_change_writes_nothing_env_vars() {
    restart_writes_nothing(Strategy::EnvVars).await;
}

#[tokio::test]
async fn b22_restart_without_change_writes_nothing_annotations() {
    restart_writes_nothing(Strategy::Annotations).await;
}

/// §B23: workloads carrying the marker Stakater wrote for the current data (the docs/compatibility.md
/// vector) are not touched on start-up; twins carrying a marker for older data are caught up
/// once, proving the start-up pass ran.
async fn prestamped_workloads_are_left_alone(strategy: Strategy) {
    let env = TestEnv::with_crds().await;
    let TestEnv { ns, client, resources, .. } = &env;
    let current = ResourceRef::configmap("b23-current");
    let stale = ResourceRef::configmap("b23-stale");
    for resource in [&current, &stale] {
        let hash = resources.create(resource, &[(VECTOR_KEY, VECTOR_VALUE)]).await.unwrap();
        assert_eq!(hash, VECTOR_HASH);
    }
    let stamped = |resource: &ResourceRef, hash: &str| {
        let spec = WorkloadSpec::base()
            .metadata_annotation(ANNOTATION_AUTO, "true")
            .env_from_configmap(&resource.name)
            .without_pods();
        prestamped(spec, strategy, resource, ns.name(), hash)
    };
    let up_to_date =
        create_for_every_kind(client, ns.name(), "b23-current", |_| stamped(&current, VECTOR_HASH)).await;
    let behind = create_for_every_kind(client, ns.name(), "b23-stale", |_| stamped(&stale, EMPTY_HASH)).await;
    let before = settled(client, &up_to_date.iter().chain(&behind).cloned().collect::<Vec<_>>()).await;

    let _reloader = env.reloader(strategy, &[]).await;
    let started = Instant::now();
    for workload in &behind {
        workload.wait_for_marker(client, &stale, strategy, VECTOR_HASH, RELOAD_TIMEOUT).await.unwrap();
    }
    tokio::time::sleep(negative_wait(started.elapsed())).await;
    for workload in &up_to_date {
        let now = workload.observe(client).await.unwrap();
        let then = &before[workload];
        assert_eq!(
            now.resource_version, then.resource_version,
            "{workload} was written on start-up: {now:#?}"
        );
    }
    for workload in &behind {
        let now = workload.observe(client).await.unwrap();
        let then = before[workload].generation.unwrap();
        assert_eq!(now.generation, Some(then + 1), "{workload}: caught up with exactly one write");
    }
}

#[tokio::test]
async fn b23_stakater_marker_for_current_data_is_not_touched_env_vars() {
    prestamped_workloads_are_left_alone(Strategy::EnvVars).await;
}

#[tokio::test]
async fn b23_stakater_marker_for_current_data_is_not_touched_annotations() {
    prestamped_workloads_are_left_alone(Strategy::Annotations).await;
}

/// §B24 / §B25 as a table; `enabled` runs with reload-on-create and reload-on-delete, otherwise
/// with the defaults. A twin reloads in every phase to prove the controller is alive.
fn create_and_delete_cases(enabled: bool) -> Vec<Case> {
    let tag = if enabled { "on" } else { "off" };
    let mut cases = Vec::new();
    for kind in [ResourceKind::ConfigMap, ResourceKind::Secret] {
        let short = if kind == ResourceKind::ConfigMap { "cm" } else { "secret" };
        let created = ResourceRef::new(kind, format!("b24-{tag}-{short}-new"));
        let deleted = ResourceRef::new(kind, format!("b25-{tag}-{short}"));
        let twin = ResourceRef::new(kind, format!("b2x-{tag}-{short}-twin"));
        let workload = |resource: &ResourceRef| {
            WorkloadSpec::base().metadata_annotation(ANNOTATION_AUTO, "true").reference(
                kind,
                &resource.name,
                Via::EnvFrom,
            )
        };
        let on_create = Phase::new().create(&created);
        let on_delete = Phase::new().delete(&deleted);
        let on_recreate = Phase::new().create(&deleted);
        cases.push(Case::new(format!("b24-{tag}-{short}")).workload(workload(&created)).phase(if enabled {
            on_create.reloads(&created, 0)
        } else {
            on_create.unchanged()
        }));
        cases.push(
            Case::new(format!("b25-{tag}-{short}"))
                .seed(&deleted)
                .workload(workload(&deleted))
                .phase(Phase::new().update(&deleted).reloads(&deleted, 0))
                .phase(if enabled {
                    on_delete.reloads_for_delete(&deleted, 0)
                } else {
                    on_delete.unchanged()
                })
                // docs/compatibility.md §6.3: a deleted-then-recreated resource reloads again on create only
                // with reload-on-create.
                .phase(if enabled { on_recreate.reloads(&deleted, 0) } else { on_recreate.unchanged() }),
        );
        cases.push(
            Case::new(format!("b2x-{tag}-{short}-twin"))
                .seed(&twin)
                .workload(workload(&twin))
                .phase(Phase::new().update(&twin).reloads(&twin, 0))
                .phase(Phase::new().update(&twin).reloads(&twin, 0))
                .phase(Phase::new().update(&twin).reloads(&twin, 0)),
        );
    }
    cases
}

async fn create_and_delete(strategy: Strategy, enabled: bool) {
    let env = TestEnv::new().await;
    let args: &[&str] = if enabled { &[ON_CREATE, ON_DELETE] } else { &[] };
    Table::new(strategy).args(args).cases(create_and_delete_cases(enabled)).run(&env).await;
}

#[tokio::test]
async fn b24_b25_reload_on_create_and_delete_env_vars() {
    create_and_delete(Strategy::EnvVars, true).await;
}

#[tokio::test]
async fn b24_b25_reload_on_create_and_delete_annotations() {
    create_and_delete(Strategy::Annotations, true).await;
}

#[tokio::test]
async fn b24_b25_create_and_delete_ignored_by_default_env_vars() {
    create_and_delete(Strategy::EnvVars, false).await;
}

#[tokio::test]
async fn b24_b25_create_and_delete_ignored_by_default_annotations() {
    create_and_delete(Strategy::Annotations, false).await;
}

/// §B26: with reload-on-create and sync-after-restart, the initial list counts: workloads without
/// the current marker reload once at start-up, those carrying it are not touched, and a second
/// restart touches nothing.
async fn sync_after_restart(strategy: Strategy) {
    let env = TestEnv::with_crds().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let config = ResourceRef::configmap("b26-cm");
    let canary = ResourceRef::configmap("b26-canary-cm");
    let hash = resources.create(&config, &[(VECTOR_KEY, VECTOR_VALUE)]).await.unwrap();
    let canary_hash = resources.create(&canary, &[("key", "first")]).await.unwrap();
    let referencing = |resource: &ResourceRef| {
        WorkloadSpec::base()
            .metadata_annotation(ANNOTATION_AUTO, "true")
            .env_from_configmap(&resource.name)
            .without_pods()
    };
    let fresh = create_for_every_kind(client, ns.name(), "b26-fresh", |_| referencing(&config)).await;
    let stamped = create_for_every_kind(client, ns.name(), "b26-stamped", |_| {
        prestamped(referencing(&config), strategy, &config, ns.name(), &hash)
    })
    .await;
    let canaries = create_for_every_kind(client, ns.name(), "b26-canary", |_| referencing(&canary)).await;
    let before = settled(client, &fresh.iter().chain(&stamped).cloned().collect::<Vec<_>>()).await;

    let args = [ON_CREATE, SYNC_AFTER_RESTART];
    let mut reloader = env.reloader(strategy, &args).await;
    let started = Instant::now();
    for workload in &fresh {
        workload.wait_for_marker(client, &config, strategy, &hash, RELOAD_TIMEOUT).await.unwrap();
    }
    for workload in &canaries {
        workload.wait_for_marker(client, &canary, strategy, &canary_hash, RELOAD_TIMEOUT).await.unwrap();
    }
    tokio::time::sleep(negative_wait(started.elapsed())).await;
    for workload in &stamped {
        let now = workload.observe(client).await.unwrap();
        assert_eq!(
            now.resource_version, before[workload].resource_version,
            "{workload} was written: {now:#?}"
        );
    }
    for workload in &fresh {
        let now = workload.observe(client).await.unwrap();
        assert_eq!(now.generation, before[workload].generation.map(|g| g + 1), "{workload}: one write");
    }

    reloader.terminate(Duration::from_secs(10));
    let watched: Vec<WorkloadId> = fresh.into_iter().chain(stamped).collect();
    assert_restart_writes_nothing(plane, ns.name(), strategy, &args, &watched, (&canary, &canaries)).await;
}

#[tokio::test]
async fn b26_sync_after_restart_is_idempotent_env_vars() {
    sync_after_restart(Strategy::EnvVars).await;
}

#[tokio::test]
async fn b26_sync_after_restart_is_idempotent_annotations() {
    sync_after_restart(Strategy::Annotations).await;
}

fn reasons(events: &[Event], reason: &str, type_: &str) -> Vec<Event> {
    events
        .iter()
        .filter(|event| event.reason.as_deref() == Some(reason) && event.type_.as_deref() == Some(type_))
        .cloned()
        .collect()
}

/// §B27: an Event `Reloaded` (Normal) per reload on the workload, naming the resource and the
/// workload; `ReloadFail` (Warning) when the API server refuses the write (a
/// ValidatingAdmissionPolicy freezes the template of the twin workloads).
async fn events_are_recorded(strategy: Strategy) {
    let env = TestEnv::with_crds().await;
    let TestEnv { ns, client, resources, .. } = &env;
    let config = ResourceRef::configmap("b27-cm");
    resources.create(&config, &[("key", "v0")]).await.unwrap();
    let spec = || {
        WorkloadSpec::base()
            .metadata_annotation(ANNOTATION_AUTO, "true")
            .env_from_configmap(&config.name)
            .without_pods()
    };
    let accepted = create_for_every_kind(client, ns.name(), "b27-ok", |_| spec()).await;
    let (label, value) = FROZEN_LABEL;
    let frozen = create_for_every_kind(client, ns.name(), "b27-frozen", |_| spec().label(label, value)).await;
    let freeze = TemplateFreeze::install(client, ns.name(), &frozen).await.unwrap();
    let _reloader = env.reloader(strategy, &[]).await;

    let before: BTreeMap<_, _> = {
        let mut states = BTreeMap::new();
        for workload in &frozen {
            states.insert(workload.clone(), workload.observe(client).await.unwrap());
        }
        states
    };
    for round in 1..=2 {
        let hash = resources.update_data(&config, &[("key", &format!("v{round}"))]).await.unwrap();
        for workload in &accepted {
            workload.wait_for_marker(client, &config, strategy, &hash, RELOAD_TIMEOUT).await.unwrap();
        }
    }

    for workload in &accepted {
        let events = wait_until(&format!("two Reloaded Events on {workload}"), RELOAD_TIMEOUT, || async {
            let events = events_for(client, ns.name(), workload.kind, &workload.name).await?;
            let reloaded: i32 = reasons(&events, "Reloaded", "Normal").iter().map(event_occurrences).sum();
            if reloaded >= 2 { Ok(events) } else { Err(NotYet(format!("{reloaded} so far: {events:?}"))) }
        })
        .await
        .unwrap();
        let reloaded = reasons(&events, "Reloaded", "Normal");
        assert_eq!(reloaded.iter().map(event_occurrences).sum::<i32>(), 2, "{workload}: {reloaded:#?}");
        for event in &reloaded {
            let message = event.message.as_deref().unwrap_or_default();
            for part in [config.name.as_str(), ns.name(), &workload.name] {
                assert!(message.contains(part), "{workload}: the message {message:?} does not name {part}");
            }
        }
        assert!(reasons(&events, "ReloadFail", "Warning").is_empty(), "{workload}: {events:#?}");
    }
    for workload in &frozen {
        let events = wait_until(&format!("a ReloadFail Event on {workload}"), RELOAD_TIMEOUT, || async {
            let events = events_for(client, ns.name(), workload.kind, &workload.name).await?;
            let failed = reasons(&events, "ReloadFail", "Warning");
            if failed.is_empty() { Err(NotYet(format!("{events:?}"))) } else { Ok(events) }
        })
        .await
        .unwrap();
        assert!(reasons(&events, "Reloaded", "Normal").is_empty(), "{workload}: {events:#?}");
        let now = workload.observe(client).await.unwrap();
        assert!(now.same_spec_as(&before[workload]), "{workload} was changed despite the policy");
    }
    freeze.remove().await.unwrap();
}

#[tokio::test]
async fn b27_reloaded_and_reload_fail_events_env_vars() {
    events_are_recorded(Strategy::EnvVars).await;
}

#[tokio::test]
async fn b27_reloaded_and_reload_fail_events_annotations() {
    events_are_recorded(Strategy::Annotations).await;
}
