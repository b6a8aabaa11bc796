//! `Options` as the JSON of the meta-info ConfigMap's `reloaderOptions` key: Stakater's field
//! names for what Stakater publishes, then ours. URLs are reduced to their host, and alert
//! settings are left out, because they carry tokens.

use serde::{Serialize, Serializer};

use super::values::redact_url;
use super::{NamespaceScope, Options};
use crate::duration;
use crate::model::{ResourceKind, WorkloadKind};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PublishedOptions<'a> {
    auto_reload_all: bool,
    configmap_update_on_change_annotation: &'a str,
    secret_update_on_change_annotation: &'a str,
    secret_provider_class_update_on_change_annotation: &'a str,
    reloader_auto_annotation: &'a str,
    ignore_resource_annotation: &'a str,
    configmap_reloader_auto_annotation: &'a str,
    secret_reloader_auto_annotation: &'a str,
    secret_provider_class_reloader_auto_annotation: &'a str,
    configmap_exclude_reloader_annotation: &'a str,
    secret_exclude_reloader_annotation: &'a str,
    secret_provider_class_exclude_reloader_annotation: &'a str,
    auto_search_annotation: &'a str,
    search_match_annotation: &'a str,
    rollout_strategy_annotation: &'a str,
    pause_deployment_annotation: &'a str,
    pause_deployment_time_annotation: &'a str,
    log_format: &'static str,
    log_level: &'static str,
    is_argo_rollouts: bool,
    reload_strategy: &'static str,
    reload_on_create: bool,
    reload_on_delete: bool,
    sync_after_restart: bool,
    #[serde(rename = "enableHA")]
    enable_ha: bool,
    #[serde(rename = "enableCSIIntegration")]
    enable_csi_integration: bool,
    webhook_url: String,
    resources_to_ignore: Vec<&'static str>,
    workload_types_to_ignore: Vec<&'static str>,
    namespace_selectors: Vec<String>,
    resource_selectors: Vec<String>,
    namespaces_to_ignore: &'a [String],
    #[serde(rename = "enablePProf")]
    enable_pprof: bool,
    pprof_addr: String,
    // Ours.
    namespaces: &'a [String],
    is_openshift: Option<bool>,
    metrics_addr: String,
    coalesce_period: String,
    /// Empty when none.
    maintenance_window: String,
    /// "off" when off.
    loop_guard: String,
    /// 0 when unlimited.
    max_writes_per_second: f64,
    dry_run: bool,
    ignored_secret_types: Vec<&'a str>,
    admission_webhook: bool,
    job_fence: bool,
    allow_suspended_cronjobs: bool,
    metrics_count_by_namespace: bool,
    alert_on_reload: bool,
}

impl<'a> PublishedOptions<'a> {
    fn new(options: &'a Options) -> Self {
        let keys = &options.keys;
        let (namespaces, namespaces_to_ignore, namespace_selector): (&[String], &[String], _) =
            match &options.namespace_scope {
                NamespaceScope::All { ignore, selector } => (&[], ignore, selector.as_ref()),
                NamespaceScope::Only(namespaces) => (namespaces, &[], None),
            };
        let selector_strings =
            |s: Option<&crate::selector::LabelSelector>| s.map(|s| s.to_string()).into_iter().collect();
        PublishedOptions {
            auto_reload_all: options.auto_reload_all,
            configmap_update_on_change_annotation: &keys.configmap_reload,
            secret_update_on_change_annotation: &keys.secret_reload,
            secret_provider_class_update_on_change_annotation: &keys.spc_reload,
            reloader_auto_annotation: &keys.auto,
            ignore_resource_annotation: &keys.ignore,
            configmap_reloader_auto_annotation: &keys.configmap_auto,
            secret_reloader_auto_annotation: &keys.secret_auto,
            secret_provider_class_reloader_auto_annotation: &keys.spc_auto,
            configmap_exclude_reloader_annotation: &keys.configmap_exclude,
            secret_exclude_reloader_annotation: &keys.secret_exclude,
            secret_provider_class_exclude_reloader_annotation: &keys.spc_exclude,
            auto_search_annotation: &keys.search,
            search_match_annotation: &keys.search_match,
            rollout_strategy_annotation: &keys.rollout_strategy,
            pause_deployment_annotation: &keys.pause_period,
            pause_deployment_time_annotation: &keys.paused_at,
            log_format: options.log_format.as_flag_value(),
            log_level: options.log_level.as_str(),
            is_argo_rollouts: options.argo_rollouts,
            reload_strategy: options.strategy.as_str(),
            reload_on_create: options.reload_on_create,
            reload_on_delete: options.reload_on_delete,
            sync_after_restart: options.sync_after_restart,
            enable_ha: options.leader_election.is_some(),
            enable_csi_integration: options.enable_csi_integration,
            webhook_url: options.webhook_url.as_ref().map(|url| redact_url(url.expose())).unwrap_or_default(),
            resources_to_ignore: options
                .ignored_resources
                .kind()
                .map(ResourceKind::plural)
                .into_iter()
                .collect(),
            workload_types_to_ignore: options
                .ignored_workloads
                .iter()
                .map(|kind| match kind {
                    WorkloadKind::Job => "jobs",
                    WorkloadKind::CronJob => "cronjobs",
                    other => other.as_str(),
                })
                .collect(),
            namespace_selectors: selector_strings(namespace_selector),
            resource_selectors: selector_strings(options.resource_label_selector.as_ref()),
            namespaces_to_ignore,
            enable_pprof: options.pprof_addr.is_some(),
            pprof_addr: options.pprof_addr.map(|addr| addr.to_string()).unwrap_or_default(),
            namespaces,
            is_openshift: options.openshift,
            metrics_addr: options.metrics_addr.to_string(),
            coalesce_period: duration::format_go_duration(options.coalesce_period),
            maintenance_window: options.default_windows.as_ref().map(|w| w.to_string()).unwrap_or_default(),
            loop_guard: options.loop_guard.map_or_else(|| "off".to_owned(), |g| g.to_string()),
            max_writes_per_second: options.max_writes_per_second,
            dry_run: options.dry_run,
            ignored_secret_types: options.ignored_secret_types.iter().map(String::as_str).collect(),
            admission_webhook: options.admission_webhook.as_ref().is_some_and(|w| w.endpoints.mutate),
            job_fence: options.admission_webhook.as_ref().is_some_and(|w| w.endpoints.job_fence),
            allow_suspended_cronjobs: options.allow_suspended_cronjobs,
            metrics_count_by_namespace: options.metrics_count_by_namespace,
            alert_on_reload: options.alert.is_some(),
        }
    }
}

impl Serialize for Options {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        PublishedOptions::new(self).serialize(serializer)
    }
}
