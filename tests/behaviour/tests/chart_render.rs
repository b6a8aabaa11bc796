//! The Helm chart rendered without a cluster, one table row per values set: `helm lint --strict`
//! passes, and `helm template` gives the controller exactly the flags and environment the values
//! call for, grants the chart's ServiceAccount exactly the RBAC of docs/compatibility.md §13, and
//! renders each set's details (HA, webhook, network policy, monitors...). Values that break the
//! schema or combine badly are refused with a message naming the key, and a values file written
//! for Stakater's chart 2.2.16 (and 2.2.17), with all its keys, renders.
//!
//! The expectations are written from docs/compatibility.md §1/§2/§13, independently of the
//! templates. That the granted RBAC is enough and each rule needed is proven with the real binary
//! on a real API server by `chart_rbac`; that each registered kind gets the registry's verbs by
//! `chart_kinds`.

#![recursion_limit = "256"] // the Stakater 2.2.16 values file is one deep `json!`

use std::collections::BTreeSet;

use reloader_tests::chart::{Helm, Manifest, WRITE_FENCE_API};
use serde_json::{Map, Value, json};

const RELEASE: &str = "rel";
const NAMESPACE: &str = "ops";
const FULLNAME: &str = "rel-reloader";
const MONITORING_APIS: &[&str] = &["monitoring.coreos.com/v1", "autoscaling.k8s.io/v1"];

/// `custom_annotations` keys and the flags they become.
const ANNOTATION_FLAGS: [(&str, &str); 10] = [
    ("configmap", "--configmap-annotation"),
    ("secret", "--secret-annotation"),
    ("auto", "--auto-annotation"),
    ("secret_auto", "--secret-auto-annotation"),
    ("configmap_auto", "--configmap-auto-annotation"),
    ("search", "--auto-search-annotation"),
    ("match", "--search-match-annotation"),
    ("ignore", "--ignore-annotation"),
    ("pausePeriod", "--pause-deployment-annotation"),
    ("pauseTime", "--pause-deployment-time-annotation"),
];

type Check = Result<(), String>;

fn ensure(condition: bool, message: impl Into<String>) -> Check {
    if condition { Ok(()) } else { Err(message.into()) }
}

/// One values set: what is given to helm, and what the set checks beyond the common checks.
struct Row {
    name: &'static str,
    values: Value,
    api_versions: &'static [&'static str],
    details: Option<fn(&Rendered) -> Check>,
}

/// Where the test's API server connects from: `helm template` cannot look it up.
const API_SERVER_PEER: &str = "172.16.0.10/32";
const CLIENT_CA_PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

/// `over` with the webhook enabled and the API server's address given.
fn webhook_on(over: Value) -> Value {
    merge(
        &json!({"webhook": {"enabled": true, "networkPolicy": {"from": [{"ipBlock": {"cidr": API_SERVER_PEER}}]}}}),
        &over,
    )
}

fn row(name: &'static str, values: Value, details: Option<fn(&Rendered) -> Check>) -> Row {
    Row { name, values, api_versions: &[], details }
}

fn rows() -> Vec<Row> {
    let every_annotation: Map<String, Value> = ANNOTATION_FLAGS
        .iter()
        .map(|(key, _)| (key.to_string(), json!(format!("example.com/{key}"))))
        .collect();
    vec![
        row("default", json!({}), Some(no_webhook)),
        row("watchGlobally=false", json!({"reloader": {"watchGlobally": false}}), Some(namespaced_single)),
        row("restartByEviction=true", json!({"reloader": {"restartByEviction": true}}), None),
        row(
            "restartByEviction=true, namespaced",
            json!({"reloader": {"restartByEviction": true, "watchGlobally": false, "namespaces": ["a", "b"]}}),
            Some(namespaced_ab),
        ),
        row(
            "restartByEviction=true, dry run",
            json!({"reloader": {"restartByEviction": true, "dryRun": true}}),
            None,
        ),
        row("reloadPods=true", json!({"reloader": {"reloadPods": true}}), None),
        row(
            "reloadPods=true, restartByEviction=true, namespaced",
            json!({"reloader": {"reloadPods": true, "restartByEviction": true, "watchGlobally": false, "namespaces": ["a", "b"]}}),
            Some(namespaced_ab),
        ),
        row("reloadPods=true, dry run", json!({"reloader": {"reloadPods": true, "dryRun": true}}), None),
        row(
            "namespaces=[a,b]",
            json!({"reloader": {"watchGlobally": false, "namespaces": ["a", "b"]}}),
            Some(namespaced_ab),
        ),
        row(
            "namespaces as a string",
            json!({"reloader": {"watchGlobally": false, "namespaces": "a, b"}}),
            Some(namespaced_ab),
        ),
        row(
            "namespaces naming the release namespace",
            json!({"reloader": {"watchGlobally": false, "namespaces": ["b", NAMESPACE, "a", "b"]}}),
            Some(namespaced_ab),
        ),
        row(
            "enableHA=true replicas=2",
            json!({"reloader": {"enableHA": true, "deployment": {"replicas": 2},
                                "podDisruptionBudget": {"enabled": true, "minAvailable": 1}}}),
            Some(ha),
        ),
        row(
            "enableHA with Stakater 2.2.17's leaderElection timings and id",
            json!({"reloader": {"enableHA": true, "deployment": {"replicas": 2},
                "podDisruptionBudget": {"enabled": true, "minAvailable": 1}, "leaderElection": {
                "leaseDuration": "30s", "renewDeadline": "20s", "retryPeriod": "4s", "id": "team-a-lock"}}}),
            Some(ha),
        ),
        row(
            "leaderElection without enableHA: no flags",
            json!({"reloader": {"leaderElection": {"leaseDuration": "30s", "id": "team-a-lock"}}}),
            None,
        ),
        row(
            "replicas=3 without enableHA",
            json!({"reloader": {"deployment": {"replicas": 3}}}),
            Some(replicas_capped),
        ),
        row("isArgoRollouts=true", json!({"reloader": {"isArgoRollouts": true}}), None),
        row("isOpenshift=true", json!({"reloader": {"isOpenshift": true}}), None),
        row("reloadStrategy=annotations", json!({"reloader": {"reloadStrategy": "annotations"}}), None),
        row("ignoreSecrets=true", json!({"reloader": {"ignoreSecrets": true}}), None),
        row(
            "ignoreConfigMaps=true namespaced",
            json!({"reloader": {"ignoreConfigMaps": true, "watchGlobally": false}}),
            None,
        ),
        row("ignoreJobs=true", json!({"reloader": {"ignoreJobs": true}}), None),
        row("ignoreCronJobs=true", json!({"reloader": {"ignoreCronJobs": true}}), None),
        row(
            "ignoreJobs+ignoreCronJobs",
            json!({"reloader": {"ignoreJobs": true, "ignoreCronJobs": true}}),
            None,
        ),
        row("enableCSIIntegration=true", json!({"reloader": {"enableCSIIntegration": true}}), None),
        row(
            "namespaceSelector global",
            json!({"reloader": {"namespaceSelector": "team=a,env in (prod)", "ignoreNamespaces": "x, y",
                                "resourceLabelSelector": "r=1"}}),
            None,
        ),
        row(
            "namespaceSelector namespaced",
            json!({"reloader": {"namespaceSelector": "team=a", "ignoreNamespaces": "x", "watchGlobally": false}}),
            None,
        ),
        row(
            "every flag",
            json!({"reloader": {
                "autoReloadAll": true, "reloadOnCreate": true, "reloadOnDelete": true, "syncAfterRestart": true,
                "logFormat": "json", "logLevel": "debug", "enablePProf": true, "pprofAddr": ":7070",
                "enableMetricsByNamespace": true, "webhookUrl": "https://hooks.example.com/x",
                "custom_annotations": every_annotation,
                "coalescePeriod": "2s", "maxWritesPerSecond": 50, "dryRun": true,
                "maintenanceWindow": "Mon-Fri 02:00-04:00 Europe/Berlin", "loopGuard": "5/1m",
                "ignoredSecretTypes": ["helm.sh/release.v1", "kubernetes.io/service-account-token"]}}),
            None,
        ),
        row(
            "webhookUrl without custom_annotations",
            json!({"reloader": {"webhookUrl": "http://sink:8080/"}}),
            None,
        ),
        row(
            "ignoredSecretTypes=[] watches every type",
            json!({"reloader": {"ignoredSecretTypes": []}}),
            None,
        ),
        row("webhook enabled", webhook_on(json!({})), Some(webhook_generated)),
        row(
            "webhook with argo and openshift",
            webhook_on(json!({"reloader": {"isArgoRollouts": true, "isOpenshift": true}})),
            Some(webhook_generated),
        ),
        row(
            "webhook with cert-manager",
            webhook_on(json!({"webhook": {"certManager": {"enabled": true}}})),
            Some(webhook_cert_manager),
        ),
        row(
            "webhook namespaced",
            webhook_on(json!({"reloader": {"watchGlobally": false, "namespaces": ["a", "b"]}})),
            Some(webhook_namespaced),
        ),
        row(
            "webhook with a client CA, netpol on",
            webhook_on(json!({
                "webhook": {"clientCA": {"pem": CLIENT_CA_PEM}},
                "reloader": {"netpol": {"enabled": true}},
            })),
            Some(webhook_client_ca),
        ),
        row(
            "webhook with a client CA ConfigMap, no network policy",
            json!({"webhook": {"enabled": true, "clientCA": {"configMap": "apiserver-ca", "key": "bundle.pem"},
                "networkPolicy": {"enabled": false}}}),
            Some(webhook_client_ca),
        ),
        Row {
            name: "write fence, where the API server serves ValidatingAdmissionPolicy",
            values: json!({"reloader": {"isArgoRollouts": true, "isOpenshift": true,
                "custom_annotations": {"pauseTime": "example.com/paused-at"}}}),
            api_versions: &[WRITE_FENCE_API],
            details: Some(write_fence),
        },
        Row {
            name: "write fence opted out",
            values: json!({"writeFence": {"enabled": false}, "webhook": {"enabled": true,
                "networkPolicy": {"enabled": false}}}),
            api_versions: &[WRITE_FENCE_API],
            details: Some(write_fence),
        },
        Row {
            name: "write fence with the webhook: Jobs fenced too",
            values: json!({"webhook": {"enabled": true, "networkPolicy": {"enabled": false}},
                "serviceAccount": {"name": "rl-sa"}}),
            api_versions: &[WRITE_FENCE_API],
            details: Some(write_fence),
        },
        Row {
            name: "write fence with the webhook, CronJobs only",
            values: json!({"webhook": {"enabled": true, "networkPolicy": {"enabled": false}},
                "reloader": {"ignoreJobs": true}}),
            api_versions: &[WRITE_FENCE_API],
            details: Some(write_fence),
        },
        Row {
            name: "write fence with the webhook, no Jobs created",
            values: json!({"webhook": {"enabled": true, "networkPolicy": {"enabled": false}},
                "reloader": {"ignoreJobs": true, "ignoreCronJobs": true}}),
            api_versions: &[WRITE_FENCE_API],
            details: Some(write_fence),
        },
        Row {
            name: "Job fence alone: cert-manager and the API server's addresses given",
            values: json!({"webhook": {"certManager": {"enabled": true},
                "networkPolicy": {"from": [{"ipBlock": {"cidr": "172.16.0.0/28"}}]}}}),
            api_versions: &[WRITE_FENCE_API],
            details: Some(job_fence_alone),
        },
        Row {
            name: "Job fence alone: an existing Secret, no network policy",
            values: json!({"webhook": {"tls": {"existingSecret": "my-tls", "caBundle": "Y2E="},
                "networkPolicy": {"enabled": false}}}),
            api_versions: &[WRITE_FENCE_API],
            details: Some(job_fence_alone),
        },
        Row {
            name: "Job fence alone: cert-manager, the API server's addresses unknown",
            values: json!({"webhook": {"certManager": {"enabled": true}}}),
            api_versions: &[WRITE_FENCE_API],
            details: Some(job_fence_alone),
        },
        Row {
            name: "Job fence forced on (writeFence.jobs=true)",
            values: json!({"writeFence": {"jobs": true}, "webhook": {"networkPolicy": {"enabled": false}}}),
            api_versions: &[WRITE_FENCE_API],
            details: Some(job_fence_alone),
        },
        Row {
            name: "Job fence auto, helm template with no certificate source: not rendered",
            values: json!({"webhook": {"networkPolicy": {"from": [{"ipBlock": {"cidr": "10.0.0.1/32"}}]}}}),
            api_versions: &[WRITE_FENCE_API],
            details: Some(write_fence),
        },
        Row {
            name: "Job fence off (writeFence.jobs=false) with the webhook",
            values: json!({"writeFence": {"jobs": false}, "webhook": {"enabled": true,
                "networkPolicy": {"enabled": false}}}),
            api_versions: &[WRITE_FENCE_API],
            details: Some(write_fence),
        },
        row(
            "webhook where the API server serves no ValidatingAdmissionPolicy: no Job fence",
            json!({"webhook": {"enabled": true, "networkPolicy": {"enabled": false}}}),
            Some(write_fence),
        ),
        Row {
            name: "netpol, monitors, PDB, VPA",
            values: json!({"reloader": {
                "netpol": {"enabled": true, "from": [{"podSelector": {"matchLabels": {"app": "prometheus"}}}]},
                "serviceMonitor": {"enabled": true}, "podMonitor": {"enabled": true},
                "podDisruptionBudget": {"enabled": true}, "verticalPodAutoscaler": {"enabled": true},
                "readOnlyRootFileSystem": true}}),
            api_versions: MONITORING_APIS,
            details: Some(extras),
        },
        row(
            "rbac and serviceAccount off",
            json!({"reloader": {"rbac": {"enabled": false},
                                "serviceAccount": {"create": false, "name": "existing-sa"}}}),
            Some(no_rbac),
        ),
        row("Stakater 2.2.16 values file", stakater_2_2_16(), Some(stakater_file)),
        row("Stakater 2.2.17 values file", stakater_2_2_17(), Some(stakater_file)),
        row("Stakater chart 1.x image keys", stakater_1_x(), Some(legacy_image)),
        row(
            "Stakater chart 1.x image keys under global.imageRegistry",
            merge(&stakater_1_x(), &json!({"global": {"imageRegistry": "mirror.example.com/"}})),
            Some(legacy_image_registry),
        ),
        row(
            "Stakater chart 1.x image pinned by digest",
            json!({"reloader": {"deployment": {"image": {"name": "ghcr.io/stakater/reloader",
                                                           "digest": "sha256:1234567", "tag": 1.3}}}}),
            Some(legacy_image_digest),
        ),
        row("Stakater chart 2.0.0 values file", stakater_2_0_0(), None),
    ]
}

/// Values that must be refused, and a piece of the message that must name the problem.
const REJECTED: &[(&str, &str, &str)] = &[
    ("reloader.reloadStrategy=foo", r#"{"reloader": {"reloadStrategy": "foo"}}"#, "/reloader/reloadStrategy"),
    ("reloader.enableHA=notabool", r#"{"reloader": {"enableHA": "notabool"}}"#, "/reloader/enableHA"),
    (
        "reloader.leaderElection with a misspelt key",
        r#"{"reloader": {"leaderElection": {"leaseDurationSeconds": "30"}}}"#,
        "leaseDurationSeconds",
    ),
    ("reloader.logFormat=xml", r#"{"reloader": {"logFormat": "xml"}}"#, "/reloader/logFormat"),
    ("typo under reloader", r#"{"reloader": {"enableHa": true}}"#, "'enableHa' not allowed"),
    (
        "typo under reloader.deployment",
        r#"{"reloader": {"deployment": {"replica": 2}}}"#,
        "'replica' not allowed",
    ),
    ("typo under webhook", r#"{"webhook": {"enable": true}}"#, "'enable' not allowed"),
    (
        "replicas as a string",
        r#"{"reloader": {"deployment": {"replicas": "2"}}}"#,
        "/reloader/deployment/replicas",
    ),
    ("bad coalescePeriod", r#"{"reloader": {"coalescePeriod": "2 seconds"}}"#, "/reloader/coalescePeriod"),
    ("bad loopGuard", r#"{"reloader": {"loopGuard": "often"}}"#, "/reloader/loopGuard"),
    ("webhook failurePolicy", r#"{"webhook": {"failurePolicy": "Maybe"}}"#, "/webhook/failurePolicy"),
    (
        "both resource types ignored",
        r#"{"reloader": {"ignoreSecrets": true, "ignoreConfigMaps": true}}"#,
        "ignoreConfigMaps are both true",
    ),
    (
        "namespaces with watchGlobally=true",
        r#"{"reloader": {"namespaces": ["a"]}}"#,
        "reloader.watchGlobally is true",
    ),
    (
        "webhook in a namespace it excludes",
        r#"{"webhook": {"enabled": true}, "reloader": {"watchGlobally": false}}"#,
        "excluded from the webhook",
    ),
    (
        "webhook network policy with no API server address",
        r#"{"webhook": {"enabled": true}}"#,
        "set webhook.networkPolicy.from",
    ),
    (
        "webhook existing Secret without CA",
        r#"{"webhook": {"enabled": true, "tls": {"existingSecret": "x"}}}"#,
        "webhook.tls.caBundle is empty",
    ),
];

#[test]
fn each_values_set_lints_and_renders_what_it_asks_for() {
    let helm = helm();
    let mut failures = Vec::new();
    let rows = rows();
    for row in &rows {
        if let Err(failure) = check_row(&helm, row) {
            failures.push(format!("{}: {failure}", row.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} values sets fail:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}

#[test]
fn invalid_values_are_refused_naming_the_key() {
    let helm = helm();
    let mut failures = Vec::new();
    for (name, values, needle) in REJECTED {
        let values: Value = serde_json::from_str(values).expect("a JSON values document");
        match helm.template(RELEASE, NAMESPACE, &values) {
            Ok(_) => failures.push(format!("{name}: rendered, but must be refused")),
            Err(error) if !error.to_string().contains(needle) => {
                failures.push(format!("{name}: refused without a message naming '{needle}': {error}"))
            }
            Err(_) => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn helm() -> Helm {
    Helm::locate().expect("helm from the dev cache (hack/build helm)")
}

fn check_row(helm: &Helm, row: &Row) -> Check {
    helm.lint(NAMESPACE, &row.values).map_err(|e| format!("helm lint: {e}"))?;
    let manifest = helm
        .template_with_apis(RELEASE, NAMESPACE, &row.values, row.api_versions)
        .map_err(|e| format!("helm template: {e}"))?;
    let values = merge(&defaults(), &row.values);
    let rendered = check_common(&manifest, &values, row.api_versions)?;
    row.details.map_or(Ok(()), |details| details(&rendered))
}

// ---------------------------------------------------------------------------------------------
// Expectations, written from docs/compatibility.md §1/§2/§13 independently of the templates.

/// The chart's defaults for every key the expectations read.
fn defaults() -> Value {
    json!({
        "reloader": {
            "autoReloadAll": false, "isArgoRollouts": false, "isOpenshift": false,
            "ignoreSecrets": false, "ignoreConfigMaps": false, "ignoreJobs": false, "ignoreCronJobs": false,
            "reloadOnCreate": false, "reloadOnDelete": false, "syncAfterRestart": false,
            "reloadStrategy": "default", "ignoreNamespaces": "", "namespaceSelector": "",
            "resourceLabelSelector": "", "logFormat": "", "logLevel": "info", "watchGlobally": true,
            "namespaces": [], "enableHA": false, "enablePProf": false, "pprofAddr": "127.0.0.1:6060",
            "enableCSIIntegration": false, "enableMetricsByNamespace": false, "webhookUrl": "",
            "custom_annotations": {}, "coalescePeriod": "", "maxWritesPerSecond": null, "dryRun": false,
            "maintenanceWindow": "", "loopGuard": "",
            "ignoredSecretTypes": null, "readOnlyRootFileSystem": false,
            "deployment": {"replicas": 1},
            "rbac": {"enabled": true},
        },
        "webhook": {"enabled": false, "port": 9443, "clientCA": {"pem": "", "configMap": "", "key": "ca.crt"},
            "networkPolicy": {"enabled": true, "from": []}, "certManager": {"enabled": false},
            "tls": {"existingSecret": ""}},
        "writeFence": {"enabled": true, "jobs": "auto"},
    })
}

/// Whether `helm template` (which looks nothing up in a cluster) renders the Job fence, as
/// values.yaml documents `writeFence.jobs`: with the policy and Jobs to create, "true" always,
/// "auto" with the webhook or a certificate that survives re-renders.
fn job_fence_served(values: &Value, api_versions: &[&str]) -> bool {
    let (r, w, jobs) = (&values["reloader"], &values["webhook"], &values["writeFence"]["jobs"]);
    let creates_jobs = !(on(&r["ignoreJobs"]) && on(&r["ignoreCronJobs"]));
    let policy = on(&values["writeFence"]["enabled"]) && api_versions.contains(&WRITE_FENCE_API);
    let kept_certificate = on(&w["certManager"]["enabled"]) || !text(&w["tls"]["existingSecret"]).is_empty();
    policy && creates_jobs && *jobs != false && (*jobs == true || on(&w["enabled"]) || kept_certificate)
}

/// `over` on top of `base`, objects merged key by key as helm merges values files.
fn merge(base: &Value, over: &Value) -> Value {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            let mut merged = base.clone();
            for (key, value) in over {
                let next = match merged.get(key) {
                    Some(existing) if existing.is_object() && value.is_object() => merge(existing, value),
                    _ => value.clone(),
                };
                merged.insert(key.clone(), next);
            }
            Value::Object(merged)
        }
        _ => over.clone(),
    }
}

/// A comma-separated string or a list, trimmed, empty items dropped.
fn csv(value: &Value) -> Vec<String> {
    let items: Vec<&str> = match value {
        Value::String(text) => text.split(',').collect(),
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    items.into_iter().map(str::trim).filter(|item| !item.is_empty()).map(str::to_owned).collect()
}

fn on(value: &Value) -> bool {
    value.as_bool().unwrap_or(false)
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

/// Scoped mode's namespaces as Stakater's chart 2.x computes them: the release namespace plus
/// `reloader.namespaces`, unique and sorted; empty when `reloader.namespaces` is.
fn scoped_namespaces(r: &Value) -> Vec<String> {
    let given = csv(&r["namespaces"]);
    if given.is_empty() {
        return given;
    }
    let all: BTreeSet<String> = given.into_iter().chain([NAMESPACE.to_owned()]).collect();
    all.into_iter().collect()
}

fn expected_args(values: &Value, api_versions: &[&str]) -> Vec<String> {
    let r = &values["reloader"];
    let mut args = Vec::new();
    if !text(&r["logFormat"]).is_empty() {
        args.push(format!("--log-format={}", text(&r["logFormat"])));
    }
    if !text(&r["logLevel"]).is_empty() {
        args.push(format!("--log-level={}", text(&r["logLevel"])));
    }
    if on(&r["ignoreSecrets"]) {
        args.push("--resources-to-ignore=secrets".into());
    }
    if on(&r["ignoreConfigMaps"]) {
        args.push("--resources-to-ignore=configmaps".into());
    }
    let ignored_kinds: Vec<&str> = [("jobs", "ignoreJobs"), ("cronjobs", "ignoreCronJobs")]
        .into_iter()
        .filter(|(_, key)| on(&r[key]))
        .map(|(kind, _)| kind)
        .collect();
    if !ignored_kinds.is_empty() {
        args.push(format!("--ignored-workload-types={}", ignored_kinds.join(",")));
    }
    if on(&r["watchGlobally"]) {
        for (key, flag) in
            [("ignoreNamespaces", "--namespaces-to-ignore"), ("namespaceSelector", "--namespace-selector")]
        {
            let items = csv(&r[key]);
            if !items.is_empty() {
                args.push(format!("{flag}={}", items.join(",")));
            }
        }
    } else if !scoped_namespaces(r).is_empty() {
        args.push(format!("--namespaces={}", scoped_namespaces(r).join(",")));
    }
    if !csv(&r["resourceLabelSelector"]).is_empty() {
        args.push(format!("--resource-label-selector={}", csv(&r["resourceLabelSelector"]).join(",")));
    }
    if on(&r["isArgoRollouts"]) {
        args.push("--is-Argo-Rollouts=true".into());
    }
    args.push(format!("--is-openshift={}", on(&r["isOpenshift"])));
    for (key, flag) in [
        ("reloadOnCreate", "--reload-on-create"),
        ("reloadOnDelete", "--reload-on-delete"),
        ("syncAfterRestart", "--sync-after-restart"),
        ("enableHA", "--enable-ha"),
        ("autoReloadAll", "--auto-reload-all"),
        ("enableCSIIntegration", "--enable-csi-integration"),
    ] {
        if on(&r[key]) {
            args.push(format!("{flag}=true"));
        }
    }
    if on(&r["enableHA"]) {
        // Stakater's chart 2.2.17: each timing, and the Lease's name, only when set.
        for (key, flag) in [
            ("leaseDuration", "--leader-election-lease-duration"),
            ("renewDeadline", "--leader-election-renew-deadline"),
            ("retryPeriod", "--leader-election-retry-period"),
            ("id", "--leader-election-id"),
        ] {
            if !text(&r["leaderElection"][key]).is_empty() {
                args.push(format!("{flag}={}", text(&r["leaderElection"][key])));
            }
        }
    }
    if text(&r["reloadStrategy"]) != "default" {
        args.push(format!("--reload-strategy={}", text(&r["reloadStrategy"])));
    }
    if on(&r["enablePProf"]) {
        args.push("--enable-pprof".into());
        args.push(format!("--pprof-addr={}", text(&r["pprofAddr"])));
    }
    for (key, flag) in ANNOTATION_FLAGS {
        let annotation = text(&r["custom_annotations"][key]);
        if !annotation.is_empty() {
            args.push(format!("{flag}={annotation}"));
        }
    }
    if !text(&r["webhookUrl"]).is_empty() {
        args.push(format!("--webhook-url={}", text(&r["webhookUrl"])));
    }
    if !text(&r["coalescePeriod"]).is_empty() {
        args.push(format!("--coalesce-period={}", text(&r["coalescePeriod"])));
    }
    if !text(&r["maintenanceWindow"]).is_empty() {
        args.push(format!("--maintenance-window={}", text(&r["maintenanceWindow"])));
    }
    if !text(&r["loopGuard"]).is_empty() {
        args.push(format!("--loop-guard={}", text(&r["loopGuard"])));
    }
    if !r["maxWritesPerSecond"].is_null() {
        args.push(format!("--max-writes-per-second={}", r["maxWritesPerSecond"]));
    }
    if on(&r["dryRun"]) {
        args.push("--dry-run".into());
    }
    if on(&r["restartByEviction"]) {
        args.push("--restart-by-eviction=true".into());
    }
    if on(&r["reloadPods"]) {
        args.push("--reload-pods=true".into());
    }
    if !r["ignoredSecretTypes"].is_null() {
        args.push(format!("--ignored-secret-types={}", csv(&r["ignoredSecretTypes"]).join(",")));
    }
    if on(&values["webhook"]["enabled"]) {
        args.push("--admission-webhook".into());
    }
    if job_fence_served(values, api_versions) {
        args.push("--job-fence".into());
    }
    if on(&values["webhook"]["enabled"]) || job_fence_served(values, api_versions) {
        args.push("--webhook-tls-cert=/tls/tls.crt".into());
        args.push("--webhook-tls-key=/tls/tls.key".into());
        args.push(format!("--webhook-addr=:{}", values["webhook"]["port"]));
        let client_ca = &values["webhook"]["clientCA"];
        if !text(&client_ca["pem"]).is_empty() || !text(&client_ca["configMap"]).is_empty() {
            args.push(format!("--webhook-client-ca=/client-ca/{}", text(&client_ca["key"])));
        }
    }
    args.sort();
    args
}

/// One permission: (scope, apiGroup, resource, verb); scope is "cluster" or a namespace.
type Grant = (String, String, String, String);

fn expected_grants(values: &Value) -> BTreeSet<Grant> {
    let r = &values["reloader"];
    let mut grants = BTreeSet::new();
    if !on(&r["rbac"]["enabled"]) {
        return grants;
    }
    let mut grant = |scope: &str, group: &str, resources: &[&str], verbs: &[&str]| {
        for resource in resources {
            for verb in verbs {
                grants.insert((scope.into(), group.into(), resource.to_string(), verb.to_string()));
            }
        }
    };
    // What the binary does (proven on a real API server by `chart_rbac`): watches list+watch; a
    // reload GETs the workload and PATCHes it; no UPDATE of workloads anywhere.
    let (read, write, watch) =
        (["get", "list", "watch"], ["get", "list", "watch", "patch"], ["list", "watch"]);
    let scopes = if on(&r["watchGlobally"]) {
        vec!["cluster".to_owned()]
    } else {
        let scoped = scoped_namespaces(r);
        if scoped.is_empty() { vec![NAMESPACE.to_owned()] } else { scoped }
    };
    for scope in &scopes {
        let sources: Vec<&str> = [("configmaps", "ignoreConfigMaps"), ("secrets", "ignoreSecrets")]
            .into_iter()
            .filter(|(_, key)| !on(&r[key]))
            .map(|(resource, _)| resource)
            .collect();
        grant(scope, "", &sources, &watch);
        if scope == "cluster" && !csv(&r["namespaceSelector"]).is_empty() {
            grant(scope, "", &["namespaces"], &read);
        }
        grant(scope, "apps", &["deployments", "daemonsets", "statefulsets"], &write);
        if !on(&r["ignoreCronJobs"]) {
            grant(scope, "batch", &["cronjobs"], &read);
        }
        if !on(&r["ignoreJobs"]) {
            grant(scope, "batch", &["jobs"], &["get", "list", "watch", "create", "delete"]);
        } else if !on(&r["ignoreCronJobs"]) {
            grant(scope, "batch", &["jobs"], &["create"]); // a CronJob reload creates a Job
        }
        if on(&r["isArgoRollouts"]) {
            grant(scope, "argoproj.io", &["rollouts"], &write);
        }
        if on(&r["isOpenshift"]) {
            grant(scope, "apps.openshift.io", &["deploymentconfigs"], &write);
        }
        if on(&r["enableCSIIntegration"]) {
            let csi = ["secretproviderclasspodstatuses", "secretproviderclasses"];
            grant(scope, "secrets-store.csi.x-k8s.io", &csi, &read);
        }
        // Restart by eviction lists the pods and evicts them; pods as reload targets are
        // watched, and evicted. No eviction when nothing is written.
        let writes = !on(&r["dryRun"]) && text(&r["webhookUrl"]).is_empty();
        if on(&r["reloadPods"]) {
            grant(scope, "", &["pods"], &watch);
        }
        if (on(&r["restartByEviction"]) || on(&r["reloadPods"])) && writes {
            grant(scope, "", &["pods"], &["list"]);
            grant(scope, "", &["pods/eviction"], &["create"]);
        }
        grant(scope, "", &["events"], &["create", "patch"]); // core/v1 Events, as Stakater
    }
    grant(NAMESPACE, "", &["configmaps"], &["create", "patch"]); // meta-info ConfigMap, server-side apply
    if on(&r["enableHA"]) {
        grant(NAMESPACE, "coordination.k8s.io", &["leases"], &["get", "create", "update"]);
    }
    grants
}

// ---------------------------------------------------------------------------------------------
// Reading the rendered objects.

/// A rendered values set: its objects, the merged values, and the controller's Deployment and
/// container.
struct Rendered<'a> {
    /// The API versions the render was told the server serves (`--api-versions`).
    api_versions: &'a [&'a str],
    docs: &'a [Value],
    values: &'a Value,
    deployment: &'a Value,
    container: &'a Value,
}

fn find<'a>(docs: &'a [Value], kind: &str, name: Option<&str>, namespace: Option<&str>) -> Vec<&'a Value> {
    docs.iter()
        .filter(|d| d["kind"] == kind)
        .filter(|d| name.is_none_or(|name| d["metadata"]["name"] == name))
        .filter(|d| namespace.is_none_or(|namespace| d["metadata"]["namespace"] == namespace))
        .collect()
}

fn one<'a>(
    docs: &'a [Value],
    kind: &str,
    name: Option<&str>,
    namespace: Option<&str>,
) -> Result<&'a Value, String> {
    match find(docs, kind, name, namespace)[..] {
        [found] => Ok(found),
        ref found => Err(format!(
            "expected exactly one {kind} {} in {}, found {}",
            name.unwrap_or_default(),
            namespace.unwrap_or("any namespace"),
            found.len()
        )),
    }
}

fn strings(value: &Value) -> Vec<&str> {
    value.as_array().into_iter().flatten().filter_map(Value::as_str).collect()
}

/// What the bindings to ServiceAccount `account` in the release namespace grant it.
fn granted(docs: &[Value], account: &str) -> Result<BTreeSet<Grant>, String> {
    let mut grants = BTreeSet::new();
    for binding in docs.iter().filter(|d| d["kind"] == "RoleBinding" || d["kind"] == "ClusterRoleBinding") {
        let subjects = binding["subjects"].as_array().into_iter().flatten();
        if !subjects
            .into_iter()
            .any(|s| s["kind"] == "ServiceAccount" && s["name"] == account && s["namespace"] == NAMESPACE)
        {
            continue;
        }
        let reference = &binding["roleRef"];
        let namespace = binding["metadata"]["namespace"].as_str();
        let role_namespace = if reference["kind"] == "ClusterRole" { None } else { namespace };
        let role = one(docs, text(&reference["kind"]), Some(text(&reference["name"])), role_namespace)
            .map_err(|_| {
                format!("{} {} refers to a missing {reference}", binding["kind"], binding["metadata"]["name"])
            })?;
        let scope =
            if binding["kind"] == "ClusterRoleBinding" { "cluster" } else { namespace.unwrap_or_default() };
        for rule in role["rules"].as_array().into_iter().flatten() {
            ensure(
                rule.get("resourceNames").is_none(),
                format!("unexpected resourceNames in {}", role["metadata"]["name"]),
            )?;
            for group in strings(&rule["apiGroups"]) {
                for resource in strings(&rule["resources"]) {
                    for verb in strings(&rule["verbs"]) {
                        grants.insert((scope.into(), group.into(), resource.into(), verb.into()));
                    }
                }
            }
        }
    }
    Ok(grants)
}

fn container_port(container: &Value, name: &str) -> Option<u64> {
    container["ports"].as_array()?.iter().find(|p| p["name"] == name)?["containerPort"].as_u64()
}

fn env<'a>(container: &'a Value, name: &str) -> Option<&'a Value> {
    container["env"].as_array()?.iter().find(|e| e["name"] == name)
}

fn our_pods() -> Value {
    json!({"app": FULLNAME, "release": RELEASE})
}

/// The checks every values set passes.
fn check_common<'a>(
    manifest: &'a Manifest,
    values: &'a Value,
    api_versions: &'a [&'a str],
) -> Result<Rendered<'a>, String> {
    let docs = manifest.objects();
    let keys: Vec<String> = manifest.describe();
    let unique: BTreeSet<&String> = keys.iter().collect();
    ensure(keys.len() == unique.len(), format!("duplicate objects among {keys:?}"))?;
    let r = &values["reloader"];
    let deployment = one(docs, "Deployment", Some(FULLNAME), Some(NAMESPACE))?;
    let spec = &deployment["spec"];
    let pod = &spec["template"]["spec"];
    let selector = merge(&our_pods(), &r["matchLabels"]);
    let selector = if selector.is_null() { our_pods() } else { selector };
    ensure(
        spec["selector"]["matchLabels"] == selector,
        format!("selector must stay Stakater's (app, release, matchLabels): {}", spec["selector"]),
    )?;
    let replicas = r["deployment"]["replicas"].as_u64().unwrap_or(1);
    let want_replicas = if on(&r["enableHA"]) { replicas } else { replicas.min(1) };
    ensure(
        spec["replicas"] == want_replicas,
        format!("replicas {}, want {want_replicas}", spec["replicas"]),
    )?;
    let [container] = pod["containers"].as_array().map(Vec::as_slice).unwrap_or_default() else {
        return Err("one container".into());
    };

    let mut args: Vec<String> = strings(&container["args"]).into_iter().map(str::to_owned).collect();
    args.sort();
    let want = expected_args(values, api_versions);
    let missing: Vec<&String> = want.iter().filter(|a| !args.contains(a)).collect();
    let extra: Vec<&String> = args.iter().filter(|a| !want.contains(a)).collect();
    ensure(args == want, format!("flags differ: missing {missing:?}, unexpected {extra:?}"))?;

    for name in ["POD_NAME", "POD_NAMESPACE", "RELOADER_NAMESPACE"] {
        ensure(env(container, name).is_some(), format!("env {name} missing"))?;
    }
    ensure(
        env(container, "POD_NAME")
            .is_some_and(|e| e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"),
        "POD_NAME fieldRef",
    )?;
    ensure(
        env(container, "RELOADER_DEPLOYMENT_NAME").is_some_and(|e| e["value"] == FULLNAME),
        "RELOADER_DEPLOYMENT_NAME",
    )?;
    let want_namespace_env = !on(&r["watchGlobally"]) && csv(&r["namespaces"]).is_empty();
    ensure(
        env(container, "KUBERNETES_NAMESPACE").is_some() == want_namespace_env,
        format!("KUBERNETES_NAMESPACE {}", if want_namespace_env { "missing" } else { "unexpected" }),
    )?;
    ensure(
        env(container, "METRICS_COUNT_BY_NAMESPACE").is_some() == on(&r["enableMetricsByNamespace"]),
        "METRICS_COUNT_BY_NAMESPACE follows enableMetricsByNamespace",
    )?;

    ensure(container_port(container, "http") == Some(9090), "container port http 9090")?;
    for (probe, path) in [("livenessProbe", "/live"), ("readinessProbe", "/readyz")] {
        let get = &container[probe]["httpGet"];
        ensure(
            get["path"] == path && (get["port"] == "http" || get["port"] == 9090),
            format!("{probe} GET {path} on 9090"),
        )?;
    }
    let security = &container["securityContext"];
    ensure(
        security["readOnlyRootFilesystem"] == true
            && security["allowPrivilegeEscalation"] == false
            && security["capabilities"]["drop"] == json!(["ALL"]),
        format!("container securityContext: {security}"),
    )?;
    let pod_security = &pod["securityContext"];
    ensure(
        pod_security["runAsNonRoot"] == true
            && pod_security["runAsUser"] == 65534
            && pod_security["seccompProfile"]["type"] == "RuntimeDefault",
        format!("pod securityContext: {pod_security}"),
    )?;
    let resources = &container["resources"];
    ensure(
        !text(&resources["requests"]["cpu"]).is_empty() && !text(&resources["limits"]["memory"]).is_empty(),
        "resources set",
    )?;

    let (got, want) = (granted(docs, FULLNAME)?, expected_grants(values));
    let missing: Vec<&Grant> = want.difference(&got).collect();
    let extra: Vec<&Grant> = got.difference(&want).collect();
    ensure(
        missing.is_empty() && extra.is_empty(),
        format!(
            "RBAC differs from docs/compatibility.md §13:\n    missing {missing:?}\n    unexpected {extra:?}"
        ),
    )?;
    if on(&r["rbac"]["enabled"]) {
        ensure(
            find(docs, "ClusterRole", None, None).is_empty() != on(&r["watchGlobally"]),
            "a ClusterRole exactly in global mode",
        )?;
    }
    Ok(Rendered { api_versions, docs, values, deployment, container })
}

// ---------------------------------------------------------------------------------------------
// Per-set checks.

fn no_webhook(set: &Rendered) -> Check {
    ensure(
        find(set.docs, "ValidatingAdmissionPolicy", None, None).is_empty(),
        "no write fence where the API server is not known to serve ValidatingAdmissionPolicy",
    )?;
    ensure(
        find(set.docs, "MutatingWebhookConfiguration", None, None).is_empty(),
        "no webhook configuration by default",
    )?;
    ensure(set.deployment["spec"]["strategy"] == json!({"type": "Recreate"}), "Recreate without enableHA")?;
    ensure(
        set.deployment["spec"]["template"]["spec"].get("affinity").is_none(),
        "no default affinity without enableHA",
    )
}

/// The write fence (docs/security.md): rendered only where the API server serves
/// ValidatingAdmissionPolicy and unless opted out, bound to the controller's ServiceAccount, over
/// the kinds it writes, letting it change the pause annotation the binary uses.
fn write_fence(set: &Rendered) -> Check {
    let policies = find(set.docs, "ValidatingAdmissionPolicy", None, None);
    let bindings = find(set.docs, "ValidatingAdmissionPolicyBinding", None, None);
    let served = set.api_versions.contains(&WRITE_FENCE_API);
    let wanted = set.values["writeFence"]["enabled"] != false && served;
    job_fence(set, wanted)?;
    if !wanted {
        return ensure(
            policies.is_empty() && bindings.is_empty(),
            "no write fence when opted out or not served",
        );
    }
    let name = format!("{NAMESPACE}-{FULLNAME}-write-fence");
    let [policy] = policies[..] else {
        return Err(format!("one write fence policy, got {}", policies.len()));
    };
    let [binding] = bindings[..] else { return Err("one write fence binding".into()) };
    ensure(policy["metadata"]["name"] == name.as_str(), format!("policy named {name}"))?;
    ensure(
        binding["spec"]["policyName"] == name.as_str()
            && binding["spec"]["validationActions"] == json!(["Deny"]),
        "the binding denies",
    )?;
    ensure(policy["spec"]["failurePolicy"] == "Fail", "failurePolicy Fail")?;
    let condition = text(&policy["spec"]["matchConditions"][0]["expression"]);
    let account = text(&set.deployment["spec"]["template"]["spec"]["serviceAccountName"]);
    ensure(
        condition == format!("request.userInfo.username == 'system:serviceaccount:{NAMESPACE}:{account}'"),
        format!("bound to the Deployment's ServiceAccount {account}: {condition}"),
    )?;
    let rules = policy["spec"]["matchConstraints"]["resourceRules"].as_array().cloned().unwrap_or_default();
    let resources: BTreeSet<String> = rules
        .iter()
        .flat_map(|rule| strings(&rule["resources"]).into_iter().map(String::from).collect::<Vec<_>>())
        .collect();
    let mut expected = BTreeSet::from(["deployments", "daemonsets", "statefulsets"].map(String::from));
    if on(&set.values["reloader"]["isArgoRollouts"]) {
        expected.insert("rollouts".into());
    }
    if on(&set.values["reloader"]["isOpenshift"]) {
        expected.insert("deploymentconfigs".into());
    }
    ensure(resources == expected, format!("fenced kinds {resources:?}, want {expected:?}"))?;
    ensure(rules.iter().all(|rule| rule["operations"] == json!(["UPDATE"])), "updates are fenced")?;
    let variables = policy["spec"]["variables"].as_array().cloned().unwrap_or_default();
    let markers = variables.iter().find(|v| v["name"] == "workloadMarkers").ok_or("workloadMarkers")?;
    let pause = set.values["reloader"]["custom_annotations"]["pauseTime"]
        .as_str()
        .unwrap_or("deployment.reloader.stakater.com/paused-at");
    ensure(text(&markers["expression"]).contains(pause), format!("the pause annotation {pause} may change"))
}

/// The Job fence without the mutating webhook: its server, Service, certificate and port, the
/// fence's configuration, and no `/mutate` registered.
fn job_fence_alone(set: &Rendered) -> Check {
    write_fence(set)?;
    ensure(
        !find(set.docs, "ValidatingWebhookConfiguration", None, None).is_empty(),
        "the Job fence is rendered",
    )?;
    let ports = set.container["ports"].as_array().cloned().unwrap_or_default();
    ensure(ports.iter().any(|p| p["name"] == "webhook" && p["containerPort"] == 9443), "the webhook port")?;
    let (mounts, _) = mounts_and_volumes(set);
    ensure(mounts.iter().any(|m| m["mountPath"] == "/tls"), "the certificate mounted at /tls")?;
    ensure(
        set.deployment["metadata"]["labels"].get("reloader.stakater.com/webhook").is_none(),
        "no skip label: nothing is sent to a mutating webhook",
    )?;
    // Without the mutating webhook, the port gets its policy only where the API server's
    // addresses are known (`helm template` looks none up).
    let np = &set.values["webhook"]["networkPolicy"];
    let known = np["from"].as_array().is_some_and(|from| !from.is_empty());
    let policies = find(set.docs, "NetworkPolicy", Some(&format!("{FULLNAME}-webhook")), Some(NAMESPACE));
    ensure(
        policies.len() == usize::from(on(&np["enabled"]) && known),
        "the webhook port's NetworkPolicy as webhook.networkPolicy says, where its peers are known",
    )
}

/// The webhook that fences Job creation: with the write fence, the webhook, and Jobs created
/// (Jobs or CronJobs reloaded); failing closed, for the controller's own ServiceAccount only.
fn job_fence(set: &Rendered, fence: bool) -> Check {
    let configs = find(set.docs, "ValidatingWebhookConfiguration", None, None);
    let reloader = &set.values["reloader"];
    let creates_jobs = !(on(&reloader["ignoreJobs"]) && on(&reloader["ignoreCronJobs"]));
    if !(fence && creates_jobs && job_fence_served(set.values, set.api_versions)) {
        return ensure(
            configs.is_empty(),
            "no Job fence without the policy, Jobs to create, or a server to answer",
        );
    }
    ensure(
        find(set.docs, "MutatingWebhookConfiguration", None, None).is_empty()
            != on(&set.values["webhook"]["enabled"]),
        "the mutating webhook only with webhook.enabled",
    )?;
    let [config] = configs[..] else { return Err(format!("one Job fence webhook, got {}", configs.len())) };
    ensure(
        config["metadata"]["name"] == format!("{FULLNAME}-job-fence").as_str(),
        "named <fullname>-job-fence",
    )?;
    let [hook] = config["webhooks"].as_array().map(Vec::as_slice).unwrap_or_default() else {
        return Err("one webhook".into());
    };
    ensure(hook["failurePolicy"] == "Fail", "fails closed")?;
    ensure(hook["clientConfig"]["service"]["path"] == "/validate-jobs", "path /validate-jobs")?;
    let service =
        find(set.docs, "Service", Some(text(&hook["clientConfig"]["service"]["name"])), Some(NAMESPACE));
    ensure(service.len() == 1, "the webhook's Service is rendered")?;
    ensure(
        hook["rules"]
            == json!([{"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE"],
            "resources": ["jobs"], "scope": "Namespaced"}]),
        format!("Job creations only: {}", hook["rules"]),
    )?;
    let account = text(&set.deployment["spec"]["template"]["spec"]["serviceAccountName"]);
    let condition = text(&hook["matchConditions"][0]["expression"]);
    ensure(
        condition == format!("request.userInfo.username == 'system:serviceaccount:{NAMESPACE}:{account}'"),
        format!("the ServiceAccount's own requests only: {condition}"),
    )
}

/// The controller container's volume mounts and the pod's volumes.
fn mounts_and_volumes<'a>(set: &Rendered<'a>) -> (&'a [Value], &'a [Value]) {
    let mounts = set.container["volumeMounts"].as_array().map(Vec::as_slice).unwrap_or_default();
    let volumes = set.deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    (mounts, volumes)
}

fn role_namespaces(docs: &[Value], kind: &str, name: &str) -> Vec<String> {
    let mut namespaces: Vec<String> = find(docs, kind, Some(name), None)
        .iter()
        .map(|d| text(&d["metadata"]["namespace"]).to_owned())
        .collect();
    namespaces.sort();
    namespaces
}

fn namespaced_single(set: &Rendered) -> Check {
    let roles = role_namespaces(set.docs, "Role", &format!("{FULLNAME}-role"));
    ensure(roles == [NAMESPACE], format!("workload Role in the release namespace, got {roles:?}"))
}

/// Scoped mode with a and b: the release namespace is watched too (flag and Role), as Stakater's
/// chart 2.x does, so workloads next to reloader keep reloading.
fn namespaced_ab(set: &Rendered) -> Check {
    let roles = role_namespaces(set.docs, "Role", &format!("{FULLNAME}-role"));
    ensure(roles == ["a", "b", NAMESPACE], format!("workload Roles in a, b and {NAMESPACE}, got {roles:?}"))?;
    let bindings = role_namespaces(set.docs, "RoleBinding", &format!("{FULLNAME}-role-binding"));
    ensure(
        bindings == ["a", "b", NAMESPACE],
        format!("RoleBindings in a, b and {NAMESPACE}, got {bindings:?}"),
    )?;
    ensure(
        strings(&set.container["args"]).contains(&format!("--namespaces=a,b,{NAMESPACE}").as_str()),
        "--namespaces names a, b and the release namespace",
    )
}

fn ha(set: &Rendered) -> Check {
    let spec = &set.deployment["spec"];
    ensure(spec.get("strategy").is_none(), "HA keeps the rolling update")?;
    let term = &spec["template"]["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        [0]["podAffinityTerm"];
    ensure(term["topologyKey"] == "kubernetes.io/hostname", "anti-affinity on hostname")?;
    ensure(term["labelSelector"]["matchLabels"] == our_pods(), "anti-affinity selects our pods")?;
    let budget = one(set.docs, "PodDisruptionBudget", Some(FULLNAME), Some(NAMESPACE))?;
    ensure(budget["spec"]["minAvailable"] == 1, "PodDisruptionBudget minAvailable 1")
}

fn replicas_capped(set: &Rendered) -> Check {
    ensure(
        set.deployment["spec"]["replicas"] == 1
            && !strings(&set.container["args"]).contains(&"--enable-ha=true"),
        "replicas capped at 1",
    )
}

fn webhook_generated(set: &Rendered) -> Check {
    webhook_network_policy(set)?;
    let configuration = one(set.docs, "MutatingWebhookConfiguration", Some(FULLNAME), None)?;
    let hook = &configuration["webhooks"][0];
    ensure(
        hook["failurePolicy"] == "Ignore" && hook["timeoutSeconds"] == 5,
        "failurePolicy Ignore, timeout 5",
    )?;
    ensure(
        hook["sideEffects"] == "None" && hook["admissionReviewVersions"] == json!(["v1"]),
        "sideEffects, versions",
    )?;
    let excluded = &hook["namespaceSelector"]["matchExpressions"][0];
    let excluded_names = strings(&excluded["values"]);
    ensure(
        excluded["key"] == "kubernetes.io/metadata.name"
            && excluded["operator"] == "NotIn"
            && excluded_names.contains(&"kube-system")
            && excluded_names.contains(&NAMESPACE),
        format!("namespace exclusion: {excluded}"),
    )?;
    let skip = &hook["objectSelector"]["matchExpressions"][0];
    ensure(
        *skip == json!({"key": "reloader.stakater.com/webhook", "operator": "NotIn", "values": ["skip"]}),
        format!("objectSelector: {skip}"),
    )?;
    let rules = hook["rules"].as_array().map(Vec::as_slice).unwrap_or_default();
    let got: BTreeSet<(&str, &str)> = rules
        .iter()
        .flat_map(|rule| {
            let resources = strings(&rule["resources"]);
            strings(&rule["apiGroups"])
                .into_iter()
                .flat_map(move |g| resources.clone().into_iter().map(move |r| (g, r)))
        })
        .collect();
    let mut want: BTreeSet<(&str, &str)> = [
        ("apps", "deployments"),
        ("apps", "daemonsets"),
        ("apps", "statefulsets"),
        ("batch", "cronjobs"),
        ("batch", "jobs"),
    ]
    .into();
    if on(&set.values["reloader"]["isArgoRollouts"]) {
        want.insert(("argoproj.io", "rollouts"));
    }
    if on(&set.values["reloader"]["isOpenshift"]) {
        want.insert(("apps.openshift.io", "deploymentconfigs"));
    }
    ensure(got == want, format!("webhook rules {got:?}, want {want:?}"))?;
    ensure(
        rules.iter().all(|rule| {
            let mut operations = strings(&rule["operations"]);
            operations.sort();
            operations == ["CREATE", "UPDATE"]
        }),
        "CREATE, UPDATE",
    )?;
    let service_ref = &hook["clientConfig"]["service"];
    let service = one(set.docs, "Service", Some(text(&service_ref["name"])), Some(NAMESPACE))?;
    let port = &service["spec"]["ports"][0];
    ensure(
        service_ref["port"] == 443 && port["port"] == 443 && port["targetPort"] == "webhook",
        "webhook Service 443 -> webhook",
    )?;
    ensure(container_port(set.container, "webhook") == Some(9443), "container port webhook 9443")?;
    let secret = one(set.docs, "Secret", Some(&format!("{FULLNAME}-webhook-tls")), Some(NAMESPACE))?;
    let keys: BTreeSet<&str> =
        secret["data"].as_object().into_iter().flatten().map(|(k, _)| k.as_str()).collect();
    ensure(keys == BTreeSet::from(["tls.crt", "tls.key", "ca.crt"]), "generated TLS Secret keys")?;
    ensure(hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"], "caBundle is the generated CA")?;
    let (mounts, volumes) = mounts_and_volumes(set);
    ensure(
        mounts.iter().any(|m| m["mountPath"] == "/tls" && m["name"] == "webhook-tls")
            && volumes.iter().any(|v| {
                v["name"] == "webhook-tls" && v["secret"]["secretName"] == secret["metadata"]["name"]
            }),
        "TLS Secret mounted",
    )?;
    ensure(
        set.deployment["metadata"]["labels"]["reloader.stakater.com/webhook"] == "skip",
        "our own Deployment skips the webhook",
    )
}

fn webhook_cert_manager(set: &Rendered) -> Check {
    let configuration = one(set.docs, "MutatingWebhookConfiguration", Some(FULLNAME), None)?;
    ensure(
        configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
            == format!("{NAMESPACE}/{FULLNAME}-webhook"),
        "cainjector annotation",
    )?;
    ensure(
        configuration["webhooks"][0]["clientConfig"].get("caBundle").is_none(),
        "no caBundle with cert-manager",
    )?;
    ensure(find(set.docs, "Secret", None, None).is_empty(), "no generated Secret with cert-manager")?;
    one(set.docs, "Issuer", None, Some(NAMESPACE))?;
    let certificate = one(set.docs, "Certificate", Some(&format!("{FULLNAME}-webhook")), Some(NAMESPACE))?;
    ensure(
        certificate["spec"]["secretName"] == format!("{FULLNAME}-webhook-tls"),
        "Certificate writes the mounted Secret",
    )?;
    let service_name = format!("{FULLNAME}-webhook.{NAMESPACE}.svc");
    ensure(
        strings(&certificate["spec"]["dnsNames"]).contains(&service_name.as_str()),
        "Certificate DNS names",
    )
}

/// The webhook port admits only the API server; the metrics port keeps what it had.
fn webhook_network_policy(set: &Rendered) -> Check {
    let webhook = &set.values["webhook"]["networkPolicy"];
    let policies = find(set.docs, "NetworkPolicy", Some(&format!("{FULLNAME}-webhook")), Some(NAMESPACE));
    if !on(&webhook["enabled"]) {
        return ensure(policies.is_empty(), "no webhook NetworkPolicy when disabled");
    }
    let [policy] = policies[..] else { return Err("one webhook NetworkPolicy".into()) };
    let ingress = policy["spec"]["ingress"].as_array().map(Vec::as_slice).unwrap_or_default();
    let rule = |port: &str| ingress.iter().find(|r| r["ports"][0]["port"] == port);
    let peers = json!([{"ipBlock": {"cidr": API_SERVER_PEER}}]);
    ensure(
        rule("webhook").is_some_and(|r| r["from"] == peers),
        format!("webhook port from {peers}: {ingress:?}"),
    )?;
    ensure(policy["spec"]["policyTypes"] == json!(["Ingress"]), "ingress only")?;
    let metrics = rule("http").ok_or("the metrics port stays reachable")?;
    let netpol = &set.values["reloader"]["netpol"];
    let narrowed = on(&netpol["enabled"]) && netpol["from"].as_array().is_some_and(|from| !from.is_empty());
    let metrics_from = if narrowed { netpol["from"].clone() } else { Value::Null };
    ensure(
        metrics.get("from").cloned().unwrap_or(Value::Null) == metrics_from,
        "metrics port as open as reloader.netpol leaves it",
    )?;
    // Policies add up: reloader.netpol must not open the webhook port wider.
    if on(&netpol["enabled"]) {
        let main = one(set.docs, "NetworkPolicy", Some(FULLNAME), Some(NAMESPACE))?;
        let main_ingress = main["spec"]["ingress"].as_array().map(Vec::as_slice).unwrap_or_default();
        let main_rule = main_ingress.iter().find(|r| r["ports"][0]["port"] == "webhook");
        ensure(
            main_rule.is_some_and(|r| r["from"] == peers),
            "reloader.netpol's webhook rule has the same peers",
        )?;
    }
    Ok(())
}

fn webhook_client_ca(set: &Rendered) -> Check {
    webhook_network_policy(set)?;
    let ca = &set.values["webhook"]["clientCA"];
    let config_map = if !text(&ca["configMap"]).is_empty() {
        ensure(
            find(set.docs, "ConfigMap", Some(&format!("{FULLNAME}-webhook-client-ca")), None).is_empty(),
            "the user's ConfigMap, none rendered",
        )?;
        text(&ca["configMap"]).to_owned()
    } else {
        let name = format!("{FULLNAME}-webhook-client-ca");
        let rendered = one(set.docs, "ConfigMap", Some(&name), Some(NAMESPACE))?;
        ensure(rendered["data"][text(&ca["key"])] == CLIENT_CA_PEM, "the PEM bundle under its key")?;
        name
    };
    let (mounts, volumes) = mounts_and_volumes(set);
    ensure(
        mounts.iter().any(|m| m["mountPath"] == "/client-ca" && m["name"] == "webhook-client-ca")
            && volumes
                .iter()
                .any(|v| v["name"] == "webhook-client-ca" && v["configMap"]["name"] == config_map.as_str()),
        "client CA mounted at /client-ca",
    )
}

fn webhook_namespaced(set: &Rendered) -> Check {
    let configuration = one(set.docs, "MutatingWebhookConfiguration", Some(FULLNAME), None)?;
    let expressions = &configuration["webhooks"][0]["namespaceSelector"]["matchExpressions"];
    let limited =
        json!({"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["a", "b", NAMESPACE]});
    ensure(
        expressions.as_array().is_some_and(|all| all.contains(&limited)),
        format!("namespaced webhook limited to the watched a, b, {NAMESPACE}: {expressions}"),
    )
}

fn extras(set: &Rendered) -> Check {
    let policy = one(set.docs, "NetworkPolicy", Some(FULLNAME), Some(NAMESPACE))?;
    let ports = |direction: &str| -> Vec<Value> {
        policy["spec"][direction]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|rule| rule["ports"].as_array().cloned().unwrap_or_default())
            .collect()
    };
    let egress: Vec<(String, Value)> = ports("egress")
        .iter()
        .map(|p| (p["protocol"].as_str().unwrap_or("TCP").to_owned(), p["port"].clone()))
        .collect();
    for (protocol, port) in [("UDP", 53), ("TCP", 53), ("TCP", 443), ("TCP", 6443)] {
        ensure(
            egress.contains(&(protocol.into(), json!(port))),
            format!("egress DNS + API server: {egress:?}"),
        )?;
    }
    let ingress: Vec<Value> = ports("ingress").iter().map(|p| p["port"].clone()).collect();
    ensure(
        ingress.contains(&json!("http")) || ingress.contains(&json!(9090)),
        "ingress to the metrics port",
    )?;
    ensure(
        policy["spec"]["ingress"][0]["from"] == set.values["reloader"]["netpol"]["from"],
        "ingress from netpol.from",
    )?;
    let service = one(set.docs, "Service", Some(FULLNAME), Some(NAMESPACE))?;
    ensure(
        service["spec"]["ports"][0]["port"] == 9090 && service["spec"]["selector"] == our_pods(),
        "metrics Service on 9090",
    )?;
    let service_monitor = one(set.docs, "ServiceMonitor", Some(FULLNAME), Some(NAMESPACE))?;
    let endpoint = &service_monitor["spec"]["endpoints"][0];
    ensure(
        endpoint["port"] == "http" && endpoint["path"] == "/metrics",
        "ServiceMonitor scrapes /metrics on http",
    )?;
    let pod_monitor = one(set.docs, "PodMonitor", Some(FULLNAME), Some(NAMESPACE))?;
    ensure(pod_monitor["spec"]["podMetricsEndpoints"][0]["port"] == "http", "PodMonitor scrapes http")?;
    let autoscaler = one(set.docs, "VerticalPodAutoscaler", Some(FULLNAME), Some(NAMESPACE))?;
    ensure(autoscaler["spec"]["targetRef"]["name"] == FULLNAME, "VPA targets the Deployment")?;
    ensure(
        autoscaler["spec"]["resourcePolicy"]["containerPolicies"][0]["containerName"]
            == set.container["name"],
        "VPA container",
    )?;
    let budget = one(set.docs, "PodDisruptionBudget", Some(FULLNAME), Some(NAMESPACE))?;
    ensure(
        budget["spec"] == json!({"maxUnavailable": 1, "selector": {"matchLabels": our_pods()}}),
        "PDB defaults to maxUnavailable 1",
    )?;
    let mounts = set.container["volumeMounts"].as_array().map(Vec::as_slice).unwrap_or_default();
    ensure(mounts.iter().any(|m| m["mountPath"] == "/tmp/"), "readOnlyRootFileSystem mounts /tmp")
}

fn no_rbac(set: &Rendered) -> Check {
    for kind in ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"] {
        ensure(find(set.docs, kind, None, None).is_empty(), "rbac.enabled=false renders no RBAC")?;
    }
    ensure(
        find(set.docs, "ServiceAccount", None, None).is_empty(),
        "serviceAccount.create=false renders no ServiceAccount",
    )?;
    ensure(
        set.deployment["spec"]["template"]["spec"]["serviceAccountName"] == "existing-sa",
        "existing ServiceAccount used",
    )
}

fn stakater_file(set: &Rendered) -> Check {
    let pod = &set.deployment["spec"]["template"]["spec"];
    let c = set.container;
    let env = |name: &str| env(c, name).cloned().unwrap_or_default();
    ensure(env("ALERT_ON_RELOAD")["value"] == "true", "env.open")?;
    ensure(env("ALERT_WEBHOOK_URL")["valueFrom"]["secretKeyRef"]["name"] == FULLNAME, "env.secret")?;
    ensure(
        env("ALERT_SINK")["valueFrom"]["secretKeyRef"] == json!({"name": "alerts", "key": "sink"}),
        "env.existing",
    )?;
    ensure(env("NODE")["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName", "env.field")?;
    ensure(
        pod["priorityClassName"] == "system-cluster-critical"
            && pod["schedulerName"] == "custom"
            && pod["runtimeClassName"] == "gvisor"
            && pod["hostUsers"] == false,
        "pod settings",
    )?;
    ensure(
        pod["imagePullSecrets"] == json!([{"name": "pull-a"}, {"name": "pull-b"}]),
        "imagePullSecrets both forms",
    )?;
    ensure(
        c["image"] == "registry.example.com/stakater/reloader:v1.4.21",
        "global.imageRegistry + image.name",
    )?;
    let template = &set.deployment["spec"]["template"]["metadata"];
    ensure(template["annotations"] == json!({"team": "platform"}), "pod annotations")?;
    ensure(template["labels"]["extra"] == "label", "matchLabels on the pod")?;
    ensure(
        set.deployment["spec"]["selector"]["matchLabels"]["extra"] == "label",
        "matchLabels in the selector",
    )?;
    ensure(
        c["livenessProbe"]["timeoutSeconds"] == 7 && c["livenessProbe"]["httpGet"]["path"] == "/live",
        "probe timings merged",
    )?;
    let mounts: Vec<&str> =
        c["volumeMounts"].as_array().into_iter().flatten().map(|m| text(&m["name"])).collect();
    ensure(mounts.contains(&"tmp-volume") && mounts.contains(&"extra"), "volumes and /tmp")?;
    let secret = one(set.docs, "Secret", Some(FULLNAME), Some(NAMESPACE))?;
    let keys: Vec<&String> = secret["data"].as_object().into_iter().flat_map(|data| data.keys()).collect();
    ensure(keys == ["ALERT_WEBHOOK_URL"], "env.secret Secret")?;
    let service = one(set.docs, "Service", Some(FULLNAME), Some(NAMESPACE))?;
    ensure(service["spec"]["ipFamilyPolicy"] == "SingleStack", "service keys")
}

/// Chart 2.2.17 added `reloader.leaderElection` (empty timings by default; a later chart test
/// sets `id` too).
fn stakater_2_2_17() -> Value {
    let mut values = stakater_2_2_16();
    values["reloader"]["leaderElection"] =
        json!({"leaseDuration": "", "renewDeadline": "", "retryPeriod": "", "id": ""});
    values
}

/// A values file as a Stakater chart 2.2.16 user writes it: every key of that chart, with
/// non-default values where that exercises something.
fn stakater_2_2_16() -> Value {
    json!({
        "global": {"imageRegistry": "registry.example.com", "imagePullSecrets": ["pull-a", {"name": "pull-b"}]},
        "kubernetes": {"host": "https://kubernetes.default"},
        "nameOverride": "", "fullnameOverride": "",
        "image": {"name": "stakater/reloader", "repository": "ghcr.io/stakater/reloader", "tag": "v1.4.21",
                  "pullPolicy": "IfNotPresent"},
        "reloader": {
            "autoReloadAll": false, "isArgoRollouts": false, "isOpenshift": false, "ignoreSecrets": false,
            "ignoreConfigMaps": false, "ignoreJobs": false, "ignoreCronJobs": false, "reloadOnCreate": true,
            "reloadOnDelete": false, "syncAfterRestart": true, "reloadStrategy": "env-vars",
            "ignoreNamespaces": "kube-system", "namespaceSelector": "", "resourceLabelSelector": "",
            "logFormat": "json", "logLevel": "info", "watchGlobally": true, "namespaces": [],
            "enableHA": false, "enablePProf": false, "enableCSIIntegration": false, "pprofAddr": ":6060",
            "readOnlyRootFileSystem": true, "legacy": {"rbac": false}, "matchLabels": {"extra": "label"},
            "enableMetricsByNamespace": true,
            "deployment": {
                "dnsConfig": {"options": [{"name": "ndots", "value": "1"}]},
                "replicas": 1, "revisionHistoryLimit": 2, "hostUsers": false,
                "nodeSelector": {"kubernetes.io/os": "linux"}, "affinity": {},
                "volumeMounts": [{"name": "extra", "mountPath": "/extra"}],
                "volumes": [{"name": "extra", "emptyDir": {}}],
                "securityContext": {"runAsNonRoot": true, "runAsUser": 65534,
                                    "seccompProfile": {"type": "RuntimeDefault"}},
                "containerSecurityContext": {"capabilities": {"drop": ["ALL"]}, "allowPrivilegeEscalation": false,
                                             "readOnlyRootFilesystem": true},
                "tolerations": [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}],
                "topologySpreadConstraints": [],
                "annotations": {"owner": "platform"},
                "labels": {"provider": "stakater", "group": "com.stakater.platform", "version": "v1.4.21"},
                "env": {"open": {"ALERT_ON_RELOAD": "true"},
                        "secret": {"ALERT_WEBHOOK_URL": "https://hooks.example.com/alert"},
                        "field": {"NODE": "spec.nodeName"},
                        "existing": {"alerts": {"ALERT_SINK": "sink"}}},
                "livenessProbe": {"timeoutSeconds": 7, "failureThreshold": 5, "periodSeconds": 10,
                                  "successThreshold": 1},
                "readinessProbe": {"timeoutSeconds": 15, "failureThreshold": 5, "periodSeconds": 10,
                                   "successThreshold": 1},
                "resources": {"limits": {"cpu": "100m", "memory": "512Mi"},
                              "requests": {"cpu": "10m", "memory": "128Mi"}},
                "pod": {"annotations": {"team": "platform"}},
                "priorityClassName": "system-cluster-critical", "runtimeClassName": "gvisor",
                "schedulerName": "custom", "gomaxprocsOverride": "", "gomemlimitOverride": "",
            },
            "service": {"labels": {}, "annotations": {}, "port": 9090, "ipFamilyPolicy": "SingleStack",
                        "ipFamilies": ["IPv4"]},
            "rbac": {"enabled": true, "labels": {"rbac": "yes"}},
            "serviceAccount": {"create": true, "labels": {}, "annotations": {}, "name": null},
            "custom_annotations": {},
            "serviceMonitor": {"enabled": false, "labels": {}, "annotations": {}, "honorLabels": true,
                               "metricRelabelings": [], "relabelings": [], "targetLabels": [], "interval": "10s",
                               "timeout": "30s", "namespace": "monitoring", "scheme": "", "tlsConfig": {},
                               "bearerTokenFile": null},
            "podMonitor": {"enabled": false, "labels": {}, "annotations": {}, "honorLabels": true,
                           "metricRelabelings": [], "relabelings": [], "podTargetLabels": [], "interval": "10s",
                           "timeout": "30s", "namespace": "monitoring", "scheme": "", "tlsConfig": {},
                           "bearerTokenSecret": null},
            "podDisruptionBudget": {"enabled": false, "minAvailable": 1},
            "netpol": {"enabled": false, "from": [], "to": []},
            "verticalPodAutoscaler": {"enabled": false, "controlledResources": [], "maxAllowed": {},
                                      "minAllowed": {}, "controlledValues": "RequestsAndLimits",
                                      "updatePolicy": {"updateMode": "Auto"}},
            "webhookUrl": "",
        },
    })
}

/// Chart 1.3.0's values as a user of it writes them: the image under reloader.deployment.image
/// (`name` the repository, `base` the name used with global.imageRegistry).
fn stakater_1_x() -> Value {
    json!({
        "global": {"imagePullSecrets": []},
        "kubernetes": {"host": "https://kubernetes.default"},
        "reloader": {
            "watchGlobally": false, "ignoreSecrets": false, "legacy": {"rbac": false},
            "matchLabels": {}, "enableMetricsByNamespace": false,
            "deployment": {
                "replicas": 1, "revisionHistoryLimit": 2, "nodeSelector": null, "affinity": {},
                "securityContext": {"runAsNonRoot": true, "runAsUser": 65534,
                                    "seccompProfile": {"type": "RuntimeDefault"}},
                "containerSecurityContext": {},
                "tolerations": [], "topologySpreadConstraints": [], "annotations": {},
                "labels": {"provider": "stakater", "group": "com.stakater.platform", "version": "v1.3.0"},
                "image": {"name": "registry.example.com/team/reloader", "base": "team/reloader",
                          "tag": "v1.3.0", "pullPolicy": "Always"},
                "env": {"open": null, "secret": null, "field": null, "existing": null},
                "livenessProbe": {}, "readinessProbe": {}, "resources": {},
                "pod": {"annotations": {}}, "priorityClassName": "",
                "gomaxprocsOverride": "", "gomemlimitOverride": "",
            },
            "service": {},
            "rbac": {"enabled": true, "labels": {}},
            "serviceAccount": {"create": true, "labels": {}, "annotations": {}, "name": null},
            "custom_annotations": {},
            "serviceMonitor": {"enabled": false},
            "podMonitor": {"enabled": false},
            "podDisruptionBudget": {"enabled": false},
            "netpol": {"enabled": false, "from": [], "to": []},
            "volumeMounts": [], "volumes": [], "webhookUrl": "",
        },
    })
}

fn legacy_image(set: &Rendered) -> Check {
    ensure(
        set.container["image"] == "registry.example.com/team/reloader:v1.3.0",
        format!("reloader.deployment.image.name:tag, got {}", set.container["image"]),
    )?;
    ensure(set.container["imagePullPolicy"] == "Always", "reloader.deployment.image.pullPolicy")
}

fn legacy_image_registry(set: &Rendered) -> Check {
    ensure(
        set.container["image"] == "mirror.example.com/team/reloader:v1.3.0",
        format!("global.imageRegistry/reloader.deployment.image.base:tag, got {}", set.container["image"]),
    )
}

fn legacy_image_digest(set: &Rendered) -> Check {
    ensure(
        set.container["image"] == "ghcr.io/stakater/reloader@sha256:1234567",
        format!("reloader.deployment.image.name@digest, got {}", set.container["image"]),
    )
}

/// Chart 2.0.0's values (the first 2.x: image moved to the top level), as its users wrote them.
fn stakater_2_0_0() -> Value {
    json!({
        "global": {"imageRegistry": "", "imagePullSecrets": []},
        "kubernetes": {"host": "https://kubernetes.default"},
        "nameOverride": "", "fullnameOverride": "",
        "image": {"name": "stakater/reloader", "repository": "ghcr.io/stakater/reloader", "tag": "v1.3.0",
                  "pullPolicy": "IfNotPresent"},
        "reloader": {
            "autoReloadAll": false, "isArgoRollouts": false, "isOpenshift": false, "ignoreSecrets": false,
            "ignoreConfigMaps": false, "reloadOnCreate": false, "reloadOnDelete": false,
            "syncAfterRestart": false, "reloadStrategy": "default", "ignoreNamespaces": "",
            "namespaceSelector": "", "resourceLabelSelector": "", "logFormat": "", "logLevel": "info",
            "watchGlobally": true, "enableHA": false, "readOnlyRootFileSystem": false,
            "legacy": {"rbac": false}, "matchLabels": {}, "enableMetricsByNamespace": false,
            "deployment": {"replicas": 1, "revisionHistoryLimit": 2, "nodeSelector": null, "affinity": {},
                           "securityContext": {"runAsNonRoot": true, "runAsUser": 65534,
                                               "seccompProfile": {"type": "RuntimeDefault"}},
                           "containerSecurityContext": {}, "tolerations": [], "topologySpreadConstraints": [],
                           "annotations": {}, "labels": {"provider": "stakater"},
                           "env": {"open": null, "secret": null, "field": null, "existing": null},
                           "livenessProbe": {}, "readinessProbe": {}, "resources": {},
                           "pod": {"annotations": {}}, "priorityClassName": "",
                           "gomaxprocsOverride": "", "gomemlimitOverride": ""},
            "service": {}, "rbac": {"enabled": true, "labels": {}},
            "serviceAccount": {"create": true, "labels": {}, "annotations": {}, "name": null},
            "custom_annotations": {},
            "serviceMonitor": {"enabled": false, "labels": {}, "annotations": {}, "honorLabels": true,
                               "metricRelabelings": [], "relabelings": [], "targetLabels": []},
            "podMonitor": {"enabled": false, "labels": {}, "annotations": {}, "honorLabels": true,
                           "metricRelabelings": [], "relabelings": [], "podTargetLabels": []},
            "podDisruptionBudget": {"enabled": false},
            "netpol": {"enabled": false, "from": [], "to": []},
            "volumeMounts": [], "volumes": [], "webhookUrl": "",
        },
    })
}
