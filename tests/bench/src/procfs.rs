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
        Self {
            cores: std::thread::available_parallelism().map_or(1, usize::from),
            memory_bytes: status_kib(&meminfo, "MemTotal").unwrap_or_default() * 1024,
            cpu,
            kernel,
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
}
