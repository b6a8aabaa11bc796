//! With `--namespace-selector`, watches Namespace labels so that adding or removing a label at
//! runtime takes effect for the next change (metadata only: nothing else is needed).

use std::collections::HashSet;

use futures::FutureExt as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::{WatchStreamExt, watcher};
use reloader_core::selector::LabelSelector;
use tokio::sync::watch;
use tracing::info;

use super::Watch;
use super::glue::{IndexTarget, index_watch};
use crate::observe::metrics::{EventType, ResourceType, WatchMetrics};
use crate::scope::ScopeFilter;
use crate::state::Phase;

pub(super) fn watch(
    client: &Client,
    selector: LabelSelector,
    scope: ScopeFilter,
    metrics: WatchMetrics,
) -> Watch {
    let api: Api<PartialObjectMeta<Namespace>> = Api::all(client.clone());
    let name = "namespace watch".to_owned();
    // Listed in pages, never streamed: a metadata-only watch gets the refusal of a streamed list
    // (WatchList off, as by default on Kubernetes 1.33) in a form kube cannot decode, so the
    // fallback of the other watches never sees it. Namespaces are few and small.
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    let (tx, synced) = watch::channel(false);
    let target = NamespaceTarget { selector, scope, metrics: metrics.clone() };
    let task_name = name.clone();
    let task = async move { index_watch(&task_name, stream, target, tx, &metrics).await }.boxed();
    Watch { name, task, synced }
}

struct NamespaceTarget {
    selector: LabelSelector,
    scope: ScopeFilter,
    metrics: WatchMetrics,
}

impl NamespaceTarget {
    /// Stakater's namespace informer selects server-side, so it sees only selected namespaces:
    /// one entering the selection is an `add`, one leaving it a `delete`.
    fn record(&self, changed: bool, selected: bool) {
        let event_type = match (changed, selected) {
            (true, true) => EventType::Create,
            (false, true) => EventType::Update,
            (true, false) => EventType::Delete,
            (false, false) => return,
        };
        self.metrics.event_received(event_type, ResourceType::Namespaces);
    }
}

impl IndexTarget<PartialObjectMeta<Namespace>> for NamespaceTarget {
    type Key = String;

    fn apply(&mut self, ns: PartialObjectMeta<Namespace>, _phase: Phase) -> Option<String> {
        let name = ns.metadata.name.unwrap_or_default();
        let labels = ns.metadata.labels.unwrap_or_default();
        let selected = self.selector.matches(&labels);
        let changed = self.scope.set_selected(&name, selected);
        if changed {
            info!(namespace = %name, selected, "namespace selection changed");
        }
        self.record(changed, selected);
        Some(name)
    }

    fn delete(&mut self, ns: PartialObjectMeta<Namespace>) {
        let changed = self.scope.set_selected(&ns.metadata.name.unwrap_or_default(), false);
        self.record(changed, false);
    }

    /// A namespace missing from a re-list was deleted while the watch was down.
    fn reset(&mut self, seen: HashSet<String>, _phase: Phase) {
        for name in self.scope.selected_namespaces() {
            if !seen.contains(&name) {
                let changed = self.scope.set_selected(&name, false);
                self.record(changed, false);
            }
        }
    }
}
