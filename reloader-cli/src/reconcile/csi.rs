//! The CSI watches' state calls: a SecretProviderClassPodStatus appearing or going away is never
//! a change, whatever `--reload-on-create`/`--reload-on-delete` say (Stakater ignores both), and
//! a class's flags follow it into the index so the catch-up sweep sees the class as it is now.

use std::collections::HashSet;

use reloader_core::model::{ResourceKey, ResourceKind};
use reloader_core::views::ResourceView;

use super::Reconciler;
use crate::observe::metrics::EventType;
use crate::state::CsiState;
use crate::views::ClassFlags;

impl CsiState for Reconciler {
    fn holds(&self, key: &ResourceKey) -> bool {
        self.index.read().expect("index lock").resource(key).is_some()
    }

    fn status_appeared(&self, view: ResourceView) {
        self.metrics.event_received(EventType::Create, ResourceKind::SecretProviderClass);
        // Stored as listed: a creation is never a change a late workload could replay.
        let mut index = self.index.write().expect("index lock");
        if index.resource(&view.key).is_none() {
            index.upsert_listed_resource(view);
        }
    }

    fn status_departed(&self) {
        self.metrics.event_received(EventType::Delete, ResourceKind::SecretProviderClass);
    }

    fn class_flags_changed(&self, key: &ResourceKey, flags: ClassFlags) {
        let mut index = self.index.write().expect("index lock");
        if let Some(view) = index.resource(key).cloned() {
            index.upsert_resource(ResourceView { matched: flags.matched, ignored: flags.ignored, ..view });
        }
    }

    fn statuses_relisted(&self, namespace: Option<&str>, seen: &HashSet<ResourceKey>) {
        let mut index = self.index.write().expect("index lock");
        let gone: Vec<ResourceKey> = index
            .resources()
            .filter(|r| r.key.kind == ResourceKind::SecretProviderClass)
            .filter(|r| namespace.is_none_or(|ns| *r.key.namespace == *ns))
            .filter(|r| !seen.contains(&r.key))
            .map(|r| r.key.clone())
            .collect();
        for key in gone {
            index.remove_resource(&key);
        }
    }
}
