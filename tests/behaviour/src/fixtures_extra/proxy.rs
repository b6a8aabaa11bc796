//! A TCP proxy in front of kube-apiserver that counts connections: a reachable cluster that can
//! tell whether a process ever talked to it. TLS passes through untouched (the serving
//! certificate names 127.0.0.1, whatever the port).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use reloader_harness::{ControlPlane, PlaneError};

/// Forwards every connection to the plane's API server; stopped on drop.
pub struct ApiProxy {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    server: JoinHandle<()>,
}

impl ApiProxy {
    /// Listens on a free port of 127.0.0.1 and forwards to `plane`'s kube-apiserver.
    pub async fn start(plane: &ControlPlane) -> Result<Self, PlaneError> {
        let upstream = plane.url().trim_start_matches("https://").to_owned();
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|source| PlaneError::Io { context: "binding the API proxy".into(), source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| PlaneError::Io { context: "reading the API proxy's address".into(), source })?;
        let connections = Arc::new(AtomicUsize::new(0));
        let counter = connections.clone();
        let server = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        });
        Ok(Self { addr, connections, server })
    }

    /// `https://127.0.0.1:<proxy port>`, for a kubeconfig's `server`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for ApiProxy {
    fn drop(&mut self) {
        self.server.abort();
    }
}
