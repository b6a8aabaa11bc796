//! Which workload kinds this run watches, and the dynamic API types of the CRD-backed ones.

use std::fmt;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::Client;
use kube::api::Api;
use kube::core::{ApiResource, GroupVersionKind};
use reloader_core::model::{WorkloadKey, WorkloadKind};
use reloader_core::options::Options;
use reloader_core::workload::Workload;
use reloader_workload_apps::AppsWorkload;
use reloader_workload_argo::Rollout;
use reloader_workload_batch::{CronJobWorkload, JobWorkload};
use reloader_workload_openshift::DeploymentConfig;
use tracing::info;

pub fn spc_pod_status_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("secrets-store.csi.x-k8s.io", "v1", "SecretProviderClassPodStatus"),
        "secretproviderclasspodstatuses",
    )
}

#[derive(Debug, Clone)]
pub struct EnabledKinds(Vec<WorkloadKind>);

impl EnabledKinds {
    /// Applies `--ignored-workload-types`, `--is-Argo-Rollouts` and `--is-openshift` (empty:
    /// enabled when the API server serves apps.openshift.io/v1).
    /// A kind switched on explicitly but not served stops start-up: watching it would only
    /// retry 404s forever and never become ready, which hides the real problem.
    pub async fn resolve(client: &Client, options: &Options) -> Result<Self, KindsError> {
        let openshift = match options.openshift {
            Some(true) => {
                require(client, "--is-openshift=true", "apps.openshift.io/v1", "deploymentconfigs").await?
            }
            Some(false) => false,
            None => {
                let served = serves(client, "apps.openshift.io/v1", "deploymentconfigs").await?;
                info!(served, "detected apps.openshift.io/v1 DeploymentConfig");
                served
            }
        };
        if options.argo_rollouts && !options.ignored_workloads.contains(&WorkloadKind::Rollout) {
            require(client, "--is-Argo-Rollouts=true", "argoproj.io/v1alpha1", "rollouts").await?;
        }
        let kinds = WorkloadKind::ALL
            .into_iter()
            .filter(|k| !options.ignored_workloads.contains(k))
            .filter(|k| match k {
                WorkloadKind::Rollout => options.argo_rollouts,
                WorkloadKind::DeploymentConfig => openshift,
                _ => true,
            })
            .collect();
        Ok(EnabledKinds(kinds))
    }

    pub fn iter(&self) -> impl Iterator<Item = WorkloadKind> + '_ {
        self.0.iter().copied()
    }

    pub fn contains(&self, kind: WorkloadKind) -> bool {
        self.0.contains(&kind)
    }
}

impl fmt::Display for EnabledKinds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<_> = self.0.iter().map(|k| k.as_str()).collect();
        f.write_str(&names.join(","))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KindsError {
    #[error(transparent)]
    Api(#[from] kube::Error),
    #[error(
        "{flag} but the API server does not serve {plural}.{group_version}: install its CRD or turn the flag off"
    )]
    NotServed { flag: &'static str, group_version: &'static str, plural: &'static str },
}

async fn require(
    client: &Client,
    flag: &'static str,
    group_version: &'static str,
    plural: &'static str,
) -> Result<bool, KindsError> {
    if serves(client, group_version, plural).await? {
        Ok(true)
    } else {
        Err(KindsError::NotServed { flag, group_version, plural })
    }
}

async fn serves(client: &Client, group_version: &str, plural: &str) -> Result<bool, kube::Error> {
    match client.list_api_group_resources(group_version).await {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == plural)),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

/// The dynamic API type of any workload kind (all writes go through it).
pub fn api_resource(kind: WorkloadKind) -> ApiResource {
    match kind {
        WorkloadKind::Deployment => ApiResource::erase::<Deployment>(&()),
        WorkloadKind::DaemonSet => ApiResource::erase::<DaemonSet>(&()),
        WorkloadKind::StatefulSet => ApiResource::erase::<StatefulSet>(&()),
        WorkloadKind::CronJob => ApiResource::erase::<CronJob>(&()),
        WorkloadKind::Job => ApiResource::erase::<Job>(&()),
        WorkloadKind::Rollout => ApiResource::erase::<Rollout>(&()),
        WorkloadKind::DeploymentConfig => ApiResource::erase::<DeploymentConfig>(&()),
    }
}

/// A workload object read fresh from the API server, as its backend type.
#[allow(clippy::large_enum_variant)] // One short-lived value per write; boxing buys nothing.
pub enum Loaded {
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
    pub fn with<R>(&self, f: impl FnOnce(&dyn Workload) -> R) -> R {
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
}

/// GETs a workload; `None` when it no longer exists.
pub async fn load(client: &Client, key: &WorkloadKey) -> Result<Option<Loaded>, kube::Error> {
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

/// Typed objects that can become a [`Loaded`] (every watched workload type).
pub trait ToLoaded {
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
