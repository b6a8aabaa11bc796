//! A TCP proxy in front of kube-apiserver that can cut every connection through it, so one
//! client loses its watches while the API server and everyone else carry on. TLS passes through
//! untouched (the serving certificate names 127.0.0.1, whatever the port).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub struct CuttableProxy {
    port: u16,
    cut: Arc<watch::Sender<bool>>,
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
        let (cut, _) = watch::channel(false);
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
        self.cut.send_replace(true);
    }

    pub fn restore(&self) {
        self.cut.send_replace(false);
    }
}

impl Drop for CuttableProxy {
    fn drop(&mut self) {
        self.acceptor.abort();
        self.cut.send_replace(true);
    }
}

async fn accept(listener: TcpListener, target: String, cut: Arc<watch::Sender<bool>>) {
    while let Ok((mut client, _)) = listener.accept().await {
        if *cut.borrow() {
            continue; // dropped: the client sees the connection closed at once
        }
        let target = target.clone();
        let mut cut_rx = cut.subscribe();
        tokio::spawn(async move {
            let Ok(mut server) = TcpStream::connect(&target).await else { return };
            tokio::select! {
                _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                _ = cut_rx.wait_for(|cut| *cut) => {}
            }
        });
    }
}
