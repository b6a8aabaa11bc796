//! The reloader replicas under soak: `--enable-ha` processes of the release binary, each start a
//! new identity (as a replaced pod gets a new name), their RSS and open file descriptors sampled
//! for every lifetime, their logs kept when they end.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use reloader_bench::procfs;
use reloader_harness::{ControlPlane, Reloader};
use serde::Serialize;

/// `--leader-election-id`'s default.
pub const LEASE: &str = "stakater-reloader-lock";
/// SIGTERM's grace before SIGKILL (the chart's terminationGracePeriodSeconds is longer).
const TERM_GRACE: Duration = Duration::from_secs(20);
pub const RELOADS_EXECUTED: &str = "reloader_reload_executed_total{success=\"true\"}";
/// 1 on the replica that holds the lease.
pub const LEADER: &str = "reloader_leader";

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Sample {
    /// Seconds since the soak started.
    pub at: f64,
    pub rss_bytes: u64,
    pub open_fds: u64,
    /// Its `reloader_leader` then (`None`: the metric could not be read).
    pub leading: Option<bool>,
}

/// How a lifetime ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ending {
    Sigkill,
    Sigterm,
    /// Still running when the soak ended (stopped afterwards).
    SoakEnded,
}

/// One process, from start to end.
#[derive(Debug, Clone, Serialize)]
pub struct Lifetime {
    pub identity: String,
    pub slot: usize,
    pub started_at: f64,
    pub ended_at: Option<f64>,
    pub ending: Option<Ending>,
    /// Exit status after SIGTERM (`true`: exited 0 within the grace).
    pub exited_cleanly: Option<bool>,
    /// `reloader_reload_executed_total{success="true"}` when last read (just before it ended).
    pub reloads_executed: f64,
    pub samples: Vec<Sample>,
    #[serde(skip)]
    pub log_file: PathBuf,
}

struct Running {
    reloader: Reloader,
    lifetime: usize,
}

pub struct Slot {
    running: Option<Running>,
    starts: usize,
    restart_at: Option<Instant>,
}

pub struct Pool<'p> {
    plane: &'p ControlPlane,
    namespace: String,
    log_dir: PathBuf,
    started: Instant,
    pub slots: Vec<Slot>,
    pub lifetimes: Vec<Lifetime>,
}

impl<'p> Pool<'p> {
    pub fn new(
        plane: &'p ControlPlane,
        namespace: &str,
        replicas: usize,
        log_dir: &Path,
        started: Instant,
    ) -> Self {
        let slots = (0..replicas).map(|_| Slot { running: None, starts: 0, restart_at: None }).collect();
        Self {
            plane,
            namespace: namespace.to_owned(),
            log_dir: log_dir.to_owned(),
            started,
            slots,
            lifetimes: Vec::new(),
        }
    }

    fn now(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Starts slot `slot` under a new identity and waits until it is ready (a standby is).
    pub async fn start(&mut self, slot: usize) -> anyhow::Result<()> {
        let identity = format!("soak-{slot}-{}", self.slots[slot].starts);
        let reloader = Reloader::builder(self.plane)
            .name(&identity)
            .env("POD_NAME", &identity)
            .env("POD_NAMESPACE", &self.namespace)
            .arg("--enable-ha")
            .start()
            .await?;
        self.lifetimes.push(Lifetime {
            identity: identity.clone(),
            slot,
            started_at: self.now(),
            ended_at: None,
            ending: None,
            exited_cleanly: None,
            reloads_executed: 0.0,
            samples: Vec::new(),
            log_file: self.log_dir.join(format!("{identity}.log")),
        });
        let state = &mut self.slots[slot];
        state.starts += 1;
        state.restart_at = None;
        state.running = Some(Running { reloader, lifetime: self.lifetimes.len() - 1 });
        Ok(())
    }

    /// Restarts the slots whose restart time came; one that does not get ready is tried again
    /// 10 s later (a loaded machine, kube-apiserver still starting).
    pub async fn restart_due(&mut self) {
        for slot in 0..self.slots.len() {
            if self.slots[slot].restart_at.is_some_and(|at| at <= Instant::now())
                && let Err(error) = self.start(slot).await
            {
                eprintln!("soak: restarting replica {slot} failed, trying again in 10 s: {error:#}");
                self.slots[slot].restart_at = Some(Instant::now() + Duration::from_secs(10));
            }
        }
    }

    /// Restarts every stopped slot now.
    pub async fn restart_all(&mut self) -> anyhow::Result<()> {
        for slot in 0..self.slots.len() {
            if self.slots[slot].running.is_none() {
                self.start(slot).await?;
            }
        }
        Ok(())
    }

    /// Ends slot `slot`'s process with `ending` and schedules its restart after `down`.
    pub async fn stop(&mut self, slot: usize, ending: Ending, down: Duration) {
        let Some(mut running) = self.slots[slot].running.take() else { return };
        let reloads = running.reloader.metric(RELOADS_EXECUTED).await.ok().flatten();
        match ending {
            Ending::Sigkill => running.reloader.kill(),
            Ending::Sigterm | Ending::SoakEnded => {
                let grace = TERM_GRACE;
                let reloader = &mut running.reloader;
                tokio::task::block_in_place(|| reloader.terminate(grace));
            }
        }
        let clean =
            (ending != Ending::Sigkill).then(|| running.reloader.exit_status().is_some_and(|s| s.success()));
        let now = self.now();
        let lifetime = &mut self.lifetimes[running.lifetime];
        if let Some(reloads) = reloads {
            lifetime.reloads_executed = reloads;
        }
        lifetime.ended_at = Some(now);
        lifetime.ending = Some(ending);
        lifetime.exited_cleanly = clean;
        let _ = std::fs::write(&lifetime.log_file, running.reloader.log_text());
        if ending != Ending::SoakEnded {
            self.slots[slot].restart_at = Some(Instant::now() + down);
        }
    }

    /// Stops everything (logs kept).
    pub async fn stop_all(&mut self) {
        for slot in 0..self.slots.len() {
            self.stop(slot, Ending::SoakEnded, Duration::ZERO).await;
        }
    }

    /// Samples RSS, open descriptors and the role of every running replica, and its reload
    /// counter.
    pub async fn sample(&mut self) {
        let now = self.now();
        for slot in &self.slots {
            let Some(running) = &slot.running else { continue };
            let pid = running.reloader.pid();
            let (Some(memory), Some(open_fds)) = (procfs::memory(pid), open_fds(pid)) else { continue };
            let reloads = running.reloader.metric(RELOADS_EXECUTED).await.ok().flatten();
            let leading = running.reloader.metric(LEADER).await.ok().flatten().map(|value| value == 1.0);
            let lifetime = &mut self.lifetimes[running.lifetime];
            lifetime.samples.push(Sample { at: now, rss_bytes: memory.rss_bytes, open_fds, leading });
            if let Some(reloads) = reloads {
                lifetime.reloads_executed = reloads;
            }
        }
    }

    /// Running slots and their identities.
    pub fn running(&self) -> Vec<(usize, String)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((i, self.lifetimes[s.running.as_ref()?.lifetime].identity.clone())))
            .collect()
    }

    pub fn reloader(&self, slot: usize) -> Option<&Reloader> {
        self.slots[slot].running.as_ref().map(|r| &r.reloader)
    }

    /// The log of `identity` so far: the running process's, or the file kept when it ended.
    pub fn log_of(&self, identity: &str) -> String {
        for slot in &self.slots {
            if let Some(running) = &slot.running
                && self.lifetimes[running.lifetime].identity == identity
            {
                return running.reloader.log_text();
            }
        }
        self.lifetimes
            .iter()
            .find(|l| l.identity == identity)
            .and_then(|l| std::fs::read_to_string(&l.log_file).ok())
            .unwrap_or_default()
    }

    pub fn lifetime_of(&self, identity: &str) -> Option<&Lifetime> {
        self.lifetimes.iter().find(|l| l.identity == identity)
    }

    /// The Lease's holder (empty when released or missing).
    pub async fn lease_holder(&self, client: &Client) -> String {
        let leases: Api<Lease> = Api::namespaced(client.clone(), &self.namespace);
        match leases.get_opt(LEASE).await {
            Ok(Some(lease)) => lease.spec.and_then(|s| s.holder_identity).unwrap_or_default(),
            _ => String::new(),
        }
    }

    /// The slot whose process holds the Lease, if one of the running ones does.
    pub async fn leader_slot(&self, client: &Client) -> Option<usize> {
        let holder = self.lease_holder(client).await;
        self.running().into_iter().find(|(_, identity)| *identity == holder).map(|(slot, _)| slot)
    }
}

/// Entries of `/proc/<pid>/fd`.
fn open_fds(pid: u32) -> Option<u64> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64)
}
