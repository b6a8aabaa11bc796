//! `reloader explain` (docs/beyond-stakater.md §6) on the real control plane with the real binary
//! (`target/debug/reloader`; build it first with `cargo build -p reloader-cli`): the main cases
//! of docs/behaviour.md §A as stable JSON, the text a newcomer reads, the recorded marker against the
//! current hash before and after a real reload, Secret values kept out of every output, and
//! clear failures.

#[path = "support/explain.rs"]
mod support;

use std::time::Duration;

use reloader_harness::KubeconfigFile;
use reloader_tests::fixtures::*;
use serde_json::Value;
use support::{explain_json, listed, resource, run_reloader};

const RELOAD_TIMEOUT: Duration = Duration::from_secs(60);

/// What a case expects of one resource: `outcome` is the rule, or `skip:<reason>`.
struct Expect {
    resource: ResourceRef,
    outcome: &'static str,
    container: Option<&'static str>,
}

fn expect(resource: &ResourceRef, outcome: &'static str, container: Option<&'static str>) -> Expect {
    Expect { resource: resource.clone(), outcome, container }
}

struct ExplainCase {
    name: &'static str,
    workload: WorkloadSpec,
    /// Created before explaining, with their metadata annotations.
    resources: Vec<(ResourceRef, Vec<(&'static str, &'static str)>)>,
    /// Every resource the explanation must list, in its order (kind, then name).
    expect: Vec<Expect>,
    /// Where the ConfigMap rules are read: `workload`, `pod_template` or `none`.
    configmap_rules: &'static str,
}

fn kind_of(resource: &ResourceRef) -> &'static str {
    if resource.kind == ResourceKind::Secret { "Secret" } else { "ConfigMap" }
}

fn deployment(name: &str) -> WorkloadSpec {
    // No pods: explain reads the template, and the 2-core machine has better things to do.
    WorkloadSpec::new(Kind::Deployment, name).replicas(0)
}

fn cases() -> Vec<ExplainCase> {
    let cm = ResourceRef::configmap;
    let secret = ResourceRef::secret;
    let plain = |r: &ResourceRef| (r.clone(), Vec::new());
    let (config, db) = (cm("app-config"), secret("db"));
    let (config_1, config_2, other) = (cm("app-config-1"), cm("app-config-2"), cm("other-config"));
    let (kept, skipped) = (cm("kept"), cm("skipped"));
    let (matched, unmatched) = (cm("matched"), cm("unmatched"));
    let quiet = cm("quiet");
    let (settings, creds) = (cm("settings"), secret("creds"));
    let boot = cm("boot");
    vec![
        ExplainCase {
            name: "A3 auto via envFrom and a Secret volume",
            workload: deployment("web")
                .metadata_annotation(ANNOTATION_AUTO, "true")
                .env_from_configmap(&config.name)
                .secret_volume(&db.name),
            resources: vec![plain(&config), plain(&db)],
            expect: vec![expect(&config, "auto", Some("app")), expect(&db, "auto", Some("app"))],
            configmap_rules: "workload",
        },
        ExplainCase {
            name: "A12 explicit list with a regular expression",
            workload: deployment("web").metadata_annotation(ANNOTATION_CONFIGMAP_RELOAD, "app-config-.*"),
            resources: vec![plain(&config_1), plain(&config_2), plain(&other)],
            expect: vec![
                expect(&config_1, "explicit", Some("app")),
                expect(&config_2, "explicit", Some("app")),
            ],
            configmap_rules: "workload",
        },
        ExplainCase {
            name: "A14 exclude",
            workload: deployment("web")
                .metadata_annotation(ANNOTATION_AUTO, "true")
                .metadata_annotation(ANNOTATION_CONFIGMAP_EXCLUDE, &skipped.name)
                .env_from_configmap(&kept.name)
                .configmap_volume(&skipped.name),
            resources: vec![plain(&kept), plain(&skipped)],
            expect: vec![expect(&kept, "auto", Some("app")), expect(&skipped, "skip:excluded", None)],
            configmap_rules: "workload",
        },
        ExplainCase {
            name: "A15 search and match",
            workload: deployment("web")
                .metadata_annotation(ANNOTATION_SEARCH, "true")
                .env_from_configmap(&matched.name)
                .env_from_configmap(&unmatched.name),
            resources: vec![(matched.clone(), vec![(ANNOTATION_MATCH, "true")]), plain(&unmatched)],
            expect: vec![
                expect(&matched, "search_match", Some("app")),
                expect(&unmatched, "skip:not_annotated", None),
            ],
            configmap_rules: "workload",
        },
        ExplainCase {
            name: "A16 ignore beats an explicit annotation",
            workload: deployment("web")
                .metadata_annotation(ANNOTATION_CONFIGMAP_RELOAD, &quiet.name)
                .env_from_configmap(&quiet.name),
            resources: vec![(quiet.clone(), vec![(ANNOTATION_IGNORE, "true")])],
            expect: vec![expect(&quiet, "skip:resource_ignored", None)],
            configmap_rules: "workload",
        },
        ExplainCase {
            name: "A10 typed auto for Secrets only",
            workload: deployment("web")
                .metadata_annotation(ANNOTATION_SECRET_AUTO, "true")
                .env_from_configmap(&settings.name)
                .env_from_secret(&creds.name),
            resources: vec![plain(&settings), plain(&creds)],
            expect: vec![
                expect(&settings, "skip:not_annotated", None),
                expect(&creds, "typed_auto", Some("app")),
            ],
            configmap_rules: "none",
        },
        ExplainCase {
            name: "A17 annotations on the pod template only",
            workload: deployment("web")
                .template_annotation(ANNOTATION_AUTO, "true")
                .env_from_configmap(&settings.name),
            resources: vec![plain(&settings)],
            expect: vec![expect(&settings, "auto", Some("app"))],
            configmap_rules: "pod_template",
        },
        ExplainCase {
            name: "A6 no annotation at all",
            workload: deployment("web").env_from_configmap(&settings.name),
            resources: vec![plain(&settings)],
            expect: vec![expect(&settings, "skip:not_annotated", None)],
            configmap_rules: "none",
        },
        ExplainCase {
            name: "A3 an init container's envFrom: the marker goes on containers[0]",
            workload: deployment("web")
                .metadata_annotation(ANNOTATION_AUTO, "true")
                .containers(2)
                .init_env_from_configmap(&boot.name),
            resources: vec![plain(&boot)],
            expect: vec![expect(&boot, "auto", Some("app"))],
            configmap_rules: "workload",
        },
    ]
}

#[tokio::test]
async fn the_json_explains_each_case_of_scenarios_a() {
    let env = TestEnv::new().await;
    let TestEnv { plane, client, .. } = &env;
    for case in cases() {
        // A namespace per case: patterns and search look at every resource of the namespace.
        let ns = plane.namespace().await;
        let resources = Resources::new(client, ns.name());
        let mut hashes = Vec::new();
        for (resource, annotations) in &case.resources {
            let hash = resources.create_annotated(resource, &[("key", "v1")], annotations).await.unwrap();
            hashes.push((resource.clone(), hash));
        }
        case.workload.create(client, ns.name()).await.unwrap();

        let json = explain_json(plane, ns.name(), "deployment/web", &[]).await;
        let name = case.name;
        assert_eq!(json["workload"]["kind"], "Deployment", "{name}");
        assert_eq!(json["workload"]["namespace"], ns.name(), "{name}");
        assert_eq!(json["workload"]["name"], "web", "{name}");
        assert_eq!(json["annotations"]["in_effect"]["configmaps"], case.configmap_rules, "{name}");
        let want: Vec<String> =
            case.expect.iter().map(|e| format!("{}/{}", kind_of(&e.resource), e.resource.name)).collect();
        assert_eq!(listed(&json), want, "{name}: {json:#}");
        for e in &case.expect {
            let r = resource(&json, kind_of(&e.resource), &e.resource.name);
            let decision = &r["decision"];
            let outcome = match decision["rule"].as_str() {
                Some(rule) => rule.to_owned(),
                None => format!("skip:{}", decision["skip_reason"].as_str().unwrap_or("?")),
            };
            assert_eq!(outcome, e.outcome, "{name}: {r:#}");
            assert_eq!(decision["container"].as_str(), e.container, "{name}: {r:#}");
            assert_eq!(r["exists"], true, "{name}");
            let (_, hash) = hashes.iter().find(|(h, _)| *h == e.resource).expect("created above");
            assert_eq!(r["current_hash"], hash.as_str(), "{name}: the hash a controller would compute");
            assert_eq!(r["marker"]["state"], "none", "{name}: nothing reloaded yet");
            let next = r["next_change"].as_str().unwrap();
            match e.container {
                Some(container) => assert_eq!(
                    next,
                    format!(
                        "reload: set {} on container {container}",
                        expected_env_var(e.resource.kind, &e.resource.name)
                    ),
                    "{name}"
                ),
                None => assert!(next.starts_with("nothing: "), "{name}: {next}"),
            }
        }
    }
}

#[tokio::test]
async fn references_say_how_and_by_which_container() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let shared = ResourceRef::configmap("shared");
    resources.create(&shared, &[("key", "v1")]).await.unwrap();
    deployment("web")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .in_container(1)
        .configmap_key_ref(&shared.name)
        .projected_configmap(&shared.name)
        .init_configmap_volume(&shared.name)
        .create(client, ns.name())
        .await
        .unwrap();

    let json = explain_json(plane, ns.name(), "deploy/web", &[]).await;
    let r = resource(&json, "ConfigMap", "shared");
    let references: Vec<(&str, Option<&str>, bool)> = r["references"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["via"].as_str().unwrap(), x["container"].as_str(), x["init"].as_bool().unwrap()))
        .collect();
    // Volumes first (in volume order), then env; a volume names the container mounting it.
    assert_eq!(
        references,
        [
            ("projected", Some("sidecar-1"), false),
            ("volume", Some("init"), true),
            ("env_value_from", Some("sidecar-1"), false)
        ]
    );
    // docs/compatibility.md §4.4: the first regular container mounting a volume gets the marker.
    assert_eq!(r["decision"]["container"], "sidecar-1");
    assert_eq!(json["workload"]["containers"], serde_json::json!(["app", "sidecar-1"]));
    assert_eq!(json["workload"]["init_containers"], serde_json::json!(["init"]));
}

#[tokio::test]
async fn the_text_reads_well_for_a_newcomer() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let (config, legacy, db) =
        (ResourceRef::configmap("app-config"), ResourceRef::configmap("legacy"), ResourceRef::secret("db"));
    let config_hash = resources.create(&config, &[("mode", "fast")]).await.unwrap();
    resources.create(&legacy, &[("mode", "old")]).await.unwrap();
    resources.create(&db, &[("password", "p")]).await.unwrap();
    deployment("web")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .metadata_annotation(ANNOTATION_CONFIGMAP_EXCLUDE, &legacy.name)
        .metadata_annotation(ANNOTATION_SECRET_RELOAD, "db,missing-secret")
        .env_from_configmap(&config.name)
        .configmap_volume(&legacy.name)
        .init_env_from_secret(&db.name)
        .create(client, ns.name())
        .await
        .unwrap();

    let run = run_reloader(plane.kubeconfig_path(), &["explain", "deployment/web", "-n", ns.name()]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stderr, "");
    let text = run.stdout;
    // Shown so a person can judge it: `cargo test --test explain text -- --nocapture`.
    println!("{text}");
    let namespace = ns.name();
    for phrase in [
        format!("Deployment web in namespace {namespace}\n"),
        "  Containers:       app\n  Init containers:  init\n".to_owned(),
        "Reloader annotations\n  On the workload:      configmaps.exclude.reloader.stakater.com/reload: \"legacy\"\n"
            .to_owned(),
        "  For ConfigMaps:       the workload's annotations apply\n".to_owned(),
        "\nConfigMap app-config\n  Exists:         yes\n  Used by:        envFrom of container app\n".to_owned(),
        "  Decision:       a change reloads the workload, because reloader.stakater.com/auto is \"true\" on \
         the workload\n"
            .to_owned(),
        "  Recorded in:    env var STAKATER_APP_CONFIG_CONFIGMAP of container app\n".to_owned(),
        format!("  Data hash now:  {config_hash}\n  Last recorded:  nothing yet\n"),
        "  Next change:    reload: set STAKATER_APP_CONFIG_CONFIGMAP on container app\n".to_owned(),
        "\nConfigMap legacy\n".to_owned(),
        "  Used by:        volume mounted by container app\n".to_owned(),
        "  Next change:    nothing: configmaps.exclude.reloader.stakater.com/reload on the workload excludes it\n"
            .to_owned(),
        "\nSecret db\n".to_owned(),
        "  Used by:        envFrom of init container init\n".to_owned(),
        "  Decision:       a change reloads the workload, because secret.reloader.stakater.com/reload on the \
         workload names it\n"
            .to_owned(),
        "  Recorded in:    env var STAKATER_DB_SECRET of container app\n".to_owned(),
        "\nSecret missing-secret\n".to_owned(),
        format!("  Exists:         no, there is no Secret missing-secret in {namespace}\n"),
        "  Used by:        nothing in the pod spec\n".to_owned(),
        "  Next change:    nothing while it does not exist; creating it reloads only with \
         --reload-on-create=true, changes after that: reload: set STAKATER_MISSING_SECRET_SECRET on container app\n"
            .to_owned(),
    ] {
        assert!(text.contains(&phrase), "missing {phrase:?} in:\n{text}");
    }
    // The sections come in reading order: workload, annotations, then resources by kind and name.
    let order =
        ["Deployment web", "Reloader annotations", "ConfigMap app-config", "ConfigMap legacy", "Secret db"];
    let positions: Vec<usize> = order.iter().map(|s| text.find(s).unwrap()).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}\n{text}");
    assert!(!text.contains("Problems"), "no problem in these annotations:\n{text}");

    // YAML says the same as JSON.
    let yaml =
        run_reloader(plane.kubeconfig_path(), &["explain", "deployment/web", "-n", namespace, "-o", "yaml"])
            .await;
    assert_eq!(yaml.code, Some(0), "{yaml:?}");
    let from_yaml: Value = serde_saphyr::from_str(&yaml.stdout).unwrap();
    assert_eq!(from_yaml, explain_json(plane, namespace, "deployment/web", &[]).await);
}

#[tokio::test]
async fn after_a_reload_the_marker_matches_the_current_hash() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let config = ResourceRef::configmap("app-config");
    resources.create(&config, &[("key", "v1")]).await.unwrap();
    let web = deployment("web")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_configmap(&config.name)
        .create(client, ns.name())
        .await
        .unwrap();
    let env_var = expected_env_var(config.kind, &config.name);

    let before = explain_json(plane, ns.name(), "deployment/web", &[]).await;
    let marker = &resource(&before, "ConfigMap", "app-config")["marker"];
    assert_eq!(marker["state"], "none");
    assert_eq!(marker["recorded"], Value::Null);
    assert_eq!(marker["env_var"], env_var.as_str());

    let mut reloader = env.reloader_builder().start().await.unwrap();
    let v2 = resources.update_data(&config, &[("key", "v2")]).await.unwrap();
    web.wait_for_marker(client, &config, Strategy::EnvVars, &v2, RELOAD_TIMEOUT).await.unwrap();

    let after = explain_json(plane, ns.name(), "deployment/web", &[]).await;
    let r = resource(&after, "ConfigMap", "app-config");
    assert_eq!(r["current_hash"], v2.as_str());
    assert_eq!(r["marker"]["recorded"], v2.as_str());
    assert_eq!(r["marker"]["container"], "app");
    assert_eq!(r["marker"]["state"], "current");
    assert_eq!(r["marker"]["matches_current"], true);
    assert_eq!(r["reloads_on_controller_start"], false);
    assert!(after["other_markers"].as_array().unwrap().is_empty(), "{after:#}");

    // A change nobody applied: the record differs, and a controller starting now catches up.
    reloader.kill();
    let v3 = resources.update_data(&config, &[("key", "v3")]).await.unwrap();
    let stale = explain_json(plane, ns.name(), "deployment/web", &[]).await;
    let r = resource(&stale, "ConfigMap", "app-config");
    assert_eq!(r["current_hash"], v3.as_str());
    assert_eq!(r["marker"]["recorded"], v2.as_str());
    assert_eq!(r["marker"]["state"], "different");
    assert_eq!(r["reloads_on_controller_start"], true);
    let _restarted = env.reloader_builder().start().await.unwrap();
    web.wait_for_marker(client, &config, Strategy::EnvVars, &v3, RELOAD_TIMEOUT).await.unwrap();
    let caught_up = explain_json(plane, ns.name(), "deployment/web", &[]).await;
    assert_eq!(resource(&caught_up, "ConfigMap", "app-config")["marker"]["state"], "current");

    // Under the annotations strategy the record lives elsewhere: none yet for this workload.
    let annotations =
        explain_json(plane, ns.name(), "deployment/web", &["--reload-strategy=annotations"]).await;
    let marker = &resource(&annotations, "ConfigMap", "app-config")["marker"];
    assert_eq!(marker["annotation"], ANNOTATION_LAST_RELOADED_FROM);
    assert_eq!(marker["state"], "none");
    assert_eq!(annotations["other_markers"][0]["marker"], env_var.as_str(), "{annotations:#}");
}

#[tokio::test]
async fn secret_values_never_appear_in_any_output() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let planted = format!("planted-{}-value", ns.name());
    let token = ResourceRef::secret("api-token");
    let config = ResourceRef::configmap("app-config");
    let secret_hash = resources.create(&token, &[("token", &planted)]).await.unwrap();
    resources.create(&config, &[("greeting", "hello")]).await.unwrap();
    deployment("web")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_secret(&token.name)
        .secret_key_ref(&token.name)
        .env_from_configmap(&config.name)
        .create(client, ns.name())
        .await
        .unwrap();

    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(&planted);
    for format in ["text", "json", "yaml"] {
        let run = run_reloader(
            plane.kubeconfig_path(),
            &["explain", "deployment/web", "-n", ns.name(), "-o", format],
        )
        .await;
        assert_eq!(run.code, Some(0), "{run:?}");
        // The positive twin: the Secret was read and is explained, by its hash.
        assert!(run.stdout.contains("api-token"), "{format}: {}", run.stdout);
        assert!(run.stdout.contains(&secret_hash), "{format}: {}", run.stdout);
        for output in [&run.stdout, &run.stderr] {
            assert!(!output.contains(&planted), "{format}: the Secret's value leaked:\n{output}");
            assert!(!output.contains(&encoded), "{format}: the Secret's encoded value leaked:\n{output}");
        }
    }
}

#[tokio::test]
async fn bad_targets_and_missing_permissions_fail_clearly() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, .. } = &env;
    let kubeconfig = plane.kubeconfig_path();

    let unknown = run_reloader(kubeconfig, &["explain", "pod/web", "-n", ns.name()]).await;
    assert_eq!(unknown.code, Some(2), "{unknown:?}");
    assert_eq!(unknown.stdout, "");
    assert_eq!(
        unknown.stderr,
        "reloader: invalid workload \"pod/web\": unknown kind \"pod\"; expected deployment, daemonset, \
         statefulset, cronjob, job, rollout, deploymentconfig (or one declared with --custom-workload)\n"
    );

    let missing = run_reloader(kubeconfig, &["explain", "statefulset/nope", "-n", ns.name()]).await;
    assert_eq!(missing.code, Some(1), "{missing:?}");
    assert_eq!(
        missing.stderr,
        format!("reloader: StatefulSet nope in namespace {} was not found\n", ns.name())
    );

    let bad_flag =
        run_reloader(kubeconfig, &["explain", "deployment/web", "--reload-strategy=sometimes"]).await;
    assert_eq!(bad_flag.code, Some(2), "{bad_flag:?}");
    assert!(bad_flag.stderr.contains("--reload-strategy"), "{bad_flag:?}");

    // An identity without permissions: the API server's refusal, in one line. The namespace
    // comes from the kubeconfig (no -n).
    deployment("web").create(client, ns.name()).await.unwrap();
    let restricted = KubeconfigFile::for_service_account(plane, ns.name(), "nobody").await.unwrap();
    let forbidden = run_reloader(restricted.path(), &["explain", "deployment/web"]).await;
    assert_eq!(forbidden.code, Some(1), "{forbidden:?}");
    let stderr = forbidden.stderr.trim_end();
    assert!(!stderr.contains('\n'), "one line: {stderr}");
    assert!(stderr.starts_with(&format!("reloader: reading Deployment {}/web: ", ns.name())), "{stderr}");
    assert!(stderr.ends_with("(Forbidden, HTTP 403)"), "{stderr}");
    // The positive twin: the same command as admin works.
    let admin = run_reloader(kubeconfig, &["explain", "deployment/web", "-n", ns.name()]).await;
    assert_eq!(admin.code, Some(0), "{admin:?}");
}
