//! Deployment pause periods (docs/compatibility.md §8), derived from annotations alone so a pause survives
//! restarts, leader changes and failed reads (Stakater kept the timer in memory: their issue 1219).

use std::time::{Duration, SystemTime};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use reloader_core::annotations::AnnotationKeys;
use reloader_core::duration::parse_pause_period;
use reloader_core::model::WorkloadKind;
use reloader_core::views::WorkloadView;

/// When a Deployment that reloader paused is due to resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PauseDeadline {
    /// The `paused-at` annotation; the Unix epoch if it no longer parses (resume at once).
    pub paused_at: SystemTime,
    /// The pause-period annotation; zero if it was removed or no longer parses (resume at once).
    pub period: Duration,
}

impl PauseDeadline {
    pub fn resume_at(&self) -> SystemTime {
        self.paused_at + self.period
    }
}

/// The resume deadline of a Deployment reloader paused, or `None` if reloader did not pause it
/// (no `paused-at` annotation: never paused, or paused by a user). Whatever is wrong with the
/// annotations errs towards resuming now: a Deployment must never stay paused forever.
pub fn pause_deadline(view: &WorkloadView) -> Option<PauseDeadline> {
    if view.key.kind != WorkloadKind::Deployment {
        return None;
    }
    let paused_at = view.paused_at.as_deref()?;
    Some(PauseDeadline {
        paused_at: chrono::DateTime::parse_from_rfc3339(paused_at)
            .map(SystemTime::from)
            .unwrap_or(SystemTime::UNIX_EPOCH),
        // A hold by the admission webhook (docs/beyond-stakater.md §11) when no pause period.
        period: view
            .pause_period
            .as_deref()
            .and_then(period_of)
            .or_else(|| view.hold_period.as_deref().and_then(period_of))
            .unwrap_or(Duration::ZERO),
    })
}

/// The pause period a reload should start, if the workload asks for one. A zero period, or one
/// that does not parse, pauses nothing (the reload itself still happens).
pub(crate) fn period(meta: &ObjectMeta, keys: &AnnotationKeys) -> Option<Duration> {
    annotation(meta, &keys.pause_period).and_then(period_of)
}

pub(crate) fn paused_at<'m>(meta: &'m ObjectMeta, keys: &AnnotationKeys) -> Option<&'m str> {
    annotation(meta, &keys.paused_at)
}

fn annotation<'m>(meta: &'m ObjectMeta, key: &str) -> Option<&'m str> {
    meta.annotations.as_ref().and_then(|a| a.get(key)).map(String::as_str)
}

/// Read by core's one parser, as Stakater reads it; unreadable counts as none.
fn period_of(value: &str) -> Option<Duration> {
    parse_pause_period(value).ok().flatten()
}
