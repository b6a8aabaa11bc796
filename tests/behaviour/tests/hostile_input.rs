//! Hostile input to the admission webhook (docs/beyond-stakater.md §3), sent straight to the real
//! binary over TLS, byte for byte: malformed, truncated, cut-off, deeply nested, wrong-kind and
//! over-the-limit bodies (declared, streamed, and many streamed at once). Every one is answered
//! with a review, 400 or 413 (or the connection closed once a streamed body passes the limit),
//! the process stays up and answers `/healthz`, its memory stays within the body budget, and each
//! rejection shows in `reloader_admission_rejected_total{reason}` and in a log line that does not
//! quote the body.
//!
//! Build the binary first: `cargo build -p reloader-cli`.

use std::sync::Arc;
use std::time::Duration;

use reloader_harness::{Reloader, free_port, wait_until};
use reloader_tests::fixtures::TestEnv;
use reloader_tests::fixtures_extra::{WebhookCertificates, unique_token};
use rustls::pki_types::ServerName;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// The webhook's body limit (docs/beyond-stakater.md §3).
const LIMIT: usize = 8 * 1024 * 1024;
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);
/// Streamed bodies: 8 times the limit each, 16 at once (1 GiB in all).
const STREAMED_BYTES: usize = 64 * 1024 * 1024;
const STREAMS_AT_ONCE: usize = 16;
/// What the process may grow by: the webhook holds at most 32 MiB of bodies at once (four at
/// the limit); allocation slack on top. Without the limit one streamed body alone is 64 MiB.
const MEMORY_GROWTH_MAX: u64 = 96 * 1024 * 1024;

/// A client that trusts only the test CA and speaks HTTP/1.1 by hand, so it can send what no
/// HTTP library would: wrong lengths, bodies cut off, endless chunked streams.
struct Client {
    port: u16,
    connector: TlsConnector,
}

/// What came back: the status (`None` when the server closed without an answer) and the body.
#[derive(Debug)]
struct Answer {
    status: Option<u16>,
    body: String,
}

impl Client {
    fn new(port: u16, ca_pem: &str) -> Self {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        Client { port, connector: TlsConnector::from(Arc::new(config)) }
    }

    async fn connect(&self) -> std::io::Result<TlsStream<TcpStream>> {
        let tcp = TcpStream::connect(("127.0.0.1", self.port)).await?;
        self.connector.connect(ServerName::try_from("localhost").unwrap(), tcp).await
    }

    /// `POST /mutate` with `Content-Length: declared` and `body` (which may be shorter), then
    /// (when `close_write`) the sending half closed, and the answer read.
    async fn post(&self, declared: usize, body: &[u8], close_write: bool) -> Answer {
        let mut stream = self.connect().await.expect("TLS connection");
        let head = format!(
            "POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
             Content-Length: {declared}\r\nConnection: close\r\n\r\n"
        );
        // The server may answer and close before everything is sent (that is the point).
        let _ = stream.write_all(head.as_bytes()).await;
        let _ = stream.write_all(body).await;
        let _ = stream.flush().await;
        if close_write {
            let _ = stream.shutdown().await;
        }
        read_answer(&mut stream).await
    }

    /// `POST /mutate` with a chunked body of `total` spaces that has no declared length.
    async fn post_streamed(&self, total: usize) -> Answer {
        let mut stream = self.connect().await.expect("TLS connection");
        let head = "POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
                    Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
        let chunk = vec![b' '; 64 * 1024];
        let framed = [format!("{:x}\r\n", chunk.len()).as_bytes(), &chunk, b"\r\n"].concat();
        let write = async {
            let mut sent = 0;
            stream.write_all(head.as_bytes()).await?;
            while sent < total {
                stream.write_all(&framed).await?;
                sent += chunk.len();
            }
            stream.write_all(b"0\r\n\r\n").await?;
            stream.flush().await
        };
        // Refused mid-way, the server stops reading: the writes then fail or stall.
        let _ = tokio::time::timeout(ANSWER_TIMEOUT, write).await;
        read_answer(&mut stream).await
    }

    async fn get_healthz(&self) -> Answer {
        let mut stream = self.connect().await.expect("TLS connection");
        let request = "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
        stream.write_all(request.as_bytes()).await.unwrap();
        read_answer(&mut stream).await
    }
}

async fn read_answer(stream: &mut TlsStream<TcpStream>) -> Answer {
    let mut bytes = Vec::new();
    // A reset after the answer (the server closing with our bytes unread) ends the read early;
    // whatever arrived before it is the answer.
    let _ = tokio::time::timeout(ANSWER_TIMEOUT, stream.read_to_end(&mut bytes)).await;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let status = text.strip_prefix("HTTP/1.1 ").and_then(|rest| rest.get(..3)).and_then(|s| s.parse().ok());
    let body = text.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default();
    Answer { status, body }
}

/// An AdmissionReview v1 of `kind` in `namespace`, whose container carries `secret` as an env
/// var value: it must never appear in a log line.
fn review(group: &str, kind: &str, namespace: &str, secret: &str) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "0f6d2c8e-hostile",
            "kind": {"group": group, "version": "v1", "kind": kind},
            "resource": {"group": group, "version": "v1", "resource": "things"},
            "name": "web", "namespace": namespace, "operation": "CREATE",
            "userInfo": {"username": "hostile"},
            "object": {
                "apiVersion": if group.is_empty() { "v1".to_string() } else { format!("{group}/v1") },
                "kind": kind,
                "metadata": {"name": "web", "namespace": namespace},
                "spec": {
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {"spec": {"containers": [{
                        "name": "app", "image": "app:1", "env": [{"name": "PASSWORD", "value": secret}],
                    }]}},
                },
            },
        },
    })
}

/// `review` changed by `edit`, as bytes.
fn edited(mut review: Value, edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    edit(&mut review);
    serde_json::to_vec(&review).unwrap()
}

/// `VmRSS` and `VmHWM` (peak) of a process, in bytes.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the process is alive");
    let kib = |field: &str| -> u64 {
        let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("{field}"));
        line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
    };
    (kib("VmRSS:"), kib("VmHWM:"))
}

async fn rejected(reloader: &Reloader, reason: &str) -> f64 {
    let sample = format!(r#"reloader_admission_rejected_total{{reason="{reason}"}}"#);
    reloader.metric(&sample).await.unwrap().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_reviews_are_refused_and_the_webhook_stays_up_within_its_memory() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, .. } = &env;
    let namespace = ns.name();
    let certs = WebhookCertificates::generate();
    let port = free_port();
    let mut reloader = Reloader::builder(plane)
        .name("reloader")
        .args(certs.reloader_args(namespace, port))
        .start()
        .await
        .expect("reloader starts");
    let client = Client::new(port, &certs.ca_pem);
    let serving = wait_until("the webhook to serve /healthz", ANSWER_TIMEOUT, || async {
        match client.get_healthz().await.status {
            Some(200) => Ok(()),
            other => Err(reloader_harness::NotYet::because(format!("{other:?}"))),
        }
    });
    serving.await.unwrap();

    // Warm up with well-formed reviews, then take the memory baseline.
    let secret = unique_token("hostile-secret");
    let deployment = serde_json::to_vec(&review("apps", "Deployment", namespace, &secret)).unwrap();
    for _ in 0..20 {
        let answer = client.post(deployment.len(), &deployment, false).await;
        assert_eq!(answer.status, Some(200), "{answer:?}");
        let answer: Value = serde_json::from_str(&answer.body).unwrap();
        assert_eq!(answer["response"]["uid"], "0f6d2c8e-hostile");
        assert_eq!(answer["response"]["allowed"], true);
    }
    let (baseline_rss, _) = memory(reloader.pid());

    // One of each, with what it must be answered.
    let base = || review("apps", "Deployment", namespace, &secret);
    let truncated = deployment[..deployment.len() / 2].to_vec();
    let deep = "[".repeat(1024 * 1024).into_bytes();
    let cases: Vec<(&str, Vec<u8>, Option<u16>, &str)> = vec![
        ("not JSON", b"\x00\xff{{ hostile".to_vec(), Some(400), "malformed"),
        ("truncated JSON", truncated, Some(400), "malformed"),
        ("nested a million deep", deep, Some(400), "malformed"),
        ("a JSON string", format!("{secret:?}").into_bytes(), Some(400), "malformed"),
        (
            "no uid",
            edited(base(), |r| drop(r["request"].as_object_mut().unwrap().remove("uid"))),
            Some(400),
            "malformed",
        ),
        (
            "uid of the wrong type",
            edited(base(), |r| r["request"]["uid"] = json!({"x": &secret})),
            Some(400),
            "malformed",
        ),
        (
            "admission.k8s.io/v1beta1",
            edited(base(), |r| r["apiVersion"] = json!("admission.k8s.io/v1beta1")),
            Some(400),
            "wrong_kind",
        ),
        ("kind Deployment", edited(base(), |r| r["kind"] = json!("Deployment")), Some(400), "wrong_kind"),
        (
            "no request",
            edited(base(), |r| drop(r.as_object_mut().unwrap().remove("request"))),
            Some(400),
            "wrong_kind",
        ),
    ];
    let mut expected_rejections: std::collections::BTreeMap<&str, f64> = Default::default();
    for (what, body, status, reason) in &cases {
        let answer = client.post(body.len(), body, false).await;
        assert_eq!(answer.status, *status, "{what}: {answer:?}");
        assert!(!answer.body.contains(&secret), "{what}: the answer quotes the body: {}", answer.body);
        *expected_rejections.entry(reason).or_default() += 1.0;
    }

    // A review of a kind that is no workload: allowed unchanged, never blocked.
    let pod = serde_json::to_vec(&review("", "Pod", namespace, &secret)).unwrap();
    let answer = client.post(pod.len(), &pod, false).await;
    assert_eq!(answer.status, Some(200), "{answer:?}");
    let parsed: Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(parsed["response"]["allowed"], true);
    assert!(parsed["response"].get("patch").is_none(), "no patch for a Pod: {parsed}");

    // A body cut off before its declared length, the sending half closed.
    let answer = client.post(deployment.len() + 1000, &deployment, true).await;
    assert!(matches!(answer.status, Some(400) | None), "cut off: {answer:?}");
    *expected_rejections.entry("malformed").or_default() += 1.0;

    // Declared over the limit (a terabyte), a few bytes sent: refused before reading.
    let start = [b'{'; 4096];
    let answer = client.post(1 << 40, &start, false).await;
    assert_eq!(answer.status, Some(413), "declared too large: {answer:?}");
    let answer = client.post(LIMIT + 1, &start, false).await;
    assert_eq!(answer.status, Some(413), "one byte over: {answer:?}");
    *expected_rejections.entry("too_large").or_default() += 2.0;

    // Streamed past the limit without a length, one and then many at once.
    let answer = client.post_streamed(STREAMED_BYTES).await;
    assert!(matches!(answer.status, Some(413) | None), "streamed: {answer:?}");
    let streams = (0..STREAMS_AT_ONCE).map(|_| client.post_streamed(STREAMED_BYTES));
    for answer in futures::future::join_all(streams).await {
        assert!(matches!(answer.status, Some(413) | None), "streamed at once: {answer:?}");
    }
    *expected_rejections.entry("too_large").or_default() += 1.0 + STREAMS_AT_ONCE as f64;

    // Still up, still answering, memory held.
    assert_eq!(reloader.exit_status(), None, "the webhook process is alive");
    assert_eq!(client.get_healthz().await.status, Some(200));
    let answer = client.post(deployment.len(), &deployment, false).await;
    assert_eq!(answer.status, Some(200), "a good review after the hostile ones: {answer:?}");
    let (rss, peak) = memory(reloader.pid());
    eprintln!(
        "RSS {} MiB before the hostile bodies, {} MiB after, peak {} MiB",
        baseline_rss >> 20,
        rss >> 20,
        peak >> 20
    );
    assert!(
        peak.saturating_sub(baseline_rss) < MEMORY_GROWTH_MAX,
        "peak RSS grew by {} MiB",
        (peak - baseline_rss) >> 20
    );

    // Every rejection counted by its reason (the counters are bumped before the answer is sent).
    for (reason, expected) in &expected_rejections {
        assert_eq!(
            rejected(&reloader, reason).await,
            *expected,
            "reloader_admission_rejected_total{{reason={reason:?}}}"
        );
    }
    // And logged once each, by reason, without the body.
    let log = reloader.log_text();
    for (reason, expected) in &expected_rejections {
        let lines = log.lines().filter(|l| l.contains("request rejected") && l.contains(reason)).count();
        assert_eq!(lines as f64, *expected, "log lines for {reason}:\n{log}");
    }
    assert!(log.contains("not a workload"), "the Pod review is named in the log:\n{log}");
    assert!(!log.contains(&secret), "a log line quotes a review's body:\n{log}");
    assert!(!log.contains("panicked"), "{log}");
}
