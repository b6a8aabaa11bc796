//! Resource changes a standby saw, replayed when it becomes leader. The marker sweep finds every
//! workload whose recorded hash is stale, but a workload that never reloaded for a resource
//! records nothing to compare: if the leader died between the change and its write, only a
//! replica that saw the change can still apply it. A replay writes nothing where the previous
//! leader already applied the change (the writer re-reads the object and skips what it records);
//! `replayable` in catch_up.rs leaves out the workloads whose record cannot tell. A replay goes
//! only to the workloads the change applied to when it was seen: one that took the resource up
//! later (created since, or a reference added) records nothing for it either, but never needed
//! that change, and writing it would roll the workload for nothing.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use reloader_core::decide::ResourceEventKind;
use reloader_core::model::{ResourceKey, WorkloadKey};
use reloader_core::views::ResourceView;
use tokio::sync::watch;

/// Changes older than this at promotion were the previous leader's to apply.
pub(crate) const REPLAY_WINDOW: Duration = Duration::from_secs(600);
/// Above this many entries, expired ones are dropped on insert.
const PRUNE_ABOVE: usize = 4096;

struct Seen {
    change: SeenChange,
    at: Instant,
}

/// A change a standby saw, and whom it concerned then.
#[derive(Debug, Clone)]
pub(crate) struct SeenChange {
    pub(crate) view: ResourceView,
    pub(crate) event: ResourceEventKind,
    /// The workloads the change applied to when it was seen.
    pub(crate) targets: Vec<WorkloadKey>,
}

pub(crate) struct StandbyChanges {
    seen: Mutex<HashMap<ResourceKey, Seen>>,
    window: Duration,
}

impl StandbyChanges {
    pub(crate) fn new(window: Duration) -> Self {
        StandbyChanges { seen: Mutex::default(), window }
    }

    /// Records a change and the workloads it applies to unless this replica leads. The flag is
    /// read under the lock, and the promotion sweep takes the lock after the flag turned true, so
    /// no change falls between.
    pub(crate) fn record_unless_leading(
        &self,
        leader: &watch::Receiver<bool>,
        view: &ResourceView,
        event: ResourceEventKind,
        targets: impl IntoIterator<Item = WorkloadKey>,
    ) {
        let mut seen = self.seen.lock().expect("standby lock");
        if *leader.borrow() {
            return;
        }
        let now = Instant::now();
        if seen.len() >= PRUNE_ABOVE {
            seen.retain(|_, s| now.duration_since(s.at) < self.window);
        }
        let change = SeenChange { view: view.clone(), event, targets: targets.into_iter().collect() };
        seen.insert(view.key.clone(), Seen { change, at: now });
    }

    /// On becoming leader: the changes seen within the window, oldest first. Forgets them all.
    pub(crate) fn take_recent(&self) -> Vec<SeenChange> {
        let seen = std::mem::take(&mut *self.seen.lock().expect("standby lock"));
        let now = Instant::now();
        let mut recent: Vec<Seen> =
            seen.into_values().filter(|s| now.duration_since(s.at) < self.window).collect();
        recent.sort_by_key(|s| s.at);
        recent.into_iter().map(|s| s.change).collect()
    }
}

#[cfg(test)]
mod tests {
    use reloader_core::model::{ContentHash, ResourceKind};

    use super::*;

    fn view(name: &str, hash: &str) -> ResourceView {
        ResourceView {
            key: ResourceKey::new(ResourceKind::ConfigMap, "ns", name),
            hash: ContentHash::from_hex(hash).unwrap(),
            keys: Default::default(),
            matched: false,
            ignored: false,
            version: None,
        }
    }

    const H1: &str = "1111111111111111111111111111111111111111";
    const H2: &str = "2222222222222222222222222222222222222222";

    #[test]
    fn records_only_while_standing_by_and_keeps_the_latest_per_resource() {
        let (tx, rx) = watch::channel(false);
        let changes = StandbyChanges::new(REPLAY_WINDOW);
        changes.record_unless_leading(&rx, &view("a", H1), ResourceEventKind::Updated, []);
        changes.record_unless_leading(&rx, &view("b", H1), ResourceEventKind::Created, []);
        changes.record_unless_leading(&rx, &view("a", H2), ResourceEventKind::Updated, []);
        tx.send(true).unwrap();
        changes.record_unless_leading(&rx, &view("c", H1), ResourceEventKind::Updated, []);
        let taken = changes.take_recent();
        let names: Vec<(&str, &str, ResourceEventKind)> = taken
            .iter()
            .map(|c| {
                (&*c.view.key.name, if c.view.hash == view("x", H2).hash { "h2" } else { "h1" }, c.event)
            })
            .collect();
        assert_eq!(names, [("b", "h1", ResourceEventKind::Created), ("a", "h2", ResourceEventKind::Updated)]);
        assert!(changes.take_recent().is_empty(), "taken once");
    }

    #[test]
    fn changes_older_than_the_window_are_not_replayed() {
        let (_tx, rx) = watch::channel(false);
        let changes = StandbyChanges::new(Duration::ZERO);
        changes.record_unless_leading(&rx, &view("a", H1), ResourceEventKind::Updated, []);
        assert!(changes.take_recent().is_empty());
    }
}
