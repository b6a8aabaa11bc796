//! Reading what is POSTed to `/mutate` into an AdmissionRequest, or the reason it is not one.
//!
//! The body is read frame by frame up to [`MAX_REVIEW_BYTES`]: a `Content-Length` over the limit
//! is refused before any of it is read, and a body that grows past the limit while streaming is
//! refused at that point, so no request holds more than the limit in memory. All bodies being
//! read share a budget of [`BODY_BUDGET_BYTES`]: a read takes its share (its declared length, or
//! the whole limit when it declares none) before reading and waits while the budget is spent,
//! and a body must arrive within [`BODY_READ_TIMEOUT`], so many large or slow senders together
//! cannot grow memory past the budget or hold it for long. (Taken at once, not as bytes arrive:
//! reads each holding part of the budget and waiting for more would wait for each other.)
//!
//! What is refused is described by where it fails, never by what it holds (a review carries a
//! workload's env vars).

use std::future::poll_fn;
use std::pin::Pin;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use http_body::Body as _;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionReview};
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::observe::metrics::AdmissionRejection;

/// The largest body read. An AdmissionReview carries the object and its old version; the API
/// server stores objects of at most 1.5 MiB (etcd's default request limit) and accepts requests of
/// at most 3 MiB, so a real review stays well under this (docs/beyond-stakater.md §3).
pub(crate) const MAX_REVIEW_BYTES: usize = 8 * 1024 * 1024;

/// The body bytes all requests together may hold while being read: four bodies at the limit.
pub(crate) const BODY_BUDGET_BYTES: usize = 4 * MAX_REVIEW_BYTES;
/// Counted in KiB so a permit count fits the semaphore's `u32` requests.
static BODY_BUDGET: Semaphore = Semaphore::const_new(BODY_BUDGET_BYTES / 1024);
/// The API server waits at most 30 s for a webhook (10 s by default); a body still arriving
/// after this is not from it.
pub(crate) const BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The only version of the review this webhook answers (the chart registers `v1` only).
const REVIEW_API_VERSION: &str = "admission.k8s.io/v1";
const REVIEW_KIND: &str = "AdmissionReview";

/// Why a request is answered with an HTTP error instead of a review.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rejection {
    pub(crate) reason: AdmissionRejection,
    /// For the response and the log line: where the body fails, never its content.
    pub(crate) detail: String,
}

impl Rejection {
    fn new(reason: AdmissionRejection, detail: impl Into<String>) -> Self {
        Rejection { reason, detail: detail.into() }
    }

    pub(crate) fn status(&self) -> StatusCode {
        match self.reason {
            AdmissionRejection::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            AdmissionRejection::Malformed | AdmissionRejection::WrongKind => StatusCode::BAD_REQUEST,
        }
    }
}

/// The request a body holds, or why it holds none.
pub(crate) async fn read_request(
    headers: &HeaderMap,
    body: Body,
) -> Result<AdmissionRequest<DynamicObject>, Rejection> {
    let read = read_limited(headers, body, MAX_REVIEW_BYTES, &BODY_BUDGET);
    let (bytes, _budget) = tokio::time::timeout(BODY_READ_TIMEOUT, read).await.map_err(|_| {
        let seconds = BODY_READ_TIMEOUT.as_secs();
        Rejection::new(AdmissionRejection::Malformed, format!("the body did not arrive within {seconds} s"))
    })??;
    // The budget is given back once the body is parsed (`_budget` dropped at the end).
    parse_request(&bytes)
}

/// The body, or [`AdmissionRejection::TooLarge`] as soon as it is known to exceed `limit`; with
/// the share of `budget` (in KiB) it holds.
async fn read_limited<'a>(
    headers: &HeaderMap,
    mut body: Body,
    limit: usize,
    budget: &'a Semaphore,
) -> Result<(Vec<u8>, SemaphorePermit<'a>), Rejection> {
    let too_large =
        || Rejection::new(AdmissionRejection::TooLarge, format!("the body is over the {limit}-byte limit"));
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return Err(too_large());
    }
    let share = declared.map_or(limit, |length| length as usize);
    let kib = u32::try_from(share.div_ceil(1024)).map_err(|_| too_large())?;
    let held = budget.acquire_many(kib).await.map_err(|_| too_large())?;
    let mut bytes = Vec::with_capacity(declared.map_or(0, |length| length as usize));
    while let Some(frame) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        // The connection broke or the body ended before its declared length.
        let frame = frame.map_err(|e| {
            Rejection::new(AdmissionRejection::Malformed, format!("the body could not be read: {e}"))
        })?;
        if let Ok(data) = frame.into_data() {
            // Past the limit, or past a declared length (the share taken): refused either way.
            if bytes.len() + data.len() > share {
                return Err(too_large());
            }
            bytes.extend_from_slice(&data);
        }
    }
    Ok((bytes, held))
}

/// Parses and checks a whole body.
pub(crate) fn parse_request(bytes: &[u8]) -> Result<AdmissionRequest<DynamicObject>, Rejection> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(bytes).map_err(|e| {
        // Where, not what: serde's own message can quote a value of the object.
        Rejection::new(
            AdmissionRejection::Malformed,
            format!(
                "not an AdmissionReview ({:?} error at line {} column {})",
                e.classify(),
                e.line(),
                e.column()
            ),
        )
    })?;
    let (api_version, kind) = (review.types.api_version.as_str(), review.types.kind.as_str());
    if (api_version, kind) != (REVIEW_API_VERSION, REVIEW_KIND) {
        // Both are short names the sender chose; capped so a huge one cannot flood the log.
        let shown = |text: &str| text.chars().take(64).collect::<String>();
        return Err(Rejection::new(
            AdmissionRejection::WrongKind,
            format!(
                "apiVersion {:?} kind {:?}; this webhook answers {REVIEW_API_VERSION} {REVIEW_KIND} only",
                shown(api_version),
                shown(kind)
            ),
        ));
    }
    let request: AdmissionRequest<DynamicObject> = review
        .try_into()
        .map_err(|_| Rejection::new(AdmissionRejection::WrongKind, "an AdmissionReview without a request"))?;
    if request.uid.is_empty() {
        // The API server matches the answer to its call by uid.
        return Err(Rejection::new(
            AdmissionRejection::Malformed,
            "an AdmissionReview request without a uid",
        ));
    }
    Ok(request)
}

#[cfg(test)]
pub(super) mod tests {
    use serde_json::json;

    use super::*;

    pub(in crate::admission) fn review(request: serde_json::Value) -> serde_json::Value {
        json!({"apiVersion": REVIEW_API_VERSION, "kind": REVIEW_KIND, "request": request})
    }

    pub(in crate::admission) fn request() -> serde_json::Value {
        json!({
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
            "name": "web", "namespace": "shop", "operation": "CREATE",
            "userInfo": {"username": "admin"},
            "object": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"},
                "spec": {"template": {"spec": {"containers": [{"name": "app", "image": "app:1"}]}}}},
        })
    }

    fn with(mut value: serde_json::Value, pointer: &str, replacement: Option<serde_json::Value>) -> Vec<u8> {
        let (parent, field) = pointer.rsplit_once('/').unwrap();
        let object = value.pointer_mut(parent).unwrap().as_object_mut().unwrap();
        match replacement {
            Some(replacement) => object.insert(field.to_owned(), replacement),
            None => object.remove(field),
        };
        serde_json::to_vec(&value).unwrap()
    }

    #[test]
    fn bodies_are_answered_or_rejected_with_a_reason() {
        use AdmissionRejection::*;
        let valid = serde_json::to_vec(&review(request())).unwrap();
        let deep = "[".repeat(100_000);
        let cases: Vec<(&str, Vec<u8>, Option<AdmissionRejection>)> = vec![
            ("a review", valid.clone(), None),
            ("empty", Vec::new(), Some(Malformed)),
            ("not JSON", b"\x00\xffGET / HTTP/1.1".to_vec(), Some(Malformed)),
            ("truncated", valid[..valid.len() / 2].to_vec(), Some(Malformed)),
            ("a JSON array", b"[1,2,3]".to_vec(), Some(Malformed)),
            ("nested past serde's depth limit", deep.into_bytes(), Some(Malformed)),
            ("no uid", with(review(request()), "/request/uid", None), Some(Malformed)),
            ("an empty uid", with(review(request()), "/request/uid", Some(json!(""))), Some(Malformed)),
            (
                "a uid of the wrong type",
                with(review(request()), "/request/uid", Some(json!(7))),
                Some(Malformed),
            ),
            (
                "v1beta1",
                with(review(request()), "/apiVersion", Some(json!("admission.k8s.io/v1beta1"))),
                Some(WrongKind),
            ),
            ("another kind", with(review(request()), "/kind", Some(json!("Deployment"))), Some(WrongKind)),
            ("no request", with(review(request()), "/request", None), Some(WrongKind)),
            ("no apiVersion", with(review(request()), "/apiVersion", None), Some(Malformed)),
        ];
        for (what, body, expected) in cases {
            let result = parse_request(&body);
            assert_eq!(result.as_ref().err().map(|r| r.reason), expected, "{what}: {result:?}");
        }
    }

    #[test]
    fn a_rejection_never_quotes_the_body() {
        let secret = "hunter2-do-not-log";
        let mut body = review(request());
        body["request"]["uid"] = json!({"password": secret});
        let rejection = parse_request(&serde_json::to_vec(&body).unwrap()).unwrap_err();
        assert_eq!(rejection.reason, AdmissionRejection::Malformed);
        assert!(!rejection.detail.contains(secret), "{}", rejection.detail);
        let kind = "x".repeat(10_000);
        let body = with(review(request()), "/kind", Some(json!(kind)));
        let rejection = parse_request(&body).unwrap_err();
        assert!(rejection.detail.len() < 300, "{}", rejection.detail.len());
    }

    fn headers(length: Option<u64>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(length) = length {
            headers.insert(header::CONTENT_LENGTH, length.into());
        }
        headers
    }

    /// A body that yields `chunk` `count` times and counts how many it was asked for.
    fn streamed(chunk: usize, count: usize, polled: std::sync::Arc<std::sync::atomic::AtomicUsize>) -> Body {
        let stream = futures::stream::iter((0..count).map(move |_| {
            polled.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok::<_, std::io::Error>(vec![b' '; chunk])
        }));
        Body::from_stream(stream)
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_refused_without_being_read_whole() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let limit = 1024;
        let budget = Semaphore::new(16);

        // Declared too large: refused before a byte is read.
        let polled = Arc::new(AtomicUsize::new(0));
        let result =
            read_limited(&headers(Some(1 << 40)), streamed(100, 1000, polled.clone()), limit, &budget).await;
        assert_eq!(result.unwrap_err().reason, AdmissionRejection::TooLarge);
        assert_eq!(polled.load(Ordering::SeqCst), 0, "nothing read");

        // Streamed without a length: refused at the first chunk past the limit.
        let polled = Arc::new(AtomicUsize::new(0));
        let result = read_limited(&headers(None), streamed(100, 1000, polled.clone()), limit, &budget).await;
        assert_eq!(result.unwrap_err().reason, AdmissionRejection::TooLarge);
        assert_eq!(polled.load(Ordering::SeqCst), 11, "stopped past the limit, not at the end");

        // At the limit exactly: read.
        let polled = Arc::new(AtomicUsize::new(0));
        let (bytes, held) =
            read_limited(&headers(Some(1024)), streamed(128, 8, polled), limit, &budget).await.unwrap();
        assert_eq!(bytes.len(), 1024);
        // The declared length's share (one KiB), held until dropped; the refused reads above
        // gave theirs back.
        assert_eq!(held.num_permits(), 1);
        assert_eq!(budget.available_permits(), 15);
        drop(held);
        assert_eq!(budget.available_permits(), 16);
    }

    #[tokio::test]
    async fn reads_past_the_shared_budget_wait_for_it() {
        // Room for two bodies without a declared length (each takes the whole 1 KiB limit).
        let budget = Semaphore::new(2);
        let polled = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let no_length = headers(None);
        let (_, first) =
            read_limited(&no_length, streamed(512, 1, polled.clone()), 1024, &budget).await.unwrap();
        let (_, second) =
            read_limited(&no_length, streamed(512, 1, polled.clone()), 1024, &budget).await.unwrap();
        assert_eq!(budget.available_permits(), 0);
        let third = read_limited(&no_length, streamed(512, 1, polled.clone()), 1024, &budget);
        let waited = tokio::time::timeout(Duration::from_millis(200), third).await;
        assert!(waited.is_err(), "the third read waits while the others hold the budget");
        drop((first, second));
        let third = read_limited(&no_length, streamed(512, 1, polled), 1024, &budget).await;
        assert!(third.is_ok());
        drop(third);
        assert_eq!(budget.available_permits(), 2);
    }

    #[tokio::test]
    async fn a_body_longer_than_declared_is_refused() {
        let budget = Semaphore::new(16);
        let polled = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let result = read_limited(&headers(Some(100)), streamed(64, 3, polled), 1024, &budget).await;
        assert_eq!(result.unwrap_err().reason, AdmissionRejection::TooLarge);
    }

    #[test]
    fn too_large_is_413_the_rest_400() {
        let status = |reason| Rejection::new(reason, "").status();
        assert_eq!(status(AdmissionRejection::TooLarge), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(status(AdmissionRejection::Malformed), StatusCode::BAD_REQUEST);
        assert_eq!(status(AdmissionRejection::WrongKind), StatusCode::BAD_REQUEST);
    }
}
