//! A network namespace of its own for one controller process, for a controller that binds a fixed
//! port (Stakater v1 serves `:9090` and has no flag to move it), so that H1's replicas run side by
//! side on one machine.
//!
//! Inside the namespace only loopback exists. The benchmark forwards, in its own process:
//! - the API server: a listener on the namespace's `127.0.0.1:<API server port>` whose connections
//!   are copied to the plane's real API server, so the controller's kubeconfig (and the TLS server
//!   name, `127.0.0.1`, which the serving certificate covers) stays as it is;
//! - the controller's port: a listener on the host's loopback whose connections are copied to
//!   the namespace's `127.0.0.1:<port>` (its `/metrics` and `/live`).
//!
//! Sockets belong to the namespace of the thread that creates them, so each in-namespace socket is
//! made by a short-lived thread that first joins the namespace (`setns`); the sockets then work
//! from any thread. A `sleep` started by `unshare --net` holds the namespace; the controller joins
//! it through `nsenter`, which execs it (its pid is the controller's own, for SIGKILL and RSS).
//! Drop stops the forwarders and kills the holder; with the controller gone too (its `Process`
//! kills it on drop), nothing references the namespace and the kernel removes it.

use std::fs::File;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener as StdListener, TcpStream as StdStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

use super::BenchError;
use reloader_harness::process::Process;

const UNSHARE: &str = "unshare";
const NSENTER: &str = "nsenter";
const LOOPBACK: Ipv4Addr = Ipv4Addr::LOCALHOST;
/// How long the holder gets to create the namespace before we look for it.
const HOLDER_TIMEOUT: Duration = Duration::from_secs(5);

/// One network namespace with its two forwarders; everything stops on drop.
#[derive(Debug)]
pub struct IsolatedNetwork {
    holder: Process,
    namespace: Arc<File>,
    exposed_port: u16,
    forwarders: Vec<JoinHandle<()>>,
}

impl IsolatedNetwork {
    /// Creates the namespace, brings its loopback up, forwards the namespace's
    /// `127.0.0.1:<apiserver port>` to `apiserver` and a free host port to the namespace's
    /// `127.0.0.1:<inner_port>`.
    pub async fn create(
        name: &str,
        apiserver: SocketAddr,
        inner_port: u16,
        log_dir: &Path,
    ) -> Result<Self, BenchError> {
        let log = log_dir.join(format!("netns-{name}.log"));
        let args = ["--net", "--", "sleep", "infinity"].map(String::from);
        let holder = Process::start(&format!("netns-{name}"), Path::new(UNSHARE), &args, &[], &log)?;
        let namespace = Arc::new(wait_for_namespace(holder.pid(), &log).await?);
        let mut network = Self { holder, namespace, exposed_port: 0, forwarders: Vec::new() };
        network.bring_loopback_up().await?;

        let namespace = network.namespace.clone();
        let api_listener = in_namespace(namespace.clone(), move || {
            let listener = StdListener::bind(SocketAddrV4::new(LOOPBACK, apiserver.port()))?;
            listener.set_nonblocking(true)?;
            Ok(listener)
        })
        .await
        .map_err(io_error("listening for the API server inside the namespace"))?;
        let api_listener = TcpListener::from_std(api_listener).map_err(io_error("registering a listener"))?;
        network.forwarders.push(tokio::spawn(forward(api_listener, move || async move {
            TcpStream::connect(apiserver).await
        })));

        let exposed = TcpListener::bind(SocketAddrV4::new(LOOPBACK, 0))
            .await
            .map_err(io_error("listening on the host's loopback"))?;
        network.exposed_port = exposed.local_addr().map_err(io_error("reading the exposed port"))?.port();
        network.forwarders.push(tokio::spawn(forward(exposed, move || {
            let namespace = namespace.clone();
            async move {
                let stream = in_namespace(namespace, move || {
                    let stream = StdStream::connect(SocketAddrV4::new(LOOPBACK, inner_port))?;
                    stream.set_nonblocking(true)?;
                    Ok(stream)
                })
                .await?;
                TcpStream::from_std(stream)
            }
        })));
        Ok(network)
    }

    /// The host port that reaches the controller's port inside the namespace.
    pub fn exposed_port(&self) -> u16 {
        self.exposed_port
    }

    /// The program and leading arguments that run a command inside the namespace (`nsenter`
    /// execs it, so the process started is the command itself).
    pub fn enter(&self, program: &Path) -> (PathBuf, Vec<String>) {
        let args = vec![
            format!("--net=/proc/{}/ns/net", self.holder.pid()),
            "--".to_owned(),
            program.display().to_string(),
        ];
        (PathBuf::from(NSENTER), args)
    }

    /// `ip link set lo up` without iproute2 (not in a minimal base system): SIOCSIFFLAGS on a
    /// socket made inside the namespace, which acts on the namespace's own `lo`.
    async fn bring_loopback_up(&self) -> Result<(), BenchError> {
        in_namespace(self.namespace.clone(), || {
            // SAFETY: a plain socket(2) whose descriptor is owned at once, and two ioctl(2) calls
            // on it with a zeroed `ifreq` naming `lo` (NUL-terminated within IFNAMSIZ).
            #[allow(unsafe_code)]
            unsafe {
                let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                let socket = OwnedFd::from_raw_fd(fd);
                let mut request: libc::ifreq = std::mem::zeroed();
                for (to, from) in request.ifr_name.iter_mut().zip(b"lo\0") {
                    *to = *from as libc::c_char;
                }
                if libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS, &mut request) < 0 {
                    return Err(io::Error::last_os_error());
                }
                request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
                if libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS, &request) < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        })
        .await
        .map_err(io_error("bringing the namespace's loopback up"))
    }
}

impl Drop for IsolatedNetwork {
    fn drop(&mut self) {
        for forwarder in &self.forwarders {
            forwarder.abort();
        }
        self.holder.kill();
    }
}

/// Opens the holder's namespace once `unshare` has made it (it differs from ours from then on).
async fn wait_for_namespace(holder: u32, log: &Path) -> Result<File, BenchError> {
    let ours = std::fs::metadata("/proc/self/ns/net").map_err(io_error("reading our network namespace"))?;
    let path = format!("/proc/{holder}/ns/net");
    let deadline = tokio::time::Instant::now() + HOLDER_TIMEOUT;
    loop {
        if let Ok(theirs) = std::fs::metadata(&path)
            && std::os::unix::fs::MetadataExt::ino(&theirs) != std::os::unix::fs::MetadataExt::ino(&ours)
        {
            return File::open(&path).map_err(io_error("opening the new network namespace"));
        }
        if tokio::time::Instant::now() >= deadline {
            let said = reloader_harness::process::tail(log, 5).map(|l| l.join("\n")).unwrap_or_default();
            return Err(BenchError::measure(format!(
                "`{UNSHARE} --net` made no network namespace (root or user namespaces needed): {said}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Runs `work` on a new thread that has joined `namespace`, so the sockets it makes live there.
async fn in_namespace<T: Send + 'static>(
    namespace: Arc<File>,
    work: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let (reply, answer) = oneshot::channel();
    std::thread::spawn(move || {
        // SAFETY: setns(2) only changes this thread's network namespace; the descriptor is an open
        // namespace file kept alive by the Arc for the call.
        #[allow(unsafe_code)]
        let joined = unsafe { libc::setns(namespace.as_raw_fd(), libc::CLONE_NEWNET) };
        let result = if joined == 0 { work() } else { Err(io::Error::last_os_error()) };
        let _ = reply.send(result);
    });
    answer.await.map_err(|_| io::Error::other("the namespace thread ended without answering"))?
}

/// Accepts on `listener` and copies each connection both ways to one that `connect` opens.
async fn forward<C, F>(listener: TcpListener, connect: C)
where
    C: Fn() -> F,
    F: Future<Output = io::Result<TcpStream>> + Send + 'static,
{
    // Owned here, so aborting the forwarder also ends its connections.
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let Ok((mut inbound, _)) = listener.accept().await else {
            // Out of descriptors or the like: let it pass rather than spin.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let outbound = connect();
        connections.spawn(async move {
            // A peer not listening yet (the controller starting) just closes this connection.
            if let Ok(mut outbound) = outbound.await {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
    }
}

fn io_error(context: &'static str) -> impl FnOnce(io::Error) -> BenchError {
    move |source| BenchError::Io { context: context.to_owned(), source }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// Network namespaces need root (or user namespaces); where `unshare --net` cannot make one,
    /// H1's Stakater column says so at run time and this test has nothing to check.
    fn namespaces_available() -> bool {
        std::process::Command::new(UNSHARE)
            .args(["--net", "--", "true"])
            .status()
            .is_ok_and(|status| status.success())
    }

    #[tokio::test]
    async fn forwards_the_api_server_in_and_the_controller_port_out() {
        if !namespaces_available() {
            eprintln!("skipped: `unshare --net` cannot make a network namespace here");
            return;
        }
        let logs = tempfile::tempdir().unwrap();
        // The "API server" on the host: answers each connection with what it was sent, upper-cased.
        let apiserver = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let apiserver_address = apiserver.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = apiserver.accept().await {
                let mut buffer = [0u8; 5];
                stream.read_exact(&mut buffer).await.unwrap();
                stream.write_all(&buffer.to_ascii_uppercase()).await.unwrap();
            }
        });
        let inner_port = reloader_harness::free_port();
        let network =
            IsolatedNetwork::create("test", apiserver_address, inner_port, logs.path()).await.unwrap();

        // Inside, the API server's own address reaches it (a listener on the same port in the same
        // namespace as the real one could not have been bound: the namespace is another one).
        let echoed = in_namespace(network.namespace.clone(), move || {
            let mut stream = StdStream::connect(SocketAddrV4::new(LOOPBACK, apiserver_address.port()))?;
            stream.write_all(b"hello")?;
            let mut answer = [0u8; 5];
            stream.read_exact(&mut answer)?;
            Ok(answer)
        })
        .await
        .unwrap();
        assert_eq!(&echoed, b"HELLO");

        // The controller's port inside is reached from the host through the exposed port.
        let inner = in_namespace(network.namespace.clone(), move || {
            StdListener::bind(SocketAddrV4::new(LOOPBACK, inner_port))
        })
        .await
        .unwrap();
        let served = std::thread::spawn(move || {
            let (mut stream, _) = inner.accept()?;
            stream.write_all(b"alive")
        });
        let mut outside =
            TcpStream::connect(SocketAddrV4::new(LOOPBACK, network.exposed_port())).await.unwrap();
        let mut answer = [0u8; 5];
        outside.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"alive");
        served.join().unwrap().unwrap();

        // Drop kills the holder: the namespace's last process is gone.
        let holder = network.holder.pid();
        drop(network);
        assert!(!Path::new(&format!("/proc/{holder}")).exists(), "the holder {holder} still runs");
    }
}
