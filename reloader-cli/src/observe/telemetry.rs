//! Logging (text or JSON lines) and optional OTLP trace export.
//!
//! Export is configured the way OpenTelemetry SDKs are (`OTEL_EXPORTER_OTLP_*`, `OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`, docs/tracing.md), over http/protobuf or gRPC,
//! plain or TLS ([`otlp`]). Spans leave through a bounded queue drained by a thread of its own
//! ([`batch`]), so exporting never competes with the controller's runtime and an unreachable
//! collector never slows a reload. JSON log lines written inside a span carry its `trace_id` and
//! `span_id` ([`log_ids`]).

mod batch;
mod log_ids;
pub(crate) mod otlp;

use std::io::IsTerminal as _;

use anyhow::Context as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{Key, Value};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanExporter as _};
use reloader_core::options::LogLevel;
use tracing_subscriber::filter::{EnvFilter, FilterExt as _, LevelFilter, Targets, filter_fn};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{Layer as _, fmt};

use self::batch::BoundedBatchProcessor;
use self::log_ids::WithTraceIds;
use self::otlp::ExportSettings;

const SERVICE_NAME: &str = "reloader";

/// HTTP and telemetry plumbing that floods debug/trace output with connection-level detail;
/// held at `info` unless `RUST_LOG` asks otherwise.
const CHATTY_DEPENDENCIES: &[&str] = &[
    "hyper",
    "hyper_util",
    "h2",
    "rustls",
    "tower",
    "reqwest",
    "tonic",
    "opentelemetry",
    "opentelemetry_sdk",
];

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
    "tonic",
    "hyper_rustls",
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

/// Whether this command exports traces.
#[derive(Debug, Clone, Copy)]
pub enum Traces<'a> {
    /// Never (the sidecar, `explain`).
    Off,
    /// When an endpoint is configured: `--otlp-endpoint` (this value) or the `OTEL_*` variables.
    Exported { otlp_endpoint: Option<&'a str> },
}

/// Installs the global subscriber.
///
/// `level` is `--log-level`, parsed once by the options (`fatal` and `panic` mean `error`); a
/// non-empty `RUST_LOG` replaces it entirely. Where spans go is resolved by
/// [`otlp::resolve`]; a setting that cannot work (an unknown protocol, an unreadable CA file) is
/// an error, reported before anything runs.
pub fn init(json: bool, level: LogLevel, traces: Traces<'_>) -> anyhow::Result<TelemetryGuard> {
    let rust_log = std::env::var("RUST_LOG").ok();
    // Checked before the OTLP exporter starts its thread, so a bad variable is all that happens.
    log_filter(level, rust_log.as_deref())?;
    let settings = match traces {
        Traces::Off => None,
        Traces::Exported { otlp_endpoint } => otlp::resolve(otlp_endpoint, |name| std::env::var(name).ok())?,
    };
    let tracer_provider = settings.as_ref().map(tracer_provider).transpose()?;
    let ansi = std::io::stderr().is_terminal();
    subscriber(
        || log_filter(level, rust_log.as_deref()),
        json,
        ansi,
        std::io::stderr,
        tracer_provider.as_ref(),
    )?
    .try_init()
    .context("installing the global tracing subscriber")?;
    if let Some(settings) = &settings {
        tracing::info!(
            protocol = settings.protocol.as_label(),
            endpoint = %settings.url,
            "exporting traces over OTLP"
        );
    }

    Ok(TelemetryGuard { tracer_provider })
}

/// The subscriber: log lines (to `writer`) and the exported spans, if any, each under `filter`.
///
/// Log lines name their workload and resource themselves, so spans are for trace export only.
/// Every layer is filtered on its own (no global filter, no `None` layer, either of which counts
/// as wanting every span), so a span nothing exports is never created: a reload opens three
/// (docs/benchmark.md).
fn subscriber<W>(
    filter: impl Fn() -> anyhow::Result<EnvFilter>,
    json: bool,
    ansi: bool,
    writer: W,
    tracer_provider: Option<&SdkTracerProvider>,
) -> anyhow::Result<impl tracing::Subscriber + Send + Sync + 'static>
where
    W: for<'w> fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let log_layer = if json {
        // The ids link the line to its trace, when the line was written inside an exported span.
        fmt::layer()
            .json()
            .flatten_event(true)
            .event_format(WithTraceIds(
                fmt::format().json().flatten_event(true).with_current_span(false).with_span_list(false),
            ))
            .with_writer(writer)
            .with_ansi(false)
            .boxed()
    } else {
        fmt::layer().with_writer(writer).with_ansi(ansi).boxed()
    };
    let logged = filter()?.and(filter_fn(|metadata| metadata.is_event()));
    let mut layers = vec![log_layer.with_filter(logged).boxed()];
    if let Some(provider) = tracer_provider {
        let exported =
            NOT_EXPORTED.iter().fold(Targets::new().with_default(LevelFilter::TRACE), |targets, target| {
                targets.with_target(*target, LevelFilter::OFF)
            });
        let tracer = provider.tracer(SERVICE_NAME);
        let exported = filter()?.and(exported);
        layers.push(tracing_opentelemetry::layer().with_tracer(tracer).with_filter(exported).boxed());
    }
    Ok(tracing_subscriber::registry().with(layers))
}

/// The filter for a `--log-level` value, unless `rust_log` (the `RUST_LOG` variable) is set.
fn log_filter(level: LogLevel, rust_log: Option<&str>) -> anyhow::Result<EnvFilter> {
    if let Some(directives) = rust_log.filter(|value| !value.trim().is_empty()) {
        // The parse error only: its source repeats its own text.
        return EnvFilter::try_new(directives)
            .map_err(|e| anyhow::anyhow!("invalid RUST_LOG {directives:?}: {e}"));
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

fn tracer_provider(settings: &ExportSettings) -> anyhow::Result<SdkTracerProvider> {
    // The exporter's own runtime, driven by the export thread alone.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the OTLP export runtime")?;
    let mut exporter = {
        let _entered = runtime.enter();
        otlp::exporter(settings)?
    };
    let resource = resource();
    exporter.set_resource(&resource);
    let processor =
        BoundedBatchProcessor::start(exporter, runtime).context("starting the OTLP export thread")?;
    // The builder's default sampler follows OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG.
    Ok(SdkTracerProvider::builder().with_span_processor(processor).with_resource(resource).build())
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

/// What a test subscriber wrote, shared with its writer (the log lines tests look into).
#[cfg(test)]
#[derive(Clone, Default)]
pub(crate) struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

#[cfg(test)]
impl Captured {
    pub(crate) fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

#[cfg(test)]
impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
