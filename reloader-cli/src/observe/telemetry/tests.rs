use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::http::HeaderMap;
use axum::routing::post;
use tokio::sync::mpsc;
use tracing_subscriber::filter::LevelFilter;

use super::*;

#[test]
fn every_level_stakater_accepts_maps_onto_a_tracing_level() {
    // logrus.ParseLevel's names, parsed once by the options.
    let cases = [
        ("trace", LevelFilter::TRACE),
        ("debug", LevelFilter::DEBUG),
        ("info", LevelFilter::INFO),
        ("warning", LevelFilter::WARN),
        ("warn", LevelFilter::WARN),
        ("error", LevelFilter::ERROR),
        ("fatal", LevelFilter::ERROR),
        ("panic", LevelFilter::ERROR),
        ("WARNING", LevelFilter::WARN),
    ];
    for (name, expected) in cases {
        let level = LogLevel::parse(name).unwrap_or_else(|| panic!("{name:?} is a level"));
        assert_eq!(level_filter(level), expected, "{name:?}");
    }
}

#[test]
fn verbose_levels_keep_http_plumbing_at_info() {
    let filter = log_filter(LogLevel::Trace, None).unwrap().to_string();
    assert!(filter.contains("hyper=info") && filter.contains("h2=info"), "{filter}");
    assert!(filter.starts_with("trace") || filter.contains(",trace"), "{filter}");
    let filter = log_filter(LogLevel::Info, None).unwrap().to_string();
    assert!(!filter.contains("hyper"), "{filter}");
    assert!(log_filter(LogLevel::Warning, None).unwrap().to_string().starts_with("warn"));
}

#[test]
fn rust_log_replaces_the_level_flag() {
    let filter = log_filter(LogLevel::Info, Some("reloader=debug")).unwrap().to_string();
    assert_eq!(filter, "reloader=debug");
    assert!(log_filter(LogLevel::Info, Some("  ")).unwrap().to_string().starts_with("info"));
}

#[test]
fn traces_url_appends_the_signal_path_once() {
    assert_eq!(traces_url("http://127.0.0.1:4318"), "http://127.0.0.1:4318/v1/traces");
    assert_eq!(traces_url("http://127.0.0.1:4318/"), "http://127.0.0.1:4318/v1/traces");
    assert_eq!(traces_url("http://collector/otlp/"), "http://collector/otlp/v1/traces");
    assert_eq!(traces_url("http://127.0.0.1:4318/v1/traces"), "http://127.0.0.1:4318/v1/traces");
}

#[test]
fn https_endpoints_are_refused_with_a_clear_message() {
    let error = tracer_provider("https://collector.example:4318").unwrap_err().to_string();
    assert!(
        error.contains("http://") && error.contains("https://collector.example:4318/v1/traces"),
        "{error}"
    );
}

/// The only test in this binary that installs the global subscriber.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_are_exported_to_a_local_otlp_receiver_on_shutdown() {
    let (received_tx, mut received_rx) = mpsc::unbounded_channel::<(String, Option<String>, Bytes)>();
    let receiver = Router::new().route(
        "/v1/traces",
        post(move |headers: HeaderMap, body: Bytes| {
            let content_type =
                headers.get("content-type").and_then(|value| value.to_str().ok()).map(str::to_owned);
            received_tx.send(("/v1/traces".to_owned(), content_type, body)).ok();
            async { "" }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, receiver).await });

    let guard = init(false, LogLevel::Info, Some(&endpoint)).unwrap();
    tracing::info_span!("otlp_probe_span", resource = "default/app-config").in_scope(|| {
        tracing::info!("inside the probe span");
    });
    // Shutting down blocks on the exporter thread's HTTP round trip to the receiver above.
    tokio::task::spawn_blocking(move || drop(guard)).await.unwrap();

    let (path, content_type, body) =
        tokio::time::timeout(Duration::from_secs(10), received_rx.recv()).await.unwrap().unwrap();
    assert_eq!(path, "/v1/traces");
    assert_eq!(content_type.as_deref(), Some("application/x-protobuf"));
    let needle = b"otlp_probe_span";
    assert!(body.windows(needle.len()).any(|window| window == needle), "span name missing from the export");
    let service = b"reloader";
    assert!(body.windows(service.len()).any(|window| window == service), "service name missing");
}
