//! The admission webhook's TLS material for tests: a CA and a serving certificate for
//! 127.0.0.1 signed by it, written as PEM files, and the flags that serve the webhook with them.

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
