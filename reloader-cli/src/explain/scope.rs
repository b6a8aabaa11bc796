//! What a controller run with the given flags never sees, in words naming the flag: the
//! workload (its kind or namespace), whole resource types, or single ConfigMaps/Secrets.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use reloader_core::explain::Scope;
use reloader_core::model::{ResourceKind, WorkloadKind};
use reloader_core::options::{NamespaceScope, Options};
use reloader_core::selector::LabelSelector;

use crate::kinds::Availability;

/// Everything decided by the flags alone (not the namespace selector, which needs the Namespace).
pub fn of_settings(options: &Options, kind: WorkloadKind, namespace: &str) -> Scope {
    let mut scope = Scope { workload: workload(options, kind, namespace), ..Scope::default() };
    if let Some(ignored) = options.ignored_resources.kind() {
        scope
            .kinds
            .insert(ignored, format!("{ignored}s are ignored (--resources-to-ignore={})", ignored.plural()));
    }
    if !options.enable_csi_integration {
        scope.kinds.insert(
            ResourceKind::SecretProviderClass,
            "SecretProviderClasses are watched only with --enable-csi-integration".to_owned(),
        );
    }
    scope
}

fn workload(options: &Options, kind: WorkloadKind, namespace: &str) -> Option<String> {
    if options.ignored_workloads.contains(&kind) {
        return Some(format!("{kind}s are ignored (--ignored-workload-types)"));
    }
    match crate::kinds::info(kind).availability {
        Availability::Flag(flag) if flag.value(options) != Some(true) => {
            return Some(format!("{kind}s are reloaded only with {}=true", flag.name()));
        }
        Availability::FlagOrDetected(flag) if flag.value(options) == Some(false) => {
            return Some(format!("{kind}s are ignored ({}=false)", flag.name()));
        }
        _ => {}
    }
    match &options.namespace_scope {
        NamespaceScope::Only(watched) if !watched.iter().any(|n| n == namespace) => Some(format!(
            "namespace {namespace} is not watched (only {} are, by --namespaces or KUBERNETES_NAMESPACE)",
            watched.join(", ")
        )),
        NamespaceScope::All { ignore, .. } if ignore.iter().any(|n| n == namespace) => {
            Some(format!("namespace {namespace} is ignored (--namespaces-to-ignore)"))
        }
        _ => None,
    }
}

/// Whether `--namespace-selector` leaves the workload's namespace out.
pub fn namespace_selector(selector: &LabelSelector, namespace: &Namespace) -> Option<String> {
    let labels = namespace.metadata.labels.clone().unwrap_or_default();
    let name = namespace.metadata.name.as_deref().unwrap_or_default();
    (!selector.matches(&labels))
        .then(|| format!("namespace {name} does not match --namespace-selector={selector}"))
}

pub fn unwatched_configmap(options: &Options, cm: &ConfigMap) -> Option<String> {
    label_selector_miss(options, cm.metadata.labels.as_ref())
}

pub fn unwatched_secret(options: &Options, secret: &Secret) -> Option<String> {
    // The API server reports a Secret without a type as Opaque.
    let secret_type = secret.type_.as_deref().unwrap_or("Opaque");
    if options.ignored_secret_types.contains(secret_type) {
        return Some(format!("Secrets of type {secret_type} are not watched (--ignored-secret-types)"));
    }
    label_selector_miss(options, secret.metadata.labels.as_ref())
}

fn label_selector_miss(
    options: &Options,
    labels: Option<&std::collections::BTreeMap<String, String>>,
) -> Option<String> {
    let selector = options.resource_label_selector.as_ref()?;
    let empty = std::collections::BTreeMap::new();
    (!selector.matches(labels.unwrap_or(&empty)))
        .then(|| format!("its labels do not match --resource-label-selector={selector}"))
}
