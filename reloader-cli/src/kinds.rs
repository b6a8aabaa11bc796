//! The registry of workload kinds: every fact about a kind is declared here once (API group,
//! version, plural, what switches it on, the RBAC rule the code needs) together with how to read
//! it into its backend type. The watches, the executor, explain, admission, Events and the
//! start-up's `discovery` read it.
//! Adding a kind touches this file and its backend only.

use std::fmt;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::api::{Api, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind, Status};
use kube::{Client, Resource};
use reloader_core::model::{WorkloadKey, WorkloadKind};
use reloader_core::skeleton::Skeleton;
use reloader_core::workload::{PatchKind, Precondition, Workload};
use reloader_workload_apps::{AppsKind, AppsWorkload};
use reloader_workload_argo::Rollout;
use reloader_workload_batch::{CronJobWorkload, JobWorkload};
use reloader_workload_openshift::DeploymentConfig;

/// What switches a kind on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Availability {
    /// Served by every API server: on unless ignored.
    BuiltIn,
    /// A CRD turned on by a flag; the flag set but the CRD missing stops start-up.
    Flag(&'static str),
    /// A CRD turned on by a flag, or detected when the flag is left empty.
    FlagOrDetected(&'static str),
}

/// Everything the controller knows about one workload kind.
#[derive(Debug, Clone, Copy)]
pub struct KindInfo {
    pub kind: WorkloadKind,
    /// API group (`""` never: every workload kind lives in a named group).
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    /// Where an object of the kind keeps its pod template, as a JSON pointer (admission patches).
    pub template_pointer: &'static str,
    pub availability: Availability,
    /// The RBAC verbs the controller uses on this kind (watch, read fresh, write).
    pub verbs: &'static [&'static str],
}

const READ: [&str; 3] = ["get", "list", "watch"];
const READ_PATCH: [&str; 4] = ["get", "list", "watch", "patch"];

/// The registry, in `WorkloadKind::ALL` order.
const KINDS: [KindInfo; 7] = [
    KindInfo {
        kind: WorkloadKind::Deployment,
        group: "apps",
        version: "v1",
        plural: "deployments",
        template_pointer: "/spec/template",
        availability: Availability::BuiltIn,
        verbs: &READ_PATCH,
    },
    KindInfo {
        kind: WorkloadKind::DaemonSet,
        group: "apps",
        version: "v1",
        plural: "daemonsets",
        template_pointer: "/spec/template",
        availability: Availability::BuiltIn,
        verbs: &READ_PATCH,
    },
    KindInfo {
        kind: WorkloadKind::StatefulSet,
        group: "apps",
        version: "v1",
        plural: "statefulsets",
        template_pointer: "/spec/template",
        availability: Availability::BuiltIn,
        verbs: &READ_PATCH,
    },
    // A CronJob reloads by creating a Job from its template (the Job rule covers it).
    KindInfo {
        kind: WorkloadKind::CronJob,
        group: "batch",
        version: "v1",
        plural: "cronjobs",
        template_pointer: "/spec/jobTemplate/spec/template",
        availability: Availability::BuiltIn,
        verbs: &READ,
    },
    // A Job reloads by being deleted and recreated.
    KindInfo {
        kind: WorkloadKind::Job,
        group: "batch",
        version: "v1",
        plural: "jobs",
        template_pointer: "/spec/template",
        availability: Availability::BuiltIn,
        verbs: &["get", "list", "watch", "create", "delete"],
    },
    KindInfo {
        kind: WorkloadKind::Rollout,
        group: "argoproj.io",
        version: "v1alpha1",
        plural: "rollouts",
        template_pointer: "/spec/template",
        availability: Availability::Flag("--is-Argo-Rollouts=true"),
        verbs: &READ_PATCH,
    },
    KindInfo {
        kind: WorkloadKind::DeploymentConfig,
        group: "apps.openshift.io",
        version: "v1",
        plural: "deploymentconfigs",
        template_pointer: "/spec/template",
        availability: Availability::FlagOrDetected("--is-openshift=true"),
        verbs: &READ_PATCH,
    },
];

/// The registry entry of `kind`.
pub fn info(kind: WorkloadKind) -> &'static KindInfo {
    KINDS.iter().find(|k| k.kind == kind).expect("every WorkloadKind is registered")
}

/// The registered kind an API group and kind name denote (any version).
pub(crate) fn by_group_kind(group: &str, kind: &str) -> Option<WorkloadKind> {
    KINDS.iter().find(|k| k.group == group && k.kind.as_str() == kind).map(|k| k.kind)
}

/// Every registered kind (for the chart's RBAC checks).
pub fn all() -> &'static [KindInfo] {
    &KINDS
}

impl KindInfo {
    /// `group/version`, as in `apiVersion`.
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }

    /// The dynamic API type (all writes go through it).
    pub fn api_resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(self.group, self.version, self.kind.as_str()),
            self.plural,
        )
    }
}

/// The dynamic API type of any workload kind.
pub(crate) fn api_resource(kind: WorkloadKind) -> ApiResource {
    info(kind).api_resource()
}

/// SecretProviderClassPodStatus (CSI integration): watched as a resource, not a workload.
pub(crate) fn spc_pod_status_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("secrets-store.csi.x-k8s.io", "v1", "SecretProviderClassPodStatus"),
        "secretproviderclasspodstatuses",
    )
}

/// SecretProviderClass (CSI integration): watched for its `ignore`/`match` annotations only.
pub(crate) fn spc_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("secrets-store.csi.x-k8s.io", "v1", "SecretProviderClass"),
        "secretproviderclasses",
    )
}

/// The kinds this run watches.
#[derive(Debug, Clone)]
pub(crate) struct EnabledKinds(Vec<WorkloadKind>);

impl EnabledKinds {
    pub(crate) fn of(kinds: &[WorkloadKind]) -> Self {
        EnabledKinds(kinds.to_vec())
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = WorkloadKind> + '_ {
        self.0.iter().copied()
    }

    pub(crate) fn contains(&self, kind: WorkloadKind) -> bool {
        self.0.contains(&kind)
    }
}

impl fmt::Display for EnabledKinds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<_> = self.0.iter().map(|k| k.as_str()).collect();
        f.write_str(&names.join(","))
    }
}

/// A workload object as its backend type.
#[allow(clippy::large_enum_variant)] // One short-lived value per write; boxing buys nothing.
pub(crate) enum Loaded {
    Deployment(Deployment),
    DaemonSet(DaemonSet),
    StatefulSet(StatefulSet),
    CronJob(CronJob),
    Job(Job),
    Rollout(Rollout),
    DeploymentConfig(DeploymentConfig),
}

impl Loaded {
    /// Runs `f` on the object seen through the core `Workload` trait.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&dyn Workload) -> R) -> R {
        match self {
            Loaded::Deployment(o) => f(&AppsWorkload(o)),
            Loaded::DaemonSet(o) => f(&AppsWorkload(o)),
            Loaded::StatefulSet(o) => f(&AppsWorkload(o)),
            Loaded::CronJob(o) => f(&CronJobWorkload(o)),
            Loaded::Job(o) => f(&JobWorkload(o)),
            Loaded::Rollout(o) => f(o),
            Loaded::DeploymentConfig(o) => f(o),
        }
    }

    /// The object a view's skeleton stands for, for the kinds whose writes can be built from it;
    /// `None` for Jobs and CronJobs, whose writes copy the whole template (they read it).
    pub(crate) fn from_skeleton(kind: WorkloadKind, skeleton: Skeleton) -> Option<Self> {
        Some(match kind {
            WorkloadKind::Deployment => Loaded::Deployment(AppsKind::from_skeleton(skeleton)),
            WorkloadKind::DaemonSet => Loaded::DaemonSet(AppsKind::from_skeleton(skeleton)),
            WorkloadKind::StatefulSet => Loaded::StatefulSet(AppsKind::from_skeleton(skeleton)),
            WorkloadKind::Rollout => Loaded::Rollout(Rollout::from_skeleton(skeleton)),
            WorkloadKind::DeploymentConfig => {
                Loaded::DeploymentConfig(DeploymentConfig::from_skeleton(skeleton))
            }
            WorkloadKind::CronJob | WorkloadKind::Job => return None,
        })
    }

    /// Reads an object of `kind` from JSON (an admission request's object).
    pub(crate) fn from_json(kind: WorkloadKind, object: &serde_json::Value) -> serde_json::Result<Self> {
        fn from_value<'a, T: serde::Deserialize<'a>>(v: &'a serde_json::Value) -> serde_json::Result<T> {
            T::deserialize(v)
        }
        Ok(match kind {
            WorkloadKind::Deployment => Loaded::Deployment(from_value(object)?),
            WorkloadKind::DaemonSet => Loaded::DaemonSet(from_value(object)?),
            WorkloadKind::StatefulSet => Loaded::StatefulSet(from_value(object)?),
            WorkloadKind::CronJob => Loaded::CronJob(from_value(object)?),
            WorkloadKind::Job => Loaded::Job(from_value(object)?),
            WorkloadKind::Rollout => Loaded::Rollout(from_value(object)?),
            WorkloadKind::DeploymentConfig => Loaded::DeploymentConfig(from_value(object)?),
        })
    }
}

/// GETs a workload; `None` when it no longer exists.
pub(crate) async fn load(client: &Client, key: &WorkloadKey) -> Result<Option<Loaded>, kube::Error> {
    let (c, ns, name) = (client.clone(), &*key.namespace, &*key.name);
    Ok(match key.kind {
        WorkloadKind::Deployment => Api::namespaced(c, ns).get_opt(name).await?.map(Loaded::Deployment),
        WorkloadKind::DaemonSet => Api::namespaced(c, ns).get_opt(name).await?.map(Loaded::DaemonSet),
        WorkloadKind::StatefulSet => Api::namespaced(c, ns).get_opt(name).await?.map(Loaded::StatefulSet),
        WorkloadKind::CronJob => Api::namespaced(c, ns).get_opt(name).await?.map(Loaded::CronJob),
        WorkloadKind::Job => Api::namespaced(c, ns).get_opt(name).await?.map(Loaded::Job),
        WorkloadKind::Rollout => Api::namespaced(c, ns).get_opt(name).await?.map(Loaded::Rollout),
        WorkloadKind::DeploymentConfig => {
            Api::namespaced(c, ns).get_opt(name).await?.map(Loaded::DeploymentConfig)
        }
    })
}

/// PATCHes a workload; the object as the API server left it, as its backend type.
pub(crate) async fn patch(
    client: &Client,
    key: &WorkloadKey,
    params: &PatchParams,
    patch: &Patch<serde_json::Value>,
) -> Result<Loaded, kube::Error> {
    async fn typed<K>(
        client: &Client,
        key: &WorkloadKey,
        params: &PatchParams,
        patch: &Patch<serde_json::Value>,
    ) -> Result<Loaded, kube::Error>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()> + ToLoaded,
        K: Clone + serde::de::DeserializeOwned + fmt::Debug,
    {
        let api: Api<K> = Api::namespaced(client.clone(), &key.namespace);
        Ok(api.patch(&key.name, params, patch).await?.into_loaded())
    }
    match key.kind {
        WorkloadKind::Deployment => typed::<Deployment>(client, key, params, patch).await,
        WorkloadKind::DaemonSet => typed::<DaemonSet>(client, key, params, patch).await,
        WorkloadKind::StatefulSet => typed::<StatefulSet>(client, key, params, patch).await,
        WorkloadKind::CronJob => typed::<CronJob>(client, key, params, patch).await,
        WorkloadKind::Job => typed::<Job>(client, key, params, patch).await,
        WorkloadKind::Rollout => typed::<Rollout>(client, key, params, patch).await,
        WorkloadKind::DeploymentConfig => typed::<DeploymentConfig>(client, key, params, patch).await,
    }
}

/// Whether the API server's 422 to a patch is the patch's precondition failing. Only a JSON
/// patch's (its `test`) is refused with 422 rather than 409: built-in kinds say so in the
/// message; custom resources answer a bare 422 "Invalid", so the version is compared instead.
pub(crate) async fn precondition_failed<F>(
    patch: PatchKind,
    precondition: &Precondition,
    refusal: &Status,
    current_version: impl FnOnce() -> F,
) -> Result<bool, kube::Error>
where
    F: std::future::Future<Output = Result<Option<String>, kube::Error>>,
{
    if patch != PatchKind::Json {
        return Ok(false);
    }
    let moved = match precondition {
        Precondition::ResourceVersion(expected) => {
            current_version().await?.is_some_and(|now| now != *expected)
        }
        Precondition::None => false,
    };
    Ok(moved || refusal.message.contains("test"))
}

/// Typed objects that can become a [`Loaded`] (every watched workload type).
pub(crate) trait ToLoaded {
    fn into_loaded(self) -> Loaded;
}

macro_rules! to_loaded {
    ($($t:ident),*) => {$(
        impl ToLoaded for $t {
            fn into_loaded(self) -> Loaded {
                Loaded::$t(self)
            }
        }
    )*};
}
to_loaded!(Deployment, DaemonSet, StatefulSet, CronJob, Job, Rollout, DeploymentConfig);

#[cfg(test)]
mod tests {
    use kube::Resource;

    use super::*;

    fn typed<K: Resource<DynamicType = ()>>() -> ApiResource {
        ApiResource::erase::<K>(&())
    }

    #[test]
    fn every_kind_is_registered_once_and_matches_its_backend_type() {
        for kind in WorkloadKind::ALL {
            assert_eq!(KINDS.iter().filter(|k| k.kind == kind).count(), 1, "{kind:?}");
        }
        let backends = [
            typed::<Deployment>(),
            typed::<DaemonSet>(),
            typed::<StatefulSet>(),
            typed::<CronJob>(),
            typed::<Job>(),
            typed::<Rollout>(),
            typed::<DeploymentConfig>(),
        ];
        for (kind, backend) in WorkloadKind::ALL.into_iter().zip(backends) {
            let registered = api_resource(kind);
            assert_eq!(
                (&registered.group, &registered.version, &registered.api_version, &registered.kind),
                (&backend.group, &backend.version, &backend.api_version, &backend.kind),
                "{kind:?}"
            );
            assert_eq!(registered.plural, backend.plural, "{kind:?}");
        }
    }

    #[test]
    fn the_template_pointer_is_where_the_backend_reads_the_pod_template() {
        for info in all() {
            // An object with a pod template only at the registered pointer.
            let mut object = serde_json::json!({"metadata": {"name": "probe", "namespace": "ns"}});
            let mut at = &mut object;
            for token in info.template_pointer.trim_start_matches('/').split('/') {
                at = &mut at[token];
            }
            *at = serde_json::json!({"spec": {"containers": [{"name": "probe-container"}]}});
            if info.kind == WorkloadKind::CronJob {
                object["spec"]["schedule"] = "* * * * *".into();
            }
            let loaded = Loaded::from_json(info.kind, &object).expect("the backend type reads it");
            let containers: Vec<String> = loaded.with(|w| {
                w.pod_template()
                    .and_then(|t| t.spec.as_ref())
                    .map_or_else(Vec::new, |spec| spec.containers.iter().map(|c| c.name.clone()).collect())
            });
            assert_eq!(containers, ["probe-container"], "{:?} at {}", info.kind, info.template_pointer);
        }
    }

    #[test]
    fn every_kind_can_be_watched_and_read() {
        for info in all() {
            for verb in ["get", "list", "watch"] {
                assert!(info.verbs.contains(&verb), "{:?} lacks {verb}", info.kind);
            }
        }
    }
}
