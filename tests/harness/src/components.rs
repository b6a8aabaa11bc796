//! The command lines of the plane's components (docs/control-plane.md, "kube-apiserver flags").

use std::path::{Path, PathBuf};

use crate::PlaneError;
use crate::credentials::Credentials;
use crate::ports::try_free_port;

/// The annotation KWOK selects its fake nodes by.
pub const FAKE_NODE_ANNOTATION: (&str, &str) = ("kwok.x-k8s.io/node", "fake");

/// Ports of the components, all on 127.0.0.1.
#[derive(Debug, Clone, Copy)]
pub struct Ports {
    pub etcd_client: u16,
    pub etcd_peer: u16,
    pub apiserver: u16,
    pub controller_manager: u16,
    pub scheduler: u16,
}

impl Ports {
    /// Five distinct free ports ([`crate::ports`]).
    pub fn free() -> Result<Self, PlaneError> {
        let port = || {
            try_free_port().map_err(|source| PlaneError::Io { context: "choosing free ports".into(), source })
        };
        Ok(Self {
            etcd_client: port()?,
            etcd_peer: port()?,
            apiserver: port()?,
            controller_manager: port()?,
            scheduler: port()?,
        })
    }
}

/// Where each component keeps its files inside the plane's directory.
#[derive(Debug, Clone)]
pub struct Layout {
    pub dir: PathBuf,
    pub etcd_data: PathBuf,
    pub cert_dir: PathBuf,
    pub kubeconfig: PathBuf,
    /// HOME of KWOK, so no configuration of the user's leaks into the plane.
    pub kwok_home: PathBuf,
    pub ports: Ports,
}

impl Layout {
    pub fn new(dir: &Path, ports: Ports) -> Self {
        Self {
            dir: dir.to_owned(),
            etcd_data: dir.join("etcd"),
            cert_dir: dir.join("certs"),
            kubeconfig: dir.join("kubeconfig"),
            kwok_home: dir.join("kwok"),
            ports,
        }
    }

    pub fn log(&self, component: &str) -> PathBuf {
        self.dir.join(format!("{component}.log"))
    }

    /// The self-signed serving certificate (and its CA) kube-apiserver writes at first start.
    pub fn apiserver_certificate(&self) -> PathBuf {
        self.cert_dir.join("apiserver.crt")
    }

    pub fn apiserver_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.ports.apiserver)
    }

    pub fn etcd_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.ports.etcd_client)
    }
}

fn flag(name: &str, value: impl std::fmt::Display) -> String {
    format!("--{name}={value}")
}

pub fn etcd_args(layout: &Layout) -> Vec<String> {
    vec![
        flag("name", "reloader-dev"),
        flag("data-dir", layout.etcd_data.display()),
        flag("listen-client-urls", layout.etcd_url()),
        flag("advertise-client-urls", layout.etcd_url()),
        flag("listen-peer-urls", format!("http://127.0.0.1:{}", layout.ports.etcd_peer)),
        flag("initial-advertise-peer-urls", format!("http://127.0.0.1:{}", layout.ports.etcd_peer)),
        flag("initial-cluster", format!("reloader-dev=http://127.0.0.1:{}", layout.ports.etcd_peer)),
        // A throwaway store: durability buys nothing and fsync costs seconds on busy disks.
        "--unsafe-no-fsync".into(),
        flag("log-level", "warn"),
    ]
}

/// `with_controllers`: kube-controller-manager runs beside it, so the ServiceAccount admission
/// plugin can stay on (its serviceaccount controller creates `default`).
pub fn apiserver_args(layout: &Layout, credentials: &Credentials, with_controllers: bool) -> Vec<String> {
    let mut args = vec![
        flag("etcd-servers", layout.etcd_url()),
        flag("cert-dir", layout.cert_dir.display()),
        flag("secure-port", layout.ports.apiserver),
        flag("bind-address", "127.0.0.1"),
        flag("advertise-address", "127.0.0.1"),
        flag("service-cluster-ip-range", "10.0.0.0/24"),
        flag("allow-privileged", true),
        flag("authorization-mode", "RBAC"),
        flag("token-auth-file", credentials.token_file.display()),
        flag("service-account-issuer", format!("{}/", layout.apiserver_url())),
        flag("service-account-key-file", credentials.service_account_public_key.display()),
        flag("service-account-signing-key-file", credentials.service_account_key.display()),
        flag("profiling", false),
        // The `kubernetes` Service cannot point at a loopback address, and nothing here routes
        // to it anyway (no kube-proxy); without this the apiserver logs an error every 10 s.
        flag("endpoint-reconciler-type", "none"),
    ];
    if !with_controllers {
        args.push(flag("disable-admission-plugins", "ServiceAccount"));
    }
    args
}

/// Flags kube-controller-manager and kube-scheduler share.
fn controller_common_args(layout: &Layout, port: u16) -> Vec<String> {
    let kubeconfig = layout.kubeconfig.display();
    vec![
        flag("kubeconfig", &kubeconfig),
        flag("authentication-kubeconfig", &kubeconfig),
        flag("authorization-kubeconfig", &kubeconfig),
        flag("leader-elect", false),
        flag("bind-address", "127.0.0.1"),
        flag("secure-port", port),
        // The apiserver has no client CA or front proxy to publish, so there is nothing to look
        // up in kube-system/extension-apiserver-authentication.
        flag("authentication-skip-lookup", true),
    ]
}

pub fn controller_manager_args(layout: &Layout, credentials: &Credentials) -> Vec<String> {
    let mut args = controller_common_args(layout, layout.ports.controller_manager);
    args.extend([
        flag("controllers", "*"),
        flag("use-service-account-credentials", false),
        flag("root-ca-file", layout.apiserver_certificate().display()),
        flag("service-account-private-key-file", credentials.service_account_key.display()),
        flag("kube-api-qps", 200),
        flag("kube-api-burst", 400),
        // Parallel tests roll out many Deployments at once; the default of 5 workers queues them.
        flag("concurrent-deployment-syncs", 10),
        flag("concurrent-replicaset-syncs", 10),
    ]);
    args
}

pub fn scheduler_args(layout: &Layout) -> Vec<String> {
    controller_common_args(layout, layout.ports.scheduler)
}

pub fn kwok_args(layout: &Layout, stage_files: &[PathBuf]) -> Vec<String> {
    let (key, value) = FAKE_NODE_ANNOTATION;
    let mut args = vec![
        flag("kubeconfig", layout.kubeconfig.display()),
        flag("manage-all-nodes", false),
        flag("manage-nodes-with-annotation-selector", format!("{key}={value}")),
        // Pod IPs: a range apart from the service range.
        flag("cidr", "10.244.0.0/16"),
        // Renew a Lease per node (the bare binary's default is 0: none), as kwokctl does; without
        // it kube-controller-manager declares the nodes lost after ~50 s and their pods NotReady.
        flag("node-lease-duration-seconds", 40),
    ];
    args.extend(stage_files.iter().map(|file| flag("config", file.display())));
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        let ports = Ports { etcd_client: 1, etcd_peer: 2, apiserver: 3, controller_manager: 4, scheduler: 5 };
        Layout::new(Path::new("/plane"), ports)
    }

    #[test]
    fn free_ports_are_distinct() {
        let ports = Ports::free().unwrap();
        let mut all =
            [ports.etcd_client, ports.etcd_peer, ports.apiserver, ports.controller_manager, ports.scheduler];
        all.sort_unstable();
        assert!(all.windows(2).all(|pair| pair[0] != pair[1]), "{all:?}");
    }

    #[test]
    fn the_apiserver_admission_depends_on_the_controllers() {
        let dir = tempfile::tempdir().unwrap();
        let credentials = Credentials::generate(dir.path()).unwrap();
        let alone = apiserver_args(&layout(), &credentials, false);
        assert!(alone.contains(&"--disable-admission-plugins=ServiceAccount".to_owned()));
        let with_controllers = apiserver_args(&layout(), &credentials, true);
        assert!(!with_controllers.iter().any(|arg| arg.starts_with("--disable-admission-plugins")));
        assert!(with_controllers.contains(&"--authorization-mode=RBAC".to_owned()));
        assert!(with_controllers.contains(&"--service-account-issuer=https://127.0.0.1:3/".to_owned()));
    }

    #[test]
    fn kwok_gets_every_stage_file() {
        let stages = vec![PathBuf::from("/s/node.yaml"), PathBuf::from("/s/pod.yaml")];
        let args = kwok_args(&layout(), &stages);
        assert!(args.contains(&"--config=/s/node.yaml".to_owned()));
        assert!(args.contains(&"--config=/s/pod.yaml".to_owned()));
        assert!(args.contains(&"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake".to_owned()));
    }
}
