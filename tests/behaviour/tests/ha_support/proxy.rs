//! A TCP proxy in front of kube-apiserver that can cut every connection through it, so one
//! client loses its watches while the API server and everyone else carry on, or make them hang
//! as a network partition does. TLS passes through untouched (the serving certificate names
//! 127.0.0.1, whatever the port).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the proxy does with traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Forward,
    /// Every connection closed, new ones refused.
    Cut,
    /// A partition: connections stay open (new ones are accepted) but no byte crosses in
    /// either direction; what was sent meanwhile is delivered when it heals, as TCP's
    /// retransmissions would.
    Hang,
}

pub struct CuttableProxy {
    port: u16,
    cut: Arc<watch::Sender<Mode>>,
    acceptor: JoinHandle<()>,
    _dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl CuttableProxy {
    /// Listens on a free port, forwarding to `upstream` (`https://127.0.0.1:<port>`), and writes
    /// a copy of `kubeconfig` that points at the proxy.
    pub async fn start(upstream: &str, kubeconfig: &Path) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let target = upstream.trim_start_matches("https://").to_owned();
        let (cut, _) = watch::channel(Mode::Forward);
        let cut = Arc::new(cut);
        let acceptor = tokio::spawn(accept(listener, target, cut.clone()));
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("kubeconfig");
        let text = std::fs::read_to_string(kubeconfig)?;
        assert!(text.contains(upstream), "the kubeconfig names {upstream}");
        std::fs::write(&path, text.replace(upstream, &format!("https://127.0.0.1:{port}")))?;
        Ok(CuttableProxy { port, cut, acceptor, _dir: dir, kubeconfig: path })
    }

    /// A kubeconfig whose server is this proxy.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Closes every open connection and refuses new ones until [`Self::restore`].
    pub fn cut(&self) {
        self.cut.send_replace(Mode::Cut);
    }

    /// Partitions the client from the API server until [`Self::restore`]: its requests and
    /// connection attempts hang rather than fail.
    pub fn hang(&self) {
        self.cut.send_replace(Mode::Hang);
    }

    pub fn restore(&self) {
        self.cut.send_replace(Mode::Forward);
    }
}

impl Drop for CuttableProxy {
    fn drop(&mut self) {
        self.acceptor.abort();
        self.cut.send_replace(Mode::Cut);
    }
}

async fn accept(listener: TcpListener, target: String, mode: Arc<watch::Sender<Mode>>) {
    while let Ok((client, _)) = listener.accept().await {
        if *mode.borrow() == Mode::Cut {
            continue; // dropped: the client sees the connection closed at once
        }
        let target = target.clone();
        let (mut mode_rx, upstream_mode, downstream_mode) =
            (mode.subscribe(), mode.subscribe(), mode.subscribe());
        tokio::spawn(async move {
            // A connection made during a partition reaches the server only once it heals.
            if mode_rx.wait_for(|m| *m != Mode::Hang).await.map(|m| *m == Mode::Cut).unwrap_or(true) {
                return;
            }
            let Ok(server) = TcpStream::connect(&target).await else { return };
            let (client_read, client_write) = client.into_split();
            let (server_read, server_write) = server.into_split();
            let both_ways = async {
                tokio::join!(
                    pump(client_read, server_write, upstream_mode),
                    pump(server_read, client_write, downstream_mode)
                );
            };
            tokio::select! {
                () = both_ways => {}
                _ = mode_rx.wait_for(|m| *m == Mode::Cut) => {}
            }
        });
    }
}

/// Copies one direction, holding every byte while the proxy hangs.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut mode: watch::Receiver<Mode>,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        if mode.wait_for(|m| *m == Mode::Forward).await.is_err() {
            return;
        }
        let n = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => n,
        };
        // Read just before a partition began: delivered only when it heals.
        if mode.wait_for(|m| *m == Mode::Forward).await.is_err() || to.write_all(&buffer[..n]).await.is_err()
        {
            return;
        }
    }
}
