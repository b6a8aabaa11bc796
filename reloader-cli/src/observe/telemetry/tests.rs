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
fn a_bad_rust_log_is_named_once() {
    let error = format!("{:#}", log_filter(LogLevel::Info, Some("reloader=[bad")).unwrap_err());
    assert!(error.starts_with("invalid RUST_LOG \"reloader=[bad\": "), "{error}");
    let detail = error.split(": ").nth(1).unwrap_or_default();
    assert_eq!(error.matches(detail).count(), 1, "the parse error once: {error}");
}

#[test]
fn otlp_settings_follow_the_flag_then_the_standard_variables() {
    use otlp::{ExportSettings, OtlpProtocol::*};
    let http = |url: &str| Some(ExportSettings { protocol: HttpProtobuf, url: url.into(), ca_file: None });
    let grpc = |url: &str| Some(ExportSettings { protocol: Grpc, url: url.into(), ca_file: None });
    type Case<'a> = (Option<&'a str>, &'a [(&'a str, &'a str)], Option<ExportSettings>);
    let cases: &[Case] = &[
        // Nothing configured: nothing exported, whatever the protocol says.
        (None, &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")], None),
        (None, &[("OTEL_EXPORTER_OTLP_ENDPOINT", "  ")], None),
        // The generic endpoint is a base URL (clap passes it as the flag's value).
        (
            Some("http://c:4318"),
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")],
            http("http://c:4318/v1/traces"),
        ),
        (Some("https://c:4318/"), &[], http("https://c:4318/v1/traces")),
        (Some("http://c:4318/otlp/v1/traces"), &[], http("http://c:4318/otlp/v1/traces")),
        // The per-signal URL is used as it is and wins over the generic variable...
        (
            Some("http://generic:4318"),
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://generic:4318"),
                ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://traces:443/custom"),
            ],
            http("https://traces:443/custom"),
        ),
        (
            None,
            &[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces:4318/x")],
            http("http://traces:4318/x"),
        ),
        // ...but not over the flag given on the command line.
        (
            Some("http://flag:4318"),
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://generic:4318"),
                ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces:4318/x"),
            ],
            http("http://flag:4318/v1/traces"),
        ),
        // gRPC takes the endpoint as it is; the per-signal protocol wins.
        (Some("http://c:4317"), &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")], grpc("http://c:4317")),
        (
            Some("https://c:4317/"),
            &[
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
                ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
            ],
            grpc("https://c:4317"),
        ),
        (
            Some("https://c:4318"),
            &[
                ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/ca.pem"),
                ("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "/t.pem"),
            ],
            Some(ExportSettings {
                protocol: HttpProtobuf,
                url: "https://c:4318/v1/traces".into(),
                ca_file: Some("/t.pem".into()),
            }),
        ),
    ];
    for (flag, env, expected) in cases {
        let lookup =
            |name: &str| env.iter().find(|(key, _)| *key == name).map(|(_, value)| value.to_string());
        let resolved = otlp::resolve(*flag, lookup).unwrap_or_else(|e| panic!("{flag:?} {env:?}: {e:#}"));
        assert_eq!(&resolved, expected, "{flag:?} {env:?}");
    }
}

#[test]
fn otlp_settings_that_cannot_work_are_refused() {
    type Case<'a> = (Option<&'a str>, &'a [(&'a str, &'a str)], &'a str);
    let cases: &[Case] = &[
        (Some("http://c:4318"), &[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")], "http/json"),
        (None, &[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "collector:4318")], "http:// or https://"),
    ];
    for (flag, env, expected) in cases {
        let lookup =
            |name: &str| env.iter().find(|(key, _)| *key == name).map(|(_, value)| value.to_string());
        let error = otlp::resolve(*flag, lookup).unwrap_err().to_string();
        assert!(error.contains(expected), "{error}");
    }
}

#[test]
fn https_endpoints_get_an_exporter_and_a_bad_ca_file_is_refused() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let _entered = runtime.enter();
    for protocol in [otlp::OtlpProtocol::HttpProtobuf, otlp::OtlpProtocol::Grpc] {
        let settings =
            otlp::ExportSettings { protocol, url: "https://collector.example:4318".into(), ca_file: None };
        otlp::exporter(&settings).unwrap_or_else(|e| panic!("{protocol:?}: {e:#}"));
        let empty = tempfile::NamedTempFile::new().unwrap();
        let settings = otlp::ExportSettings { ca_file: Some(empty.path().into()), ..settings };
        let error = format!("{:#}", otlp::exporter(&settings).unwrap_err());
        assert!(error.contains("no PEM certificate"), "{error}");
    }
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

    let guard = init(false, LogLevel::Info, Traces::Exported { otlp_endpoint: Some(&endpoint) }).unwrap();
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

use super::Captured;

/// Whether `dispatch` wants a span callsite at all (its `Interest`): "never" is what lets
/// `info_span!` skip making the span. Asked of the dispatch itself, since a callsite's cached
/// interest also counts the global subscriber another test in this binary installs.
fn wants_spans(dispatch: &tracing::Dispatch) -> bool {
    let span = tracing::callsite!(name: "reloader.probe", kind: tracing::metadata::Kind::SPAN, level: tracing::Level::INFO, fields: []);
    !dispatch.register_callsite(tracing::callsite::Callsite::metadata(span)).is_never()
}

#[test]
fn without_an_exporter_spans_are_never_made_and_log_lines_carry_their_own_fields() {
    for json in [false, true] {
        let captured = Captured::default();
        let writer = captured.clone();
        let logs =
            subscriber(|| log_filter(LogLevel::Trace, None), json, false, move || writer.clone(), None)
                .unwrap();
        let logs = tracing::Dispatch::new(logs);
        assert!(!wants_spans(&logs), "json={json}: a span nothing exports would be made");
        tracing::dispatcher::with_default(&logs, || {
            let span = tracing::info_span!("reloader.probe", "reloader.probe.field" = "in-the-span");
            span.in_scope(|| tracing::info!(workload = "default/web", "probe line"));
        });
        let text = captured.text();
        assert!(text.contains("probe line") && text.contains("default/web"), "json={json}: {text}");
        assert!(!text.contains("in-the-span") && !text.contains("trace_id"), "json={json}: {text}");
    }
}

#[test]
fn with_an_exporter_spans_are_made_and_json_lines_carry_their_ids() {
    let provider = SdkTracerProvider::builder().build();
    let captured = Captured::default();
    let writer = captured.clone();
    let logs =
        subscriber(|| log_filter(LogLevel::Info, None), true, false, move || writer.clone(), Some(&provider))
            .unwrap();
    let logs = tracing::Dispatch::new(logs);
    assert!(wants_spans(&logs), "an exported span would not be made");
    tracing::dispatcher::with_default(&logs, || {
        let span = tracing::info_span!("reloader.probe", "reloader.probe.field" = "in-the-span");
        span.in_scope(|| tracing::info!(workload = "default/web", "probe line"));
    });
    let text = captured.text();
    let line: serde_json::Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(line["workload"], "default/web", "{text}");
    let id = |key: &str| line[key].as_str().unwrap_or_default().len();
    assert_eq!((id("trace_id"), id("span_id")), (32, 16), "{text}");
    assert!(!text.contains("in-the-span"), "the span's fields are the trace's, not the line's: {text}");
}
