//! docs/compatibility.md §11 on the plane: after a reload, `/metrics` has Stakater v1.4.21's
//! series with Stakater's label values (the initial list counted as `add`, an update without a
//! data change as `no_data_change`, ...), the `process_*` series and client-go's
//! `rest_client_*` series for the requests reloader made; and the default `:port` listener
//! answers over IPv4 and IPv6.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reloader_harness::{NotYet, free_port, wait_until};
use reloader_tests::fixtures::*;

const TIMEOUT: Duration = Duration::from_secs(60);
const CONFIG: &str = "app-config";

/// The labels of one sample, by name.
type Labels = BTreeMap<String, String>;

/// One scrape: sample name → its samples (labels, value).
struct Scrape(BTreeMap<String, Vec<(Labels, f64)>>);

impl Scrape {
    fn parse(text: &str) -> Self {
        let mut samples: BTreeMap<String, Vec<_>> = BTreeMap::new();
        for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
            let (series, value) = line.rsplit_once(' ').expect("a sample line");
            let value: f64 = value.parse().unwrap_or_else(|_| panic!("value of {line}"));
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, parse_labels(rest.trim_end_matches('}'))),
                None => (series, Labels::new()),
            };
            samples.entry(name.to_owned()).or_default().push((labels, value));
        }
        Scrape(samples)
    }

    /// The sum of `name` over the samples whose labels include `labels`.
    fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.0
            .get(name)
            .into_iter()
            .flatten()
            .filter(|(have, _)| labels.iter().all(|(k, v)| have.get(*k).map(String::as_str) == Some(*v)))
            .map(|(_, value)| value)
            .sum()
    }

    fn has(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    /// Every value label `label` takes in `name`.
    fn values(&self, name: &str, label: &str) -> BTreeSet<String> {
        self.0.get(name).into_iter().flatten().filter_map(|(labels, _)| labels.get(label).cloned()).collect()
    }
}

/// `a="x",b="y"` (values without commas or escaped quotes, which is all this test meets).
fn parse_labels(text: &str) -> Labels {
    text.split("\",")
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once("=\"").expect("a label pair");
            (key.to_owned(), value.trim_end_matches('"').to_owned())
        })
        .collect()
}

async fn get(ip: IpAddr, port: u16, path: &str) -> Result<(u16, String), NotYet> {
    let url = format!("http://{}{path}", SocketAddr::new(ip, port));
    let response = reqwest::get(&url).await.map_err(|e| NotYet::because(format!("{url}: {e}")))?;
    let status = response.status().as_u16();
    Ok((status, response.text().await.map_err(|e| NotYet::because(e.to_string()))?))
}

async fn scrape(port: u16) -> Scrape {
    let (status, text) = get(IpAddr::V4(Ipv4Addr::LOCALHOST), port, "/metrics").await.unwrap();
    assert_eq!(status, 200);
    Scrape::parse(&text)
}

/// Waits until `name{labels}` sums to at least `at_least`.
async fn wait_metric(port: u16, name: &str, labels: &[(&str, &str)], at_least: f64) -> Scrape {
    wait_until(&format!("{name}{labels:?} >= {at_least}"), TIMEOUT, || async {
        let scrape = scrape(port).await;
        match scrape.sum(name, labels) {
            value if value >= at_least => Ok(scrape),
            value => Err(NotYet::because(format!("{value}"))),
        }
    })
    .await
    .unwrap()
}

/// 127.0.0.1, and ::1 where this machine has an IPv6 loopback (CI containers may not).
fn loopbacks() -> Vec<IpAddr> {
    let mut ips = vec![IpAddr::V4(Ipv4Addr::LOCALHOST)];
    if std::net::TcpListener::bind("[::1]:0").is_ok() {
        ips.push(IpAddr::V6(Ipv6Addr::LOCALHOST));
    }
    ips
}

/// Stakater v1.4.21's label values, label by label (internal/pkg/metrics, controller, handler).
fn assert_only_stakater_values(scrape: &Scrape) {
    let allowed: &[(&str, &str, &[&str])] = &[
        ("reloader_events_received_total", "event_type", &["add", "update", "delete"]),
        (
            "reloader_events_received_total",
            "resource_type",
            &["configmaps", "secrets", "namespaces", "secretproviderclasspodstatuses"],
        ),
        ("reloader_events_processed_total", "event_type", &["unknown"]),
        ("reloader_events_processed_total", "result", &["success", "dropped"]),
        (
            "reloader_skipped_total",
            "reason",
            &["ignored_or_not_selected", "no_data_change", "strategy_not_updated"],
        ),
        ("reloader_errors_total", "type", &["handler_error", "invalid_handler_type"]),
        ("reloader_reconcile_total", "result", &["success", "error", "skipped"]),
        ("reloader_action_total", "result", &["success", "error"]),
        (
            "reloader_action_total",
            "workload_kind",
            &["Deployment", "CronJob", "Job", "DaemonSet", "StatefulSet", "Rollout"],
        ),
        ("reloader_reload_executed_total", "success", &["true", "false"]),
    ];
    for (name, label, values) in allowed {
        let found = scrape.values(name, label);
        let unexpected: Vec<_> = found.iter().filter(|v| !values.contains(&v.as_str())).collect();
        assert!(unexpected.is_empty(), "{name}{{{label}}} has non-Stakater values {unexpected:?}");
    }
}

/// A reload, then an update that changes only a label: every Stakater series counts them as
/// Stakater does, the process and client-go series are there with sensible values, and the
/// default-style `:port` address answers on 127.0.0.1 and ::1.
#[tokio::test]
async fn stakater_series_process_and_rest_client_after_a_reload() {
    let env = TestEnv::new().await;
    let TestEnv { plane, ns, client, resources, .. } = &env;
    let config = ResourceRef::configmap(CONFIG);
    resources.create(&config, &[("k", "v1")]).await.unwrap();
    let web = WorkloadSpec::new(Kind::Deployment, "web")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_configmap(CONFIG)
        .create(client, ns.name())
        .await
        .unwrap();
    // Auto, but its pod spec uses another ConfigMap: Stakater runs its strategy on it for every
    // change in the namespace and counts `strategy_not_updated`.
    WorkloadSpec::new(Kind::Deployment, "bystander")
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_configmap("bystander-config")
        .create(client, ns.name())
        .await
        .unwrap();

    // No host: one dual-stack socket, as Go's `:9090`.
    let port = free_port();
    let _reloader =
        env.reloader_builder().arg(format!("--metrics-addr=:{port}")).no_wait().start().await.unwrap();
    for ip in &loopbacks() {
        wait_until(&format!("/readyz over {ip}"), TIMEOUT, || async {
            match get(*ip, port, "/readyz").await? {
                (200, _) => Ok(()),
                (status, body) => Err(NotYet::because(format!("{status} {body}"))),
            }
        })
        .await
        .unwrap();
    }

    // The initial list counts as `add`: kube-root-ca.crt and app-config in the namespace.
    let listed = wait_metric(
        port,
        "reloader_events_received_total",
        &[("event_type", "add"), ("resource_type", "configmaps")],
        2.0,
    )
    .await;
    assert_eq!(listed.sum("reloader_events_processed_total", &[]), 0.0, "the initial list is not handled");

    let hash = resources.update_data(&config, &[("k", "v2")]).await.unwrap();
    web.wait_for_marker(client, &config, Strategy::EnvVars, &hash, TIMEOUT).await.unwrap();
    wait_metric(
        port,
        "reloader_action_total",
        &[("workload_kind", "Deployment"), ("result", "success")],
        1.0,
    )
    .await;
    resources.update_metadata(&config, &[("touched", "yes")], &[]).await.unwrap();
    let scrape = wait_metric(port, "reloader_skipped_total", &[("reason", "no_data_change")], 1.0).await;

    // Stakater's series, counted for the same things.
    let events = |event_type| [("event_type", event_type), ("resource_type", "configmaps")];
    assert_eq!(scrape.sum("reloader_events_received_total", &events("update")), 2.0);
    assert_eq!(scrape.sum("reloader_events_received_total", &events("create")), 0.0);
    let processed = [("event_type", "unknown"), ("resource_type", "configmaps"), ("result", "success")];
    assert_eq!(scrape.sum("reloader_events_processed_total", &processed), 2.0);
    // Each handled event twice, as Stakater: the handler's result, then the queue's success.
    assert_eq!(scrape.sum("reloader_reconcile_total", &[("result", "success")]), 3.0);
    assert_eq!(scrape.sum("reloader_reconcile_total", &[("result", "skipped")]), 1.0);
    assert_eq!(scrape.sum("reloader_reconcile_duration_seconds_count", &[]), 4.0);
    assert_eq!(scrape.sum("reloader_skipped_total", &[("reason", "no_data_change")]), 1.0);
    assert_eq!(scrape.sum("reloader_skipped_total", &[("reason", "strategy_not_updated")]), 1.0);
    assert_eq!(scrape.sum("reloader_reload_executed_total", &[("success", "true")]), 1.0);
    assert_eq!(scrape.sum("reloader_reload_executed_total", &[("success", "false")]), 0.0);
    assert_eq!(scrape.sum("reloader_action_latency_seconds_count", &[("workload_kind", "Deployment")]), 1.0);
    assert_eq!(scrape.sum("reloader_workloads_scanned_total", &[("kind", "Deployment")]), 2.0);
    assert_eq!(scrape.sum("reloader_workloads_matched_total", &[("kind", "Deployment")]), 1.0);
    assert!(scrape.sum("reloader_workqueue_adds_total", &[]) >= 1.0);
    assert!(scrape.has("reloader_workqueue_depth"));
    assert!(scrape.sum("reloader_workqueue_latency_seconds_count", &[]) >= 1.0);
    assert!(scrape.has("reloader_retries_total"));
    assert_only_stakater_values(&scrape);
    // Our detailed outcomes live in our own series.
    let ours = [("event_type", "update"), ("resource_type", "configmaps"), ("outcome", "queued")];
    assert_eq!(scrape.sum("reloader_resource_events_total", &ours), 1.0);

    // process_*, read from the process itself.
    assert!(scrape.sum("process_cpu_seconds_total", &[]) > 0.0);
    let resident = scrape.sum("process_resident_memory_bytes", &[]);
    assert!(resident > 1_000_000.0, "resident {resident}");
    assert!(scrape.sum("process_virtual_memory_bytes", &[]) >= resident);
    let open_fds = scrape.sum("process_open_fds", &[]);
    assert!(open_fds >= 3.0, "open fds {open_fds}");
    assert!(scrape.sum("process_max_fds", &[]) >= open_fds);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64();
    let started = scrape.sum("process_start_time_seconds", &[]);
    assert!(started > now - 600.0 && started <= now + 1.0, "started {started}, now {now}");

    // rest_client_*: every request to the API server, by status, method and host.
    let host = plane.url().trim_start_matches("https://").trim_end_matches('/').to_owned();
    assert_eq!(scrape.values("rest_client_requests_total", "host"), BTreeSet::from([host.clone()]));
    let requests =
        |code, method| scrape.sum("rest_client_requests_total", &[("code", code), ("method", method)]);
    assert!(requests("200", "GET") >= 4.0, "the watches (their initial lists streamed) and start-up's reads");
    assert!(requests("200", "PATCH") >= 1.0, "the reload's patch");
    assert!(requests("201", "POST") >= 1.0, "the Reloaded Event");
    let durations =
        |verb| scrape.sum("rest_client_request_duration_seconds_count", &[("verb", verb), ("host", &host)]);
    // Watches have no duration (as in client-go); the lists are streamed as watches and a
    // write reads nothing, so the GETs timed are start-up's (the API server's version, discovery).
    assert!(durations("GET") >= 1.0);
    assert!(durations("PATCH") >= 1.0);
    let buckets = scrape.values("rest_client_request_duration_seconds_bucket", "le");
    let expected: BTreeSet<String> =
        ["0.001", "0.01", "0.05", "0.1", "0.5", "1.0", "5.0", "10.0", "30.0", "+Inf"]
            .map(String::from)
            .into();
    assert_eq!(buckets, expected);
}

/// The admission webhook's address without a host (`--webhook-addr=:port`, like its default
/// `:9443`) accepts TLS connections over 127.0.0.1 and ::1.
#[tokio::test]
async fn webhook_address_without_a_host_answers_on_ipv4_and_ipv6() {
    let env = TestEnv::new().await;
    let dir = tempfile::tempdir().unwrap();
    let issued = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, issued.cert.pem()).unwrap();
    std::fs::write(&key, issued.signing_key.serialize_pem()).unwrap();
    let port = free_port();
    let _reloader = env
        .reloader_builder()
        .arg("--admission-webhook")
        .arg(format!("--webhook-addr=:{port}"))
        .arg(format!("--webhook-tls-cert={}", cert.display()))
        .arg(format!("--webhook-tls-key={}", key.display()))
        .start()
        .await
        .unwrap();
    let https = reqwest::Client::builder().danger_accept_invalid_certs(true).build().unwrap();
    for ip in loopbacks() {
        let url = format!("https://{}/", SocketAddr::new(ip, port));
        let status = wait_until(&format!("the webhook over {ip}"), TIMEOUT, || async {
            let response =
                https.get(&url).send().await.map_err(|e| NotYet::because(format!("{url}: {e}")))?;
            Ok(response.status().as_u16())
        })
        .await
        .unwrap();
        assert!(status < 500, "{url}: {status}");
    }
}
