//! Keeps the API server's `Retry-After` with the error it came with. kube maps a failed response
//! to `kube::Error::Api(Status)` from its body alone, so the header is lost (and a throttled
//! request's body is often plain text: "Too many requests, please try again later."). This
//! layer writes the header's seconds into the body as a Status' `details.retryAfterSeconds`, the
//! field Kubernetes defines for it, where the executor's writer reads it back.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Bytes;
use serde_json::{Value, json};
use tower::{BoxError, Layer, Service};

/// Wraps a kube client's service stack.
#[derive(Clone, Copy, Default)]
pub(crate) struct RetryAfterLayer;

impl<S> Layer<S> for RetryAfterLayer {
    type Service = RetryAfter<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RetryAfter { inner }
    }
}

#[derive(Clone)]
pub(crate) struct RetryAfter<S> {
    inner: S,
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for RetryAfter<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    ResBody: Body<Data = Bytes> + Unpin + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    type Response = Response<RetryAfterBody<ResBody>>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await.map_err(Into::into)?;
            let Some(seconds) =
                retry_after_seconds(response.status(), response.headers().get(header::RETRY_AFTER))
            else {
                return Ok(response.map(RetryAfterBody::Passed));
            };
            let (parts, mut body) = response.into_parts();
            let mut text = Vec::new();
            while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
                if let Ok(data) = frame.map_err(Into::into)?.into_data() {
                    text.extend_from_slice(&data);
                }
            }
            let rewritten = with_retry_after(parts.status, &text, seconds);
            Ok(Response::from_parts(parts, RetryAfterBody::Rewritten(Some(rewritten.into()))))
        })
    }
}

/// The seconds of a `Retry-After` worth keeping: on a 429 or 5xx answer, in delta-seconds form
/// (as client-go reads it; an HTTP date is ignored), more than zero.
fn retry_after_seconds(status: StatusCode, header: Option<&HeaderValue>) -> Option<u32> {
    if status != StatusCode::TOO_MANY_REQUESTS && !status.is_server_error() {
        return None;
    }
    let seconds: u32 = header?.to_str().ok()?.trim().parse().ok()?;
    (seconds > 0).then_some(seconds)
}

/// The error body as a Status carrying `details.retryAfterSeconds`: the API server's own Status
/// with the field added (its own value wins), or a Status made from a body that is not one.
fn with_retry_after(status: StatusCode, body: &[u8], seconds: u32) -> Vec<u8> {
    let mut parsed = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(object)) if object.get("kind").and_then(Value::as_str) == Some("Status") => {
            Value::Object(object)
        }
        _ => json!({
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": String::from_utf8_lossy(body).trim(),
            "reason": reason(status),
            "code": status.as_u16(),
        }),
    };
    let details =
        parsed.as_object_mut().expect("a Status is an object").entry("details").or_insert_with(|| json!({}));
    if let Some(details) = details.as_object_mut() {
        let current = details.get("retryAfterSeconds").and_then(Value::as_u64).unwrap_or(0);
        if current == 0 {
            details.insert("retryAfterSeconds".into(), seconds.into());
        }
    }
    serde_json::to_vec(&parsed).expect("a JSON value serializes")
}

/// The Status reason Kubernetes gives these codes.
fn reason(status: StatusCode) -> &'static str {
    match status {
        StatusCode::TOO_MANY_REQUESTS => "TooManyRequests",
        StatusCode::SERVICE_UNAVAILABLE => "ServiceUnavailable",
        StatusCode::GATEWAY_TIMEOUT => "Timeout",
        _ => "InternalError",
    }
}

/// The response body: passed through, or the rewritten error.
pub(crate) enum RetryAfterBody<B> {
    Passed(B),
    Rewritten(Option<Bytes>),
}

impl<B> Body for RetryAfterBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            RetryAfterBody::Passed(inner) => Pin::new(inner).poll_frame(cx).map_err(Into::into),
            RetryAfterBody::Rewritten(data) => Poll::Ready(data.take().map(|data| Ok(Frame::data(data)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            RetryAfterBody::Passed(inner) => inner.is_end_stream(),
            RetryAfterBody::Rewritten(data) => data.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            RetryAfterBody::Passed(inner) => inner.size_hint(),
            RetryAfterBody::Rewritten(data) => {
                SizeHint::with_exact(data.as_ref().map_or(0, |data| data.len() as u64))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_a_positive_delta_seconds_retry_after_on_429_and_5xx_only() {
        let cases: &[(u16, Option<&str>, Option<u32>)] = &[
            (429, Some("2"), Some(2)),
            (503, Some(" 1 "), Some(1)),
            (500, Some("7"), Some(7)),
            (504, Some("3"), Some(3)),
            (429, None, None),
            (429, Some("0"), None),
            (429, Some("-1"), None),
            (429, Some("Wed, 21 Oct 2015 07:28:00 GMT"), None),
            (409, Some("2"), None),
            (200, Some("2"), None),
        ];
        for &(code, header, expected) in cases {
            let value = header.map(|h| HeaderValue::from_str(h).unwrap());
            let status = StatusCode::from_u16(code).unwrap();
            assert_eq!(retry_after_seconds(status, value.as_ref()), expected, "{code} {header:?}");
        }
    }

    #[test]
    fn the_header_reaches_the_status_kube_builds() {
        let api_status = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcd is slow","reason":"ServiceUnavailable","code":503}"#;
        let own_value = r#"{"kind":"Status","code":429,"message":"x","details":{"retryAfterSeconds":5}}"#;
        // (code, body, header seconds, retryAfterSeconds, message, reason)
        let cases: &[(u16, &str, u32, u32, &str, &str)] = &[
            (
                429,
                "Too many requests, please try again later.\n",
                2,
                2,
                "Too many requests, please try again later.",
                "TooManyRequests",
            ),
            (503, api_status, 1, 1, "etcd is slow", "ServiceUnavailable"),
            (429, own_value, 1, 5, "x", ""),
            (500, "", 3, 3, "", "InternalError"),
            (503, r#"{"not":"a status"}"#, 4, 4, r#"{"not":"a status"}"#, "ServiceUnavailable"),
        ];
        for &(code, body, seconds, expected, message, reason) in cases {
            let status = StatusCode::from_u16(code).unwrap();
            let rewritten = with_retry_after(status, body.as_bytes(), seconds);
            let parsed: kube::core::Status = serde_json::from_slice(&rewritten).unwrap();
            let details = parsed.details.unwrap_or_else(|| panic!("{body}: no details"));
            assert_eq!(details.retry_after_seconds, expected, "{body}");
            assert_eq!(parsed.code, code, "{body}");
            assert_eq!(parsed.message, message, "{body}");
            assert_eq!(parsed.reason, reason, "{body}");
        }
    }

    #[tokio::test]
    async fn rewrites_only_answers_with_a_retry_after() {
        use tower::ServiceExt as _;
        let cases: &[(u16, Option<&str>, &str, bool)] = &[
            (429, Some("2"), "slow down", true),
            (429, None, "slow down", false),
            (200, Some("2"), "{}", false),
        ];
        for &(code, header, body, rewritten) in cases {
            let service = tower::service_fn(move |_: Request<()>| async move {
                let mut response = Response::builder().status(code);
                if let Some(header) = header {
                    response = response.header(header::RETRY_AFTER, header);
                }
                Ok::<_, BoxError>(response.body(body.to_owned()).unwrap())
            });
            let response = RetryAfterLayer.layer(service).oneshot(Request::new(())).await.unwrap();
            let mut answered = response.into_body();
            let mut read = Vec::new();
            while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut answered).poll_frame(cx)).await {
                read.extend_from_slice(&frame.unwrap().into_data().unwrap());
            }
            let read = String::from_utf8(read).unwrap();
            assert_eq!(read.contains("retryAfterSeconds"), rewritten, "{code} {header:?}: {read}");
            if !rewritten {
                assert_eq!(read, body);
            }
        }
    }
}
