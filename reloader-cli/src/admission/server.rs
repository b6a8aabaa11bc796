//! HTTPS for the webhook: a TCP listener, a TLS handshake per connection in its own task (a
//! slow or stuck client never delays another), then HTTP/1.1 into an axum router.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

/// Longer than any API server waits for a webhook (at most 30 s), short enough that idle or
/// half-open connections do not pile up.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a shutdown waits for connections still answering a request.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `router` over TLS on `listener` until `shutdown`; connections in progress are then
/// closed gracefully (their current request is answered).
pub(crate) async fn serve_tls(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    router: Router,
    shutdown: CancellationToken,
) {
    // Connections are owned here: finished ones are reaped as we go, and a shutdown waits
    // (bounded) for the ones still answering.
    let mut connections = JoinSet::new();
    loop {
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            Some(_) = connections.join_next() => continue,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    warn!(error = %e, "admission webhook: accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let (acceptor, router, shutdown) = (acceptor.clone(), router.clone(), shutdown.clone());
        connections.spawn(async move {
            let _ = stream.set_nodelay(true);
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    debug!(%peer, error = %e, "admission webhook: TLS handshake failed");
                    return;
                }
                Err(_) => {
                    debug!(%peer, "admission webhook: TLS handshake timed out");
                    return;
                }
            };
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(tls), TowerToHyperService::new(router));
            let mut connection = std::pin::pin!(connection);
            let result = tokio::select! {
                result = connection.as_mut() => result,
                _ = shutdown.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(e) = result {
                debug!(%peer, error = %e, "admission webhook: connection ended with an error");
            }
        });
    }
    if tokio::time::timeout(CLOSE_TIMEOUT, async { while connections.join_next().await.is_some() {} })
        .await
        .is_err()
    {
        connections.abort_all();
    }
}

/// The acceptor for `config`.
pub(crate) fn acceptor(config: rustls::ServerConfig) -> TlsAcceptor {
    TlsAcceptor::from(Arc::new(config))
}
