//! When a reload may happen. A workload can ask reloader to wait after a change ([`DELAY`]:
//! changes that arrive together make one reload), to leave time between its reloads
//! ([`MIN_INTERVAL`]) and to reload only inside maintenance windows ([`MAINTENANCE_WINDOW`],
//! [`Windows`]); [`Timing::release_at`] combines them into the instant the reload happens.
//!
//! A reload that waits is recorded on the workload itself ([`HeldReload`]), not in memory, so a
//! restart or a new leader applies it exactly once and at the same time. [`LoopGuard`] stops a
//! workload that something keeps reloading.
//!
//! Pure: every instant is passed in.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::duration::{format_go_duration, parse_go_duration};
use crate::model::ResourceKind;

mod gate;
mod loop_guard;
mod window;

#[cfg(test)]
mod tests;

pub use gate::{DueWrite, Gate, gate};
pub use loop_guard::{LoopGuard, LoopGuardError, LoopStop, ReloadHistory, Verdict};
pub use window::{WindowError, Windows};

/// How long after a change to reload (a Go duration, `5m`): changes within it make one reload.
pub const DELAY: &str = "reloader.dev/delay";
/// The least time between two reloads of the workload (a Go duration, `1h`).
pub const MIN_INTERVAL: &str = "reloader.dev/min-interval";
/// When the workload may be reloaded ([`Windows`] syntax), or `always` to opt out of the default
/// windows.
pub const MAINTENANCE_WINDOW: &str = "reloader.dev/maintenance-window";
/// Written by reloader: the reload waiting for its time ([`HeldReload`], JSON).
pub const HELD: &str = "reloader.dev/held-reload";
/// Written by the loop guard ([`LoopStop`], JSON); an operator deletes it to resume reloads.
pub const LOOP_STOPPED: &str = "reloader.dev/reload-loop-stopped";

/// The [`MAINTENANCE_WINDOW`] value for "no window", even when a default is configured.
const ALWAYS: &str = "always";

/// What a workload's annotations ask of the timing of its reloads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Timing {
    pub delay: Duration,
    pub min_interval: Duration,
    pub windows: Option<Arc<Windows>>,
}

/// An annotation value that does not parse: which, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("annotation {annotation}: invalid value {value:?}: {reason}")]
pub struct TimingProblem {
    pub annotation: &'static str,
    pub value: String,
    pub reason: String,
}

impl TimingProblem {
    fn new(annotation: &'static str, value: &str, reason: impl ToString) -> Self {
        TimingProblem { annotation, value: value.to_owned(), reason: reason.to_string() }
    }
}

impl Timing {
    /// From a getter of a workload's annotation values (`WorkloadView::reload_timing` reads
    /// the raw values its view keeps). A bad value is a problem and behaves as if absent: a typo
    /// must not stop reloads, nor drop the default windows (reported, not obeyed).
    pub(crate) fn read<'a>(
        get: impl Fn(&'static str) -> Option<&'a str>,
        default_windows: Option<&Arc<Windows>>,
    ) -> (Timing, Vec<TimingProblem>) {
        let mut problems = Vec::new();
        let mut duration = |annotation: &'static str| {
            let text = get(annotation)?.trim();
            parse_go_duration(text).map_err(|e| problems.push(TimingProblem::new(annotation, text, e))).ok()
        };
        let delay = duration(DELAY).unwrap_or_default();
        let min_interval = duration(MIN_INTERVAL).unwrap_or_default();
        let windows = match get(MAINTENANCE_WINDOW).map(str::trim) {
            Some(text) if text.eq_ignore_ascii_case(ALWAYS) => None,
            Some(text) => match text.parse::<Windows>() {
                Ok(windows) => Some(Arc::new(windows)),
                Err(error) => {
                    problems.push(TimingProblem::new(MAINTENANCE_WINDOW, text, error));
                    default_windows.cloned()
                }
            },
            None => default_windows.cloned(),
        };
        (Timing { delay, min_interval, windows }, problems)
    }

    /// Nothing to wait for: the reload happens as the change arrives.
    pub fn is_immediate(&self) -> bool {
        self.delay.is_zero() && self.min_interval.is_zero() && self.windows.is_none()
    }

    /// When the reload for a change at `changed_at` happens: after the delay, at least the
    /// minimum interval after the last reload, and inside a window. `held_by` names what set the
    /// instant (the window if it moved it, else the later of the two bounds), `None` if nothing did.
    pub fn release_at(&self, changed_at: Timestamp, last_reload_at: Option<Timestamp>) -> Release {
        let after_delay = later_by(changed_at, self.delay);
        let after_interval = last_reload_at
            .filter(|_| !self.min_interval.is_zero())
            .map(|last| later_by(last, self.min_interval));
        let earliest = after_interval.map_or(after_delay, |bound| bound.max(after_delay));
        let at = self.windows.as_ref().map_or(earliest, |windows| windows.next_open(earliest));
        let held_by = if at == changed_at {
            None
        } else if at > earliest {
            Some(HoldReason::MaintenanceWindow)
        } else if after_interval.is_some_and(|bound| bound > after_delay) {
            Some(HoldReason::MinInterval)
        } else {
            Some(HoldReason::Delay)
        };
        Release { at, held_by }
    }
}

/// `at + duration`, the end of time past the end of time (a Go duration never gets there).
fn later_by(at: Timestamp, duration: Duration) -> Timestamp {
    at.saturating_add(duration).unwrap_or(Timestamp::MAX)
}

/// When a reload happens, and what made it wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    pub at: Timestamp,
    pub held_by: Option<HoldReason>,
}

/// What a held reload waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HoldReason {
    Delay,
    MinInterval,
    MaintenanceWindow,
}

impl HoldReason {
    pub const ALL: [HoldReason; 3] =
        [HoldReason::Delay, HoldReason::MinInterval, HoldReason::MaintenanceWindow];

    /// The name in the [`HELD`] record, metrics and events.
    pub fn as_str(self) -> &'static str {
        match self {
            HoldReason::Delay => "delay",
            HoldReason::MinInterval => "min-interval",
            HoldReason::MaintenanceWindow => "maintenance-window",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        HoldReason::ALL.into_iter().find(|reason| reason.as_str() == text)
    }
}

/// The durable record of a held reload, in the workload's [`HELD`] annotation as JSON, so a
/// restart or a new leader applies it exactly once at the same time:
/// `{"since":"<RFC 3339>","until":"<RFC 3339>","reason":"delay","resources":["ConfigMap/name"]}`.
/// Resources are `<kind>/<name>` in the workload's namespace, sorted and without duplicates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldReload {
    pub since: Timestamp,
    pub until: Timestamp,
    pub reason: HoldReason,
    pub resources: Vec<(ResourceKind, String)>,
}

#[derive(Serialize, Deserialize)]
struct HeldReloadJson {
    since: String,
    until: String,
    reason: String,
    resources: Vec<String>,
}

impl HeldReload {
    /// The annotation's value.
    pub fn to_annotation(&self) -> String {
        let mut resources = self.resources.clone();
        resources.sort();
        resources.dedup();
        let json = HeldReloadJson {
            since: self.since.to_string(),
            until: self.until.to_string(),
            reason: self.reason.as_str().to_owned(),
            resources: resources.iter().map(|(kind, name)| format!("{kind}/{name}")).collect(),
        };
        serde_json::to_string(&json).expect("strings serialize")
    }

    /// The [`HELD`] annotation's value, as a workload view keeps it.
    pub fn parse(value: &str) -> Result<HeldReload, TimingProblem> {
        let problem = |reason| TimingProblem::new(HELD, value, reason);
        let json: HeldReloadJson = serde_json::from_str(value).map_err(|e| problem(e.to_string()))?;
        let reason = HoldReason::parse(&json.reason)
            .ok_or_else(|| problem(format!("unknown reason {:?}", json.reason)))?;
        let mut resources = json
            .resources
            .iter()
            .map(|r| parse_resource(r))
            .collect::<Result<Vec<_>, _>>()
            .map_err(problem)?;
        resources.sort();
        resources.dedup();
        let since = parse_timestamp(&json.since).map_err(problem)?;
        let until = parse_timestamp(&json.until).map_err(problem)?;
        Ok(HeldReload { since, until, reason, resources })
    }
}

fn parse_timestamp(text: &str) -> Result<Timestamp, String> {
    text.parse().map_err(|e| format!("invalid time {text:?}: {e}"))
}

/// `ConfigMap/name`, `Secret/name` or `SecretProviderClass/name`.
fn parse_resource(text: &str) -> Result<(ResourceKind, String), String> {
    const KINDS: [ResourceKind; 3] =
        [ResourceKind::ConfigMap, ResourceKind::Secret, ResourceKind::SecretProviderClass];
    text.split_once('/')
        .and_then(|(kind, name)| {
            let kind = KINDS.into_iter().find(|k| k.to_string() == kind)?;
            (!name.is_empty()).then(|| (kind, name.to_owned()))
        })
        .ok_or_else(|| format!("invalid resource {text:?} (expected ConfigMap/<name>, Secret/<name> or SecretProviderClass/<name>)"))
}

/// Go's duration syntax without its zero units (`10m`, not `10m0s`), for text people read;
/// sub-second durations keep Go's form.
fn short_go_duration(duration: Duration) -> String {
    let seconds = duration.as_secs();
    if duration.subsec_nanos() != 0 || seconds == 0 {
        return format_go_duration(duration);
    }
    let parts = [(seconds / 3_600, "h"), (seconds / 60 % 60, "m"), (seconds % 60, "s")];
    parts.iter().filter(|(n, _)| *n > 0).map(|(n, unit)| format!("{n}{unit}")).collect()
}
