//! Each group of settings, from raw values to validated `Options`.

use std::time::Duration;

use serde_json::{Value, json};

use super::tests::{Edit, options, raw, with_meta_info};
use super::*;

#[test]
fn warnings() {
    let cases: &[(Edit, &str)] = &[
        (|r| r.log_format = "xml".into(), r#"unsupported --log-format "xml"; logging as text"#),
        (
            |r| r.sync_after_restart = true,
            "--sync-after-restart has no effect without --reload-on-create=true",
        ),
        (
            |r| {
                r.namespaces = vec!["a".into()];
                r.namespaces_to_ignore = vec!["b".into()];
            },
            "--namespaces-to-ignore is only honoured when watching all namespaces; ignoring it",
        ),
        (
            |r| {
                r.kubernetes_namespace = Some("a".into());
                r.namespace_selector = vec!["x=y".into()];
            },
            "--namespace-selector is only honoured when watching all namespaces; ignoring it",
        ),
        (
            |r| r.webhook_tls_cert = Some("/c".into()),
            "--webhook-tls-cert/--webhook-tls-key/--webhook-client-ca have no effect without --admission-webhook or --job-fence",
        ),
        (
            |r| r.webhook_client_ca = Some("/ca".into()),
            "--webhook-tls-cert/--webhook-tls-key/--webhook-client-ca have no effect without --admission-webhook or --job-fence",
        ),
        (
            |r| {
                r.webhook_url = "https://hooks.example/x".parse().unwrap();
                r.admission_webhook = true;
                r.webhook_tls_cert = Some("/c".into());
                r.webhook_tls_key = Some("/k".into());
            },
            "--admission-webhook patches nothing with --webhook-url: that mode never writes a workload",
        ),
        (
            |r| r.alert_on_reload = Some("yes".into()),
            r#"ALERT_ON_RELOAD="yes" is not a boolean; alerts are off"#,
        ),
        (
            |r| r.alert_on_reload = Some("true".into()),
            "ALERT_ON_RELOAD is true but ALERT_WEBHOOK_URL is not set; alerts are off",
        ),
        (
            |r| r.alert_webhook_url = Some(SensitiveString::new("https://hooks.example/T")),
            "ALERT_WEBHOOK_URL is set but ALERT_ON_RELOAD is not true; alerts are off (Stakater v2 would send them)",
        ),
        (
            |r| {
                r.alert_on_reload = Some("true".into());
                r.alert_webhook_url = Some(SensitiveString::new("https://hooks.example/T"));
                r.alert_sink = Some("slack".into());
                r.alert_structured = true;
            },
            r#"ALERT_STRUCTURED applies to the raw sink only; ignored for ALERT_SINK="slack""#,
        ),
    ];
    for (edit, expected) in cases {
        let mut raw = raw(*edit);
        with_meta_info(&mut raw);
        let o = raw.validate().unwrap();
        assert_eq!(o.warnings, [*expected]);
    }
    assert_eq!(options(|r| r.log_format = "json".into()).log_format, LogFormat::Json);
    assert_eq!(options(|r| r.log_format = "xml".into()).log_format, LogFormat::Text);
}

#[test]
fn namespace_scope_precedence() {
    let only = |names: &[&str]| NamespaceScope::Only(names.iter().map(|n| n.to_string()).collect());
    let cases: &[(Edit, NamespaceScope)] = &[
        (
            |r| {
                r.namespaces = vec!["b,a,b".into()];
                r.kubernetes_namespace = Some("c".into());
            },
            only(&["b", "a"]),
        ),
        (|r| r.kubernetes_namespace = Some("c".into()), only(&["c"])),
        (
            |r| r.kubernetes_namespace = Some(" ".into()),
            NamespaceScope::All { ignore: vec![], selector: None },
        ),
        (
            |r| r.namespaces_to_ignore = vec!["x".into()],
            NamespaceScope::All { ignore: vec!["x".into()], selector: None },
        ),
    ];
    for (row, (edit, expected)) in cases.iter().enumerate() {
        assert_eq!(&options(*edit).namespace_scope, expected, "row {row}");
    }
}

#[test]
fn leader_election_settings() {
    let o = options(|r| {
        r.enable_ha = true;
        r.pod_name = Some("reloader-0".into());
        r.pod_namespace = Some("ops".into());
        r.leader_election_lease_duration = "30s".into();
        r.leader_election_renew_deadline = "20s".into();
        r.leader_election_retry_period = "500ms".into();
        r.leader_election_release_on_cancel = false;
    });
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
    let elsewhere = options(|r| {
        r.enable_ha = true;
        r.pod_name = Some("r".into());
        r.pod_namespace = Some("ops".into());
        r.leader_election_namespace = Some("locks".into());
    });
    assert_eq!(elsewhere.leader_election.unwrap().namespace, "locks");
    // POD_NAME names the pod (Events, logs) even without leader election.
    assert_eq!(options(|r| r.pod_name = Some("reloader-0".into())).pod_name.as_deref(), Some("reloader-0"));
}

#[test]
fn extension_settings() {
    let o = options(|r| {
        r.coalesce_period = "1m30s".into();
        r.max_writes_per_second = 0.0;
        r.dry_run = true;
        r.admission_webhook = true;
        r.webhook_tls_cert = Some("/tls/tls.crt".into());
        r.webhook_tls_key = Some("/tls/tls.key".into());
        r.webhook_client_ca = Some(" /tls/client-ca.crt ".into());
        r.otlp_endpoint = Some("http://collector:4318".into());
        r.allow_suspended_cronjobs = true;
        r.metrics_addr = "127.0.0.1:19090".into();
        r.enable_pprof = true;
        r.is_openshift = "false".into();
        r.enable_csi_integration = true;
        r.reload_strategy = "annotations".into();
    });
    assert_eq!(o.coalesce_period, Duration::from_secs(90));
    assert_eq!(o.max_writes_per_second, 0.0);
    assert!(o.dry_run && o.allow_suspended_cronjobs && o.enable_csi_integration);
    let webhook = o.admission_webhook.as_ref().unwrap();
    assert_eq!(webhook.addr, ListenAddr { host: None, port: 9443 });
    assert_eq!(webhook.tls_cert, std::path::Path::new("/tls/tls.crt"));
    assert_eq!(webhook.client_ca.as_deref(), Some(std::path::Path::new("/tls/client-ca.crt")));
    assert_eq!(webhook.endpoints, AdmissionEndpoints { mutate: true, job_fence: false });
    let fence_only = options(|r| {
        r.job_fence = true;
        r.webhook_tls_cert = Some("/c".into());
        r.webhook_tls_key = Some("/k".into());
    });
    assert_eq!(
        fence_only.admission_webhook.map(|w| w.endpoints),
        Some(AdmissionEndpoints { mutate: false, job_fence: true }),
        "--job-fence alone runs the server with /validate-jobs only"
    );
    assert_eq!(
        options(|r| {
            r.admission_webhook = true;
            r.webhook_tls_cert = Some("/c".into());
            r.webhook_tls_key = Some("/k".into());
            r.webhook_client_ca = Some(" ".into());
        })
        .admission_webhook
        .unwrap()
        .client_ca,
        None,
        "blank: no client authentication"
    );
    assert_eq!(o.otlp_endpoint.as_deref(), Some("http://collector:4318"));
    assert_eq!(o.metrics_addr.to_string(), "127.0.0.1:19090");
    assert_eq!(o.pprof_addr, Some(ListenAddr { host: None, port: 6060 }));
    assert_eq!(o.openshift, Some(false));
    assert_eq!(options(|r| r.is_openshift = "true".into()).openshift, Some(true));
    assert_eq!(o.decide_options().strategy, ReloadStrategy::Annotations);
}

#[test]
fn environment_settings() {
    let o = options(|r| {
        r.metrics_count_by_namespace = Some("enabled".into());
        r.alert_on_reload = Some("true".into());
        r.alert_webhook_url = Some(SensitiveString::new(" https://hooks.slack.com/services/T/B/token "));
        r.alert_sink = Some("Slack".into());
        r.alert_webhook_proxy = Some(SensitiveString::new("http://proxy:3128"));
        r.alert_additional_info = Some("prod-eu".into());
        r.reloader_namespace = Some("ops".into());
        r.reloader_deployment_name = Some("reloader".into());
    });
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
    assert!(!options(|r| r.metrics_count_by_namespace = Some("true".into())).metrics_count_by_namespace);
    assert_eq!(options(with_meta_info).meta_info.unwrap().deployment_name, None);
}

#[test]
fn meta_info_json() {
    let o = options(|r| {
        r.webhook_url = SensitiveString::new("https://hooks.example.com/services/secret-token");
        r.alert_on_reload = Some("true".into());
        r.alert_webhook_url = Some(SensitiveString::new("https://alerts.example.com/other-token"));
        r.resources_to_ignore = vec!["secrets".into()];
        r.ignored_workload_types = vec!["cronjobs,jobs".into()];
        r.namespace_selector = vec!["team:ops".into()];
        r.namespaces_to_ignore = vec!["kube-system".into()];
        r.is_argo_rollouts = "true".into();
        r.coalesce_period = "2s".into();
    });
    let json = serde_json::to_value(&o).unwrap();
    let text = json.to_string();
    assert!(!text.contains("token"), "{text}");
    let expected = [
        ("webhookUrl", json!("https://hooks.example.com/<redacted>")),
        ("autoReloadAll", json!(false)),
        ("configmapUpdateOnChangeAnnotation", json!("configmap.reloader.stakater.com/reload")),
        ("secretExcludeReloaderAnnotation", json!("secrets.exclude.reloader.stakater.com/reload")),
        ("pauseDeploymentTimeAnnotation", json!("deployment.reloader.stakater.com/paused-at")),
        ("logFormat", json!("")),
        ("logLevel", json!("info")),
        ("isArgoRollouts", json!(true)),
        ("reloadStrategy", json!("env-vars")),
        ("enableHA", json!(false)),
        ("enableCSIIntegration", json!(false)),
        ("enablePProf", json!(false)),
        ("resourcesToIgnore", json!(["secrets"])),
        ("workloadTypesToIgnore", json!(["cronjobs", "jobs"])),
        ("namespaceSelectors", json!(["team=ops"])),
        ("resourceSelectors", json!([])),
        ("namespacesToIgnore", json!(["kube-system"])),
        ("isOpenshift", Value::Null),
        ("metricsAddr", json!(":9090")),
        ("coalescePeriod", json!("2s")),
        ("maxWritesPerSecond", json!(200.0)),
        ("ignoredSecretTypes", json!(["helm.sh/release.v1"])),
        ("alertOnReload", json!(true)),
    ];
    for (key, value) in expected {
        assert_eq!(json[key], value, "{key}");
    }
}

/// Stakater v2's flags: the same meaning where ours has the behaviour.
#[test]
fn stakater_v2_settings() {
    let o = options(|r| {
        r.configmap_exclude_annotation = "example.com/cm-exclude".into();
        r.secret_exclude_annotation = "example.com/secret-exclude".into();
        r.secretproviderclass_annotation = "example.com/spc".into();
        r.secretproviderclass_auto_annotation = "example.com/spc-auto".into();
        r.secretproviderclass_exclude_annotation = "example.com/spc-exclude".into();
        r.health_addr = Some(":8081".into());
        r.alert_on_reload = Some("true".into());
        r.alert_webhook_url = Some(SensitiveString::new("https://hooks.example/T"));
        r.alert_webhook_proxy = Some(SensitiveString::new("http://old-proxy:3128"));
        r.alert_proxy = Some(SensitiveString::new("http://proxy:3128"));
        r.alert_structured = true;
    });
    use crate::model::ResourceKind::{ConfigMap, Secret, SecretProviderClass};
    assert_eq!(o.keys.exclude(ConfigMap), "example.com/cm-exclude");
    assert_eq!(o.keys.exclude(Secret), "example.com/secret-exclude");
    assert_eq!(o.keys.exclude(SecretProviderClass), "example.com/spc-exclude");
    assert_eq!(o.keys.explicit(SecretProviderClass), "example.com/spc");
    assert_eq!(o.keys.typed_auto(SecretProviderClass), "example.com/spc-auto");
    assert_eq!(o.health_addr, Some(ListenAddr { host: None, port: 8081 }));
    let alert = o.alert.as_ref().unwrap();
    assert_eq!(
        alert.proxy.as_ref().map(SensitiveString::expose),
        Some("http://proxy:3128"),
        "ALERT_PROXY wins"
    );
    assert!(alert.structured && alert.sink == AlertSink::Raw);
    assert_eq!(options(|_| {}).health_addr, None, "unset: the probes stay on --metrics-addr only");

    let refused: &[(Edit, &str)] = &[
        (
            |r| r.configmap_exclude_annotation = "not a key".into(),
            r#"invalid value "not a key" for --configmap-exclude-annotation"#,
        ),
        (|r| r.health_addr = Some(":9090".into()), r#"invalid value ":9090" for --health-addr: must differ"#),
        (|r| r.health_addr = Some("nohost:x".into()), r#"invalid value "nohost:x" for --health-addr"#),
    ];
    for (edit, expected) in refused {
        let error = raw(*edit).validate().expect_err(expected).to_string();
        assert!(error.starts_with(expected), "{error}");
    }
}
