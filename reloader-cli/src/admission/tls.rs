//! The webhook's serving certificate: read from the mounted PEM files, and read again when they
//! change (cert-manager renewals, a Secret volume swapping its `..data` link), with no restart.
//!
//! Handshakes take whatever certificate is current through [`ResolvesServerCert`]; a poll of
//! the files' metadata swaps in a new one. A pair that does not load (a renewal caught half
//! written, a key that does not match) leaves the previous certificate in service and is tried
//! again at the next poll.
//!
//! With `--webhook-client-ca`, a client must present a certificate that bundle signed (the API
//! server, through its admission kubeconfig); the bundle is polled and reloaded the same way.

use std::fs::Metadata;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use rustls::ServerConfig;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::UnixTime;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};

#[derive(Debug, thiserror::Error)]
pub(crate) enum CertificateError {
    #[error("reading {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{} holds no PEM certificate", .0.display())]
    NoCertificate(PathBuf),
    #[error("{}: {detail}", path.display())]
    Pem { path: PathBuf, detail: String },
    #[error("the key in {} does not go with the certificate in {}: {source}", key.display(), cert.display())]
    Key { cert: PathBuf, key: PathBuf, source: rustls::Error },
    #[error("{}: not a usable client CA bundle: {detail}", path.display())]
    ClientCa { path: PathBuf, detail: String },
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// What identifies the version of a file on disk without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp {
    device: u64,
    inode: u64,
    len: u64,
    modified: Option<SystemTime>,
}

impl FileStamp {
    fn of(metadata: &Metadata) -> Self {
        let (device, inode) = file_id(metadata);
        FileStamp { device, inode, len: metadata.len(), modified: metadata.modified().ok() }
    }
}

#[cfg(unix)]
fn file_id(metadata: &Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt as _;
    (metadata.dev(), metadata.ino())
}

/// Windows' file ids are not in stable std: the length and time alone tell a new version there.
#[cfg(not(unix))]
fn file_id(_: &Metadata) -> (u64, u64) {
    (0, 0)
}

/// The certificate chain and key in service, and the files they come from.
#[derive(Debug)]
pub(crate) struct ReloadingCertificate {
    cert_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
    /// The stamps of the files as last loaded (or last found unloadable, so a broken pair is
    /// reported once per change rather than at every poll).
    loaded: Mutex<(FileStamp, FileStamp)>,
}

impl ReloadingCertificate {
    /// Loads the pair; fails if it cannot be served.
    pub(crate) fn load(
        cert_path: &Path,
        key_path: &Path,
        provider: Arc<CryptoProvider>,
    ) -> Result<Self, CertificateError> {
        let stamps = (stamp(cert_path)?, stamp(key_path)?);
        let certified = load_pair(cert_path, key_path, &provider)?;
        Ok(ReloadingCertificate {
            cert_path: cert_path.to_path_buf(),
            key_path: key_path.to_path_buf(),
            provider,
            current: RwLock::new(Arc::new(certified)),
            loaded: Mutex::new(stamps),
        })
    }

    /// Loads the pair again if either file changed since the last attempt. `Ok(true)`: a new
    /// certificate is in service; `Ok(false)`: nothing changed; `Err`: the files changed but do
    /// not load, and the previous certificate stays in service.
    pub(crate) fn refresh(&self) -> Result<bool, CertificateError> {
        let stamps = (stamp(&self.cert_path)?, stamp(&self.key_path)?);
        {
            let mut loaded = self.loaded.lock().expect("stamp lock");
            if *loaded == stamps {
                return Ok(false);
            }
            *loaded = stamps;
        }
        let certified = load_pair(&self.cert_path, &self.key_path, &self.provider)?;
        *self.current.write().expect("certificate lock") = Arc::new(certified);
        Ok(true)
    }

    /// A server configuration that serves whatever certificate is current, HTTP/1.1 only, and
    /// with `client_ca` only to clients presenting a certificate it signed.
    pub(crate) fn server_config(
        self: &Arc<Self>,
        client_ca: Option<Arc<ReloadingClientCa>>,
    ) -> Result<ServerConfig, CertificateError> {
        let builder = ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()?;
        let builder = match client_ca {
            Some(client_ca) => builder.with_client_cert_verifier(client_ca),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}

impl ResolvesServerCert for ReloadingCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().expect("certificate lock").clone())
    }
}

/// The CA bundle client certificates must chain to, and its file.
#[derive(Debug)]
pub(crate) struct ReloadingClientCa {
    path: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<dyn ClientCertVerifier>>,
    loaded: Mutex<FileStamp>,
}

impl ReloadingClientCa {
    pub(crate) fn load(path: &Path, provider: Arc<CryptoProvider>) -> Result<Self, CertificateError> {
        let stamp = stamp(path)?;
        let verifier = load_client_ca(path, &provider)?;
        Ok(ReloadingClientCa {
            path: path.to_path_buf(),
            provider,
            current: RwLock::new(verifier),
            loaded: Mutex::new(stamp),
        })
    }

    /// As [`ReloadingCertificate::refresh`]: a bundle that does not load leaves the previous one.
    pub(crate) fn refresh(&self) -> Result<bool, CertificateError> {
        let stamp = stamp(&self.path)?;
        {
            let mut loaded = self.loaded.lock().expect("stamp lock");
            if *loaded == stamp {
                return Ok(false);
            }
            *loaded = stamp;
        }
        let verifier = load_client_ca(&self.path, &self.provider)?;
        *self.current.write().expect("client CA lock") = verifier;
        Ok(true)
    }

    fn verifier(&self) -> Arc<dyn ClientCertVerifier> {
        self.current.read().expect("client CA lock").clone()
    }
}

/// Every handshake asks the bundle in service now.
impl ClientCertVerifier for ReloadingClientCa {
    fn client_auth_mandatory(&self) -> bool {
        true
    }

    /// No hints: the API server sends its one client certificate whatever the hints say, and
    /// hints borrowed from a bundle that may be swapped cannot be returned by reference.
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.verifier().verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.verifier().supported_verify_schemes()
    }
}

fn load_client_ca(
    path: &Path,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, CertificateError> {
    let pem =
        std::fs::read(path).map_err(|source| CertificateError::Read { path: path.to_path_buf(), source })?;
    let invalid = |detail: String| CertificateError::ClientCa { path: path.to_path_buf(), detail };
    let mut roots = RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(&pem) {
        let certificate = certificate.map_err(|e| invalid(e.to_string()))?;
        roots.add(certificate).map_err(|e| invalid(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(CertificateError::NoCertificate(path.to_path_buf()));
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| invalid(e.to_string()))
}

fn stamp(path: &Path) -> Result<FileStamp, CertificateError> {
    // `metadata` follows links: a Secret volume's file is a link into its current `..data`.
    std::fs::metadata(path)
        .map(|m| FileStamp::of(&m))
        .map_err(|source| CertificateError::Read { path: path.to_path_buf(), source })
}

fn load_pair(
    cert_path: &Path,
    key_path: &Path,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, CertificateError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| CertificateError::Read { path: path.to_path_buf(), source })
    };
    let pem_error = |path: &Path, e: rustls::pki_types::pem::Error| CertificateError::Pem {
        path: path.to_path_buf(),
        detail: e.to_string(),
    };
    let cert_pem = read(cert_path)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(cert_path, e))?;
    if chain.is_empty() {
        return Err(CertificateError::NoCertificate(cert_path.to_path_buf()));
    }
    let key = PrivateKeyDer::from_pem_slice(&read(key_path)?).map_err(|e| pem_error(key_path, e))?;
    CertifiedKey::from_der(chain, key, provider).map_err(|source| CertificateError::Key {
        cert: cert_path.to_path_buf(),
        key: key_path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests;
