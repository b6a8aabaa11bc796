//! A slow and flaky API server (docs/behaviour.md F52): the controller talks to kube-apiserver
//! through a proxy that holds every request 1–2 s and fails 10 % of the writes with 429
//! (`Retry-After`), 503 (`Retry-After`) or 500. Every needed reload lands exactly once (counted
//! from the API server and at the proxy); each retry waits at least the `Retry-After` the proxy
//! sent and backs off (checked from the proxy's timestamps); the retries show in the log and in
//! `reloader_retries_total` and `rest_client_requests_total{code}`; a burst of 500 changes keeps
//! the write queue within one entry per workload and the memory bounded; a workload whose write
//! fails for good gets its ReloadFail Event, log line and metrics.

mod ha_support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ha_support::{auto_spec, generation, reloads_executed};
use kube::Client;
use reloader_harness::{NotYet, Reloader, wait_until};
use reloader_tests::fixtures::{Kind, ResourceRef, Strategy, TestEnv, WorkloadId, events_for, negative_wait};
use reloader_tests::fixtures_extra::{Exchange, FlakyProxy, Outcome};

const WORKLOADS: usize = 8;
const FAILURE_RATE: f64 = 0.1;
/// Rounds of one change per workload, until the proxy has injected each kind of failure into
/// the controller's workload writes (each round: 8 writes, ~0.8 failures).
const MAX_ROUNDS: usize = 25;
const BURST: usize = 500;
/// Every write is held 1–2 s and may be retried after a Retry-After of up to 2 s.
const REACTION: Duration = Duration::from_secs(120);
/// The writer's first pause after a transient failure without `Retry-After`.
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
/// RSS the burst may add on top of the steady state (the queue holds one entry per workload; a
/// queue growing with the events would hold 500 change sets and their work).
const RSS_GROWTH_LIMIT: u64 = 16 << 20;

async fn auto_deployment(client: &Client, namespace: &str, name: &str, configmap: &str) -> WorkloadId {
    auto_spec(name, configmap).without_pods().create(client, namespace).await.unwrap()
}

fn workload_path(workload: &WorkloadId) -> String {
    format!("/apis/apps/v1/namespaces/{}/deployments/{}", workload.namespace, workload.name)
}

/// The failures injected into writes of `workloads`, each with the time the controller next
/// came back to that workload (its re-read before the retry).
fn injected_with_next_visit<'a>(
    exchanges: &'a [Exchange],
    workloads: &[WorkloadId],
) -> Vec<(&'a Exchange, u16, Option<u64>, Option<Instant>)> {
    let paths: Vec<String> = workloads.iter().map(workload_path).collect();
    exchanges
        .iter()
        .filter(|e| e.method == "PATCH" && paths.contains(&e.path))
        .filter_map(|e| {
            let (code, retry_after) = e.injected()?;
            let next = exchanges
                .iter()
                .filter(|later| later.path == e.path && later.arrived > e.answered)
                .map(|later| later.arrived)
                .min();
            Some((e, code, retry_after, next))
        })
        .collect()
}

/// The workload PATCHes that failed in a way the writer retries, by the line it logs: the
/// proxy's injected answers, the rarer real ones (kube-apiserver unreachable through the proxy,
/// or a 409/429/5xx it answered itself), and those the proxy never received (sent on a pooled
/// connection it had just closed as idle, as a load balancer does).
const THROTTLED_LINE: &str = "throttled by the API server (429); retrying";
const CONFLICT_LINE: &str = "conflict; re-reading and retrying";
const TRANSIENT_LINE: &str = "transient error; retrying";
/// hyper's error for a request it could not send on its connection.
const UNSENT_ERROR: &str = "client error (SendRequest)";

#[derive(Debug, Default, PartialEq, Eq)]
struct FailedWrites {
    throttled: usize,
    conflicts: usize,
    transient: usize,
}

impl FailedWrites {
    fn of(exchanges: &[Exchange], workloads: &[WorkloadId]) -> Self {
        let paths: Vec<String> = workloads.iter().map(workload_path).collect();
        let mut failed = Self::default();
        for e in exchanges.iter().filter(|e| e.method == "PATCH" && paths.contains(&e.path)) {
            match e.outcome {
                Outcome::Injected { code: 429, .. } | Outcome::Forwarded(429) => failed.throttled += 1,
                Outcome::Forwarded(409) => failed.conflicts += 1,
                Outcome::Injected { .. } | Outcome::Unreachable => failed.transient += 1,
                Outcome::Forwarded(code) if code >= 500 => failed.transient += 1,
                Outcome::Forwarded(_) => {}
            }
        }
        failed
    }

    /// Adds the retries of writes that never reached the proxy, which only the controller's log
    /// shows: a client-side send error, never an answer.
    fn and_unsent(self, log: &str) -> Self {
        self.and_unsent_by(log, "")
    }

    /// [`Self::and_unsent`] for the writes of workloads whose names contain `workload`.
    fn and_unsent_by(self, log: &str, workload: &str) -> Self {
        let unsent = log
            .lines()
            .filter(|l| l.contains(TRANSIENT_LINE) && l.contains(UNSENT_ERROR) && l.contains(workload))
            .count();
        Self { transient: self.transient + unsent, ..self }
    }

    /// The retries the controller logged, one line each.
    fn logged(log: &str) -> Self {
        let lines = |text: &str| log.lines().filter(|l| l.contains(text)).count();
        Self {
            throttled: lines(THROTTLED_LINE),
            conflicts: lines(CONFLICT_LINE),
            transient: lines(TRANSIENT_LINE),
        }
    }

    /// Each is one retry in `reloader_retries_total`.
    fn retries(&self) -> f64 {
        (self.throttled + self.conflicts + self.transient) as f64
    }
}

/// Each retry came back no sooner than the server asked, or than the first backoff.
fn assert_retries_waited(injected: &[(&Exchange, u16, Option<u64>, Option<Instant>)]) {
    for (exchange, code, retry_after, next) in injected {
        let next = next.unwrap_or_else(|| panic!("no retry after {exchange:?}"));
        let waited = next.duration_since(exchange.answered);
        let floor = retry_after.map_or(FIRST_BACKOFF, Duration::from_secs);
        assert!(
            waited >= floor,
            "{code} with Retry-After {retry_after:?} on {}: retried after {waited:?}",
            exchange.path
        );
    }
}

async fn metric(reloader: &Reloader, sample: &str) -> f64 {
    reloader.metric(sample).await.unwrap().unwrap_or(0.0)
}

fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0);
    kib * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_flaky_api_server_every_reload_lands_once_retries_honour_retry_after() {
    let env = TestEnv::new().await;
    let TestEnv { ns, client, resources, plane, .. } = &env;
    let configs: Vec<ResourceRef> =
        (1..=WORKLOADS).map(|i| ResourceRef::configmap(format!("config-{i}"))).collect();
    let mut workloads = Vec::new();
    for (i, config) in configs.iter().enumerate() {
        resources.create(config, &[("round", "0")]).await.unwrap();
        workloads.push(auto_deployment(client, ns.name(), &format!("web-{}", i + 1), &config.name).await);
    }
    let proxy = FlakyProxy::start(plane, 0x5eed_f1a4).await;
    // Up to MAX_ROUNDS reloads of each workload within minutes: a loop, to the loop guard.
    let reloader =
        env.reloader_builder().kubeconfig(proxy.kubeconfig()).arg("--loop-guard=off").start().await.unwrap();
    let host = proxy.host();
    proxy.faults_on(FAILURE_RATE);

    // 1. Rounds of one change per workload until 429s and 5xx have hit workload writes.
    let mut rounds = 0;
    let mut slowest = Duration::ZERO;
    loop {
        rounds += 1;
        let round = rounds.to_string();
        let mut hashes = Vec::new();
        for config in &configs {
            hashes.push(resources.update_data(config, &[("round", round.as_str())]).await.unwrap());
        }
        let changed = Instant::now();
        for ((workload, config), hash) in workloads.iter().zip(&configs).zip(&hashes) {
            workload.wait_for_marker(client, config, Strategy::EnvVars, hash, REACTION).await.unwrap();
        }
        slowest = slowest.max(changed.elapsed());
        let exchanges = proxy.exchanges();
        let injected = injected_with_next_visit(&exchanges, &workloads);
        let throttled = injected.iter().any(|(_, code, ..)| *code == 429);
        let failed = injected.iter().any(|(_, code, ..)| *code >= 500);
        if (throttled && failed) || rounds == MAX_ROUNDS {
            break;
        }
    }
    tokio::time::sleep(negative_wait(slowest)).await;
    for workload in &workloads {
        assert_eq!(generation(client, workload).await, 1 + rounds as i64, "{workload}: once per round");
    }
    let exchanges = proxy.exchanges();
    let injected = injected_with_next_visit(&exchanges, &workloads);
    let throttled = injected.iter().filter(|(_, code, ..)| *code == 429).count();
    let server_errors = injected.len() - throttled;
    assert!(throttled > 0 && server_errors > 0, "in {rounds} rounds: {injected:#?}");
    let patches_landed = exchanges
        .iter()
        .filter(|e| e.method == "PATCH" && e.outcome == Outcome::Forwarded(200))
        .filter(|e| workloads.iter().any(|w| workload_path(w) == e.path))
        .count();
    assert_eq!(patches_landed, WORKLOADS * rounds, "workload PATCHes the API server accepted");
    assert_retries_waited(&injected);
    // The trace an operator follows: metrics and log lines, one per retry.
    let log = reloader.log_text();
    let failed = FailedWrites::of(&exchanges, &workloads).and_unsent(&log);
    assert_eq!(reloads_executed(&reloader).await, (WORKLOADS * rounds) as f64);
    assert_eq!(metric(&reloader, r#"reloader_reload_executed_total{success="false"}"#).await, 0.0);
    assert_eq!(
        metric(&reloader, "reloader_retries_total").await,
        failed.retries(),
        "one retry per failed write"
    );
    let code_sample =
        |code: u16| format!(r#"rest_client_requests_total{{code="{code}",method="PATCH",host="{host}"}}"#);
    assert_eq!(metric(&reloader, &code_sample(429)).await, failed.throttled as f64);
    let server_error_samples =
        metric(&reloader, &code_sample(500)).await + metric(&reloader, &code_sample(503)).await;
    assert!(
        server_error_samples >= server_errors as f64,
        "{server_error_samples} 5xx counted, {server_errors} injected"
    );
    assert_eq!(FailedWrites::logged(&log), failed, "{log}");
    // A reload's line says how many retries it took, once.
    let reloaded: Vec<&str> = log.lines().filter(|l| l.contains(" reloaded ")).collect();
    let retries = |line: &str| -> Option<u32> {
        let (_, value) = line.split_once(" retries=")?;
        value.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
    };
    assert!(reloaded.iter().all(|l| l.matches(" retries=").count() == 1), "{log}");
    assert!(
        reloaded.iter().filter_map(|l| retries(l)).any(|n| n > 0),
        "no reload logged with its retries: {log}"
    );
    assert!(!log.contains("reload failed"), "{log}");
    eprintln!(
        "flaky API server: {rounds} rounds of {WORKLOADS} changes, {throttled} 429s and {server_errors} 5xx \
         injected into workload writes, slowest round {slowest:?}"
    );

    // 2. A burst of 500 changes: the queue holds one entry per workload, memory stays bounded.
    let pid = reloader.pid();
    let rss_before = rss_bytes(pid);
    let before: BTreeMap<&WorkloadId, i64> =
        futures::future::join_all(workloads.iter().map(|w| async move { (w, generation(client, w).await) }))
            .await
            .into_iter()
            .collect();
    let executed_before = reloads_executed(&reloader).await;
    let burst_done = AtomicBool::new(false);
    let sampling = async {
        let (mut depth, mut rss, mut samples) = (0.0f64, 0u64, 0);
        while !burst_done.load(Ordering::Relaxed) {
            depth = depth.max(metric(&reloader, "reloader_workqueue_depth").await);
            rss = rss.max(rss_bytes(pid));
            samples += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        (depth, rss, samples)
    };
    let burst = async {
        let mut last = vec![String::new(); WORKLOADS];
        for n in 0..BURST {
            let slot = n % WORKLOADS;
            let value = format!("burst-{n}");
            last[slot] = resources.update_data(&configs[slot], &[("round", value.as_str())]).await.unwrap();
        }
        let sent = Instant::now();
        for ((workload, config), hash) in workloads.iter().zip(&configs).zip(&last) {
            workload.wait_for_marker(client, config, Strategy::EnvVars, hash, REACTION).await.unwrap();
        }
        burst_done.store(true, Ordering::Relaxed);
        sent.elapsed()
    };
    let (converged, (max_depth, max_rss, samples)) = tokio::join!(burst, sampling);
    assert!(samples > 10, "only {samples} samples of the queue depth");
    assert!(
        max_depth <= WORKLOADS as f64,
        "the write queue held {max_depth} entries for {WORKLOADS} workloads"
    );
    let growth = max_rss.saturating_sub(rss_before);
    assert!(growth <= RSS_GROWTH_LIMIT, "RSS grew by {} MiB during the burst", growth >> 20);
    tokio::time::sleep(negative_wait(slowest)).await;
    let mut written = 0;
    for workload in &workloads {
        let delta = generation(client, workload).await - before[workload];
        assert!(
            (1..=(BURST / WORKLOADS) as i64).contains(&delta),
            "{workload}: {delta} writes for the burst"
        );
        written += delta;
    }
    assert_eq!(
        reloads_executed(&reloader).await - executed_before,
        written as f64,
        "each write counted once"
    );
    let landed_after = proxy
        .exchanges()
        .iter()
        .filter(|e| e.method == "PATCH" && e.outcome == Outcome::Forwarded(200))
        .filter(|e| workloads.iter().any(|w| workload_path(w) == e.path))
        .count();
    assert_eq!(landed_after - patches_landed, written as usize, "workload PATCHes the API server accepted");
    let exchanges = proxy.exchanges();
    let injected = injected_with_next_visit(&exchanges, &workloads);
    assert_retries_waited(&injected);
    let failed = FailedWrites::of(&exchanges, &workloads).and_unsent(&reloader.log_text());
    assert_eq!(
        metric(&reloader, "reloader_retries_total").await,
        failed.retries(),
        "one retry per failed write"
    );
    eprintln!(
        "burst of {BURST} changes ({} failures injected into workload writes so far): {written} writes, converged {converged:?} after the last change; queue depth \
         at most {max_depth} ({samples} samples); RSS {} MiB before, peak +{} KiB",
        injected.len(),
        rss_before >> 20,
        growth >> 10
    );

    // 3. A workload whose every write fails: retries wait Retry-After and back off, then give up
    // with the log line, metrics and Event an operator looks for.
    proxy.faults_on(0.0);
    let doomed_config = ResourceRef::configmap("doomed-config");
    resources.create(&doomed_config, &[("k", "v1")]).await.unwrap();
    let doomed = auto_deployment(client, ns.name(), "doomed", &doomed_config.name).await;
    proxy.doom(&workload_path(&doomed));
    resources.update_data(&doomed_config, &[("k", "v2")]).await.unwrap();
    let events = wait_until("a ReloadFail Event on the doomed workload", REACTION, || async {
        let events = events_for(client, ns.name(), Kind::Deployment, "doomed").await?;
        let failed: Vec<_> =
            events.iter().filter(|e| e.reason.as_deref() == Some("ReloadFail")).cloned().collect();
        if failed.is_empty() { Err(NotYet::because(format!("{events:?}"))) } else { Ok(failed) }
    })
    .await
    .unwrap();
    let message = events[0].message.clone().unwrap_or_default();
    assert!(message.contains("injected 503"), "{message}");
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    assert_eq!(generation(client, &doomed).await, 1, "the doomed workload was written");
    let attempts: Vec<Exchange> = proxy
        .exchanges()
        .into_iter()
        .filter(|e| e.path == workload_path(&doomed) && e.method == "PATCH")
        .collect();
    // An attempt sent on a connection the proxy had just closed never reaches it.
    let unsent = FailedWrites::default().and_unsent_by(&reloader.log_text(), "/doomed").transient;
    assert_eq!(attempts.len() + unsent, 6, "the first write and 5 retries ({unsent} unsent): {attempts:#?}");
    let exchanges = proxy.exchanges();
    let gaps: Vec<Duration> = injected_with_next_visit(&exchanges, std::slice::from_ref(&doomed))
        .iter()
        .filter_map(|(e, _, _, next)| Some(next.as_ref()?.duration_since(e.answered)))
        .collect();
    // Retry-After: 1 is the floor of every pause; the backoff takes over above it.
    let floors = [1000, 1000, 1000, 1600, 3200].map(Duration::from_millis);
    assert_eq!(gaps.len(), floors.len(), "{gaps:?}");
    for (gap, floor) in gaps.iter().zip(floors) {
        assert!(*gap >= floor, "pauses {gaps:?} below {floors:?}");
    }
    let log = reloader.log_text();
    let failed_line = log.lines().find(|l| l.contains("reload failed") && l.contains("/doomed"));
    assert!(failed_line.is_some_and(|l| l.contains("ERROR")), "{log}");
    assert_eq!(metric(&reloader, r#"reloader_reload_executed_total{success="false"}"#).await, 1.0);
    assert_eq!(metric(&reloader, r#"reloader_error_types_total{type="api"}"#).await, 1.0);
    assert_eq!(metric(&reloader, r#"reloader_errors_total{type="handler_error"}"#).await, 1.0);
    assert_eq!(
        metric(&reloader, r#"reloader_action_total{workload_kind="Deployment",result="error"}"#).await,
        1.0
    );
    eprintln!("doomed workload: pauses between its attempts {gaps:?}");
}
