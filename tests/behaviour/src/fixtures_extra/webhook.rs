//! The admission webhook's TLS material for tests: a CA and a serving certificate for
//! 127.0.0.1 signed by it, written as PEM files, and the flags that serve the webhook with them;
//! and a client CA with the certificate the API server presents to the webhook
//! ([`ApiServerClientCertificate`], docs/security.md).

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};

/// PEM files of a serving certificate, and its CA; the files live as long as this value.
pub struct WebhookCertificates {
    _dir: tempfile::TempDir,
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

impl WebhookCertificates {
    /// A new CA, and a certificate for `localhost` and 127.0.0.1 signed by it.
    pub fn generate() -> Self {
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
        WebhookCertificates {
            _dir: dir,
            cert: cert_path,
            key: key_path,
            ca_pem: ca_cert.pem(),
            cert_pem,
            key_pem,
        }
    }

    /// The reloader flags for `namespace` with the webhook on 127.0.0.1:`port`.
    pub fn reloader_args(&self, namespace: &str, port: u16) -> Vec<String> {
        vec![
            format!("--namespaces={namespace}"),
            "--admission-webhook".into(),
            format!("--webhook-addr=127.0.0.1:{port}"),
            format!("--webhook-tls-cert={}", self.cert.display()),
            format!("--webhook-tls-key={}", self.key.display()),
        ]
    }
}

/// A CA, a client certificate it signed for the API server, and the admission configuration
/// that has kube-apiserver present it to every webhook (`--admission-control-config-file`).
pub struct ApiServerClientCertificate {
    dir: tempfile::TempDir,
    /// The CA bundle reloader's `--webhook-client-ca` names.
    pub ca: PathBuf,
    /// A client certificate and key signed by another CA: what a stranger could present.
    pub stranger_pem: String,
    /// The API server's own client certificate and key (PEM), for calls made as it would.
    pub apiserver_pem: String,
}

impl ApiServerClientCertificate {
    pub fn generate() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (ca_pem, client_pem, client_key) = client_chain("kube-apiserver");
        let (_, stranger_cert, stranger_key) = client_chain("someone");
        let write = |name: &str, contents: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, contents).unwrap();
            path
        };
        let ca = write("client-ca.crt", &ca_pem);
        let client = write("apiserver-client.crt", &client_pem);
        let key = write("apiserver-client.key", &client_key);
        // '*' is the kubeconfig entry every webhook without a more specific one uses.
        let kubeconfig = [
            "apiVersion: v1",
            "kind: Config",
            "users:",
            "- name: '*'",
            "  user:",
            &format!("    client-certificate: {}", client.display()),
            &format!("    client-key: {}", key.display()),
        ];
        let kubeconfig = write("admission-kubeconfig.yaml", &kubeconfig.join("\n"));
        let configuration = [
            "apiVersion: apiserver.config.k8s.io/v1",
            "kind: AdmissionConfiguration",
            "plugins:",
            "- name: MutatingAdmissionWebhook",
            "  configuration:",
            "    apiVersion: apiserver.config.k8s.io/v1",
            "    kind: WebhookAdmissionConfiguration",
            &format!("    kubeConfigFile: {}", kubeconfig.display()),
        ];
        write("admission-configuration.yaml", &configuration.join("\n"));
        ApiServerClientCertificate {
            dir,
            ca,
            stranger_pem: format!("{stranger_cert}{stranger_key}"),
            apiserver_pem: format!("{client_pem}{client_key}"),
        }
    }

    /// The kube-apiserver flag that makes it present the client certificate.
    pub fn apiserver_args(&self) -> Vec<String> {
        vec![format!(
            "--admission-control-config-file={}",
            self.dir.path().join("admission-configuration.yaml").display()
        )]
    }
}

/// A new CA and a client certificate with common name `name` it signed: (CA PEM, certificate
/// PEM, key PEM).
fn client_chain(name: &str) -> (String, String, String) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, format!("{name} client CA"));
    let ca_pem = ca_params.self_signed(&ca_key).unwrap().pem();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, name);
    params.extended_key_usages.push(rcgen::ExtendedKeyUsagePurpose::ClientAuth);
    let cert = params.signed_by(&key, &issuer).unwrap();
    (ca_pem, cert.pem(), key.serialize_pem())
}
