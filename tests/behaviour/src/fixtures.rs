//! Shared building blocks for the behaviour tests (docs/behaviour.md): workloads of every kind built
//! from one description, ConfigMaps/Secrets with the hash Stakater would compute for them, and
//! readers that look for the marker the controller writes.
//!
//! ```no_run
//! # async fn example() -> Result<(), reloader_harness::PlaneError> {
//! use std::time::Duration;
//! use reloader_tests::fixtures::*;
//!
//! let env = TestEnv::with_crds().await;
//! let TestEnv { ns, client, resources, .. } = &env;
//! let config = ResourceRef::configmap("app-config");
//! resources.create(&config, &[("k", "v1")]).await?;
//! let web = WorkloadSpec::new(Kind::Deployment, "web")
//!     .metadata_annotation("reloader.stakater.com/auto", "true")
//!     .env_from_configmap("app-config")
//!     .create(client, ns.name())
//!     .await?;
//! let _reloader = env.reloader(Strategy::EnvVars, &[]).await;
//! let hash = resources.update_data(&config, &[("k", "v2")]).await?;
//! let latency = web.wait_for_marker(client, &config, Strategy::EnvVars, &hash, Duration::from_secs(60)).await?;
//! # let _ = latency; Ok(()) }
//! ```

use std::fmt;

use kube::core::ApiResource;
use reloader_harness::Crd;

mod admission;
mod env;
mod observe;
mod resources;
mod rollout;
mod setup;
mod table;
mod table_run;
mod workload;

pub use admission::{FROZEN_LABEL, TemplateFreeze};
pub use env::TestEnv;
pub use observe::{
    Marker, Observed, WorkloadId, list_observed, marker, marker_in, observe, resource_version, template_of,
};
pub use reloader_core::model::ResourceKind;
pub use resources::{
    ResourceRef, Resources, expected_env_var, filtered_hash, stakater_hash_configmap, stakater_hash_secret,
};
pub use rollout::wait_rolled_out;
pub use setup::{
    ANNOTATION_AUTO, ANNOTATION_CONFIGMAP_AUTO, ANNOTATION_CONFIGMAP_EXCLUDE, ANNOTATION_CONFIGMAP_RELOAD,
    ANNOTATION_IGNORE, ANNOTATION_LAST_RELOADED_FROM, ANNOTATION_MATCH, ANNOTATION_SEARCH,
    ANNOTATION_SECRET_AUTO, ANNOTATION_SECRET_EXCLUDE, ANNOTATION_SECRET_RELOAD, declare_kinds,
    event_occurrences, events_for, install_all_crds, negative_wait, reloader_for,
};
pub use table::{Case, Change, DELETE_MARKER_HASH, MAIN, Outcome, Phase};
pub use table_run::{Table, TableRun};
pub use workload::{CONTAINER_IMAGE, Via, WorkloadSpec, container_name};

/// Every workload kind the controller can reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Deployment,
    DaemonSet,
    StatefulSet,
    /// `argoproj.io/v1alpha1` Rollout (needs [`install_all_crds`] and `--is-Argo-Rollouts=true`).
    Rollout,
    /// `apps.openshift.io/v1` DeploymentConfig (needs [`install_all_crds`] and `--is-openshift=true`).
    DeploymentConfig,
    CronJob,
    Job,
    /// OpenKruise's `apps.kruise.io/v1alpha1` CloneSet: reloader knows it only when declared
    /// (see [`Kind::declared`]).
    CloneSet,
    /// KEDA's `keda.sh/v1alpha1` ScaledJob, declared; its pod template is its Job's.
    ScaledJob,
    /// The made-up `example.reloader.dev/v1` DeepWorkload, declared; its pod template sits three
    /// levels under `spec`.
    DeepWorkload,
}

/// How reloader is told about a kind it has no code for: `--custom-workload`, naming the kind's
/// API and where its objects keep their pod template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Declared {
    /// The CRD serving the kind (one kind per set).
    pub crd: Crd,
    /// The JSON pointer to the pod template in an object of the kind.
    pub template: &'static str,
}

impl Declared {
    /// The kind's group, version, kind and plural, as its CRD serves them.
    pub fn api_resource(&self) -> ApiResource {
        let [resource] = <[_; 1]>::try_from(self.crd.api_resources()).expect("one kind per declared CRD");
        resource
    }

    /// `--custom-workload=group=…,version=…,kind=…,resource=…,template=…`.
    pub fn flag(&self) -> String {
        let resource = self.api_resource();
        format!(
            "--custom-workload=group={},version={},kind={},resource={},template={}",
            resource.group, resource.version, resource.kind, resource.plural, self.template
        )
    }
}

impl Kind {
    pub const ALL: [Kind; 7] = [
        Kind::Deployment,
        Kind::DaemonSet,
        Kind::StatefulSet,
        Kind::Rollout,
        Kind::DeploymentConfig,
        Kind::CronJob,
        Kind::Job,
    ];

    /// The kinds whose reload is a change of their own pod template (docs/behaviour.md's default set).
    pub const ROLLING: [Kind; 5] =
        [Kind::Deployment, Kind::DaemonSet, Kind::StatefulSet, Kind::Rollout, Kind::DeploymentConfig];

    /// The kinds reloader rolls only when declared (docs/behaviour.md §I); not in [`Kind::ALL`], so
    /// the tables of the other sections keep their size.
    pub const DECLARED: [Kind; 3] = [Kind::CloneSet, Kind::ScaledJob, Kind::DeepWorkload];

    /// A short lowercase tag, handy in object names (`deploy`, `ds`, ...).
    pub fn short(self) -> &'static str {
        match self {
            Kind::Deployment => "deploy",
            Kind::DaemonSet => "ds",
            Kind::StatefulSet => "sts",
            Kind::Rollout => "ro",
            Kind::DeploymentConfig => "dc",
            Kind::CronJob => "cj",
            Kind::Job => "job",
            Kind::CloneSet => "cs",
            Kind::ScaledJob => "sj",
            Kind::DeepWorkload => "deep",
        }
    }

    /// The Kubernetes `kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Deployment => "Deployment",
            Kind::DaemonSet => "DaemonSet",
            Kind::StatefulSet => "StatefulSet",
            Kind::Rollout => "Rollout",
            Kind::DeploymentConfig => "DeploymentConfig",
            Kind::CronJob => "CronJob",
            Kind::Job => "Job",
            Kind::CloneSet => "CloneSet",
            Kind::ScaledJob => "ScaledJob",
            Kind::DeepWorkload => "DeepWorkload",
        }
    }

    /// How a declared kind is declared; `None` for the kinds reloader knows by itself.
    pub fn declared(self) -> Option<Declared> {
        let (crd, template) = match self {
            Kind::CloneSet => (Crd::OpenKruiseCloneSet, "/spec/template"),
            Kind::ScaledJob => (Crd::KedaScaledJob, "/spec/jobTargetRef/template"),
            Kind::DeepWorkload => (Crd::DeepWorkload, "/spec/runtime/workers/podTemplate"),
            _ => return None,
        };
        Some(Declared { crd, template })
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `--reload-strategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Strategy {
    EnvVars,
    Annotations,
}

impl Strategy {
    pub const ALL: [Strategy; 2] = [Strategy::EnvVars, Strategy::Annotations];

    /// The value of `--reload-strategy`.
    pub fn flag_value(self) -> &'static str {
        match self {
            Strategy::EnvVars => "env-vars",
            Strategy::Annotations => "annotations",
        }
    }

    /// `--reload-strategy=<value>`.
    pub fn flag(self) -> String {
        format!("--reload-strategy={}", self.flag_value())
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.flag_value())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rolling_kinds_are_the_five_with_their_own_template() {
        assert_eq!(Kind::ROLLING.len(), 5);
        assert!(!Kind::ROLLING.contains(&Kind::CronJob) && !Kind::ROLLING.contains(&Kind::Job));
        let every = Kind::ALL.iter().chain(&Kind::DECLARED);
        let shorts: std::collections::BTreeSet<_> = every.map(|kind| kind.short()).collect();
        assert_eq!(shorts.len(), Kind::ALL.len() + Kind::DECLARED.len(), "short tags are unique");
    }

    #[test]
    fn declared_kinds_are_their_crds_kinds_and_only_they_are_declared() {
        for kind in Kind::DECLARED {
            let declared = kind.declared().unwrap_or_else(|| panic!("{kind} has a declaration"));
            assert_eq!(declared.api_resource().kind, kind.as_str());
            assert!(!Kind::ALL.contains(&kind), "{kind} would make the other tables bigger");
        }
        assert!(Kind::ALL.iter().all(|kind| kind.declared().is_none()));
        assert_eq!(
            Kind::DeepWorkload.declared().unwrap().flag(),
            "--custom-workload=group=example.reloader.dev,version=v1,kind=DeepWorkload,\
             resource=deepworkloads,template=/spec/runtime/workers/podTemplate"
        );
    }

    #[test]
    fn strategy_flags() {
        assert_eq!(Strategy::EnvVars.flag(), "--reload-strategy=env-vars");
        assert_eq!(Strategy::Annotations.flag(), "--reload-strategy=annotations");
    }
}
