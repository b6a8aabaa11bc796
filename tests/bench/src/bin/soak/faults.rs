//! The faults the soak injects, and the trace each must leave where an operator would look
//! (docs/soak.md, "What it does"): the log lines and metrics of the replicas, checked until a
//! deadline.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::Client;
use reloader_harness::ControlPlane;
use serde::Serialize;

use crate::replicas::{Ending, Pool};
use crate::rng::Rng;

const WATCH_ERRORS: &str = "reloader_error_types_total{type=\"watch\"}";
const WATCH_FAILED: &str = "watch failed; retrying with backoff";
const WATCH_RESUMED: &str = "watch resumed";
const TAKING_OVER: &str = "taking over the lease";
const BECAME_LEADER: &str = "became leader";
const RELEASED: &str = "released the lease";
const SIGTERM_SEEN: &str = "SIGTERM: shutting down";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// kube-apiserver killed and started again after a few seconds.
    ApiserverRestart,
    LeaderSigkill,
    LeaderSigterm,
    StandbySigkill,
    StandbySigterm,
}

impl FaultKind {
    pub const ALL: [FaultKind; 5] = [
        FaultKind::ApiserverRestart,
        FaultKind::LeaderSigkill,
        FaultKind::LeaderSigterm,
        FaultKind::StandbySigkill,
        FaultKind::StandbySigterm,
    ];

    pub fn as_label(self) -> &'static str {
        match self {
            FaultKind::ApiserverRestart => "apiserver-restart",
            FaultKind::LeaderSigkill => "leader-sigkill",
            FaultKind::LeaderSigterm => "leader-sigterm",
            FaultKind::StandbySigkill => "standby-sigkill",
            FaultKind::StandbySigterm => "standby-sigterm",
        }
    }
}

/// The order of the faults: every kind once per round, in a random order. A kind that fits
/// nothing when due (a leader fault while the protected replica leads) is tried again at the end
/// of its round; when it is the last of its round, the next round starts around it, so the other
/// kinds go on rather than waiting for it.
#[derive(Debug, Default)]
pub struct Rounds {
    /// Popped from the end.
    due: Vec<FaultKind>,
}

impl Rounds {
    pub fn next(&mut self, rng: &mut Rng) -> FaultKind {
        if self.due.is_empty() {
            self.due = shuffled(FaultKind::ALL.to_vec(), rng);
        }
        self.due.pop().expect("a round has every kind")
    }

    /// `kind` could not be injected now.
    pub fn defer(&mut self, kind: FaultKind, rng: &mut Rng) {
        if self.due.is_empty() {
            self.due = shuffled(FaultKind::ALL.into_iter().filter(|k| *k != kind).collect(), rng);
        }
        self.due.insert(0, kind);
    }
}

fn shuffled(mut kinds: Vec<FaultKind>, rng: &mut Rng) -> Vec<FaultKind> {
    for i in (1..kinds.len()).rev() {
        kinds.swap(i, rng.below(i + 1));
    }
    kinds
}

/// One thing the fault must leave.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "expect", rename_all = "kebab-case")]
enum Want {
    /// Each replica running at the fault logs `line` after it (one that ended meanwhile is excused).
    EachLogs { offsets: BTreeMap<String, usize>, line: &'static str },
    /// Some replica other than `except` logs `line` after the fault (one started later: anywhere).
    AnotherLogs { except: String, offsets: BTreeMap<String, usize>, line: &'static str },
    /// `identity` logged `line` after the fault.
    Logs { identity: String, offset: usize, line: &'static str },
    /// `sample` rose on each replica running at the fault (one that ended meanwhile is excused).
    MetricRose { before: BTreeMap<String, f64>, sample: &'static str },
    /// `identity` exited 0 after SIGTERM.
    ExitedCleanly { identity: String },
    /// The Lease still names `identity` (a standby's end disturbs no leader).
    LeaderUnchanged { identity: String },
}

/// A fault injected and what it must leave.
#[derive(Debug, Clone, Serialize)]
pub struct TraceCheck {
    pub fault: FaultKind,
    /// Seconds since the soak started.
    pub at: f64,
    /// The replica it hit, or how long kube-apiserver was down.
    pub detail: String,
    wants: Vec<Want>,
    /// `Some(true)` once every trace was seen, `Some(false)` at the deadline without them.
    pub passed: Option<bool>,
    /// Seconds from the fault to the last trace seen.
    pub seen_after: Option<f64>,
    pub missing: Vec<String>,
    #[serde(skip)]
    injected: Instant,
    #[serde(skip)]
    deadline: Instant,
}

impl TraceCheck {
    /// Checks the traces once; settles it when all are there or the deadline passed.
    pub async fn evaluate(&mut self, pool: &Pool<'_>, client: &Client) {
        if self.passed.is_some() {
            return;
        }
        let mut missing = Vec::new();
        for want in &self.wants {
            if let Some(why) = unmet(want, pool, client).await {
                missing.push(why);
            }
        }
        if missing.is_empty() {
            self.passed = Some(true);
            self.seen_after = Some(self.injected.elapsed().as_secs_f64());
        } else if Instant::now() >= self.deadline {
            self.passed = Some(false);
            self.missing = missing;
        }
    }
}

impl TraceCheck {
    /// At the end of the soak: whatever is still missing fails.
    pub async fn finish(&mut self, pool: &Pool<'_>, client: &Client) {
        self.evaluate(pool, client).await;
        if self.passed.is_none() {
            self.deadline = Instant::now();
            self.evaluate(pool, client).await;
        }
    }
}

/// Why `want` is not met yet, or `None`.
async fn unmet(want: &Want, pool: &Pool<'_>, client: &Client) -> Option<String> {
    let running: BTreeMap<String, usize> = pool.running().into_iter().map(|(slot, id)| (id, slot)).collect();
    let after =
        |identity: &str, offset: usize| pool.log_of(identity).get(offset..).unwrap_or_default().to_owned();
    match want {
        Want::EachLogs { offsets, line } => {
            let silent: Vec<&String> = offsets
                .iter()
                .filter(|(id, offset)| running.contains_key(*id) && !after(id, **offset).contains(line))
                .map(|(id, _)| id)
                .collect();
            (!silent.is_empty()).then(|| format!("{silent:?} did not log {line:?}"))
        }
        Want::AnotherLogs { except, offsets, line } => {
            let mut candidates: Vec<String> = running.keys().filter(|id| *id != except).cloned().collect();
            candidates.extend(offsets.keys().filter(|id| *id != except).cloned());
            candidates.sort();
            candidates.dedup();
            let seen =
                candidates.iter().any(|id| after(id, offsets.get(id).copied().unwrap_or(0)).contains(line));
            (!seen).then(|| format!("no replica but {except} logged {line:?}"))
        }
        Want::Logs { identity, offset, line } => {
            (!after(identity, *offset).contains(line)).then(|| format!("{identity} did not log {line:?}"))
        }
        Want::MetricRose { before, sample } => {
            let mut flat = Vec::new();
            for (identity, value) in before {
                let Some(reloader) = running.get(identity).and_then(|slot| pool.reloader(*slot)) else {
                    continue;
                };
                let now = reloader.metric(sample).await.ok().flatten().unwrap_or(0.0);
                if now <= *value {
                    flat.push(identity.clone());
                }
            }
            (!flat.is_empty()).then(|| format!("{sample} did not rise on {flat:?}"))
        }
        Want::ExitedCleanly { identity } => match pool.lifetime_of(identity).and_then(|l| l.exited_cleanly) {
            Some(true) => None,
            other => Some(format!("{identity} did not exit 0 after SIGTERM ({other:?})")),
        },
        Want::LeaderUnchanged { identity } => {
            let holder = pool.lease_holder(client).await;
            (holder != *identity).then(|| format!("the Lease moved from {identity} to {holder:?}"))
        }
    }
}

/// Injects `kind`, unless nothing fits (no leader among the replicas that may be stopped, no
/// standby). `protected` is not stopped: a lifetime long enough to judge its memory slope.
pub async fn inject(
    kind: FaultKind,
    plane: &ControlPlane,
    pool: &mut Pool<'_>,
    client: &Client,
    rng: &mut Rng,
    protected: Option<usize>,
    soak_started: Instant,
) -> anyhow::Result<Option<TraceCheck>> {
    let running = pool.running();
    let offsets: BTreeMap<String, usize> =
        running.iter().map(|(_, id)| (id.clone(), pool.log_of(id).len())).collect();
    let leader = pool.leader_slot(client).await;
    let down = Duration::from_secs(rng.between(5, 20));
    let injected = Instant::now();
    let at = soak_started.elapsed().as_secs_f64();
    let check = |wants: Vec<Want>, detail: String, within: Duration| TraceCheck {
        fault: kind,
        at,
        detail,
        wants,
        passed: None,
        seen_after: None,
        missing: Vec::new(),
        injected,
        deadline: injected + within,
    };
    match kind {
        FaultKind::ApiserverRestart => {
            let mut before = BTreeMap::new();
            for (slot, identity) in &running {
                let value = match pool.reloader(*slot) {
                    Some(reloader) => reloader.metric(WATCH_ERRORS).await.ok().flatten().unwrap_or(0.0),
                    None => 0.0,
                };
                before.insert(identity.clone(), value);
            }
            // Around the renew deadline (10 s): some restarts cost the leader its lease, some not.
            let outage = Duration::from_secs(rng.between(3, 16));
            plane.stop_apiserver();
            tokio::time::sleep(outage).await;
            if let Err(error) = plane.start_apiserver().await {
                // Still starting on a loaded machine: the churn's requests fail until it is up.
                eprintln!("soak: kube-apiserver not ready after the restart: {error}");
            }
            let wants = vec![
                Want::EachLogs { offsets: offsets.clone(), line: WATCH_FAILED },
                Want::EachLogs { offsets, line: WATCH_RESUMED },
                Want::MetricRose { before, sample: WATCH_ERRORS },
            ];
            let detail = format!(
                "down {} s, restarted in {:.0} s",
                outage.as_secs(),
                injected.elapsed().as_secs_f64()
            );
            Ok(Some(check(wants, detail, Duration::from_secs(180))))
        }
        FaultKind::LeaderSigkill | FaultKind::LeaderSigterm => {
            let Some(slot) = leader.filter(|slot| Some(*slot) != protected) else { return Ok(None) };
            let identity =
                running.iter().find(|(s, _)| *s == slot).map(|(_, id)| id.clone()).unwrap_or_default();
            let mut wants = vec![Want::AnotherLogs {
                except: identity.clone(),
                offsets: offsets.clone(),
                line: BECAME_LEADER,
            }];
            if kind == FaultKind::LeaderSigkill {
                pool.stop(slot, Ending::Sigkill, down).await;
                // The Lease is still held by the dead identity: a standby must wait it out.
                wants.push(Want::AnotherLogs { except: identity.clone(), offsets, line: TAKING_OVER });
            } else {
                let offset = offsets.get(&identity).copied().unwrap_or(0);
                pool.stop(slot, Ending::Sigterm, down).await;
                wants.push(Want::Logs { identity: identity.clone(), offset, line: RELEASED });
                wants.push(Want::ExitedCleanly { identity: identity.clone() });
            }
            Ok(Some(check(
                wants,
                format!("{identity}, restarted after {} s", down.as_secs()),
                Duration::from_secs(120),
            )))
        }
        FaultKind::StandbySigkill | FaultKind::StandbySigterm => {
            let standbys: Vec<&(usize, String)> = running
                .iter()
                .filter(|(slot, _)| Some(*slot) != leader && Some(*slot) != protected)
                .collect();
            let Some((slot, identity)) = rng.pick(&standbys).map(|s| (*s).clone()) else { return Ok(None) };
            let Some(leader_identity) = leader.and_then(|l| running.iter().find(|(s, _)| *s == l)) else {
                return Ok(None);
            };
            let mut wants = vec![Want::LeaderUnchanged { identity: leader_identity.1.clone() }];
            if kind == FaultKind::StandbySigkill {
                pool.stop(slot, Ending::Sigkill, down).await;
            } else {
                let offset = offsets.get(&identity).copied().unwrap_or(0);
                pool.stop(slot, Ending::Sigterm, down).await;
                wants.push(Want::Logs { identity: identity.clone(), offset, line: SIGTERM_SEEN });
                wants.push(Want::ExitedCleanly { identity: identity.clone() });
            }
            Ok(Some(check(
                wants,
                format!("{identity}, restarted after {} s", down.as_secs()),
                Duration::from_secs(60),
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_once_per_round() {
        let (mut rounds, mut rng) = (Rounds::default(), Rng::new(7));
        for _ in 0..4 {
            let mut round: Vec<FaultKind> =
                (0..FaultKind::ALL.len()).map(|_| rounds.next(&mut rng)).collect();
            round.sort_by_key(|k| k.as_label());
            let mut all = FaultKind::ALL.to_vec();
            all.sort_by_key(|k| k.as_label());
            assert_eq!(round, all);
        }
    }

    #[test]
    fn a_fault_that_never_fits_holds_up_no_other() {
        let (mut rounds, mut rng) = (Rounds::default(), Rng::new(11));
        let mut injected = Vec::new();
        for _ in 0..40 {
            let kind = rounds.next(&mut rng);
            if kind == FaultKind::LeaderSigkill {
                rounds.defer(kind, &mut rng);
            } else {
                injected.push(kind);
            }
        }
        for kind in FaultKind::ALL.into_iter().filter(|k| *k != FaultKind::LeaderSigkill) {
            let count = injected.iter().filter(|k| **k == kind).count();
            assert!(count >= 6, "{kind:?} injected {count} times in 40 turns: {injected:?}");
        }
    }

    #[test]
    fn a_deferred_fault_comes_at_the_end_of_its_round() {
        let (mut rounds, mut rng) = (Rounds::default(), Rng::new(3));
        let first = rounds.next(&mut rng);
        rounds.defer(first, &mut rng);
        let rest: Vec<FaultKind> = (0..FaultKind::ALL.len()).map(|_| rounds.next(&mut rng)).collect();
        assert_eq!(rest.last(), Some(&first), "{rest:?}");
        assert_eq!(rest.iter().filter(|k| **k == first).count(), 1, "{rest:?}");
    }
}
