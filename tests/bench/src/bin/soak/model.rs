//! What the API server should hold after the churn, kept as the churn goes: each resource's
//! current hash, each workload's references and the marker each of them should carry, and how
//! many reloads each workload needed. Pure: the churn feeds it what it wrote and what it read.
//!
//! One rule keeps the count exact: a resource's data changes only when every workload using it
//! has already received the previous change, so no two changes coalesce into one write and each
//! needed reload is one `metadata.generation` step (docs/soak.md says why).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use reloader_tests::fixtures::ResourceRef;

/// A reload the controller owes a workload.
#[derive(Debug, Clone)]
pub struct Pending {
    pub resource: ResourceRef,
    pub hash: String,
    pub since: Instant,
}

#[derive(Debug, Clone)]
pub struct Workload {
    /// References from `configmap/secret.reloader.stakater.com/reload` (edited by the churn);
    /// otherwise `reloader.stakater.com/auto` with fixed `envFrom` references.
    pub explicit: bool,
    pub refs: BTreeSet<ResourceRef>,
    /// Everything it ever referenced: a reference removed is never added back, so the marker it
    /// left behind (kept by the controller, as Stakater keeps it) never counts as current again.
    pub ever: BTreeSet<ResourceRef>,
    /// The marker each resource it referenced should have left (absent: never reloaded for it).
    pub expected: BTreeMap<ResourceRef, String>,
    pub pending: Option<Pending>,
    /// Pod-template edits made by the churn itself (each one generation step that is no reload).
    pub template_edits: u64,
    /// Reference edits: a Deployment's generation also moves when its annotations change.
    pub reference_edits: u64,
    pub reloads_needed: u64,
}

impl Workload {
    pub fn new(explicit: bool, refs: BTreeSet<ResourceRef>) -> Self {
        Self {
            explicit,
            ever: refs.clone(),
            refs,
            expected: BTreeMap::new(),
            pending: None,
            template_edits: 0,
            reference_edits: 0,
            reloads_needed: 0,
        }
    }

    /// Reloads its generation shows: every spec or annotation write after the create (the
    /// Deployment strategy moves it for both), minus the churn's own.
    pub fn reloads_counted(&self, generation: i64) -> u64 {
        (generation.max(1) as u64 - 1).saturating_sub(self.template_edits + self.reference_edits)
    }
}

/// A workload the churn deleted, judged at deletion.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Retired {
    pub name: String,
    pub reloads_needed: u64,
    pub reloads_counted: u64,
}

/// Changes made, by what they should cause.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Tally {
    /// Data changes to a resource some workload uses.
    pub data_changes_needing_reload: u64,
    /// Reloads those changes needed (one per workload using the resource).
    pub reloads_needed: u64,
    /// Data changes to a resource no workload used at the time.
    pub data_changes_unused: u64,
    /// The same data written again.
    pub identical_writes: u64,
    /// Label and annotation edits on a ConfigMap or Secret.
    pub metadata_only_edits: u64,
    pub template_edits: u64,
    pub reference_edits: u64,
    pub workloads_created: u64,
    pub workloads_deleted: u64,
    /// Churn requests that failed (retried or given up; the model follows what was read back).
    pub churn_errors: u64,
}

#[derive(Debug, Default)]
pub struct Model {
    /// Each resource's current hash.
    pub resources: BTreeMap<ResourceRef, String>,
    pub workloads: BTreeMap<String, Workload>,
    pub retired: Vec<Retired>,
    pub tally: Tally,
    /// Seconds from each change to its marker, as the churn's polling saw it (an upper bound).
    pub reload_seconds: Vec<f64>,
    /// When each resource's data last changed during the churn.
    pub changed_at: BTreeMap<ResourceRef, Instant>,
}

impl Model {
    /// True when no workload using it still waits for its previous change.
    pub fn may_change(&self, resource: &ResourceRef) -> bool {
        self.workloads.values().all(|w| !w.refs.contains(resource) || w.pending.is_none())
    }

    /// Its data now hashes to `hash`: every workload using it owes one reload to that marker.
    pub fn data_changed(&mut self, resource: &ResourceRef, hash: String, now: Instant) {
        let previous = self.resources.insert(resource.clone(), hash.clone());
        if previous.as_deref() == Some(hash.as_str()) {
            self.tally.identical_writes += 1;
            return;
        }
        self.changed_at.insert(resource.clone(), now);
        let mut users = 0;
        for workload in self.workloads.values_mut().filter(|w| w.refs.contains(resource)) {
            workload.expected.insert(resource.clone(), hash.clone());
            workload.pending = Some(Pending { resource: resource.clone(), hash: hash.clone(), since: now });
            workload.reloads_needed += 1;
            users += 1;
        }
        if users == 0 {
            self.tally.data_changes_unused += 1;
        } else {
            self.tally.data_changes_needing_reload += 1;
            self.tally.reloads_needed += users;
        }
    }

    /// `marker` is what `name` carries for its pending resource now; settles it when it is the
    /// one owed. Returns how long the reload took.
    pub fn observe_marker(&mut self, name: &str, marker: Option<&str>, now: Instant) -> Option<Duration> {
        let workload = self.workloads.get_mut(name)?;
        let pending = workload.pending.as_ref()?;
        if marker != Some(pending.hash.as_str()) {
            return None;
        }
        let took = now.duration_since(pending.since);
        workload.pending = None;
        self.reload_seconds.push(took.as_secs_f64());
        Some(took)
    }

    /// Resources a workload may start referencing now: every reload for their last change has
    /// landed and it is `quiet` old. A reference added while the controller has not yet handled
    /// a change would rightly get that change too (it reads its index when it handles the event),
    /// which the count could not predict.
    pub fn quiet_resources(&self, now: Instant, quiet: Duration) -> Vec<ResourceRef> {
        self.resources
            .keys()
            .filter(|r| self.may_change(r))
            .filter(|r| self.changed_at.get(*r).is_none_or(|at| now.duration_since(*at) >= quiet))
            .cloned()
            .collect()
    }

    /// Resources `name` may start referencing: quiet, and never referenced by it before.
    pub fn addable_refs(&self, name: &str, now: Instant, quiet: Duration) -> Vec<ResourceRef> {
        let Some(workload) = self.workloads.get(name) else { return Vec::new() };
        self.quiet_resources(now, quiet).into_iter().filter(|r| !workload.ever.contains(r)).collect()
    }

    pub fn pending_count(&self) -> usize {
        self.workloads.values().filter(|w| w.pending.is_some()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(name: &str) -> ResourceRef {
        ResourceRef::configmap(name)
    }

    fn model_with(workloads: &[(&str, &[&str])]) -> Model {
        let mut model = Model::default();
        for name in ["a", "b", "c"] {
            model.resources.insert(cm(name), format!("{name}-0"));
        }
        for (name, refs) in workloads {
            let refs = refs.iter().map(|r| cm(r)).collect();
            model.workloads.insert((*name).to_owned(), Workload::new(true, refs));
        }
        model
    }

    #[test]
    fn a_change_is_owed_to_each_user_once_and_settles_on_its_marker() {
        let now = Instant::now();
        let mut model = model_with(&[("w1", &["a"]), ("w2", &["a", "b"]), ("w3", &["c"])]);
        model.data_changed(&cm("a"), "a-1".into(), now);
        assert_eq!((model.tally.data_changes_needing_reload, model.tally.reloads_needed), (1, 2));
        assert!(!model.may_change(&cm("a")) && !model.may_change(&cm("b")) && model.may_change(&cm("c")));
        assert_eq!(model.observe_marker("w1", Some("a-0"), now), None, "an old marker settles nothing");
        assert!(model.observe_marker("w1", Some("a-1"), now).is_some());
        assert!(model.observe_marker("w2", Some("a-1"), now).is_some());
        assert_eq!(model.pending_count(), 0);
        assert_eq!(model.workloads["w2"].expected.get(&cm("a")).map(String::as_str), Some("a-1"));
        assert_eq!(model.workloads["w2"].expected.get(&cm("b")), None, "b never changed: no marker");
    }

    #[test]
    fn changes_that_need_no_reload_are_told_apart() {
        let now = Instant::now();
        let mut model = model_with(&[("w1", &["a"])]);
        let cases: &[(&str, &str, u64, u64, u64)] = &[
            // resource, new hash, needing reload, unused, identical
            ("a", "a-0", 0, 0, 1),
            ("c", "c-1", 0, 1, 1),
            ("a", "a-1", 1, 1, 1),
        ];
        for (resource, hash, needing, unused, identical) in cases {
            model.data_changed(&cm(resource), (*hash).to_owned(), now);
            let t = &model.tally;
            assert_eq!(
                (t.data_changes_needing_reload, t.data_changes_unused, t.identical_writes),
                (*needing, *unused, *identical),
                "{resource} -> {hash}"
            );
        }
    }

    #[test]
    fn reloads_are_generation_steps_minus_the_churns_own_edits() {
        let mut workload = Workload::new(false, BTreeSet::new());
        workload.template_edits = 2;
        workload.reference_edits = 1;
        for (generation, reloads) in [(1, 0), (4, 0), (6, 2), (0, 0)] {
            assert_eq!(workload.reloads_counted(generation), reloads, "generation {generation}");
        }
    }

    #[test]
    fn a_removed_reference_is_never_offered_again() {
        let now = Instant::now();
        let mut model = model_with(&[("w1", &["a", "b"])]);
        model.workloads.get_mut("w1").unwrap().refs.remove(&cm("b"));
        assert_eq!(model.addable_refs("w1", now, Duration::from_secs(60)), [cm("c")]);
    }

    #[test]
    fn a_resource_changed_lately_is_not_referenced_anew() {
        let now = Instant::now();
        let mut model = model_with(&[("w1", &["a"])]);
        model.data_changed(&cm("c"), "c-1".into(), now);
        model.data_changed(&cm("a"), "a-1".into(), now);
        let quiet = Duration::from_secs(60);
        assert_eq!(model.quiet_resources(now, quiet), [cm("b")], "a pending, c too recent");
        model.observe_marker("w1", Some("a-1"), now);
        assert_eq!(model.quiet_resources(now + quiet, quiet), [cm("a"), cm("b"), cm("c")]);
    }
}
