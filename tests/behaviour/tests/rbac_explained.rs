//! Switching day with Stakater's RBAC (docs/behaviour.md, "Missing RBAC"): the real binary runs
//! with a real ServiceAccount token bound to the Role Stakater Reloader v1.4.21's chart renders
//! for a scoped install (no `watch` on workloads, core `events`, no `--is-openshift`). It says in
//! one log line per missing permission which rule to add, is not ready, keeps running, skips the
//! auto-detected DeploymentConfig kind with one warning instead of a 403 loop, and becomes ready
//! once the rule is added, without a restart. `--log-level` takes every name Stakater takes.

use std::time::Duration;

use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Client;
use kube::api::{Api, PostParams};
use reloader_harness::{KubeconfigFile, NotYet, Reloader, wait_until};
use reloader_tests::fixtures::TestEnv;
use reloader_tests::fixtures_extra::wait_for_log;
use serde_json::{Value, json};

const ACCOUNT: &str = "reloader-reloader";
const WAIT: Duration = Duration::from_secs(60);

/// The rules of Stakater v1.4.21's chart Role (`reloader-namespaced-rules`, default values,
/// `watchGlobally: false`), as it renders them.
fn stakater_chart_rules() -> Value {
    json!([
        { "apiGroups": [""], "resources": ["secrets", "configmaps"], "verbs": ["list", "get", "watch"] },
        {
            "apiGroups": ["apps"],
            "resources": ["deployments", "daemonsets", "statefulsets"],
            "verbs": ["list", "get", "update", "patch"],
        },
        { "apiGroups": ["batch"], "resources": ["cronjobs"], "verbs": ["list", "get"] },
        { "apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "delete", "list", "get"] },
        { "apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"] },
    ])
}

async fn grant(client: &Client, namespace: &str, role_name: &str, rules: Value) {
    let role: Role =
        serde_json::from_value(json!({ "metadata": { "name": role_name }, "rules": rules })).unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": { "name": role_name },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name },
        "subjects": [{ "kind": "ServiceAccount", "name": ACCOUNT, "namespace": namespace }],
    }))
    .unwrap();
    Api::<Role>::namespaced(client.clone(), namespace).create(&PostParams::default(), &role).await.unwrap();
    Api::<RoleBinding>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

fn rbac_lines(log: &str) -> Vec<&str> {
    log.lines().filter(|l| l.contains("RBAC: reloader may not")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stakaters_rbac_is_explained_rule_by_rule_and_never_crash_loops() {
    // The CRDs are served, so DeploymentConfig is detected (no --is-openshift flag).
    let env = TestEnv::with_crds().await;
    let TestEnv { plane, ns, client, .. } = &env;
    let ns = ns.name();
    let kubeconfig = KubeconfigFile::for_service_account(plane, ns, ACCOUNT).await.unwrap();
    grant(client, ns, "reloader-reloader-role", stakater_chart_rules()).await;

    let mut reloader = Reloader::builder(plane)
        .name("reloader-stakater-rbac")
        .kubeconfig(kubeconfig.path())
        .args([format!("--namespaces={ns}"), "--log-level=warn".to_owned()])
        .no_wait()
        .start()
        .await
        .unwrap();
    let missing = [
        ("watch", "deployments", "apps"),
        ("watch", "daemonsets", "apps"),
        ("watch", "statefulsets", "apps"),
        ("watch", "cronjobs", "batch"),
        ("watch", "jobs", "batch"),
    ];
    wait_for_log(&reloader, "the RBAC explanations", WAIT, |log| rbac_lines(log).len() >= missing.len())
        .await
        .unwrap();
    // Some seconds of watches failing and retrying.
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(reloader.exit_status(), None, "still running, not crash-looping");
    assert_eq!(reloader.get("/live").await.unwrap().0, 200, "live");
    assert_ne!(reloader.get("/readyz").await.unwrap().0, 200, "not ready: it cannot watch workloads");

    let log = reloader.log_text();
    let lines = rbac_lines(&log);
    assert_eq!(lines.len(), missing.len(), "one line per missing permission: {lines:#?}");
    for (verb, resource, group) in missing {
        let rule = format!(
            r#"add the rule {{apiGroups: ["{group}"], resources: ["{resource}"], verbs: ["{verb}"]}}"#
        );
        let found: Vec<&&str> = lines.iter().filter(|l| l.contains(&rule)).collect();
        assert_eq!(found.len(), 1, "{rule} once: {lines:#?}");
        assert!(found[0].contains(&format!("in namespace {ns}")) && found[0].contains("reloader's chart"));
    }
    // The auto-detected kind RBAC forbids: one warning, then never touched (no 403 loop).
    let openshift: Vec<&str> = log.lines().filter(|l| l.contains("deploymentconfigs")).collect();
    assert_eq!(openshift.len(), 1, "one line about DeploymentConfigs: {openshift:#?}");
    assert!(
        openshift[0].contains("WARN")
            && openshift[0].contains("not watched")
            && openshift[0].contains("--is-openshift=false"),
        "{}",
        openshift[0]
    );
    // --log-level=warn: info is filtered out.
    assert!(!log.lines().any(|l| l.contains(" INFO ")), "warn hides info:\n{log}");

    // The positive twin: with the rule added, the same process becomes ready on its next check.
    grant(client, ns, "reloader-watch-workloads", json!([
        { "apiGroups": ["apps"], "resources": ["deployments", "daemonsets", "statefulsets"], "verbs": ["watch"] },
        { "apiGroups": ["batch"], "resources": ["cronjobs", "jobs"], "verbs": ["watch"] },
    ]))
    .await;
    wait_until("ready once watch is granted", Duration::from_secs(90), || async {
        let (status, body) = reloader.get("/readyz").await?;
        if status == 200 { Ok(()) } else { Err(NotYet::because(format!("{status} {body}"))) }
    })
    .await
    .unwrap();
    assert_eq!(reloader.exit_status(), None, "the same process");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_log_level_stakater_accepts_starts() {
    let env = TestEnv::new().await;
    for level in ["trace", "debug", "info", "warn", "warning", "error", "fatal", "panic"] {
        let reloader = env
            .reloader_builder()
            .name(format!("reloader-level-{level}"))
            .arg(format!("--log-level={level}"))
            .start()
            .await
            .unwrap_or_else(|e| panic!("--log-level={level}: {e}"));
        let log = reloader.log_text();
        let has_info = log.lines().any(|l| l.contains(" INFO "));
        let expects_info = matches!(level, "trace" | "debug" | "info");
        assert_eq!(has_info, expects_info, "--log-level={level}:\n{log}");
    }
}

/// A run that watches all namespaces, with every permission granted by a RoleBinding in one
/// namespace only: each read is explained as missing in all namespaces. The check reads the
/// rules granted everywhere, not a namespace's, and asks the API server about each one they lack.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_bound_in_one_namespace_is_not_taken_for_all_namespaces() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, .. } = &env;
    let ns = ns.name();
    let kubeconfig = KubeconfigFile::for_service_account(plane, ns, ACCOUNT).await.unwrap();
    grant(
        client,
        ns,
        "reloader-everything-here",
        json!([
            { "apiGroups": ["*"], "resources": ["*"], "verbs": ["*"] },
        ]),
    )
    .await;

    let reloader = Reloader::builder(plane)
        .name("reloader-role-not-cluster-wide")
        .kubeconfig(kubeconfig.path())
        .args(["--log-level=warn"])
        .no_wait()
        .start()
        .await
        .unwrap();
    let reads = [
        ("list", "configmaps", ""),
        ("watch", "configmaps", ""),
        ("list", "secrets", ""),
        ("watch", "secrets", ""),
        ("list", "deployments", "apps"),
        ("watch", "deployments", "apps"),
    ];
    let explained = |log: &str, (verb, resource, group): (&str, &str, &str)| {
        rbac_lines(log).iter().any(|l| {
            l.contains(&format!(r#"may not {verb} {resource} (apiGroup "{group}") in all namespaces"#))
        })
    };
    wait_for_log(&reloader, "the RBAC explanations", WAIT, |log| {
        reads.iter().all(|read| explained(log, *read))
    })
    .await
    .unwrap();
    assert_ne!(reloader.get("/readyz").await.unwrap().0, 200, "not ready: it cannot watch all namespaces");
}
