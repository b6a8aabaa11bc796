//! The CustomResourceDefinitions tests and the demo can install: Argo Rollouts, OpenKruise's
//! CloneSet and KEDA's ScaledJob (upstream's, read from their Go modules via the cache),
//! OpenShift's DeploymentConfig and the Secrets Store CSI driver's classes (permissive ones of our
//! own, in hack/crds/), and made-up workload kinds for the custom-kinds tests (hack/crds/ too).

use std::path::Path;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};

use crate::wait::{NotYet, wait_until};
use crate::{ControlPlane, PlaneError};

const DEPLOYMENT_CONFIG: &str = include_str!("../../../hack/crds/deploymentconfig.yaml");
const SECRET_PROVIDER_CLASS: &str = include_str!("../../../hack/crds/secretproviderclass.yaml");
const SECRET_PROVIDER_CLASS_POD_STATUS: &str =
    include_str!("../../../hack/crds/secretproviderclasspodstatus.yaml");
const DEEP_WORKLOAD: &str = include_str!("../../../hack/crds/deepworkload.yaml");
const ANNOTATED_WORKLOAD: &str = include_str!("../../../hack/crds/annotatedworkload.yaml");
const CLUSTER_WORKLOAD: &str = include_str!("../../../hack/crds/clusterworkload.yaml");
const ESTABLISHED_TIMEOUT: Duration = Duration::from_secs(60);
const FIELD_MANAGER: &str = "reloader-tests";

/// A set of CRDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Crd {
    /// `argoproj.io/v1alpha1` `Rollout`, the upstream CRD of the pinned release.
    ArgoRollouts,
    /// `apps.openshift.io/v1` `DeploymentConfig` (status and scale subresources).
    DeploymentConfig,
    /// `secrets-store.csi.x-k8s.io/v1` `SecretProviderClass` and `SecretProviderClassPodStatus`.
    SecretProviderClass,
    /// `apps.kruise.io/v1alpha1` `CloneSet`, the upstream CRD of the pinned OpenKruise release; pod
    /// template at `/spec/template`.
    OpenKruiseCloneSet,
    /// `keda.sh/v1alpha1` `ScaledJob`, the upstream CRD of the pinned KEDA release (about 670 KB:
    /// the whole Job template's schema); pod template at `/spec/jobTargetRef/template`.
    KedaScaledJob,
    /// `example.reloader.dev/v1` `DeepWorkload`, made up: pod template at
    /// `/spec/runtime/workers/podTemplate`.
    DeepWorkload,
    /// `example.reloader.dev/v1` `AnnotatedWorkload`, made up: no pod template, only a map of pod
    /// annotations at `/spec/podAnnotations` (and `/spec/image`).
    AnnotatedWorkload,
    /// `example.reloader.dev/v1` `ClusterWorkload`, made up and cluster-scoped: pod template at
    /// `/spec/template`.
    ClusterWorkload,
}

impl Crd {
    pub const ALL: [Crd; 8] = [
        Crd::ArgoRollouts,
        Crd::DeploymentConfig,
        Crd::SecretProviderClass,
        Crd::OpenKruiseCloneSet,
        Crd::KedaScaledJob,
        Crd::DeepWorkload,
        Crd::AnnotatedWorkload,
        Crd::ClusterWorkload,
    ];

    /// The kinds this set defines, to build dynamic APIs with (`Api::namespaced_with`).
    pub fn api_resources(self) -> Vec<ApiResource> {
        let kinds: &[(&str, &str, &str, &str)] = match self {
            Crd::ArgoRollouts => &[("argoproj.io", "v1alpha1", "Rollout", "rollouts")],
            Crd::DeploymentConfig => &[("apps.openshift.io", "v1", "DeploymentConfig", "deploymentconfigs")],
            Crd::SecretProviderClass => &[
                ("secrets-store.csi.x-k8s.io", "v1", "SecretProviderClass", "secretproviderclasses"),
                (
                    "secrets-store.csi.x-k8s.io",
                    "v1",
                    "SecretProviderClassPodStatus",
                    "secretproviderclasspodstatuses",
                ),
            ],
            Crd::OpenKruiseCloneSet => &[("apps.kruise.io", "v1alpha1", "CloneSet", "clonesets")],
            Crd::KedaScaledJob => &[("keda.sh", "v1alpha1", "ScaledJob", "scaledjobs")],
            Crd::DeepWorkload => &[("example.reloader.dev", "v1", "DeepWorkload", "deepworkloads")],
            Crd::AnnotatedWorkload => {
                &[("example.reloader.dev", "v1", "AnnotatedWorkload", "annotatedworkloads")]
            }
            Crd::ClusterWorkload => &[("example.reloader.dev", "v1", "ClusterWorkload", "clusterworkloads")],
        };
        kinds
            .iter()
            .map(|(group, version, kind, plural)| {
                ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
            })
            .collect()
    }

    /// The CRD manifests of this set, parsed.
    pub fn definitions(self, plane: &ControlPlane) -> Result<Vec<CustomResourceDefinition>, PlaneError> {
        match self {
            Crd::ArgoRollouts => cached(&plane.binaries().rollout_crd),
            Crd::OpenKruiseCloneSet => cached(&plane.binaries().cloneset_crd),
            Crd::KedaScaledJob => cached(&plane.binaries().scaledjob_crd),
            Crd::DeploymentConfig => parse(DEPLOYMENT_CONFIG, "hack/crds/deploymentconfig.yaml"),
            Crd::SecretProviderClass => {
                let mut definitions = parse(SECRET_PROVIDER_CLASS, "hack/crds/secretproviderclass.yaml")?;
                definitions.extend(parse(
                    SECRET_PROVIDER_CLASS_POD_STATUS,
                    "hack/crds/secretproviderclasspodstatus.yaml",
                )?);
                Ok(definitions)
            }
            Crd::DeepWorkload => parse(DEEP_WORKLOAD, "hack/crds/deepworkload.yaml"),
            Crd::AnnotatedWorkload => parse(ANNOTATED_WORKLOAD, "hack/crds/annotatedworkload.yaml"),
            Crd::ClusterWorkload => parse(CLUSTER_WORKLOAD, "hack/crds/clusterworkload.yaml"),
        }
    }
}

/// An upstream CRD that hack/build copied out of its Go module into the cache.
fn cached(path: &Path) -> Result<Vec<CustomResourceDefinition>, PlaneError> {
    let yaml = std::fs::read_to_string(path).map_err(|source| PlaneError::Io {
        context: format!("reading the CRD {} (hack/build crds writes it)", path.display()),
        source,
    })?;
    parse(&yaml, &path.display().to_string())
}

fn parse(yaml: &str, source: &str) -> Result<Vec<CustomResourceDefinition>, PlaneError> {
    serde_saphyr::from_multiple(yaml)
        .map_err(|error| PlaneError::Manifest { what: source.to_owned(), detail: error.to_string() })
}

impl ControlPlane {
    /// Installs the CRD sets (server-side apply, so concurrent tests may install the same ones)
    /// and waits until each is Established.
    pub async fn install_crds(&self, crds: &[Crd]) -> Result<(), PlaneError> {
        let api: Api<CustomResourceDefinition> = Api::all(self.client());
        let mut names = Vec::new();
        for crd in crds {
            for definition in crd.definitions(self)? {
                let name = definition.metadata.name.clone().unwrap_or_default();
                api.patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&definition))
                    .await?;
                names.push(name);
            }
        }
        for name in names {
            wait_until(&format!("CRD {name} to be Established"), ESTABLISHED_TIMEOUT, || async {
                let definition = api.get(&name).await?;
                let established =
                    definition.status.and_then(|status| status.conditions).is_some_and(|conditions| {
                        conditions.iter().any(|c| c.type_ == "Established" && c.status == "True")
                    });
                if established { Ok(()) } else { Err(NotYet::because("not Established")) }
            })
            .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        JSONSchemaProps, JSONSchemaPropsOrBool,
    };

    use super::*;

    #[test]
    fn our_own_definitions_parse() {
        let deployment_config = parse(DEPLOYMENT_CONFIG, "dc").unwrap();
        assert_eq!(deployment_config.len(), 1);
        let spec = &deployment_config[0].spec;
        assert_eq!(spec.group, "apps.openshift.io");
        assert_eq!(spec.names.kind, "DeploymentConfig");
        let subresources = spec.versions[0].subresources.as_ref().unwrap();
        assert!(subresources.status.is_some());
        assert_eq!(subresources.scale.as_ref().unwrap().spec_replicas_path, ".spec.replicas");

        for (yaml, kind) in [
            (SECRET_PROVIDER_CLASS, "SecretProviderClass"),
            (SECRET_PROVIDER_CLASS_POD_STATUS, "SecretProviderClassPodStatus"),
        ] {
            let definitions = parse(yaml, kind).unwrap();
            assert_eq!(definitions[0].spec.names.kind, kind);
            assert_eq!(definitions[0].spec.group, "secrets-store.csi.x-k8s.io");
        }
    }

    #[test]
    fn the_made_up_workload_kinds_parse_with_their_scope() {
        for (crd, yaml, kind, plural, scope) in [
            (Crd::DeepWorkload, DEEP_WORKLOAD, "DeepWorkload", "deepworkloads", "Namespaced"),
            (
                Crd::AnnotatedWorkload,
                ANNOTATED_WORKLOAD,
                "AnnotatedWorkload",
                "annotatedworkloads",
                "Namespaced",
            ),
            (Crd::ClusterWorkload, CLUSTER_WORKLOAD, "ClusterWorkload", "clusterworkloads", "Cluster"),
        ] {
            let [definition] = <[_; 1]>::try_from(parse(yaml, kind).unwrap()).unwrap();
            let spec = &definition.spec;
            assert_eq!(spec.group, "example.reloader.dev", "{kind}");
            assert_eq!((spec.names.kind.as_str(), spec.names.plural.as_str()), (kind, plural));
            assert_eq!(spec.scope, scope, "{kind}");
            assert_eq!(
                definition.metadata.name.as_deref(),
                Some(format!("{plural}.example.reloader.dev").as_str())
            );
            assert_eq!(spec.versions.len(), 1);
            assert_eq!(spec.versions[0].name, "v1");
            let [resource] = <[_; 1]>::try_from(crd.api_resources()).unwrap();
            assert_eq!(
                (resource.api_version.as_str(), resource.kind.as_str()),
                ("example.reloader.dev/v1", kind)
            );
            assert_eq!(resource.plural, plural);
        }
    }

    /// The schema property at `path` (a list of property names) of a definition's only version.
    fn property(definition: &CustomResourceDefinition, path: &[&str]) -> JSONSchemaProps {
        let schema = definition.spec.versions[0].schema.as_ref().unwrap();
        path.iter().fold(schema.open_api_v3_schema.clone().unwrap(), |props, name| {
            props.properties.unwrap().remove(*name).unwrap_or_else(|| panic!("no property {name}"))
        })
    }

    #[test]
    fn the_made_up_pod_templates_accept_any_pod_template() {
        let [deep] = <[_; 1]>::try_from(parse(DEEP_WORKLOAD, "deep").unwrap()).unwrap();
        let template = property(&deep, &["spec", "runtime", "workers", "podTemplate"]);
        assert_eq!(template.x_kubernetes_preserve_unknown_fields, Some(true));
        let replicas = property(&deep, &["spec", "runtime", "workers", "replicas"]);
        assert_eq!(replicas.type_.as_deref(), Some("integer"));

        let [cluster] = <[_; 1]>::try_from(parse(CLUSTER_WORKLOAD, "cluster").unwrap()).unwrap();
        let template = property(&cluster, &["spec", "template"]);
        assert_eq!(template.x_kubernetes_preserve_unknown_fields, Some(true));

        let [annotated] = <[_; 1]>::try_from(parse(ANNOTATED_WORKLOAD, "annotated").unwrap()).unwrap();
        let annotations = property(&annotated, &["spec", "podAnnotations"]);
        assert_eq!(annotations.type_.as_deref(), Some("object"));
        match annotations.additional_properties {
            Some(JSONSchemaPropsOrBool::Schema(values)) => {
                assert_eq!(values.type_.as_deref(), Some("string"))
            }
            other => panic!("podAnnotations must be a map of strings, got {other:?}"),
        }
        assert_eq!(property(&annotated, &["spec", "image"]).type_.as_deref(), Some("string"));
    }

    /// controller-gen's files (OpenKruise's, KEDA's) open with a document marker.
    #[test]
    fn a_leading_document_marker_is_one_definition() {
        let definitions = parse(&format!("---\n{DEEP_WORKLOAD}"), "marked").unwrap();
        assert_eq!(definitions.len(), 1);
    }

    #[test]
    fn api_resources_match_the_definitions() {
        let resources = Crd::SecretProviderClass.api_resources();
        assert_eq!(resources.len(), 2);
        assert_eq!(resources[1].plural, "secretproviderclasspodstatuses");
        assert_eq!(resources[1].api_version, "secrets-store.csi.x-k8s.io/v1");
        assert_eq!(Crd::ArgoRollouts.api_resources()[0].api_version, "argoproj.io/v1alpha1");
        assert_eq!(Crd::OpenKruiseCloneSet.api_resources()[0].api_version, "apps.kruise.io/v1alpha1");
        assert_eq!(Crd::KedaScaledJob.api_resources()[0].plural, "scaledjobs");
        assert_eq!(Crd::KedaScaledJob.api_resources()[0].api_version, "keda.sh/v1alpha1");
    }
}
