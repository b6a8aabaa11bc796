//! docs/compatibility.md §4.3 and docs/behaviour.md §A, one case per line of the catalogue that needs no cluster.

use super::*;

fn reload(rule: Rule, container: u16) -> Decision {
    Decision::Reload { rule, container }
}

fn skip(reason: SkipReason) -> Decision {
    Decision::Skip(reason)
}

const ALL: DecideOptions = DecideOptions {
    auto_reload_all: true,
    strategy: ReloadStrategy::EnvVars,
    allow_suspended_cronjobs: false,
};

struct Case {
    name: String,
    workload: TestWorkload,
    resource: ResourceView,
    opts: DecideOptions,
    want: Decision,
}

fn case(name: impl Into<String>, workload: TestWorkload, resource: ResourceView, want: Decision) -> Case {
    Case { name: name.into(), workload, resource, opts: DecideOptions::default(), want }
}

fn with_opts(mut case: Case, opts: DecideOptions) -> Case {
    case.opts = opts;
    case
}

fn decision_cases() -> Vec<Case> {
    let d = || deployment("web");
    let auto = || deployment("web").annotate(AUTO, "true");
    let vias = [
        ("volume", Volume, "app"),
        ("projected volume", Projected, "app"),
        ("keyRef", EnvValueFrom, "app"),
        ("envFrom", EnvFrom, "app"),
        ("init envFrom", EnvFrom, "init"),
        ("init volume", Volume, "init"),
    ];
    let mut cases = vec![
        // §A 1, 2
        case(
            "A1 explicit ConfigMap + envFrom",
            d().annotate(CM_RELOAD, "my-cm").uses_cm("app", "my-cm", EnvFrom),
            cm("my-cm"),
            reload(Rule::Explicit, 0),
        ),
        case(
            "A2 explicit Secret + envFrom",
            d().annotate(SECRET_RELOAD, "my-secret").uses_secret("app", "my-secret", EnvFrom),
            secret("my-secret"),
            reload(Rule::Explicit, 0),
        ),
        // §A 6, 7, 8, 9
        case(
            "A6 no annotation",
            d().uses_cm("app", "my-cm", EnvFrom),
            cm("my-cm"),
            skip(SkipReason::NotAnnotated),
        ),
        case(
            "A7 auto false",
            d().annotate(AUTO, "false").uses_cm("app", "my-cm", EnvFrom),
            cm("my-cm"),
            skip(SkipReason::AutoDisabled),
        ),
        case(
            "A8 auto true, not referenced",
            auto().uses_cm("app", "other", EnvFrom),
            cm("my-cm"),
            skip(SkipReason::NotReferenced),
        ),
        case(
            "A9 explicit, not referenced: containers[0]",
            d().containers(&["first", "second"]).annotate(CM_RELOAD, "my-cm"),
            cm("my-cm"),
            reload(Rule::Explicit, 0),
        ),
        // §A 10
        case(
            "A10 configmap typed auto, ConfigMap change",
            d().annotate(CM_AUTO, "true").uses_cm("app", "c", EnvFrom).uses_secret("app", "s", EnvFrom),
            cm("c"),
            reload(Rule::TypedAuto, 0),
        ),
        case(
            "A10 configmap typed auto, Secret change",
            d().annotate(CM_AUTO, "true").uses_cm("app", "c", EnvFrom).uses_secret("app", "s", EnvFrom),
            secret("s"),
            skip(SkipReason::NotAnnotated),
        ),
        case(
            "A10 secret typed auto, Secret change",
            d().annotate(SECRET_AUTO, "true").uses_cm("app", "c", EnvFrom).uses_secret("app", "s", Volume),
            secret("s"),
            reload(Rule::TypedAuto, 0),
        ),
        case(
            "A10 secret typed auto, ConfigMap change",
            d().annotate(SECRET_AUTO, "true").uses_cm("app", "c", EnvFrom).uses_secret("app", "s", Volume),
            cm("c"),
            skip(SkipReason::NotAnnotated),
        ),
        // §A 11
        case(
            "A11 auto + explicit: the explicit ConfigMap",
            auto().annotate(CM_RELOAD, "listed").uses_secret("app", "s", EnvFrom),
            cm("listed"),
            reload(Rule::Explicit, 0),
        ),
        case(
            "A11 auto + explicit: a referenced Secret",
            auto().annotate(CM_RELOAD, "listed").uses_secret("app", "s", EnvFrom),
            secret("s"),
            reload(Rule::Auto, 0),
        ),
        // §A 12
        case(
            "A12 several names: first",
            d().annotate(CM_RELOAD, "a, b ,app-config-.*"),
            cm("a"),
            reload(Rule::Explicit, 0),
        ),
        case(
            "A12 several names: second",
            d().annotate(CM_RELOAD, "a, b ,app-config-.*"),
            cm("b"),
            reload(Rule::Explicit, 0),
        ),
        case(
            "A12 pattern matches",
            d().annotate(CM_RELOAD, "a, b ,app-config-.*"),
            cm("app-config-1"),
            reload(Rule::Explicit, 0),
        ),
        case(
            "A12 pattern is anchored",
            d().annotate(CM_RELOAD, "a, b ,app-config-.*"),
            cm("other-config"),
            skip(SkipReason::NotAnnotated),
        ),
        case(
            "A12 pattern is anchored at the start",
            d().annotate(CM_RELOAD, "config-.*"),
            cm("app-config-1"),
            skip(SkipReason::NotAnnotated),
        ),
        case(
            "A12 names are not prefixes",
            d().annotate(CM_RELOAD, "app"),
            cm("app-config"),
            skip(SkipReason::NotAnnotated),
        ),
        case(
            "A12 ConfigMap list ignores Secrets",
            d().annotate(CM_RELOAD, "a"),
            secret("a"),
            skip(SkipReason::NotAnnotated),
        ),
        // §A 13
        case(
            "A13 invalid entry skipped, valid one applies",
            d().annotate(CM_RELOAD, "[, app-(, my-cm"),
            cm("my-cm"),
            reload(Rule::Explicit, 0),
        ),
        case(
            "A13 invalid entry selects nothing",
            d().annotate(CM_RELOAD, "[, my-cm"),
            cm("["),
            skip(SkipReason::NotAnnotated),
        ),
        // §A 14
        case(
            "A14 excluded resource",
            auto().annotate(CM_EXCLUDE, "a, other").uses_cm("app", "a", EnvFrom).uses_cm("app", "b", Volume),
            cm("a"),
            skip(SkipReason::Excluded),
        ),
        case(
            "A14 other referenced resource",
            auto().annotate(CM_EXCLUDE, "a, other").uses_cm("app", "a", EnvFrom).uses_cm("app", "b", Volume),
            cm("b"),
            reload(Rule::Auto, 0),
        ),
        case(
            "A14 exclude beats explicit",
            d().annotate(CM_RELOAD, "a").annotate(CM_EXCLUDE, "a"),
            cm("a"),
            skip(SkipReason::Excluded),
        ),
        case(
            "A14 exclude is per type",
            auto().annotate(SECRET_EXCLUDE, "a").uses_cm("app", "a", EnvFrom),
            cm("a"),
            reload(Rule::Auto, 0),
        ),
        case(
            "A14 exclude names are exact",
            auto().annotate(CM_EXCLUDE, "a.*").uses_cm("app", "ab", EnvFrom),
            cm("ab"),
            reload(Rule::Auto, 0),
        ),
        // §A 15
        case(
            "A15 search + match",
            d().annotate(SEARCH, "true").uses_cm("app", "c", EnvFrom),
            cm("c").matched(),
            reload(Rule::SearchMatch, 0),
        ),
        case(
            "A15 search without match",
            d().annotate(SEARCH, "true").uses_cm("app", "c", EnvFrom),
            cm("c"),
            skip(SkipReason::NotAnnotated),
        ),
        case(
            "A15 match without search",
            d().uses_cm("app", "c", EnvFrom),
            cm("c").matched(),
            skip(SkipReason::NotAnnotated),
        ),
        case(
            "A15 search must be exactly \"true\"",
            d().annotate(SEARCH, "True").uses_cm("app", "c", EnvFrom),
            cm("c").matched(),
            skip(SkipReason::NotAnnotated),
        ),
        case(
            "A15 search + match, not referenced",
            d().annotate(SEARCH, "true"),
            cm("c").matched(),
            skip(SkipReason::NotReferenced),
        ),
        // §A 16
        case(
            "A16 ignored resource, explicit",
            d().annotate(CM_RELOAD, "c").uses_cm("app", "c", EnvFrom),
            cm("c").ignored(),
            skip(SkipReason::ResourceIgnored),
        ),
        case(
            "A16 ignored resource, auto",
            auto().uses_cm("app", "c", EnvFrom),
            cm("c").ignored(),
            skip(SkipReason::ResourceIgnored),
        ),
        // §A 17
        case(
            "A17 template explicit",
            d().annotate_template(CM_RELOAD, "c"),
            cm("c"),
            reload(Rule::Explicit, 0),
        ),
        case(
            "A17 template auto",
            d().annotate_template(AUTO, "true").uses_cm("app", "c", EnvFrom),
            cm("c"),
            reload(Rule::Auto, 0),
        ),
        case(
            "A17 template typed auto",
            d().annotate_template(SECRET_AUTO, "true").uses_secret("app", "s", EnvFrom),
            secret("s"),
            reload(Rule::TypedAuto, 0),
        ),
        case(
            "A17 template exclude (fix)",
            d().annotate_template(AUTO, "true")
                .annotate_template(CM_EXCLUDE, "c")
                .uses_cm("app", "c", EnvFrom),
            cm("c"),
            skip(SkipReason::Excluded),
        ),
        case(
            "A17 template exclude beside metadata auto (fix)",
            auto().annotate_template(CM_EXCLUDE, "c").uses_cm("app", "c", EnvFrom),
            cm("c"),
            skip(SkipReason::Excluded),
        ),
        case(
            "A17 metadata exclude beside template auto",
            d().annotate(CM_EXCLUDE, "c").annotate_template(AUTO, "true").uses_cm("app", "c", EnvFrom),
            cm("c"),
            skip(SkipReason::Excluded),
        ),
        case(
            "A17 template search",
            d().annotate_template(SEARCH, "true").uses_cm("app", "c", EnvFrom),
            cm("c").matched(),
            reload(Rule::SearchMatch, 0),
        ),
        case(
            "A17 metadata selecting wins: template not read",
            d().annotate(AUTO, "false").annotate_template(AUTO, "true").uses_cm("app", "c", EnvFrom),
            cm("c"),
            skip(SkipReason::AutoDisabled),
        ),
        case(
            "A17 metadata selects for Secrets only: template used for ConfigMaps",
            d().annotate(SECRET_RELOAD, "s").annotate_template(CM_RELOAD, "c"),
            cm("c"),
            reload(Rule::Explicit, 0),
        ),
        case(
            "A17 metadata exclude alone does not select",
            d().annotate(CM_EXCLUDE, "other").annotate_template(CM_RELOAD, "c"),
            cm("c"),
            reload(Rule::Explicit, 0),
        ),
        // §A 18
        case(
            "A18 several resources: the second one",
            auto()
                .uses_cm("app", "c1", EnvFrom)
                .uses_cm("app", "c2", Volume)
                .uses_secret("app", "s", EnvFrom),
            cm("c2"),
            reload(Rule::Auto, 0),
        ),
        // §A 19
        case(
            "A19 marker on the container using the resource",
            auto().containers(&["app", "sidecar"]).uses_cm("sidecar", "c", EnvFrom),
            cm("c"),
            reload(Rule::Auto, 1),
        ),
        case(
            "A19 two users: the first one",
            auto().containers(&["a", "b", "c"]).uses_cm("c", "x", EnvFrom).uses_cm("b", "x", EnvValueFrom),
            cm("x"),
            reload(Rule::Auto, 1),
        ),
        case(
            "A19 a mounting container beats an earlier env user",
            auto().containers(&["a", "b"]).uses_cm("a", "x", EnvFrom).uses_cm("b", "x", Volume),
            cm("x"),
            reload(Rule::Auto, 1),
        ),
        case(
            "A19 explicit on a referenced resource uses its container",
            d().containers(&["a", "b"]).annotate(SECRET_RELOAD, "s").uses_secret("b", "s", Projected),
            secret("s"),
            reload(Rule::Explicit, 1),
        ),
        // Go booleans (compat §3).
        case(
            "auto \"1\"",
            d().annotate(AUTO, "1").uses_cm("app", "c", EnvFrom),
            cm("c"),
            reload(Rule::Auto, 0),
        ),
        case(
            "auto \"T\"",
            d().annotate(AUTO, "T").uses_cm("app", "c", EnvFrom),
            cm("c"),
            reload(Rule::Auto, 0),
        ),
        case(
            "auto \"TRUE\"",
            d().annotate(AUTO, "TRUE").uses_cm("app", "c", EnvFrom),
            cm("c"),
            reload(Rule::Auto, 0),
        ),
        case(
            "auto \"yes\" is not true",
            d().annotate(AUTO, "yes").uses_cm("app", "c", EnvFrom),
            cm("c"),
            skip(SkipReason::AutoDisabled),
        ),
        case(
            "auto \" true\" is not true",
            d().annotate(AUTO, " true").uses_cm("app", "c", EnvFrom),
            cm("c"),
            skip(SkipReason::AutoDisabled),
        ),
        case(
            "auto false, typed auto true",
            d().annotate(AUTO, "false").annotate(CM_AUTO, "true").uses_cm("app", "c", EnvFrom),
            cm("c"),
            reload(Rule::TypedAuto, 0),
        ),
        // --auto-reload-all.
        with_opts(
            case(
                "auto-reload-all, no annotation",
                d().uses_cm("app", "c", EnvFrom),
                cm("c"),
                reload(Rule::AutoReloadAll, 0),
            ),
            ALL,
        ),
        with_opts(
            case("auto-reload-all, not referenced", d(), cm("c"), skip(SkipReason::NotReferenced)),
            ALL,
        ),
        with_opts(
            case(
                "auto-reload-all, auto false",
                d().annotate(AUTO, "false").uses_cm("app", "c", EnvFrom),
                cm("c"),
                skip(SkipReason::AutoDisabled),
            ),
            ALL,
        ),
        with_opts(
            case(
                "auto-reload-all, typed auto false",
                d().annotate(CM_AUTO, "false").uses_cm("app", "c", EnvFrom),
                cm("c"),
                skip(SkipReason::AutoDisabled),
            ),
            ALL,
        ),
        with_opts(
            case(
                "auto-reload-all, the other type's auto is not consulted",
                d().annotate(SECRET_AUTO, "false").uses_cm("app", "c", EnvFrom),
                cm("c"),
                reload(Rule::AutoReloadAll, 0),
            ),
            ALL,
        ),
        with_opts(
            case(
                "auto-reload-all, empty auto counts as unset",
                d().annotate(AUTO, "").uses_cm("app", "c", EnvFrom),
                cm("c"),
                reload(Rule::AutoReloadAll, 0),
            ),
            ALL,
        ),
        with_opts(
            case(
                "auto-reload-all, excluded",
                d().annotate(CM_EXCLUDE, "c").uses_cm("app", "c", EnvFrom),
                cm("c"),
                skip(SkipReason::Excluded),
            ),
            ALL,
        ),
        // SecretProviderClass through CSI.
        case("CSI auto", auto().uses_spc("app", "vault"), spc("vault"), reload(Rule::Auto, 0)),
        case(
            "CSI typed auto",
            d().annotate("secretproviderclass.reloader.stakater.com/auto", "true").uses_spc("app", "vault"),
            spc("vault"),
            reload(Rule::TypedAuto, 0),
        ),
        case("CSI explicit", d().annotate(SPC_RELOAD, "vault"), spc("vault"), reload(Rule::Explicit, 0)),
        // Workloads that cannot carry a marker.
        case(
            "no regular containers",
            d().containers(&[]).annotate(CM_RELOAD, "c"),
            cm("c"),
            skip(SkipReason::NoContainers),
        ),
        case(
            "no template",
            d().annotate(CM_RELOAD, "c").without_template(),
            cm("c"),
            skip(SkipReason::NoTemplate),
        ),
        case(
            "suspended CronJob",
            d().kind(WorkloadKind::CronJob).suspended().annotate(CM_RELOAD, "c"),
            cm("c"),
            skip(SkipReason::Suspended),
        ),
        with_opts(
            case(
                "suspended CronJob with --allow-suspended-cronjobs (Stakater's behaviour)",
                d().kind(WorkloadKind::CronJob)
                    .suspended()
                    .annotate(CM_RELOAD, "c")
                    .uses_cm("app", "c", EnvFrom),
                cm("c"),
                reload(Rule::Explicit, 0),
            ),
            DecideOptions { allow_suspended_cronjobs: true, ..DecideOptions::default() },
        ),
        // The container choice of docs/compatibility.md §4.4 (Stakater's): a volume that no
        // container mounts gives auto and search rules no container, an explicit rule containers[0].
        case(
            "auto, the only volume is mounted by no container",
            auto().uses_cm("", "c", Volume),
            cm("c"),
            skip(SkipReason::NotReferenced),
        ),
        case(
            "search/match, the only volume is mounted by no container",
            d().annotate(SEARCH, "true").uses_cm("", "c", Volume),
            cm("c").matched(),
            skip(SkipReason::NotReferenced),
        ),
        case(
            "explicit, the only volume is mounted by no container",
            d().annotate(CM_RELOAD, "c").containers(&["app", "b"]).uses_cm("", "c", Volume),
            cm("c"),
            reload(Rule::Explicit, 0),
        ),
        case(
            "auto, an init-mounted volume wins over a regular env user",
            auto()
                .containers(&["app", "b"])
                .init_containers(&["init"])
                .uses_cm("init", "c", Volume)
                .uses_cm("b", "c", EnvFrom),
            cm("c"),
            reload(Rule::Auto, 0),
        ),
        case(
            "no template but not selected either",
            d().without_template(),
            cm("c"),
            skip(SkipReason::NotAnnotated),
        ),
        case(
            "another namespace",
            d().annotate(CM_RELOAD, "c").in_namespace("other"),
            cm("c"),
            skip(SkipReason::NotReferenced),
        ),
    ];
    // §A 3 and 4: every way of referencing, for ConfigMaps and Secrets.
    for kind in [ConfigMap, Secret] {
        for (via_name, via, user) in vias {
            let name = format!("A3/A4 auto, {kind} via {via_name} in {user}");
            let workload = auto().init_containers(&["init"]).uses(user, kind, "r", via);
            cases.push(case(name, workload, resource(kind, "r"), reload(Rule::Auto, 0)));
        }
    }
    cases
}

#[test]
fn decisions() {
    let mut failures = Vec::new();
    for case in decision_cases() {
        let got = decide(&case.workload.view(), &case.resource, &case.opts);
        if got != case.want {
            failures.push(format!("{}: got {got:?}, want {:?}", case.name, case.want));
        }
    }
    assert!(failures.is_empty(), "{} failing cases:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn skip_labels_are_distinct_snake_case() {
    let labels: Vec<_> = SkipReason::ALL.iter().map(|r| r.as_label()).collect();
    let mut unique = labels.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), labels.len());
    assert!(labels.iter().all(|l| l.chars().all(|c| c.is_ascii_lowercase() || c == '_')), "{labels:?}");
    assert_eq!(SkipReason::AlreadyCurrent.as_label(), "already_current");
    assert_eq!(SkipReason::ResourceIgnored.as_label(), "resource_ignored");
}
