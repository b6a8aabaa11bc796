//! Validation tables over the raw settings; each row edits Stakater's defaults. How the command
//! line fills them in is tested with the binary's flags.

use std::collections::BTreeSet;
use std::time::Duration;

use super::*;
use crate::annotations::AnnotationKeys;

/// An edit of the defaults: one row of a table.
pub(super) type Edit = fn(&mut RawOptions);

/// The settings of a bare `reloader run` with an empty environment.
fn defaults() -> RawOptions {
    RawOptions {
        auto_reload_all: false,
        configmap_annotation: "configmap.reloader.stakater.com/reload".into(),
        secret_annotation: "secret.reloader.stakater.com/reload".into(),
        auto_annotation: "reloader.stakater.com/auto".into(),
        configmap_auto_annotation: "configmap.reloader.stakater.com/auto".into(),
        secret_auto_annotation: "secret.reloader.stakater.com/auto".into(),
        auto_search_annotation: "reloader.stakater.com/search".into(),
        search_match_annotation: "reloader.stakater.com/match".into(),
        ignore_annotation: "reloader.stakater.com/ignore".into(),
        pause_deployment_annotation: "deployment.reloader.stakater.com/pause-period".into(),
        pause_deployment_time_annotation: "deployment.reloader.stakater.com/paused-at".into(),
        configmap_exclude_annotation: "configmaps.exclude.reloader.stakater.com/reload".into(),
        secret_exclude_annotation: "secrets.exclude.reloader.stakater.com/reload".into(),
        secretproviderclass_annotation: "secretproviderclass.reloader.stakater.com/reload".into(),
        secretproviderclass_auto_annotation: "secretproviderclass.reloader.stakater.com/auto".into(),
        secretproviderclass_exclude_annotation: "secretproviderclasses.exclude.reloader.stakater.com/reload"
            .into(),
        log_format: String::new(),
        log_level: "info".into(),
        webhook_url: SensitiveString::default(),
        resources_to_ignore: vec![],
        ignored_workload_types: vec![],
        custom_workload: vec![],
        restart_by_eviction: false,
        reload_pods: false,
        namespaces: vec![],
        namespaces_to_ignore: vec![],
        namespace_selector: vec![],
        resource_label_selector: vec![],
        is_argo_rollouts: "false".into(),
        is_openshift: String::new(),
        reload_strategy: "env-vars".into(),
        reload_on_create: "false".into(),
        reload_on_delete: "false".into(),
        enable_ha: false,
        sync_after_restart: false,
        enable_pprof: false,
        pprof_addr: ":6060".into(),
        enable_csi_integration: false,
        metrics_addr: ":9090".into(),
        health_addr: None,
        leader_election_id: "stakater-reloader-lock".into(),
        leader_election_namespace: None,
        leader_election_lease_duration: "15s".into(),
        leader_election_renew_deadline: "10s".into(),
        leader_election_retry_period: "2s".into(),
        leader_election_release_on_cancel: true,
        coalesce_period: "0s".into(),
        maintenance_window: String::new(),
        loop_guard: "20/10m".into(),
        max_writes_per_second: 200.0,
        dry_run: false,
        ignored_secret_types: vec!["helm.sh/release.v1".into()],
        admission_webhook: false,
        job_fence: false,
        webhook_tls_cert: None,
        webhook_tls_key: None,
        webhook_client_ca: None,
        webhook_addr: ":9443".into(),
        otlp_endpoint: None,
        allow_suspended_cronjobs: false,
        kubernetes_namespace: None,
        pod_name: None,
        pod_namespace: None,
        reloader_namespace: None,
        reloader_deployment_name: None,
        metrics_count_by_namespace: None,
        alert_on_reload: None,
        alert_webhook_url: None,
        alert_sink: None,
        alert_webhook_proxy: None,
        alert_additional_info: None,
        alert_proxy: None,
        alert_structured: false,
    }
}

pub(super) fn raw(edit: Edit) -> RawOptions {
    let mut raw = defaults();
    edit(&mut raw);
    raw
}

pub(super) fn options(edit: Edit) -> Options {
    raw(edit).validate().unwrap_or_else(|e| panic!("{e}"))
}

/// Publishes the meta-info ConfigMap, which silences the warning that it is not published.
pub(super) fn with_meta_info(raw: &mut RawOptions) {
    raw.reloader_namespace = Some("reloader".into());
}

#[test]
fn default_options() {
    let o = options(|_| {});
    assert_eq!(o.keys, AnnotationKeys::default());
    assert!(!o.auto_reload_all && !o.reload_on_create && !o.reload_on_delete && !o.sync_after_restart);
    assert_eq!(o.strategy, ReloadStrategy::EnvVars);
    assert_eq!(o.ignored_resources, IgnoredResources::None);
    assert!(o.ignored_workloads.is_empty());
    assert_eq!(o.namespace_scope, NamespaceScope::All { ignore: vec![], selector: None });
    assert_eq!(o.resource_label_selector, None);
    assert!(!o.argo_rollouts && !o.enable_csi_integration && !o.dry_run && !o.allow_suspended_cronjobs);
    assert_eq!(o.openshift, None);
    assert_eq!(o.leader_election, None);
    assert_eq!(o.pod_name, None);
    assert_eq!(o.webhook_url, None);
    assert_eq!((o.log_format, o.log_level), (LogFormat::Text, LogLevel::Info));
    assert_eq!(o.metrics_addr, ListenAddr { host: None, port: 9090 });
    assert_eq!(o.pprof_addr, None);
    assert_eq!(o.coalesce_period, Duration::ZERO);
    assert_eq!(o.max_writes_per_second, 200.0);
    assert_eq!(o.ignored_secret_types, BTreeSet::from(["helm.sh/release.v1".to_owned()]));
    assert_eq!(o.admission_webhook, None);
    assert_eq!(o.otlp_endpoint, None);
    assert!(!o.metrics_count_by_namespace);
    assert_eq!(o.alert, None);
    assert_eq!(o.meta_info, None);
    assert_eq!(
        o.warnings,
        ["RELOADER_NAMESPACE is not set; the reloader-meta-info ConfigMap is not published"]
    );
    assert_eq!(
        o.decide_options(),
        DecideOptions {
            auto_reload_all: false,
            strategy: ReloadStrategy::EnvVars,
            allow_suspended_cronjobs: false
        }
    );
}

#[test]
fn validation_errors_name_the_flag_and_the_value() {
    let cases: &[(Edit, &str)] = &[
        (
            |r| r.reload_strategy = "foo".into(),
            r#"invalid value "foo" for --reload-strategy: expected env-vars or annotations"#,
        ),
        (
            |r| r.resources_to_ignore = vec!["configmaps,secrets".into()],
            r#"invalid value "configmaps,secrets" for --resources-to-ignore: configmaps and secrets cannot both be ignored"#,
        ),
        (
            |r| {
                r.resources_to_ignore = vec!["secrets".into()];
                r.resources_to_ignore.push("ConfigMaps".into());
            },
            r#"invalid value "secrets,ConfigMaps" for --resources-to-ignore: configmaps and secrets cannot both be ignored"#,
        ),
        (
            |r| r.resources_to_ignore = vec!["pods".into()],
            r#"invalid value "pods" for --resources-to-ignore: expected configmaps or secrets"#,
        ),
        (
            |r| r.ignored_workload_types = vec!["jobs,deployments".into()],
            r#"invalid value "deployments" for --ignored-workload-types: expected jobs, cronjobs, or both"#,
        ),
        (
            |r| r.namespace_selector = vec!["env in (a".into()],
            r#"invalid value "env in (a" for --namespace-selector: expected "," or ")", found the end"#,
        ),
        (
            |r| r.resource_label_selector = vec!["Bad_Key-=x".into()],
            r#"invalid value "Bad_Key-=x" for --resource-label-selector: "Bad_Key-" is not a valid label key: the name part must consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric"#,
        ),
        (
            |r| r.resource_label_selector = vec![r#""open"#.into()],
            r#"invalid value "\"open" for --resource-label-selector: unterminated quoted entry"#,
        ),
        (
            |r| r.coalesce_period = "5x".into(),
            r#"invalid value "5x" for --coalesce-period: unknown unit "x" in duration "5x" (expected ns, us, µs, ms, s, m or h)"#,
        ),
        (
            |r| r.maintenance_window = "Mun 02:00-04:00 UTC".into(),
            r#"invalid value "Mun 02:00-04:00 UTC" for --maintenance-window: unknown day "Mun" in "Mun 02:00-04:00 UTC""#,
        ),
        (
            |r| r.loop_guard = "1/10m".into(),
            r#"invalid value "1/10m" for --loop-guard: reloads "1": expected a whole number, at least 2 (expected <reloads>/<duration> such as 20/10m, or off)"#,
        ),
        (
            |r| r.coalesce_period = "-1s".into(),
            r#"invalid value "-1s" for --coalesce-period: negative duration "-1s""#,
        ),
        (
            |r| r.leader_election_lease_duration = "soon".into(),
            r#"invalid value "soon" for --leader-election-lease-duration: invalid duration "soon""#,
        ),
        (
            |r| r.leader_election_retry_period = "0".into(),
            r#"invalid value "0" for --leader-election-retry-period: must be greater than 0"#,
        ),
        (
            |r| r.leader_election_renew_deadline = "15s".into(),
            r#"invalid value "15s" for --leader-election-renew-deadline: must be shorter than --leader-election-lease-duration (15s)"#,
        ),
        (
            |r| r.leader_election_retry_period = "10s".into(),
            r#"invalid value "10s" for --leader-election-retry-period: must be shorter than --leader-election-renew-deadline (10s) divided by 1.2 (retries are jittered)"#,
        ),
        (
            |r| r.leader_election_retry_period = "8500ms".into(),
            r#"invalid value "8500ms" for --leader-election-retry-period: must be shorter than --leader-election-renew-deadline (10s) divided by 1.2 (retries are jittered)"#,
        ),
        (
            |r| r.leader_election_lease_duration = "15500ms".into(),
            r#"invalid value "15500ms" for --leader-election-lease-duration: must be a whole number of seconds, at most 2147483647s (the Lease records whole seconds)"#,
        ),
        (
            |r| r.leader_election_lease_duration = "2147483648s".into(),
            r#"invalid value "2147483648s" for --leader-election-lease-duration: must be a whole number of seconds, at most 2147483647s (the Lease records whole seconds)"#,
        ),
        (
            |r| r.leader_election_id = "Lock!".into(),
            r#"invalid value "Lock!" for --leader-election-id: must consist of lowercase alphanumerics, '-' or '.', and start and end with an alphanumeric"#,
        ),
        (
            |r| r.metrics_addr = "9090".into(),
            r#"invalid value "9090" for --metrics-addr: expected [host]:port, with an IP address or localhost as host"#,
        ),
        (
            |r| r.pprof_addr = "host:1".into(),
            r#"invalid value "host:1" for --pprof-addr: expected [host]:port, with an IP address or localhost as host"#,
        ),
        (
            |r| {
                r.enable_pprof = true;
                r.pprof_addr = "127.0.0.1:9090".into();
            },
            r#"invalid value "127.0.0.1:9090" for --pprof-addr: must differ from --metrics-addr (:9090): profiling is never served on the metrics port"#,
        ),
        (
            |r| r.log_level = "loud".into(),
            r#"invalid value "loud" for --log-level: expected trace, debug, info, warn, warning, error, fatal or panic"#,
        ),
        (
            |r| r.is_openshift = "maybe".into(),
            r#"invalid value "maybe" for --is-openshift: expected true, false, or empty to detect"#,
        ),
        (|r| r.enable_ha = true, "--enable-ha requires the POD_NAME environment variable"),
        (
            |r| {
                r.enable_ha = true;
                r.pod_name = Some("r-0".into());
            },
            "--enable-ha requires the POD_NAMESPACE environment variable",
        ),
        (
            |r| {
                r.enable_ha = true;
                r.pod_name = Some(" ".into());
                r.pod_namespace = Some("ns".into());
            },
            "--enable-ha requires the POD_NAME environment variable",
        ),
        (
            |r| {
                r.enable_ha = true;
                r.pod_name = Some("r-0".into());
                r.pod_namespace = Some("ns".into());
                r.leader_election_namespace = Some("Bad".into());
            },
            r#"invalid value "Bad" for --leader-election-namespace: must consist of lowercase alphanumerics or '-', and start and end with an alphanumeric"#,
        ),
        (
            |r| r.namespaces = vec!["ok,Bad_NS".into()],
            r#"invalid value "Bad_NS" for --namespaces: not a namespace name: must consist of lowercase alphanumerics or '-', and start and end with an alphanumeric"#,
        ),
        (
            |r| r.namespaces_to_ignore = vec!["a.b".into()],
            r#"invalid value "a.b" for --namespaces-to-ignore: not a namespace name: must consist of lowercase alphanumerics or '-', and start and end with an alphanumeric"#,
        ),
        (
            |r| r.kubernetes_namespace = Some("Prod".into()),
            r#"invalid value "Prod" for KUBERNETES_NAMESPACE: must consist of lowercase alphanumerics or '-', and start and end with an alphanumeric"#,
        ),
        (
            |r| r.auto_annotation = "bad key".into(),
            r#"invalid value "bad key" for --auto-annotation: not a valid annotation key: the name part must consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric"#,
        ),
        (
            |r| r.configmap_annotation = "".into(),
            r#"invalid value "" for --configmap-annotation: not a valid annotation key: the name part must not be empty"#,
        ),
        (
            |r| r.max_writes_per_second = -1.0,
            r#"invalid value "-1" for --max-writes-per-second: expected a number >= 0 (0: no limit)"#,
        ),
        (
            |r| r.max_writes_per_second = f64::NAN,
            r#"invalid value "NaN" for --max-writes-per-second: expected a number >= 0 (0: no limit)"#,
        ),
        (
            |r| r.webhook_url = SensitiveString::new("ftp://hooks.example.com/T0/secret-token"),
            r#"invalid value "ftp://hooks.example.com/<redacted>" for --webhook-url: expected an http:// or https:// URL"#,
        ),
        (
            |r| r.otlp_endpoint = Some("collector:4318".into()),
            r#"invalid value "collector:4318" for --otlp-endpoint: expected an http:// or https:// URL"#,
        ),
        (
            |r| r.admission_webhook = true,
            "--admission-webhook requires --webhook-tls-cert and --webhook-tls-key",
        ),
        (|r| r.job_fence = true, "--job-fence requires --webhook-tls-cert and --webhook-tls-key"),
        (
            |r| {
                r.admission_webhook = true;
                r.webhook_tls_cert = Some("/c".into());
            },
            "--admission-webhook requires --webhook-tls-cert and --webhook-tls-key",
        ),
        (
            |r| {
                r.admission_webhook = true;
                r.webhook_tls_cert = Some("/c".into());
                r.webhook_tls_key = Some("/k".into());
                r.webhook_addr = ":9090".into();
            },
            r#"invalid value ":9090" for --webhook-addr: must differ from --metrics-addr"#,
        ),
    ];
    for (edit, expected) in cases {
        let error = raw(*edit).validate().expect_err(&format!("{expected} should fail"));
        assert_eq!(error.to_string(), *expected);
        assert!(!error.to_string().contains('\n'));
    }
}

#[test]
fn string_booleans_compare_to_exactly_true() {
    let o = options(|r| {
        r.is_argo_rollouts = "true".into();
        r.reload_on_create = "true".into();
        r.reload_on_delete = "True".into();
    });
    assert!(o.argo_rollouts && o.reload_on_create && !o.reload_on_delete);
    assert!(
        o.warnings
            .iter()
            .any(|w| w == r#"--reload-on-delete="True" counts as false: only exactly "true" enables it"#)
    );
    assert!(!options(|r| r.is_argo_rollouts = "false".into()).argo_rollouts);
}
