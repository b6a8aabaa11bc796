//! Which ConfigMaps, Secrets and SecretProviderClasses a pod spec uses (docs/compatibility.md §4.4), and
//! which container gets the env-var marker.

use k8s_openapi::api::core::v1::{Container, KeyToPath, PodSpec};

use crate::model::{ContainerRef, KeyUse, RefVia, Reference, ResourceKind};

/// Every use of a resource by `spec`, regular containers before init containers, volumes
/// before env. A volume reference names the first container mounting it (regular first).
pub(crate) fn discover_references(spec: &PodSpec) -> Vec<Reference> {
    let mut refs = Vec::new();
    for volume in spec.volumes.iter().flatten() {
        let container = first_mounting_container(spec, &volume.name);
        let mut push = |kind, name: Option<&String>, via| {
            if let Some(name) = name.filter(|n| !n.is_empty()) {
                refs.push(Reference { kind, name: name.as_str().into(), via, container });
            }
        };
        if let Some(cm) = &volume.config_map {
            push(ResourceKind::ConfigMap, Some(&cm.name), RefVia::Volume);
        }
        if let Some(secret) = &volume.secret {
            push(ResourceKind::Secret, secret.secret_name.as_ref(), RefVia::Volume);
        }
        if let Some(projected) = &volume.projected {
            for source in projected.sources.iter().flatten() {
                if let Some(cm) = &source.config_map {
                    push(ResourceKind::ConfigMap, Some(&cm.name), RefVia::Projected);
                }
                if let Some(secret) = &source.secret {
                    push(ResourceKind::Secret, Some(&secret.name), RefVia::Projected);
                }
            }
        }
        if let Some(csi) = &volume.csi {
            let class = csi.volume_attributes.as_ref().and_then(|a| a.get("secretProviderClass"));
            push(ResourceKind::SecretProviderClass, class, RefVia::Csi);
        }
    }
    let containers = spec.containers.iter().enumerate().map(|(i, c)| (ContainerRef::Regular(i as u16), c));
    let inits =
        spec.init_containers.iter().flatten().enumerate().map(|(i, c)| (ContainerRef::Init(i as u16), c));
    for (at, container) in containers.chain(inits) {
        env_references(container, at, &mut refs);
    }
    refs
}

/// Which keys of its ConfigMaps/Secrets `spec` reads (docs/beyond-stakater.md §10): one entry per
/// `configMapKeyRef`/`secretKeyRef` and per volume `items` key, and a `key: None` entry for every
/// use of a whole resource (`envFrom`, a volume or projected source without `items`).
pub(crate) fn discover_key_uses(spec: &PodSpec) -> Vec<KeyUse> {
    let mut uses = Vec::new();
    let mut push_items = |kind, name: &str, items: Option<&Vec<KeyToPath>>| match items {
        Some(items) if !items.is_empty() => uses.extend(items.iter().map(|i| KeyUse {
            kind,
            name: name.into(),
            key: Some(i.key.as_str().into()),
        })),
        _ => uses.push(KeyUse { kind, name: name.into(), key: None }),
    };
    for volume in spec.volumes.iter().flatten() {
        if let Some(cm) = &volume.config_map {
            push_items(ResourceKind::ConfigMap, &cm.name, cm.items.as_ref());
        }
        if let Some(secret) = &volume.secret {
            push_items(
                ResourceKind::Secret,
                secret.secret_name.as_deref().unwrap_or_default(),
                secret.items.as_ref(),
            );
        }
        for source in volume.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(cm) = &source.config_map {
                push_items(ResourceKind::ConfigMap, &cm.name, cm.items.as_ref());
            }
            if let Some(secret) = &source.secret {
                push_items(ResourceKind::Secret, &secret.name, secret.items.as_ref());
            }
        }
    }
    let containers = spec.containers.iter().chain(spec.init_containers.iter().flatten());
    for container in containers {
        for from in container.env.iter().flatten().filter_map(|e| e.value_from.as_ref()) {
            if let Some(r) = &from.config_map_key_ref {
                uses.push(KeyUse {
                    kind: ResourceKind::ConfigMap,
                    name: r.name.as_str().into(),
                    key: Some(r.key.as_str().into()),
                });
            }
            if let Some(r) = &from.secret_key_ref {
                uses.push(KeyUse {
                    kind: ResourceKind::Secret,
                    name: r.name.as_str().into(),
                    key: Some(r.key.as_str().into()),
                });
            }
        }
        for from in container.env_from.iter().flatten() {
            if let Some(r) = &from.config_map_ref {
                uses.push(KeyUse { kind: ResourceKind::ConfigMap, name: r.name.as_str().into(), key: None });
            }
            if let Some(r) = &from.secret_ref {
                uses.push(KeyUse { kind: ResourceKind::Secret, name: r.name.as_str().into(), key: None });
            }
        }
    }
    uses
}

fn env_references(container: &Container, at: ContainerRef, refs: &mut Vec<Reference>) {
    let mut push = |kind, name: &str, via| {
        if !name.is_empty() {
            refs.push(Reference { kind, name: name.into(), via, container: Some(at) });
        }
    };
    for env in container.env.iter().flatten() {
        let Some(from) = &env.value_from else { continue };
        if let Some(r) = &from.config_map_key_ref {
            push(ResourceKind::ConfigMap, &r.name, RefVia::EnvValueFrom);
        }
        if let Some(r) = &from.secret_key_ref {
            push(ResourceKind::Secret, &r.name, RefVia::EnvValueFrom);
        }
    }
    for from in container.env_from.iter().flatten() {
        if let Some(r) = &from.config_map_ref {
            push(ResourceKind::ConfigMap, &r.name, RefVia::EnvFrom);
        }
        if let Some(r) = &from.secret_ref {
            push(ResourceKind::Secret, &r.name, RefVia::EnvFrom);
        }
    }
}

fn first_mounting_container(spec: &PodSpec, volume: &str) -> Option<ContainerRef> {
    let mounts = |c: &Container| c.volume_mounts.iter().flatten().any(|m| m.name == volume);
    if let Some(i) = spec.containers.iter().position(mounts) {
        return Some(ContainerRef::Regular(i as u16));
    }
    spec.init_containers.iter().flatten().position(mounts).map(|i| ContainerRef::Init(i as u16))
}

/// Why no container can carry the marker for a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoMarkerContainer {
    /// The pod template has no regular container.
    NoContainers,
    /// An auto or search rule applies, but no container uses the resource (for example its
    /// only volume is mounted by no container).
    Unused,
}

/// The regular container that gets the marker for a resource (docs/compatibility.md §4.4),
/// exactly as Stakater v1.4.21 picks it:
///
/// 1. only the *first* volume (in `volumes` order) holding the resource counts: the first
///    regular container mounting it; else, if an init container mounts it, `containers[0]`;
/// 2. else the first regular container with an env/envFrom reference; else, if an init
///    container has one, `containers[0]`;
/// 3. else `containers[0]` for an explicit rule (`auto_rule` false), and no container at all
///    for auto and search rules.
///
/// Every path yields no container when the pod template has no regular container.
pub(crate) fn marker_container(
    references: &[Reference],
    containers: usize,
    kind: ResourceKind,
    name: &str,
    auto_rule: bool,
) -> Result<u16, NoMarkerContainer> {
    if containers == 0 {
        return Err(NoMarkerContainer::NoContainers);
    }
    let uses = |r: &&Reference| r.kind == kind && &*r.name == name;
    let first_volume = references.iter().filter(uses).find(|r| r.via.is_volume());
    match first_volume.and_then(|r| r.container) {
        Some(ContainerRef::Regular(i)) => return Ok(i),
        Some(ContainerRef::Init(_)) => return Ok(0),
        None => {}
    }
    let env_users = || references.iter().filter(uses).filter(|r| !r.via.is_volume());
    let first_regular = env_users()
        .filter_map(|r| match r.container {
            Some(ContainerRef::Regular(i)) => Some(i),
            _ => None,
        })
        .min();
    if let Some(i) = first_regular {
        return Ok(i);
    }
    if env_users().any(|r| matches!(r.container, Some(ContainerRef::Init(_)))) {
        return Ok(0);
    }
    if auto_rule { Err(NoMarkerContainer::Unused) } else { Ok(0) }
}

/// Does the pod spec use the resource at all (regular or init container, any way)?
pub(crate) fn references_resource(references: &[Reference], kind: ResourceKind, name: &str) -> bool {
    references.iter().any(|r| r.kind == kind && &*r.name == name)
}

#[cfg(test)]
mod tests;
