//! The components never outlive the process that started them, even when it is SIGKILLed and
//! no destructor runs: the guarantee that keeps CI machines and laptops free of stray
//! kube-apiservers.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Pids of the live processes whose parent is `parent`, read from /proc.
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
            // "pid (comm) state ppid ...": comm may hold spaces, so read after its last ')'.
            let mut fields =
                stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or_default().split_whitespace();
            let state = fields.next();
            let ppid = fields.next().and_then(|ppid| ppid.parse::<u32>().ok());
            ppid == Some(parent) && state != Some("Z")
        })
        .collect()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
}

fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < timeout, "timed out after {timeout:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn components_die_with_a_sigkilled_parent() {
    let dir = tempfile::tempdir().unwrap();
    let plane_dir = dir.path().join("plane");
    let log = std::fs::File::create(dir.path().join("cluster.log")).unwrap();
    let mut cluster = Command::new(env!("CARGO_BIN_EXE_reloader-cluster"))
        .args(["--no-crds", "--nodes", "1", "--dir"])
        .arg(&plane_dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let parent = cluster.id();
    let ready = plane_dir.join("ready");
    let start = Instant::now();
    while !Path::new(&ready).exists() {
        if let Some(status) = cluster.try_wait().unwrap() {
            let output = std::fs::read_to_string(dir.path().join("cluster.log")).unwrap_or_default();
            panic!("reloader-cluster exited with {status} before it was ready:\n{output}");
        }
        assert!(start.elapsed() < Duration::from_secs(180), "reloader-cluster not ready in 180 s");
        std::thread::sleep(Duration::from_millis(200));
    }
    let components = children_of(parent);
    assert_eq!(components.len(), 5, "etcd, kube-apiserver, kcm, kube-scheduler, kwok: {components:?}");

    cluster.kill().unwrap(); // SIGKILL: no destructor, no signal handler runs
    cluster.wait().unwrap();
    wait_for("every component to die with its parent", Duration::from_secs(10), || {
        components.iter().all(|&pid| !alive(pid))
    });
}
