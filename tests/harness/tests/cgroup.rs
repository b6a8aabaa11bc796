//! The memory cgroup helper on this machine's real hierarchy: a process within the limit runs to
//! the end inside it with no OOM kill; one that outgrows it is killed by the kernel and the kill
//! is counted. Needs write access to the cgroup hierarchy: as root a missing hierarchy fails the
//! test; an unprivileged user (CI runners) cannot create cgroups, and the test says so and stops.

use std::path::Path;
use std::time::{Duration, Instant};

use reloader_harness::process::Process;
use reloader_harness::{Cgroup, CgroupError};

const MIB: u64 = 1024 * 1024;

fn running_as_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|ids| ids.split_whitespace().nth(1))
        == Some("0")
}

/// The cgroup, or `None` when an unprivileged user cannot have one.
fn cgroup(name: &str, limit: u64) -> Option<Cgroup> {
    match Cgroup::create(name, limit) {
        Ok(cgroup) => Some(cgroup),
        Err(CgroupError::Unavailable(reason)) if !running_as_root() => {
            eprintln!("not checked: {reason} (needs root or a delegated cgroup)");
            None
        }
        Err(error) => panic!("creating a memory cgroup as root: {error}"),
    }
}

fn wait_exit(process: &mut Process, timeout: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = process.exited() {
            return status;
        }
        assert!(Instant::now() < deadline, "{} still runs after {timeout:?}", process.name());
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn start(cgroup: &Cgroup, name: &str, script: &str, log_dir: &Path) -> Process {
    let (program, args) = cgroup.wrap(Path::new("/bin/sh"), &["-c".to_owned(), script.to_owned()]);
    Process::start(name, &program, &args, &[], &log_dir.join(format!("{name}.log")))
        .expect("starting the process")
}

#[test]
fn a_process_within_the_limit_runs_inside_it_unharmed() {
    let Some(cgroup) = cgroup("harness-fits", 64 * MIB) else { return };
    let logs = tempfile::tempdir().unwrap();
    let mut process = start(&cgroup, "fits", "sleep 1", logs.path());
    // The wrapper moves itself in, then execs the program under the same pid.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !cgroup.contains(process.pid()).unwrap() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        cgroup.contains(process.pid()).unwrap(),
        "pid {} is not in {}",
        process.pid(),
        cgroup.path().display()
    );
    let status = wait_exit(&mut process, Duration::from_secs(30));
    assert!(status.success(), "{status}");
    let usage = cgroup.usage().unwrap();
    assert_eq!(usage.limit_bytes, 64 * MIB, "{usage:?}");
    assert_eq!(usage.oom_kills, 0, "{usage:?}");
    assert!(usage.peak_bytes.is_none_or(|peak| peak > 0 && peak <= 64 * MIB), "{usage:?}");
    eprintln!("{} {usage:?}", usage.version.as_label());
}

#[test]
fn a_process_over_the_limit_is_oom_killed_and_counted() {
    let Some(cgroup) = cgroup("harness-outgrows", 32 * MIB) else { return };
    let logs = tempfile::tempdir().unwrap();
    // The shell keeps the whole command substitution in memory: 200 MB against a 32 MiB limit.
    let script = r#"x=$(head -c 200000000 /dev/zero | tr '\0' a); echo "${#x}""#;
    let mut process = start(&cgroup, "outgrows", script, logs.path());
    let status = wait_exit(&mut process, Duration::from_secs(60));
    assert!(!status.success(), "the process should have been killed: {status}");
    let usage = cgroup.usage().unwrap();
    assert!(usage.oom_kills >= 1, "{usage:?}");
    assert!(usage.limit_hits >= 1, "{usage:?}");
    assert!(usage.peak_bytes.is_none_or(|peak| peak >= 16 * MIB), "{usage:?}");
    eprintln!("{} {usage:?}", usage.version.as_label());
}
