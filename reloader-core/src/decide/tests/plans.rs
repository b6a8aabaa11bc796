//! docs/behaviour.md §B 20-26: which marker change an event calls for, and when none is needed.

use super::*;
use crate::annotations::AnnotationKeys;
use crate::hash::configmap_hash;
use crate::markers::annotation_marker_value;

struct PlanCase {
    name: &'static str,
    workload: TestWorkload,
    resource: ResourceView,
    event: ResourceEventKind,
    strategy: ReloadStrategy,
    want: Result<MarkerAction, SkipReason>,
}

/// What Stakater Reloader writes for ConfigMap `my-cm` holding `test.url: www.stakater.com`.
const STAKATER_HASH: &str = "3c9a892aeaedc759abc3df9884a37b8be5680382";
const STAKATER_ANNOTATION: &str = concat!(
    r#"{"type":"CONFIGMAP","name":"my-cm","namespace":"default","#,
    r#""hash":"3c9a892aeaedc759abc3df9884a37b8be5680382","containerRefs":["app"],"observedAt":1723000000}"#
);

/// The workload with an annotation marker for `resource` at `hash`.
fn marked(
    workload: TestWorkload,
    resource: &ResourceView,
    hash: ContentHash,
    container: &str,
) -> TestWorkload {
    let value = annotation_marker_value(&resource.key, &hash, container, 1);
    workload.annotate_template(LAST_RELOADED_FROM, &value)
}

fn plan_cases() -> Vec<PlanCase> {
    use MarkerAction::{Remove, Set};
    use ReloadStrategy::{Annotations, EnvVars};
    use ResourceEventKind::{Created, Deleted, Updated};
    use SkipReason::AlreadyCurrent;
    let env = "STAKATER_MY_CM_CONFIGMAP";
    let web = || deployment("web").annotate(AUTO, "true").uses_cm("app", "my-cm", EnvFrom);
    let current = cm("my-cm");
    let new = cm("my-cm").with_hash(hash("v2"));
    let old = current.hash.to_hex();
    let stakater = cm("my-cm").with_hash(configmap_hash([("test.url", "www.stakater.com")], []));
    let case = |name, workload, resource: &ResourceView, event, strategy, want| PlanCase {
        name,
        workload,
        resource: resource.clone(),
        event,
        strategy,
        want,
    };
    vec![
        // §B 20, 21
        case("B20 env-vars update", web(), &new, Updated, EnvVars, Ok(Set(new.hash))),
        case(
            "B20 env-vars over an old marker",
            web().env("app", env, &old),
            &new,
            Updated,
            EnvVars,
            Ok(Set(new.hash)),
        ),
        case("B21 annotations update", web(), &new, Updated, Annotations, Ok(Set(new.hash))),
        // §B 22, 23: idempotence.
        case(
            "B22 env-vars marker current",
            web().env("app", env, &old),
            &current,
            Updated,
            EnvVars,
            Err(AlreadyCurrent),
        ),
        case(
            "B22 annotation current, other observedAt and containerRefs",
            marked(web(), &current, current.hash, "elsewhere"),
            &current,
            Updated,
            Annotations,
            Err(AlreadyCurrent),
        ),
        case(
            "B22 annotation for another resource",
            marked(web(), &cm("other"), current.hash, "app"),
            &current,
            Updated,
            Annotations,
            Ok(Set(current.hash)),
        ),
        case(
            "B22 an env marker does not count for the annotations strategy",
            web().env("app", env, &old),
            &current,
            Updated,
            Annotations,
            Ok(Set(current.hash)),
        ),
        case(
            "B23 env marker written by Stakater for the current data",
            web().env("app", env, STAKATER_HASH),
            &stakater,
            Updated,
            EnvVars,
            Err(AlreadyCurrent),
        ),
        case(
            "B23 annotation written by Stakater for the current data",
            web().annotate_template(LAST_RELOADED_FROM, STAKATER_ANNOTATION),
            &stakater,
            Updated,
            Annotations,
            Err(AlreadyCurrent),
        ),
        // §B 24, 26: create.
        case("B24 create", web(), &current, Created, EnvVars, Ok(Set(current.hash))),
        case(
            "B26 create, already current",
            web().env("app", env, &old),
            &current,
            Created,
            EnvVars,
            Err(AlreadyCurrent),
        ),
        // §B 25: delete.
        case(
            "B25 env-vars delete removes the marker",
            web().env("app", env, &old),
            &current,
            Deleted,
            EnvVars,
            Ok(Remove),
        ),
        case(
            "B25 env-vars delete, no marker: nothing",
            web(),
            &current,
            Deleted,
            EnvVars,
            Err(AlreadyCurrent),
        ),
        case("B25 annotations delete", web(), &current, Deleted, Annotations, Ok(Set(DELETE_MARKER_HASH))),
        case(
            "B25 annotations delete, already recorded",
            marked(web(), &current, DELETE_MARKER_HASH, "app"),
            &current,
            Deleted,
            Annotations,
            Err(AlreadyCurrent),
        ),
        case(
            "delete, not selected",
            deployment("web"),
            &current,
            Deleted,
            EnvVars,
            Err(SkipReason::NotAnnotated),
        ),
        case(
            "update, ignored",
            web(),
            &new.clone().ignored(),
            Updated,
            EnvVars,
            Err(SkipReason::ResourceIgnored),
        ),
    ]
}

#[test]
fn plans() {
    let mut failures = Vec::new();
    for case in plan_cases() {
        let opts = DecideOptions { strategy: case.strategy, ..DecideOptions::default() };
        let got = plan(&case.workload.view(), &case.resource, case.event, &opts);
        let want = case.want.map(|action| MarkerChange {
            resource: case.resource.key.clone(),
            action,
            strategy: case.strategy,
            container: 0,
        });
        if got != want {
            failures.push(format!("{}: got {got:?}, want {want:?}", case.name));
        }
    }
    assert!(failures.is_empty(), "{} failing cases:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn plan_targets_the_chosen_container() {
    let workload = deployment("web")
        .containers(&["app", "sidecar"])
        .annotate(SECRET_RELOAD, "s")
        .uses_secret("sidecar", "s", Volume)
        .view();
    let change = plan(&workload, &secret("s"), ResourceEventKind::Updated, &DecideOptions::default());
    assert_eq!(change.map(|c| c.container), Ok(1));
}

/// §A 18: each change reloads again, and once a change is applied it is not applied twice.
#[test]
fn sequential_updates_each_reload_once() {
    let opts = DecideOptions::default();
    let mut workload =
        deployment("web").annotate(CM_RELOAD, "a,b").uses_cm("app", "a", EnvFrom).uses_cm("app", "b", Volume);
    for (name, version) in [("a", "v2"), ("b", "v2"), ("a", "v3"), ("a", "v4")] {
        let resource = cm(name).with_hash(hash(version));
        let view = workload.view();
        let change = plan(&view, &resource, ResourceEventKind::Updated, &opts).expect("reloads");
        assert_eq!(change.action, MarkerAction::Set(resource.hash));
        // Apply it the way a backend would, then replay the event.
        let mut template = workload.template().clone();
        assert!(crate::markers::apply_to_template(&mut template, &[change], &AnnotationKeys::default(), 0));
        workload.deployment.spec.as_mut().unwrap().template = template;
        let replay = plan(&workload.view(), &resource, ResourceEventKind::Updated, &opts);
        assert_eq!(replay, Err(SkipReason::AlreadyCurrent), "{name} {version}");
    }
}

/// docs/beyond-stakater.md §12: a declared kind whose operator copies an annotations map to its
/// pods has no container and no references of its own; the reload annotations select it, and its
/// marker is the annotation one whatever the configured strategy, naming no container.
#[test]
fn an_annotations_map_takes_annotation_markers_from_the_reload_annotations() {
    use ReloadStrategy::{Annotations, EnvVars};
    let keys = AnnotationKeys::default();
    let new = cm("my-cm").with_hash(hash("v2"));
    let matched = ResourceView { matched: true, ..new.clone() };
    let explicit = || deployment("cluster").annotate(CM_RELOAD, "my-cm").annotations_map();
    // (case, workload, configured strategy, planned strategy or why not)
    let cases: Vec<(&str, TestWorkload, ReloadStrategy, Result<ReloadStrategy, SkipReason>)> = vec![
        ("explicit, env-vars configured", explicit(), EnvVars, Ok(Annotations)),
        ("explicit, annotations configured", explicit(), Annotations, Ok(Annotations)),
        (
            "auto: nothing to discover",
            deployment("c").annotate(AUTO, "true").annotations_map(),
            EnvVars,
            Err(SkipReason::NotReferenced),
        ),
        ("no annotation", deployment("c").annotations_map(), EnvVars, Err(SkipReason::NotAnnotated)),
        (
            "already recorded",
            marked(explicit(), &new, new.hash, ""),
            EnvVars,
            Err(SkipReason::AlreadyCurrent),
        ),
    ];
    let search = deployment("c").annotate(SEARCH, "true").annotations_map();
    let opts = DecideOptions { strategy: EnvVars, ..DecideOptions::default() };
    let planned = plan(&search.view(), &matched, ResourceEventKind::Updated, &opts).map(|c| c.strategy);
    assert_eq!(planned, Ok(Annotations), "search + match needs no reference in a pod spec");
    assert_eq!(plan(&search.view(), &new, ResourceEventKind::Updated, &opts), Err(SkipReason::NotAnnotated));
    for (name, workload, configured, want) in cases {
        let opts = DecideOptions { strategy: configured, ..DecideOptions::default() };
        let view = workload.view();
        assert!(view.annotations_only && view.containers.is_empty(), "{name}");
        let got = plan(&view, &new, ResourceEventKind::Updated, &opts);
        assert_eq!(got.as_ref().map(|c| c.strategy).map_err(|r| *r), want, "{name}");
        let Ok(change) = got else { continue };
        // Written as the backend would: the annotation, with no container named.
        let mut template = workload.template().clone();
        assert!(
            crate::markers::apply_to_template(&mut template, std::slice::from_ref(&change), &keys, 5),
            "{name}"
        );
        let value = crate::markers::template_annotation(&template, LAST_RELOADED_FROM).unwrap();
        assert!(value.contains(r#""containerRefs":[]"#), "{name}: {value}");
        assert!(
            crate::workload::checked_template(&workload, std::slice::from_ref(&change)).is_ok(),
            "{name}"
        );
        let mut after = workload.clone();
        after.deployment.spec.as_mut().unwrap().template = template;
        assert_eq!(
            plan(&after.view(), &new, ResourceEventKind::Updated, &opts),
            Err(SkipReason::AlreadyCurrent),
            "{name}"
        );
    }
}
