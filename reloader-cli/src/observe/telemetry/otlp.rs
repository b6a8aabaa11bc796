//! Where and how spans are exported: the OTLP settings from `--otlp-endpoint` and the standard
//! `OTEL_EXPORTER_OTLP_*` variables (docs/tracing.md), and the exporter for each protocol.
//!
//! Both transports use rustls with ring (kube's provider) and trust the system's roots, the
//! bundled webpki roots and, when given, a CA file: http/protobuf goes through hyper (already in
//! the tree; opentelemetry-otlp's reqwest features would add a second reqwest major version),
//! gRPC through tonic.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _, WithTonicConfig as _};
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;

pub(crate) const ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
pub(crate) const TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
const PROTOCOL: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
const TRACES_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
const CERTIFICATE: &str = "OTEL_EXPORTER_OTLP_CERTIFICATE";
const TRACES_CERTIFICATE: &str = "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE";

/// The OTLP/HTTP path of the traces signal, appended to a base endpoint.
const TRACES_PATH: &str = "/v1/traces";
/// One HTTP export may take this long before its batch counts as dropped.
const HTTP_EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// `OTEL_EXPORTER_OTLP_PROTOCOL`'s values this binary speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OtlpProtocol {
    HttpProtobuf,
    Grpc,
}

impl OtlpProtocol {
    pub(crate) fn as_label(self) -> &'static str {
        match self {
            OtlpProtocol::HttpProtobuf => "http/protobuf",
            OtlpProtocol::Grpc => "grpc",
        }
    }

    fn parse(value: &str) -> Option<Self> {
        [OtlpProtocol::HttpProtobuf, OtlpProtocol::Grpc].into_iter().find(|p| p.as_label() == value)
    }

    /// The traces URL for a base endpoint: OTLP/HTTP appends the signal's path, gRPC uses the
    /// endpoint as it is (its path comes from the service definition).
    fn traces_url(self, base: &str) -> String {
        let base = base.trim().trim_end_matches('/');
        match self {
            OtlpProtocol::HttpProtobuf if !base.ends_with(TRACES_PATH) => format!("{base}{TRACES_PATH}"),
            _ => base.to_owned(),
        }
    }
}

/// Where spans go; resolved once at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExportSettings {
    pub(crate) protocol: OtlpProtocol,
    /// The complete URL of the traces endpoint.
    pub(crate) url: String,
    /// A PEM file of CAs trusted besides the system's and the bundled roots.
    pub(crate) ca_file: Option<PathBuf>,
}

/// The export settings, or `None` when no endpoint is configured (nothing is exported).
///
/// `flag` is `--otlp-endpoint`, which clap fills from `OTEL_EXPORTER_OTLP_ENDPOINT` when the
/// flag is absent. Precedence: the flag given on the command line, then
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (a complete URL, used as it is), then
/// `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL). Per-signal variables win over the generic ones, as
/// the OTLP exporter specification says; `env` reads one variable.
pub(crate) fn resolve(
    flag: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<Option<ExportSettings>> {
    let env = |name: &str| env(name).map(|value| value.trim().to_owned()).filter(|value| !value.is_empty());
    let flag = flag.map(str::trim).filter(|value| !value.is_empty());
    let generic = env(ENDPOINT);
    // A flag equal to the variable is the variable (clap's fallback), not a command-line choice.
    let explicit_flag = flag.filter(|value| generic.as_deref() != Some(*value));
    let traces = env(TRACES_ENDPOINT);
    let endpoint = match (explicit_flag, traces, flag.map(str::to_owned).or(generic)) {
        (Some(flag), _, _) => Endpoint::Base(flag.to_owned()),
        (None, Some(traces), _) => Endpoint::Complete(traces),
        (None, None, Some(base)) => Endpoint::Base(base),
        (None, None, None) => return Ok(None),
    };
    let protocol = match env(TRACES_PROTOCOL).or_else(|| env(PROTOCOL)) {
        None => OtlpProtocol::HttpProtobuf,
        Some(value) => OtlpProtocol::parse(&value).ok_or_else(|| {
            anyhow!("{PROTOCOL}={value:?} is not supported: use \"http/protobuf\" or \"grpc\"")
        })?,
    };
    let url = match endpoint {
        Endpoint::Base(base) => protocol.traces_url(&base),
        Endpoint::Complete(url) => url,
    };
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        bail!("the OTLP traces endpoint must be an http:// or https:// URL, got {url:?}");
    }
    let ca_file = env(TRACES_CERTIFICATE).or_else(|| env(CERTIFICATE)).map(PathBuf::from);
    Ok(Some(ExportSettings { protocol, url, ca_file }))
}

enum Endpoint {
    Base(String),
    Complete(String),
}

/// The exporter for `settings`. Must run inside the Tokio runtime the exports will run on (the
/// gRPC channel and the HTTP client are bound to it).
pub(crate) fn exporter(settings: &ExportSettings) -> anyhow::Result<opentelemetry_otlp::SpanExporter> {
    let ca = settings.ca_file.as_deref().map(read_ca_file).transpose()?;
    let builder = opentelemetry_otlp::SpanExporter::builder();
    let exporter = match settings.protocol {
        OtlpProtocol::HttpProtobuf => {
            let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .context("TLS versions for the OTLP exporter")?
            .with_root_certificates(root_store(ca.as_ref().map(|(certs, _)| certs.as_slice())))
            .with_no_client_auth();
            let connector = hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(tls)
                .https_or_http()
                .enable_http1()
                .build();
            let client = opentelemetry_http::hyper::HyperClient::new(connector, HTTP_EXPORT_TIMEOUT, None);
            builder
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .with_endpoint(&settings.url)
                .with_http_client(client)
                .build()
        }
        OtlpProtocol::Grpc => {
            let builder = builder.with_tonic().with_protocol(Protocol::Grpc).with_endpoint(&settings.url);
            if settings.url.starts_with("https://") {
                let mut tls =
                    tonic::transport::ClientTlsConfig::new().with_native_roots().with_webpki_roots();
                if let Some((_, pem)) = &ca {
                    tls = tls.ca_certificate(tonic::transport::Certificate::from_pem(pem));
                }
                builder.with_tls_config(tls).build()
            } else {
                builder.build()
            }
        }
    };
    exporter.with_context(|| {
        format!("building the OTLP {} trace exporter for {}", settings.protocol.as_label(), settings.url)
    })
}

/// The certificates of a PEM CA file, and its text (tonic takes PEM).
fn read_ca_file(path: &Path) -> anyhow::Result<(Vec<CertificateDer<'static>>, Vec<u8>)> {
    let pem = std::fs::read(path).with_context(|| format!("reading the OTLP CA file {}", path.display()))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("parsing the OTLP CA file {}", path.display()))?;
    if certs.is_empty() {
        bail!("the OTLP CA file {} holds no PEM certificate", path.display());
    }
    Ok((certs, pem))
}

/// The system's roots, the bundled webpki roots, and `extra`.
fn root_store(extra: Option<&[CertificateDer<'static>]>) -> RootCertStore {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    // Unreadable system stores are not fatal: the bundled roots remain.
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    roots.add_parsable_certificates(extra.unwrap_or_default().iter().cloned());
    roots
}
