use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::http::{Method as HttpMethod, StatusCode as HttpStatus};
use axum::routing::any;

use super::*;
use crate::args::parse_expected_status;

/// A local server that answers `failures` requests with 503, then 204, and records the methods.
struct Endpoint {
    url: Url,
    methods: Arc<Mutex<Vec<String>>>,
}

async fn endpoint(failures: usize) -> Endpoint {
    let methods = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::new(AtomicUsize::new(0));
    let app = Router::new().route(
        "/reload",
        any({
            let methods = methods.clone();
            move |method: HttpMethod| {
                let (methods, seen) = (methods.clone(), seen.clone());
                async move {
                    methods.lock().unwrap().push(method.to_string());
                    if seen.fetch_add(1, Ordering::SeqCst) < failures {
                        HttpStatus::SERVICE_UNAVAILABLE
                    } else {
                        HttpStatus::NO_CONTENT
                    }
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Endpoint { url: format!("http://{addr}/reload?token=s3cr3t").parse().unwrap(), methods }
}

fn http_target(url: Url, method: Method, retries: u32) -> HttpTarget {
    HttpTarget::new(method, url, parse_expected_status("2xx").unwrap(), retries, Duration::from_secs(5))
        .unwrap()
        .with_retry_initial(Duration::from_millis(5))
}

#[tokio::test]
async fn http_retries_until_an_expected_status() {
    let ep = endpoint(2).await;
    let target = http_target(ep.url.clone(), Method::PUT, 3);
    assert_eq!(target.call().await.unwrap(), 3);
    assert_eq!(*ep.methods.lock().unwrap(), ["PUT", "PUT", "PUT"]);
}

#[tokio::test]
async fn http_gives_up_after_the_retries_with_the_last_status() {
    let ep = endpoint(usize::MAX).await;
    let target = http_target(ep.url.clone(), Method::POST, 2);
    let err = target.call().await.unwrap_err();
    assert!(matches!(err, NotifyError::Status(s) if s == StatusCode::SERVICE_UNAVAILABLE), "{err}");
    assert_eq!(ep.methods.lock().unwrap().len(), 3, "one call plus two retries");

    let metrics = Metrics::default();
    let notifier = Notifier { http: Some(target), ..Default::default() };
    assert!(!notifier.notify(&metrics).await);
    assert!(metrics.encode().contains(r#"notifications_total{kind="http",result="failure"} 1"#));
}

#[tokio::test]
async fn http_errors_and_logged_urls_carry_no_credentials() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url: Url = format!("http://user:pa55@127.0.0.1:{port}/hook?token=s3cr3t").parse().unwrap();
    let target = http_target(url, Method::POST, 0);
    assert_eq!(target.display_url(), format!("http://127.0.0.1:{port}/hook"));
    let err = target.call().await.unwrap_err();
    assert!(matches!(err, NotifyError::Request(_)), "{err}");
    let message = format!("{err} {err:?}");
    assert!(!message.contains("s3cr3t") && !message.contains("pa55"), "{message}");
}

#[test]
fn touch_creates_then_bumps_the_mtime_and_keeps_the_content() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("reloaded");
    touch(&path).unwrap();
    assert!(path.exists());
    std::fs::write(&path, b"keep me").unwrap();
    let long_ago = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    std::fs::File::options().write(true).open(&path).unwrap().set_modified(long_ago).unwrap();
    touch(&path).unwrap();
    let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
    assert!(modified > long_ago + Duration::from_secs(86_400 * 365 * 20), "{modified:?}");
    assert_eq!(std::fs::read(&path).unwrap(), b"keep me");
    assert!(matches!(touch(&tmp.path().join("missing/dir/file")), Err(NotifyError::Touch { .. })));
}

async fn wait_for_file(path: &std::path::Path, needle: &str) -> String {
    for _ in 0..200 {
        if let Ok(text) = std::fs::read_to_string(path)
            && text.contains(needle)
        {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{} never contained {needle:?}", path.display());
}

#[tokio::test]
async fn a_signal_reaches_the_process_named_in_the_pid_file() {
    let tmp = tempfile::tempdir().unwrap();
    let (log, pidfile) = (tmp.path().join("log"), tmp.path().join("app.pid"));
    let script = format!(
        r#"trap 'echo got-usr1 >> "{log}"' USR1; echo ready >> "{log}"; while true; do sleep 0.05; done"#,
        log = log.display()
    );
    let mut child =
        tokio::process::Command::new("bash").args(["-c", &script]).kill_on_drop(true).spawn().unwrap();
    std::fs::write(&pidfile, format!("{}\n", child.id().unwrap())).unwrap();
    wait_for_file(&log, "ready").await;

    let metrics = Metrics::default();
    let notifier = Notifier {
        signal: Some(SignalTarget { pidfile: pidfile.clone(), signal: Signal::USR1 }),
        ..Default::default()
    };
    assert!(notifier.notify(&metrics).await);
    wait_for_file(&log, "got-usr1").await;
    assert!(notifier.notify(&metrics).await);
    let text = wait_for_file(&log, "got-usr1\ngot-usr1").await;
    assert_eq!(text.matches("got-usr1").count(), 2);
    assert!(metrics.encode().contains(r#"notifications_total{kind="signal",result="success"} 2"#));
    child.kill().await.unwrap();
}

#[test]
fn a_bad_or_missing_pid_file_is_an_error_not_a_signal_to_someone_else() {
    let tmp = tempfile::tempdir().unwrap();
    let pidfile = tmp.path().join("app.pid");
    let target = SignalTarget { pidfile: pidfile.clone(), signal: Signal::HUP };
    assert!(matches!(target.send(), Err(NotifyError::PidFile { .. })));
    // 0 and negative PIDs would signal a whole process group.
    for content in ["", "abc", "0", "-1", "-42"] {
        std::fs::write(&pidfile, content).unwrap();
        assert!(matches!(target.send(), Err(NotifyError::BadPid { .. })), "{content:?}");
    }
}

#[tokio::test]
async fn the_notifier_task_notifies_per_published_generation() {
    let ep = endpoint(0).await;
    let metrics = Arc::new(Metrics::default());
    let notifier =
        Notifier { http: Some(http_target(ep.url.clone(), Method::POST, 0)), ..Default::default() };
    let (tx, rx) = watch::channel(0u64);
    let task = tokio::spawn(run(notifier, metrics.clone(), rx));
    for generation in 1..=3u64 {
        tx.send(generation).unwrap();
        for _ in 0..200 {
            if ep.methods.lock().unwrap().len() as u64 == generation {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(ep.methods.lock().unwrap().len() as u64, generation);
    }
    drop(tx);
    task.await.unwrap();
    assert!(metrics.encode().contains(r#"notifications_total{kind="http",result="success"} 3"#));
}
