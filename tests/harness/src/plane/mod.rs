//! The plane: starting it, clients for it, restarting kube-apiserver, and stopping it all.

mod dir;
mod etcd;
mod running;
mod startup;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use kube::{Client, Config};

use crate::binaries::Binaries;
use crate::components::{Layout, Ports};
use crate::credentials::Credentials;
use crate::netns::{Isolation, NetworkNamespace};
use crate::{PlaneError, testing};
use running::{Processes, lock};
pub(crate) use startup::start_in;
use startup::{start_apiserver_process, start_etcd_process, wait_for_etcd, write_admin_kubeconfig};

const ETCD_READY_TIMEOUT: Duration = Duration::from_secs(60);
/// docs/control-plane.md allows 60 s on 2 busy cores; CI machines can be busier still.
const APISERVER_READY_TIMEOUT: Duration = Duration::from_secs(120);
const CONTROLLERS_READY_TIMEOUT: Duration = Duration::from_secs(120);

/// What to start.
#[derive(Debug, Clone)]
pub struct PlaneOptions {
    /// Directory for all state and logs. `None`: a fresh directory under /dev/shm (or the
    /// temp dir), removed when the plane is dropped. An existing directory is emptied first.
    pub dir: Option<PathBuf>,
    /// kube-controller-manager, kube-scheduler and KWOK. Without them only etcd and
    /// kube-apiserver run: faster to start, but nothing reconciles (no ReplicaSets, no pods).
    pub controllers: bool,
    /// Fake nodes managed by KWOK (when `controllers`).
    pub fake_nodes: usize,
    /// Extra kube-apiserver flags, after the harness's own (a repeated flag's last value wins),
    /// e.g. `--watch-cache=false` to serve watches from etcd. Kept by [`ControlPlane::start_apiserver`].
    pub apiserver_args: Vec<String>,
    /// Every component in a network namespace of the plane's own, its ports forwarded from the
    /// host's loopback (same ports, so one kubeconfig serves inside and out). The real node
    /// ([`crate::RealNode`]) needs it: its pods, the API server and the kubelet then talk only
    /// inside that namespace (docs/control-plane.md, "The real node").
    pub isolated_network: bool,
}

impl Default for PlaneOptions {
    fn default() -> Self {
        Self {
            dir: None,
            controllers: true,
            fake_nodes: 3,
            apiserver_args: Vec::new(),
            isolated_network: false,
        }
    }
}

impl PlaneOptions {
    /// Only etcd and kube-apiserver.
    pub fn api_only() -> Self {
        Self { controllers: false, ..Self::default() }
    }
}

/// A running control plane. Dropping it stops every process it started.
pub struct ControlPlane {
    layout: Layout,
    binaries: Binaries,
    credentials: Credentials,
    options: PlaneOptions,
    admin: Config,
    processes: Mutex<Processes>,
    /// The namespace every component runs in, when `isolated_network` (dropped after them).
    network: Option<Arc<NetworkNamespace>>,
    /// Removes the plane's directory on drop when the plane made it (declared last: dropped last).
    _temp_dir: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane").field("dir", &self.layout.dir).field("url", &self.url()).finish()
    }
}

impl ControlPlane {
    /// Starts a plane and waits until it is ready: `/readyz` says ok and, with controllers, the
    /// `default` ServiceAccount exists and every fake node is Ready. When it does not start, the
    /// processes are stopped but the directory with their logs is kept and named in the error.
    pub async fn start(options: PlaneOptions) -> Result<Self, PlaneError> {
        let started = Instant::now();
        let binaries = Binaries::locate()?;
        let (dir, temp_dir) = dir::prepare(options.dir.as_deref())?;
        match Self::start_in(&dir, binaries, options).await {
            Ok(mut plane) => {
                plane._temp_dir = temp_dir;
                let seconds = started.elapsed().as_secs_f32();
                tracing::info!(dir = %dir.display(), seconds, "control plane ready");
                Ok(plane)
            }
            Err(error) => {
                let _kept = temp_dir.map(tempfile::TempDir::keep);
                Err(PlaneError::NotStarted { dir, cause: Box::new(error) })
            }
        }
    }

    async fn start_in(dir: &Path, binaries: Binaries, options: PlaneOptions) -> Result<Self, PlaneError> {
        let layout = Layout::new(dir, Ports::free()?);
        for sub in [&layout.cert_dir, &layout.kwok_home] {
            dir::create(sub)?;
        }
        let credentials = Credentials::generate(dir)?;
        let processes = Mutex::new(Processes::default());
        let network = match options.isolated_network {
            true => Some(isolated_network(&layout).await?),
            false => None,
        };

        let etcd = start_etcd_process(&binaries, &layout, network.as_deref())?;
        lock(&processes).etcd = Some(etcd);
        wait_for_etcd(&layout, &processes).await?;

        let apiserver =
            start_apiserver_process(&binaries, &layout, &credentials, &options, network.as_deref())?;
        lock(&processes).apiserver = Some(apiserver);
        let admin = write_admin_kubeconfig(&layout, &credentials, &processes).await?;

        let plane =
            Self { layout, binaries, credentials, options, admin, processes, network, _temp_dir: None };
        plane.wait_for_apiserver().await?;
        if plane.options.controllers {
            plane.start_controllers().await?;
        }
        Ok(plane)
    }

    /// The plane shared by every test of this test binary, started on first use.
    ///
    /// # Panics
    ///
    /// When the plane cannot start; the message says why and, for missing binaries, names
    /// `hack/build`. A missing plane is a failure, never a skip (under `CI=true` or not).
    pub async fn shared() -> &'static ControlPlane {
        testing::shared_plane().await
    }

    /// An admin client (`system:masters`). Build one per test: a client belongs to the tokio
    /// runtime it was made in.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn client(&self) -> Client {
        Client::try_from(self.admin.clone()).expect("building a client from the admin kubeconfig")
    }

    /// The admin client configuration, to build clients of one's own.
    pub fn admin_config(&self) -> &Config {
        &self.admin
    }

    /// The admin kubeconfig file.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.layout.kubeconfig
    }

    /// The API server's URL, `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        self.layout.apiserver_url()
    }

    /// The directory holding the plane's state and logs.
    pub fn dir(&self) -> &Path {
        &self.layout.dir
    }

    /// Paths of the binaries and data files the plane uses (kubectl and helm among them).
    pub fn binaries(&self) -> &Binaries {
        &self.binaries
    }

    /// A client acting only as ServiceAccount `namespace/name` (created when missing), with a
    /// real token from the TokenRequest API. It has exactly the permissions RBAC gives that
    /// account: none until a test binds a role.
    pub async fn service_account_client(&self, namespace: &str, name: &str) -> Result<Client, PlaneError> {
        let config = self.service_account_config(namespace, name).await?;
        Ok(Client::try_from(config)?)
    }

    /// The client configuration [`Self::service_account_client`] uses.
    pub async fn service_account_config(&self, namespace: &str, name: &str) -> Result<Config, PlaneError> {
        use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
        let accounts: Api<ServiceAccount> = Api::namespaced(self.client(), namespace);
        let mut account = ServiceAccount::default();
        account.metadata.name = Some(name.to_owned());
        match accounts.create(&PostParams::default(), &account).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => return Err(error.into()),
        }
        let request = TokenRequest {
            spec: TokenRequestSpec { expiration_seconds: Some(3600), ..Default::default() },
            ..Default::default()
        };
        let issued = accounts.create_token_request(name, &PostParams::default(), &request).await?;
        let token = issued.status.map(|status| status.token).ok_or_else(|| PlaneError::Manifest {
            what: format!("the TokenRequest for {namespace}/{name}"),
            detail: "the response has no status".into(),
        })?;
        let mut config = self.admin.clone();
        config.auth_info = kube::config::AuthInfo { token: Some(token.into()), ..Default::default() };
        config.default_namespace = namespace.to_owned();
        Ok(config)
    }

    /// Kills kube-apiserver as a crash would; etcd and the other components keep running.
    /// Only for a plane of one's own: other tests sharing the plane would fail meanwhile.
    pub fn stop_apiserver(&self) {
        if let Some(mut apiserver) = lock(&self.processes).apiserver.take() {
            apiserver.kill();
        }
    }

    /// Starts kube-apiserver again, on the same port and etcd, and waits until it is ready.
    /// Does nothing when it is running.
    pub async fn start_apiserver(&self) -> Result<(), PlaneError> {
        {
            let mut processes = lock(&self.processes);
            if processes.apiserver.as_mut().is_some_and(|apiserver| apiserver.exited().is_none()) {
                return Ok(());
            }
            let apiserver = start_apiserver_process(
                &self.binaries,
                &self.layout,
                &self.credentials,
                &self.options,
                self.network.as_deref(),
            )?;
            processes.apiserver = Some(apiserver);
        }
        self.wait_for_apiserver().await
    }

    /// kube-apiserver's process id (to read its memory from /proc), while it runs.
    pub fn apiserver_pid(&self) -> Option<u32> {
        let mut processes = lock(&self.processes);
        let apiserver = processes.apiserver.as_mut()?;
        apiserver.exited().is_none().then(|| apiserver.pid())
    }

    /// The network namespace the components run in, when the plane was started with
    /// `isolated_network`.
    pub fn network(&self) -> Option<&Arc<NetworkNamespace>> {
        self.network.as_ref()
    }

    /// The admin token, for a kubeconfig of one's own (the real node's kubelet uses it).
    pub fn admin_token(&self) -> &str {
        self.credentials.admin_token()
    }

    /// The API server's serving certificate (its own CA), PEM.
    pub fn apiserver_certificate(&self) -> PathBuf {
        self.layout.apiserver_certificate()
    }

    /// The API server's port on 127.0.0.1 (inside the plane's namespace too, when isolated).
    pub fn apiserver_port(&self) -> u16 {
        self.layout.ports.apiserver
    }

    /// Each component's name and log file.
    pub fn logs(&self) -> Vec<(String, PathBuf)> {
        ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"]
            .into_iter()
            .map(|name| (name.to_owned(), self.layout.log(name)))
            .filter(|(_, path)| path.exists())
            .collect()
    }

    /// Components that have ended on their own, with their exit status.
    pub fn exited_components(&self) -> Vec<(String, String)> {
        lock(&self.processes)
            .all_mut()
            .filter_map(|process| Some((process.name().to_owned(), process.exited()?.to_string())))
            .collect()
    }
}

/// The plane's namespace, with every port the harness probes forwarded from the host's loopback.
async fn isolated_network(layout: &Layout) -> Result<Arc<NetworkNamespace>, PlaneError> {
    let network =
        Arc::new(NetworkNamespace::create("plane", Isolation::NetworkAndMounts, &layout.log("netns")).await?);
    let ports = layout.ports;
    for port in [ports.etcd_client, ports.apiserver, ports.controller_manager, ports.scheduler] {
        let address = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port));
        network.expose(address, address).await?;
    }
    Ok(network)
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        lock(&self.processes).stop_all();
    }
}
