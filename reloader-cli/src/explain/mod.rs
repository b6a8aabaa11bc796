//! `reloader explain <kind>/<name>`: reads one workload and the ConfigMaps/Secrets of its
//! namespace, and prints why each would or would not reload it (docs/beyond-stakater.md §6).
//!
//! The decisions are the controller's own ([`reloader_core::explain`] runs `decide`), under the
//! controller flags given on the command line, so `reloader explain deployment/web <the flags
//! of your controller>` answers for that controller. ConfigMaps and Secrets are hashed as they
//! arrive and dropped: no data is kept, and none can be printed.

mod scope;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, DynamicObject, ListParams, ObjectList};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, ResourceExt as _};
use reloader_core::explain::{ExplainInput, ExplainSettings, Explanation, explain, init_container_names};
use reloader_core::model::{ResourceKey, WorkloadKey, WorkloadKind};
use reloader_core::options::{NamespaceScope, Options};
use reloader_core::restart::EvictionPolicy;
use reloader_core::views::ResourceView;
use serde::de::DeserializeOwned;

use crate::args::RunArgs;
use crate::kinds::{load, spc_pod_status_resource, spc_resource};
use crate::views::{ClassFlags, configmap_view, secret_view, spc_view};

/// Explain why a workload would or would not reload when its ConfigMaps/Secrets change
#[derive(clap::Args, Debug, Clone)]
pub struct ExplainArgs {
    /// The workload: deployment/web, statefulset/db, ds/agent, cronjob/report, job/x, rollout/x, dc/x
    #[arg(value_name = "KIND/NAME")]
    pub target: String,

    /// Namespace of the workload [default: the kubeconfig's namespace]
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,

    /// Output format
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,

    /// Kubeconfig file [default: $KUBECONFIG, in-cluster config, then ~/.kube/config]
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// Kubeconfig context to use, as kubectl's --context [default: the current context]
    #[arg(long, value_name = "CONTEXT")]
    pub context: Option<String>,

    /// The flags of the controller whose decisions to explain (the same as `reloader run`'s)
    #[command(
        flatten,
        next_help_heading = "Controller flags (explain what a controller with these flags does)"
    )]
    pub controller: RunArgs,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// Sections for people
    Text,
    /// JSON for scripts; field names are stable
    Json,
    /// The same document as YAML
    Yaml,
}

#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// The command line is wrong; nothing was asked of the cluster.
    #[error("{0}")]
    Usage(String),
    #[error("{0} was not found")]
    NotFound(String),
    #[error("{context}: {reason}")]
    Api { context: String, reason: String },
    #[error("cannot connect to the cluster: {0}")]
    Connect(String),
    #[error("cannot write the {format} output: {reason}")]
    Output { format: &'static str, reason: String },
}

impl ExplainError {
    /// A command-line mistake (exit code 2), rather than a failure to explain (exit code 1).
    pub fn is_usage(&self) -> bool {
        matches!(self, ExplainError::Usage(_))
    }

    fn api(context: impl Into<String>, error: kube::Error) -> Self {
        ExplainError::Api { context: context.into(), reason: describe_kube_error(&error) }
    }
}

/// One line: the API server's own message for API errors, the transport error otherwise.
fn describe_kube_error(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!("{} ({}, HTTP {})", status.message, status.reason, status.code),
        other => other.to_string(),
    }
}

/// Explains the workload and returns the output to print (warnings go to stderr).
pub async fn run(args: ExplainArgs) -> Result<String, ExplainError> {
    let options = args.controller.validate().map_err(|e| ExplainError::Usage(e.to_string()))?;
    let (kind, name) = parse_target(&args.target, &options.custom_kinds)?;
    let (client, default_namespace) = connect(args.kubeconfig.as_deref(), args.context).await?;
    let namespace = args.namespace.unwrap_or(default_namespace);
    let explanation = explain_workload(&client, &options, WorkloadKey::new(kind, &namespace, &name)).await?;
    render(&explanation, args.output)
}

/// `<kind>/<name>`, the kind as people type it (`deploy`, `sts`, `Deployment`, ...).
pub fn parse_target(target: &str, declared: &[WorkloadKind]) -> Result<(WorkloadKind, String), ExplainError> {
    let usage = |why: String| ExplainError::Usage(format!("invalid workload {target:?}: {why}"));
    let Some((kind, name)) = target.split_once('/') else {
        return Err(usage("expected <kind>/<name>, e.g. deployment/web".into()));
    };
    let kind = WorkloadKind::parse_loose(kind, declared).ok_or_else(|| {
        let declared: String =
            declared.iter().map(|k| format!(", {}", k.as_str().to_ascii_lowercase())).collect();
        usage(format!(
            "unknown kind {kind:?}; expected deployment, daemonset, statefulset, cronjob, job, rollout, \
             deploymentconfig{declared} (or one declared with --custom-workload)"
        ))
    })?;
    if name.is_empty() || name.contains('/') {
        return Err(usage("expected <kind>/<name>, e.g. deployment/web".into()));
    }
    Ok((kind, name.to_owned()))
}

/// Like kubectl: `--kubeconfig` or else `$KUBECONFIG`/`~/.kube/config` (or in-cluster when neither
/// is there and no context is asked for), and `--context` picks one of its contexts.
async fn connect(
    kubeconfig: Option<&Path>,
    context: Option<String>,
) -> Result<(Client, String), ExplainError> {
    let file = match kubeconfig {
        Some(path) => Some(
            Kubeconfig::read_from(path)
                .map_err(|e| ExplainError::Connect(format!("cannot read {}: {e}", path.display())))?,
        ),
        None if context.is_some() => Some(Kubeconfig::read().map_err(|e| {
            ExplainError::Connect(format!("cannot read the kubeconfig ($KUBECONFIG or ~/.kube/config): {e}"))
        })?),
        None => None,
    };
    let config = match file {
        Some(file) => {
            if let Some(name) = &context
                && !file.contexts.iter().any(|known| &known.name == name)
            {
                let source =
                    kubeconfig.map_or_else(|| "the kubeconfig".to_owned(), |p| p.display().to_string());
                return Err(ExplainError::Usage(format!("context {name:?} does not exist in {source}")));
            }
            let options = KubeConfigOptions { context, ..KubeConfigOptions::default() };
            Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(|e| ExplainError::Connect(e.to_string()))?
        }
        None => Config::infer().await.map_err(|e| ExplainError::Connect(e.to_string()))?,
    };
    let namespace = config.default_namespace.clone();
    let client = Client::try_from(config).map_err(|e| ExplainError::Connect(e.to_string()))?;
    Ok((client, namespace))
}

/// Reads the workload and its namespace's resources, and explains.
pub async fn explain_workload(
    client: &Client,
    options: &Options,
    key: WorkloadKey,
) -> Result<Explanation, ExplainError> {
    let keys = &options.keys;
    let loaded =
        load(client, &key).await.map_err(|e| ExplainError::api(format!("reading {key}"), e))?.ok_or_else(
            || ExplainError::NotFound(format!("{} {} in namespace {}", key.kind, key.name, key.namespace)),
        )?;
    let (view, init_containers, eviction) = loaded.with(|w| {
        (w.view(keys), init_container_names(w), EvictionPolicy::of(w.metadata().annotations.as_ref()))
    });
    let namespace = &*key.namespace;

    let mut settings = ExplainSettings {
        keys: keys.clone(),
        decide: options.decide_options(),
        reload_on_create: options.reload_on_create,
        dry_run: options.dry_run,
        webhook_only: options.webhook_url.is_some(),
        one_rollout_per_release: options.admission_webhook.is_some() && !options.coalesce_period.is_zero(),
        restart_by_eviction: options.restart_by_eviction,
        default_windows: options.default_windows.clone(),
        scope: scope::of_settings(options, key.kind, namespace),
    };
    if settings.scope.workload.is_none()
        && let NamespaceScope::All { selector: Some(selector), .. } = &options.namespace_scope
    {
        match Api::<Namespace>::all(client.clone()).get(namespace).await {
            Ok(ns) => settings.scope.workload = scope::namespace_selector(selector, &ns),
            Err(e) => eprintln!(
                "reloader: warning: cannot read namespace {namespace} to check --namespace-selector: {}",
                describe_kube_error(&e)
            ),
        }
    }

    let mut resources: HashMap<ResourceKey, ResourceView> = HashMap::new();
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    for_each(&configmaps, |cm: ConfigMap| {
        if let Some(view) = configmap_view(&cm, keys) {
            if let Some(why) = scope::unwatched_configmap(options, &cm) {
                settings.scope.resources.insert(view.key.clone(), why);
            }
            resources.insert(view.key.clone(), view);
        }
    })
    .await
    .map_err(|e| ExplainError::api(format!("listing ConfigMaps in {namespace}"), e))?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    for_each(&secrets, |secret: Secret| {
        if let Some(view) = secret_view(&secret, keys) {
            if let Some(why) = scope::unwatched_secret(options, &secret) {
                settings.scope.resources.insert(view.key.clone(), why);
            }
            resources.insert(view.key.clone(), view);
        }
    })
    .await
    .map_err(|e| ExplainError::api(format!("listing Secrets in {namespace}"), e))?;
    if options.enable_csi_integration {
        // A status is judged by its class's ignore/match annotations.
        let classes: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &spc_resource());
        let mut flags: HashMap<String, ClassFlags> = HashMap::new();
        let classes_listed = for_each(&classes, |class: DynamicObject| {
            flags.insert(class.name_any(), ClassFlags::of(&class.metadata, keys));
        })
        .await;
        let statuses: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), namespace, &spc_pod_status_resource());
        let listed = match classes_listed {
            Ok(()) => {
                for_each(&statuses, |status: DynamicObject| {
                    let class_flags = |key: &ResourceKey| flags.get(&*key.name).copied().unwrap_or_default();
                    if let Some(view) = spc_view(&status, class_flags) {
                        resources.insert(view.key.clone(), view);
                    }
                })
                .await
            }
            Err(e) => Err(e),
        };
        match listed {
            // No Secrets Store CSI driver installed: there are no statuses to read.
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => {
                let context = format!("listing SecretProviderClassPodStatuses in {namespace}");
                return Err(ExplainError::api(context, e));
            }
            Ok(()) => {}
        }
    }

    let resources: Vec<ResourceView> = resources.into_values().collect();
    Ok(explain(&ExplainInput {
        workload: &view,
        init_containers: &init_containers,
        resources: &resources,
        settings: &settings,
        eviction: &eviction,
    }))
}

/// Lists every object page by page, handing each to `f` as it comes.
async fn for_each<K>(api: &Api<K>, mut f: impl FnMut(K)) -> Result<(), kube::Error>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    let mut params = ListParams::default().limit(500);
    loop {
        let page: ObjectList<K> = api.list(&params).await?;
        let next = page.metadata.continue_.clone().filter(|token| !token.is_empty());
        page.items.into_iter().for_each(&mut f);
        match next {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(()),
        }
    }
}

/// The explanation in the requested format, ending with a newline.
pub fn render(explanation: &Explanation, format: OutputFormat) -> Result<String, ExplainError> {
    let mut out = match format {
        OutputFormat::Text => reloader_core::explain::render_text(explanation),
        OutputFormat::Json => serde_json::to_string_pretty(explanation)
            .map_err(|e| ExplainError::Output { format: "JSON", reason: e.to_string() })?,
        OutputFormat::Yaml => serde_saphyr::to_string(explanation)
            .map_err(|e| ExplainError::Output { format: "YAML", reason: e.to_string() })?,
    };
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_loosely_and_fail_clearly() {
        let ok = |t: &str| parse_target(t, &[]).unwrap();
        assert_eq!(ok("deployment/web"), (WorkloadKind::Deployment, "web".to_owned()));
        assert_eq!(ok("sts/db"), (WorkloadKind::StatefulSet, "db".to_owned()));
        assert_eq!(ok("CronJobs/report"), (WorkloadKind::CronJob, "report".to_owned()));
        let err = |t: &str| parse_target(t, &[]).unwrap_err();
        assert!(err("pod/web").is_usage());
        assert_eq!(
            err("pod/web").to_string(),
            "invalid workload \"pod/web\": unknown kind \"pod\"; expected deployment, daemonset, statefulset, \
             cronjob, job, rollout, deploymentconfig (or one declared with --custom-workload)"
        );
        let declared = reloader_core::model::WorkloadKind::declare(&[
            "group=apps.kruise.io,version=v1alpha1,kind=CloneSet,resource=clonesets,template=/spec/template"
                .into(),
        ])
        .unwrap();
        assert_eq!(parse_target("clonesets/web", &declared).unwrap(), (declared[0], "web".to_owned()));
        assert!(
            parse_target("cloneset/web", &[])
                .unwrap_err()
                .to_string()
                .contains("deploymentconfig (or one declared")
        );
        assert!(
            parse_target("x/web", &declared)
                .unwrap_err()
                .to_string()
                .contains("deploymentconfig, cloneset (or one declared")
        );
        assert_eq!(
            err("web").to_string(),
            "invalid workload \"web\": expected <kind>/<name>, e.g. deployment/web"
        );
        assert!(err("deployment/").is_usage());
        assert!(err("deployment/a/b").is_usage());
    }
}
