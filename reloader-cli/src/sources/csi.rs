//! CSI integration (`--enable-csi-integration`): a SecretProviderClassPodStatus tells when the
//! secrets its pod mounted changed; its SecretProviderClass tells whether to ignore or match them
//! (docs/compatibility.md, CSI). The classes are watched into a small map holding only the
//! classes that carry a flag, so no event needs a GET. A status appearing or going away is never
//! a change, whatever `--reload-on-create`/`--reload-on-delete` say: it comes and goes with its
//! pod, and Stakater ignores both.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use futures::FutureExt as _;
use kube::api::{Api, DynamicObject};
use kube::core::ApiResource;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, ResourceExt as _};
use reloader_core::annotations::AnnotationKeys;
use reloader_core::model::{ResourceKey, ResourceKind};
use reloader_core::views::ResourceView;
use tokio::sync::watch;

use super::glue::{IndexTarget, Phase, index_watch};
use super::{Watch, watch_config, watch_name};
use crate::kinds::{spc_pod_status_resource, spc_resource};
use crate::observe::metrics::{EventType, Metrics};
use crate::reconcile::Reconciler;
use crate::views::{ClassFlags, spc_key, spc_view};

/// The flags of every SecretProviderClass that carries one; a class absent has none.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClassFlagMap(Arc<RwLock<HashMap<ResourceKey, ClassFlags>>>);

impl ClassFlagMap {
    pub(crate) fn get(&self, key: &ResourceKey) -> ClassFlags {
        self.0.read().expect("class flags lock").get(key).copied().unwrap_or_default()
    }

    /// Records `flags` for `key`; true when they differ from what was known.
    fn set(&self, key: ResourceKey, flags: ClassFlags) -> bool {
        let mut map = self.0.write().expect("class flags lock");
        let previous = if flags.any() { map.insert(key, flags) } else { map.remove(&key) };
        previous.unwrap_or_default() != flags
    }

    /// Forgets the classes in `namespace` (all when `None`) that are not in `seen`; returns them.
    fn retain_seen(&self, namespace: Option<&str>, seen: &HashSet<ResourceKey>) -> Vec<ResourceKey> {
        let mut map = self.0.write().expect("class flags lock");
        let gone: Vec<ResourceKey> = map
            .keys()
            .filter(|k| namespace.is_none_or(|ns| *k.namespace == *ns) && !seen.contains(*k))
            .cloned()
            .collect();
        for key in &gone {
            map.remove(key);
        }
        gone
    }
}

/// The two CSI watches of one namespace (or all): the classes first, then the statuses, which
/// start once the classes are listed so that every status is judged by its class's flags.
pub(super) fn watches(
    client: &Client,
    namespace: Option<&str>,
    keys: &AnnotationKeys,
    reconciler: &Arc<Reconciler>,
    metrics: &Arc<Metrics>,
) -> Vec<Watch> {
    let flags = ClassFlagMap::default();
    let classes = ClassTarget {
        flags: flags.clone(),
        keys: keys.clone(),
        reconciler: reconciler.clone(),
        namespace: namespace.map(String::from),
    };
    let class_watch =
        start(client, &spc_resource(), namespace, "SecretProviderClass", classes, metrics, None);
    let statuses = StatusTarget {
        flags,
        reconciler: reconciler.clone(),
        namespace: namespace.map(String::from),
        known: HashSet::new(),
        listing: HashSet::new(),
    };
    let status_watch = start(
        client,
        &spc_pod_status_resource(),
        namespace,
        "SecretProviderClassPodStatus",
        statuses,
        metrics,
        Some(class_watch.synced.clone()),
    );
    vec![class_watch, status_watch]
}

fn start<T>(
    client: &Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    what: &str,
    target: T,
    metrics: &Arc<Metrics>,
    after: Option<watch::Receiver<bool>>,
) -> Watch
where
    T: IndexTarget<DynamicObject, Key = ResourceKey> + Send + 'static,
{
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    };
    let (tx, synced) = watch::channel(false);
    let name = watch_name(what, namespace);
    let (task_name, metrics) = (name.clone(), metrics.clone());
    let stream = watcher(api, watch_config(None, None)).default_backoff();
    let task = async move {
        if let Some(mut after) = after {
            // The class watch never ends; if it did, the supervisor stops the process anyway.
            let _ = after.wait_for(|listed| *listed).await;
        }
        index_watch(&task_name, stream, target, tx, &metrics).await;
    }
    .boxed();
    Watch { name, task, synced }
}

/// SecretProviderClasses → the flag map; a flag that changes also updates the index entry the
/// statuses made, so the catch-up sweep sees the class as it is now.
struct ClassTarget {
    flags: ClassFlagMap,
    keys: AnnotationKeys,
    reconciler: Arc<Reconciler>,
    namespace: Option<String>,
}

impl ClassTarget {
    fn record(&self, key: ResourceKey, flags: ClassFlags) {
        if self.flags.set(key.clone(), flags) {
            self.refresh_index(&key, flags);
        }
    }

    fn refresh_index(&self, key: &ResourceKey, flags: ClassFlags) {
        let mut index = self.reconciler.index.write().expect("index lock");
        if let Some(view) = index.resource(key).cloned() {
            index.upsert_resource(ResourceView { matched: flags.matched, ignored: flags.ignored, ..view });
        }
    }
}

fn class_key(class: &DynamicObject) -> Option<ResourceKey> {
    Some(ResourceKey::new(
        ResourceKind::SecretProviderClass,
        class.metadata.namespace.as_deref()?,
        &class.name_any(),
    ))
}

impl IndexTarget<DynamicObject> for ClassTarget {
    type Key = ResourceKey;

    fn apply(&mut self, class: DynamicObject, _: Phase) -> Option<ResourceKey> {
        let key = class_key(&class)?;
        self.record(key.clone(), ClassFlags::of(&class.metadata, &self.keys));
        Some(key)
    }

    fn delete(&mut self, class: DynamicObject) {
        if let Some(key) = class_key(&class) {
            self.record(key, ClassFlags::default());
        }
    }

    fn reset(&mut self, seen: HashSet<ResourceKey>, _: Phase) {
        for key in self.flags.retain_seen(self.namespace.as_deref(), &seen) {
            self.refresh_index(&key, ClassFlags::default());
        }
    }
}

/// SecretProviderClassPodStatuses → the reconciler. Remembers which statuses it has seen (names
/// only) to tell an update, which may reload, from a creation, which never does.
struct StatusTarget {
    flags: ClassFlagMap,
    reconciler: Arc<Reconciler>,
    namespace: Option<String>,
    /// Statuses seen, by namespace and name.
    known: HashSet<(String, String)>,
    /// Statuses returned by the (re)list in progress.
    listing: HashSet<(String, String)>,
}

fn status_name(status: &DynamicObject) -> Option<(String, String)> {
    Some((status.metadata.namespace.clone()?, status.metadata.name.clone()?))
}

impl IndexTarget<DynamicObject> for StatusTarget {
    type Key = ResourceKey;

    fn apply(&mut self, status: DynamicObject, phase: Phase) -> Option<ResourceKey> {
        let name = status_name(&status)?;
        let view = spc_view(&status, |key| self.flags.get(key))?;
        let key = view.key.clone();
        if phase != Phase::Live {
            self.listing.insert(name.clone());
        }
        let known = self.known.contains(&name);
        let indexed = self.reconciler.index.read().expect("index lock").resource(&key).is_some();
        if phase == Phase::InitialList || (known && indexed) {
            self.known.insert(name);
            self.reconciler.resource_applied(view, phase);
        } else {
            // A new status (a new pod): its versions are recorded when the class has none yet,
            // never compared; a later update of any status of the class is compared as usual.
            self.known.insert(name);
            self.reconciler.metrics.event_received(EventType::Create, ResourceKind::SecretProviderClass);
            let mut index = self.reconciler.index.write().expect("index lock");
            if !indexed {
                index.upsert_resource(view);
            }
        }
        Some(key)
    }

    fn delete(&mut self, status: DynamicObject) {
        // Its pod went away; the class and its other statuses stay as they are.
        if let Some(name) = status_name(&status) {
            self.known.remove(&name);
        }
        if spc_key(&status).is_some() {
            self.reconciler.metrics.event_received(EventType::Delete, ResourceKind::SecretProviderClass);
        }
    }

    fn reset(&mut self, seen: HashSet<ResourceKey>, _: Phase) {
        self.known = std::mem::take(&mut self.listing);
        // Classes no status speaks for any more leave the index quietly: never a reload.
        let mut index = self.reconciler.index.write().expect("index lock");
        let gone: Vec<ResourceKey> = index
            .resources()
            .filter(|r| r.key.kind == ResourceKind::SecretProviderClass)
            .filter(|r| self.namespace.as_deref().is_none_or(|ns| *r.key.namespace == *ns))
            .filter(|r| !seen.contains(&r.key))
            .map(|r| r.key.clone())
            .collect();
        for key in gone {
            index.remove_resource(&key);
        }
    }
}
