//! The compact state kept from watches: resources and workloads by key, and the lookups that
//! find the workloads a resource event concerns without scanning them all.
//!
//! A workload can only reload for a resource that it references (auto, search, auto-reload-all,
//! and explicit lists naming referenced resources), that its explicit list names, or that an
//! explicit-list pattern matches. The first two are filed under the resource's key (the reverse
//! index); pattern holders are filed under their namespace and resource kind, and are offered
//! for every resource of that kind there. Search needs no entry of its own: it only reloads
//! referenced resources; except on an annotations map (a declared kind's `annotations=`), which
//! references nothing and is offered every resource, as a pattern holder is.
//!
//! Workloads are stored in a slab and the lookups hold 4-byte ids, so no key or view is copied
//! into them: per workload the index keeps its view and one extra copy of its key.
//!
//! Two watches give no order between a workload's events and a resource's: the index can meet a
//! change before the workload it concerns. Each resource therefore keeps the resourceVersion of
//! its last content change, and [`Index::missed_changes`] plans, for a workload seen for the
//! first time or with new decision inputs, the changes that came after the version it was seen
//! at (docs/behaviour.md §G).

#[cfg(test)]
mod tests;

use std::borrow::Borrow;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{Hash, Hasher};

use crate::annotations::{ReloadAnnotations, kind_index};
use crate::decide::{
    DecideOptions, Decision, ExplicitEntry, ResourceEventKind, SkipReason, ViewMarkers, decide,
    explicit_entries, plan, plan_update,
};
use crate::event_plan::EventPlan;
use crate::hash::DELETE_MARKER_HASH;
use crate::keys::marker_hash;
use crate::markers::MarkerChange;
use crate::model::{ContentHash, KeyDigests, ResourceKey, ResourceKind, ResourceVersion, WorkloadKey};
use crate::views::{ResourceView, WorkloadView};

/// What `upsert_resource` changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceChange {
    /// The resource was not known.
    Created,
    /// The content hash changed (the flags may have changed too).
    ContentChanged { previous: ContentHash },
    /// Only the match/ignore flags changed.
    FlagsChanged,
    /// Nothing reloader looks at changed (labels, other annotations, a resync).
    Unchanged,
}

/// Sizes, for metrics and logs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexStats {
    pub resources: usize,
    pub workloads: usize,
    /// Distinct resource keys in the reverse index.
    pub(crate) reverse_entries: usize,
    /// Workloads whose explicit lists hold patterns.
    pub(crate) pattern_holders: usize,
    /// Workloads whose reloads the loop guard stopped.
    pub loops_stopped: usize,
}

/// A change the index met before the workload it concerns, planned for that workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissedChange {
    pub resource: ResourceKey,
    /// What the resource's last content change was (`Created` or `Updated`).
    pub event: ResourceEventKind,
    pub plan: Result<MarkerChange, SkipReason>,
}

#[derive(Debug, Default)]
pub struct Index {
    resources: HashSet<StoredResource>,
    workloads: Slab,
    lookup: Lookup,
    /// The greatest version any resource's last content change has: a workload seen at this
    /// version or later missed nothing, which spares the lookups on almost every event.
    latest_change: Option<ResourceVersion>,
}

impl Index {
    /// Stores a resource seen through a watch event or a re-list: if its content is new, its
    /// version is recorded as the version of its last content change.
    pub fn upsert_resource(&mut self, view: ResourceView) -> ResourceChange {
        self.store_resource(view, true)
    }

    /// Stores a resource from the first list: the state of the world, whose versions say nothing
    /// about when the content changed, so none is recorded.
    pub fn upsert_listed_resource(&mut self, view: ResourceView) -> ResourceChange {
        self.store_resource(view, false)
    }

    fn store_resource(&mut self, view: ResourceView, record_change: bool) -> ResourceChange {
        let stored = self.resources.get(&view.key);
        let change = match stored {
            None => ResourceChange::Created,
            Some(old) if old.view.hash != view.hash => {
                ResourceChange::ContentChanged { previous: old.view.hash }
            }
            Some(old) if (old.view.matched, old.view.ignored) != (view.matched, view.ignored) => {
                ResourceChange::FlagsChanged
            }
            Some(_) => return ResourceChange::Unchanged,
        };
        let event = match change {
            ResourceChange::Created => Some(ResourceEventKind::Created),
            ResourceChange::ContentChanged { .. } => Some(ResourceEventKind::Updated),
            _ => None,
        };
        let last_change = match event {
            Some(event) if record_change => view.version.map(|at| LastChange { at, event }),
            // A content change whose version does not parse cannot be ordered: forget the
            // previous one rather than replay a change that is no longer the last.
            Some(_) => None,
            None => stored.and_then(|old| old.last_change),
        };
        if let Some(LastChange { at, .. }) = last_change {
            self.latest_change = self.latest_change.max(Some(at));
        }
        let previous_keys = match change {
            ResourceChange::ContentChanged { .. } => stored.map(|old| old.view.keys.clone()),
            _ => stored.and_then(|old| old.previous_keys.clone()),
        }
        .filter(|keys| *keys != view.keys);
        self.resources.replace(StoredResource { view, last_change, previous_keys });
        change
    }

    pub fn remove_resource(&mut self, key: &ResourceKey) -> Option<ResourceView> {
        self.resources.take(key).map(|stored| stored.view)
    }

    pub fn resource(&self, key: &ResourceKey) -> Option<&ResourceView> {
        self.resources.get(key).map(|stored| &stored.view)
    }

    /// Every resource, in no particular order.
    pub fn resources(&self) -> impl Iterator<Item = &ResourceView> {
        self.resources.iter().map(|stored| &stored.view)
    }

    /// Stores `view` from a list, returning the view the index held before. A workload new to
    /// the index gets no creation version: a listed version is its last change, not its creation.
    pub fn upsert_workload(&mut self, view: WorkloadView) -> Option<WorkloadView> {
        self.store_workload(view, false)
    }

    /// Stores `view` from a live watch event, returning the view the index held before. A
    /// workload the index did not know comes from its ADDED event, whose version is the one that
    /// created it: changes with a smaller version are never planned for it (docs/behaviour.md §G).
    pub fn upsert_watched_workload(&mut self, view: WorkloadView) -> Option<WorkloadView> {
        self.store_workload(view, true)
    }

    /// Stores the workload as the API server's answer to our own write left it, so that a change
    /// decided before the watch brings that write back sees it (docs/behaviour.md §C32e). Until
    /// a watch event or list reaches its version, an older view of the same object is not
    /// stored over it. A workload the index does not hold (deleted meanwhile) stays out, and an
    /// answer that is not newer than the view changes nothing. True if it was stored.
    pub fn upsert_written_workload(&mut self, view: WorkloadView) -> bool {
        let Some(&id) = self.workloads.ids.get(&view.key) else { return false };
        let Some(written) = view.version else { return false };
        let stored = self.workloads.get(id).expect("ids only name occupied slots");
        if stored.uid != view.uid || stored.version.is_some_and(|seen| seen >= written) {
            return false;
        }
        self.replace_workload(id, view);
        self.workloads.written_ahead.insert(id, written);
        true
    }

    fn store_workload(&mut self, view: WorkloadView, watched: bool) -> Option<WorkloadView> {
        let Some(&id) = self.workloads.ids.get(&view.key) else {
            let created = if watched { view.version } else { None };
            let id = self.workloads.insert(view, created);
            self.lookup.add(id, self.workloads.get(id).expect("just inserted"));
            return None;
        };
        if let Some(&written) = self.workloads.written_ahead.get(&id) {
            let stored = self.workloads.get(id).expect("ids only name occupied slots");
            if stored.uid == view.uid && view.version.is_some_and(|seen| seen < written) {
                // Behind our own write: the view stays as the write left it.
                return Some(stored.clone());
            }
            self.workloads.written_ahead.remove(&id);
        }
        Some(self.replace_workload(id, view))
    }

    /// Puts `view` in slot `id`, returning the view it replaces.
    fn replace_workload(&mut self, id: WorkloadId, view: WorkloadView) -> WorkloadView {
        let slot = self.workloads.slot_mut(id);
        let previous = std::mem::replace(slot, view);
        // Most workload events (status updates, resyncs) leave the lookups as they were.
        if !same_lookup_entries(&previous, slot) {
            self.lookup.remove(id, &previous);
            self.lookup.add(id, slot);
        }
        previous
    }

    pub fn remove_workload(&mut self, key: &WorkloadKey) -> Option<WorkloadView> {
        let id = *self.workloads.ids.get(key)?;
        let view = self.workloads.remove(id);
        self.lookup.remove(id, &view);
        Some(view)
    }

    pub fn workload(&self, key: &WorkloadKey) -> Option<&WorkloadView> {
        self.workloads.ids.get(key).and_then(|&id| self.workloads.get(id))
    }

    /// Every workload, in no particular order.
    pub fn workloads(&self) -> impl Iterator<Item = &WorkloadView> {
        self.workloads.slots.iter().flatten()
    }

    /// Every workload that might reload for the resource `key`, ordered by workload key.
    /// `decide` has the last word; nothing outside the lookups is scanned.
    #[cfg(test)]
    pub(crate) fn candidates(&self, key: &ResourceKey) -> Vec<&WorkloadView> {
        let mut views: Vec<&WorkloadView> =
            self.lookup.candidate_ids(key).into_iter().filter_map(|id| self.workloads.get(id)).collect();
        views.sort_unstable_by(|a, b| a.key.cmp(&b.key));
        views
    }

    /// What the event `event` on `resource` does, from one pass over the workloads of its
    /// namespace: `plan_update` for every candidate (docs/compatibility.md §4.3), the counts
    /// Stakater's metrics take from its scan of the namespace, and nothing for an ignored
    /// resource but those counts. Candidates created after the change are left out:
    /// `resource.version` is the version of the change being planned, compared with the creation
    /// version of the workloads seen through their ADDED event (docs/behaviour.md §G; unknown on
    /// either side: not left out). `writing` names the workloads a write of ours is on its way
    /// to, whose views may not show their markers yet.
    pub fn plan_event(
        &self,
        resource: &ResourceView,
        event: ResourceEventKind,
        opts: &DecideOptions,
        writing: impl Fn(&WorkloadKey) -> bool,
    ) -> EventPlan {
        let mut plan = EventPlan::default();
        if resource.ignored {
            plan.event_skip = Some(SkipReason::ResourceIgnored);
        }
        let candidates = if resource.ignored { Vec::new() } else { self.lookup.candidate_ids(&resource.key) };
        let previous_keys =
            self.resources.get(&resource.key).and_then(|stored| stored.previous_keys.as_ref());
        let created_after = |id: WorkloadId| matches!((self.workloads.created(id), resource.version), (Some(created), Some(changed)) if created > changed);
        for id in self.workloads.in_namespace(&resource.key.namespace) {
            let Some(workload) = self.workloads.get(id) else { continue };
            *plan.scanned.entry(workload.key.kind).or_default() += 1;
            if resource.ignored {
                continue;
            }
            if candidates.binary_search(&id).is_err() {
                // No candidate: its pod spec does not use the resource, its lists do not name it.
                if decide(workload, resource, opts) == Decision::Skip(SkipReason::NotReferenced) {
                    plan.selected_but_unused += 1;
                }
                continue;
            }
            if created_after(id) {
                continue;
            }
            let markers = if writing(&workload.key) { ViewMarkers::Writing } else { ViewMarkers::Settled };
            let decision = plan_update(workload, resource, previous_keys, event, opts, markers);
            plan.decisions.push((workload.key.clone(), decision));
        }
        plan.decisions.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
        plan
    }

    /// docs/behaviour.md §G: the resource changes the index met before the workload `key` in its
    /// present form, planned for it alone. `previous` is the view `upsert_workload` replaced.
    ///
    /// A workload seen for the first time, or whose decision inputs changed, is checked against
    /// every resource it may reload for whose last content change has a greater resourceVersion
    /// than the workload's view: that change happened when the workload already existed in this
    /// form (for a watch's ADDED event the version is the creation's), but was decided without
    /// it or on an older form. A change with a smaller version came before the workload existed
    /// (or before this form) and is not planned. Without a parsable version on either side
    /// nothing is planned. Ordered by resource key.
    pub fn missed_changes(
        &self,
        key: &WorkloadKey,
        previous: Option<&WorkloadView>,
        opts: &DecideOptions,
    ) -> Vec<MissedChange> {
        let Some(workload) = self.workload(key) else { return Vec::new() };
        let Some(seen_at) = workload.version else { return Vec::new() };
        if self.latest_change.is_none_or(|latest| latest <= seen_at)
            || previous.is_some_and(|p| p.same_decision_inputs(workload))
        {
            return Vec::new();
        }
        let mut newer: Vec<&StoredResource> = self
            .reloadable_resources(workload)
            .filter(|stored| stored.last_change.is_some_and(|change| change.at > seen_at))
            .collect();
        newer.sort_unstable_by(|a, b| a.view.key.cmp(&b.view.key));
        newer.dedup_by(|a, b| a.view.key == b.view.key);
        newer
            .into_iter()
            .filter_map(|stored| {
                let event = stored.last_change?.event;
                let plan = plan(workload, &stored.view, event, opts);
                Some(MissedChange { resource: stored.view.key.clone(), event, plan })
            })
            .collect()
    }

    /// The stored resources the lookups offer `workload` for (possibly twice): the ones it
    /// references or names, and for its list patterns every resource of that kind in its
    /// namespace.
    fn reloadable_resources<'a>(
        &'a self,
        workload: &'a WorkloadView,
    ) -> impl Iterator<Item = &'a StoredResource> {
        let namespace = &*workload.key.namespace;
        let named = direct_names(workload)
            .into_iter()
            .filter_map(move |(kind, name)| self.resources.get(&ResourceKey::new(kind, namespace, name)));
        let kinds = pattern_kinds(workload);
        // Only a pattern needs the pass over every resource (the index keeps no per-namespace
        // list of them); without one, a big cluster's resources are not walked at all.
        let scanned = if kinds.is_empty() { None } else { Some(self.resources.iter()) };
        let by_pattern = scanned.into_iter().flatten().filter(move |stored| {
            *stored.view.key.namespace == *namespace && kinds.contains(&stored.view.key.kind)
        });
        named.chain(by_pattern)
    }

    /// The start-up / leadership sweep (docs/beyond-stakater.md §2): every workload carrying a marker for a
    /// resource it reloads for, whose hash differs from the resource's current hash. The
    /// marker is the record of what the workload last reloaded for, so this applies a change
    /// made while nobody was leading exactly once, and a takeover with no change writes nothing.
    ///
    /// A workload without a marker for a resource is left alone: it never reloaded for it, and
    /// treating that as stale would restart everything on a first install. A delete marker is
    /// treated the same way: a resource re-created while nobody led reloads only through the
    /// create event, as it would have with a leader present.
    ///
    /// Ordered by workload key, then resource key.
    pub fn catch_up(&self, opts: &DecideOptions) -> Vec<(WorkloadKey, MarkerChange)> {
        let mut changes = Vec::new();
        for StoredResource { view: resource, .. } in &self.resources {
            for id in self.lookup.candidate_ids(&resource.key) {
                let Some(workload) = self.workloads.get(id) else { continue };
                if let Some(change) = stale_change(workload, resource, opts) {
                    changes.push((workload.key.clone(), change));
                }
            }
        }
        changes.sort_unstable_by(|(a, a_change), (b, b_change)| {
            a.cmp(b).then_with(|| a_change.resource.cmp(&b_change.resource))
        });
        changes
    }

    /// [`Index::catch_up`] for one workload: what it needs now that its reloads may go on again
    /// (the loop guard's stop was cleared, docs/beyond-stakater.md §15). Ordered by resource key.
    pub fn catch_up_workload(&self, key: &WorkloadKey, opts: &DecideOptions) -> Vec<MarkerChange> {
        let Some(workload) = self.workload(key) else { return Vec::new() };
        let mut changes: Vec<MarkerChange> = self
            .reloadable_resources(workload)
            .filter_map(|stored| stale_change(workload, &stored.view, opts))
            .collect();
        changes.sort_unstable_by(|a, b| a.resource.cmp(&b.resource));
        changes.dedup_by(|a, b| a.resource == b.resource);
        changes
    }

    /// A held reload's resources planned again for `key`, as they are now (a restart or a new
    /// leader adopting the hold, docs/beyond-stakater.md §15): a resource gone, or whose marker
    /// is already current (the change was reverted), plans nothing.
    pub fn replan(
        &self,
        key: &WorkloadKey,
        resources: impl IntoIterator<Item = ResourceKey>,
        opts: &DecideOptions,
    ) -> Vec<MarkerChange> {
        let Some(workload) = self.workload(key) else { return Vec::new() };
        resources
            .into_iter()
            .filter_map(|resource| self.resource(&resource))
            .filter_map(|resource| plan(workload, resource, ResourceEventKind::Updated, opts).ok())
            .collect()
    }

    pub fn stats(&self) -> IndexStats {
        IndexStats {
            resources: self.resources.len(),
            workloads: self.workloads.ids.len(),
            reverse_entries: self.lookup.by_resource.len(),
            pattern_holders: self.lookup.pattern_holder_count(),
            loops_stopped: self.workloads().filter(|w| w.loop_stopped()).count(),
        }
    }
}

/// A resource view with its last content change, hashed and compared by key alone, so the set
/// needs no second copy of the key.
#[derive(Debug)]
struct StoredResource {
    view: ResourceView,
    /// `None` when unknown: listed at start-up, or a version that does not parse.
    last_change: Option<LastChange>,
    /// The per-key digests before the last content change, kept only while some key differs,
    /// so a key filter can tell whether its keys changed (docs/beyond-stakater.md §10).
    previous_keys: Option<KeyDigests>,
}

/// When a resource's content last changed, and how.
#[derive(Debug, Clone, Copy)]
struct LastChange {
    at: ResourceVersion,
    event: ResourceEventKind,
}

impl PartialEq for StoredResource {
    fn eq(&self, other: &Self) -> bool {
        self.view.key == other.view.key
    }
}

impl Eq for StoredResource {}

impl Hash for StoredResource {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.view.key.hash(state);
    }
}

impl Borrow<ResourceKey> for StoredResource {
    fn borrow(&self) -> &ResourceKey {
        &self.view.key
    }
}

type WorkloadId = u32;

/// Workload views by id, with the key → id map and each one's creation version. Freed ids are
/// reused.
#[derive(Debug, Default)]
struct Slab {
    slots: Vec<Option<WorkloadView>>,
    /// Per slot, the version that created the workload when its ADDED event was seen.
    created: Vec<Option<ResourceVersion>>,
    free: Vec<WorkloadId>,
    ids: HashMap<WorkloadKey, WorkloadId>,
    /// The slots our own writes stored ahead of the watch, with the version each write made.
    written_ahead: HashMap<WorkloadId, ResourceVersion>,
    /// The sorted ids of each namespace's workloads (a key's namespace never changes).
    by_namespace: HashMap<Box<str>, Vec<WorkloadId>>,
}

impl Slab {
    fn insert(&mut self, view: WorkloadView, created: Option<ResourceVersion>) -> WorkloadId {
        let key = view.key.clone();
        let id = match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = Some(view);
                self.created[id as usize] = created;
                id
            }
            None => {
                let id = WorkloadId::try_from(self.slots.len()).expect("fewer than 2^32 workloads");
                self.slots.push(Some(view));
                self.created.push(created);
                id
            }
        };
        match self.by_namespace.get_mut(&*key.namespace) {
            Some(ids) => {
                if let Err(at) = ids.binary_search(&id) {
                    ids.insert(at, id);
                }
            }
            None => {
                self.by_namespace.insert(key.namespace.clone(), vec![id]);
            }
        }
        self.ids.insert(key, id);
        id
    }

    fn in_namespace(&self, namespace: &str) -> impl Iterator<Item = WorkloadId> + '_ {
        self.by_namespace.get(namespace).into_iter().flatten().copied()
    }

    fn get(&self, id: WorkloadId) -> Option<&WorkloadView> {
        self.slots.get(id as usize).and_then(Option::as_ref)
    }

    fn created(&self, id: WorkloadId) -> Option<ResourceVersion> {
        self.created.get(id as usize).copied().flatten()
    }

    fn slot_mut(&mut self, id: WorkloadId) -> &mut WorkloadView {
        self.slots[id as usize].as_mut().expect("ids only name occupied slots")
    }

    fn remove(&mut self, id: WorkloadId) -> WorkloadView {
        let view = self.slots[id as usize].take().expect("ids only name occupied slots");
        self.ids.remove(&view.key);
        self.written_ahead.remove(&id);
        let namespace = &*view.key.namespace;
        if let Some(ids) = self.by_namespace.get_mut(namespace) {
            if let Ok(at) = ids.binary_search(&id) {
                ids.remove(at);
            }
            if ids.is_empty() {
                self.by_namespace.remove(namespace);
            }
        }
        self.free.push(id);
        view
    }
}

/// The reverse index and the per-namespace pattern holders.
#[derive(Debug, Default)]
struct Lookup {
    /// Sorted, duplicate-free ids of the workloads referencing or naming each resource.
    by_resource: HashMap<ResourceKey, Vec<WorkloadId>>,
    /// Per namespace and resource kind ([`kind_index`]), the workloads with list patterns.
    pattern_holders: HashMap<Box<str>, [Vec<WorkloadId>; 3]>,
}

impl Lookup {
    fn add(&mut self, id: WorkloadId, view: &WorkloadView) {
        let namespace = &*view.key.namespace;
        for (kind, name) in direct_names(view) {
            let ids = self.by_resource.entry(ResourceKey::new(kind, namespace, name)).or_default();
            if let Err(at) = ids.binary_search(&id) {
                ids.insert(at, id);
            }
        }
        for kind in pattern_kinds(view) {
            let holders = self.pattern_holders.entry(namespace.into()).or_default();
            let ids = &mut holders[kind_index(kind)];
            if let Err(at) = ids.binary_search(&id) {
                ids.insert(at, id);
            }
        }
    }

    fn remove(&mut self, id: WorkloadId, view: &WorkloadView) {
        let namespace = &*view.key.namespace;
        for (kind, name) in direct_names(view) {
            let key = ResourceKey::new(kind, namespace, name);
            if let Some(ids) = self.by_resource.get_mut(&key) {
                if let Ok(at) = ids.binary_search(&id) {
                    ids.remove(at);
                }
                if ids.is_empty() {
                    self.by_resource.remove(&key);
                }
            }
        }
        let kinds = pattern_kinds(view);
        if kinds.is_empty() {
            return;
        }
        if let Some(holders) = self.pattern_holders.get_mut(namespace) {
            for kind in kinds {
                let ids = &mut holders[kind_index(kind)];
                if let Ok(at) = ids.binary_search(&id) {
                    ids.remove(at);
                }
            }
            if holders.iter().all(Vec::is_empty) {
                self.pattern_holders.remove(namespace);
            }
        }
    }

    /// Sorted, duplicate-free.
    fn candidate_ids(&self, key: &ResourceKey) -> Vec<WorkloadId> {
        let direct = self.by_resource.get(key).map(Vec::as_slice).unwrap_or_default();
        let patterns = self
            .pattern_holders
            .get(&*key.namespace)
            .map(|holders| holders[kind_index(key.kind)].as_slice())
            .unwrap_or_default();
        let mut ids: Vec<WorkloadId> = direct.iter().chain(patterns).copied().collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    fn pattern_holder_count(&self) -> usize {
        let ids: HashSet<WorkloadId> =
            self.pattern_holders.values().flat_map(|holders| holders.iter().flatten()).copied().collect();
        ids.len()
    }
}

const KINDS: [ResourceKind; 3] =
    [ResourceKind::ConfigMap, ResourceKind::Secret, ResourceKind::SecretProviderClass];

/// Explicit lists of both annotation maps: step 1 of the decision picks one of them per kind,
/// the lookups must serve either.
fn explicit_lists(view: &WorkloadView, kind: ResourceKind) -> impl Iterator<Item = &str> {
    [&view.metadata_rules, &view.template_rules]
        .into_iter()
        .filter_map(move |rules: &ReloadAnnotations| rules.explicit[kind_index(kind)].as_deref())
}

/// The resources a workload is filed under: those it references and the plain names it lists.
fn direct_names(view: &WorkloadView) -> BTreeSet<(ResourceKind, &str)> {
    let mut names: BTreeSet<(ResourceKind, &str)> =
        view.references.iter().map(|r| (r.kind, &*r.name)).collect();
    for kind in KINDS {
        for entry in explicit_lists(view, kind).flat_map(explicit_entries) {
            if let ExplicitEntry::Name(name) = entry {
                names.insert((kind, name));
            }
        }
    }
    names
}

/// The kinds for which the workload's explicit lists hold a pattern.
fn pattern_kinds(view: &WorkloadView) -> Vec<ResourceKind> {
    KINDS
        .into_iter()
        .filter(|&kind| {
            explicit_lists(view, kind)
                .flat_map(explicit_entries)
                .any(|entry| matches!(entry, ExplicitEntry::Pattern(_)))
                || searches_unreferenced(view)
        })
        .collect()
}

/// An annotations map references nothing, so its search annotation may select any matched
/// resource of its namespace: it is offered them all, as a pattern holder is.
fn searches_unreferenced(view: &WorkloadView) -> bool {
    view.annotations_only
        && [&view.metadata_rules, &view.template_rules]
            .iter()
            .any(|rules| rules.search.as_deref() == Some("true"))
}

fn same_lookup_entries(a: &WorkloadView, b: &WorkloadView) -> bool {
    a.references == b.references
        && a.metadata_rules.explicit == b.metadata_rules.explicit
        && a.template_rules.explicit == b.template_rules.explicit
        && searches_unreferenced(a) == searches_unreferenced(b)
}

/// The catch-up's test: `workload` records a marker for `resource` that differs from the
/// resource's current hash (docs/beyond-stakater.md §2), and its rules still reload for it.
fn stale_change(
    workload: &WorkloadView,
    resource: &ResourceView,
    opts: &DecideOptions,
) -> Option<MarkerChange> {
    let recorded = workload.markers.recorded_hash(&resource.key, workload.strategy(opts.strategy))?;
    if recorded == marker_hash(workload, resource) || recorded == DELETE_MARKER_HASH {
        return None;
    }
    plan(workload, resource, ResourceEventKind::Updated, opts).ok()
}
