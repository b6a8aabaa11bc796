use std::collections::BTreeSet;
use std::time::Duration;

use clap::{CommandFactory, FromArgMatches, Parser};

use super::*;
use crate::annotations::AnnotationKeys;

#[derive(Parser, Debug)]
#[command(name = "reloader")]
struct Cli {
    #[command(flatten)]
    args: RunArgs,
}

/// Parses flags with the process environment switched off, so the tables are deterministic;
/// the environment-only settings are reachable through their hidden flags.
pub(super) fn try_args(flags: &[&str]) -> Result<RunArgs, clap::Error> {
    let command = Cli::command().mut_args(|arg| arg.env(None::<&'static str>));
    let matches = command.try_get_matches_from(std::iter::once("reloader").chain(flags.iter().copied()))?;
    Ok(Cli::from_arg_matches(&matches)?.args)
}

pub(super) fn args(flags: &[&str]) -> RunArgs {
    try_args(flags).unwrap_or_else(|e| panic!("{flags:?}: {e}"))
}

pub(super) fn options(flags: &[&str]) -> Options {
    args(flags).validate().unwrap_or_else(|e| panic!("{flags:?}: {e}"))
}

pub(super) const META: &str = "--reloader-namespace=reloader";

#[test]
fn flag_defaults_are_stakaters() {
    let a = args(&[]);
    let strings = [
        (&a.configmap_annotation, "configmap.reloader.stakater.com/reload"),
        (&a.secret_annotation, "secret.reloader.stakater.com/reload"),
        (&a.auto_annotation, "reloader.stakater.com/auto"),
        (&a.configmap_auto_annotation, "configmap.reloader.stakater.com/auto"),
        (&a.secret_auto_annotation, "secret.reloader.stakater.com/auto"),
        (&a.auto_search_annotation, "reloader.stakater.com/search"),
        (&a.search_match_annotation, "reloader.stakater.com/match"),
        (&a.ignore_annotation, "reloader.stakater.com/ignore"),
        (&a.pause_deployment_annotation, "deployment.reloader.stakater.com/pause-period"),
        (&a.pause_deployment_time_annotation, "deployment.reloader.stakater.com/paused-at"),
        (&a.log_format, ""),
        (&a.log_level, "info"),
        (&a.is_argo_rollouts, "false"),
        (&a.is_openshift, ""),
        (&a.reload_strategy, "env-vars"),
        (&a.reload_on_create, "false"),
        (&a.reload_on_delete, "false"),
        (&a.pprof_addr, ":6060"),
        (&a.metrics_addr, ":9090"),
        (&a.leader_election_id, "stakater-reloader-lock"),
        (&a.leader_election_lease_duration, "15s"),
        (&a.leader_election_renew_deadline, "10s"),
        (&a.leader_election_retry_period, "2s"),
        (&a.coalesce_period, "0s"),
        (&a.webhook_addr, ":9443"),
    ];
    for (value, expected) in strings {
        assert_eq!(value, expected);
    }
    let flags = [
        a.auto_reload_all,
        a.enable_ha,
        a.sync_after_restart,
        a.enable_pprof,
        a.enable_csi_integration,
        a.dry_run,
        a.admission_webhook,
        a.allow_suspended_cronjobs,
    ];
    assert_eq!(flags, [false; 8]);
    assert!(a.leader_election_release_on_cancel);
    assert!(a.webhook_url.is_empty());
    let lists = [
        &a.resources_to_ignore,
        &a.ignored_workload_types,
        &a.namespaces,
        &a.namespaces_to_ignore,
        &a.namespace_selector,
        &a.resource_label_selector,
    ];
    assert!(lists.iter().all(|l| l.is_empty()));
    assert_eq!(a.ignored_secret_types, ["helm.sh/release.v1"]);
    assert_eq!(a.max_writes_per_second, 200.0);
    assert_eq!(a.leader_election_namespace, None);
    assert_eq!(a.otlp_endpoint, None);
}

#[test]
fn default_options() {
    let o = options(&[]);
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
    assert_eq!(o.metrics_addr, "0.0.0.0:9090".parse().unwrap());
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
        DecideOptions { auto_reload_all: false, strategy: ReloadStrategy::EnvVars }
    );
}

#[test]
fn validation_errors_name_the_flag_and_the_value() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--reload-strategy=foo"],
            r#"invalid value "foo" for --reload-strategy: expected env-vars or annotations"#,
        ),
        (
            &["--resources-to-ignore=configmaps,secrets"],
            r#"invalid value "configmaps,secrets" for --resources-to-ignore: configmaps and secrets cannot both be ignored"#,
        ),
        (
            &["--resources-to-ignore=secrets", "--resources-to-ignore=ConfigMaps"],
            r#"invalid value "secrets,ConfigMaps" for --resources-to-ignore: configmaps and secrets cannot both be ignored"#,
        ),
        (
            &["--resources-to-ignore=pods"],
            r#"invalid value "pods" for --resources-to-ignore: expected configmaps or secrets"#,
        ),
        (
            &["--ignored-workload-types=jobs,deployments"],
            r#"invalid value "deployments" for --ignored-workload-types: expected jobs, cronjobs, or both"#,
        ),
        (
            &["--namespace-selector=env in (a"],
            r#"invalid value "env in (a" for --namespace-selector: expected "," or ")", found the end"#,
        ),
        (
            &["--resource-label-selector=Bad_Key-=x"],
            r#"invalid value "Bad_Key-=x" for --resource-label-selector: "Bad_Key-" is not a valid label key: the name part must consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric"#,
        ),
        (
            &["--resource-label-selector=\"open"],
            r#"invalid value "\"open" for --resource-label-selector: unterminated quoted entry"#,
        ),
        (
            &["--coalesce-period=5x"],
            r#"invalid value "5x" for --coalesce-period: unknown unit "x" in duration "5x" (expected ns, us, µs, ms, s, m or h)"#,
        ),
        (&["--coalesce-period=-1s"], r#"invalid value "-1s" for --coalesce-period: negative duration "-1s""#),
        (
            &["--leader-election-lease-duration=soon"],
            r#"invalid value "soon" for --leader-election-lease-duration: invalid duration "soon""#,
        ),
        (
            &["--leader-election-retry-period=0"],
            r#"invalid value "0" for --leader-election-retry-period: must be greater than 0"#,
        ),
        (
            &["--leader-election-renew-deadline=15s"],
            r#"invalid value "15s" for --leader-election-renew-deadline: must be shorter than --leader-election-lease-duration (15s)"#,
        ),
        (
            &["--leader-election-retry-period=10s"],
            r#"invalid value "10s" for --leader-election-retry-period: must be shorter than --leader-election-renew-deadline (10s)"#,
        ),
        (
            &["--leader-election-id=Lock!"],
            r#"invalid value "Lock!" for --leader-election-id: must consist of lowercase alphanumerics, '-' or '.', and start and end with an alphanumeric"#,
        ),
        (
            &["--metrics-addr=9090"],
            r#"invalid value "9090" for --metrics-addr: expected [host]:port, with an IP address or localhost as host"#,
        ),
        (
            &["--pprof-addr=host:1"],
            r#"invalid value "host:1" for --pprof-addr: expected [host]:port, with an IP address or localhost as host"#,
        ),
        (
            &["--enable-pprof", "--pprof-addr=127.0.0.1:9090"],
            r#"invalid value "127.0.0.1:9090" for --pprof-addr: must differ from --metrics-addr (:9090): profiling is never served on the metrics port"#,
        ),
        (
            &["--log-level=loud"],
            r#"invalid value "loud" for --log-level: expected trace, debug, info, warning, error, fatal or panic"#,
        ),
        (
            &["--is-openshift=maybe"],
            r#"invalid value "maybe" for --is-openshift: expected true, false, or empty to detect"#,
        ),
        (&["--enable-ha"], "--enable-ha requires the POD_NAME environment variable"),
        (&["--enable-ha", "--pod-name=r-0"], "--enable-ha requires the POD_NAMESPACE environment variable"),
        (
            &["--enable-ha", "--pod-name= ", "--pod-namespace=ns"],
            "--enable-ha requires the POD_NAME environment variable",
        ),
        (
            &["--enable-ha", "--pod-name=r-0", "--pod-namespace=ns", "--leader-election-namespace=Bad"],
            r#"invalid value "Bad" for --leader-election-namespace: must consist of lowercase alphanumerics or '-', and start and end with an alphanumeric"#,
        ),
        (
            &["--namespaces=ok,Bad_NS"],
            r#"invalid value "Bad_NS" for --namespaces: not a namespace name: must consist of lowercase alphanumerics or '-', and start and end with an alphanumeric"#,
        ),
        (
            &["--namespaces-to-ignore=a.b"],
            r#"invalid value "a.b" for --namespaces-to-ignore: not a namespace name: must consist of lowercase alphanumerics or '-', and start and end with an alphanumeric"#,
        ),
        (
            &["--kubernetes-namespace=Prod"],
            r#"invalid value "Prod" for KUBERNETES_NAMESPACE: must consist of lowercase alphanumerics or '-', and start and end with an alphanumeric"#,
        ),
        (
            &["--auto-annotation=bad key"],
            r#"invalid value "bad key" for --auto-annotation: not a valid annotation key: the name part must consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric"#,
        ),
        (
            &["--configmap-annotation="],
            r#"invalid value "" for --configmap-annotation: not a valid annotation key: the name part must not be empty"#,
        ),
        (
            &["--max-writes-per-second=-1"],
            r#"invalid value "-1" for --max-writes-per-second: expected a number >= 0 (0: no limit)"#,
        ),
        (
            &["--max-writes-per-second=NaN"],
            r#"invalid value "NaN" for --max-writes-per-second: expected a number >= 0 (0: no limit)"#,
        ),
        (
            &["--webhook-url=ftp://hooks.example.com/T0/secret-token"],
            r#"invalid value "ftp://hooks.example.com/<redacted>" for --webhook-url: expected an http:// or https:// URL"#,
        ),
        (
            &["--otlp-endpoint=collector:4318"],
            r#"invalid value "collector:4318" for --otlp-endpoint: expected an http:// or https:// URL"#,
        ),
        (&["--admission-webhook"], "--admission-webhook requires --webhook-tls-cert and --webhook-tls-key"),
        (
            &["--admission-webhook", "--webhook-tls-cert=/c"],
            "--admission-webhook requires --webhook-tls-cert and --webhook-tls-key",
        ),
        (
            &["--admission-webhook", "--webhook-tls-cert=/c", "--webhook-tls-key=/k", "--webhook-addr=:9090"],
            r#"invalid value ":9090" for --webhook-addr: must differ from --metrics-addr"#,
        ),
    ];
    for (flags, expected) in cases {
        let error = args(flags).validate().expect_err(&format!("{flags:?} should fail"));
        assert_eq!(error.to_string(), *expected, "{flags:?}");
        assert!(!error.to_string().contains('\n'));
    }
}

#[test]
fn booleans_take_go_flag_syntax() {
    let cases: &[(&[&str], bool)] = &[
        (&[], false),
        (&["--auto-reload-all"], true),
        (&["--auto-reload-all=true"], true),
        (&["--auto-reload-all=1"], true),
        (&["--auto-reload-all=T"], true),
        (&["--auto-reload-all=false"], false),
        (&["--auto-reload-all=0"], false),
        (&["--auto-reload-all", "--auto-reload-all=False"], false),
    ];
    for (flags, expected) in cases {
        assert_eq!(args(flags).auto_reload_all, *expected, "{flags:?}");
    }
    assert!(!args(&["--leader-election-release-on-cancel=false"]).leader_election_release_on_cancel);
    for bad in [&["--enable-ha=yes"][..], &["--dry-run=maybe"], &["--enable-ha", "false"]] {
        assert!(try_args(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn string_booleans_compare_to_exactly_true() {
    let o = options(&["--is-Argo-Rollouts=true", "--reload-on-create=true", "--reload-on-delete=True"]);
    assert!(o.argo_rollouts && o.reload_on_create && !o.reload_on_delete);
    assert!(
        o.warnings
            .iter()
            .any(|w| w == r#"--reload-on-delete="True" counts as false: only exactly "true" enables it"#)
    );
    assert!(!options(&["--is-Argo-Rollouts=false"]).argo_rollouts);
}
