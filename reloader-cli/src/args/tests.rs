//! The command line: defaults, Go flag syntax, repeated and quoted list flags.

use std::collections::BTreeSet;

use reloader_core::model::{ResourceKind, WorkloadKind};
use reloader_core::options::{IgnoredResources, NamespaceScope};

use super::testing::{options, try_args};
use super::*;

fn args(flags: &[&str]) -> RunArgs {
    try_args(flags).unwrap_or_else(|e| panic!("{flags:?}: {e}"))
}

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
        (&a.pprof_addr, "127.0.0.1:6060"),
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
