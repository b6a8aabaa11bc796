//! Declared kinds (`--custom-workload`), docs/behaviour.md §I (I60–I69), on the real control plane
//! with the real binary: OpenKruise's CloneSet and KEDA's ScaledJob (their upstream CRDs) and the
//! made-up DeepWorkload, whose pod template sits at `/spec/runtime/workers/podTemplate`. No
//! controller runs them: a reload is the template written once at the declared pointer.
//!
//! - I60: §A's case shapes over the declared kinds × both strategies, one table;
//! - I61: the write changes the template at the pointer and nothing else, key filters included;
//! - I62–I64: Events and metrics, `--dry-run`, the start-up catch-up;
//! - I65: a CRD installed after start is watched without a restart, `/readyz` saying what waits;
//! - I66: declarations start-up refuses; I67: `reloader explain`; I68: the admission webhook;
//! - I69: a kind whose operator propagates an annotations map.
//!
//! Build the binary first: `cargo build -p reloader-cli`.

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use reloader_harness::{Crd, NotYet, Reloader, free_port, wait_until};
use reloader_tests::fixtures::*;
use reloader_tests::fixtures_extra::{run_reloader_to_exit, unique_token, wait_for_log};
use serde_json::{Value, json};

use crate::explain_support::{explain_json, resource, run_reloader};
use crate::webhook::{Registration, certificates, webhook_args};

const TIMEOUT: Duration = Duration::from_secs(60);
const CONFIG: &str = "app-config";
const CONFIGMAP_KEYS: &str = "reloader.stakater.com/configmap-keys";

// ---------------------------------------------------------------------------------------------
// I60: §A's shapes, each case created as every declared kind

/// A case over the declared kinds only.
fn declared_case(id: &str) -> Case {
    Case::new(id).kinds(&Kind::DECLARED)
}

/// I60 as data; the §A scenario each case repeats is in its id's comment.
fn table_i60() -> Vec<Case> {
    let explicit_cm = ResourceRef::configmap("i60-explicit-cm");
    let explicit_secret = ResourceRef::secret("i60-explicit-secret");
    let mut cases = vec![
        // A1, A2.
        declared_case("i60-explicit-cm")
            .seed(&explicit_cm)
            .workload(
                WorkloadSpec::base()
                    .metadata_annotation(ANNOTATION_CONFIGMAP_RELOAD, &explicit_cm.name)
                    .env_from_configmap(&explicit_cm.name),
            )
            .phase(Phase::new().update(&explicit_cm).reloads(&explicit_cm, 0)),
        declared_case("i60-explicit-secret")
            .seed(&explicit_secret)
            .workload(
                WorkloadSpec::base()
                    .metadata_annotation(ANNOTATION_SECRET_RELOAD, &explicit_secret.name)
                    .env_from_secret(&explicit_secret.name),
            )
            .phase(Phase::new().update(&explicit_secret).reloads(&explicit_secret, 0)),
    ];
    // A3, A4: `auto` with each of the six ways, ConfigMaps and Secrets in turn.
    let kinds = [ResourceKind::ConfigMap, ResourceKind::Secret].into_iter().cycle();
    for (via, kind) in Via::SCENARIO_SIX.into_iter().zip(kinds) {
        let id =
            format!("i60-auto-{}-{}", if kind == ResourceKind::Secret { "s" } else { "cm" }, via.short());
        let resource = ResourceRef::new(kind, format!("{id}-res"));
        cases.push(
            declared_case(&id)
                .seed(&resource)
                .workload(WorkloadSpec::base().metadata_annotation(ANNOTATION_AUTO, "true").reference(
                    kind,
                    &resource.name,
                    via,
                ))
                .phase(Phase::new().update(&resource).reloads(&resource, 0)),
        );
    }
    cases.extend([
        i60_typed_auto(),
        i60_exclude(),
        i60_search_and_match(),
        i60_ignore(),
        i60_no_annotation(),
    ]);
    cases.push(i60_template_annotation_second_container());
    cases
}

/// A10: `secret.../auto` reloads for the Secret it uses, not for the ConfigMap it uses.
fn i60_typed_auto() -> Case {
    let (config, secret) = (ResourceRef::configmap("i60-typed-cm"), ResourceRef::secret("i60-typed-secret"));
    declared_case("i60-typed")
        .seed(&config)
        .seed(&secret)
        .workload(
            WorkloadSpec::base()
                .metadata_annotation(ANNOTATION_SECRET_AUTO, "true")
                .env_from_configmap(&config.name)
                .secret_volume(&secret.name),
        )
        .phase(Phase::new().update(&config).unchanged())
        .phase(Phase::new().update(&secret).reloads(&secret, 0))
}

/// A14: the excluded ConfigMap does not reload, the other one it uses does.
fn i60_exclude() -> Case {
    let (excluded, kept) = (ResourceRef::configmap("i60-excluded"), ResourceRef::configmap("i60-kept"));
    declared_case("i60-exclude")
        .seed(&excluded)
        .seed(&kept)
        .workload(
            WorkloadSpec::base()
                .metadata_annotation(ANNOTATION_AUTO, "true")
                .metadata_annotation(ANNOTATION_CONFIGMAP_EXCLUDE, &excluded.name)
                .env_from_configmap(&excluded.name)
                .configmap_volume(&kept.name),
        )
        .phase(Phase::new().update(&excluded).unchanged())
        .phase(Phase::new().update(&kept).reloads(&kept, 0))
}

/// A15: search on the workload and match on the ConfigMap reload; its twin without search does not.
fn i60_search_and_match() -> Case {
    let shared = ResourceRef::configmap("i60-matched");
    declared_case("i60-match")
        .seed_annotated(&shared, &[(ANNOTATION_MATCH, "true")])
        .workload(
            WorkloadSpec::base()
                .metadata_annotation(ANNOTATION_SEARCH, "true")
                .env_from_configmap(&shared.name),
        )
        .workload_as("plain", WorkloadSpec::base().env_from_configmap(&shared.name))
        .phase(Phase::new().update(&shared).reloads(&shared, 0).unchanged_as("plain"))
}

/// A16: an ignored Secret reloads nothing, even named explicitly.
fn i60_ignore() -> Case {
    let ignored = ResourceRef::secret("i60-ignored");
    declared_case("i60-ignore")
        .seed_annotated(&ignored, &[(ANNOTATION_IGNORE, "true")])
        .workload(
            WorkloadSpec::base()
                .metadata_annotation(ANNOTATION_SECRET_RELOAD, &ignored.name)
                .env_from_secret(&ignored.name),
        )
        .phase(Phase::new().update(&ignored).unchanged())
}

/// A6: a workload with no reloader annotation is not written.
fn i60_no_annotation() -> Case {
    let config = ResourceRef::configmap("i60-unannotated");
    declared_case("i60-no-annotation")
        .seed(&config)
        .workload(WorkloadSpec::base().env_from_configmap(&config.name).configmap_volume(&config.name))
        .phase(Phase::new().update(&config).unchanged())
}

/// A17, A19: `auto` on the pod template (read at the pointer), the ConfigMap used by the second
/// container only: the marker goes to that container.
fn i60_template_annotation_second_container() -> Case {
    let config = ResourceRef::configmap("i60-second-cm");
    declared_case("i60-tpl-second")
        .seed(&config)
        .workload(
            WorkloadSpec::base()
                .template_annotation(ANNOTATION_AUTO, "true")
                .in_container(1)
                .env_from_configmap(&config.name),
        )
        .phase(Phase::new().update(&config).reloads(&config, 1))
}

async fn run_i60(strategy: Strategy) {
    let env = TestEnv::new().await;
    let started = Instant::now();
    let run = Table::new(strategy).cases(table_i60()).run(&env).await;
    let kinds: std::collections::BTreeSet<Kind> = run.workloads.iter().map(|w| w.kind).collect();
    assert_eq!(kinds, Kind::DECLARED.into_iter().collect(), "the table covered every declared kind");
    eprintln!(
        "I60 under {strategy}: {} workloads in {:?} (longest reload latency {:?})",
        run.workloads.len(),
        started.elapsed(),
        run.max_latency
    );
}

#[tokio::test]
async fn i60_declared_kinds_follow_section_a_under_env_vars() {
    run_i60(Strategy::EnvVars).await;
}

#[tokio::test]
async fn i60_declared_kinds_follow_section_a_under_annotations() {
    run_i60(Strategy::Annotations).await;
}

// ---------------------------------------------------------------------------------------------
// I61: the write stays inside the template

/// The pod template at the pointer with the strategy's marker for `resource` taken out, so
/// what is left can be compared with the template before the reload.
fn without_marker(template: &Value, resource: &ResourceRef, strategy: Strategy) -> Value {
    let mut template = template.clone();
    match strategy {
        Strategy::EnvVars => {
            let name = expected_env_var(resource.kind, &resource.name);
            for container in template["spec"]["containers"].as_array_mut().into_iter().flatten() {
                let Some(fields) = container.as_object_mut() else { continue };
                if let Some(Value::Array(env)) = fields.get_mut("env") {
                    env.retain(|variable| variable["name"] != name.as_str());
                    if env.is_empty() {
                        fields.remove("env");
                    }
                }
            }
        }
        Strategy::Annotations => {
            let metadata = template["metadata"].as_object_mut().expect("template metadata");
            if let Some(Value::Object(annotations)) = metadata.get_mut("annotations") {
                annotations.remove(ANNOTATION_LAST_RELOADED_FROM);
                if annotations.is_empty() {
                    metadata.remove("annotations");
                }
            }
        }
    }
    template
}

/// The object with what the API server and the marker write may move taken out: the template
/// itself (compared apart) and the metadata the server maintains.
fn outside_template(object: &DynamicObject, pointer: &str) -> Value {
    let mut data = object.data.clone();
    let (parent, field) = pointer.rsplit_once('/').expect("a pointer");
    data.pointer_mut(parent).and_then(Value::as_object_mut).expect("the template's parent").remove(field);
    let mut metadata = object.metadata.clone();
    metadata.resource_version = None;
    metadata.generation = None;
    metadata.managed_fields = None;
    json!({ "data": data, "metadata": metadata })
}

/// I61 under one strategy: a DeepWorkload filtering `shared` down to `db.url` ignores a change
/// to another key (its unfiltered twin reloads), then reloads for `db.url` with the filtered
/// hash; the write changed the template at the pointer by the marker alone.
async fn write_stays_at_the_pointer(strategy: Strategy) {
    // With the Argo and OpenShift CRDs: `TestEnv::reloader` switches both backends on.
    let env = TestEnv::with_crds().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let declared = Kind::DeepWorkload.declared().expect("declared");
    let flags = declare_kinds(plane, &[Kind::DeepWorkload]).await.unwrap();
    let shared = ResourceRef::configmap("shared");
    resources.create(&shared, &[("db.url", "a"), ("noise", "1")]).await.unwrap();
    let deep = WorkloadSpec::new(Kind::DeepWorkload, "filtered")
        .replicas(3)
        .label("tier", "workers")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .metadata_annotation(CONFIGMAP_KEYS, "shared=db.url")
        .env("LOG_LEVEL", "debug")
        .env_from_configmap(&shared.name)
        .configmap_volume(&shared.name)
        .create(client, ns.name())
        .await
        .unwrap();
    let twin = WorkloadSpec::new(Kind::DeepWorkload, "unfiltered")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_configmap(&shared.name)
        .create(client, ns.name())
        .await
        .unwrap();
    let before = deep.declared_object(client).await.unwrap();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let _reloader = env.reloader(strategy, &flags).await;

    // Another key: the twin reloads with Stakater's hash, the filtered one stays as it was.
    let started = Instant::now();
    let whole = resources.update_data(&shared, &[("db.url", "a"), ("noise", "2")]).await.unwrap();
    twin.wait_for_marker(client, &shared, strategy, &whole, TIMEOUT).await.unwrap();
    let initial = deep.observe(client).await.unwrap();
    deep.assert_no_change_for(client, &initial, negative_wait(started.elapsed())).await;

    // The filtered key: reloads with the hash of that key alone.
    resources.update_data(&shared, &[("db.url", "b"), ("noise", "2")]).await.unwrap();
    let hash = filtered_hash(&[("db.url", "b")]);
    let latency = deep.wait_for_marker(client, &shared, strategy, &hash, TIMEOUT).await.unwrap();
    let after = deep.declared_object(client).await.unwrap();
    assert_eq!(
        after.metadata.generation,
        before.metadata.generation.map(|generation| generation + 1),
        "{strategy}: one write"
    );
    assert_eq!(
        outside_template(&after, declared.template),
        outside_template(&before, declared.template),
        "{strategy}: the write changed something outside the pod template"
    );
    assert_eq!(after.data.pointer("/spec/runtime/workers/replicas"), Some(&json!(3)));
    let template =
        |object: &DynamicObject| object.data.pointer(declared.template).cloned().expect("a template");
    assert_eq!(
        without_marker(&template(&after), &shared, strategy),
        template(&before),
        "{strategy}: the template changed by more than the marker"
    );
    let reloaded = deep.observe(client).await.unwrap();
    deep.assert_no_change_for(client, &reloaded, negative_wait(latency)).await;
}

/// I61.
#[tokio::test]
async fn i61_a_write_changes_the_template_at_the_pointer_and_nothing_else() {
    futures::join!(
        write_stays_at_the_pointer(Strategy::EnvVars),
        write_stays_at_the_pointer(Strategy::Annotations)
    );
}

// ---------------------------------------------------------------------------------------------
// I62–I64: Events and metrics, dry run, catch-up

/// I62: a reload of a CloneSet records Stakater's `Reloaded` Event on it and counts in the
/// metrics under the kind's name.
#[tokio::test]
async fn i62_a_declared_kind_gets_its_event_and_its_metrics() {
    // With the Argo and OpenShift CRDs: `TestEnv::reloader` switches both backends on.
    let env = TestEnv::with_crds().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let namespace = ns.name();
    let flags = declare_kinds(plane, &[Kind::CloneSet]).await.unwrap();
    let config = ResourceRef::configmap(CONFIG);
    resources.create(&config, &[("k", "v1")]).await.unwrap();
    let web = WorkloadSpec::new(Kind::CloneSet, "web")
        .metadata_annotation(ANNOTATION_CONFIGMAP_RELOAD, CONFIG)
        .env_from_configmap(CONFIG)
        .create(client, namespace)
        .await
        .unwrap();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let reloader = env.reloader(Strategy::EnvVars, &flags).await;

    let hash = resources.update_data(&config, &[("k", "v2")]).await.unwrap();
    web.wait_for_marker(client, &config, Strategy::EnvVars, &hash, TIMEOUT).await.unwrap();
    let message = format!(
        "Changes detected in '{CONFIG}' of type 'CONFIGMAP' in namespace '{namespace}', Updated 'web' of \
         type '{}' in namespace '{namespace}'",
        Kind::CloneSet
    );
    let event = wait_until("a Reloaded Event on the CloneSet", TIMEOUT, || async {
        let events = events_for(client, namespace, Kind::CloneSet, "web").await?;
        let found = events.iter().find(|e| e.reason.as_deref() == Some("Reloaded"));
        found.cloned().ok_or_else(|| NotYet::because(format!("{events:#?}")))
    })
    .await
    .unwrap();
    assert_eq!(event.type_.as_deref(), Some("Normal"), "{event:#?}");
    assert_eq!(event.message.as_deref(), Some(message.as_str()), "{event:#?}");
    let object = &event.involved_object;
    let api = Kind::CloneSet.declared().expect("declared").api_resource();
    assert_eq!(object.api_version.as_deref(), Some(api.api_version.as_str()), "{event:#?}");
    assert_eq!(object.kind.as_deref(), Some(Kind::CloneSet.as_str()), "{event:#?}");
    assert_eq!(object.uid.as_deref(), Some(web.observe(client).await.unwrap().uid.as_str()));
    assert_eq!(event.reporting_component.as_deref(), Some("reloader-configmaps"), "{event:#?}");

    let action = format!(r#"reloader_action_total{{workload_kind="{}",result="success"}}"#, Kind::CloneSet);
    let counted = wait_until("the write counted under CloneSet", TIMEOUT, || async {
        match reloader.metric(&action).await? {
            Some(value) if value >= 1.0 => Ok(value),
            other => Err(NotYet::because(format!("{action} = {other:?}"))),
        }
    })
    .await
    .unwrap();
    assert_eq!(counted, 1.0, "one write");
    let executed = reloader.metric(r#"reloader_reload_executed_total{success="true"}"#).await.unwrap();
    assert_eq!(executed, Some(1.0));
}

async fn dry_run_writes(reloader: &Reloader, kind: Kind) -> f64 {
    let sample = format!(r#"reloader_dry_run_writes_total{{workload_kind="{kind}"}}"#);
    reloader.metric(&sample).await.unwrap().unwrap_or(0.0)
}

/// I63: under `--dry-run` the ScaledJob's write is logged and counted, not made; the same
/// controller without it writes.
#[tokio::test]
async fn i63_a_dry_run_never_writes_a_declared_kind() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let flags = declare_kinds(plane, &[Kind::ScaledJob]).await.unwrap();
    let config = ResourceRef::configmap(CONFIG);
    resources.create(&config, &[("k", "v1")]).await.unwrap();
    let nightly = WorkloadSpec::new(Kind::ScaledJob, "nightly")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_configmap(CONFIG)
        .create(client, ns.name())
        .await
        .unwrap();
    let initial = nightly.observe(client).await.unwrap();

    let mut dry = env
        .reloader_builder()
        .name("dry-run")
        .args(flags.iter().cloned())
        .arg("--dry-run")
        .start()
        .await
        .unwrap();
    let started = Instant::now();
    resources.update_data(&config, &[("k", "v2")]).await.unwrap();
    wait_until("the dry-run write to be counted", TIMEOUT, || async {
        match dry_run_writes(&dry, Kind::ScaledJob).await {
            n if n >= 1.0 => Ok(()),
            n => Err(NotYet::because(format!("{n} dry-run writes"))),
        }
    })
    .await
    .unwrap();
    let latency = started.elapsed();
    let log = dry.log_text();
    assert!(
        log.lines().any(|line| line.contains("dry run") && line.contains("nightly")),
        "no dry-run line about nightly in:\n{log}"
    );
    nightly.assert_no_change_for(client, &initial, negative_wait(latency)).await;
    let unchanged = nightly.observe(client).await.unwrap();
    assert_eq!(unchanged.resource_version, initial.resource_version, "a dry run wrote the ScaledJob");
    dry.terminate(Duration::from_secs(5));

    let _real = env.reloader_builder().name("real").args(flags.iter().cloned()).start().await.unwrap();
    let v3 = resources.update_data(&config, &[("k", "v3")]).await.unwrap();
    nightly.wait_for_marker(client, &config, Strategy::EnvVars, &v3, TIMEOUT).await.unwrap();
}

/// I64: a change made while reloader is stopped reaches, at the next start, the ScaledJob
/// carrying the marker of the data before it, in one write; one created meanwhile without a
/// marker is not written (no reload-on-create).
#[tokio::test]
async fn i64_a_declared_kind_is_caught_up_at_start() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let flags = declare_kinds(plane, &[Kind::ScaledJob]).await.unwrap();
    let config = ResourceRef::configmap(CONFIG);
    resources.create(&config, &[("k", "v1")]).await.unwrap();
    let auto = |name: &str| {
        WorkloadSpec::new(Kind::ScaledJob, name)
            .metadata_annotation(ANNOTATION_AUTO, "true")
            .env_from_configmap(CONFIG)
    };
    let marked = auto("marked").create(client, ns.name()).await.unwrap();

    let mut first = env.reloader_builder().name("first").args(flags.iter().cloned()).start().await.unwrap();
    let v2 = resources.update_data(&config, &[("k", "v2")]).await.unwrap();
    marked.wait_for_marker(client, &config, Strategy::EnvVars, &v2, TIMEOUT).await.unwrap();
    first.kill();

    let v3 = resources.update_data(&config, &[("k", "v3")]).await.unwrap();
    let unmarked = auto("unmarked").create(client, ns.name()).await.unwrap();
    let (marked_before, unmarked_before) =
        (marked.observe(client).await.unwrap(), unmarked.observe(client).await.unwrap());

    let second = env.reloader_builder().name("second").args(flags.iter().cloned()).start().await.unwrap();
    let started = Instant::now();
    marked.wait_for_marker(client, &config, Strategy::EnvVars, &v3, TIMEOUT).await.unwrap();
    wait_for_log(&second, "the leader catch-up", TIMEOUT, |log| log.contains("leader catch-up"))
        .await
        .unwrap();
    let latency = started.elapsed();
    let caught_up = marked.observe(client).await.unwrap();
    assert_eq!(caught_up.generation, marked_before.generation.map(|generation| generation + 1), "one write");
    marked.assert_no_change_for(client, &caught_up, negative_wait(latency)).await;
    assert!(unmarked.observe(client).await.unwrap().same_spec_as(&unmarked_before), "no marker, no catch-up");
}

// ---------------------------------------------------------------------------------------------
// I65: a CRD installed after start

/// A namespaced kind of a group of its own, for the one test that needs its CRD to be missing
/// and then to appear (CRDs are cluster-wide; the plane is shared by this file's tests).
struct LateKind {
    resource: ApiResource,
    template: &'static str,
}

impl LateKind {
    fn new() -> Self {
        let group = format!("{}.reloader.dev", unique_token("late"));
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Gadget"), "gadgets");
        LateKind { resource, template: "/spec/pods/template" }
    }

    fn flag(&self) -> String {
        let r = &self.resource;
        format!(
            "--custom-workload=group={},version={},kind={},resource={},template={}",
            r.group, r.version, r.kind, r.plural, self.template
        )
    }

    fn crd_name(&self) -> String {
        format!("{}.{}", self.resource.plural, self.resource.group)
    }

    async fn install(&self, client: &kube::Client) -> CustomResourceDefinition {
        let r = &self.resource;
        let crd: CustomResourceDefinition = serde_json::from_value(json!({
            "metadata": { "name": self.crd_name() },
            "spec": {
                "group": r.group,
                "scope": "Namespaced",
                "names": { "kind": r.kind, "listKind": format!("{}List", r.kind), "plural": r.plural },
                "versions": [{
                    "name": r.version, "served": true, "storage": true,
                    "schema": { "openAPIV3Schema": { "type": "object", "properties": {
                        "spec": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
                    } } },
                }],
            },
        }))
        .expect("a CRD manifest");
        let api: Api<CustomResourceDefinition> = Api::all(client.clone());
        api.create(&PostParams::default(), &crd).await.expect("creating the late CRD");
        wait_until("the late CRD to be Established", TIMEOUT, || async {
            let crd = api.get(&self.crd_name()).await?;
            let conditions = crd.status.as_ref().and_then(|status| status.conditions.as_ref());
            let established =
                conditions.into_iter().flatten().any(|c| c.type_ == "Established" && c.status == "True");
            if established { Ok(crd) } else { Err(NotYet::because("not Established")) }
        })
        .await
        .unwrap()
    }

    async fn marker(
        &self,
        client: &kube::Client,
        namespace: &str,
        name: &str,
        config: &ResourceRef,
    ) -> Option<String> {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &self.resource);
        let object = api.get(name).await.ok()?;
        let template = serde_json::from_value(object.data.pointer(self.template)?.clone()).ok()?;
        marker_in(&template, config, Strategy::EnvVars).map(|marker| marker.value)
    }
}

/// I65: declared before its CRD exists: ready, `/readyz` names what it waits for, the log says it
/// once; the CRD installed, the kind is watched by the same process and reloads.
#[tokio::test]
async fn i65_a_kind_whose_crd_appears_later_is_watched_without_a_restart() {
    /// How often reloader asks whether a missing CRD appeared.
    const CRD_POLL: Duration = Duration::from_secs(5);
    let env = TestEnv::new().await;
    let TestEnv { ns, client, resources, .. } = &env;
    let late = LateKind::new();
    let config = ResourceRef::configmap(CONFIG);
    resources.create(&config, &[("k", "v1")]).await.unwrap();

    let mut reloader = env.reloader_builder().arg(late.flag()).start().await.unwrap();
    let pid = reloader.pid();
    let waiting = format!(
        "waiting for {}.{}/{} (--custom-workload {}): its CRD is not installed",
        late.resource.plural, late.resource.group, late.resource.version, late.resource.kind
    );
    // Two polls go by, so a warning repeated per poll would show.
    tokio::time::sleep(CRD_POLL * 2 + Duration::from_secs(1)).await;
    assert_eq!(reloader.get("/readyz").await.unwrap(), (200, format!("ok\n{waiting}\n")));
    let not_served = |log: &str| {
        let needle = format!(
            "{}.{} is not served (its CRD is not installed); watched when it appears",
            late.resource.plural, late.resource.api_version
        );
        log.lines().filter(|line| line.contains(" WARN ") && line.contains(&needle)).count()
    };
    assert_eq!(not_served(&reloader.log_text()), 1, "said once:\n{}", reloader.log_text());

    late.install(client).await;
    let installed = Instant::now();
    wait_until("/readyz to stop waiting", TIMEOUT, || async {
        match reloader.get("/readyz").await? {
            (200, body) if body == "ok" => Ok(()),
            other => Err(NotYet::because(format!("{other:?}"))),
        }
    })
    .await
    .unwrap();
    let noticed = installed.elapsed();
    assert!(noticed <= CRD_POLL * 3, "noticed {noticed:?} after the CRD was Established");
    // Only the pod template of the spec: the fixtures know nothing of this kind.
    let template = WorkloadSpec::new(Kind::Deployment, "gizmo").env_from_configmap(CONFIG).template();
    let mut object = DynamicObject::new("gizmo", &late.resource).within(ns.name());
    object.metadata.annotations = Some([(ANNOTATION_AUTO.to_owned(), "true".to_owned())].into());
    object.data = json!({ "spec": { "pods": { "template": template } } });
    let gadgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns.name(), &late.resource);
    gadgets.create(&PostParams::default(), &object).await.unwrap();

    let hash = resources.update_data(&config, &[("k", "v2")]).await.unwrap();
    wait_until("the Gadget to reload", TIMEOUT, || async {
        match late.marker(client, ns.name(), "gizmo", &config).await {
            Some(marker) if marker == hash => Ok(()),
            other => Err(NotYet::because(format!("marker {other:?}"))),
        }
    })
    .await
    .unwrap();
    assert!(reloader.exit_status().is_none() && reloader.pid() == pid, "the same process, never restarted");
    let log = reloader.log_text();
    assert_eq!(not_served(&log), 1, "said once:\n{log}");
    let watching =
        format!("{}.{} is now served: watching it", late.resource.plural, late.resource.api_version);
    assert_eq!(log.lines().filter(|line| line.contains(&watching)).count(), 1, "{log}");
    eprintln!("the late CRD was watched {noticed:?} after it was Established");

    drop(reloader);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.delete(&late.crd_name(), &DeleteParams::default()).await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// I66: declarations refused at start-up

/// One declaration start-up must refuse, and what the refusal must say.
struct Refused {
    declaration: String,
    /// The text naming what is wrong.
    why: &'static str,
    /// Refused while parsing the command line: exactly one line of output.
    one_line: bool,
}

fn refused(declaration: &str, why: &'static str, one_line: bool) -> Refused {
    Refused { declaration: declaration.to_owned(), why, one_line }
}

/// I66: each bad declaration stops start-up with a non-zero exit and a line naming it and the
/// field at fault; a good declaration beside them starts.
#[tokio::test]
async fn i66_start_up_refuses_declarations_it_cannot_use() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, .. } = &env;
    plane.install_crds(&[Crd::ClusterWorkload]).await.unwrap();
    let deep = declare_kinds(plane, &[Kind::DeepWorkload]).await.unwrap();
    let example = "group=example.reloader.dev,version=v1";
    let cases = [
        refused(
            "group=apps.kruise.io,version=v1alpha1,kind=CloneSet,resource=clonesets,template=spec/template",
            "template=\"spec/template\": not a JSON pointer",
            true,
        ),
        refused(
            "group=apps.kruise.io,version=v1alpha1,kind=CloneSet,resource=clonesets,template=/metadata/x",
            "template=\"/metadata/x\": must point inside the object's spec",
            true,
        ),
        refused(
            "group=apps.kruise.io,version=v1alpha1,kind=cloneSet,resource=clonesets,template=/spec/template",
            "kind=\"cloneSet\": not a kind name",
            true,
        ),
        refused(
            "group=apps.kruise.io,version=v1alpha1,kind=CloneSet,template=/spec/template",
            "resource=\"\": missing",
            true,
        ),
        refused(
            "group=apps,version=v1,kind=Deployment,resource=deployments,template=/spec/template",
            "Deployment is built in",
            false,
        ),
        refused(
            &format!("{example},kind=ClusterWorkload,resource=clusterworkloads,template=/spec/template"),
            "ClusterWorkload is cluster-scoped",
            false,
        ),
        refused(
            &format!("{example},kind=Widget,resource=deepworkloads,template=/spec/template"),
            "deepworkloads.example.reloader.dev serves kind DeepWorkload, not Widget",
            false,
        ),
        refused(
            &format!("{example},kind=DeepWorkload,resource=deepworkload,template=/spec/template"),
            "declare resource=deepworkloads",
            false,
        ),
    ];
    let namespaces = format!("--namespaces={}", ns.name());
    let mut failures = Vec::new();
    for case in &cases {
        let flag = format!("--custom-workload={}", case.declaration);
        let args = ["--metrics-addr=127.0.0.1:0", namespaces.as_str(), flag.as_str()];
        let exited = run_reloader_to_exit(plane.kubeconfig_path(), &args, &[], TIMEOUT).await;
        let lines = exited.lines();
        let named = lines.iter().any(|line| line.contains(&case.declaration) && line.contains(case.why));
        if exited.code.is_none_or(|code| code == 0) {
            failures.push(format!("{}: exited {:?}, must fail: {lines:?}", case.declaration, exited.code));
        } else if !named {
            failures
                .push(format!("{}: no line names it and says {:?}: {lines:?}", case.declaration, case.why));
        } else if case.one_line && lines.len() != 1 {
            failures.push(format!("{}: expected one line: {lines:?}", case.declaration));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // The positive twin: a good declaration of a served kind starts.
    let reloader = env.reloader_builder().args(deep.iter().cloned()).start().await.unwrap();
    let log = reloader.log_text();
    let start = log.lines().find(|line| line.contains("starting controller")).unwrap_or_default();
    assert!(start.contains(Kind::DeepWorkload.as_str()), "the declared kind is watched: {log}");
}

// ---------------------------------------------------------------------------------------------
// I67: explain

/// I67: `reloader explain` takes a declared kind (by plural or name, any case) with the same
/// flag, says how it is declared, decides as for any kind and reads the marker at the pointer;
/// without the flag the kind is unknown.
#[tokio::test]
async fn i67_explain_shows_a_declared_kind() {
    // With the Argo and OpenShift CRDs: `TestEnv::reloader` switches both backends on.
    let env = TestEnv::with_crds().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let namespace = ns.name();
    let flags = declare_kinds(plane, &[Kind::CloneSet]).await.unwrap();
    let flag = flags[0].as_str();
    let config = ResourceRef::configmap(CONFIG);
    let v1 = resources.create(&config, &[("k", "v1")]).await.unwrap();
    let web = WorkloadSpec::new(Kind::CloneSet, "web")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_configmap(CONFIG)
        .create(client, namespace)
        .await
        .unwrap();
    let env_var = expected_env_var(config.kind, &config.name);

    let json = explain_json(plane, namespace, "clonesets/web", &[flag]).await;
    assert_eq!(json["workload"]["kind"], Kind::CloneSet.as_str(), "{json:#}");
    assert_eq!(
        json["workload"]["declared"],
        json!({"apiVersion": "apps.kruise.io/v1alpha1", "resource": "clonesets", "target": "template",
               "pointer": "/spec/template"}),
        "{json:#}"
    );
    let explained = resource(&json, "ConfigMap", CONFIG);
    assert_eq!(explained["decision"]["rule"], "auto", "{explained:#}");
    assert_eq!(explained["decision"]["container"], "app", "{explained:#}");
    assert_eq!(explained["current_hash"], v1.as_str());
    assert_eq!(explained["marker"]["state"], "none");

    let text =
        run_reloader(plane.kubeconfig_path(), &["explain", "CLONESET/web", "-n", namespace, flag]).await;
    assert_eq!(text.code, Some(0), "{text:?}");
    println!("{}", text.stdout);
    assert!(text.stdout.contains(&format!("CloneSet web in namespace {namespace}\n")), "{}", text.stdout);
    let row = text.stdout.lines().find_map(|line| line.trim_start().strip_prefix("Declared kind:"));
    assert_eq!(
        row.map(str::trim),
        Some("apps.kruise.io/v1alpha1 clonesets, pod template at /spec/template (--custom-workload)"),
        "{}",
        text.stdout
    );
    let next = format!("Next change:    reload: set {env_var} on container app\n");
    assert!(text.stdout.contains(&next), "{}", text.stdout);

    // After a reload the marker is read where the declaration points.
    let _reloader = env.reloader(Strategy::EnvVars, &[flag]).await;
    let v2 = resources.update_data(&config, &[("k", "v2")]).await.unwrap();
    web.wait_for_marker(client, &config, Strategy::EnvVars, &v2, TIMEOUT).await.unwrap();
    let json = explain_json(plane, namespace, "CloneSet/web", &[flag]).await;
    let marker = &resource(&json, "ConfigMap", CONFIG)["marker"];
    assert_eq!(marker["recorded"], v2.as_str(), "{marker:#}");
    assert_eq!(marker["state"], "current", "{marker:#}");

    // Without the declaration explain does not know the kind.
    let unknown = run_reloader(plane.kubeconfig_path(), &["explain", "clonesets/web", "-n", namespace]).await;
    assert_ne!(unknown.code, Some(0), "{unknown:?}");
    assert!(
        unknown.stderr.contains("unknown kind \"clonesets\"") && unknown.stderr.contains("--custom-workload"),
        "{unknown:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// I68: the admission webhook

/// A dry-run create of a throwaway CloneSet: `Some(marker)` once the webhook stamps it.
async fn dry_run_marker(
    clonesets: &Api<DynamicObject>,
    namespace: &str,
    config: &ResourceRef,
) -> Result<Option<String>, NotYet> {
    let params = PostParams { dry_run: true, field_manager: None };
    let created = clonesets.create(&params, &manifest("probe").declared_manifest(namespace)).await?;
    Ok(template_marker(&created, config))
}

fn manifest(name: &str) -> WorkloadSpec {
    WorkloadSpec::new(Kind::CloneSet, name)
        .replicas(0)
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_configmap(CONFIG)
}

fn template_marker(object: &DynamicObject, config: &ResourceRef) -> Option<String> {
    let pointer = Kind::CloneSet.declared().expect("declared").template;
    let template = serde_json::from_value(object.data.pointer(pointer)?.clone()).ok()?;
    marker_in(&template, config, Strategy::EnvVars).map(|marker| marker.value)
}

/// A PUT of the manifest, which has no marker, over the current object (a GitOps re-apply).
async fn replace(clonesets: &Api<DynamicObject>, namespace: &str, name: &str) {
    for _ in 0..20 {
        let current = clonesets.get(name).await.unwrap();
        let mut object = manifest(name).declared_manifest(namespace);
        object.metadata.resource_version = current.metadata.resource_version;
        match clonesets.replace(name, &PostParams::default(), &object).await {
            Ok(_) => return,
            Err(kube::Error::Api(e)) if e.code == 409 => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(e) => panic!("replace: {e}"),
        }
    }
    panic!("replace: conflicts 20 times in a row");
}

/// I68: with the webhook, a CloneSet is stamped at creation, and a re-apply without the marker
/// keeps it (same generation: nothing to roll); without the webhook the same re-apply drops it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i68_a_reapplied_declared_kind_keeps_its_marker_through_the_webhook() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let namespace = ns.name();
    let flags = declare_kinds(plane, &[Kind::CloneSet]).await.unwrap();
    let resource = Kind::CloneSet.declared().expect("declared").api_resource();
    let clonesets: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let config = ResourceRef::configmap(CONFIG);
    let first = resources.create(&config, &[("k", "v1")]).await.unwrap();

    let certs = certificates();
    let port = free_port();
    let mut args = webhook_args(namespace, port, &certs);
    args.extend(flags);
    let reloader = Reloader::builder(plane).args(args).start().await.unwrap();
    let registration = Registration::create_for(plane, namespace, port, &certs.ca_pem, &resource).await;
    wait_until("the API server to call the webhook for CloneSets", TIMEOUT, || async {
        match dry_run_marker(&clonesets, namespace, &config).await? {
            Some(marker) if marker == first => Ok(()),
            other => Err(NotYet::because(format!("a dry-run create stamped {other:?}"))),
        }
    })
    .await
    .unwrap();

    let web = manifest("web").create(client, namespace).await.unwrap();
    let created = web.observe(client).await.unwrap();
    assert_eq!(
        created.marker(&config, Strategy::EnvVars).map(|m| m.value),
        Some(first),
        "stamped at creation"
    );

    let second = resources.update_data(&config, &[("k", "v2")]).await.unwrap();
    let latency = web.wait_for_marker(client, &config, Strategy::EnvVars, &second, TIMEOUT).await.unwrap();
    let reloaded = web.observe(client).await.unwrap();
    assert_eq!(reloaded.generation, created.generation.map(|generation| generation + 1), "one reload");

    for _ in 0..3 {
        replace(&clonesets, namespace, "web").await;
    }
    web.assert_no_change_for(client, &reloaded, negative_wait(latency)).await;
    let patched =
        reloader.metric(r#"reloader_admission_requests_total{operation="UPDATE",result="patched"}"#);
    assert!(patched.await.unwrap().unwrap_or_default() >= 3.0, "every re-apply was patched by the webhook");

    // The positive twin: without the webhook the same re-apply drops the marker.
    registration.delete().await;
    wait_until("the API server to stop calling the webhook", TIMEOUT, || async {
        match dry_run_marker(&clonesets, namespace, &config).await? {
            None => Ok(()),
            Some(marker) => Err(NotYet::because(format!("a dry-run create still stamped {marker}"))),
        }
    })
    .await
    .unwrap();
    replace(&clonesets, namespace, "web").await;
    let dropped = web.observe(client).await.unwrap();
    assert_eq!(dropped.marker(&config, Strategy::EnvVars), None, "the re-apply dropped the marker");
    assert_eq!(dropped.generation, reloaded.generation.map(|generation| generation + 1));
}

/// The declaration of the made-up AnnotatedWorkload: its operator copies `spec.podAnnotations`
/// to its pods, and holds no pod template.
const ANNOTATED: &str = "--custom-workload=group=example.reloader.dev,version=v1,kind=AnnotatedWorkload,\
                         resource=annotatedworkloads,annotations=/spec/podAnnotations";

/// I69: a kind declared with `annotations=` (docs/beyond-stakater.md §12): the marker is the
/// `last-reloaded-from` annotation written into the map, under the env-vars strategy too, and
/// nothing else of the object changes; the explicit annotation and search + match select its
/// resources; `auto` selects nothing (no pod spec to discover references in).
#[tokio::test]
async fn i69_an_annotations_map_gets_the_marker_annotation() {
    let env = TestEnv::with_crds().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let namespace = ns.name();
    plane.install_crds(&[Crd::AnnotatedWorkload]).await.unwrap();
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &Crd::AnnotatedWorkload.api_resources()[0]);
    let explicit = ResourceRef::configmap("named");
    let matched = ResourceRef::configmap("matched");
    resources.create(&explicit, &[("k", "v1")]).await.unwrap();
    resources.create_annotated(&matched, &[("k", "v1")], &[(ANNOTATION_MATCH, "true")]).await.unwrap();
    let object = |name: &str, annotations: Value, pod_annotations: Option<Value>| {
        let mut object = json!({
            "apiVersion": "example.reloader.dev/v1", "kind": "AnnotatedWorkload",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"image": "db:1"},
        });
        if let Some(map) = pod_annotations {
            object["spec"]["podAnnotations"] = map;
        }
        serde_json::from_value::<DynamicObject>(object).unwrap()
    };
    let post = PostParams::default();
    for created in [
        object("by-name", json!({ANNOTATION_CONFIGMAP_RELOAD: "named"}), None),
        object("by-search", json!({ANNOTATION_SEARCH: "true"}), Some(json!({"team": "db"}))),
        object("by-auto", json!({ANNOTATION_AUTO: "true"}), Some(json!({}))),
    ] {
        api.create(&post, &created).await.unwrap();
    }
    let before = api.get("by-search").await.unwrap();
    let _reloader = env.reloader(Strategy::EnvVars, &[ANNOTATED]).await;

    let named_hash = resources.update_data(&explicit, &[("k", "v2")]).await.unwrap();
    let matched_hash = resources.update_data(&matched, &[("k", "v2")]).await.unwrap();
    for (name, resource, hash) in
        [("by-name", &explicit, &named_hash), ("by-search", &matched, &matched_hash)]
    {
        let marker = wait_until(&format!("the marker in {name}'s map"), TIMEOUT, || async {
            let object = api.get(name).await?;
            let value = object.data["spec"]["podAnnotations"][ANNOTATION_LAST_RELOADED_FROM]
                .as_str()
                .map(str::to_owned);
            value.ok_or_else(|| NotYet::because(format!("{}", object.data["spec"])))
        })
        .await
        .unwrap();
        let marker: Value = serde_json::from_str(&marker).unwrap();
        assert_eq!(marker["name"], resource.name.as_str(), "{name}: {marker}");
        assert_eq!(marker["hash"], hash.as_str(), "{name}: {marker}");
        assert_eq!(marker["containerRefs"], json!([]), "{name}: no container to name");
    }
    let after = api.get("by-search").await.unwrap();
    assert_eq!(after.data["spec"]["podAnnotations"]["team"], "db", "the operator's own annotations stay");
    assert_eq!(after.data["spec"]["image"], before.data["spec"]["image"]);
    assert_eq!(
        after.metadata.annotations, before.metadata.annotations,
        "the object's own annotations unchanged"
    );

    // `auto` has nothing to discover: its map stays empty however long we wait for the others.
    let third = resources.update_data(&explicit, &[("k", "v3")]).await.unwrap();
    wait_until("the third change on by-name", TIMEOUT, || async {
        let object = api.get("by-name").await?;
        let map = &object.data["spec"]["podAnnotations"];
        let marker = map[ANNOTATION_LAST_RELOADED_FROM].as_str().unwrap_or_default().to_owned();
        if marker.contains(third.as_str()) { Ok(()) } else { Err(NotYet::because(marker)) }
    })
    .await
    .unwrap();
    assert_eq!(api.get("by-auto").await.unwrap().data["spec"]["podAnnotations"], json!({}));
}
