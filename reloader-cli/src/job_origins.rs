//! What a Job reloader creates may come from (docs/security.md, "Jobs"): the digest of every Job
//! and CronJob the watches see, and of each Job deleted within [`TOMBSTONE_TTL`] (a reload
//! deletes a Job, then creates it again). Fed by the Job and CronJob watches of a replica that
//! serves the admission webhook; read by its Job fence (`admission::job_fence`).
//!
//! It holds a name and 20 bytes per Job and CronJob, and at most [`MAX_TOMBSTONES`] deleted
//! ones: it grows with the cluster, not with traffic.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use reloader_core::model::{WorkloadKey, WorkloadKind};
use reloader_workload_batch::origin::OriginDigest;

/// How long a deleted Job can still be recreated. A reload creates the Job as soon as its
/// deletion is seen (at most `JOB_DELETION_TIMEOUT` later); this leaves room for retries.
pub(crate) const TOMBSTONE_TTL: Duration = Duration::from_secs(600);
/// Deleted Jobs remembered at most; the oldest is forgotten first.
pub(crate) const MAX_TOMBSTONES: usize = 4096;

/// What a watched Job or CronJob offers as an origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum JobOrigin {
    /// A Job: it may be recreated with this digest.
    Job(OriginDigest),
    /// A CronJob: a Job naming it (by this uid) as owner may be spawned with this digest.
    CronJob { uid: String, digest: OriginDigest },
}

/// Where a created Job must come from, as the fence looks it up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// The origin is known, with this digest.
    Known(OriginDigest),
    /// The origin is known, but it is another object (a CronJob of that name with another uid).
    Other,
    /// This replica has not seen it: never existed, or not yet.
    Unknown,
}

#[derive(Debug, Default)]
struct Origins {
    jobs: HashMap<WorkloadKey, OriginDigest>,
    cron_jobs: HashMap<WorkloadKey, (String, OriginDigest)>,
    deleted: HashMap<WorkloadKey, (OriginDigest, Instant)>,
}

/// The store; one per process, shared by the watches and the webhook.
#[derive(Debug, Default)]
pub(crate) struct JobOrigins {
    origins: Mutex<Origins>,
}

impl JobOrigins {
    /// A Job or CronJob applied by its watch. Other kinds are not kept.
    pub(crate) fn seen(&self, key: WorkloadKey, origin: JobOrigin) {
        let mut origins = self.lock();
        match origin {
            JobOrigin::Job(digest) => {
                origins.deleted.remove(&key);
                origins.jobs.insert(key, digest);
            }
            JobOrigin::CronJob { uid, digest } => {
                origins.cron_jobs.insert(key, (uid, digest));
            }
        }
    }

    /// A Job or CronJob deleted. A Job is remembered for [`TOMBSTONE_TTL`].
    pub(crate) fn gone(&self, key: &WorkloadKey, now: Instant) {
        let mut origins = self.lock();
        if let Some(digest) = origins.jobs.remove(key) {
            origins.bury(key.clone(), digest, now);
        }
        origins.cron_jobs.remove(key);
    }

    /// A watch of `kind` in `namespace` (or all) relisted: what it no longer lists was deleted
    /// while it was not watching.
    pub(crate) fn relisted(
        &self,
        kind: WorkloadKind,
        namespace: Option<&str>,
        seen: &HashSet<WorkloadKey>,
        now: Instant,
    ) {
        let in_scope = |key: &WorkloadKey| {
            key.kind == kind && namespace.is_none_or(|ns| &*key.namespace == ns) && !seen.contains(key)
        };
        let mut origins = self.lock();
        let gone: Vec<WorkloadKey> = origins.jobs.keys().filter(|k| in_scope(k)).cloned().collect();
        for key in gone {
            if let Some(digest) = origins.jobs.remove(&key) {
                origins.bury(key, digest, now);
            }
        }
        origins.cron_jobs.retain(|key, _| !in_scope(key));
    }

    /// The origin of a Job recreated as `key`: the Job itself, alive or deleted not long ago.
    pub(crate) fn job(&self, key: &WorkloadKey, now: Instant) -> Lookup {
        let origins = self.lock();
        if let Some(digest) = origins.jobs.get(key) {
            return Lookup::Known(*digest);
        }
        match origins.deleted.get(key) {
            Some((digest, at)) if now.duration_since(*at) <= TOMBSTONE_TTL => Lookup::Known(*digest),
            _ => Lookup::Unknown,
        }
    }

    /// The origin of a Job spawned from the CronJob `key` with uid `uid`.
    pub(crate) fn cron_job(&self, key: &WorkloadKey, uid: &str) -> Lookup {
        match self.lock().cron_jobs.get(key) {
            Some((known, digest)) if known == uid => Lookup::Known(*digest),
            Some(_) => Lookup::Other,
            None => Lookup::Unknown,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Origins> {
        // The maps stay consistent across a panic (each change is one insert or remove).
        self.origins.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Origins {
    fn bury(&mut self, key: WorkloadKey, digest: OriginDigest, now: Instant) {
        if self.deleted.len() >= MAX_TOMBSTONES {
            self.deleted.retain(|_, (_, at)| now.duration_since(*at) <= TOMBSTONE_TTL);
        }
        if self.deleted.len() >= MAX_TOMBSTONES
            && let Some(oldest) = self.deleted.iter().min_by_key(|(_, (_, at))| *at).map(|(k, _)| k.clone())
        {
            self.deleted.remove(&oldest);
        }
        self.deleted.insert(key, (digest, now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(kind: WorkloadKind, namespace: &str, name: &str) -> WorkloadKey {
        WorkloadKey::new(kind, namespace, name)
    }

    fn digest(byte: u8) -> OriginDigest {
        OriginDigest::from_bytes([byte; 20])
    }

    #[test]
    fn a_deleted_job_is_an_origin_for_a_while() {
        let store = JobOrigins::default();
        let t0 = Instant::now();
        let migrate = key(WorkloadKind::Job, "ns", "migrate");
        assert_eq!(store.job(&migrate, t0), Lookup::Unknown);
        store.seen(migrate.clone(), JobOrigin::Job(digest(1)));
        assert_eq!(store.job(&migrate, t0), Lookup::Known(digest(1)));
        store.gone(&migrate, t0);
        assert_eq!(store.job(&migrate, t0 + TOMBSTONE_TTL), Lookup::Known(digest(1)));
        assert_eq!(store.job(&migrate, t0 + TOMBSTONE_TTL + Duration::from_secs(1)), Lookup::Unknown);
        // Recreated: alive again, with its new digest.
        store.seen(migrate.clone(), JobOrigin::Job(digest(2)));
        assert_eq!(store.job(&migrate, t0), Lookup::Known(digest(2)));
    }

    #[test]
    fn deleted_jobs_are_bounded() {
        let store = JobOrigins::default();
        let t0 = Instant::now();
        for i in 0..=MAX_TOMBSTONES {
            let job = key(WorkloadKind::Job, "ns", &format!("job-{i}"));
            store.seen(job.clone(), JobOrigin::Job(digest(1)));
            store.gone(&job, t0 + Duration::from_millis(i as u64));
        }
        assert_eq!(store.lock().deleted.len(), MAX_TOMBSTONES);
        let first = key(WorkloadKind::Job, "ns", "job-0");
        assert_eq!(store.job(&first, t0), Lookup::Unknown, "the oldest is forgotten first");
        let last = key(WorkloadKind::Job, "ns", &format!("job-{MAX_TOMBSTONES}"));
        assert_eq!(store.job(&last, t0), Lookup::Known(digest(1)));
    }

    #[test]
    fn a_cron_job_is_known_by_name_and_uid() {
        let store = JobOrigins::default();
        let nightly = key(WorkloadKind::CronJob, "ns", "nightly");
        store.seen(nightly.clone(), JobOrigin::CronJob { uid: "u1".into(), digest: digest(3) });
        assert_eq!(store.cron_job(&nightly, "u1"), Lookup::Known(digest(3)));
        assert_eq!(store.cron_job(&nightly, "u2"), Lookup::Other);
        assert_eq!(store.cron_job(&key(WorkloadKind::CronJob, "ns", "weekly"), "u1"), Lookup::Unknown);
        store.gone(&nightly, Instant::now());
        assert_eq!(store.cron_job(&nightly, "u1"), Lookup::Unknown);
    }

    #[test]
    fn a_relist_buries_what_it_no_longer_lists_in_its_scope() {
        let store = JobOrigins::default();
        let t0 = Instant::now();
        let (a, b, other_ns) = (
            key(WorkloadKind::Job, "ns", "a"),
            key(WorkloadKind::Job, "ns", "b"),
            key(WorkloadKind::Job, "other", "c"),
        );
        let cron = key(WorkloadKind::CronJob, "ns", "nightly");
        for job in [&a, &b, &other_ns] {
            store.seen(job.clone(), JobOrigin::Job(digest(1)));
        }
        store.seen(cron.clone(), JobOrigin::CronJob { uid: "u".into(), digest: digest(2) });
        store.relisted(WorkloadKind::Job, Some("ns"), &HashSet::from([a.clone()]), t0);
        assert!(store.lock().jobs.contains_key(&a));
        assert!(!store.lock().jobs.contains_key(&b));
        assert_eq!(store.job(&b, t0), Lookup::Known(digest(1)), "deleted while not watching: buried");
        assert!(store.lock().jobs.contains_key(&other_ns), "another namespace's watch");
        assert_eq!(store.cron_job(&cron, "u"), Lookup::Known(digest(2)), "another kind's watch");
        store.relisted(WorkloadKind::CronJob, None, &HashSet::new(), t0);
        assert_eq!(store.cron_job(&cron, "u"), Lookup::Unknown);
    }
}
