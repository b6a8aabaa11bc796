//! Annotation problems worth a warning.

use super::*;
use crate::annotations::AnnotationKeys;

const PAUSE_PERIOD: &str = "deployment.reloader.stakater.com/pause-period";

#[test]
fn problems() {
    struct ProblemCase {
        name: &'static str,
        workload: TestWorkload,
        want: Vec<&'static str>,
    }
    let cases = [
        ProblemCase {
            name: "clean",
            workload: deployment("web").annotate(CM_RELOAD, "a, app-.*"),
            want: vec![],
        },
        ProblemCase {
            name: "A13 one warning for the invalid entry",
            workload: deployment("web").annotate(CM_RELOAD, "a, [, app-.*"),
            want: vec![
                "annotation configmap.reloader.stakater.com/reload on the workload: entry \"[\" is not a \
                 valid regular expression (unclosed character class); it is ignored, the other entries \
                 still apply",
            ],
        },
        ProblemCase {
            name: "invalid entries on the template and for Secrets",
            workload: deployment("web").annotate(SECRET_RELOAD, "(x").annotate_template(CM_RELOAD, "a{2"),
            want: vec![
                "annotation secret.reloader.stakater.com/reload on the workload: entry \"(x\" is not a valid \
                 regular expression (unclosed group); it is ignored, the other entries still apply",
                "annotation configmap.reloader.stakater.com/reload on the pod template: entry \"a{2\" is not \
                 a valid regular expression (unclosed counted repetition); it is ignored, the other entries \
                 still apply",
            ],
        },
        ProblemCase {
            name: "a list with more patterns than the limit",
            workload: deployment("web").annotate_template(CM_RELOAD, &too_many_patterns()),
            want: vec![
                "annotation configmap.reloader.stakater.com/reload on the pod template: 1025 pattern entries, \
                 more than the limit of 1024; its patterns are ignored, its plain names still apply",
            ],
        },
        ProblemCase {
            name: "referenced names sharing an env var",
            workload: deployment("web")
                .uses_cm("app", "my-cm", EnvFrom)
                .uses_cm("app", "my.cm", Volume)
                .uses_secret("app", "my-cm", EnvFrom),
            want: vec![
                "ConfigMaps \"my-cm\" and \"my.cm\" share the env-var marker STAKATER_MY_CM_CONFIGMAP: \
                 under the env-vars strategy a change to one overwrites the marker of the other",
            ],
        },
        ProblemCase {
            name: "a listed name beside a referenced one",
            workload: deployment("web")
                .annotate(SECRET_RELOAD, "db_pass")
                .uses_secret("app", "db-pass", EnvFrom)
                .uses_secret("app", "db-pass", Volume),
            want: vec![
                "Secrets \"db-pass\" and \"db_pass\" share the env-var marker STAKATER_DB_PASS_SECRET: \
                 under the env-vars strategy a change to one overwrites the marker of the other",
            ],
        },
        ProblemCase {
            name: "F50 a pause period that is not a duration",
            workload: deployment("web").annotate(PAUSE_PERIOD, "soon"),
            want: vec![
                "annotation deployment.reloader.stakater.com/pause-period on the workload: invalid duration \
                 \"soon\"; reloads happen without a pause",
            ],
        },
        ProblemCase {
            name: "a valid pause period",
            workload: deployment("web").annotate(PAUSE_PERIOD, "1m30s"),
            want: vec![],
        },
        ProblemCase {
            name: "a padded pause period is not a duration (Go's time.ParseDuration, as Stakater)",
            workload: deployment("web").annotate(PAUSE_PERIOD, " 1m30s "),
            want: vec![
                "annotation deployment.reloader.stakater.com/pause-period on the workload: invalid duration \
                 \" 1m30s \"; reloads happen without a pause",
            ],
        },
        ProblemCase {
            name: "zero pause period",
            workload: deployment("web").annotate(PAUSE_PERIOD, "0s"),
            want: vec![],
        },
        ProblemCase {
            name: "pause periods mean nothing outside Deployments",
            workload: deployment("db").kind(WorkloadKind::StatefulSet).annotate(PAUSE_PERIOD, "soon"),
            want: vec![],
        },
    ];
    for case in cases {
        let got: Vec<String> = annotation_problems(&case.workload.view(), &AnnotationKeys::default())
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(got, case.want, "{}", case.name);
    }
}

/// One pattern more than `MAX_LIST_PATTERNS`, then a plain name.
fn too_many_patterns() -> String {
    let patterns = (0..=crate::annotations::MAX_LIST_PATTERNS).map(|i| format!("app-{i}-.*"));
    patterns.chain(["plain".to_owned()]).collect::<Vec<_>>().join(",")
}

/// A list over the limit selects by none of its patterns, as if each were invalid
/// (docs/compatibility.md §3); its plain names still apply.
#[test]
fn lists_over_the_limit_select_by_plain_names_only() {
    let workload = deployment("web").annotate(CM_RELOAD, &too_many_patterns()).view();
    let opts = DecideOptions::default();
    let reloads = |name: &str| matches!(decide(&workload, &cm(name), &opts), Decision::Reload { .. });
    assert!(reloads("plain"));
    assert!(!reloads("app-1-x"));
    let within = deployment("web").annotate(CM_RELOAD, "app-1-.*, plain").view();
    assert!(matches!(decide(&within, &cm("app-1-x"), &opts), Decision::Reload { rule: Rule::Explicit, .. }));
}

#[test]
fn problems_name_configured_keys() {
    let keys = AnnotationKeys { configmap_reload: "example.com/reload".into(), ..AnnotationKeys::default() };
    let mut workload = deployment("web");
    workload.deployment.metadata.annotations = Some([("example.com/reload".into(), "(".into())].into());
    let view = crate::workload::Workload::view(&workload, &keys);
    let problems = annotation_problems(&view, &keys);
    let [AnnotationProblem::InvalidEntry { key, .. }] = &problems[..] else {
        panic!("want one invalid entry, got {problems:?}")
    };
    assert_eq!(&**key, "example.com/reload");
}
