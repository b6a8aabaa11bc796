//! A slow and flaky API server: an HTTP proxy in front of kube-apiserver that, once faults are
//! on, holds every request for 1–2 s and answers a share of the writes (PATCH, PUT, POST,
//! DELETE) itself with 429 (`Retry-After`), 503 (`Retry-After`) or 500, without forwarding them,
//! as an API server's priority-and-fairness filter or an overloaded one does. Apart from those
//! faults it can make the first write to each of some paths fail once (503), so that a client's
//! retry path, and what that path needs, is exercised on every run, and it can refuse streaming
//! lists as an API server without the WatchList feature does, so that a client's paged-list
//! fallback, and what it needs, is exercised on a server that streams. It records
//! when each request arrived and was answered, and how, so a test can check the client's
//! retries from the server's side. Clients reach it over plain HTTP on 127.0.0.1 (a derived
//! kubeconfig); it speaks HTTPS to kube-apiserver.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use reloader_harness::{ControlPlane, KubeconfigFile};
use tokio::task::JoinHandle;

/// What the proxy did with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Passed to kube-apiserver, which answered this status.
    Forwarded(u16),
    /// Answered by the proxy with this status and `Retry-After` seconds, never forwarded.
    Injected { code: u16, retry_after: Option<u64> },
    /// kube-apiserver could not be reached.
    Unreachable,
}

/// One request as the proxy saw it.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub arrived: Instant,
    pub answered: Instant,
    pub method: Method,
    /// The path without the query.
    pub path: String,
    pub outcome: Outcome,
}

impl Exchange {
    pub fn injected(&self) -> Option<(u16, Option<u64>)> {
        match self.outcome {
            Outcome::Injected { code, retry_after } => Some((code, retry_after)),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
struct Faults {
    /// Latency and random failures apply.
    on: bool,
    /// The share of writes that fail.
    failure_rate: f64,
    /// Writes to paths containing one of these always fail with 503 and `Retry-After: 1`.
    doomed: Vec<String>,
    /// The first write to each path containing one of these fails with 503 and
    /// `Retry-After: 1`, whether faults are on or not.
    stumbling: Vec<String>,
    /// Watches asking for the initial list (`sendInitialEvents=true`) are refused with 422.
    refuse_streaming_lists: bool,
}

struct Shared {
    upstream: String,
    http: reqwest::Client,
    faults: Mutex<Faults>,
    random: Mutex<u64>,
    log: Mutex<Vec<Exchange>>,
    /// The paths whose first write has failed already.
    stumbled: Mutex<HashSet<String>>,
}

pub struct FlakyProxy {
    address: std::net::SocketAddr,
    shared: Arc<Shared>,
    server: JoinHandle<()>,
    kubeconfig: KubeconfigFile,
}

impl FlakyProxy {
    /// Listens on a free port of 127.0.0.1, forwarding to `plane`'s kube-apiserver; faults are
    /// off until [`Self::faults_on`]. `seed` makes the random choices repeatable.
    pub async fn start(plane: &ControlPlane, seed: u64) -> Self {
        let pem =
            std::fs::read(plane.dir().join("certs/apiserver.crt")).expect("the API server's certificate");
        let mut http = reqwest::Client::builder();
        for certificate in reqwest::Certificate::from_pem_bundle(&pem).unwrap() {
            http = http.add_root_certificate(certificate);
        }
        let shared = Arc::new(Shared {
            upstream: plane.url(),
            http: http.build().unwrap(),
            faults: Mutex::new(Faults {
                on: false,
                failure_rate: 0.0,
                doomed: Vec::new(),
                stumbling: Vec::new(),
                refuse_streaming_lists: false,
            }),
            random: Mutex::new(seed.max(1)),
            log: Mutex::new(Vec::new()),
            stumbled: Mutex::new(HashSet::new()),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let app = Router::new().fallback(forward).with_state(shared.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let kubeconfig = KubeconfigFile::with_server(plane, &format!("http://{address}")).unwrap();
        FlakyProxy { address, shared, server, kubeconfig }
    }

    /// A kubeconfig whose server is this proxy (the admin identity).
    pub fn kubeconfig(&self) -> &std::path::Path {
        self.kubeconfig.path()
    }

    /// `http://127.0.0.1:<port>`, for a kubeconfig of another identity.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// `127.0.0.1:<port>`, the `host` label of the client's requests.
    pub fn host(&self) -> String {
        self.address.to_string()
    }

    /// Turns on the latency and fails `failure_rate` of the writes.
    pub fn faults_on(&self, failure_rate: f64) {
        let mut faults = self.shared.faults.lock().unwrap();
        faults.on = true;
        faults.failure_rate = failure_rate;
    }

    /// Every write to a path containing `fragment` fails from now on.
    pub fn doom(&self, fragment: &str) {
        self.shared.faults.lock().unwrap().doomed.push(fragment.to_owned());
    }

    /// The first write to each path containing `fragment` fails once, from now on.
    pub fn stumble(&self, fragment: &str) {
        self.shared.faults.lock().unwrap().stumbling.push(fragment.to_owned());
    }

    /// Refuses streaming lists from now on, as kube-apiserver does with the WatchList feature off:
    /// 422 Invalid, without forwarding.
    pub fn refuse_streaming_lists(&self) {
        self.shared.faults.lock().unwrap().refuse_streaming_lists = true;
    }

    /// Every request so far, in the order they were answered.
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.shared.log.lock().unwrap().clone()
    }
}

impl Drop for FlakyProxy {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The query parameter that asks a watch for the initial list.
const STREAMING_LIST: &str = "sendInitialEvents=true";

fn is_write(method: &Method) -> bool {
    [Method::PATCH, Method::PUT, Method::POST, Method::DELETE].contains(method)
}

impl Shared {
    /// A number in [0, 1) (xorshift64: repeatable from the seed, good enough for dice).
    fn roll(&self) -> f64 {
        let mut state = self.random.lock().unwrap();
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        (*state >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The answer to inject instead of forwarding, if any.
    fn injection(&self, method: &Method, path: &str, query: &str) -> Option<(u16, Option<u64>)> {
        let faults = self.faults.lock().unwrap().clone();
        if faults.refuse_streaming_lists && query.split('&').any(|pair| pair == STREAMING_LIST) {
            return Some((422, None));
        }
        if !is_write(method) {
            return None;
        }
        if faults.stumbling.iter().any(|fragment| path.contains(fragment.as_str()))
            && self.stumbled.lock().unwrap().insert(path.to_owned())
        {
            return Some((503, Some(1)));
        }
        if !faults.on {
            return None;
        }
        if faults.doomed.iter().any(|fragment| path.contains(fragment.as_str())) {
            return Some((503, Some(1)));
        }
        if self.roll() >= faults.failure_rate {
            return None;
        }
        let kind = self.roll();
        Some(if kind < 0.4 {
            (429, Some(if self.roll() < 0.5 { 1 } else { 2 }))
        } else if kind < 0.7 {
            (503, Some(1))
        } else {
            (500, None)
        })
    }

    fn record(&self, exchange: Exchange) {
        self.log.lock().unwrap().push(exchange);
    }
}

async fn forward(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let arrived = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let query = request.uri().query().unwrap_or_default().to_owned();
    let faults_on = shared.faults.lock().unwrap().on;
    if faults_on {
        tokio::time::sleep(Duration::from_millis(1000 + (shared.roll() * 1000.0) as u64)).await;
    }
    let exchange = |outcome| Exchange {
        arrived,
        answered: Instant::now(),
        method: method.clone(),
        path: path.clone(),
        outcome,
    };
    if let Some((code, retry_after)) = shared.injection(&method, &path, &query) {
        shared.record(exchange(Outcome::Injected { code, retry_after }));
        return injected(code, retry_after);
    }

    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 64 << 20).await.unwrap_or_default();
    let url = format!("{}{}", shared.upstream, parts.uri.path_and_query().map_or("/", |p| p.as_str()));
    let mut upstream = shared.http.request(parts.method.clone(), url).body(body);
    for (name, value) in &parts.headers {
        if name != header::HOST && name != header::CONNECTION && name != header::CONTENT_LENGTH {
            upstream = upstream.header(name, value);
        }
    }
    let answer = match upstream.send().await {
        Ok(answer) => answer,
        Err(_) => {
            shared.record(exchange(Outcome::Unreachable));
            return status_only(StatusCode::BAD_GATEWAY);
        }
    };
    let status = answer.status();
    shared.record(exchange(Outcome::Forwarded(status.as_u16())));
    let mut response = Response::builder().status(status);
    for (name, value) in answer.headers() {
        if name != header::CONNECTION && name != header::TRANSFER_ENCODING && name != header::CONTENT_LENGTH {
            response = response.header(name, value);
        }
    }
    // Streamed chunk by chunk: watches are long-lived responses.
    let chunks = futures::stream::unfold(Some(answer), |answer| async move {
        let mut answer = answer?;
        match answer.chunk().await {
            Ok(Some(chunk)) => Some((Ok::<_, reqwest::Error>(chunk), Some(answer))),
            Ok(None) => None,
            Err(error) => Some((Err(error), None)),
        }
    });
    response.body(Body::from_stream(chunks)).unwrap()
}

/// The proxy's own refusal: a 429 as kube-apiserver's priority-and-fairness filter writes it
/// (plain text), 5xx as a Status.
fn injected(code: u16, retry_after: Option<u64>) -> Response {
    let status = StatusCode::from_u16(code).unwrap();
    let (content_type, body) = if code == 429 {
        ("text/plain; charset=utf-8", "Too many requests, please try again later.\n".to_owned())
    } else {
        let reason = match code {
            503 => "ServiceUnavailable",
            422 => "Invalid",
            _ => "InternalError",
        };
        let status_body = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
            "reason": reason, "message": format!("injected {code} by the flaky proxy"),
        });
        ("application/json", status_body.to_string())
    };
    let mut response = Response::builder().status(status).header(header::CONTENT_TYPE, content_type);
    if let Some(seconds) = retry_after {
        response = response.header(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response.body(Body::from(body)).unwrap()
}

fn status_only(status: StatusCode) -> Response {
    Response::builder().status(status).body(Body::empty()).unwrap()
}
