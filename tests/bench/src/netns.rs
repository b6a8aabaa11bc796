//! A network namespace of its own for one controller process, for a controller that binds a fixed
//! port (Stakater v1 serves `:9090` and has no flag to move it), so that H1's replicas run side by
//! side on one machine.
//!
//! Inside the namespace only loopback exists. The benchmark forwards, in its own process
//! ([`reloader_harness::NetworkNamespace`]):
//! - the API server: a listener on the namespace's `127.0.0.1:<API server port>` whose connections
//!   are copied to the plane's real API server, so the controller's kubeconfig (and the TLS server
//!   name, `127.0.0.1`, which the serving certificate covers) stays as it is;
//! - the controller's port: a listener on the host's loopback whose connections are copied to
//!   the namespace's `127.0.0.1:<port>` (its `/metrics` and `/live`).
//!
//! The controller joins the namespace through `nsenter`, which execs it (its pid is the
//! controller's own, for SIGKILL and RSS). Drop stops the forwarders and kills the holder; with
//! the controller gone too (its `Process` kills it on drop), the kernel removes the namespace.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::BenchError;
use reloader_harness::{Isolation, NetworkNamespace};

const LOOPBACK: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// One network namespace with its two forwarders; everything stops on drop.
#[derive(Debug)]
pub struct IsolatedNetwork {
    namespace: Arc<NetworkNamespace>,
    exposed_port: u16,
}

impl IsolatedNetwork {
    /// Creates the namespace, forwards the namespace's `127.0.0.1:<apiserver port>` to
    /// `apiserver` and a free host port to the namespace's `127.0.0.1:<inner_port>`.
    pub async fn create(
        name: &str,
        apiserver: SocketAddr,
        inner_port: u16,
        log_dir: &Path,
    ) -> Result<Self, BenchError> {
        let log = log_dir.join(format!("netns-{name}.log"));
        let namespace =
            Arc::new(NetworkNamespace::create(name, Isolation::Network, &log).await.map_err(measure)?);
        let inside_api = SocketAddr::V4(SocketAddrV4::new(LOOPBACK, apiserver.port()));
        namespace.reach_out(inside_api, apiserver).await.map_err(measure)?;
        let exposed = namespace
            .expose(
                SocketAddr::V4(SocketAddrV4::new(LOOPBACK, 0)),
                SocketAddr::V4(SocketAddrV4::new(LOOPBACK, inner_port)),
            )
            .await
            .map_err(measure)?;
        Ok(Self { namespace, exposed_port: exposed.port() })
    }

    /// The host port that reaches the controller's port inside the namespace.
    pub fn exposed_port(&self) -> u16 {
        self.exposed_port
    }

    /// The program and leading arguments that run a command inside the namespace (`nsenter`
    /// execs it, so the process started is the command itself).
    pub fn enter(&self, program: &Path) -> (PathBuf, Vec<String>) {
        self.namespace.enter(program)
    }
}

fn measure(error: reloader_harness::PlaneError) -> BenchError {
    BenchError::measure(error)
}
