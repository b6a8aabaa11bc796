//! [`RawOptions::validate`]: from flag text to [`Options`], one check per flag.

use std::path::PathBuf;
use std::sync::Arc;

use super::fields::{
    ignored_resources, ignored_workloads, invalid, list, listen_addr, log_format, namespace_names, non_blank,
    openshift, parse_duration, positive_duration, selector, stakater_true, webhook_url,
};
use super::values::is_http_url;
use super::{
    AdmissionEndpoints, AdmissionWebhook, AlertConfig, AlertSink, ConfigError, LeaderElection, ListenAddr,
    LogLevel, MetaInfoTarget, NamespaceScope, Options, RawOptions, SensitiveString,
};
use crate::annotations::{AnnotationKeys, parse_go_bool};
use crate::model::ReloadStrategy;
use crate::selector::{check_dns_label, check_dns_subdomain, check_qualified_name};

/// The most a retry of leader election is delayed, as a factor of the retry period.
const RETRY_JITTER: f64 = 1.2;
use crate::timing::{LoopGuard, Windows};

impl RawOptions {
    /// Checks every value; the first problem is returned as a one-line [`ConfigError`].
    pub fn validate(self) -> Result<Options, ConfigError> {
        let mut warnings = Vec::new();

        let keys = self.annotation_keys()?;
        let log_format = log_format(&self.log_format, &mut warnings);
        let log_level = LogLevel::parse(&self.log_level).ok_or_else(|| {
            invalid(
                "--log-level",
                &self.log_level,
                "expected trace, debug, info, warn, warning, error, fatal or panic",
            )
        })?;
        let webhook_url = webhook_url(&self.webhook_url)?;
        let ignored_resources = ignored_resources(&self.resources_to_ignore)?;
        let ignored_workloads = ignored_workloads(&self.ignored_workload_types)?;
        let custom_kinds = crate::model::WorkloadKind::declare(&self.custom_workload)?;
        let namespace_scope = self.namespace_scope(&mut warnings)?;
        let resource_label_selector = selector("--resource-label-selector", &self.resource_label_selector)?;
        let argo_rollouts = stakater_true("--is-Argo-Rollouts", &self.is_argo_rollouts, &mut warnings);
        let openshift = openshift(&self.is_openshift)?;
        let strategy = match self.reload_strategy.as_str() {
            "env-vars" => ReloadStrategy::EnvVars,
            "annotations" => ReloadStrategy::Annotations,
            other => return Err(invalid("--reload-strategy", other, "expected env-vars or annotations")),
        };
        let reload_on_create = stakater_true("--reload-on-create", &self.reload_on_create, &mut warnings);
        let reload_on_delete = stakater_true("--reload-on-delete", &self.reload_on_delete, &mut warnings);
        if self.sync_after_restart && !reload_on_create {
            warnings.push("--sync-after-restart has no effect without --reload-on-create=true".to_owned());
        }
        let pod_name = non_blank(self.pod_name.as_deref());
        let leader_election = self.leader_election(pod_name.is_some())?;

        let metrics_addr = listen_addr("--metrics-addr", &self.metrics_addr)?;
        let pprof_addr = listen_addr("--pprof-addr", &self.pprof_addr)?;
        if self.enable_pprof && pprof_addr.overlaps(metrics_addr) {
            return Err(invalid(
                "--pprof-addr",
                &self.pprof_addr,
                format!(
                    "must differ from --metrics-addr ({}): profiling is never served on the metrics port",
                    self.metrics_addr
                ),
            ));
        }

        let health_addr = match non_blank(self.health_addr.as_deref()) {
            None => None,
            Some(text) => {
                let addr = listen_addr("--health-addr", &text)?;
                let pprof = self.enable_pprof.then_some(pprof_addr);
                if addr.overlaps(metrics_addr) || pprof.is_some_and(|pprof| addr.overlaps(pprof)) {
                    return Err(invalid(
                        "--health-addr",
                        &text,
                        "must differ from --metrics-addr and --pprof-addr (the probes are on --metrics-addr already)",
                    ));
                }
                Some(addr)
            }
        };

        let coalesce_period = parse_duration("--coalesce-period", &self.coalesce_period)?;
        let default_windows = match self.maintenance_window.trim() {
            "" => None,
            text => Some(Arc::new(
                text.parse::<Windows>()
                    .map_err(|e| invalid("--maintenance-window", &self.maintenance_window, e.to_string()))?,
            )),
        };
        let loop_guard = LoopGuard::parse(&self.loop_guard).map_err(|e| {
            let reason = format!("{} (expected <reloads>/<duration> such as 20/10m, or off)", e.reason);
            invalid("--loop-guard", &self.loop_guard, reason)
        })?;
        let max_writes_per_second = self.max_writes_per_second;
        if !(max_writes_per_second.is_finite() && max_writes_per_second >= 0.0) {
            return Err(invalid(
                "--max-writes-per-second",
                max_writes_per_second.to_string(),
                "expected a number >= 0 (0: no limit)",
            ));
        }
        let ignored_secret_types =
            list("--ignored-secret-types", &self.ignored_secret_types)?.into_iter().collect();
        let admission_webhook = self.admission_webhook(metrics_addr, &mut warnings)?;
        if admission_webhook.as_ref().is_some_and(|webhook| webhook.endpoints.mutate) && webhook_url.is_some()
        {
            warnings.push(
                "--admission-webhook patches nothing with --webhook-url: that mode never writes a workload"
                    .into(),
            );
        }
        let otlp_endpoint = match non_blank(self.otlp_endpoint.as_deref()) {
            Some(url) if !is_http_url(&url) => {
                return Err(invalid("--otlp-endpoint", url, "expected an http:// or https:// URL"));
            }
            url => url,
        };

        Ok(Options {
            keys,
            auto_reload_all: self.auto_reload_all,
            strategy,
            reload_on_create,
            reload_on_delete,
            sync_after_restart: self.sync_after_restart,
            ignored_resources,
            ignored_workloads,
            custom_kinds,
            restart_by_eviction: self.restart_by_eviction,
            reload_pods: self.reload_pods,
            namespace_scope,
            resource_label_selector,
            argo_rollouts,
            openshift,
            enable_csi_integration: self.enable_csi_integration,
            pod_name,
            leader_election,
            webhook_url,
            log_format,
            log_level,
            metrics_addr,
            health_addr,
            pprof_addr: self.enable_pprof.then_some(pprof_addr),
            coalesce_period,
            default_windows,
            loop_guard,
            max_writes_per_second,
            dry_run: self.dry_run,
            ignored_secret_types,
            admission_webhook,
            otlp_endpoint,
            allow_suspended_cronjobs: self.allow_suspended_cronjobs,
            metrics_count_by_namespace: self.metrics_count_by_namespace.as_deref() == Some("enabled"),
            alert: self.alert(&mut warnings),
            meta_info: self.meta_info(&mut warnings),
            warnings,
        })
    }

    fn annotation_keys(&self) -> Result<AnnotationKeys, ConfigError> {
        let key = |flag: &'static str, value: &str| {
            check_qualified_name(value)
                .map(|()| value.to_owned())
                .map_err(|why| invalid(flag, value, format!("not a valid annotation key: {why}")))
        };
        Ok(AnnotationKeys {
            configmap_reload: key("--configmap-annotation", &self.configmap_annotation)?,
            secret_reload: key("--secret-annotation", &self.secret_annotation)?,
            auto: key("--auto-annotation", &self.auto_annotation)?,
            configmap_auto: key("--configmap-auto-annotation", &self.configmap_auto_annotation)?,
            secret_auto: key("--secret-auto-annotation", &self.secret_auto_annotation)?,
            search: key("--auto-search-annotation", &self.auto_search_annotation)?,
            search_match: key("--search-match-annotation", &self.search_match_annotation)?,
            ignore: key("--ignore-annotation", &self.ignore_annotation)?,
            pause_period: key("--pause-deployment-annotation", &self.pause_deployment_annotation)?,
            paused_at: key("--pause-deployment-time-annotation", &self.pause_deployment_time_annotation)?,
            configmap_exclude: key("--configmap-exclude-annotation", &self.configmap_exclude_annotation)?,
            secret_exclude: key("--secret-exclude-annotation", &self.secret_exclude_annotation)?,
            spc_reload: key("--secretproviderclass-annotation", &self.secretproviderclass_annotation)?,
            spc_auto: key(
                "--secretproviderclass-auto-annotation",
                &self.secretproviderclass_auto_annotation,
            )?,
            spc_exclude: key(
                "--secretproviderclass-exclude-annotation",
                &self.secretproviderclass_exclude_annotation,
            )?,
            ..AnnotationKeys::default()
        })
    }

    fn namespace_scope(&self, warnings: &mut Vec<String>) -> Result<NamespaceScope, ConfigError> {
        let ignore = namespace_names("--namespaces-to-ignore", &self.namespaces_to_ignore)?;
        let selector = selector("--namespace-selector", &self.namespace_selector)?;
        let only = namespace_names("--namespaces", &self.namespaces)?;
        let only = match non_blank(self.kubernetes_namespace.as_deref()) {
            _ if !only.is_empty() => only,
            Some(namespace) => {
                check_dns_label(&namespace)
                    .map_err(|why| invalid("KUBERNETES_NAMESPACE", &namespace, why))?;
                vec![namespace]
            }
            None => return Ok(NamespaceScope::All { ignore, selector }),
        };
        if !ignore.is_empty() {
            warnings.push(
                "--namespaces-to-ignore is only honoured when watching all namespaces; ignoring it".into(),
            );
        }
        if selector.is_some() {
            warnings.push(
                "--namespace-selector is only honoured when watching all namespaces; ignoring it".into(),
            );
        }
        Ok(NamespaceScope::Only(only))
    }

    fn leader_election(&self, has_pod_name: bool) -> Result<Option<LeaderElection>, ConfigError> {
        let lease_duration =
            positive_duration("--leader-election-lease-duration", &self.leader_election_lease_duration)?;
        let renew_deadline =
            positive_duration("--leader-election-renew-deadline", &self.leader_election_renew_deadline)?;
        let retry_period =
            positive_duration("--leader-election-retry-period", &self.leader_election_retry_period)?;
        // The Lease records its duration in whole seconds (an int32): a fraction would let a
        // follower judge it expired before the leader's renew deadline, two leaders at once.
        if lease_duration.subsec_nanos() != 0 || lease_duration.as_secs() > i32::MAX as u64 {
            return Err(invalid(
                "--leader-election-lease-duration",
                &self.leader_election_lease_duration,
                format!(
                    "must be a whole number of seconds, at most {}s (the Lease records whole seconds)",
                    i32::MAX
                ),
            ));
        }
        if renew_deadline >= lease_duration {
            return Err(invalid(
                "--leader-election-renew-deadline",
                &self.leader_election_renew_deadline,
                format!(
                    "must be shorter than --leader-election-lease-duration ({})",
                    self.leader_election_lease_duration
                ),
            ));
        }
        // Retries are jittered by up to a fifth (client-go's JitterFactor 1.2, as Stakater checks).
        if retry_period.mul_f64(RETRY_JITTER) >= renew_deadline {
            return Err(invalid(
                "--leader-election-retry-period",
                &self.leader_election_retry_period,
                format!(
                    "must be shorter than --leader-election-renew-deadline ({}) divided by {RETRY_JITTER} (retries are jittered)",
                    self.leader_election_renew_deadline
                ),
            ));
        }
        check_dns_subdomain(&self.leader_election_id)
            .map_err(|why| invalid("--leader-election-id", &self.leader_election_id, why))?;
        if !self.enable_ha {
            return Ok(None);
        }

        if !has_pod_name {
            return Err(ConfigError::Requires {
                flag: "--enable-ha",
                requirement: "the POD_NAME environment variable",
            });
        }
        let pod_namespace = non_blank(self.pod_namespace.as_deref()).ok_or(ConfigError::Requires {
            flag: "--enable-ha",
            requirement: "the POD_NAMESPACE environment variable",
        })?;
        let namespace = match non_blank(self.leader_election_namespace.as_deref()) {
            Some(namespace) => {
                check_dns_label(&namespace)
                    .map_err(|why| invalid("--leader-election-namespace", &namespace, why))?;
                namespace
            }
            None => pod_namespace,
        };
        Ok(Some(LeaderElection {
            id: self.leader_election_id.clone(),
            namespace,
            lease_duration,
            renew_deadline,
            retry_period,
            release_on_cancel: self.leader_election_release_on_cancel,
        }))
    }

    fn admission_webhook(
        &self,
        metrics_addr: ListenAddr,
        warnings: &mut Vec<String>,
    ) -> Result<Option<AdmissionWebhook>, ConfigError> {
        let addr = listen_addr("--webhook-addr", &self.webhook_addr)?;
        let tls_cert = non_blank(self.webhook_tls_cert.as_deref());
        let tls_key = non_blank(self.webhook_tls_key.as_deref());
        let client_ca = non_blank(self.webhook_client_ca.as_deref());
        let endpoints = AdmissionEndpoints { mutate: self.admission_webhook, job_fence: self.job_fence };
        if !endpoints.mutate && !endpoints.job_fence {
            if tls_cert.is_some() || tls_key.is_some() || client_ca.is_some() {
                warnings.push(
                    "--webhook-tls-cert/--webhook-tls-key/--webhook-client-ca have no effect without --admission-webhook or --job-fence"
                        .into(),
                );
            }
            return Ok(None);
        }
        let (Some(tls_cert), Some(tls_key)) = (tls_cert, tls_key) else {
            return Err(ConfigError::Requires {
                flag: if endpoints.mutate { "--admission-webhook" } else { "--job-fence" },
                requirement: "--webhook-tls-cert and --webhook-tls-key",
            });
        };
        if addr.overlaps(metrics_addr) {
            return Err(invalid("--webhook-addr", &self.webhook_addr, "must differ from --metrics-addr"));
        }
        Ok(Some(AdmissionWebhook {
            addr,
            tls_cert: PathBuf::from(tls_cert),
            tls_key: PathBuf::from(tls_key),
            client_ca: client_ca.map(PathBuf::from),
            endpoints,
        }))
    }

    fn alert(&self, warnings: &mut Vec<String>) -> Option<AlertConfig> {
        let enabled = match non_blank(self.alert_on_reload.as_deref()) {
            None => false,
            Some(value) => parse_go_bool(&value).unwrap_or_else(|| {
                warnings.push(format!("ALERT_ON_RELOAD={value:?} is not a boolean; alerts are off"));
                false
            }),
        };
        let exposed =
            |value: &Option<SensitiveString>| non_blank(value.as_ref().map(SensitiveString::expose));
        if !enabled {
            // Stakater v2 turns alerts on when a URL is set; v1.4 (and this) needs ALERT_ON_RELOAD.
            if exposed(&self.alert_webhook_url).is_some() {
                warnings.push(
                    "ALERT_WEBHOOK_URL is set but ALERT_ON_RELOAD is not true; alerts are off (Stakater v2 would send them)"
                        .into(),
                );
            }
            return None;
        }
        let Some(url) = exposed(&self.alert_webhook_url) else {
            warnings.push("ALERT_ON_RELOAD is true but ALERT_WEBHOOK_URL is not set; alerts are off".into());
            return None;
        };
        let sink = AlertSink::parse(self.alert_sink.as_deref().unwrap_or_default());
        if self.alert_structured && sink != AlertSink::Raw {
            warnings.push(format!(
                "ALERT_STRUCTURED applies to the raw sink only; ignored for ALERT_SINK={:?}",
                self.alert_sink.as_deref().unwrap_or_default()
            ));
        }
        Some(AlertConfig {
            url: SensitiveString::new(url),
            sink,
            proxy: exposed(&self.alert_proxy)
                .or_else(|| exposed(&self.alert_webhook_proxy))
                .map(SensitiveString::new),
            additional_info: non_blank(self.alert_additional_info.as_deref()),
            structured: self.alert_structured && sink == AlertSink::Raw,
        })
    }

    fn meta_info(&self, warnings: &mut Vec<String>) -> Option<MetaInfoTarget> {
        let Some(namespace) = non_blank(self.reloader_namespace.as_deref()) else {
            warnings.push(
                "RELOADER_NAMESPACE is not set; the reloader-meta-info ConfigMap is not published".into(),
            );
            return None;
        };
        Some(MetaInfoTarget {
            namespace,
            deployment_name: non_blank(self.reloader_deployment_name.as_deref()),
        })
    }
}
