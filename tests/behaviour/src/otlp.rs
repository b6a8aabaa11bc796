//! A local OTLP trace receiver, as a collector would be: OTLP/HTTP (`POST /v1/traces`, protobuf)
//! or gRPC (`TraceService/Export`), plain or TLS (a test CA whose certificate the test hands to
//! reloader through `OTEL_EXPORTER_OTLP_CERTIFICATE`). It decodes every request with
//! opentelemetry-proto's types and keeps the raw bytes too, for the hidden-data checks.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::common::v1::{AnyValue as AnyValueMessage, KeyValue};
use prost::Message as _;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use reloader_harness::{NotYet, PlaneError, wait_until};

/// How the receiver listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpTransport {
    /// `OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf`.
    HttpProtobuf,
    /// `OTEL_EXPORTER_OTLP_PROTOCOL=grpc`.
    Grpc,
}

impl OtlpTransport {
    /// The `OTEL_EXPORTER_OTLP_PROTOCOL` value.
    pub fn protocol(self) -> &'static str {
        match self {
            OtlpTransport::HttpProtobuf => "http/protobuf",
            OtlpTransport::Grpc => "grpc",
        }
    }
}

/// One span as received, its ids in lowercase hex and its string/int attributes as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedSpan {
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    pub attributes: BTreeMap<String, String>,
    /// `(trace_id, span_id)` of each link.
    pub links: Vec<(String, String)>,
    /// The resource's attributes (`service.name`, ...).
    pub resource: BTreeMap<String, String>,
}

impl ReceivedSpan {
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

#[derive(Default)]
struct Received {
    requests: Vec<ExportTraceServiceRequest>,
    /// Every body (and header value) received, as it came.
    raw: Vec<u8>,
}

/// See the module documentation. Stops serving when dropped.
pub struct OtlpReceiver {
    endpoint: String,
    ca_file: Option<tempfile::NamedTempFile>,
    received: Arc<Mutex<Received>>,
    server: JoinHandle<()>,
}

impl OtlpReceiver {
    /// Listens on a free port of 127.0.0.1.
    ///
    /// # Panics
    ///
    /// When no port can be bound, or the test certificates cannot be made.
    pub async fn start(transport: OtlpTransport, tls: bool) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binding 127.0.0.1:0");
        let addr = listener.local_addr().expect("the receiver's address");
        let received = Arc::new(Mutex::new(Received::default()));
        let certificates = tls.then(TestCertificates::generate);
        let scheme = if tls { "https" } else { "http" };
        let server = match transport {
            OtlpTransport::HttpProtobuf => {
                let acceptor = certificates.as_ref().map(TestCertificates::acceptor);
                tokio::spawn(serve_http(listener, acceptor, received.clone()))
            }
            OtlpTransport::Grpc => {
                let identity =
                    certificates.as_ref().map(|c| tonic::transport::Identity::from_pem(&c.cert, &c.key));
                tokio::spawn(serve_grpc(listener, identity, received.clone()))
            }
        };
        let ca_file = certificates.map(|c| {
            let file = tempfile::NamedTempFile::new().expect("a temporary CA file");
            std::fs::write(file.path(), &c.ca).expect("writing the CA file");
            file
        });
        Self { endpoint: format!("{scheme}://{addr}"), ca_file, received, server }
    }

    /// The base endpoint, for `OTEL_EXPORTER_OTLP_ENDPOINT` (`/v1/traces` is appended by reloader
    /// for OTLP/HTTP).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The CA file that verifies this receiver's certificate (TLS only).
    pub fn ca_file(&self) -> Option<PathBuf> {
        self.ca_file.as_ref().map(|file| file.path().to_owned())
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        let received = self.received.lock().unwrap_or_else(|e| e.into_inner());
        received.requests.iter().flat_map(spans_of).collect()
    }

    /// Every byte received so far (bodies and header values).
    pub fn raw_bytes(&self) -> Vec<u8> {
        self.received.lock().unwrap_or_else(|e| e.into_inner()).raw.clone()
    }

    /// Waits until the spans received satisfy `done`; returns them.
    pub async fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&[ReceivedSpan]) -> bool,
    ) -> Result<Vec<ReceivedSpan>, PlaneError> {
        wait_until(what, timeout, || {
            let spans = self.spans();
            let ready = done(&spans);
            async move {
                if ready {
                    Ok(spans)
                } else {
                    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
                    Err(NotYet::because(format!("{} span(s) so far: {names:?}", spans.len())))
                }
            }
        })
        .await
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn serve_http(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    received: Arc<Mutex<Received>>,
) {
    let router = Router::new().route("/v1/traces", post(http_export)).with_state(received);
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let (router, tls) = (router.clone(), tls.clone());
        tokio::spawn(async move {
            let service = TowerToHyperService::new(router);
            let http = hyper::server::conn::http1::Builder::new();
            let served = match tls {
                Some(tls) => match tls.accept(stream).await {
                    Ok(stream) => http.serve_connection(TokioIo::new(stream), service).await,
                    Err(error) => return eprintln!("OTLP receiver: TLS handshake failed: {error}"),
                },
                None => http.serve_connection(TokioIo::new(stream), service).await,
            };
            if let Err(error) = served {
                eprintln!("OTLP receiver: connection error: {error}");
            }
        });
    }
}

async fn http_export(
    State(received): State<Arc<Mutex<Received>>>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, Vec<u8>) {
    let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
    if content_type != "application/x-protobuf" {
        return (StatusCode::UNSUPPORTED_MEDIA_TYPE, Vec::new());
    }
    let Ok(request) = ExportTraceServiceRequest::decode(body.as_ref()) else {
        return (StatusCode::BAD_REQUEST, Vec::new());
    };
    let mut received = received.lock().unwrap_or_else(|e| e.into_inner());
    for value in headers.values() {
        received.raw.extend_from_slice(value.as_bytes());
    }
    received.raw.extend_from_slice(&body);
    received.requests.push(request);
    (StatusCode::OK, ExportTraceServiceResponse::default().encode_to_vec())
}

async fn serve_grpc(
    listener: TcpListener,
    identity: Option<tonic::transport::Identity>,
    received: Arc<Mutex<Received>>,
) {
    let mut server = tonic::transport::Server::builder();
    if let Some(identity) = identity {
        server = server
            .tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))
            .expect("the receiver's TLS settings");
    }
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let served = server
        .add_service(TraceServiceServer::new(GrpcReceiver { received }))
        .serve_with_incoming(incoming)
        .await;
    if let Err(error) = served {
        eprintln!("OTLP gRPC receiver stopped: {error}");
    }
}

struct GrpcReceiver {
    received: Arc<Mutex<Received>>,
}

#[tonic::async_trait]
impl TraceService for GrpcReceiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut received = self.received.lock().unwrap_or_else(|e| e.into_inner());
        for entry in request.metadata().iter() {
            if let tonic::metadata::KeyAndValueRef::Ascii(_, value) = entry {
                received.raw.extend_from_slice(value.as_bytes());
            }
        }
        let request = request.into_inner();
        // The message as it came over the wire, re-encoded (prost keeps every known field).
        received.raw.extend_from_slice(&request.encode_to_vec());
        received.requests.push(request);
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

fn spans_of(request: &ExportTraceServiceRequest) -> Vec<ReceivedSpan> {
    let mut spans = Vec::new();
    for resource_spans in &request.resource_spans {
        let resource =
            resource_spans.resource.as_ref().map(|r| attributes(&r.attributes)).unwrap_or_default();
        for scope_spans in &resource_spans.scope_spans {
            for span in &scope_spans.spans {
                spans.push(ReceivedSpan {
                    name: span.name.clone(),
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    attributes: attributes(&span.attributes),
                    links: span.links.iter().map(|l| (hex(&l.trace_id), hex(&l.span_id))).collect(),
                    resource: resource.clone(),
                });
            }
        }
    }
    spans
}

fn attributes(attributes: &[KeyValue]) -> BTreeMap<String, String> {
    attributes.iter().filter_map(|kv| Some((kv.key.clone(), text(kv.value.as_ref()?)?))).collect()
}

fn text(value: &AnyValueMessage) -> Option<String> {
    Some(match value.value.as_ref()? {
        AnyValue::StringValue(s) => s.clone(),
        AnyValue::IntValue(i) => i.to_string(),
        AnyValue::BoolValue(b) => b.to_string(),
        AnyValue::DoubleValue(d) => d.to_string(),
        other => format!("{other:?}"),
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A test CA and a certificate it signed for 127.0.0.1 and localhost, in PEM.
pub struct TestCertificates {
    pub ca: String,
    pub cert: String,
    pub key: String,
}

impl TestCertificates {
    /// # Panics
    ///
    /// When rcgen cannot make the keys or certificates.
    pub fn generate() -> Self {
        let ca_key = KeyPair::generate().expect("a CA key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(DnType::CommonName, "reloader OTLP test CA");
        let ca = ca_params.self_signed(&ca_key).expect("the CA certificate");
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate().expect("a server key");
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).expect("server parameters");
        params.subject_alt_names.push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        params.distinguished_name.push(DnType::CommonName, "reloader OTLP test receiver");
        let cert = params.signed_by(&key, &issuer).expect("the server certificate");
        Self { ca: ca.pem(), cert: cert.pem(), key: key.serialize_pem() }
    }

    fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        use rustls::pki_types::pem::PemObject as _;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let certs =
            vec![CertificateDer::from_pem_slice(self.cert.as_bytes()).expect("the server certificate")];
        let key = PrivateKeyDer::from_pem_slice(self.key.as_bytes()).expect("the server key");
        let config =
            rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .expect("TLS versions")
                .with_no_client_auth()
                .with_single_cert(certs, key)
                .expect("the receiver's TLS settings");
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    }
}
