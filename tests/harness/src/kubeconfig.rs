//! Kubeconfig files derived from the plane's admin kubeconfig: another identity (a
//! ServiceAccount with a real token), another server address (a proxy), or both.

use std::path::{Path, PathBuf};

use kube::config::{AuthInfo, Kubeconfig};

use crate::credentials::write_private;
use crate::{ControlPlane, PlaneError};

/// A kubeconfig in a private temporary directory, removed on drop.
#[derive(Debug)]
pub struct KubeconfigFile {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl KubeconfigFile {
    /// Authenticates as ServiceAccount `namespace/name` (created when missing) with a token from
    /// the TokenRequest API; `namespace` is the default namespace.
    pub async fn for_service_account(
        plane: &ControlPlane,
        namespace: &str,
        name: &str,
    ) -> Result<Self, PlaneError> {
        Self::service_account(plane, namespace, name, None).await
    }

    /// As [`Self::for_service_account`], talking to `server` (a proxy in front of the plane).
    pub async fn for_service_account_via(
        plane: &ControlPlane,
        namespace: &str,
        name: &str,
        server: &str,
    ) -> Result<Self, PlaneError> {
        Self::service_account(plane, namespace, name, Some(server)).await
    }

    async fn service_account(
        plane: &ControlPlane,
        namespace: &str,
        name: &str,
        server: Option<&str>,
    ) -> Result<Self, PlaneError> {
        let config = plane.service_account_config(namespace, name).await?;
        let auth = AuthInfo { token: config.auth_info.token.clone(), ..AuthInfo::default() };
        Self::derive(plane, Some(auth), server, Some(namespace))
    }

    /// The admin identity, talking to `server` instead of the plane's own address.
    pub fn with_server(plane: &ControlPlane, server: &str) -> Result<Self, PlaneError> {
        Self::derive(plane, None, Some(server), None)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn derive(
        plane: &ControlPlane,
        auth: Option<AuthInfo>,
        server: Option<&str>,
        namespace: Option<&str>,
    ) -> Result<Self, PlaneError> {
        let mut kubeconfig = Kubeconfig::read_from(plane.kubeconfig_path())?;
        if let Some(auth) = auth {
            for named in &mut kubeconfig.auth_infos {
                named.auth_info = Some(auth.clone());
            }
        }
        if let Some(server) = server {
            for named in &mut kubeconfig.clusters {
                if let Some(cluster) = named.cluster.as_mut() {
                    cluster.server = Some(server.to_owned());
                }
            }
        }
        if let Some(namespace) = namespace {
            for named in &mut kubeconfig.contexts {
                if let Some(context) = named.context.as_mut() {
                    context.namespace = Some(namespace.to_owned());
                }
            }
        }
        let text = serde_json::to_string(&kubeconfig).map_err(|error| PlaneError::Manifest {
            what: "a derived kubeconfig".into(),
            detail: error.to_string(),
        })?;
        let dir = tempfile::Builder::new()
            .prefix("kubeconfig-")
            .tempdir()
            .map_err(|source| PlaneError::Io { context: "creating a kubeconfig directory".into(), source })?;
        let path = dir.path().join("kubeconfig");
        write_private(&path, &text)?;
        Ok(Self { path, _dir: dir })
    }
}
