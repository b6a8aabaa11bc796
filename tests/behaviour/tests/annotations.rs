//! docs/behaviour.md §A (annotations and references, A1–A19), on the real control plane with the
//! real reloader binary: one table of cases, each created as every rolling kind (Deployment,
//! DaemonSet, StatefulSet, Argo Rollout, DeploymentConfig), run once per strategy. Case ids
//! start with the scenario number.

use reloader_tests::fixtures::*;

/// §A as data.
fn table_a() -> Vec<Case> {
    let mut cases = vec![a01_explicit_configmap(), a02_explicit_secret()];
    cases.extend(a03_a04_auto_each_reference());
    cases.extend(a05_metadata_only_changes());
    cases.extend([
        a06_no_annotation(),
        a07_auto_false(),
        a08_auto_unreferenced(),
        a09_explicit_unreferenced(),
    ]);
    cases.extend(a10_typed_auto());
    cases.extend([a11_auto_and_explicit(), a12_explicit_list(), a12_explicit_regex(), a13_invalid_regex()]);
    cases.extend(a14_exclude());
    cases.extend([a15_search_and_match(), a15_search_without_match(), a16_ignored_resource()]);
    cases.extend(a17_template_annotations());
    cases.extend([a18_several_resources_sequential_updates()]);
    cases.extend(a19_multi_container());
    cases
}

/// §A1: explicit ConfigMap annotation + envFrom reference: update data → reloads.
fn a01_explicit_configmap() -> Case {
    let config = ResourceRef::configmap("a01-cm");
    Case::new("a01-explicit-cm")
        .seed(&config)
        .workload(
            WorkloadSpec::base()
                .metadata_annotation(ANNOTATION_CONFIGMAP_RELOAD, &config.name)
                .env_from_configmap(&config.name),
        )
        .phase(Phase::new().update(&config).reloads(&config, 0))
}

/// §A2: explicit Secret annotation + envFrom reference: update data → reloads.
fn a02_explicit_secret() -> Case {
    let secret = ResourceRef::secret("a02-secret");
    Case::new("a02-explicit-secret")
        .seed(&secret)
        .workload(
            WorkloadSpec::base()
                .metadata_annotation(ANNOTATION_SECRET_RELOAD, &secret.name)
                .env_from_secret(&secret.name),
        )
        .phase(Phase::new().update(&secret).reloads(&secret, 0))
}

/// §A3 and §A4: `auto: "true"`, the resource referenced by a volume, a projected volume, a key
/// reference, envFrom, an init container's envFrom, an init container's volume → each reloads
/// (init-only references put the marker on `containers[0]`).
fn a03_a04_auto_each_reference() -> Vec<Case> {
    let mut cases = Vec::new();
    for (scenario, kind) in [("a03-cm", ResourceKind::ConfigMap), ("a04-secret", ResourceKind::Secret)] {
        for via in Via::SCENARIO_SIX {
            let id = format!("{scenario}-{}", via.short());
            let resource = ResourceRef::new(kind, format!("{id}-res"));
            cases.push(
                Case::new(id)
                    .seed(&resource)
                    .workload(WorkloadSpec::base().metadata_annotation(ANNOTATION_AUTO, "true").reference(
                        kind,
                        &resource.name,
                        via,
                    ))
                    .phase(Phase::new().update(&resource).reloads(&resource, 0)),
            );
        }
    }
    cases
}

/// §A5: only labels or annotations of the ConfigMap/Secret change → no reload (then a data change
/// of the same resource does reload: the workload was watched all along).
fn a05_metadata_only_changes() -> Vec<Case> {
    [
        ("a05-cm-meta", ResourceRef::configmap("a05-cm")),
        ("a05-secret-meta", ResourceRef::secret("a05-secret")),
    ]
    .into_iter()
    .map(|(id, resource)| {
        Case::new(id)
            .seed(&resource)
            .workload(WorkloadSpec::base().metadata_annotation(ANNOTATION_AUTO, "true").reference(
                resource.kind,
                &resource.name,
                Via::EnvFrom,
            ))
            .phase(Phase::new().update_metadata(&resource).unchanged())
            .phase(Phase::new().update(&resource).reloads(&resource, 0))
    })
    .collect()
}

/// §A6: no reloader annotation at all → no reload.
fn a06_no_annotation() -> Case {
    let config = ResourceRef::configmap("a06-cm");
    Case::new("a06-no-annotation")
        .seed(&config)
        .workload(WorkloadSpec::base().env_from_configmap(&config.name).configmap_volume(&config.name))
        .phase(Phase::new().update(&config).unchanged())
}

/// §A7: `auto: "false"` → no reload.
fn a07_auto_false() -> Case {
    let config = ResourceRef::configmap("a07-cm");
    Case::new("a07-auto-false")
        .seed(&config)
        .workload(
            WorkloadSpec::base()
                .metadata_annotation(ANNOTATION_AUTO, "false")
                .env_from_configmap(&config.name),
        )
        .phase(Phase::new().update(&config).unchanged())
}

/// §A8: `auto: "true"` on a workload that does not reference the changed resource → no reload;
/// a change of the resource it does reference reloads it.
fn a08_auto_unreferenced() -> Case {
    let other = ResourceRef::configmap("a08-other-cm");
    let used = ResourceRef::configmap("a08-used-cm");
    Case::new("a08-auto-unreferenced")
        .seed(&other)
        .seed(&used)
        .workload(
            WorkloadSpec::base().metadata_annotation(ANNOTATION_AUTO, "true").env_from_configmap(&used.name),
        )
        .phase(Phase::new().update(&other).unchanged())
        .phase(Phase::new().update(&used).reloads(&used, 0))
}

/// §A9: explicit annotation naming a resource the workload does not reference → reloads, marker on
/// `containers[0]` (two containers, neither referencing it).
fn a09_explicit_unreferenced() -> Case {
    let secret = ResourceRef::secret("a09-secret");
    Case::new("a09-explicit-unreferenced")
        .seed(&secret)
        .workload(
            WorkloadSpec::base().containers(2).metadata_annotation(ANNOTATION_SECRET_RELOAD, &secret.name),
        )
        .phase(Phase::new().update(&secret).reloads(&secret, 0))
}

/// §A10: typed auto: `configmap.../auto` reloads on ConfigMap changes only; `secret.../auto` on
/// Secret changes only. Each workload references one of each.
fn a10_typed_auto() -> Vec<Case> {
    let mut cases = Vec::new();
    for (id, annotation, reloading) in [
        ("a10-cm-typed", ANNOTATION_CONFIGMAP_AUTO, ResourceKind::ConfigMap),
        ("a10-secret-typed", ANNOTATION_SECRET_AUTO, ResourceKind::Secret),
    ] {
        let config = ResourceRef::configmap(format!("{id}-cm"));
        let secret = ResourceRef::secret(format!("{id}-secret"));
        let (reloads, ignored) =
            if reloading == ResourceKind::ConfigMap { (&config, &secret) } else { (&secret, &config) };
        cases.push(
            Case::new(id)
                .seed(&config)
                .seed(&secret)
                .workload(
                    WorkloadSpec::base()
                        .metadata_annotation(annotation, "true")
                        .env_from_configmap(&config.name)
                        .secret_volume(&secret.name),
                )
                .phase(Phase::new().update(ignored).unchanged())
                .phase(Phase::new().update(reloads).reloads(reloads, 0)),
        );
    }
    cases
}

/// §A11: `auto` and explicit annotations together → both kinds of change reload.
fn a11_auto_and_explicit() -> Case {
    let referenced = ResourceRef::configmap("a11-cm");
    let listed = ResourceRef::secret("a11-secret");
    Case::new("a11-auto-and-explicit")
        .seed(&referenced)
        .seed(&listed)
        .workload(
            WorkloadSpec::base()
                .metadata_annotation(ANNOTATION_AUTO, "true")
                .metadata_annotation(ANNOTATION_SECRET_RELOAD, &listed.name)
                .env_from_configmap(&referenced.name),
        )
        .phase(Phase::new().update(&referenced).reloads(&referenced, 0))
        .phase(Phase::new().update(&listed).reloads(&listed, 0))
}

/// §A12: an explicit list with several names (spaces around entries are trimmed): each reloads.
fn a12_explicit_list() -> Case {
    let first = ResourceRef::configmap("a12-first");
    let second = ResourceRef::configmap("a12-second");
    Case::new("a12-list")
        .seed(&first)
        .seed(&second)
        .workload(
            WorkloadSpec::base()
                .metadata_annotation(ANNOTATION_CONFIGMAP_RELOAD, "a12-first, a12-second")
                .env_from_configmap(&first.name)
                .env_from_configmap(&second.name),
        )
        .phase(Phase::new().update(&first).reloads(&first, 0))
        .phase(Phase::new().update(&second).reloads(&second, 0))
}

/// §A12: regular expressions, anchored: `a12-app-config-.*` matches `a12-app-config-1`, not
/// `a12-other-config` nor `x-a12-app-config-1`.
fn a12_explicit_regex() -> Case {
    let matching = ResourceRef::configmap("a12-app-config-1");
    let other = ResourceRef::configmap("a12-other-config");
    let prefixed = ResourceRef::configmap("x-a12-app-config-1");
    Case::new("a12-regex")
        .seed(&matching)
        .seed(&other)
        .seed(&prefixed)
        .workload(WorkloadSpec::base().metadata_annotation(ANNOTATION_CONFIGMAP_RELOAD, "a12-app-config-.*"))
        .phase(Phase::new().update(&other).update(&prefixed).unchanged())
        .phase(Phase::new().update(&matching).reloads(&matching, 0))
}

const A13_INVALID_ENTRY: &str = "a13-[unclosed";

/// §A13: an invalid regular expression entry beside valid ones → the valid ones still reload (the
/// single warning is checked on the log by the test).
fn a13_invalid_regex() -> Case {
    let valid = ResourceRef::configmap("a13-valid");
    Case::new("a13-invalid-regex")
        .seed(&valid)
        .workload(
            WorkloadSpec::base()
                .metadata_annotation(ANNOTATION_CONFIGMAP_RELOAD, format!("{A13_INVALID_ENTRY},a13-val.*"))
                .env_from_configmap(&valid.name),
        )
        .phase(Phase::new().update(&valid).reloads(&valid, 0))
}

/// §A14: exclude annotation: the excluded resource → no reload, another referenced one → reload.
fn a14_exclude() -> Vec<Case> {
    [
        ("a14-cm-exclude", ResourceKind::ConfigMap, ANNOTATION_CONFIGMAP_EXCLUDE),
        ("a14-secret-exclude", ResourceKind::Secret, ANNOTATION_SECRET_EXCLUDE),
    ]
    .into_iter()
    .map(|(id, kind, annotation)| {
        let excluded = ResourceRef::new(kind, format!("{id}-excluded"));
        let kept = ResourceRef::new(kind, format!("{id}-kept"));
        Case::new(id)
            .seed(&excluded)
            .seed(&kept)
            .workload(
                WorkloadSpec::base()
                    .metadata_annotation(ANNOTATION_AUTO, "true")
                    .metadata_annotation(annotation, &excluded.name)
                    .reference(kind, &excluded.name, Via::EnvFrom)
                    .reference(kind, &kept.name, Via::Volume),
            )
            .phase(Phase::new().update(&excluded).unchanged())
            .phase(Phase::new().update(&kept).reloads(&kept, 0))
    })
    .collect()
}

/// §A15: search on the workload + match on the resource → reloads; match without search → no
/// reload: two workloads share the matching ConfigMap, only the one with search reloads.
fn a15_search_and_match() -> Case {
    let shared = ResourceRef::configmap("a15-shared-cm");
    Case::new("a15-match")
        .seed_annotated(&shared, &[(ANNOTATION_MATCH, "true")])
        .workload(
            WorkloadSpec::base()
                .metadata_annotation(ANNOTATION_SEARCH, "true")
                .env_from_configmap(&shared.name),
        )
        .workload_as("plain", WorkloadSpec::base().env_from_configmap(&shared.name))
        .phase(Phase::new().update(&shared).reloads(&shared, 0).unchanged_as("plain"))
}

/// §A15: search without match on the resource → no reload.
fn a15_search_without_match() -> Case {
    let unmatched = ResourceRef::configmap("a15-unmatched-cm");
    Case::new("a15-search-no-match")
        .seed(&unmatched)
        .workload(
            WorkloadSpec::base()
                .metadata_annotation(ANNOTATION_SEARCH, "true")
                .env_from_configmap(&unmatched.name),
        )
        .phase(Phase::new().update(&unmatched).unchanged())
}

/// §A16: `ignore: "true"` on the resource → no reload even with an explicit annotation.
fn a16_ignored_resource() -> Case {
    let ignored = ResourceRef::secret("a16-ignored");
    Case::new("a16-ignore")
        .seed_annotated(&ignored, &[(ANNOTATION_IGNORE, "true")])
        .workload(
            WorkloadSpec::base()
                .metadata_annotation(ANNOTATION_SECRET_RELOAD, &ignored.name)
                .metadata_annotation(ANNOTATION_AUTO, "true")
                .env_from_secret(&ignored.name),
        )
        .phase(Phase::new().update(&ignored).unchanged())
}

/// §A17: annotations only on the pod template (explicit, auto, typed auto, exclude, search) → honoured.
fn a17_template_annotations() -> Vec<Case> {
    let explicit = ResourceRef::configmap("a17-explicit-cm");
    let auto = ResourceRef::secret("a17-auto-secret");
    let typed_used = ResourceRef::secret("a17-typed-secret");
    let typed_other = ResourceRef::configmap("a17-typed-cm");
    let excluded = ResourceRef::configmap("a17-excluded-cm");
    let kept = ResourceRef::configmap("a17-kept-cm");
    let matched = ResourceRef::configmap("a17-matched-cm");
    vec![
        Case::new("a17-tpl-explicit")
            .seed(&explicit)
            .workload(
                WorkloadSpec::base()
                    .template_annotation(ANNOTATION_CONFIGMAP_RELOAD, &explicit.name)
                    .configmap_volume(&explicit.name),
            )
            .phase(Phase::new().update(&explicit).reloads(&explicit, 0)),
        Case::new("a17-tpl-auto")
            .seed(&auto)
            .workload(
                WorkloadSpec::base().template_annotation(ANNOTATION_AUTO, "true").secret_key_ref(&auto.name),
            )
            .phase(Phase::new().update(&auto).reloads(&auto, 0)),
        Case::new("a17-tpl-typed")
            .seed(&typed_used)
            .seed(&typed_other)
            .workload(
                WorkloadSpec::base()
                    .template_annotation(ANNOTATION_SECRET_AUTO, "true")
                    .env_from_secret(&typed_used.name)
                    .env_from_configmap(&typed_other.name),
            )
            .phase(Phase::new().update(&typed_other).unchanged())
            .phase(Phase::new().update(&typed_used).reloads(&typed_used, 0)),
        Case::new("a17-tpl-exclude")
            .seed(&excluded)
            .seed(&kept)
            .workload(
                WorkloadSpec::base()
                    .template_annotation(ANNOTATION_AUTO, "true")
                    .template_annotation(ANNOTATION_CONFIGMAP_EXCLUDE, &excluded.name)
                    .env_from_configmap(&excluded.name)
                    .env_from_configmap(&kept.name),
            )
            .phase(Phase::new().update(&excluded).unchanged())
            .phase(Phase::new().update(&kept).reloads(&kept, 0)),
        Case::new("a17-tpl-search")
            .seed_annotated(&matched, &[(ANNOTATION_MATCH, "true")])
            .workload(
                WorkloadSpec::base()
                    .template_annotation(ANNOTATION_SEARCH, "true")
                    .projected_configmap(&matched.name),
            )
            .phase(Phase::new().update(&matched).reloads(&matched, 0)),
    ]
}

/// §A18: several ConfigMaps/Secrets per workload: each change reloads again; sequential updates of
/// the same one each reload.
fn a18_several_resources_sequential_updates() -> Case {
    let first = ResourceRef::configmap("a18-first-cm");
    let second = ResourceRef::configmap("a18-second-cm");
    let secret = ResourceRef::secret("a18-secret");
    Case::new("a18-several")
        .seed(&first)
        .seed(&second)
        .seed(&secret)
        .workload(
            WorkloadSpec::base()
                .metadata_annotation(ANNOTATION_AUTO, "true")
                .env_from_configmap(&first.name)
                .configmap_volume(&second.name)
                .secret_key_ref(&secret.name),
        )
        .phase(Phase::new().update(&first).reloads(&first, 0))
        .phase(Phase::new().update(&secret).reloads(&secret, 0))
        .phase(Phase::new().update(&second).reloads(&second, 0))
        .phase(Phase::new().update(&first).reloads(&first, 0))
}

/// §A19: multi-container: the marker goes to the container that uses the resource (a volume mount
/// wins over an env reference in an earlier container); a resource used by two containers → one
/// marker, on the first.
fn a19_multi_container() -> Vec<Case> {
    let second_only = ResourceRef::configmap("a19-second-cm");
    let mounted = ResourceRef::secret("a19-mounted-secret");
    let both = ResourceRef::configmap("a19-both-cm");
    vec![
        Case::new("a19-second")
            .seed(&second_only)
            .workload(
                WorkloadSpec::base()
                    .metadata_annotation(ANNOTATION_AUTO, "true")
                    .in_container(2)
                    .env_from_configmap(&second_only.name),
            )
            .phase(Phase::new().update(&second_only).reloads(&second_only, 2)),
        Case::new("a19-mount-wins")
            .seed(&mounted)
            .workload(
                WorkloadSpec::base()
                    .metadata_annotation(ANNOTATION_AUTO, "true")
                    .env_from_secret(&mounted.name)
                    .in_container(1)
                    .secret_volume(&mounted.name),
            )
            .phase(Phase::new().update(&mounted).reloads(&mounted, 1)),
        Case::new("a19-both")
            .seed(&both)
            .workload(
                WorkloadSpec::base()
                    .metadata_annotation(ANNOTATION_AUTO, "true")
                    .env_from_configmap(&both.name)
                    .in_container(1)
                    .env_from_configmap(&both.name),
            )
            .phase(Phase::new().update(&both).reloads(&both, 0)),
    ]
}

/// §A13: the invalid entry is reported once per workload (not again when its own reload changes
/// the template), and names the entry.
fn assert_one_warning_per_workload(run: &TableRun) {
    let log = run.reloader.log_text();
    for workload in run.workloads.iter().filter(|w| w.name.starts_with("a13-")) {
        let warnings = log
            .lines()
            .filter(|line| {
                line.contains("annotation problem") && line.contains(&format!("/{}", workload.name))
            })
            .collect::<Vec<_>>();
        assert_eq!(warnings.len(), 1, "{workload}: expected one warning, got {warnings:#?}");
        assert!(warnings[0].contains(A13_INVALID_ENTRY), "{}", warnings[0]);
    }
}

async fn run_section_a(strategy: Strategy) {
    let env = TestEnv::new().await;
    let started = std::time::Instant::now();
    let run = Table::new(strategy).cases(table_a()).run(&env).await;
    assert_one_warning_per_workload(&run);
    eprintln!(
        "§A under {strategy}: {} workloads in {:?} (longest reload latency {:?})",
        run.workloads.len(),
        started.elapsed(),
        run.max_latency
    );
}

#[tokio::test]
async fn section_a_annotations_and_references_env_vars() {
    run_section_a(Strategy::EnvVars).await;
}

#[tokio::test]
async fn section_a_annotations_and_references_annotations() {
    run_section_a(Strategy::Annotations).await;
}
