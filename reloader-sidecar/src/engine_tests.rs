use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use super::*;
use crate::payload::SourceKind;

fn sources() -> Vec<SourceId> {
    vec![
        SourceId { kind: SourceKind::ConfigMap, name: "app".to_owned() },
        SourceId { kind: SourceKind::Secret, name: "creds".to_owned() },
    ]
}

fn files(pairs: &[(&str, &str)], mode: u32) -> SourceFiles {
    SourceFiles { files: pairs.iter().map(|(k, v)| (k.to_string(), v.as_bytes().to_vec())).collect(), mode }
}

fn observed(index: usize, pairs: &[(&str, &str)]) -> SourceEvent {
    SourceEvent::Observed { index, files: Some(files(pairs, if index == 0 { 0o644 } else { 0o640 })) }
}

fn read_dir_files(dir: &std::path::Path) -> BTreeMap<String, String> {
    AtomicWriter::new(dir)
        .current()
        .unwrap()
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, String::from_utf8(v.bytes).unwrap()))
        .collect()
}

#[test]
fn tracker_waits_for_every_object_and_keeps_deleted_files() {
    let mut t = Tracker::new(sources());
    assert!(t.desired().is_none());
    assert_eq!(
        t.missing(),
        [
            "configmap/app (no answer from the API server yet)",
            "secret/creds (no answer from the API server yet)"
        ]
    );
    t.apply(observed(0, &[("a", "1")]));
    t.apply(SourceEvent::Observed { index: 1, files: None });
    assert_eq!(t.missing(), ["secret/creds (not found)"]);
    t.apply(SourceEvent::Failed { index: 1, error: "secrets \"creds\" is forbidden (HTTP 403)".to_owned() });
    assert_eq!(t.missing(), ["secret/creds (secrets \"creds\" is forbidden (HTTP 403))"]);
    assert!(t.desired().is_none());

    t.apply(observed(1, &[("b", "2")]));
    let (payload, warnings) = t.desired().unwrap();
    assert_eq!(payload.keys().collect::<Vec<_>>(), ["a", "b"]);
    assert!(warnings.is_empty());
    assert!(t.missing().is_empty());

    // A deletion keeps the last files; an error after the object was seen changes nothing.
    t.apply(SourceEvent::Observed { index: 0, files: None });
    t.apply(SourceEvent::Failed { index: 0, error: "connection refused".to_owned() });
    assert_eq!(t.desired().unwrap().0, payload);
    t.apply(observed(0, &[("a", "recreated")]));
    assert_eq!(t.desired().unwrap().0["a"].bytes, b"recreated");
}

#[tokio::test]
async fn init_writes_once_every_object_exists() {
    let tmp = tempfile::tempdir().unwrap();
    let metrics = Arc::new(Metrics::default());
    let engine = Engine::new(Tracker::new(sources()), AtomicWriter::new(tmp.path()), metrics.clone()).await;
    let (tx, rx) = mpsc::channel(8);
    tx.send(observed(0, &[("app.conf", "x=1")])).await.unwrap();
    tx.send(observed(1, &[("password", "hunter2")])).await.unwrap();
    init_loop(engine, rx, Duration::from_secs(5)).await.unwrap();
    assert_eq!(
        read_dir_files(tmp.path()),
        BTreeMap::from([("app.conf".into(), "x=1".into()), ("password".into(), "hunter2".into())])
    );
    assert!(metrics.encode().contains("reloader_sidecar_updates_total 1"));
}

#[tokio::test]
async fn init_times_out_naming_the_missing_objects() {
    let tmp = tempfile::tempdir().unwrap();
    let engine =
        Engine::new(Tracker::new(sources()), AtomicWriter::new(tmp.path()), Arc::new(Metrics::default()))
            .await;
    let (tx, rx) = mpsc::channel(8);
    tx.send(observed(0, &[("a", "1")])).await.unwrap();
    tx.send(SourceEvent::Observed { index: 1, files: None }).await.unwrap();
    let err = init_loop(engine, rx, Duration::from_millis(200)).await.unwrap_err();
    assert_eq!(err.to_string(), "timed out after 200ms waiting for secret/creds (not found)");
    assert!(!tmp.path().join("..data").exists(), "nothing is written on timeout");
    drop(tx);
}

#[tokio::test]
async fn init_does_not_rewrite_identical_content() {
    let tmp = tempfile::tempdir().unwrap();
    let run_init = || async {
        let engine =
            Engine::new(Tracker::new(sources()), AtomicWriter::new(tmp.path()), Arc::new(Metrics::default()))
                .await;
        let (tx, rx) = mpsc::channel(8);
        tx.send(observed(0, &[("a", "1")])).await.unwrap();
        tx.send(observed(1, &[("b", "2")])).await.unwrap();
        init_loop(engine, rx, Duration::from_secs(5)).await.unwrap();
        std::fs::read_link(tmp.path().join("..data")).unwrap()
    };
    let first = run_init().await;
    assert_eq!(run_init().await, first, "same content: the generation is kept");
}

/// Drives the sidecar loop with injected watch events and counts published generations.
#[tokio::test]
async fn sidecar_publishes_a_generation_per_content_change_only() {
    let tmp = tempfile::tempdir().unwrap();
    // Content already on disk (as the init container leaves it) is not rewritten or notified.
    AtomicWriter::new(tmp.path())
        .write(
            &merge([
                (&sources()[0], &files(&[("a", "1")], 0o644)),
                (&sources()[1], &files(&[("b", "2")], 0o640)),
            ])
            .0,
        )
        .unwrap();
    let metrics = Arc::new(Metrics::default());
    let engine = Engine::new(Tracker::new(sources()), AtomicWriter::new(tmp.path()), metrics.clone()).await;
    let (tx, rx) = mpsc::channel(8);
    let (generations, mut generation_rx) = watch::channel(0u64);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(sidecar_loop(
        engine,
        rx,
        generations,
        async {
            let _ = stopped.await;
        },
        || {},
    ));

    let settle = || tokio::time::sleep(Duration::from_millis(50));
    tx.send(observed(0, &[("a", "1")])).await.unwrap();
    tx.send(observed(1, &[("b", "2")])).await.unwrap();
    settle().await;
    assert_eq!(*generation_rx.borrow_and_update(), 0, "identical to what is on disk");
    assert!(metrics.is_ready());

    tx.send(observed(0, &[("a", "changed")])).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), generation_rx.changed()).await.unwrap().unwrap();
    assert_eq!(*generation_rx.borrow_and_update(), 1);
    assert_eq!(read_dir_files(tmp.path())["a"], "changed");

    // A resend of the same data (as after a metadata-only update or a re-list) publishes nothing.
    tx.send(observed(0, &[("a", "changed")])).await.unwrap();
    settle().await;
    assert!(!generation_rx.has_changed().unwrap());

    // A removed key is a content change.
    tx.send(observed(1, &[])).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), generation_rx.changed()).await.unwrap().unwrap();
    assert_eq!(*generation_rx.borrow_and_update(), 2);
    assert!(!read_dir_files(tmp.path()).contains_key("b"));
    assert!(std::fs::symlink_metadata(tmp.path().join("b")).is_err());

    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
    assert!(metrics.encode().contains("reloader_sidecar_updates_total 2"));
}

#[tokio::test]
async fn sidecar_retries_a_failed_write() {
    let tmp = tempfile::tempdir().unwrap();
    // `..data` as a plain directory makes every write fail until it is removed.
    std::fs::create_dir(tmp.path().join("..data")).unwrap();
    let metrics = Arc::new(Metrics::default());
    let engine = Engine::new(Tracker::new(sources()), AtomicWriter::new(tmp.path()), metrics.clone()).await;
    let (tx, rx) = mpsc::channel(8);
    let (generations, mut generation_rx) = watch::channel(0u64);
    let readied = Arc::new(AtomicBool::new(false));
    let once_ready = {
        let readied = readied.clone();
        move || readied.store(true, Ordering::Relaxed)
    };
    let task = tokio::spawn(sidecar_loop(engine, rx, generations, std::future::pending(), once_ready));
    tx.send(observed(0, &[("a", "1")])).await.unwrap();
    tx.send(observed(1, &[])).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(metrics.encode().contains("reloader_sidecar_write_errors_total 1"));
    assert!(!metrics.is_ready());
    assert!(!readied.load(Ordering::Relaxed), "start-up is not over while nothing is written");
    std::fs::remove_dir(tmp.path().join("..data")).unwrap();
    tokio::time::timeout(Duration::from_secs(5), generation_rx.changed()).await.unwrap().unwrap();
    assert_eq!(read_dir_files(tmp.path())["a"], "1");
    assert!(readied.load(Ordering::Relaxed), "ready once the files are written");
    task.abort();
}
