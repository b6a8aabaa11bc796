//! One table: each workload of docs/behaviour.md §A and what explain says of each of its resources.

use super::*;

use RefVia::EnvValueFrom;

#[test]
fn each_resource_gets_its_rule_container_and_next_change() {
    struct Case {
        name: &'static str,
        workload: TestWorkload,
        resources: Vec<ResourceView>,
        want: Vec<Row>,
    }
    let cases = [
        Case {
            name: "auto: every used resource reloads, on the container using it",
            workload: deployment("web")
                .containers(&["app", "sidecar"])
                .annotate(AUTO, "true")
                .uses_cm("sidecar", "app-config", EnvFrom)
                .uses_secret("app", "db", Volume),
            resources: vec![cm("app-config"), secret("db"), cm("unrelated")],
            want: vec![
                row(
                    "ConfigMap/app-config",
                    true,
                    "auto",
                    Some("sidecar"),
                    "reload: set STAKATER_APP_CONFIG_CONFIGMAP on container sidecar",
                ),
                row(
                    "Secret/db",
                    true,
                    "auto",
                    Some("app"),
                    "reload: set STAKATER_DB_SECRET on container app",
                ),
            ],
        },
        Case {
            name: "explicit list with a regex: matching names, a listed missing name, no others",
            workload: deployment("web").annotate(CM_RELOAD, "app-config-.*, missing"),
            resources: vec![cm("app-config-1"), cm("app-config-2"), cm("other-config")],
            want: vec![
                row(
                    "ConfigMap/app-config-1",
                    true,
                    "explicit",
                    Some("app"),
                    "reload: set STAKATER_APP_CONFIG_1_CONFIGMAP on container app",
                ),
                row(
                    "ConfigMap/app-config-2",
                    true,
                    "explicit",
                    Some("app"),
                    "reload: set STAKATER_APP_CONFIG_2_CONFIGMAP on container app",
                ),
                row(
                    "ConfigMap/missing",
                    false,
                    "explicit",
                    Some("app"),
                    "nothing while it does not exist; creating it reloads only with \
                     --reload-on-create=true, changes after that: reload: set STAKATER_MISSING_CONFIGMAP \
                     on container app",
                ),
            ],
        },
        Case {
            name: "exclude: the excluded resource does not reload, the other does",
            workload: deployment("web")
                .annotate(AUTO, "true")
                .annotate(CM_EXCLUDE, "skipped")
                .uses_cm("app", "skipped", EnvFrom)
                .uses_cm("app", "kept", Volume),
            resources: vec![cm("skipped"), cm("kept")],
            want: vec![
                row(
                    "ConfigMap/kept",
                    true,
                    "auto",
                    Some("app"),
                    "reload: set STAKATER_KEPT_CONFIGMAP on container app",
                ),
                row(
                    "ConfigMap/skipped",
                    true,
                    "skip:excluded",
                    None,
                    "nothing: configmaps.exclude.reloader.stakater.com/reload on the workload excludes it",
                ),
            ],
        },
        Case {
            name: "search and match: only the matched resource reloads",
            workload: deployment("web")
                .annotate(SEARCH, "true")
                .uses_cm("app", "matched", EnvFrom)
                .uses_cm("app", "plain", EnvFrom),
            resources: vec![cm("matched").matched(), cm("plain"), cm("matched-elsewhere").matched()],
            want: vec![
                row(
                    "ConfigMap/matched",
                    true,
                    "search_match",
                    Some("app"),
                    "reload: set STAKATER_MATCHED_CONFIGMAP on container app",
                ),
                row(
                    "ConfigMap/matched-elsewhere",
                    true,
                    "skip:not_referenced",
                    None,
                    "nothing: the pod spec does not use it (auto and search rules only cover the ConfigMaps \
                     and Secrets the pod spec uses)",
                ),
                row(
                    "ConfigMap/plain",
                    true,
                    "skip:not_annotated",
                    None,
                    "nothing: reloader.stakater.com/search is \"true\" on the workload but the ConfigMap does \
                     not carry reloader.stakater.com/match: \"true\"",
                ),
            ],
        },
        Case {
            name: "ignore beats an explicit annotation",
            workload: deployment("web").annotate(CM_RELOAD, "quiet").uses_cm("app", "quiet", EnvFrom),
            resources: vec![cm("quiet").ignored()],
            want: vec![row(
                "ConfigMap/quiet",
                true,
                "skip:resource_ignored",
                None,
                "nothing: the ConfigMap is marked reloader.stakater.com/ignore: \"true\"",
            )],
        },
        Case {
            name: "an explicit name the pod spec does not use still reloads, on containers[0]",
            workload: deployment("web").containers(&["first", "second"]).annotate(SECRET_RELOAD, "token"),
            resources: vec![secret("token")],
            want: vec![row(
                "Secret/token",
                true,
                "explicit",
                Some("first"),
                "reload: set STAKATER_TOKEN_SECRET on container first",
            )],
        },
        Case {
            name: "an init-container reference puts the marker on containers[0]",
            workload: deployment("web").init_containers(&["setup"]).annotate(AUTO, "true").uses_cm(
                "setup",
                "bootstrap",
                EnvValueFrom,
            ),
            resources: vec![cm("bootstrap")],
            want: vec![row(
                "ConfigMap/bootstrap",
                true,
                "auto",
                Some("app"),
                "reload: set STAKATER_BOOTSTRAP_CONFIGMAP on container app",
            )],
        },
        Case {
            name: "no containers: nothing to record a reload on",
            workload: deployment("web").containers(&[]).annotate(CM_RELOAD, "cfg"),
            resources: vec![cm("cfg")],
            want: vec![row(
                "ConfigMap/cfg",
                true,
                "skip:no_containers",
                None,
                "nothing: the pod template has no containers to record a reload on",
            )],
        },
        Case {
            name: "no annotation at all",
            workload: deployment("web").uses_cm("app", "cfg", EnvFrom),
            resources: vec![cm("cfg")],
            want: vec![row(
                "ConfigMap/cfg",
                true,
                "skip:not_annotated",
                None,
                "nothing: no reloader annotation on the workload or its pod template applies to ConfigMaps",
            )],
        },
        Case {
            name: "typed auto for Secrets only",
            workload: deployment("web")
                .annotate(SECRET_AUTO, "true")
                .uses_cm("app", "cfg", EnvFrom)
                .uses_secret("app", "creds", EnvFrom),
            resources: vec![cm("cfg"), secret("creds")],
            want: vec![
                row(
                    "ConfigMap/cfg",
                    true,
                    "skip:not_annotated",
                    None,
                    "nothing: no reloader annotation on the workload or its pod template applies to ConfigMaps",
                ),
                row(
                    "Secret/creds",
                    true,
                    "typed_auto",
                    Some("app"),
                    "reload: set STAKATER_CREDS_SECRET on container app",
                ),
            ],
        },
        Case {
            name: "auto switched off",
            workload: deployment("web").annotate(AUTO, "false").uses_cm("app", "cfg", EnvFrom),
            resources: vec![cm("cfg")],
            want: vec![row(
                "ConfigMap/cfg",
                true,
                "skip:auto_disabled",
                None,
                "nothing: reloader.stakater.com/auto is \"false\" on the workload, and no other rule selects it",
            )],
        },
    ];
    for case in cases {
        assert_eq!(rows(&explained(&case.workload, &case.resources)), case.want, "{}", case.name);
    }
}
