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
use kube::runtime::WatchStreamExt as _;
use kube::{Client, ResourceExt as _};
use reloader_core::annotations::AnnotationKeys;
use reloader_core::model::{ResourceKey, ResourceKind};
use tokio::sync::watch;

use super::glue::{IndexTarget, index_watch};
use super::initial_list::watcher_stream;
use super::{Watch, watch_config, watch_name};
use crate::kinds::{spc_pod_status_resource, spc_resource};
use crate::observe::metrics::WatchMetrics;
use crate::state::{CsiState, Phase, WatchedState};
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
    state: &Arc<impl WatchedState + 'static>,
    metrics: &WatchMetrics,
) -> Vec<Watch> {
    let flags = ClassFlagMap::default();
    let classes = ClassTarget {
        flags: flags.clone(),
        keys: keys.clone(),
        state: state.clone(),
        namespace: namespace.map(String::from),
    };
    let class_watch =
        start(client, &spc_resource(), namespace, "SecretProviderClass", classes, metrics, None);
    let statuses = StatusTarget {
        flags,
        state: state.clone(),
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
    metrics: &WatchMetrics,
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
    let stream = watcher_stream(name.clone(), api, watch_config(None, None)).default_backoff();
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

/// SecretProviderClasses → the flag map; a flag that changes also goes to the state.
struct ClassTarget {
    flags: ClassFlagMap,
    keys: AnnotationKeys,
    state: Arc<dyn CsiState>,
    namespace: Option<String>,
}

impl ClassTarget {
    fn record(&self, key: ResourceKey, flags: ClassFlags) {
        if self.flags.set(key.clone(), flags) {
            self.state.class_flags_changed(&key, flags);
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
            self.state.class_flags_changed(&key, ClassFlags::default());
        }
    }
}

/// SecretProviderClassPodStatuses → the state. Remembers which statuses it has seen (names only)
/// to tell an update, which may reload, from a creation, which never does.
struct StatusTarget {
    flags: ClassFlagMap,
    state: Arc<dyn CsiState>,
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
        if phase == Phase::InitialList || (known && self.state.holds(&key)) {
            self.state.resource_applied(view, phase);
        } else {
            // A new status (a new pod): its versions are recorded when the class has none yet,
            // never compared; a later update of any status of the class is compared as usual.
            self.state.status_appeared(view);
        }
        self.known.insert(name);
        Some(key)
    }

    fn delete(&mut self, status: DynamicObject) {
        // Its pod went away; the class and its other statuses stay as they are.
        if let Some(name) = status_name(&status) {
            self.known.remove(&name);
        }
        if spc_key(&status).is_some() {
            self.state.status_departed();
        }
    }

    fn reset(&mut self, seen: HashSet<ResourceKey>, _: Phase) {
        self.known = std::mem::take(&mut self.listing);
        self.state.statuses_relisted(self.namespace.as_deref(), &seen);
    }
}

#[cfg(test)]
mod tests {
    use reloader_core::views::ResourceView;
    use serde_json::json;

    use super::*;
    use crate::kinds::Loaded;
    use crate::reconcile::testkit::{Setup, Stage, stage};
    use crate::views::workload_view;

    const NS: &str = "shop";
    const SPC_RELOAD: &str = "secretproviderclass.reloader.stakater.com/reload";
    const SEARCH: &str = "reloader.stakater.com/search";
    const IGNORE: &str = "reloader.stakater.com/ignore";
    const MATCH: &str = "reloader.stakater.com/match";

    /// What the watches deliver, in order.
    #[derive(Clone, Copy)]
    enum Step {
        /// A SecretProviderClass listed or changed, with its annotations.
        Class(&'static [(&'static str, &'static str)]),
        /// The status of pod `name` listed at start-up, mounting `version`.
        Listed(&'static str, &'static str),
        /// The status of pod `name` added or changed by a watch event.
        Live(&'static str, &'static str),
        Deleted(&'static str),
        /// A re-list that returns only these statuses.
        Relisted(&'static [(&'static str, &'static str)]),
    }
    use Step::*;

    fn class(annotations: &[(&str, &str)]) -> DynamicObject {
        let annotations: serde_json::Map<_, _> =
            annotations.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
        serde_json::from_value(json!({
            "apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClass",
            "metadata": {"name": "vault", "namespace": NS, "annotations": annotations},
        }))
        .unwrap()
    }

    fn status(pod: &str, version: &str) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClassPodStatus",
            "metadata": {"name": format!("{pod}-vault"), "namespace": NS},
            "status": {"secretProviderClassName": "vault", "podName": pod,
                       "objects": [{"id": "secret/db", "version": version}]},
        }))
        .unwrap()
    }

    /// A Deployment mounting class `vault`, annotated with `annotation`.
    fn workload(annotation: (&str, &str)) -> reloader_core::views::WorkloadView {
        let object: k8s_openapi::api::apps::v1::Deployment = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": NS, "annotations": {annotation.0: annotation.1}},
            "spec": {"selector": {}, "template": {"spec": {
                "containers": [{"name": "app", "volumeMounts": [{"name": "secrets", "mountPath": "/mnt"}]}],
                "volumes": [{"name": "secrets", "csi": {
                    "driver": "secrets-store.csi.k8s.io", "volumeAttributes": {"secretProviderClass": "vault"}}}],
            }}},
        }))
        .unwrap();
        workload_view(&Loaded::new(object), &AnnotationKeys::default())
    }

    /// Runs `steps` through the real targets and the reconcile stage (reload on create and delete both
    /// on); returns how many reloads were queued and the class as the index holds it.
    fn run(annotation: (&str, &str), steps: &[Step]) -> (usize, Option<ResourceView>) {
        let setup = Setup { reload_on_create: true, reload_on_delete: true, ..Setup::default() };
        let Stage { reconciler: reconcile, queue, .. } = stage(&setup, &[workload(annotation)], &[]);
        let index = reconcile.index.clone();
        let state: Arc<dyn CsiState> = Arc::new(reconcile);
        let flags = ClassFlagMap::default();
        let mut classes = ClassTarget {
            flags: flags.clone(),
            keys: AnnotationKeys::default(),
            state: state.clone(),
            namespace: None,
        };
        let mut statuses =
            StatusTarget { flags, state, namespace: None, known: HashSet::new(), listing: HashSet::new() };
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let mut listed = HashSet::new();
            for step in steps {
                match *step {
                    Class(annotations) => {
                        classes.apply(class(annotations), Phase::Live);
                    }
                    Listed(pod, version) => {
                        listed.extend(statuses.apply(status(pod, version), Phase::InitialList));
                        statuses.reset(listed.clone(), Phase::InitialList);
                    }
                    Live(pod, version) => {
                        statuses.apply(status(pod, version), Phase::Live);
                    }
                    Deleted(pod) => statuses.delete(status(pod, "any")),
                    Relisted(pods) => {
                        let seen = pods
                            .iter()
                            .filter_map(|(pod, version)| statuses.apply(status(pod, version), Phase::Relist))
                            .collect();
                        statuses.reset(seen, Phase::Relist);
                    }
                }
            }
        });
        let key = ResourceKey::new(ResourceKind::SecretProviderClass, NS, "vault");
        let class = index.read().unwrap().resource(&key).cloned();
        let reloads = queue.0.lock().unwrap().len();
        (reloads, class)
    }

    const EXPLICIT: (&str, &str) = (SPC_RELOAD, "vault");
    const SEARCHING: (&str, &str) = (SEARCH, "true");

    #[test]
    fn only_an_updated_status_reloads_and_the_class_decides_ignore_and_match() {
        /// Name, the workload's annotation, the steps, the reloads expected.
        type Case<'a> = (&'a str, (&'a str, &'a str), &'a [Step], usize);
        let cases: &[Case] = &[
            ("update", EXPLICIT, &[Listed("a", "1"), Live("a", "2")], 1),
            ("same versions", EXPLICIT, &[Listed("a", "1"), Live("a", "1")], 0),
            ("a new pod's status, other versions", EXPLICIT, &[Listed("a", "1"), Live("b", "2")], 0),
            ("a status first seen live", EXPLICIT, &[Live("a", "1")], 0),
            ("then updated", EXPLICIT, &[Live("a", "1"), Live("a", "2")], 1),
            ("deleted", EXPLICIT, &[Listed("a", "1"), Deleted("a")], 0),
            ("gone in a re-list", EXPLICIT, &[Listed("a", "1"), Relisted(&[])], 0),
            ("new in a re-list", EXPLICIT, &[Listed("a", "1"), Relisted(&[("a", "1"), ("b", "2")])], 0),
            ("changed in a re-list", EXPLICIT, &[Listed("a", "1"), Relisted(&[("a", "2")])], 1),
            ("class ignored", EXPLICIT, &[Class(&[(IGNORE, "true")]), Listed("a", "1"), Live("a", "2")], 0),
            (
                "ignore removed",
                EXPLICIT,
                &[Class(&[(IGNORE, "true")]), Listed("a", "1"), Class(&[]), Live("a", "2")],
                1,
            ),
            (
                "search, class matched",
                SEARCHING,
                &[Class(&[(MATCH, "true")]), Listed("a", "1"), Live("a", "2")],
                1,
            ),
            ("search, class not matched", SEARCHING, &[Class(&[]), Listed("a", "1"), Live("a", "2")], 0),
            (
                "match on the class arrives later",
                SEARCHING,
                &[Listed("a", "1"), Class(&[(MATCH, "true")]), Live("a", "2")],
                1,
            ),
        ];
        for (name, annotation, steps, expected) in cases {
            assert_eq!(run(*annotation, steps).0, *expected, "{name}");
        }
    }

    #[test]
    fn the_index_follows_the_class_flags() {
        let (_, class) = run(EXPLICIT, &[Listed("a", "1"), Class(&[(IGNORE, "true"), (MATCH, "true")])]);
        let class = class.expect("indexed");
        assert!(class.ignored && class.matched, "{class:?}");
        let (_, class) = run(EXPLICIT, &[Class(&[(IGNORE, "true")]), Listed("a", "1"), Class(&[])]);
        assert!(!class.expect("indexed").ignored);
    }
}
