//! The webhook's serving certificate: read from the mounted PEM files, and read again when they
//! change (cert-manager renewals, a Secret volume swapping its `..data` link), with no restart.
//!
//! Handshakes take whatever certificate is current through [`ResolvesServerCert`]; a poll of
//! the files' metadata swaps in a new one. A pair that does not load (a renewal caught half
//! written, a key that does not match) leaves the previous certificate in service and is tried
//! again at the next poll.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

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
        FileStamp {
            device: metadata.dev(),
            inode: metadata.ino(),
            len: metadata.len(),
            modified: metadata.modified().ok(),
        }
    }
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

    /// A server configuration that serves whatever certificate is current, HTTP/1.1 only.
    pub(crate) fn server_config(self: &Arc<Self>) -> Result<ServerConfig, CertificateError> {
        let mut config = ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}

impl ResolvesServerCert for ReloadingCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().expect("certificate lock").clone())
    }
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
