//! The batch/v1 backend. Neither kind is patched:
//!
//! - a [`CronJobWorkload`] reload creates a Job from the CronJob's `jobTemplate`, with the marker
//!   in its pod template; the CronJob itself is never modified, so it carries no marker and a
//!   replay cannot be recognised from it: the controller asks only on real hash changes;
//! - a [`JobWorkload`] reload deletes the Job and creates it again under the same name, with the
//!   marker added and every server-owned field cleared.
//!
//! [`origin`] gives both the digest the write fence compares a created Job with.

mod cronjob;
mod job;
pub mod origin;

pub use cronjob::CronJobWorkload;
pub use job::JobWorkload;

#[cfg(test)]
mod cronjob_tests;
#[cfg(test)]
mod job_tests;
#[cfg(test)]
mod origin_tests;
