//! `--enable-pprof` (docs/monitoring.md, "Profiles") with the real binary on the real control
//! plane: a CPU profile taken while reloads happen and a heap profile, both read by
//! `go tool pprof`, which names reloader's own functions in them; the index page; nothing on the
//! pprof port without the flag, and never a profile on the metrics port.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use reloader_harness::free_port;
use reloader_tests::fixtures::*;

const CPU_SECONDS: u64 = 2;
/// Kept in every reloader symbol, whether pprof-rs or jemalloc_pprof resolved it.
const OUR_CRATE: &str = "reloader_cli::";

fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| value == "true")
}

/// `go`, or `None` (skip) when it is not installed outside CI (README: Go is a prerequisite).
fn go() -> Option<&'static str> {
    if Command::new("go").arg("version").output().is_ok_and(|out| out.status.success()) {
        return Some("go");
    }
    let message = "`go` is not on PATH: go tool pprof cannot read the profiles";
    assert!(!under_ci(), "{message}");
    eprintln!("skipped: {message}");
    None
}

/// `go tool pprof -top` over every function on the sampled stacks (cumulative, none dropped).
fn pprof_top(go: &str, profile: &Path) -> String {
    let output = Command::new(go)
        .args(["tool", "pprof", "-top", "-cum", "-nodefraction=0", "-nodecount=100000"])
        .arg(profile)
        .output()
        .expect("running go tool pprof");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "go tool pprof failed on {}:\n{stderr}\n{stdout}", profile.display());
    stdout
}

async fn fetch(url: &str) -> (u16, Vec<u8>) {
    let response = reqwest::get(url).await.unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = response.status().as_u16();
    (status, response.bytes().await.unwrap().to_vec())
}

#[tokio::test]
async fn profiles_on_the_pprof_port_read_by_go_tool_pprof() {
    let Some(go) = go() else { return };
    let env = TestEnv::new().await;
    let TestEnv { client, ns, resources, .. } = &env;
    let config = ResourceRef::configmap("app-config");
    resources.create(&config, &[("key", "v0")]).await.unwrap();
    let web = WorkloadSpec::new(Kind::Deployment, "web")
        .replicas(0)
        .metadata_annotation(ANNOTATION_AUTO, "true")
        .env_from_configmap(&config.name)
        .create(client, ns.name())
        .await
        .unwrap();
    let port = free_port();
    let pprof_addr = format!("--pprof-addr=127.0.0.1:{port}");
    // The ConfigMap changes as fast as it can while profiling: a reload loop by the loop
    // guard's measure (docs/beyond-stakater.md §15), which this test is not about.
    let guard_off = "--loop-guard=off".to_owned();
    let reloader = env
        .reloader_builder()
        .args(["--enable-pprof".to_owned(), pprof_addr, guard_off])
        .start()
        .await
        .unwrap();
    let base = format!("http://127.0.0.1:{port}/debug/pprof");

    let (status, index) = fetch(&format!("{base}/")).await;
    let index = String::from_utf8_lossy(&index);
    assert_eq!(status, 200, "{index}");
    assert!(index.contains("href=\"profile\"") && index.contains("href=\"heap\""), "{index}");

    // A CPU profile while the ConfigMap changes again and again, each change a reload (with a
    // large value, so that hashing and decoding show in the samples).
    let profiling = tokio::spawn({
        let url = format!("{base}/profile?seconds={CPU_SECONDS}");
        async move { fetch(&url).await }
    });
    let padding = "x".repeat(256 * 1024);
    let mut changes = 0;
    let mut last_version = String::new();
    while !profiling.is_finished() {
        changes += 1;
        last_version = resources
            .update_data(&config, &[("key", &format!("v{changes}")), ("padding", &padding)])
            .await
            .unwrap();
    }
    let (status, cpu) = profiling.await.unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&cpu));
    assert!(changes > 1, "the ConfigMap changed while profiling");
    web.wait_for_marker(client, &config, Strategy::EnvVars, &last_version, Duration::from_secs(60))
        .await
        .unwrap();

    let (status, heap) = fetch(&format!("{base}/heap")).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&heap));

    let dir = tempfile::tempdir().unwrap();
    for (name, profile) in [("cpu.pb", &cpu), ("heap.pb.gz", &heap)] {
        let path = dir.path().join(name);
        std::fs::write(&path, profile).unwrap();
        let top = pprof_top(go, &path);
        assert!(top.contains(OUR_CRATE), "{name}: no reloader function in go tool pprof -top:\n{top}");
    }

    // The metrics port serves no profile.
    for path in ["/debug/pprof/", "/debug/pprof/profile?seconds=1", "/debug/pprof/heap"] {
        assert_eq!(reloader.get(path).await.unwrap().0, 404, "{path} on the metrics port");
    }
}

#[tokio::test]
async fn without_enable_pprof_nothing_listens_on_the_pprof_port() {
    let env = TestEnv::new().await;
    let port = free_port();
    let pprof_addr = format!("--pprof-addr=127.0.0.1:{port}");
    let reloader = env.reloader_builder().arg(pprof_addr).start().await.unwrap();
    // Ready: every server it starts is up by now.
    let refused = tokio::net::TcpStream::connect(("127.0.0.1", port)).await;
    assert!(refused.is_err(), "something listens on {port} without --enable-pprof");
    assert_eq!(reloader.get("/debug/pprof/").await.unwrap().0, 404, "a profile on the metrics port");
}

/// The anonymous memory resident in `pid`, in bytes (`Anonymous` of /proc/<pid>/smaps_rollup):
/// what a profile allocates (the sample collector, symbol tables) and must give back. The binary's
/// file pages are left out: the kernel reclaims them before any OOM kill, and they count as this
/// process's or as shared depending on whether another process runs the same binary (test
/// executables run two at a time: on one run RSS rose 21 MiB as another controller kept pages in,
/// on another the unique set rose 4.6 MiB as one exited, while anonymous memory stayed flat).
fn rss_bytes(pid: u32) -> u64 {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap();
    let kib: u64 = rollup
        .lines()
        .find_map(|line| line.strip_prefix("Anonymous:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("Anonymous in /proc/<pid>/smaps_rollup");
    kib * 1024
}

/// What `pid`'s resident memory is made of (smaps_rollup), for a failure's message.
fn memory_breakdown(pid: u32) -> String {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    rollup
        .lines()
        .skip(1)
        .filter(|line| !line.ends_with(" 0 kB"))
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join(", ")
}

const MIB: u64 = 1024 * 1024;
/// How far above its resting anonymous memory a controller may stay once a profile has been served.
const RSS_SLACK: u64 = 4 * MIB;

/// The anonymous memory once it stops moving: three readings 500 ms apart within 256 KiB of each other.
async fn resting_rss(pid: u32) -> u64 {
    let mut readings = vec![rss_bytes(pid)];
    for _ in 0..120 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        readings.push(rss_bytes(pid));
        let last = &readings[readings.len().saturating_sub(3)..];
        if last.len() == 3 && last.iter().max().unwrap() - last.iter().min().unwrap() <= 256 * 1024 {
            return *last.iter().max().unwrap();
        }
    }
    panic!("RSS never settled: {readings:?}");
}

/// docs/monitoring.md, "Profiles": a CPU profile and a heap profile of an idle controller cost
/// memory while they are taken and give it back once answered; `go tool pprof` still names
/// reloader's functions in both.
#[tokio::test]
async fn profiles_give_their_memory_back() {
    let Some(go) = go() else { return };
    let env = TestEnv::new().await;
    let port = free_port();
    let reloader = env
        .reloader_builder()
        .args(["--enable-pprof".to_owned(), format!("--pprof-addr=127.0.0.1:{port}")])
        .start()
        .await
        .unwrap();
    let pid = reloader.pid();
    let base = format!("http://127.0.0.1:{port}/debug/pprof");
    let dir = tempfile::tempdir().unwrap();
    for (round, (name, url)) in
        [("cpu.pb", format!("{base}/profile?seconds={CPU_SECONDS}")), ("heap.pb.gz", format!("{base}/heap"))]
            .into_iter()
            .chain([("cpu-again.pb", format!("{base}/profile?seconds={CPU_SECONDS}"))])
            .enumerate()
    {
        let before = resting_rss(pid).await;
        let resting = memory_breakdown(pid);
        let profiling = tokio::spawn(async move { fetch(&url).await });
        // Scrapes while a CPU profile runs, so that it has samples in reloader's code: the
        // controller is idle otherwise.
        while !profiling.is_finished() {
            reloader.get("/metrics").await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (status, profile) = profiling.await.unwrap();
        assert_eq!(status, 200, "{name}: {}", String::from_utf8_lossy(&profile));
        // Where it rests once the answer is in: what was freed is given back (docs/monitoring.md).
        let after = resting_rss(pid).await;
        let (before_mib, after_mib) = (before as f64 / MIB as f64, after as f64 / MIB as f64);
        eprintln!("profile {round} ({name}): anonymous {before_mib:.1} MiB before, {after_mib:.1} MiB after");
        eprintln!("  before: {resting}\n  after: {}", memory_breakdown(pid));
        assert!(
            after <= before + RSS_SLACK,
            "{name}: anonymous memory {before_mib:.1} MiB before the profile, {after_mib:.1} MiB after it ({})",
            memory_breakdown(pid)
        );
        let path = dir.path().join(name);
        std::fs::write(&path, &profile).unwrap();
        let top = pprof_top(go, &path);
        assert!(top.contains(OUR_CRATE), "{name}: no reloader function in go tool pprof -top:\n{top}");
    }
}
