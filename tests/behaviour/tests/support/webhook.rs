//! The admission webhook's test plumbing, shared by tests/admission.rs and tests/one_rollout.rs:
//! certificates for 127.0.0.1, the reloader command line, and a MutatingWebhookConfiguration
//! that is deleted when dropped.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use base64::Engine as _;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, Config};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};
use reloader_harness::{ControlPlane, NotYet, Reloader};
use serde_json::json;

/// A CA and a serving certificate for 127.0.0.1 signed by it, written as PEM files.
pub struct Certificates {
    _dir: tempfile::TempDir,
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

pub fn certificates() -> Certificates {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "reloader admission test CA");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);

    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params.subject_alt_names.push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    params.distinguished_name.push(DnType::CommonName, "reloader admission webhook");
    let cert = params.signed_by(&key, &issuer).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let (cert_path, key_path) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let (cert_pem, key_pem) = (cert.pem(), key.serialize_pem());
    std::fs::write(&cert_path, &cert_pem).unwrap();
    std::fs::write(&key_path, &key_pem).unwrap();
    Certificates { _dir: dir, cert: cert_path, key: key_path, ca_pem: ca_cert.pem(), cert_pem, key_pem }
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
pub fn webhook_args(namespace: &str, port: u16, certs: &Certificates) -> Vec<String> {
    vec![
        format!("--namespaces={namespace}"),
        "--admission-webhook".into(),
        format!("--webhook-addr=127.0.0.1:{port}"),
        format!("--webhook-tls-cert={}", certs.cert.display()),
        format!("--webhook-tls-key={}", certs.key.display()),
    ]
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
}

impl Registration {
    /// Sends CREATE and UPDATE of Deployments in `namespace` (only) to `https://127.0.0.1:<port>/mutate`.
    pub async fn create(plane: &ControlPlane, namespace: &str, port: u16, ca_pem: &str) -> Registration {
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
                    "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"],
                    "operations": ["CREATE", "UPDATE"], "scope": "Namespaced",
                }],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            }],
        }))
        .unwrap();
        let api: Api<MutatingWebhookConfiguration> = Api::all(plane.client());
        api.create(&PostParams::default(), &configuration).await.expect("registering the webhook");
        Registration { name: Some(name), admin: plane.admin_config().clone() }
    }

    pub async fn delete(mut self) {
        let Some(name) = self.name.take() else { return };
        let api: Api<MutatingWebhookConfiguration> = Api::all(Client::try_from(self.admin.clone()).unwrap());
        api.delete(&name, &DeleteParams::default()).await.expect("unregistering the webhook");
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let Some(name) = self.name.take() else { return };
        // Drop cannot await and the test's runtime may be gone: delete from a thread of its own.
        let admin = self.admin.clone();
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
            runtime.block_on(async move {
                let api: Api<MutatingWebhookConfiguration> = Api::all(Client::try_from(admin).ok()?);
                api.delete(&name, &DeleteParams::default()).await.ok()
            })
        })
        .join();
    }
}
