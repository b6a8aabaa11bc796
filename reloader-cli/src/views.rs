//! Object → compact view, the one place: the watches, explain and admission build views here.
//! A ConfigMap or Secret is hashed the moment it arrives and dropped; only its view goes on.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{DynamicObject, ObjectMeta};
use reloader_core::annotations::AnnotationKeys;
use reloader_core::hash;
use reloader_core::model::{ContentHash, ResourceKey, ResourceKind, ResourceVersion};
use reloader_core::model::{KeyDigests, WorkloadKind};
use reloader_core::views::ResourceView;
use reloader_core::views::WorkloadView;

use crate::kinds::{KindObject, Loaded};

fn flag(annotations: Option<&BTreeMap<String, String>>, key: &str) -> bool {
    annotations.and_then(|a| a.get(key)).is_some_and(|v| v == "true")
}

fn resource_view(
    kind: ResourceKind,
    meta: &ObjectMeta,
    namespace: &str,
    name: &str,
    (hash, key_digests): (ContentHash, KeyDigests),
    keys: &AnnotationKeys,
) -> ResourceView {
    let annotations = meta.annotations.as_ref();
    ResourceView {
        key: ResourceKey::new(kind, namespace, name),
        hash,
        keys: key_digests,
        matched: flag(annotations, &keys.search_match),
        ignored: flag(annotations, &keys.ignore),
        version: meta.resource_version.as_deref().and_then(ResourceVersion::parse),
    }
}

pub(crate) fn configmap_view(cm: &ConfigMap, keys: &AnnotationKeys) -> Option<ResourceView> {
    let data = || cm.data.iter().flatten().map(|(k, v)| (k.as_str(), v.as_str()));
    let binary = || cm.binary_data.iter().flatten().map(|(k, v)| (k.as_str(), v.0.as_slice()));
    let hash = hash::configmap_hashes(data(), binary());
    let meta = &cm.metadata;
    Some(resource_view(
        ResourceKind::ConfigMap,
        meta,
        meta.namespace.as_deref()?,
        meta.name.as_deref()?,
        hash,
        keys,
    ))
}

pub(crate) fn secret_view(secret: &Secret, keys: &AnnotationKeys) -> Option<ResourceView> {
    let data = || secret.data.iter().flatten().map(|(k, v)| (k.as_str(), v.0.as_slice()));
    let hash = hash::secret_hashes(data());
    let meta = &secret.metadata;
    Some(resource_view(
        ResourceKind::Secret,
        meta,
        meta.namespace.as_deref()?,
        meta.name.as_deref()?,
        hash,
        keys,
    ))
}

/// The reloader flags a SecretProviderClass carries. A SecretProviderClassPodStatus is judged by
/// its class's `ignore` and `match` annotations, not its own (docs/compatibility.md, CSI).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ClassFlags {
    pub(crate) matched: bool,
    pub(crate) ignored: bool,
}

impl ClassFlags {
    pub(crate) fn of(class: &ObjectMeta, keys: &AnnotationKeys) -> Self {
        let annotations = class.annotations.as_ref();
        ClassFlags {
            matched: flag(annotations, &keys.search_match),
            ignored: flag(annotations, &keys.ignore),
        }
    }

    pub(crate) fn any(self) -> bool {
        self.matched || self.ignored
    }
}

/// The key of the SecretProviderClass a SecretProviderClassPodStatus reports on.
pub(crate) fn spc_key(status: &DynamicObject) -> Option<ResourceKey> {
    let class = status.data.get("status")?.get("secretProviderClassName")?.as_str()?;
    let namespace = status.metadata.namespace.as_deref()?;
    Some(ResourceKey::new(ResourceKind::SecretProviderClass, namespace, class))
}

/// A SecretProviderClassPodStatus speaks for its SecretProviderClass: the view is keyed by the
/// class name, hashed from the mounted objects' versions, flagged as the class is (`flags`).
pub(crate) fn spc_view(
    status: &DynamicObject,
    flags: impl FnOnce(&ResourceKey) -> ClassFlags,
) -> Option<ResourceView> {
    let key = spc_key(status)?;
    let objects: Vec<(&str, &str)> = status.data["status"]
        .get("objects")
        .and_then(|o| o.as_array())
        .into_iter()
        .flatten()
        .filter_map(|o| Some((o.get("id")?.as_str()?, o.get("version")?.as_str()?)))
        .collect();
    let hash = hash::spc_pod_status_hash(&key.name, objects);
    let ClassFlags { matched, ignored } = flags(&key);
    let version = status.metadata.resource_version.as_deref().and_then(ResourceVersion::parse);
    Some(ResourceView { key, hash, keys: KeyDigests::default(), matched, ignored, version })
}

/// The compact view of a workload object, through its backend.
pub(crate) fn workload_view(loaded: &Loaded, keys: &AnnotationKeys) -> WorkloadView {
    loaded.with(|w| w.view(keys))
}

/// The view a watch keeps of a workload object; the object itself is dropped here.
pub(crate) fn watched_workload_view<K: KindObject>(
    obj: K,
    kind: WorkloadKind,
    keys: &AnnotationKeys,
) -> Option<WorkloadView> {
    let view = workload_view(&obj.into_loaded(kind), keys);
    (!view.key.name.is_empty()).then_some(view)
}
