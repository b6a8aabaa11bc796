//! What /proc says about a process's memory and about the machine.

use serde::Serialize;

/// Resident memory of one process, from `/proc/<pid>/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    /// `VmRSS`: resident now.
    pub rss_bytes: u64,
    /// `VmHWM`: the highest resident size since the process started.
    pub peak_bytes: u64,
}

/// Reads `/proc/<pid>/status`; `None` once the process is gone.
pub fn memory(pid: u32) -> Option<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    Some(Memory {
        rss_bytes: status_kib(&status, "VmRSS")? * 1024,
        peak_bytes: status_kib(&status, "VmHWM")? * 1024,
    })
}

/// Clock ticks per second of `/proc/<pid>/stat`'s times (`USER_HZ`: 100 on every Linux ABI).
const USER_HZ: f64 = 100.0;

/// CPU time spent so far, user and system (`utime + stime` of `/proc/<pid>/stat`), in seconds;
/// `None` once the process is gone.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    stat_cpu_ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?).map(|t| t as f64 / USER_HZ)
}

/// `utime + stime` from a `/proc/<pid>/stat` line. The command name (field 2) may hold spaces and
/// parentheses, so fields are counted from its closing parenthesis.
fn stat_cpu_ticks(stat: &str) -> Option<u64> {
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // After the name: state is field 3, utime field 14, stime field 15.
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(field(14)? + field(15)?)
}

/// Resets `VmHWM` to the current `VmRSS` (`/proc/<pid>/clear_refs` value 5, Linux 4.0+; needs the
/// right to write it: the same user, or root), so a later [`memory`] reports the peak since now.
pub fn reset_peak(pid: u32) -> std::io::Result<()> {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")
}

/// A `Name:   1234 kB` line of a /proc status-style file, in KiB.
fn status_kib(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?.strip_prefix(':')?;
        rest.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

/// The machine the benchmark ran on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Machine {
    pub cores: usize,
    pub memory_bytes: u64,
    pub cpu: String,
    pub kernel: String,
    /// The 1-minute load average when the run started, as the kernel prints it: whether
    /// something else was running then.
    pub load_average: String,
}

impl Machine {
    pub fn describe() -> Self {
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|line| {
                line.strip_prefix("model name")?.split_once(':').map(|(_, v)| v.trim().to_owned())
            })
            .unwrap_or_default();
        let kernel =
            std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_owned();
        let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        Self {
            cores: std::thread::available_parallelism().map_or(1, usize::from),
            memory_bytes: status_kib(&meminfo, "MemTotal").unwrap_or_default() * 1024,
            cpu,
            kernel,
            load_average: loadavg.split_whitespace().next().unwrap_or("?").to_owned(),
        }
    }
}

#[cfg(test)]
impl Machine {
    /// A made-up machine, for tests of the report's rendering.
    pub fn example() -> Self {
        Self {
            cores: 2,
            memory_bytes: 1 << 30,
            cpu: "cpu".into(),
            kernel: "k".into(),
            load_average: "0.05".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kib_fields() {
        let status = "Name:\treloader\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\n";
        assert_eq!(status_kib(status, "VmRSS"), Some(10240));
        assert_eq!(status_kib(status, "VmHWM"), Some(20480));
        assert_eq!(status_kib(status, "VmSwap"), None);
    }

    #[test]
    fn reads_this_process() {
        let own = memory(std::process::id()).expect("our own /proc status");
        assert!(own.rss_bytes > 0 && own.peak_bytes >= own.rss_bytes, "{own:?}");
        assert!(Machine::describe().memory_bytes > 0);
    }

    #[test]
    fn reads_cpu_ticks_past_odd_command_names() {
        let stat = "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 31 0 0 20 0 9 0 100 0";
        assert_eq!(stat_cpu_ticks(stat), Some(281));
        assert_eq!(stat_cpu_ticks("4242 (short) S 1"), None);
        assert!(cpu_seconds(std::process::id()).is_some());
    }
}
