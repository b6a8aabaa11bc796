//! The admission webhook's test plumbing, shared by tests/admission.rs, tests/one_rollout.rs and
//! tests/kinds/declared.rs: certificates for 127.0.0.1, the reloader command line, and a
//! MutatingWebhookConfiguration that is deleted when dropped.

use base64::Engine as _;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams, PostParams};
use kube::core::ApiResource;
use kube::{Client, Config};
use reloader_harness::{ControlPlane, NotYet, Reloader};
use reloader_tests::fixtures_extra::WebhookCertificates;
use serde_json::json;

pub fn certificates() -> WebhookCertificates {
    WebhookCertificates::generate()
}

/// Puts `contents` at `path` the way a Secret volume does: written beside, renamed over.
pub fn swap_file(path: &std::path::Path, contents: &str) {
    let staging = path.with_extension("new");
    std::fs::write(&staging, contents).unwrap();
    std::fs::rename(&staging, path).unwrap();
}

/// `GET /healthz` of the webhook over a new connection that trusts only `ca_pem`.
pub async fn healthz(port: u16, ca_pem: &str) -> Result<u16, NotYet> {
    let client = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes())?)
        .build()?;
    let response = client.get(format!("https://127.0.0.1:{port}/healthz")).send().await?;
    Ok(response.status().as_u16())
}

/// The reloader command line for `namespace` with the webhook on `port`.
pub fn webhook_args(namespace: &str, port: u16, certs: &WebhookCertificates) -> Vec<String> {
    certs.reloader_args(namespace, port)
}

pub async fn start_reloader(plane: &ControlPlane, name: &str, args: &[String]) -> Reloader {
    Reloader::builder(plane).name(name).args(args.iter().cloned()).start().await.expect("reloader starts")
}

/// A cluster-scoped MutatingWebhookConfiguration, deleted when dropped (also when the test
/// fails), so no other test's writes are ever sent to a webhook that is gone.
pub struct Registration {
    /// `None` once deleted.
    name: Option<String>,
    admin: Config,
    /// A ValidatingWebhookConfiguration (the Job fence), not a mutating one.
    validating: bool,
}

impl Registration {
    /// Sends CREATE and UPDATE of Deployments in `namespace` (only) to `https://127.0.0.1:<port>/mutate`.
    pub async fn create(plane: &ControlPlane, namespace: &str, port: u16, ca_pem: &str) -> Registration {
        Self::create_for(plane, namespace, port, ca_pem, &ApiResource::erase::<Deployment>(&())).await
    }

    /// [`Registration::create`] for the objects of `resource` instead (a declared kind's).
    pub async fn create_for(
        plane: &ControlPlane,
        namespace: &str,
        port: u16,
        ca_pem: &str,
        resource: &ApiResource,
    ) -> Registration {
        let name = format!("reloader-{namespace}");
        let configuration: MutatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": name},
            "webhooks": [{
                "name": "workloads.reloader.stakater.com",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Ignore",
                "timeoutSeconds": 5,
                "reinvocationPolicy": "Never",
                "clientConfig": {
                    "url": format!("https://127.0.0.1:{port}/mutate"),
                    "caBundle": base64::engine::general_purpose::STANDARD.encode(ca_pem),
                },
                "rules": [{
                    "apiGroups": [resource.group], "apiVersions": [resource.version],
                    "resources": [resource.plural],
                    "operations": ["CREATE", "UPDATE"], "scope": "Namespaced",
                }],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            }],
        }))
        .unwrap();
        let api: Api<MutatingWebhookConfiguration> = Api::all(plane.client());
        api.create(&PostParams::default(), &configuration).await.expect("registering the webhook");
        Registration { name: Some(name), admin: plane.admin_config().clone(), validating: false }
    }

    /// The Job fence as the chart registers it (docs/security.md, "Jobs"): Job creations in
    /// `namespace` by `username` only go to `https://127.0.0.1:<port>/validate-jobs`, failing closed.
    pub async fn job_fence(
        plane: &ControlPlane,
        namespace: &str,
        port: u16,
        ca_pem: &str,
        username: &str,
    ) -> Registration {
        let name = format!("reloader-job-fence-{namespace}");
        let configuration: ValidatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": name},
            "webhooks": [{
                "name": "jobs.write-fence.reloader.stakater.com",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "timeoutSeconds": 5,
                "clientConfig": {
                    "url": format!("https://127.0.0.1:{port}/validate-jobs"),
                    "caBundle": base64::engine::general_purpose::STANDARD.encode(ca_pem),
                },
                "rules": [{
                    "apiGroups": ["batch"], "apiVersions": ["v1"], "resources": ["jobs"],
                    "operations": ["CREATE"], "scope": "Namespaced",
                }],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "matchConditions": [{"name": "created-by-reloader",
                    "expression": format!("request.userInfo.username == '{username}'")}],
            }],
        }))
        .unwrap();
        let api: Api<ValidatingWebhookConfiguration> = Api::all(plane.client());
        api.create(&PostParams::default(), &configuration).await.expect("registering the Job fence");
        Registration { name: Some(name), admin: plane.admin_config().clone(), validating: true }
    }

    pub async fn delete(mut self) {
        let Some(name) = self.name.take() else { return };
        unregister(self.admin.clone(), name, self.validating).await.expect("unregistering the webhook");
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let Some(name) = self.name.take() else { return };
        // Drop cannot await and the test's runtime may be gone: delete from a thread of its own.
        let (admin, validating) = (self.admin.clone(), self.validating);
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
            runtime.block_on(unregister(admin, name, validating)).ok()
        })
        .join();
    }
}

async fn unregister(admin: Config, name: String, validating: bool) -> Result<(), kube::Error> {
    let client = Client::try_from(admin)?;
    if validating {
        Api::<ValidatingWebhookConfiguration>::all(client).delete(&name, &DeleteParams::default()).await?;
    } else {
        Api::<MutatingWebhookConfiguration>::all(client).delete(&name, &DeleteParams::default()).await?;
    }
    Ok(())
}
