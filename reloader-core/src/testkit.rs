//! Test builders: real k8s-openapi Deployments turned into views through the `Workload` trait,
//! and resource views, so test tables read like the manifests they stand for.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    CSIVolumeSource, ConfigMapEnvSource, ConfigMapKeySelector, ConfigMapProjection, ConfigMapVolumeSource,
    Container, EnvFromSource, EnvVar, EnvVarSource, PodSpec, PodTemplateSpec, ProjectedVolumeSource,
    SecretEnvSource, SecretKeySelector, SecretProjection, SecretVolumeSource, Volume, VolumeMount,
    VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::annotations::AnnotationKeys;
use crate::hash::sha1;
use crate::markers::{MarkerChange, template_strategic_patch};
use crate::model::{ContentHash, RefVia, ResourceKey, ResourceKind, WorkloadKind};
use crate::views::{ResourceView, WorkloadView};
use crate::workload::{PatchKind, Precondition, Workload, WorkloadWrite, WriteContext};

pub const NS: &str = "default";
pub const CM_RELOAD: &str = "configmap.reloader.stakater.com/reload";
pub const SECRET_RELOAD: &str = "secret.reloader.stakater.com/reload";
pub const SPC_RELOAD: &str = "secretproviderclass.reloader.stakater.com/reload";
pub const AUTO: &str = "reloader.stakater.com/auto";
pub const CM_AUTO: &str = "configmap.reloader.stakater.com/auto";
pub const SECRET_AUTO: &str = "secret.reloader.stakater.com/auto";
pub const SEARCH: &str = "reloader.stakater.com/search";
pub const CM_EXCLUDE: &str = "configmaps.exclude.reloader.stakater.com/reload";
pub const SECRET_EXCLUDE: &str = "secrets.exclude.reloader.stakater.com/reload";
pub const LAST_RELOADED_FROM: &str = "reloader.stakater.com/last-reloaded-from";

/// A Deployment (or, by `kind`, any kind sharing its shape) under test.
#[derive(Debug, Clone)]
pub struct TestWorkload {
    pub kind: WorkloadKind,
    pub deployment: Deployment,
    pub suspended: bool,
    pub has_template: bool,
    pub annotations_only: bool,
}

/// A Deployment `name` in [`NS`] with one container `app` and nothing else.
pub fn deployment(name: &str) -> TestWorkload {
    let spec = PodSpec { containers: vec![container("app")], ..Default::default() };
    TestWorkload {
        kind: WorkloadKind::Deployment,
        deployment: Deployment {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(NS.into()),
                ..Default::default()
            },
            spec: Some(DeploymentSpec {
                template: PodTemplateSpec { metadata: None, spec: Some(spec) },
                ..Default::default()
            }),
            status: None,
        },
        suspended: false,
        has_template: true,
        annotations_only: false,
    }
}

fn container(name: &str) -> Container {
    Container { name: name.into(), image: Some("busybox".into()), ..Default::default() }
}

impl TestWorkload {
    /// A declared kind whose operator copies an annotations map to its pods: the "template" is
    /// that map, with no containers.
    pub fn annotations_map(mut self) -> Self {
        self.spec_mut().containers.clear();
        self.annotations_only = true;
        self
    }

    pub fn with_name(mut self, name: &str) -> Self {
        self.deployment.metadata.name = Some(name.into());
        self
    }

    pub fn in_namespace(mut self, namespace: &str) -> Self {
        self.deployment.metadata.namespace = Some(namespace.into());
        self
    }

    pub fn kind(mut self, kind: WorkloadKind) -> Self {
        self.kind = kind;
        self
    }

    pub fn suspended(mut self) -> Self {
        self.suspended = true;
        self
    }

    pub fn without_template(mut self) -> Self {
        self.has_template = false;
        self
    }

    /// Replaces the regular containers.
    pub fn containers(mut self, names: &[&str]) -> Self {
        self.spec_mut().containers = names.iter().map(|n| container(n)).collect();
        self
    }

    pub fn init_containers(mut self, names: &[&str]) -> Self {
        self.spec_mut().init_containers = Some(names.iter().map(|n| container(n)).collect());
        self
    }

    /// An annotation on the workload's own metadata.
    /// `metadata.resourceVersion`, as the API server would have set it.
    pub fn at_version(mut self, version: &str) -> Self {
        self.deployment.metadata.resource_version = Some(version.into());
        self
    }

    pub fn annotate(mut self, key: &str, value: &str) -> Self {
        self.deployment
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.into(), value.into());
        self
    }

    /// An annotation on the pod template.
    pub fn annotate_template(mut self, key: &str, value: &str) -> Self {
        self.template_mut()
            .metadata
            .get_or_insert_with(Default::default)
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.into(), value.into());
        self
    }

    /// A plain `name=value` env var on a container (regular or init), e.g. a marker.
    pub fn env(mut self, container: &str, name: &str, value: &str) -> Self {
        let env = EnvVar { name: name.into(), value: Some(value.into()), value_from: None };
        self.container_mut(container).env.get_or_insert_with(Vec::new).push(env);
        self
    }

    /// `container` uses the resource `kind/name` `via` the given way. For the volume kinds a
    /// volume is added and mounted in `container`; an empty `container` leaves it unmounted.
    pub fn uses(mut self, container: &str, kind: ResourceKind, name: &str, via: RefVia) -> Self {
        match via {
            RefVia::Volume | RefVia::Projected | RefVia::Csi => {
                let volume_name = format!("vol-{}", self.spec_mut().volumes.as_ref().map_or(0, Vec::len));
                self.spec_mut().volumes.get_or_insert_with(Vec::new).push(volume(
                    &volume_name,
                    kind,
                    name,
                    via,
                ));
                if !container.is_empty() {
                    let mount = VolumeMount {
                        name: volume_name.clone(),
                        mount_path: format!("/etc/{volume_name}"),
                        ..Default::default()
                    };
                    self.container_mut(container).volume_mounts.get_or_insert_with(Vec::new).push(mount);
                }
            }
            RefVia::EnvValueFrom => {
                let source = match kind {
                    ResourceKind::ConfigMap => EnvVarSource {
                        config_map_key_ref: Some(ConfigMapKeySelector {
                            name: name.into(),
                            key: "key".into(),
                            optional: None,
                        }),
                        ..Default::default()
                    },
                    ResourceKind::Secret => EnvVarSource {
                        secret_key_ref: Some(SecretKeySelector {
                            name: name.into(),
                            key: "key".into(),
                            optional: None,
                        }),
                        ..Default::default()
                    },
                    ResourceKind::SecretProviderClass => {
                        panic!("a SecretProviderClass is used through CSI only")
                    }
                };
                let env = EnvVar { name: format!("FROM_{name}"), value: None, value_from: Some(source) };
                self.container_mut(container).env.get_or_insert_with(Vec::new).push(env);
            }
            RefVia::EnvFrom => {
                let from = match kind {
                    ResourceKind::ConfigMap => EnvFromSource {
                        config_map_ref: Some(ConfigMapEnvSource { name: name.into(), optional: None }),
                        ..Default::default()
                    },
                    ResourceKind::Secret => EnvFromSource {
                        secret_ref: Some(SecretEnvSource { name: name.into(), optional: None }),
                        ..Default::default()
                    },
                    ResourceKind::SecretProviderClass => {
                        panic!("a SecretProviderClass is used through CSI only")
                    }
                };
                self.container_mut(container).env_from.get_or_insert_with(Vec::new).push(from);
            }
        }
        self
    }

    pub fn uses_cm(self, container: &str, name: &str, via: RefVia) -> Self {
        self.uses(container, ResourceKind::ConfigMap, name, via)
    }

    pub fn uses_secret(self, container: &str, name: &str, via: RefVia) -> Self {
        self.uses(container, ResourceKind::Secret, name, via)
    }

    pub fn uses_spc(self, container: &str, name: &str) -> Self {
        self.uses(container, ResourceKind::SecretProviderClass, name, RefVia::Csi)
    }

    pub fn template(&self) -> &PodTemplateSpec {
        &self.deployment.spec.as_ref().expect("test deployments have a spec").template
    }

    pub fn view(&self) -> WorkloadView {
        Workload::view(self, &AnnotationKeys::default())
    }

    fn template_mut(&mut self) -> &mut PodTemplateSpec {
        &mut self.deployment.spec.as_mut().expect("test deployments have a spec").template
    }

    fn spec_mut(&mut self) -> &mut PodSpec {
        self.template_mut().spec.as_mut().expect("test templates have a pod spec")
    }

    fn container_mut(&mut self, name: &str) -> &mut Container {
        let spec = self.spec_mut();
        spec.containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten())
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no container {name}"))
    }
}

fn volume(volume_name: &str, kind: ResourceKind, name: &str, via: RefVia) -> Volume {
    let mut volume = Volume { name: volume_name.into(), ..Default::default() };
    match (via, kind) {
        (RefVia::Volume, ResourceKind::ConfigMap) => {
            volume.config_map = Some(ConfigMapVolumeSource { name: name.into(), ..Default::default() });
        }
        (RefVia::Volume, ResourceKind::Secret) => {
            volume.secret = Some(SecretVolumeSource { secret_name: Some(name.into()), ..Default::default() });
        }
        (RefVia::Projected, ResourceKind::ConfigMap | ResourceKind::Secret) => {
            let source = if kind == ResourceKind::ConfigMap {
                VolumeProjection {
                    config_map: Some(ConfigMapProjection { name: name.into(), ..Default::default() }),
                    ..Default::default()
                }
            } else {
                VolumeProjection {
                    secret: Some(SecretProjection { name: name.into(), ..Default::default() }),
                    ..Default::default()
                }
            };
            volume.projected =
                Some(ProjectedVolumeSource { sources: Some(vec![source]), default_mode: None });
        }
        (RefVia::Csi, ResourceKind::SecretProviderClass) => {
            volume.csi = Some(CSIVolumeSource {
                driver: "secrets-store.csi.k8s.io".into(),
                volume_attributes: Some(BTreeMap::from([("secretProviderClass".into(), name.into())])),
                ..Default::default()
            });
        }
        other => panic!("no volume for {other:?}"),
    }
    volume
}

impl Workload for TestWorkload {
    fn kind(&self) -> WorkloadKind {
        self.kind
    }

    fn metadata(&self) -> &ObjectMeta {
        &self.deployment.metadata
    }

    fn pod_template(&self) -> Option<&PodTemplateSpec> {
        self.has_template.then(|| self.template())
    }

    fn suspended(&self) -> bool {
        self.suspended
    }

    fn annotations_only(&self) -> bool {
        self.annotations_only
    }

    fn template_write(
        &self,
        template: &PodTemplateSpec,
        changes: &[MarkerChange],
        ctx: &WriteContext<'_>,
    ) -> Option<WorkloadWrite> {
        template_strategic_patch(template, changes, ctx.keys, ctx.now_unix).map(|body| WorkloadWrite::Patch {
            kind: PatchKind::Strategic,
            body,
            precondition: Precondition::None,
        })
    }
}

/// A deterministic content hash named after a version label.
pub fn hash(label: &str) -> ContentHash {
    sha1(label.as_bytes())
}

pub fn resource(kind: ResourceKind, name: &str) -> ResourceView {
    ResourceView {
        key: ResourceKey::new(kind, NS, name),
        hash: hash(&format!("{kind}/{name} v1")),
        keys: Default::default(),
        matched: false,
        ignored: false,
        version: None,
    }
}

pub fn cm(name: &str) -> ResourceView {
    resource(ResourceKind::ConfigMap, name)
}

pub fn secret(name: &str) -> ResourceView {
    resource(ResourceKind::Secret, name)
}

pub fn spc(name: &str) -> ResourceView {
    resource(ResourceKind::SecretProviderClass, name)
}

/// Chained tweaks of a resource view.
pub trait ResourceViewExt {
    fn matched(self) -> Self;
    fn ignored(self) -> Self;
    fn with_hash(self, hash: ContentHash) -> Self;
    fn in_namespace(self, namespace: &str) -> Self;
    fn at_version(self, version: &str) -> Self;
}

impl ResourceViewExt for ResourceView {
    fn matched(mut self) -> Self {
        self.matched = true;
        self
    }

    fn ignored(mut self) -> Self {
        self.ignored = true;
        self
    }

    fn with_hash(mut self, hash: ContentHash) -> Self {
        self.hash = hash;
        self
    }

    fn in_namespace(mut self, namespace: &str) -> Self {
        self.key.namespace = namespace.into();
        self
    }

    fn at_version(mut self, version: &str) -> Self {
        self.version = crate::model::ResourceVersion::parse(version);
        self
    }
}
