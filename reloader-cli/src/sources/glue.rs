//! The watch → index glue, written once. A kube watcher stream (an initial list, streamed or in
//! pages ([`super::initial_list`]), then watches; re-lists after a 410 or a restart) becomes
//! apply/delete/reset calls on an [`IndexTarget`]: after every (re)list the target hears which
//! keys the list returned, so whatever vanished while the watch was down is removed. The first
//! completed list flips the readiness signal.
//!
//! A streamed list has no start event, so keys seen by a streamed list that broke off are kept
//! with the next one's: an object deleted in between stays until a later re-list. That errs on
//! the side of keeping: nothing is ever taken for deleted that was not.

use std::collections::HashSet;
use std::hash::Hash;

use futures::{Stream, StreamExt};
use kube::runtime::watcher;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::observe::metrics::{ErrorType, WatchMetrics};
use crate::state::Phase;

/// What a watch feeds: one kind of object, in one namespace or all.
pub(crate) trait IndexTarget<K> {
    type Key: Eq + Hash;

    /// An object was listed or changed; returns the key it is known by (`None`: not indexed).
    fn apply(&mut self, object: K, phase: Phase) -> Option<Self::Key>;

    /// An object was deleted.
    fn delete(&mut self, object: K);

    /// A (re)list completed and returned exactly `seen`; everything else in this target's scope
    /// is gone. `phase` is [`Phase::InitialList`] or [`Phase::Relist`].
    fn reset(&mut self, seen: HashSet<Self::Key>, phase: Phase);
}

/// Feeds `target` from `stream` until the stream ends (a watcher with backoff never does).
/// `watch` names the watch in logs.
pub(crate) async fn index_watch<K, T>(
    watch: &str,
    stream: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
    mut target: T,
    synced: watch::Sender<bool>,
    metrics: &WatchMetrics,
) where
    T: IndexTarget<K>,
{
    let mut stream = std::pin::pin!(stream);
    let mut phase = Phase::InitialList;
    let mut seen = HashSet::new();
    // Failures since the last event: an operator who saw `watch failed` looks for the recovery.
    // It is logged at the first event after them (a quiet watch stays silent until a change).
    let mut failed_attempts: u32 = 0;
    while let Some(event) = stream.next().await {
        if event.is_ok() && failed_attempts > 0 {
            info!(watch, failed_attempts, "watch resumed");
            failed_attempts = 0;
        }
        match event {
            Ok(watcher::Event::Init) => seen.clear(),
            Ok(watcher::Event::InitApply(object)) => {
                let list_phase = if phase == Phase::InitialList { Phase::InitialList } else { Phase::Relist };
                if let Some(key) = target.apply(object, list_phase) {
                    seen.insert(key);
                }
            }
            Ok(watcher::Event::InitDone) => {
                let list_phase = if phase == Phase::InitialList { Phase::InitialList } else { Phase::Relist };
                target.reset(std::mem::take(&mut seen), list_phase);
                if phase == Phase::InitialList {
                    phase = Phase::Live;
                    let _ = synced.send(true);
                }
            }
            Ok(watcher::Event::Apply(object)) => {
                target.apply(object, Phase::Live);
            }
            Ok(watcher::Event::Delete(object)) => target.delete(object),
            Err(e) if forbidden(&e) => {
                failed_attempts += 1;
                let error = reloader_sidecar::watch_error::describe(&e);
                warn!(watch, %error, "watch forbidden by RBAC; retrying with backoff (the RBAC line logged at start-up names the rule to add)");
                metrics.error(ErrorType::Watch);
            }
            Err(e) => {
                failed_attempts += 1;
                // Never `%e`: a response that failed to decode could be quoted, Secret data and all.
                let error = reloader_sidecar::watch_error::describe(&e);
                warn!(watch, %error, "watch failed; retrying with backoff");
                metrics.error(ErrorType::Watch);
            }
        }
    }
    debug!(watch, "watch ended");
}

/// An HTTP 403 from the API server: RBAC denies the list or the watch.
fn forbidden(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => status.code == 403,
        watcher::Error::WatchError(status) => status.code == 403,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// Records the calls, keyed by the object itself.
    #[derive(Default)]
    struct Recorder(Vec<String>);

    impl IndexTarget<&'static str> for &mut Recorder {
        type Key = &'static str;
        fn apply(&mut self, object: &'static str, phase: Phase) -> Option<&'static str> {
            self.0.push(format!("apply {object} {phase:?}"));
            (!object.starts_with('-')).then_some(object)
        }
        fn delete(&mut self, object: &'static str) {
            self.0.push(format!("delete {object}"));
        }
        fn reset(&mut self, seen: HashSet<&'static str>, phase: Phase) {
            let mut seen: Vec<_> = seen.into_iter().collect();
            seen.sort();
            self.0.push(format!("reset {seen:?} {phase:?}"));
        }
    }

    fn run(events: Vec<Result<watcher::Event<&'static str>, watcher::Error>>) -> (Vec<String>, bool, String) {
        let mut recorder = Recorder::default();
        let (tx, rx) = watch::channel(false);
        let metrics = crate::observe::metrics::Metrics::new(false);
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(index_watch(
            "test",
            futures::stream::iter(events),
            &mut recorder,
            tx,
            &metrics.watches(),
        ));
        let synced = *rx.borrow();
        (recorder.0, synced, Arc::clone(&metrics).encode())
    }

    use watcher::Event::{Apply, Delete, Init, InitApply, InitDone};

    #[test]
    fn lists_then_watches_then_relists() {
        let (calls, synced, _) = run(vec![
            Ok(Init),
            Ok(InitApply("a")),
            Ok(InitApply("-skipped")),
            Ok(InitApply("b")),
            Ok(InitDone),
            Ok(Apply("c")),
            Ok(Delete("a")),
            Ok(Init),
            Ok(InitApply("b")),
            Ok(InitDone),
        ]);
        assert_eq!(
            calls,
            [
                "apply a InitialList",
                "apply -skipped InitialList",
                "apply b InitialList",
                r#"reset ["a", "b"] InitialList"#,
                "apply c Live",
                "delete a",
                "apply b Relist",
                r#"reset ["b"] Relist"#,
            ]
        );
        assert!(synced);
    }

    #[test]
    fn a_restarted_list_forgets_what_the_broken_one_saw() {
        let (calls, synced, _) =
            run(vec![Ok(Init), Ok(InitApply("a")), Ok(Init), Ok(InitApply("b")), Ok(InitDone)]);
        assert_eq!(calls.last().unwrap(), r#"reset ["b"] InitialList"#);
        assert!(synced);
    }

    #[test]
    fn not_synced_before_the_first_list_completes_and_errors_are_counted() {
        let (calls, synced, metrics) = run(vec![
            Ok(Init),
            Ok(InitApply("a")),
            Err(watcher::Error::NoResourceVersion),
            Err(watcher::Error::NoResourceVersion),
        ]);
        assert_eq!(calls, ["apply a InitialList"]);
        assert!(!synced);
        assert!(
            metrics.lines().any(|l| l.starts_with("reloader_error_types_total{")
                && l.contains("watch")
                && l.ends_with(" 2")),
            "{metrics}"
        );
    }
}

#[cfg(test)]
mod log_tests {
    use super::*;
    use crate::observe::telemetry::Captured;

    struct Ignore;

    impl IndexTarget<&'static str> for Ignore {
        type Key = &'static str;
        fn apply(&mut self, _: &'static str, _: Phase) -> Option<&'static str> {
            None
        }
        fn delete(&mut self, _: &'static str) {}
        fn reset(&mut self, _: HashSet<&'static str>, _: Phase) {}
    }

    /// serde quotes the value it could not decode: here, what a Secret's data could be.
    fn undecodable(secret: &str) -> kube::Error {
        kube::Error::SerdeError(serde_json::from_str::<u64>(&format!("\"{secret}\"")).unwrap_err())
    }

    /// A watch that breaks on a response it cannot decode logs that it could not, never what
    /// serde quoted of it.
    #[test]
    fn a_watch_error_is_logged_without_the_body_it_quotes() {
        let secret = "hunter2-s3cret";
        assert!(undecodable(secret).to_string().contains(secret), "the test must start from a leaking error");
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber =
            tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
        let metrics = crate::observe::metrics::Metrics::new(false);
        let (tx, _rx) = watch::channel(false);
        let events: Vec<Result<watcher::Event<&'static str>, watcher::Error>> = vec![
            Err(watcher::Error::InitialListFailed(undecodable(secret))),
            Err(watcher::Error::WatchFailed(undecodable(secret))),
        ];
        tracing::subscriber::with_default(subscriber, || {
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            rt.block_on(index_watch("test", futures::stream::iter(events), Ignore, tx, &metrics.watches()));
        });
        let logs = captured.text();
        assert_eq!(logs.matches("the API response could not be decoded").count(), 2, "{logs}");
        assert!(!logs.contains(secret), "{logs}");
    }
}

#[cfg(test)]
mod forbidden_tests {
    use kube::core::Status;

    use super::*;

    fn status(code: u16) -> Box<Status> {
        Status { code, ..Status::failure("denied", "Forbidden") }.boxed()
    }

    #[test]
    fn a_403_on_list_or_watch_is_told_apart_from_other_failures() {
        let cases = [
            (watcher::Error::InitialListFailed(kube::Error::Api(status(403))), true),
            (watcher::Error::WatchStartFailed(kube::Error::Api(status(403))), true),
            (watcher::Error::WatchFailed(kube::Error::Api(status(403))), true),
            (watcher::Error::WatchError(status(403)), true),
            (watcher::Error::WatchError(status(410)), false),
            (watcher::Error::InitialListFailed(kube::Error::Api(status(500))), false),
            (watcher::Error::NoResourceVersion, false),
        ];
        for (error, expected) in cases {
            assert_eq!(forbidden(&error), expected, "{error}");
        }
    }
}
