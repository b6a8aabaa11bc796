//! docs/compatibility.md §4.4 on the real control plane: the container that gets the marker is
//! the one Stakater v1.4.21 picks, in the four pod specs where a "first container using it" rule
//! would differ (a volume mounted only by an init container beside a regular env user; two
//! volumes for the same ConfigMap; a volume no container mounts; the first matching volume
//! unmounted and a later one mounted). One table, every rolling kind, both strategies (the
//! annotation names the container too).
//!
//! Build the binary first: `cargo build -p reloader-cli`.

use reloader_tests::fixtures::*;

/// `spec` without any container mounting the volume `volume` (the volume itself stays).
fn unmount(spec: WorkloadSpec, volume: &str) -> WorkloadSpec {
    let mut pod = spec.template().spec.expect("a workload spec has a pod spec");
    for container in pod.containers.iter_mut().chain(pod.init_containers.iter_mut().flatten()) {
        if let Some(mounts) = container.volume_mounts.as_mut() {
            mounts.retain(|mount| mount.name != volume);
        }
    }
    spec.pod_spec(pod)
}

fn auto() -> WorkloadSpec {
    WorkloadSpec::base().metadata_annotation(ANNOTATION_AUTO, "true")
}

fn explicit(config: &ResourceRef) -> WorkloadSpec {
    WorkloadSpec::base().metadata_annotation(ANNOTATION_CONFIGMAP_RELOAD, &config.name)
}

fn table() -> Vec<Case> {
    let config = |id: &str| ResourceRef::configmap(format!("{id}-cm"));
    let mut cases = Vec::new();

    // A volume mounted only by an init container, and an env reference in containers[1]: the
    // volume decides, and an init mount means containers[0].
    let c = config("cc-init-vol");
    let spec =
        auto().containers(2).init_configmap_volume(&c.name).in_container(1).env_from_configmap(&c.name);
    cases
        .push(Case::new("cc-init-vol").seed(&c).workload(spec).phase(Phase::new().update(&c).reloads(&c, 0)));

    // Two volumes for the same ConfigMap, the first mounted by containers[2], the second by
    // containers[1]: the first volume decides.
    let c = config("cc-two-vols");
    let spec = auto().in_container(2).configmap_volume(&c.name).in_container(1).configmap_volume(&c.name);
    cases
        .push(Case::new("cc-two-vols").seed(&c).workload(spec).phase(Phase::new().update(&c).reloads(&c, 2)));

    // Its only volume mounted by no container: auto has no container and does not reload; an
    // explicit reload goes on containers[0].
    let c = config("cc-unmounted-auto");
    let spec = unmount(auto().containers(2).in_container(1).configmap_volume(&c.name), "vol-0");
    cases.push(
        Case::new("cc-unmounted-auto").seed(&c).workload(spec).phase(Phase::new().update(&c).unchanged()),
    );
    let c = config("cc-unmounted-expl");
    let spec = unmount(explicit(&c).containers(2).in_container(1).configmap_volume(&c.name), "vol-0");
    cases.push(
        Case::new("cc-unmounted-expl").seed(&c).workload(spec).phase(Phase::new().update(&c).reloads(&c, 0)),
    );

    // The first matching volume unmounted, a later one mounted by containers[1]: later volumes
    // are not looked at, so auto does not reload and explicit goes on containers[0].
    let c = config("cc-first-unm-auto");
    let spec = auto().containers(2).configmap_volume(&c.name).in_container(1).configmap_volume(&c.name);
    let spec = unmount(spec, "vol-0");
    cases.push(
        Case::new("cc-first-unm-auto").seed(&c).workload(spec).phase(Phase::new().update(&c).unchanged()),
    );
    let c = config("cc-first-unm-expl");
    let spec = explicit(&c).containers(2).configmap_volume(&c.name).in_container(1).configmap_volume(&c.name);
    let spec = unmount(spec, "vol-0");
    cases.push(
        Case::new("cc-first-unm-expl").seed(&c).workload(spec).phase(Phase::new().update(&c).reloads(&c, 0)),
    );

    // The order of precedence around them: a regular mount beats an earlier regular env user,
    // and a regular env user beats an init container's env reference.
    let c = config("cc-mount-first");
    let spec = auto().containers(3).env_from_configmap(&c.name).in_container(2).configmap_volume(&c.name);
    cases.push(
        Case::new("cc-mount-first").seed(&c).workload(spec).phase(Phase::new().update(&c).reloads(&c, 2)),
    );
    let c = config("cc-env-over-init");
    let spec =
        auto().containers(2).init_env_from_configmap(&c.name).in_container(1).env_from_configmap(&c.name);
    cases.push(
        Case::new("cc-env-over-init").seed(&c).workload(spec).phase(Phase::new().update(&c).reloads(&c, 1)),
    );
    cases
}

#[tokio::test]
async fn the_marker_goes_on_stakaters_container_env_vars() {
    let env = TestEnv::new().await;
    Table::new(Strategy::EnvVars).cases(table()).run(&env).await;
}

#[tokio::test]
async fn the_marker_goes_on_stakaters_container_annotations() {
    let env = TestEnv::new().await;
    Table::new(Strategy::Annotations).cases(table()).run(&env).await;
}
