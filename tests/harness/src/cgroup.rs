//! A memory cgroup of its own for one process, with a limit: what a container's `resources.limits
//! .memory` does to a pod, on this machine. The benchmark runs the controller in one to prove the
//! chart's limit holds (docs/benchmark.md, M10).
//!
//! Which hierarchy is used follows what is mounted: cgroup v2 (`memory.max`, `memory.events`,
//! `memory.peak`) when the unified hierarchy has the memory controller, else cgroup v1
//! (`memory.limit_in_bytes`, `memory.oom_control`, `memory.max_usage_in_bytes`). Creating one
//! needs write access to the hierarchy (root, or a delegated subtree).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const CGROUP_PROCS: &str = "cgroup.procs";
/// A removed process may take a moment to leave its cgroup's task list.
const REMOVE_PATIENCE: Duration = Duration::from_secs(5);

/// Why a cgroup could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// No memory cgroup can be created here (not mounted, or not writable by this user).
    #[error("no memory cgroup can be created here: {0}")]
    Unavailable(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
}

/// The cgroup hierarchy in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
}

impl CgroupVersion {
    pub fn as_label(self) -> &'static str {
        match self {
            CgroupVersion::V1 => "cgroup v1",
            CgroupVersion::V2 => "cgroup v2",
        }
    }

    /// The files holding the limit, the peak and the OOM kill count.
    fn files(self) -> CgroupFiles {
        match self {
            CgroupVersion::V1 => CgroupFiles {
                limit: "memory.limit_in_bytes",
                current: "memory.usage_in_bytes",
                peak: "memory.max_usage_in_bytes",
                events: "memory.oom_control",
            },
            CgroupVersion::V2 => CgroupFiles {
                limit: "memory.max",
                current: "memory.current",
                peak: "memory.peak",
                events: "memory.events",
            },
        }
    }
}

struct CgroupFiles {
    limit: &'static str,
    current: &'static str,
    peak: &'static str,
    /// `oom_kill N` in both; v2 also counts hits of the limit as `max N`.
    events: &'static str,
}

/// What the cgroup recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CgroupUsage {
    pub version: CgroupVersion,
    pub limit_bytes: u64,
    pub current_bytes: u64,
    /// The highest usage since creation (`None` on a v2 kernel older than 5.19, without `memory.peak`).
    pub peak_bytes: Option<u64>,
    /// Processes the kernel's OOM killer ended inside it.
    pub oom_kills: u64,
    /// Times usage hit the limit (v1 `memory.failcnt`, v2 `memory.events` `max`).
    pub limit_hits: u64,
}

impl CgroupUsage {
    pub fn to_json(&self) -> Value {
        json!({
            "cgroup": self.version.as_label(),
            "limit_bytes": self.limit_bytes,
            "current_bytes": self.current_bytes,
            "peak_bytes": self.peak_bytes,
            "oom_kills": self.oom_kills,
            "limit_hits": self.limit_hits,
        })
    }
}

/// A child memory cgroup with a limit, removed on drop (once its processes are gone).
#[derive(Debug)]
pub struct Cgroup {
    dir: PathBuf,
    version: CgroupVersion,
}

impl Cgroup {
    /// Creates `<name>-<our pid>` in the memory hierarchy that is mounted, below this process's
    /// own cgroup on v1 and below the hierarchy's root on v2 (where a cgroup holding processes
    /// cannot hand controllers to children), and sets its limit.
    pub fn create(name: &str, limit_bytes: u64) -> Result<Self, CgroupError> {
        let mountinfo = read("/proc/self/mountinfo")?;
        let own = read("/proc/self/cgroup")?;
        let (version, parent) = locate(&mountinfo, &own, |path| fs::read_to_string(path).ok())?;
        let dir = parent.join(format!("{name}-{}", std::process::id()));
        if dir.exists() {
            // Left by an earlier run of this same pid (a recycled pid): empty, or removal fails.
            let _ = fs::remove_dir(&dir);
        }
        fs::create_dir(&dir).map_err(|source| match source.kind() {
            io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem => {
                CgroupError::Unavailable(format!("creating {}: {source}", dir.display()))
            }
            _ => CgroupError::Io { context: format!("creating {}", dir.display()), source },
        })?;
        let cgroup = Self { dir, version };
        cgroup.write(version.files().limit, &limit_bytes.to_string())?;
        if version == CgroupVersion::V2 {
            // Never swap instead of being killed: the limit is meant to be the whole story.
            let _ = cgroup.write("memory.swap.max", "0");
        }
        Ok(cgroup)
    }

    pub fn version(&self) -> CgroupVersion {
        self.version
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Moves process `pid` in. What it allocated before stays charged where it was; prefer
    /// [`Cgroup::wrap`] for a process yet to start.
    pub fn add(&self, pid: u32) -> Result<(), CgroupError> {
        self.write(CGROUP_PROCS, &pid.to_string())
    }

    /// Whether `pid` is inside.
    pub fn contains(&self, pid: u32) -> Result<bool, CgroupError> {
        let procs = self.read(CGROUP_PROCS)?;
        Ok(procs.lines().any(|line| line.trim() == pid.to_string()))
    }

    /// The command that runs `program args` inside from its first instruction: a shell writes
    /// its own pid into the cgroup, then execs the program (same pid), so every byte the program
    /// allocates is charged here.
    pub fn wrap(&self, program: &Path, args: &[String]) -> (PathBuf, Vec<String>) {
        let mut wrapped = vec![
            "-c".to_owned(),
            r#"echo $$ > "$0" && exec "$@""#.to_owned(),
            self.dir.join(CGROUP_PROCS).display().to_string(),
            program.display().to_string(),
        ];
        wrapped.extend(args.iter().cloned());
        (PathBuf::from("/bin/sh"), wrapped)
    }

    /// The limit, usage, peak and OOM kills so far.
    pub fn usage(&self) -> Result<CgroupUsage, CgroupError> {
        let files = self.version.files();
        let number = |file: &str| -> Result<u64, CgroupError> {
            let text = self.read(file)?;
            // v2 writes `max` for no limit.
            Ok(text.trim().parse().unwrap_or(u64::MAX))
        };
        let events = self.read(files.events)?;
        let limit_hits = match self.version {
            CgroupVersion::V1 => number("memory.failcnt")?,
            CgroupVersion::V2 => keyed(&events, "max").unwrap_or_default(),
        };
        Ok(CgroupUsage {
            version: self.version,
            limit_bytes: number(files.limit)?,
            current_bytes: number(files.current)?,
            peak_bytes: self.read(files.peak).ok().and_then(|text| text.trim().parse().ok()),
            oom_kills: keyed(&events, "oom_kill").unwrap_or_default(),
            limit_hits,
        })
    }

    fn read(&self, file: &str) -> Result<String, CgroupError> {
        read(self.dir.join(file))
    }

    fn write(&self, file: &str, value: &str) -> Result<(), CgroupError> {
        let path = self.dir.join(file);
        fs::write(&path, value).map_err(|source| CgroupError::Io {
            context: format!("writing {value} to {}", path.display()),
            source,
        })
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // Its processes were killed by their owners; the kernel may still be tearing them down.
        let deadline = Instant::now() + REMOVE_PATIENCE;
        while fs::remove_dir(&self.dir).is_err() && self.dir.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if self.dir.exists() {
            tracing::warn!(cgroup = %self.dir.display(), "could not remove the cgroup (processes left in it?)");
        }
    }
}

/// The hierarchy to use and the folder to create the cgroup in, from `/proc/self/mountinfo` and
/// `/proc/self/cgroup`; `read` reads a cgroup file (its controllers list).
fn locate(
    mountinfo: &str,
    own: &str,
    read: impl Fn(&Path) -> Option<String>,
) -> Result<(CgroupVersion, PathBuf), CgroupError> {
    let mounts = cgroup_mounts(mountinfo);
    let unified = mounts.iter().find(|m| m.fstype == "cgroup2").filter(|m| {
        read(&m.point.join("cgroup.controllers"))
            .is_some_and(|controllers| controllers.split_whitespace().any(|c| c == "memory"))
    });
    if let Some(mount) = unified {
        return Ok((CgroupVersion::V2, mount.point.clone()));
    }
    let Some(mount) =
        mounts.iter().find(|m| m.fstype == "cgroup" && m.options.split(',').any(|o| o == "memory"))
    else {
        return Err(CgroupError::Unavailable(
            "neither a cgroup v2 hierarchy with the memory controller nor a cgroup v1 memory hierarchy is mounted"
                .into(),
        ));
    };
    // `<id>:memory:/path` (v1 lines name their controllers; several may share a hierarchy).
    let own_path = own
        .lines()
        .filter_map(|line| line.split_once(':')?.1.split_once(':'))
        .find(|(controllers, _)| controllers.split(',').any(|c| c == "memory"))
        .map_or("/", |(_, path)| path);
    // Inside a cgroup namespace the mount's root is where our path starts.
    let relative = own_path.strip_prefix(mount.root.as_str()).unwrap_or(own_path);
    Ok((CgroupVersion::V1, mount.point.join(relative.trim_start_matches('/'))))
}

#[derive(Debug, PartialEq, Eq)]
struct CgroupMount {
    fstype: String,
    root: String,
    point: PathBuf,
    /// Super options; a v1 mount lists its controllers there.
    options: String,
}

/// The cgroup mounts of a `/proc/self/mountinfo`.
fn cgroup_mounts(mountinfo: &str) -> Vec<CgroupMount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (mount, filesystem) = line.split_once(" - ")?;
            let mount: Vec<&str> = mount.split_whitespace().collect();
            let mut filesystem = filesystem.split_whitespace();
            let fstype = filesystem.next()?;
            let options = filesystem.nth(1).unwrap_or_default();
            if !matches!(fstype, "cgroup" | "cgroup2") {
                return None;
            }
            Some(CgroupMount {
                fstype: fstype.to_owned(),
                root: mount.get(3)?.to_string(),
                point: PathBuf::from(mount.get(4)?),
                options: options.to_owned(),
            })
        })
        .collect()
}

/// `key N` in a flat keyed file (`memory.events`, `memory.oom_control`).
fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| line.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
}

fn read(path: impl AsRef<Path>) -> Result<String, CgroupError> {
    let path = path.as_ref();
    fs::read_to_string(path)
        .map_err(|source| CgroupError::Io { context: format!("reading {}", path.display()), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
25 30 0:23 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
26 25 0:24 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate
27 25 0:25 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
28 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct
";
    const V2: &str =
        "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n";

    #[test]
    fn finds_cgroup_mounts_and_their_options() {
        let mounts = cgroup_mounts(HYBRID);
        assert_eq!(mounts.len(), 3, "{mounts:?}");
        assert_eq!(mounts[1].point, PathBuf::from("/sys/fs/cgroup/memory"));
        assert_eq!(mounts[1].options, "rw,memory");
        assert_eq!(mounts[0].fstype, "cgroup2");
    }

    #[test]
    fn chooses_by_what_is_mounted() {
        let own = "4:memory:/process_api/abc\n1:cpu,cpuacct:/\n0::/\n";
        // Hybrid, the unified hierarchy without the memory controller: v1, below our own cgroup.
        let none = |_: &Path| Some(String::new());
        let (version, parent) = locate(HYBRID, own, none).unwrap();
        assert_eq!(
            (version, parent),
            (CgroupVersion::V1, PathBuf::from("/sys/fs/cgroup/memory/process_api/abc"))
        );
        // Pure v2 with the memory controller: v2, at the root.
        let memory = |_: &Path| Some("cpuset cpu io memory pids".to_owned());
        assert_eq!(
            locate(V2, "0::/user.slice\n", memory).unwrap(),
            (CgroupVersion::V2, PathBuf::from("/sys/fs/cgroup"))
        );
        // v2 without the memory controller and no v1 memory mount: nothing to use.
        assert!(matches!(locate(V2, "0::/\n", none), Err(CgroupError::Unavailable(_))));
    }

    #[test]
    fn reads_keyed_counters() {
        let oom_control = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n";
        assert_eq!(keyed(oom_control, "oom_kill"), Some(2));
        assert_eq!(keyed(oom_control, "oom_kill_disable"), Some(0));
        let events = "low 0\nhigh 0\nmax 17\noom 1\noom_kill 1\noom_group_kill 0\n";
        assert_eq!((keyed(events, "max"), keyed(events, "oom_kill")), (Some(17), Some(1)));
        assert_eq!(keyed(events, "missing"), None);
    }
}
