//! The Helm chart `charts/reloader` on the plane: render it with `helm`, dry-run or apply its
//! objects, and run the real binary as the chart's Deployment would, as the chart's
//! ServiceAccount with a real token, so the chart's RBAC is what the binary gets.
//!
//! ```no_run
//! # async fn example(plane: &reloader_harness::ControlPlane) -> Result<(), reloader_harness::PlaneError> {
//! use reloader_tests::chart::{Helm, Installation, release_name};
//! let release = release_name();
//! let manifest = Helm::locate()?.template(&release, "ops", &serde_json::json!({}))?;
//! let installed = Installation::install(plane, &manifest, None).await?;
//! let pods = installed.start(plane).await?;
//! # Ok(()) }
//! ```

mod apply;
pub mod exercise;
mod helm;
mod manifest;
pub mod probe;
mod promtool;

use std::sync::atomic::{AtomicUsize, Ordering};

use kube::api::{Api, DeleteParams, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};

pub use apply::{ApplyMode, apply};
pub use helm::Helm;
pub use manifest::{Controller, Cut, Manifest, RoleRef, RuleRemoval};
pub use promtool::Promtool;

use reloader_harness::{ControlPlane, KubeconfigFile, PlaneError, Reloader};

/// A release name unused on this plane (ClusterRoles are named after it).
/// What `helm install` finds the plane's API server serving, so the chart renders its write fence
/// as it would there (`helm template` alone assumes no ValidatingAdmissionPolicy).
pub const WRITE_FENCE_API: &str = "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy";

pub fn release_name() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("rel{}-{}", std::process::id() % 10_000, NEXT.fetch_add(1, Ordering::Relaxed))
}

/// A release's RBAC objects applied for real, and a kubeconfig for its ServiceAccount.
#[derive(Debug)]
pub struct Installation {
    manifest: Manifest,
    rbac: Manifest,
    kubeconfig: KubeconfigFile,
}

impl Installation {
    /// Applies the ServiceAccount and (Cluster)Roles and bindings of `manifest` as the admin,
    /// with `removal` cut out of its role, and writes a kubeconfig with a fresh token of the
    /// ServiceAccount the chart's Deployment runs as.
    pub async fn install(
        plane: &ControlPlane,
        manifest: &Manifest,
        removal: Option<&RuleRemoval>,
    ) -> Result<Self, PlaneError> {
        let rbac = match removal {
            Some(removal) => manifest.rbac().without(removal),
            None => manifest.rbac(),
        };
        apply(&plane.client(), &rbac, ApplyMode::Persist).await?;
        let controller = manifest.controller()?;
        let kubeconfig =
            KubeconfigFile::for_service_account(plane, &controller.namespace, &controller.service_account)
                .await?;
        Ok(Self { manifest: manifest.clone(), rbac, kubeconfig })
    }

    /// The kubeconfig of the chart's ServiceAccount: its own token, as a thief would have it.
    pub fn kubeconfig_path(&self) -> &std::path::Path {
        self.kubeconfig.path()
    }

    /// Sends the API traffic of the replicas started from now on through `server` (a proxy in
    /// front of kube-apiserver), still as the chart's ServiceAccount.
    pub async fn route_through(&mut self, plane: &ControlPlane, server: &str) -> Result<(), PlaneError> {
        let controller = self.manifest.controller()?;
        self.kubeconfig = KubeconfigFile::for_service_account_via(
            plane,
            &controller.namespace,
            &controller.service_account,
            server,
        )
        .await?;
        Ok(())
    }

    /// Starts one `reloader` process per replica of the chart's Deployment, with exactly its
    /// args and environment, as its ServiceAccount. Does not wait for readiness.
    pub async fn start(&self, plane: &ControlPlane) -> Result<Vec<Reloader>, PlaneError> {
        let controller = self.manifest.controller()?;
        let mut pods = Vec::with_capacity(controller.replicas);
        for index in 0..controller.replicas {
            let mut builder = Reloader::builder(plane)
                .kubeconfig(self.kubeconfig.path())
                .name(controller.pod_name(index))
                .args(controller.args())
                .no_wait();
            for (key, value) in controller.env(index)? {
                builder = builder.env(key, value);
            }
            pods.push(builder.start().await?);
        }
        Ok(pods)
    }

    /// Deletes the cluster-scoped objects (namespaced ones go with their namespace).
    pub async fn uninstall(&self, plane: &ControlPlane) {
        for object in self.rbac.objects() {
            let kind = object["kind"].as_str().unwrap_or_default();
            let group = match kind {
                "ClusterRole" | "ClusterRoleBinding" => "rbac.authorization.k8s.io",
                "ValidatingAdmissionPolicy" | "ValidatingAdmissionPolicyBinding" => {
                    "admissionregistration.k8s.io"
                }
                _ => continue,
            };
            let gvk = GroupVersionKind::gvk(group, "v1", kind);
            let api: Api<DynamicObject> = Api::all_with(plane.client(), &ApiResource::from_gvk(&gvk));
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            if let Err(error) = api.delete(name, &DeleteParams::default()).await {
                tracing::warn!(%error, kind, name, "could not delete a cluster-scoped chart object");
            }
        }
    }
}
