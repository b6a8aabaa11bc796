//! The command line and environment, typed and validated.
//!
//! [`RawOptions`] is the text of every flag and setting (docs/compatibility.md §1 and §2, plus our flags), as
//! the binary's command line reads it; [`RawOptions::validate`] checks every value before
//! anything talks to a cluster and returns [`Options`], or one [`ConfigError`] naming the flag
//! and the bad value. `Options` serializes to the JSON of the
//! meta-info ConfigMap's `reloaderOptions` key.

mod fields;
mod meta_info;
mod raw;
#[cfg(test)]
mod settings_tests;
#[cfg(test)]
mod tests;
mod validate;
mod values;

use std::collections::BTreeSet;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use raw::RawOptions;
pub use values::{AlertSink, ListenAddr, LogFormat, LogLevel, SensitiveString};
pub(crate) use values::{parse_listen_addr, split_flag_list};

use crate::annotations::AnnotationKeys;
use crate::decide::DecideOptions;
use crate::model::{ReloadStrategy, ResourceKind, WorkloadKind};
use crate::selector::LabelSelector;
use crate::timing::{LoopGuard, Windows};

/// A configuration that cannot run. One line, naming the flag (or variable) and the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid value {value:?} for {flag}: {reason}")]
    InvalidValue { flag: &'static str, value: String, reason: String },
    #[error("{flag} requires {requirement}")]
    Requires { flag: &'static str, requirement: &'static str },
    #[error(transparent)]
    CustomKind(#[from] crate::custom_kind::CustomKindError),
}

/// The validated configuration of `reloader run`.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    pub keys: AnnotationKeys,
    pub(crate) auto_reload_all: bool,
    pub strategy: ReloadStrategy,
    pub reload_on_create: bool,
    pub reload_on_delete: bool,
    /// Treat the initial list as creations (meaningful only with `reload_on_create`).
    pub sync_after_restart: bool,
    pub ignored_resources: IgnoredResources,
    pub ignored_workloads: BTreeSet<WorkloadKind>,
    /// The kinds declared with `--custom-workload`, in the order given.
    pub custom_kinds: Vec<WorkloadKind>,
    /// `--restart-by-eviction`: workloads that opt in get their pods evicted after a reload.
    pub restart_by_eviction: bool,
    /// `--reload-pods`: pods labelled [`crate::restart::POD_LABEL`] are reload targets, evicted
    /// (docs/beyond-stakater.md §14).
    pub reload_pods: bool,
    pub namespace_scope: NamespaceScope,
    /// Applied server-side to the ConfigMap/Secret watches; `None` selects everything.
    pub resource_label_selector: Option<LabelSelector>,
    pub argo_rollouts: bool,
    /// `None`: detect whether `apps.openshift.io/v1` is served.
    pub openshift: Option<bool>,
    pub enable_csi_integration: bool,
    /// `POD_NAME`: the lease holder identity; always set when `leader_election` is.
    pub pod_name: Option<String>,
    /// `Some` when `--enable-ha` is set.
    pub leader_election: Option<LeaderElection>,
    /// Webhook-only mode: POST changes here instead of reloading.
    pub webhook_url: Option<SensitiveString>,
    pub log_format: LogFormat,
    pub log_level: LogLevel,
    pub metrics_addr: ListenAddr,
    /// `--health-addr`: the probes served on a second address too (Stakater v2).
    pub health_addr: Option<ListenAddr>,
    /// `Some` when `--enable-pprof` is set; never the metrics port.
    pub pprof_addr: Option<ListenAddr>,
    /// Zero: every change is written at once.
    pub coalesce_period: Duration,
    /// The maintenance windows of every workload that sets none (docs/beyond-stakater.md §15).
    pub default_windows: Option<Arc<Windows>>,
    /// `None`: the loop guard is off.
    pub loop_guard: Option<LoopGuard>,
    /// Finite and positive, or 0 for no limit.
    pub max_writes_per_second: f64,
    pub dry_run: bool,
    /// Secret types excluded from the Secret watch (a field selector); empty: none.
    pub ignored_secret_types: BTreeSet<String>,
    pub admission_webhook: Option<AdmissionWebhook>,
    pub otlp_endpoint: Option<String>,
    pub(crate) allow_suspended_cronjobs: bool,
    /// `METRICS_COUNT_BY_NAMESPACE=enabled`.
    pub metrics_count_by_namespace: bool,
    /// `Some` when `ALERT_ON_RELOAD` is true and `ALERT_WEBHOOK_URL` is set.
    pub alert: Option<AlertConfig>,
    /// Where to publish the `reloader-meta-info` ConfigMap; `None` when `RELOADER_NAMESPACE` is unset.
    pub meta_info: Option<MetaInfoTarget>,
    /// Accepted but questionable settings, for the caller to log once logging is set up.
    pub warnings: Vec<String>,
}

/// `--resources-to-ignore`: ConfigMaps, Secrets, or neither (never both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IgnoredResources {
    #[default]
    None,
    ConfigMaps,
    Secrets,
}

impl IgnoredResources {
    pub fn kind(self) -> Option<ResourceKind> {
        match self {
            IgnoredResources::None => None,
            IgnoredResources::ConfigMaps => Some(ResourceKind::ConfigMap),
            IgnoredResources::Secrets => Some(ResourceKind::Secret),
        }
    }
}

/// Which namespaces are watched. Precedence: `--namespaces`, then `KUBERNETES_NAMESPACE`, then all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespaceScope {
    All { ignore: Vec<String>, selector: Option<LabelSelector> },
    Only(Vec<String>),
}

/// The Lease; the holder identity is [`Options::pod_name`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElection {
    /// The Lease name (`--leader-election-id`).
    pub id: String,
    /// `--leader-election-namespace`, else `POD_NAMESPACE`.
    pub namespace: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
    pub release_on_cancel: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionWebhook {
    pub addr: ListenAddr,
    pub tls_cert: PathBuf,
    pub tls_key: PathBuf,
    /// `--webhook-client-ca`: only clients presenting a certificate this CA bundle signed (the
    /// API server, with its admission kubeconfig) are served.
    pub client_ca: Option<PathBuf>,
    /// What the server answers: the mutating webhook, the Job fence, or both.
    pub endpoints: AdmissionEndpoints,
}

/// The admission server's endpoints, each asked for by its own flag: `--admission-webhook`
/// serves `/mutate` (docs/beyond-stakater.md §3), `--job-fence` serves `/validate-jobs` and keeps
/// the Job origins it judges by (docs/security.md "Jobs"). At least one is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionEndpoints {
    pub mutate: bool,
    pub job_fence: bool,
}

/// The `ALERT_*` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertConfig {
    pub url: SensitiveString,
    pub sink: AlertSink,
    pub proxy: Option<SensitiveString>,
    /// Prefixed to every message (for example the cluster name).
    pub additional_info: Option<String>,
    /// `ALERT_STRUCTURED` with the raw sink: a JSON object per reload (Stakater v2's body).
    pub structured: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaInfoTarget {
    pub namespace: String,
    /// `RELOADER_DEPLOYMENT_NAME`.
    pub deployment_name: Option<String>,
}

impl Options {
    /// The options that change reload decisions.
    pub fn decide_options(&self) -> DecideOptions {
        DecideOptions {
            auto_reload_all: self.auto_reload_all,
            strategy: self.strategy,
            allow_suspended_cronjobs: self.allow_suspended_cronjobs,
        }
    }

    /// Whether resources of `kind` are watched at all.
    pub fn watches_resource(&self, kind: ResourceKind) -> bool {
        match kind {
            ResourceKind::SecretProviderClass => self.enable_csi_integration,
            ResourceKind::ConfigMap | ResourceKind::Secret => self.ignored_resources.kind() != Some(kind),
        }
    }
}
