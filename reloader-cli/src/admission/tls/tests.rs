use std::sync::Arc;

use rcgen::{CertifiedKey as Generated, generate_simple_self_signed};
use rustls::crypto::ring;

use super::*;

fn generate(name: &str) -> Generated<rcgen::KeyPair> {
    generate_simple_self_signed(vec![name.to_string()]).expect("a self-signed certificate")
}

/// Writes beside `path` and renames into place, as a Secret volume swaps its files.
fn replace(path: &Path, contents: String) {
    let staging = path.with_extension("new");
    std::fs::write(&staging, contents).unwrap();
    std::fs::rename(&staging, path).unwrap();
}

fn write_pair(dir: &Path, generated: &Generated<rcgen::KeyPair>) -> (PathBuf, PathBuf) {
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    replace(&cert, generated.cert.pem());
    replace(&key, generated.signing_key.serialize_pem());
    (cert, key)
}

fn served(certificate: &ReloadingCertificate) -> Vec<u8> {
    certificate.current.read().unwrap().end_entity_cert().unwrap().to_vec()
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

#[test]
fn serves_the_files_and_follows_their_changes() {
    let dir = tempfile::tempdir().unwrap();
    let first = generate("first.example");
    let (cert, key) = write_pair(dir.path(), &first);
    let certificate = Arc::new(ReloadingCertificate::load(&cert, &key, provider()).unwrap());
    assert_eq!(served(&certificate), first.cert.der().to_vec());
    assert!(!certificate.refresh().unwrap(), "unchanged files are not read again");
    certificate.server_config(None).expect("a server configuration");

    let second = generate("second.example");
    write_pair(dir.path(), &second);
    assert!(certificate.refresh().unwrap(), "a renewed pair is loaded");
    assert_eq!(served(&certificate), second.cert.der().to_vec());
    assert!(!certificate.refresh().unwrap());
}

#[test]
fn a_broken_renewal_keeps_the_previous_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let first = generate("first.example");
    let (cert, key) = write_pair(dir.path(), &first);
    let certificate = ReloadingCertificate::load(&cert, &key, provider()).unwrap();

    // Half a renewal: the new certificate is there, its key is not yet.
    let second = generate("second.example");
    replace(&cert, second.cert.pem());
    let error = certificate.refresh().unwrap_err();
    assert!(matches!(error, CertificateError::Key { .. }), "{error}");
    assert_eq!(served(&certificate), first.cert.der().to_vec(), "the old pair stays in service");
    assert!(!certificate.refresh().unwrap(), "a broken pair is reported once, not at every poll");

    // The key arrives: the new pair goes into service.
    replace(&key, second.signing_key.serialize_pem());
    assert!(certificate.refresh().unwrap());
    assert_eq!(served(&certificate), second.cert.der().to_vec());
}

#[test]
fn unusable_files_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let generated = generate("x.example");
    let (cert, key) = write_pair(dir.path(), &generated);
    let missing = dir.path().join("missing.crt");
    assert!(matches!(
        ReloadingCertificate::load(&missing, &key, provider()),
        Err(CertificateError::Read { .. })
    ));
    let not_pem = dir.path().join("empty.crt");
    std::fs::write(&not_pem, "not a certificate").unwrap();
    assert!(matches!(
        ReloadingCertificate::load(&not_pem, &key, provider()),
        Err(CertificateError::NoCertificate(_))
    ));
    let other = generate("y.example");
    let other_key = dir.path().join("other.key");
    std::fs::write(&other_key, other.signing_key.serialize_pem()).unwrap();
    let error = ReloadingCertificate::load(&cert, &other_key, provider()).unwrap_err();
    assert!(matches!(error, CertificateError::Key { .. }), "{error}");
    // The message names the files, never their contents.
    let message = error.to_string();
    assert!(message.contains("other.key") && !message.contains("PRIVATE KEY"), "{message}");
}

/// A CA and a client certificate it signed, as PEM and DER.
struct ClientPki {
    ca_pem: String,
    client: CertificateDer<'static>,
}

fn client_pki(name: &str) -> ClientPki {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, format!("{name} CA"));
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let issuer = Issuer::new(ca, ca_key);
    let mut client = CertificateParams::new(Vec::<String>::new()).unwrap();
    client.distinguished_name.push(DnType::CommonName, name);
    let client = client.signed_by(&KeyPair::generate().unwrap(), &issuer).unwrap();
    ClientPki { ca_pem, client: client.der().clone() }
}

#[test]
fn only_clients_the_ca_signed_pass_and_a_new_bundle_is_followed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("client-ca.crt");
    let (apiserver, stranger) = (client_pki("kube-apiserver"), client_pki("someone"));
    replace(&path, apiserver.ca_pem.clone());
    let ca = Arc::new(ReloadingClientCa::load(&path, provider()).unwrap());
    let verify = |pki: &ClientPki| ca.verify_client_cert(&pki.client, &[], UnixTime::now()).is_ok();
    assert!(ca.client_auth_mandatory(), "a client without a certificate is refused");
    assert!(verify(&apiserver));
    assert!(!verify(&stranger), "a certificate from another CA is refused");
    assert!(!ca.refresh().unwrap(), "an unchanged bundle is not read again");

    replace(&path, "not a certificate".into());
    assert!(ca.refresh().is_err(), "a broken bundle is reported");
    assert!(verify(&apiserver), "and the previous one stays in service");

    replace(&path, stranger.ca_pem.clone());
    assert!(ca.refresh().unwrap());
    assert!(verify(&stranger) && !verify(&apiserver), "the new bundle decides");

    std::fs::write(&path, "").unwrap();
    let error = ReloadingClientCa::load(&path, provider()).unwrap_err().to_string();
    assert!(error.contains("client-ca.crt"), "{error}");
}
