//! docs/compatibility.md §4.4: every way a pod spec uses a resource, and the container that gets the marker.

use k8s_openapi::api::core::v1::{CSIVolumeSource, ConfigMapVolumeSource, Volume};

use super::*;
use crate::model::ContainerRef::{Init, Regular};
use crate::model::RefVia::{Csi, EnvFrom, EnvValueFrom, Projected, Volume as Vol};
use crate::model::ResourceKind::{ConfigMap, Secret, SecretProviderClass};
use crate::testkit::{TestWorkload, deployment};

fn spec_of(workload: &TestWorkload) -> &PodSpec {
    workload.template().spec.as_ref().expect("test templates have a pod spec")
}

fn reference(kind: ResourceKind, name: &str, via: RefVia, container: Option<ContainerRef>) -> Reference {
    Reference { kind, name: name.into(), via, container }
}

#[test]
fn discovery() {
    let two = || deployment("web").containers(&["app", "sidecar"]).init_containers(&["init"]);
    let cases = [
        (
            "ConfigMap volume",
            two().uses("sidecar", ConfigMap, "c", Vol),
            vec![reference(ConfigMap, "c", Vol, Some(Regular(1)))],
        ),
        (
            "Secret volume",
            two().uses("app", Secret, "s", Vol),
            vec![reference(Secret, "s", Vol, Some(Regular(0)))],
        ),
        ("unmounted volume", two().uses("", Secret, "s", Vol), vec![reference(Secret, "s", Vol, None)]),
        (
            "projected ConfigMap",
            two().uses("app", ConfigMap, "c", Projected),
            vec![reference(ConfigMap, "c", Projected, Some(Regular(0)))],
        ),
        (
            "projected Secret",
            two().uses("init", Secret, "s", Projected),
            vec![reference(Secret, "s", Projected, Some(Init(0)))],
        ),
        (
            "CSI",
            two().uses("sidecar", SecretProviderClass, "vault", Csi),
            vec![reference(SecretProviderClass, "vault", Csi, Some(Regular(1)))],
        ),
        (
            "configMapKeyRef",
            two().uses("sidecar", ConfigMap, "c", EnvValueFrom),
            vec![reference(ConfigMap, "c", EnvValueFrom, Some(Regular(1)))],
        ),
        (
            "secretKeyRef",
            two().uses("app", Secret, "s", EnvValueFrom),
            vec![reference(Secret, "s", EnvValueFrom, Some(Regular(0)))],
        ),
        (
            "envFrom ConfigMap",
            two().uses("app", ConfigMap, "c", EnvFrom),
            vec![reference(ConfigMap, "c", EnvFrom, Some(Regular(0)))],
        ),
        (
            "envFrom Secret",
            two().uses("sidecar", Secret, "s", EnvFrom),
            vec![reference(Secret, "s", EnvFrom, Some(Regular(1)))],
        ),
        (
            "init envFrom",
            two().uses("init", ConfigMap, "c", EnvFrom),
            vec![reference(ConfigMap, "c", EnvFrom, Some(Init(0)))],
        ),
        (
            "init volume",
            two().uses("init", Secret, "s", Vol),
            vec![reference(Secret, "s", Vol, Some(Init(0)))],
        ),
        (
            "volumes first, then regular containers, then init containers",
            two()
                .uses("init", ConfigMap, "i", EnvFrom)
                .uses("sidecar", Secret, "e", EnvValueFrom)
                .uses("app", ConfigMap, "v", Vol),
            vec![
                reference(ConfigMap, "v", Vol, Some(Regular(0))),
                reference(Secret, "e", EnvValueFrom, Some(Regular(1))),
                reference(ConfigMap, "i", EnvFrom, Some(Init(0))),
            ],
        ),
        ("plain env vars are not references", two().env("app", "STAKATER_C_CONFIGMAP", "x"), vec![]),
    ];
    for (name, workload, want) in cases {
        assert_eq!(discover_references(spec_of(&workload)), want, "{name}");
    }
}

#[test]
fn a_volume_mounted_by_init_and_regular_containers_names_the_regular_one() {
    let mut workload = deployment("web").containers(&["app", "sidecar"]).init_containers(&["init"]);
    workload = workload.uses("init", ConfigMap, "c", Vol);
    // Mount the same volume in the sidecar as well.
    let mut spec = spec_of(&workload).clone();
    let mount = spec.init_containers.as_ref().unwrap()[0].volume_mounts.clone();
    spec.containers[1].volume_mounts = mount;
    assert_eq!(discover_references(&spec), [reference(ConfigMap, "c", Vol, Some(Regular(1)))]);
}

#[test]
fn unnamed_sources_are_skipped() {
    let spec = PodSpec {
        containers: vec![],
        volumes: Some(vec![
            Volume {
                name: "empty".into(),
                config_map: Some(ConfigMapVolumeSource { name: String::new(), ..Default::default() }),
                ..Default::default()
            },
            Volume {
                name: "csi-without-class".into(),
                csi: Some(CSIVolumeSource { driver: "other.csi".into(), ..Default::default() }),
                ..Default::default()
            },
        ]),
        ..Default::default()
    };
    assert_eq!(discover_references(&spec), []);
}

/// Stakater v1.4.21's `getContainerUsingResource`, case by case: the first volume holding the
/// resource decides (its first regular mounter, else `containers[0]` when an init container
/// mounts it), then env references (first regular user, else `containers[0]` for an init user),
/// then `containers[0]` for an explicit rule and nothing for auto/search rules.
#[test]
fn marker_container_choice() {
    use NoMarkerContainer::{NoContainers, Unused};
    const EXPLICIT: bool = false;
    const AUTO: bool = true;
    let three = || deployment("web").containers(&["a", "b", "c"]).init_containers(&["init"]);
    type Case = (&'static str, TestWorkload, ResourceKind, bool, Result<u16, NoMarkerContainer>);
    let cases: Vec<Case> = vec![
        ("the container mounting the volume", three().uses("c", ConfigMap, "x", Vol), ConfigMap, AUTO, Ok(2)),
        (
            "a projected volume counts as mounting",
            three().uses("b", Secret, "x", Projected),
            Secret,
            AUTO,
            Ok(1),
        ),
        (
            "a CSI volume counts as mounting",
            three().uses("b", SecretProviderClass, "x", Csi),
            SecretProviderClass,
            AUTO,
            Ok(1),
        ),
        (
            "a mount beats an earlier env user",
            three().uses("a", ConfigMap, "x", EnvFrom).uses("c", ConfigMap, "x", Vol),
            ConfigMap,
            AUTO,
            Ok(2),
        ),
        (
            "the first of two env users",
            three().uses("c", Secret, "x", EnvFrom).uses("b", Secret, "x", EnvValueFrom),
            Secret,
            AUTO,
            Ok(1),
        ),
        (
            "two volumes for the same ConfigMap: the first volume's mounter, not the first container",
            three().uses("c", ConfigMap, "x", Vol).uses("b", ConfigMap, "x", Vol),
            ConfigMap,
            AUTO,
            Ok(2),
        ),
        (
            "an init-container-only env reference: containers[0]",
            three().uses("init", ConfigMap, "x", EnvFrom),
            ConfigMap,
            AUTO,
            Ok(0),
        ),
        ("an init-only volume: containers[0]", three().uses("init", Secret, "x", Vol), Secret, AUTO, Ok(0)),
        (
            "a volume mounted only by an init container beats a regular env user: containers[0]",
            three().uses("init", ConfigMap, "x", Vol).uses("b", ConfigMap, "x", EnvFrom),
            ConfigMap,
            AUTO,
            Ok(0),
        ),
        (
            "a regular env user beats an earlier init env user",
            three().uses("init", ConfigMap, "x", EnvFrom).uses("c", ConfigMap, "x", EnvValueFrom),
            ConfigMap,
            AUTO,
            Ok(2),
        ),
        (
            "auto, a volume no container mounts: none",
            three().uses("", ConfigMap, "x", Vol),
            ConfigMap,
            AUTO,
            Err(Unused),
        ),
        (
            "explicit, a volume no container mounts: containers[0]",
            three().uses("", ConfigMap, "x", Vol),
            ConfigMap,
            EXPLICIT,
            Ok(0),
        ),
        (
            "auto, first matching volume unmounted, a later one mounted: none",
            three().uses("", ConfigMap, "x", Vol).uses("c", ConfigMap, "x", Vol),
            ConfigMap,
            AUTO,
            Err(Unused),
        ),
        (
            "explicit, first matching volume unmounted, a later one mounted: containers[0]",
            three().uses("", ConfigMap, "x", Vol).uses("c", ConfigMap, "x", Vol),
            ConfigMap,
            EXPLICIT,
            Ok(0),
        ),
        (
            "first matching volume unmounted: an env user still counts",
            three().uses("", Secret, "x", Vol).uses("c", Secret, "x", EnvFrom),
            Secret,
            AUTO,
            Ok(2),
        ),
        (
            "first matching volume mounted by an init container, a later one by a regular one: containers[0]",
            three().uses("init", ConfigMap, "x", Vol).uses("c", ConfigMap, "x", Vol),
            ConfigMap,
            AUTO,
            Ok(0),
        ),
        (
            "a volume of the other kind with the same name does not count",
            three().uses("c", Secret, "x", Vol).uses("b", ConfigMap, "x", EnvFrom),
            ConfigMap,
            AUTO,
            Ok(1),
        ),
        (
            "explicit, no reference: containers[0]",
            three().uses("c", ConfigMap, "x", EnvFrom),
            Secret,
            EXPLICIT,
            Ok(0),
        ),
        ("auto, no reference: none", three().uses("c", ConfigMap, "x", EnvFrom), Secret, AUTO, Err(Unused)),
        (
            "no regular containers, init reference",
            deployment("web")
                .containers(&[])
                .init_containers(&["init"])
                .uses("init", ConfigMap, "x", EnvFrom),
            ConfigMap,
            AUTO,
            Err(NoContainers),
        ),
        (
            "no regular containers, explicit",
            deployment("web").containers(&[]).init_containers(&["init"]),
            ConfigMap,
            EXPLICIT,
            Err(NoContainers),
        ),
    ];
    for (name, workload, kind, auto_rule, want) in cases {
        let spec = spec_of(&workload);
        let refs = discover_references(spec);
        assert_eq!(marker_container(&refs, spec.containers.len(), kind, "x", auto_rule), want, "{name}");
    }
}

#[test]
fn references_resource_sees_init_containers_and_kinds() {
    let workload = deployment("web").init_containers(&["init"]).uses("init", ConfigMap, "x", EnvFrom);
    let refs = discover_references(spec_of(&workload));
    assert!(references_resource(&refs, ConfigMap, "x"));
    assert!(!references_resource(&refs, Secret, "x"));
    assert!(!references_resource(&refs, ConfigMap, "y"));
}
