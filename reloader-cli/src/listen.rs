//! Binding a [`ListenAddr`] as Go's `net.Listen("tcp", addr)` does, for every server reloader
//! runs (metrics and probes, the admission webhook).
//!
//! An address without a host (`:9090`, the default) gets one dual-stack socket: IPv6 with
//! `IPV6_V6ONLY` off, so IPv4 clients arrive as v4-mapped addresses. Where the kernel has no IPv6
//! (disabled in the pod or on the node) it falls back to `0.0.0.0`. An address with a host is
//! bound exactly as given (docs/compatibility.md §11).

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reloader_core::options::ListenAddr;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::TcpListener;

/// The accept backlog Go uses on Linux when it cannot read `somaxconn`.
const BACKLOG: i32 = 1024;

/// Binds `addr` for TCP; see the module documentation for an address without a host.
pub(crate) fn bind(addr: ListenAddr) -> io::Result<TcpListener> {
    match addr.host {
        Some(ip) => bind_socket(SocketAddr::new(ip, addr.port), false),
        None => {
            let any_v6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), addr.port);
            match bind_socket(any_v6, true) {
                Err(e) if ipv6_unavailable(&e) => {
                    bind_socket(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), addr.port), false)
                }
                result => result,
            }
        }
    }
}

fn bind_socket(addr: SocketAddr, dual_stack: bool) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        // Explicit either way: the system default (`net.ipv6.bindv6only`) varies.
        socket.set_only_v6(!dual_stack)?;
    }
    // As Go: a restarted process can bind while old connections sit in TIME_WAIT.
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    TcpListener::from_std(socket.into())
}

/// The errors of a kernel without IPv6: no such address family, or no `::` to bind.
fn ipv6_unavailable(error: &io::Error) -> bool {
    error.raw_os_error().is_some_and(|code| NO_IPV6.contains(&code))
}

#[cfg(unix)]
const NO_IPV6: [i32; 3] = [libc::EAFNOSUPPORT, libc::EADDRNOTAVAIL, libc::EPROTONOSUPPORT];
/// Windows reports Winsock's codes instead: WSAEAFNOSUPPORT, WSAEADDRNOTAVAIL, WSAEPROTONOSUPPORT.
#[cfg(windows)]
const NO_IPV6: [i32; 3] = [10047, 10049, 10043];

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::TcpStream;

    fn addr(text: &str) -> ListenAddr {
        text.parse().unwrap()
    }

    /// Whether this machine can bind the IPv6 loopback at all (CI containers may not).
    fn has_ipv6_loopback() -> bool {
        std::net::TcpListener::bind("[::1]:0").is_ok()
    }

    /// Accepts one connection, echoes one byte; returns whether a client over `client_ip` got it.
    async fn answers_on(listener: &TcpListener, client_ip: IpAddr) -> bool {
        let port = listener.local_addr().unwrap().port();
        let connect = TcpStream::connect(SocketAddr::new(client_ip, port));
        let accept = listener.accept();
        let (Ok(mut client), Ok((mut server, _))) = tokio::join!(connect, accept) else {
            return false;
        };
        server.write_all(b"!").await.unwrap();
        let mut byte = [0u8; 1];
        client.read_exact(&mut byte).await.is_ok() && byte == *b"!"
    }

    async fn refuses(listener: &TcpListener, client_ip: IpAddr) -> bool {
        let port = listener.local_addr().unwrap().port();
        TcpStream::connect(SocketAddr::new(client_ip, port)).await.is_err()
    }

    const V4: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
    const V6: IpAddr = IpAddr::V6(Ipv6Addr::LOCALHOST);

    #[tokio::test]
    async fn no_host_answers_on_ipv4_and_ipv6() {
        let listener = bind(addr(":0")).unwrap();
        assert!(answers_on(&listener, V4).await, "127.0.0.1");
        if has_ipv6_loopback() {
            assert!(listener.local_addr().unwrap().is_ipv6(), "dual-stack socket");
            assert!(answers_on(&listener, V6).await, "::1");
        }
    }

    #[tokio::test]
    async fn a_host_is_bound_as_given() {
        let v4_any = bind(addr("0.0.0.0:0")).unwrap();
        assert!(v4_any.local_addr().unwrap().is_ipv4());
        assert!(answers_on(&v4_any, V4).await);
        let v4_loopback = bind(addr("127.0.0.1:0")).unwrap();
        assert_eq!(v4_loopback.local_addr().unwrap().ip(), V4);
        assert!(answers_on(&v4_loopback, V4).await);
        if has_ipv6_loopback() {
            assert!(refuses(&v4_any, V6).await, "0.0.0.0 is IPv4 only");
            let v6_loopback = bind(addr("[::1]:0")).unwrap();
            assert_eq!(v6_loopback.local_addr().unwrap().ip(), V6);
            assert!(answers_on(&v6_loopback, V6).await);
            assert!(refuses(&v6_loopback, V4).await, "[::1] is IPv6 only");
        }
    }

    #[cfg(unix)]
    #[test]
    fn errors_of_a_kernel_without_ipv6() {
        let cases = [
            (libc::EAFNOSUPPORT, true),
            (libc::EADDRNOTAVAIL, true),
            (libc::EPROTONOSUPPORT, true),
            (libc::EADDRINUSE, false),
            (libc::EACCES, false),
        ];
        for (errno, unavailable) in cases {
            assert_eq!(ipv6_unavailable(&io::Error::from_raw_os_error(errno)), unavailable, "{errno}");
        }
    }

    #[tokio::test]
    async fn a_taken_port_is_an_error() {
        let taken = bind(addr("127.0.0.1:0")).unwrap();
        let port = taken.local_addr().unwrap().port();
        let error = bind(ListenAddr { host: Some(V4), port }).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::AddrInUse);
    }
}
