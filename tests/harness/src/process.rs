//! Child processes that cannot outlive the process that started them.
//!
//! Every component is started with `PR_SET_PDEATHSIG = SIGKILL`, so the kernel kills it when its
//! parent goes away, even on SIGKILL of the test binary, where no destructor runs. The signal is
//! tied to the *thread* that forked the child, not to the process: children are therefore forked
//! by one spawner thread that lives as long as the process, never by a test's thread or a tokio
//! worker that may finish first.
// The one place in the workspace that needs `unsafe`: `pre_exec` and the libc calls in it.
#![allow(unsafe_code)]

use std::fs::File;
use std::io::{self, BufRead, BufReader, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Sender};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::PlaneError;

type SpawnRequest = (Command, Sender<io::Result<Child>>);

/// Forks `command` from the long-lived spawner thread with the parent-death signal set.
fn spawn_tied_to_process(mut command: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<Sender<SpawnRequest>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (requests, inbox) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("control-plane-spawner".into())
            .spawn(move || {
                // Never returns while the static sender lives, that is, until the process exits.
                for (mut command, reply) in inbox {
                    let _ = reply.send(command.spawn());
                }
            })
            .expect("starting the control-plane spawner thread");
        Mutex::new(requests)
    });

    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec and only makes async-signal-safe
    // calls (prctl, getppid, _exit); it touches no memory shared with other threads.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl; then no signal would ever come.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }

    let (reply, answer) = mpsc::channel();
    spawner
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .send((command, reply))
        .map_err(|_| io::Error::other("the control-plane spawner thread is gone"))?;
    answer.recv().map_err(|_| io::Error::other("the control-plane spawner thread is gone"))?
}

/// One running component: its child process and the file its output goes to.
#[derive(Debug)]
pub struct Process {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Process {
    /// Starts `program` with `args`, stdout and stderr appended to `log`.
    pub fn start(
        name: &str,
        program: &Path,
        args: &[String],
        envs: &[(&str, &Path)],
        log: &Path,
    ) -> Result<Self, PlaneError> {
        let io_error = |context: String| move |source| PlaneError::Io { context, source };
        let output = File::options()
            .create(true)
            .append(true)
            .open(log)
            .map_err(io_error(format!("opening {}", log.display())))?;
        let errors = output.try_clone().map_err(io_error(format!("opening {}", log.display())))?;
        let mut command = Command::new(program);
        command.args(args).stdin(Stdio::null()).stdout(output).stderr(errors);
        for (key, value) in envs {
            command.env(key, value);
        }
        let child = spawn_tied_to_process(command)
            .map_err(io_error(format!("starting {name} ({})", program.display())))?;
        Ok(Self { name: name.to_owned(), child, log: log.to_owned() })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn log(&self) -> &Path {
        &self.log
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status if the process has ended.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Kills the process and reaps it.
    pub fn kill(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }

    /// Asks the process to stop with SIGTERM, and kills it when it has not stopped in `grace`.
    pub fn terminate(&mut self, grace: Duration) {
        if self.exited().is_some() {
            return;
        }
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) has no memory effects; `pid` is our own unreaped child, so it cannot
        // have been recycled for another process.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if self.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last `lines` lines of a log file, read from its end so huge logs stay cheap.
pub fn tail(path: &Path, lines: usize) -> io::Result<Vec<String>> {
    const WINDOW: u64 = 64 * 1024;
    let mut file = File::open(path)?;
    let length = file.metadata()?.len();
    let start = length.saturating_sub(WINDOW);
    file.seek(SeekFrom::Start(start))?;
    let mut reader = BufReader::new(file);
    if start > 0 {
        // Drop the first, probably partial line of the window.
        reader.read_until(b'\n', &mut Vec::new())?;
    }
    let all: Vec<String> = reader
        .split(b'\n')
        .map(|line| line.map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
        .collect::<io::Result<_>>()?;
    Ok(all[all.len().saturating_sub(lines)..].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_returns_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let text: String = (0..100).map(|n| format!("line {n}\n")).collect();
        std::fs::write(&path, text).unwrap();
        assert_eq!(tail(&path, 2).unwrap(), vec!["line 98", "line 99"]);
        assert_eq!(tail(&path, 1000).unwrap().len(), 100);
    }

    #[test]
    fn tail_of_a_large_file_reads_only_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let text: String = (0..20_000).map(|n| format!("line {n}\n")).collect();
        std::fs::write(&path, text).unwrap();
        assert_eq!(tail(&path, 3).unwrap(), vec!["line 19997", "line 19998", "line 19999"]);
    }

    #[test]
    fn terminate_stops_and_reaps_a_running_child() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("sleep.log");
        let mut sleeper =
            Process::start("sleep", Path::new("/bin/sleep"), &["30".to_owned()], &[], &log).unwrap();
        assert!(sleeper.exited().is_none());
        sleeper.terminate(Duration::from_secs(5));
        assert!(sleeper.exited().is_some());
    }
}
