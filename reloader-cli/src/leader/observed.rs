//! When a Lease held by another replica may be taken, judged the way client-go does: by this
//! replica's own monotonic clock, from the moment it first saw the Lease record as it is now.
//! The holder's `renewTime` is another node's wall clock; comparing it with ours would let a
//! replica whose clock runs ahead take a Lease its holder is still renewing (two writers).
//! Pure: fed Lease records and [`Instant`]s, so the rule is tested with tables.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use tokio::time::Instant;

/// The parts of a Lease that change whenever anyone writes it. Two equal records mean nobody
/// renewed it in between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeaseRecord {
    /// Empty when the Lease was released.
    pub holder: String,
    pub renew_time: Option<String>,
    pub transitions: i32,
    pub resource_version: Option<String>,
    /// The holder's promise: how long after a renewal the others must wait.
    pub lease_duration: Option<Duration>,
}

impl LeaseRecord {
    pub(crate) fn of(lease: &Lease) -> Self {
        let spec = lease.spec.clone().unwrap_or_default();
        LeaseRecord {
            holder: spec.holder_identity.unwrap_or_default(),
            renew_time: spec.renew_time.map(|t| t.0.to_string()),
            transitions: spec.lease_transitions.unwrap_or_default(),
            resource_version: lease.metadata.resource_version.clone(),
            lease_duration: spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map(Duration::from_secs),
        }
    }
}

/// What a candidate may do with the Lease it just read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// This candidate holds it: renew.
    Ours,
    /// Nobody holds it (released): take it at once.
    Free,
    /// Unchanged for a whole lease duration of this replica's clock: its holder stopped renewing.
    Expired { holder: String, unchanged_for: Duration },
    /// Another replica holds it; it cannot be taken before `until` (this replica's clock).
    Held { holder: String, until: Instant },
}

/// The last Lease record this candidate saw and when, by its own clock.
#[derive(Debug)]
pub(crate) struct LeaseObserver {
    identity: String,
    /// Used when a record carries no duration: waiting our own is the safe side.
    own_lease_duration: Duration,
    last: Option<(LeaseRecord, Instant)>,
}

impl LeaseObserver {
    pub(crate) fn new(identity: impl Into<String>, own_lease_duration: Duration) -> Self {
        LeaseObserver { identity: identity.into(), own_lease_duration, last: None }
    }

    /// Records `record` as seen at `now` (the clock restarts only when it differs from the last
    /// one seen) and says what may be done with it.
    pub(crate) fn observe(&mut self, record: LeaseRecord, now: Instant) -> Verdict {
        let first_seen = match &self.last {
            Some((last, at)) if *last == record => *at,
            _ => now,
        };
        let verdict = self.judge(&record, first_seen, now);
        self.last = Some((record, first_seen));
        verdict
    }

    fn judge(&self, record: &LeaseRecord, first_seen: Instant, now: Instant) -> Verdict {
        if record.holder.is_empty() {
            return Verdict::Free;
        }
        if record.holder == self.identity {
            return Verdict::Ours;
        }
        let until = first_seen + record.lease_duration.unwrap_or(self.own_lease_duration);
        if now >= until {
            Verdict::Expired { holder: record.holder.clone(), unchanged_for: now - first_seen }
        } else {
            Verdict::Held { holder: record.holder.clone(), until }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(15);

    fn record(holder: &str, renewed: &str, rv: &str) -> LeaseRecord {
        LeaseRecord {
            holder: holder.into(),
            renew_time: Some(renewed.into()),
            transitions: 3,
            resource_version: Some(rv.into()),
            lease_duration: Some(LEASE),
        }
    }

    #[derive(Debug, PartialEq, Eq)]
    enum Kind {
        Ours,
        Free,
        Expired,
        Held,
    }

    fn kind(v: &Verdict) -> Kind {
        match v {
            Verdict::Ours => Kind::Ours,
            Verdict::Free => Kind::Free,
            Verdict::Expired { .. } => Kind::Expired,
            Verdict::Held { .. } => Kind::Held,
        }
    }

    /// Seconds since the first observation, and the record seen then.
    type Observation<'a> = (u64, &'a LeaseRecord);

    #[test]
    fn a_lease_expires_only_after_a_whole_duration_of_our_own_clock_without_change() {
        let a1 = record("other", "10:00:00", "100");
        let a2 = record("other", "10:00:02", "101");
        let released = record("", "10:00:05", "102");
        // A renewTime far in the past says nothing: only what this replica saw counts.
        let stale = record("other", "1970-01-01T00:00:00Z", "7");
        // (what happens, observations as (seconds since the first, record), the last verdict)
        let cases: &[(&str, &[Observation], Kind)] = &[
            ("first sight of a held lease", &[(0, &a1)], Kind::Held),
            ("first sight, however old its renewTime", &[(0, &stale)], Kind::Held),
            ("unchanged, one second short", &[(0, &a1), (14, &a1)], Kind::Held),
            ("unchanged for the whole duration", &[(0, &a1), (15, &a1)], Kind::Expired),
            ("renewed meanwhile: the clock restarts", &[(0, &a1), (10, &a2), (20, &a2)], Kind::Held),
            ("renewed, then unchanged for a duration", &[(0, &a1), (10, &a2), (25, &a2)], Kind::Expired),
            (
                "a changed resourceVersion alone restarts it",
                &[(0, &a1), (10, &record("other", "10:00:00", "105")), (20, &a1)],
                Kind::Held,
            ),
            (
                "a changed term alone restarts it",
                &[(0, &a1), (10, &LeaseRecord { transitions: 4, ..a1.clone() }), (20, &a1)],
                Kind::Held,
            ),
            ("released: free at once", &[(0, &released)], Kind::Free),
            ("ours: renew", &[(0, &record("me", "10:00:00", "1"))], Kind::Ours),
            (
                "no duration in the record: our own is waited",
                &[
                    (0, &LeaseRecord { lease_duration: None, ..a1.clone() }),
                    (14, &LeaseRecord { lease_duration: None, ..a1.clone() }),
                ],
                Kind::Held,
            ),
        ];
        for (what, observations, expected) in cases {
            let start = Instant::now();
            let mut observer = LeaseObserver::new("me", LEASE);
            let mut last = None;
            for (at, record) in observations.iter() {
                last = Some(observer.observe((*record).clone(), start + Duration::from_secs(*at)));
            }
            assert_eq!(kind(&last.unwrap()), *expected, "{what}");
        }
    }

    #[test]
    fn the_verdicts_say_how_long_and_until_when() {
        let start = Instant::now();
        let mut observer = LeaseObserver::new("me", LEASE);
        let a = record("other", "t", "1");
        assert_eq!(
            observer.observe(a.clone(), start + Duration::from_secs(3)),
            Verdict::Held { holder: "other".into(), until: start + Duration::from_secs(18) }
        );
        assert_eq!(
            observer.observe(a, start + Duration::from_secs(20)),
            Verdict::Expired { holder: "other".into(), unchanged_for: Duration::from_secs(17) }
        );
    }

    #[test]
    fn a_short_lease_duration_in_the_record_is_the_holders_promise() {
        let start = Instant::now();
        let mut observer = LeaseObserver::new("me", LEASE);
        let short = LeaseRecord { lease_duration: Some(Duration::from_secs(1)), ..record("other", "t", "1") };
        assert_eq!(kind(&observer.observe(short.clone(), start)), Kind::Held);
        assert_eq!(kind(&observer.observe(short, start + Duration::from_secs(1))), Kind::Expired);
    }
}
