//! HTTPS for the webhook: the listener loop every reloader server shares (reloader_http: a task
//! per connection, so a slow or stuck client never delays another; a header-read timeout, an
//! idle timeout and a connection cap), with a TLS handshake before HTTP/1.1 into an axum router.
//! The handshake counts against the header-read timeout.

use std::sync::Arc;

use axum::Router;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;

/// Serves `router` over TLS on `listener` until `shutdown`; connections in progress are then
/// closed gracefully (their current request is answered).
pub(crate) async fn serve_tls(
    listener: tokio::net::TcpListener,
    acceptor: TlsAcceptor,
    router: Router,
    shutdown: CancellationToken,
) {
    let limits = reloader_http::Limits::DEFAULT;
    reloader_http::serve("admission webhook", listener, Tls(acceptor), router, limits, shutdown).await;
}

/// The TLS handshake, as the shared server loop runs it for each connection.
#[derive(Clone)]
struct Tls(TlsAcceptor);

impl reloader_http::Handshake for Tls {
    type Stream = TlsStream<TcpStream>;

    fn handshake(&self, tcp: TcpStream) -> impl Future<Output = std::io::Result<Self::Stream>> + Send {
        self.0.accept(tcp)
    }
}

/// The acceptor for `config`.
pub(crate) fn acceptor(config: rustls::ServerConfig) -> TlsAcceptor {
    TlsAcceptor::from(Arc::new(config))
}
