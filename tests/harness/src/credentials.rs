//! The plane's secrets: the admin bearer token, the service-account signing key pair, and the
//! admin kubeconfig. None of them is ever logged.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine;

use crate::PlaneError;

/// The user the admin token authenticates as; a member of `system:masters`.
pub const ADMIN_USER: &str = "reloader-admin";

/// Files holding the plane's credentials, all inside the plane's directory.
#[derive(Clone)]
pub struct Credentials {
    /// `--token-auth-file`: one line granting the admin token `system:masters`.
    pub token_file: PathBuf,
    /// Service-account token signing key (private, PEM) and its public half.
    pub service_account_key: PathBuf,
    pub service_account_public_key: PathBuf,
    admin_token: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("token_file", &self.token_file)
            .field("service_account_key", &self.service_account_key)
            .field("admin_token", &"<redacted>")
            .finish()
    }
}

impl Credentials {
    /// Generates a fresh admin token and RSA key pair under `dir`.
    pub fn generate(dir: &Path) -> Result<Self, PlaneError> {
        let admin_token = random_hex(32)?;
        let token_file = dir.join("tokens.csv");
        write_private(&token_file, &format!("{admin_token},{ADMIN_USER},{ADMIN_USER},\"system:masters\"\n"))?;

        let service_account_key = dir.join("service-account.key");
        let service_account_public_key = dir.join("service-account.pub");
        openssl(&["genrsa", "-out", path_str(&service_account_key)?, "2048"])?;
        openssl(&[
            "rsa",
            "-in",
            path_str(&service_account_key)?,
            "-pubout",
            "-out",
            path_str(&service_account_public_key)?,
        ])?;
        Ok(Self { token_file, service_account_key, service_account_public_key, admin_token })
    }

    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }
}

/// An admin kubeconfig for `server`, trusting the PEM bundle `ca_pem`.
pub fn admin_kubeconfig(server: &str, ca_pem: &[u8], token: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: reloader-dev
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: {ADMIN_USER}
  user:
    token: {token}
contexts:
- name: reloader-dev
  context:
    cluster: reloader-dev
    user: {ADMIN_USER}
    namespace: default
current-context: reloader-dev
"
    )
}

/// Writes a file readable only by its owner.
pub fn write_private(path: &Path, contents: &str) -> Result<(), PlaneError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let io_error = |source| PlaneError::Io { context: format!("writing {}", path.display()), source };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(io_error)?;
    file.write_all(contents.as_bytes()).map_err(io_error)
}

fn random_hex(bytes: usize) -> Result<String, PlaneError> {
    let mut buffer = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut buffer))
        .map_err(|source| PlaneError::Io { context: "reading /dev/urandom".into(), source })?;
    Ok(hex::encode(buffer))
}

fn openssl(args: &[&str]) -> Result<(), PlaneError> {
    let output = Command::new("openssl").args(args).output().map_err(|source| PlaneError::Io {
        context: "running openssl (needed to generate the service-account signing key)".into(),
        source,
    })?;
    if output.status.success() {
        Ok(())
    } else {
        Err(PlaneError::Command {
            command: format!("openssl {}", args.first().copied().unwrap_or_default()),
            detail: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        })
    }
}

fn path_str(path: &Path) -> Result<&str, PlaneError> {
    path.to_str().ok_or_else(|| PlaneError::Command {
        command: "openssl".into(),
        detail: format!("path is not UTF-8: {}", path.display()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_distinct_tokens_and_a_usable_key_pair() {
        let dir = tempfile::tempdir().unwrap();
        let first = Credentials::generate(dir.path()).unwrap();
        let token_line = std::fs::read_to_string(&first.token_file).unwrap();
        assert!(token_line.ends_with(",reloader-admin,reloader-admin,\"system:masters\"\n"));
        assert_eq!(first.admin_token().len(), 64);
        let public = std::fs::read_to_string(&first.service_account_public_key).unwrap();
        assert!(public.starts_with("-----BEGIN PUBLIC KEY-----"), "{public}");

        let other = tempfile::tempdir().unwrap();
        let second = Credentials::generate(other.path()).unwrap();
        assert_ne!(first.admin_token(), second.admin_token());
    }

    #[test]
    fn secrets_are_private_files() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let credentials = Credentials::generate(dir.path()).unwrap();
        let mode = std::fs::metadata(&credentials.token_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "token file mode {mode:o}");
    }

    #[test]
    fn kubeconfig_embeds_server_and_ca() {
        let kubeconfig = admin_kubeconfig("https://127.0.0.1:6443", b"PEM", "secret");
        assert!(kubeconfig.contains("server: https://127.0.0.1:6443\n"));
        assert!(kubeconfig.contains("certificate-authority-data: UEVN\n"));
        assert!(kubeconfig.contains("token: secret\n"));
    }
}
