//! The real `reloader` binary as a test subject: started with chosen flags and environment
//! against the plane, its log kept in a file, its `/metrics` and `/readyz` reachable on a free
//! port, killed when dropped.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::ports::free_port;
use crate::process::Process;
use crate::wait::{NotYet, wait_until};
use crate::{ControlPlane, PlaneError};

/// The binary built by `cargo build -p reloader-cli` (`cargo test --workspace` builds it too).
pub fn reloader_binary() -> PathBuf {
    if let Ok(path) = std::env::var("RELOADER_BIN") {
        return PathBuf::from(path);
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("debug/reloader")
}

/// How to start one reloader process.
#[derive(Debug, Clone)]
pub struct ReloaderBuilder {
    args: Vec<String>,
    envs: Vec<(String, String)>,
    kubeconfig: PathBuf,
    name: String,
    wait_ready: bool,
    wall_clock_offset: Option<i64>,
}

impl ReloaderBuilder {
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.envs.push((key.into(), value.into()));
        self
    }

    /// Runs as another identity (e.g. a ServiceAccount's kubeconfig).
    pub fn kubeconfig(mut self, path: impl Into<PathBuf>) -> Self {
        self.kubeconfig = path.into();
        self
    }

    /// A name for its log file (several reloaders in one test).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Runs with its wall clock shifted by `seconds` (libfaketime; its monotonic clock is not).
    pub fn wall_clock_offset(mut self, seconds: i64) -> Self {
        self.wall_clock_offset = Some(seconds);
        self
    }

    /// Do not wait for `/readyz` in `start` (for processes expected to fail).
    pub fn no_wait(mut self) -> Self {
        self.wait_ready = false;
        self
    }

    /// Starts it and (unless `no_wait`) waits until `/readyz` answers 200.
    pub async fn start(self) -> Result<Reloader, PlaneError> {
        let binary = reloader_binary();
        if !binary.exists() {
            return Err(PlaneError::Command {
                command: binary.display().to_string(),
                detail: "the reloader binary is missing: run `cargo build -p reloader-cli` first".into(),
            });
        }
        let dir = tempfile::Builder::new().prefix("reloader-").tempdir().map_err(|source| {
            PlaneError::Io { context: "creating a directory for the reloader log".into(), source }
        })?;
        let shifted = match self.wall_clock_offset {
            Some(seconds) => crate::faketime::shifted_clock_env(seconds)?,
            None => Vec::new(),
        };
        let port = free_port();
        let mut args = vec![format!("--metrics-addr=127.0.0.1:{port}")];
        args.extend(self.args.iter().cloned());
        let log = dir.path().join(format!("{}.log", self.name));
        let mut envs: Vec<(&str, &Path)> = vec![("KUBECONFIG", self.kubeconfig.as_path())];
        envs.extend(self.envs.iter().chain(&shifted).map(|(k, v)| (k.as_str(), Path::new(v.as_str()))));
        let process = Process::start(&self.name, &binary, &args, &envs, &log)?;
        let reloader = Reloader { process, port, log, _dir: dir };
        if self.wait_ready {
            reloader.wait_ready(Duration::from_secs(60)).await?;
        }
        Ok(reloader)
    }
}

/// A running reloader process.
#[derive(Debug)]
pub struct Reloader {
    process: Process,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Reloader {
    /// A builder for a reloader pointed at `plane` with the admin identity.
    pub fn builder(plane: &ControlPlane) -> ReloaderBuilder {
        ReloaderBuilder {
            args: Vec::new(),
            envs: Vec::new(),
            kubeconfig: plane.kubeconfig_path().to_path_buf(),
            name: "reloader".into(),
            wait_ready: true,
            wall_clock_offset: None,
        }
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Everything it logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `Some(code)` once the process ended.
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.process.exited()
    }

    /// SIGKILL, no goodbye.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// SIGTERM, then SIGKILL after `grace`.
    pub fn terminate(&mut self, grace: Duration) {
        self.process.terminate(grace);
    }

    pub async fn get(&self, path: &str) -> Result<(u16, String), reqwest::Error> {
        let response = reqwest::get(format!("http://127.0.0.1:{}{path}", self.port)).await?;
        let status = response.status().as_u16();
        Ok((status, response.text().await?))
    }

    /// The `/metrics` text.
    pub async fn metrics(&self) -> Result<String, PlaneError> {
        Ok(self.get("/metrics").await?.1)
    }

    /// The value of one sample, e.g. `reloader_reload_executed_total{success="true"}`.
    pub async fn metric(&self, sample: &str) -> Result<Option<f64>, PlaneError> {
        let text = self.metrics().await?;
        Ok(text.lines().find_map(|line| {
            let rest = line.strip_prefix(sample)?;
            rest.strip_prefix(' ')?.trim().parse().ok()
        }))
    }

    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), PlaneError> {
        let log = self.log.clone();
        wait_until("reloader /readyz", timeout, || {
            let log = log.clone();
            async move {
                match self.get("/readyz").await {
                    Ok((200, _)) => Ok(()),
                    Ok((status, _)) => Err(NotYet(format!("/readyz answered {status}"))),
                    Err(e) => {
                        let tail = std::fs::read_to_string(&log).unwrap_or_default();
                        let last = tail.lines().rev().take(3).collect::<Vec<_>>().join(" | ");
                        Err(NotYet(format!("{e}; log: {last}")))
                    }
                }
            }
        })
        .await
    }
}

impl Drop for Reloader {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("----- reloader log ({}) -----\n{}", self.log.display(), self.log_text());
        }
        self.process.kill();
    }
}
