//! The real node's configuration files, as text (docs/control-plane.md, "The real node").

use std::path::{Path, PathBuf};

/// Where the node keeps its files, all below one directory.
#[derive(Debug, Clone)]
pub struct NodeLayout {
    pub dir: PathBuf,
}

impl NodeLayout {
    pub fn new(dir: &Path) -> Self {
        Self { dir: dir.to_owned() }
    }
    pub fn containerd_config(&self) -> PathBuf {
        self.dir.join("containerd.toml")
    }
    pub fn containerd_root(&self) -> PathBuf {
        self.dir.join("containerd-root")
    }
    pub fn containerd_state(&self) -> PathBuf {
        self.dir.join("containerd-state")
    }
    /// Short: a unix socket path has at most 107 bytes.
    pub fn containerd_socket(&self) -> PathBuf {
        self.dir.join("cri.sock")
    }
    pub fn cni_config_dir(&self) -> PathBuf {
        self.dir.join("cni")
    }
    pub fn cni_ipam_dir(&self) -> PathBuf {
        self.dir.join("cni-ipam")
    }
    pub fn kubelet_config(&self) -> PathBuf {
        self.dir.join("kubelet.yaml")
    }
    pub fn kubelet_root(&self) -> PathBuf {
        self.dir.join("kubelet")
    }
    /// The kubelet's pod log directory: `<namespace>_<pod>_<uid>/<container>/<restarts>.log`.
    pub fn pod_logs(&self) -> PathBuf {
        self.dir.join("pod-logs")
    }
    pub fn resolv_conf(&self) -> PathBuf {
        self.dir.join("resolv.conf")
    }
    /// The machine-wide values changed by the node, recorded before it starts.
    pub fn host_record(&self) -> PathBuf {
        self.dir.join("host-record")
    }
    pub fn log(&self, component: &str) -> PathBuf {
        self.dir.join(format!("{component}.log"))
    }
}

/// The node's fixed choices.
#[derive(Debug, Clone)]
pub struct NodeSettings {
    pub name: String,
    /// The node's address, on a dummy link inside the plane's namespace.
    pub address: &'static str,
    /// The pods' subnet, on the CNI bridge inside the plane's namespace.
    pub pod_subnet: &'static str,
    /// The cgroup (in every hierarchy) the kubelet puts the pods under.
    pub cgroup_root: String,
    /// The image the pod sandbox runs.
    pub sandbox_image: String,
}

/// containerd's configuration (version 4: the socket is a plugin setting, a top-level `[grpc]`
/// is ignored). Everything lives below the node's directory; the pods' network namespaces are
/// mounted under its state directory.
pub fn containerd_toml(layout: &NodeLayout, settings: &NodeSettings, runc: &Path, cni_bin: &Path) -> String {
    let socket = layout.containerd_socket();
    format!(
        r#"version = 4
root = "{root}"
state = "{state}"

[plugins.'io.containerd.server.v1.grpc']
  address = "{socket}"

[plugins.'io.containerd.server.v1.ttrpc']
  address = "{socket}.ttrpc"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{sandbox}"

[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false
  disable_apparmor = true
  # This machine's root lacks CAP_SYS_RESOURCE: never raise a container's oom_score_adj.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      disable_pause_image_pull = true
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        SystemdCgroup = false
        Root = "{state}/runc"
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["{cni_bin}"]
    conf_dir = "{cni_conf}"
    use_internal_loopback = true
"#,
        root = layout.containerd_root().display(),
        state = layout.containerd_state().display(),
        socket = socket.display(),
        sandbox = settings.sandbox_image,
        runc = runc.display(),
        cni_bin = cni_bin.display(),
        cni_conf = layout.cni_config_dir().display(),
    )
}

/// One bridge, addresses from host-local; no masquerade (nothing leaves the namespace) and so no
/// iptables rule.
pub fn cni_conflist(layout: &NodeLayout, settings: &NodeSettings) -> String {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "reloader-node",
        "plugins": [{
            "type": "bridge",
            "bridge": "cni0",
            "isGateway": true,
            "ipMasq": false,
            "hairpinMode": true,
            "ipam": {
                "type": "host-local",
                "ranges": [[{ "subnet": settings.pod_subnet }]],
                "routes": [{ "dst": "0.0.0.0/0" }],
                "dataDir": layout.cni_ipam_dir(),
            },
        }],
    })
    .to_string()
}

/// The kubelet's configuration: cgroupfs under the node's own cgroup, no swap or cgroup v1
/// refusal, its own OOM score left alone (no CAP_SYS_RESOURCE here), eviction thresholds low
/// enough that a busy test machine evicts nothing, and the pod logs under the node's directory.
pub fn kubelet_yaml(layout: &NodeLayout, settings: &NodeSettings) -> String {
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
address: {address}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
cgroupDriver: cgroupfs
cgroupRoot: {cgroup_root}
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
oomScoreAdj: 0
protectKernelDefaults: false
containerRuntimeEndpoint: unix://{socket}
podLogsDir: {pod_logs}
resolvConf: {resolv_conf}
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%"
  nodefs.inodesFree: "1%"
  imagefs.available: "1%"
nodeStatusUpdateFrequency: 2s
syncFrequency: 10s
"#,
        address = settings.address,
        cgroup_root = settings.cgroup_root,
        socket = layout.containerd_socket().display(),
        pod_logs = layout.pod_logs().display(),
        resolv_conf = layout.resolv_conf().display(),
    )
}

/// The kubelet's flags; `kubeconfig` is the plane's admin kubeconfig (127.0.0.1:<port> is the API
/// server inside the plane's namespace too).
pub fn kubelet_args(layout: &NodeLayout, settings: &NodeSettings, kubeconfig: &Path) -> Vec<String> {
    vec![
        format!("--config={}", layout.kubelet_config().display()),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--root-dir={}", layout.kubelet_root().display()),
        format!("--cert-dir={}", layout.kubelet_root().join("pki").display()),
        format!("--hostname-override={}", settings.name),
        format!("--node-ip={}", settings.address),
        "--v=1".to_owned(),
    ]
}

/// The content lines of a CRI log file (`<time> <stream> <F|P> <content>`); a partial line (`P`)
/// is joined with what follows.
pub fn cri_log_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut partial = String::new();
    for line in text.lines() {
        let mut fields = line.splitn(4, ' ');
        let (Some(_time), Some(_stream), Some(tag), content) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        partial.push_str(content.unwrap_or_default());
        if tag == "F" {
            lines.push(std::mem::take(&mut partial));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> NodeSettings {
        NodeSettings {
            name: "node-a".into(),
            address: "10.254.0.1",
            pod_subnet: "10.88.0.0/16",
            cgroup_root: "/reloader-node".into(),
            sandbox_image: "example/pause:1".into(),
        }
    }

    #[test]
    fn every_path_lives_below_the_node_directory() {
        let layout = NodeLayout::new(Path::new("/n"));
        let containerd =
            containerd_toml(&layout, &settings(), Path::new("/usr/sbin/runc"), Path::new("/cni"));
        for line in containerd.lines().filter(|line| line.contains("= \"/")) {
            let value = line.split('"').nth(1).unwrap();
            assert!(value.starts_with("/n/") || value == "/usr/sbin/runc" || value == "/cni", "{line}");
        }
        assert!(containerd.contains("sandbox = \"example/pause:1\""));
        let kubelet = kubelet_yaml(&layout, &settings());
        assert!(kubelet.contains("podLogsDir: /n/pod-logs"), "{kubelet}");
        assert!(kubelet.contains("cgroupRoot: /reloader-node"), "{kubelet}");
        let cni: serde_json::Value = serde_json::from_str(&cni_conflist(&layout, &settings())).unwrap();
        assert_eq!(cni["plugins"][0]["ipam"]["dataDir"], "/n/cni-ipam");
        assert_eq!(cni["plugins"][0]["ipMasq"], false);
    }

    #[test]
    fn cri_log_lines_join_partial_lines_and_skip_garbage() {
        let text = "2026-11-28T00:00:00Z stdout F env A=1\n\
                    2026-11-28T00:00:01Z stdout P half \n\
                    2026-11-28T00:00:01Z stdout F and half\n\
                    garbage\n\
                    2026-11-28T00:00:02Z stderr F \n";
        assert_eq!(cri_log_lines(text), vec!["env A=1", "half and half", ""]);
    }
}
