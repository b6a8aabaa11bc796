//! The flags of `reloader run`, named and defaulted exactly as Stakater's (docs/compatibility.md
//! §1), plus ours, and the environment variables they bind. Values stay as typed here;
//! [`RunArgs::validate`] hands them to reloader-core, which checks them and returns [`Options`].
//!
//! Booleans take Go's flag syntax: `--flag` or `--flag=<bool>` (`--flag false` does not work in
//! Go either). List flags take comma-separated values, may repeat, and accept the CSV quoting
//! Go's flag package reads (the Helm chart quotes `--namespace-selector`).

use clap::ArgAction;
use reloader_core::annotations::parse_go_bool;
use reloader_core::options::{ConfigError, Options, RawOptions, SensitiveString};

/// Parses a Go `strconv.ParseBool` value for a boolean flag.
fn go_bool(text: &str) -> Result<bool, String> {
    parse_go_bool(text).ok_or_else(|| "expected true or false".to_owned())
}

#[derive(clap::Args, Debug, Clone, PartialEq)]
// As with Go flags, a repeated scalar flag takes its last value.
#[command(args_override_self = true)]
pub struct RunArgs {
    /// Reload every workload that uses a changed ConfigMap/Secret, unless its auto annotation says otherwise
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, value_name = "BOOL",
          default_value_t = false, default_missing_value = "true", value_parser = go_bool)]
    pub auto_reload_all: bool,

    /// Annotation listing the ConfigMaps a workload reloads for
    #[arg(long, value_name = "KEY", default_value = "configmap.reloader.stakater.com/reload")]
    pub configmap_annotation: String,

    /// Annotation listing the Secrets a workload reloads for
    #[arg(long, value_name = "KEY", default_value = "secret.reloader.stakater.com/reload")]
    pub secret_annotation: String,

    /// Annotation that makes a workload reload for every ConfigMap/Secret it uses
    #[arg(long, value_name = "KEY", default_value = "reloader.stakater.com/auto")]
    pub auto_annotation: String,

    /// Annotation that makes a workload reload for every ConfigMap it uses
    #[arg(long, value_name = "KEY", default_value = "configmap.reloader.stakater.com/auto")]
    pub configmap_auto_annotation: String,

    /// Annotation that makes a workload reload for every Secret it uses
    #[arg(long, value_name = "KEY", default_value = "secret.reloader.stakater.com/auto")]
    pub secret_auto_annotation: String,

    /// Annotation that makes a workload reload for the ConfigMaps/Secrets carrying the match annotation
    #[arg(long, value_name = "KEY", default_value = "reloader.stakater.com/search")]
    pub auto_search_annotation: String,

    /// Annotation marking a ConfigMap/Secret as matched by workloads with the search annotation
    #[arg(long, value_name = "KEY", default_value = "reloader.stakater.com/match")]
    pub search_match_annotation: String,

    /// Annotation on a ConfigMap/Secret whose changes reload nothing
    #[arg(long, value_name = "KEY", default_value = "reloader.stakater.com/ignore")]
    pub ignore_annotation: String,

    /// Annotation giving the period a Deployment stays paused after a reload
    #[arg(long, value_name = "KEY", default_value = "deployment.reloader.stakater.com/pause-period")]
    pub pause_deployment_annotation: String,

    /// Annotation recording when reloader paused a Deployment
    #[arg(long, value_name = "KEY", default_value = "deployment.reloader.stakater.com/paused-at")]
    pub pause_deployment_time_annotation: String,

    /// Annotation listing the ConfigMaps whose changes never reload a workload (Stakater v2)
    #[arg(long, value_name = "KEY", default_value = "configmaps.exclude.reloader.stakater.com/reload")]
    pub configmap_exclude_annotation: String,

    /// Annotation listing the Secrets whose changes never reload a workload (Stakater v2)
    #[arg(long, value_name = "KEY", default_value = "secrets.exclude.reloader.stakater.com/reload")]
    pub secret_exclude_annotation: String,

    /// Annotation listing the SecretProviderClasses a workload reloads for (with --enable-csi-integration)
    #[arg(long, value_name = "KEY", default_value = "secretproviderclass.reloader.stakater.com/reload")]
    pub secretproviderclass_annotation: String,

    /// Annotation that makes a workload reload for every SecretProviderClass it uses
    #[arg(long, value_name = "KEY", default_value = "secretproviderclass.reloader.stakater.com/auto")]
    pub secretproviderclass_auto_annotation: String,

    /// Annotation listing the SecretProviderClasses whose changes never reload a workload
    #[arg(
        long,
        value_name = "KEY",
        default_value = "secretproviderclasses.exclude.reloader.stakater.com/reload"
    )]
    pub secretproviderclass_exclude_annotation: String,

    /// Log format: "json" for JSON lines, empty for text
    #[arg(long, value_name = "FORMAT", default_value = "")]
    pub log_format: String,

    /// Log level: trace, debug, info, warn (or warning), error, fatal or panic
    #[arg(long, value_name = "LEVEL", default_value = "info")]
    pub log_level: String,

    /// POST changes to this URL instead of reloading workloads
    #[arg(long, value_name = "URL", default_value = "")]
    pub webhook_url: SensitiveString,

    /// Resource type to ignore: configmaps or secrets
    #[arg(long, value_name = "LIST")]
    pub resources_to_ignore: Vec<String>,

    /// Workload types to ignore: jobs, cronjobs, or both
    #[arg(long, value_name = "LIST")]
    pub ignored_workload_types: Vec<String>,

    /// Also reload this kind: group=G,version=V,kind=K,resource=PLURAL,template=/json/pointer (repeatable)
    #[arg(long, value_name = "DECLARATION")]
    pub custom_workload: Vec<String>,

    /// Evict the pods of workloads annotated reloader.dev/restart=evict after reloading them
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, value_name = "BOOL",
          default_value_t = false, default_missing_value = "true", value_parser = go_bool)]
    pub restart_by_eviction: bool,

    /// Watch pods labelled reloader.dev/reload-pod=true and evict those a change reloads (their owner replaces them)
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, value_name = "BOOL",
          default_value_t = false, default_missing_value = "true", value_parser = go_bool)]
    pub reload_pods: bool,

    /// Watch exactly these namespaces
    #[arg(long, value_name = "LIST")]
    pub namespaces: Vec<String>,

    /// Namespaces to skip (when watching all namespaces)
    #[arg(long, value_name = "LIST")]
    pub namespaces_to_ignore: Vec<String>,

    /// Label selectors on Namespaces, all of which must match (when watching all namespaces)
    #[arg(long, value_name = "SELECTOR")]
    pub namespace_selector: Vec<String>,

    /// Label selectors on the ConfigMaps/Secrets to watch, all of which must match
    #[arg(long, value_name = "SELECTOR")]
    pub resource_label_selector: Vec<String>,

    /// Reload Argo Rollouts when exactly "true"
    #[arg(long = "is-Argo-Rollouts", value_name = "STRING", default_value = "false")]
    pub is_argo_rollouts: String,

    /// Reload OpenShift DeploymentConfigs: true, false, or empty to detect apps.openshift.io/v1
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "",
          default_missing_value = "true")]
    pub is_openshift: String,

    /// How a reload is recorded: env-vars or annotations
    #[arg(long, value_name = "STRATEGY", default_value = "env-vars")]
    pub reload_strategy: String,

    /// Reload for created ConfigMaps/Secrets when exactly "true"
    #[arg(long, value_name = "STRING", default_value = "false")]
    pub reload_on_create: String,

    /// Reload for deleted ConfigMaps/Secrets when exactly "true"
    #[arg(long, value_name = "STRING", default_value = "false")]
    pub reload_on_delete: String,

    /// Run several replicas with Lease leader election (needs POD_NAME and POD_NAMESPACE)
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, value_name = "BOOL",
          default_value_t = false, default_missing_value = "true", value_parser = go_bool)]
    pub enable_ha: bool,

    /// Treat the initial list as creations (only with --reload-on-create)
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, value_name = "BOOL",
          default_value_t = false, default_missing_value = "true", value_parser = go_bool)]
    pub sync_after_restart: bool,

    /// Serve CPU and heap profiles (Go's /debug/pprof/) on --pprof-addr
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, value_name = "BOOL",
          default_value_t = false, default_missing_value = "true", value_parser = go_bool)]
    pub enable_pprof: bool,

    /// Address of the /debug/pprof/ server (never the metrics port; the loopback unless set)
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:6060")]
    pub pprof_addr: String,

    /// Watch SecretProviderClassPodStatus objects of the Secrets Store CSI driver
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, value_name = "BOOL",
          default_value_t = false, default_missing_value = "true", value_parser = go_bool)]
    pub enable_csi_integration: bool,

    /// Address of the HTTP server for /metrics, /live, /healthz and /readyz
    #[arg(long, value_name = "ADDR", default_value = ":9090")]
    pub metrics_addr: String,

    /// Also serve /live, /healthz and /readyz (not /metrics) on this address (Stakater v2's
    /// separate health-probe server); unset: the probes are on --metrics-addr only
    #[arg(long, value_name = "ADDR")]
    pub health_addr: Option<String>,

    /// Name of the leader-election Lease
    #[arg(long, value_name = "NAME", default_value = "stakater-reloader-lock")]
    pub leader_election_id: String,

    /// Namespace of the leader-election Lease [default: the pod's namespace]
    #[arg(long, value_name = "NAMESPACE")]
    pub leader_election_namespace: Option<String>,

    /// How long a Lease is valid without renewal
    #[arg(long, value_name = "DURATION", default_value = "15s")]
    pub leader_election_lease_duration: String,

    /// How long the leader keeps trying to renew before giving up leadership
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub leader_election_renew_deadline: String,

    /// Interval between attempts to acquire or renew the Lease
    #[arg(long, value_name = "DURATION", default_value = "2s")]
    pub leader_election_retry_period: String,

    /// Release the Lease on shutdown so a standby takes over at once
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, value_name = "BOOL",
          default_value_t = true, default_missing_value = "true", value_parser = go_bool)]
    pub leader_election_release_on_cancel: bool,

    /// Apply changes reaching the same workload within this window as one write (0: at once)
    #[arg(long, value_name = "DURATION", default_value = "0s")]
    pub coalesce_period: String,

    /// The maintenance windows of every workload that sets none with
    /// `reloader.dev/maintenance-window`, e.g. "Mon-Fri 02:00-04:00 Europe/Berlin" (empty: none)
    #[arg(long, value_name = "WINDOWS", default_value = "")]
    pub maintenance_window: String,

    /// Stop reloading a workload reloaded more than this often ("<reloads>/<duration>"), until an
    /// operator deletes its `reloader.dev/reload-loop-stopped` annotation; "off" disables it
    #[arg(long, value_name = "N/DURATION", default_value = "20/10m")]
    pub loop_guard: String,

    /// Global limit on workload writes per second, so a fan-out to thousands of workloads cannot
    /// flood the API server (0: no limit)
    #[arg(long, value_name = "RATE", default_value_t = 200.0)]
    pub max_writes_per_second: f64,

    /// Log and count every write without making it
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, value_name = "BOOL",
          default_value_t = false, default_missing_value = "true", value_parser = go_bool)]
    pub dry_run: bool,

    /// Secret types never watched (comma-separated; empty to watch every type)
    #[arg(long, value_name = "LIST", default_value = "helm.sh/release.v1")]
    pub ignored_secret_types: Vec<String>,

    /// Serve the mutating admission webhook that keeps reload markers across re-applies
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, value_name = "BOOL",
          default_value_t = false, default_missing_value = "true", value_parser = go_bool)]
    pub admission_webhook: bool,

    /// Serve the Job fence (`/validate-jobs`): a Job this controller's ServiceAccount creates is
    /// admitted only if a reload would create it (docs/security.md "Jobs")
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, value_name = "BOOL",
          default_value_t = false, default_missing_value = "true", value_parser = go_bool)]
    pub job_fence: bool,

    /// PEM certificate chain of the admission webhook
    #[arg(long, value_name = "PATH")]
    pub webhook_tls_cert: Option<String>,

    /// PEM private key of the admission webhook
    #[arg(long, value_name = "PATH")]
    pub webhook_tls_key: Option<String>,

    /// PEM CA bundle: the admission webhook then serves only clients presenting a certificate it
    /// signed (the API server, configured with an admission kubeconfig; docs/security.md)
    #[arg(long, value_name = "PATH")]
    pub webhook_client_ca: Option<String>,

    /// Address of the admission webhook's HTTPS server
    #[arg(long, value_name = "ADDR", default_value = ":9443")]
    pub webhook_addr: String,

    /// OTLP endpoint (base URL) to export traces to. Given on the command line it wins over
    /// OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; the other OTEL_*
    /// variables (protocol, headers, CA, service name, sampler) apply (docs/tracing.md)
    #[arg(long, value_name = "URL", env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,

    /// Let a reload of a suspended CronJob create a Job
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true, value_name = "BOOL",
          default_value_t = false, default_missing_value = "true", value_parser = go_bool)]
    pub allow_suspended_cronjobs: bool,

    // Stakater reads these from the environment only; they are hidden flags so that tests can
    // set them without touching the process environment.
    #[arg(long, env = "KUBERNETES_NAMESPACE", hide = true)]
    pub kubernetes_namespace: Option<String>,

    #[arg(long, env = "POD_NAME", hide = true)]
    pub pod_name: Option<String>,

    #[arg(long, env = "POD_NAMESPACE", hide = true)]
    pub pod_namespace: Option<String>,

    #[arg(long, env = "RELOADER_NAMESPACE", hide = true)]
    pub reloader_namespace: Option<String>,

    #[arg(long, env = "RELOADER_DEPLOYMENT_NAME", hide = true)]
    pub reloader_deployment_name: Option<String>,

    #[arg(long, env = "METRICS_COUNT_BY_NAMESPACE", hide = true)]
    pub metrics_count_by_namespace: Option<String>,

    /// A bare `--alert-on-reload` (Stakater v2's boolean flag) is "true".
    #[arg(long, env = "ALERT_ON_RELOAD", hide = true, num_args = 0..=1, require_equals = true,
          default_missing_value = "true")]
    pub alert_on_reload: Option<String>,

    #[arg(long, env = "ALERT_WEBHOOK_URL", hide = true, hide_env_values = true)]
    pub alert_webhook_url: Option<SensitiveString>,

    #[arg(long, env = "ALERT_SINK", hide = true)]
    pub alert_sink: Option<String>,

    #[arg(long, env = "ALERT_WEBHOOK_PROXY", hide = true, hide_env_values = true)]
    pub alert_webhook_proxy: Option<SensitiveString>,

    #[arg(long, env = "ALERT_ADDITIONAL_INFO", hide = true)]
    pub alert_additional_info: Option<String>,

    /// Stakater v2's name for ALERT_WEBHOOK_PROXY; wins over it.
    #[arg(long, env = "ALERT_PROXY", hide = true, hide_env_values = true)]
    pub alert_proxy: Option<SensitiveString>,

    /// Raw sink: a JSON object per reload instead of the text (Stakater v2).
    #[arg(long, env = "ALERT_STRUCTURED", hide = true, action = ArgAction::Set, num_args = 0..=1,
          require_equals = true, value_name = "BOOL", default_value_t = false,
          default_missing_value = "true", value_parser = go_bool)]
    pub alert_structured: bool,
}

impl RunArgs {
    /// Checks every value (see `RawOptions::validate`).
    pub fn validate(self) -> Result<Options, ConfigError> {
        // CPU profiles are sampled from a SIGPROF handler: where there is none they are not built
        // in, and the flag is refused.
        #[cfg(not(unix))]
        if self.enable_pprof {
            return Err(ConfigError::Requires {
                flag: "--enable-pprof",
                requirement: "Linux or macOS (CPU profiles need SIGPROF, which Windows lacks)",
            });
        }
        RawOptions::from(self).validate()
    }
}

impl From<RunArgs> for RawOptions {
    fn from(args: RunArgs) -> Self {
        // Each field is named once; destructuring makes a flag added to one struct and not the
        // other a compile error.
        macro_rules! same_fields {
            ($($field:ident),* $(,)?) => {{
                let RunArgs { $($field),* } = args;
                RawOptions { $($field),* }
            }};
        }
        same_fields!(
            auto_reload_all,
            configmap_annotation,
            secret_annotation,
            auto_annotation,
            configmap_auto_annotation,
            secret_auto_annotation,
            auto_search_annotation,
            search_match_annotation,
            ignore_annotation,
            pause_deployment_annotation,
            pause_deployment_time_annotation,
            configmap_exclude_annotation,
            secret_exclude_annotation,
            secretproviderclass_annotation,
            secretproviderclass_auto_annotation,
            secretproviderclass_exclude_annotation,
            log_format,
            log_level,
            webhook_url,
            resources_to_ignore,
            ignored_workload_types,
            custom_workload,
            restart_by_eviction,
            reload_pods,
            namespaces,
            namespaces_to_ignore,
            namespace_selector,
            resource_label_selector,
            is_argo_rollouts,
            is_openshift,
            reload_strategy,
            reload_on_create,
            reload_on_delete,
            enable_ha,
            sync_after_restart,
            enable_pprof,
            pprof_addr,
            enable_csi_integration,
            metrics_addr,
            health_addr,
            leader_election_id,
            leader_election_namespace,
            leader_election_lease_duration,
            leader_election_renew_deadline,
            leader_election_retry_period,
            leader_election_release_on_cancel,
            coalesce_period,
            maintenance_window,
            loop_guard,
            max_writes_per_second,
            dry_run,
            ignored_secret_types,
            admission_webhook,
            job_fence,
            webhook_tls_cert,
            webhook_tls_key,
            webhook_client_ca,
            webhook_addr,
            otlp_endpoint,
            allow_suspended_cronjobs,
            kubernetes_namespace,
            pod_name,
            pod_namespace,
            reloader_namespace,
            reloader_deployment_name,
            metrics_count_by_namespace,
            alert_on_reload,
            alert_webhook_url,
            alert_sink,
            alert_webhook_proxy,
            alert_additional_info,
            alert_proxy,
            alert_structured,
        )
    }
}

/// `reloader run`'s flags parsed for tests.
#[cfg(test)]
pub(crate) mod testing {
    use clap::{CommandFactory, FromArgMatches, Parser};
    use reloader_core::options::Options;

    use super::RunArgs;

    #[derive(Parser, Debug)]
    #[command(name = "reloader")]
    struct Cli {
        #[command(flatten)]
        args: RunArgs,
    }

    /// Parses flags with the process environment switched off, so the tables are deterministic;
    /// the environment-only settings are reachable through their hidden flags.
    pub(crate) fn try_args(flags: &[&str]) -> Result<RunArgs, clap::Error> {
        let command = Cli::command().mut_args(|arg| arg.env(None::<&'static str>));
        let matches =
            command.try_get_matches_from(std::iter::once("reloader").chain(flags.iter().copied()))?;
        Ok(Cli::from_arg_matches(&matches)?.args)
    }

    /// The options `flags` give; a refusal fails the test, naming the flags.
    pub(crate) fn options(flags: &[&str]) -> Options {
        let args = try_args(flags).unwrap_or_else(|e| panic!("{flags:?}: {e}"));
        args.validate().unwrap_or_else(|e| panic!("{flags:?}: {e}"))
    }
}

#[cfg(test)]
mod tests;
