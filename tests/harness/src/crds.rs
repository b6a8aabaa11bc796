//! The CustomResourceDefinitions tests and the demo can install: Argo Rollouts (from its Go
//! module, via the cache), OpenShift's DeploymentConfig and the Secrets Store CSI driver's
//! classes (permissive ones of our own, in hack/crds/).

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
}

impl Crd {
    pub const ALL: [Crd; 3] = [Crd::ArgoRollouts, Crd::DeploymentConfig, Crd::SecretProviderClass];

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
            Crd::ArgoRollouts => {
                let path = &plane.binaries().rollout_crd;
                let yaml = std::fs::read_to_string(path).map_err(|source| PlaneError::Io {
                    context: format!(
                        "reading the Rollout CRD {} (hack/build crds writes it)",
                        path.display()
                    ),
                    source,
                })?;
                parse(&yaml, &path.display().to_string())
            }
            Crd::DeploymentConfig => parse(DEPLOYMENT_CONFIG, "hack/crds/deploymentconfig.yaml"),
            Crd::SecretProviderClass => {
                let mut definitions = parse(SECRET_PROVIDER_CLASS, "hack/crds/secretproviderclass.yaml")?;
                definitions.extend(parse(
                    SECRET_PROVIDER_CLASS_POD_STATUS,
                    "hack/crds/secretproviderclasspodstatus.yaml",
                )?);
                Ok(definitions)
            }
        }
    }
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
    fn api_resources_match_the_definitions() {
        let resources = Crd::SecretProviderClass.api_resources();
        assert_eq!(resources.len(), 2);
        assert_eq!(resources[1].plural, "secretproviderclasspodstatuses");
        assert_eq!(resources[1].api_version, "secrets-store.csi.x-k8s.io/v1");
        assert_eq!(Crd::ArgoRollouts.api_resources()[0].api_version, "argoproj.io/v1alpha1");
    }
}
