//! Restart by eviction (docs/beyond-stakater.md §13): for workloads whose controller does not
//! roll on a template change (`updateStrategy: OnDelete`) or whose pods only their owner
//! recreates, reloader writes the marker and then evicts the pods that do not run it yet, one at
//! a time (or `max-unavailable`), each after the previous replacement is Ready.
//!
//! Everything here is pure: [`next_step`] takes what the evictor read (the workload's markers,
//! its pods, the progress it recorded on the workload) and the time, and says what to do. The
//! progress lives on the workload ([`Progress`], an annotation), never in memory, so a restart
//! survives a restart or fail-over of the controller; and whether a pod still needs evicting is
//! read from the pod itself (does it carry the workload's markers?), so no pod is evicted twice.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde::{Deserialize, Serialize};

use crate::annotations::AnnotationKeys;
use crate::duration::parse_go_duration;
use crate::hash;
use crate::markers::Markers;

/// Opts a workload in: `evict` (docs/beyond-stakater.md §13).
pub const RESTART: &str = "reloader.dev/restart";
/// The value of [`RESTART`] that turns eviction on.
pub const EVICT: &str = "evict";
/// How many of the workload's pods may be unavailable at once during the restart (default 1).
pub const MAX_UNAVAILABLE: &str = "reloader.dev/max-unavailable";
/// How long a replacement may take to become Ready before the restart stops (default 10m).
pub const READY_TIMEOUT: &str = "reloader.dev/ready-timeout";
/// Written by reloader: the progress of the current restart ([`Progress`], JSON).
pub const PROGRESS: &str = "reloader.dev/eviction";
/// The label that makes a pod a reload target with `--reload-pods` (docs/beyond-stakater.md
/// §14). A label, not an annotation: the API server filters pods by label, so reloader receives
/// (and keeps) only the pods that carry it.
pub const POD_LABEL: &str = "reloader.dev/reload-pod";
/// The pods watch's selector: [`POD_LABEL`] set to `true`.
pub const POD_SELECTOR: &str = "reloader.dev/reload-pod=true";

const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(600);

/// How a workload opted in wants its pods evicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvictionPolicy {
    pub max_unavailable: u32,
    pub ready_timeout: Duration,
}

/// An opt-in annotation that does not parse: which, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("annotation {key}={value:?}: {reason}")]
pub struct PolicyError {
    pub key: &'static str,
    pub value: String,
    pub reason: String,
}

impl EvictionPolicy {
    /// The policy of a workload's annotations; `Ok(None)` when it has not opted in.
    pub fn of(annotations: Option<&BTreeMap<String, String>>) -> Result<Option<Self>, PolicyError> {
        let get = |key: &str| annotations.and_then(|a| a.get(key)).map(|v| v.trim());
        let fail = |key: &'static str, value: &str, reason: &str| PolicyError {
            key,
            value: value.to_owned(),
            reason: reason.to_owned(),
        };
        match get(RESTART) {
            None => Ok(None),
            Some(EVICT) => Self::limits(annotations).map(Some),
            Some(other) => Err(fail(RESTART, other, "expected evict")),
        }
    }

    /// The limits alone, defaults where unset: a pod that is a reload target (`--reload-pods`)
    /// needs no opt-in annotation, its label is one.
    pub fn limits(annotations: Option<&BTreeMap<String, String>>) -> Result<Self, PolicyError> {
        let get = |key: &str| annotations.and_then(|a| a.get(key)).map(|v| v.trim());
        let fail = |key: &'static str, value: &str, reason: &str| PolicyError {
            key,
            value: value.to_owned(),
            reason: reason.to_owned(),
        };
        let max_unavailable = match get(MAX_UNAVAILABLE) {
            None => 1,
            Some(text) => match text.parse::<u32>() {
                Ok(n) if n > 0 => n,
                _ => return Err(fail(MAX_UNAVAILABLE, text, "expected a whole number of pods, at least 1")),
            },
        };
        let ready_timeout = match get(READY_TIMEOUT) {
            None => DEFAULT_READY_TIMEOUT,
            Some(text) => match parse_go_duration(text) {
                Ok(d) if !d.is_zero() => d,
                _ => return Err(fail(READY_TIMEOUT, text, "expected a duration greater than 0 (10m, 90s)")),
            },
        };
        Ok(EvictionPolicy { max_unavailable, ready_timeout })
    }
}

/// What the markers of a pod template (or a pod) record, without where they sit: the env-var
/// markers by container and name, and the annotation marker's resource and hash.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct MarkerRecord(Vec<String>);

impl MarkerRecord {
    /// A webhook injecting env entries may move a marker within its container, and the
    /// annotation's `observedAt` differs between writes: neither counts.
    pub fn of(template: &PodTemplateSpec, keys: &AnnotationKeys) -> Self {
        Self::of_markers(&Markers::read(template, keys))
    }

    /// The record of markers already read (a workload view's).
    pub fn of_markers(markers: &Markers) -> Self {
        let mut records: Vec<String> =
            markers.env.iter().map(|m| format!("env {} {}={}", m.container, m.name, m.value)).collect();
        if let Some(a) = &markers.annotation {
            records.push(format!("annotation {} {}", a.resource, a.hash));
        }
        records.sort();
        MarkerRecord(records)
    }

    /// A short digest, to name the restart in [`Progress`].
    pub fn digest(&self) -> String {
        hash::sha1(self.0.join("\n").as_bytes()).to_hex()[..16].to_owned()
    }
}

/// One pod of the workload, as the evictor sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodState {
    pub name: String,
    /// It carries the workload's current markers (a replacement, or never stale).
    pub current: bool,
    pub ready: bool,
    /// It has a deletion timestamp: on its way out.
    pub terminating: bool,
}

/// Recorded on the workload ([`PROGRESS`]): the restart under way, and how far it got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// [`MarkerRecord::digest`] of the markers the pods are brought to.
    pub target: String,
    /// Unix seconds of the first eviction.
    pub started_at: i64,
    /// Unix seconds of the latest eviction.
    pub last_eviction_at: i64,
    pub evicted: u32,
    pub state: ProgressState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ProgressState {
    Evicting,
    Done,
    /// A replacement did not become Ready in time: no further evictions for this target.
    Stopped,
}

impl Progress {
    /// Reads the annotation; anything unreadable counts as no progress.
    pub fn read(annotations: Option<&BTreeMap<String, String>>) -> Option<Self> {
        serde_json::from_str(annotations?.get(PROGRESS)?).ok()
    }

    /// The annotation's value.
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).expect("progress serializes")
    }
}

/// What the evictor does next for one workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Evict these pods now (a disruption budget may refuse some), then record
    /// [`Progress::after_evictions`].
    Evict { pods: Vec<String> },
    /// Nothing to do yet: replacements are on their way (or a disruption budget said no).
    Wait,
    /// Every pod runs the markers and is available: record `progress` (done), if it changed.
    Done { progress: Option<Progress> },
    /// A replacement was not Ready within the timeout: record `progress` (stopped) and say so.
    Stop { progress: Progress, waited: Duration },
    /// Stopped earlier for these markers: nothing until they change.
    Stopped,
}

/// The next step of the restart towards `target`. `desired` is how many pods the workload wants
/// (`None` when its kind does not say); a missing pod counts as unavailable.
pub fn next_step(
    policy: EvictionPolicy,
    recorded: Option<&Progress>,
    target: &str,
    pods: &[PodState],
    desired: Option<u32>,
    now_unix: i64,
) -> Step {
    let recorded = recorded.filter(|p| p.target == target);
    if recorded.is_some_and(|p| p.state == ProgressState::Stopped) {
        return Step::Stopped;
    }
    let stale: Vec<&PodState> = pods.iter().filter(|p| !p.current && !p.terminating).collect();
    // A terminating pod is unavailable once: as terminating, not also as missing.
    let missing = desired.map_or(0, |d| d.saturating_sub(pods.len() as u32));
    let unavailable = pods.iter().filter(|p| p.terminating || !p.ready).count() as u32 + missing;
    if stale.is_empty() && unavailable == 0 {
        let done = recorded.map(|p| Progress { state: ProgressState::Done, ..p.clone() });
        let changed = done.as_ref().is_some_and(|d| Some(d) != recorded);
        return Step::Done { progress: if changed { done } else { None } };
    }
    let room = policy.max_unavailable.saturating_sub(unavailable) as usize;
    if room == 0 || stale.is_empty() {
        // Waiting for replacements: since the last eviction, at most the timeout.
        if let Some(p) = recorded {
            let waited = Duration::from_secs(now_unix.saturating_sub(p.last_eviction_at).max(0) as u64);
            if waited > policy.ready_timeout {
                let progress = Progress { state: ProgressState::Stopped, ..p.clone() };
                return Step::Stop { progress, waited };
            }
        }
        return Step::Wait;
    }
    // The last pod first, as the StatefulSet controller rolls (by name, ordinals last).
    let mut names: Vec<&str> = stale.iter().map(|p| p.name.as_str()).collect();
    names.sort_by(|a, b| natural_key(b).cmp(&natural_key(a)));
    Step::Evict { pods: names.into_iter().take(room).map(str::to_owned).collect() }
}

impl Progress {
    /// The progress after `evicted` pods were evicted at `now_unix` in the restart towards
    /// `target` (`recorded` when it is the same restart).
    pub fn after_evictions(
        recorded: Option<&Progress>,
        target: &str,
        evicted: u32,
        now_unix: i64,
    ) -> Progress {
        match recorded.filter(|p| p.target == target) {
            Some(p) => Progress {
                last_eviction_at: now_unix,
                evicted: p.evicted + evicted,
                state: ProgressState::Evicting,
                ..p.clone()
            },
            None => Progress {
                target: target.to_owned(),
                started_at: now_unix,
                last_eviction_at: now_unix,
                evicted,
                state: ProgressState::Evicting,
            },
        }
    }
}

/// `web-10` after `web-9`: the name, then its trailing number.
fn natural_key(name: &str) -> (&str, u64) {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (stem, number) = name.split_at(name.len() - digits);
    (stem, number.parse().unwrap_or(0))
}

pub mod pods;
#[cfg(test)]
mod tests;
