//! A real Kubernetes control plane on 127.0.0.1 for integration tests, and nothing fake about it:
//! etcd, kube-apiserver (RBAC, TokenRequest), kube-controller-manager, kube-scheduler and KWOK
//! (fake nodes whose pods become Ready), built from Go modules by `hack/build` into the cache.
//!
//! Also here: the `reloader` binary as a test subject ([`Reloader`]), kubeconfigs for other
//! identities ([`KubeconfigFile`]), and the `reloader-cluster` binary behind `hack/cluster`. The
//! behaviour tests (`reloader-tests`) and the benchmark (`reloader-bench`) build on this crate.
//!
//! A test binary shares one plane; each test gets its own namespace (the behaviour tests get
//! both, and a client, from one `TestEnv`):
//!
//! ```no_run
//! # async fn example() -> Result<(), reloader_harness::PlaneError> {
//! use reloader_harness::ControlPlane;
//! let plane = ControlPlane::shared().await;
//! let _logs = plane.dump_logs_on_panic();
//! let ns = plane.namespace().await;
//! let client = plane.client();
//! let configmaps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = ns.api(&client);
//! # Ok(()) }
//! ```
//!
//! Processes never outlive the test binary (see [`process`]); a test that stops kube-apiserver
//! must start a plane of its own ([`ControlPlane::start`]) so it does not disturb the others.

use std::path::PathBuf;
use std::time::Duration;

mod binaries;
mod cgroup;
mod components;
mod crds;
mod credentials;
mod faketime;
mod kubeconfig;
mod netns;
mod node;
mod nodes;
mod plane;
mod ports;
pub mod process;
mod reloader;
mod testing;
mod wait;

pub use binaries::{Binaries, Versions, cache_dir};
pub use cgroup::{Cgroup, CgroupError, CgroupUsage, CgroupVersion};
pub use crds::Crd;
pub use credentials::write_private;
pub use faketime::{LIBFAKETIME_ENV, libfaketime};
pub use kubeconfig::KubeconfigFile;
pub use netns::{Isolation, NetworkNamespace, forward};
pub use node::{Leftovers, NodeBinaries, RealNode, cri_log_lines};
pub use plane::{ControlPlane, PlaneOptions};
pub use ports::free_port;
pub use reloader::{Reloader, ReloaderBuilder, reloader_binary};
pub use testing::{PanicLogDump, TestNamespace};
pub use wait::{NotYet, wait_until};

/// Why the plane could not start or do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum PlaneError {
    #[error(
        "control-plane binaries are missing from {} ({}); build them with `hack/build` \
         (a cold build takes about 25 minutes on 2 cores; RELOADER_DEV_CACHE moves the cache, \
         RELOADER_KUBERNETES_VERSION picks a version of the matrix, passed to both)",
        cache.display(),
        missing.iter().map(|path| path.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    MissingBinaries { cache: PathBuf, missing: Vec<PathBuf> },
    #[error("the control plane in {} did not start (its logs are kept there): {cause}", dir.display())]
    NotStarted { dir: PathBuf, cause: Box<PlaneError> },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{command} failed: {detail}")]
    Command { command: String, detail: String },
    #[error("timed out after {after:?} waiting for {what}; last observed: {last}")]
    Timeout { what: String, after: Duration, last: String },
    #[error("{component} exited ({status}); the end of {log}:\n{tail}")]
    Exited { component: String, status: String, log: String, tail: String },
    #[error("reading the admin kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("HTTP probe client: {0}")]
    Http(#[from] reqwest::Error),
    #[error("{what}: {detail}")]
    Manifest { what: String, detail: String },
}
