//! `rest_client_requests_total{code,method,host}` and
//! `rest_client_request_duration_seconds{verb,host}`, recorded as client-go records them for
//! Stakater: a tower layer on every kube client reloader builds (crate::client), so every API
//! request is counted without the call sites knowing.
//!
//! As client-go: every request counts once its response (or error) arrives, watches included;
//! the duration runs until the response body has been read, and is not recorded for watches
//! (their body is the stream).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use futures::future::BoxFuture;
use http::{Request, Response, Uri};
use http_body::{Body, Frame, SizeHint};
use tower::{Layer, Service};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::HistogramFamily;
use super::labels::{RestLatencyLabels, RestRequestLabels};
use super::values::{HttpVerb, RequestCode};

/// The two series, shared by every client's layer.
#[derive(Clone)]
pub(crate) struct RestClientStats {
    pub(super) requests: Family<RestRequestLabels, Counter>,
    pub(super) latency: HistogramFamily<RestLatencyLabels>,
}

impl RestClientStats {
    /// One API request answered (or failed): `rest_client_requests_total`.
    pub(super) fn request(&self, code: RequestCode, method: HttpVerb, host: &str) {
        let labels = RestRequestLabels { code, method, host: host.to_owned() };
        self.requests.get_or_create(&labels).inc();
    }

    /// One API request's duration, its body read: `rest_client_request_duration_seconds`.
    pub(super) fn duration(&self, verb: HttpVerb, host: &str, duration: std::time::Duration) {
        let labels = RestLatencyLabels { verb, host: host.to_owned() };
        self.latency.get_or_create(&labels).observe(duration.as_secs_f64());
    }
}

/// Wraps a kube client's service stack; `host` is the API server's `host:port`, as in the
/// cluster URL (client-go's `host` label).
#[derive(Clone)]
pub(crate) struct RestClientMetricsLayer {
    metrics: RestClientStats,
    host: Arc<str>,
}

impl RestClientMetricsLayer {
    pub(crate) fn new(metrics: RestClientStats, cluster_url: &Uri) -> Self {
        // client-go's value when the client has no base URL.
        let host = cluster_url.authority().map_or("none", |a| a.as_str());
        Self { metrics, host: host.into() }
    }
}

impl<S> Layer<S> for RestClientMetricsLayer {
    type Service = RestClientMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RestClientMetrics { inner, metrics: self.metrics.clone(), host: self.host.clone() }
    }
}

#[derive(Clone)]
pub(crate) struct RestClientMetrics<S> {
    inner: S,
    metrics: RestClientStats,
    host: Arc<str>,
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for RestClientMetrics<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
    ResBody: Body + Unpin,
{
    type Response = Response<TimedBody<ResBody>>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let verb = HttpVerb::from(request.method());
        let watch = is_watch(request.uri());
        let started = Instant::now();
        let response = self.inner.call(request);
        let (metrics, host) = (self.metrics.clone(), self.host.clone());
        Box::pin(async move {
            let response = response.await;
            let code = match &response {
                Ok(response) => RequestCode::Status(response.status().as_u16()),
                Err(_) => RequestCode::Error,
            };
            metrics.request(code, verb, &host);
            let timing = (!watch).then(|| Timing { metrics, verb, host, started });
            match response {
                Ok(response) => Ok(response.map(|inner| TimedBody { inner, timing })),
                Err(error) => {
                    drop(timing);
                    Err(error)
                }
            }
        })
    }
}

/// A watch request: its duration is the life of the stream, which client-go does not record.
fn is_watch(uri: &Uri) -> bool {
    uri.query().is_some_and(|query| {
        query.split('&').any(|pair| matches!(pair, "watch=true" | "watch=1" | "watch=True"))
    })
}

/// When a request started; recorded once, when the body ends or is dropped (or with the error).
struct Timing {
    metrics: RestClientStats,
    verb: HttpVerb,
    host: Arc<str>,
    started: Instant,
}

impl Drop for Timing {
    fn drop(&mut self) {
        self.metrics.duration(self.verb, &self.host, self.started.elapsed());
    }
}

/// A response body that records the request duration once it has been read to its end.
pub(crate) struct TimedBody<B> {
    inner: B,
    timing: Option<Timing>,
}

impl<B: Body + Unpin> Body for TimedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            self.timing.take();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_requests_are_told_apart() {
        let cases = [
            ("/api/v1/configmaps?watch=true&resourceVersion=1", true),
            ("/api/v1/configmaps?resourceVersion=1&watch=1", true),
            ("/api/v1/configmaps?limit=500", false),
            ("/api/v1/namespaces/a/configmaps/watch", false),
            ("/apis/apps/v1/deployments", false),
        ];
        for (uri, watch) in cases {
            assert_eq!(is_watch(&uri.parse().unwrap()), watch, "{uri}");
        }
    }

    #[test]
    fn host_is_the_cluster_url_authority() {
        let metrics = super::super::Metrics::new(false);
        let cases = [
            ("https://10.96.0.1:443", "10.96.0.1:443"),
            ("https://127.0.0.1:6443/", "127.0.0.1:6443"),
            ("https://[::1]:6443", "[::1]:6443"),
            ("https://kubernetes.default.svc", "kubernetes.default.svc"),
            ("/relative", "none"),
        ];
        for (url, host) in cases {
            let layer = RestClientMetricsLayer::new(metrics.rest_client(), &url.parse().unwrap());
            assert_eq!(&*layer.host, host, "{url}");
        }
    }
}
