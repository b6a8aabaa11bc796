//! What the real node changes on the machine, and putting it back (docs/control-plane.md,
//! "Leaving no trace").
//!
//! Network state (links, addresses, routes, the bridge, any iptables chain, `net.*` sysctls) and
//! mounts (volumes, container root filesystems, the pods' network namespaces) all live in the
//! plane's own network and mount namespaces and vanish with them. What is machine-wide is handled
//! here: the kernel sysctls the kubelet sets, the cgroups it makes, and the processes that outlive
//! a killed run (containerd's shims and the containers under them). One node runs at a time on a
//! machine: a lock serialises runs, and a run that finds a previous node's directory (its owner
//! was killed) cleans it first.
#![allow(unsafe_code)]

use std::fs::{self, File};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::PlaneError;

/// The sysctls the kubelet sets at start (its "kernel tunables"), under /proc/sys.
const KUBELET_SYSCTLS: [&str; 6] = [
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
];
const PROC_SYS: &str = "/proc/sys";
const CGROUP_FS: &str = "/sys/fs/cgroup";
const CGROUP_PROCS: &str = "cgroup.procs";
/// How long a run waits for another run's node to finish.
const LOCK_PATIENCE: Duration = Duration::from_secs(30 * 60);

/// The machine-wide lock: held while a node runs, released by the kernel when its holder dies.
#[derive(Debug)]
pub struct HostLock {
    _file: File,
}

impl HostLock {
    /// Waits for the lock at `path`.
    pub fn acquire(path: &Path) -> Result<Self, PlaneError> {
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(io_error(format!("opening the node lock {}", path.display())))?;
        let started = Instant::now();
        loop {
            // SAFETY: flock(2) on a descriptor we own; no memory is shared.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(Self { _file: file });
            }
            let error = io::Error::last_os_error();
            if error.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(io_error(format!("locking {}", path.display()))(error));
            }
            if started.elapsed() > LOCK_PATIENCE {
                return Err(PlaneError::Timeout {
                    what: format!("the node lock {} (another run's real node)", path.display()),
                    after: LOCK_PATIENCE,
                    last: "held".into(),
                });
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// The kubelet's sysctls and their values now.
pub fn kernel_settings() -> Vec<(String, String)> {
    KUBELET_SYSCTLS
        .iter()
        .filter_map(|name| {
            let value = fs::read_to_string(Path::new(PROC_SYS).join(name)).ok()?;
            Some(((*name).to_owned(), value.trim().to_owned()))
        })
        .collect()
}

/// The cgroups named `name` that exist, in every hierarchy.
pub fn cgroups_named(name: &str) -> Vec<PathBuf> {
    hierarchies()
        .into_iter()
        .map(|hierarchy| hierarchy.join(name.trim_start_matches('/')))
        .filter(|path| path.exists())
        .collect()
}

/// The processes whose command line names `marker`, other than ours.
pub fn processes_naming(marker: &Path) -> Vec<i32> {
    let marker = marker.display().to_string();
    let ours = std::process::id() as i32;
    let Ok(entries) = fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != ours)
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(&marker))
        })
        .collect()
}

/// Records the kubelet's sysctls as they are now, one `path=value` line each.
pub fn record(record: &Path) -> Result<(), PlaneError> {
    let mut text = String::new();
    for name in KUBELET_SYSCTLS {
        let path = Path::new(PROC_SYS).join(name);
        if let Ok(value) = fs::read_to_string(&path) {
            text.push_str(&format!("{name}={}\n", value.trim()));
        }
    }
    fs::write(record, text).map_err(io_error(format!("writing {}", record.display())))
}

/// What [`record`] wrote.
pub fn recorded(record: &Path) -> Vec<(String, String)> {
    fs::read_to_string(record)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect()
}

/// Writes back what [`record`] found; a missing record changes nothing.
pub fn restore(record: &Path) -> Result<(), PlaneError> {
    for (name, value) in recorded(record) {
        // Only names of the list: the record is a file anyone with the cache could edit.
        if !KUBELET_SYSCTLS.contains(&name.as_str()) {
            continue;
        }
        let path = Path::new(PROC_SYS).join(&name);
        let current = fs::read_to_string(&path).unwrap_or_default();
        if current.trim() != value {
            fs::write(&path, &value).map_err(io_error(format!("restoring {}", path.display())))?;
        }
    }
    Ok(())
}

/// The root of every cgroup hierarchy: the unified one, or each v1 controller's.
fn hierarchies() -> Vec<PathBuf> {
    let root = Path::new(CGROUP_FS);
    if root.join("cgroup.controllers").exists() {
        return vec![root.to_owned()];
    }
    let Ok(entries) = fs::read_dir(root) else { return Vec::new() };
    let mut roots: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.join(CGROUP_PROCS).exists() && !path.is_symlink())
        .collect();
    roots.sort();
    roots
}

/// Creates `name` (e.g. `/reloader-node`) in every hierarchy: the kubelet refuses a cgroup root
/// that does not exist. A v1 cpuset starts empty, so it gets its parent's CPUs and memory nodes.
pub fn create_cgroups(name: &str) -> Result<(), PlaneError> {
    for hierarchy in hierarchies() {
        let path = hierarchy.join(name.trim_start_matches('/'));
        fs::create_dir_all(&path).map_err(io_error(format!("creating the cgroup {}", path.display())))?;
        for file in ["cpuset.cpus", "cpuset.mems"] {
            if path.join(file).exists()
                && let Ok(parent) = fs::read_to_string(hierarchy.join(file))
            {
                fs::write(path.join(file), parent.trim())
                    .map_err(io_error(format!("writing {}", path.join(file).display())))?;
            }
        }
    }
    Ok(())
}

/// Kills every process in `name`'s cgroups (the pods' containers) and removes them, deepest first.
pub fn remove_cgroups(name: &str) -> Result<(), PlaneError> {
    for hierarchy in hierarchies() {
        let top = hierarchy.join(name.trim_start_matches('/'));
        if !top.exists() {
            continue;
        }
        let mut dirs = Vec::new();
        collect_dirs(&top, &mut dirs);
        // Deepest first: a cgroup with children cannot be removed.
        dirs.sort_by_key(|dir| std::cmp::Reverse(dir.components().count()));
        for dir in &dirs {
            kill_all(&read_pids(&dir.join(CGROUP_PROCS)));
        }
        for dir in &dirs {
            let deadline = Instant::now() + Duration::from_secs(10);
            while let Err(error) = fs::remove_dir(dir) {
                if error.kind() == io::ErrorKind::NotFound {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(io_error(format!("removing the cgroup {}", dir.display()))(error));
                }
                kill_all(&read_pids(&dir.join(CGROUP_PROCS)));
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    Ok(())
}

/// The processes of the cgroup named `leaf` somewhere below `name` (a container's cgroup is named
/// after its id), from the first hierarchy that has it.
pub fn processes_of(name: &str, leaf: &str) -> Vec<i32> {
    for hierarchy in hierarchies() {
        let mut dirs = Vec::new();
        collect_dirs(&hierarchy.join(name.trim_start_matches('/')), &mut dirs);
        if let Some(dir) = dirs.iter().find(|dir| dir.file_name().is_some_and(|file| file == leaf)) {
            let pids = read_pids(&dir.join(CGROUP_PROCS));
            if !pids.is_empty() {
                return pids;
            }
        }
    }
    Vec::new()
}

fn collect_dirs(dir: &Path, into: &mut Vec<PathBuf>) {
    into.push(dir.to_owned());
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                collect_dirs(&entry.path(), into);
            }
        }
    }
}

fn read_pids(procs: &Path) -> Vec<i32> {
    fs::read_to_string(procs)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}

fn kill_all(pids: &[i32]) {
    for &pid in pids {
        // SAFETY: kill(2) has no memory effects. The pids were read from a cgroup of the node's
        // own, or matched by the node's socket path in their command line.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// Kills every process whose command line names `marker` (the node's directory: containerd's
/// shims name its socket), other than ours. Shims outlive a killed run: they are not children of
/// the harness.
pub fn kill_processes_naming(marker: &Path) {
    kill_all(&processes_naming(marker));
}

/// Removes the node's directory. Mounts below it belong to the plane's mount namespace, so none
/// blocks this from the host's.
pub fn remove_dir(dir: &Path) -> Result<(), PlaneError> {
    match fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(io_error(format!("removing {}", dir.display()))(error)),
    }
}

fn io_error(context: String) -> impl FnOnce(io::Error) -> PlaneError {
    move |source| PlaneError::Io { context, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_restores_only_known_sysctls() {
        let dir = tempfile::tempdir().unwrap();
        let record_path = dir.path().join("record");
        // A name outside the list is ignored rather than written.
        fs::write(&record_path, "fs/file-max=1\nnot a line\n").unwrap();
        let before = fs::read_to_string("/proc/sys/fs/file-max").unwrap();
        restore(&record_path).unwrap();
        assert_eq!(fs::read_to_string("/proc/sys/fs/file-max").unwrap(), before);
    }

    #[test]
    fn recording_lists_the_kubelet_sysctls_that_exist() {
        let dir = tempfile::tempdir().unwrap();
        let record_path = dir.path().join("record");
        record(&record_path).unwrap();
        let text = fs::read_to_string(&record_path).unwrap();
        assert!(text.lines().any(|line| line.starts_with("kernel/panic=")), "{text}");
        // Restoring what is already there changes nothing.
        restore(&record_path).unwrap();
    }
}
