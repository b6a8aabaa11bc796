//! A real node beside the plane: containerd, runc, the CNI bridge and the kubelet, so pods really
//! run (docs/control-plane.md, "The real node").
//!
//! Everything runs inside the plane's own network and mount namespaces
//! ([`PlaneOptions::isolated_network`](crate::PlaneOptions)): the API server, the kubelet and the
//! pods talk only there. In it the node holds
//! - `10.0.0.1` on loopback, relayed to the API server: the in-cluster address a pod's client uses
//!   (the `kubernetes` Service, which the API server's certificate names), with no kube-proxy;
//! - its own address on a link of its own (`--node-ip`), so nothing is ever sent to the machine's;
//! - a bridge with the pods' subnet, which the API server reaches directly (endpoint routing for
//!   admission webhooks, `--enable-aggregator-routing`).
//!
//! One node runs at a time on a machine ([`host::HostLock`]); stopping it (drop) stops the pods and
//! puts back what it changed outside its namespaces ([`host`]). A run killed before that is cleaned
//! by the next node's start.

mod config;
mod host;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::Api;

pub use config::cri_log_lines;
use config::{NodeLayout, NodeSettings};

use crate::binaries::{Versions, cache_dir};
use crate::netns::NetworkNamespace;
use crate::plane::start_in;
use crate::process::Process;
use crate::wait::{NotYet, wait_until};
use crate::{ControlPlane, PlaneError, PlaneOptions};

/// The Service IP of `kubernetes` (first address of `--service-cluster-ip-range`), port 443.
const IN_CLUSTER_API: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 443);
const NODE_NAME: &str = "reloader-node";
const NODE_ADDRESS: &str = "10.254.0.1";
const POD_SUBNET: &str = "10.88.0.0/16";
const CGROUP_ROOT: &str = "/reloader-node";
/// The names the node's own images are imported under (hack/lib.sh, NODE_IMAGE_REPOSITORY).
const NODE_IMAGE_REPOSITORY: &str = "reloader.dev/node";
const RUNC: &str = "/usr/sbin/runc";
const CNI_BIN: &str = "/usr/lib/cni";
/// Directories the node's processes get private (tmpfs) copies of inside the mount namespace:
/// runc's and containerd's defaults under /run, the CNI cache under /var/lib, the kubelet's
/// /var/log/containers links.
const PRIVATE_DIRS: [&str; 3] = ["/run", "/var/lib", "/var/log"];
const CONTAINERD_READY_TIMEOUT: Duration = Duration::from_secs(60);
const NODE_READY_TIMEOUT: Duration = Duration::from_secs(180);

/// The binaries and image archives the node needs (`hack/build node`).
#[derive(Debug, Clone)]
pub struct NodeBinaries {
    pub kubelet: PathBuf,
    /// containerd, containerd-shim-runc-v2 and ctr.
    pub containerd_dir: PathBuf,
    pub pause_image: PathBuf,
    pub app_image: PathBuf,
    /// The Argo Rollouts controller (`hack/build argo-controller`).
    pub rollouts_controller: PathBuf,
    pub versions: Versions,
}

impl NodeBinaries {
    /// The node's binaries in the cache, failing with the command that builds them.
    pub fn locate() -> Result<Self, PlaneError> {
        let cache = cache_dir();
        let versions = Versions::selected();
        let images = cache.join(format!("node-images-{}", versions.node_images));
        let binaries = Self {
            kubelet: cache.join(format!("kubernetes-{}", versions.kubernetes)).join("kubelet"),
            containerd_dir: cache.join(format!("containerd-{}", versions.containerd)),
            pause_image: images.join("pause.oci.tar"),
            app_image: images.join("app.oci.tar"),
            rollouts_controller: cache
                .join(format!("argo-rollouts-{}", versions.argo_rollouts))
                .join("rollouts-controller"),
            versions,
        };
        let missing: Vec<PathBuf> = [
            binaries.kubelet.clone(),
            binaries.containerd_dir.join("containerd"),
            binaries.containerd_dir.join("containerd-shim-runc-v2"),
            binaries.containerd_dir.join("ctr"),
            binaries.pause_image.clone(),
            binaries.app_image.clone(),
            PathBuf::from(RUNC),
            Path::new(CNI_BIN).join("bridge"),
            Path::new(CNI_BIN).join("host-local"),
        ]
        .into_iter()
        .filter(|path| !path.exists())
        .collect();
        if missing.is_empty() { Ok(binaries) } else { Err(PlaneError::MissingBinaries { cache, missing }) }
    }
}

/// What a real node left on the machine (all empty once it stopped cleanly).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftovers {
    /// `<cache>/node/`.
    pub directory: Option<PathBuf>,
    /// The node's cgroups, in any hierarchy.
    pub cgroups: Vec<PathBuf>,
    /// Processes naming the node's directory (containerd, its shims, the kubelet).
    pub processes: Vec<i32>,
}

impl Leftovers {
    pub fn is_empty(&self) -> bool {
        self.directory.is_none() && self.cgroups.is_empty() && self.processes.is_empty()
    }
}

/// A running real node. Dropping it stops its pods and restores the machine.
pub struct RealNode {
    layout: NodeLayout,
    settings: NodeSettings,
    binaries: NodeBinaries,
    network: Arc<NetworkNamespace>,
    kubelet: Option<Process>,
    containerd: Option<Process>,
    /// Other processes run beside the node (the Argo Rollouts controller).
    companions: std::sync::Mutex<Vec<Process>>,
    _lock: host::HostLock,
}

impl std::fmt::Debug for RealNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealNode").field("name", &self.settings.name).field("dir", &self.layout.dir).finish()
    }
}

impl RealNode {
    /// What the plane of a real node needs: its own namespaces, endpoint routing for admission
    /// webhooks, and no fake nodes (every pod lands on the real one).
    pub fn plane_options() -> PlaneOptions {
        PlaneOptions {
            isolated_network: true,
            fake_nodes: 0,
            apiserver_args: vec!["--enable-aggregator-routing=true".into()],
            ..PlaneOptions::default()
        }
    }

    /// Starts the node beside `plane` (started with [`Self::plane_options`]) and waits until it
    /// is Ready. Waits first for another run's node to finish, and cleans up after one that was
    /// killed.
    pub async fn start(plane: &ControlPlane) -> Result<Self, PlaneError> {
        let network = plane.network().cloned().ok_or_else(|| PlaneError::Manifest {
            what: "the real node's plane".into(),
            detail: "started without PlaneOptions::isolated_network (use RealNode::plane_options)".into(),
        })?;
        let binaries = NodeBinaries::locate()?;
        let cache = cache_dir();
        std::fs::create_dir_all(&cache).map_err(io_error(format!("creating {}", cache.display())))?;
        let lock_path = cache.join("node.lock");
        let lock = tokio::task::spawn_blocking(move || host::HostLock::acquire(&lock_path)).await.map_err(
            |error| PlaneError::Command {
                command: "waiting for the node lock".into(),
                detail: error.to_string(),
            },
        )??;

        let layout = NodeLayout::new(&cache.join("node"));
        let settings = NodeSettings {
            name: NODE_NAME.into(),
            address: NODE_ADDRESS,
            pod_subnet: POD_SUBNET,
            cgroup_root: CGROUP_ROOT.into(),
            sandbox_image: node_image("pause", &binaries.versions),
        };
        if layout.dir.exists() {
            tracing::warn!(dir = %layout.dir.display(), "cleaning up a real node left by a killed run");
            clean_host(&layout, &settings)?;
        }
        for dir in [layout.dir.clone(), layout.cni_config_dir(), layout.pod_logs()] {
            std::fs::create_dir_all(&dir).map_err(io_error(format!("creating {}", dir.display())))?;
        }
        let mut node = Self {
            layout,
            settings,
            binaries,
            network,
            kubelet: None,
            containerd: None,
            companions: std::sync::Mutex::new(Vec::new()),
            _lock: lock,
        };
        // From here on, drop cleans up whatever was done.
        host::record(&node.layout.host_record())?;
        host::create_cgroups(&node.settings.cgroup_root)?;
        node.prepare_namespace(plane.apiserver_port()).await?;
        node.write_configuration()?;
        node.start_containerd().await?;
        node.import_image(&node.binaries.pause_image.clone(), &[])?;
        node.import_image(&node.binaries.app_image.clone(), &[])?;
        node.start_kubelet(plane)?;
        node.wait_until_ready(plane).await?;
        Ok(node)
    }

    /// What a node (running, stopped or killed) has left on this machine.
    pub fn leftovers() -> Leftovers {
        let dir = cache_dir().join("node");
        Leftovers {
            directory: dir.exists().then(|| dir.clone()),
            cgroups: host::cgroups_named(CGROUP_ROOT),
            processes: host::processes_naming(&dir),
        }
    }

    /// The kernel settings the kubelet changes (`vm/overcommit_memory`, `kernel/panic`, ...) and
    /// their values now: a stopped node has put them back.
    pub fn kernel_settings() -> Vec<(String, String)> {
        host::kernel_settings()
    }

    /// The kernel settings as they were before this node started (what its stop puts back).
    pub fn kernel_settings_before(&self) -> Vec<(String, String)> {
        host::recorded(&self.layout.host_record())
    }

    /// The Node's name.
    pub fn name(&self) -> &str {
        &self.settings.name
    }

    /// The test app's image (`node-tool app`, hack/gomod/node-tool): prints the variables named
    /// in `APP_PRINT_ENV` and the files in `APP_PRINT_FILES`, serves `POST /-/reload`.
    pub fn app_image(&self) -> String {
        node_image("app", &self.binaries.versions)
    }

    /// Imports an image archive (OCI layout or `docker save`) into the node's containerd, and
    /// tags it with `also_named` too. Pods use it with `imagePullPolicy: IfNotPresent`.
    pub fn import_image(&self, archive: &Path, also_named: &[&str]) -> Result<(), PlaneError> {
        let output = self.ctr(&["images", "import", &archive.display().to_string()])?;
        let imported = output
            .lines()
            .filter_map(|line| {
                line.split_whitespace().find(|word| word.contains(':') && !word.starts_with("sha256"))
            })
            .map(str::to_owned)
            .next();
        if let Some(source) = imported {
            for name in also_named {
                self.ctr(&["images", "tag", "--force", &source, name])?;
            }
        } else if !also_named.is_empty() {
            return Err(PlaneError::Command {
                command: format!("ctr images import {}", archive.display()),
                detail: format!("no image name in its output: {output}"),
            });
        }
        Ok(())
    }

    /// The kubelet's pod log directory (`<namespace>_<pod>_<uid>/<container>/<restarts>.log`).
    pub fn pod_logs(&self) -> PathBuf {
        self.layout.pod_logs()
    }

    /// Everything the container `container` of pod `namespace/pod` printed, over all its
    /// restarts, read from the kubelet's log files (never through the API server: the kubelet's
    /// address is not to be contacted from outside its namespace).
    pub fn container_output(&self, namespace: &str, pod: &str, container: &str) -> Vec<String> {
        let prefix = format!("{namespace}_{pod}_");
        let Ok(entries) = std::fs::read_dir(self.layout.pod_logs()) else { return Vec::new() };
        let mut lines = Vec::new();
        for entry in entries.flatten() {
            if !entry.file_name().to_string_lossy().starts_with(&prefix) {
                continue;
            }
            let Ok(files) = std::fs::read_dir(entry.path().join(container)) else { continue };
            let mut files: Vec<PathBuf> = files.flatten().map(|file| file.path()).collect();
            files.sort_by_key(|path| {
                path.file_stem().and_then(|stem| stem.to_str()?.parse::<u32>().ok()).unwrap_or_default()
            });
            for file in files {
                lines.extend(cri_log_lines(&std::fs::read_to_string(file).unwrap_or_default()));
            }
        }
        lines
    }

    /// The process ids of a running container (`containerd://<id>` as a pod's status gives it, or
    /// the bare id), found by its cgroup: a test reads its user and mounts from /proc.
    pub fn container_processes(&self, container_id: &str) -> Vec<i32> {
        let id = container_id.rsplit("://").next().unwrap_or(container_id);
        host::processes_of(&self.settings.cgroup_root, id)
    }

    /// The Argo Rollouts controller, started beside the node (in the plane's namespaces, with the
    /// admin kubeconfig), until the node stops.
    pub fn start_rollouts_controller(&self, plane: &ControlPlane) -> Result<(), PlaneError> {
        let program = &self.binaries.rollouts_controller;
        if !program.exists() {
            return Err(PlaneError::MissingBinaries { cache: cache_dir(), missing: vec![program.clone()] });
        }
        let args = vec![
            format!("--kubeconfig={}", plane.kubeconfig_path().display()),
            "--leader-elect=false".to_owned(),
            "--loglevel=info".to_owned(),
        ];
        let log = self.layout.log("rollouts-controller");
        let process = start_in(Some(&self.network), "rollouts-controller", program, &args, &[], &log)?;
        self.companions.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(process);
        Ok(())
    }

    /// The node's component logs, for a failing test to show.
    pub fn logs(&self) -> Vec<(String, PathBuf)> {
        ["containerd", "kubelet", "rollouts-controller"]
            .into_iter()
            .map(|name| (name.to_owned(), self.layout.log(name)))
            .filter(|(_, path)| path.exists())
            .collect()
    }

    /// The loopback alias for the in-cluster API address, the node's own address, private /run,
    /// /var/lib and /var/log for the node's processes, and the relay to the API server.
    async fn prepare_namespace(&self, apiserver_port: u16) -> Result<(), PlaneError> {
        let network = &self.network;
        network.command("ip", &["addr", "add", &format!("{}/32", IN_CLUSTER_API.ip()), "dev", "lo"])?;
        // A veth pair inside the namespace (the `dummy` link type is a module not every kernel has;
        // veth the CNI bridge needs anyway): the node's address on one end, the other end idle.
        network.command("ip", &["link", "add", "node0", "type", "veth", "peer", "name", "node0-peer"])?;
        network.command("ip", &["addr", "add", &format!("{}/32", self.settings.address), "dev", "node0"])?;
        network.command("ip", &["link", "set", "node0", "up"])?;
        network.command("ip", &["link", "set", "node0-peer", "up"])?;
        // The kubelet resolves its node IP among routed addresses: a default route through that
        // link (nothing is ever sent there; the pods' bridge has its own routes).
        network.command("ip", &["route", "add", "default", "dev", "node0"])?;
        for dir in PRIVATE_DIRS {
            network.command("mount", &["-t", "tmpfs", "-o", "mode=0755", "reloader-node", dir])?;
        }
        let apiserver = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, apiserver_port));
        network.relay(SocketAddr::V4(IN_CLUSTER_API), apiserver).await
    }

    fn write_configuration(&self) -> Result<(), PlaneError> {
        let write = |path: PathBuf, text: String| {
            std::fs::write(&path, text).map_err(io_error(format!("writing {}", path.display())))
        };
        write(
            self.layout.containerd_config(),
            config::containerd_toml(&self.layout, &self.settings, Path::new(RUNC), Path::new(CNI_BIN)),
        )?;
        write(
            self.layout.cni_config_dir().join("10-reloader.conflist"),
            config::cni_conflist(&self.layout, &self.settings),
        )?;
        write(self.layout.kubelet_config(), config::kubelet_yaml(&self.layout, &self.settings))?;
        // Pods resolve no names; their resolver points at their own loopback.
        write(self.layout.resolv_conf(), "nameserver 127.0.0.1\n".into())
    }

    async fn start_containerd(&mut self) -> Result<(), PlaneError> {
        let dir = &self.binaries.containerd_dir;
        // containerd finds its shim on PATH.
        let path = PathBuf::from(format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", dir.display()));
        let args = vec![format!("--config={}", self.layout.containerd_config().display())];
        let log = self.layout.log("containerd");
        self.containerd = Some(start_in(
            Some(&self.network),
            "containerd",
            &dir.join("containerd"),
            &args,
            &[("PATH", &path)],
            &log,
        )?);
        wait_until("containerd to answer", CONTAINERD_READY_TIMEOUT, || {
            let answer = self.ctr(&["version"]);
            async move { answer.map(drop).map_err(|error| NotYet::because(error.to_string())) }
        })
        .await
    }

    fn start_kubelet(&mut self, plane: &ControlPlane) -> Result<(), PlaneError> {
        let args = config::kubelet_args(&self.layout, &self.settings, plane.kubeconfig_path());
        let log = self.layout.log("kubelet");
        let path = PathBuf::from("/usr/sbin:/usr/bin:/sbin:/bin");
        self.kubelet = Some(start_in(
            Some(&self.network),
            "kubelet",
            &self.binaries.kubelet,
            &args,
            &[("PATH", &path)],
            &log,
        )?);
        Ok(())
    }

    async fn wait_until_ready(&mut self, plane: &ControlPlane) -> Result<(), PlaneError> {
        let nodes: Api<Node> = Api::all(plane.client());
        let name = self.settings.name.clone();
        let kubelet_log = self.layout.log("kubelet");
        let kubelet = self.kubelet.as_mut().expect("the kubelet was started");
        wait_until("the real node to become Ready", NODE_READY_TIMEOUT, || {
            let exited = kubelet.exited();
            let nodes = nodes.clone();
            let name = name.clone();
            let kubelet_log = kubelet_log.clone();
            async move {
                if let Some(status) = exited {
                    let tail = crate::process::tail(&kubelet_log, 20).unwrap_or_default().join("\n");
                    return Err(NotYet::because(format!("the kubelet exited ({status}): {tail}")));
                }
                let node = nodes.get_opt(&name).await?.ok_or_else(|| NotYet::because("not registered"))?;
                let ready = node
                    .status
                    .and_then(|status| status.conditions)
                    .unwrap_or_default()
                    .into_iter()
                    .find(|condition| condition.type_ == "Ready");
                match ready {
                    Some(condition) if condition.status == "True" => Ok(()),
                    Some(condition) => Err(NotYet::because(condition.message.unwrap_or(condition.status))),
                    None => Err(NotYet::because("no Ready condition")),
                }
            }
        })
        .await
    }

    fn ctr(&self, args: &[&str]) -> Result<String, PlaneError> {
        let ctr = self.binaries.containerd_dir.join("ctr");
        let socket = self.layout.containerd_socket();
        let output = Command::new(&ctr)
            .arg(format!("--address={}", socket.display()))
            .args(["--namespace", "k8s.io"])
            .args(args)
            .output()
            .map_err(io_error(format!("running {}", ctr.display())))?;
        if !output.status.success() {
            return Err(PlaneError::Command {
                command: format!("ctr {}", args.join(" ")),
                detail: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            });
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    fn stop(&mut self) -> Result<(), PlaneError> {
        let companions =
            std::mem::take(self.companions.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner()));
        for mut process in companions {
            process.kill();
        }
        if let Some(mut kubelet) = self.kubelet.take() {
            kubelet.terminate(Duration::from_secs(5));
        }
        if let Some(mut containerd) = self.containerd.take() {
            containerd.kill();
        }
        clean_host(&self.layout, &self.settings)
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        if let Err(error) = self.stop() {
            // Drop cannot fail; the next node's start tries again.
            eprintln!("stopping the real node left something behind (the next start cleans it): {error}");
        }
    }
}

/// Kills the node's leftover processes (shims, containers), removes its cgroups and directory, and
/// restores the sysctls it changed.
fn clean_host(layout: &NodeLayout, settings: &NodeSettings) -> Result<(), PlaneError> {
    host::kill_processes_naming(&layout.dir);
    host::remove_cgroups(&settings.cgroup_root)?;
    host::kill_processes_naming(&layout.dir);
    host::restore(&layout.host_record())?;
    host::remove_dir(&layout.dir)
}

fn node_image(mode: &str, versions: &Versions) -> String {
    format!("{NODE_IMAGE_REPOSITORY}/{mode}:{}", versions.node_images)
}

fn io_error(context: String) -> impl FnOnce(std::io::Error) -> PlaneError {
    move |source| PlaneError::Io { context, source }
}
