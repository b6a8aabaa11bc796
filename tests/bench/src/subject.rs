//! The controllers under test: ours, and Stakater Reloader when the user built one. Both run as
//! the benchmark's ServiceAccount with the same flags; only what a binary cannot accept differs.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::BenchError;
use super::identity::{self, NAMESPACE};
use super::netns::IsolatedNetwork;
use super::procfs::{self, Memory};
use reloader_harness::Cgroup;
use reloader_harness::ControlPlane;
use reloader_harness::KubeconfigFile;
use reloader_harness::free_port;
use reloader_harness::process::{self, Process};

/// Why the Stakater column is empty unless `STAKATER_BIN` names a binary, and how to get one.
pub const STAKATER_UNAVAILABLE: &str = "unavailable: STAKATER_BIN names no Stakater Reloader binary \
     (build Stakater Reloader v1.4.21 from its sources as README.md's \"Benchmark\" section says, \
     then run STAKATER_BIN=/path/to/it hack/bench)";
/// Stakater v1 serves `/metrics` and `/live` on a fixed port; it has no `--metrics-addr`.
const STAKATER_PORT: u16 = 9090;
const READY_POLL: Duration = Duration::from_millis(20);
/// How often [`Controller::while_alive`] looks whether the process is still there.
const EXIT_POLL: Duration = Duration::from_millis(200);

/// Which controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavour {
    Ours,
    Stakater,
}

/// A controller binary to benchmark.
#[derive(Debug, Clone)]
pub struct Subject {
    pub flavour: Flavour,
    pub binary: PathBuf,
}

/// How one controller process is started.
#[derive(Debug, Clone, Default)]
pub struct Launch {
    /// Its POD_NAME (the Lease identity with `--enable-ha`) and log file name.
    pub name: String,
    /// Flags both controllers accept.
    pub args: Vec<String>,
    /// Flags only ours has (coalescing, write limits); Stakater runs without them.
    pub ours_only_args: Vec<String>,
    /// `--reload-strategy`; empty: env-vars.
    pub strategy: String,
    /// More environment (alert settings, a chart's env), after the defaults so it wins.
    pub env: Vec<(String, String)>,
    /// Run as this kubeconfig's identity instead of the benchmark's account (a chart's
    /// ServiceAccount in hack/diff-stakater's switching-day play).
    pub kubeconfig: Option<PathBuf>,
    /// Stakater only: run in a network namespace of its own ([`IsolatedNetwork`]), so that several
    /// replicas can each bind `:9090`. Ours needs none (`--metrics-addr` takes a free port).
    pub own_network: bool,
    /// Run inside this memory cgroup from the first instruction (M10's run under the chart's limit).
    pub cgroup: Option<Arc<Cgroup>>,
}

impl Launch {
    pub fn named(name: impl Into<String>) -> Self {
        Self { name: name.into(), ..Self::default() }
    }

    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn args(mut self, args: impl IntoIterator<Item = String>) -> Self {
        self.args.extend(args);
        self
    }

    pub fn ours_only(mut self, arg: impl Into<String>) -> Self {
        self.ours_only_args.push(arg.into());
        self
    }

    pub fn ours_only_args(mut self, args: impl IntoIterator<Item = String>) -> Self {
        self.ours_only_args.extend(args);
        self
    }

    pub fn own_network(mut self) -> Self {
        self.own_network = true;
        self
    }
}

impl Subject {
    pub fn label(&self) -> &'static str {
        match self.flavour {
            Flavour::Ours => "ours",
            Flavour::Stakater => "stakater",
        }
    }

    /// Starts it with `--reload-strategy=env-vars` over all namespaces, as the benchmark's account;
    /// does not wait for readiness (start-up is measured by the caller).
    pub async fn start(
        &self,
        plane: &ControlPlane,
        log_dir: &Path,
        launch: &Launch,
    ) -> Result<Controller, BenchError> {
        let account = match launch.kubeconfig {
            Some(_) => None,
            None => Some(identity::kubeconfig(plane).await?),
        };
        let kubeconfig_path = match (&launch.kubeconfig, &account) {
            (Some(path), _) => path.as_path(),
            (None, Some(account)) => account.path(),
            (None, None) => unreachable!("an account kubeconfig is made when none is given"),
        };
        let (port, mut args) = match self.flavour {
            Flavour::Ours => {
                let port = free_port();
                // The scenarios change the same workloads over and over by design, which the loop
                // guard would stop (Stakater has none; docs/benchmark.md).
                (port, vec![format!("--metrics-addr=127.0.0.1:{port}"), "--loop-guard=off".to_owned()])
            }
            Flavour::Stakater => (STAKATER_PORT, Vec::new()),
        };
        let strategy = if launch.strategy.is_empty() { "env-vars" } else { launch.strategy.as_str() };
        args.push(format!("--reload-strategy={strategy}"));
        args.extend(launch.args.iter().cloned());
        if self.flavour == Flavour::Ours {
            args.extend(launch.ours_only_args.iter().cloned());
        }
        let log = log_dir.join(format!("{}-{}.log", self.label(), launch.name));
        let _ = std::fs::remove_file(&log);
        let mut envs: Vec<(&str, &Path)> = vec![
            ("KUBECONFIG", kubeconfig_path),
            ("POD_NAME", Path::new(&launch.name)),
            ("POD_NAMESPACE", Path::new(NAMESPACE)),
            // Where both publish their meta-info ConfigMap. (Never KUBERNETES_NAMESPACE: it would
            // confine both to that one namespace.)
            ("RELOADER_NAMESPACE", Path::new(NAMESPACE)),
        ];
        envs.extend(launch.env.iter().map(|(key, value)| (key.as_str(), Path::new(value))));
        let network = match self.flavour {
            Flavour::Stakater if launch.own_network => {
                let apiserver = apiserver_address(plane)?;
                Some(IsolatedNetwork::create(&launch.name, apiserver, port, log_dir).await?)
            }
            _ => None,
        };
        let (program, args, port) = match &network {
            Some(network) => {
                let (program, mut entered) = network.enter(&self.binary);
                entered.extend(args);
                (program, entered, network.exposed_port())
            }
            None => (self.binary.clone(), args, port),
        };
        let started = Instant::now();
        let (program, args) = match &launch.cgroup {
            Some(cgroup) => cgroup.wrap(&program, &args),
            None => (program, args),
        };
        let process = Process::start(&launch.name, &program, &args, &envs, &log)?;
        let ready_path = match self.flavour {
            Flavour::Ours => "/readyz",
            // Stakater has no readiness endpoint; /live answering is the closest it says.
            Flavour::Stakater => "/live",
        };
        Ok(Controller { process, started, port, ready_path, log, _kubeconfig: account, _network: network })
    }
}

/// A running controller process, killed on drop.
#[derive(Debug)]
pub struct Controller {
    process: Process,
    started: Instant,
    port: u16,
    ready_path: &'static str,
    log: PathBuf,
    _kubeconfig: Option<KubeconfigFile>,
    /// Dropped after `process`, so the controller is gone before its namespace.
    _network: Option<IsolatedNetwork>,
}

impl Controller {
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Just before the process was spawned.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Where its stdout and stderr go.
    pub fn log(&self) -> &Path {
        &self.log
    }

    pub fn memory(&self) -> Option<Memory> {
        procfs::memory(self.pid())
    }

    /// Polls the ready endpoint until it answers 200; returns when that was first seen.
    pub async fn wait_ready(&mut self, timeout: Duration) -> Result<Instant, BenchError> {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(2)).build()?;
        let url = format!("http://127.0.0.1:{}{}", self.port, self.ready_path);
        let deadline = self.started + timeout;
        loop {
            if let Ok(response) = http.get(&url).send().await
                && response.status().is_success()
            {
                return Ok(Instant::now());
            }
            if let Some(status) = self.process.exited() {
                return Err(self.exit_error(status, &format!("before {url} answered")));
            }
            if Instant::now() >= deadline {
                return Err(BenchError::measure(format!(
                    "{} not ready at {url} after {timeout:?}; last log lines:\n{}",
                    self.process.name(),
                    self.log_tail(20)
                )));
            }
            tokio::time::sleep(READY_POLL).await;
        }
    }

    /// Runs `work` (updates, and waits for what they should cause) while the process lives. If it
    /// exits first, or by the time `work` is done, the scenario fails at once with its log, instead
    /// of waiting out every deadline for changes a dead controller will never make.
    pub async fn while_alive<T>(&mut self, work: impl Future<Output = T>) -> Result<T, BenchError> {
        let mut work = std::pin::pin!(work);
        let mut poll = tokio::time::interval(EXIT_POLL);
        let output = loop {
            tokio::select! {
                output = &mut work => break output,
                _ = poll.tick() => if let Some(status) = self.process.exited() {
                    return Err(self.exit_error(status, "while it was measured"));
                },
            }
        };
        match self.process.exited() {
            Some(status) => Err(self.exit_error(status, "while it was measured")),
            None => Ok(output),
        }
    }

    fn exit_error(&self, status: std::process::ExitStatus, when: &str) -> BenchError {
        BenchError::measure(format!(
            "{} exited ({status}) {when}; last log lines:\n{}",
            self.process.name(),
            self.log_tail(20)
        ))
    }

    /// Its `/metrics` text.
    pub async fn metrics(&self) -> Result<String, BenchError> {
        let url = format!("http://127.0.0.1:{}/metrics", self.port);
        Ok(reqwest::get(&url).await?.error_for_status()?.text().await?)
    }

    /// SIGTERM, then SIGKILL after `grace`.
    pub fn terminate(&mut self, grace: Duration) {
        self.process.terminate(grace);
    }

    /// SIGKILL, no goodbye.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// `None` while it runs.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.process.exited()
    }

    pub fn log_tail(&self, lines: usize) -> String {
        process::tail(&self.log, lines).map(|l| l.join("\n")).unwrap_or_default()
    }
}

/// The plane's API server as a socket address (its URL is `https://127.0.0.1:<port>`).
fn apiserver_address(plane: &ControlPlane) -> Result<std::net::SocketAddr, BenchError> {
    let url = plane.url();
    url.strip_prefix("https://")
        .and_then(|authority| authority.trim_end_matches('/').parse().ok())
        .ok_or_else(|| BenchError::measure(format!("the API server URL {url} is not https://<ip>:<port>")))
}

/// `<binary> --version`, first line.
pub fn version_of(binary: &Path) -> Option<String> {
    let output = std::process::Command::new(binary).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines().next().map(|line| line.trim().to_owned()).filter(|line| !line.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A "controller" that is the shell running `script`, its output in `dir`.
    fn shell(dir: &Path, script: &str) -> Controller {
        let log = dir.join("shell.log");
        let args = ["-c".to_owned(), script.to_owned()];
        let process = Process::start("shell", Path::new("/bin/sh"), &args, &[], &log).expect("sh starts");
        Controller {
            process,
            started: Instant::now(),
            port: 0,
            ready_path: "/readyz",
            log,
            _kubeconfig: None,
            _network: None,
        }
    }

    #[tokio::test]
    async fn a_controller_that_exits_fails_the_work_at_once_with_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut gone = shell(dir.path(), "echo 'panicked at the watch'; exit 3");
        let waited = Instant::now();
        let error = gone.while_alive(tokio::time::sleep(Duration::from_secs(60))).await.unwrap_err();
        assert!(waited.elapsed() < Duration::from_secs(10), "waited {:?}", waited.elapsed());
        let error = error.to_string();
        assert!(error.contains("exited") && error.contains("panicked at the watch"), "{error}");

        let mut alive = shell(dir.path(), "sleep 60");
        assert_eq!(alive.while_alive(async { 7 }).await.unwrap(), 7, "a live controller's work is returned");
    }
}
