//! Logging (text or JSON lines) and optional OTLP trace export.
//!
//! The OTLP exporter speaks HTTP/protobuf through a blocking client that runs on the batch
//! processor's own thread, so exporting never competes with the controller's async runtime and
//! needs no reactor at construction time. That client has no TLS stack (adding one would bring a
//! second rustls crypto provider next to kube's), so the endpoint must be plain `http://`: the
//! usual collector or node agent a few hops away.

use std::io::IsTerminal as _;

use anyhow::{Context as _, bail};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{Key, Value};
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use reloader_core::options::LogLevel;
use tracing_subscriber::filter::{EnvFilter, LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{Layer as _, fmt};

const SERVICE_NAME: &str = "reloader";
const TRACES_PATH: &str = "/v1/traces";

/// HTTP and telemetry plumbing that floods debug/trace output with connection-level detail;
/// held at `info` unless `RUST_LOG` asks otherwise.
const CHATTY_DEPENDENCIES: &[&str] =
    &["hyper", "hyper_util", "h2", "rustls", "tower", "reqwest", "opentelemetry", "opentelemetry_sdk"];

/// Crates whose spans must not be exported: exporting them would trace the exporter itself.
const NOT_EXPORTED: &[&str] = &[
    "opentelemetry",
    "opentelemetry_sdk",
    "opentelemetry_otlp",
    "opentelemetry_http",
    "hyper",
    "hyper_util",
    "h2",
    "reqwest",
    "tower",
];

/// Keeps the trace pipeline alive; dropping it flushes pending spans and shuts the exporter down.
#[must_use = "dropping the guard immediately stops trace export"]
#[derive(Debug)]
pub struct TelemetryGuard {
    tracer_provider: Option<SdkTracerProvider>,
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(provider) = self.tracer_provider.take()
            && let Err(error) = provider.shutdown()
        {
            tracing::warn!(%error, "flushing traces at shutdown failed");
        }
    }
}

/// Installs the global subscriber.
///
/// `level` is `--log-level`, parsed once by the options (`fatal` and `panic` mean `error`); a
/// non-empty `RUST_LOG` replaces it entirely.
/// `otlp_endpoint` is the OTLP/HTTP base URL (as in `OTEL_EXPORTER_OTLP_ENDPOINT`); spans go to
/// `<base>/v1/traces` unless `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` names another URL.
pub fn init(json: bool, level: LogLevel, otlp_endpoint: Option<&str>) -> anyhow::Result<TelemetryGuard> {
    let filter = log_filter(level, std::env::var("RUST_LOG").ok().as_deref())?;

    let tracer_provider =
        otlp_endpoint.filter(|endpoint| !endpoint.trim().is_empty()).map(tracer_provider).transpose()?;
    let otel_layer = tracer_provider.as_ref().map(|provider| {
        let exported =
            NOT_EXPORTED.iter().fold(Targets::new().with_default(LevelFilter::TRACE), |targets, target| {
                targets.with_target(*target, LevelFilter::OFF)
            });
        tracing_opentelemetry::layer().with_tracer(provider.tracer(SERVICE_NAME)).with_filter(exported)
    });

    let ansi = std::io::stderr().is_terminal();
    let json_layer =
        json.then(|| fmt::layer().json().flatten_event(true).with_writer(std::io::stderr).with_ansi(false));
    let text_layer = (!json).then(|| fmt::layer().with_writer(std::io::stderr).with_ansi(ansi));

    tracing_subscriber::registry()
        .with(filter)
        .with(json_layer)
        .with(text_layer)
        .with(otel_layer)
        .try_init()
        .context("installing the global tracing subscriber")?;

    Ok(TelemetryGuard { tracer_provider })
}

/// The filter for a `--log-level` value, unless `rust_log` (the `RUST_LOG` variable) is set.
fn log_filter(level: LogLevel, rust_log: Option<&str>) -> anyhow::Result<EnvFilter> {
    if let Some(directives) = rust_log.filter(|value| !value.trim().is_empty()) {
        return EnvFilter::try_new(directives).with_context(|| format!("invalid RUST_LOG {directives:?}"));
    }
    let level = level_filter(level);
    let mut directives = level.to_string().to_lowercase();
    if level > LevelFilter::INFO {
        for target in CHATTY_DEPENDENCIES {
            directives.push_str(&format!(",{target}=info"));
        }
    }
    EnvFilter::try_new(&directives).with_context(|| format!("building the log filter {directives:?}"))
}

/// Stakater's (logrus) levels on tracing's: tracing has nothing above error, so fatal and panic
/// log errors only.
fn level_filter(level: LogLevel) -> LevelFilter {
    match level {
        LogLevel::Trace => LevelFilter::TRACE,
        LogLevel::Debug => LevelFilter::DEBUG,
        LogLevel::Info => LevelFilter::INFO,
        LogLevel::Warning => LevelFilter::WARN,
        LogLevel::Error | LogLevel::Fatal | LogLevel::Panic => LevelFilter::ERROR,
    }
}

fn tracer_provider(endpoint: &str) -> anyhow::Result<SdkTracerProvider> {
    // The per-signal variable, when set, is a complete URL and wins (OTLP exporter spec).
    let url = match std::env::var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
        Ok(url) if !url.trim().is_empty() => url.trim().to_owned(),
        _ => traces_url(endpoint),
    };
    // The exporter's HTTP client is built without TLS (see the module documentation).
    if !url.starts_with("http://") {
        bail!("OTLP trace export needs an http:// endpoint (a collector or agent nearby), got {url:?}");
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(&url)
        .build()
        .with_context(|| format!("building the OTLP trace exporter for {url}"))?;
    Ok(SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource()).build())
}

/// `<base>/v1/traces`; a base that already names the traces path is used as it is.
fn traces_url(base: &str) -> String {
    let base = base.trim().trim_end_matches('/');
    if base.ends_with(TRACES_PATH) { base.to_owned() } else { format!("{base}{TRACES_PATH}") }
}

/// The detected resource (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`), named `reloader`
/// when the environment gives no service name.
fn resource() -> Resource {
    let detected = Resource::builder().build();
    let service_name = Key::from_static_str("service.name");
    let unnamed = match detected.get(&service_name) {
        Some(Value::String(name)) => name.as_str().starts_with("unknown_service"),
        _ => true,
    };
    if unnamed { Resource::builder().with_service_name(SERVICE_NAME).build() } else { detected }
}

#[cfg(test)]
mod tests;
