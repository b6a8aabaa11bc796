//! `hack/admission-load`: a fixed rate of AdmissionReviews to the admission webhook for a set
//! time (500 per second for 30 s by default), sent open-loop (on schedule, whatever the answers
//! take), then the latency percentiles and the error count. Either against a webhook already
//! running (`--url` and `--ca`), or against the reloader binary started here with the webhook on
//! a local control plane, as the behaviour tests start it (the binary `RELOADER_BIN` names).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use reloader_harness::{ControlPlane, PlaneOptions, Reloader, free_port, wait_until};
use reloader_tests::fixtures_extra::WebhookCertificates;
use serde_json::{Value, json};

#[derive(Debug, Parser)]
#[command(
    about = "Send AdmissionReviews to the admission webhook at a fixed rate and report latency and errors"
)]
struct Args {
    /// Reviews per second.
    #[arg(long, default_value_t = 500)]
    rate: u32,
    /// How long to send, in seconds.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// A running webhook's `/mutate` URL; without it, the binary is started on a local plane.
    #[arg(long, requires = "ca")]
    url: Option<String>,
    /// The PEM CA that signed the running webhook's certificate (with `--url`).
    #[arg(long)]
    ca: Option<PathBuf>,
    /// Connections kept open to the webhook, each sending one review at a time.
    #[arg(long, default_value_t = 32)]
    connections: usize,
}

/// One answer: how long it took, and whether it was a correct review.
struct Sample {
    latency: Duration,
    ok: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let args = Args::parse();
    match (&args.url, &args.ca) {
        (Some(url), Some(ca)) => {
            let ca = std::fs::read_to_string(ca).with_context(|| format!("reading {}", ca.display()))?;
            run(&args, url, &ca, "default").await
        }
        _ => {
            // The harness starts the binary `RELOADER_BIN` names (hack/admission-load sets it).
            let plane =
                ControlPlane::start(PlaneOptions::default()).await.context("starting a control plane")?;
            let certs = WebhookCertificates::generate();
            let port = free_port();
            let namespace = "default";
            let reloader = Reloader::builder(&plane)
                .name("reloader")
                .args(certs.reloader_args(namespace, port))
                .start()
                .await
                .context("starting reloader with the webhook")?;
            let url = format!("https://127.0.0.1:{port}/mutate");
            let code = run(&args, &url, &certs.ca_pem, namespace).await;
            if let Some((rss, peak)) = memory(reloader.pid()) {
                println!("webhook process: RSS {} MiB after the load, peak {} MiB", rss >> 20, peak >> 20);
            }
            // The webhook's own time per review (body read to response built), without the
            // network, TLS and the client.
            let sum = reloader.metric("reloader_admission_duration_seconds_sum").await?.unwrap_or_default();
            let count =
                reloader.metric("reloader_admission_duration_seconds_count").await?.unwrap_or_default();
            if count > 0.0 {
                println!(
                    "webhook's own time per review: mean {:.3} ms over {count} reviews",
                    sum / count * 1000.0
                );
            }
            code
        }
    }
}

async fn run(args: &Args, url: &str, ca_pem: &str, namespace: &str) -> anyhow::Result<ExitCode> {
    let ca = reqwest::Certificate::from_pem(ca_pem.as_bytes())?;
    // One client (one kept-alive connection) per worker, as the API server keeps a pool of
    // connections to a webhook: a fixed set of TLS sessions, not a handshake per review.
    let clients = (0..args.connections)
        .map(|_| {
            reqwest::Client::builder()
                .tls_built_in_root_certs(false)
                .add_root_certificate(ca.clone())
                .timeout(Duration::from_secs(10))
                .pool_max_idle_per_host(1)
                .build()
        })
        .collect::<Result<Vec<_>, _>>()?;
    let body = Arc::new(serde_json::to_vec(&review(namespace))?);

    let health = url.replace("/mutate", "/healthz");
    wait_until("the webhook to answer", Duration::from_secs(60), || async {
        clients[0].get(&health).send().await?.error_for_status()?;
        Ok(())
    })
    .await
    .context("waiting for the webhook")?;
    // Warm up: every connection open, one review answered on each.
    for client in &clients {
        let _ = send(client, url, &body, Instant::now()).await;
    }

    let total = u64::from(args.rate) * args.seconds;
    let period = Duration::from_secs_f64(1.0 / f64::from(args.rate));
    println!(
        "sending {total} reviews to {url}: {} per second for {} s over {} connections",
        args.rate, args.seconds, args.connections
    );
    // Open loop: each review has its time on the schedule, and its latency counts from that
    // time, so a slow answer that delays the next ones shows in their latency too.
    let (schedule, due) = async_channel(total as usize);
    let mut workers = tokio::task::JoinSet::new();
    for client in clients {
        let (due, url, body) = (due.clone(), url.to_owned(), body.clone());
        workers.spawn(async move {
            let mut samples = Vec::new();
            while let Some(scheduled) = due.recv().await {
                samples.push(send(&client, &url, &body, scheduled).await);
            }
            samples
        });
    }
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let started = Instant::now();
    for _ in 0..total {
        ticks.tick().await;
        schedule.send(Instant::now()).await?;
    }
    drop(schedule);
    let sent_in = started.elapsed();
    let mut samples = Vec::with_capacity(total as usize);
    while let Some(worker) = workers.join_next().await {
        samples.extend(worker?);
    }
    report(&mut samples, sent_in, args)
}

/// A channel many workers take from: the schedule of reviews due.
fn async_channel(capacity: usize) -> (tokio::sync::mpsc::Sender<Instant>, SharedReceiver) {
    let (sender, receiver) = tokio::sync::mpsc::channel(capacity.max(1));
    (sender, SharedReceiver(Arc::new(tokio::sync::Mutex::new(receiver))))
}

#[derive(Clone)]
struct SharedReceiver(Arc<tokio::sync::Mutex<tokio::sync::mpsc::Receiver<Instant>>>);

impl SharedReceiver {
    async fn recv(&self) -> Option<Instant> {
        self.0.lock().await.recv().await
    }
}

async fn send(client: &reqwest::Client, url: &str, body: &Arc<Vec<u8>>, scheduled: Instant) -> Sample {
    let answer = async {
        let response = client
            .post(url)
            .header("content-type", "application/json")
            .body(body.as_ref().clone())
            .send()
            .await?
            .error_for_status()?;
        response.json::<Value>().await
    }
    .await;
    let latency = scheduled.elapsed();
    let ok = answer.is_ok_and(|review| {
        review["response"]["uid"] == "admission-load" && review["response"]["allowed"] == true
    });
    Sample { latency, ok }
}

fn report(samples: &mut [Sample], sent_in: Duration, args: &Args) -> anyhow::Result<ExitCode> {
    samples.sort_by_key(|s| s.latency);
    let errors = samples.iter().filter(|s| !s.ok).count();
    let percentile = |p: f64| {
        let index = ((samples.len() as f64 * p).ceil() as usize).clamp(1, samples.len()) - 1;
        samples[index].latency
    };
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{} reviews in {:.1} s ({:.0}/s asked {}/s): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms, errors {errors}",
        samples.len(),
        sent_in.as_secs_f64(),
        samples.len() as f64 / sent_in.as_secs_f64(),
        args.rate,
        ms(percentile(0.50)),
        ms(percentile(0.99)),
        ms(percentile(1.0)),
    );
    Ok(if errors == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// A CREATE of a Deployment that uses a ConfigMap: the webhook reads the index and stamps.
fn review(namespace: &str) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "admission-load",
            "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
            "name": "web", "namespace": namespace, "operation": "CREATE",
            "userInfo": {"username": "admission-load"},
            "object": {
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": namespace,
                    "annotations": {"reloader.stakater.com/auto": "true"}},
                "spec": {
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{
                        "name": "app", "image": "app:1", "envFrom": [{"configMapRef": {"name": "app-config"}}],
                    }]}},
                },
            },
        },
    })
}

/// `VmRSS` and `VmHWM` of a process, in bytes.
fn memory(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = |field: &str| -> Option<u64> {
        status
            .lines()
            .find(|l| l.starts_with(field))?
            .split_whitespace()
            .nth(1)?
            .parse::<u64>()
            .ok()
            .map(|k| k * 1024)
    };
    Some((kib("VmRSS:")?, kib("VmHWM:")?))
}
