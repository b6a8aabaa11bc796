//! Each group of settings, parsed and validated end to end.

use std::collections::BTreeSet;
use std::time::Duration;

use super::tests::{META, options};
use super::*;

#[test]
fn warnings() {
    let cases: &[(&[&str], &str)] = &[
        (&["--log-format=xml"], r#"unsupported --log-format "xml"; logging as text"#),
        (&["--sync-after-restart"], "--sync-after-restart has no effect without --reload-on-create=true"),
        (
            &["--namespaces=a", "--namespaces-to-ignore=b"],
            "--namespaces-to-ignore is only honoured when watching all namespaces; ignoring it",
        ),
        (
            &["--kubernetes-namespace=a", "--namespace-selector=x=y"],
            "--namespace-selector is only honoured when watching all namespaces; ignoring it",
        ),
        (
            &["--webhook-tls-cert=/c"],
            "--webhook-tls-cert/--webhook-tls-key have no effect without --admission-webhook",
        ),
        (&["--alert-on-reload=yes"], r#"ALERT_ON_RELOAD="yes" is not a boolean; alerts are off"#),
        (
            &["--alert-on-reload=true"],
            "ALERT_ON_RELOAD is true but ALERT_WEBHOOK_URL is not set; alerts are off",
        ),
    ];
    for (flags, expected) in cases {
        let mut all = flags.to_vec();
        all.push(META);
        let o = options(&all);
        assert_eq!(o.warnings, [*expected], "{flags:?}");
    }
    assert_eq!(options(&["--log-format=json", META]).log_format, LogFormat::Json);
    assert_eq!(options(&["--log-format=xml", META]).log_format, LogFormat::Text);
}

#[test]
fn list_flags_split_repeat_and_unquote() {
    let o = options(&[
        "--ignored-workload-types=jobs",
        "--ignored-workload-types= CronJobs ,",
        "--namespaces-to-ignore=kube-system,kube-public",
        "--namespaces-to-ignore=kube-system",
        // The Helm chart wraps the namespace selector in double quotes.
        r#"--namespace-selector="env in (a,b),team:ops""#,
        "--resource-label-selector=reloader:*",
        "--resource-label-selector=tier in (web",
        "--resource-label-selector=db)",
        "--resources-to-ignore=Secrets",
        "--ignored-secret-types=helm.sh/release.v1,kubernetes.io/service-account-token",
    ]);
    assert_eq!(o.ignored_workloads, BTreeSet::from([WorkloadKind::Job, WorkloadKind::CronJob]));
    let NamespaceScope::All { ignore, selector } = &o.namespace_scope else {
        panic!("{:?}", o.namespace_scope)
    };
    assert_eq!(ignore, &["kube-system", "kube-public"]);
    assert_eq!(selector.as_ref().unwrap().to_string(), "env in (a,b),team=ops");
    assert_eq!(o.resource_label_selector.as_ref().unwrap().to_string(), "reloader,tier in (db,web)");
    assert_eq!(o.ignored_resources, IgnoredResources::Secrets);
    assert!(!o.watches_resource(ResourceKind::Secret));
    assert!(o.watches_resource(ResourceKind::ConfigMap));
    assert!(!o.watches_resource(ResourceKind::SecretProviderClass));
    assert_eq!(o.ignored_secret_types.len(), 2);

    // An empty value switches the default exclusion off.
    assert!(options(&["--ignored-secret-types="]).ignored_secret_types.is_empty());
    // Repeating the same type is not "both".
    assert_eq!(
        options(&["--resources-to-ignore=configmaps,ConfigMaps"]).ignored_resources,
        IgnoredResources::ConfigMaps
    );
}

#[test]
fn namespace_scope_precedence() {
    let only = |names: &[&str]| NamespaceScope::Only(names.iter().map(|n| n.to_string()).collect());
    let cases: &[(&[&str], NamespaceScope)] = &[
        (&["--namespaces=b,a,b", "--kubernetes-namespace=c"], only(&["b", "a"])),
        (&["--kubernetes-namespace=c"], only(&["c"])),
        (&["--kubernetes-namespace= "], NamespaceScope::All { ignore: vec![], selector: None }),
        (&["--namespaces-to-ignore=x"], NamespaceScope::All { ignore: vec!["x".into()], selector: None }),
    ];
    for (flags, expected) in cases {
        assert_eq!(&options(flags).namespace_scope, expected, "{flags:?}");
    }
    assert!(only(&["a"]).includes_name("a") && !only(&["a"]).includes_name("b"));
    let all = NamespaceScope::All { ignore: vec!["x".into()], selector: None };
    assert!(all.includes_name("a") && !all.includes_name("x"));
}

#[test]
fn leader_election_settings() {
    let o = options(&[
        "--enable-ha",
        "--pod-name=reloader-0",
        "--pod-namespace=ops",
        "--leader-election-lease-duration=30s",
        "--leader-election-renew-deadline=20s",
        "--leader-election-retry-period=500ms",
        "--leader-election-release-on-cancel=false",
    ]);
    assert_eq!(o.pod_name.as_deref(), Some("reloader-0"));
    assert_eq!(
        o.leader_election,
        Some(LeaderElection {
            id: "stakater-reloader-lock".into(),
            namespace: "ops".into(),
            lease_duration: Duration::from_secs(30),
            renew_deadline: Duration::from_secs(20),
            retry_period: Duration::from_millis(500),
            release_on_cancel: false,
        })
    );
    let elsewhere =
        options(&["--enable-ha", "--pod-name=r", "--pod-namespace=ops", "--leader-election-namespace=locks"]);
    assert_eq!(elsewhere.leader_election.unwrap().namespace, "locks");
    // POD_NAME names the pod (Events, logs) even without leader election.
    assert_eq!(options(&["--pod-name=reloader-0"]).pod_name.as_deref(), Some("reloader-0"));
}

#[test]
fn extension_settings() {
    let o = options(&[
        "--coalesce-period=1m30s",
        "--max-writes-per-second=0",
        "--dry-run",
        "--admission-webhook",
        "--webhook-tls-cert=/tls/tls.crt",
        "--webhook-tls-key=/tls/tls.key",
        "--otlp-endpoint=http://collector:4318",
        "--allow-suspended-cronjobs",
        "--metrics-addr=127.0.0.1:19090",
        "--enable-pprof",
        "--is-openshift=false",
        "--enable-csi-integration",
        "--reload-strategy=annotations",
    ]);
    assert_eq!(o.coalesce_period, Duration::from_secs(90));
    assert_eq!(o.max_writes_per_second, 0.0);
    assert!(o.dry_run && o.allow_suspended_cronjobs && o.enable_csi_integration);
    let webhook = o.admission_webhook.as_ref().unwrap();
    assert_eq!(webhook.addr, "0.0.0.0:9443".parse().unwrap());
    assert_eq!(webhook.tls_cert, std::path::Path::new("/tls/tls.crt"));
    assert_eq!(o.otlp_endpoint.as_deref(), Some("http://collector:4318"));
    assert_eq!(o.metrics_addr, "127.0.0.1:19090".parse().unwrap());
    assert_eq!(o.pprof_addr, Some("0.0.0.0:6060".parse().unwrap()));
    assert_eq!(o.openshift, Some(false));
    assert_eq!(options(&["--is-openshift"]).openshift, Some(true));
    assert_eq!(o.decide_options().strategy, ReloadStrategy::Annotations);
}

#[test]
fn environment_settings() {
    let o = options(&[
        "--metrics-count-by-namespace=enabled",
        "--alert-on-reload=true",
        "--alert-webhook-url= https://hooks.slack.com/services/T/B/token ",
        "--alert-sink=Slack",
        "--alert-webhook-proxy=http://proxy:3128",
        "--alert-additional-info=prod-eu",
        "--reloader-namespace=ops",
        "--reloader-deployment-name=reloader",
    ]);
    assert!(o.metrics_count_by_namespace);
    let alert = o.alert.as_ref().unwrap();
    assert_eq!(alert.sink, AlertSink::Slack);
    assert_eq!(alert.url.expose(), "https://hooks.slack.com/services/T/B/token");
    assert_eq!(alert.proxy.as_ref().map(SensitiveString::expose), Some("http://proxy:3128"));
    assert_eq!(alert.additional_info.as_deref(), Some("prod-eu"));
    assert_eq!(
        o.meta_info,
        Some(MetaInfoTarget { namespace: "ops".into(), deployment_name: Some("reloader".into()) })
    );
    assert!(o.warnings.is_empty(), "{:?}", o.warnings);
    assert!(!format!("{o:?}").contains("token"), "Debug leaks the alert URL");
    assert!(!options(&["--metrics-count-by-namespace=true"]).metrics_count_by_namespace);
    assert_eq!(options(&[META]).meta_info.unwrap().deployment_name, None);
}

#[test]
fn meta_info_json() {
    let o = options(&[
        "--webhook-url=https://hooks.example.com/services/secret-token",
        "--alert-on-reload=true",
        "--alert-webhook-url=https://alerts.example.com/other-token",
        "--resources-to-ignore=secrets",
        "--ignored-workload-types=cronjobs,jobs",
        "--namespace-selector=team:ops",
        "--namespaces-to-ignore=kube-system",
        "--is-Argo-Rollouts=true",
        "--coalesce-period=2s",
    ]);
    let json = serde_json::to_value(&o).unwrap();
    let text = json.to_string();
    assert!(!text.contains("token"), "{text}");
    assert_eq!(json["webhookUrl"], "https://hooks.example.com/<redacted>");
    assert_eq!(json["autoReloadAll"], false);
    assert_eq!(json["configmapUpdateOnChangeAnnotation"], "configmap.reloader.stakater.com/reload");
    assert_eq!(json["secretExcludeReloaderAnnotation"], "secrets.exclude.reloader.stakater.com/reload");
    assert_eq!(json["pauseDeploymentTimeAnnotation"], "deployment.reloader.stakater.com/paused-at");
    assert_eq!(json["logFormat"], "");
    assert_eq!(json["logLevel"], "info");
    assert_eq!(json["isArgoRollouts"], true);
    assert_eq!(json["reloadStrategy"], "env-vars");
    assert_eq!(json["enableHA"], false);
    assert_eq!(json["enableCSIIntegration"], false);
    assert_eq!(json["enablePProf"], false);
    assert_eq!(json["resourcesToIgnore"], serde_json::json!(["secrets"]));
    assert_eq!(json["workloadTypesToIgnore"], serde_json::json!(["cronjobs", "jobs"]));
    assert_eq!(json["namespaceSelectors"], serde_json::json!(["team=ops"]));
    assert_eq!(json["resourceSelectors"], serde_json::json!([]));
    assert_eq!(json["namespacesToIgnore"], serde_json::json!(["kube-system"]));
    assert_eq!(json["isOpenshift"], serde_json::Value::Null);
    assert_eq!(json["metricsAddr"], "0.0.0.0:9090");
    assert_eq!(json["coalescePeriod"], "2s");
    assert_eq!(json["maxWritesPerSecond"], 200.0);
    assert_eq!(json["ignoredSecretTypes"], serde_json::json!(["helm.sh/release.v1"]));
    assert_eq!(json["alertOnReload"], true);
}
