//! The loop guard: something that rewrites a ConfigMap or Secret forever (two controllers
//! fighting over it, a job in a loop) would otherwise roll the workload forever. Past
//! [`LoopGuard::max_reloads`] reloads [`within`](LoopGuard::within) a sliding window, the guard
//! stops the workload's reloads before the next write and records it on the workload
//! ([`LoopStop`]); reloads resume when an operator deletes that record.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use super::{LOOP_STOPPED, TimingProblem, parse_timestamp, short_go_duration};
use crate::duration::parse_go_duration;

#[cfg(test)]
mod tests;

/// At most `max_reloads` reloads of one workload `within` any sliding window of this length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopGuard {
    pub max_reloads: u32,
    pub within: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid loop guard {text:?}: {reason} (expected <reloads>/<duration> such as 20/10m, or off)")]
pub struct LoopGuardError {
    pub text: String,
    pub reason: String,
}

impl LoopGuard {
    pub const DEFAULT: LoopGuard = LoopGuard { max_reloads: 20, within: Duration::from_secs(600) };

    /// The flag's value: `<N>/<Go duration>` (`20/10m`) or `off` (`None`). At least 2 reloads,
    /// since 1 would stop every workload at its second change; a window longer than zero.
    pub fn parse(text: &str) -> Result<Option<LoopGuard>, LoopGuardError> {
        let text = text.trim();
        let fail = |reason: String| LoopGuardError { text: text.to_owned(), reason };
        if text.eq_ignore_ascii_case("off") {
            return Ok(None);
        }
        let (reloads, within) = text.split_once('/').ok_or_else(|| fail("missing '/'".to_owned()))?;
        let max_reloads = match reloads.parse::<u32>() {
            Ok(n) if n >= 2 => n,
            _ => return Err(fail(format!("reloads {reloads:?}: expected a whole number, at least 2"))),
        };
        let within = match parse_go_duration(within) {
            Ok(d) if !d.is_zero() => d,
            Ok(_) => return Err(fail("the duration must be longer than 0".to_owned())),
            Err(error) => return Err(fail(error.to_string())),
        };
        Ok(Some(LoopGuard { max_reloads, within }))
    }

    fn window(&self) -> SignedDuration {
        SignedDuration::try_from(self.within).unwrap_or(SignedDuration::MAX)
    }
}

impl Default for LoopGuard {
    fn default() -> Self {
        LoopGuard::DEFAULT
    }
}

impl fmt::Display for LoopGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.max_reloads, short_go_duration(self.within))
    }
}

/// May the next reload happen?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// No: `reloads` were made within the last `within` already.
    Trip {
        reloads: u32,
        within: Duration,
    },
}

/// The recent reload times of one workload, oldest first. Holds at most the guard's
/// `max_reloads`: older ones cannot change a verdict.
#[derive(Debug, Clone, Default)]
pub struct ReloadHistory {
    reloads: VecDeque<Timestamp>,
}

impl ReloadHistory {
    /// Whether a reload at `at` may happen: not when `max_reloads` were made less than `within`
    /// before it, so the guard stops before the write that would exceed the limit.
    pub fn allows(&self, guard: &LoopGuard, at: Timestamp) -> Verdict {
        let window = guard.window();
        let reloads = self.reloads.iter().filter(|&&reload| at.duration_since(reload) < window).count();
        let reloads = u32::try_from(reloads).unwrap_or(u32::MAX);
        if reloads >= guard.max_reloads {
            Verdict::Trip { reloads, within: guard.within }
        } else {
            Verdict::Allow
        }
    }

    /// Records a reload made at `at`, forgetting the oldest beyond `max_reloads`.
    pub fn record(&mut self, guard: &LoopGuard, at: Timestamp) {
        self.reloads.push_back(at);
        let keep = usize::try_from(guard.max_reloads).unwrap_or(usize::MAX);
        while self.reloads.len() > keep {
            self.reloads.pop_front();
        }
    }

    pub fn last(&self) -> Option<Timestamp> {
        self.reloads.back().copied()
    }

    /// No reload within the window before `now`: the history can be dropped, it decides nothing.
    pub fn is_idle(&self, guard: &LoopGuard, now: Timestamp) -> bool {
        self.last().is_none_or(|last| now.duration_since(last) >= guard.window())
    }
}

/// What the guard writes to the workload's [`LOOP_STOPPED`] annotation, as JSON:
/// `{"at":"<RFC 3339>","reloads":20,"within":"10m","resource":"ConfigMap/name"}`. It tells the
/// operator what was looping; its presence alone stops the workload's reloads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopStop {
    pub at: Timestamp,
    pub reloads: u32,
    pub within: Duration,
    /// The change that would have made one reload too many, `<kind>/<name>`.
    pub resource: String,
}

#[derive(Serialize, Deserialize)]
struct LoopStopJson {
    at: String,
    reloads: u32,
    within: String,
    resource: String,
}

impl LoopStop {
    /// What tripped, for people: "20 reloads within 10m, the last for ConfigMap/settings".
    pub fn describe(&self) -> String {
        format!(
            "{} reloads within {}, the last for {}",
            self.reloads,
            short_go_duration(self.within),
            self.resource
        )
    }

    /// The annotation's value.
    pub fn to_annotation(&self) -> String {
        let json = LoopStopJson {
            at: self.at.to_string(),
            reloads: self.reloads,
            within: short_go_duration(self.within),
            resource: self.resource.clone(),
        };
        serde_json::to_string(&json).expect("strings and numbers serialize")
    }

    /// The [`LOOP_STOPPED`] annotation's value, as a workload view keeps it.
    pub fn parse(value: &str) -> Result<LoopStop, TimingProblem> {
        let problem = |reason| TimingProblem::new(LOOP_STOPPED, value, reason);
        let json: LoopStopJson = serde_json::from_str(value).map_err(|e| problem(e.to_string()))?;
        let within = parse_go_duration(&json.within).map_err(|e| problem(e.to_string()))?;
        let at = parse_timestamp(&json.at).map_err(problem)?;
        Ok(LoopStop { at, reloads: json.reloads, within, resource: json.resource })
    }
}
