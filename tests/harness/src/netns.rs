//! A network namespace of the harness's own, and TCP forwarders across its border.
//!
//! A `sleep` started by `unshare` holds the namespace (and, when asked, a private mount namespace
//! beside it); processes join it through `nsenter`, which execs them, so their pid is their own.
//! Sockets belong to the namespace of the thread that creates them, so each in-namespace socket is
//! made by a short-lived thread that first joins the namespace (`setns`); the sockets then work
//! from any thread. Dropping the namespace stops its forwarders and kills the holder; once the
//! processes that joined it are gone too, the kernel removes it, and with it every address,
//! route, link and mount made inside.
//!
//! Users: the benchmark (a Stakater replica that binds a fixed port), and the plane of the real
//! node (docs/control-plane.md, "The real node"), whose components all run inside one.

use std::fs::File;
use std::io;
use std::net::{SocketAddr, TcpListener as StdListener, TcpStream as StdStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

use crate::PlaneError;
use crate::process::{Process, tail};

const UNSHARE: &str = "unshare";
const NSENTER: &str = "nsenter";
/// How long the holder gets to create the namespace before we look for it.
const HOLDER_TIMEOUT: Duration = Duration::from_secs(5);

/// Which namespaces the holder makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// A network namespace only.
    Network,
    /// A network namespace and a private mount namespace (mounts made inside never show outside,
    /// and vanish with the namespace).
    NetworkAndMounts,
}

/// One network namespace with the forwarders that serve it; everything stops on drop.
#[derive(Debug)]
pub struct NetworkNamespace {
    holder: Mutex<Process>,
    holder_pid: u32,
    isolation: Isolation,
    namespace: Arc<File>,
    forwarders: Mutex<Vec<JoinHandle<()>>>,
}

impl NetworkNamespace {
    /// Creates the namespace and brings its loopback up. The holder logs to `log`.
    pub async fn create(name: &str, isolation: Isolation, log: &Path) -> Result<Self, PlaneError> {
        let mut args = vec!["--net".to_owned()];
        if isolation == Isolation::NetworkAndMounts {
            args.extend(["--mount".to_owned(), "--propagation=private".to_owned()]);
        }
        args.extend(["--", "sleep", "infinity"].map(String::from));
        let holder = Process::start(&format!("netns-{name}"), Path::new(UNSHARE), &args, &[], log)?;
        let holder_pid = holder.pid();
        let namespace = Arc::new(wait_for_namespace(holder_pid, log).await?);
        let network = Self {
            holder: Mutex::new(holder),
            holder_pid,
            isolation,
            namespace,
            forwarders: Mutex::new(Vec::new()),
        };
        network.run(bring_loopback_up).await.map_err(io_error("bringing the namespace's loopback up"))?;
        Ok(network)
    }

    /// The holder's pid: `/proc/<pid>/ns/net` is the namespace.
    pub fn holder_pid(&self) -> u32 {
        self.holder_pid
    }

    /// The program and leading arguments that run `program` inside the namespace (and its mount
    /// namespace, when it has one); `nsenter` execs it.
    pub fn enter(&self, program: &Path) -> (PathBuf, Vec<String>) {
        let mut args = vec![format!("--net=/proc/{}/ns/net", self.holder_pid)];
        if self.isolation == Isolation::NetworkAndMounts {
            args.push(format!("--mount=/proc/{}/ns/mnt", self.holder_pid));
        }
        args.extend(["--".to_owned(), program.display().to_string()]);
        (PathBuf::from(NSENTER), args)
    }

    /// Runs a short command inside the namespace and fails with its output when it fails.
    pub fn command(&self, program: &str, args: &[&str]) -> Result<String, PlaneError> {
        let (nsenter, mut entered) = self.enter(Path::new(program));
        entered.extend(args.iter().map(|arg| (*arg).to_owned()));
        let shown = format!("{program} {}", args.join(" "));
        let output = Command::new(&nsenter)
            .args(&entered)
            .output()
            .map_err(|source| PlaneError::Io { context: format!("running {shown}"), source })?;
        if !output.status.success() {
            return Err(PlaneError::Command {
                command: shown,
                detail: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            });
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Runs `work` on a new thread that has joined the namespace, so the sockets it makes live there.
    pub async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> io::Result<T> + Send + 'static,
    ) -> io::Result<T> {
        let namespace = self.namespace.clone();
        let (reply, answer) = oneshot::channel();
        std::thread::spawn(move || {
            // SAFETY: setns(2) only changes this thread's network namespace; the descriptor is an
            // open namespace file kept alive by the Arc for the call.
            #[allow(unsafe_code)]
            let joined = unsafe { libc::setns(namespace.as_raw_fd(), libc::CLONE_NEWNET) };
            let result = if joined == 0 { work() } else { Err(io::Error::last_os_error()) };
            let _ = reply.send(result);
        });
        answer.await.map_err(|_| io::Error::other("the namespace thread ended without answering"))?
    }

    /// A listener on `address` inside the namespace.
    pub async fn listen(&self, address: SocketAddr) -> io::Result<TcpListener> {
        let listener = self
            .run(move || {
                let listener = StdListener::bind(address)?;
                listener.set_nonblocking(true)?;
                Ok(listener)
            })
            .await?;
        TcpListener::from_std(listener)
    }

    /// A connection to `address` inside the namespace.
    pub async fn connect(&self, address: SocketAddr) -> io::Result<TcpStream> {
        let stream = self
            .run(move || {
                let stream = StdStream::connect(address)?;
                stream.set_nonblocking(true)?;
                Ok(stream)
            })
            .await?;
        TcpStream::from_std(stream)
    }

    /// Forwards the host's `outside` to `inside` in the namespace, and returns the address bound
    /// outside (port 0 picks a free one). With the same address on both sides, a client outside
    /// reaches an in-namespace server as if it listened on the host (same port, same TLS name).
    pub async fn expose(
        self: &Arc<Self>,
        outside: SocketAddr,
        inside: SocketAddr,
    ) -> Result<SocketAddr, PlaneError> {
        let listener = TcpListener::bind(outside)
            .await
            .map_err(io_error(format!("listening on the host's {outside} to forward it inward")))?;
        let bound = listener.local_addr().map_err(io_error("reading a forwarder's address"))?;
        self.forward_inward(listener, inside);
        Ok(bound)
    }

    /// Forwards `inside` (an address in the namespace) to `outside` on the host: an in-namespace
    /// client reaches a host server.
    pub async fn reach_out(&self, inside: SocketAddr, outside: SocketAddr) -> Result<(), PlaneError> {
        let listener = self
            .listen(inside)
            .await
            .map_err(io_error(format!("listening on {inside} inside the namespace")))?;
        self.keep(tokio::spawn(forward(listener, move || async move { TcpStream::connect(outside).await })));
        Ok(())
    }

    /// Forwards `from` to `to`, both inside the namespace.
    pub async fn relay(self: &Arc<Self>, from: SocketAddr, to: SocketAddr) -> Result<(), PlaneError> {
        let listener =
            self.listen(from).await.map_err(io_error(format!("listening on {from} inside the namespace")))?;
        self.forward_inward(listener, to);
        Ok(())
    }

    /// Copies each connection `listener` accepts to `to` inside the namespace. The forwarder holds
    /// the namespace weakly: it must not keep it alive.
    fn forward_inward(self: &Arc<Self>, listener: TcpListener, to: SocketAddr) {
        let namespace = Arc::downgrade(self);
        self.keep(tokio::spawn(forward(listener, move || {
            let namespace = namespace.clone();
            async move {
                let namespace = namespace.upgrade().ok_or_else(|| io::Error::other("namespace gone"))?;
                namespace.connect(to).await
            }
        })));
    }

    fn keep(&self, forwarder: JoinHandle<()>) {
        self.forwarders.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(forwarder);
    }

    /// Kills the holder (forwarders stop on drop). Processes that joined the namespace keep it
    /// alive until they end.
    pub fn stop(&self) {
        for forwarder in self.forwarders.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).drain(..) {
            forwarder.abort();
        }
        self.holder.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).kill();
    }
}

impl Drop for NetworkNamespace {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Opens the holder's namespace once `unshare` has made it (it differs from ours from then on).
async fn wait_for_namespace(holder: u32, log: &Path) -> Result<File, PlaneError> {
    use std::os::unix::fs::MetadataExt;
    let ours = std::fs::metadata("/proc/self/ns/net").map_err(io_error("reading our network namespace"))?;
    let path = format!("/proc/{holder}/ns/net");
    let deadline = tokio::time::Instant::now() + HOLDER_TIMEOUT;
    loop {
        if let Ok(theirs) = std::fs::metadata(&path)
            && theirs.ino() != ours.ino()
        {
            return File::open(&path).map_err(io_error("opening the new network namespace"));
        }
        if tokio::time::Instant::now() >= deadline {
            let said = tail(log, 5).map(|lines| lines.join("\n")).unwrap_or_default();
            return Err(PlaneError::Command {
                command: format!("{UNSHARE} --net"),
                detail: format!("made no network namespace (root or user namespaces needed): {said}"),
            });
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `ip link set lo up` without iproute2: SIOCSIFFLAGS on a socket made inside the namespace,
/// which acts on the namespace's own `lo`.
fn bring_loopback_up() -> io::Result<()> {
    // SAFETY: a plain socket(2) whose descriptor is owned at once, and two ioctl(2) calls on it
    // with a zeroed `ifreq` naming `lo` (NUL-terminated within IFNAMSIZ).
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
}

/// Accepts on `listener` and copies each connection both ways to one that `connect` opens.
pub async fn forward<C, F>(listener: TcpListener, connect: C)
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
            // A peer not listening yet (a component starting) just closes this connection.
            if let Ok(mut outbound) = outbound.await {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
    }
}

fn io_error(context: impl Into<String>) -> impl FnOnce(io::Error) -> PlaneError {
    let context = context.into();
    move |source| PlaneError::Io { context, source }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{Ipv4Addr, SocketAddrV4};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    fn loopback(port: u16) -> SocketAddr {
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port))
    }

    #[tokio::test]
    async fn forwards_a_host_server_in_and_an_inner_server_out() {
        let logs = tempfile::tempdir().unwrap();
        // A server on the host: answers each connection with what it was sent, upper-cased.
        let host_server = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let host_address = host_server.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = host_server.accept().await {
                let mut buffer = [0u8; 5];
                stream.read_exact(&mut buffer).await.unwrap();
                stream.write_all(&buffer.to_ascii_uppercase()).await.unwrap();
            }
        });
        let namespace = Arc::new(
            NetworkNamespace::create("test", Isolation::Network, &logs.path().join("holder.log"))
                .await
                .unwrap(),
        );
        // Inside, the host server's own address reaches it (a listener on the same port in the
        // same namespace as the real one could not have been bound: the namespace is another one).
        namespace.reach_out(host_address, host_address).await.unwrap();
        let echoed = namespace
            .run(move || {
                let mut stream = StdStream::connect(host_address)?;
                stream.write_all(b"hello")?;
                let mut answer = [0u8; 5];
                stream.read_exact(&mut answer)?;
                Ok(answer)
            })
            .await
            .unwrap();
        assert_eq!(&echoed, b"HELLO");

        // A server inside is reached from the host through the exposed port, and from another
        // address inside through a relay.
        let inner_port = crate::free_port();
        let inner = namespace.run(move || StdListener::bind(loopback(inner_port))).await.unwrap();
        let served = std::thread::spawn(move || -> io::Result<()> {
            for _ in 0..2 {
                let (mut stream, _) = inner.accept()?;
                stream.write_all(b"alive")?;
            }
            Ok(())
        });
        let exposed = namespace.expose(loopback(0), loopback(inner_port)).await.unwrap();
        let mut outside = TcpStream::connect(exposed).await.unwrap();
        let mut answer = [0u8; 5];
        outside.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"alive");
        let relayed_port = crate::free_port();
        namespace.relay(loopback(relayed_port), loopback(inner_port)).await.unwrap();
        let relayed = namespace
            .run(move || {
                let mut stream = StdStream::connect(loopback(relayed_port))?;
                let mut answer = [0u8; 5];
                stream.read_exact(&mut answer)?;
                Ok(answer)
            })
            .await
            .unwrap();
        assert_eq!(&relayed, b"alive");
        served.join().unwrap().unwrap();

        // Drop kills the holder: the namespace's last process is gone.
        let holder = namespace.holder_pid();
        drop(namespace);
        assert!(!Path::new(&format!("/proc/{holder}")).exists(), "the holder {holder} still runs");
    }
}
