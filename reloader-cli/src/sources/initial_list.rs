//! How a watch gets the objects that exist when it starts.
//!
//! Streaming lists first: one watch request whose first events are every existing object, sent
//! one at a time from kube-apiserver's watch cache, then a bookmark marking the end. Neither side
//! then holds a page of hundreds of objects: on bench M1 a page of Secrets with Helm releases
//! is tens of MB, which set both our start-up peak and kube-apiserver's (docs/benchmark.md).
//!
//! An API server without the WatchList feature (off by default in Kubernetes 1.33 and before
//! 1.32, or turned off) rejects that request as invalid; the watch then lists in pages of 500 for the rest of
//! the process, as client-go's reflector falls back. Both need only `list` and `watch`, the rules
//! the chart grants.

use std::sync::atomic::{AtomicBool, Ordering};

use futures::stream::BoxStream;
use futures::{Stream, StreamExt as _};
use kube::Resource;
use kube::api::Api;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;
use tracing::{debug, info};

/// Whether a watch has already said that the API server does not stream lists.
static STREAMING_REFUSED_TOLD: AtomicBool = AtomicBool::new(false);

type Events<K> = BoxStream<'static, watcher::Result<watcher::Event<K>>>;

/// A watcher of `api` with `config`'s selectors that streams its initial lists where the API
/// server can, and lists in pages where it cannot. `watch` names it in logs. Without backoff:
/// the caller adds it.
pub fn watcher_stream<K>(
    watch: String,
    api: Api<K>,
    config: watcher::Config,
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let streaming: Events<K> = watcher(api.clone(), config.clone().streaming_lists()).boxed();
    let paged = move || -> Events<K> { watcher(api, config).boxed() };
    falling_back(watch, streaming, paged)
}

/// `streaming`'s events until the API server refuses to stream, then `paged()`'s, for good.
fn falling_back<K: Send + 'static>(
    watch: String,
    streaming: Events<K>,
    paged: impl FnOnce() -> Events<K> + Send + 'static,
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send {
    futures::stream::unfold((streaming, Some(paged), watch), |(mut events, mut fallback, watch)| async move {
        loop {
            let event = events.next().await?;
            if let Some(paged) = fallback.take_if(|_| matches!(&event, Err(e) if streaming_rejected(e))) {
                // Every watch meets the same API server: the operator is told once, not per kind.
                if STREAMING_REFUSED_TOLD.swap(true, Ordering::Relaxed) {
                    debug!(watch, "listing in pages");
                } else {
                    info!(
                        watch,
                        "the API server does not stream lists (WatchList off); every watch lists in pages"
                    );
                }
                events = paged();
                continue;
            }
            return Some((event, (events, fallback, watch)));
        }
    })
}

/// kube-apiserver's answer to `sendInitialEvents=true` when it cannot stream the list: the
/// request is invalid (422; 400 from servers that predate the parameter's validation). kube's
/// client opens a watch without looking at the status, so the answer usually arrives as the
/// stream's first item (`WatchFailed`), not as a failed start.
fn streaming_rejected(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => [400, 422].contains(&status.code),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    fn refusal(code: u16) -> Box<Status> {
        Box::new(Status::failure("rejected", "Invalid").with_code(code))
    }

    fn start_failed(code: u16) -> watcher::Error {
        watcher::Error::WatchStartFailed(kube::Error::Api(refusal(code)))
    }

    /// What a refusal looks like through kube's client: the first item of the watch stream.
    fn failed(code: u16) -> watcher::Error {
        watcher::Error::WatchFailed(kube::Error::Api(refusal(code)))
    }

    type Script = Vec<watcher::Result<watcher::Event<&'static str>>>;

    /// What the watch hands on, as `Ok(object)` per applied object and `Err(code)` per error.
    async fn handed_on(streaming: Script, paged: Script) -> Vec<Result<&'static str, u16>> {
        let paged = move || futures::stream::iter(paged).boxed();
        falling_back("test watch".into(), futures::stream::iter(streaming).boxed(), paged)
            .map(|event| match event {
                Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => Ok(object),
                Ok(_) => Ok("-"),
                Err(
                    watcher::Error::WatchStartFailed(kube::Error::Api(status))
                    | watcher::Error::WatchFailed(kube::Error::Api(status)),
                ) => Err(status.code),
                Err(_) => Err(0),
            })
            .collect()
            .await
    }

    #[tokio::test]
    async fn a_refused_stream_is_replaced_by_pages_once_and_other_errors_pass() {
        use watcher::Event::{InitApply, InitDone};
        // Refused: the pages follow, the refusal is not handed on.
        for refusal in [failed(422), start_failed(422), failed(400)] {
            let refused = handed_on(vec![Err(refusal)], vec![Ok(InitApply("a")), Ok(InitDone)]).await;
            assert_eq!(refused, [Ok("a"), Ok("-")]);
        }
        // A transient error is handed on (the backoff retries the stream), never paged.
        let transient =
            handed_on(vec![Err(start_failed(503)), Ok(InitApply("a"))], vec![Ok(InitApply("paged"))]).await;
        assert_eq!(transient, [Err(503), Ok("a")]);
        // Once paged, a later 422 is the paged watch's own error: handed on.
        let twice =
            handed_on(vec![Err(start_failed(422))], vec![Err(start_failed(422)), Ok(InitApply("b"))]).await;
        assert_eq!(twice, [Err(422), Ok("b")]);
    }

    #[test]
    fn only_a_rejected_streaming_watch_falls_back() {
        let cases = [
            (failed(422), true),
            (failed(400), true),
            (start_failed(422), true),
            (start_failed(400), true),
            (failed(403), false),
            (failed(500), false),
            // RBAC, overload and outages are retried as they are: paging would not help.
            (start_failed(403), false),
            (start_failed(429), false),
            (start_failed(503), false),
            (watcher::Error::WatchError(Box::new(Status::failure("gone", "Expired").with_code(410))), false),
            (watcher::Error::NoResourceVersion, false),
        ];
        for (error, falls_back) in cases {
            assert_eq!(streaming_rejected(&error), falls_back, "{error}");
        }
    }
}
